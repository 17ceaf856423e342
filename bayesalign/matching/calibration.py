"""Match probabilities of a deterministic embedding, calibrated on anchors held out of cross-fitted fits.

A spectral or linear baseline has no posterior variances: its probabilities are the Sinkhorn marginals of
exp(-C / T) with T a multiple of the median nearest cost (:func:`~bayesalign.matching.nearest_cost_temperature`),
and nothing in the embedding says which multiple. The anchors say it, but not the anchors the embedding was
fitted on: a map fitted on a few anchors puts them together whatever the views hold (CCA on 10 anchors of a view
of pure noise matches them exactly). So the anchors between views a and b are split into folds; each fold is
held out of a fit of the same estimator on the rest (its rows then join the rows to be matched, placed by their
own views as unaligned rows are), and the scale ``s`` of T = s T_0 (T_0 the fold's median nearest cost) minimises
the negative log of the held-out pairs' Sinkhorn marginals, pooled over the folds (temperature scaling, Guo et
al. 2017, on cross-fitted predictions; in a fold with more rows to match than ``MAX_CALIBRATION_PAIRS`` allows,
over its held-out rows and a seeded sample of the others, which approximates the full pool's marginals):

.. math:: s^\\ast = \\arg\\min_s \\; -\\sum_f \\sum_{(i,t)\\,\\in\\,\\text{fold } f} \\log P^{(f)}_{s T_0^{(f)}}[i, t]

over a grid of ``s`` in powers of two (``SCALES``). Each Sinkhorn solve covers a fold's whole pool, so solves
run only on a window of five scales around the minimum of the row-softmax objective (the held-out rows of a
against the pool of b, without the column constraint: held-out rows only, cheap), widened
until the minimum has two evaluated scales on either side or an end of the grid; each solve starts from the
potentials of the nearest scale solved. As ``s`` grows the marginals tend to chance (every pair
1 / n of the larger pool), so ``evidence`` = 2 (objective at chance - objective at s*) is the likelihood-ratio
statistic of "the held-out anchors are ranked at chance"; below ``MIN_EVIDENCE`` (its 95% point, the null on
the boundary: half chi2_0 plus half chi2_1, Self & Liang 1987) one view carries no signal about the other.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
from scipy.special import logsumexp

from ..data import Alignment, AlignmentProblem, Correspondence, LatentEmbedding
from .costs import mean_distance_cost
from .entropic import sinkhorn_marginals
from .matcher import candidate_rows, match, nearest_cost_temperature

__all__ = ["MIN_CALIBRATION_PAIRS", "MIN_EVIDENCE", "SCALES", "calibrated_match", "cross_fitted_temperature"]

#: Fewer anchor pairs between two views than this: the probabilities are reported as uncalibrated.
MIN_CALIBRATION_PAIRS = 6
#: Folds of the cross-fit (at most; never more than the anchor pairs).
N_FOLDS = 5
#: The scales s of T = s T_0 tried: T_0 / 4 (sharper than the default) to 2^16 T_0 (chance, for any cost spread
#: the median nearest cost can have).
SCALES = 2.0 ** np.arange(-2, 17)
#: Largest marginal error of the calibration's Sinkhorn solves (a grid of factors of 2 needs no finer).
CALIBRATION_TOL = 1e-2
#: 95% point of the likelihood-ratio statistic of "chance ranking" (half chi2_0 + half chi2_1).
MIN_EVIDENCE = 2.706
#: Largest pool n_a * n_b of a fold's Sinkhorn solves (dense, one per scale and fold); above it, the rows to
#: match of each view are the held-out ones and a seeded sample of the others, sqrt of this many in all (the
#: fitted scale moves little with the pool's size).
MAX_CALIBRATION_PAIRS = 90_000


def _fold_problem(problem: AlignmentProblem, a: str, b: str, held: Correspondence) -> AlignmentProblem:
    """``problem`` without the anchor pairs ``held`` (a, b), nor any other anchor pair that touches their rows
    (so that no chain of anchors through a third view still ties them)."""
    rows = {a: set(held.index_a.tolist()), b: set(held.index_b.tolist())}
    kept = []
    for (u, v), corr in problem.anchors.items():
        keep = np.ones(len(corr), dtype=bool)
        if u in rows:
            keep &= ~np.isin(corr.index_a, list(rows[u]))
        if v in rows:
            keep &= ~np.isin(corr.index_b, list(rows[v]))
        if keep.any():
            kept.append(corr.subset(keep))
    return problem.replace(anchors=kept)


def _pool(rows: np.ndarray, held: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The rows of one view a fold's Sinkhorn solves over: all of ``rows``, or where the pool would exceed
    ``MAX_CALIBRATION_PAIRS`` pairs, its held-out rows and a seeded sample of the others (sorted)."""
    size = int(np.sqrt(MAX_CALIBRATION_PAIRS))
    if rows.size <= size:
        return rows
    others = np.setdiff1d(rows, held)
    keep = rng.choice(others, size=max(size - np.intersect1d(rows, held).size, 0), replace=False)
    return np.sort(np.concatenate([keep, np.intersect1d(rows, held)]))


def _row_softmax_objective(folds: list) -> np.ndarray:
    """Per scale of ``SCALES``: -sum over the folds' held-out pairs (i, t) of log softmax_j(-C[i, j] / (s T_0))[t],
    the rows of b competing for each held-out row of a without Sinkhorn's column constraint."""
    value = np.zeros(SCALES.size)
    for f in folds:
        rows = f["C"][f["ia"]]  # [h, n_b]
        for k, s in enumerate(SCALES):
            logits = -rows / (s * f["T0"])
            value[k] -= float((logits[np.arange(f["ia"].size), f["ib"]] - logsumexp(logits, axis=1)).sum())
    return value


def cross_fitted_temperature(fit: Callable[[AlignmentProblem], LatentEmbedding], problem: AlignmentProblem,
                             a: str, b: str, *, n_folds: int = N_FOLDS, seed=0) -> dict:
    """The scale s* of the match temperature fitted on anchors held out of cross-fitted fits (module docstring).

    Parameters
    ----------
    fit : callable AlignmentProblem -> LatentEmbedding
        Fits the estimator afresh (its own warnings are silenced: the full fit reports them).
    problem : AlignmentProblem
    a, b : view names
    n_folds : int
        At most this many folds (never more than the anchor pairs).
    seed : int
        The split of the anchors into folds.

    Returns
    -------
    dict
        ``calibrated`` (bool) and, when False, ``reason``; else ``scale`` (s*), ``pairs`` (held-out pairs
        scored), ``folds``, ``objective`` (at s*), ``chance`` (at chance), ``evidence``, ``signal``
        (``evidence >= MIN_EVIDENCE``), ``at_bound`` ("lower", "upper" or None: s* at an end of ``SCALES``)
        and ``subsampled`` (whether some fold solved over a sample of its rows).
    """
    anchors = problem.anchors_between(a, b)
    if len(anchors) < MIN_CALIBRATION_PAIRS:
        return {"calibrated": False, "reason": f"{len(anchors)} anchor pair(s) between views {a!r} and {b!r}, "
                f"fewer than the {MIN_CALIBRATION_PAIRS} a cross-fitted calibration needs"}
    n_folds = int(min(n_folds, len(anchors)))
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(anchors))
    subsampled = False
    folds = []  # per fold: costs [n_a, n_b], T_0, the held-out pairs' rows and costs, the embedding's points
    chance = 0.0
    for fold in np.array_split(order, n_folds):
        keep = np.zeros(len(anchors), dtype=bool)
        keep[fold] = True
        held = anchors.subset(keep)
        fold_problem = _fold_problem(problem, a, b, held)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                embedding = fit(fold_problem)
        except ValueError as exc:  # e.g. too few anchors left for the method
            return {"calibrated": False, "reason": f"a fit without {len(fold)} of the anchors failed: {exc}"}
        rows_a, rows_b = candidate_rows(fold_problem, a, b)
        dims = embedding.shared_dims
        T0 = nearest_cost_temperature(embedding.means[a][rows_a][:, dims], embedding.means[b][rows_b][:, dims])
        full = rows_a.size * rows_b.size
        rows_a, rows_b = (_pool(rows, held_rows, rng) for rows, held_rows in ((rows_a, held.index_a),
                                                                              (rows_b, held.index_b)))
        subsampled |= rows_a.size * rows_b.size < full
        local_a = np.searchsorted(rows_a, held.index_a)  # held-out pairs whose two rows are both to be matched
        local_b = np.searchsorted(rows_b, held.index_b)
        ok = (local_a < rows_a.size) & (local_b < rows_b.size)
        ok[ok] &= (rows_a[local_a[ok]] == held.index_a[ok]) & (rows_b[local_b[ok]] == held.index_b[ok])
        if not ok.any():
            continue
        ma, mb = embedding.means[a][rows_a][:, dims], embedding.means[b][rows_b][:, dims]  # [n_a, q], [n_b, q]
        C = mean_distance_cost(ma, mb)  # [n_a, n_b]
        folds.append({"C": C, "T0": T0, "ia": local_a[ok], "ib": local_b[ok], "potentials": {}})
        chance += int(ok.sum()) * float(np.log(max(rows_a.size, rows_b.size)))
    if not folds:
        return {"calibrated": False, "reason": "no held-out anchor pair was left to match"}
    scored = int(sum(f["ia"].size for f in folds))

    def objective_at(k: int) -> float:
        value, T_scale = 0.0, float(SCALES[k])
        for f in folds:
            solved = f["potentials"]  # the solved scale nearest k starts this one
            warm = solved[min(solved, key=lambda j: abs(j - k))] if solved else None
            info, T = {}, T_scale * f["T0"]
            sinkhorn_marginals(f["C"], T, None, tol=CALIBRATION_TOL, info=info, warm_start=warm)
            f["potentials"][k] = info["potentials"]
            alpha, beta = info["log_potentials"]
            # log P of the true pairs from the potentials (exact where P underflows), at most log 1
            value -= float(np.minimum(alpha[f["ia"]] + beta[f["ib"]] - f["C"][f["ia"], f["ib"]] / T, 0.0).sum())
        return value

    # Sinkhorn's objective on a window of scales around the minimum of the row-softmax one (held-out rows only:
    # a near guess at no cost), widened until its minimum has two evaluated scales on either side (or an end of
    # the grid): the grid minimum, the objective being unimodal in log s but for round-off
    objective = np.full(SCALES.size, np.inf)
    start = int(np.argmin(_row_softmax_objective(folds)))
    lo, hi = max(start - 2, 0), min(start + 2, SCALES.size - 1)
    for k in range(hi, lo - 1, -1):  # from the softest (the cheapest solve from scratch), each warm-starting the next
        objective[k] = objective_at(k)
    while True:
        best = int(np.argmin(objective))
        if best - lo < 2 and lo > 0:
            lo -= 1
            objective[lo] = objective_at(lo)
        elif hi - best < 2 and hi < SCALES.size - 1:
            hi += 1
            objective[hi] = objective_at(hi)
        else:
            break
    best = int(np.argmin(objective))
    evidence = max(2.0 * (chance - float(objective[best])), 0.0)
    at_bound = "lower" if best == 0 else "upper" if best == SCALES.size - 1 else None
    return {"calibrated": True, "scale": float(SCALES[best]), "pairs": scored, "folds": n_folds,
            "objective": float(objective[best]), "chance": chance, "evidence": evidence,
            "signal": evidence >= MIN_EVIDENCE, "at_bound": at_bound, "subsampled": subsampled}


def calibrated_match(fit: Callable[[AlignmentProblem], LatentEmbedding], embedding: LatentEmbedding,
                     problem: AlignmentProblem, a: str, b: str, *, cost_limit=None, method: str = "",
                     n_folds: int = N_FOLDS, seed=0) -> Alignment:
    """:func:`~bayesalign.matching.match` of views a and b at the temperature fitted on held-out anchors.

    T = s* T_0, with s* from :func:`cross_fitted_temperature` and T_0 the median nearest cost of the rows
    matched. ``info["calibration"]`` of the Alignment is that function's record. Where it cannot calibrate
    (too few anchors, a pool too large, a fold's fit failing), the probabilities are the default ones and
    ``info["probability"]`` says "uncalibrated". Where the held-out anchors are ranked no better than chance,
    a RuntimeWarning says that one view carries no signal about the other (``info["calibration"]["signal"]``
    is False); the probabilities are then near chance.

    Parameters
    ----------
    fit : callable AlignmentProblem -> LatentEmbedding
        Fits the estimator that made ``embedding`` afresh.
    embedding : LatentEmbedding
        The fit on the whole ``problem``.
    problem : AlignmentProblem
    a, b : view names
    cost_limit : float, optional
        As :func:`~bayesalign.matching.match`'s.
    method : str
        Stored in the Alignment.
    n_folds, seed
        Of the cross-fit.
    """
    record = cross_fitted_temperature(fit, problem, a, b, n_folds=n_folds, seed=seed)
    temperature = None
    if record["calibrated"]:
        rows_a, rows_b = candidate_rows(problem, a, b)
        if rows_a.size and rows_b.size:
            dims = embedding.shared_dims
            T0 = nearest_cost_temperature(embedding.means[a][rows_a][:, dims], embedding.means[b][rows_b][:, dims])
            temperature = record["scale"] * T0
        if not record["signal"]:
            warnings.warn(f"{method or 'the method'}: the {record['pairs']} anchor pairs between views {a!r} and "
                          f"{b!r}, each held out of a fit on the others, are ranked no better than chance "
                          f"(evidence {record['evidence']:.2f} < {MIN_EVIDENCE}): one view carries no signal about "
                          "the other, and the match probabilities are near chance", RuntimeWarning, stacklevel=2)
    alignment = match(embedding, problem, a, b, cost_limit=cost_limit, temperature=temperature, method=method)
    alignment.info["calibration"] = record
    if temperature is not None:
        alignment.info["temperature_from"] = (f"{record['scale']:g} x the median nearest cost, fitted on anchors "
                                              "held out of cross-fitted fits")
    else:
        alignment.info["probability"] = f"{alignment.info.get('probability', '')} (uncalibrated: " \
            f"{record['reason'] if not record['calibrated'] else 'nothing to match'})"
    return alignment
