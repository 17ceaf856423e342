"""Seconds of ``MAD()`` at its defaults (fit + Hungarian alignment with probabilities) at 200, 1,000 and 2,000 rows.

The rows are the shipped mfeat fou-kar pair (2,000 rows per view) subsampled to each size, 10% anchors (seed 0).
Beside each fit, in the same run, the joint-Laplacian baseline on the same rows (``JointLaplacianAlignment(5)``)
as the reference whose ratio is quoted (the machines are shared: absolute seconds drift, ratios less). Also printed:
whether the fit converged by its own rule (``converged_``, and why it stopped), the bound evaluations of the model
kept (its history: the race's other starts not counted), the milliseconds of one evaluation of its bound and
gradient (times the evaluations: the floor of the fit's seconds), and the FOSCTTM of the unaligned rows under
MAD's cost.

    OMP_NUM_THREADS=2 python benchmarks/bench_mad_speed.py [--sizes 200 1000 2000] [--pair "mfeat fou-kar"]
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import bayesalign as ba

PAIRS = {"mfeat fou-kar": lambda: ba.datasets.mfeat(("fou", "kar")), "mocap": lambda: ba.datasets.mocap(),
         "digits halves": lambda: ba.datasets.digits_halves()}


def subsample(problem, n: int, seed: int = 0):
    """The first view pair's truth restricted to ``n`` random true pairs (rows in their original order)."""
    a, b = problem.views.names[:2]
    truth = problem.truth_between(a, b)
    keep = np.sort(np.random.default_rng(seed).permutation(len(truth))[:n])
    rows_a, rows_b = truth.index_a[keep], truth.index_b[keep]
    views = ba.Views({a: problem.views[a][rows_a], b: problem.views[b][rows_b]})
    return ba.AlignmentProblem.paired(views)


def evaluation_ms(mad, repeats: int = 5) -> float:
    """Milliseconds of one evaluation of the kept model's bound and gradient (the unit every stage of a fit pays)."""
    module = mad.model_.module_
    module.evaluate_with_gradient()  # warm
    start = time.perf_counter()
    for _ in range(repeats):
        module.evaluate_with_gradient()
    return 1000 * (time.perf_counter() - start) / repeats


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="*", type=int, default=[200, 1000, 2000])
    parser.add_argument("--pair", default="mfeat fou-kar", choices=list(PAIRS))
    args = parser.parse_args(argv)
    base = PAIRS[args.pair]()
    import bayesalign.gp  # noqa: F401  (torch and GPyTorch imported once, outside every timed fit)
    print(f"| rows per view | MAD() seconds | joint Laplacian seconds | ratio | converged_ | stopped by | evaluations "
          f"| ms per evaluation | FOSCTTM |  ({args.pair}, 10% anchors)")
    print("|---|---|---|---|---|---|---|---|---|")
    for n in args.sizes:
        problem = subsample(base, min(n, base.views.n_samples[base.views.names[0]])).split_anchors(0.1, seed=0)
        a, b = problem.views.names[:2]
        start = time.perf_counter()
        ba.spectral.JointLaplacianAlignment(n_components=5).fit(problem)
        reference = time.perf_counter() - start
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            start = time.perf_counter()
            mad = ba.MAD(seed=0).fit(problem)
            mad.align(a, b)
            seconds = time.perf_counter() - start
        rows_a, rows_b, C = mad.cost_matrix(a, b)
        full = np.zeros((problem.views.n_samples[a], problem.views.n_samples[b]))
        full[np.ix_(rows_a, rows_b)] = C
        score = ba.metrics.foscttm(full, problem, views=(a, b))
        stopped = getattr(mad.model_, "stopped_by_", "tolerance") if not mad.converged_ else "its rule"
        print(f"| {n} | {seconds:.1f} | {reference:.2f} | {seconds / max(reference, 1e-9):.0f} | {mad.converged_} | "
              f"{stopped} | {getattr(mad.model_, 'n_iter_', '?')} | {evaluation_ms(mad):.0f} | {score:.4f} |",
              flush=True)
        for w in caught:
            if issubclass(w.category, (RuntimeWarning, UserWarning)):
                print(f"  warning: {str(w.message)[:160]}")


if __name__ == "__main__":
    main()
