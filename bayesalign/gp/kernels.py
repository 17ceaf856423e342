"""Kernels of the Bayesian core: construction, ARD relevance, and the decomposition used by the psi-statistics.

The Bayesian GP-LVM and MRD (Titsias & Lawrence 2010; Damianou, Ek, Titsias & Lawrence 2012) use
ARD kernels whose per-dimension weights switch latent dimensions on or off. The kernels are GPyTorch
modules (positivity constraints, optional priors); this module builds them (:func:`make_kernel`),
reads their per-dimension relevance (:func:`ard_relevance`) and splits a sum of kernels into the
terms whose expectations :mod:`bayesalign.gp.psi` knows in closed form.

GPyTorch has no "white" kernel (noise on the diagonal only), which the GP-LVM uses to keep
``K_uu`` well conditioned; :class:`WhiteKernel` is that kernel.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch
from gpytorch.constraints import Positive
from gpytorch.kernels import (
    AdditiveKernel,
    ConstantKernel,
    Kernel,
    LinearKernel,
    MaternKernel,
    RBFKernel,
    ScaleKernel,
)
from torch import Tensor

__all__ = ["WhiteKernel", "make_kernel", "ard_relevance", "relevant_dimensions", "shared_dimensions"]


class WhiteKernel(Kernel):
    r"""White-noise kernel :math:`k(x, x') = \sigma^2 [x = x']`, noise-free everywhere but the diagonal.

    Its expectations under a continuous :math:`q(x)` are ``psi0 = N sigma^2``, ``psi1 = 0``,
    ``psi2 = 0``: it only adds jitter to ``K_uu`` (the inducing inputs coincide with themselves).

    Parameters
    ----------
    variance_prior : gpytorch.priors.Prior, optional
    variance_constraint : gpytorch.constraints.Interval, optional
        Defaults to ``Positive()``.

    Examples
    --------
    >>> import torch
    >>> k = WhiteKernel()
    >>> k.variance = 0.5
    >>> x = torch.tensor([[0.0], [1.0]])
    >>> k(x, x).to_dense()
    tensor([[0.5000, 0.0000],
            [0.0000, 0.5000]], grad_fn=<MulBackward0>)
    """

    def __init__(self, variance_prior=None, variance_constraint=None, **kwargs):
        super().__init__(**kwargs)
        self.register_parameter("raw_variance", torch.nn.Parameter(torch.zeros(*self.batch_shape, 1)))
        self.register_constraint("raw_variance", Positive() if variance_constraint is None else variance_constraint)
        if variance_prior is not None:
            self.register_prior(
                "variance_prior", variance_prior, lambda m: m.variance, lambda m, v: m._set_variance(v)
            )

    @property
    def variance(self) -> Tensor:
        return self.raw_variance_constraint.transform(self.raw_variance)

    @variance.setter
    def variance(self, value) -> None:
        self._set_variance(value)

    def _set_variance(self, value) -> None:
        value = torch.as_tensor(value, dtype=self.raw_variance.dtype, device=self.raw_variance.device)
        self.initialize(raw_variance=self.raw_variance_constraint.inverse_transform(value.expand_as(self.raw_variance)))

    def forward(self, x1: Tensor, x2: Tensor, diag: bool = False, **params) -> Tensor:
        variance = self.variance  # [*batch, 1]
        if diag:
            same = (x1 == x2).all(-1)  # [.., n]
            return variance * same.to(variance.dtype)
        same = (x1.unsqueeze(-2) == x2.unsqueeze(-3)).all(-1)  # [.., n1, n2]
        return variance.unsqueeze(-1) * same.to(variance.dtype)


_COMPONENTS = ("rbf", "linear", "bias", "white", "matern12", "matern32", "matern52")


def make_kernel(
    name: str = "rbf",
    input_dim: int = 1,
    *,
    ard: bool = True,
    bias: bool = False,
    white: bool = False,
    lengthscale: float = 1.0,
    variance: float = 1.0,
    bias_variance: float = 1e-2,
    white_variance: float = 1e-6,
    lengthscale_prior=None,
    variance_prior=None,
    dtype: torch.dtype = torch.float64,
) -> Kernel:
    r"""Build a constrained GPyTorch kernel for a GP-LVM on ``input_dim`` latent dimensions.

    ``name`` is a ``"+"``-separated sum of components: ``"rbf"`` (``ScaleKernel(RBFKernel)``,
    :math:`\sigma^2 \exp(-\sum_q (x_q - x'_q)^2 / 2 l_q^2)`), ``"linear"`` (``LinearKernel`` with one
    variance per dimension when ``ard``: :math:`\sum_q a_q x_q x'_q`), ``"bias"`` (``ConstantKernel``),
    ``"white"`` (:class:`WhiteKernel`) and ``"matern12" / "matern32" / "matern52"`` (ScaleKernel over
    an ARD Matern kernel; its psi-statistics use quadrature). All parameters are positive through
    GPyTorch's ``Positive`` (softplus) constraint.

    Parameters
    ----------
    name : str
        e.g. ``"rbf"``, ``"linear"``, ``"rbf+linear"``, ``"rbf+bias+white"``.
    input_dim : int
        Latent dimensionality Q.
    ard : bool
        One lengthscale (RBF, Matern) / variance (linear) per dimension; otherwise a shared one.
    bias, white : bool
        Add a bias / white term (same as adding ``"+bias"`` / ``"+white"`` to ``name``).
    lengthscale, variance : float
        Initial lengthscale(s) and signal variance (RBF / Matern outputscale, linear ARD variances).
    bias_variance, white_variance : float
        Initial variances of the bias and white terms.
    lengthscale_prior, variance_prior : gpytorch.priors.Prior, optional
        Priors on the RBF / Matern lengthscales and the signal variances.
    dtype : torch.dtype
        dtype of the parameters (float64 by default, as the rest of the Bayesian core).

    Returns
    -------
    gpytorch.kernels.Kernel
        The single component, or an ``AdditiveKernel`` of them.

    Examples
    --------
    >>> k = make_kernel("rbf+linear", input_dim=3, bias=True, lengthscale=2.0)
    >>> [type(c).__name__ for c in k.kernels]
    ['ScaleKernel', 'LinearKernel', 'ConstantKernel']
    >>> ard_relevance(k).tolist()  # RBF 1/2^2 + linear 1 per dimension; the bias has no dimension
    [1.25, 1.25, 1.25]
    """
    if not isinstance(input_dim, int) or input_dim < 1:
        raise ValueError(f"input_dim must be a positive int, got {input_dim!r}")
    parts = [p.strip().lower() for p in str(name).split("+") if p.strip()]
    parts += [p for p, on in (("bias", bias), ("white", white)) if on and p not in parts]
    unknown = [p for p in parts if p not in _COMPONENTS]
    if not parts or unknown:
        raise ValueError(f"unknown kernel component(s) {unknown or name!r}; choose from {_COMPONENTS}")
    if lengthscale <= 0 or variance <= 0 or bias_variance <= 0 or white_variance <= 0:
        raise ValueError("lengthscale and variances must be positive")
    n_ard = input_dim if ard else None

    def value(x):  # set parameters from tensors of the final dtype (a python float goes through float32)
        return torch.tensor(float(x), dtype=dtype)

    kernels = []
    for part in parts:
        if part == "rbf" or part.startswith("matern"):
            if part == "rbf":
                base = RBFKernel(ard_num_dims=n_ard, lengthscale_prior=lengthscale_prior)
            else:
                base = MaternKernel(nu=int(part[-2]) / 2, ard_num_dims=n_ard, lengthscale_prior=lengthscale_prior)
            kern = ScaleKernel(base, outputscale_prior=variance_prior).to(dtype)
            kern.base_kernel.lengthscale = value(lengthscale)
            kern.outputscale = value(variance)
        elif part == "linear":
            kern = LinearKernel(ard_num_dims=n_ard, variance_prior=variance_prior).to(dtype)
            kern.variance = value(variance)
        elif part == "bias":
            kern = ConstantKernel().to(dtype)
            kern.constant = value(bias_variance).reshape(1)
        else:
            kern = WhiteKernel().to(dtype)
            kern.variance = value(white_variance)
        kernels.append(kern)
    kernel = kernels[0] if len(kernels) == 1 else AdditiveKernel(*kernels)
    return kernel.to(dtype)


# ---------------------------------------------------------------------------------------------------
# Decomposition of a kernel into terms with known expectations (used by bayesalign.gp.psi)
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Term:
    """One summand ``scale * leaf(x[:, dims], x'[:, dims])`` of a kernel.

    ``leaf`` is the kernel (its class chooses its psi-statistics, :mod:`bayesalign.gp.psi`); ``scales``
    are the ScaleKernels on the path to the leaf; ``dims`` the columns of the full input the leaf sees
    (``None``: all), after every ``active_dims`` on the path.
    """

    leaf: Kernel
    scales: tuple
    dims: tuple | None

    def scale(self, like: Tensor) -> Tensor:
        """Product of the outputscales on the path (a scalar on ``like``'s dtype/device)."""
        if len(self.scales) == 1:  # the usual ScaleKernel(...): no extra operations
            return self.scales[0].outputscale.to(like).reshape(())
        out = torch.ones((), dtype=like.dtype, device=like.device)
        for sk in self.scales:
            out = out * sk.outputscale.to(like).reshape(())
        return out

    def columns(self, input_dim: int) -> Tensor:
        """The input columns of this term as a long tensor (validated against ``input_dim``)."""
        if self.dims is None:
            return torch.arange(input_dim)
        cols = torch.tensor(self.dims, dtype=torch.long)
        if int(cols.max()) >= input_dim:
            raise ValueError(
                f"{type(self.leaf).__name__} uses input column {int(cols.max())} but the latent space has "
                f"only {input_dim} dimensions"
            )
        return cols

    def _per_dim(self, values: Tensor, input_dim: int, like: Tensor) -> Tensor:
        """Scatter per-active-dimension ``values`` ([1] or [d]) into a [Q] vector, zero elsewhere."""
        cols = self.columns(input_dim)
        values = values.to(like).reshape(-1)
        if values.numel() not in (1, cols.numel()):
            raise ValueError(
                f"{type(self.leaf).__name__} has {values.numel()} ARD parameters for {cols.numel()} input dimensions"
            )
        full = torch.zeros(input_dim, dtype=like.dtype, device=like.device)
        return full.index_put((cols.to(like.device),), values.expand(cols.numel()))

    def precision(self, input_dim: int, like: Tensor) -> Tensor:
        """RBF: inverse squared lengthscales 1/l_q^2 as a [Q] vector (0 on dimensions it ignores)."""
        return self._per_dim(self.leaf.lengthscale.to(like).reshape(-1) ** -2, input_dim, like)

    def linear_variances(self, input_dim: int, like: Tensor) -> Tensor:
        """Linear: ARD variances a_q times the outputscales, [Q] (0 on dimensions it ignores)."""
        return self.scale(like) * self._per_dim(self.leaf.variance, input_dim, like)

    def constant(self, like: Tensor) -> Tensor:
        """Bias: the constant; white: the diagonal variance (times the outputscales), a scalar."""
        value = self.leaf.constant if isinstance(self.leaf, ConstantKernel) else self.leaf.variance
        return self.scale(like) * value.to(like).reshape(())

    def evaluate(self, x1: Tensor, x2: Tensor, diag: bool = False) -> Tensor:
        """Dense ``scale * leaf(x1, x2)`` on the full inputs (the term selects its own columns)."""
        if self.dims is not None:
            cols = torch.tensor(self.dims, dtype=torch.long, device=x1.device)
            x1, x2 = x1.index_select(-1, cols), x2.index_select(-1, cols)
        # forward, not __call__: the path's active_dims are already applied through ``dims``.
        value = self.leaf.forward(x1, x2, diag=diag)
        value = value.to_dense() if hasattr(value, "to_dense") else value
        return self.scale(x1) * value.to(x1.dtype)


def _select(dims: tuple | None, active: Tensor | None) -> tuple | None:
    if active is None:
        return dims
    active = [int(i) for i in active.reshape(-1)]
    return tuple(active) if dims is None else tuple(dims[i] for i in active)


def _kernel_terms(kernel: Kernel, scales: tuple = (), dims: tuple | None = None, called: bool = True) -> list:
    """Flatten sums and outputscales of ``kernel`` into a list of :class:`_Term`.

    ``called`` says whether GPyTorch reaches this node through ``__call__`` (which applies its
    ``active_dims``); ``ScaleKernel.forward`` calls its base kernel's ``forward`` directly.
    """
    if not isinstance(kernel, Kernel):
        raise TypeError(f"kernel must be a gpytorch Kernel, got {type(kernel).__name__}")
    # the node's own batch shape: GPyTorch's ``batch_shape`` property walks every sub-module on each call
    # (a quarter of a millisecond here); sums and scales are walked below anyway
    known = (ScaleKernel, AdditiveKernel, RBFKernel, LinearKernel, ConstantKernel, WhiteKernel)
    own = getattr(kernel, "_batch_shape", None) if type(kernel) in known else None
    if len(kernel.batch_shape if own is None else own) != 0:
        raise ValueError(f"batched kernels are not supported (batch_shape={tuple(kernel.batch_shape)})")
    if called:
        dims = _select(dims, kernel.active_dims)
    if isinstance(kernel, ScaleKernel):
        return _kernel_terms(kernel.base_kernel, scales + (kernel,), dims, called=False)
    if isinstance(kernel, AdditiveKernel):
        return [t for k in kernel.kernels for t in _kernel_terms(k, scales, dims, called=True)]
    return [_Term(kernel, scales, dims)]


def _infer_input_dim(terms) -> int:
    dims = []
    for t in terms:
        if t.dims is not None:
            dims.append(max(t.dims) + 1)
        elif getattr(t.leaf, "ard_num_dims", None):
            dims.append(int(t.leaf.ard_num_dims))
    if not dims:
        raise ValueError("cannot infer the input dimension of this kernel; pass input_dim")
    return max(dims)


def ard_relevance(kernel: Kernel, input_dim: int | None = None) -> Tensor:
    r"""Per-dimension ARD relevance weights ``[Q]`` of a kernel (MRD's shared/private dimensions).

    RBF: :math:`\sigma^2 / l_q^2`; linear: its ARD variances :math:`a_q`; Matern and other kernels with
    a lengthscale: outputscale / lengthscale^2; bias and white: 0; a sum adds its components'
    relevances (Damianou et al. 2012, Sec. 3: a dimension with weight ~0 is switched off).

    Parameters
    ----------
    kernel : gpytorch.kernels.Kernel
    input_dim : int, optional
        Q; inferred from ``active_dims`` / ``ard_num_dims`` when omitted.

    Returns
    -------
    torch.Tensor
        ``[Q]`` non-negative weights, differentiable w.r.t. the kernel parameters (``.detach()`` to store).

    Examples
    --------
    >>> k = make_kernel("rbf", input_dim=2, variance=2.0, lengthscale=0.5)
    >>> ard_relevance(k).tolist()
    [8.0, 8.0]
    """
    terms = _kernel_terms(kernel)
    if input_dim is None:
        input_dim = _infer_input_dim(terms)
    like = next(kernel.parameters(), torch.zeros((), dtype=torch.float64)).detach()
    relevance = torch.zeros(input_dim, dtype=like.dtype, device=like.device)
    for t in terms:
        if isinstance(t.leaf, LinearKernel):
            relevance = relevance + t.linear_variances(input_dim, like)
        elif getattr(t.leaf, "has_lengthscale", False):
            relevance = relevance + t.scale(like) * t.precision(input_dim, like)
    return relevance


def relevant_dimensions(relevance, threshold: float) -> np.ndarray:
    """Boolean mask [Q]: the dimensions whose ARD relevance exceeds ``threshold`` times the view's largest.

    MRD's rule for which latent dimensions a view uses (Damianou, Ek, Titsias & Lawrence 2012,
    section 3); all False when every relevance is 0.

    >>> relevant_dimensions([1.0, 0.5, 0.01], 0.05).tolist()
    [True, True, False]
    """
    if not 0 <= threshold < 1:
        raise ValueError(f"threshold is relative to the largest relevance of a view; it must be in [0, 1), "
                         f"got {threshold!r}")
    relevance = np.asarray(relevance, dtype=np.float64)
    top = float(relevance.max()) if relevance.size else 0.0
    return relevance > threshold * top if top > 0 else np.zeros(relevance.shape, dtype=bool)


def shared_dimensions(relevance: Mapping[str, np.ndarray], threshold: float, *, fallback: bool = False,
                      relative: bool = True) -> np.ndarray:
    """Indices of the latent dimensions relevant (:func:`relevant_dimensions`) to every view of ``relevance``.

    The shared space of MRD (Damianou et al. 2012, section 3), in which MAD matches (Damianou,
    Lawrence & Ek 2016, section 3.1). With ``relative=False`` the values are compared with
    ``threshold`` itself, not with ``threshold`` times each view's largest (the rule for a unit-free
    measure such as the models' ``resolution_``, whose natural threshold is 1). With ``fallback``,
    when no dimension is shared, the one with the largest smallest (relative) value over the views
    is returned with a RuntimeWarning (matching in no dimension at all is meaningless); without it
    the result is then empty.

    >>> shared_dimensions({"a": [1.0, 0.5, 0.01], "b": [0.9, 0.01, 0.4]}, 0.05).tolist()
    [0]
    >>> shared_dimensions({"a": [900.0, 7.0, 0.01], "b": [300.0, 20.0, 400.0]}, 1.0, relative=False).tolist()
    [0, 1]
    """
    if relative:
        masks = [relevant_dimensions(rel, threshold) for rel in relevance.values()]
    else:
        if not threshold >= 0:
            raise ValueError(f"threshold must be >= 0, got {threshold!r}")
        masks = [np.asarray(rel, dtype=np.float64) > threshold for rel in relevance.values()]
    dims = np.flatnonzero(np.logical_and.reduce(masks))
    if dims.size or not fallback:
        return dims
    scaled = [np.asarray(rel, np.float64) / (max(float(np.max(rel)), np.finfo(float).tiny) if relative else 1.0)
              for rel in relevance.values()]
    dims = np.array([int(np.argmax(np.minimum.reduce(scaled)))])
    warnings.warn(f"no latent dimension is shared by views {tuple(relevance)} at threshold {threshold}; using "
                  f"dimension {dims[0]} (the most shared)", RuntimeWarning, stacklevel=3)
    return dims


def _latent_symmetries(terms, input_dim: int):
    """How a kernel's terms follow a per-dimension rescaling (and shift) of the latent space.

    A kernel made of RBF / Matern terms with one lengthscale per dimension they see, linear terms
    with one variance per dimension, bias and white terms takes the same values on ``c * x + t``
    as on ``x`` once each RBF / Matern lengthscale l_q becomes ``c_q l_q`` and each linear variance
    a_q becomes ``a_q / c_q^2`` (shifts ``t_q`` only on dimensions no linear term sees). Returns
    ``(rescaled, shiftable)``: a list of ``(leaf, columns, attribute, power)`` (the attribute
    becomes ``value * c[columns]**power``) and a bool [Q] mask, or None when some term is not of
    these kinds (e.g. a periodic kernel, or one lengthscale shared by several dimensions).
    """
    rescaled, shiftable = [], torch.ones(input_dim, dtype=torch.bool)
    for t in terms:
        if isinstance(t.leaf, (ConstantKernel, WhiteKernel)):
            continue
        stationary = isinstance(t.leaf, (RBFKernel, MaternKernel))
        if not (stationary or isinstance(t.leaf, LinearKernel)):
            return None
        cols = t.columns(input_dim)
        attribute, power = ("lengthscale", 1.0) if stationary else ("variance", -2.0)
        if getattr(t.leaf, attribute).numel() != cols.numel():
            return None
        rescaled.append((t.leaf, cols, attribute, power))
        if not stationary:
            shiftable[cols] = False
    return rescaled, shiftable


def normalise_latent_symmetries(kernels, mu: Tensor, S: Tensor) -> tuple[Tensor, Tensor] | None:
    r"""The shift and scale of each latent dimension that minimise KL(q(X) || N(0, I)) at equal likelihood.

    Shifting dimension q by :math:`t_q` and scaling it by :math:`c_q` (means :math:`c_q (\mu_{nq} - t_q)`,
    variances :math:`c_q^2 S_{nq}`, inducing inputs alike) leaves every kernel matrix unchanged when each
    kernel follows (RBF / Matern lengthscales :math:`c_q l_q`, linear variances :math:`a_q / c_q^2`; shifts
    only where no linear term looks); the KL is smallest at :math:`t_q = \bar\mu_q`,
    :math:`c_q^2 = N / \sum_n ((\mu_{nq} - t_q)^2 + S_{nq})`. Returns ``(shift [Q], scale [Q])`` after
    rescaling the kernels in place, or None (nothing changed) when a kernel has terms outside these kinds
    or the scale is not finite. The caller moves q(X) and the inducing inputs.
    """
    Q = mu.shape[1]
    symmetries = [_latent_symmetries(_kernel_terms(kernel), Q) for kernel in kernels]
    if any(s is None for s in symmetries):
        return None
    shiftable = torch.stack([s[1] for s in symmetries]).all(0).to(mu.device)  # [Q]
    shift = torch.where(shiftable, mu.mean(0), torch.zeros_like(mu[0]))  # [Q]
    scale = (mu.shape[0] / ((mu - shift).square() + S).sum(0)).sqrt()  # [Q]
    if not bool(torch.isfinite(scale).all() & (scale > 0).all()):
        return None
    for rescaled, _ in symmetries:
        for leaf, cols, attribute, power in rescaled:
            value = getattr(leaf, attribute)  # [1, d]
            setattr(leaf, attribute, value * scale[cols.to(scale.device)].to(value).pow(power))
    return shift, scale


# ---------------------------------------------------------------------------------------------------
# The usual GP-LVM kernel: one RBF term on every dimension, plus bias / white terms
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _RBFParts:
    """Transformed hyperparameters of ``rbf (+ bias) (+ white)``: tensors, or None for an absent term."""

    variance: Tensor  # []
    lengthscale: Tensor  # [Q]
    bias: Tensor | None  # [] (all bias terms together)
    white: Tensor | None  # [] (all white terms together)


def _rbf_parts(terms, input_dim: int, like: Tensor) -> _RBFParts | None:
    """The :class:`_RBFParts` of a kernel's terms, or None when it is not one RBF on all dims + bias / white.

    Reads every constrained parameter once (each GPyTorch property evaluation is a transform).
    """
    rbf = [t for t in terms if isinstance(t.leaf, RBFKernel)]
    if len(rbf) != 1 or rbf[0].dims is not None or not all(
            isinstance(t.leaf, (RBFKernel, ConstantKernel, WhiteKernel)) for t in terms):
        return None
    t = rbf[0]
    lengthscale = t.leaf.lengthscale.reshape(-1)  # [1] or [Q]
    if lengthscale.numel() not in (1, input_dim):
        return None  # the general path says what is wrong
    bias = [u.constant(like) for u in terms if isinstance(u.leaf, ConstantKernel)]
    white = [u.constant(like) for u in terms if isinstance(u.leaf, WhiteKernel)]
    return _RBFParts(t.scale(like), lengthscale.to(like).expand(input_dim), sum(bias) if bias else None,
                     sum(white) if white else None)
