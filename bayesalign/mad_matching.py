"""What MAD and MADEnsemble share: matching fitted latent posteriors, probabilities calibrated on the anchors.

:class:`PosteriorMatching` holds the matching half of an estimator whose fit left Gaussian posteriors of the rows to
align: the cost matrix, the Sinkhorn match probabilities, the temperature fitted on the anchors (temperature
scaling, Guo et al. 2017), the anchors' validation score and :meth:`~PosteriorMatching.align` with every matcher of
:func:`bayesalign.matching.match`. The estimator supplies what it compares (the hooks below); the matching is the
same code for one MAD fit (:class:`bayesalign.MAD`) and a pool of them (:class:`bayesalign.MADEnsemble`).

Hooks the host class implements:

- ``_check_fitted()``, ``problem_`` (the AlignmentProblem), ``cost``, ``temperature``, ``seed``, ``progress``,
  ``calibration_`` and ``_calibration_potentials`` (dicts, emptied by each fit);
- ``_shared_posteriors(a, b)``: the rows of a and b to match and their posteriors (means, variances) in the
  dimensions they are compared in, and those dimensions;
- ``_candidates(a, b, cost)``: the same as ``cost`` compares them (e.g. with a cross-view misfit applied);
- ``_misfit_for(a, b, cost)``: the cross-view misfit inside ``_candidates`` (None: none);
- ``_anchor_pool(a, b, cost, held_out=False, rows=None)``: the candidates (or the posteriors of ``rows``) with the
  anchor pairs, inferred again as if unaligned (``held_out``: held out of continuations of the fit), appended;
  ``_holds_out_anchors()``: whether ``held_out`` is possible;
- ``_calibration_pool(a, b, cost)``: the same with the anchor pairs the temperature is fitted on, and
  ``_calibration_method()``: their name in ``calibration_``;
- ``_match_embedding(a, b, cost)``: every row's coordinates as :func:`~bayesalign.matching.match` compares them;
- ``_discovered_between(a, b)``: pairs the fit found itself (None: none), reported by :meth:`align`;
- ``_align_info(a, b, cost, dims)``: what :meth:`align` adds to the alignment's ``info``;
- for self-training (:meth:`~PosteriorMatching._self_train_rounds`): ``self_training_history_`` (a list),
  ``_tie(a, b, index_a, index_b, probability, cost, round_)`` (make the pairs one entity each and refit),
  ``_n_tied()`` (the anchor groups the model is fitted with, discovered ones included), ``_bound()``,
  ``_snapshot()`` and ``_restore(state)`` (the fitted state before a round, and going back to it).
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.optimize import minimize_scalar

from .data import Alignment
from .matching import (
    COSTS,
    linear_assignment,
    match,
    mutual_nearest,
    pair_costs,
    posterior_marginals,
    posterior_temperature,
    sinkhorn_log_marginals,
    sinkhorn_probabilities,
)
from .matching.costs import cost_source
from .matching.matcher import DENSE_SINKHORN_MAX, SPARSE_ABOVE, _cost_matrix

__all__ = ["CALIBRATION_SINKHORN_TOL", "MIN_CALIBRATION_EVIDENCE", "MIN_CALIBRATION_PAIRS", "TEMPERATURES",
           "PosteriorMatching"]

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


def _check_temperature(temperature) -> None:
    """A temperature the estimators accept: a positive number, "anchors", "posterior" or None (the posterior
    temperature)."""
    if isinstance(temperature, str):
        if temperature not in TEMPERATURES:
            raise ValueError(f"temperature must be a positive number or one of {TEMPERATURES}, got {temperature!r}")
    elif temperature is not None and (isinstance(temperature, bool) or not float(temperature) > 0):
        raise ValueError(f"temperature must be positive, got {temperature!r}")


class PosteriorMatching:
    """Mixin: cost matrix, match probabilities, the anchors' temperature and align of fitted posteriors (see the
    module docstring for the hooks the host class implements)."""

    def _pair(self, a, b):
        self._check_fitted()
        names = self.problem_.views.names
        a = names[0] if a is None else self.problem_.views.name_of(a)
        b = (names[1] if a != names[1] else names[0]) if b is None else self.problem_.views.name_of(b)
        if a == b:
            raise ValueError(f"align needs two different views, got {a!r} twice")
        return a, b

    def _temperature(self, a, b, cost, temperature):
        """The temperature a call uses: the given one, else the estimator's; ``"anchors"``: fitted
        (:meth:`calibrate_temperature`); ``"posterior"`` (or None as the estimator's): None, which the
        matchers read as the posterior temperature."""
        if temperature is None:
            temperature = self.temperature
        _check_temperature(temperature)
        if temperature == "anchors":
            return self.calibrate_temperature(a, b, cost)
        return None if temperature == "posterior" else temperature

    def calibrate_temperature(self, a=None, b=None, cost: str | None = None) -> float:
        r"""T of the match probabilities, fitted on the anchor pairs (temperature scaling; Guo et al. 2017).

        The posterior variances say how well a view pins down its own rows' latent points, not
        how far apart the two views put the same point, so exp(-cost) can be far too confident
        where their latent spaces disagree (or too timid where they agree). The anchors measure
        that: each anchor pair (i, t) is inferred again view by view, q_a(x_i) from y_i of a
        alone and q_b(x_t) from y_t of b alone (``MRD.infer``, the fitted model fixed), as if
        unaligned, and joins the unaligned rows. T minimises the negative log of the match
        probabilities MAD reports (the Sinkhorn marginals P_T of exp(-C / T) over the unaligned
        rows and the re-inferred anchors, :func:`~bayesalign.matching.posterior_marginals`)
        of the true anchor pairs:

        .. math:: T^\ast = \arg\min_T \; -\sum_{(i,t)\,\in\,\text{anchors}} \log P_T[i, t]

        a scalar search over log T between a tenth of the posterior temperature and 10^4 times it,
        outwards from the posterior temperature (steps growing from ``TEMPERATURE_STEP`` downhill,
        then bounded Brent inside the bracket, to 5% in T). Where the pairs' likelihood still rises at the
        lower end (every true pair far ahead of its rivals, so the objective falls towards T = 0), T is
        that bound: the record's ``at_bound`` says "lower" (a RuntimeWarning, unless the search was
        ``one_sided``), or "upper" at the other end; the floor keeps a few perfectly ranked anchors, which
        are easier than the unaligned rows, from making every probability 0 or 1. log P_T[i, t] is read from Sinkhorn's
        potentials, exact also where the marginal underflows or the sparse solver left the pair out as
        below its tolerance (solved to ``CALIBRATION_SINKHORN_TOL``; each temperature starts from the
        potentials and the candidate pairs of the nearest one already solved, ``warm_start`` of
        :func:`~bayesalign.matching.sinkhorn` and ``candidates`` of
        :func:`~bayesalign.matching.sinkhorn_probabilities`). The
        anchors shaped the mappings they are re-inferred under, so they are not exchangeable with
        the unaligned rows they calibrate, and T* can err either way (benchmarks/RESULTS.md, "Calibration");
        ``MAD(calibration_pairs="held_out")`` fits T on anchor pairs held out of continuations of the fit
        instead (each pair's rows placed by their own views, as unaligned rows are). Fewer than
        ``MIN_CALIBRATION_PAIRS`` anchor pairs (but some): a RuntimeWarning, and the search only over T at or
        above the posterior temperature (``one_sided``): a few anchors matched at low probability are strong
        evidence that the model is overconfident, a few matched well are weak evidence that it is timid
        (benchmarks/RESULTS.md, "Few anchors"). No anchor pair: a RuntimeWarning and the posterior temperature.
        Whether the pairs show any ranking at all is a test: as T grows, P_T tends to chance matching (every
        pair 1 / n of the larger pool), so the objective there is :math:`n_\text{pairs} \log n`, and
        ``evidence`` = 2 (objective at chance - objective at T*) is the likelihood-ratio statistic of
        "1 / T = 0"; below ``MIN_CALIBRATION_EVIDENCE`` (its 95% point, the null lying on the boundary, Self & Liang
        1987) a RuntimeWarning says that the anchors show no ranking, so the pairing is the cost's guess.
        The result is cached per (a, b, cost) in ``calibration_`` (with the pairs used, the
        objective at T*, at the posterior temperature and at chance, and the evidence).
        """
        self._check_fitted()
        a, b = self._pair(a, b)
        cost = self.cost if cost is None else cost
        if cost not in COSTS:
            raise ValueError(f"cost must be one of {COSTS}, got {cost!r}")
        key = (a, b, cost)
        misfit = self._misfit_for(a, b, cost) is not None
        if key in self.calibration_ and self.calibration_[key]["misfit"] == misfit:  # else misfit changed since
            return self.calibration_[key]["temperature"]
        _, _, va, _, _, vb, _ = self._candidates(a, b, cost)
        default = posterior_temperature(cost, va, vb)
        anchors = self.problem_.anchors_between(a, b, implied=True)
        record = {"pairs": len(anchors), "method": self._calibration_method(), "posterior_temperature": default,
                  "misfit": misfit}
        if len(anchors) == 0:
            warnings.warn(f"views {a!r} and {b!r} have no anchor pair to fit the temperature on; the probabilities "
                          f"use the posterior temperature {default:.3g}", RuntimeWarning, stacklevel=3)
            self.calibration_[key] = {**record, "temperature": default, "fallback": True, "one_sided": False}
            return default
        one_sided = len(anchors) < MIN_CALIBRATION_PAIRS
        if one_sided:
            warnings.warn(f"views {a!r} and {b!r} have {len(anchors)} anchor pairs, fewer than "
                          f"MIN_CALIBRATION_PAIRS = {MIN_CALIBRATION_PAIRS}: the temperature fitted on them may "
                          f"only flatten the probabilities (T >= the posterior temperature {default:.3g})",
                          RuntimeWarning, stacklevel=3)
        pool_a, pool_b, true_a, true_b = self._calibration_pool(a, b, cost)
        true_cost = pair_costs(cost, *pool_a, *pool_b, true_a, true_b)  # [n]
        dense = pool_a[0].shape[0] * pool_b[0].shape[0] <= SPARSE_ABOVE
        if dense:  # one cost matrix and one optimal assignment for every temperature the search tries
            C = _cost_matrix(cost, *pool_a, *pool_b)
            hard = linear_assignment(C) if C.size > DENSE_SINKHORN_MAX else None
        solved = {}  # temperature -> (Sinkhorn's potentials, candidate pairs) there, to start the nearest solves

        def nearest(T):  # what the solve at the solved temperature nearest T (in log T) ended on, or (None, None)
            return solved[min(solved, key=lambda t: abs(np.log(t / T)))] if solved else (None, None)

        def objective(log_t: float) -> float:
            # log P of the true pairs from Sinkhorn's potentials, exact also where P underflows or was left out of
            # the sparse candidates as below the tolerance (reading P there would give log 0, clipped: a pair at
            # 1e-9 would count as one at 1e-308 and push T up)
            info, T = {}, float(np.exp(log_t))
            warm, edges = nearest(T)
            if dense:
                sinkhorn_probabilities(C, T, None, pool_a[0], pool_b[0], hard, info, tol=CALIBRATION_SINKHORN_TOL,
                                       warm_start=warm, candidates=edges)
            else:
                posterior_marginals(cost, *pool_a, *pool_b, T, info=info, warm_start=warm)
            solved[T] = (info["potentials"], info.get("edges"))
            alpha, beta = info["log_potentials"]
            value = -float(np.minimum(alpha[true_a] + beta[true_b] - true_cost / T, 0.0).sum())
            bar.set_postfix(T=f"{T:.4g}", objective=f"{value:.6g}", refresh=False)
            bar.update()
            return value

        from tqdm.auto import tqdm

        centre = np.log(default)
        # one step per Sinkhorn solve of the search (about ten), on a terminal only
        with tqdm(desc=f"temperature {a}-{b}", unit="solve", leave=False,
                  disable=None if self.progress else True) as bar:
            lo, hi = centre - (0.0 if one_sided else np.log(10)), centre + 4 * np.log(10)
            found, at_posterior = _search_from(objective, centre, lo, hi)
        T, best = float(np.exp(found[0])), float(found[1])
        at_bound = "lower" if found[0] <= lo else "upper" if found[0] >= hi else None
        # as T grows every pair of the pools tends to 1 / (the larger pool's size): chance matching
        chance = len(true_a) * float(np.log(max(pool_a[0].shape[0], pool_b[0].shape[0])))
        evidence = 2.0 * (chance - best)
        self.calibration_[key] = {**record, "temperature": T, "fallback": False, "one_sided": one_sided,
                                  "objective": best, "objective_at_posterior_temperature": at_posterior,
                                  "objective_at_chance": chance, "evidence": evidence, "at_bound": at_bound}
        if at_bound == "lower" and not one_sided:
            warnings.warn(f"views {a!r} and {b!r}: the {len(true_a)} calibration pairs ({record['method']}) were "
                          f"still more probable at the lowest temperature searched, a tenth of the posterior one: "
                          f"T = {T:.4g} is that bound (calibration_[...]['at_bound'] = 'lower'), and the match "
                          f"probabilities are as sharp as the search allows, not as sharp as these pairs would make "
                          f"them", RuntimeWarning, stacklevel=3)
        if evidence < MIN_CALIBRATION_EVIDENCE:
            warnings.warn(f"views {a!r} and {b!r}: the {len(true_a)} calibration pairs ({record['method']}) give no "
                          f"evidence that the match probabilities rank partners better than chance (twice the "
                          f"log-likelihood ratio against chance matching {evidence:.3g} < MIN_CALIBRATION_EVIDENCE = "
                          f"{MIN_CALIBRATION_EVIDENCE}): treat the pairs align() returns, and their probabilities "
                          f"at T = {T:.4g}, as the cost's guess", RuntimeWarning, stacklevel=3)
        # Sinkhorn's potentials at T* without the anchors' entries (the pools are [unaligned rows, anchors, slack
        # when the views' sizes differ]): align() starts the same unaligned rows' solve at T* from them
        f, g, T0 = nearest(T)[0]
        rows_a, _, _, rows_b, _, _, _ = self._shared_posteriors(a, b)
        n_a, n_b, n = rows_a.size, rows_b.size, len(true_a)
        self._calibration_potentials[key] = (rows_a, rows_b,
                                             (np.r_[f[:n_a], f[n_a + n:]], np.r_[g[:n_b], g[n_b + n:]], T0))
        return T

    def _fitted_warm_start(self, a, b, cost, temperature, cost_limit, rows_a, rows_b):
        """(the calibration record, Sinkhorn's potentials) when ``temperature`` is the one fitted on the anchors, else
        (None, None): the temperature search's potentials at T* over the unaligned rows, from which the same rows'
        solve at T* starts near its solution (none with ``cost_limit``, whose dustbins make another problem, for
        other rows, or for a model loaded from a file)."""
        fitted = self.calibration_.get((a, b, cost))
        if fitted is None or fitted["fallback"] or temperature != fitted["temperature"]:
            return None, None
        saved = self._calibration_potentials.get((a, b, cost))
        if cost_limit is not None or saved is None or not (np.array_equal(saved[0], rows_a) and
                                                            np.array_equal(saved[1], rows_b)):
            return fitted, None
        return fitted, saved[2]

    def _anchor_foscttm(self, a, b, **pool) -> float:
        """FOSCTTM of the anchor pairs among the unaligned rows (``pool``, options of :meth:`_anchor_pool`: ``rows``,
        other rows to rank them among; ``held_out``, each pair held out of a continuation of the fit rather than
        inferred again view by view under it): how well the model aligns rows it did not see as unaligned (a
        validation score; the re-inferred pairs' is biased low, because the anchors shaped the model)."""
        from .data import Correspondence
        from .metrics import foscttm

        pool_a, pool_b, true_a, true_b = self._anchor_pool(a, b, **pool)  # ranks from the cost's blocks, never n x n
        return foscttm(cost_source(self.cost, *pool_a, *pool_b), Correspondence((a, b), true_a, true_b))

    @staticmethod
    def _check_self_training(problem, confidence_threshold, max_rounds) -> None:
        """Refuse what self-training cannot do (more than two views) or a bad ``confidence_threshold`` or
        ``max_rounds``, before any (slow) fit."""
        if len(problem.views) != 2:
            raise ValueError(f"self-training is implemented for two views; this problem has {len(problem.views)}")
        if not 0 < float(confidence_threshold) <= 1:
            raise ValueError(f"confidence_threshold must be in (0, 1], got {confidence_threshold!r}")
        if int(max_rounds) < 0:
            raise ValueError(f"max_rounds must be >= 0, got {max_rounds!r}")

    def _self_train_rounds(self, a, b, confidence_threshold: float, max_rounds: int, truth=None) -> None:
        """Self-training's rounds between views a and b (hard EM over the correspondence; :meth:`MAD.self_train`
        and :meth:`MADEnsemble.self_train` say what each step increases).

        Each round aligns a and b (Hungarian on the cost, the Sinkhorn probabilities at the posterior
        temperature: the pairs the model itself is sure of), keeps the pairs whose probability is at least
        ``confidence_threshold`` and that are mutual nearest neighbours under the cost, ties them (``_tie``: each
        pair one entity, the model refitted from its current state) and appends an entry to
        ``self_training_history_``; it stops when no pair qualifies or after ``max_rounds``. With at least
        ``MIN_CALIBRATION_PAIRS`` given anchor pairs between a and b the anchors judge each round: it is kept
        unless their FOSCTTM (:meth:`_anchor_foscttm`), among the rows unaligned when self-training began (a tied
        row by its entity's posterior, so that the pool stays the same rows), rises; otherwise the state before
        the round comes back (``_restore``) and self-training stops. The anchors are held out of continuations of
        each fit (``_anchor_pool(held_out=True)``, :meth:`MAD._held_out_pairs`) where the host can
        (``_holds_out_anchors()``), so that before and after the round each pair is placed as an unaligned row
        is; inferred again under the fitted model instead, the anchors' mappings were fitted around them, a
        round's tied pairs dilute that, and their FOSCTTM rose after rounds that tied only right pairs and helped
        (benchmarks/RESULTS.md, "A self-training round judged by held-out anchors"). The entry's
        ``judge_pairs`` says which ("held_out" or "reinferred"; None: not judged). ``truth``: the true pairs, for
        the entries' ``correct`` and ``accuracy`` (None: not reported).
        """
        judged = len(self.problem_.anchors_between(a, b, implied=True)) >= MIN_CALIBRATION_PAIRS
        held_out = judged and self._holds_out_anchors()
        # among the rows unaligned now, whichever a round ties: a pool that shrank would lose the rows easiest
        # to tell apart from an anchor, and its FOSCTTM would rise with no change in the model
        pool = {"rows": self._shared_posteriors(a, b)[::3][:2], "held_out": held_out} if judged else None
        judge_pairs = ("held_out" if held_out else "reinferred") if judged else None
        best_score = self._anchor_foscttm(a, b, **pool) if judged else None
        for round_ in range(1, int(max_rounds) + 1):
            rows_a, rows_b, C = self.cost_matrix(a, b)  # [n_a, n_b]: the mutual nearest neighbours need all of it
            al = self.align(a, b, matcher="hungarian", include_discovered=False, temperature="posterior")
            mutual = mutual_nearest(C)
            pos_a, pos_b = np.searchsorted(rows_a, al.index_a), np.searchsorted(rows_b, al.index_b)
            keep = np.flatnonzero((al.probabilities >= confidence_threshold) & mutual[pos_a, pos_b])
            # leave at least one row of each view to align (a fit refuses a view with none)
            room = min(rows_a.size, rows_b.size) - 1
            if keep.size > room:
                keep = keep[np.argsort(-al.probabilities[keep], kind="stable")[:max(room, 0)]]
            new_a, new_b = al.index_a[keep], al.index_b[keep]
            correct = accuracy = None
            if truth is not None:
                correct = int(sum((int(i), int(j)) in truth for i, j in zip(new_a, new_b)))
                # accuracy of the whole current alignment (discovered pairs + this matching) on the rows of a that
                # were unaligned in the problem and have a true partner
                full = self.align(a, b, matcher="hungarian", temperature="posterior")
                partner = dict(truth)
                held = [i for i in full.candidates_a.tolist() if i in partner]
                right = sum(partner.get(int(i)) == int(j) for i, j in zip(full.index_a, full.index_b))
                accuracy = right / max(len(held), 1)
            entry = {"round": round_, "n_anchors": self._n_tied(), "added": int(keep.size), "correct": correct,
                     "accuracy": accuracy, "elbo": self._bound(), "anchor_foscttm": None, "judge_pairs": judge_pairs,
                     "kept": None}
            self.self_training_history_.append(entry)
            if keep.size == 0:
                break
            before = self._snapshot()
            self._tie(a, b, new_a, new_b, al.probabilities[keep], al.costs[keep], round_)
            entry["kept"] = True
            if judged:
                score = entry["anchor_foscttm"] = self._anchor_foscttm(a, b, **pool)
                if not (np.isfinite(score) and score <= best_score):  # the anchors say the round made it worse
                    entry["kept"] = False
                    self._restore(before)  # the history list is shared: this entry stays in it
                    break
                best_score = score

    def cost_matrix(self, a=None, b=None, cost: str | None = None):
        """(rows_a, rows_b, C): the cost between the unaligned rows of a and b, in their shared dimensions.

        C is dense (n_a, n_b): the assignment needs every entry (the sparse path of
        :meth:`align` uses kNN candidates instead).
        """
        a, b = self._pair(a, b)
        cost = self.cost if cost is None else cost
        if cost not in COSTS:
            raise ValueError(f"cost must be one of {COSTS}, got {cost!r}")
        rows_a, ma, va, rows_b, mb, vb, _ = self._candidates(a, b, cost)
        return rows_a, rows_b, _cost_matrix(cost, ma, va, mb, vb)

    def match_probabilities(self, a=None, b=None, cost: str | None = None, cost_limit=None,
                            temperature: float | None = None):
        """(rows_a, rows_b, P): Sinkhorn match marginals P [n_a, n_b] of exp(-cost / T) (log domain).

        P[i, j] approximates the probability that unaligned row ``rows_a[i]`` of a and
        ``rows_b[j]`` of b are the same point; rows and columns sum to at most 1 (the rest is
        the probability of no match: the dustbin with ``cost_limit``, the surplus of the
        larger view otherwise). T as in the class docstring. P is a dense array up to
        ``SPARSE_ABOVE`` pairs, and above it a CSR matrix of the pairs that carry probability
        (:func:`~bayesalign.matching.posterior_marginals`; the cost matrix is never formed).
        """
        a, b, cost, rows_a, rows_b, (ma, va, mb, vb), T, warm = self._matching_inputs(a, b, cost, cost_limit,
                                                                                      temperature)
        P = posterior_marginals(cost, ma, va, mb, vb, T, cost_limit, warm_start=warm)  # csr [n_a, n_b]
        return rows_a, rows_b, (P.toarray() if rows_a.size * rows_b.size <= SPARSE_ABOVE else P)

    def match_log_probabilities(self, a=None, b=None, cost: str | None = None, cost_limit=None,
                                temperature: float | None = None):
        r"""(rows_a, rows_b, L): the log match probabilities L [n_a, n_b] of every pair, finite where P underflows.

        .. math:: L_{ij} = \alpha_i + \beta_j - C_{ij} / T = \log P_{ij}

        with :math:`\alpha, \beta` the log potentials of the Sinkhorn solve of :meth:`match_probabilities` (the
        same T and ``cost_limit``; :func:`~bayesalign.matching.sinkhorn_log_marginals`): exact also for the pairs
        whose probability is below what a float holds or that the sparse solve left out as carrying less than its
        tolerance. Ranking the rows of b by ``L[i]`` ranks them by their posterior probability of being row i's
        partner: the cost less each column's potential :math:`T \beta_j`, which discounts a row of b that is near
        many rows of a (a hub: Radovanovic et al. 2010; the correction that CSLS makes in cross-lingual word
        retrieval, Conneau et al. 2018; benchmarks/RESULTS.md, "Ranking partners by the match probabilities",
        compares the two rankings on the shipped real pairs). The optimal assignment of every row of both views is
        the same under ``-L`` as under the cost (the potentials add the same constant to every such matching).
        Dense by nature (every pair has a value), as :meth:`cost_matrix`.
        """
        a, b, cost, rows_a, rows_b, (ma, va, mb, vb), T, warm = self._matching_inputs(a, b, cost, cost_limit,
                                                                                      temperature)
        C = _cost_matrix(cost, ma, va, mb, vb)  # [n_a, n_b]
        return rows_a, rows_b, sinkhorn_log_marginals(C, T, cost_limit, ma, mb, warm_start=warm)

    def _matching_inputs(self, a, b, cost, cost_limit, temperature):
        """(a, b, cost, rows_a, rows_b, the candidates' (ma, va, mb, vb), T, the Sinkhorn warm start) of a call of
        :meth:`match_probabilities` with these arguments (its defaults resolved)."""
        a, b = self._pair(a, b)
        cost = self.cost if cost is None else cost
        if cost not in COSTS:
            raise ValueError(f"cost must be one of {COSTS}, got {cost!r}")
        rows_a, ma, va, rows_b, mb, vb, _ = self._candidates(a, b, cost)
        temperature = self._temperature(a, b, cost, temperature)
        T = float(temperature) if temperature is not None else posterior_temperature(cost, va, vb)
        warm = self._fitted_warm_start(a, b, cost, temperature, cost_limit, rows_a, rows_b)[1]
        return a, b, cost, rows_a, rows_b, (ma, va, mb, vb), T, warm

    def align(self, a=None, b=None, matcher: str = "hungarian", cost: str | None = None, cost_limit=None,
              n_samples: int = 100, temperature: float | None = None, order=None, seed=None,
              include_discovered: bool = True, sparse: bool | None = None, n_neighbors: int = 10):
        """Match the unaligned rows of views a and b in their shared latent dimensions.

        Parameters
        ----------
        a, b : view names (default the first two views)
        matcher : {"hungarian", "myopic", "sinkhorn", "perturb"}
            See the class docstring.
        cost : {"likelihood", "mean"}, optional
            Default ``self.cost``.
        cost_limit : float, optional
            Leaving a row unmatched costs ``cost_limit / 2`` (so a pair costlier than the
            limit is never made); the probabilities then have a dustbin (Sarlin et al. 2020).
            Without it, every row of the smaller side is matched.
        n_samples : int
            Samples of perturb-and-MAP.
        temperature : float, "anchors" or "posterior", optional
            Overrides the estimator's probability temperature (see the class docstring).
        order : int array, optional
            Arrival order of the rows of b still to match, for ``"myopic"``: positions in
            ``align(..., include_discovered=False).candidates_b`` (the same as ``candidates_b`` unless
            bootstrap / self-training discovered pairs, whose rows are anchors now); default their row order.
        seed : optional
            Seed of perturb-and-MAP (default ``self.seed``).
        include_discovered : bool
            Also report the pairs found by bootstrap / self-training (they are anchors of
            the model now, so they are not re-matched).
        sparse, n_neighbors
            The large-N path on kNN candidate pairs (default: above ``SPARSE_ABOVE`` pairs); see
            :func:`bayesalign.matching.match`, which does the matching.

        Returns
        -------
        Alignment
            Pairs in the problem's row indices, their costs, ``probabilities`` (see the class
            docstring), candidates = the rows that were unaligned in the problem; ``info``
            holds the shared dimensions, the threshold, the temperature and the matcher.
        """
        a, b = self._pair(a, b)
        cost = self.cost if cost is None else cost
        if cost not in COSTS:
            raise ValueError(f"cost must be one of {COSTS}, got {cost!r}")
        rows_a, _, _, rows_b, _, _, dims = self._shared_posteriors(a, b)
        found = self._discovered_between(a, b)
        if order is not None and found is not None and np.size(order) != rows_b.size:
            raise ValueError(f"order lists {np.size(order)} rows, but {rows_b.size} rows of view {b!r} are still to "
                             f"match: its positions are those of align(..., include_discovered=False).candidates_b "
                             f"({found['index_b'].size} rows of {b!r} were discovered as pairs and are anchors now)")
        temperature = self._temperature(a, b, cost, temperature)
        fitted, warm = self._fitted_warm_start(a, b, cost, temperature, cost_limit, rows_a, rows_b)
        embedding, match_dims = self._match_embedding(a, b, cost)
        al = match(embedding, self.problem_, a, b, matcher=matcher, cost=cost, cost_limit=cost_limit,
                   temperature=temperature, dims=match_dims, rows_a=rows_a, rows_b=rows_b, sparse=sparse,
                   n_neighbors=n_neighbors, order=order, n_samples=n_samples,
                   seed=self.seed if seed is None else seed, method=f"mad-{matcher}-{cost}", warm_start=warm)
        info = {**self._align_info(a, b, cost, dims), **al.info}
        if fitted is not None:
            info["temperature_from"] = f"fitted on {fitted['pairs']} anchor pairs"
        index_a, index_b, costs, probs = al.index_a, al.index_b, al.costs, al.probabilities
        cand_a, cand_b = rows_a, rows_b
        if include_discovered and found is not None and len(found["index_a"]):
            index_a = np.concatenate([found["index_a"], index_a])
            index_b = np.concatenate([found["index_b"], index_b])
            costs = np.concatenate([found["cost"], costs])
            probs = np.concatenate([found["probability"], probs])
            cand_a = np.union1d(cand_a, found["index_a"])
            cand_b = np.union1d(cand_b, found["index_b"])
            info["n_discovered"] = len(found["index_a"])
        order_a = np.argsort(index_a, kind="stable")
        views = self.problem_.views
        return Alignment((a, b), index_a[order_a], index_b[order_a], costs[order_a], probs[order_a],
                         n_a=views.n_samples[a], n_b=views.n_samples[b], candidates_a=cand_a, candidates_b=cand_b,
                         method=al.method, info=info)
