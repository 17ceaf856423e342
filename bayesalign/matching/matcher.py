"""Match the rows of two views in a latent embedding: the last step of every method.

:func:`match` takes a :class:`~bayesalign.data.LatentEmbedding` (spectral coordinates, or MAD's
posteriors with their variances) and the problem it came from, forms the costs between the rows
of views a and b that are not anchored to each other, and returns an
:class:`~bayesalign.data.Alignment` with per-pair probabilities. Up to ``SPARSE_ABOVE`` candidate
pairs the costs are a dense matrix; above, only the k nearest neighbours of every row are
candidates and no (n_a, n_b) matrix is formed.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp
from scipy.spatial import cKDTree

from ..data import Alignment, AlignmentProblem, LatentEmbedding
from .assignment import assign, linear_assignment, sparse_assignment, with_full_matching
from .costs import _PointCosts, cost_source, knn_edges, likelihood_cost, mean_distance_cost, pair_costs
from .entropic import sinkhorn_marginals, sparse_sinkhorn
from .given_costs import _MatrixCosts
from .marginals import marginal_assignment, perturb_and_map
from .myopic import myopic_assignment

__all__ = ["COSTS", "MATCHERS", "candidate_rows", "match", "nearest_cost_temperature", "posterior_assignment",
           "posterior_marginals", "posterior_temperature", "sinkhorn_log_marginals", "sinkhorn_probabilities"]

MATCHERS = ("hungarian", "myopic", "sinkhorn", "perturb")
COSTS = ("likelihood", "mean")
#: The sparse (kNN candidate) path above this many candidate pairs n_a * n_b (a 200 MB cost matrix);
#: below it the dense solver is the faster one (``benchmarks/bench_mad.py``, benchmarks/RESULTS.md).
SPARSE_ABOVE = 25_000_000
#: Above this many pairs the Sinkhorn probabilities use the kNN candidate pairs even in the dense path:
#: on near-hard costs the dense iteration needs thousands of sweeps of the whole matrix.
DENSE_SINKHORN_MAX = 250_000
SINKHORN_NEIGHBORS = 10
#: Up to this many pairs n_a * n_b (10,000 rows a side) the kNN Sinkhorn candidates are completed until the
#: left-out mass is below the tolerance (an O(n_a n_b) scan per round, in row blocks); above it the mass beyond
#: the k-th neighbour is neglected, which makes rows with few candidates overconfident, and measured on
#: ``LEFT_OUT_SAMPLE`` rows. Where the posteriors are diffuse the completed support is nearly dense: at 20,000
#: cells of the simulator the completed solve did not finish in 10 minutes, the candidates' in 15 s
#: (benchmarks/RESULTS.md, "MAD end to end on the single-cell simulator").
SINKHORN_CHECK_MAX = 100_000_000
#: Largest marginal error for Sinkhorn marginals to be used as probabilities of a deterministic embedding.
SINKHORN_TOLERANCE = 1e-3
#: Above ``SINKHORN_CHECK_MAX`` pairs, the rows (a seeded sample) whose mass outside their candidates is measured.
LEFT_OUT_SAMPLE = 256
#: Mean mass a sampled row leaves outside its candidates (relative to its unit mass) above which ``match`` warns
#: that probabilities on the candidates alone overstate the pairs' probabilities.
LEFT_OUT_WARN = 0.01


def candidate_rows(problem: AlignmentProblem, a: str, b: str) -> tuple[np.ndarray, np.ndarray]:
    """Rows of a and b that are in no anchor pair between a and b, given or implied through a chain of anchors
    across other views (the rows to be matched)."""
    anchors = problem.anchors_between(a, b, implied=True)
    rows_a = np.setdiff1d(np.arange(problem.views.n_samples[a]), anchors.index_a)
    rows_b = np.setdiff1d(np.arange(problem.views.n_samples[b]), anchors.index_b)
    return rows_a, rows_b


def nearest_cost_temperature(points_a, points_b) -> float:
    """The median squared distance from a point to its nearest point of the other view (both directions).

    A typical nearest match then costs about T, a scale-free choice for exp(-cost / T); found by
    KD-tree queries (no dense matrix). A floor (1e-12 of the squared diameter) keeps it positive when
    many points coincide.

    >>> nearest_cost_temperature(np.array([[0.0], [3.0]]), np.array([[1.0], [3.0]]))
    0.5
    """
    nearest = np.concatenate([cKDTree(points_b).query(points_a, k=1)[0], cKDTree(points_a).query(points_b, k=1)[0]])
    nearest = nearest ** 2
    both = np.vstack([points_a, points_b])
    diameter2 = float(((both.max(0) - both.min(0)) ** 2).sum())  # bounds every squared distance
    floor = max(1e-12 * diameter2, np.finfo(float).tiny)
    return max(float(np.median(nearest)), floor)


def posterior_temperature(cost: str, var_a, var_b) -> float:
    """T of the costs between posteriors with variances var_a, var_b (n, q).

    1 for the likelihood cost (the Gibbs distribution of the permutation posterior); 2 (s_a + s_b)
    for the mean cost, with s the average posterior variances, which makes exp(-D**/T) the
    likelihood of the same model with every variance equal to its mean.
    """
    if cost == "likelihood":
        return 1.0
    return float(2.0 * (var_a.mean() + var_b.mean()))


def match(embedding: LatentEmbedding, problem: AlignmentProblem, a=None, b=None, *, matcher: str = "hungarian",
          cost: str = "mean", cost_limit=None, temperature: float | None = None, dims=None, rows_a=None,
          rows_b=None, sparse: bool | None = None, n_neighbors: int = 10, order=None, n_samples: int = 100,
          seed=None, method: str = "", warm_start=None, prior_cost=None) -> Alignment:
    """Match the not-anchored rows of views a and b in an embedding, with per-pair probabilities.

    Costs (``cost``): ``"mean"``, the squared Euclidean distance between the coordinates (MAD's
    D**, :func:`~bayesalign.matching.mean_distance_cost`); ``"likelihood"``, the match negative
    log-likelihood of two Gaussian posteriors (:func:`~bayesalign.matching.likelihood_cost`; the
    embedding must carry variances). Matchers: ``"hungarian"`` (optimal assignment), ``"myopic"``
    (the rows of b arrive in ``order`` and take the nearest free row of a), ``"sinkhorn"`` and
    ``"perturb"`` (the matching with the most expected correct pairs under the Sinkhorn marginals
    or the perturb-and-MAP frequencies). Every pair carries a probability: the Sinkhorn marginal
    of exp(-cost / T) (the sampled frequency for ``"perturb"``). Without ``cost_limit`` every row
    of the smaller side is matched, by every matcher; with it a row stays unmatched rather than
    pay more than the limit, and the probabilities have a dustbin (Sarlin et al. 2020).

    Parameters
    ----------
    embedding : LatentEmbedding
    problem : AlignmentProblem
        Its anchors say which rows are already matched.
    a, b : view names (default the first two views of the problem)
    matcher, cost : see above
    cost_limit : float, optional
    temperature : float, optional
        T. Default: from the variances for a Bayesian embedding (1 for the likelihood cost,
        2 (s_a + s_b) for the mean cost, s the average variances); else the median nearest cost
        (:func:`nearest_cost_temperature`), doubled while Sinkhorn does not converge to
        ``SINKHORN_TOLERANCE`` at it (so the probabilities are proper marginals).
    dims : int array, optional
        Latent dimensions to compare (default ``embedding.shared_dims``).
    rows_a, rows_b : int arrays, optional
        The rows to match (default: those in no anchor pair between a and b).
    sparse : bool, optional
        Candidate pairs only (each row's ``n_neighbors`` nearest rows, both directions, more where
        needed for every row to be matched): the Hungarian matching is then certified optimal for
        the mean cost (:func:`~bayesalign.matching.assign`) and optimal over the candidates for the
        likelihood cost, and the probabilities are Sinkhorn marginals started on the candidates and
        completed with every pair whose mass under the potentials exceeds the tolerance
        (:func:`~bayesalign.matching.sparse_sinkhorn` with ``costs``; up to ``SINKHORN_CHECK_MAX``
        pairs; beyond it they are not completed, and the mass a seeded sample of rows leaves outside
        its candidates is measured: ``info["left_out_mass"]``, with a warning above ``LEFT_OUT_WARN``).
        Default: when n_a * n_b > ``SPARSE_ABOVE``.
        ``"perturb"`` and ``"myopic"`` with the likelihood cost need the dense path.
    order : int array, optional
        Arrival order of the rows of b for ``"myopic"`` (positions in ``rows_b``).
    n_samples, seed : perturb-and-MAP samples and seed.
    method : str
        Stored in the Alignment.
    warm_start : (f, g, T0), optional
        Sinkhorn potentials of the same rows and costs solved at T0 (``info["potentials"]`` of
        :func:`~bayesalign.matching.posterior_marginals`, slack or dustbins included): the probabilities'
        Sinkhorn starts from them instead of from the cost spread (the same marginals, fewer sweeps).
        Not used by ``"perturb"``.
    prior_cost : array (len(rows_a), len(rows_b)), optional
        Minus the log of a prior over pairs (nats, e.g. :meth:`~bayesalign.AlignmentProblem.label_cost`): the
        costs become C + T prior_cost, so that exp(-cost / T) is exp(-C / T) times the prior and the
        probabilities and matchings are those of the posterior. Dense path only.

    Returns
    -------
    Alignment
        Pairs in the problem's row indices (candidates = the rows matched), their costs and
        probabilities; ``info`` holds the temperature and where it came from, the matcher,
        the cost, ``cost_limit`` and how the probabilities were computed.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.arange(4.0)[:, None]
    >>> problem = AlignmentProblem({"a": x, "b": x[::-1]})
    >>> al = match(LatentEmbedding({"a": x, "b": x[::-1]}), problem)
    >>> al.to_permutation().tolist(), bool(al.probabilities.min() > 0.5)
    ([3, 2, 1, 0], True)
    """
    if matcher not in MATCHERS:
        raise ValueError(f"matcher must be one of {MATCHERS}, got {matcher!r}")
    if cost not in COSTS:
        raise ValueError(f"cost must be one of {COSTS}, got {cost!r}")
    names = problem.views.names
    a = names[0] if a is None else problem.views.name_of(a)
    b = (names[1] if a != names[1] else names[0]) if b is None else problem.views.name_of(b)
    if a == b:
        raise ValueError(f"matching needs two different views, got {a!r} twice")
    for view in (a, b):
        if view not in embedding.means:
            raise ValueError(f"the embedding has no coordinates for view {view!r}")
    default_a, default_b = candidate_rows(problem, a, b)
    rows_a = default_a if rows_a is None else np.asarray(rows_a, np.int64)
    rows_b = default_b if rows_b is None else np.asarray(rows_b, np.int64)
    dims = embedding.shared_dims if dims is None else np.asarray(dims, np.int64)
    bayesian = embedding.variances is not None or embedding.covariances is not None
    if cost == "likelihood" and not bayesian:
        raise ValueError("the likelihood cost needs posterior variances; this embedding has none (use cost='mean')")
    ma, mb = embedding.means[a][rows_a][:, dims], embedding.means[b][rows_b][:, dims]  # [n_a, q], [n_b, q]
    va = embedding.variance_of(a)[rows_a][:, dims] if bayesian else None
    vb = embedding.variance_of(b)[rows_b][:, dims] if bayesian else None
    n_a, n_b = problem.views.n_samples[a], problem.views.n_samples[b]
    info = {"matcher": matcher, "cost": cost, "cost_limit": cost_limit}
    if rows_a.size == 0 or rows_b.size == 0:
        return Alignment((a, b), [], [], [], [], n_a=n_a, n_b=n_b, candidates_a=rows_a, candidates_b=rows_b,
                         method=method, info=info)
    if temperature is not None:
        T, info["temperature_from"] = float(temperature), "given"
    elif bayesian:
        T, info["temperature_from"] = posterior_temperature(cost, va, vb), "posterior variances"
    else:
        T, info["temperature_from"] = nearest_cost_temperature(ma, mb), "median nearest cost"
    if sparse is None:
        sparse = rows_a.size * rows_b.size > SPARSE_ABOVE
    if prior_cost is not None:
        prior_cost = np.asarray(prior_cost, np.float64)
        if prior_cost.shape != (rows_a.size, rows_b.size):
            raise ValueError(f"prior_cost must have shape ({rows_a.size}, {rows_b.size}) (the rows to match), got "
                             f"{prior_cost.shape}")
        if sparse:
            raise ValueError("a prior over pairs (prior_cost) needs the dense path (sparse=False)")
    posteriors = (ma, va, mb, vb)
    raised = 0
    while True:
        info["temperature"] = T
        if sparse:
            ia, ib, costs, probs = _match_sparse(matcher, cost, posteriors, T, cost_limit, order, int(n_neighbors),
                                                 info, warm_start)
        else:
            ia, ib, costs, probs = _match_dense(matcher, cost, posteriors, T, cost_limit, order, n_samples, seed,
                                                info, warm_start, prior_cost)
        if bayesian or temperature is not None or info.get("sinkhorn_error", 0.0) <= SINKHORN_TOLERANCE:
            break
        if raised == 40:
            raise RuntimeError("Sinkhorn did not converge at any temperature; the costs may be degenerate")
        T, raised = 2.0 * T, raised + 1  # not converged: a higher temperature (less confident)
    if raised:
        info["temperature_from"] += f", raised {2 ** raised}-fold for Sinkhorn to converge"
    for internal in ("log_potentials", "potentials"):  # the solver's internals (posterior_marginals' callers
        info.pop(internal, None)  # read them), not a result
    if "_permutations" in info:
        perms = info.pop("_permutations")  # [S, n_a] local columns
        info["sampled_permutations"] = np.where(perms >= 0, rows_b[np.maximum(perms, 0)], -1)
        info["sampled_rows_a"] = rows_a.copy()
    return Alignment((a, b), rows_a[ia], rows_b[ib], costs, np.clip(probs, 0.0, 1.0), n_a=n_a, n_b=n_b,
                     candidates_a=rows_a, candidates_b=rows_b, method=method, info=info)


def _cost_matrix(cost, ma, va, mb, vb) -> np.ndarray:
    """Dense [n_a, n_b] costs: the assignment and dense Sinkhorn need every entry."""
    return mean_distance_cost(ma, mb) if cost == "mean" else likelihood_cost(ma, va, mb, vb)


def _candidate_pairs(ma, mb, k, shape, cost_limit):
    """kNN candidate pairs and k; without ``cost_limit`` completed (:func:`~bayesalign.matching.assignment.
    with_full_matching`, nearest means first) until they admit a matching of every row of the smaller view,
    else Sinkhorn's marginals would be infeasible."""
    ei, ej = knn_edges(ma, mb, k)
    if cost_limit is None:
        ei, ej = with_full_matching(_PointCosts(ma, mb, "sqeuclidean"), ei, ej)
    return ei, ej, k


def _match_dense(matcher, cost, posteriors, T, cost_limit, order, n_samples, seed, info, warm_start=None,
                 prior_cost=None):
    """Local pairs (ia, ib), their costs and probabilities, on the dense (n_a, n_b) cost (plus T prior_cost)."""
    ma, va, mb, vb = posteriors
    C = _cost_matrix(cost, ma, va, mb, vb)  # [n_a, n_b]
    if prior_cost is not None:
        C = C + T * prior_cost
    hard = None
    if matcher == "hungarian":
        hard = linear_assignment(C, cost_limit=cost_limit)
    elif matcher == "myopic":
        hard = myopic_assignment(C, order=order, cost_limit=cost_limit)
    if matcher == "perturb":
        sampled = perturb_and_map(C, n_samples=int(n_samples), temperature=T, cost_limit=cost_limit, seed=seed)
        P = sampled.frequencies.toarray()  # [n_a, n_b]
        info["probability"] = f"perturb-and-MAP frequency over {int(n_samples)} samples"
        info["_permutations"] = sampled.permutations
    else:
        P = sinkhorn_probabilities(C, T, cost_limit, ma, mb, hard, info, warm_start=warm_start)  # [n_a, n_b]
    if hard is None:
        hard = _max_expected_matches(P, C, cost_limit)
    ia, ib = hard.index_a, hard.index_b
    return ia, ib, C[ia, ib], P[ia, ib]


def sinkhorn_probabilities(C, T, cost_limit=None, mean_a=None, mean_b=None, hard=None, info=None,
                           tol: float = 1e-3, warm_start=None, candidates=None) -> np.ndarray:
    """Sinkhorn match marginals [n_a, n_b] of exp(-C / T) on a dense cost: the probabilities of every matcher.

    Up to ``DENSE_SINKHORN_MAX`` pairs, dense Sinkhorn (:func:`~bayesalign.matching.sinkhorn_marginals`).
    Above, Sinkhorn starts on the ``SINKHORN_NEIGHBORS`` nearest neighbours of every row (of the points
    ``mean_a``, ``mean_b``; of the costs when they are not given) and the optimal assignment's pairs
    (``hard``, computed when needed and not given: without ``cost_limit`` the candidates must admit a full
    matching), and every pair that carries more than the tolerance joins
    (:func:`~bayesalign.matching.sparse_sinkhorn` with ``costs``): near-hard costs stay sparse, soft ones
    become as dense as they need; with ``warm_start`` the pairs its potentials give mass join first.
    ``candidates`` (ei, ej): the pairs to start from instead (above ``DENSE_SINKHORN_MAX``; without
    ``cost_limit`` they must admit a matching of every row of the smaller side): ``info["edges"]`` of the
    solve ``warm_start`` comes from, which a search over T (:meth:`bayesalign.MAD.calibrate_temperature`)
    passes on so that each solve starts where the nearest one ended instead of from the kNN pairs.
    ``tol``: the largest marginal error (and left-out mass) accepted. ``info`` (a
    dict) receives ``sinkhorn_error``, ``probability``, ``log_potentials`` (the log marginal of every pair),
    ``potentials``, which ``warm_start`` takes to start a solve of the same costs at another temperature,
    and above ``DENSE_SINKHORN_MAX`` ``edges`` (:func:`~bayesalign.matching.sparse_sinkhorn`).
    """
    info = {} if info is None else info
    if C.size <= DENSE_SINKHORN_MAX:
        P, info["sinkhorn_error"] = sinkhorn_marginals(C, T, cost_limit, tol=tol, info=info,  # [n_a, n_b]
                                                       warm_start=warm_start)
        info["probability"] = "sinkhorn marginal"
        return P
    source = _MatrixCosts(C)
    if candidates is not None:
        ei, ej = (np.asarray(e, np.int64) for e in candidates)
    elif mean_a is not None:
        ei, ej = knn_edges(mean_a, mean_b, SINKHORN_NEIGHBORS)
    else:
        ei, ej = source.knn(SINKHORN_NEIGHBORS)
    if cost_limit is None and candidates is None:  # Sinkhorn's marginals need a matching of every row of the
        # smaller view among the candidates: the optimal assignment's pairs are one (no search over k)
        full = hard if hard is not None else linear_assignment(C)
        keys = np.unique(np.concatenate([ei * C.shape[1] + ej, full.index_a * C.shape[1] + full.index_b]))
        ei, ej = keys // C.shape[1], keys % C.shape[1]
    P, info["sinkhorn_error"] = sparse_sinkhorn(ei, ej, C[ei, ej], T, C.shape, cost_limit, tol=tol, costs=source,
                                                info=info, warm_start=warm_start)
    start = "the given candidate pairs" if candidates is not None else "kNN candidate pairs (and the optimal " \
        "assignment's)"
    info["probability"] = (f"sinkhorn marginal on {ei.size} {start}, "
                           f"completed to {P.nnz} pairs until no row leaves out more than the tolerance")
    return P.toarray()


def sinkhorn_log_marginals(C, T, cost_limit=None, mean_a=None, mean_b=None, warm_start=None) -> np.ndarray:
    r"""log P [n_a, n_b] of the Sinkhorn match marginals of exp(-C / T) for every pair of a dense cost.

    .. math:: \log P_{ij} = \alpha_i + \beta_j - C_{ij} / T

    with :math:`\alpha, \beta` the log potentials of the solve of :func:`sinkhorn_probabilities` (the same
    arguments): exact also where P underflows or the sparse solve left a pair out as below its tolerance.
    Ranking the columns of row i by it ranks them by C[i, j] - T beta_j: the column potential discounts a
    column near many rows (a hub; the correction CSLS makes in cross-lingual retrieval, Conneau et al. 2018).
    """
    info = {}
    sinkhorn_probabilities(C, T, cost_limit, mean_a, mean_b, info=info, warm_start=warm_start)
    alpha, beta = info["log_potentials"]
    return alpha[:C.shape[0], None] + beta[None, :C.shape[1]] - C / T


def posterior_marginals(cost: str, mean_a, var_a, mean_b, var_b, temperature: float, cost_limit=None,
                        info=None, warm_start=None, candidates=None) -> sp.csr_matrix:
    """Sinkhorn match marginals (CSR [n_a, n_b]) of two sets of Gaussian posteriors under ``cost``.

    Up to ``SPARSE_ABOVE`` pairs the dense cost and :func:`sinkhorn_probabilities`; above it the
    (n_a, n_b) matrix is never formed: Sinkhorn starts on the ``SINKHORN_NEIGHBORS`` nearest neighbours
    of every row (completed until they admit a matching of every row of the smaller side when there is
    no ``cost_limit``), and the pairs that carry more than the tolerance join from the cost's row
    blocks (:func:`~bayesalign.matching.sparse_sinkhorn`; checked up to ``SINKHORN_CHECK_MAX`` pairs).
    The probabilities ``match`` reports, for callers that need all of them (the temperature fit, the
    correspondence rounds). ``info`` (a dict) receives ``sinkhorn_error``, ``probability``,
    ``log_potentials`` (the log marginal of every pair) and ``potentials``, which ``warm_start`` takes
    (:func:`~bayesalign.matching.sparse_sinkhorn`), and above ``SPARSE_ABOVE`` ``edges``, which ``candidates``
    takes: the pairs to start from instead of the kNN pairs (without ``cost_limit`` they must admit a matching
    of every row of the smaller side), as in :func:`sinkhorn_probabilities`.
    """
    info = {} if info is None else info
    ma, mb = np.asarray(mean_a, np.float64), np.asarray(mean_b, np.float64)
    va = None if var_a is None else np.asarray(var_a, np.float64)
    vb = None if var_b is None else np.asarray(var_b, np.float64)
    if ma.shape[0] * mb.shape[0] <= SPARSE_ABOVE:
        C = _cost_matrix(cost, ma, va, mb, vb)  # [n_a, n_b]
        return sp.csr_matrix(sinkhorn_probabilities(C, temperature, cost_limit, ma, mb, None, info,
                                                    warm_start=warm_start, candidates=candidates))
    return _sparse_marginals(cost, (ma, va, mb, vb), temperature, cost_limit, SINKHORN_NEIGHBORS, info,
                             warm_start, candidates)[0]


def posterior_assignment(cost: str, mean_a, var_a, mean_b, var_b) -> Alignment:
    """The optimal assignment (Hungarian) of two sets of Gaussian posteriors under ``cost``, as ``match`` finds it:
    on the dense cost up to ``SPARSE_ABOVE`` pairs, above on the kNN candidate pairs of the means (completed until
    they admit a matching of every row of the smaller side), never forming the (n_a, n_b) matrix."""
    ma, mb = np.asarray(mean_a, np.float64), np.asarray(mean_b, np.float64)
    if ma.shape[0] * mb.shape[0] <= SPARSE_ABOVE:
        return linear_assignment(_cost_matrix(cost, ma, var_a, mb, var_b))
    shape = (ma.shape[0], mb.shape[0])
    ei, ej, _ = _candidate_pairs(ma, mb, SINKHORN_NEIGHBORS, shape, None)
    return sparse_assignment(sp.csr_matrix((pair_costs(cost, ma, var_a, mb, var_b, ei, ej), (ei, ej)), shape=shape))


def _sparse_marginals(cost, posteriors, T, cost_limit, k, info, warm_start=None, candidates=None):
    """(csr P, ei, ej, ec, k): Sinkhorn marginals on the kNN candidate pairs (ei, ej) (or the given ``candidates``)
    with costs ec, completed from the cost's row blocks up to ``SINKHORN_CHECK_MAX`` pairs."""
    ma, va, mb, vb = posteriors
    shape = (ma.shape[0], mb.shape[0])
    if candidates is None:
        ei, ej, k = _candidate_pairs(ma, mb, k, shape, cost_limit)
    else:
        ei, ej = (np.asarray(e, np.int64) for e in candidates)
    ec = pair_costs(cost, ma, va, mb, vb, ei, ej)
    check = shape[0] * shape[1] <= SINKHORN_CHECK_MAX
    P, info["sinkhorn_error"] = sparse_sinkhorn(ei, ej, ec, T, shape, cost_limit,  # csr [n_a, n_b]
                                                costs=cost_source(cost, ma, va, mb, vb) if check else None,
                                                info=info, warm_start=warm_start)
    start = "the given candidate pairs" if candidates is not None else "kNN candidate pairs"
    info["probability"] = f"sinkhorn marginal on {ei.size} {start}" + (
        f", completed to {P.nnz} pairs until no row leaves out more than the tolerance" if check else
        " (above SINKHORN_CHECK_MAX pairs: not completed)")
    if not check:
        info["left_out_mass"] = _sampled_left_out_mass(cost_source(cost, ma, va, mb, vb), ei, ej,
                                                       info["potentials"], shape)
    return P, ei, ej, ec, k


def _sampled_left_out_mass(source, ei, ej, potentials, shape, n_rows: int = LEFT_OUT_SAMPLE, seed: int = 0) -> float:
    r"""Mean over a seeded sample of ``n_rows`` rows of the mass each leaves outside its candidate pairs under
    the solved potentials, :math:`\sum_{j \notin \text{cand}(i)} \min(1, \exp((f_i + g_j - C_{ij}) / T))`, relative to
    the row's unit mass: the quantity the completion bounds below the tolerance (:func:`~bayesalign.matching.
    sparse_sinkhorn`), estimated where it is not run. Memory: ``n_rows`` rows of costs."""
    f, g, T = potentials
    n_a, n_b = shape
    rows = np.sort(np.random.default_rng(seed).choice(n_a, size=min(int(n_rows), n_a), replace=False))
    log_mass = (f[rows, None] + g[None, :n_b] - source.block(rows)) / T  # [r, n_b]
    candidate = sp.csr_matrix((np.ones(ei.size), (ei, ej)), shape=shape)[rows].toarray() > 0
    mass = np.where(candidate, 0.0, np.exp(np.minimum(log_mass, 0.0)))
    return float(mass.sum(1).mean())


def _match_sparse(matcher, cost, posteriors, T, cost_limit, order, k, info, warm_start=None):
    """The same on kNN candidate pairs only (see ``match(sparse=True)``)."""
    ma, va, mb, vb = posteriors
    if matcher == "perturb" or (matcher == "myopic" and cost == "likelihood"):
        raise ValueError(f"matcher {matcher!r} with the {cost} cost needs the dense path (sparse=False)")
    shape = (ma.shape[0], mb.shape[0])
    P, ei, ej, ec, k = _sparse_marginals(cost, posteriors, T, cost_limit, k, info, warm_start)
    if matcher == "hungarian" and cost == "mean":
        hard = assign(ma, mb, method="sparse", k=k, metric="sqeuclidean", cost_limit=cost_limit)
        info["certified"] = hard.info.get("certified")
    elif matcher == "hungarian":
        hard = sparse_assignment(sp.csr_matrix((ec, (ei, ej)), shape=shape), cost_limit=cost_limit)
    elif matcher == "myopic":
        hard = myopic_assignment(ma, mb, order=order, metric="sqeuclidean", cost_limit=cost_limit)
    else:
        score = np.asarray(P[ei, ej]).ravel()  # [E], every candidate pair (zeros included)
        if cost_limit is not None:
            score[ec >= float(cost_limit)] = 0.0
            keep = score > 0
            hard = marginal_assignment(sp.csr_matrix((score[keep], (ei[keep], ej[keep])), shape=shape))
        else:
            hard = marginal_assignment(sp.csr_matrix((score, (ei, ej)), shape=shape), match_all=True)
    left_out = info.get("left_out_mass", 0.0)
    if left_out > LEFT_OUT_WARN:
        warnings.warn(f"the probabilities use the {ei.size} candidate pairs only (above SINKHORN_CHECK_MAX = "
                      f"{SINKHORN_CHECK_MAX:.3g} pairs): under their potentials a row's pairs outside its candidates "
                      f"carry {left_out:.3g} times its mass (mean over {LEFT_OUT_SAMPLE} sampled rows; "
                      f"info['left_out_mass']), so each pair's probability is overstated about "
                      f"{1 + left_out:.3g}-fold: the posteriors are too diffuse for probabilities on sparse candidates",
                      RuntimeWarning, stacklevel=4)
    ia, ib = hard.index_a, hard.index_b
    return ia, ib, pair_costs(cost, ma, va, mb, vb, ia, ib), np.asarray(P[ia, ib]).ravel()


def _max_expected_matches(probabilities, cost, cost_limit):
    """The matching maximising the sum of match probabilities (expected correct pairs).

    :func:`~bayesalign.matching.marginal_assignment`: without ``cost_limit`` every row of the smaller
    side is matched (also where its probabilities underflowed to 0); with it, pairs costlier than the
    limit are not made (as for the Hungarian matcher).
    """
    score = np.array(probabilities, dtype=np.float64)
    if cost_limit is None:
        return marginal_assignment(score, match_all=True)
    score[np.asarray(cost) >= float(cost_limit)] = 0.0
    return marginal_assignment(score)
