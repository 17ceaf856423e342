r"""The temperature of MAD's match probabilities, fitted on the anchor pairs (temperature scaling, Guo et al. 2017).

The posterior variances say how well a view pins down its own rows' latent points, not how far apart the two
views put the same point, so exp(-C) can be far too confident where their latent spaces disagree, or too timid
where they agree. The anchor pairs, placed as unaligned rows are (:mod:`bayesalign.mad.anchors`: held out of the
fit where it can hold them out, so that they are out-of-sample as the rows to match are), measure that:
T minimises the negative log of the Sinkhorn match marginals P_T of exp(-C / T) of the true anchor pairs, over the
unaligned rows and those pairs pooled,

.. math:: T^\ast = \arg\min_T \; -\sum_{(i,t)\,\in\,\text{anchors}} \log P_T[i, t],

searched over log T between a tenth of the posterior temperature and 10^4 times it (outwards from the posterior
temperature, then bounded Brent). log P_T[i, t] is read from Sinkhorn's potentials, exact also where the marginal
underflows. As T grows P_T tends to chance matching, so ``evidence`` = 2 (objective at chance - objective at T*)
is the likelihood-ratio statistic of "1 / T = 0"; below ``MIN_CALIBRATION_EVIDENCE`` (its 95% point, the null on
the boundary, Self & Liang 1987) the anchors show no ranking, and a warning says so.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.optimize import minimize_scalar

from ..matching import linear_assignment, pair_costs, posterior_marginals, posterior_temperature, sinkhorn_probabilities
from ..matching.matcher import DENSE_SINKHORN_MAX, SPARSE_ABOVE, _cost_matrix

__all__ = ["MIN_CALIBRATION_EVIDENCE", "MIN_CALIBRATION_PAIRS", "TEMPERATURES", "check_temperature",
           "fit_temperature"]

#: Fewest anchor pairs ``calibrate_temperature`` fits a temperature on both ways (with fewer, T only at or
#: above the posterior temperature), ``MAD.cross_view_misfit`` estimates a misfit on and a correspondence round is
#: judged on.
MIN_CALIBRATION_PAIRS = 10
#: Least evidence (twice the log-likelihood ratio of the calibration pairs at the fitted T against chance matching)
#: below which ``calibrate_temperature`` warns that the anchors show no ranking information: the 95% point of the
#: null distribution, an equal mixture of chi-square with 0 and 1 degrees of freedom, since the null, 1 / T = 0,
#: lies on the boundary of the parameter (Self & Liang 1987); i.e. chi-square(1)'s 90% point.
MIN_CALIBRATION_EVIDENCE = 2.706
#: The named temperatures of the match probabilities: fitted on the anchors, or the model's posterior one.
TEMPERATURES = ("anchors", "posterior")
#: Marginal error of the Sinkhorn solves inside the temperature search: an anchor's log probability is then off by
#: about 1e-2, which moves the objective's minimum by far less than the search's 5% in T (the probabilities
#: ``align`` reports are solved to 1e-3).
CALIBRATION_SINKHORN_TOL = 1e-2
#: First step in log T (a factor of e^0.5) of the temperature search outwards from the posterior temperature.
TEMPERATURE_STEP = 0.5
#: Growth of the search's steps downhill (the golden ratio, as in Numerical Recipes' ``mnbrak``).
GOLDEN = (1.0 + 5.0 ** 0.5) / 2.0


def _search_from(objective, centre: float, lo: float, hi: float, step: float = TEMPERATURE_STEP,
                 xatol: float = 0.05) -> tuple[tuple[float, float], float]:
    """((x*, objective(x*)), objective(centre)): the minimum of a unimodal ``objective`` on [lo, hi] (lo <= centre <=
    hi), searched from ``centre`` outwards.

    Steps from ``centre``, each ``GOLDEN`` times the last from ``step``, go downhill until the objective rises or
    a bound is reached; a bounded Brent search (``xatol``) then refines inside that bracket, and the lowest point
    evaluated is returned (a bound included, which a bounded Brent search never evaluates; a non-finite value counts
    as +inf). For the temperature search: its minimum lies within a few steps of the posterior temperature (the
    centre, whose objective the record keeps anyway), and the solves far above it, which a search over the whole
    range starts with, are the slowest (near chance matching every pair carries mass).
    """
    values = {}

    def f(x: float) -> float:
        x = float(min(max(x, lo), hi))
        for seen in values:  # Brent's golden point may land on a bracketing step up to round-off
            if abs(seen - x) <= 1e-9 * max(1.0, abs(x)):
                return values[seen]
        value = float(objective(x))
        values[x] = value if np.isfinite(value) else np.inf  # a failed point is never the minimum, nor downhill
        return values[x]

    at_centre = f(centre)
    bracket = (max(centre - step, lo), min(centre + step, hi))  # the minimum within a step of the centre
    for direction in (1.0, -1.0):
        inner = min(max(centre + direction * step, lo), hi)
        if inner == centre or f(inner) >= at_centre:
            continue
        previous, width = centre, step
        while True:  # downhill: widen the step until the objective rises or the bound is reached
            width *= GOLDEN
            outer = min(max(inner + direction * width, lo), hi)
            if outer == inner or f(outer) >= f(inner):
                break
            previous, inner = inner, outer
        bracket = tuple(sorted((previous, outer)))
        break
    if bracket[1] - bracket[0] > xatol:
        minimize_scalar(f, bounds=bracket, method="bounded", options={"xatol": xatol})
    x = min(values, key=values.get)
    return (x, values[x]), at_centre



def check_temperature(temperature) -> None:
    """A temperature the estimators accept: a positive number, "anchors", "posterior" or None (the posterior one)."""
    if isinstance(temperature, str):
        if temperature not in TEMPERATURES:
            raise ValueError(f"temperature must be a positive number or one of {TEMPERATURES}, got {temperature!r}")
    elif temperature is not None and (isinstance(temperature, bool) or not float(temperature) > 0):
        raise ValueError(f"temperature must be positive, got {temperature!r}")


def fit_temperature(posteriors, pool, cost: str, progress: bool = False, method: str = "anchor re-inference"):
    """(T, record, potentials): the temperature fitted on the anchor pairs of ``pool`` (see the module docstring).

    Parameters
    ----------
    posteriors : MatchPosteriors
        The rows to match (their variances give the posterior temperature the search starts from).
    pool : AnchorPool or None
        The rows to match with the anchor pairs appended (None: there are no anchor pairs).
    cost : {"likelihood", "mean"}
    method : str
        How the pool's anchors were placed, for the record.

    Returns
    -------
    T : float
    record : dict
        ``pairs``, ``method``, ``posterior_temperature``, ``fallback`` (no pair: the posterior temperature),
        ``one_sided`` (fewer than ``MIN_CALIBRATION_PAIRS`` pairs: only T at or above the posterior temperature),
        ``objective`` at T*, at the posterior temperature and at chance, ``evidence``, ``at_bound``.
    potentials : tuple or None
        Sinkhorn's potentials at T* over the rows to match only (a warm start for :meth:`align`).
    """
    a, b = posteriors.views
    default = posterior_temperature(cost, posteriors.var_a, posteriors.var_b)
    n_pairs = 0 if pool is None else len(pool.true_a)
    record = {"pairs": n_pairs, "method": method, "posterior_temperature": default}
    if n_pairs == 0:
        warnings.warn(f"views {a!r} and {b!r} have no anchor pair to fit the temperature on; the probabilities "
                      f"use the posterior temperature {default:.3g}", RuntimeWarning, stacklevel=4)
        return default, {**record, "temperature": default, "fallback": True, "one_sided": False}, None
    one_sided = n_pairs < MIN_CALIBRATION_PAIRS
    if one_sided:
        warnings.warn(f"views {a!r} and {b!r} have {n_pairs} anchor pairs, fewer than MIN_CALIBRATION_PAIRS = "
                      f"{MIN_CALIBRATION_PAIRS}: the temperature fitted on them may only flatten the probabilities "
                      f"(T >= the posterior temperature {default:.3g})", RuntimeWarning, stacklevel=4)
    pool_a, pool_b, true_a, true_b = (pool.mean_a, pool.var_a), (pool.mean_b, pool.var_b), pool.true_a, pool.true_b
    true_cost = pair_costs(cost, *pool_a, *pool_b, true_a, true_b)  # [n]
    dense = pool_a[0].shape[0] * pool_b[0].shape[0] <= SPARSE_ABOVE
    if dense:  # one cost matrix and one optimal assignment for every temperature the search tries
        C = _cost_matrix(cost, *pool_a, *pool_b)
        hard = linear_assignment(C) if C.size > DENSE_SINKHORN_MAX else None
    solved = {}  # temperature -> (Sinkhorn's potentials, candidate pairs) there, to start the nearest solves

    def nearest(T):  # what the solve at the solved temperature nearest T (in log T) ended on, or (None, None)
        return solved[min(solved, key=lambda t: abs(np.log(t / T)))] if solved else (None, None)

    def objective(log_t: float) -> float:
        # log P of the true pairs from Sinkhorn's potentials, exact also where P underflows or was left out of the
        # sparse candidates as below the tolerance (reading P there would give log 0)
        info, T = {}, float(np.exp(log_t))
        warm, edges = nearest(T)
        if dense:
            sinkhorn_probabilities(C, T, None, pool_a[0], pool_b[0], hard, info, tol=CALIBRATION_SINKHORN_TOL,
                                   warm_start=warm, candidates=edges)
        else:
            posterior_marginals(cost, *pool_a, *pool_b, T, info=info, warm_start=warm, candidates=edges)
        solved[T] = (info["potentials"], info.get("edges"))
        alpha, beta = info["log_potentials"]
        value = -float(np.minimum(alpha[true_a] + beta[true_b] - true_cost / T, 0.0).sum())
        bar.set_postfix(T=f"{T:.4g}", objective=f"{value:.6g}", refresh=False)
        bar.update()
        return value

    from tqdm.auto import tqdm

    centre = np.log(default)
    with tqdm(desc=f"temperature {a}-{b}", unit="solve", leave=False, disable=None if progress else True) as bar:
        lo, hi = centre - (0.0 if one_sided else np.log(10)), centre + 4 * np.log(10)
        found, at_posterior = _search_from(objective, centre, lo, hi)
    T, best = float(np.exp(found[0])), float(found[1])
    at_bound = "lower" if found[0] <= lo else "upper" if found[0] >= hi else None
    # as T grows every pair of the pools tends to 1 / (the larger pool's size): chance matching
    chance = n_pairs * float(np.log(max(pool_a[0].shape[0], pool_b[0].shape[0])))
    evidence = 2.0 * (chance - best)
    record = {**record, "temperature": T, "fallback": False, "one_sided": one_sided, "objective": best,
              "objective_at_posterior_temperature": at_posterior, "objective_at_chance": chance,
              "evidence": evidence, "at_bound": at_bound}
    if at_bound == "lower" and not one_sided:
        warnings.warn(f"views {a!r} and {b!r}: the {n_pairs} calibration pairs ({method}) were still more probable "
                      f"at the lowest temperature searched, a tenth of the posterior one: T = {T:.4g} is that bound "
                      f"(calibration_[...]['at_bound'] = 'lower'), and the match probabilities are as sharp as the "
                      f"search allows, not as sharp as these pairs would make them", RuntimeWarning, stacklevel=4)
    if evidence < MIN_CALIBRATION_EVIDENCE:
        warnings.warn(f"views {a!r} and {b!r}: the {n_pairs} calibration pairs ({method}) give no evidence that the "
                      f"match probabilities rank partners better than chance (twice the log-likelihood ratio against "
                      f"chance matching {evidence:.3g} < MIN_CALIBRATION_EVIDENCE = {MIN_CALIBRATION_EVIDENCE}): "
                      f"treat the pairs align() returns, and their probabilities at T = {T:.4g}, as the cost's guess",
                      RuntimeWarning, stacklevel=4)
    # Sinkhorn's potentials at T* without the anchors' entries (the pools are [rows to match, anchors, slack when
    # the views' sizes differ]): align() starts the same rows' solve at T* from them
    f, g, T0 = nearest(T)[0]
    n_a, n_b = posteriors.rows_a.size, posteriors.rows_b.size
    potentials = (np.r_[f[:n_a], f[n_a + n_pairs:]], np.r_[g[:n_b], g[n_b + n_pairs:]], T0)
    return T, record, potentials
