"""MAD end to end: fit on anchors, inference of the unaligned rows, matching; at N* = 1,000 and 5,000.

The targets: N* = 1,000 unaligned rows per view end to end in under 2 minutes (the split
between MRD fit, inference and matching is printed); N* = 5,000 on the dense solver (MAD's default
there; ``--sparse`` forces the kNN candidate path, see ``bayesalign.matching.matcher.SPARSE_ABOVE``);
perturb-and-MAP with 100 samples at N* = 1,000 in under 30 seconds. Measured figures:
benchmarks/RESULTS.md.

Data: the MAD toy "linear_shared_private" (two 20-dimensional views, one shared 2-D and one
private 1-D latent signal per view) with N = N_init + N* rows, N_init = 50 anchors, the other rows
of view 2 shuffled. MAD: latent_dim 5, 25 inducing points, 300 bound evaluations (100 warm-up).

    python benchmarks/bench_mad.py [--n-star 1000 5000] [--threads 1] [--sparse]
"""

from __future__ import annotations

import argparse
import os
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-star", nargs="+", type=int, default=[1000, 5000])
    parser.add_argument("--n-init", type=int, default=50)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--samples", type=int, default=100, help="perturb-and-MAP samples at N* = 1000")
    parser.add_argument("--sparse", action="store_true",
                        help="force the sparse (kNN candidate) assignment path instead of MAD's default")
    args = parser.parse_args(argv)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    import time
    import warnings

    import torch

    from bayesalign.datasets import mad_toy
    from bayesalign.mad import MAD
    from bayesalign.metrics import evaluate

    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    print(f"MAD benchmark, {args.threads} thread(s), N_init = {args.n_init}")
    for n_star in args.n_star:
        problem = mad_toy("linear_shared_private", seed=0, n=args.n_init + n_star)
        problem = problem.split_anchors(args.n_init, seed=0).shuffle_unaligned(seed=0)
        start = time.perf_counter()
        mad = MAD(latent_dim=5, num_inducing=25, seed=0,
                  engine_options=dict(max_iter=300, warmup_iters=100)).fit(problem)
        fit_total = time.perf_counter() - start
        t = mad.timings_
        print(f"N* = {n_star}: MRD fit {t['fit_seconds']:.1f} s, inference {t['infer_seconds']:.1f} s "
              f"(2 x {n_star} rows), fit() total {fit_total:.1f} s", flush=True)
        sparse = True if args.sparse else None  # default: dense up to matching.matcher.SPARSE_ABOVE pairs
        for cost in ("mean", "likelihood"):
            t0 = time.perf_counter()
            al = mad.align(matcher="hungarian", cost=cost, sparse=sparse)
            match_s = time.perf_counter() - t0
            res = evaluate(al, problem)
            certified = f"  certified {al.info.get('certified')}" if sparse and cost == "mean" else ""
            print(f"  hungarian/{cost:10s} {'sparse' if sparse else 'dense '} matching + probabilities "
                  f"{match_s:6.1f} s   accuracy {res['accuracy']:.3f}  ECE {res['ece']:.3f}{certified}",
                  flush=True)
        if n_star <= 2000:
            t0 = time.perf_counter()
            al = mad.align(matcher="perturb", cost="likelihood", n_samples=args.samples)
            print(f"  perturb-and-MAP, {args.samples} samples: {time.perf_counter() - t0:.1f} s "
                  f"(accuracy {evaluate(al, problem)['accuracy']:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
