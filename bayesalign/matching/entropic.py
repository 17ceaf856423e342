"""Match probabilities by entropic optimal transport: Sinkhorn, with a dustbin, dense and on candidate pairs.

Perturb-and-MAP and the matching that maximises the expected number of correct pairs under the marginals
are in :mod:`bayesalign.matching.marginals`.

Dense Sinkhorn is POT's stabilised solver (``ot.bregman.sinkhorn_stabilized``) on the augmented marginals;
the sparse one (candidate pairs only) is our own, because POT has no Sinkhorn on a sparse support.
Both share one epsilon-scaling schedule (:func:`_epsilon_scaling`) and one augmentation (:func:`_slack`).
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from scipy.special import logsumexp

from .costs import _BLOCK_ENTRIES, _check_cost, _check_limit, _check_temperature

__all__ = ["SinkhornResult", "sinkhorn", "sinkhorn_marginals", "sparse_sinkhorn"]

#: Marginal tolerance of the intermediate (warm-start) temperatures of epsilon scaling.
_STAGE_TOL = 1e-2
#: Dense Sinkhorn sweeps between two checks of the marginal error.
_CHECK_EVERY = 10
#: Sparse Sinkhorn's scalings u, v are folded into its potentials once one leaves [1 / this, this].
_ABSORB_BELOW_ABOVE = 1e50
#: Log-domain sweeps a stage of the sparse solver may take to re-centre potentials whose kernel underflowed before
#: it finishes in the log domain.
_LOG_RESETS = 20
#: Most candidate pairs the completion of :func:`sparse_sinkhorn` grows to (the matcher's SPARSE_ABOVE dense cost).
MAX_CANDIDATE_PAIRS = 25_000_000


class SinkhornResult(NamedTuple):
    """Output of :func:`sinkhorn`."""

    marginals: np.ndarray  # [n_a, n_b] P(i matched to j)
    unmatched_a: np.ndarray  # [n_a] P(i unmatched) = 1 - sum_j P_ij
    unmatched_b: np.ndarray  # [n_b]
    log_potentials: tuple  # (alpha [n_a (+1)], beta [n_b (+1)]), P = exp(alpha + beta - C / T)
    n_iter: int
    error: float  # largest |column mass / target - 1| at exit (rows are exact)
    converged: bool



def _slack(n_a: int, n_b: int, cost_limit):
    """The augmentation that turns the matching constraints into equality marginals.

    Returns (row_mass, col_mass, cost): the mass of an extra row and of an extra column (0: none)
    and their cost to every real point. With ``cost_limit`` L: SuperGlue's dustbins, a row of mass
    n_b and a column of mass n_a at cost L/2 (zero where they meet). Without: a slack row or column
    at cost 0 that takes the larger view's surplus ``|n_b - n_a|``.
    """
    if cost_limit is not None:
        return float(n_b), float(n_a), 0.5 * float(cost_limit)
    return float(max(n_b - n_a, 0)), float(max(n_a - n_b, 0)), 0.0


def _epsilon_scaling(spread: float, temperature: float, tol: float, n_iter: int, solve, warm_start=None):
    """Sinkhorn along temperatures halving from the cost spread down to T, warm-started (Schmitzer 2019).

    The plain iteration needs O(spread / T) sweeps at a low temperature; each stage starts from the
    last one's potentials. ``solve(temp, f, g, stage_tol, budget) -> (f, g, sweeps)`` runs one stage
    (potentials f, g in cost units, None at the start). ``warm_start`` (f, g, T0): the potentials of the
    same problem solved at T0; the stages then start from them, halving from the lower of T0 and the
    spread (a single stage at T when T0 <= T). Once ``n_iter`` sweeps are spent, every remaining stage gets
    one sweep: the potentials returned are always those of T (a hotter stage's give no plan at T),
    and halving keeps each warm start within a factor 2 of its temperature. Returns (f, g, sweeps in all).
    """
    f = g = None
    top = spread
    if warm_start is not None:
        f, g = np.asarray(warm_start[0], np.float64), np.asarray(warm_start[1], np.float64)
        top = min(spread, float(warm_start[2]))
    temperatures = [float(temperature)]
    while temperatures[-1] * 2 < top:
        temperatures.append(temperatures[-1] * 2)
    done = 0
    for stage, temp in enumerate(reversed(temperatures)):
        last = stage == len(temperatures) - 1
        f, g, sweeps = solve(temp, f, g, tol if last else max(tol, _STAGE_TOL), max(n_iter - done, 1))
        done += sweeps
    return f, g, done


def _check_warm_start(warm_start, n_rows: int, n_cols: int):
    """``warm_start`` as (f [n_rows], g [n_cols], T0) float64, finite, T0 > 0 (the augmented problem's sizes)."""
    if warm_start is None:
        return None
    try:
        f, g, t0 = warm_start
    except (TypeError, ValueError):
        raise ValueError("warm_start must be (f, g, T0): potentials in cost units and their temperature, "
                         "as info['potentials'] gives them") from None
    f, g, t0 = np.asarray(f, np.float64), np.asarray(g, np.float64), float(t0)
    if f.shape != (n_rows,) or g.shape != (n_cols,):
        raise ValueError(f"warm_start potentials have shapes {f.shape} and {g.shape}; this problem (with its slack "
                         f"or dustbins) needs ({n_rows},) and ({n_cols},)")
    if not (t0 > 0 and np.isfinite(t0) and np.isfinite(f).all() and np.isfinite(g).all()):
        raise ValueError("warm_start must hold finite potentials and a positive temperature")
    return f, g, t0


def _column_error(col_mass, target) -> float:
    """Largest relative violation |mass / target - 1| of the column marginals."""
    return float(np.max(np.abs(col_mass / target - 1.0))) if target.size else 0.0


def sinkhorn(cost, temperature: float = 1.0, cost_limit=None, n_iter: int = 1000, tol: float = 1e-9,
             warm_start=None) -> SinkhornResult:
    r"""Soft assignment by entropic optimal transport, in the log domain (Cuturi 2013).

    Solves :math:`\min_P \langle C, P\rangle - T\,H(P)` over match-marginal matrices P >= 0:

    * square, no limit: rows and columns sum to 1 (doubly stochastic);
    * rectangular, no limit: the smaller view's rows sum to 1, the larger view's to at most 1:
      a slack row (or column) at cost 0 takes the larger view's surplus mass ``|n_b - n_a|``
      (as T -> 0 this is the rectangular assignment's linear programme);
    * with ``cost_limit = L``: SuperGlue's dustbin (Sarlin et al. 2020, section 3.2): an extra
      row and column with cost L/2 (zero where they meet) and masses n_b and n_a, so every
      point is matched or left in the dustbin with total probability 1.

    The augmented problem has plain equality marginals, solved by POT's stabilised Sinkhorn
    (``ot.bregman.sinkhorn_stabilized``, Schmitzer 2019: scaling updates :math:`u = a / K v`,
    :math:`v = b / K^\top u` on the kernel :math:`K_{ij} = \exp((\alpha_i + \beta_j - C_{ij})/T)`, whose
    large values are absorbed into the log potentials :math:`\alpha, \beta` whenever they grow, so
    :math:`P_{ij} = \exp((\alpha_i + \beta_j - C_{ij})/T)` never overflows; matrix-vector products per
    sweep instead of a log-sum-exp over every entry), warm-started along temperatures halving from the
    cost spread down to T (epsilon scaling, Schmitzer 2019): large costs or small temperatures
    underflow to 0, never NaN. As
    T -> 0 the marginals tend to the optimal assignment of :func:`linear_assignment` (with
    the same ``cost_limit``). The (n_a, n_b) marginal matrix is the output, so this is dense by
    nature: O(n_a n_b) memory and time per iteration. To use a log-kernel K instead of costs,
    pass ``cost=-K, temperature=1``.

    Parameters
    ----------
    cost : array (n_a, n_b), finite
    temperature : float > 0
        T above (the entropic regularisation, in units of cost).
    cost_limit : float, optional
        L above (dustbin).
    n_iter, tol : int, float
        Maximum iterations (over all temperature stages; once spent, each remaining stage still
        gets one, so that the result is at T); tolerance on the marginal error, the
        largest ``|column mass / target - 1|`` (the rows are exact after each iteration).
    warm_start : (f, g, T0), optional
        Potentials in cost units of the augmented problem, :math:`(T_0 \alpha, T_0 \beta)` of a solve of the
        same costs at temperature T0, and T0: the solve starts from them (epsilon scaling from T0 down, or a
        single stage when T0 <= T). The optimal potentials move little between nearby temperatures, so a
        search over T (:meth:`bayesalign.MAD.calibrate_temperature`) needs far fewer sweeps.

    Returns
    -------
    SinkhornResult
        ``marginals`` (n_a, n_b), ``unmatched_a`` / ``unmatched_b`` (dustbin or leftover
        mass), ``log_potentials``, ``n_iter``, ``error``, ``converged``. A RuntimeWarning is
        issued if not converged.

    Examples
    --------
    >>> res = sinkhorn([[0.0, 1.0], [1.0, 0.0]], temperature=1.0)
    >>> round(float(res.marginals[0, 0]), 4), res.converged   # e / (1 + e)
    (0.7311, True)
    """
    cost = _check_cost(cost, allow_inf=False)
    temperature = _check_temperature(temperature)
    limit = _check_limit(cost_limit)
    n_a, n_b = cost.shape
    row_mass, col_mass, slack_cost = _slack(n_a, n_b, limit)
    a, b = np.ones(n_a), np.ones(n_b)
    if col_mass:
        cost, b = np.hstack([cost, np.full((n_a, 1), slack_cost)]), np.r_[b, col_mass]  # [n_a, n_b + 1]
    if row_mass:
        corner = [0.0] if col_mass else []
        cost, a = np.vstack([cost, np.r_[np.full(n_b, slack_cost), corner]]), np.r_[a, row_mass]

    import ot  # on first use: POT loads its torch backend, too heavy for `import bayesalign`

    def solve(temp, f, g, stage_tol, budget):
        # POT stops on the L2 norm of the column error; we stop on its largest entry (as the sparse path),
        # checked on the plan POT returns after every _CHECK_EVERY sweeps
        warm = None if f is None else (f, g)  # potentials in cost units
        sweeps = 0
        while sweeps < budget:
            chunk = min(_CHECK_EVERY, budget - sweeps)
            with np.errstate(over="ignore", divide="ignore"):  # POT's own checks may overflow before it settles
                plan, log = ot.bregman.sinkhorn_stabilized(a, b, cost, temp, numItermax=chunk, stopThr=0.0,
                                                           log=True, warn=False, warmstart=warm)
            sweeps += chunk
            warm = log["warmstart"]  # (alpha, beta): the scalings absorbed into the potentials
            if _column_error(plan.sum(0), b) <= stage_tol:
                break
        return warm[0], warm[1], sweeps

    warm_start = _check_warm_start(warm_start, a.size, b.size)
    f, g, n_done = _epsilon_scaling(float(cost.max() - cost.min()), temperature, tol, int(n_iter), solve, warm_start)
    # the last row update once more, in the log domain: POT's rows are exact in its kernel, but its potentials
    # round (to ulps of spread / T, visible at T ~ 1e-12 spread) and a row may underflow entirely
    log_plan = (f[:, None] + g[None, :] - cost) / temperature  # [n_a (+1), n_b (+1)]
    row_shift = np.log(a) - logsumexp(log_plan, axis=1)  # [n_a (+1)]
    plan = np.exp(log_plan + row_shift[:, None])
    alpha, beta = f / temperature + row_shift, g / temperature
    error = _column_error(plan.sum(0), b)
    converged = error <= tol
    if not converged:
        warnings.warn(f"sinkhorn did not converge in {n_iter} iterations (marginal error {error:.2e}); "
                      "raise n_iter or the temperature", RuntimeWarning, stacklevel=2)
    marginals = plan[:n_a, :n_b]
    return SinkhornResult(marginals, np.clip(1.0 - marginals.sum(1), 0.0, 1.0),
                          np.clip(1.0 - marginals.sum(0), 0.0, 1.0), (alpha, beta), n_done, error, converged)


class _Segments:
    """Edges grouped by a segment id (a row or a column), for segmented reductions by ``reduceat``."""

    def __init__(self, ids, n_segments: int):
        self.order = np.argsort(ids, kind="stable")
        counts = np.bincount(ids, minlength=n_segments)
        self.present = counts > 0
        self.starts = np.r_[0, np.cumsum(counts)[:-1]][self.present]
        self.counts = counts[self.present]
        self.n = n_segments

    def logsumexp(self, values) -> np.ndarray:
        """log sum exp of ``values`` per segment: [n_segments] (-inf for a segment without edges).

        Own code: scipy.special.logsumexp has no segmented (ragged) form.
        """
        v = values[self.order]
        out = np.full(self.n, -np.inf)
        if not v.size:
            return out
        top = np.maximum.reduceat(v, self.starts)
        top = np.where(np.isfinite(top), top, 0.0)
        out[self.present] = top + np.log(np.add.reduceat(np.exp(v - np.repeat(top, self.counts)), self.starts))
        return out


def sparse_sinkhorn(ei, ej, cost, temperature, shape, cost_limit=None, tol: float = 1e-3, n_iter: int = 5000,
                   costs=None, max_rounds: int = 8, info: dict | None = None, warm_start=None):
    r"""Sinkhorn on candidate pairs: (csr marginals [n_a, n_b], marginal error).

    The sparse counterpart of :func:`sinkhorn` for candidate pairs (e.g. k nearest neighbours):
    the same problem, augmentation and epsilon scaling, with exp(-C/T) set to 0 outside the
    candidate pairs. Each sweep is two sparse products in the stabilised scaling form (potentials
    absorbed as the scalings grow; log-domain sweeps where a row's or column's kernel underflows).
    Memory and time per sweep O(edges). Stops at ``tol`` (largest
    ``|column mass / target - 1|``) or after ``n_iter`` sweeps in all; rows / columns above 1 are
    then scaled down, as in :func:`sinkhorn_marginals`. Our own: POT has no sparse Sinkhorn.

    Leaving pairs out is not harmless: every row must put its unit mass on its candidates, so a
    row whose candidates are few (an anti-hub, in nobody else's k nearest) gets confident
    probabilities whatever T is. With ``costs`` (a source of cost rows, ``costs.block(rows) ->
    [len(rows), n_b]``) the candidates are completed until the plan is that of the full problem:
    after each solve, every left-out pair's mass under the final potentials,
    :math:`\exp((f_i + g_j - C_{ij}) / T)`, is computed in row blocks (memory O(block * n_b), time
    O(n_a n_b) per round), the pairs above ``tol / max(n_a, n_b)`` join the candidates, and Sinkhorn
    resumes from the same potentials, until no row or column leaves more than ``tol`` of mass out
    (or ``max_rounds``; near ``MAX_CANDIDATE_PAIRS`` a row gains only its heaviest pairs). The left-out mass
    only falls as candidates join (the potentials fall), so the last check bounds what the returned marginals
    miss; the returned error is the larger of the marginal error and that bound.

    ``info`` (a dict) receives ``log_potentials``: (alpha [n_a], beta [n_b]) with
    :math:`\log P_{ij} = \alpha_i + \beta_j - C_{ij} / T` for *every* pair, candidate or not (before the
    final scaling of rows or columns above 1, which changes a marginal by at most the error): the log
    probability of a pair whose marginal underflows, or was left out as below the tolerance; and
    ``potentials``: (f, g, T), the potentials in cost units of the augmented problem (slack or dustbins
    last), which ``warm_start`` takes (as :func:`sinkhorn`'s) to start a solve at another temperature;
    and ``edges``: (ei, ej), the candidate pairs the solve ended on (the given ones and those that joined),
    the candidates for a solve of the same costs from those potentials.
    With ``costs`` the pairs that the warm potentials give mass at T join the candidates first; without,
    candidates that leave such pairs out can make a warm start converge more slowly than a cold one.
    """
    n_a, n_b = shape
    cost = np.asarray(cost, np.float64)  # [E]
    ei, ej = np.asarray(ei, np.int64), np.asarray(ej, np.int64)
    temperature = _check_temperature(temperature)
    state = _SparseSinkhorn(n_a, n_b, cost_limit)
    state.set_edges(ei, ej, cost)
    spread = float(cost.max() - cost.min()) if cost.size else 0.0
    warm_start = _check_warm_start(warm_start, state.a.size, state.b.size)
    if warm_start is not None and costs is not None:
        # the pairs the warm potentials give mass at T join before the solve: started from potentials of the full
        # problem, Sinkhorn on candidates that leave those pairs out converges very slowly, if at all
        (ni, nj, nc), _ = _left_out_pairs(costs, (n_a, n_b), state, warm_start[0], warm_start[1], temperature, tol)
        if ni.size:
            ei, ej, cost = np.r_[ei, ni], np.r_[ej, nj], np.r_[cost, nc]
            state.set_edges(ei, ej, cost)
    f, g, _ = _epsilon_scaling(spread, temperature, tol, int(n_iter), state.solve, warm_start)
    left_out = 0.0
    if costs is not None:
        for _ in range(int(max_rounds)):
            (ni, nj, nc), left_out = _left_out_pairs(costs, (n_a, n_b), state, f, g, temperature, tol)
            if not ni.size:
                break
            ei, ej, cost = np.r_[ei, ni], np.r_[ej, nj], np.r_[cost, nc]
            state.set_edges(ei, ej, cost)
            f, g, _ = state.solve(temperature, f, g, tol, int(n_iter))
    plan, error = state.plan(f, g, temperature)
    if info is not None:
        info["log_potentials"] = (f[:n_a] / temperature, g[:n_b] / temperature)
        info["potentials"] = (f, g, temperature)
        info["edges"] = (ei, ej)
    keep = (state.ei < n_a) & (state.ej < n_b)
    P = sp.csr_matrix((plan[keep], (state.ei[keep], state.ej[keep])), shape=(n_a, n_b))
    row_sum = np.asarray(P.sum(1)).ravel()
    P = sp.diags(1.0 / np.maximum(row_sum, 1.0)) @ P
    col_sum = np.asarray(P.sum(0)).ravel()
    P = sp.csr_matrix(P @ sp.diags(1.0 / np.maximum(col_sum, 1.0)))
    return P, max(error, left_out)


class _SparseSinkhorn:
    """The augmented sparse problem (slack row / column or dustbins) and its Sinkhorn sweeps (scaling form, log domain
    where the kernel underflows)."""

    def __init__(self, n_a: int, n_b: int, cost_limit):
        self.n_a, self.n_b = n_a, n_b
        self.row_mass, self.col_mass, self.slack_cost = _slack(n_a, n_b, cost_limit)
        self.a = np.r_[np.ones(n_a), [self.row_mass] if self.row_mass else []]
        self.b = np.r_[np.ones(n_b), [self.col_mass] if self.col_mass else []]
        self.log_a, self.log_b = np.log(self.a), np.log(self.b)

    def set_edges(self, ei, ej, cost):
        """The real candidate pairs, augmented by the slack row / column (their edges to every point)."""
        n_a, n_b = self.n_a, self.n_b
        if self.col_mass:  # slack column n_b
            ei, ej = np.r_[ei, np.arange(n_a)], np.r_[ej, np.full(n_a, n_b)]
            cost = np.r_[cost, np.full(n_a, self.slack_cost)]
        if self.row_mass:  # slack row n_a (and the corner, at 0, when both)
            corner = np.array([n_b] if self.col_mass else [], np.int64)
            ei, ej = np.r_[ei, np.full(n_b + corner.size, n_a)], np.r_[ej, np.arange(n_b), corner]
            cost = np.r_[cost, np.full(n_b, self.slack_cost), np.zeros(len(corner))]
        self.ei, self.ej, self.cost = ei, ej, cost
        self.by_row, self.by_col = _Segments(ei, self.a.size), _Segments(ej, self.b.size)
        # the CSR layouts of the kernel and of its transpose: data in these orders, structure fixed
        self._rows = (self.by_row.order, ej[self.by_row.order],
                      np.r_[0, np.cumsum(np.bincount(ei, minlength=self.a.size))])
        self._cols = (self.by_col.order, ei[self.by_col.order],
                      np.r_[0, np.cumsum(np.bincount(ej, minlength=self.b.size))])

    def _kernels(self, f, g, temp):
        """(K, K') as CSR matrices: K_ij = exp((f_i + g_j - C_ij) / temp) on the edges, and its transpose."""
        values = np.exp((f[self.ei] + g[self.ej] - self.cost) / temp)  # [E]
        (order_r, cols, ptr_r), (order_c, rows, ptr_c) = self._rows, self._cols
        return (sp.csr_matrix((values[order_r], cols, ptr_r), shape=(self.a.size, self.b.size)),
                sp.csr_matrix((values[order_c], rows, ptr_c), shape=(self.b.size, self.a.size)))

    def solve(self, temp, f, g, stage_tol, budget):
        """Sweeps at temperature ``temp`` from potentials f, g (cost units; None: a start at or below every
        cost) until the column error is below ``stage_tol`` or ``budget`` sweeps: (f, g, sweeps).

        Sinkhorn's scaling form, stabilised by absorption (Schmitzer 2019, section 4.1; POT's
        ``sinkhorn_stabilized``): the plan is diag(u) K diag(v) with K_ij = exp((f_i + g_j - C_ij) / T), each
        sweep two sparse products, v = b / (K' u) and u = a / (K v), and u, v are folded into the potentials
        (f += T log u, g += T log v, K recomputed) once either leaves [1 / ``_ABSORB_BELOW_ABOVE``,
        ``_ABSORB_BELOW_ABOVE``]. From the same potentials these are the log-domain sweeps' iterates (:meth:`solve_log`)
        in exact arithmetic, at two sparse products a sweep instead of two segmented log-sum-exps; where a row's or
        column's kernel entries all underflow (a scaling would be infinite) one log-domain sweep re-centres the
        potentials and the scaling form goes on (after ``_LOG_RESETS`` of them, the stage ends in the log domain).
        """
        given = f is not None
        if f is None:  # f_i = min_j C_ij: every kernel entry at most 1, each row's largest exactly 1
            f = np.full(self.a.size, np.inf)
            np.minimum.at(f, self.ei, self.cost)
            f = np.where(np.isfinite(f), f, 0.0)
        f = np.array(f, np.float64)
        g = np.zeros(self.b.size) if g is None else np.array(g, np.float64)
        if given and self.ei.size:  # a row whose largest kernel entry exp((f_i + g_j - C_ij) / T) would pass the
            # absorption bound (potentials of fewer candidates, or of a hotter stage) starts with f_i lowered until
            # it is 1: no overflow, and the same fixed point (the row scaling u_i takes any shift of f_i)
            top = np.zeros(self.a.size)
            top[self.by_row.present] = np.maximum.reduceat(
                ((f[self.ei] + g[self.ej] - self.cost) / temp)[self.by_row.order], self.by_row.starts)
            f -= temp * np.where(top > np.log(_ABSORB_BELOW_ABOVE), top, 0.0)
        sweeps, resets = 0, 0
        while True:
            f, g, done, stuck = self._scaling_sweeps(temp, f, g, stage_tol, budget - sweeps)
            sweeps += done
            if not stuck or sweeps >= budget:
                break
            if resets == _LOG_RESETS:  # the scaling form keeps underflowing: the rest in the log domain
                f, g, more = self.solve_log(temp, f, g, stage_tol, budget - sweeps)
                return f, g, sweeps + more
            # one log-domain sweep re-centres the potentials (every row and column then has kernel mass), and the
            # scaling form goes on from them
            f, g, more = self.solve_log(temp, f, g, stage_tol, 1)
            sweeps, resets = sweeps + more, resets + 1
        return f, g, sweeps

    def _scaling_sweeps(self, temp, f, g, stage_tol, budget):
        """Scaling sweeps of :meth:`solve` from potentials f, g: (f, g, sweeps, stuck), stuck when a row's or
        column's kernel entries all underflowed (the potentials are those of the last finite scalings)."""
        K, KT = self._kernels(f, g, temp)
        u, v = np.ones(self.a.size), np.ones(self.b.size)
        sweeps, stuck = 0, False
        while True:
            Ktu = KT @ u  # [cols]: v * Ktu is the plan's column mass
            if sweeps >= budget or sweeps and _column_error(v * Ktu, self.b) <= stage_tol:
                break
            with np.errstate(divide="ignore", over="ignore"):
                v_next = self.b / Ktu
                stuck = not np.isfinite(v_next).all()
                if stuck:
                    break
                u_next = self.a / (K @ v_next)
                stuck = not np.isfinite(u_next).all()
                if stuck:
                    break
            u, v = u_next, v_next
            sweeps += 1
            if max(u.max(), v.max(), 1 / u.min(), 1 / v.min()) > _ABSORB_BELOW_ABOVE:
                f, g = f + temp * np.log(u), g + temp * np.log(v)
                u, v = np.ones_like(u), np.ones_like(v)
                K, KT = self._kernels(f, g, temp)
        return f + temp * np.log(u), g + temp * np.log(v), sweeps, stuck

    def solve_log(self, temp, f, g, stage_tol, budget):
        """Log-domain sweeps at temperature ``temp`` from potentials f, g (cost units; None: zero) until the
        column error is below ``stage_tol`` or ``budget`` sweeps: (f, g, sweeps)."""
        logk = self.cost / -temp  # [E]
        alpha = np.zeros(self.a.size) if f is None else f / temp
        beta = np.zeros(self.b.size) if g is None else g / temp
        sweeps = 0
        while sweeps < budget:
            sweeps += 1
            beta = self.log_b - self.by_col.logsumexp(logk + alpha[self.ei])
            alpha = self.log_a - self.by_row.logsumexp(logk + beta[self.ej])
            col = np.bincount(self.ej, np.exp(logk + alpha[self.ei] + beta[self.ej]), minlength=self.b.size)
            if _column_error(col, self.b) <= stage_tol:
                break
        return temp * alpha, temp * beta, sweeps

    def plan(self, f, g, temperature):
        """The plan on the edges [E] and its column error."""
        plan = np.exp((f[self.ei] + g[self.ej] - self.cost) / temperature)  # [E]
        return plan, _column_error(np.bincount(self.ej, plan, minlength=self.b.size), self.b)


def _left_out_pairs(costs, shape, state, f, g, temperature, tol):
    """Pairs outside the candidates whose mass exp((f_i + g_j - C_ij) / T) exceeds tol / max(n_a, n_b) (each
    row's heaviest under ``MAX_CANDIDATE_PAIRS``), with their costs, and the largest mass a row or column leaves
    out; in row blocks of ``costs``."""
    n_a, n_b = shape
    per_row = max(MAX_CANDIDATE_PAIRS - state.ei.size, 0) // max(n_a, 1)
    order, cols, ptr = state._rows  # the candidates row by row (the kernel's CSR layout): a block's are contiguous
    threshold = tol / max(n_a, n_b)
    chunk = max(1, _BLOCK_ENTRIES // max(n_b, 1))
    new_i, new_j, new_c = [], [], []
    row_out, col_out = np.zeros(n_a), np.zeros(n_b)
    for start in range(0, n_a, chunk):
        rows = np.arange(start, min(start + chunk, n_a))
        block = costs.block(rows)  # [r, n_b]
        log_mass = (f[rows, None] + g[None, :n_b] - block) / temperature  # [r, n_b]
        lo, hi = ptr[rows[0]], ptr[rows[-1] + 1]
        real = cols[lo:hi] < n_b  # not the slack column
        log_mass.ravel()[(state.ei[order[lo:hi]][real] - rows[0]) * n_b + cols[lo:hi][real]] = -np.inf
        mass = np.exp(np.minimum(log_mass, 0.0))  # at most 1 (a probability: a larger one is as far out)
        row_out[rows], col_out = mass.sum(1), col_out + mass.sum(0)
        kth = -np.partition(-log_mass, per_row - 1, 1)[:, [per_row - 1]] if 0 < per_row < n_b else -np.inf
        li, lj = np.nonzero((mass > threshold) & (log_mass >= kth) & (per_row > 0))  # a row's heaviest per_row
        new_i.append(rows[li]), new_j.append(lj), new_c.append(block[li, lj])
    left_out = float(max(row_out.max(initial=0.0), col_out.max(initial=0.0)))
    if left_out <= tol:
        empty = np.zeros(0, np.int64)
        return (empty, empty, np.zeros(0)), left_out
    return (np.concatenate(new_i), np.concatenate(new_j), np.concatenate(new_c)), left_out


def sinkhorn_marginals(C, temperature, cost_limit=None, tol: float = 1e-3, n_iter: int = 5000,
                       info: dict | None = None, warm_start=None):
    """Sinkhorn match marginals of exp(-C / T) (dustbin with ``cost_limit``) and the marginal error.

    Near-hard problems (tiny posterior variances, hence costs spanning thousands of
    temperatures) make Sinkhorn converge sublinearly, and probabilities need no more than
    about 1e-2: iterations stop at ``tol`` or after ``n_iter``, the remaining error is
    returned (MAD puts it in ``info["sinkhorn_error"]``) instead of warned about, and any row
    or column that still sums above 1 (by at most that error) is scaled down to 1, so the
    result is always a sub-stochastic matrix. ``info`` (a dict) receives ``log_potentials`` and
    ``potentials`` as :func:`sparse_sinkhorn`'s: the log marginal of every pair, also where it
    underflows to 0, and the warm start of a solve at another temperature (``warm_start``).
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="sinkhorn did not converge")
        soft = sinkhorn(C, temperature=temperature, cost_limit=cost_limit, n_iter=n_iter, tol=tol,
                        warm_start=warm_start)
    P = soft.marginals  # [n_a, n_b]
    if info is not None:
        alpha, beta = soft.log_potentials
        info["log_potentials"] = (alpha[:P.shape[0]], beta[:P.shape[1]])
        info["potentials"] = (alpha * float(temperature), beta * float(temperature), float(temperature))
    P = P / np.maximum(P.sum(1, keepdims=True), 1.0)
    P = P / np.maximum(P.sum(0, keepdims=True), 1.0)
    return P, float(soft.error)
