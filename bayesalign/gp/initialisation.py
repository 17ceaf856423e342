"""Input preparation and initialisation of q(X) for BayesianGPLVM and MRD.

Views in (validated arrays, paired or with the entity each row observes), centred columns, and the
initial q(X) means: PCA of the concatenated views, per-view PCA, the shared / private split of
:func:`cca_latent`, a LatentEmbedding or an array; under partial observation the views are first
completed per entity (:func:`complete_views`).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence

import numpy as np
import torch

from .._utils import as_rng
from ..data import AlignmentProblem, LatentEmbedding, Views, check_view

__all__ = ["StartError", "anchored_latent", "as_paired_views", "as_views", "cca_latent", "centre_view",
           "check_observed", "check_paired", "complete_views", "entity_means_from_embedding", "init_latent",
           "pad_latent", "partial_latent"]

_INITS = ("pca", "pca_split", "cca", "random")


class StartError(ValueError):
    """A named start of q(X) ("pca", "cca", ...) that cannot be computed on these data (e.g. more latent dimensions
    than the views' columns allow): raised by a fit given that start alone; with several, it is skipped (warned)."""


def as_paired_views(data) -> tuple[list[str], list[np.ndarray]]:
    """Names and validated float64 arrays of paired views (Views, dict, list, AlignmentProblem)."""
    names, arrays = as_views(data)
    check_paired(names, arrays)
    return names, arrays


def check_paired(names: list[str], arrays: list[np.ndarray]) -> None:
    """Raise a ValueError naming the odd views when the views do not all have the same number of rows."""
    sizes = {name: a.shape[0] for name, a in zip(names, arrays)}
    if len(set(sizes.values())) > 1:
        common = max(set(sizes.values()), key=list(sizes.values()).count)
        odd = {k: n for k, n in sizes.items() if n != common}
        raise ValueError(f"the views must be paired (row i of every view is the same point), but their "
                         f"numbers of rows differ: {sizes}; {sorted(odd)} differ from {common} rows "
                         "(pass observed= to fit views of different entities)")


def as_views(data) -> tuple[list[str], list[np.ndarray]]:
    """Names and validated float64 arrays of views of any numbers of rows (Views, dict, list, AlignmentProblem)."""
    if isinstance(data, AlignmentProblem):
        data = data.views
    if isinstance(data, Views):
        names, arrays = list(data.names), [data[name] for name in data.names]
    elif isinstance(data, Mapping):
        names = list(data)
        for name in names:
            if not isinstance(name, str) or not name:
                raise TypeError(f"view names must be non-empty strings, got {name!r}")
        arrays = [check_view(data[name], name) for name in names]
    elif isinstance(data, (list, tuple)):
        names = [f"view{i}" for i in range(len(data))]
        arrays = [check_view(a, name) for name, a in zip(names, data)]
    else:
        raise TypeError("expected Views, an AlignmentProblem, or a dict / list of 2-D arrays, got "
                        f"{type(data).__name__} (use BayesianGPLVM for a single array)")
    if not arrays:
        raise ValueError("no views given")
    return names, arrays


def check_observed(observed, names: list[str], arrays: list[np.ndarray],
                   n_entities=None) -> tuple[list[np.ndarray | None], int]:
    """The entity index [N_v] of every row of each view (None: row n is entity n) and the number of entities.

    ``observed``: a dict view name -> 1-D integer array (or None), or a sequence with one entry per
    view. An entity index may repeat within a view (two rows observing the same entity). A view
    without indices (None, or left out of the dict) has row n as entity n.
    """
    sizes = [a.shape[0] for a in arrays]
    if observed is None:
        out = [None] * len(names)
    elif isinstance(observed, Mapping):
        unknown = [k for k in observed if k not in names]
        if unknown:
            raise ValueError(f"observed names views {unknown} that are not among the views {names}")
        out = [observed.get(name) for name in names]
    elif isinstance(observed, (list, tuple)):
        if len(observed) != len(names):
            raise ValueError(f"observed has {len(observed)} entries for {len(names)} views")
        out = list(observed)
    else:
        raise TypeError(f"observed must be a dict view -> entity indices or a list with one per view, "
                        f"got {type(observed).__name__}")
    checked = []
    for name, size, rows in zip(names, sizes, out):
        if rows is None:
            checked.append(None)
            continue
        rows = rows.detach().cpu().numpy() if torch.is_tensor(rows) else np.asarray(rows)
        if rows.ndim != 1 or rows.shape[0] != size:
            raise ValueError(f"observed[{name!r}] must be 1-D with one entity index per row of the view "
                             f"({size}), got shape {rows.shape}")
        if rows.dtype == bool or not np.issubdtype(rows.dtype, np.integer):
            raise ValueError(f"observed[{name!r}] must hold integer entity indices, got dtype {rows.dtype}")
        if size and (rows.min() < 0 or rows.max() >= 2**62):
            bad = int(np.flatnonzero((rows < 0) | (rows >= 2**62))[0])
            raise ValueError(f"observed[{name!r}] row {bad}: entity index {rows[bad]} is negative or too large")
        checked.append(rows.astype(np.int64))
    largest = max([int(r.max()) + 1 for r in checked if r is not None and r.size]
                  + [n for n, r in zip(sizes, checked) if r is None])
    if n_entities is None:
        n_entities = largest
    if not isinstance(n_entities, (int, np.integer)) or isinstance(n_entities, bool) or n_entities < largest:
        raise ValueError(f"n_entities must be an int >= {largest} (the largest entity index + 1, and the rows of "
                         f"every view without observed), got {n_entities!r}")
    # a view without indices: its row n is entity n (the first N_v entities)
    checked = [np.arange(size) if rows is None and size != n_entities else rows for size, rows in zip(sizes, checked)]
    # every view observes every entity in order: the paired model, stored as such
    if all(r is None or (r.size == n_entities and np.array_equal(r, np.arange(n_entities))) for r in checked):
        checked = [None] * len(names)
    return checked, int(n_entities)


def _entity_blocks(centred: list[np.ndarray], observed: list[np.ndarray | None], n_entities: int):
    """Each view's rows per entity [n_entities, D_v] (the mean of an entity's rows; 0 where unseen) and
    the mask [n_entities] of the entities it observes."""
    blocks, masks = [], []
    for Y, rows in zip(centred, observed):
        if rows is None:
            blocks.append(Y)
            masks.append(np.ones(n_entities, dtype=bool))
            continue
        counts = np.bincount(rows, minlength=n_entities)  # [n_entities]
        block = np.zeros((n_entities, Y.shape[1]))
        np.add.at(block, rows, Y)
        seen = counts > 0
        block[seen] /= counts[seen, None]
        blocks.append(block)
        masks.append(seen)
    return blocks, masks


def anchored_latent(init: str, names: list[str], centred: list[np.ndarray], observed: list[np.ndarray | None],
                    n_entities: int, latent_dim: int, seed) -> np.ndarray | None:
    """Initial q(X) means [n_entities, Q] under partial observation, learned on the entities every view
    observes (the anchors): ``init`` ("pca", "pca_split", "cca") of the views' rows of those entities gives
    their latent X_C; each view's latent is then a least-squares map from its leading principal
    component scores (at most 4 Q, fitted on all its rows) to X_C, applied to every row it has; an
    entity gets the mean over the views that observe it. The same linear relation between each view
    and the common latent thus holds for anchors and unaligned rows, so the views start in one space
    (completing the missing blocks of the other views by a low-rank SVD, :func:`complete_views`,
    lets each view take latent directions of its own, a local optimum of the bound where nothing is
    shared).

    C entities seen by every view determine at most C - 2 such dimensions (``init`` of C rows, and
    a map with an intercept fitted on them). With fewer than Q + 2 of them, the first C - 2
    dimensions are anchored as above and the other Q - C + 2 start at small random values (10% of
    the smallest anchored dimension's spread, as MAD's anchors-only start pads its PCA), which the
    fit can use or switch off; completing the views instead started each view in latent directions of its own and
    the fit kept them apart (benchmarks/RESULTS.md, "Few anchors"). None when fewer than 3
    entities are observed by every view."""
    blocks, masks = _entity_blocks(centred, observed, n_entities)
    common = np.logical_and.reduce(masks)  # [n_entities]
    anchored = min(latent_dim, int(common.sum()) - 2)  # dimensions the common entities determine
    if anchored < 1:
        return None
    X_common = init_latent(init, names, [b[common] for b in blocks], anchored, seed)  # [C, anchored]
    total = np.zeros((n_entities, anchored))
    counts = np.zeros(n_entities)
    for Y, block, mask in zip(centred, blocks, masks):
        k = int(min(Y.shape[1], 4 * anchored, common.sum() - 1))
        _, _, Vt = np.linalg.svd(Y, full_matrices=False)  # the view's principal directions, all its rows
        scores = block @ Vt[:k].T  # [n_entities, k]
        coef = np.linalg.lstsq(np.c_[scores[common], np.ones(common.sum())], X_common, rcond=None)[0]
        total[mask] += np.c_[scores[mask], np.ones(mask.sum())] @ coef
        counts[mask] += 1.0
    X = total / np.maximum(counts, 1.0)[:, None]  # [n_entities, anchored]
    scale = X[counts > 0].std(0).max()
    X = X / scale if scale > 0 else X
    return pad_latent(X, latent_dim, seed, spread_rows=counts > 0)  # [n_entities, Q]


def pad_latent(X: np.ndarray, latent_dim: int, seed, spread_rows=None) -> np.ndarray:
    """A start X [N, q] with fewer dimensions than ``latent_dim``, the others appended at small random values:
    normal with 10% of the smallest spread among X's columns (over ``spread_rows``, default all) that have
    one (a column the data's rank did not reach has none; 1 when none has). X itself when q = latent_dim."""
    missing = latent_dim - X.shape[1]
    if missing <= 0:
        return X
    spreads = (X if spread_rows is None else X[spread_rows]).std(0)  # [q]
    used = spreads[spreads > 1e-6 * max(float(spreads.max(initial=0.0)), 1e-300)]
    spread = float(used.min()) if used.size else 1.0
    return np.hstack([X, 0.1 * spread * as_rng(seed).standard_normal((X.shape[0], missing))])


def partial_latent(init: str, names: list[str], centred: list[np.ndarray], observed: list[np.ndarray | None],
                   n_entities: int, latent_dim: int, seed) -> np.ndarray:
    """Initial q(X) means [n_entities, Q] of the named start ``init`` ("pca", "pca_split", "cca") under partial
    observation: :func:`anchored_latent`, or, with fewer than 3 entities seen by every view, ``init`` of the
    views completed by :func:`complete_views`. The start of both engines (MRD and StochasticMRD)."""
    X = anchored_latent(init, names, centred, observed, n_entities, latent_dim, seed)  # [N, Q], or None
    if X is None:
        X = init_latent(init, names, complete_views(centred, observed, n_entities, latent_dim), latent_dim, seed)
    return X


def complete_views(centred: list[np.ndarray], observed: list[np.ndarray | None], n_entities: int, rank: int,
                   max_iter: int = 100, tol: float = 1e-6) -> list[np.ndarray]:
    """Every view's centred outputs per entity [n_entities, D_v], the entities a view does not observe
    filled in by a rank-``rank`` SVD of the concatenated views (hard impute: fill, truncate the SVD,
    refill the missing blocks, repeat; Mazumder, Hastie & Tibshirani, 2010). An entity seen twice
    in a view gets the mean of its rows. Gives the "pca" / "pca_split" / "cca" initialisations
    their complete rows under partial observation."""
    blocks, masks = _entity_blocks(centred, observed, n_entities)
    # equal weight per view
    scaled = [b / math.sqrt(max(float(np.square(Y).sum()) / Y.shape[0], 1e-300)) for b, Y in zip(blocks, centred)]
    full = np.hstack(scaled)  # [n_entities, sum D]
    missing = np.hstack([np.repeat(~m[:, None], Y.shape[1], axis=1) for m, Y in zip(masks, scaled)])
    rank = max(1, min(rank, min(full.shape) - 1))
    for _ in range(max_iter):
        U, s, Vt = np.linalg.svd(full, full_matrices=False)
        low = (U[:, :rank] * s[:rank]) @ Vt[:rank]
        change = np.square(low[missing] - full[missing]).sum() / max(np.square(full).sum(), 1e-300)
        full[missing] = low[missing]
        if change < tol:
            break
    out, start = [], 0
    for Y, block in zip(centred, scaled):
        width = block.shape[1]
        part = full[:, start:start + width]
        out.append(part * math.sqrt(max(float(np.square(Y).sum()) / Y.shape[0], 1e-300)))
        start += width
    return out


def centre_view(Y: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Centred non-constant columns [N, D_kept], the column means [D] and the kept-column mask [D].

    Constant columns carry no information and would give a zero-variance output; they are dropped
    with a warning and predicted as their constant.
    """
    mean = Y.mean(0)  # [D]
    keep = np.ptp(Y, axis=0) > 0  # [D]
    if not keep.any():
        raise ValueError(f"view {name!r}: every column is constant; nothing to model")
    if not keep.all():
        dropped = np.flatnonzero(~keep)
        warnings.warn(f"view {name!r}: dropping {dropped.size} constant column(s) {dropped[:10].tolist()}"
                      f"{' ...' if dropped.size > 10 else ''}; they are predicted as their constant",
                      RuntimeWarning, stacklevel=3)
    return Y[:, keep] - mean[keep], mean, keep


def _pca_scores(blocks: list[np.ndarray], n_components: int) -> np.ndarray:
    """Top principal-component scores [N, n] of the column-concatenated centred blocks."""
    data = np.hstack(blocks)  # [N, sum D]
    U, s, Vt = np.linalg.svd(data, full_matrices=False)
    # deterministic signs (as sklearn's svd_flip): largest loading of each component positive
    signs = np.sign(Vt[np.arange(Vt.shape[0]), np.abs(Vt).argmax(1)])
    signs[signs == 0] = 1.0
    return (U[:, :n_components] * s[:n_components]) * signs[:n_components]


#: Fraction of a view's variance its whitened principal subspace keeps in the "cca" initialisation.
CCA_VARIANCE_KEPT = 0.95
#: Canonical correlation (its generalisation to V views, see cca_latent) above which a direction is shared.
CCA_SHARED_CORRELATION = 0.5


def _principal_basis(block: np.ndarray, kept: float) -> np.ndarray:
    """Orthonormal basis [N, k] of the fewest principal components of ``block`` holding ``kept`` of its variance."""
    U, s, _ = np.linalg.svd(block, full_matrices=False)
    power = np.square(s)
    k = int(np.searchsorted(np.cumsum(power), kept * power.sum() * (1.0 - 1e-12))) + 1
    return U[:, :min(k, s.size)]


def cca_latent(blocks: list[np.ndarray], latent_dim: int, names: Sequence[str] | None = None,
               kept: float = CCA_VARIANCE_KEPT, threshold: float = CCA_SHARED_CORRELATION):
    r"""Latent coordinates [N, Q] with the views' shared directions first, then each view's private ones.

    The shared part is generalised CCA (MAXVAR; Kettenring, 1971): with :math:`U_v` [N, k_v] an
    orthonormal basis of view v's principal subspace (the fewest components holding ``kept`` of its
    variance: whitening the whole view would make chance correlations large when D_v is not small
    against N), the canonical directions are the left singular vectors :math:`g_i` of
    :math:`[U_1, \dots, U_V]` and their correlations :math:`(\sigma_i^2 - 1) / (V - 1)`: 1 for a
    direction in every view's subspace, 0 for one in a single view's, and for two views Hotelling's
    canonical correlation (:math:`\sigma_i^2 = 1 + \rho_i`). The directions with correlation above
    ``threshold`` span the shared subspace. The candidate dimensions are the principal components
    of the views within it (shared) and of each view outside it (private to that view); the Q that
    explain the most of the views' variance (a shared one: the mean fraction over the views; a
    private one: its fraction of its view / V) are kept, shared ones first, then each view's, in
    view order. This is PCA of the concatenated views (each scaled to unit total variance)
    constrained to axes that are either shared or private. Every dimension is a unit-variance
    score times the square root of the fraction it explains (of its own view for a private one), so
    weak directions start small, as PCA scores do.

    The point is the start of MRD's optimisation: the ARD kernels must split the latent space into
    shared and private parts, and a PCA of the concatenated views mixes them, which L-BFGS then has
    to undo by moving every point (``benchmarks/bench_mrd.py --large``).

    Parameters
    ----------
    blocks : list of arrays [N, D_v]
        Centred views (scaled to equal total variance by the caller, or not).
    latent_dim : int
    names : view names (for ``owners`` and error messages; default "0", "1", ...).
    kept, threshold : float
        See above.

    Returns
    -------
    X : array [N, Q]
    correlations : array
        The correlation of every canonical direction (above), largest first.
    owners : list
        For each dimension, None if it is shared, else the name of the view it is private to.

    Examples
    --------
    Two views that share one column (twice as large in the second):

    >>> rng = np.random.default_rng(0)
    >>> t = rng.normal(size=(200, 1))
    >>> a, b = np.c_[t, rng.normal(size=(200, 1))], np.c_[2 * t, rng.normal(size=(200, 1))]
    >>> X, correlations, owners = cca_latent([a - a.mean(0), b - b.mean(0)], 3, names=["a", "b"])
    >>> owners, correlations.round(2).tolist(), round(float(abs(np.corrcoef(X[:, 0], t[:, 0])[0, 1])), 6)
    ([None, 'a', 'b'], [1.0, 0.06, -0.06, -1.0], 1.0)
    """
    V = len(blocks)
    names = list(names) if names is not None else [str(v) for v in range(V)]
    if V < 2:
        raise ValueError("init='cca' needs at least two views (it finds what they share); use 'pca'")
    N = blocks[0].shape[0]
    bases = [_principal_basis(b, kept) for b in blocks]
    G, sigma, _ = np.linalg.svd(np.hstack(bases), full_matrices=False)  # [N, sum k_v]
    correlations = (np.square(sigma) - 1.0) / (V - 1)
    span = G[:, :int(np.sum(correlations > threshold))]  # [N, r] the shared subspace, orthonormal
    totals = np.array([max(float(np.square(b).sum()), 1e-300) for b in blocks])  # [V]

    def components(matrix):
        """Left singular vectors [N, k] and singular values [k] of the numerical rank of ``matrix``."""
        U, s, _ = np.linalg.svd(matrix, full_matrices=False)
        keep = s > (s[0] if s.size else 0.0) * max(matrix.shape) * np.finfo(float).eps
        keep[min(N - 1, s.size):] = False
        return U[:, keep], s[keep]

    # candidates: the principal components of the views within the shared subspace, and of each
    # view outside it; each scores the fraction of the views' variance it explains (mean over views)
    shared, _ = components(span @ (span.T @ np.hstack([b / math.sqrt(t) for b, t in zip(blocks, totals)])))
    shared_fraction = np.mean([np.square(b.T @ shared).sum(0) / t for b, t in zip(blocks, totals)], axis=0)
    private = [components(b - span @ (span.T @ b)) for b in blocks]
    private_fraction = [np.square(s) / t for (_, s), t in zip(private, totals)]  # of its own view
    scores = np.concatenate([shared_fraction] + [f / V for f in private_fraction])
    if scores.size < latent_dim:
        raise ValueError(f"latent_dim={latent_dim} is larger than init='cca' allows here: {shared.shape[1]} shared "
                         f"and {dict(zip(names, (U.shape[1] for U, _ in private)))} private dimensions per view; "
                         "use a smaller latent_dim, 'random' or an array")
    chosen = np.zeros(scores.size, dtype=bool)
    chosen[np.argsort(-scores, kind="stable")[:latent_dim]] = True
    n_shared = int(chosen[:shared.shape[1]].sum())
    columns = [shared[:, :n_shared] * np.sqrt(N * shared_fraction[:n_shared])]
    owners = [None] * n_shared
    offset = shared.shape[1]
    for name, (U, _), fraction in zip(names, private, private_fraction):
        k = int(chosen[offset:offset + fraction.size].sum())  # the largest ones of this view
        columns.append(U[:, :k] * np.sqrt(N * fraction[:k]))
        owners += [name] * k
        offset += fraction.size
    X = np.hstack(columns)
    # deterministic signs (SVD signs depend on the LAPACK build): each column's largest entry positive
    X *= np.where(X[np.abs(X).argmax(0), np.arange(X.shape[1])] < 0, -1.0, 1.0)
    return X, correlations, owners


def entity_means_from_embedding(init: LatentEmbedding, names: list[str], observed: list, n_entities: int,
                                latent_dim: int) -> np.ndarray:
    """Initial q(X) means [n_entities, Q] from a LatentEmbedding whose views have the rows of the fitted
    views: each entity gets the mean of its rows' coordinates (0 where no view observes it), then the
    common centring and scaling of :func:`init_latent`."""
    total = np.zeros((n_entities, latent_dim))
    counts = np.zeros(n_entities)
    used = []
    for name, rows in zip(names, observed):
        means = init.means.get(name)
        if means is None:
            continue
        size = n_entities if rows is None else rows.size
        if means.shape[0] != size:
            raise ValueError(f"init embedding of view {name!r} has {means.shape[0]} rows, the view {size}")
        if means.shape[1] != latent_dim:
            raise ValueError(f"init embedding has {means.shape[1]} dimensions, latent_dim is {latent_dim}")
        index = np.arange(n_entities) if rows is None else rows
        np.add.at(total, index, means)
        np.add.at(counts, index, 1.0)
        used.append(name)
    if not used:
        raise ValueError(f"init embedding has none of the views {names}")
    X = np.where(counts[:, None] > 0, total / np.maximum(counts, 1.0)[:, None], 0.0)
    X = X - X[counts > 0].mean(0)
    X[counts == 0] = 0.0
    scale = X.std(0).max()
    return X / scale if scale > 0 else X


def init_latent(init, names: list[str], centred: list[np.ndarray], latent_dim: int, seed,
                n_rows: int | None = None) -> np.ndarray:
    """Initial q(X) means [N, Q] (see the ``init`` parameter of :class:`MRD`); ``n_rows`` (default: the
    rows of the first view) is N for the "random" and array initialisations."""
    N = centred[0].shape[0] if n_rows is None else n_rows
    if isinstance(init, LatentEmbedding):
        means = [m for m in init.means.values() if m.shape[0] == N]
        if not means:
            raise ValueError(f"init embedding has no view with {N} rows")
        X = np.mean(means, axis=0)
        if X.shape[1] != latent_dim:
            raise ValueError(f"init embedding has {X.shape[1]} dimensions, latent_dim is {latent_dim}")
        X = X - X.mean(0)
        scale = X.std(0).max()
        return X / scale if scale > 0 else X
    if not isinstance(init, str):
        X = np.array(init, dtype=np.float64, copy=True)
        if X.shape != (N, latent_dim):
            raise ValueError(f"init array must have shape (n_samples, latent_dim) = {(N, latent_dim)}, "
                             f"got {X.shape}")
        if not np.isfinite(X).all():
            raise ValueError("init array contains NaN or inf")
        return X
    if init not in _INITS:
        raise ValueError(f"init must be one of {_INITS}, a LatentEmbedding or an array, got {init!r}")
    if init == "random":
        return as_rng(seed).standard_normal((N, latent_dim))
    # every view scaled to unit total variance, so that a view with many columns does not dominate
    blocks = [Y / math.sqrt(max(float(np.square(Y).sum()) / N, 1e-300)) for Y in centred]
    if init == "pca":
        limit = min(N - 1, sum(b.shape[1] for b in blocks))
        if latent_dim > limit:
            raise ValueError(f"latent_dim={latent_dim} is larger than PCA initialisation allows: at most "
                             f"min(n_samples - 1, total columns) = {limit}; use init='random' or an array")
        X = _pca_scores(blocks, latent_dim)
    elif init == "cca":
        X = cca_latent(blocks, latent_dim, names)[0]
    else:  # pca_split: each view gives its share of the dimensions
        chunks = np.array_split(np.arange(latent_dim), len(blocks))
        X = np.zeros((N, latent_dim))
        for name, block, dims in zip(names, blocks, chunks):
            limit = min(N - 1, block.shape[1])
            if dims.size > limit:
                raise ValueError(f"latent_dim={latent_dim} split over {len(blocks)} views gives view {name!r} "
                                 f"{dims.size} dimensions, more than its PCA allows ({limit})")
            if dims.size:
                X[:, dims] = _pca_scores([block], dims.size)
    # one common scale (the largest component gets unit variance): the smaller components start
    # small, so that the kernels see them as less relevant, like GPy's 1 / fraction lengthscales
    scale = X.std(0).max()
    return X / scale if scale > 0 else X
