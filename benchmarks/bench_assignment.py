"""Dense vs certified-sparse optimal assignment, and perturb-and-MAP, on latent-space-like costs.

Points of view a are N draws in R^5; view b is a shuffled copy with Gaussian noise (sd 0.3),
the shape of MAD's shared-space distances. For each N it prints seconds and peak traced
memory (tracemalloc: numpy buffers included) of

* dense:  ``pairwise_costs`` + ``linear_assignment`` (the N x N matrix: 8 N^2 bytes);
* sparse: ``assign(..., method="sparse", k=10)`` (kNN candidates, LAPJVsp, duality certificate);

and checks that both reach the same optimum. Dense is skipped when the machine lacks the
memory for it (about 2.5 x the matrix). ``match`` times :func:`bayesalign.matching.match` on a
deterministic embedding of 1,000 and 5,000 rows per view: the matching with its match probabilities
(Sinkhorn marginals at the median nearest cost; the command line's and the comparison suite's path;
the goal: 5,000 rows in under 30 s). Run single-threaded:

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/bench_assignment.py [--quick]
    OMP_NUM_THREADS=1 python benchmarks/bench_assignment.py --methods match [--match-sizes 1000 5000]

Measured figures: benchmarks/RESULTS.md.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402

import numpy as np  # noqa: E402

from bayesalign import matching  # noqa: E402
from bayesalign._utils import available_host_memory  # noqa: E402


def latent_like(n, d=5, noise=0.3, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(n, d))  # [N, 5]
    b = a[rng.permutation(n)] + noise * rng.normal(size=(n, d))  # [N, 5]
    return a, b


def dense_solve(a, b):
    return matching.assign(a, b, method="dense")  # builds the N x N matrix once, solves in place


def available_bytes() -> int:
    return available_host_memory() or 0


def measure(fn, *args, **kwargs):
    """(result, wall seconds, CPU seconds of this process, peak traced bytes)."""
    tracemalloc.start()
    start, cpu = time.perf_counter(), time.process_time()
    result = fn(*args, **kwargs)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return result, seconds, cpu, peak


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes only (N = 500, 2000)")
    parser.add_argument("--sizes", type=int, nargs="*", help="override the sizes")
    parser.add_argument("--k", type=int, default=10, help="nearest neighbours per point (sparse)")
    parser.add_argument("--methods", nargs="*", default=["dense", "sparse", "pam", "match"],
                        choices=["dense", "sparse", "pam", "match"],
                        help="what to run (pam: perturb-and-MAP; match: matching.match with probabilities)")
    parser.add_argument("--match-sizes", type=int, nargs="*", default=[1000, 5000],
                        help="rows per view of the match benchmark")
    args = parser.parse_args(argv)
    sizes = args.sizes or ([500, 2000] if args.quick else [1000, 5000, 20000])

    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    print(f"{'N':>6} {'method':>7} {'wall s':>8} {'CPU s':>8} {'peak MB':>9} {'objective':>14}  notes", flush=True)
    skip = f"{'-':>8} {'-':>8} {'-':>9} {'-':>14}"
    for n in sizes:
        a, b = latent_like(n, seed=n)
        dense_objective = None
        need = 2.5 * 8 * n * n
        if "dense" not in args.methods:
            pass
        elif available_bytes() < need:
            print(f"{n:>6} {'dense':>7} {skip}  skipped: needs ~{need / 1e9:.1f} GB, "
                  f"{available_bytes() / 1e9:.1f} GB available", flush=True)
        else:
            al, sec, cpu, peak = measure(dense_solve, a, b)
            dense_objective = al.info["objective"]
            print(f"{n:>6} {'dense':>7} {sec:>8.2f} {cpu:>8.2f} {peak / 1e6:>9.1f} {dense_objective:>14.6f}",
                  flush=True)
        if "sparse" in args.methods:
            al, sec, cpu, peak = measure(matching.assign, a, b, method="sparse", k=args.k)
            info = al.info
            same = "" if dense_objective is None else (
                f", equals dense: {abs(info['objective'] - dense_objective) <= 1e-9 * abs(dense_objective)}")
            print(f"{n:>6} {'sparse':>7} {sec:>8.2f} {cpu:>8.2f} {peak / 1e6:>9.1f} {info['objective']:>14.6f}  "
                  f"certified={info['certified']} rounds={info['rounds']} fallback={info['fallback']} "
                  f"candidates={info['n_candidates']}{same}", flush=True)

    if "pam" in args.methods:
        n_pm = 300 if args.quick else 1000
        a, b = latent_like(n_pm, seed=1)
        cost = matching.pairwise_costs(a, b)
        res, sec, cpu, peak = measure(matching.perturb_and_map, cost, n_samples=100, temperature=0.1, seed=0)
        print(f"perturb_and_map N={n_pm}, 100 samples: {sec:.2f} s wall, {cpu:.2f} s CPU, peak "
              f"{peak / 1e6:.1f} MB, {res.frequencies.nnz} pairs ever matched", flush=True)

    if "match" in args.methods:
        from bayesalign.data import AlignmentProblem, LatentEmbedding

        for n in ([500, 1000] if args.quick else args.match_sizes):
            a, b = latent_like(n, noise=0.1, seed=n)
            truth = matching.assign(a, b, method="sparse").to_permutation()  # the optimum, to count agreement
            problem = AlignmentProblem({"a": a, "b": b})
            al, sec, cpu, peak = measure(matching.match, LatentEmbedding({"a": a, "b": b}), problem)
            same = float(np.mean(al.to_permutation() == truth))
            print(f"match N={n} (Hungarian + Sinkhorn probabilities): {sec:.2f} s wall, {cpu:.2f} s CPU, peak "
                  f"{peak / 1e6:.1f} MB; T={al.info['temperature']:.3g} ({al.info['temperature_from']}), "
                  f"{al.info['probability']}, marginal error {al.info['sinkhorn_error']:.1e}, "
                  f"mean probability {al.probabilities.mean():.3f}, same pairs as assign: {same:.3f}", flush=True)


if __name__ == "__main__":
    main()
