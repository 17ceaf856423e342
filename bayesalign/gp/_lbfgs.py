"""The one L-BFGS of ``bayesalign.gp``: :func:`minimize_rows`, n independent functions at once, each row with its
own curvature pairs and line search (the inference of new rows' q(x*); a model's fit is its one-row case,
:func:`bayesalign.gp._optim.maximize`)."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import torch

__all__ = ["LBFGS_MEMORY", "NonFiniteBoundError", "minimize_rows"]

#: Trials of one line search (as scipy's L-BFGS-B, ``maxls``) before the row's memory is dropped.
MAX_LINE_SEARCH = 20

#: Sufficient-decrease constant of the line search (Armijo, Nocedal & Wright eq. 3.4; L-BFGS-B's is 1e-3).
LINE_SEARCH_DECREASE = 1e-3

#: Gradient (sup norm) at which a row has converged whatever ``tol`` says (scipy's ``gtol``).
GRADIENT_TOL = 1e-8

#: Default correction pairs L-BFGS keeps (scipy's ``maxcor``; GPy / scipy default 10); 30 reach GPy's bound
#: in fewer evaluations on the reference MRD workload (benchmarks/RESULTS.md, "Bayesian core").
LBFGS_MEMORY = 30


class NonFiniteBoundError(FloatingPointError):
    """The bound (or its gradient) became NaN or infinite during a fit; the best parameters were restored."""



def _two_loop(grad, s_hist, y_hist, rho, oldest, gamma, h0):
    """L-BFGS direction -H grad of every row (Nocedal & Wright, Algorithm 7.4), [k, P].

    ``s_hist``, ``y_hist`` [m, k, P] hold each row's curvature pairs in a ring buffer whose oldest slot
    is ``oldest``; ``rho`` [m, k] is ``1 / s'y``, zero for an empty slot (which then drops out of
    both loops); the initial inverse Hessian is ``gamma diag(h0)`` (gamma [k], h0 [k, P]).
    """
    m = rho.shape[0]
    order = [(oldest + i) % m for i in range(m)]  # oldest first
    q = grad.clone()
    a = {}
    for i in reversed(order):
        a[i] = rho[i] * (s_hist[i] * q).sum(1)  # [k]
        q -= a[i][:, None] * y_hist[i]
    r = gamma[:, None] * h0 * q
    for i in order:
        b = rho[i] * (y_hist[i] * r).sum(1)  # [k]
        r += s_hist[i] * (a[i] - b)[:, None]
    return -r


def minimize_rows(fun: Callable, x0: torch.Tensor, *, precondition: Callable | None = None,
                  max_iter: int = 500, tol: float = 1e-10, memory: int = LBFGS_MEMORY, progress: bool = False,
                  desc: str = "rows"):
    r"""Minimise n independent functions of P variables at once: per-row L-BFGS, batched evaluations.

    ``fun(x, rows)`` evaluates the rows ``rows`` [k] (indices into ``x0``) at ``x`` [k, P] and returns
    their values [k], gradients [k, P] and, optionally, the round-off scale of the values [k] (below
    which their differences are noise); one call serves every row still moving. Each row has its
    own L-BFGS memory (``memory`` pairs; a pair with :math:`s'y \le \epsilon\, y' \mathrm{diag}(h_0) y` is
    skipped), step and backtracking Armijo line search (Nocedal & Wright, 2006, Algorithm 7.4, eq. 3.4,
    quadratic interpolation of Section 3.5, steps kept in [0.1, 0.5] of the previous one). The initial inverse
    Hessian of the two-loop recursion is :math:`\gamma\, \mathrm{diag}(h_0)` with
    :math:`\gamma = s'y / y' \mathrm{diag}(h_0) y` of the newest pair (eq. 7.20) and
    ``h0 = precondition(x, grad)`` [k, P] (ones if None). A row without memory (its first step, or
    after its line search stalled) takes the step :math:`-t\, h_0 \circ g` with
    :math:`t = \min(1, 1 / \sqrt{g' \mathrm{diag}(h_0) g})`: at most unit length in the metric of
    the preconditioner.

    A row stops when (as scipy's L-BFGS-B, but per row) an accepted step decreased its value by at
    most ``max(tol * max(|f_k|, |f_k+1|, 1), r)`` (r the round-off scale), or its gradient's largest
    entry is at most :data:`GRADIENT_TOL`, or the decrease its next L-BFGS step predicts (half the directional
    derivative) is below r, or its line search can make no progress even from the preconditioned
    steepest descent (below r, or steps below machine precision; the row keeps its best point). A
    trial point with a non-finite value or gradient counts as a failed line-search step (the row
    backtracks), so the rows only ever move to finite points.

    Parameters
    ----------
    fun : callable (x [k, P], rows [k]) -> (values [k], gradients [k, P][, round-off [k]])
    x0 : tensor [n, P]
        Starting points (their values must be finite).
    precondition : callable (x [k, P], grad [k, P]) -> tensor [k, P], optional
        A positive diagonal guess of each row's inverse Hessian.
    max_iter : int
        Most calls of ``fun`` (the first at ``x0`` included), hence most evaluations of any one row.
    tol : float
        Relative decrease of a row's value per step below which it has converged.
    memory : int
        Curvature pairs kept per row (scipy's ``maxcor``).
    progress : bool
        A tqdm bar over the evaluations, with the number of rows still moving.

    Returns
    -------
    x : tensor [n, P]
        Each row's best point.
    info : dict
        ``n_evals`` (calls of ``fun``), ``row_evals`` [n] (evaluations of each row), ``converged``
        [n] bool, ``stalled`` [n] bool (the rows whose line search could make no progress from steepest
        descent, within the round-off or :data:`MAX_LINE_SEARCH` trials: converged when their round-off
        scale says so), ``interrupted`` (always False: a KeyboardInterrupt is warned about and re-raised).

    Raises
    ------
    NonFiniteBoundError
        When a row's value or gradient at its starting point is not finite (naming the rows).

    Examples
    --------
    Three rows of a quadratic with different curvatures and minima:

    >>> scale = torch.tensor([[1.0, 2.0], [10.0, 1.0], [0.1, 5.0]], dtype=torch.float64)
    >>> target = torch.tensor([[1.0, -1.0], [0.5, 2.0], [-3.0, 0.0]], dtype=torch.float64)
    >>> def fun(x, rows):
    ...     diff = x - target[rows]
    ...     return 0.5 * (scale[rows] * diff.square()).sum(1), scale[rows] * diff
    >>> x, info = minimize_rows(fun, torch.zeros(3, 2, dtype=torch.float64), tol=1e-14)
    >>> torch.allclose(x, target, atol=1e-6), bool(info["converged"].all())
    (True, True)
    """
    n, P = x0.shape
    out = x0.detach().clone()  # [n, P]
    row_evals = torch.zeros(n, dtype=torch.long, device=x0.device)
    converged = torch.zeros(n, dtype=torch.bool, device=x0.device)
    stalled_rows = torch.zeros(n, dtype=torch.bool, device=x0.device)
    info = {"n_evals": 0, "row_evals": row_evals, "converged": converged, "stalled": stalled_rows,
            "interrupted": False}
    m = int(memory)
    if m < 1:
        raise ValueError(f"memory must be >= 1, got {memory!r}")
    if n == 0 or max_iter <= 0:
        return out, info
    eps = torch.finfo(x0.dtype).eps
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=max_iter, desc=desc, leave=False, disable=None)  # None: no bar unless stderr is a tty

    def evaluate(x, rows):
        out = fun(x, rows)
        info["n_evals"] += 1
        row_evals[rows] += 1
        if bar is not None:
            bar.update(1)
            bar.set_postfix(rows=int(rows.shape[0]), refresh=False)
        f, g = out[0].detach(), out[1].detach()
        return f, g, (out[2].detach() if len(out) > 2 else torch.zeros_like(f))

    def metric(x, g):
        return torch.ones_like(x) if precondition is None else precondition(x, g)

    def steepest(g, h0):
        """Preconditioned steepest descent and its first step length (at most unit length)."""
        d = -h0 * g
        return d, torch.clamp((g * -d).sum(1).clamp_min(eps).rsqrt(), max=1.0)

    rows = torch.arange(n, device=x0.device)  # [k] the rows still moving
    x = out.clone()
    try:
        f, g, noise = evaluate(x, rows)  # [k], [k, P], [k]
        bad = ~(torch.isfinite(f) & torch.isfinite(g).all(1))
        if bool(bad.any()):
            which = torch.nonzero(bad).reshape(-1)
            raise NonFiniteBoundError(
                f"the bound (or its gradient) is not finite at the starting point of {which.numel()} row(s), "
                f"e.g. rows {which[:10].tolist()}; check these rows for NaN / inf values")
        s_hist = x.new_zeros(m, n, P)  # [m, k, P] oldest first
        y_hist = x.new_zeros(m, n, P)
        rho = x.new_zeros(m, n)  # [m, k]; 0 = empty slot
        trials = torch.zeros(n, dtype=torch.long, device=x0.device)  # [k] trials of each row's line search
        slot = 0  # the ring buffer's next (= oldest) slot, common to all rows
        gamma = x.new_ones(n)  # [k]
        d, t = steepest(g, metric(x, g))  # [k, P], [k]
        while info["n_evals"] < max_iter and rows.numel() > 0:
            trial = x + t[:, None] * d  # [k, P]
            f_t, g_t, noise_t = evaluate(trial, rows)
            floor = torch.maximum(noise, noise_t.nan_to_num(0.0, 0.0, 0.0))
            finite = torch.isfinite(f_t) & torch.isfinite(g_t).all(1)
            slope = (g * d).sum(1)  # [k] < 0: d is a descent direction
            accept = finite & (f_t <= f + LINE_SEARCH_DECREASE * t * slope)
            trials = torch.where(accept, 0, trials + 1)
            # rejected rows: a shorter step, the minimiser of the quadratic through f, slope and f_t
            curvature = f_t - f - t * slope  # > 0 where Armijo failed
            t_quad = torch.nan_to_num(-slope * t * t / (2.0 * curvature), nan=0.0, posinf=0.0, neginf=0.0)
            t_back = torch.where(finite, torch.minimum(torch.maximum(t_quad, 0.1 * t), 0.5 * t), 0.1 * t)
            tiny = t_back * d.norm(dim=1) <= eps * (1.0 + x.norm(dim=1))  # steps below machine precision
            stalled = ~accept & ((-t_back * slope <= floor) | tiny | (trials >= MAX_LINE_SEARCH))
            restart = stalled & (rho != 0).any(0)  # a stalled L-BFGS direction: retry from steepest descent
            scale = torch.maximum(torch.maximum(f.abs(), f_t.abs()), torch.ones_like(f))
            small = (f - f_t <= torch.maximum(tol * scale, floor)) | (g_t.abs().amax(1) <= GRADIENT_TOL)
            done = (accept & small) | (stalled & ~restart)
            # accepted rows: move, and store the curvature pair (skipped when s'y is not clearly positive)
            s, y = trial - x, g_t - g
            sy = (s * y).sum(1)
            x = torch.where(accept[:, None], trial, x)
            f = torch.where(accept, f_t, f)
            g = torch.where(accept[:, None], g_t, g)
            noise = torch.where(accept, noise_t, noise)
            h0 = metric(x, g)  # [k, P]
            yhy = (y * h0 * y).sum(1)
            push = accept & (sy > eps * yhy)
            # one ring slot per evaluation for every row (a copy of [k, P], not a shift of [m, k, P]):
            # empty (rho = 0) where the row stores no pair, so a row keeps the pairs of its accepted
            # steps among the last m evaluations
            s_hist[slot] = torch.where(push[:, None], s, 0.0)  # zeros, not a failed trial's NaN (0 * NaN = NaN)
            y_hist[slot] = torch.where(push[:, None], y, 0.0)
            rho[slot] = torch.where(push, 1.0 / sy.where(push, 1.0), 0.0)
            slot = (slot + 1) % m
            rho = torch.where(restart, 0.0, rho)  # forget the memory (empty slots have rho = 0)
            trials = torch.where(restart, 0, trials)
            gamma = torch.where(push, sy / yhy.where(push, 1.0), gamma)
            # next direction: L-BFGS for accepted rows (steepest descent without memory), same d when rejected
            d_lbfgs = _two_loop(g, s_hist, y_hist, rho, slot, gamma, h0)
            d_steep, t_steep = steepest(g, h0)
            use_steep = (rho == 0).all(0) | ((g * d_lbfgs).sum(1) >= 0)
            fresh = accept | restart
            d = torch.where(fresh[:, None], torch.where(use_steep[:, None], d_steep, d_lbfgs), d)
            t = torch.where(fresh, torch.where(use_steep, t_steep, torch.ones_like(t)), t_back)
            # an L-BFGS step that predicts a decrease within the round-off: the row is as good as it gets
            done = done | (fresh & ~use_steep & (-0.5 * (g * d).sum(1) <= noise))
            out[rows] = x
            converged[rows[done]] = True
            stalled_rows[rows[stalled & ~restart]] = True
            if bool(done.any()):  # drop the finished rows from the state
                alive = ~done
                rows, x, f, g, d, t = rows[alive], x[alive], f[alive], g[alive], d[alive], t[alive]
                noise, trials = noise[alive], trials[alive]
                s_hist, y_hist, rho, gamma = s_hist[:, alive], y_hist[:, alive], rho[:, alive], gamma[alive]
    except KeyboardInterrupt:  # said, then passed on: a caller's Ctrl-C must stop it (no result returned)
        warnings.warn(f"interrupted after {info['n_evals']} evaluations ({int((~converged).sum())} of {n} rows "
                      "had not converged)", RuntimeWarning, stacklevel=2)
        raise
    finally:
        if bar is not None:
            bar.close()
    return out, info
