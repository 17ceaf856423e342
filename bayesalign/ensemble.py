"""MADEnsemble: several MAD fits of one problem, their match likelihoods pooled into one (a product of experts).

The bound of MRD is multimodal, and the fit a MAD keeps depends on its settings (``latent_dim`` above all): on the
shipped real pairs a fit with 10 latent dimensions aligns some pairs better and one with 20 others, and neither
the bound nor the anchors say which (benchmarks/RESULTS.md, "Pooled fits"). Pooling both fits' tempered match
likelihoods aligns better than either on most pairs: their errors are partly independent.
"""

from __future__ import annotations

import copy
import time
import warnings

import numpy as np
from sklearn.base import BaseEstimator, clone

from ._utils import user_stacklevel
from .data import AlignmentProblem, LatentEmbedding
from .mad_matching import PosteriorMatching, _check_temperature
from .matching import COSTS, posterior_temperature

__all__ = ["MADEnsemble"]


def _same_problem(p: AlignmentProblem, q: AlignmentProblem) -> bool:
    """Whether two problems hold the same views (names, values) and the same anchors between every pair of views."""
    if p is q:
        return True
    names = p.views.names
    if list(names) != list(q.views.names):
        return False
    for view in names:
        x, y = np.asarray(p.views[view]), np.asarray(q.views[view])
        if x.shape != y.shape or not np.array_equal(x, y, equal_nan=True):
            return False
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            s, t = p.anchors_between(a, b, implied=True), q.anchors_between(a, b, implied=True)
            if set(zip(s.index_a.tolist(), s.index_b.tolist())) != set(zip(t.index_a.tolist(), t.index_b.tolist())):
                return False
    return True


def _tempered(mean, var, temperature: float, cost: str):
    """A member's posteriors (in the coordinates its ``cost`` compares) tempered by ``temperature`` T: for the
    likelihood cost the variances times T (the Gaussian match likelihood's covariance widened T-fold), for the mean
    cost the coordinates over sqrt(T) (its cost divided by T)."""
    if cost == "likelihood":
        return mean, var * temperature
    scale = 1.0 / np.sqrt(temperature)
    return mean * scale, var * scale ** 2


def _names(value) -> tuple:
    """A sequence of names as a tuple; a string may list them with commas (the command line's ``--set
    start_members=pca,cca``)."""
    if isinstance(value, str):
        return tuple(name.strip() for name in value.split(",") if name.strip())
    return tuple(value)


def _check_start_members(start_members) -> tuple:
    """``start_members`` as a tuple of MAD's start names (empty: none; a string may list them with commas, as the
    command line's ``--set start_members=pca,cca`` gives them), or a ValueError naming the bad entry."""
    from .mad import STARTS

    if start_members is None:
        return ()
    names = _names(start_members)
    for name in names:
        if name not in STARTS:
            raise ValueError(f"start_members must name starts of MAD {STARTS}, got {name!r}")
    if len(set(names)) < len(names):
        raise ValueError(f"start_members names a start twice: {list(names)}")
    return names


#: How the default members see the views (``scalings``): centred (MAD's ``standardize=False``) or standardised.
SCALINGS = ("centred", "standardised")


def _check_scalings(scalings) -> tuple:
    """``scalings`` as a non-empty tuple of names of ``SCALINGS`` (a string may list them with commas), or a
    ValueError."""
    names = _names(scalings) if scalings is not None else ()
    if not names or any(name not in SCALINGS for name in names) or len(set(names)) < len(names):
        raise ValueError(f"scalings must name one or both of {SCALINGS}, each once, got {scalings!r}")
    return names


def _starts_of(member) -> list | None:
    """The starts a member was given (MAD's ``starts``: None, one name or a sequence) as a list, or None."""
    starts = member.starts
    return None if starts is None else [starts] if isinstance(starts, str) else list(starts)


def _describe(member) -> str:
    """A member as its warnings name it: its latent_dim, and its start when it was fitted from one alone."""
    starts = _starts_of(member)
    alone = f", start {starts[0]}" if starts is not None and len(starts) == 1 else ""
    return f"latent_dim {member.latent_dim}{alone}{', standardised' if member.standardize else ''}"


def _fit_member(member, problem: AlignmentProblem, optional: bool, calibrate, record: bool):
    """(the fitted member or None, its seconds, its warnings as (category, message) when ``record``, why it was left
    out or None): one member's fit, in this process or a worker's (whose warnings would otherwise be lost). An
    ``optional`` member (one of ``start_members``) whose start cannot be computed on ``problem`` is left out.
    ``calibrate`` (a, b, cost): then, if the member fits its temperature on the anchors, fit it between a and b
    (:meth:`MAD.calibrate_temperature`), which a worker does while it holds the member."""
    from .gp import StartError

    start = time.perf_counter()
    with warnings.catch_warnings(record=record) as caught:
        if record:
            warnings.simplefilter("default")
        try:
            member.fit(problem)
        except StartError as error:
            if not optional:
                raise
            member, reason = None, str(error)
        else:
            reason = None
            if calibrate is not None and member.temperature == "anchors" and len(
                    member.shared_dims(*calibrate[:2])):
                member._temperature(*calibrate, None)
    return member, time.perf_counter() - start, [(w.category, str(w.message)) for w in caught or []], reason


def _tie_member(member, a, b, index_a, index_b, probability, cost, round_, record: bool):
    """(a copy of ``member`` with the pairs tied and refitted, :meth:`MAD._tie`; its seconds; its warnings as
    (category, message) when ``record``): one member's M-step of the ensemble's self-training, in this process or
    a worker's. The member given is not modified (the ensemble goes back to it when the anchors judge the round
    worse)."""
    start = time.perf_counter()
    member = copy.deepcopy(member)
    with warnings.catch_warnings(record=record) as caught:
        if record:
            warnings.simplefilter("default")
        member._tie(a, b, index_a, index_b, probability, cost, round_)
        member._report_convergence()
    return member, time.perf_counter() - start, [(w.category, str(w.message)) for w in caught or []]


def _calibrated_member(member, a, b, cost, record: bool):
    """(what ``member`` computed to fit its temperature between a and b for ``cost``, as {cache: its entries}
    (``MAD._DERIVED``); the seconds; the warnings as (category, message) when ``record``): one member's
    :meth:`MAD.calibrate_temperature`, in this process or a worker's."""
    start = time.perf_counter()
    with warnings.catch_warnings(record=record) as caught:
        if record:
            warnings.simplefilter("default")
        member._temperature(a, b, cost, None)
    caches = {name: dict(getattr(member, name)) for name in member._DERIVED}
    return caches, time.perf_counter() - start, [(w.category, str(w.message)) for w in caught or []]


def _held_out_member(member, a, b, record: bool):
    """(the anchor pairs between a and b held out of continuations of ``member``'s fit, :meth:`MAD._held_out_pairs`;
    the seconds; the warnings as (category, message) when ``record``): one member's held-out pairs, in this process
    or a worker's."""
    start = time.perf_counter()
    with warnings.catch_warnings(record=record) as caught:
        if record:
            warnings.simplefilter("default")
        pairs = member._held_out_pairs(a, b)
    return pairs, time.perf_counter() - start, [(w.category, str(w.message)) for w in caught or []]


def _discovered_pairs(model) -> dict:
    """The pairs a fitted MAD discovered (self-training or a bootstrap): {(a, b) in sorted order: {(i, j), ...}}."""
    out = {}
    for (a, b), found in model.discovered_.items():
        pairs = zip(found["index_a"].tolist(), found["index_b"].tolist())
        if b < a:
            a, b, pairs = b, a, ((j, i) for i, j in pairs)
        out.setdefault((a, b), set()).update(pairs)
    return {key: pairs for key, pairs in out.items() if pairs}


class MADEnsemble(PosteriorMatching, BaseEstimator):
    r"""Several MAD fits of the same problem pooled into one match distribution (a product of experts).

    Each member f (a fitted :class:`bayesalign.MAD`) gives a candidate pair (i, j) of the unaligned rows of views a
    and b its tempered match likelihood, the member's own match probabilities before the one-to-one constraint:

    .. math:: p_f(i \leftrightarrow j) \propto \exp(-C^f_{ij} / T_f),

    with :math:`C^f` the member's cost in its shared dimensions (by default the likelihood cost
    :math:`-\log N(\mu^f_i - \mu^f_j; 0, S^f_i + S^f_j + \Sigma^f_\tau)`, its cross-view misfit included) and
    :math:`T_f` its temperature (fitted on the anchors by default, :meth:`MAD.calibrate_temperature`). The ensemble
    multiplies them, the logarithmic opinion pool with equal weights (Genest & Zidek 1986; a product of experts,
    Hinton 2002):

    .. math:: C_{ij} = -\sum_f \log N\big(\mu^f_i - \mu^f_j;\ 0,\ T_f (S^f_i + S^f_j + \Sigma^f_\tau)\big),
              \qquad P = \mathrm{Sinkhorn}(\exp(-C / T)),

    each member's Gaussian match likelihood tempered by widening its covariance :math:`T_f`-fold. That is the
    likelihood cost in the concatenation of the members' compared coordinates with member f's variances times
    :math:`T_f`, so every matcher, the sparse large-N path and the probabilities of :class:`bayesalign.MAD` work on
    the pool unchanged (:meth:`align`, :meth:`match_probabilities`, :meth:`cost_matrix`). It differs from
    :math:`\sum_f C^f_{ij} / T_f` (the exponent tempered instead) only in the log-determinant terms (the two are
    compared in benchmarks/RESULTS.md, "Pooled fits"). For the mean cost the pool is exactly
    :math:`\sum_f \lVert \mu^f_i - \mu^f_j \rVert^2 / T_f` (the concatenated means over :math:`\sqrt{T_f}`). The
    members see the same rows, so their evidence overlaps and the plain product is
    overconfident: with ``temperature="anchors"`` (default) the pool's own T is fitted on the anchor pairs again
    (:meth:`calibrate_temperature`, each anchor inferred again from each view alone in every member).

    Pooling helps where the members err differently: on the shipped real pairs a fit with 10 latent dimensions
    and one with 20 align better pooled than either does alone on most pairs (benchmarks/RESULTS.md, "Pooled
    fits"), and so do fits of the centred and of the standardised views, whose errors differ most. The default
    members are all four: 10 and 20 latent dimensions, each on both scalings (benchmarks/RESULTS.md, "Pooling
    across scalings"), at the cost of four fits.

    Parameters
    ----------
    estimators : sequence of MAD, optional
        The members, fitted by :meth:`fit` (each a clone; given with anchors, no self-training). Default: one
        :class:`bayesalign.MAD` per entry of ``latent_dims``, with this ensemble's ``seed`` and ``progress``.
    latent_dims : sequence of int
        With ``estimators=None``: one member per entry (and per scaling of ``scalings``), a
        :class:`bayesalign.MAD` with that ``latent_dim`` (default 10 and 20).
    start_members : sequence of {"joint_laplacian", "pca", "cca"}
        With ``estimators=None``: one more member per start named, a MAD with its default ``latent_dim`` fitted
        from that start alone (``starts=(name,)``) with as many inducing inputs as MAD's starts race with
        (``start_inducing``: 30, or ``member_options``'s). A MAD keeps the optimum of the start with the highest
        bound, which is not always the one that aligns best; these members pool the others too, at a fraction of
        a full member's cost (benchmarks/RESULTS.md, "Members fitted from each start"). Default: none.
    cost : {"likelihood", "mean"}
        The members' cost that is pooled, and the default of :meth:`align`.
    temperature : {"anchors", "posterior"} or float
        T of the pooled probabilities ``exp(-C / T)``: fitted on the anchors (default), 1 (``"posterior"``: the plain
        product of the members' tempered likelihoods; for the mean cost the posterior temperature of the pooled
        coordinates) or a number.
    seed : int, optional
        Seed of the default members and of perturb-and-MAP.
    scalings : sequence of {"centred", "standardised"}
        With ``estimators=None``: the views the default members see, centred (MAD's ``standardize=False``) or
        with every column standardised (``standardize=True``). Default both: every member above is made once for
        each, so the pool does not rest on one choice of units; whether a pair is better aligned on centred or
        on standardised views differs from pair to pair, and no one can tell from the anchors which (a string
        may list them with commas; benchmarks/RESULTS.md, "Pooling across scalings").
    member_options : dict, optional
        With ``estimators=None``: further keywords of every default member. Those :class:`bayesalign.MAD` does not
        take go to its ``mrd_options`` (e.g. ``{"num_inducing": 50, "max_iter": 500}``).
    device : str, optional
        torch device of the members (``"cuda"``); None: each member's own (the CPU by default).
    n_jobs : int, optional
        Members fitted at once, each in its own process (joblib's loky backend; -1: one per core, at most one per
        member), and so are the members' temperature fits on the anchors (between the first two views by the
        worker that fitted the member, at the end of :meth:`fit`; between others at their first use), self-training's
        refits and the continuations its judge holds the anchors out of. None or 1: one after the other in this
        process. Every member is seeded, so the fits are the same either way; a member's warnings (a fit that did
        not converge, a view switched off) are issued again here, naming the member. Each worker process limits
        its threads to its share of the cores (joblib).
    progress : bool
        Progress bars of the default members' fits and of the temperature search.

    Attributes
    ----------
    estimators_ : list of MAD
        The fitted members.
    members_left_out_ : list of dict
        Members of ``start_members`` whose start cannot be computed on the problem (e.g. "pca" with more latent
        dimensions than the views have columns), each warned and left out of the pool: ``member`` (its index
        among the members :meth:`fit` made), ``description`` and ``reason``.
    problem_ : AlignmentProblem
    converged_ : bool
        Whether every member's optimiser reached its tolerance (each member warns when not).
    calibration_ : dict (a, b, cost) -> dict
        The pool's temperature fitted on the anchors, as :attr:`MAD.calibration_`.
    timings_ : dict
        ``member_seconds`` (fit of each member, with ``n_jobs`` its temperature fit too), ``fit_seconds`` (their
        sum) and ``wall_seconds`` (of :meth:`fit`: less than their sum when the members ran at once, ``n_jobs``);
        ``self_training_seconds`` after :meth:`self_train`.
    self_training_history_ : list of dict
        One entry per round of :meth:`self_train`, as :attr:`MAD.self_training_history_` (``elbo``: every
        member's bound).

    Examples
    --------
    >>> import bayesalign as ba
    >>> problem = ba.datasets.mad_toy("linear_shared", seed=0).split_anchors(20, 0).shuffle_unaligned(seed=0)
    >>> pool = ba.MADEnsemble(latent_dims=(3, 5), seed=0).fit(problem)  # doctest: +SKIP
    >>> alignment = pool.align()  # doctest: +SKIP
    """

    def __init__(self, estimators=None, latent_dims=(10, 20), start_members=(), scalings=SCALINGS,
                 cost: str = "likelihood", temperature: float | str | None = "anchors", seed=None,
                 progress: bool = False, member_options: dict | None = None, device=None, n_jobs=None):
        self.estimators = estimators
        self.latent_dims = latent_dims
        self.start_members = start_members
        self.scalings = scalings
        self.cost = cost
        self.temperature = temperature
        self.seed = seed
        self.progress = progress
        self.member_options = member_options
        self.device = device
        self.n_jobs = n_jobs

    def _check_params(self) -> None:
        if self.cost not in COSTS:
            raise ValueError(f"cost must be one of {COSTS}, got {self.cost!r}")
        _check_temperature(self.temperature)
        if self.estimators is None:
            dims = list(np.atleast_1d(self.latent_dims)) if self.latent_dims is not None else []
            if not dims or any(isinstance(q, (bool, np.bool_)) or not float(q).is_integer() or int(q) < 1
                               for q in dims):
                raise ValueError(f"latent_dims must be positive integers, got {self.latent_dims!r}")
            _check_start_members(self.start_members)
            _check_scalings(self.scalings)
        elif not self.estimators:
            raise ValueError("estimators is empty: an ensemble needs at least one MAD")
        if self.n_jobs is not None and (isinstance(self.n_jobs, (bool, np.bool_)) or not isinstance(
                self.n_jobs, (int, np.integer)) or self.n_jobs == 0):
            raise ValueError(f"n_jobs must be a non-zero integer (-1: one per core) or None, got {self.n_jobs!r}")

    def _members(self) -> list:
        """Unfitted clones of the members."""
        return self._members_and_roles()[0]

    def _members_and_roles(self) -> tuple[list, list]:
        """(unfitted clones of the members, whether each is one of ``start_members``: left out of the pool, not
        fatal, when its start cannot be computed)."""
        from .mad import MAD

        device = {} if self.device is None else {"device": self.device}
        if self.estimators is None:
            options = dict(self.member_options or {})
            fixed = {"latent_dim", "seed", "progress", "device", "standardize"} & set(options)
            if fixed:
                raise ValueError(f"member_options cannot set {sorted(fixed)}: the ensemble's latent_dims, seed, "
                                 "progress, device and scalings do")
            mrd = {k: options.pop(k) for k in list(options) if k not in MAD._get_param_names()}
            if mrd:
                options["mrd_options"] = {**(options.get("mrd_options") or {}), **mrd}
            common = {"seed": self.seed, "progress": self.progress, **device}
            starts = _check_start_members(self.start_members)
            size = MAD(**options).get_params()  # the start members' size: the one MAD's starts race at
            size = min(int(size["num_inducing"]), int(size["start_inducing"] or size["num_inducing"]))
            members, optional = [], []
            for scaling in _check_scalings(self.scalings):
                scaled = {**common, **options, "standardize": scaling == "standardised"}
                members += [MAD(latent_dim=int(q), **scaled) for q in np.atleast_1d(self.latent_dims)]
                members += [MAD(**{**scaled, "num_inducing": size, "start_inducing": None, "starts": (start,)})
                            for start in starts]
                optional += [False] * len(np.atleast_1d(self.latent_dims)) + [True] * len(starts)
            return members, optional
        if (self.member_options or _check_start_members(self.start_members)
                or set(_check_scalings(self.scalings)) != set(SCALINGS)):
            raise ValueError("member_options, start_members and scalings set the default members; with estimators "
                             "given, set them there")
        for k, member in enumerate(self.estimators):
            if not isinstance(member, MAD):
                raise TypeError(f"estimators[{k}] is a {type(member).__name__}, not a MAD")
        return [clone(member).set_params(**device) for member in self.estimators], [False] * len(self.estimators)

    def fit(self, problem: AlignmentProblem, self_training: bool = False, confidence_threshold: float = 0.9,
            max_rounds: int = 5) -> MADEnsemble:
        """Fit every member on ``problem`` (which needs anchors; not modified), then pool them (lazily: the
        members' temperatures and misfits are fitted at the first use, per pair of views; with ``n_jobs`` set, each
        worker fits its member's temperature between the first two views right after the fit).

        ``self_training``: then run :meth:`self_train` (``confidence_threshold``, ``max_rounds``). Two views only.
        """
        self._check_params()
        if not isinstance(problem, AlignmentProblem):
            raise TypeError(f"MADEnsemble.fit expects an AlignmentProblem, got {type(problem).__name__}")
        if not sum(len(corr) for corr in problem.anchors.values()):
            raise ValueError("MADEnsemble pools fits of a problem with anchors; this one has none (MAD bootstraps "
                             "anchors without supervision: fit a single MAD)")
        if self_training:  # checked before the (slow) fits
            self._check_self_training(problem, confidence_threshold, max_rounds)
        (members, optional), start = self._members_and_roles(), time.perf_counter()
        # in worker processes each member's temperature between the first two views (align's default pair) is fitted
        # by the worker that fitted it: at its first use the members would otherwise go to workers again
        calibrate = None if self.n_jobs in (None, 1) else (*problem.views.names[:2], self.cost)
        fitted = self._each_member(_fit_member, members, [(problem, opt, calibrate) for opt in optional])
        left_out = []
        for k, (_, _, _, reason) in enumerate(fitted):
            if reason is not None:
                left_out.append({"member": k, "description": _describe(members[k]), "reason": reason})
                warnings.warn(f"MADEnsemble: member {k} ({_describe(members[k])}) is left out of the pool: {reason}",
                              RuntimeWarning, stacklevel=2)
        kept = [(m, t) for m, t, _, reason in fitted if reason is None]
        self._pool([m for m, _ in kept], problem)
        self.members_left_out_ = left_out
        self.timings_ = {"member_seconds": [t for _, t in kept], "fit_seconds": float(sum(t for _, t, _, _ in fitted)),
                         "wall_seconds": time.perf_counter() - start}
        if self_training:
            self.self_train(confidence_threshold, max_rounds)
        return self

    def _each_member(self, function, members: list, arguments: list, indices=None) -> list:
        """``function(member, *arguments[k], record)`` for every member k, one after the other in this process or
        at once in ``n_jobs`` worker processes (joblib's loky backend), whose recorded warnings (the results'
        third entry) are issued here, naming the member by ``indices[k]`` (its place in the pool; default k)."""
        jobs = 1 if self.n_jobs is None else int(self.n_jobs)
        if jobs == 1 or len(members) == 1:
            return [function(member, *args, False) for member, args in zip(members, arguments)]
        from joblib import Parallel, delayed

        jobs = len(members) if jobs < 0 else min(jobs, len(members))
        out = Parallel(n_jobs=jobs, backend="loky")(delayed(function)(member, *args, True)
                                                    for member, args in zip(members, arguments))
        indices = range(len(members)) if indices is None else indices
        for index, member, result in zip(indices, members, out):
            for category, message in result[2]:  # the worker's warnings, issued here
                warnings.warn(f"member {index} ({_describe(member)}): {message}", category,
                              stacklevel=user_stacklevel())
        return out

    def self_train(self, confidence_threshold: float = 0.9, max_rounds: int = 5) -> MADEnsemble:
        """Tie the pairs the pool is sure of in every member and refit them, round after round (two views).

        As :meth:`MAD.self_train`, with the pool's match distribution in the E-step: each round aligns the two
        views on the pooled cost (Hungarian; the Sinkhorn probabilities of the product of the members' tempered
        match likelihoods, at the posterior temperature T = 1), keeps the pairs whose probability is at least
        ``confidence_threshold`` and that are mutual nearest neighbours under the pooled cost, and ties them in
        every member (the M-step: each member's model, with each pair's two rows one entity, refitted from its
        current q(X); in ``n_jobs`` processes at once when set), so that the members keep matching the same rows.
        The members' temperatures are fitted again, and with at least ``MIN_CALIBRATION_PAIRS`` given anchor
        pairs the pool's anchors judge the round (their FOSCTTM under the pooled cost, among the rows unaligned
        when self-training began; each pair held out of short continuations of every member's fit where every
        member allows it, as :meth:`MAD.self_train` says): a round that makes it worse is undone (every member as
        before it) and self-training stops. One entry per round in ``self_training_history_`` (``elbo``: each
        member's bound).

        What each step increases: the E-step picks the pairs of highest pooled match probability (a logarithmic
        opinion pool of the members' posteriors over the correspondence, truncated to the confident mutual
        pairs); the M-step raises each member's own bound under the new correspondence (each member's bound
        covers the same rows, so a member's successive bounds are comparable; the pool has no bound of its own).
        """
        self._check_fitted()
        self._check_self_training(self.problem_, confidence_threshold, max_rounds)
        a, b = self.problem_.views.names
        from .mad import _truth_pairs

        start = time.perf_counter()
        self._self_train_rounds(a, b, float(confidence_threshold), int(max_rounds),
                                truth=_truth_pairs(self.problem_, a, b))
        self.timings_["self_training_seconds"] = (self.timings_.get("self_training_seconds", 0.0)
                                                  + time.perf_counter() - start)
        return self

    # -- the hooks of PosteriorMatching._self_train_rounds ----------------------------------------
    def _tie(self, a, b, index_a, index_b, probability, cost, round_) -> None:
        """Tie the pairs in a copy of every member and refit them (:func:`_tie_member`); the pool's temperatures
        are fitted again at their next use."""
        arguments = [(a, b, index_a, index_b, probability, cost, round_)] * len(self.estimators_)
        self.estimators_ = [member for member, _, _ in self._each_member(_tie_member, self.estimators_, arguments)]
        self.converged_ = all(bool(m.converged_) for m in self.estimators_)
        self.calibration_, self._calibration_potentials = {}, {}

    def _n_tied(self) -> int:
        return len(self.estimators_[0].anchors_)

    def _holds_out_anchors(self) -> bool:
        return all(member._holds_out_anchors() for member in self.estimators_)

    def _bound(self) -> list:
        return [float(member.model_.elbo()) for member in self.estimators_]

    def _snapshot(self) -> dict:
        # the members are replaced by refitted copies (_tie_member), never modified: keeping the list keeps them
        return {"estimators_": list(self.estimators_), "converged_": self.converged_,
                "calibration_": self.calibration_, "_calibration_potentials": self._calibration_potentials}

    def _restore(self, state: dict) -> None:
        self.__dict__.update(state)

    @classmethod
    def from_fitted(cls, models, cost: str = "likelihood", temperature: float | str | None = "anchors",
                    seed=None, progress: bool = False) -> MADEnsemble:
        """Pool MADs already fitted on the same problem (the same views and anchors; no pairs discovered by
        self-training or a bootstrap). The models are used as they are, not copied; ``estimators`` holds unfitted
        copies of their settings."""
        from .mad import MAD

        models = list(models)
        if not models:
            raise ValueError("from_fitted needs at least one fitted MAD")
        for k, model in enumerate(models):
            if not isinstance(model, MAD):
                raise TypeError(f"models[{k}] is a {type(model).__name__}, not a MAD")
            model._check_fitted()
        # estimators: unfitted copies of the models' settings, which a later fit() of this ensemble fits again
        ensemble = cls(estimators=[clone(m) for m in models], latent_dims=[int(m.latent_dim) for m in models],
                       start_members=(), cost=cost, temperature=temperature, seed=seed, progress=progress)
        ensemble._check_params()
        ensemble._pool(models, models[0].problem_)
        ensemble.timings_ = {"member_seconds": [float(m.timings_.get("total_seconds", np.nan)) for m in models]}
        ensemble.timings_["fit_seconds"] = float(np.sum(ensemble.timings_["member_seconds"]))
        return ensemble

    def _pool(self, members: list, problem: AlignmentProblem) -> None:
        for k, member in enumerate(members):
            if not _same_problem(member.problem_, problem):
                raise ValueError(f"member {k} was fitted on another problem (other views or anchors) than the "
                                 "ensemble's; every member must see the same rows")
            if _discovered_pairs(member) != _discovered_pairs(members[0]):
                raise ValueError(f"member {k} discovered other pairs (self-training or a bootstrap) than member 0, "
                                 "so its rows to match differ from the others'; pool fits given anchors only, or "
                                 "self-train the ensemble (MADEnsemble.self_train), which ties the same pairs in "
                                 "every member")
        self.estimators_ = members
        self.members_left_out_ = []
        self.self_training_history_ = []
        self.problem_ = problem
        self.converged_ = all(bool(m.converged_) for m in members)
        self.calibration_ = {}
        self._calibration_potentials = {}
        self._warned = set()

    def save(self, path) -> None:
        """Write the fitted ensemble (its parameters and every member's MAD file) to one ``.npz`` file, no pickle
        (:func:`bayesalign.mad_io.save_ensemble`); :meth:`load` reads it back and aligns exactly as before."""
        from .mad_io import save_ensemble

        save_ensemble(self, path)

    @classmethod
    def load(cls, path, device=None) -> MADEnsemble:
        """Read an ensemble written by :meth:`save` (never unpickles; a corrupt file raises ``MADFileError``)."""
        from .mad_io import load_ensemble

        return load_ensemble(path, device=device)

    # -- the hooks of PosteriorMatching ----------------------------------------------------
    def _check_fitted(self):
        if not hasattr(self, "estimators_"):
            raise AttributeError("this MADEnsemble is not fitted yet; call fit first")

    def _active(self, a, b) -> list:
        """The members that match views a and b: those whose fit left the two views a shared dimension. Any other is
        left out of the pool with a RuntimeWarning (once per pair of views); none left is an error."""
        active = [member for member in self.estimators_ if len(member.shared_dims(a, b))]
        if not active:
            raise ValueError(f"no member of the ensemble shares a latent dimension between views {a!r} and {b!r}: "
                             "there is nothing to match them in")
        key = frozenset((a, b))
        if len(active) < len(self.estimators_) and key not in self._warned:
            self._warned.add(key)
            left = [k for k, member in enumerate(self.estimators_) if member not in active]
            warnings.warn(f"MADEnsemble: members {left} share no latent dimension between views {a!r} and {b!r} "
                          f"(each warned at its fit); the pool matches with the other {len(active)}",
                          RuntimeWarning, stacklevel=4)
        return active

    def member_temperatures(self, a=None, b=None, cost: str | None = None) -> list[float]:
        """T_f of every member that matches views a and b (all but those sharing no dimension between them): the
        temperature each member's probabilities use (by its own ``temperature``: fitted on the anchors by default;
        the posterior temperature where it says None)."""
        a, b = self._pair(a, b)
        cost = self.cost if cost is None else cost
        self._calibrate_members(a, b, cost)
        out = []
        for member in self._active(a, b):
            T = member._temperature(a, b, cost, None)
            if T is None:
                _, _, va, _, _, vb, _ = member._candidates(a, b, cost)
                T = posterior_temperature(cost, va, vb)
            out.append(float(T))
        return out

    def _candidates(self, a, b, cost=None):
        """The unaligned rows of a and b, with every member's posteriors (as its cost compares them) tempered by its
        T_f and concatenated along the dimensions."""
        cost = self.cost if cost is None else cost
        temperatures = self.member_temperatures(a, b, cost)
        parts = [member._candidates(a, b, cost) for member in self._active(a, b)]
        rows_a, rows_b = parts[0][0], parts[0][3]
        for k, part in enumerate(parts[1:], 1):
            if not (np.array_equal(part[0], rows_a) and np.array_equal(part[3], rows_b)):
                raise RuntimeError(f"member {k} matches other rows of {a!r} and {b!r} than member 0")
        side_a = [_tempered(p[1], p[2], T, cost) for p, T in zip(parts, temperatures)]
        side_b = [_tempered(p[4], p[5], T, cost) for p, T in zip(parts, temperatures)]
        ma, va = np.hstack([m for m, _ in side_a]), np.hstack([v for _, v in side_a])
        mb, vb = np.hstack([m for m, _ in side_b]), np.hstack([v for _, v in side_b])
        return rows_a, ma, va, rows_b, mb, vb, np.arange(ma.shape[1])

    def _shared_posteriors(self, a, b):
        return self._candidates(a, b, self.cost)

    def _misfit_for(self, a, b, cost=None):
        return None  # each member's misfit is inside its coordinates (_candidates)

    def _anchor_pool(self, a, b, cost=None, calibration: bool = False, rows=None, held_out: bool = False):
        """Every member's pool (:meth:`MAD._anchor_pool`: the unaligned rows, or ``rows``, then the anchor pairs
        inferred again from each view alone, or with ``held_out`` held out of continuations of each member's fit;
        ``calibration``: those each member's temperature is fitted on, :meth:`MAD._calibration_pool`), tempered
        and concatenated along the dimensions."""
        cost = self.cost if cost is None else cost
        temperatures = self.member_temperatures(a, b, cost)
        self._hold_out_anchors(a, b, [member for member in self._active(a, b) if (
            member.calibration_pairs == "held_out" if calibration else held_out)])
        pools = [member._calibration_pool(a, b, cost) if calibration else
                 member._anchor_pool(a, b, cost, held_out=held_out, rows=rows) for member in self._active(a, b)]
        true_a, true_b = pools[0][2], pools[0][3]
        side_a = [_tempered(*pool[0], T, cost) for pool, T in zip(pools, temperatures)]
        side_b = [_tempered(*pool[1], T, cost) for pool, T in zip(pools, temperatures)]
        return ((np.hstack([m for m, _ in side_a]), np.hstack([v for _, v in side_a])),
                (np.hstack([m for m, _ in side_b]), np.hstack([v for _, v in side_b])), true_a, true_b)

    def _calibration_pool(self, a, b, cost=None):
        return self._anchor_pool(a, b, cost, calibration=True)

    def _indices(self, members: list) -> list[int]:
        """The places of ``members`` (fitted members, by identity) in the pool, as a warning names them."""
        return [next(k for k, member in enumerate(self.estimators_) if member is m) for m in members]

    def _calibrate_members(self, a, b, cost) -> None:
        """Fit the temperature of every member between a and b that fits it on the anchors and has not yet
        (:meth:`MAD.calibrate_temperature`), in ``n_jobs`` processes at once when set; each member keeps what its
        worker computed (the temperature, the re-inferred or held-out anchors, the misfit)."""
        todo = [member for member in self._active(a, b)
                if member.temperature == "anchors" and (a, b, cost) not in member.calibration_]
        if len(todo) > 1 and self.n_jobs not in (None, 1):
            for member, (caches, _, _) in zip(todo, self._each_member(_calibrated_member, todo,
                                                                      [(a, b, cost)] * len(todo),
                                                                      self._indices(todo))):
                for name, entries in caches.items():
                    getattr(member, name).update(entries)

    def _hold_out_anchors(self, a, b, members: list) -> None:
        """Place the anchor pairs held out of continuations of each of ``members``' fits that has not yet
        (:meth:`MAD._held_out_pairs`, cached in the member), in ``n_jobs`` processes at once when set."""
        todo = [member for member in members if (a, b) not in member._held_out]
        if len(todo) > 1 and self.n_jobs not in (None, 1):
            for member, (pairs, _, _) in zip(todo, self._each_member(_held_out_member, todo, [(a, b)] * len(todo),
                                                                     self._indices(todo))):
                member._held_out[(a, b)] = pairs

    def _calibration_method(self) -> str:
        """The members' calibration pairs (each member's ``calibration_pairs``)."""
        return " + ".join(sorted({member._calibration_method() for member in self.estimators_}))

    def _match_embedding(self, a, b, cost):
        """Every row of a and b in the members' compared coordinates, tempered and concatenated."""
        temperatures = self.member_temperatures(a, b, cost)
        means, variances = {a: [], b: []}, {a: [], b: []}
        for member, T in zip(self._active(a, b), temperatures):
            embedding, dims = member._match_embedding(a, b, cost)
            for view in (a, b):
                mean, var = _tempered(embedding.means[view][:, dims], embedding.variance_of(view)[:, dims], T, cost)
                means[view].append(mean)
                variances[view].append(var)
        pooled = LatentEmbedding({v: np.hstack(means[v]) for v in (a, b)},
                                 {v: np.hstack(variances[v]) for v in (a, b)}, method="mad-ensemble")
        return pooled, np.arange(pooled.means[a].shape[1])

    def _discovered_between(self, a, b):
        return self.estimators_[0]._discovered_between(a, b)  # every member's are the same (_pool, self_train)

    def _align_info(self, a, b, cost, dims) -> dict:
        active = self._active(a, b)
        return {"members": len(active), "members_left_out": len(self.estimators_) - len(active),
                "member_latent_dims": [int(m.latent_dim) for m in active],
                "member_starts": [_starts_of(m) for m in active],
                "member_shared_dims": [len(m.shared_dims(a, b)) for m in active],
                "member_temperatures": self.member_temperatures(a, b, cost),
                "member_misfit": [m._misfit_for(a, b, cost) is not None for m in active]}
