"""The fitting loop of ``bayesalign.gp``: :func:`maximize` runs the one L-BFGS (:func:`~._lbfgs.minimize_rows`) on
the one row of a model's flattened parameters, Adam an option, and stops by one rule (:data:`STOP_WINDOW`). The loop
keeps the best parameters, so that

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

from ._lbfgs import LBFGS_MEMORY, NonFiniteBoundError, minimize_rows

__all__ = ["TOL", "NonFiniteBoundError", "OptimResult", "maximize", "minimize_rows"]

#: Consecutive non-finite evaluations :func:`maximize` may backtrack from before the fit stops with an error.
MAX_NONFINITE_STEPS = 10

#: Relative change of the bound in one L-BFGS step that :func:`maximize` takes for round-off: the step converged.
ROUND_OFF = 1e-12

#: Evaluations over which :func:`maximize` judges the rise of the best bound against ``tol`` (its stopping rule).
STOP_WINDOW = 50

#: The default ``tol`` of the rule: a fit whose best bound rose by less than 0.3% over the last :data:`STOP_WINDOW`
#: evaluations has converged (MRD and BayesianGPLVM use it; the shipped pairs reach it within their budget).
TOL = 3e-3


class _Stop(Exception):
    """Internal: the evaluation budget is spent."""


class _Converged(Exception):
    """Internal: the best bound rose by less than ``tol`` (relative) over the last :data:`STOP_WINDOW` evaluations."""


class _Interrupted(Exception):
    """Internal: a KeyboardInterrupt during an evaluation of :func:`maximize` (said once, by maximize)."""


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
        self.best_trace: list[float] = []  # the best bound after each evaluation
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
        self.best_trace.append(self.best)
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix(bound=f"{value:.6g}", refresh=False)

    def plateaued(self, window: int, tol: float) -> bool:
        """Whether the best bound rose by at most ``tol * max(|best|, 1)`` over the last ``window`` evaluations."""
        trace = self.best_trace
        return len(trace) > window and trace[-1] - trace[-1 - window] <= tol * max(abs(trace[-1]), 1.0)

    def restore(self):
        if self.best_params is not None:
            self.flat.flat.copy_(self.best_params)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def maximize(closure: Callable[[], float], params: Sequence[torch.Tensor], *, method: str = "lbfgs",
             max_evals: int = 1000, tol: float = TOL, learning_rate: float = 0.01, history: list | None = None,
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
        "lbfgs": :func:`minimize_rows` on the one row of all parameters (unconstrained raw values);
        it also stops when the gradient's largest entry is below 1e-8 (scipy's ``gtol``) or a step
        changes the bound by less than ``min(tol, ROUND_OFF)`` (relative), and a line
        search that finds no decrease even along steepest descent ends it, not converged.
        "adam": torch's Adam with ``learning_rate``.
        Either converges when the best bound rose by at most ``tol * max(|bound|, 1)`` over the last
        :data:`STOP_WINDOW` evaluations (a relative rise over a window, not per step: one short
        line-search step does not end a fit that is still climbing).
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
        except KeyboardInterrupt as exc:
            raise _Interrupted from exc
        grad = flat.gradient()
        # one reduction (and one device sync) for all gradients, not one per parameter
        tracker.record(value, math.isfinite(value) and bool(torch.isfinite(grad).all()))
        if tracker.plateaued(STOP_WINDOW, tol):
            raise _Converged
        return value, grad

    try:
        if not params or max_evals <= 0:
            message = "nothing to optimise"
        elif method == "lbfgs":
            converged, message = _run_lbfgs(evaluate, flat.flat, max_evals, min(tol, ROUND_OFF), memory, scale)
        elif method == "adam":
            converged, message = _run_adam(evaluate, params, max_evals, learning_rate)
        else:
            raise ValueError(f"optimizer must be 'lbfgs' or 'adam', got {method!r}")
    except _Converged:
        converged = True
        message = f"CONVERGENCE: the bound rose by less than tol={tol:g} (relative) over {STOP_WINDOW} evaluations"
    except _Stop:
        message = f"reached {max_evals} evaluations"
    except (KeyboardInterrupt, _Interrupted):
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


def _run_lbfgs(evaluate, flat: torch.Tensor, max_evals, step_tol, memory=LBFGS_MEMORY, scale=None):
    """:func:`minimize_rows` on one row, the negative bound, in float64, in the variables ``flat / scale``
    when a diagonal preconditioner ``scale`` [P] is given; returns ``(converged, message)``.

    A trial where the bound is NaN / inf is a failed line-search step (as GPy / paramz's L-BFGS-B
    backtracks from +inf); more than :data:`MAX_NONFINITE_STEPS` in a row, or one at the start, stop the
    fit with the :class:`NonFiniteBoundError`.
    """
    failures, finite = [], []  # the non-finite trials in a row; whether any evaluation was finite
    D = None if scale is None else scale.detach().to(device=flat.device, dtype=torch.float64)

    def fun(y, rows):
        with torch.no_grad():
            flat.copy_(y[0] if D is None else y[0] * D)
        try:
            value, grad = evaluate()
        except NonFiniteBoundError as exc:
            failures.append(exc)
            if len(failures) > MAX_NONFINITE_STEPS or not finite:  # too many, or at the start: the fit's error
                raise
            return y.new_full((1,), math.inf), torch.full_like(y, math.nan)
        failures.clear()
        finite.append(True)
        g = grad.detach().to(torch.float64)
        return y.new_full((1,), -value), (g if D is None else g * D)[None]

    x0 = flat.detach().to(torch.float64)
    x0 = (x0 if D is None else x0 / D)[None]  # [1, P]
    _, info = minimize_rows(fun, x0, max_iter=max_evals, tol=step_tol, memory=memory)
    if bool(info["converged"][0]) and not bool(info["stalled"][0]):
        return True, "CONVERGENCE: a gradient below 1e-8, or steps within the round-off of the bound"
    if bool(info["stalled"][0]):
        return False, "ABNORMAL: the line search found no decrease along steepest descent"
    raise _Stop


def _run_adam(evaluate, params, max_evals, learning_rate):
    optimizer = torch.optim.Adam(params, lr=learning_rate)
    for _ in range(max_evals):
        evaluate()
        optimizer.step()
    return False, f"reached {max_evals} evaluations"
