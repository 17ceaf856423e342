"""Synthetic alignment problems: the MAD toy generators and classic manifold pairs."""

from __future__ import annotations

import numpy as np
from scipy.spatial.distance import cdist

from .._utils import as_rng
from ..data import AlignmentProblem

#: Table 1 of Damianou, Lawrence & Ek (2016), "Manifold Alignment Determination": the size N of each
#: toy data set, the number N_init of initially aligned pairs, and the Kendall-tau distance MAD reached.
MAD_TOY_SETTINGS = {
    "linear_shared": dict(n=100, n_init=8, paper_kendall_tau=0.001),
    "linear_shared_private": dict(n=100, n_init=12, paper_kendall_tau=0.003),
    "nonlinear_shared_private": dict(n=160, n_init=48, paper_kendall_tau=2e-6),
}

_TOY_OUTPUT_DIM = 20
_TOY_NOISE_SD = 0.1
_TOY_GP_LENGTHSCALE = 1.0


def _toy_latent(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Latent X = [X1 X2 X12] [n, 4] (noise-free) and the phase t [n].

    Integer frequencies on the full-period grid t_k = 2 pi k / n make the columns exactly
    orthogonal and zero-mean (discrete Fourier orthogonality, frequencies < n / 2).
    X12 = (cos t, sin 2t) is a figure eight: every point of the sequence has its own
    shared coordinates except the two that meet at its crossing.
    """
    t = 2.0 * np.pi * np.arange(n) / n  # [n]
    latent = np.column_stack([np.sin(3 * t),        # X1: private to Y1
                              np.cos(4 * t),        # X2: private to Y2
                              np.cos(t), np.sin(2 * t)])  # X12: shared, [n, 4]
    return latent, t


def mad_toy(setting: str = "linear_shared", seed=0, n: int | None = None, n_anchors=None,
            return_latent: bool = False):
    """The toy data of the MAD paper (Damianou, Lawrence & Ek, 2016, section 4 and Table 1).

    A latent X = [X1 X2 X12] with X1, X2 in R and X12 in R^2; its columns are
    sinusoids of different frequencies (orthogonal), and Gaussian noise with
    standard deviation 0.1 is added to X. Two 20-dimensional views are generated
    from parts of the noisy X, with noise of standard deviation 0.1 added again:

    - ``"linear_shared"``: Y1 = X12 W1 + E1, Y2 = X12 W2 + E2 (only shared information);
    - ``"linear_shared_private"``: Y1 = [X12 X1] W1 + E1, Y2 = [X12 X2] W2 + E2;
    - ``"nonlinear_shared_private"``: Y1 = f1([X12 X1]) + E1, Y2 = f2([X12 X2]) + E2 with
      every output dimension of f_v an independent draw from a GP with an RBF kernel
      (variance 1, lengthscale 1) at the latent points.

    W_v have standard normal entries. The paper does not give the frequencies:
    here t_k = 2 pi k / N and X1 = sin 3t, X2 = cos 4t, X12 = (cos t, sin 2t) (row k is
    time step k, so neighbouring rows are neighbours on the curve).

    Parameters
    ----------
    setting : {"linear_shared", "linear_shared_private", "nonlinear_shared_private"}
    seed : int, Generator or None
        Draws, in this order: latent noise, the two maps, the two output noises; so a
        fixed seed gives the same maps whatever ``n_anchors``.
    n : int, optional
        Number of points; default the paper's N (``MAD_TOY_SETTINGS[setting]["n"]``).
    n_anchors : int or float, optional
        When given, split that many rows (or that fraction) off as anchors with
        ``AlignmentProblem.split_anchors(n_anchors, seed)``; the paper's N_init is
        ``MAD_TOY_SETTINGS[setting]["n_init"]``.
    return_latent : bool
        Also return the noisy latent X [N, 4] (columns X1, X2, X12) that generated the views.

    Returns
    -------
    AlignmentProblem with views "Y1", "Y2" paired row by row (truth = identity), labels =
    the phase t in [0, 2 pi) for colouring; or ``(problem, X)`` with ``return_latent``.

    Examples
    --------
    >>> problem = mad_toy("linear_shared_private", seed=0)
    >>> problem.views.n_samples, problem.views.n_features
    ({'Y1': 100, 'Y2': 100}, {'Y1': 20, 'Y2': 20})
    >>> p = mad_toy("nonlinear_shared_private", n_anchors=MAD_TOY_SETTINGS["nonlinear_shared_private"]["n_init"])
    >>> len(p.anchors_between("Y1", "Y2")), p.unaligned("Y2").size
    (48, 112)
    """
    if setting not in MAD_TOY_SETTINGS:
        raise ValueError(f"mad_toy: unknown setting {setting!r}; choose one of {list(MAD_TOY_SETTINGS)}")
    n = MAD_TOY_SETTINGS[setting]["n"] if n is None else n
    if not isinstance(n, (int, np.integer)) or n < 10:
        raise ValueError(f"mad_toy: n must be an integer >= 10 (the latent frequencies go up to 4), got {n!r}")
    rng = as_rng(seed)
    latent, t = _toy_latent(int(n))
    latent = latent + _TOY_NOISE_SD * rng.standard_normal(latent.shape)  # [n, 4]
    x1, x2, x12 = latent[:, :1], latent[:, 1:2], latent[:, 2:]
    if setting == "linear_shared":
        inputs = (x12, x12)
    else:
        inputs = (np.hstack([x12, x1]), np.hstack([x12, x2]))  # [n, 3] each
    if setting.startswith("linear"):
        signals = [z @ rng.standard_normal((z.shape[1], _TOY_OUTPUT_DIM)) for z in inputs]  # [n, 20]
    else:
        signals = [_gp_draw(z, _TOY_GP_LENGTHSCALE, _TOY_OUTPUT_DIM, rng) for z in inputs]
    views = {f"Y{v + 1}": s + _TOY_NOISE_SD * rng.standard_normal(s.shape) for v, s in enumerate(signals)}
    problem = AlignmentProblem.paired(views, labels=t, name=f"mad_toy_{setting}")
    if n_anchors is not None:
        problem = problem.split_anchors(n_anchors, seed)
    return (problem, latent) if return_latent else problem


def _gp_draw(inputs: np.ndarray, lengthscale: float, n_outputs: int, rng: np.random.Generator) -> np.ndarray:
    """Independent draws f[:, d] ~ GP(0, k_RBF) at ``inputs`` [n, q]; returns [n, n_outputs].

    The n x n kernel matrix is needed for an exact joint draw (n is a few hundred here). A
    symmetric eigendecomposition instead of a Cholesky factor, because an RBF Gram matrix
    is numerically rank-deficient; clipping its tiny negative eigenvalues is exact up to
    round-off.
    """
    kernel = np.exp(-0.5 * cdist(inputs, inputs, "sqeuclidean") / lengthscale**2)  # [n, n]
    eigval, eigvec = np.linalg.eigh(kernel)
    root = eigvec * np.sqrt(np.clip(eigval, 0.0, None))  # K = root root^T
    return root @ rng.standard_normal((inputs.shape[0], n_outputs))


def _swiss_roll(u, v):
    t = 1.5 * np.pi * (1.0 + 2.0 * u)  # as sklearn.datasets.make_swiss_roll
    return np.column_stack([t * np.cos(t), 21.0 * v, t * np.sin(t)]), t


def _s_curve(u, v):
    t = 3.0 * np.pi * (u - 0.5)  # as sklearn.datasets.make_s_curve
    return np.column_stack([np.sin(t), 2.0 * v, np.sign(t) * (np.cos(t) - 1.0)]), t


def _helix(u, v):
    t = 4.0 * np.pi * u  # two turns; v unused (a curve)
    return np.column_stack([np.cos(t), np.sin(t), t / np.pi]), t


_MANIFOLDS = {"swiss_roll": _swiss_roll, "s_curve": _s_curve, "helix": _helix}


def _is_real(value) -> bool:
    """Whether ``value`` is a real number (a string or None is not, though numpy may try to read it as one)."""
    return np.ndim(value) == 0 and np.issubdtype(np.asarray(value).dtype, np.number) \
        and not isinstance(value, (bool, np.bool_))


def _random_orthogonal(dim: int, rng: np.random.Generator) -> np.ndarray:
    """Haar-distributed orthogonal matrix [dim, dim] (QR of a Gaussian matrix with sign fix)."""
    q, r = np.linalg.qr(rng.standard_normal((dim, dim)))
    return q * np.sign(np.diag(r))


def manifold_pair(kind: str = "swiss_roll", n: int = 500, noise: float = 0.05, warp: float = 0.0,
                  seed=0, dim: int = 3, scale: float = 2.0) -> AlignmentProblem:
    """Two views of one sampled manifold: a classic test bed for manifold alignment.

    One intrinsic sample (u, v) ~ U(0, 1)^2 is mapped onto the manifold ``kind``
    (sklearn's swiss roll and S curve; a two-turn helix), centred and scaled so the
    mean squared norm of a point is 1. With Q_1, Q_2 independent Haar-random
    orthogonal [dim, dim] matrices, P [n, dim] the points padded with zeros and
    E_v independent N(0, noise^2) noise:

        X = P Q_1 + E_1,        Y = scale * (phi(P Q_2) + E_2),

    where phi is the identity, or with ``warp`` > 0 the smooth, invertible
    coordinatewise warp phi(z) = z + warp * sin(2 z) / 2 (derivative 1 + warp cos 2z > 0).
    Without noise and warp, the two views are congruent up to ``scale``:
    ||y_i - y_j|| = scale * ||x_i - x_j||.

    Parameters
    ----------
    kind : {"swiss_roll", "s_curve", "helix"}
    n : int
    noise : float >= 0
        Standard deviation of the noise, relative to the unit-RMS manifold.
    warp : float in [0, 1), or bool (True means 0.5)
    seed : int, Generator or None
        Draws, in this order: the intrinsic sample, Q_1, Q_2, E_1, E_2 (so changing
        ``noise`` or ``warp`` keeps the same points and rotations).
    dim : int >= 3
        Ambient dimension of both views.
    scale : float > 0
        Scale of the second view.

    Returns
    -------
    AlignmentProblem with views "X", "Y" paired row by row (truth = identity) and labels
    = the intrinsic coordinate t of each point (the roll angle; for colouring).

    Examples
    --------
    >>> problem = manifold_pair("s_curve", n=50, noise=0.0, dim=5, seed=1)
    >>> problem.views.n_features
    {'X': 5, 'Y': 5}
    """
    if kind not in _MANIFOLDS:
        raise ValueError(f"manifold_pair: unknown kind {kind!r}; choose one of {list(_MANIFOLDS)}")
    if not isinstance(n, (int, np.integer)) or n < 2:
        raise ValueError(f"manifold_pair: n must be an integer >= 2, got {n!r}")
    if not isinstance(dim, (int, np.integer)) or dim < 3:
        raise ValueError(f"manifold_pair: dim must be an integer >= 3 (the manifolds live in R^3), got {dim!r}")
    if isinstance(warp, (bool, np.bool_)):
        warp = 0.5 if warp else 0.0
    if not _is_real(noise) or not np.isfinite(noise) or noise < 0:
        raise ValueError(f"manifold_pair: noise must be a number >= 0, got {noise!r}")
    if not _is_real(warp) or not 0.0 <= warp < 1.0:
        raise ValueError(f"manifold_pair: warp must be a number in [0, 1) so the warp stays invertible, got {warp!r}")
    if not _is_real(scale) or not np.isfinite(scale) or scale <= 0:
        raise ValueError(f"manifold_pair: scale must be a positive number, got {scale!r}")
    rng = as_rng(seed)
    u, v = rng.uniform(size=(2, n))
    points, t = _MANIFOLDS[kind](u, v)  # [n, 3]
    points = points - points.mean(axis=0)
    points = points / np.sqrt((points**2).sum(axis=1).mean())
    padded = np.zeros((n, dim))
    padded[:, :3] = points  # [n, dim]
    rotations = [_random_orthogonal(dim, rng) for _ in range(2)]
    noises = [noise * rng.standard_normal((n, dim)) for _ in range(2)]
    first = padded @ rotations[0] + noises[0]
    second = padded @ rotations[1]
    if warp > 0:
        second = second + warp * np.sin(2.0 * second) / 2.0
    second = scale * (second + noises[1])
    return AlignmentProblem.paired({"X": first, "Y": second}, labels=t, name=kind)
