"""StochasticMRD at single-cell scale on one device: seconds per epoch, peak memory, ELBO and FOSCTTM.

The workload: ``ba.datasets.single_cell_simulation`` (``simulated_cells`` of ``bench_mad_scale.py``: a branching
trajectory seen as log1p negative-binomial counts of ``--features`` genes and ``--features`` // 2 Gaussian protein
features), ``--rows`` training rows per view, paired, and ``--held-out`` more. StochasticMRD (its defaults:
the collapsed start on a subsample, Adam and natural gradients; ``--dtype`` float64 by default, minibatches of
``--batch-size``) runs exactly ``--epochs`` epochs (the stopping test off); then each view's held-out rows are
inferred from that view alone (``infer``) and FOSCTTM is computed between the two views' inferred means in
the model's shared dimensions (0 perfect, 0.5 random; ``ba.metrics.foscttm``, in row blocks). Printed: the
seconds of the collapsed start, seconds per epoch (the epochs' wall time over their number), peak device memory
(CUDA: ``max_memory_allocated``; CPU: the process's peak resident set), the final ELBO per row, and FOSCTTM.

Run on a GPU (about 5 minutes in all with the install, step 3 of ``benchmarks/device_check.sh``):
    python benchmarks/bench_svi_gpu.py --device cuda --rows 100000 --epochs 20
and on CPU at a reduced size:
    python benchmarks/bench_svi_gpu.py --device cpu --rows 2000 --held-out 100 --epochs 3 --threads 1
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
import warnings

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--held-out", type=int, default=1000)
    parser.add_argument("--features", type=int, default=50)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--latent-dim", type=int, default=5)
    parser.add_argument("--num-inducing", type=int, default=50)
    parser.add_argument("--dtype", default="float64")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    from bench_mad_scale import simulated_cells

    import bayesalign as ba
    from bayesalign.gp import StochasticMRD
    from bayesalign.gp.svi import start

    problem = simulated_cells(args.rows + args.held_out, args.features, args.features // 2, args.seed)
    views = {k: np.asarray(problem.views[k]) for k in problem.views.names}  # paired row by row
    train = {k: v[:args.rows] for k, v in views.items()}
    held = {k: v[args.rows:] for k, v in views.items()}
    device = torch.device(args.device)
    print(f"device {device} ({torch.cuda.get_device_name(device) if device.type == 'cuda' else 'cpu'}), torch "
          f"{torch.__version__}, threads {torch.get_num_threads()}; 2 views x {args.rows} rows x {args.features} "
          f"features, Q={args.latent_dim}, M={args.num_inducing}, batch {args.batch_size}, {args.dtype}")
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    # the collapsed start (no epoch), then exactly --epochs epochs from it (warm_start), each timed
    options = dict(latent_dim=args.latent_dim, num_inducing=args.num_inducing, batch_size=args.batch_size,
                   tol=0.0, progress=False, seed=args.seed, device=args.device, dtype=args.dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        model = StochasticMRD(max_epochs=0, **options).fit(train)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t_start = time.perf_counter() - t0
        print(f"collapsed start ({min(args.rows, start.COLLAPSED_ENTITIES)} rows): {t_start:.1f} s", flush=True)
        model.set_params(max_epochs=args.epochs, window=args.epochs, warm_start=True)
        t0 = time.perf_counter()
        model.fit(train)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t_epochs = time.perf_counter() - t0
    per_epoch = t_epochs / args.epochs
    elbo = model.elbo(batch_size=4096)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        inferred = {k: model.infer(k, held[k], num_samples=16)[0] for k in held}  # 16 draws of x* per row
    dims = model.shared_dims()
    if dims.size == 0:
        dims = np.arange(args.latent_dim)
    embedding = ba.LatentEmbedding(inferred, shared_dims=dims)
    fos = ba.metrics.foscttm(embedding, np.arange(args.held_out), views=tuple(inferred))  # the held-out rows
    if device.type == "cuda":
        peak = f"{torch.cuda.max_memory_allocated(device) / 2**30:.2f} GiB (GPU, max_memory_allocated)"
    else:
        peak = f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB (process peak RSS)"
    print(f"seconds per epoch: {per_epoch:.2f} ({args.epochs} epochs of {-(-args.rows // args.batch_size)} steps; "
          "bayesalign fits two views)")
    print(f"peak memory: {peak}")
    print(f"ELBO per row: {elbo / args.rows:.4f} (ELBO {elbo:.6g}); start {model.start_}, shared dims {dims.tolist()}")
    print(f"FOSCTTM ({args.held_out} held-out rows per view, each inferred from its own view): {fos:.4f}")


if __name__ == "__main__":
    main()
