"""Speed and memory of the spectral alignments at scale.

1. ``JointLaplacianAlignment`` (n_components=10, 10 neighbours, 10% anchors) on two views of
   N = 1k, 5k, 20k, 50k points each: a swiss roll (t, h) seen as a rotated 3-D roll padded to 10
   features with N(0, 0.05^2) noise (view "a") and as a differently wound roll, rotated, with 8
   features (view "b"). Reported: seconds for the whole fit and for its eigen-solve alone, peak
   resident memory of the process (above the memory after the data are made), and FOSCTTM on
   2,000 held-out pairs as a sanity check of the result. The largest N is also run with
   ``eigen_solver="lobpcg"`` (incomplete-LU preconditioner, memory linear in N) instead of the
   default shift-invert ARPACK (sparse LU, whose fill-in grows faster than N).
2. ``LinearAlignment`` (n_components=3) with p = 2,500 features per view and n = 2,500 rows per
   view (the sizes of Wang & Mahadevan 2013, section 4.1): the two rolls above, each mapped by a
   random Gaussian (3, 2500) matrix, plus N(0, 0.1^2) noise, 10% anchors.

Each case runs in its own process (so the peak memory is its own), with ``--threads`` BLAS/OpenMP
threads (default 2). The machine may be shared: the table is wall-clock time.

    python benchmarks/bench_spectral.py [--quick] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys


def _rolls(n: int):
    """A swiss roll (n, 3) and the same (t, h) on a roll wound differently (n, 3)."""
    import numpy as np
    from sklearn.datasets import make_swiss_roll

    roll, t = make_swiss_roll(n, random_state=0)  # [n, 3]
    s = (t - t.min()) / np.ptp(t) * 1.5 * np.pi + np.pi / 2
    return roll, np.c_[3 * s * np.cos(s), roll[:, 1], 3 * s * np.sin(s)]


def _case_joint(n: int, eigen_solver: str = "auto") -> dict:
    import resource
    import time

    import numpy as np

    import bayesalign.spectral.joint_laplacian as jl
    from bayesalign.data import AlignmentProblem, Correspondence
    from bayesalign.metrics import foscttm

    rng = np.random.default_rng(0)
    roll, wound = _rolls(n)
    rot_a = np.linalg.qr(rng.normal(size=(10, 10)))[0]
    rot_b = np.linalg.qr(rng.normal(size=(8, 8)))[0]
    a = np.c_[roll, 0.05 * rng.normal(size=(n, 7))] @ rot_a  # [n, 10]
    b = np.c_[wound, 0.05 * rng.normal(size=(n, 5))] @ rot_b  # [n, 8]
    problem = AlignmentProblem.paired({"a": a, "b": b}).split_anchors(0.1, seed=0)
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    eigen_seconds = []
    solver = jl.smallest_generalized_eigenvectors

    def timed(*args, **kwargs):
        start = time.perf_counter()
        out = solver(*args, **kwargs)
        eigen_seconds.append(time.perf_counter() - start)
        return out

    jl.smallest_generalized_eigenvectors = timed
    start = time.perf_counter()
    emb = jl.JointLaplacianAlignment(n_components=10, n_neighbors=10, eigen_solver=eigen_solver).fit(problem).embedding_
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    held = problem.unaligned("a")
    sample = np.sort(rng.choice(held, size=min(2000, held.size), replace=False))
    score = foscttm(emb, Correspondence(("a", "b"), sample, sample))
    label = f"joint N={n}" + ("" if eigen_solver == "auto" else f" {eigen_solver}")
    return {"case": label, "seconds": seconds, "eigen_seconds": eigen_seconds[0],
            "peak_mb": peak / 1024, "extra_mb": (peak - base_rss) / 1024, "foscttm": score}


def _case_linear(n: int, p: int) -> dict:
    import resource
    import time

    import numpy as np

    from bayesalign.data import AlignmentProblem
    from bayesalign.metrics import foscttm
    from bayesalign.spectral import LinearAlignment

    roll, wound = _rolls(n)
    rng = np.random.default_rng(1)
    a = roll @ rng.normal(size=(3, p)) + 0.1 * rng.normal(size=(n, p))  # [n, p]
    b = wound @ rng.normal(size=(3, p)) + 0.1 * rng.normal(size=(n, p))
    problem = AlignmentProblem.paired({"a": a, "b": b}).split_anchors(0.1, seed=0)
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    emb = LinearAlignment(n_components=3, n_neighbors=10).fit(problem).embedding_
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"case": f"linear n={n} p={p}", "seconds": seconds, "eigen_seconds": float("nan"),
            "peak_mb": peak / 1024, "extra_mb": (peak - base_rss) / 1024, "foscttm": foscttm(emb, problem)}


def _run_child(spec: list, threads: int) -> dict:
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(threads)
    out = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)], env=env, check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="N = 1k, 5k and a small linear case only")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        spec = json.loads(args.child)
        result = _case_joint(*spec[1:]) if spec[0] == "joint" else _case_linear(*spec[1:])
        print(json.dumps(result))
        return
    sizes = [1000, 5000] if args.quick else [1000, 5000, 20000, 50000]
    cases = [["joint", n] for n in sizes]
    # LOBPCG with an incomplete LU: the memory-bounded alternative to the sparse LU of shift-invert
    cases += [["joint", sizes[-1], "lobpcg"]]
    cases += [["linear", 500, 500] if args.quick else ["linear", 2500, 2500]]
    print(f"threads={args.threads}; the machine may be shared (wall-clock times)")
    print(f"{'case':<24}{'fit s':>9}{'eigen s':>9}{'peak MB':>10}{'+MB':>9}{'FOSCTTM':>9}")
    for spec in cases:
        r = _run_child(spec, args.threads)
        print(f"{r['case']:<24}{r['seconds']:>9.2f}{r['eigen_seconds']:>9.2f}{r['peak_mb']:>10.0f}"
              f"{r['extra_mb']:>9.0f}{r['foscttm']:>9.4f}", flush=True)


if __name__ == "__main__":
    main()
