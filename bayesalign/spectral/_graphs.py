"""Graphs of the alignment: within-view affinities, correspondence matrices, anchor tuples, the joint adjacency.

Section 5.2 of Wang, Krafft & Mahadevan (2011), and the rows of each view in the stacked (joint) matrices.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import scipy.sparse as sp

from ..data import AlignmentProblem
from ..graph import (
    DEGREE_RATIO_LIMIT,
    check_degrees,
    degree_spread,
    heat_kernel,
    knn_graph,
    local_scaling_kernel,
)


def view_offsets(sizes: Mapping[str, int], names: Sequence[str]) -> dict[str, slice]:
    """Rows of each view in the stacked matrices (views in the order of ``names``)."""
    bounds = np.concatenate([[0], np.cumsum([sizes[v] for v in names])])
    return {v: slice(int(bounds[i]), int(bounds[i + 1])) for i, v in enumerate(names)}


def split_rows(F: np.ndarray, slices: Mapping[str, slice]) -> dict[str, np.ndarray]:
    """The rows of a stacked matrix that belong to each view."""
    return {v: F[s] for v, s in slices.items()}


def correspondence_matrices(problem: AlignmentProblem) -> dict[tuple[str, str], sp.csr_matrix]:
    """W^{(a,b)} for every pair of views (a before b in view order), weighted by the anchors' weights.

    Section 5.2 of Wang, Krafft & Mahadevan (2011): W^{(a,b)}(i, j) is the strength of the
    correspondence between row i of view a and row j of view b (1 for a plain anchor pair).

    >>> import numpy as np
    >>> from bayesalign.data import Correspondence
    >>> p = AlignmentProblem({"a": np.zeros((2, 1)), "b": np.zeros((3, 1))},
    ...                      anchors=Correspondence.from_pairs([(1, 2)], ("a", "b"), weights=[0.5]))
    >>> correspondence_matrices(p)[("a", "b")].toarray()
    array([[0. , 0. , 0. ],
           [0. , 0. , 0.5]])
    """
    names = problem.views.names
    sizes = problem.views.n_samples
    out = {}
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            out[(a, b)] = problem.anchors_between(a, b).to_matrix((sizes[a], sizes[b]))
    return out


def anchor_tuples(problem: AlignmentProblem, names: Sequence[str] | None = None) -> dict[str, np.ndarray]:
    """Rows that are one and the same thing in every view: ``{view: indices (m,)}``, row k aligned.

    Built from the anchors of the first view of ``names`` to each other view: row i of the first
    view is kept if it has an anchor in every other view (its first listed one when it has
    several). The baselines that represent a point through "the k-th anchor" (CCA, least
    squares, anchor similarities) need this ordering. Anchor weights are not used.

    >>> import numpy as np
    >>> from bayesalign.data import Correspondence
    >>> p = AlignmentProblem({"a": np.zeros((3, 1)), "b": np.zeros((3, 1))},
    ...                      anchors=Correspondence.from_pairs([(2, 0), (0, 1)], ("a", "b")))
    >>> {v: idx.tolist() for v, idx in anchor_tuples(p).items()}
    {'a': [0, 2], 'b': [1, 0]}
    """
    names = list(problem.views.names if names is None else names)
    first = names[0]
    keep = np.ones(problem.views.n_samples[first], dtype=bool)
    partner = {}
    for v in names[1:]:
        corr = problem.anchors_between(first, v)
        rows, where = np.unique(corr.index_a, return_index=True)  # first pair of each row of `first`
        lookup = np.full(problem.views.n_samples[first], -1, dtype=np.int64)
        lookup[rows] = corr.index_b[where]
        keep &= lookup >= 0
        partner[v] = lookup
    rows = np.flatnonzero(keep)
    return {first: rows, **{v: partner[v][rows] for v in names[1:]}}


AFFINITIES = ("local", "heat", "auto", "connectivity")
# K of Zelnik-Manor & Perona (2004): sigma_i is the distance to the 7th neighbour (fewer if n_neighbors < 7)
LOCAL_SCALE_NEIGHBOR = 7


def within_view_affinity(X, n_neighbors: int, *, affinity: str = "local", sigma: float | None = None,
                         connect_components: bool = False, name: str = "X") -> sp.csr_matrix:
    """W^{(a)}: similarities on the symmetric k-NN graph of one view (sparse, same pattern as the graph).

    ``affinity``:

    - ``"local"`` (default): local scaling, ``exp(-d_ij^2 / (sigma_i sigma_j))`` with ``sigma_i``
      the distance from row i to its ``min(7, n_neighbors)``-th neighbour (Zelnik-Manor & Perona
      2004; :func:`bayesalign.graph.local_scaling_kernel`). No row is left with a vanishing degree
      because it lies far from the others.
    - ``"heat"``: one global width, ``exp(-d^2 / (2 sigma^2))``, ``sigma`` the median k-NN distance
      of the view unless given (:func:`bayesalign.graph.heat_kernel`; Belkin & Niyogi 2003).
    - ``"auto"``: the heat kernel, unless its degrees span more than
      :data:`bayesalign.graph.DEGREE_RATIO_LIMIT` (a row nearly cut off from the graph); then local
      scaling for this view: the global width where it serves, local widths where it would strand
      rows (then only local scaling's own degree check can warn; ``degree_ratios_`` of the estimators
      is that of the weights used).
    - ``"connectivity"``: 0/1 weights.

    Warns (naming the view and the rows) when the degrees of ``W^{(a)}`` span more than
    :data:`bayesalign.graph.DEGREE_RATIO_LIMIT` (:func:`bayesalign.graph.check_degrees`).
    """
    if affinity not in AFFINITIES:
        raise ValueError(f"affinity must be one of {AFFINITIES}, got {affinity!r}")
    if sigma is not None and affinity not in ("heat", "auto"):
        raise ValueError(f"sigma is the width of affinity='heat'; got sigma={sigma} with affinity={affinity!r}")
    mode = "connectivity" if affinity == "connectivity" else "distance"
    G = knn_graph(X, n_neighbors, mode=mode, connect_components=connect_components, name=name)
    if affinity in ("heat", "auto"):
        W = heat_kernel(G, sigma)
        if affinity == "auto":
            affinity = "heat" if degree_spread(W)[0] <= DEGREE_RATIO_LIMIT else "local"
    if affinity == "local":
        W = local_scaling_kernel(G, min(LOCAL_SCALE_NEIGHBOR, int(n_neighbors)))
    elif affinity == "connectivity":
        W = G
    hint = ("these rows lie far from all others: more neighbours, or removing them, may help" if affinity == "local"
            else "affinity='local' (local scaling) or more neighbours may help")
    check_degrees(W, name=f"the k-NN graph of view {name!r}", hint=hint)
    return W


def joint_adjacency(within: Mapping[str, sp.spmatrix], correspondences: Mapping[tuple[str, str], sp.spmatrix],
                    names: Sequence[str], *, mu: float = 1.0, nu: float = 1.0) -> sp.csr_matrix:
    """The joint adjacency matrix of Wang, Krafft & Mahadevan (2011), section 5.2::

        W = [[nu W^(1),   mu W^(1,2), ..., mu W^(1,c)],
             ...
             [mu W^(c,1), mu W^(c,2), ..., nu W^(c)  ]],   W^(b,a) = W^(a,b)'

    Parameters
    ----------
    within : dict view -> sparse (n_v, n_v)
    correspondences : dict (a, b) -> sparse (n_a, n_b); either orientation, a missing pair is zero
    names : order of the views (rows of the joint matrix)
    mu, nu : weights of the correspondence and within-view terms

    Returns
    -------
    scipy.sparse.csr_matrix (sum n_v, sum n_v), symmetric

    >>> import numpy as np, scipy.sparse as sp
    >>> W = joint_adjacency({"a": sp.csr_matrix([[0, 1], [1, 0]]), "b": sp.csr_matrix([[0.0]])},
    ...                     {("b", "a"): sp.csr_matrix([[0, 1]])}, ["a", "b"], mu=2.0)
    >>> W.toarray()
    array([[0., 1., 0.],
           [1., 0., 2.],
           [0., 2., 0.]])
    """
    if mu < 0 or nu < 0:
        raise ValueError(f"mu and nu must be non-negative, got mu={mu}, nu={nu}")
    index = {v: i for i, v in enumerate(names)}
    blocks = [[None] * len(names) for _ in names]
    for v in names:
        blocks[index[v]][index[v]] = nu * sp.csr_matrix(within[v], dtype=np.float64)
    for (a, b), W_ab in correspondences.items():
        W_ab = mu * sp.csr_matrix(W_ab, dtype=np.float64)
        i, j = index[a], index[b]
        blocks[i][j] = W_ab if blocks[i][j] is None else blocks[i][j] + W_ab
        blocks[j][i] = W_ab.T if blocks[j][i] is None else blocks[j][i] + W_ab.T
    return sp.bmat(blocks, format="csr")
