"""The collapsed MRD fit with numpy / scipy's BLAS single-threaded inside L-BFGS-B (the default) against the
same fit with OpenBLAS's threads left as they are, side by side in one run.

Between two evaluations of the bound (torch, on its OpenMP pool) scipy's L-BFGS-B works on the flat
parameters with numpy / scipy's OpenBLAS. Each pool's idle threads spin for a while after its calls, and on a
machine with few cores they take the cores from the other pool's threads. ``host_blas_single_threaded``
(bayesalign._utils) limits the host BLAS to one thread for the loop; "threads left" replaces it by a no-op.
The workload is MAD's all-rows model on mfeat fou-pix (2,000 rows per view, 10% anchors, anchor draw 0),
one start (PCA), ``--evals`` bound evaluations; the two settings alternate ``--repeats`` times, at torch's
default number of threads and at one (the environment's OMP_NUM_THREADS is respected: run without it to
see the default).

    python benchmarks/bench_threads.py [--evals 150] [--repeats 3]

Measured figures: benchmarks/RESULTS.md ("Host BLAS threads").
"""

from __future__ import annotations

import argparse
import contextlib
import time
import warnings

import numpy as np
import torch

import bayesalign as ba
from bayesalign.gp import _optim


def fit_seconds(problem, evals: int) -> float:
    model = ba.MAD(latent_dim=5, num_inducing=30, seed=0, starts=("pca",), mrd_options={"max_iter": evals})
    start = time.perf_counter()
    model.fit(problem)
    return time.perf_counter() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evals", type=int, default=150)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    problem = ba.datasets.mfeat(("fou", "pix")).split_anchors(0.1, seed=0)
    limited = _optim.host_blas_single_threaded
    default_threads = torch.get_num_threads()
    print(f"mfeat fou-pix, MAD all rows, one start, {args.evals} evaluations; torch threads {default_threads}")
    print("| torch threads | host BLAS single-threaded (default) | host BLAS threads left | ratio |")
    print("|---|---|---|---|")
    for threads in sorted({default_threads, 1}, reverse=True):
        torch.set_num_threads(threads)
        times = {"limited": [], "left": []}
        for _ in range(args.repeats):
            for setting in ("limited", "left"):
                _optim.host_blas_single_threaded = limited if setting == "limited" else contextlib.nullcontext
                try:
                    times[setting].append(fit_seconds(problem, args.evals))
                finally:
                    _optim.host_blas_single_threaded = limited
        a, b = np.median(times["limited"]), np.median(times["left"])
        print(f"| {threads} | {a:.1f} s | {b:.1f} s | {b / a:.2f}x |", flush=True)
    torch.set_num_threads(default_threads)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
