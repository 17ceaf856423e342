"""Calibration of MAD's match probabilities: the temperature fitted on the anchors beside its ceiling.

For each problem and anchor draw (10% anchors, ``split_anchors(0.1, seed)``; the toys their usual counts) it fits
MAD at its defaults, aligns with the Hungarian method on the likelihood cost, and prints for the matched pairs:
their accuracy (exact matches), the accuracy of the 20% most confident over all (``top20 ratio``, target at least
2; beside it at the oracle temperature, and the most any order of the pairs reaches, 1 / max(0.2, accuracy)), and
the expected calibration error (ECE, 10 bins; Guo et al. 2017; target at most 0.05) of their probabilities at

- ``default``: the temperature ``align()`` uses (``MAD.calibrate_temperature``);
- ``re-inferred``: T fitted on the anchor pairs re-inferred view by view under the fitted model (in-sample);
- ``held out``: T fitted on the anchor pairs held out of warm continuations of the fit (out-of-sample;
  ``bayesalign.mad.anchors.held_out_anchors``), with the seconds the continuations take (``held-out pool s``;
  nothing when the default already placed them);
- ``top-1 re-inferred`` / ``top-1 held out``: T minimising the Bernoulli log loss of the anchor rows of view a
  being matched right by the Hungarian assignment of the pool, their confidence the matched pair's marginal (a
  grid): a calibration target aimed at what the ECE scores;
- ``oracle``: the T of a log grid that gives the lowest ECE, chosen WITH the truth: the ceiling of any temperature;

and ``floor``: the ECE that exactly calibrated probabilities would score on as many pairs (outcomes drawn as
Bernoulli(p), Monte Carlo), the part of the ECE that is the binning's sampling noise. The summary pools each
problem's pairs over the seeds. ``--reliability DIR`` writes one reliability diagram per problem (the pooled pairs
at the default, the re-inferred and the oracle temperature) as DIR/<problem>.png.

Problems (``--problems``; default every shipped real pair and synthetic benchmark, at most 400 rows): the MMD-MA
simulations (300 rows), the single-cell simulator (300 cells, 500 genes, 1000 peaks), mocap (358 frames), digit
halves (178), protein 1-21 (215), the mfeat pairs (40 per class: 400 rows) and MAD's toys:

    OMP_NUM_THREADS=1 python benchmarks/bench_calibration.py --seeds 0
    OMP_NUM_THREADS=1 python benchmarks/bench_calibration.py --problems mocap "digits halves" --seeds 0 1 2 \\
        --reliability docs/_static/reliability
"""

from __future__ import annotations

import argparse
import re
import time
import warnings
from pathlib import Path

import numpy as np

import bayesalign as ba
from bayesalign.mad.calibration import fit_temperature
from bayesalign.metrics import expected_calibration_error, precision_at_coverage

#: MAD's toys and their anchor counts (all others: 10% anchors).
TOYS = {"linear_shared": 20, "linear_shared_private": 20, "nonlinear_shared_private": 48}
#: The oracle's grid: T over the default temperature times 10^[-2, 3].
ORACLE_GRID = np.logspace(-2, 3, 51)
#: Fraction of the most confident pairs whose accuracy the ``top20 ratio`` compares with all pairs'.
TOP = 0.2
#: The temperatures compared.
KEYS = ("default", "re-inferred", "held out", "top-1 re-inferred", "top-1 held out", "oracle")
#: The temperatures a reliability diagram draws, and its resolution (a PNG of a few tens of kB).
RELIABILITY = ("default", "re-inferred", "oracle")
RELIABILITY_DPI = 80


def problems() -> dict:
    out = {f"mmdma {kind}": (lambda kind=kind: ba.datasets.mmdma_simulation(kind, n_samples=300, seed=0))
           for kind in ba.datasets.MMDMA_KINDS}
    out["single-cell sim"] = lambda: ba.datasets.single_cell_simulation(300, n_genes=500, n_peaks=1000, seed=0)
    out["mocap"] = ba.datasets.mocap
    out["digits halves"] = ba.datasets.digits_halves
    out["protein 1-21"] = lambda: ba.datasets.protein(models=(1, 21))
    for pair in (("fou", "kar"), ("fou", "pix"), ("zer", "kar"), ("fac", "pix")):
        out[f"mfeat {pair[0]}-{pair[1]}"] = lambda pair=pair: ba.datasets.mfeat(pair, n_per_class=40, seed=0)
    out.update({f"toy {name}": (lambda name=name: name) for name in TOYS})
    return out


def problem_at(name: str, make, seed: int):
    made = make()
    if isinstance(made, str):  # a toy: its own generator per seed
        return ba.datasets.mad_toy(made, seed=seed).split_anchors(TOYS[made], seed=seed)
    return made.split_anchors(0.1, seed=seed)


def calibrated_floor(p, draws: int = 2000, seed: int = 0) -> float:
    """Mean ECE of outcomes drawn as Bernoulli(p): what perfectly calibrated probabilities p score on len(p) pairs."""
    rng = np.random.default_rng(seed)
    p = np.asarray(p, float)
    return float(np.mean([expected_calibration_error(p, rng.random(p.size) < p) for _ in range(draws)]))


def pair_probabilities(model, a, b, alignment, T):
    """The match probabilities at temperature T of the alignment's pairs (Sinkhorn marginals, as align() gives)."""
    rows_a, rows_b, P = model.match_probabilities(a, b, temperature=float(T))
    pos_a = np.searchsorted(rows_a, alignment.index_a)
    pos_b = np.searchsorted(rows_b, alignment.index_b)
    return np.asarray(P[pos_a, pos_b]).ravel()


def top_ratio(p, correct) -> float:
    """Accuracy of the ``TOP`` most confident pairs over the accuracy of all."""
    return precision_at_coverage(p, correct, TOP) / max(float(np.mean(correct)), 1e-12)


def ratio_ceiling(accuracy: float) -> float:
    """The largest ``top_ratio`` any ordering of the pairs reaches: every right pair first, 1 / max(TOP, accuracy)."""
    return 1.0 / max(TOP, accuracy, 1e-12)


def correct_pairs(alignment, problem):
    truth = problem.truth_between(*alignment.views)
    true = set(zip(truth.index_a.tolist(), truth.index_b.tolist()))
    return np.array([(int(i), int(j)) in true for i, j in zip(alignment.index_a, alignment.index_b)])


def oracle(model, a, b, alignment, correct, centre):
    """(T, ECE): the grid temperature whose probabilities have the lowest ECE against the truth."""
    best = (np.nan, np.inf)
    for T in centre * ORACLE_GRID:
        ece = expected_calibration_error(pair_probabilities(model, a, b, alignment, T), correct)
        if ece < best[1]:
            best = (float(T), ece)
    return best


def top1_temperature(pool, cost, centre):
    """T minimising the Bernoulli log loss of the pool's anchor rows of a being matched right by the Hungarian
    assignment of the pool, their confidence the Sinkhorn marginal of the matched pair (a grid search)."""
    from bayesalign.matching import linear_assignment
    from bayesalign.matching.matcher import _cost_matrix, sinkhorn_probabilities

    C = _cost_matrix(cost, pool.mean_a, pool.var_a, pool.mean_b, pool.var_b)
    hard = linear_assignment(C)
    partner = np.full(C.shape[0], -1)
    partner[hard.index_a] = hard.index_b
    matched = partner[pool.true_a]
    keep = matched >= 0
    rows, cols, y = pool.true_a[keep], matched[keep], (matched == pool.true_b)[keep]
    best = (np.nan, np.inf)
    for T in centre * np.logspace(-1.5, 2.5, 33):
        p = np.clip(sinkhorn_probabilities(C, T, None, pool.mean_a, pool.mean_b)[rows, cols], 1e-12, 1 - 1e-12)
        loss = -float(np.sum(np.where(y, np.log(p), np.log1p(-p))))
        if loss < best[1]:
            best = (float(T), loss)
    return best[0]


def run(name, problem, seed):
    a, b = problem.views.names[:2]
    start = time.perf_counter()
    model = ba.MAD(seed=seed).fit(problem)
    fit_seconds = time.perf_counter() - start
    start = time.perf_counter()
    T_default = model.calibrate_temperature(a, b)
    default_seconds = time.perf_counter() - start
    alignment = model.align(a, b)
    correct = correct_pairs(alignment, problem)
    posteriors = model.posteriors(a, b, model.cost)
    temperatures = {"default": T_default}
    start = time.perf_counter()
    pool = model.anchor_pool(a, b, held_out=True)
    held_out_seconds = time.perf_counter() - start
    temperatures["held out"] = fit_temperature(posteriors, pool, model.cost, method="held out")[0]
    temperatures["re-inferred"] = fit_temperature(posteriors, model.anchor_pool(a, b, held_out=False),
                                                  model.cost)[0]
    temperatures["top-1 held out"] = top1_temperature(pool, model.cost, T_default)
    temperatures["top-1 re-inferred"] = top1_temperature(model.anchor_pool(a, b, held_out=False), model.cost,
                                                         T_default)
    temperatures["oracle"], _ = oracle(model, a, b, alignment, correct, T_default)
    probabilities = {key: pair_probabilities(model, a, b, alignment, T) for key, T in temperatures.items()}
    ece = {key: expected_calibration_error(p, correct) for key, p in probabilities.items()}
    accuracy = float(correct.mean())
    ratio = top_ratio(probabilities["default"], correct)
    ratio_oracle = top_ratio(probabilities["oracle"], correct)
    floor = calibrated_floor(probabilities["default"], seed=seed)
    cells = " | ".join(f"{temperatures[k]:.3g} / {ece[k]:.3f}" for k in KEYS)
    print(f"| {name} | {seed} | {correct.size} | {accuracy:.3f} | {ratio:.2f} ({ratio_oracle:.2f}; "
          f"{ratio_ceiling(accuracy):.2f}) | {cells} | {floor:.3f} | "
          f"{fit_seconds:.0f} | {default_seconds:.1f} | {held_out_seconds:.1f} |", flush=True)
    return {"correct": correct, **{f"p {k}": p for k, p in probabilities.items()}}


def pooled_line(name, runs):
    correct = np.concatenate([r["correct"] for r in runs])
    keys = KEYS
    ece = {k: expected_calibration_error(np.concatenate([r[f"p {k}"] for r in runs]), correct) for k in keys}
    p = np.concatenate([r["p default"] for r in runs])
    ratio = top_ratio(p, correct), top_ratio(np.concatenate([r["p oracle"] for r in runs]), correct)
    print(f"| {name} | {correct.size} | {correct.mean():.3f} | {ratio[0]:.2f} ({ratio[1]:.2f}; "
          f"{ratio_ceiling(correct.mean()):.2f}) | "
          + " | ".join(f"{ece[k]:.3f}" for k in keys) + f" | {calibrated_floor(p):.3f} |")


def reliability(name, runs, folder: Path):
    """One reliability diagram of the problem's pooled pairs at the default, re-inferred and oracle temperatures."""
    from bayesalign.plot import plot_reliability, save_figure

    correct = np.concatenate([r["correct"] for r in runs])
    curves = {}
    for key in RELIABILITY:
        p = np.concatenate([r[f"p {key}"] for r in runs])
        curves[f"T {key} (ECE {expected_calibration_error(p, correct):.3f})"] = (p, correct)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") + ".png")
    fig = plot_reliability(curves, None)
    fig.axes[0].set_title(f"{name}: {correct.size} Hungarian pairs", fontsize=10)
    return save_figure(fig, path, dpi=RELIABILITY_DPI)


def main(argv=None):
    known = problems()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", nargs="*", default=[k for k in known if not k.startswith("toy ")],
                        choices=list(known), metavar="PROBLEM", help=f"of {list(known)}")
    parser.add_argument("--seeds", nargs="*", type=int, default=[0])
    parser.add_argument("--reliability", type=Path, default=None, metavar="DIR",
                        help="write one reliability diagram per problem as DIR/<problem>.png")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    print("| problem | seed | pairs | accuracy | top20 ratio (oracle T; any order) | "
          + " | ".join(f"T / ECE {k}" for k in KEYS) + " | floor | fit s | default T s | held-out pool s |")
    print("|---|---|---|---|---|" + "---|" * (len(KEYS) + 4))
    pools = {}
    for name in args.problems:
        for seed in args.seeds:
            pools.setdefault(name, []).append(run(name, problem_at(name, known[name], seed), seed))
        if args.reliability is not None:  # as soon as the problem's seeds are done
            print(f"wrote {reliability(name, pools[name], args.reliability)}", flush=True)
    print("\npooled over the seeds: ECE at each temperature")
    print("| problem | pairs | accuracy | top20 ratio (oracle T; any order) | " + " | ".join(KEYS) + " | floor |")
    print("|---|---|---|---|" + "---|" * (len(KEYS) + 1))
    for name, runs in pools.items():
        pooled_line(name, runs)


if __name__ == "__main__":
    main()
