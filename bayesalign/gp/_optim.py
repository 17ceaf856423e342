"""The fitting loop shared by every model of ``bayesalign.gp``: maximise a bound over torch parameters.

L-BFGS (scipy's L-BFGS-B on the flattened parameters) by default, Adam as an option. The loop
keeps the best parameters seen, so that

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

import numpy as np
import torch
from linear_operator.utils.errors import NanError, NotPSDError

from .._utils import host_blas_single_threaded

__all__ = ["NonFiniteBoundError", "OptimResult", "maximize"]

#: Consecutive non-finite evaluations L-BFGS-B may backtrack from before the fit stops with an error.
MAX_NONFINITE_STEPS = 10

#: Default correction pairs L-BFGS-B keeps (scipy's ``maxcor``; GPy / scipy default 10); 30 reach GPy's bound
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
        "lbfgs": scipy's L-BFGS-B (no bounds; the parameters are unconstrained raw values);
        stops when the relative change of the bound per iteration is below ``tol`` or the
        projected gradient is below 1e-8 (scipy's ``ftol`` / ``gtol``). "adam": torch's Adam with
        ``learning_rate``; stops when the best bound improved by less than ``tol * |bound|`` over
        the last 100 steps.
    max_evals : int
        Most bound+gradient evaluations.
    memory : int
        Correction pairs of L-BFGS-B (``maxcor``; default :data:`LBFGS_MEMORY`).
    scales : sequence, optional
        One positive tensor (or None: 1) per entry of ``params``, of that parameter's shape: a
        diagonal preconditioner. L-BFGS-B then works on ``params / scale`` (the gradient times
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
            converged, message = _run_lbfgsb(evaluate, flat.flat, max_evals, tol, memory, scale)
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


def _run_lbfgsb(evaluate, flat: torch.Tensor, max_evals, tol, memory=LBFGS_MEMORY, scale=None):
    """scipy's L-BFGS-B on the flat parameter buffer (float64 numpy; one copy in and out per step),
    in the variables ``flat / scale`` when a diagonal preconditioner ``scale`` [P] is given."""
    from scipy.optimize import minimize

    failures = []
    D = None if scale is None else scale.detach().cpu().numpy().astype(np.float64)
    host = flat.detach().cpu().numpy().astype(np.float64)
    if D is not None:
        host = host / D

    def fun(y):
        x = y if D is None else y * D
        with torch.no_grad():
            flat.copy_(torch.from_numpy(x))
        try:
            value, grad = evaluate()
        except NonFiniteBoundError as exc:
            # A line-search step into a region where the bound is NaN/inf: report +inf so that
            # L-BFGS-B backtracks (as GPy/paramz do); give up after a few such steps in a row.
            failures.append(exc)
            if len(failures) > MAX_NONFINITE_STEPS:
                raise
            return math.inf, np.zeros(x.size)
        failures.clear()
        g = grad.detach().cpu().numpy().astype(np.float64, copy=False)
        return -value, (g if D is None else g * D)

    with host_blas_single_threaded():  # else OpenBLAS's spinning threads slow torch's down (and back)
        result = minimize(fun, host, jac=True, method="L-BFGS-B",
                          options={"maxfun": max_evals, "maxiter": max_evals, "ftol": tol, "gtol": 1e-8,
                                   "maxcor": int(memory)})
    if failures:  # L-BFGS-B stopped without getting past the non-finite region
        raise failures[0]
    message = str(result.message)
    return bool(result.success) and "CONVERGENCE" in message.upper(), message


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
