"""The fitting loop shared by every model of ``bayesalign.gp``: maximise a bound over torch parameters.

L-BFGS on the flattened parameters (in torch, on their device; :func:`_run_lbfgs`) by default, Adam as an
option. The loop keeps the best parameters seen, so that

- a NaN or inf in the bound or its gradient stops the fit with the best parameters restored and a
  :class:`NonFiniteBoundError` that says where it happened;
- ``KeyboardInterrupt`` stops the fit with the best parameters restored and a warning; the result says
  ``interrupted`` and the model that ran the loop re-raises the interrupt once its state is whole;
- after a normal stop the parameters are those of the best evaluation (a line-search trial may be
  the last one evaluated, not the best).
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from linear_operator.utils.errors import NanError, NotPSDError

__all__ = ["NonFiniteBoundError", "OptimResult", "maximize"]

#: Consecutive non-finite evaluations L-BFGS may backtrack from before the fit stops with an error.
MAX_NONFINITE_STEPS = 10

#: Trials of one line search (as scipy's L-BFGS-B, ``maxls``) before the memory is dropped.
MAX_LINE_SEARCH = 20

#: Sufficient-decrease constant of the line search (Armijo; L-BFGS-B's line search uses the same 1e-3).
LINE_SEARCH_DECREASE = 1e-3

#: Default correction pairs L-BFGS keeps (scipy's ``maxcor``; GPy / scipy default 10); 30 reach GPy's bound
#: in fewer evaluations on the reference MRD workload (benchmarks/RESULTS.md, "Bayesian core").
LBFGS_MEMORY = 30


class NonFiniteBoundError(FloatingPointError):
    """The bound (or its gradient) became NaN or infinite during a fit; the best parameters were restored."""


class _Stop(Exception):
    """Internal: the evaluation budget is spent."""


@dataclass
class OptimResult:
    """What one call of :func:`maximize` did."""

    n_evals: int
    best: float
    converged: bool
    interrupted: bool
    seconds: float
    message: str = ""


class _FlatParameters:
    """The parameters as views into one flat buffer, so that setting all of them is one copy.

    While it is open, ``p.data`` of every parameter is a view into ``self.flat`` (the Parameter
    objects, and so the module's references to them, are unchanged); :meth:`close` gives each its
    own storage back. Reading the gradients is one concatenation.
    """

    def __init__(self, params):
        self.params = list(params)
        self.flat = torch.cat([p.detach().reshape(-1) for p in self.params]) if self.params else None  # [P]
        offset = 0
        for p in self.params:
            n = p.numel()
            p.data = self.flat[offset:offset + n].view_as(p)
            offset += n

    def gradient(self) -> torch.Tensor:
        """The concatenated gradients [P] (zeros for a parameter without one)."""
        return torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in self.params])

    def close(self):
        for p in self.params:
            p.data = p.data.clone()


class _Tracker:
    """Counts evaluations, records the bound, keeps a copy of the best parameters, drives tqdm."""

    def __init__(self, flat: _FlatParameters, history, times, max_evals, progress, desc):
        self.flat = flat
        self.history = history
        self.times = times
        self.start = time.perf_counter()
        self.max_evals = max_evals
        self.n_evals = 0
        self.best = -math.inf
        self.best_params = flat.flat.clone() if flat.flat is not None else None
        self.bar = None
        if progress:
            from tqdm.auto import tqdm

            # disable=None: no bar when stderr is not a terminal (a log file, a pipe), where its redraws
            # would flood the log
            self.bar = tqdm(total=max_evals, desc=desc, leave=False, disable=None)

    def record(self, value: float, grads_finite: bool = True):
        self.n_evals += 1
        if not (math.isfinite(value) and grads_finite):
            what = "bound" if not math.isfinite(value) else "gradient of the bound"
            raise NonFiniteBoundError(
                f"the {what} became {value if not math.isfinite(value) else 'non-finite'} at evaluation "
                f"{len(self.history) + 1}; the best parameters so far (bound {self.best:.6g}) were restored. "
                "Try a larger noise lower bound (snr), standardised data, or optimizer='adam' with a "
                "smaller learning rate.")
        self.history.append(value)
        if self.times is not None:
            self.times.append(time.perf_counter() - self.start)
        if value > self.best:
            self.best = value
            self.best_params.copy_(self.flat.flat)
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix(bound=f"{value:.6g}", refresh=False)

    def restore(self):
        if self.best_params is not None:
            self.flat.flat.copy_(self.best_params)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def maximize(closure: Callable[[], float], params: Sequence[torch.Tensor], *, method: str = "lbfgs",
             max_evals: int = 1000, tol: float = 1e-9, learning_rate: float = 0.01, history: list | None = None,
             times: list | None = None, progress: bool = False, desc: str = "fit",
             memory: int = LBFGS_MEMORY, scales: Sequence | None = None) -> OptimResult:
    """Maximise a bound over ``params``; the parameters end at the best evaluation.

    Parameters
    ----------
    closure : callable () -> float
        Evaluates the bound at the current parameters and accumulates the gradient of the
        *negative* bound into ``p.grad`` (the loop zeroes the gradients before each call).
    params : sequence of leaf tensors with ``requires_grad=True``
    method : {"lbfgs", "adam"}
        "lbfgs": L-BFGS in the compact form (:func:`_run_lbfgs`; the parameters are unconstrained
        raw values); stops when the relative change of the bound per iteration is below ``tol`` or the
        gradient's largest entry is below 1e-8 (scipy's L-BFGS-B tests, ``ftol`` / ``gtol``).
        "adam": torch's Adam with ``learning_rate``; stops when the best bound improved by less than
        ``tol * |bound|`` over the last 100 steps.
    max_evals : int
        Most bound+gradient evaluations.
    memory : int
        Correction pairs of L-BFGS (scipy's ``maxcor``; default :data:`LBFGS_MEMORY`).
    scales : sequence, optional
        One positive tensor (or None: 1) per entry of ``params``, of that parameter's shape: a
        diagonal preconditioner. L-BFGS then works on ``params / scale`` (the gradient times
        ``scale``), which equalises the curvature of badly scaled parameters; the parameters, the
        bound and the recorded history are unchanged. Adam ignores it.
    history : list, optional
        The bound of every evaluation is appended to it.
    times : list, optional
        The seconds since the start of this call at every evaluation are appended to it.
    progress : bool
        Show a tqdm bar with the current bound (on a terminal only: none in a log file or a pipe).

    Returns
    -------
    OptimResult
    """
    scales = [None] * len(params) if scales is None else list(scales)
    if len(scales) != len(params):
        raise ValueError(f"scales must have one entry per parameter: {len(scales)} for {len(params)}")
    kept = [(p, s) for p, s in zip(params, scales) if p.requires_grad]
    params = [p for p, _ in kept]
    history = [] if history is None else history
    flat = _FlatParameters(params)
    scale = None
    if any(s is not None for _, s in kept):
        scale = torch.cat([(torch.ones_like(p) if s is None else s.detach().to(p).expand_as(p)).reshape(-1)
                           for p, s in kept])  # [P]
        if not bool((scale > 0).all()) or not bool(torch.isfinite(scale).all()):
            raise ValueError("scales must be positive and finite")
    tracker = _Tracker(flat, history, times, max_evals, progress, desc)
    start = tracker.start
    converged, interrupted, message = False, False, ""

    def evaluate() -> tuple[float, torch.Tensor]:
        """The bound and its gradient [P] at the current parameters (recorded by the tracker)."""
        if tracker.n_evals >= max_evals:
            raise _Stop
        for p in params:
            p.grad = None
        try:
            value = float(closure())
        except (NanError, NotPSDError):  # a Cholesky of a NaN or indefinite matrix: a non-finite bound
            value = math.nan
        grad = flat.gradient()
        # one reduction (and one device sync) for all gradients, not one per parameter
        tracker.record(value, math.isfinite(value) and bool(torch.isfinite(grad).all()))
        return value, grad

    try:
        if not params or max_evals <= 0:
            message = "nothing to optimise"
        elif method == "lbfgs":
            converged, message = _run_lbfgs(evaluate, flat.flat, max_evals, tol, memory, scale)
        elif method == "adam":
            converged, message = _run_adam(evaluate, params, max_evals, tol, learning_rate, history)
        else:
            raise ValueError(f"optimizer must be 'lbfgs' or 'adam', got {method!r}")
    except _Stop:
        message = f"reached {max_evals} evaluations"
    except KeyboardInterrupt:
        interrupted = True
        message = "interrupted"
        warnings.warn(f"fit interrupted after {tracker.n_evals} evaluations; keeping the best parameters so "
                      f"far (bound {tracker.best:.6g})", RuntimeWarning, stacklevel=2)
    except BaseException:
        tracker.restore()
        tracker.close()
        flat.close()
        raise
    tracker.restore()
    tracker.close()
    flat.close()
    return OptimResult(n_evals=tracker.n_evals, best=tracker.best, converged=converged,
                       interrupted=interrupted, seconds=time.perf_counter() - start, message=message)


def _run_lbfgs(evaluate, flat: torch.Tensor, max_evals, tol, memory=LBFGS_MEMORY, scale=None):
    r"""L-BFGS on the flat parameter buffer, in torch on its device, in the variables ``flat / scale`` when a
    diagonal preconditioner ``scale`` [P] is given; returns ``(converged, message)``.

    The direction is :math:`-H g` with the compact form of the L-BFGS inverse Hessian (Byrd, Nocedal & Schnabel
    1994, eq. 3.1; scipy's L-BFGS-B uses the same matrix):

    .. math::
        H = \gamma I + [S\ \ \gamma Y]
            \begin{bmatrix} R^{-\top} (D + \gamma Y^\top Y) R^{-1} & -R^{-\top} \\ -R^{-1} & 0 \end{bmatrix}
            [S\ \ \gamma Y]^\top,

    :math:`S, Y` [P, m] the last m steps and gradient changes, :math:`R` the upper triangle of
    :math:`S^\top Y`, :math:`D` its diagonal, :math:`\gamma = s^\top y / y^\top y` of the newest pair. The
    memory is one [2m, P] buffer, so a step costs two passes over it (one product with ``[g, y]``, one with
    the small coefficient vector); the parameter vectors of the latent GP models are long (two numbers per
    latent coordinate), and these passes, not the arithmetic, are L-BFGS's cost there. A pair with
    :math:`s^\top y \le \epsilon\, y^\top y` is skipped.

    The line search backtracks from t = 1 (on the first iteration and after a restart, from the step of unit
    length along -g) until :math:`f(x + t d) \le f(x) + c_1 t\, g^\top d` with :math:`c_1 = 10^{-3}` (L-BFGS-B's
    ``ftol``), each shorter step the minimiser of the quadratic through f, its slope and the trial value,
    kept in [0.1, 0.5] of the last (Nocedal & Wright 2006, Section 3.5); a non-finite trial counts as a
    failed step (0.1 of it next). When it fails within :data:`MAX_LINE_SEARCH` trials the memory is dropped
    and the search retried from steepest descent; failing there too ends the run, not converged. It stops,
    converged, when an accepted step decreases f by at most ``tol * max(|f_k|, |f_k+1|, 1)`` or the
    gradient's largest entry is at most 1e-8 (scipy's ``ftol`` and ``gtol`` tests).

    It replaces scipy's L-BFGS-B, which for these models spent as long per step on its own passes over the
    memory as the bound's evaluation took at 30 inducing inputs (benchmarks/RESULTS.md, "A torch L-BFGS");
    it differs from it in its line search, which does not ask for the curvature (Wolfe) condition.
    """
    failures: list = []
    D = None if scale is None else scale.detach().to(device=flat.device, dtype=torch.float64)
    eps = torch.finfo(torch.float64).eps

    def fun(y):
        with torch.no_grad():
            flat.copy_(y if D is None else y * D)
        try:
            value, grad = evaluate()
        except NonFiniteBoundError as exc:
            # a step into a region where the bound is NaN / inf: a failed line-search step (as GPy / paramz's
            # L-BFGS-B backtracks from +inf); give up after a few such steps in a row
            failures.append(exc)
            if len(failures) > MAX_NONFINITE_STEPS:
                raise
            return math.inf, None
        failures.clear()
        g = grad.detach().to(torch.float64)
        return -value, (g if D is None else g * D)

    x = flat.detach().to(torch.float64).clone()
    if D is not None:
        x = x / D
    f, g = fun(x)
    if g is None:
        raise failures[0]
    m, P = int(memory), x.numel()
    W = x.new_zeros(2 * m, P)  # rows [0, m): the steps s; rows [m, 2m): the gradient changes y (ring slots)
    SY = x.new_zeros(m, m)  # SY[i, j] = s_i' y_j
    YY = x.new_zeros(m, m)  # YY[i, j] = y_i' y_j
    Wg = x.new_zeros(2 * m)  # W g at the current point
    order: list[int] = []  # the slots in use, oldest first
    gamma = 1.0
    d = -g
    t = 1.0 / max(float(g.norm()), eps)
    while True:
        if float(g.abs().max()) <= 1e-8:
            return True, "CONVERGENCE: the gradient's largest entry is below 1e-8"
        slope = float(g @ d)
        if not slope < 0.0:  # not a descent direction (round-off in a flat region): steepest descent
            order.clear()
            d, t = -g, 1.0 / max(float(g.norm()), eps)
            slope = float(g @ d)
        accepted = None
        for _ in range(MAX_LINE_SEARCH):
            f_t, g_t = fun(x + t * d)
            if g_t is not None and f_t <= f + LINE_SEARCH_DECREASE * t * slope:
                accepted = (f_t, g_t)
                break
            if g_t is None:
                t_next = 0.1 * t
            else:  # the minimiser of the quadratic through f, the slope and f_t, kept in [0.1 t, 0.5 t]
                curvature = f_t - f - t * slope
                t_quad = -slope * t * t / (2.0 * curvature) if curvature > 0 else 0.0
                t_next = min(max(t_quad, 0.1 * t), 0.5 * t)
            if t_next * float(d.norm()) <= eps * (1.0 + float(x.norm())):
                break  # steps below machine precision
            t = t_next
        if accepted is None:
            if order:  # a stalled L-BFGS direction: forget the memory, retry from steepest descent
                order.clear()
                d, t = -g, 1.0 / max(float(g.norm()), eps)
                continue
            return False, "ABNORMAL: the line search found no decrease along steepest descent"
        f_new, g_new = accepted
        s, y = t * d, g_new - g
        reduced = f - f_new <= tol * max(abs(f), abs(f_new), 1.0)
        x, f, g = x + s, f_new, g_new
        if reduced:
            return True, "CONVERGENCE: relative reduction of the bound below tol"
        sy, yy = float(s @ y), float(y @ y)
        if sy > eps * yy:
            slot = len(order) if len(order) < m else order.pop(0)
            order.append(slot)
            W[slot], W[m + slot] = s, y
            both = W @ torch.stack([g, y], 1)  # [2m, 2]: one pass over the memory
            Wg = both[:, 0]
            SY[:, slot] = both[:m, 1]
            YY[:, slot] = YY[slot, :] = both[m:, 1]
            gamma = sy / yy
        elif order:
            Wg = W @ g
        if not order:
            d, t = -g, 1.0 / max(float(g.norm()), eps)
            continue
        d = -_compact_product(g, W, Wg, SY, YY, order, gamma)
        t = 1.0


def _compact_product(g, W, Wg, SY, YY, order, gamma):
    """H g for the compact L-BFGS inverse Hessian of :func:`_run_lbfgs` (``Wg`` = W g, ``order`` oldest first)."""
    m = SY.shape[0]
    idx = torch.as_tensor(order, device=g.device)
    u, v = Wg[idx], Wg[m + idx]  # S'g, Y'g
    sy = SY[idx][:, idx]
    R = torch.triu(sy)
    a = torch.linalg.solve_triangular(R, u[:, None], upper=True)  # R^-1 S'g
    inner = (torch.diag(torch.diagonal(sy)) + gamma * YY[idx][:, idx]) @ a - gamma * v[:, None]
    top = torch.linalg.solve_triangular(R.mT, inner, upper=False)  # R^-T ((D + gamma Y'Y) R^-1 S'g - gamma Y'g)
    c = g.new_zeros(2 * m)
    c[idx], c[m + idx] = top[:, 0], -gamma * a[:, 0]
    return gamma * g + W.mT @ c


def _run_adam(evaluate, params, max_evals, tol, learning_rate, history):
    optimizer = torch.optim.Adam(params, lr=learning_rate)
    window = 100
    best_at = []
    for _ in range(max_evals):
        evaluate()
        optimizer.step()
        best_at.append(max(history[-1], best_at[-1]) if best_at else history[-1])
        if len(best_at) > window and best_at[-1] - best_at[-1 - window] <= tol * max(abs(best_at[-1]), 1.0):
            return True, f"best bound improved by less than tol over {window} steps"
    return False, f"reached {max_evals} evaluations"
