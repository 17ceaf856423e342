r"""MADEnsemble: several MAD fits of one problem, their match likelihoods pooled into one (a product of experts).

The bound of MRD is multimodal, and the fit a MAD keeps depends on its settings (``latent_dim``, the scaling of the
views): fits that err differently align better pooled. Each member f gives a candidate pair (i, j) its tempered
match likelihood :math:`p_f(i \leftrightarrow j) \propto \exp(-C^f_{ij} / T_f)`; the ensemble multiplies them, the
logarithmic opinion pool with equal weights (Genest & Zidek 1986; a product of experts, Hinton 2002):

.. math:: C_{ij} = -\sum_f \log N\big(\mu^f_i - \mu^f_j;\ 0,\ T_f (S^f_i + S^f_j + \Sigma^f_\tau)\big),
          \qquad P = \mathrm{Sinkhorn}(\exp(-C / T)),

the likelihood cost in the concatenation of the members' compared coordinates with member f's variances times
:math:`T_f` (for the mean cost exactly :math:`\sum_f \lVert \mu^f_i - \mu^f_j \rVert^2 / T_f`), so every matcher of
MAD works on the pool unchanged. The members see the same rows, so the plain product is overconfident: the pool's
own T is fitted on the anchors again. The ensemble uses its members' public interface only.
"""

from __future__ import annotations

import copy
import time
import warnings

import numpy as np
from sklearn.base import BaseEstimator, clone

from .._utils import ctrl_c_held, user_stacklevel
from ..data import AlignmentProblem, LatentEmbedding
from ..matching import COSTS
from .calibration import check_temperature
from .estimator import MAD
from .posteriors import AnchorPool, MatchPosteriors, PosteriorAligner
from .self_training import check_self_training, self_train

__all__ = ["SCALINGS", "MADEnsemble"]

#: How the default members see the views: centred (MAD's ``standardize=False``) or standardised.
SCALINGS = ("centred", "standardised")


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
    """A member's compared coordinates tempered by T: for the likelihood cost the variances times T, for the mean
    cost the coordinates over sqrt(T) (its cost divided by T)."""
    if cost == "likelihood":
        return mean, var * temperature
    scale = 1.0 / np.sqrt(temperature)
    return mean * scale, var * scale ** 2


def _check_scalings(scalings) -> tuple:
    """``scalings`` as a non-empty tuple of names of ``SCALINGS`` (a string may list them with commas)."""
    if isinstance(scalings, str):
        scalings = [name.strip() for name in scalings.split(",") if name.strip()]
    names = tuple(scalings) if scalings is not None else ()
    if not names or any(name not in SCALINGS for name in names) or len(set(names)) < len(names):
        raise ValueError(f"scalings must name one or both of {SCALINGS}, each once, got {scalings!r}")
    return names


def _describe(member) -> str:
    """A member as its warnings name it."""
    return f"latent_dim {member.latent_dim}{', standardised' if member.standardize else ''}"


def _discovered_pairs(model) -> dict:
    """The pairs a fitted MAD discovered: {(a, b) in sorted order: {(i, j), ...}}."""
    out = {}
    for (a, b), found in model.discovered_.items():
        pairs = zip(found["index_a"].tolist(), found["index_b"].tolist())
        if b < a:
            a, b, pairs = b, a, ((j, i) for i, j in pairs)
        out.setdefault((a, b), set()).update(pairs)
    return {key: pairs for key, pairs in out.items() if pairs}


def _recorded(function, record: bool):
    """(function(), seconds, its warnings as (category, message) when ``record``)."""
    start = time.perf_counter()
    with warnings.catch_warnings(record=record) as caught:
        if record:
            warnings.simplefilter("default")
        result = function()
    return result, time.perf_counter() - start, [(w.category, str(w.message)) for w in caught or []]


def _fit_member(member, problem, calibrate, record: bool):
    """A member fitted (and its temperature between ``calibrate`` = (a, b, cost) fitted), in this process or a
    worker's."""
    def run():
        member.fit(problem)
        if calibrate is not None and len(member.shared_dims(*calibrate[:2])):
            member.calibrate_temperature(*calibrate)
        return member
    return _recorded(run, record)


def _tie_member(member, a, b, index_a, index_b, probability, cost, round_, record: bool):
    """A copy of ``member`` with the pairs tied and refitted (the member given is kept, for a round undone); a refit
    that stopped early is warned, as a MAD's own self-training does."""
    def run():
        tied = copy.copy(member).tie(a, b, index_a, index_b, probability, cost, round_)
        tied._report_convergence()
        return tied
    return _recorded(run, record)


def _calibrated_member(member, a, b, cost, record: bool):
    """``member`` with its temperature between a and b fitted."""
    return _recorded(lambda: (member.calibrate_temperature(a, b, cost), member)[1], record)


def _held_out_member(member, a, b, record: bool):
    """``member`` with its anchor pairs between a and b held out of continuations of its fit."""
    return _recorded(lambda: (member.anchor_posteriors(a, b, held_out=True), member)[1], record)


class MADEnsemble(PosteriorAligner, BaseEstimator):
    """Several MAD fits of the same problem pooled into one match distribution (see the module docstring).

    Parameters
    ----------
    estimators : sequence of MAD, optional
        The members, fitted by :meth:`fit` (each a clone). Default: one :class:`bayesalign.MAD` per entry of
        ``latent_dims`` and of ``scalings``.
    latent_dims : sequence of int
        With ``estimators=None``: the members' latent dimensions.
    scalings : sequence of {"centred", "standardised"}
        With ``estimators=None``: each member above once on the centred and once on the standardised views.
    cost : {"likelihood", "mean"}
        The members' cost that is pooled, and the default of :meth:`align`.
    temperature : {"anchors", "posterior"} or float
        T of the pooled probabilities: fitted on the anchors (default), 1 ("posterior") or a number.
    seed : int, optional
    progress : bool
    member_options : dict, optional
        With ``estimators=None``: further keywords of every default member (those MAD does not take go to its
        ``engine_options``, e.g. ``{"num_inducing": 50, "max_iter": 500}``).
    device : str, optional
    n_jobs : int, optional
        Members fitted at once, each in its own process (joblib's loky backend; -1: one per core), and so are their
        temperature fits, self-training's refits and held-out continuations. None or 1: one after the other.

    Attributes
    ----------
    estimators_ : list of MAD
    problem_ : AlignmentProblem
    converged_ : bool
        Whether every member converged (each warns when not).
    calibration_ : dict (a, b, cost) -> dict
    timings_ : dict
        ``member_seconds``, ``fit_seconds`` (their sum), ``wall_seconds``.
    self_training_history_ : list of dict
    """

    def __init__(self, estimators=None, latent_dims=(10, 20), scalings=SCALINGS, cost: str = "likelihood",
                 temperature: float | str | None = "anchors", seed=None, progress: bool = False,
                 member_options: dict | None = None, device=None, n_jobs=None):
        self.estimators = estimators
        self.latent_dims = latent_dims
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
        check_temperature(self.temperature)
        if self.estimators is None:
            dims = list(np.atleast_1d(self.latent_dims)) if self.latent_dims is not None else []
            if not dims or any(isinstance(q, (bool, np.bool_)) or not float(q).is_integer() or int(q) < 1
                               for q in dims):
                raise ValueError(f"latent_dims must be positive integers, got {self.latent_dims!r}")
            _check_scalings(self.scalings)
        elif not self.estimators:
            raise ValueError("estimators is empty: an ensemble needs at least one MAD")
        if self.n_jobs is not None and (isinstance(self.n_jobs, (bool, np.bool_)) or not isinstance(
                self.n_jobs, (int, np.integer)) or self.n_jobs == 0):
            raise ValueError(f"n_jobs must be a non-zero integer (-1: one per core) or None, got {self.n_jobs!r}")

    def _members(self) -> list:
        """Unfitted clones of the members."""
        device = {} if self.device is None else {"device": self.device}
        if self.estimators is None:
            options = dict(self.member_options or {})
            fixed = {"latent_dim", "seed", "progress", "device", "standardize"} & set(options)
            if fixed:
                raise ValueError(f"member_options cannot set {sorted(fixed)}: the ensemble's latent_dims, seed, "
                                 "progress, device and scalings do")
            engine = {k: options.pop(k) for k in list(options) if k not in MAD._get_param_names()}
            if engine:
                options["engine_options"] = {**(options.get("engine_options") or {}), **engine}
            common = {"seed": self.seed, "progress": self.progress, **device, **options}
            return [MAD(latent_dim=int(q), standardize=scaling == "standardised", **common)
                    for scaling in _check_scalings(self.scalings) for q in np.atleast_1d(self.latent_dims)]
        if self.member_options or set(_check_scalings(self.scalings)) != set(SCALINGS):
            raise ValueError("member_options and scalings set the default members; with estimators given, set them "
                             "there")
        for k, member in enumerate(self.estimators):
            if not isinstance(member, MAD):
                raise TypeError(f"estimators[{k}] is a {type(member).__name__}, not a MAD")
        return [clone(member).set_params(**device) for member in self.estimators]

    def fit(self, problem: AlignmentProblem, y=None) -> MADEnsemble:
        """Fit every member on ``problem`` (which needs anchors; not modified), then pool them (the members'
        temperatures are fitted at their first use; with ``n_jobs``, by each worker right after its fit)."""
        self._check_params()
        if not isinstance(problem, AlignmentProblem):
            raise TypeError(f"MADEnsemble.fit expects an AlignmentProblem, got {type(problem).__name__}")
        if not sum(len(corr) for corr in problem.anchors.values()):
            raise ValueError("MADEnsemble pools fits of a problem with anchors; this one has none (MAD bootstraps "
                             "anchors without supervision: fit a single MAD)")
        members, start = self._members(), time.perf_counter()
        calibrate = None if self.n_jobs in (None, 1) else (*problem.views.names[:2], self.cost)
        fitted = self._each_member(_fit_member, members, [(problem, calibrate)] * len(members))
        self._pool([m for m, _, _ in fitted], problem)
        seconds = [t for _, t, _ in fitted]
        self.timings_ = {"member_seconds": seconds, "fit_seconds": float(sum(seconds)),
                         "wall_seconds": time.perf_counter() - start}
        return self

    def _each_member(self, function, members: list, arguments: list) -> list:
        """``function(member, *arguments[k], record)`` for every member, here one after the other or in ``n_jobs``
        worker processes, whose recorded warnings are issued here naming the member."""
        jobs = 1 if self.n_jobs is None else int(self.n_jobs)
        if jobs == 1 or len(members) == 1:
            return [function(member, *args, False) for member, args in zip(members, arguments)]
        from joblib import Parallel, delayed

        jobs = len(members) if jobs < 0 else min(jobs, len(members))
        with ctrl_c_held():  # the workers start deaf to a terminal's Ctrl-C; this process takes it after
            running = Parallel(n_jobs=jobs, backend="loky", return_as="generator")(
                delayed(function)(member, *args, True) for member, args in zip(members, arguments))
        out = list(running)
        for member, result in zip(members, out):
            index = next((k for k, m in enumerate(getattr(self, "estimators_", members)) if m is member),
                         members.index(member))
            for category, message in result[2]:
                warnings.warn(f"member {index} ({_describe(member)}): {message}", category,
                              stacklevel=user_stacklevel())
        return out

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
        self.estimators_ = list(members)
        self.self_training_history_ = []
        self.problem_ = problem
        self.converged_ = all(bool(m.converged_) for m in members)
        self.calibration_, self._calibration_potentials, self._warned, self._held_out = {}, {}, set(), set()

    @classmethod
    def from_fitted(cls, models, cost: str = "likelihood", temperature: float | str | None = "anchors",
                    seed=None, progress: bool = False) -> MADEnsemble:
        """Pool MADs already fitted on the same problem (used as they are, not copied)."""
        models = list(models)
        if not models:
            raise ValueError("from_fitted needs at least one fitted MAD")
        for k, model in enumerate(models):
            if not isinstance(model, MAD):
                raise TypeError(f"models[{k}] is a {type(model).__name__}, not a MAD")
            model._check_fitted()
        ensemble = cls(estimators=[clone(m) for m in models], latent_dims=[int(m.latent_dim) for m in models],
                       cost=cost, temperature=temperature, seed=seed, progress=progress)
        ensemble._check_params()
        ensemble._pool(models, models[0].problem_)
        seconds = [float(m.timings_.get("total_seconds", np.nan)) for m in models]
        ensemble.timings_ = {"member_seconds": seconds, "fit_seconds": float(np.sum(seconds))}
        return ensemble

    # -- self-training ---------------------------------------------------------------------
    def self_train(self, confidence_threshold: float = 0.9, max_rounds: int = 5) -> MADEnsemble:
        """Tie the pairs the pool is sure of in every member and refit them, round after round (two views; the
        pooled match distribution in the E-step, each member's own bound in the M-step;
        :mod:`bayesalign.mad.self_training`)."""
        self._check_fitted()
        check_self_training(self.problem_, confidence_threshold, max_rounds)
        start = time.perf_counter()
        self_train(self, confidence_threshold, max_rounds)
        self.timings_["self_training_seconds"] = (self.timings_.get("self_training_seconds", 0.0)
                                                  + time.perf_counter() - start)
        return self

    def tie(self, a, b, index_a, index_b, probability, cost, round_: int = 0) -> MADEnsemble:
        """Tie the pairs in a copy of every member and refit them; the pool's temperatures are fitted again."""
        arguments = [(a, b, index_a, index_b, probability, cost, round_)] * len(self.estimators_)
        self.estimators_ = [member for member, _, _ in self._each_member(_tie_member, self.estimators_, arguments)]
        self.converged_ = all(bool(m.converged_) for m in self.estimators_)
        self.calibration_, self._calibration_potentials = {}, {}
        return self

    # -- what the matcher compares ---------------------------------------------------------
    @property
    def embedding_(self) -> LatentEmbedding:
        """Every row of the first two views in the pooled coordinates (the members' tempered compared coordinates,
        concatenated)."""
        self._check_fitted()
        p = self.posteriors()
        return LatentEmbedding(p.embedding.means, p.embedding.variances, method="mad-ensemble")

    def _active(self, a, b) -> list:
        """The members whose fit left views a and b a shared dimension (any other is left out, warned once)."""
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

    def _replace(self, done: list) -> None:
        """Put members returned by workers (with what they computed) in place of the ones sent."""
        for old, (new, _, _) in done:
            self.estimators_[next(k for k, m in enumerate(self.estimators_) if m is old)] = new

    def member_temperatures(self, a=None, b=None, cost: str | None = None) -> list[float]:
        """T_f of every member that matches views a and b (fitted on the anchors by each member, in ``n_jobs``
        processes at once where set)."""
        a, b = self._pair(a, b)
        cost = self._cost(cost)
        todo = [member for member in self._active(a, b) if (a, b, cost) not in member.calibration_]
        if len(todo) > 1 and self.n_jobs not in (None, 1):
            self._replace(list(zip(todo, self._each_member(_calibrated_member, todo, [(a, b, cost)] * len(todo)))))
        return [float(member.calibrate_temperature(a, b, cost)) for member in self._active(a, b)]

    def posteriors(self, a=None, b=None, cost: str | None = None) -> MatchPosteriors:
        """The rows still to match with every active member's compared coordinates tempered by its T_f and
        concatenated."""
        a, b = self._pair(a, b)
        cost = self._cost(cost)
        temperatures = self.member_temperatures(a, b, cost)
        active = self._active(a, b)
        parts = [member.posteriors(a, b, cost) for member in active]
        first = parts[0]
        for k, part in enumerate(parts[1:], 1):
            if not (np.array_equal(part.rows_a, first.rows_a) and np.array_equal(part.rows_b, first.rows_b)):
                raise RuntimeError(f"member {k} matches other rows of {a!r} and {b!r} than member 0")
        side = {key: [_tempered(getattr(p, f"mean_{key}"), getattr(p, f"var_{key}"), T, cost)
                      for p, T in zip(parts, temperatures)] for key in "ab"}
        every = {v: [_tempered(p.embedding.means[v], p.embedding.variance_of(v), T, cost)
                     for p, T in zip(parts, temperatures)] for v in (a, b)}
        embedding = LatentEmbedding({v: np.hstack([m for m, _ in every[v]]) for v in (a, b)},
                                    {v: np.hstack([s for _, s in every[v]]) for v in (a, b)}, method="mad-ensemble")
        info = {"members": len(active), "members_left_out": len(self.estimators_) - len(active),
                "member_latent_dims": [int(m.latent_dim) for m in active],
                "member_shared_dims": [len(m.shared_dims(a, b)) for m in active],
                "member_temperatures": temperatures, "member_misfit": [p.info.get("misfit") for p in parts]}
        return MatchPosteriors((a, b), first.rows_a, np.hstack([m for m, _ in side["a"]]),
                               np.hstack([s for _, s in side["a"]]), first.rows_b,
                               np.hstack([m for m, _ in side["b"]]), np.hstack([s for _, s in side["b"]]),
                               embedding, first.discovered, info)

    def anchor_pool(self, a=None, b=None, cost: str | None = None, rows=None, held_out: bool = False):
        """Every active member's anchor pool, tempered by its T_f and concatenated (None without anchor pairs)."""
        a, b = self._pair(a, b)
        cost = self._cost(cost)
        temperatures = self.member_temperatures(a, b, cost)
        if held_out:
            todo = [m for m in self._active(a, b) if (id(m), a, b) not in self._held_out]
            if len(todo) > 1 and self.n_jobs not in (None, 1):
                self._replace(list(zip(todo, self._each_member(_held_out_member, todo, [(a, b)] * len(todo)))))
            self._held_out |= {(id(m), a, b) for m in self._active(a, b)}
        pools = [member.anchor_pool(a, b, cost, rows=rows, held_out=held_out) for member in self._active(a, b)]
        if pools[0] is None:
            return None
        side_a = [_tempered(p.mean_a, p.var_a, T, cost) for p, T in zip(pools, temperatures)]
        side_b = [_tempered(p.mean_b, p.var_b, T, cost) for p, T in zip(pools, temperatures)]
        return AnchorPool(np.hstack([m for m, _ in side_a]), np.hstack([v for _, v in side_a]),
                          np.hstack([m for m, _ in side_b]), np.hstack([v for _, v in side_b]),
                          pools[0].true_a, pools[0].true_b)
