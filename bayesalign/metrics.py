"""Evaluation of alignments and embeddings against a known truth.

Two families:

* **matchings** (an :class:`~bayesalign.data.Alignment`, or a permutation array
  ``perm[i] = j`` with -1 for unmatched): :func:`kendall_tau_distance`,
  :func:`matching_accuracy`, and, for matchers that give match probabilities,
  :func:`expected_calibration_error`, :func:`brier_score`, :func:`precision_at_coverage`
  (all of them at once on an alignment's candidate rows: :func:`evaluate`);
* **latent spaces** (a :class:`~bayesalign.data.LatentEmbedding`, or an (n_a, n_b) cost or
  distance matrix): :func:`top_k_accuracy`, :func:`mean_reciprocal_rank`, :func:`foscttm`,
  :func:`label_transfer_accuracy`.

The truth is a :class:`~bayesalign.data.Correspondence`, an
:class:`~bayesalign.data.AlignmentProblem` (its truth between the two views is used), or a
permutation array ``truth[i] = j`` (-1: row i of a has no true partner). When a *problem* is
given, every metric evaluates only the truth pairs whose rows are unaligned (not anchors) in
both views, and retrieval metrics search only among the unaligned rows: anchors are given,
not found. Distances in a latent space are Euclidean in the embedding's shared dimensions,
computed in row blocks (memory O(chunk * N), never an N x N matrix).
"""

from __future__ import annotations

import math

import numpy as np

from ._utils import check_count
from .data import Alignment, AlignmentProblem, Correspondence, LatentEmbedding

__all__ = ["brier_score", "evaluate", "expected_calibration_error", "foscttm", "kendall_tau_distance",
           "label_transfer_accuracy", "matching_accuracy", "mean_reciprocal_rank", "precision_at_coverage",
           "top_k_accuracy"]

_BLOCK_ENTRIES = 1 << 22  # entries of one block of coordinate differences (32 MB)


# ------------------------------------------------------------------------------------------
# Inputs
# ------------------------------------------------------------------------------------------
def _permutation_pairs(perm, what: str):
    perm = np.asarray(perm)
    if perm.ndim != 1 or not np.issubdtype(perm.dtype, np.integer):
        raise TypeError(f"{what}: expected a 1-D integer permutation array (perm[i] = j, -1 if none), "
                        f"got {perm.dtype} of shape {perm.shape}")
    if (perm < -1).any():
        raise ValueError(f"{what}: entries must be row indices or -1, got {int(perm.min())}")
    rows = np.flatnonzero(perm >= 0)
    return rows, perm[rows].astype(np.int64)


def _truth_pairs(truth, views):
    """(index_a, index_b, problem) of the truth oriented as ``views`` (a, b).

    With a problem, pairs touching an anchored row of either view are dropped.
    """
    if isinstance(truth, AlignmentProblem):
        if views is None:
            raise ValueError("name the two views (views=(a, b)) to take the truth from a problem")
        corr = truth.truth_between(*views)
        keep = np.isin(corr.index_a, truth.unaligned(views[0])) & np.isin(corr.index_b, truth.unaligned(views[1]))
        return corr.index_a[keep], corr.index_b[keep], truth
    if isinstance(truth, Correspondence):
        corr = truth if views is None else truth.oriented(*views)
        return corr.index_a, corr.index_b, None
    ia, ib = _permutation_pairs(truth, "truth")
    return ia, ib, None


def _views_of(predicted_views, truth, fallback=None):
    if predicted_views is not None:
        return tuple(predicted_views)
    if isinstance(truth, Correspondence):
        return truth.views
    if isinstance(truth, AlignmentProblem):
        return tuple(fallback or truth.views.names[:2])
    return None


def _prediction(predicted, truth, views):
    """(views, index_a, index_b, candidates_a, candidates_b, alignment-or-None)."""
    if isinstance(predicted, Alignment):
        return (tuple(predicted.views), predicted.index_a, predicted.index_b, predicted.candidates_a,
                predicted.candidates_b, predicted)
    ia, ib = _permutation_pairs(predicted, "predicted")
    return _views_of(views, truth), ia, ib, None, None, None


def _evaluable_truth(predicted, truth, views):
    """The truth pairs to score a matching on, and the prediction."""
    views, pa, pb, cand_a, cand_b, alignment = _prediction(predicted, truth, views)
    ta, tb, _ = _truth_pairs(truth, views)
    if cand_a is not None:  # only rows that took part in the matching can be scored
        keep = np.isin(ta, cand_a) & np.isin(tb, cand_b)
        ta, tb = ta[keep], tb[keep]
    return ta, tb, pa, pb, alignment


def _pair_keys(ia, ib, ta, tb):
    width = int(max(ib.max(initial=-1), tb.max(initial=-1))) + 1
    return ia.astype(np.int64) * width + ib, ta.astype(np.int64) * width + tb


# ------------------------------------------------------------------------------------------
# Matchings
# ------------------------------------------------------------------------------------------
def kendall_tau_distance(predicted, truth, views=None) -> float:
    r"""Normalised Kendall-tau distance between the predicted and the true matching.

    For the m rows i of view a with a true partner that the prediction matches to a row
    :math:`p_i` of view b which has a true partner in a, let :math:`r_i = t^{-1}(p_i)` be that true partner (the row
    of a the prediction effectively puts at position i). The distance is the fraction of
    discordant pairs between the order of the rows of a and the order of the :math:`r_i`,

    .. math:: d_K = \frac{\#\{k < l : (r_k - r_l)(k - l) < 0\}
              + \tfrac12 \#\{k < l : r_k = r_l\}}{\binom{m}{2}} = \frac{1 - \tau}{2},

    where :math:`\tau` is Kendall's rank correlation; a tie (two rows sent to one row of b)
    counts as half a discordance. Measured in view a's row order (the sequence order of
    MAD's toy and motion data), it does not change when the rows of view b are relabelled,
    e.g. by :meth:`AlignmentProblem.shuffle_unaligned`. 0 for the true
    matching, 1 for the reversed order, about 0.5 at random: the measure of MAD's Table 1
    (Damianou, Lawrence & Ek 2016). O(m log m) through ``scipy.stats.kendalltau``.
    Returns NaN when fewer than two rows can be scored.

    Parameters
    ----------
    predicted : Alignment or int array (n_a,)
        The matching (a permutation array has -1 for unmatched rows).
    truth : Correspondence, AlignmentProblem or int array (n_a,)
        One-to-one on the scored rows.
    views : (str, str), optional
        Names of the views, when neither argument carries them.

    Examples
    --------
    >>> kendall_tau_distance([0, 1, 2, 3], [0, 1, 2, 3]), kendall_tau_distance([3, 2, 1, 0], [0, 1, 2, 3])
    (0.0, 1.0)
    >>> kendall_tau_distance([1, 0, 2], [0, 1, 2])   # one discordant pair out of 3
    0.3333333333333333
    """
    from scipy.stats import kendalltau

    ta, tb, pa, pb, _ = _evaluable_truth(predicted, truth, views)
    if np.unique(pa).size != pa.size:
        raise ValueError("kendall_tau_distance: the prediction matches a row of view a more than once")
    if np.unique(ta).size != ta.size or np.unique(tb).size != tb.size:
        raise ValueError("kendall_tau_distance: the truth must be one-to-one")
    if tb.size == 0:
        return float("nan")
    by_b = np.argsort(tb)
    sorted_b = tb[by_b]
    slot = np.minimum(np.searchsorted(sorted_b, pb), sorted_b.size - 1)
    # scored: rows with a true partner whose predicted partner has a true partner in view a
    known = (sorted_b[slot] == pb) & np.isin(pa, ta)
    x = ta[by_b[slot[known]]]  # [m] r_i: the true a-partner of each predicted partner
    y = pa[known]  # [m] the rows i of view a themselves
    m = x.size
    if m < 2:
        return float("nan")
    n0 = m * (m - 1) // 2
    _, counts = np.unique(x, return_counts=True)
    tied = int((counts * (counts - 1) // 2).sum())  # pairs tied in the prediction (y has none)
    if tied == n0:
        return 0.5
    tau_b = kendalltau(x, y).statistic  # (C - D) / sqrt((n0 - tied) n0)
    concordant_minus_discordant = tau_b * math.sqrt((n0 - tied) * n0)
    discordant = round(((n0 - tied) - concordant_minus_discordant) / 2)
    return (discordant + 0.5 * tied) / n0


def matching_accuracy(predicted, truth, views=None) -> float:
    r"""Fraction of the true pairs that the matching recovers.

    .. math:: \text{acc} = \frac{|\{(i, j) \in T : (i, j) \in M\}|}{|T|}

    over the true pairs T whose rows took part in the matching (the Alignment's
    candidates) and, with a problem, are not anchors. An unmatched row counts as wrong. It is
    the top-1 retrieval accuracy of Wang & Mahadevan (2013), section 4, for a one-to-one
    matching instead of a nearest-neighbour search.

    Examples
    --------
    >>> matching_accuracy([0, 2, 1, -1], [0, 1, 2, 3])
    0.25
    """
    ta, tb, pa, pb, _ = _evaluable_truth(predicted, truth, views)
    if not ta.size:
        return float("nan")
    pred_keys, true_keys = _pair_keys(pa, pb, ta, tb)
    return float(np.isin(true_keys, pred_keys).mean())


def _confidence_and_correct(predicted, truth, views, need_probabilities=True):
    """Per scored pair of a matching: its confidence and whether it is a true pair.

    A predicted pair (i, j) is scored when i or j has a true partner (after the problem's
    anchor filter); it is correct when (i, j) is a true pair.
    """
    if not isinstance(predicted, Alignment):
        conf = np.asarray(predicted, dtype=np.float64).reshape(-1)
        if np.isnan(conf).any():  # a NaN would fall in no bin, or sort anywhere
            raise ValueError(f"confidence {int(np.flatnonzero(np.isnan(conf))[0])} is NaN")
        correct = np.asarray(truth).reshape(-1)
        if correct.shape != conf.shape:
            raise ValueError(f"{conf.size} confidences but {correct.size} correctness flags")
        if not np.isin(correct, (0, 1)).all():
            raise ValueError("correctness flags must be booleans (or 0/1)")
        return conf, correct.astype(bool)
    views = tuple(predicted.views)
    ta, tb, _ = _truth_pairs(truth, views)
    if predicted.probabilities is not None:
        conf = predicted.probabilities
    elif need_probabilities:
        raise ValueError(f"the {predicted.method or 'given'} alignment carries no match probabilities")
    else:
        conf = -predicted.costs  # a lower cost is a more confident pair
    scored = np.isin(predicted.index_a, ta) | np.isin(predicted.index_b, tb)
    pred_keys, true_keys = _pair_keys(predicted.index_a, predicted.index_b, ta, tb)
    return conf[scored], np.isin(pred_keys, true_keys)[scored]


def expected_calibration_error(predicted, truth, n_bins: int = 10, views=None) -> float:
    r"""Expected calibration error of the match probabilities (Guo et al. 2017, eq. 3).

    Pairs are put in ``n_bins`` equal-width bins of probability on [0, 1] (p = 1 in the
    last); with :math:`B_b` the pairs of bin b,

    .. math:: \text{ECE} = \sum_b \frac{|B_b|}{n}\,\bigl|\text{acc}(B_b) - \text{conf}(B_b)\bigr|.

    ``predicted`` is an Alignment with probabilities (``truth`` as elsewhere; see
    ``_confidence_and_correct`` for which pairs are scored), or an array of probabilities
    with ``truth`` the matching array of correctness flags.

    Examples
    --------
    >>> round(expected_calibration_error([0.9, 0.9, 0.2, 0.2], [True, False, False, False], n_bins=5), 12)
    0.3
    """
    p, y = _confidence_and_correct(predicted, truth, views)
    if (p < 0).any() or (p > 1).any():
        raise ValueError("probabilities must lie in [0, 1]")
    n_bins = check_count(n_bins, "n_bins")
    if not p.size:
        return float("nan")
    bins = np.minimum((p * n_bins).astype(np.int64), n_bins - 1)
    count = np.bincount(bins, minlength=n_bins)
    gap = np.abs(np.bincount(bins, y.astype(float), n_bins) - np.bincount(bins, p, n_bins))
    return float(gap.sum() / count.sum())


def brier_score(predicted, truth, views=None) -> float:
    r"""Mean squared error of the match probabilities (Brier 1950): :math:`\frac1n \sum_t (p_t - y_t)^2`.

    Inputs as in :func:`expected_calibration_error`.

    >>> brier_score([1.0, 0.5, 0.0], [True, True, True])
    0.4166666666666667
    """
    p, y = _confidence_and_correct(predicted, truth, views)
    return float(np.mean((p - y) ** 2)) if p.size else float("nan")


def precision_at_coverage(predicted, truth, coverage: float = 0.5, views=None) -> float:
    r"""Precision among the most confident fraction of the pairs.

    Keeps the :math:`\lceil c\,n \rceil` pairs of highest confidence (match probability; for
    an Alignment without probabilities, lowest cost) and returns the fraction of them that
    are true pairs: the accuracy a user gets by trusting only the confident matches.
    Ties in confidence keep the earlier pair. Inputs as in
    :func:`expected_calibration_error`.

    >>> precision_at_coverage([0.9, 0.8, 0.3, 0.1], [True, False, True, False], coverage=0.5)
    0.5
    """
    coverage = float(coverage)
    if not 0 < coverage <= 1:
        raise ValueError(f"coverage must be in (0, 1], got {coverage}")
    conf, y = _confidence_and_correct(predicted, truth, views, need_probabilities=False)
    if not conf.size:
        return float("nan")
    keep = max(1, math.ceil(coverage * conf.size - 1e-12))
    order = np.argsort(-conf, kind="stable")
    return float(y[order[:keep]].mean())


# ------------------------------------------------------------------------------------------
# Latent spaces: ranks of the true match
# ------------------------------------------------------------------------------------------
def _latent_dims(embedding: LatentEmbedding, dims) -> np.ndarray:
    """The dimensions to compare the views in: ``dims``, default the embedding's shared ones."""
    dims = embedding.shared_dims if dims is None else np.asarray(dims, dtype=np.int64)
    if not dims.size:
        raise ValueError("the embedding has no shared dimensions to compare the views in")
    return dims


class _Distances:
    """Distances between query rows of one side and a pool of rows of the other, in blocks."""

    def __init__(self, scores, views, dims):
        if isinstance(scores, LatentEmbedding):
            dims = _latent_dims(scores, dims)
            self.points = (scores.means[views[0]][:, dims], scores.means[views[1]][:, dims])
            self.cost = None
            self.shape = (self.points[0].shape[0], self.points[1].shape[0])
        elif hasattr(scores, "block") and hasattr(scores, "T"):  # row blocks of a cost (matching.cost_source)
            self.points, self.cost, self.source, self.shape = None, None, scores, tuple(scores.shape)
        else:
            cost = np.asarray(scores, dtype=np.float64)
            if cost.ndim != 2 or np.isnan(cost).any():
                raise ValueError(f"expected a LatentEmbedding or a 2-D cost matrix without NaN, got shape "
                                 f"{cost.shape}")
            self.points, self.cost, self.shape = None, cost, cost.shape

    def block(self, side, queries, pool):
        """[len(queries), len(pool)] distances from rows ``queries`` of ``side`` (0 = a) to ``pool``."""
        if self.points is None and self.cost is None:
            return (self.source if side == 0 else self.source.T).block(queries)[:, pool]
        if self.cost is not None:
            return self.cost[np.ix_(queries, pool)] if side == 0 else self.cost[np.ix_(pool, queries)].T
        q, p = self.points[side][queries], self.points[1 - side][pool]
        diff = q[:, None, :] - p[None, :, :]  # [r, n_pool, d]: differences keep exact ties exact
        return np.einsum("ijk,ijk->ij", diff, diff)  # squared Euclidean: same order as Euclidean


def _embedding_views(scores, truth, views):
    if views is not None:
        return tuple(views)
    if isinstance(truth, Correspondence):
        return truth.views
    if isinstance(scores, LatentEmbedding):
        if len(scores.view_names) != 2:
            raise ValueError(f"the embedding has views {scores.view_names}; name two with views=(a, b)")
        return scores.view_names
    return _views_of(None, truth)


def _rank_counts(scores, truth, views, dims, side):
    """For every scored true pair: (#pool rows strictly closer than the true partner, #tied, pool size).

    ``side`` 0 queries rows of a and searches b; 1 the reverse.
    """
    views = _embedding_views(scores, truth, views)
    dist = _Distances(scores, views, dims)
    ta, tb, problem = _truth_pairs(truth, views)
    if not ta.size:
        raise ValueError("no true pairs to evaluate on")
    if problem is not None:
        n_rows = tuple(problem.views.n_samples[problem.views.name_of(v)] for v in views)
        if tuple(dist.shape) != n_rows:  # pools and truth index the views' rows
            raise ValueError(f"the scores are {tuple(dist.shape)}, but views {views[0]!r} and {views[1]!r} have "
                             f"{n_rows[0]} and {n_rows[1]} rows")
        pools = (problem.unaligned(views[0]), problem.unaligned(views[1]))
    else:
        pools = (np.arange(dist.shape[0]), np.arange(dist.shape[1]))
    if ta.max() >= dist.shape[0] or tb.max() >= dist.shape[1]:
        raise ValueError(f"the truth refers to rows beyond the {dist.shape} scores")
    queries, partners = (ta, tb) if side == 0 else (tb, ta)
    pool = pools[1 - side]
    slot = np.searchsorted(pool, partners)  # position of each true partner in the pool
    width = pool.size * (1 if dist.points is None else dist.points[0].shape[1])
    chunk = max(1, _BLOCK_ENTRIES // max(width, 1))
    closer, tied = np.empty(queries.size), np.empty(queries.size)
    for start in range(0, queries.size, chunk):
        sel = slice(start, start + chunk)
        d = dist.block(side, queries[sel], pool)  # [r, n_pool]
        d_true = d[np.arange(d.shape[0]), slot[sel]][:, None]
        closer[sel] = (d < d_true).sum(1)
        tied[sel] = (d == d_true).sum(1) - 1  # the partner itself is not a tie
    return closer, tied, pool.size


def top_k_accuracy(scores, truth, k: int = 1, views=None, dims=None) -> float:
    r"""Probability that the true match is among the k nearest rows of the other view.

    For each true pair (i, t) (row i of a queried), with :math:`c_i` pool rows strictly
    closer than t and :math:`e_i` rows at the same distance, and ties broken uniformly at
    random,

    .. math:: \text{top-}k = \frac1m \sum_i \operatorname{clip}\Bigl(\frac{k - c_i}{e_i + 1}, 0, 1\Bigr).

    The retrieval measure of the cross-lingual experiments of Wang & Mahadevan (2013),
    section 4 ("the probability that the true match is among the top K documents"), of Wang &
    Mahadevan (2008), section 5, and of Wang, Krafft & Mahadevan (2011), Table 5.7.

    Parameters
    ----------
    scores : LatentEmbedding, array (n_a, n_b) or cost source
        An embedding (Euclidean distance in ``dims``, default its shared dimensions), a
        cost / distance matrix (lower is closer), or the row blocks of one that is never formed
        (:func:`bayesalign.matching.costs.cost_source`).
    truth : Correspondence, AlignmentProblem or int array (n_a,)
    k : int
    views : (str, str), optional
        Query view a and searched view b (default: the truth's views, or the embedding's two).

    Examples
    --------
    >>> import numpy as np
    >>> D = np.array([[0.1, 0.5, 0.9], [0.2, 0.3, 0.9], [0.4, 0.4, 0.8]])
    >>> top_k_accuracy(D, [0, 1, 2], k=1), top_k_accuracy(D, [0, 1, 2], k=2)
    (0.3333333333333333, 0.6666666666666666)
    """
    k = check_count(k, "k")
    closer, tied, _ = _rank_counts(scores, truth, views, dims, side=0)
    return float(np.mean(np.clip((k - closer) / (tied + 1), 0.0, 1.0)))


def mean_reciprocal_rank(scores, truth, views=None, dims=None) -> float:
    r"""Mean reciprocal rank of the true match: :math:`\frac1m \sum_i \mathbb{E}[1 / r_i]`.

    :math:`r_i` is the rank of the true partner of query i among the rows of the other view
    (1 = nearest), ties broken uniformly at random (so the expectation is the mean of
    1/r over the tied ranks). The standard retrieval score (Voorhees 1999, TREC-8 question
    answering); a smooth companion of :func:`top_k_accuracy`. Inputs as there.

    >>> import numpy as np
    >>> mean_reciprocal_rank(np.array([[0.1, 0.5], [0.2, 0.3]]), [0, 1])   # ranks 1 and 2
    0.75
    """
    from scipy.special import digamma

    closer, tied, _ = _rank_counts(scores, truth, views, dims, side=0)
    # mean of 1/r over r = c+1 .. c+e+1 is (H_{c+e+1} - H_c) / (e+1), with H_n = digamma(n+1) + gamma
    return float(np.mean((digamma(closer + tied + 2) - digamma(closer + 1)) / (tied + 1)))


def foscttm(scores, truth, views=None, dims=None) -> float:
    r"""Fraction Of Samples Closer Than the True Match, averaged over both directions.

    For each true pair (i, t) and each direction, the fraction of the *other* pool rows that
    are closer to the query than its true partner, a tie counting as half:

    .. math:: \text{FOSCTTM} = \tfrac12\Bigl(\frac1m\sum_{(i,t)}\frac{c^{a}_{i} + e^{a}_{i}/2}{n_b - 1}
              + \frac1m\sum_{(i,t)}\frac{c^{b}_{t} + e^{b}_{t}/2}{n_a - 1}\Bigr),

    with n_a, n_b the pool sizes (the unaligned rows when a problem is given). 0 is perfect,
    about 0.5 random. Introduced by Liu et al. (2019, MMD-MA) for single-cell alignment.
    Inputs as in :func:`top_k_accuracy`.

    Examples
    --------
    >>> import numpy as np
    >>> D = np.array([[0.0, 1.0, 1.0], [2.0, 1.0, 0.5], [1.0, 1.0, 1.0]])
    >>> foscttm(D, [0, 1, 2])
    0.375
    """
    fractions = []
    for side in (0, 1):
        closer, tied, pool = _rank_counts(scores, truth, views, dims, side)
        if pool < 2:
            raise ValueError("foscttm needs at least two rows in each view's pool")
        fractions.append(np.mean((closer + 0.5 * tied) / (pool - 1)))
    return float(np.mean(fractions))


def label_transfer_accuracy(embedding: LatentEmbedding, labels, views=None, k: int = 5, dims=None) -> float:
    r"""Accuracy of a k-nearest-neighbour classifier trained on one view, applied to the other.

    Each row of view b gets the majority label of its k nearest rows of view a in the
    latent space (Euclidean, shared dimensions; a tied vote goes to the smallest label), and
    the fraction of rows of b whose label is recovered is returned:

    .. math:: \text{acc} = \frac1{n_b}\sum_{j} \mathbb{1}\bigl[\hat y_j = y^{(b)}_j\bigr],
              \qquad \hat y_j = \operatorname{mode}\{y^{(a)}_i : i \in \text{kNN}_a(z^{(b)}_j)\}.

    A standard test that a shared space carries the classes across views (e.g. Cao et al.
    2020, UnionCom; the cross-domain classification of Wang, Krafft & Mahadevan 2011).

    Parameters
    ----------
    embedding : LatentEmbedding
    labels : AlignmentProblem or dict view -> array
        Class labels per view. With a problem, view b is scored on its unaligned rows only
        (view a's labelled rows, anchors included, are the training set).
    views : (str, str), optional
        (a, b): labels transfer from a to b (default: the embedding's two views).
    k : int

    Examples
    --------
    >>> import numpy as np
    >>> emb = LatentEmbedding({"a": [[0.0], [0.1], [5.0], [5.1]], "b": [[0.05], [4.9]]})
    >>> label_transfer_accuracy(emb, {"a": [0, 0, 1, 1], "b": [0, 1]}, k=1)
    1.0
    """
    from scipy.spatial import cKDTree

    if not isinstance(embedding, LatentEmbedding):
        raise TypeError("label_transfer_accuracy needs a LatentEmbedding")
    views = _embedding_views(embedding, None, views)
    problem = labels if isinstance(labels, AlignmentProblem) else None
    label_of = labels.labels if problem is not None else labels
    for view in views:
        if view not in label_of:
            raise ValueError(f"no labels for view {view!r}")
    y_a, y_b = np.asarray(label_of[views[0]]), np.asarray(label_of[views[1]])
    dims = _latent_dims(embedding, dims)
    z_a, z_b = embedding.means[views[0]][:, dims], embedding.means[views[1]][:, dims]
    if y_a.shape != (z_a.shape[0],) or y_b.shape != (z_b.shape[0],):
        raise ValueError("labels must have one entry per row of each view")
    targets = problem.unaligned(views[1]) if problem is not None else np.arange(z_b.shape[0])
    if not targets.size:
        return float("nan")
    k = min(check_count(k, "k"), z_a.shape[0])
    classes, y_code = np.unique(y_a, return_inverse=True)
    _, idx = cKDTree(z_a).query(z_b[targets], k=k)
    idx = np.asarray(idx).reshape(targets.size, k)  # [n_targets, k]
    votes = np.zeros((targets.size, classes.size))
    np.add.at(votes, (np.repeat(np.arange(targets.size), k), y_code[idx].ravel()), 1.0)
    predicted = classes[np.argmax(votes, axis=1)]  # argmax: first (smallest) label on a tie
    return float(np.mean(predicted == y_b[targets]))


# ------------------------------------------------------------------------------------------
# All matching metrics at once
# ------------------------------------------------------------------------------------------
def evaluate(alignment: Alignment, problem: AlignmentProblem, coverage: float = 0.5) -> dict:
    """Accuracy and calibration of an alignment against the problem's truth, on its candidate rows.

    Returns a dict with ``n_pairs``, ``accuracy`` (:func:`matching_accuracy`), ``kendall_tau``
    (:func:`kendall_tau_distance`, the MAD paper's measure: 0 perfect, about 0.5 random) and, when
    the alignment carries probabilities, ``ece`` (:func:`expected_calibration_error`), ``brier``
    (:func:`brier_score`) and ``precision_at_coverage`` (of the ``coverage`` fraction of most
    confident pairs). The truth is restricted to the pairs whose rows are both candidates of the
    alignment (the rows it was asked to match) and, as for every metric given a problem, unaligned
    (anchors are given, not found).

    Examples
    --------
    >>> problem = AlignmentProblem.paired({"a": np.eye(3), "b": np.eye(3)})
    >>> al = Alignment(("a", "b"), [0, 1, 2], [0, 2, 1], probabilities=[0.9, 0.6, 0.3])
    >>> out = evaluate(al, problem)
    >>> round(out["accuracy"], 3), out["n_pairs"]
    (0.333, 3)
    """
    ta, tb, _ = _truth_pairs(problem, tuple(alignment.views))  # the anchors' pairs left out
    keep = np.isin(ta, alignment.candidates_a) & np.isin(tb, alignment.candidates_b)
    held = Correspondence(tuple(alignment.views), ta[keep], tb[keep])
    out = {"n_pairs": len(alignment), "accuracy": float(matching_accuracy(alignment, held)),
           "kendall_tau": float(kendall_tau_distance(alignment, held))}
    if alignment.probabilities is not None and len(alignment):
        out["ece"] = float(expected_calibration_error(alignment, held))
        out["brier"] = float(brier_score(alignment, held))
        out["precision_at_coverage"] = float(precision_at_coverage(alignment, held, coverage))
    return out
