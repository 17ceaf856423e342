"""Match marginals by perturb-and-MAP sampling, and the matching that maximises the expected number of correct pairs.

The marginals may come from :func:`~bayesalign.matching.sinkhorn` or :func:`perturb_and_map`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from .._utils import as_rng
from ..data import Alignment
from .assignment import DEFAULT_VIEWS, _make_alignment, _solve_dense, sparse_assignment
from .costs import _check_cost, _check_limit, _check_temperature

__all__ = ["PerturbAndMapResult", "marginal_assignment", "perturb_and_map"]


class PerturbAndMapResult(NamedTuple):
    """Output of :func:`perturb_and_map`."""

    frequencies: sp.csr_matrix  # [n_a, n_b] fraction of samples that matched i to j
    permutations: np.ndarray  # [S, n_a] column matched to each row per sample, -1 if none
    unmatched_a: np.ndarray  # [n_a] fraction of samples leaving i unmatched
    unmatched_b: np.ndarray  # [n_b]


def perturb_and_map(cost, n_samples: int = 100, temperature: float = 1.0, cost_limit=None, seed=0
                    ) -> PerturbAndMapResult:
    r"""Random assignments by perturb-and-MAP (Papandreou & Yuille 2011).

    Each sample solves the assignment of Gumbel-perturbed costs,

    .. math:: \sigma^{(s)} = \arg\min_\sigma \sum_i \bigl(C_{i\sigma(i)} - T\,G^{(s)}_{i\sigma(i)}\bigr),
              \qquad G^{(s)}_{ij} \sim \text{Gumbel}(0, 1) \text{ i.i.d.},

    with :func:`linear_assignment` (the ``cost_limit`` penalty is not perturbed). Independent
    noise on every pair does not give exactly the Gibbs distribution
    :math:`p(\sigma) \propto \exp(-\sum_i C_{i\sigma(i)}/T)` (that would need one Gumbel per
    permutation); it is the cheap low-order perturbation of the paper. Returns the empirical
    pair frequencies, an estimate of the match marginals. Cost: S dense solves and a dense
    (n_a, n_b) noise buffer (timings: benchmarks/RESULTS.md).

    Examples
    --------
    >>> res = perturb_and_map([[0.0, 5.0], [5.0, 0.0]], n_samples=50, temperature=0.5, seed=0)
    >>> res.frequencies.toarray().tolist(), res.permutations.shape
    ([[1.0, 0.0], [0.0, 1.0]], (50, 2))
    """
    cost = _check_cost(cost)
    limit = _check_limit(cost_limit)
    temperature = _check_temperature(temperature)
    n_samples = int(n_samples)
    if n_samples < 1:
        raise ValueError(f"n_samples must be positive, got {n_samples}")
    rng = as_rng(seed)
    n_a, n_b = cost.shape
    permutations = np.full((n_samples, n_a), -1, dtype=np.int64)
    perturbed = np.empty_like(cost)  # [n_a, n_b], reused
    for s in range(n_samples):
        # G = -log E with E ~ Exp(1) is Gumbel(0, 1): one log per entry, no temporaries
        rng.standard_exponential(out=perturbed)
        np.log(perturbed, out=perturbed)  # = -G
        perturbed *= temperature
        perturbed += cost  # C - T G
        rows, cols = _solve_dense(perturbed, limit)
        permutations[s, rows] = cols
    hit = permutations >= 0
    rows = np.broadcast_to(np.arange(n_a), permutations.shape)[hit]
    counts = sp.csr_matrix((np.ones(rows.size), (rows, permutations[hit])), shape=(n_a, n_b))
    counts.sum_duplicates()
    frequencies = counts / n_samples
    return PerturbAndMapResult(sp.csr_matrix(frequencies), permutations, 1.0 - hit.mean(0),
                               1.0 - np.asarray(frequencies.sum(0)).ravel())


def marginal_assignment(marginals, cost=None, min_probability: float = 0.0, views=DEFAULT_VIEWS,
                        match_all: bool = False) -> Alignment:
    r"""The one-to-one matching that maximises the expected number of correct pairs.

    Given match marginals :math:`P_{ij}` (from :func:`sinkhorn` or :func:`perturb_and_map`),
    the expected number of correct pairs of a matching M is :math:`\sum_{(i,j)\in M} P_{ij}`
    (linearity of expectation), so the minimum-Bayes-risk matching under a per-pair 0-1 loss
    solves

    .. math:: \max_{M \text{ partial matching}} \sum_{(i,j) \in M} \bigl(P_{ij} - p_0\bigr),

    an assignment with ``cost_limit`` (:func:`linear_assignment` on :math:`-P` with limit
    :math:`-p_0`): a pair is made only if its probability exceeds ``min_probability`` = p_0
    (a larger p_0 trades recall for precision). Sparse marginals are solved on their
    non-zeros (a pair with P = 0 can never gain), so no dense matrix is formed.

    With ``match_all`` every point of the smaller view is matched (the best full matching,
    as the Hungarian matcher without a ``cost_limit``): pairs whose probability underflowed
    to 0 may then be needed. For sparse marginals the stored entries (explicit zeros
    included) are the candidate pairs and must admit such a matching.

    Returns an Alignment whose ``probabilities`` are the chosen :math:`P_{ij}` and whose
    ``costs`` are ``cost[i, j]`` if ``cost`` is given, else :math:`1 - P_{ij}`.

    Examples
    --------
    >>> P = [[0.7, 0.3, 0.0], [0.3, 0.6, 0.1], [0.0, 0.1, 0.9]]
    >>> al = marginal_assignment(P)
    >>> al.to_permutation().tolist(), al.probabilities.tolist()
    ([0, 1, 2], [0.7, 0.6, 0.9])
    """
    p0 = float(min_probability)
    if not 0.0 <= p0 < 1.0:
        raise ValueError(f"min_probability must be in [0, 1), got {min_probability}")
    if match_all and p0 > 0:
        raise ValueError("match_all matches every point of the smaller view; it takes no min_probability")
    limit = None if match_all else -p0
    if sp.issparse(marginals):
        coo = sp.coo_matrix(marginals)
        coo.sum_duplicates()
        bad = ~((coo.data >= 0) & (coo.data <= 1 + 1e-9))  # NaN included, as in the dense check
        if bad.any():
            k = np.flatnonzero(bad)[0]
            raise ValueError(f"marginals must lie in [0, 1], got {coo.data[k]} at row {coo.row[k]}, "
                             f"column {coo.col[k]}")
        keep = coo.data >= 0 if match_all else coo.data > p0
        P = sp.csr_matrix((coo.data[keep], (coo.row[keep], coo.col[keep])), shape=coo.shape)
        shape = P.shape
        if P.nnz:
            al = sparse_assignment(sp.csr_matrix((-P.data, P.indices, P.indptr), shape=shape), cost_limit=limit,
                                   views=views)
            rows, cols = al.index_a, al.index_b
        else:
            rows = cols = np.zeros(0, np.int64)
        probs = np.asarray(P[rows, cols]).ravel() if rows.size else np.zeros(0)
    else:
        P = _check_cost(marginals, "marginals", allow_inf=False)
        if (P < 0).any() or (P > 1 + 1e-9).any():
            raise ValueError("marginals must lie in [0, 1]")
        shape = P.shape
        rows, cols = _solve_dense(-P, limit)
        probs = P[rows, cols]
    probs = np.clip(probs, 0.0, 1.0)
    if cost is not None:
        cost = _check_cost(cost)
        if cost.shape != shape:
            raise ValueError(f"cost has shape {cost.shape}, the marginals {shape}")
        pair_costs = cost[rows, cols]
    else:
        pair_costs = 1.0 - probs
    return _make_alignment(rows, cols, pair_costs, shape, views, "marginal", probabilities=probs,
                           expected_correct=float(probs.sum()), min_probability=p0,
                           match_all=bool(match_all))
