"""Metrics of a latent space: the rank of the true match (top-k, MRR, FOSCTTM), and label transfer."""

from __future__ import annotations

import numpy as np

from .._utils import check_count
from ..data import AlignmentProblem, Correspondence, LatentEmbedding
from ._inputs import _truth_pairs, _views_of

_BLOCK_ENTRIES = 1 << 22  # entries of one block of coordinate differences (32 MB)


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
