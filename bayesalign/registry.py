"""The table of alignment methods by name, and one way to run any of them to an ``Alignment``.

The command line (``bayesalign align --method NAME``) and the comparison suite both go through
:func:`run_method`, so every method is run, matched and timed the same way:

* spectral methods (``bayesalign.spectral``, deterministic) give a ``LatentEmbedding``; the
  not-anchored rows of each pair of views are matched by the Hungarian algorithm on squared
  Euclidean distances in it, and each pair gets the Sinkhorn marginal of ``exp(-cost / T)`` as its
  probability, with the temperature T the median distance from a row to its nearest candidate
  (a scale-free choice: a typical nearest match has cost about T; raised by factors of 2 where
  Sinkhorn does not converge at it, so that the probabilities are always proper marginals);
* ``mrd-procrustes``: a Bayesian GP-LVM per view, its latent means superimposed on the anchors by
  Procrustes (Wang & Mahadevan 2008), then matched as above;
* ``mad`` (Damianou, Lawrence & Ek 2016): ``MAD.fit(problem).align(a, b, matcher, cost)``, with its own
  probabilities. ``mad-<matcher>-<cost>`` names each combination for the comparison suite.

Methods whose module is not installed (a partial checkout) are listed but not ``available``.

Examples
--------
>>> "joint-laplacian" in METHODS and "mad" in METHODS
True
>>> get_method("no-such-method")
Traceback (most recent call last):
...
bayesalign.registry.UnknownMethodError: unknown method 'no-such-method'; known methods: ...
"""

from __future__ import annotations

import importlib
import inspect
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .data import Alignment, AlignmentProblem, LatentEmbedding

#: MAD's matchers and costs (the same as ``bayesalign.mad.MATCHERS`` / ``COSTS``, kept here so that the
#: command line starts without importing torch; a test keeps them in step).
MAD_MATCHERS = ("hungarian", "myopic", "sinkhorn", "perturb")
MAD_COSTS = ("likelihood", "mean")


class UnknownMethodError(ValueError):
    """A method name that is not in :data:`METHODS` (the message lists the known ones)."""


@dataclass(frozen=True)
class MethodSpec:
    """One entry of the method table.

    ``target`` is ``"module:Class"``; ``kind`` says how it runs: ``"embedding"`` (fit -> embedding_,
    then matched), ``"mrd-procrustes"`` or ``"mad"``. ``options`` are constructor or ``align`` keywords
    fixed by this entry (e.g. the matcher of ``mad-myopic-mean``).
    """

    name: str
    target: str
    kind: str
    summary: str
    paper: str
    options: dict = field(default_factory=dict)
    probabilistic: bool = False
    bayesian: bool = False
    requires: tuple[str, ...] = ()

    def load(self):
        """The class behind the entry (raises ImportError / AttributeError if it is not there)."""
        module, _, attr = self.target.partition(":")
        return getattr(importlib.import_module(module), attr)

    @property
    def available(self) -> bool:
        """Whether the class (and every other class the entry runs, ``requires``) is importable."""
        for target in (self.target, *self.requires):
            module, _, attr = target.partition(":")
            try:
                getattr(importlib.import_module(module), attr)
            except (ImportError, AttributeError):
                return False
        return True


def _spectral(name, cls, summary, paper, **options) -> MethodSpec:
    return MethodSpec(name, f"bayesalign.spectral:{cls}", "embedding", summary, paper, options)


_CHAPTER = "Wang, Krafft & Mahadevan 2011 (manifold alignment chapter)"
_ENTRIES = [
    _spectral("joint-laplacian", "JointLaplacianAlignment", "instance-level joint Laplacian eigenmaps",
              f"{_CHAPTER}, sec. 5.2"),
    _spectral("linear", "LinearAlignment", "feature-level alignment (manifold projections)",
              f"{_CHAPTER}, sec. 5.3.1"),
    _spectral("procrustes", "ProcrustesAlignment", "LPP per view + Procrustes on the anchors",
              "Wang & Mahadevan 2008 (ICML)"),
    _spectral("global-geometry", "GlobalGeometryAlignment", "alignment preserving global geodesic geometry",
              "Wang & Mahadevan 2013 (IJCAI)"),
    _spectral("multiscale", "MultiscaleAlignment", "diffusion-wavelet multiscale alignment",
              f"{_CHAPTER}, sec. 5.3.3"),
    _spectral("cca", "CCAAlignment", "regularised CCA on the anchors", "baseline in Wang & Mahadevan 2013"),
    _spectral("affine", "AffineAlignment", "affine map between diffusion embeddings, fitted on the anchors",
              "Lafon, Keller & Coifman 2006"),
    _spectral("least-squares", "LeastSquaresAlignment", "least-squares map X F ~ Y on the anchors",
              f"{_CHAPTER}, sec. 5.4.2"),
    _spectral("anchor-similarity", "AnchorSimilarityBaseline", "points as their similarities to the anchors",
              "baseline in Wang & Mahadevan 2013, sec. 4.1"),
    MethodSpec("local-patterns", "bayesalign.spectral:LocalPatternAlignment", "embedding",
               "no anchors: local-pattern correspondence, then joint Laplacian", f"{_CHAPTER}, sec. 5.3.4",
               requires=("bayesalign.spectral:JointLaplacianAlignment",)),
    MethodSpec("mrd-procrustes", "bayesalign.gp:BayesianGPLVM", "mrd-procrustes",
               "Bayesian GP-LVM per view + Procrustes on the anchors",
               "Titsias & Lawrence 2010; Wang & Mahadevan 2008", bayesian=True,
               requires=("bayesalign.spectral:ProcrustesAlignment",)),
    MethodSpec("mad", "bayesalign.mad:MAD", "mad", "MRD on the anchors, posteriors of the rest, matched "
               "(--matcher, --cost)", "Damianou, Lawrence & Ek 2016", probabilistic=True, bayesian=True),
]
_ENTRIES += [MethodSpec(f"mad-{m}-{c}", "bayesalign.mad:MAD", "mad", f"MAD, {m} matcher, {c} cost",
                        "Damianou, Lawrence & Ek 2016", {"matcher": m, "cost": c}, True, True)
             for m in MAD_MATCHERS for c in MAD_COSTS]

METHODS: dict[str, MethodSpec] = {spec.name: spec for spec in _ENTRIES}
"""Every method by name (see the module docstring)."""

#: The methods ``bayesalign compare`` runs by default: every spectral class, MRD+Procrustes and MAD
#: with each matcher and cost (the bare ``mad`` entry is the CLI's configurable one).
COMPARE_METHODS = tuple(n for n in METHODS if n not in ("mad", "local-patterns"))


def get_method(name: str) -> MethodSpec:
    """The entry for ``name``; an :class:`UnknownMethodError` listing the known names otherwise."""
    if name not in METHODS:
        raise UnknownMethodError(f"unknown method {name!r}; known methods: {', '.join(METHODS)}")
    return METHODS[name]


def available_methods() -> list[str]:
    """The names whose implementation is importable in this installation."""
    return [name for name, spec in METHODS.items() if spec.available]


# Construction ------------------------------------------------------------------------------
def _accepted(cls) -> set[str] | None:
    """Keyword names ``cls(...)`` accepts (None: it takes **kwargs)."""
    params = inspect.signature(cls).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return _named_parameters(cls)


def _named_parameters(cls) -> set[str]:
    return {p.name for p in inspect.signature(cls).parameters.values()
            if p.kind not in (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL)}


def _build(cls, latent_dim=None, seed=None, device=None, progress=None, **options):
    """Construct ``cls`` mapping the common settings onto its own parameter names."""
    accepted, named = _accepted(cls), _named_parameters(cls)
    kwargs = {}

    def put(value, *names):
        # only the class's own parameter names: a **kwargs catch-all may forward to something else
        if value is None:
            return
        for name in names:
            if name in named:
                kwargs[name] = value
                return

    put(latent_dim, "n_components", "latent_dim")
    put(seed, "seed", "random_state")
    put(device, "device")
    put(progress, "progress", "verbose")
    for key, value in options.items():
        if accepted is not None and key not in accepted:
            raise ValueError(f"{cls.__name__} has no option {key!r}; its options are {sorted(accepted)}")
        kwargs[key] = value
    return cls(**kwargs)


# Matching an embedding ---------------------------------------------------------------------
def _candidates(problem: AlignmentProblem, a: str, b: str) -> tuple[np.ndarray, np.ndarray]:
    """Rows of a and b that are in no anchor pair between a and b (the rows to be matched)."""
    anchors = problem.anchors_between(a, b)
    rows_a = np.setdiff1d(np.arange(problem.views.n_samples[a]), anchors.index_a)
    rows_b = np.setdiff1d(np.arange(problem.views.n_samples[b]), anchors.index_b)
    return rows_a, rows_b


def _squared_distances(embedding: LatentEmbedding, a, b, rows_a, rows_b) -> np.ndarray:
    """Squared Euclidean distances between rows of a and b in the embedding, as MAD's "mean" cost;
    dense [Na, Nb]: the Hungarian algorithm and Sinkhorn need every entry."""
    za, zb = embedding.means[a][rows_a], embedding.means[b][rows_b]  # [Na, d], [Nb, d]
    return np.maximum((za * za).sum(1)[:, None] + (zb * zb).sum(1)[None, :] - 2.0 * za @ zb.T, 0.0)


#: Largest violation of the marginal constraints for Sinkhorn marginals to be used as probabilities.
SINKHORN_TOLERANCE = 1e-3


def _sinkhorn_marginals(cost, temperature, cost_limit, n_iter: int = 1000) -> np.ndarray | None:
    """Sinkhorn marginals (Na, Nb), or None when they are not converged to ``SINKHORN_TOLERANCE``:
    at temperatures far below the spread of the costs the iterations crawl, and the unconverged
    plan's rows do not sum to one, so its entries are no probabilities."""
    from .matching import sinkhorn_marginals

    marginals, error = sinkhorn_marginals(cost, temperature, cost_limit, tol=SINKHORN_TOLERANCE, n_iter=n_iter)
    return marginals if error <= SINKHORN_TOLERANCE else None


def match_embedding(embedding: LatentEmbedding, problem: AlignmentProblem, a: str, b: str,
                    cost_limit: float | None = None, method: str = "", temperature: float | None = None
                    ) -> Alignment:
    """Match the not-anchored rows of views a and b in a (deterministic) embedding.

    Hungarian assignment on squared Euclidean distances (rectangular when the counts differ;
    pairs above ``cost_limit`` are left unmatched), and per-pair probabilities from the Sinkhorn
    marginals of ``exp(-cost / T)``. ``temperature`` T defaults to the median nearest-candidate
    cost; :func:`run_method` learns it from held-out anchors where there are enough.
    """
    from . import matching

    rows_a, rows_b = _candidates(problem, a, b)
    cost = _squared_distances(embedding, a, b, rows_a, rows_b)  # [Na, Nb]
    n_a, n_b = problem.views.n_samples[a], problem.views.n_samples[b]
    if cost.size == 0:
        return Alignment((a, b), [], [], [], [], n_a=n_a, n_b=n_b, candidates_a=rows_a, candidates_b=rows_b,
                         method=method)
    solved = matching.linear_assignment(cost, cost_limit=cost_limit, views=(a, b))
    ia, ib = solved.index_a, solved.index_b
    source = "given" if temperature is not None else "median nearest cost"
    temperature = _temperature(cost) if temperature is None else float(temperature)
    marginals = _sinkhorn_marginals(cost, temperature, cost_limit, n_iter=2000)  # [Na, Nb]
    raised = 0
    while marginals is None and raised < 40:  # not converged: a higher temperature (less confident)
        temperature, raised = 2.0 * temperature, raised + 1
        marginals = _sinkhorn_marginals(cost, temperature, cost_limit, n_iter=2000)
    if marginals is None:
        raise RuntimeError("Sinkhorn did not converge at any temperature; the costs may be degenerate")
    if raised:
        source += f", raised {2 ** raised}-fold for Sinkhorn to converge"
    return Alignment((a, b), rows_a[ia], rows_b[ib], cost[ia, ib], np.clip(marginals[ia, ib], 0.0, 1.0),
                     n_a=n_a, n_b=n_b, candidates_a=rows_a, candidates_b=rows_b, method=method,
                     info={"temperature": temperature, "temperature_from": source, "matcher": "hungarian",
                           "cost": "squared distance"})


def _temperature(cost: np.ndarray) -> float:
    """The median cost from a point to its nearest candidate (both directions): a typical nearest
    match then has cost about T. A tiny floor keeps it positive when many points coincide."""
    nearest = np.concatenate([cost.min(axis=1), cost.min(axis=0)])
    floor = max(1e-12 * float(cost.max()), np.finfo(float).tiny)
    return max(float(np.median(nearest)), floor)


# Running ----------------------------------------------------------------------------------
@dataclass
class MethodResult:
    """What :func:`run_method` returns: one Alignment per pair of views, the embedding, timing."""

    method: str
    alignments: dict[tuple[str, str], Alignment]
    embedding: LatentEmbedding | None
    seconds: float
    model: object = None


def view_pairs(problem: AlignmentProblem) -> list[tuple[str, str]]:
    names = problem.views.names
    return [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]


def run_method(name: str, problem: AlignmentProblem, *, pairs: Sequence[tuple[str, str]] | None = None,
               latent_dim: int | None = None, seed=0, device: str | None = None, matcher: str | None = None,
               cost: str | None = None, cost_limit: float | None = None, progress: bool | None = None,
               options: dict | None = None, fitted=None) -> MethodResult:
    """Fit method ``name`` on ``problem`` and match every pair of views (or the given ``pairs``).

    Parameters
    ----------
    latent_dim : int, optional
        Latent dimension (``n_components`` / ``latent_dim``); the method's default when None.
    seed, device, progress
        Passed to the methods that take them (``progress`` shows the Bayesian fits' tqdm bars).
    matcher, cost : str, optional
        MAD's matcher and cost (override the entry's); spectral methods always use Hungarian.
    cost_limit : float, optional
        Pairs costlier than this are left unmatched.
    options : dict, optional
        Further constructor keywords of the method's class.
    fitted : MAD, optional
        An already fitted MAD model of this problem: only the matching is run (the comparison suite
        fits once per problem and matches with each matcher and cost).

    Returns
    -------
    MethodResult, with ``seconds`` the wall time of fit + matching.
    """
    spec = get_method(name)
    pairs = list(pairs) if pairs is not None else view_pairs(problem)
    options = dict(options or {})
    start = time.perf_counter()
    if spec.kind in ("embedding", "mrd-procrustes"):
        if spec.kind == "mrd-procrustes":
            model, embedding = _mrd_procrustes(problem, latent_dim, seed, device, progress, options)
        else:
            model = _spectral_model(spec, latent_dim, seed, device, options).fit(problem)
            embedding = model.embedding_
        alignments = {(a, b): match_embedding(embedding, problem, a, b, cost_limit, name) for a, b in pairs}
    else:
        cls = spec.load()
        mad_options = dict(spec.options)
        if matcher is not None:
            mad_options["matcher"] = matcher
        if cost is not None:
            mad_options["cost"] = cost
        model = fitted if fitted is not None else \
            _build(cls, latent_dim, seed, device, progress, **options).fit(problem)
        align_kw = _align_keywords(model.align, mad_options, cost_limit)
        alignments = {(a, b): model.align(a, b, **align_kw) for a, b in pairs}
        embedding = mad_embedding(model, problem)
    return MethodResult(name, alignments, embedding, time.perf_counter() - start, model)


def mad_embedding(model, problem: AlignmentProblem) -> LatentEmbedding:
    """A fitted MAD's latent coordinates of every row as one LatentEmbedding.

    Anchor rows take MRD's q(X) of their anchor group, the other rows their posterior inferred
    from their own view (``posteriors_``); ``shared_dims`` are those shared by the first two views.
    """
    latent = model.model_.latent_
    group_mean = np.asarray(next(iter(latent.means.values())))  # [G, Q], one row per anchor group
    group_var = latent.variance_of(next(iter(latent.means)))  # [G, Q]
    means, variances = {}, {}
    for k, view in enumerate(problem.views.names):
        n, q = problem.views.n_samples[view], group_mean.shape[1]
        means[view], variances[view] = np.zeros((n, q)), np.zeros((n, q))  # [n_v, Q]
        means[view][model.anchors_[:, k]] = group_mean
        variances[view][model.anchors_[:, k]] = group_var
        rows, mean, var = model.posteriors_[view]
        means[view][rows], variances[view][rows] = mean, var
    first = problem.views.names[:2]
    relevance = {v: np.asarray(r).tolist() for v, r in model.relevance_.items()}
    return LatentEmbedding(means, variances, shared_dims=model.shared_dims(*first), method="mad",
                           info={"relevance": relevance, "shared_threshold": model.shared_threshold_})


def _align_keywords(align: Callable, options: dict, cost_limit) -> dict:
    accepted = _accepted(align)
    kwargs = dict(options)
    if cost_limit is not None:
        kwargs["cost_limit"] = cost_limit
    if accepted is not None:
        unknown = set(kwargs) - accepted
        if unknown:
            raise ValueError(f"MAD.align takes no {sorted(unknown)}; it takes {sorted(accepted)}")
    return kwargs


def _spectral_model(spec: MethodSpec, latent_dim, seed, device, options):
    cls = spec.load()
    if spec.name == "local-patterns":
        from .spectral import JointLaplacianAlignment

        return cls(_build(JointLaplacianAlignment, latent_dim, seed), **options)
    return _build(cls, latent_dim, seed, device, None, **spec.options, **options)


def _mrd_procrustes(problem, latent_dim, seed, device, progress, options):
    """A Bayesian GP-LVM on each view alone (all its rows: no anchors needed), then Procrustes on the
    anchors of their latent means. Returns the GP-LVMs and the aligned LatentEmbedding."""
    from .data import Views
    from .gp import BayesianGPLVM
    from .spectral import ProcrustesAlignment

    latent_dim = latent_dim or 2
    models, means = {}, {}
    for view in problem.views.names:
        gplvm = _build(BayesianGPLVM, latent_dim, seed, device, progress, **options)
        models[view] = gplvm.fit(problem.views[view])
        means[view] = np.asarray(next(iter(models[view].latent_.means.values())))  # [n_v, Q]
    procrustes = _build(ProcrustesAlignment, latent_dim, seed, None, None, embedding="none")
    return models, procrustes.fit(problem.replace(views=Views(means))).embedding_
