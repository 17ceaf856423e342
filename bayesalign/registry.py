"""The table of alignment methods by name, and one way to run any of them to an ``Alignment``.

The command line (``bayesalign align --method NAME``) and the comparison suite both go through
:func:`run_method`, so every method is run, matched and timed the same way:

* embedding methods (the spectral baselines of ``bayesalign.spectral`` and
  :class:`bayesalign.pipelines.MRDProcrustes`) give a ``LatentEmbedding``; the not-anchored rows of
  each pair of views are matched in it by :func:`bayesalign.matching.match` (Hungarian on squared
  Euclidean distances, Sinkhorn probabilities at the median nearest cost);
* ``mad`` (Damianou, Lawrence & Ek 2016): ``MAD.fit(problem).align(a, b, matcher, cost)``, with its own
  probabilities. ``mad-<matcher>-<cost>`` names each combination for the comparison suite;
  ``mad-ensemble`` is :class:`bayesalign.MADEnsemble` (several MAD fits pooled; no latent coordinates);
* coupling methods (the optimal-transport aligners of ``bayesalign.transport``): the not-anchored rows
  are matched by the coupling itself, the matching with the most expected correct pairs under its rows
  normalised (:func:`bayesalign.matching.marginal_assignment`), each pair's probability its entry there.

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
from .matching import COSTS, MATCHERS, candidate_rows, marginal_assignment, match

#: MAD's matchers and costs (``bayesalign.matching`` owns them; importing it needs no torch).
MAD_MATCHERS = MATCHERS
MAD_COSTS = COSTS


class UnknownMethodError(ValueError):
    """A method name that is not in :data:`METHODS` (the message lists the known ones)."""


@dataclass(frozen=True)
class MethodSpec:
    """One entry of the method table.

    ``target`` is ``"module:Class"``; ``kind`` says how it runs: ``"embedding"`` (fit -> embedding_,
    then matched) or ``"mad"`` (fit, then its own ``align``). ``options`` are constructor or ``align`` keywords
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


def _transport(name, cls, summary, paper, **options) -> MethodSpec:
    return MethodSpec(name, f"bayesalign.transport:{cls}", "coupling", summary, paper, options, probabilistic=True)


_CHAPTER = "Wang, Krafft & Mahadevan 2011 (manifold alignment chapter)"
_ENTRIES = [
    _spectral("joint-laplacian", "JointLaplacianAlignment", "instance-level joint Laplacian eigenmaps",
              f"{_CHAPTER}, sec. 5.2"),
    _spectral("linear", "LinearAlignment", "feature-level alignment (manifold projections)",
              f"{_CHAPTER}, sec. 5.3.1"),
    _spectral("procrustes", "ProcrustesAlignment", "Laplacian eigenmaps per view + Procrustes on the anchors",
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
    _transport("gw", "GromovWassersteinAlignment", "no anchors needed: entropic Gromov-Wasserstein between k-NN "
               "geodesic distances, barycentric projection", "Demetci et al. 2022 (SCOT)"),
    _transport("gw-semirelaxed", "GromovWassersteinAlignment", "semi-relaxed entropic GW (view b's marginal free)",
               "Vincent-Cuaz et al. 2022", marginals="semi-relaxed"),
    _transport("fused-gw", "FusedGromovWassersteinAlignment", "entropic fused GW, anchors as a feature cost and "
               "as fixed mass", "Vayer et al. 2019; Demetci et al. 2022"),
    _transport("fused-gw-semirelaxed", "FusedGromovWassersteinAlignment", "semi-relaxed fused GW with anchors",
               "Vincent-Cuaz et al. 2022", marginals="semi-relaxed"),
    MethodSpec("mrd-procrustes", "bayesalign.pipelines:MRDProcrustes", "embedding",
               "Bayesian GP-LVM per view + Procrustes on the anchors",
               "Titsias & Lawrence 2010; Wang & Mahadevan 2008", bayesian=True,
               requires=("bayesalign.gp:BayesianGPLVM", "bayesalign.spectral:ProcrustesAlignment")),
    MethodSpec("mad", "bayesalign.mad:MAD", "mad", "partially observed MRD over every row, the posteriors "
               "matched (--matcher, --cost)", "Damianou, Lawrence & Ek 2016", probabilistic=True, bayesian=True),
]
_ENTRIES += [MethodSpec(f"mad-{m}-{c}", "bayesalign.mad:MAD", "mad", f"MAD, {m} matcher, {c} cost",
                        "Damianou, Lawrence & Ek 2016", {"matcher": m, "cost": c}, True, True)
             for m in MAD_MATCHERS for c in MAD_COSTS]
_ENTRIES += [MethodSpec("mad-ensemble", "bayesalign.mad:MADEnsemble", "mad",
                        "MAD fits of 10 and 20 latent dimensions on centred and standardised views, their tempered "
                        "match likelihoods pooled "
                        "(--set latent_dims=..., scalings=..., member_options=...)",
                        "Damianou, Lawrence & Ek 2016; Hinton 2002 (product of experts)", probabilistic=True,
                        bayesian=True)]

METHODS: dict[str, MethodSpec] = {spec.name: spec for spec in _ENTRIES}
"""Every method by name (see the module docstring)."""

#: The methods ``bayesalign compare`` runs by default: every spectral class, MRD+Procrustes and MAD
#: with each matcher and cost (the bare ``mad`` entry is the CLI's configurable one; ``mad-ensemble``, four MAD
#: fits, is asked for by name).
COMPARE_METHODS = tuple(n for n in METHODS if n not in ("mad", "local-patterns", "mad-ensemble", "gw-semirelaxed",
                                                         "fused-gw-semirelaxed"))


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


#: Parameters through which a composite estimator forwards keywords to the model inside it.
_FORWARDING = ("engine_options", "gplvm_options")


def _build(cls, latent_dim=None, seed=None, device=None, progress=None, **options):
    """Construct ``cls`` mapping the common settings onto its own parameter names; options it does not
    take go to its forwarding dict (``engine_options`` of MAD, ``gplvm_options`` of MRDProcrustes)."""
    accepted, named = _accepted(cls), _named_parameters(cls)
    sink = next((name for name in _FORWARDING if name in named), None)
    kwargs = {}

    def put(value, *names):
        # only the class's own parameter names: a **kwargs catch-all may forward to something else
        if value is None:
            return
        for name in names:
            if name in named:
                kwargs[name] = value
                return

    if latent_dim is not None and "latent_dims" in named:
        raise ValueError(f"{cls.__name__} pools fits of several latent dimensions: give them as the option "
                         "latent_dims (--set latent_dims=10,20), not one latent_dim")
    put(latent_dim, "n_components", "latent_dim")
    put(seed, "seed", "random_state")
    put(device, "device")
    put(progress, "progress", "verbose")
    for key, value in options.items():
        if sink is not None and key not in named:
            kwargs.setdefault(sink, {})[key] = value
            continue
        if accepted is not None and key not in accepted:
            raise ValueError(f"{cls.__name__} has no option {key!r}; its options are {sorted(accepted)}")
        kwargs[key] = value
    return cls(**kwargs)


# Matching an embedding ---------------------------------------------------------------------
def match_embedding(embedding: LatentEmbedding, problem: AlignmentProblem, a: str, b: str,
                    cost_limit: float | None = None, method: str = "", temperature: float | None = None):
    """Match the not-anchored rows of views a and b in an embedding: :func:`bayesalign.matching.match`
    (Hungarian on squared distances, Sinkhorn probabilities); kept for existing callers."""
    return match(embedding, problem, a, b, cost_limit=cost_limit, temperature=temperature, method=method)


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
    if spec.kind == "embedding":
        model = _embedding_model(spec, latent_dim, seed, device, progress, options).fit(problem)
        embedding = model.embedding_
        from sklearn.base import clone

        from .matching.calibration import calibrated_match
        from .spectral import SpectralAlignment

        if isinstance(model, SpectralAlignment):  # probabilities fitted on anchors held out of refits
            def refit(fold_problem, model=model):
                return clone(model).fit(fold_problem).embedding_

            alignments = {(a, b): calibrated_match(refit, embedding, problem, a, b, cost_limit=cost_limit,
                                                   method=name, seed=seed if isinstance(seed, int) else 0)
                          for a, b in pairs}
        else:
            alignments = {(a, b): match(embedding, problem, a, b, cost_limit=cost_limit, method=name)
                          for a, b in pairs}
    elif spec.kind == "coupling":
        model = _embedding_model(spec, latent_dim, seed, device, progress, options).fit(problem)
        embedding = model.embedding_
        alignments = {(a, b): coupling_alignment(model, problem, a, b, cost_limit, name) for a, b in pairs}
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
        embedding = getattr(model, "embedding_", None)  # a MADEnsemble has no single latent space
    return MethodResult(name, alignments, embedding, time.perf_counter() - start, model)


def coupling_alignment(model, problem: AlignmentProblem, a: str, b: str, cost_limit=None, method: str = ""):
    """Match the not-anchored rows of views a and b by a fitted transport model's ``match_probabilities``:
    the matching with the most expected correct pairs (every row of the smaller side matched; with
    ``cost_limit``, only pairs whose probability exceeds ``1 - cost_limit``, the cost of a pair being
    ``1 - P``)."""
    rows_a, rows_b = candidate_rows(problem, a, b)
    P = model.match_probabilities(a, b)[np.ix_(rows_a, rows_b)]  # [n_a', n_b']
    P = P / np.maximum(P.sum(axis=1, keepdims=True), np.finfo(float).tiny)  # a row's mass among the candidates
    if cost_limit is None:
        local = marginal_assignment(P, views=(a, b), match_all=True)
    else:
        local = marginal_assignment(P, views=(a, b), min_probability=max(0.0, 1.0 - float(cost_limit)))
    return Alignment((a, b), rows_a[local.index_a], rows_b[local.index_b], local.costs, local.probabilities,
                     n_a=problem.views.n_samples[a], n_b=problem.views.n_samples[b], candidates_a=rows_a,
                     candidates_b=rows_b, method=method, info={"matcher": "coupling", "setting": model.setting_})


def mad_embedding(model, problem: AlignmentProblem | None = None) -> LatentEmbedding:
    """A fitted MAD's latent coordinates of every row: ``model.embedding_`` (kept for existing callers)."""
    return model.embedding_


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


def _embedding_model(spec: MethodSpec, latent_dim, seed, device, progress, options):
    cls = spec.load()
    if spec.name == "local-patterns":
        from .spectral import JointLaplacianAlignment

        return cls(_build(JointLaplacianAlignment, latent_dim, seed), **options)
    if spec.name == "mrd-procrustes":
        return _build(cls, latent_dim or 2, seed, device, progress, **spec.options, **options)
    return _build(cls, latent_dim, seed, device, None, **spec.options, **options)
