r"""What MAD's model learns from: the anchors only (the paper) or every row (a partially observed MRD).

- The paper's procedure (``training="anchors"``, Damianou, Lawrence & Ek 2016, eq. 2-4): MRD on the anchor rows,
  then q_v(x) = N(mu, diag S) of every other row of view v from view v's model alone (``MRD.infer``).
- Every row (``training="all_rows"``): one latent point per entity (an anchor group seen by all its views, any other
  row by its own view alone), each view's collapsed bound over the entities it observes, under a graph prior,

  .. math:: \sum_v F_v(Y_v; q(X)[\mathrm{obs}_v]) - \mathrm{KL}(q(X) \,\|\, p(X)),
            \qquad p(X) = N(0, (I + \lambda L)^{-1}),

  with L the Laplacian of the union of the views' kNN graphs over the entities
  (:class:`bayesalign.gp.priors.GraphLaplacianPrior`). q(X) starts from each of ``STARTS``, which race with
  ``START_INDUCING`` inducing inputs; the start with the highest bound grows to ``num_inducing`` and goes on
  (``MRD(race_inducing=...)``). Every stage stops early by MRD's rule (``tol``).

Each function returns the fitted attributes of :class:`bayesalign.MAD` it sets, as a dict.
"""

from __future__ import annotations

import copy
import time
import warnings

import numpy as np

from ..data import AlignmentProblem, Correspondence, LatentEmbedding, Views

__all__ = ["INFER_MAX_ITER", "MIN_ANCHORS", "MIN_RESOLUTION", "N_NEIGHBORS", "STARTS", "embedding", "entity_prior",
           "fit_all_rows", "fit_anchors_only", "mean_filled"]

#: MRD needs a few paired rows to estimate a latent space and its relevance weights.
MIN_ANCHORS = 3
#: A view resolves a latent dimension when its resolution (:attr:`bayesalign.gp.MRD.resolution_`: squared noise
#: standard deviations per latent standard deviation) exceeds this: its outputs move by more than their noise.
MIN_RESOLUTION = 1.0
#: Starts of the all-rows model's q(X): the joint-Laplacian embedding, and MRD's "pca" / "cca" of the anchors.
STARTS = ("joint_laplacian", "pca", "cca")
#: Inducing inputs each start races with (``MRD(race_inducing=...)``; the kept one then grows to ``num_inducing``).
START_INDUCING = 30
#: Fraction of the budget a correspondence round gets (the fitted model going on under its new prior).
ROUND_FRACTION = 0.3
#: Neighbours of each row in its view's kNN graph (the graph prior, the joint-Laplacian start).
N_NEIGHBORS = 10
#: Evaluations of the optimiser that infers q(x) of a row from one view (``MRD.infer``).
INFER_MAX_ITER = 500


def mean_filled(views: Views) -> Views:
    """The views with each missing (NaN) entry replaced by its column's mean: for a start, never a fit."""
    if not any(views.n_missing.values()):
        return views
    return Views({name: np.where(np.isnan(np.asarray(views[name])), np.nanmean(np.asarray(views[name]), 0),
                                 np.asarray(views[name])) for name in views.names})


def _engine_options(mad) -> dict:
    return dict(mad.engine_options or {})


def _anchor_init(train, latent_dim: int, seed):
    """Initial q(X) means of the anchors when PCA of G anchors cannot give ``latent_dim`` components (at most
    min(G - 1, columns)): those components and small random values for the rest, with a warning; else None."""
    from ..gp.initialisation import init_latent, pad_latent

    names = list(train.names)
    centred = [train[n] - train[n].mean(0) for n in names]
    G = centred[0].shape[0]
    limit = min(G - 1, sum(Y.shape[1] for Y in centred))
    if latent_dim <= limit:
        return None
    warnings.warn(f"MAD: {G} anchors allow {limit} PCA dimensions of latent_dim={latent_dim}; the other "
                  f"{latent_dim - limit} start at small random values", RuntimeWarning, stacklevel=5)
    return pad_latent(init_latent("pca", names, centred, limit, seed), latent_dim, seed)  # [G, latent_dim]


def fit_anchors_only(mad, views: Views, groups: np.ndarray) -> dict:
    """The paper's procedure: MRD on the anchor rows (eq. 3), then q_v(x) of the other rows of each view v with view
    v's model only (eq. 4). ``groups`` [G, V]: the anchor groups' rows in each view."""
    from ..gp import MRD

    names = views.names
    train = views.take({v: groups[:, k] for k, v in enumerate(names)})  # paired [G, p_v] views
    options = _engine_options(mad)
    if "init" not in options:  # the paper's (GPy's) PCA, padded when a few anchors give fewer components
        init = _anchor_init(train, int(mad.latent_dim), mad.seed)
        options["init"] = "pca" if init is None else init
    start = time.perf_counter()
    model = MRD(latent_dim=int(mad.latent_dim), num_inducing=min(int(mad.num_inducing), len(groups)),
                kernel=mad.kernel, seed=mad.seed, device=mad.device, progress=mad.progress, **options)
    model._warn_convergence = False  # MAD says once whether the fit it keeps converged
    model.fit(train)
    fitted = time.perf_counter()
    posteriors = {}
    for k, view in enumerate(names):
        rows = np.setdiff1d(np.arange(views.n_samples[view]), groups[:, k])
        mean, var = model.infer(view, views[view][rows], max_iter=INFER_MAX_ITER)  # [n, Q] each
        posteriors[view] = (rows, np.asarray(mean, np.float64), np.asarray(var, np.float64))
    return {"model_": model, "posteriors_": posteriors, "entities_": None, "prior_edges_": None,
            "timings_": {"fit_seconds": fitted - start, "infer_seconds": time.perf_counter() - fitted}}


def training_problem(problem: AlignmentProblem, views: Views, groups: np.ndarray) -> AlignmentProblem:
    """The problem the all-rows model is fitted on: every given pair (an anchor of some of the views is an entity
    those views share) and the groups (given, or found by a bootstrap or self-training)."""
    names = views.names
    anchors = []
    for i, a in enumerate(names):
        for j, b in enumerate(names[i + 1:], i + 1):
            pairs = np.unique(np.vstack([problem.anchors_between(a, b).pairs, groups[:, [i, j]]]), axis=0)
            if len(pairs):
                anchors.append(Correspondence((a, b), pairs[:, 0], pairs[:, 1]))
    return AlignmentProblem(views, anchors=anchors)


def entity_prior(mad, views: Views, rows: dict, n_entities: int, extra_edges=None):
    """p(X) over ``n_entities`` whose rows of each view are ``rows[view]``: the graph prior of the union of the
    views' kNN graphs (when ``mad.latent_prior_`` is "graph"), plus ``extra_edges`` (sparse entities x entities,
    padded to ``n_entities``); None for the standard normal."""
    import scipy.sparse as sp

    from ..gp.priors import GraphLaplacianPrior
    from ..graph import entity_graph, laplacian

    graph = mad.latent_prior_ == "graph"
    if not graph and extra_edges is None:
        return None
    W = None
    if graph:
        W = entity_graph([np.asarray(views[v]) for v in views.names], [rows[v] for v in views.names], n_entities,
                         N_NEIGHBORS)
    if extra_edges is not None:
        extra = sp.csr_matrix(extra_edges, copy=True)
        extra.resize((n_entities, n_entities))
        W = extra if W is None else (W + extra).tocsr()
    return GraphLaplacianPrior(laplacian(W)[0], float(mad.graph_strength))


def _starts(mad, start_problem: AlignmentProblem, names_tried: tuple):
    """The initial q(X) of each start (MRD's own initialisations by name, the joint-Laplacian embedding computed)."""
    from ..spectral import JointLaplacianAlignment

    init = []
    for name in names_tried:
        if name != "joint_laplacian":
            init.append(name)
            continue
        with warnings.catch_warnings():  # the start only: its own warnings (degree spread) are not the fit's
            warnings.simplefilter("ignore")
            init.append(JointLaplacianAlignment(n_components=int(mad.latent_dim), n_neighbors=N_NEIGHBORS).fit(
                start_problem).embedding_)
    return init[0] if len(init) == 1 else tuple(init)


def _starts_record(model, tried: tuple) -> tuple[list, str]:
    """(each start's final bound and whether it was kept, the name of the kept start) from MRD's restarts."""
    labels = list(getattr(model, "restart_inits_", ["embedding" if tried[0] == "joint_laplacian" else tried[0]]))
    bounds = list(getattr(model, "restart_bounds_", [model.elbo()]))
    best = int(getattr(model, "best_restart_", 0))
    named = {("embedding" if t == "joint_laplacian" else t): t for t in tried}
    records = []
    for k, (label, bound) in enumerate(zip(labels, bounds)):
        base = label.split(" (jitter")[0]
        records.append({"start": named.get(base, base) + label[len(base):], "elbo": float(bound), "kept": k == best})
    kept = labels[best].split(" (jitter")[0]
    return records, named.get(kept, kept)


def _same_entities(mad, n_entities: int, rows: dict) -> bool:
    """Whether the fitted all-rows model of ``mad`` has these entities (so it can go on from its parameters)."""
    fitted = getattr(mad, "entities_", None)
    return (getattr(mad, "model_", None) is not None and fitted is not None and fitted[0] == n_entities
            and all(np.array_equal(fitted[1][v], rows[v]) for v in rows))


def fit_all_rows(mad, problem: AlignmentProblem, views: Views, groups: np.ndarray, init=None, extra_edges=None,
                 start=None) -> dict:
    """The all-rows model (see the module docstring) on ``views`` with the anchor ``groups``.

    ``init`` (a LatentEmbedding) replaces the starts (a refit from the current q(X)); ``extra_edges`` are added to
    the graph's weights (soft correspondences; with ``init`` and the fitted model's entities, that model goes on
    under the new prior); ``start`` is the start a previous fit kept (tried alone).
    """
    names = views.names
    arrays = {v: np.asarray(views[v]) for v in names}
    train = training_problem(problem, views, groups)
    n_entities, rows = train.entities()  # one entity per training group, then one per other row
    start_problem = train.replace(views=mean_filled(views))  # the start only sees a missing entry as its mean
    options = _engine_options(mad)
    refit, tried = init is not None, None
    if not refit and "init" not in options:
        tried = (start,) if start is not None else STARTS if mad.engine == "collapsed" else ("joint_laplacian",)
        init = _starts(mad, start_problem, tried)
    if init is not None:
        options["init"] = init
    prior = entity_prior(mad, start_problem.views, rows, n_entities, extra_edges)
    Q, M = int(mad.latent_dim), min(int(mad.num_inducing), n_entities)  # every entity is observed by some view
    common = {"latent_dim": Q, "kernel": mad.kernel, "seed": mad.seed, "device": mad.device, "progress": mad.progress}
    clock = time.perf_counter()
    if mad.engine == "svi":
        from ..gp import StochasticMRD

        if prior is not None:
            options.setdefault("latent_prior", prior)
        model = StochasticMRD(num_inducing=M, **common, **options).fit(arrays, observed=rows)
    else:
        from ..gp import MRD

        budget = int(options.get("max_iter", MRD().max_iter))
        if refit and extra_edges is not None and _same_entities(mad, n_entities, rows):
            # a correspondence round: the fitted model goes on under the new prior, for part of the budget
            model = copy.deepcopy(mad.model_)
            model._warn_convergence = False
            model.continue_fit(max(int(ROUND_FRACTION * budget), 1), latent_prior=prior)
        else:
            options.setdefault("race_inducing", START_INDUCING)
            model = MRD(num_inducing=M, **common, **options)
            model._warn_convergence = False  # a stage: MAD says once whether the kept fit converged
            model.fit(arrays, observed=rows, n_entities=n_entities, latent_prior=prior)
    mean, var = model.entity_means_, model.entity_variances_  # [E, Q] each
    out = {"model_": model, "entities_": (n_entities, rows), "prior_edges_": extra_edges,
           "timings_": {"fit_seconds": time.perf_counter() - clock, "infer_seconds": 0.0}}
    if tried is not None and start is None:  # a fit from scratch: which start won
        out["starts_"], out["start_"] = _starts_record(model, tried)
    out["posteriors_"] = {}
    for k, view in enumerate(names):
        free = np.setdiff1d(np.arange(views.n_samples[view]), groups[:, k])
        out["posteriors_"][view] = (free, np.asarray(mean[rows[view][free]], np.float64),
                                    np.asarray(var[rows[view][free]], np.float64))
    return out


def embedding(mad) -> LatentEmbedding:
    """Every row's latent coordinates of a fitted MAD: anchor rows q(x) of their group, the others their posteriors."""
    names = mad.problem_.views.names
    info = {"relevance": {v: np.asarray(r).tolist() for v, r in mad.relevance_.items()},
            "resolution": {v: np.asarray(r).tolist() for v, r in mad.resolution_.items()},
            "min_resolution": MIN_RESOLUTION}
    shared = mad.shared_dims_[tuple(names[:2])]
    if mad.entities_ is not None:  # all rows: each row's entity
        mean, var = mad.model_.entity_means_, mad.model_.entity_variances_
        rows = mad.entities_[1]
        return LatentEmbedding({v: np.asarray(mean[rows[v]]) for v in names},
                               {v: np.asarray(var[rows[v]]) for v in names}, shared_dims=shared, method="mad",
                               info=info)
    latent = mad.model_.embedding_
    group_mean = np.asarray(next(iter(latent.means.values())))  # [G, Q], one row per anchor group
    group_var = latent.variance_of(next(iter(latent.means)))  # [G, Q]
    means, variances = {}, {}
    for k, view in enumerate(names):
        n, q = mad.problem_.views.n_samples[view], group_mean.shape[1]
        means[view], variances[view] = np.zeros((n, q)), np.zeros((n, q))  # [n_v, Q]
        means[view][mad.anchors_[:, k]], variances[view][mad.anchors_[:, k]] = group_mean, group_var
        rows, mean, var = mad.posteriors_[view]
        means[view][rows], variances[view][rows] = mean, var
    return LatentEmbedding(means, variances, shared_dims=shared, method="mad", info=info)
