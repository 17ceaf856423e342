"""MAD: Manifold Alignment Determination (Damianou, Lawrence & Ek, 2016), with uncertainty-aware matching.

The pipeline (orchestration only; the model is :class:`bayesalign.gp.MRD`, the solvers are
:mod:`bayesalign.matching`):

1. train MRD on the anchor rows only (the paper's eq. 2-3; for more than two views on the
   anchor groups present in every view, :meth:`~bayesalign.data.AlignmentProblem.anchor_groups`);
2. infer q_v(x) = N(mu, diag S) of the unaligned rows of each view v with view v's model only
   (eq. 4, ``MRD.infer``);
3. compare the two sets of posteriors in the latent dimensions that the ARD relevance weights
   mark as shared by both views (section 3.1) with a cost -- the paper's D** (squared distance
   between the means, :func:`mean_distance_cost`) or the match likelihood of the whole
   posteriors (:func:`likelihood_cost`, beyond the paper) -- and match with the Hungarian method
   (nonmyopic), the myopic online rule (:meth:`MAD.match_one` streams it), or the
   expected-accuracy matching under Sinkhorn or perturb-and-MAP marginals.

Beyond the paper (its section 5 "future work"): match probabilities on every alignment,
self-training with the confident mutual-nearest pairs (:meth:`MAD.self_train`), and a
zero-anchor start from the unsupervised local-pattern correspondence of Wang, Krafft &
Mahadevan (2011, section 5.3.4).

What was measured (``experiments/mad_paper.py``; see its results for every seed):

* The paper's Table 1 (Hungarian on D**, Kendall-tau distance in the sequence order, mean ± sd
  over 5 seeds; paper in brackets): toy linear fully shared 0.0035 ± 0.0017 (0.001); linear
  shared/private 0.0083 ± 0.0105 (0.003; one seed of five 0.027, the others 0.002-0.005);
  nonlinear 0.034 ± 0.024 (2e-6; one seed keeps three shared dimensions, 0.055); motion capture
  0.257 ± 0.142 (0.21); digits (scikit-learn's 8x8 zeros, not USPS 16x16) 0.456 ± 0.065 (0.28).

* The likelihood cost is robust where D** is not: on the "linear_shared_private" toy
  (N = 100, N_init = 12, seed 0) with a shared-dimension threshold of 0.01 a private dimension
  counts as shared; D** then drops to accuracy 0.455 (Kendall-tau 0.078) while the likelihood
  cost keeps 0.909 (0.004), because an inferred q(x) is broad (near the prior) in the
  dimensions its view ignores. At the default threshold (0.05) both give 0.886 (0.0055; the
  paper: 0.003). With perfectly homoscedastic posteriors the two costs agree; with
  heteroscedastic ones the likelihood cost is the MAP matching (tests: 0.50 vs 0.34 accuracy).
* Self-training (threshold 0.9, mutual nearest) added only right pairs in every measured run
  (linear_shared, N_init = 8: +61 and +49 pairs over 3 rounds, all right; linear_shared_private,
  N_init = 12: +65 and +47, all right). The accuracy of the whole alignment does not always
  follow: 0.886 -> 0.977 in one run, 0.932 -> 0.886 in another (refitting on more anchors can
  move the remaining rows the wrong way), unchanged in the two linear_shared runs.
* Calibration (``experiments/results/mad_paper/comparison.md``, 2 seeds): ECE of MAD's
  probabilities and precision of its most confident half are listed per problem and matcher.
* Zero anchors: all or nothing. With a Gromov-Wasserstein bootstrap the toy "linear_shared"
  reached accuracy 0.88 for seed 0 and 0.0 for seed 1 (a mirror-image solution), the
  shared/private toy 0.0 for seeds 0 and 1 (1 success in 4 runs); details in :meth:`MAD.fit` (``bootstrap``).
"""

from __future__ import annotations

import math
import time
import warnings

import numpy as np
import scipy.sparse as sp

from . import matching
from ._utils import as_rng
from .data import Alignment, AlignmentProblem

__all__ = ["COSTS", "MAD", "MATCHERS", "MIN_ANCHORS", "anchor_groups", "evaluate", "gromov_wasserstein_coupling",
           "likelihood_cost", "mean_distance_cost", "mutual_nearest", "pair_costs"]

_LOG_2PI = math.log(2.0 * math.pi)


# ----------------------------------------------------------------------------------------
# Costs between posteriors (pure functions; no model needed)
# ----------------------------------------------------------------------------------------
def _as_2d(array, name: str) -> np.ndarray:
    out = np.asarray(array, dtype=np.float64)
    if out.ndim != 2:
        raise ValueError(f"{name}: expected a 2-D array (n, q), got shape {out.shape}")
    if not np.all(np.isfinite(out)):
        row, col = np.argwhere(~np.isfinite(out))[0]
        raise ValueError(f"{name}: non-finite value at row {row}, dimension {col}")
    return out


def mean_distance_cost(mean_a, mean_b) -> np.ndarray:
    """The paper's D**: squared Euclidean distance between posterior means (section 3.1).

    ``D[i, j] = ||mu_i - mu_j||^2`` for the (already restricted to shared dimensions)
    means ``mu_i`` of view a and ``mu_j`` of view b. The Hungarian assignment on it is
    the same with or without the square root only for the *myopic* matcher; the
    nonmyopic optimum of the squared distance is the MAP permutation of the
    homoscedastic Gaussian model, which is why the square is used here.

    Parameters
    ----------
    mean_a : array (n_a, q)
    mean_b : array (n_b, q)

    Returns
    -------
    array (n_a, n_b)  (dense: the assignment on it needs every entry)

    Examples
    --------
    >>> mean_distance_cost([[0.0, 0.0]], [[3.0, 4.0], [0.0, 1.0]]).tolist()
    [[25.0, 1.0]]
    """
    a = _as_2d(mean_a, "mean_a")  # [Na, Q]
    b = _as_2d(mean_b, "mean_b")  # [Nb, Q]
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"mean_a has {a.shape[1]} dimensions but mean_b has {b.shape[1]}")
    # ||a||^2 + ||b||^2 - 2 a.b, clipped at 0 against round-off   # [Na, Nb]
    cost = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * (a @ b.T)
    return np.maximum(cost, 0.0)


def likelihood_cost(mean_a, var_a, mean_b, var_b) -> np.ndarray:
    """Match negative log-likelihood: ``-log N(mu_i - mu_j; 0, S_i + S_j)`` with diagonal S.

    If q_a(x_i) = N(mu_i, S_i) and q_b(x_j) = N(mu_j, S_j) describe the *same*
    latent point x (with a flat prior on x), then
    ``p(mu_i, mu_j | same point) = N(mu_i - mu_j; 0, S_i + S_j)``; so

        C[i, j] = 1/2 sum_q [ log(2 pi (s_iq + s_jq)) + (mu_iq - mu_jq)^2 / (s_iq + s_jq) ]

    and the optimal assignment on C is the MAP permutation under these posteriors
    (this is the "use the uncertainty" future work of Damianou et al., 2016, section 5).
    Unlike the expected squared distance ``E||x_i - x_j||^2 = ||mu_i - mu_j||^2 +
    tr S_i + tr S_j`` -- which only adds row and column constants and therefore changes
    no assignment, so it is *not* offered as an uncertainty-aware cost -- both the
    variance-weighted distance and the log-determinant term couple i and j.

    Parameters
    ----------
    mean_a, var_a : arrays (n_a, q)
        Posterior means and diagonal variances of view a's points.
    mean_b, var_b : arrays (n_b, q)

    Returns
    -------
    array (n_a, n_b)

    Examples
    --------
    >>> c = likelihood_cost([[0.0]], [[0.5]], [[1.0], [0.0]], [[0.5], [0.5]])
    >>> np.allclose(c, 0.5 * np.log(2 * np.pi) + 0.5 * np.array([[1.0, 0.0]]))
    True
    """
    ma, va = _as_2d(mean_a, "mean_a"), _as_2d(var_a, "var_a")  # [Na, Q]
    mb, vb = _as_2d(mean_b, "mean_b"), _as_2d(var_b, "var_b")  # [Nb, Q]
    if ma.shape != va.shape or mb.shape != vb.shape or ma.shape[1] != mb.shape[1]:
        raise ValueError(f"shapes do not agree: mean_a {ma.shape}, var_a {va.shape}, mean_b {mb.shape}, "
                         f"var_b {vb.shape}")
    if (va <= 0).any() or (vb <= 0).any():
        raise ValueError("posterior variances must be positive")
    cost = np.zeros((ma.shape[0], mb.shape[0]))  # [Na, Nb]
    # one latent dimension at a time keeps the memory at one [Na, Nb] temporary
    for q in range(ma.shape[1]):
        total = va[:, q, None] + vb[None, :, q]  # [Na, Nb]
        diff = ma[:, q, None] - mb[None, :, q]  # [Na, Nb]
        cost += 0.5 * (_LOG_2PI + np.log(total) + diff * diff / total)
    return cost


def pair_costs(kind: str, mean_a, var_a, mean_b, var_b, index_a, index_b) -> np.ndarray:
    """The cost of the listed pairs only (``kind`` "mean" or "likelihood"): the sparse path's costs.

    ``out[t] = C[index_a[t], index_b[t]]`` for C = ``mean_distance_cost`` or
    ``likelihood_cost``, without forming the (n_a, n_b) matrix.

    >>> pair_costs("mean", [[0.0], [1.0]], None, [[3.0]], None, [0, 1], [0, 0]).tolist()
    [9.0, 4.0]
    """
    ia, ib = np.asarray(index_a, np.int64), np.asarray(index_b, np.int64)
    ma, mb = np.asarray(mean_a, np.float64)[ia], np.asarray(mean_b, np.float64)[ib]  # [K, Q]
    diff2 = (ma - mb) ** 2  # [K, Q]
    if kind == "mean":
        return diff2.sum(1)
    if kind == "likelihood":
        total = np.asarray(var_a, np.float64)[ia] + np.asarray(var_b, np.float64)[ib]  # [K, Q]
        return 0.5 * (_LOG_2PI + np.log(total) + diff2 / total).sum(1)
    raise ValueError(f"cost must be 'mean' or 'likelihood', got {kind!r}")


def mutual_nearest(cost) -> np.ndarray:
    """Boolean (n_a, n_b) mask of mutual nearest neighbours: row i's argmin is j and column j's is i.

    >>> mutual_nearest([[0.0, 1.0], [0.5, 2.0]]).astype(int).tolist()
    [[1, 0], [0, 0]]
    """
    cost = np.asarray(cost, dtype=np.float64)
    mask = np.zeros(cost.shape, dtype=bool)
    if cost.size == 0:
        return mask
    best_b = cost.argmin(1)  # [Na]
    best_a = cost.argmin(0)  # [Nb]
    rows = np.arange(cost.shape[0])
    keep = best_a[best_b] == rows
    mask[rows[keep], best_b[keep]] = True
    return mask


# ----------------------------------------------------------------------------------------
# Problem checks
# ----------------------------------------------------------------------------------------
def anchor_groups(problem: AlignmentProblem) -> np.ndarray:
    """Deprecated: use :meth:`bayesalign.data.AlignmentProblem.anchor_groups` (the problem owns its anchors)."""
    warnings.warn("bayesalign.mad.anchor_groups is deprecated; use problem.anchor_groups()", DeprecationWarning,
                  stacklevel=2)
    return problem.anchor_groups()


def _truth_pairs(problem: AlignmentProblem, a: str, b: str) -> set[tuple[int, int]] | None:
    """The true (row of a, row of b) pairs as a set, or None when the problem has no truth for them."""
    if not problem.has_truth:
        return None
    try:
        truth = problem.truth_between(a, b)
    except ValueError:
        return None
    return set(zip(truth.index_a.tolist(), truth.index_b.tolist()))


def evaluate(alignment, problem: AlignmentProblem, coverage: float = 0.5) -> dict:
    """Accuracy and calibration of an alignment against the problem's truth (on its candidate rows).

    Returns a dict with ``n_pairs``, ``accuracy`` (:func:`bayesalign.metrics.matching_accuracy`),
    ``kendall_tau`` (normalised Kendall-tau distance, the MAD paper's measure: 0 perfect, about
    0.5 random) and, when the alignment carries probabilities, ``ece`` (expected calibration
    error), ``brier`` (Brier score) and ``precision_at_coverage`` (precision of the ``coverage``
    fraction of most confident pairs). The truth is restricted to the alignment's candidate
    rows (the held-out rows), as in :func:`bayesalign.compare.evaluate`.

    Examples
    --------
    >>> from bayesalign.data import Alignment
    >>> problem = AlignmentProblem.paired({"a": np.eye(3), "b": np.eye(3)})
    >>> al = Alignment(("a", "b"), [0, 1, 2], [0, 2, 1], probabilities=[0.9, 0.6, 0.3])
    >>> out = evaluate(al, problem)
    >>> round(out["accuracy"], 3), out["n_pairs"]
    (0.333, 3)
    """
    from . import metrics

    a, b = alignment.views
    truth = problem.truth_between(a, b)
    held = truth.subset(np.isin(truth.index_a, alignment.candidates_a) & np.isin(truth.index_b, alignment.candidates_b))
    out = {"n_pairs": len(alignment), "accuracy": float(metrics.matching_accuracy(alignment, held)),
           "kendall_tau": float(metrics.kendall_tau_distance(alignment, held))}
    if alignment.probabilities is not None and len(alignment):
        out["ece"] = float(metrics.expected_calibration_error(alignment, held))
        out["brier"] = float(metrics.brier_score(alignment, held))
        out["precision_at_coverage"] = float(metrics.precision_at_coverage(alignment, held, coverage))
    return out


# ----------------------------------------------------------------------------------------
# The estimator
# ----------------------------------------------------------------------------------------
#: MRD needs a few paired rows to estimate a latent space and its relevance weights.
MIN_ANCHORS = 3
MATCHERS = ("hungarian", "myopic", "sinkhorn", "perturb")
#: align() takes the sparse (kNN candidate) path above this many candidate pairs n_a * n_b (N* = 5,000: a
#: 200 MB cost matrix). Below it the dense solver is the faster one on MAD's costs: the posterior means
#: crowd in a few shared dimensions, where scipy's sparse LAPJVsp meets long augmenting paths
#: (``python benchmarks/bench_mad.py --n-star 2500 [--sparse]``, both at the same load: mean cost,
#: matching with probabilities, dense 41 s, sparse 152 s).
SPARSE_ABOVE = 25_000_000
#: Above this many pairs, the Sinkhorn probabilities are computed on kNN candidate pairs only even in
#: the dense path: with the near-hard costs of MAD's posteriors the dense iteration takes minutes at
#: N* = 1000 (3500 sweeps of a 1000 x 1000 matrix), the sparse one seconds.
DENSE_SINKHORN_MAX = 250_000
SINKHORN_NEIGHBORS = 10
COSTS = ("likelihood", "mean")


def _anchor_init(train, latent_dim: int, seed):
    """Initial q(X) means of the anchors when PCA cannot give ``latent_dim`` components, else None.

    PCA of G anchor rows has at most min(G - 1, columns) components (MRD refuses more); MAD, which
    must work from a handful of anchors, takes those (the MRD "pca" initialisation) and starts the
    remaining dimensions at small random values (10% of the smallest PCA component's spread), as
    GPy's initialisation does, with a warning.
    """
    from .gp._model import init_latent

    names = list(train.names)
    centred = [train[n] - train[n].mean(0) for n in names]
    G = centred[0].shape[0]
    limit = min(G - 1, sum(Y.shape[1] for Y in centred))
    if latent_dim <= limit:
        return None
    warnings.warn(f"MAD: {G} anchors allow {limit} PCA dimensions of latent_dim={latent_dim}; the other "
                  f"{latent_dim - limit} start at small random values", RuntimeWarning, stacklevel=4)
    X = init_latent("pca", names, centred, limit, seed)  # [G, limit]
    spread = float(X.std(0).min()) if limit else 1.0
    pad = 0.1 * spread * as_rng(seed).standard_normal((G, latent_dim - limit))  # [G, latent_dim - limit]
    return np.hstack([X, pad])


class MAD:
    """Manifold Alignment Determination (Damianou, Lawrence & Ek, 2016), with uncertainty-aware matching.

    MAD trains MRD (a multi-view Bayesian GP-LVM with ARD kernels; :class:`bayesalign.gp.MRD`)
    on the anchor rows only (eq. 2-3 of the paper), infers for the unaligned rows of each
    view v a posterior q_v(x) = N(mu, diag(S)) with *that view's* model only (eq. 4), and
    matches the two sets of posteriors in the latent dimensions that the ARD relevance
    weights mark as shared by both views (section 3.1).

    Costs (``cost``): ``"mean"`` is the paper's D**, the squared Euclidean distance between
    posterior means (:func:`mean_distance_cost`); ``"likelihood"`` (default) is the match
    negative log-likelihood ``-log N(mu_i - mu_j; 0, S_i + S_j)`` (:func:`likelihood_cost`),
    which uses the whole posterior (the paper's future work, section 5). The expected
    squared distance E||x_i - x_j||^2 is *not* offered: it only adds row and column
    constants to D** and changes no assignment.

    Matchers (:meth:`align`): ``"hungarian"`` (the paper's nonmyopic optimal assignment),
    ``"myopic"`` (the paper's online variant: the unaligned rows of b arrive in order and
    each takes the nearest free row of a; :meth:`match_one` streams it), ``"sinkhorn"`` and
    ``"perturb"`` (the matching that maximises the expected number of correct pairs under
    the Sinkhorn marginals or the perturb-and-MAP pair frequencies). Every alignment
    carries per-pair probabilities: for ``"hungarian"`` and ``"myopic"`` the Sinkhorn
    marginal of the chosen pair, for ``"perturb"`` the sampled frequency.

    Parameters
    ----------
    latent_dim : int
        Q, the number of latent dimensions of MRD.
    num_inducing : int
        Inducing points of MRD (capped at the number of anchors).
    kernel : str or gpytorch kernel
        MRD's kernel per view ("rbf", "linear", ...).
    shared_threshold : float in [0, 1)
        A latent dimension is shared by views a and b when its ARD relevance exceeds this
        fraction of the largest relevance in *both* views (MRD's ``shared_dims`` rule).
    cost : {"likelihood", "mean"}
        Default cost of :meth:`align`.
    temperature : float, optional
        T of the probabilities ``exp(-cost / T)``. Default: 1 for the likelihood cost (the
        Gibbs distribution of the permutation posterior); for the mean cost 2 (s_a + s_b),
        with s_a, s_b the average posterior variances in the shared dimensions, which makes
        exp(-D**/T) the likelihood of the same model with every variance equal to its mean.
    infer_max_iter : int
        Bound evaluations of ``MRD.infer`` for the unaligned rows (the main cost at large N*:
        about 0.14 s per evaluation for 1,000 rows here).
    seed : int, optional
    device : str, optional
    progress : bool
        Progress bars of MRD fits and inference.
    **mrd_kwargs
        Passed to :class:`bayesalign.gp.MRD` (e.g. ``max_iter``, ``init``, ``dtype``).

    Attributes
    ----------
    model_ : MRD
        The model trained on the anchors (after the last self-training round).
    anchors_ : int array (G, V)
        The rows it was trained on, one column per view (given anchors + discovered pairs).
    posteriors_ : dict view -> (rows, mean [n, Q], var [n, Q])
        q(x) of the rows of each view that are not training rows, inferred with that view's
        model only.
    shared_dims_ : dict (a, b) -> int array
        The latent dimensions shared by each pair of views (at ``shared_threshold_``).
    shared_threshold_ : float
    discovered_ : dict (a, b) -> dict of arrays
        Pairs added by the zero-anchor bootstrap and by self-training (``index_a``,
        ``index_b``, ``probability``, ``cost``, ``round``); :meth:`align` reports them too.
    timings_ : dict
        Seconds of the last MRD fit (``fit_seconds``) and of the inference of every view's
        unaligned rows (``infer_seconds``).
    self_training_history_ : list of dict
        Per round: ``round``, ``n_anchors`` (training rows), ``added``, ``correct`` (how many
        added pairs are true; None without truth), ``accuracy`` (of the whole alignment at the
        start of the round, discovered pairs included; None without truth), ``elbo``.

    Examples
    --------
    >>> from bayesalign.datasets import mad_toy
    >>> problem = mad_toy("linear_shared", seed=0, n_anchors=10).shuffle_unaligned(seed=0)
    >>> mad = MAD(latent_dim=3, num_inducing=10, seed=0, max_iter=200).fit(problem)  # doctest: +SKIP
    >>> alignment = mad.align(matcher="hungarian")  # doctest: +SKIP
    >>> evaluate(alignment, problem)["kendall_tau"] < 0.05  # doctest: +SKIP
    True
    """

    def __init__(self, latent_dim: int = 5, num_inducing: int = 20, kernel="rbf", shared_threshold: float = 0.05,
                 cost: str = "likelihood", temperature: float | None = None, infer_max_iter: int = 500, seed=None,
                 device=None, progress: bool = False, **mrd_kwargs):
        self.latent_dim = latent_dim
        self.num_inducing = num_inducing
        self.kernel = kernel
        self.shared_threshold = shared_threshold
        self.cost = cost
        self.temperature = temperature
        self.infer_max_iter = infer_max_iter
        self.seed = seed
        self.device = device
        self.progress = progress
        self.mrd_kwargs = mrd_kwargs

    def get_params(self, deep: bool = True) -> dict:
        out = {k: getattr(self, k) for k in ("latent_dim", "num_inducing", "kernel", "shared_threshold", "cost",
                                             "temperature", "infer_max_iter", "seed", "device", "progress")}
        out.update(self.mrd_kwargs)
        return out

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"MAD({args})"

    # -- validation ------------------------------------------------------------------------
    def _check_params(self):
        if self.cost not in COSTS:
            raise ValueError(f"cost must be one of {COSTS}, got {self.cost!r}")
        if not 0 <= float(self.shared_threshold) < 1:
            raise ValueError(f"shared_threshold is relative to a view's largest relevance; it must be in [0, 1), "
                             f"got {self.shared_threshold!r}")
        if self.temperature is not None and not float(self.temperature) > 0:
            raise ValueError(f"temperature must be positive, got {self.temperature!r}")

    @staticmethod
    def _check_problem(problem) -> np.ndarray:
        """Anchor groups (G, V) of a valid problem; raises on bad anchors (``problem.anchor_groups``)."""
        if not isinstance(problem, AlignmentProblem):
            raise TypeError(f"MAD.fit expects an AlignmentProblem, got {type(problem).__name__}")
        groups = problem.anchor_groups()
        if problem.anchors and 0 < len(groups) < MIN_ANCHORS or (problem.anchors and len(groups) == 0):
            raise ValueError(f"MAD needs at least {MIN_ANCHORS} anchors present in every view to fit MRD, got "
                             f"{len(groups)}; with no anchors at all it bootstraps them without supervision")
        for k, view in enumerate(problem.views.names):
            n = problem.views.n_samples[view]
            if np.unique(groups[:, k]).size >= n:
                raise ValueError(f"view {view!r} has no unaligned rows: all its {n} rows are anchors, so nothing is "
                                 "left to align")
        return groups

    # -- fitting ---------------------------------------------------------------------------
    def fit(self, problem: AlignmentProblem, self_training: bool = False, confidence_threshold: float = 0.9,
            max_rounds: int = 5, n_bootstrap: int | None = None, bootstrap: str = "gromov_wasserstein") -> MAD:
        """Train MRD on the anchors and infer q(x) of every unaligned row (section 3.1).

        Parameters
        ----------
        problem : AlignmentProblem
            Views, anchors and (for the reports only) truth. Not modified.
        self_training : bool
            Then run :meth:`self_train` (``confidence_threshold``, ``max_rounds``): add the
            confident mutual-nearest pairs as anchors and refit, round after round. Two views only.
        confidence_threshold : float in (0, 1]
        max_rounds : int
        n_bootstrap : int, optional
            With no anchors: how many unsupervised pairs to start from (default
            ``max(MIN_ANCHORS, 2 * latent_dim)``); self-training then always runs.
        bootstrap : {"gromov_wasserstein", "local_patterns"}
            The unsupervised initialiser for a problem without anchors (see ``_bootstrap``).
            Measured on the toy "linear_shared" (N = 100, seed 0): the 10 most confident mutual
            pairs of entropic Gromov-Wasserstein were all right (its full matching: accuracy
            0.85), against 3 of 8 for the local-pattern correspondence; hence the default.
            How well MAD then works with no anchors at all (MAD toys, N = 100, view 2 shuffled,
            ``experiments/mad_paper.py --parts beyond``): "linear_shared" seed 0, 8 of 8 bootstrap
            pairs right, self-training adds the rest, final accuracy 0.88 (Kendall-tau 0.05) --
            as good as with 8 given anchors; seed 1, 0 of 8 right (GW locks onto a mirror image
            of the figure-eight latent curve), final accuracy 0.0; "linear_shared_private" seed 0,
            0 of 10 right, accuracy 0.0 (seed 1 likewise). So it is all or nothing (1 success in 4 runs): it works
            when the views' geometry has no symmetry to confuse it. Check ``bootstrap_`` and
            ``self_training_history_`` (and give a few anchors when you can).

        Returns
        -------
        self
        """
        self._check_params()
        groups = self._check_problem(problem)
        names = problem.views.names
        self.problem_ = problem
        self.discovered_ = {}
        self.self_training_history_ = []
        self.bootstrap_ = None
        if len(groups) == 0:
            if len(names) != 2:
                raise ValueError(f"MAD without anchors bootstraps pairs between two views; this problem has "
                                 f"{len(names)} views and no anchors")
            groups = self._bootstrap(problem, n_bootstrap, bootstrap)
            self_training = True
        if self_training and len(names) != 2:
            raise ValueError(f"self-training is implemented for two views; this problem has {len(names)}")
        if self_training and not 0 < float(confidence_threshold) <= 1:  # checked before the (slow) fit
            raise ValueError(f"confidence_threshold must be in (0, 1], got {confidence_threshold!r}")
        self.anchors_ = groups
        self._fit_model(problem)
        if self_training:
            self.self_train(confidence_threshold, max_rounds)
        return self

    def _mrd(self, train):
        """The MRD for the paired anchor views ``train``, from PCA unless ``mrd_kwargs`` says otherwise;
        with fewer anchors than PCA needs for ``latent_dim`` components, the PCA initialisation is
        padded with small random dimensions."""
        from .gp import MRD

        n_train = train.n_samples[train.names[0]]
        kwargs = dict(self.mrd_kwargs)
        if "init" not in kwargs:  # the paper's (GPy's) PCA; with a few anchors, "cca" would find chance
            init = _anchor_init(train, int(self.latent_dim), self.seed)  # canonical correlations
            kwargs["init"] = "pca" if init is None else init
        return MRD(latent_dim=int(self.latent_dim), num_inducing=min(int(self.num_inducing), n_train),
                   kernel=self.kernel, seed=self.seed, device=self.device, progress=self.progress, **kwargs)

    def _fit_model(self, problem: AlignmentProblem) -> None:
        """MRD on the anchor rows (eq. 3), then q_v(x) of the other rows of each view v (eq. 4)."""
        views, names = problem.views, problem.views.names
        groups = self.anchors_
        train = views.take({v: groups[:, k] for k, v in enumerate(names)})  # paired [G, p_v] views
        start = time.perf_counter()
        self.model_ = self._mrd(train).fit(train)
        fitted = time.perf_counter()
        self.posteriors_ = {}
        for k, view in enumerate(names):
            rows = np.setdiff1d(np.arange(views.n_samples[view]), groups[:, k])
            # [n, Q] each, with view's model only
            mean, var = self.model_.infer(view, views[view][rows], max_iter=int(self.infer_max_iter))
            self.posteriors_[view] = (rows, np.asarray(mean, np.float64), np.asarray(var, np.float64))
        self.timings_ = {"fit_seconds": fitted - start, "infer_seconds": time.perf_counter() - fitted}
        threshold = float(self.shared_threshold)
        relevance = self.model_.relevance_
        self.relevance_ = relevance
        self.shared_threshold_ = threshold
        self.shared_dims_ = {}
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                self.shared_dims_[(a, b)] = _shared_dims(relevance[a], relevance[b], threshold, (a, b))
        self._stream = {}

    def self_train(self, confidence_threshold: float = 0.9, max_rounds: int = 5) -> MAD:
        """Add confident mutual-nearest pairs as anchors and refit, round after round (two views).

        Each round aligns the first two views (Hungarian, the fitted cost, Sinkhorn
        probabilities), keeps the pairs whose probability is at least ``confidence_threshold``
        and that are mutual nearest neighbours under the cost, adds them to the anchors
        (``discovered_``), refits MRD and infers the remaining rows again; it stops when no
        pair qualifies or after ``max_rounds``. This is the paper's future work ("adding only
        pairs which the model are relatively certain about and update the model", section 5).
        Appends one entry per round to ``self_training_history_``.
        """
        self._check_fitted()
        problem = self.problem_
        if len(problem.views) != 2:
            raise ValueError(f"self-training is implemented for two views; this problem has {len(problem.views)}")
        threshold, max_rounds = float(confidence_threshold), int(max_rounds)
        if not 0 < threshold <= 1:
            raise ValueError(f"confidence_threshold must be in (0, 1], got {confidence_threshold!r}")
        if max_rounds < 0:
            raise ValueError(f"max_rounds must be >= 0, got {max_rounds!r}")
        a, b = problem.views.names
        truth = _truth_pairs(problem, a, b)
        for round_ in range(1, max_rounds + 1):
            rows_a, rows_b, C = self.cost_matrix(a, b)  # [n_a, n_b]
            al = self.align(a, b, matcher="hungarian", include_discovered=False)
            mutual = mutual_nearest(C)
            pos_a, pos_b = np.searchsorted(rows_a, al.index_a), np.searchsorted(rows_b, al.index_b)
            keep = np.flatnonzero((al.probabilities >= threshold) & mutual[pos_a, pos_b])
            # leave at least one row of each view to align (fit refuses a view with none)
            room = min(rows_a.size, rows_b.size) - 1
            if keep.size > room:
                keep = keep[np.argsort(-al.probabilities[keep], kind="stable")[:max(room, 0)]]
            new_a, new_b = al.index_a[keep], al.index_b[keep]
            correct = accuracy = None
            if truth is not None:
                correct = int(sum((int(i), int(j)) in truth for i, j in zip(new_a, new_b)))
                # accuracy of the whole current alignment (discovered pairs + this matching) on the
                # rows of a that were unaligned in the problem and have a true partner
                full = self.align(a, b, matcher="hungarian")
                partner = dict(truth)
                held = [i for i in full.candidates_a.tolist() if i in partner]
                right = sum(partner.get(int(i)) == int(j) for i, j in zip(full.index_a, full.index_b))
                accuracy = right / max(len(held), 1)
            self.self_training_history_.append({"round": round_, "n_anchors": len(self.anchors_),
                                                "added": int(keep.size), "correct": correct,
                                                "accuracy": accuracy, "elbo": float(self.model_.elbo())})
            if keep.size == 0:
                break
            self._discover(a, b, new_a, new_b, al.probabilities[keep], al.costs[keep], round_)
            self.anchors_ = np.vstack([self.anchors_, np.column_stack([new_a, new_b])])
            self._fit_model(problem)
        return self

    def _discover(self, a, b, index_a, index_b, probability, cost, round_) -> None:
        found = self.discovered_.setdefault((a, b), {k: np.zeros(0, t) for k, t in (
            ("index_a", np.int64), ("index_b", np.int64), ("probability", float), ("cost", float),
            ("round", np.int64))})
        for key, value in (("index_a", index_a), ("index_b", index_b), ("probability", probability),
                           ("cost", cost), ("round", np.full(len(index_a), round_))):
            found[key] = np.concatenate([found[key], np.asarray(value, found[key].dtype)])

    def _bootstrap(self, problem: AlignmentProblem, n_bootstrap: int | None, bootstrap: str) -> np.ndarray:
        """Unsupervised starting anchors: the most confident mutual pairs of an unsupervised correspondence.

        ``"gromov_wasserstein"``: the coupling of :func:`gromov_wasserstein_coupling` between the
        views' Euclidean distance matrices (standardised columns); pairs (i, j) that are each
        other's argmax, ranked by n T_ij. ``"local_patterns"``: the local-pattern correspondence
        of Wang, Krafft & Mahadevan (2011, section 5.3.4), ranked by its weights.
        """
        from scipy.spatial.distance import cdist

        a, b = problem.views.names
        k = max(MIN_ANCHORS, 2 * int(self.latent_dim)) if n_bootstrap is None else int(n_bootstrap)
        if k < MIN_ANCHORS:
            raise ValueError(f"n_bootstrap must be at least {MIN_ANCHORS}, got {n_bootstrap!r}")
        Ya, Yb = problem.views[a], problem.views[b]
        if bootstrap == "gromov_wasserstein":
            dist = []
            for Y in (Ya, Yb):
                Z = (Y - Y.mean(0)) / np.where(Y.std(0) > 0, Y.std(0), 1.0)
                D = cdist(Z, Z)  # [n, n]: GW compares within-view distances
                dist.append(D / max(float(D.max()), np.finfo(float).tiny))
            T = gromov_wasserstein_coupling(*dist)  # [n_a, n_b]
            best_b, best_a = T.argmax(1), T.argmax(0)
            rows = np.flatnonzero(best_a[best_b] == np.arange(T.shape[0]))
            weights = T[rows, best_b[rows]] * min(T.shape)  # in (0, 1]
            pairs_all = np.column_stack([rows, best_b[rows]])
        elif bootstrap == "local_patterns":
            from .spectral import local_pattern_correspondence

            corr = local_pattern_correspondence(Ya, Yb, views=(a, b))
            pairs_all, weights = corr.pairs, corr.weights_or_ones()
        else:
            raise ValueError(f"bootstrap must be 'gromov_wasserstein' or 'local_patterns', got {bootstrap!r}")
        order = np.argsort(-weights, kind="stable")[:k]
        if order.size < MIN_ANCHORS:
            raise ValueError(f"the unsupervised bootstrap found only {order.size} mutual pairs; MAD needs at least "
                             f"{MIN_ANCHORS}: give a few anchors")
        pairs = pairs_all[order]
        truth = _truth_pairs(problem, a, b)
        self.bootstrap_ = {"method": bootstrap, "n_mutual_pairs": int(len(pairs_all)), "pairs": pairs,
                           "correct": None if truth is None else int(sum((int(i), int(j)) in truth for i, j in pairs))}
        # their scores (n T_ij or exp(-dist / delta^2)) stand in for probabilities (not calibrated)
        self._discover(a, b, pairs[:, 0], pairs[:, 1], np.clip(weights[order], 0.0, 1.0), np.zeros(order.size), 0)
        return pairs.astype(np.int64)

    # -- streaming (the paper's myopic, online variant) ---------------------------------------
    def match_one(self, y, view=None, other=None, cost_limit=None):
        """Match one incoming row ``y`` of ``view`` (b) to the nearest free unaligned row of ``other`` (a).

        The paper's myopic variant (section 3.1): the posteriors q_a(x_i) of every unaligned
        row of a are computed once (at fit); each incoming row y_t of b gets
        q_b(x_t | X_A, X_B-hat), where B-hat are the rows of b that arrived before it, and is
        paired with the free row of a whose posterior is nearest (cost ``self.cost``: the
        paper's distance between modes for "mean", the match likelihood otherwise); that row
        is then used up.

        The update of q(X_B-hat) as points arrive, exactly: with the kernel, noise and
        inducing inputs of view b held fixed, view b's optimal inducing posterior q_b(u)
        (Titsias 2009, eq. 10) is recomputed from the anchors' q(X_A) *and* the arrived rows
        with their inferred q(x) (their psi-statistics join the anchors' in the collapsed
        q(u)); q(x_t) is then the optimum of view b's bound term for y_t under that q(u)
        (:func:`bayesalign.gp.inference.infer_latent`). The earlier arrivals' q(x) are not
        re-optimised (one block of coordinate ascent per arrival). For the first arrival this
        is exactly ``MRD.infer``.

        Parameters
        ----------
        y : array (p_b,) or (1, p_b)
        view, other : view names (default the second and the first view)
        cost_limit : float, optional
            Leave y unmatched when its nearest free row costs more.

        Returns
        -------
        (row, cost) : int, float
            The matched row of ``other`` (-1 if none) and the cost of the pair.
        """
        self._check_fitted()
        views = self.problem_.views
        b = views.names[1] if view is None else views.name_of(view)
        a = next(v for v in views.names if v != b) if other is None else views.name_of(other)
        a, b = self._pair(a, b)
        y = np.asarray(y, dtype=np.float64).reshape(1, -1)
        state = self._stream.get((a, b))
        if state is None:
            rows_a, mean_a, var_a, _, _, _, dims = self._candidates(a, b)
            state = self._stream[(a, b)] = {"rows": rows_a, "mean": mean_a, "var": var_a, "dims": dims,
                                            "free": np.ones(rows_a.size, bool), "Y": [], "q_mean": [],
                                            "q_var": []}
        mean, var = self._infer_streaming(b, y, state)  # [1, Q]
        state["Y"].append(y[0])
        state["q_mean"].append(mean[0])
        state["q_var"].append(var[0])
        free = np.flatnonzero(state["free"])
        if free.size == 0:
            return -1, float("nan")
        dims = state["dims"]
        if self.cost == "mean":
            c = mean_distance_cost(state["mean"][free], mean[:, dims])[:, 0]
        else:
            c = likelihood_cost(state["mean"][free], state["var"][free], mean[:, dims], var[:, dims])[:, 0]
        k = int(np.argmin(c))
        if cost_limit is not None and c[k] > float(cost_limit):
            return -1, float(c[k])
        state["free"][free[k]] = False
        return int(state["rows"][free[k]]), float(c[k])

    def reset_stream(self) -> None:
        """Forget the rows streamed by :meth:`match_one` (every row of a is free again)."""
        self._stream = {}

    def _infer_streaming(self, view: str, y: np.ndarray, state: dict):
        """q_b(x_t | X_A, X_B-hat): infer against view b's q(u) refreshed with the arrived rows."""
        model = self.model_
        if y.shape[1] != model.n_features_in_[view]:
            raise ValueError(f"view {view!r}: the row has {y.shape[1]} values, the view has "
                             f"{model.n_features_in_[view]} columns")
        context = None
        if state["Y"]:
            context = (np.asarray(state["Y"]), np.asarray(state["q_mean"]), np.asarray(state["q_var"]))
        return model.infer(view, y, progress=False, context=context)

    # -- alignment -------------------------------------------------------------------------
    def _check_fitted(self):
        if not hasattr(self, "model_"):
            raise AttributeError("this MAD is not fitted yet; call fit first")

    def _pair(self, a, b):
        self._check_fitted()
        names = self.problem_.views.names
        a = names[0] if a is None else self.problem_.views.name_of(a)
        b = (names[1] if a != names[1] else names[0]) if b is None else self.problem_.views.name_of(b)
        if a == b:
            raise ValueError(f"align needs two different views, got {a!r} twice")
        return a, b

    def shared_dims(self, a, b) -> np.ndarray:
        """The latent dimensions shared by views a and b (at ``shared_threshold_``)."""
        a, b = self._pair(a, b)
        return self.shared_dims_[(a, b)] if (a, b) in self.shared_dims_ else self.shared_dims_[(b, a)]

    def _candidates(self, a, b):
        """Rows of a and b to match (unaligned and not yet paired between a and b) and their posteriors."""
        dims = self.shared_dims(a, b)
        rows_a, mean_a, var_a = self.posteriors_[a]
        rows_b, mean_b, var_b = self.posteriors_[b]
        anchored = self.problem_.anchors_between(a, b)
        keep_a = ~np.isin(rows_a, anchored.index_a)
        keep_b = ~np.isin(rows_b, anchored.index_b)
        return (rows_a[keep_a], mean_a[keep_a][:, dims], var_a[keep_a][:, dims],
                rows_b[keep_b], mean_b[keep_b][:, dims], var_b[keep_b][:, dims], dims)

    def _temperature(self, cost: str, var_a, var_b) -> float:
        if self.temperature is not None:
            return float(self.temperature)
        if cost == "likelihood":
            return 1.0
        # homoscedastic equivalent: -log N(d; 0, (s_a + s_b) I) = |d|^2 / (2 (s_a + s_b)) + const
        return float(2.0 * (var_a.mean() + var_b.mean()))

    def cost_matrix(self, a=None, b=None, cost: str | None = None):
        """(rows_a, rows_b, C): the cost between the unaligned rows of a and b, in their shared dimensions.

        C is dense (n_a, n_b): the assignment needs every entry (the sparse path of
        :meth:`align` uses kNN candidates instead).
        """
        a, b = self._pair(a, b)
        cost = self.cost if cost is None else cost
        if cost not in COSTS:
            raise ValueError(f"cost must be one of {COSTS}, got {cost!r}")
        rows_a, ma, va, rows_b, mb, vb, _ = self._candidates(a, b)
        C = mean_distance_cost(ma, mb) if cost == "mean" else likelihood_cost(ma, va, mb, vb)
        return rows_a, rows_b, C

    def match_probabilities(self, a=None, b=None, cost: str | None = None, cost_limit=None,
                            temperature: float | None = None):
        """(rows_a, rows_b, P): Sinkhorn match marginals P [n_a, n_b] of exp(-cost / T) (log domain).

        P[i, j] approximates the probability that unaligned row ``rows_a[i]`` of a and
        ``rows_b[j]`` of b are the same point; rows and columns sum to at most 1 (the rest is
        the probability of no match: the dustbin with ``cost_limit``, the surplus of the
        larger view otherwise). T as in the class docstring.
        """
        a, b = self._pair(a, b)
        cost = self.cost if cost is None else cost
        rows_a, rows_b, C = self.cost_matrix(a, b, cost)  # [n_a, n_b]
        _, _, va, _, _, vb, _ = self._candidates(a, b)
        T = float(temperature) if temperature is not None else self._temperature(cost, va, vb)
        return rows_a, rows_b, matching.sinkhorn_marginals(C, T, cost_limit)[0]

    def align(self, a=None, b=None, matcher: str = "hungarian", cost: str | None = None, cost_limit=None,
              n_samples: int = 100, temperature: float | None = None, order=None, seed=None,
              include_discovered: bool = True, sparse: bool | None = None, n_neighbors: int = 10):
        """Match the unaligned rows of views a and b in their shared latent dimensions.

        Parameters
        ----------
        a, b : view names (default the first two views)
        matcher : {"hungarian", "myopic", "sinkhorn", "perturb"}
            See the class docstring.
        cost : {"likelihood", "mean"}, optional
            Default ``self.cost``.
        cost_limit : float, optional
            Leaving a row unmatched costs ``cost_limit / 2`` (so a pair costlier than the
            limit is never made); the probabilities then have a dustbin (Sarlin et al. 2020).
            Without it, every row of the smaller side is matched.
        n_samples : int
            Samples of perturb-and-MAP.
        temperature : float, optional
            Overrides the probability temperature (see the class docstring).
        order : int array, optional
            Arrival order of the candidate rows of b for ``"myopic"`` (positions in
            ``alignment.candidates_b``; default their row order).
        seed : optional
            Seed of perturb-and-MAP (default ``self.seed``).
        include_discovered : bool
            Also report the pairs found by bootstrap / self-training (they are anchors of
            the model now, so they are not re-matched).
        sparse : bool, optional
            The large-N path: candidate pairs are the ``n_neighbors`` nearest posterior means
            in both directions; no (n_a, n_b) matrix is formed. The Hungarian matching is then
            :func:`bayesalign.matching.assign` (``method="sparse"``, certified optimal) for the
            mean cost, and the optimum over the candidate pairs for the likelihood cost (no
            certificate: that cost is not a distance the solver can evaluate on demand); the
            probabilities are Sinkhorn marginals restricted to the candidate pairs (mass on
            other pairs, exp(-cost / T) beyond the k-th neighbour, is neglected). Default:
            sparse when n_a * n_b exceeds ``SPARSE_ABOVE`` (25 million). ``"perturb"`` and the
            myopic matcher with the likelihood cost need the dense path.
        n_neighbors : int
            Candidates per row in the sparse path.

        Returns
        -------
        Alignment
            Pairs in the problem's row indices, their costs, ``probabilities`` (see the class
            docstring), candidates = the rows that were unaligned in the problem; ``info``
            holds the shared dimensions, the threshold, the temperature and the matcher.
        """
        if matcher not in MATCHERS:
            raise ValueError(f"matcher must be one of {MATCHERS}, got {matcher!r}")
        a, b = self._pair(a, b)
        cost = self.cost if cost is None else cost
        if cost not in COSTS:
            raise ValueError(f"cost must be one of {COSTS}, got {cost!r}")
        rows_a, ma, va, rows_b, mb, vb, dims = self._candidates(a, b)  # [n_a, q], [n_b, q]
        T = float(temperature) if temperature is not None else self._temperature(cost, va, vb)
        info = {"shared_dims": dims.tolist(), "shared_threshold": self.shared_threshold_, "cost": cost,
                "temperature": T, "matcher": matcher, "cost_limit": cost_limit}
        if sparse is None:
            sparse = rows_a.size * rows_b.size > SPARSE_ABOVE
        posteriors = (ma, va, mb, vb)
        if sparse:
            ia, ib, costs, probs = self._align_sparse(matcher, cost, posteriors, T, cost_limit, order,
                                                      int(n_neighbors), info)
        else:
            ia, ib, costs, probs = self._align_dense(matcher, cost, posteriors, T, cost_limit, order, n_samples,
                                                     self.seed if seed is None else seed, info)
            if matcher == "perturb":
                perms = info.pop("_permutations")  # [S, n_a] local columns
                info["sampled_permutations"] = np.where(perms >= 0, rows_b[np.maximum(perms, 0)], -1)
                info["sampled_rows_a"] = rows_a.copy()
        index_a, index_b, probs = rows_a[ia], rows_b[ib], np.clip(probs, 0.0, 1.0)
        cand_a, cand_b = rows_a, rows_b
        found = self.discovered_.get((a, b))
        if include_discovered and found is not None and len(found["index_a"]):
            index_a = np.concatenate([found["index_a"], index_a])
            index_b = np.concatenate([found["index_b"], index_b])
            costs = np.concatenate([found["cost"], costs])
            probs = np.concatenate([found["probability"], probs])
            cand_a = np.union1d(cand_a, found["index_a"])
            cand_b = np.union1d(cand_b, found["index_b"])
            info["n_discovered"] = len(found["index_a"])
        order_a = np.argsort(index_a, kind="stable")
        views = self.problem_.views
        return Alignment((a, b), index_a[order_a], index_b[order_a], costs[order_a], probs[order_a],
                         n_a=views.n_samples[a], n_b=views.n_samples[b], candidates_a=cand_a, candidates_b=cand_b,
                         method=f"mad-{matcher}-{cost}", info=info)

    @staticmethod
    def _align_dense(matcher, cost, posteriors, T, cost_limit, order, n_samples, seed, info):
        """Local pairs (ia, ib), their costs and probabilities, on the dense (n_a, n_b) cost."""
        ma, va, mb, vb = posteriors
        C = mean_distance_cost(ma, mb) if cost == "mean" else likelihood_cost(ma, va, mb, vb)  # [n_a, n_b]
        if matcher == "perturb":
            sampled = matching.perturb_and_map(C, n_samples=int(n_samples), temperature=T, cost_limit=cost_limit,
                                               seed=seed)
            P = sampled.frequencies.toarray()  # [n_a, n_b]
            info["probability"] = f"perturb-and-MAP frequency over {int(n_samples)} samples"
            info["_permutations"] = sampled.permutations
        elif C.size <= DENSE_SINKHORN_MAX:
            P, info["sinkhorn_error"] = matching.sinkhorn_marginals(C, T, cost_limit)  # [n_a, n_b]
            info["probability"] = "sinkhorn marginal"
        else:  # dense Sinkhorn is too slow here (near-hard costs): kNN candidates, see matching.sparse_sinkhorn
            ei, ej = _knn_edges(ma, mb, SINKHORN_NEIGHBORS)
            P, info["sinkhorn_error"] = matching.sparse_sinkhorn(ei, ej, C[ei, ej], T, C.shape, cost_limit)
            P = P.toarray()  # [n_a, n_b]
            info["probability"] = f"sinkhorn marginal on {ei.size} kNN candidate pairs"
        if matcher == "hungarian":
            hard = matching.linear_assignment(C, cost_limit=cost_limit)
            ia, ib = hard.index_a, hard.index_b
        elif matcher == "myopic":
            hard = matching.myopic_assignment(C, order=order, cost_limit=cost_limit)
            ia, ib = hard.index_a, hard.index_b
        else:
            ia, ib = _max_expected_matches(P, C, cost_limit)
        return ia, ib, C[ia, ib], P[ia, ib]

    @staticmethod
    def _align_sparse(matcher, cost, posteriors, T, cost_limit, order, k, info):
        """The same on kNN candidate pairs only (see ``align(sparse=True)``)."""
        ma, va, mb, vb = posteriors
        if matcher == "perturb" or (matcher == "myopic" and cost == "likelihood"):
            raise ValueError(f"matcher {matcher!r} with the {cost} cost needs the dense path (sparse=False)")
        shape = (ma.shape[0], mb.shape[0])
        ei, ej = _knn_edges(ma, mb, k)  # candidate pairs
        while cost_limit is None and not matching._has_full_matching(shape, ei, ej) and k < max(shape):
            k *= 2  # as matching.assign does: too few candidates for every row of the smaller view to match
            ei, ej = _knn_edges(ma, mb, k)
        ec = pair_costs(cost, ma, va, mb, vb, ei, ej)
        P, info["sinkhorn_error"] = matching.sparse_sinkhorn(ei, ej, ec, T, shape, cost_limit)  # csr [n_a, n_b]
        info["probability"] = f"sinkhorn marginal on {ei.size} kNN candidate pairs"
        if matcher == "hungarian" and cost == "mean":
            hard = matching.assign(ma, mb, method="sparse", k=k, metric="sqeuclidean", cost_limit=cost_limit)
            info["certified"] = hard.info.get("certified")
        elif matcher == "hungarian":
            graph = sp.csr_matrix((ec, (ei, ej)), shape=shape)
            hard = matching.sparse_assignment(graph, cost_limit=cost_limit)
        elif matcher == "myopic":
            hard = matching.myopic_assignment(ma, mb, order=order, metric="sqeuclidean", cost_limit=cost_limit)
        else:
            score = P.copy()
            if cost_limit is not None:
                score.data[np.asarray(sp.csr_matrix((ec, (ei, ej)), shape=shape)[score.nonzero()]).ravel()
                           >= float(cost_limit)] = 0.0
                score.eliminate_zeros()
            hard = matching.marginal_assignment(score)
        ia, ib = hard.index_a, hard.index_b
        return ia, ib, pair_costs(cost, ma, va, mb, vb, ia, ib), np.asarray(P[ia, ib]).ravel()


def gromov_wasserstein_coupling(dist_a, dist_b, epsilon: float = 1e-3, n_outer: int = 50, n_inner: int = 1000,
                                tol: float = 1e-6):
    """Entropic Gromov-Wasserstein coupling of two metric spaces (Peyre, Cuturi & Solomon 2016, eq. 8-10).

    Minimises ``sum_{ijkl} (A_ik - B_jl)^2 T_ij T_kl - epsilon H(T)`` over couplings T with
    uniform marginals (1/n_a, 1/n_b) by the paper's projected mirror descent: with the square
    loss the linearised cost is ``M = A^2 p 1' + 1 q' (B^2)' - 2 A T B'`` (their Prop. 1), and each
    step is a Sinkhorn projection of exp(-M / epsilon) (:func:`bayesalign.matching.sinkhorn`, whose
    marginals scaled by 1/n are T when n_a = n_b). Only the within-view distances are used: no
    feature of one view is compared with a feature of the other, which is what an unsupervised
    correspondence needs. Dense (n_a, n_b) and (n, n): meant for a few hundred points.

    Parameters
    ----------
    dist_a, dist_b : arrays (n_a, n_a), (n_b, n_b)
        Within-view distances, each divided by its largest entry (so epsilon is relative).
    epsilon : float
    n_outer : int
        Mirror-descent steps (stops earlier when T changes by less than ``tol``).
    n_inner : int
        Sinkhorn sweeps per step (an inexact projection, as in the paper's experiments).

    Returns
    -------
    array (n_a, n_b): the coupling, summing to 1.

    Examples
    --------
    >>> x = np.array([0.0, 1.0, 3.0, 7.0])[:, None]
    >>> D = np.abs(x - x.T) / 7.0
    >>> T = gromov_wasserstein_coupling(D, D[::-1, ::-1])
    >>> T.argmax(1).tolist()  # an isometry: point i of a is point 3 - i of b
    [3, 2, 1, 0]
    """

    A = np.asarray(dist_a, np.float64)  # [n_a, n_a]
    B = np.asarray(dist_b, np.float64)  # [n_b, n_b]
    n_a, n_b = A.shape[0], B.shape[0]
    p, q = np.full(n_a, 1.0 / n_a), np.full(n_b, 1.0 / n_b)
    constant = (A * A) @ p[:, None] + ((B * B) @ q)[None, :]  # [n_a, n_b]
    T = np.outer(p, q)
    for _ in range(int(n_outer)):
        M = constant - 2.0 * A @ T @ B.T  # [n_a, n_b], linearised GW cost (Prop. 1)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="sinkhorn did not converge")
            P = matching.sinkhorn(M - M.min(), temperature=epsilon, tol=1e-4, n_iter=n_inner).marginals
        new = P / P.sum()
        change = float(np.abs(new - T).max())
        T = new
        if change < tol:
            break
    return T


def _knn_edges(mean_a, mean_b, k: int):
    """Candidate pairs: each row's k nearest rows of the other view (both directions), deduplicated."""
    from sklearn.neighbors import NearestNeighbors

    n_a, n_b = mean_a.shape[0], mean_b.shape[0]
    ka, kb = min(k, n_b), min(k, n_a)
    to_b = NearestNeighbors(n_neighbors=ka).fit(mean_b).kneighbors(mean_a, return_distance=False)  # [n_a, ka]
    to_a = NearestNeighbors(n_neighbors=kb).fit(mean_a).kneighbors(mean_b, return_distance=False)  # [n_b, kb]
    ei = np.concatenate([np.repeat(np.arange(n_a), ka), to_a.ravel()])
    ej = np.concatenate([to_b.ravel(), np.repeat(np.arange(n_b), kb)])
    keys = np.unique(ei * n_b + ej)
    return keys // n_b, keys % n_b


def _shared_dims(rel_a, rel_b, threshold: float, views) -> np.ndarray:
    """Dimensions whose relevance exceeds ``threshold`` times the largest in both views (MRD's rule).

    If no dimension passes in both, the one with the largest min(rel_a / max a, rel_b / max b)
    is used, with a warning (matching in no dimension at all is meaningless).
    """

    na = np.asarray(rel_a, np.float64) / max(float(np.max(rel_a)), np.finfo(float).tiny)
    nb = np.asarray(rel_b, np.float64) / max(float(np.max(rel_b)), np.finfo(float).tiny)
    dims = np.flatnonzero((na > threshold) & (nb > threshold))
    if dims.size == 0:
        dims = np.array([int(np.argmax(np.minimum(na, nb)))])
        warnings.warn(f"no latent dimension is shared by views {views} at threshold {threshold}; using dimension "
                      f"{dims[0]} (the most shared)", RuntimeWarning, stacklevel=3)
    return dims


def _max_expected_matches(probabilities, cost, cost_limit):
    """The one-to-one matching maximising the sum of match probabilities (expected correct pairs).

    :func:`bayesalign.matching.marginal_assignment`; with ``cost_limit``, pairs costlier than
    the limit are not made (as for the Hungarian matcher).
    """

    score = np.array(probabilities, dtype=np.float64)
    if cost_limit is not None:
        score[np.asarray(cost) >= float(cost_limit)] = 0.0
    hard = matching.marginal_assignment(score)
    return hard.index_a, hard.index_b
