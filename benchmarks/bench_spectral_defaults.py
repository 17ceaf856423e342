"""FOSCTTM of the spectral alignments on the shipped real pairs: old settings against new defaults.

Every method is fitted at 10% anchors (``split_anchors(0.1, seed=s)``, seeds 0-2) and scored by FOSCTTM
(:func:`bayesalign.metrics.foscttm`, over the unaligned rows; 0 perfect, 0.5 random) with its
*old* settings (single-width heat kernel, LinearAlignment ``mu=1``, MultiscaleAlignment at the
feature level with ``mu=1``, Procrustes on Laplacian eigenmaps, least squares in one direction,
the second view regressed on the first)
and with the *new* defaults (``Method(n_components=d)`` and nothing else), side by side in one run;
each cell is the mean over the three anchor draws (``--seeds`` to change). The last columns show
other candidates that were measured for the default.

Data (``bayesalign.datasets``): mfeat pairs fou/pix, fou/kar and zer/mor (60 digits per class,
600 rows; ``--quick``: 40), digit halves (600 images of all classes), mocap (358 frames), protein
(models 1 and 21, 215 residues). ``n_components = min(5, the smallest number of features)``.
Warnings raised by a fit are counted in the columns ``w``; ``new s`` is the new default's fit time.
Before the table: the degree spread of every view's graph under both affinities, and the
joint Laplacian on spread-out rows (300 rows of a 5-d standard normal).

    OMP_NUM_THREADS=1 python benchmarks/bench_spectral_defaults.py [--quick] [--seeds 3]
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import bayesalign as ba
from bayesalign.graph import degree_spread
from bayesalign.metrics import foscttm
from bayesalign.spectral import (
    AffineAlignment,
    JointLaplacianAlignment,
    LeastSquaresAlignment,
    LinearAlignment,
    MultiscaleAlignment,
    ProcrustesAlignment,
)
from bayesalign.spectral._base import within_view_affinity


def datasets(quick: bool) -> dict:
    """name -> AlignmentProblem (two views, no anchors yet)."""
    n_per_class = 40 if quick else 60
    problems = {
        "mfeat fou/pix": ba.datasets.mfeat(("fou", "pix"), n_per_class=n_per_class, seed=0),
        "mfeat fou/kar": ba.datasets.mfeat(("fou", "kar"), n_per_class=n_per_class, seed=0),
        "mfeat zer/mor": ba.datasets.mfeat(("zer", "mor"), n_per_class=n_per_class, seed=0),
        "digit halves": ba.datasets.digits_halves(None, n=10 * n_per_class, seed=0),
        "mocap": ba.datasets.mocap(),
        "protein 1/21": ba.datasets.protein(models=(1, 21)),
    }
    return problems


def swapped(problem):
    """The same problem with the two views in the other order."""
    a, b = problem.views.names
    return ba.AlignmentProblem({b: problem.views[b], a: problem.views[a]},
                               anchors=problem.anchors_between(b, a), truth=problem.truth_between(b, a))


def methods(d: int) -> list:
    """(method, {setting label: factory problem -> fitted model}) rows."""
    return [
        ("joint Laplacian", {
            "old": lambda p: JointLaplacianAlignment(d, affinity="heat").fit(p),
            "new": lambda p: JointLaplacianAlignment(d).fit(p)}),
        ("linear (manifold proj.)", {
            "old": lambda p: LinearAlignment(d, mu=1.0, affinity="heat").fit(p),
            "new": lambda p: LinearAlignment(d).fit(p),
            "mu=100 heat": lambda p: LinearAlignment(d, mu=100.0, affinity="heat").fit(p),
            "mu=1 local": lambda p: LinearAlignment(d, mu=1.0).fit(p)}),
        ("multiscale", {
            "old": lambda p: MultiscaleAlignment(level="feature", mu=1.0, affinity="heat", min_components=d).fit(p),
            "new": lambda p: MultiscaleAlignment(min_components=d).fit(p),
            "instance": lambda p: MultiscaleAlignment(level="instance", min_components=d).fit(p),
            "mu=1 local": lambda p: MultiscaleAlignment(mu=1.0, min_components=d).fit(p)}),
        ("Procrustes", {
            "old": lambda p: ProcrustesAlignment(d, embedding="laplacian", affinity="heat").fit(p),
            "new": lambda p: ProcrustesAlignment(d).fit(p),
            "laplacian local": lambda p: ProcrustesAlignment(d, affinity="local").fit(p),
            "lpp local": lambda p: ProcrustesAlignment(d, embedding="lpp", affinity="local").fit(p),
            "pca": lambda p: ProcrustesAlignment(d, embedding="pca").fit(p)}),
        ("affine (diffusion)", {
            "old": lambda p: AffineAlignment(d, affinity="heat").fit(p),
            "new": lambda p: AffineAlignment(d).fit(p),
            "local": lambda p: AffineAlignment(d, affinity="local").fit(p)}),
        ("least squares", {
            "old": lambda p: LeastSquaresAlignment(direction="to_first").fit(p),
            "new": lambda p: LeastSquaresAlignment().fit(p),
            "old, swapped": lambda p: LeastSquaresAlignment(direction="to_first").fit(swapped(p)),
            "symmetric": lambda p: LeastSquaresAlignment(direction="symmetric").fit(p)}),
    ]


def score(factory, problem) -> tuple[float, int, float]:
    """(FOSCTTM, number of warnings, seconds); FOSCTTM is nan when the fit raises."""
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            model = factory(problem)
            value = foscttm(model.embedding_, problem, views=problem.views.names[:2])
        except (ValueError, np.linalg.LinAlgError) as exc:
            print(f"    ({type(exc).__name__}: {str(exc)[:100]})")
            value = float("nan")
    return value, len(caught), time.perf_counter() - start


def degree_ratios(problems) -> None:
    """Largest / smallest degree of every view's 10-NN graph, single-width heat kernel against local scaling."""
    print("Degree ratio (max / min) of the within-view 10-NN graphs")
    print(f"{'data':<15}{'view':<10}{'heat':>12}{'local':>10}")
    for data_name, problem in problems.items():
        for v in problem.views.names:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ratios = [degree_spread(within_view_affinity(problem.views[v], 10, affinity=a))[0]
                          for a in ("heat", "local")]
            print(f"{data_name:<15}{v:<10}{ratios[0]:>12.3g}{ratios[1]:>10.3g}")


def spread_rows() -> None:
    """The spread-rows case: 300 rows of a 5-d normal, rows 0-4 spread 12x, view b a random linear map, 10% anchors."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5))
    spread = X.copy()
    spread[:5] *= 12.0
    A = rng.normal(size=(5, 5))
    print("\nJointLaplacianAlignment(3) on spread-out rows: largest |coordinate|, FOSCTTM")
    for affinity in ("heat", "local"):
        cells = []
        for Z in (X, spread):
            problem = ba.AlignmentProblem.paired({"a": Z, "b": Z @ A}).split_anchors(0.1, seed=0)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                emb = JointLaplacianAlignment(3, affinity=affinity).fit(problem).embedding_
            top = max(float(np.abs(emb[v]).max()) for v in ("a", "b"))
            cells.append(f"{top:>10.3g} {foscttm(emb, problem):.3f} w={len(caught)}")
        print(f"  {affinity:<6} ordinary {cells[0]}   spread {cells[1]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="40 digits per class instead of 60")
    parser.add_argument("--seeds", type=int, default=3, help="anchor draws (seeds 0 .. n-1) per cell")
    args = parser.parse_args()
    start = time.perf_counter()
    problems = datasets(args.quick)
    degree_ratios(problems)
    spread_rows()
    print()
    print(f"FOSCTTM at 10% anchors (0 perfect, 0.5 random), mean over {args.seeds} anchor draws (+- sd for old "
          f"and new); w = warnings raised by the fits")
    print(f"{'data':<15}{'method':<25}{'old':>14}{'w':>3}{'new':>14}{'w':>3}{'new s':>7}   other")
    totals = {}
    for data_name, base in problems.items():
        d = min(5, *base.views.n_features.values())
        splits = [base.split_anchors(0.1, seed=seed) for seed in range(args.seeds)]
        for method, settings in methods(d):
            results = {}
            for label, factory in settings.items():
                runs = [score(factory, problem) for problem in splits]
                results[label] = (np.array([r[0] for r in runs]), sum(r[1] for r in runs),
                                  float(np.mean([r[2] for r in runs])))
            (old, w_old, _), (new, w_new, seconds) = results["old"], results["new"]
            others = "  ".join(f"{label} {np.mean(v):.3f}" for label, (v, _, _) in results.items()
                               if label not in ("old", "new"))
            flag = " worse" if np.mean(new) > np.mean(old) + 1e-12 else ""
            print(f"{data_name:<15}{method:<25}{np.mean(old):>8.3f}+-{np.std(old):.3f}{w_old:>3}"
                  f"{np.mean(new):>8.3f}+-{np.std(new):.3f}{w_new:>3}{seconds:>7.1f}   {others}{flag}", flush=True)
            totals.setdefault(method, []).append((np.mean(old), np.mean(new)))
    print(f"\n{'mean over data':<40}{'old':>8}{'new':>11}")
    for method, pairs in totals.items():
        old, new = np.nanmean([p[0] for p in pairs]), np.nanmean([p[1] for p in pairs])
        print(f"{'':<15}{method:<25}{old:>8.3f}{new:>11.3f}")
    print(f"\ntotal {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
