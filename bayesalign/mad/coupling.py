r"""q(P): the posterior over the unaligned rows' matching, an entropic fused Gromov-Wasserstein coupling.

Between the rows of views a and b, q(P) is the coupling that minimises

.. math:: \langle C, P \rangle + \gamma \sum_{ijkl} (A_{ik} - B_{jl})^2 P_{ij} P_{kl} - H(P),
          \qquad P 1 = \mu_a,\ P^\top 1 = \mu_b,

with C the latent match cost of MAD's posteriors divided by the probabilities' temperature (so that at
:math:`\gamma = 0` q(P) is the Sinkhorn coupling of exp(-C), the match probabilities of
:class:`~bayesalign.mad.posteriors.PosteriorAligner`), A and B the views' within-view geodesic distances
(:func:`bayesalign.transport.structure_matrix`) and :math:`\gamma` the weight of the views' geometric agreement.
It is the entropic fused Gromov-Wasserstein problem of Vayer et al. (2019) with POT's weights
:math:`\alpha = \gamma / (1 + \gamma)`, :math:`\epsilon = 1 / (1 + \gamma)`, M = C, solved by the same projected
mirror descent (Peyre, Cuturi & Solomon 2016): each step a Sinkhorn projection of the cost linearised at the
current coupling, here POT's stabilised Sinkhorn warm-started from the step before, since a latent cost spans
more nats than the plain kernel can hold. Anchor pairs are pinned: an anchor row's cost is 0 at its partner and
larger than any other entry can reach elsewhere, so its mass stays there and the structure term compares every
unaligned row's geodesic distances to the anchors with its candidates'.

:func:`coupling_edges` turns q(P) into the soft edges entities x entities that the graph prior of the all-rows
model takes (:meth:`bayesalign.MAD.refit` with ``extra_edges``), so that each unaligned row is drawn toward its
probable partners in the shared dimensions. Dense: (n_a, n_b) couplings and (n_v, n_v) structure matrices.
"""

from __future__ import annotations

import numpy as np

__all__ = ["GEOMETRY", "NEIGHBORS", "STRUCTURE_NEIGHBORS", "coupling_edges", "coupling_posterior", "mad_coupling"]

#: gamma, the weight of the views' geometric agreement against the latent cost (in nats per unit of the
#: structure term, whose entries lie in [0, 1]).
GEOMETRY = 100.0
#: k of the k-NN graphs whose shortest paths are the views' structure matrices.
STRUCTURE_NEIGHBORS = 20
#: Partners per row (each way) that the soft edges join it to.
NEIGHBORS = 5


def _pinned_cost(C, pinned_a, pinned_b, geometry: float) -> np.ndarray:
    """C reduced by its row and column minima (Sinkhorn is unchanged by them: every row and column keeps an entry 0,
    which the plain exponential could lose), the pinned rows and columns at 0 on their partner and, elsewhere, above
    what any other entry plus the structure term (at most 2 gamma) can reach, by 50 nats."""
    M = np.array(C, dtype=np.float64)  # [n_a, n_b]
    free_a = np.setdiff1d(np.arange(M.shape[0]), pinned_a)
    free_b = np.setdiff1d(np.arange(M.shape[1]), pinned_b)
    block = M[np.ix_(free_a, free_b)]
    if block.size:
        block = block - block.min(axis=1, keepdims=True)
        block = block - block.min(axis=0, keepdims=True)
    big = (block.max() if block.size else 0.0) + 2.0 * geometry + 50.0
    M[:] = big
    M[np.ix_(free_a, free_b)] = block
    M[pinned_a, pinned_b] = 0.0
    return M


def _sinkhorn(mass_a, mass_b, M, n_iter: int, tol: float, warm=None):
    """The Sinkhorn projection at unit temperature, (P, its log potentials for a warm start): POT's stabilised
    Sinkhorn (Schmitzer 2019), which absorbs large scalings into log potentials, so a cost spanning many nats
    underflows to 0 and never to NaN."""
    import ot

    P, log = ot.bregman.sinkhorn_stabilized(mass_a, mass_b, M, 1.0, numItermax=int(n_iter), stopThr=tol * 1e-3,
                                            warmstart=warm, warn=False, log=True)
    return P, (log["logu"], log["logv"])


def coupling_posterior(C, A=None, B=None, geometry: float = GEOMETRY, pinned=None, mass_a=None, mass_b=None,
                       init=None, n_outer: int = 30, n_inner: int = 300, tol: float = 1e-6):
    r"""q(P) of the module docstring: ``(P, converged)``, P (n_a, n_b) summing to 1 with marginals ``mass_a`` and
    ``mass_b``.

    Parameters
    ----------
    C : array (n_a, n_b)
        Latent match cost in units of the temperature (nats): q(P) at ``geometry=0`` is the Sinkhorn coupling of
        exp(-C) (POT's ``ot.sinkhorn(mass_a, mass_b, C, 1)``).
    A, B : arrays (n_a, n_a), (n_b, n_b), optional
        Within-view structure matrices (needed when ``geometry > 0``).
    geometry : float
        gamma, the weight of the structure term.
    pinned : (index_a, index_b), optional
        Anchor pairs whose mass is fixed on each other (entries of C in their rows and columns are not read).
    mass_a, mass_b : arrays, optional
        Row and column masses (default uniform, 1 / n each).
    init : array (n_a, n_b), optional
        The coupling the mirror descent starts from (default the independent one), e.g. a Gromov-Wasserstein
        coupling.
    n_outer, n_inner, tol
        Mirror-descent steps at most, Sinkhorn sweeps per step, and the change of P (Frobenius norm) that stops
        them.
    """
    C = np.asarray(C, dtype=np.float64)
    n_a, n_b = C.shape
    geometry = float(geometry)
    if not np.isfinite(geometry) or geometry < 0:
        raise ValueError(f"geometry must be a finite number >= 0, got {geometry!r}")
    if geometry > 0 and (A is None or B is None or np.shape(A) != (n_a, n_a) or np.shape(B) != (n_b, n_b)):
        raise ValueError(f"geometry > 0 needs structure matrices A ({n_a}, {n_a}) and B ({n_b}, {n_b}), got "
                         f"{None if A is None else np.shape(A)} and {None if B is None else np.shape(B)}")
    pinned_a, pinned_b = (np.zeros(0, np.int64),) * 2 if pinned is None else \
        (np.asarray(pinned[0], np.int64), np.asarray(pinned[1], np.int64))
    free = np.ones(C.shape, bool)
    free[pinned_a, :], free[:, pinned_b] = False, False
    if not np.all(np.isfinite(C[free])):
        rows, cols = np.nonzero(free & ~np.isfinite(C))
        raise ValueError(f"the latent cost is not finite at row {rows[0]}, column {cols[0]}")
    mass_a = np.full(n_a, 1.0 / n_a) if mass_a is None else np.asarray(mass_a, np.float64)
    mass_b = np.full(n_b, 1.0 / n_b) if mass_b is None else np.asarray(mass_b, np.float64)
    M = _pinned_cost(C, pinned_a, pinned_b, geometry)
    if geometry == 0:
        return _sinkhorn(mass_a, mass_b, M, n_inner * n_outer, tol)[0], True
    from ot.gromov import gwggrad, init_matrix

    constC, hA, hB = init_matrix(np.asarray(A, np.float64), np.asarray(B, np.float64), mass_a, mass_b)
    P = np.outer(mass_a, mass_b) if init is None else np.asarray(init, np.float64) / np.sum(init)
    warm, converged = None, False
    for _ in range(int(n_outer)):
        # the cost linearised at P: C + gamma * dGW/dP (gwggrad: 2 sum_kl (A_ik - B_jl)^2 P_kl)
        P_new, warm = _sinkhorn(mass_a, mass_b, M + geometry * gwggrad(constC, hA, hB, P), n_inner, tol, warm)
        change, P = float(np.linalg.norm(P_new - P)), P_new
        if change < tol:
            converged = True
            break
    return P, converged


def coupling_edges(P, rows_a, rows_b, entity_a, entity_b, n_entities: int, k: int = NEIGHBORS):
    """The soft edges (sparse symmetric, n_entities x n_entities) of a coupling P (n_a, n_b) between the unaligned
    rows ``rows_a`` of view a and ``rows_b`` of view b (``entity_a``/``entity_b``: every row's entity): each joined
    to its ``k`` most probable unaligned partners each way, weighted by its probability, P[i, j] over the row's
    (or the column's) mass; a pair both pick carries the larger of the two."""
    import scipy.sparse as sp

    P = np.asarray(P, np.float64)
    by_row = (P / np.maximum(P.sum(axis=1, keepdims=True), np.finfo(float).tiny))[np.ix_(rows_a, rows_b)]
    by_col = (P / np.maximum(P.sum(axis=0, keepdims=True), np.finfo(float).tiny))[np.ix_(rows_a, rows_b)]
    heads_of, tails_of = np.asarray(entity_a)[rows_a], np.asarray(entity_b)[rows_b]
    W = sp.csr_matrix((n_entities, n_entities))
    for Q, axis in ((by_row, 1), (by_col, 0)):
        top = np.argsort(-Q, axis=axis, kind="stable")
        top = top[:, :k] if axis == 1 else top[:k, :]  # [n_a', k] or [k, n_b']
        mass = np.take_along_axis(Q, top, axis)
        if axis == 1:
            heads, tails = np.repeat(np.arange(Q.shape[0]), top.shape[1]), top.ravel()
        else:
            heads, tails = top.ravel(), np.tile(np.arange(Q.shape[1]), top.shape[0])
        mass = mass.ravel()
        keep = mass > 0
        W = W.maximum(sp.coo_matrix((mass[keep], (heads_of[heads[keep]], tails_of[tails[keep]])),
                                    shape=(n_entities, n_entities)).tocsr())
    return W.maximum(W.T).tocsr()


def mad_coupling(mad, a, b, geometry: float = GEOMETRY, init=None, structures=None):
    """q(P) between every row of views a and b of a fitted all-rows MAD: the latent cost of the unaligned rows
    (:meth:`~bayesalign.mad.posteriors.PosteriorAligner.cost_matrix`) over the temperature fitted on the anchors,
    the anchor pairs pinned, the views' structure matrices (``structures``: computed when None). Returns
    ``(P (n_a, n_b), rows_a, rows_b, converged, structures)`` with ``rows_a``/``rows_b`` the unaligned rows."""
    from ..transport import structure_matrix

    problem = mad.problem_
    n_a, n_b = problem.views.n_samples[a], problem.views.n_samples[b]
    rows_a, rows_b, C = mad.cost_matrix(a, b)  # [n_a', n_b'] over the unaligned rows
    temperature = mad.calibrate_temperature(a, b)
    names = problem.views.names
    groups = mad.anchors_
    pinned = (groups[:, names.index(a)], groups[:, names.index(b)])
    full = np.zeros((n_a, n_b))
    full[np.ix_(rows_a, rows_b)] = np.asarray(C) / temperature
    if structures is None and geometry > 0:
        views = problem.views.standardised()
        k = min(STRUCTURE_NEIGHBORS, min(n_a, n_b) - 1)
        structures = (structure_matrix(np.asarray(views[a]), k, a), structure_matrix(np.asarray(views[b]), k, b))
    A, B = structures if structures is not None else (None, None)
    # an anchor pair holds 1 / max(n_a, n_b) on each side (its mass must fit its partner's); the unaligned rows share
    # the rest equally: uniform when the views have as many rows
    share = 1.0 / max(n_a, n_b)
    masses = []
    for n, anchored in ((n_a, pinned[0]), (n_b, pinned[1])):
        mass = np.full(n, (1.0 - share * len(anchored)) / max(n - len(anchored), 1))
        mass[anchored] = share
        masses.append(mass / mass.sum())
    P, converged = coupling_posterior(full, A, B, geometry, pinned=pinned, mass_a=masses[0], mass_b=masses[1],
                                      init=init)
    return P, rows_a, rows_b, converged, structures
