"""MAD: Manifold Alignment Determination (Damianou, Lawrence & Ek, 2016), with uncertainty-aware matching.

The estimator only (the model is :class:`bayesalign.gp.MRD`, the costs and solvers are
:mod:`bayesalign.matching`, the anchors' groups :meth:`bayesalign.data.AlignmentProblem.anchor_groups`):

1. fit MRD. The paper's procedure (``training="anchors"``, eq. 2-3) trains it on the anchor
   rows only (for more than two views on the anchor groups present in every view) and then
   infers q_v(x) = N(mu, diag S) of the unaligned rows of each view v with view v's model only
   (eq. 4, ``MRD.infer``). The default (``training="all_rows"``) fits a partially observed MRD
   on every row: one latent point per entity (an anchor group, or an unaligned row seen by one
   view), each view's collapsed bound over the entities it observes, under a graph (GMRF) prior
   that keeps each view's neighbours together (:class:`bayesalign.gp.GraphLaplacianPrior`);
2. compare the two sets of posteriors in the latent dimensions that the ARD relevance weights
   mark as shared by both views (section 3.1, :func:`bayesalign.gp.shared_dimensions`) with a cost -- the
   paper's D** (squared distance between the means) or the match likelihood of the whole
   posteriors, with the two views' misfit learned on the anchors added (beyond the paper) -- and
   match (:func:`bayesalign.matching.match`): Hungarian (nonmyopic), the myopic online rule
   (:meth:`MAD.match_one` streams it), or the expected-accuracy matching under Sinkhorn or
   perturb-and-MAP marginals.

Beyond the paper (its section 5 "future work"): match probabilities on every alignment,
learning from every row from several starts, the highest bound kept (``MAD(starts=...)``),
soft correspondences as inference (one round by default, ``MAD(correspondence_rounds=...)``, judged on
the anchors),
self-training with the confident mutual-nearest pairs (:meth:`MAD.self_train`), and a
zero-anchor start from an unsupervised correspondence (entropic Gromov-Wasserstein, Peyre,
Cuturi & Solomon 2016, or the local patterns of Wang, Krafft & Mahadevan 2011, section 5.3.4).
Measured accuracies (the paper's Table 1, self-training, zero anchors) are in
``benchmarks/RESULTS.md``. (About 1,300 lines, one class: fit (anchors only or all rows), correspondence
rounds, self-training, calibration, the streaming matcher and align all work on the same fitted state.)
"""

from __future__ import annotations

import copy
import time
import warnings

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning

from ._utils import as_rng
from .data import AlignmentProblem, LatentEmbedding, Views
from .mad_matching import (  # noqa: F401 (the constants stay importable from bayesalign.mad)
    CALIBRATION_SINKHORN_TOL,
    MIN_CALIBRATION_PAIRS,
    TEMPERATURES,
    PosteriorMatching,
    _check_temperature,
)
from .matching import (
    COSTS,
    MATCHERS,
    gromov_wasserstein_coupling,
    likelihood_cost,
    mean_distance_cost,
    mutual_nearest,
    pair_costs,
    posterior_assignment,
    posterior_marginals,
    posterior_temperature,
)
from .matching.costs import CrossViewMisfit, fit_misfit
from .metrics import evaluate

__all__ = ["COSTS", "MAD", "MATCHERS", "MIN_ANCHORS", "anchor_groups", "evaluate", "gromov_wasserstein_coupling",
           "likelihood_cost", "mean_distance_cost", "mutual_nearest", "pair_costs"]

#: MRD needs a few paired rows to estimate a latent space and its relevance weights.
MIN_ANCHORS = 3
#: With no anchors, a candidate pairing the rows differently whose self-training added at least this fraction of
#: the kept candidate's pairs makes the alignment ambiguous (``MAD._check_rival_candidates``).
RIVAL_SUPPORT = 0.75
#: With no anchors, a kept candidate whose self-training confirmed fewer than this fraction of the rows left to match
#: is weakly supported: warned (``MAD._check_rival_candidates``). The right zero-anchor fits of the linear toys
#: confirmed 0.40-0.64 of their rows, the wrong one 0.09 (benchmarks/RESULTS.md, "Zero anchors").
WEAK_SUPPORT = 0.2
#: What MRD learns from: the anchors only (the paper, section 3.1) or every row (a partially observed MRD).
TRAININGS = ("anchors", "all_rows")
#: p(X) of the all-rows model: a graph (GMRF) prior over the views' neighbourhoods, or N(0, I).
LATENT_PRIORS = ("graph", "standard_normal")
#: The inference engine: the exact collapsed bound (L-BFGS), or Pyro SVI with minibatches (all rows only).
ENGINES = ("collapsed", "svi")
#: Rules for the latent dimensions two views share (``MAD(shared_by=...)``); "auto": the default rule, resolution.
SHARED_BY = ("auto", "resolution", "relevance")
#: ``misfit``: estimated on the anchor pairs, none (the likelihood cost on the posterior variances alone), or
#: "auto" (the anchors' on the collapsed engine, none with engine="svi")
MISFITS = ("auto", "anchors", None)
#: Fraction of MRD's ``max_iter`` each start gets in the race of ``start_inducing`` (the kept one then goes on to
#: ``max_iter``): at 300 of 1,000 evaluations the start ahead is the one the full race keeps on most pairs, and
#: three full fits made 10 latent dimensions miss the 3 minutes at 2,000 rows (benchmarks/RESULTS.md).
RACE_FRACTION = 0.3
#: Fraction of MRD's ``max_iter`` a correspondence round's refit gets (at ``num_inducing``, from the current q(X)
#: means): a whole budget per round made one round miss the 3 minutes at 2,000 rows, and on mfeat fou-pix the
#: refit stopped on its tolerance before half of it (benchmarks/RESULTS.md).
ROUND_FRACTION = 0.3
#: Starts of the all-rows model's q(X): the joint-Laplacian embedding, and MRD's "pca" / "cca" of the anchors.
STARTS = ("joint_laplacian", "pca", "cca")
#: The anchor pairs the temperature is fitted on (``calibration_pairs``): each inferred again from its own view
#: under the fitted model, or held out of a warm continuation of the fit (``HELD_OUT_FOLDS`` of them).
CALIBRATION_PAIRS = ("reinferred", "held_out")
#: Folds of the anchor pairs with ``calibration_pairs="held_out"``: each fold's pairs are split and the fit
#: continued once, so the pairs are held out of a model that keeps (1 - 1 / HELD_OUT_FOLDS) of the anchors.
HELD_OUT_FOLDS = 4
#: Evaluations of each fold's continuation, as a fraction of MRD's ``max_iter`` (100 of the default 1,000).
HELD_OUT_FRACTION = 0.1
#: Unsupervised initialisers the all-rows model tries without anchors, their candidates compared by the bound.
DEFAULT_BOOTSTRAPS = ("gromov_wasserstein", "subspace_procrustes")


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



def _top_k_per_row(P, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows, columns, values) of the k largest positive entries of every row of a CSR matrix."""
    heads, tails, values = [], [], []
    for i in range(P.shape[0]):
        lo, hi = P.indptr[i], P.indptr[i + 1]
        data = P.data[lo:hi]
        top = np.argsort(-data, kind="stable")[:k]
        top = top[data[top] > 0]
        heads.append(np.full(top.size, i))
        tails.append(P.indices[lo:hi][top])
        values.append(data[top])
    if not heads:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
    return (np.concatenate(heads).astype(np.int64), np.concatenate(tails).astype(np.int64),
            np.concatenate(values))


def _pairs_accuracy(pairs, truth) -> float | None:
    """Fraction of the pairs that are true (None without truth or pairs)."""
    if truth is None or not pairs:
        return None
    return sum(pair in truth for pair in pairs) / len(pairs)


def _anchor_init(train, latent_dim: int, seed):
    """Initial q(X) means of the anchors when PCA cannot give ``latent_dim`` components, else None.

    PCA of G anchor rows has at most min(G - 1, columns) components (MRD refuses more); MAD, which
    must work from a handful of anchors, takes those (the MRD "pca" initialisation) and starts the
    remaining dimensions at small random values (10% of the smallest PCA component's spread,
    :func:`bayesalign.gp.initialisation.pad_latent`), with a warning.
    """
    from .gp.initialisation import init_latent, pad_latent

    names = list(train.names)
    centred = [train[n] - train[n].mean(0) for n in names]
    G = centred[0].shape[0]
    limit = min(G - 1, sum(Y.shape[1] for Y in centred))
    if latent_dim <= limit:
        return None
    warnings.warn(f"MAD: {G} anchors allow {limit} PCA dimensions of latent_dim={latent_dim}; the other "
                  f"{latent_dim - limit} start at small random values", RuntimeWarning, stacklevel=4)
    return pad_latent(init_latent("pca", names, centred, limit, seed), latent_dim, seed)  # [G, latent_dim]


def _mean_filled(views: Views) -> Views:
    """The views with each missing (NaN) entry replaced by its column's mean: for a start, never a fit."""
    filled = {}
    for name in views.names:
        array = np.asarray(views[name])
        filled[name] = np.where(np.isnan(array), np.nanmean(array, 0), array)
    return Views(filled)


class MAD(PosteriorMatching, BaseEstimator):
    r"""Manifold Alignment Determination (Damianou, Lawrence & Ek, 2016), with uncertainty-aware matching.

    Two procedures (``training``):

    - ``"anchors"`` (the paper's): MRD (a multi-view Bayesian GP-LVM with ARD kernels;
      :class:`bayesalign.gp.MRD`) on the anchor rows only (eq. 2-3), then for the unaligned rows of
      each view v a posterior q_v(x) = N(mu, diag(S)) with *that view's* model only (eq. 4);
    - ``"all_rows"`` (the default): a partially observed MRD over every row, one latent point per entity (an
      anchor group seen by all its views, any other row by its own view alone):
      :math:`\sum_v F_v(Y_v; q(X)[\mathrm{obs}_v]) - \mathrm{KL}(q(X) \| p(X))`, with p(X) a graph
      prior that keeps each row near its kNN neighbours (``latent_prior="graph"``,
      :class:`bayesalign.gp.priors.GraphLaplacianPrior`) and q(X) fitted from several starts (the
      joint-Laplacian embedding, PCA and CCA of the anchors; ``starts``), the highest bound kept;
      the unaligned rows' posteriors are their entities' q(x). Every row teaches the GP
      mappings and the ARD weights. ``engine="svi"`` fits the same model with Pyro SVI
      (:class:`bayesalign.gp.StochasticMRD`, the same graph prior); it also takes views with missing
      entries (``Views(..., allow_missing=True)``): a NaN is left out of its view's likelihood,
      never imputed (only the start and the graph's neighbourhoods read it as its column's mean).

    Either way, the posteriors are matched in the latent dimensions shared by both views (section
    3.1): by default those that each view's data resolve (``shared_by="resolution"``: the unit-free
    :attr:`bayesalign.gp.MRD.resolution_`, the Fisher information a view's outputs carry about the
    dimension times its spread, above ``min_resolution``), or, as in the paper, those whose ARD
    relevance is above ``shared_threshold`` of each view's largest (``shared_by="relevance"``). On
    every shipped real pair at 10% anchors the all-rows model on centred views matched at least as
    well as the paper's procedure (``benchmarks/bench_mad_real.py``; numbers in
    ``benchmarks/RESULTS.md``), hence the default; ``training="anchors"`` reproduces the paper's Table 1.

    Costs (``cost``): ``"mean"`` is the paper's D**, the squared Euclidean distance between
    posterior means (:func:`mean_distance_cost`); ``"likelihood"`` (default) is the match
    negative log-likelihood ``-log N(mu_i - mu_j; 0, S_i + S_j)`` (:func:`likelihood_cost`),
    which uses the whole posterior (the paper's future work, section 5). The expected
    squared distance E||x_i - x_j||^2 is *not* offered: it only adds row and column
    constants to D** and changes no assignment. The posterior variances say how well a view pins
    its own rows down, not how far apart the two views put the same point; by default (``misfit``,
    on the collapsed engine) the likelihood cost adds that cross-view misfit Sigma_tau, estimated on
    the anchor pairs inferred again view by view: ``-log N(mu_i - mu_j; 0, S_i + S_j + Sigma_tau)``
    (:func:`bayesalign.matching.fit_misfit`, :meth:`cross_view_misfit`).

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
        Q, the number of latent dimensions of MRD; ARD switches off those the data do not need.
        10 by default (5 before 2026-11-25; the comparison is in benchmarks/RESULTS.md, "Shared
        dimensions by resolution"). With fewer anchor groups G than latent_dim + 2, the all-rows model's
        "pca" and "cca" starts anchor the G - 2 dimensions the anchors determine and start the others
        small (:func:`bayesalign.gp.initialisation.anchored_latent`; "Few anchors" in the same file).
        Which latent_dim aligns best varies from one data set to the next; :class:`bayesalign.MADEnsemble` pools
        the fits of several.
    num_inducing : int
        Inducing inputs of MRD, capped at the number of latent points it fits (the anchors with
        ``training="anchors"``, every entity with ``"all_rows"``). The cost of a bound evaluation grows
        as N M^2 (the default's comparison with 30: benchmarks/RESULTS.md, "More inducing inputs").
    kernel : str or gpytorch kernel
        MRD's kernel per view ("rbf", "linear", ...).
    shared_by : {"auto", "resolution", "relevance"}
        Which latent dimensions views a and b share, i.e. those :meth:`align` matches in.
        ``"resolution"``: those that *both* views resolve, resolution (``resolution_``) above
        ``min_resolution``; a dimension a view uses weakly but with many quiet outputs counts, one
        switched off by ARD does not. ``"relevance"``: MRD's rule of the paper, ARD relevance above
        ``shared_threshold`` times the view's largest; it drops dimensions with a few percent of a
        view's largest relevance that the view still resolves (benchmarks/RESULTS.md, "Shared
        dimensions by resolution"). ``"auto"`` (default): ``"resolution"`` on either engine; with
        ``engine="svi"`` it measures each view under its own likelihood
        (:attr:`bayesalign.gp.StochasticMRD.resolution_`; "relevance" there before 2026-11-25: on the count
        toy resolution found the two shared dimensions and matched better, on the binary toy, the holed
        toys and complete Gaussian views as well as relevance: benchmarks/RESULTS.md, "Non-Gaussian
        views" and "Missing entries").
    min_resolution : float
        The resolution (squared noise standard deviations per latent standard deviation) above
        which a view counts as resolving a dimension; 1 by default: the view's outputs move by more
        than their noise over the spread of the points.
    shared_threshold : float in [0, 1)
        With ``shared_by="relevance"``: a latent dimension is shared by views a and b when its ARD
        relevance exceeds this fraction of the largest relevance in *both* views (MRD's
        ``shared_dims`` rule).
    cost : {"likelihood", "mean"}
        Default cost of :meth:`align`.
    misfit : {"auto", "anchors", None}
        The likelihood cost's cross-view misfit Sigma_tau (above). ``"anchors"``: estimated per pair of
        views on their anchor pairs, each inferred again from each view alone under the fitted model
        (:meth:`cross_view_misfit`, at the first use; with fewer than ``MIN_CALIBRATION_PAIRS`` anchor
        pairs a RuntimeWarning and none). None: the posterior variances alone (the cost before
        2026-11-25; the comparison: benchmarks/RESULTS.md, "Cross-view misfit"). ``"auto"`` (default):
        ``"anchors"`` on the collapsed engine, None with ``engine="svi"`` (where it cost accuracy on the
        linear toy and was not measured on real pairs: benchmarks/RESULTS.md, "Cross-view misfit").
        The mean cost has no variances and ignores it. ``misfit_`` records what was used.
    temperature : {"anchors", "posterior"} or float
        T of the probabilities ``exp(-cost / T)``. ``"anchors"`` (default): T fitted on the
        anchor pairs (:meth:`calibrate_temperature`, temperature scaling on the anchors
        re-inferred view by view or held out, ``calibration_pairs``, at the first :meth:`align`; with fewer than
        ``MIN_CALIBRATION_PAIRS`` anchor pairs a RuntimeWarning and T only at or above the posterior
        temperature, without any the posterior temperature).
        ``"posterior"`` (or None): 1 for the likelihood cost (the Gibbs distribution of the
        permutation posterior); for the mean cost 2 (s_a + s_b), with s_a, s_b the average
        posterior variances in the shared dimensions, which makes exp(-D**/T) the likelihood of
        the same model with every variance equal to its mean. The posterior variances measure
        how well each view pins its own rows down, not how far apart the two views put the same
        point, so without the cross-view misfit (``misfit``) these probabilities are overconfident
        wherever the views' latent spaces disagree (the shipped real pairs' calibration at both:
        benchmarks/RESULTS.md, "Calibration"; with the misfit the fitted T is close to 1 on the mfeat
        pairs, "Cross-view misfit"). Self-training always uses the posterior temperature. A number: that T.
    infer_max_iter : int
        Bound evaluations of ``MRD.infer`` for the unaligned rows (the main cost at large N*).
    seed : int, optional
    device : str, optional
    progress : bool
        Progress bars of MRD fits, inference and the temperature fit (on a terminal only).
    mrd_options : dict, optional
        Further keywords of :class:`bayesalign.gp.MRD` (e.g. ``max_iter``, ``init``, ``dtype``).
        (Passing them as keywords of MAD itself, ``MAD(max_iter=...)``, is deprecated: it still
        works, with a DeprecationWarning, and lands in ``mrd_options``.)
    training : {"anchors", "all_rows"}
        What MRD learns from (above).
    standardize : bool
        Give every column unit variance before fitting (``Views.standardised``); otherwise views
        are only centred, so a column's units weigh in its relevance. Off by default (the paper).
    calibration_pairs : {"reinferred", "held_out"}
        The anchor pairs ``temperature="anchors"`` is fitted on. ``"reinferred"`` (default): each
        anchor inferred again from each view alone under the fitted model. The fit placed both rows
        of an anchor at one latent point and bent both mappings and their neighbours around it, so
        these pairs agree far better than unaligned partners do, and the probabilities come out
        overconfident where the views disagree (the digit halves, mocap). ``"held_out"``: the pairs
        fall into ``HELD_OUT_FOLDS`` folds, each fold is split into a row of each view, each row started
        where its own view alone places it, and the fit continued warm for ``HELD_OUT_FRACTION`` of
        ``max_iter`` (:meth:`_held_out_pairs`), so each pair is placed as unaligned rows are
        (cross-fitting). It costs ``HELD_OUT_FOLDS`` short continuations at the first :meth:`align`,
        and changes only the temperature: the cost, the misfit and the pairing stay those of the
        re-inferred anchors (benchmarks/RESULTS.md, "Held-out anchors", "Held-out anchors placed by
        their own views"). Needs ``training="all_rows"`` and the collapsed engine.
    latent_prior : {"graph", "standard_normal"}
        p(X) of the all-rows model: N(0, (I + graph_strength * L)^-1) over the entities, L the
        Laplacian of the union of the views' ``n_neighbors``-nearest-neighbour graphs
        (:func:`bayesalign.graph.entity_graph`), or N(0, I). Both engines of the all-rows model use
        it (``engine="svi"``: unless ``svi_options`` gives another ``latent_prior``; with missing
        entries the graph's neighbourhoods read a hole as its column's mean); the paper's
        anchors-only procedure uses N(0, I) whatever this says, and so does a fit without anchors
        that compares several bootstrap candidates by their bounds (the graph changes with each
        candidate's pairs; ``fit``'s ``bootstrap``). ``latent_prior_`` records the prior a fit used.
    graph_strength : float
        lambda of the graph prior (0: N(0, I)).
    n_neighbors : int
        Neighbours per row of the graph prior and of the joint-Laplacian start.
    engine : {"collapsed", "svi"}
        The exact collapsed bound with L-BFGS (default), or Pyro SVI with minibatches
        (``training="all_rows"`` only; ``svi_options`` are keywords of ``StochasticMRD``).
    svi_options : dict, optional
        Keywords of :class:`bayesalign.gp.StochasticMRD` (e.g. ``max_epochs``, ``likelihood``).
    correspondence_rounds : int or "auto"
        Rounds of soft correspondence after the fit (``training="all_rows"``, given anchors):
        each joins every unaligned row to its most probable partners in the other views by
        graph-prior edges weighted by the match probabilities and refits; a round is kept only if
        the anchor pairs, inferred again from one view at a time, align better under it (see
        :meth:`_refine_correspondences`; judged on the first two views). Each round costs one fit.
        0: off. "auto" (default): one round where it can be judged and costs one collapsed fit
        (collapsed engine, all rows, the graph prior with ``graph_strength > 0``, at least
        ``MIN_CALIBRATION_PAIRS`` anchor pairs between the first two views), none otherwise, silently;
        ``correspondence_rounds_`` records the number a fit used. Self-training
        (``fit(self_training=True)``) runs after the rounds and refits without their edges, from
        the kept start (``start_``).
    correspondence_neighbors : int
        Partners per row (each way) that a round joins it to.
    starts : sequence of {"joint_laplacian", "pca", "cca"}, optional
        Starting points of the all-rows model's q(X): the joint-Laplacian embedding of the views'
        kNN graphs and anchors (Wang, Krafft & Mahadevan 2011), and MRD's "pca" / "cca"
        initialisations of the anchor rows carried to the other rows by least squares
        (:class:`bayesalign.gp.MRD` ``init``). The model is fitted from each and the fit with the
        highest bound is kept: the same model and prior on the same data, so the bounds compare
        (the bound is multimodal, and which start reaches the best optimum varies from one data set to
        the next, ``benchmarks/RESULTS.md``). Each start costs one fit; self-training refits from the
        kept start only. Default (None): all three on the collapsed engine, the joint Laplacian alone
        with ``engine="svi"``, which takes one start ("joint_laplacian" or "pca"; its stochastic bound
        cannot rank starts).
    start_inducing : int, optional
        With several starts on the collapsed engine: fit each start with this many inducing inputs
        for ``RACE_FRACTION`` of MRD's ``max_iter`` evaluations, keep the highest bound, continue it at
        this size to ``max_iter`` evaluations, then grow it to ``num_inducing`` (new inducing inputs at
        the entity means farthest from the others, :meth:`bayesalign.gp.MRD.grow_inducing`, which never
        lowers the bound) and continue it for half of ``max_iter`` evaluations (the whole budget was
        measured too: benchmarks/RESULTS.md, "More inducing inputs"). The cost of an evaluation grows
        as M^2, so the starts race at a fraction of it. None (or ``num_inducing`` or more): every start
        at ``num_inducing`` for the whole budget.

    Attributes
    ----------
    model_ : MRD or StochasticMRD
        The fitted model (after the last self-training round): on the anchors, or on every row.
    entities_ : (int, dict view -> int array) or None
        With ``training="all_rows"``: the number of entities and the entity of each row of each view.
    converged_ : bool
        Whether the model's optimiser reached its tolerance. When not, one ConvergenceWarning at the end of
        :meth:`fit` says so for the model kept (the all-rows fit's stages, each a share of the budget, do not
        warn one by one).
    latent_prior_ : {"graph", "standard_normal"} or StochasticMRD's ``latent_prior``
        The p(X) the fitted model used (see ``latent_prior``; with ``engine="svi"`` and another
        ``latent_prior`` in ``svi_options``, that one).
    switched_off_views_ : list of str
        Views whose every ARD relevance is ~0 (warned: their rows carry no latent information).
    anchors_ : int array (G, V)
        The things seen in every view, one column per view (given anchors + discovered pairs); the
        all-rows model also joins the rows that anchors tie in some of the views only (one latent point
        seen by those views, ``entities_``).
    posteriors_ : dict view -> (rows, mean [n, Q], var [n, Q])
        q(x) of the rows of each view that are not training rows, inferred with that view's
        model only.
    embedding_ : LatentEmbedding
        The latent coordinates of every row: anchor rows take MRD's q(X) of their anchor group,
        the other rows their posterior from their own view (``posteriors_``); ``shared_dims``
        are those shared by the first two views.
    relevance_ : dict view -> array (Q,)
        MRD's ARD relevance weights per view.
    shared_dims_ : dict (a, b) -> int array
        The latent dimensions shared by each pair of views (by ``shared_by_``,
        :func:`bayesalign.gp.shared_dimensions`).
    shared_by_ : {"resolution", "relevance"}
        The rule ``shared_dims_`` were chosen by.
    resolution_ : dict view -> array (Q,) or None
        MRD's resolution of each latent dimension per view (:attr:`bayesalign.gp.MRD.resolution_`),
        with ``shared_by_ == "resolution"``.
    shared_threshold_ : float
    discovered_ : dict (a, b) -> dict of arrays
        Pairs added by the zero-anchor bootstrap and by self-training (``index_a``,
        ``index_b``, ``probability``, ``cost``, ``round``); :meth:`align` reports them too.
    misfit_ : dict (a, b) -> CrossViewMisfit or None
        The cross-view misfit of each pair of views the likelihood cost has used (:meth:`cross_view_misfit`);
        None where there were too few anchor pairs to estimate it. Empty with ``misfit=None`` (or "auto"
        with ``engine="svi"``) and for the mean cost.
    calibration_ : dict (a, b, cost) -> dict
        Temperatures fitted on the anchors by :meth:`calibrate_temperature` (with
        ``temperature="anchors"``, the default, at the first :meth:`align`): ``temperature``, ``pairs``,
        ``objective``, ``objective_at_posterior_temperature``, ``posterior_temperature``, ``fallback`` (no anchor
        pair: the posterior temperature), ``one_sided`` (fewer than ``MIN_CALIBRATION_PAIRS``: T searched at or
        above the posterior temperature only), ``misfit`` (whether the cost had the cross-view misfit),
        ``method`` (which anchor pairs), ``objective_at_chance`` and ``evidence`` (twice the log-likelihood ratio
        against chance matching; below ``MIN_CALIBRATION_EVIDENCE`` a RuntimeWarning: no ranking information),
        ``at_bound`` ("lower" / "upper" when T is a bound of the search, None inside it).
    timings_ : dict
        Seconds of the last MRD fit (``fit_seconds``) and of the inference of every view's
        unaligned rows (``infer_seconds``).
    correspondence_history_ : list of dict
        With ``correspondence_rounds``: per round (0 is the first fit) ``round``, ``elbo`` (the bound
        of that round's model, its prior holding the soft correspondences), ``anchor_foscttm`` (what
        the round is judged on), ``changed`` (fraction of the first two views' Hungarian pairs that
        changed), ``accuracy`` (of those pairs; None without truth), ``kept``.
    starts_ : list of dict
        With ``training="all_rows"``: ``start``, ``elbo`` (its fit's final bound; with ``start_inducing``,
        at that many inducing inputs, before the kept fit grew) and ``kept`` of every start the last fit
        from scratch tried.
    start_ : str or None
        The start kept (the one later refits use).
    self_training_history_ : list of dict
        Per round: ``round``, ``n_anchors`` (training rows), ``added``, ``correct`` (how many
        added pairs are true; None without truth), ``accuracy`` (of the whole alignment at the
        start of the round, discovered pairs included; None without truth), ``elbo`` (at the start of
        the round), ``anchor_foscttm`` (the anchors' FOSCTTM after the round's refit; None where the
        anchors do not judge the rounds), ``judge_pairs`` (``"held_out"`` or ``"reinferred"``: how the
        anchors were placed, :meth:`self_train`; None: not judged) and ``kept`` (whether the round's pairs
        and refit were kept; None where it added none).
    bootstrap_ : dict or None
        A fit without anchors: the kept candidate's ``method``, ``pairs`` (its unsupervised
        starting pairs), ``correct`` (None without truth), ``self_training_added``; ``candidates``,
        one record per candidate (``method``, ``signs``, ``n_pairs``, ``correct``, ``bound``,
        ``self_training_added``, ``agreement``: the fraction of its pairs the kept alignment
        reproduces), ``chosen`` (the kept one's index), ``ambiguous`` (a candidate that pairs
        the rows differently had nearly as much support; warned) and ``weak_support`` (the kept one's
        self-training confirmed fewer than ``WEAK_SUPPORT`` of the rows left to match; warned). None with
        anchors.

    Examples
    --------
    >>> from bayesalign.datasets import mad_toy
    >>> problem = mad_toy("linear_shared", seed=0, n_anchors=10).shuffle_unaligned(seed=0)
    >>> mad = MAD(latent_dim=3, num_inducing=10, seed=0, mrd_options={"max_iter": 200}).fit(problem)  # doctest: +SKIP
    >>> alignment = mad.align(matcher="hungarian")  # doctest: +SKIP
    >>> evaluate(alignment, problem)["kendall_tau"] < 0.05  # doctest: +SKIP
    True
    """

    def __init__(self, latent_dim: int = 10, num_inducing: int = 80, kernel="rbf", shared_threshold: float = 0.05,
                 cost: str = "likelihood", temperature: float | str | None = "anchors", infer_max_iter: int = 500,
                 seed=None, device=None, progress: bool = False, mrd_options: dict | None = None,
                 training: str = "all_rows", standardize: bool = False, latent_prior: str = "graph",
                 graph_strength: float = 10.0, n_neighbors: int = 10, engine: str = "collapsed",
                 svi_options: dict | None = None, correspondence_rounds: int | str = "auto",
                 correspondence_neighbors: int = 5,
                 starts=None, start_inducing: int | None = 30, shared_by: str = "auto", min_resolution: float = 1.0,
                 misfit: str | None = "auto", calibration_pairs: str = "reinferred", **mrd_kwargs):
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
        if mrd_kwargs:  # the deprecated spelling MAD(max_iter=...): kept working, stored where it belongs
            from .gp import MRD

            unknown = sorted(set(mrd_kwargs) - set(MRD._get_param_names()))
            if unknown:  # neither MAD's nor MRD's: say so here, not as MRD's TypeError at fit
                hint = " (self_training is an argument of MAD.fit)" if "self_training" in unknown else ""
                raise TypeError(f"MAD() got unexpected keyword arguments {unknown}{hint}")
            warnings.warn(f"MAD({', '.join(f'{k}=...' for k in mrd_kwargs)}) is deprecated; pass "
                          f"mrd_options={{...}} instead", DeprecationWarning, stacklevel=2)
            mrd_options = {**(mrd_options or {}), **mrd_kwargs}
        self.mrd_options = mrd_options
        self.training = training
        self.standardize = standardize
        self.latent_prior = latent_prior
        self.graph_strength = graph_strength
        self.n_neighbors = n_neighbors
        self.engine = engine
        self.svi_options = svi_options
        self.correspondence_rounds = correspondence_rounds
        self.correspondence_neighbors = correspondence_neighbors
        self.starts = starts
        self.start_inducing = start_inducing
        self.shared_by = shared_by
        self.min_resolution = min_resolution
        self.misfit = misfit
        self.calibration_pairs = calibration_pairs

    # -- validation ------------------------------------------------------------------------
    def _check_params(self):
        if self.cost not in COSTS:
            raise ValueError(f"cost must be one of {COSTS}, got {self.cost!r}")
        if not 0 <= float(self.shared_threshold) < 1:
            raise ValueError(f"shared_threshold is relative to a view's largest relevance; it must be in [0, 1), "
                             f"got {self.shared_threshold!r}")
        _check_temperature(self.temperature)
        if self.misfit not in MISFITS:
            raise ValueError(f"misfit must be one of {MISFITS}, got {self.misfit!r}")
        if self.calibration_pairs not in CALIBRATION_PAIRS:
            raise ValueError(f"calibration_pairs must be one of {CALIBRATION_PAIRS}, got {self.calibration_pairs!r}")
        if self.calibration_pairs == "held_out" and not self._holds_out_anchors():
            raise ValueError("calibration_pairs='held_out' continues the all-rows model with anchor pairs split "
                             "into rows of their own: it needs training='all_rows' and engine='collapsed', got "
                             f"training={self.training!r}, engine={self.engine!r}")
        if self.shared_by not in SHARED_BY:
            raise ValueError(f"shared_by must be one of {SHARED_BY}, got {self.shared_by!r}")
        if isinstance(self.min_resolution, bool) or not (np.isfinite(float(self.min_resolution))
                                                         and float(self.min_resolution) >= 0):
            raise ValueError(f"min_resolution must be a finite number >= 0, got {self.min_resolution!r}")
        for name in ("latent_dim", "num_inducing", "infer_max_iter"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.mrd_options is not None and not isinstance(self.mrd_options, dict):
            raise TypeError(f"mrd_options must be a dict of MRD keywords or None, got "
                            f"{type(self.mrd_options).__name__}")
        reserved = {"latent_dim", "num_inducing", "kernel", "seed", "device", "progress"} & set(self.mrd_options or {})
        if reserved:
            raise ValueError(f"mrd_options must not set {sorted(reserved)}: they are MAD's own parameters")
        from .gp import MRD, StochasticMRD

        for name, estimator in (("mrd_options", MRD), ("svi_options", StochasticMRD)):
            unknown = sorted(set(getattr(self, name) or {}) - set(estimator._get_param_names()))
            if unknown:  # e.g. a fit() argument given as a parameter (MAD(self_training=True) lands in mrd_options)
                raise ValueError(f"{name} has no {estimator.__name__} parameter {unknown}; "
                                 f"{estimator.__name__} takes {estimator._get_param_names()}")
        for name, allowed in (("training", TRAININGS), ("latent_prior", LATENT_PRIORS), ("engine", ENGINES)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        if self.engine == "svi" and self.training != "all_rows":
            raise ValueError("engine='svi' fits every row (training='all_rows'); the paper's anchors-only procedure "
                             "runs on the collapsed engine")
        if not (np.isfinite(float(self.graph_strength)) and float(self.graph_strength) >= 0):
            raise ValueError(f"graph_strength must be a finite number >= 0, got {self.graph_strength!r}")
        if isinstance(self.n_neighbors, bool) or not isinstance(self.n_neighbors, (int, np.integer)) \
                or self.n_neighbors < 1:
            raise ValueError(f"n_neighbors must be a positive integer, got {self.n_neighbors!r}")
        if self.svi_options is not None and not isinstance(self.svi_options, dict):
            raise TypeError(f"svi_options must be a dict of StochasticMRD keywords or None, got "
                            f"{type(self.svi_options).__name__}")
        for name in ("correspondence_rounds", "correspondence_neighbors"):
            value = getattr(self, name)
            if name == "correspondence_rounds" and isinstance(value, str) and value == "auto":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0 \
                    or (name == "correspondence_neighbors" and value < 1):
                kind = "a non-negative integer or 'auto'" if name.endswith("rounds") else "a positive integer"
                raise ValueError(f"{name} must be {kind}, got {value!r}")
        explicit_rounds = self.correspondence_rounds != "auto" and self.correspondence_rounds > 0
        if explicit_rounds and self.training != "all_rows":
            raise ValueError("correspondence_rounds needs training='all_rows': the soft correspondences join "
                             "unaligned rows, which the paper's anchors-only model does not contain")
        if self.starts is not None:
            starts = [self.starts] if isinstance(self.starts, str) else self.starts
            if not isinstance(starts, (tuple, list)) or not starts or any(st not in STARTS for st in starts):
                raise ValueError(f"starts must be a non-empty sequence of {STARTS}, got {self.starts!r}")
            if self.training != "all_rows":
                raise ValueError("starts are the all-rows model's (training='all_rows'); the paper's anchors-only "
                                 "procedure starts MRD from PCA (or mrd_options['init'])")
            if "init" in ((self.svi_options if self.engine == "svi" else self.mrd_options) or {}):
                raise ValueError("give either starts or an 'init' in mrd_options / svi_options, not both")
            if self.engine == "svi" and len(starts) > 1:
                raise ValueError("several starts are chosen between by the exact collapsed bound; engine='svi' "
                                 "takes one start")
            if self.engine == "svi" and "cca" in starts:
                raise ValueError("engine='svi' starts from 'joint_laplacian' or 'pca' (StochasticMRD has no 'cca' "
                                 "initialisation)")
        if self.start_inducing is not None:
            value = self.start_inducing
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"start_inducing must be a positive integer or None, got {value!r}")
        if explicit_rounds and not float(self.graph_strength) > 0:
            raise ValueError("correspondence_rounds needs graph_strength > 0: the soft correspondences enter the "
                             "fit as edges of the graph prior, weighted by graph_strength")

    @staticmethod
    def _check_problem(problem) -> np.ndarray:
        """Anchor groups (G, V) of a valid problem; raises on bad anchors (``problem.anchor_groups``)."""
        if not isinstance(problem, AlignmentProblem):
            raise TypeError(f"MAD.fit expects an AlignmentProblem, got {type(problem).__name__}")
        groups = problem.anchor_groups()
        given = sum(len(corr) for corr in problem.anchors.values())  # an empty Correspondence is no anchor
        if given and len(groups) < MIN_ANCHORS:
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
            max_rounds: int = 5, n_bootstrap: int | None = None, bootstrap=None,
            bootstrap_reflections: int | None = None) -> MAD:
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
        bootstrap : {"gromov_wasserstein", "subspace_procrustes", "local_patterns"} or a sequence of them
            The unsupervised initialisers for a problem without anchors
            (:func:`bayesalign.bootstrap.unsupervised_pairs`): the most confident mutual pairs of
            entropic Gromov-Wasserstein, of the shared-subspace Procrustes search
            (:func:`bayesalign.bootstrap.subspace_procrustes`, for views that each add a private
            signal to the shared one) or of the local-pattern correspondence. Default (None):
            Gromov-Wasserstein and the subspace search with ``training="all_rows"``, every
            candidate of both fitted and the highest bound kept; Gromov-Wasserstein alone with
            ``training="anchors"``. Each works when the views' geometry has no symmetry to
            confuse it and fails outright otherwise (benchmarks/RESULTS.md): check ``bootstrap_``
            and ``self_training_history_``, and give a few anchors when you can.
        bootstrap_reflections : int
            With no anchors and the Gromov-Wasserstein bootstrap: Gromov-Wasserstein sees
            within-view distances only, so a mirror image of the right correspondence is as good
            to it as the right one. It is started from each of the ``2 ** bootstrap_reflections``
            reflections of the views' leading principal axes
            (:func:`bayesalign.bootstrap.reflection_starts`); from each candidate's pairs the
            model is fitted and self-trained (hard EM over the correspondence, :meth:`self_train`),
            and the candidate whose self-training confirmed the most pairs is kept (the highest
            final bound among those equally extended): restarts of hard EM, the best supported kept;
            the other bootstraps' candidates join the same comparison. When a candidate that pairs the
            rows differently was extended by self-training nearly as much as the kept one
            (``RIVAL_SUPPORT``), a RuntimeWarning says the alignment is ambiguous
            (``bootstrap_["ambiguous"]``); when the kept one confirmed few of the rows
            (``WEAK_SUPPORT``), one says it is weakly supported (``bootstrap_["weak_support"]``).
            ``bootstrap_["candidates"]`` lists them all (``method``, ``signs``, right pairs,
            bound, agreement with the kept alignment). 0: one bootstrap from Gromov-Wasserstein's
            default start. Default (None): 2 with ``training="all_rows"``; 0 with
            ``training="anchors"``, whose bound covers the anchor rows only, so the candidates'
            bounds would not compare the same data (more is refused there).

        Returns
        -------
        self
        """
        self._check_params()
        groups = self._check_problem(problem)
        if any(problem.views.n_missing.values()) and self.engine != "svi":
            problem.views.check_complete(f"MAD(engine={self.engine!r}, training={self.training!r})")
        names = problem.views.names
        self.problem_ = problem
        self.discovered_ = {}
        self.self_training_history_ = []
        self.correspondence_history_, self.correspondence_rounds_ = [], 0
        self.bootstrap_ = None
        self.start_, self.starts_ = None, []
        self._fit_prior = self.latent_prior  # N(0, I) where bootstrap candidates are compared (_fit_bootstrapped)
        if len(groups) == 0 and len(names) != 2:
            raise ValueError(f"MAD without anchors bootstraps pairs between two views; this problem has "
                             f"{len(names)} views and no anchors")
        self_training = bool(self_training) or len(groups) == 0  # a bootstrap is always followed by self-training
        if self_training:  # checked before the (slow) fit
            self._check_self_training(problem, confidence_threshold, max_rounds)
        self._in_fit = True  # the stages' fits stay quiet about convergence; fit says it once, at its end
        try:
            if len(groups) == 0:
                self._fit_bootstrapped(problem, n_bootstrap, bootstrap, bootstrap_reflections, confidence_threshold,
                                       max_rounds)
            else:
                self.anchors_ = groups
                self._fit_model(problem)
                self.correspondence_rounds_ = self._rounds(problem)
                if self.correspondence_rounds_:
                    self._refine_correspondences(problem)
                if self_training:
                    self.self_train(confidence_threshold, max_rounds)
        except BaseException:  # an error or Ctrl-C: the model as it stands warns on its own again
            model = getattr(self, "model_", None)
            if model is not None:
                vars(model).pop("_warn_convergence", None)
            raise
        finally:
            self._in_fit = False
        self._report_convergence()
        return self

    def _report_convergence(self) -> None:
        """One ConvergenceWarning when the all-rows model MAD keeps stopped before the optimiser's tolerance.

        The collapsed all-rows fit runs MRD in stages that each take a share of ``mrd_options["max_iter"]``
        (the starts' race, the growth to ``num_inducing``, each correspondence round, each self-training
        refit); a stage that ends at its share is the design, not a failure, so the stages do not warn
        (``MRD._warn_convergence``), and this says once whether the model kept (``converged_``) reached the
        tolerance. The paper's anchors-only fit and the SVI engine warn from their own single fits.
        """
        model = getattr(self, "model_", None)
        if model is None or "_warn_convergence" not in vars(model):
            return
        del model._warn_convergence  # the kept model warns again on its own (e.g. continue_fit by the user)
        if self.converged_:
            return
        from .gp import MRD

        budget = int((self.mrd_options or {}).get("max_iter", MRD().max_iter))
        round_kept = any(r["round"] > 0 and r["kept"] for r in self.correspondence_history_)
        stage = "its correspondence round" if round_kept else "its last fit"
        stopped = getattr(model, "stopped_by_", "max_iter")
        if stopped == "max_iter":
            why = "at its budget of evaluations"
            advice = (f"raise mrd_options['max_iter'] (now {budget}; the starts' race, the growth to num_inducing "
                      "and each correspondence round take shares of it)")
        else:  # the optimiser gave up on its own: more evaluations would not have been used
            why, advice = f"by {stopped}", "try another seed or start (starts=...)"
        warnings.warn(f"MAD: the model kept stopped before the optimiser's tolerance (tol={model.tol}), {why}, "
                      f"after {model.n_iter_} bound evaluations of {stage} (converged_ is False); the alignment "
                      f"may be far from the model's optimum: {advice}", ConvergenceWarning, stacklevel=3)

    def _mrd(self, train):
        """The MRD for the paired anchor views ``train``, from PCA unless ``mrd_options`` says otherwise;
        with fewer anchors than PCA needs for ``latent_dim`` components, the PCA initialisation is
        padded with small random dimensions."""
        from .gp import MRD

        n_train = train.n_samples[train.names[0]]
        kwargs = dict(self.mrd_options or {})
        if "init" not in kwargs:  # the paper's (GPy's) PCA; with a few anchors, "cca" would find chance
            init = _anchor_init(train, int(self.latent_dim), self.seed)  # canonical correlations
            kwargs["init"] = "pca" if init is None else init
        return MRD(latent_dim=int(self.latent_dim), num_inducing=min(int(self.num_inducing), n_train),
                   kernel=self.kernel, seed=self.seed, device=self.device, progress=self.progress, **kwargs)

    def _views(self, problem: AlignmentProblem):
        """The views MRD sees: standardised columns (``standardize=True``) or as given (MRD centres them)."""
        return problem.views.standardised() if self.standardize else problem.views

    def _fit_model(self, problem: AlignmentProblem, init=None, extra_edges=None) -> None:
        """Fit the model on the training rows, then q(x) of every other row; shared dimensions; honesty checks.

        ``init`` (a LatentEmbedding) and ``extra_edges`` (entity weights added to the graph prior) are the
        all-rows model's start (a correspondence round's, a self-training round's) and soft correspondences
        (:meth:`_refine_correspondences`). Without ``init`` the all-rows model tries every start of
        ``starts`` while ``start_`` is None (the first fit of :meth:`fit`, each bootstrap candidate's),
        and afterwards only the start kept then.
        """
        from .gp import shared_dimensions

        start = time.perf_counter()
        if self.training == "anchors":
            self._fit_anchors_only(problem)
        else:
            self._fit_all_rows(problem, init, extra_edges)
        names = problem.views.names
        threshold = float(self.shared_threshold)
        relevance = self.model_.relevance_
        self.relevance_ = relevance
        self.shared_threshold_ = threshold
        self.converged_ = bool(getattr(self.model_, "converged_", True))
        if self.engine == "svi":  # StochasticMRD's own parameter, which svi_options may have set
            from .gp.priors import GraphLaplacianPrior

            used = self.model_.latent_prior
            self.latent_prior_ = ("graph" if isinstance(used, GraphLaplacianPrior) else
                                  "standard_normal" if isinstance(used, str) and used == "normal" else used)
        else:
            graph = self.training == "all_rows" and self._fit_prior == "graph" and float(self.graph_strength) > 0
            self.latent_prior_ = "graph" if graph else "standard_normal"
        self.shared_by_ = self._shared_rule()
        if self.shared_by_ == "resolution":
            self.resolution_ = self.model_.resolution_
            measure, limit, relative = self.resolution_, float(self.min_resolution), False
        else:
            self.resolution_ = None
            measure, limit, relative = relevance, threshold, True
        self.shared_dims_ = {}
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                self.shared_dims_[(a, b)] = shared_dimensions({a: measure[a], b: measure[b]}, limit, fallback=True,
                                                              relative=relative)
        self._report_switched_off_views(relevance)
        self.embedding_ = self._embedding(problem)
        self.timings_["total_seconds"] = time.perf_counter() - start
        self._stream = {}
        self._forget_derived()

    #: what is computed from the fitted model on demand, each a dict per pair of views (and cost)
    _DERIVED = ("calibration_", "_calibration_potentials", "misfit_", "_reinferred", "_held_out")

    def _forget_derived(self) -> None:
        """Drop what was computed from the fitted model on demand (after a refit or a load)."""
        for name in self._DERIVED:
            setattr(self, name, {})

    def _shared_rule(self) -> str:
        """The rule of the shared dimensions: ``shared_by``, with "auto" resolved (resolution on either engine)."""
        return "resolution" if self.shared_by == "auto" else self.shared_by

    def _shared_rule_text(self) -> str:
        """The rule in words, for messages."""
        if getattr(self, "shared_by_", None) == "resolution":
            return f"min_resolution={float(self.min_resolution)}"
        return f"shared_threshold={self.shared_threshold_}"

    def _fit_anchors_only(self, problem: AlignmentProblem) -> None:
        """The paper's procedure: MRD on the anchor rows (eq. 3), then q_v(x) of the other rows of each view v
        with view v's model only (eq. 4)."""
        views, names = self._views(problem), problem.views.names
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
        self.entities_ = None
        self.timings_ = {"fit_seconds": fitted - start, "infer_seconds": time.perf_counter() - fitted}

    def _fit_all_rows(self, problem: AlignmentProblem, start_embedding=None, extra_edges=None) -> None:
        r"""A partially observed MRD over every row (one latent point per entity; :meth:`MRD.fit` ``observed``).

        The bound is :math:`\sum_v F_v(Y_v; q(X)[\mathrm{obs}_v]) - \mathrm{KL}(q(X) \| p(X))`: each view's
        collapsed bound over the entities it observes (the rows anchors join, directly or through
        other views, in the views they are seen in; any other row in its own view alone), the KL over all
        entities. With ``latent_prior="graph"``, p(X) is
        the Gaussian Markov random field :math:`N(0, (I + \lambda L)^{-1})` of the union of the views'
        kNN graphs over the entities (:func:`bayesalign.graph.entity_graph`), which keeps a row
        near its neighbours, anchors among them. q(X) starts from each of ``starts`` (e.g. the
        joint-Laplacian embedding of the same graph structure, Wang, Krafft & Mahadevan 2011, section
        5.2, on the training anchors) and the fit with the highest bound is kept (MRD's restarts).
        The posteriors of the unaligned rows are their entities' q(x): no separate inference.

        ``start_embedding`` replaces the starts; ``extra_edges`` (sparse, entities x
        entities) are added to the graph's weights (the soft correspondences of
        :meth:`_refine_correspondences`).
        """
        from .data import Correspondence
        from .spectral import JointLaplacianAlignment

        views, names = self._views(problem), problem.views.names
        arrays = {v: np.asarray(views[v]) for v in names}
        groups = self.anchors_  # the given anchors seen by every view, and pairs found by bootstrap / self-training
        anchors = []  # every given pair (an anchor of some of the views is an entity those views share) and the groups
        for i, a in enumerate(names):
            for j, b in enumerate(names[i + 1:], i + 1):
                given = problem.anchors_between(a, b)
                pairs = np.unique(np.vstack([given.pairs, groups[:, [i, j]]]), axis=0)
                if len(pairs):
                    anchors.append(Correspondence((a, b), pairs[:, 0], pairs[:, 1]))
        train = AlignmentProblem(views, anchors=anchors)
        n_entities, rows = train.entities()  # one entity per training group, then one per other row
        Q = int(self.latent_dim)
        start = time.perf_counter()
        # the start only (never the likelihood) sees a missing entry as its column's mean
        start_problem = train.replace(views=_mean_filled(views)) if any(views.n_missing.values()) else train
        user_init = "init" in ((self.svi_options if self.engine == "svi" else self.mrd_options) or {})
        names_tried = None if start_embedding is not None or user_init else self._starts_to_try()
        if start_embedding is not None or user_init:
            init = start_embedding  # None: the user's init stands (below)
        else:
            init = []
            for name in names_tried:
                if name != "joint_laplacian":  # MRD's own initialisations, from the anchors of the views it sees
                    init.append(name)
                    continue
                with warnings.catch_warnings():  # the start only: its own warnings (degree spread) are not the fit's
                    warnings.simplefilter("ignore")
                    init.append(JointLaplacianAlignment(n_components=Q, n_neighbors=int(self.n_neighbors)).fit(
                        start_problem).embedding_)
            init = init[0] if len(init) == 1 else tuple(init)
        # the neighbourhoods of rows with missing entries from the start's column means (graph only)
        prior = self._entity_prior(start_problem.views, rows, n_entities, extra_edges)
        self._prior_edges = extra_edges  # the held-out anchors' continuations rebuild this prior
        if self.engine == "svi":
            from .gp import StochasticMRD

            options = dict(self.svi_options or {})
            options.setdefault("init", init)
            if start_embedding is not None:  # a refinement round goes on from the previous fit
                options["init"] = start_embedding
            if prior is not None:
                options.setdefault("latent_prior", prior)
            self.model_ = StochasticMRD(latent_dim=Q, num_inducing=min(int(self.num_inducing), n_entities),
                                        kernel=self.kernel,
                                        seed=self.seed, device=self.device, progress=self.progress,
                                        **options).fit(arrays, observed=rows)
            mean, var = self.model_.entity_means_, self.model_.entity_variances_  # [E, Q] each
        else:
            from .gp import MRD

            options = dict(self.mrd_options or {})
            options.setdefault("init", init)
            if start_embedding is not None:  # a refinement round goes on from the previous fit
                options["init"] = start_embedding
            M = min(int(self.num_inducing), n_entities)  # every entity is observed by some view
            race = (self.start_inducing is not None and int(self.start_inducing) < M and
                    isinstance(options["init"], tuple) and len(options["init"]) > 1)
            budget = int(options.get("max_iter", MRD().max_iter))
            if extra_edges is not None and start_embedding is not None:  # a correspondence round: part of the budget
                budget = options["max_iter"] = max(int(ROUND_FRACTION * budget), 1)
            if race:  # each start for a fraction of the budget: the kept one goes on alone
                options["max_iter"] = max(int(RACE_FRACTION * budget), 1)
            model = MRD(latent_dim=Q, num_inducing=int(self.start_inducing) if race else M, kernel=self.kernel,
                        seed=self.seed, device=self.device, progress=self.progress, **options)
            model._warn_convergence = False  # a stage's share of the budget: _report_convergence speaks for the kept
            self.model_ = model.fit(arrays, observed=rows, n_entities=n_entities, latent_prior=prior)
            if race:  # the starts raced with fewer inducing inputs: the kept fit grows to num_inducing and goes on
                if names_tried is not None:
                    self._record_starts(names_tried)  # the race's bounds
                if budget > options["max_iter"]:
                    self.model_.continue_fit(budget - options["max_iter"])
                self.model_.max_iter = budget
                self.model_.grow_inducing(M, max(budget // 2, 1))
            mean, var = self.model_.entity_means_, self.model_.entity_variances_  # [E, Q] each
        if names_tried is not None and getattr(self, "start_", None) is None:  # a fit from scratch, not a refit
            self._record_starts(names_tried)
        self.posteriors_ = {}
        for k, view in enumerate(names):
            free = np.setdiff1d(np.arange(views.n_samples[view]), groups[:, k])
            self.posteriors_[view] = (free, np.asarray(mean[rows[view][free]], np.float64),
                                      np.asarray(var[rows[view][free]], np.float64))
        self.entities_ = (n_entities, rows)
        self.timings_ = {"fit_seconds": time.perf_counter() - start, "infer_seconds": 0.0}

    def _entity_prior(self, views, rows: dict, n_entities: int, extra_edges=None):
        """p(X) of the all-rows model over ``n_entities`` whose rows of each view are ``rows[view]``: the graph
        prior of the union of the views' kNN graphs (``latent_prior="graph"``), plus ``extra_edges`` (entities
        x entities, sparse, padded with empty rows to ``n_entities``), or None (the standard normal)."""
        import scipy.sparse as sp

        from .gp.priors import GraphLaplacianPrior
        from .graph import entity_graph, laplacian

        graph = self._fit_prior == "graph" and float(self.graph_strength) > 0
        if not graph and extra_edges is None:
            return None
        W = None
        if graph:
            names = list(views.names)
            W = entity_graph([np.asarray(views[v]) for v in names], [rows[v] for v in names], n_entities,
                             int(self.n_neighbors))
        if extra_edges is not None:
            extra = sp.csr_matrix(extra_edges, copy=True)
            extra.resize((n_entities, n_entities))
            W = extra if W is None else (W + extra).tocsr()
        return GraphLaplacianPrior(laplacian(W)[0], float(self.graph_strength))

    def _starts_to_try(self) -> tuple:
        """The starts of this fit: every one of ``starts`` (default: ``STARTS`` on the collapsed engine, the
        joint Laplacian alone on the SVI engine) until a fit has kept one (``start_``), then that one."""
        if getattr(self, "start_", None) is not None:
            return (self.start_,)
        if self.starts is None:
            return STARTS if self.engine == "collapsed" else ("joint_laplacian",)
        return (self.starts,) if isinstance(self.starts, str) else tuple(self.starts)

    def _record_starts(self, tried: tuple) -> None:
        """``starts_`` (each start's final bound, and which was kept) and ``start_`` from the fitted MRD's restarts
        (a start MRD could not compute was skipped by it, with a warning)."""
        model = self.model_
        labels = list(getattr(model, "restart_inits_", ["embedding" if tried[0] == "joint_laplacian" else tried[0]]))
        bounds = list(getattr(model, "restart_bounds_", [model.elbo()]))
        best = int(getattr(model, "best_restart_", 0))
        named = {("embedding" if t == "joint_laplacian" else t): t for t in tried}
        records = []
        for k, (label, bound) in enumerate(zip(labels, bounds)):
            base = label.split(" (jitter")[0]
            records.append({"start": named.get(base, base) + label[len(base):], "elbo": float(bound),
                            "kept": k == best})
        self.starts_ = records
        kept = labels[best].split(" (jitter")[0]
        self.start_ = named.get(kept, kept)

    def _correspondence_edges(self, n_entities: int, rows: dict, edges: bool = True) -> tuple:
        """Soft correspondences as graph weights: the ``correspondence_neighbors`` most probable partners of
        every unaligned row (each way) under the Sinkhorn match marginals P at the posterior temperature,
        weighted by P; for every pair of views that shares a latent dimension. Returns the sparse
        (n_entities, n_entities) symmetric weights (None with ``edges=False``: after the last round, where
        only the pairs are needed, and the Sinkhorn solve at T = 1 is the slow part) and the Hungarian pairs
        of the first two views."""
        import scipy.sparse as sp

        names = self.problem_.views.names
        k = int(self.correspondence_neighbors)
        weights = sp.csr_matrix((n_entities, n_entities))
        pairs = None
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                if len(self.shared_dims(a, b)) == 0 or (not edges and pairs is not None):
                    continue
                rows_a, ma, va, rows_b, mb, vb, _ = self._candidates(a, b)
                if pairs is None:  # the optimal assignment (Hungarian) of the first two views, as align() finds it
                    found = posterior_assignment(self.cost, ma, va, mb, vb)
                    pairs = set(zip(rows_a[found.index_a].tolist(), rows_b[found.index_b].tolist()))
                if not edges:
                    continue
                P = posterior_marginals(self.cost, ma, va, mb, vb, posterior_temperature(self.cost, va, vb))
                entity_a, entity_b = rows[a][rows_a], rows[b][rows_b]  # the entity of each candidate row
                for M, heads_of, tails_of in ((P, entity_a, entity_b), (P.T.tocsr(), entity_b, entity_a)):
                    heads, tails, mass = _top_k_per_row(M, k)
                    W = sp.coo_matrix((mass, (heads_of[heads], tails_of[tails])),
                                      shape=(n_entities, n_entities)).tocsr()
                    weights = weights.maximum(W).maximum(W.T)
        return (weights.tocsr() if edges else None), pairs

    def _rounds(self, problem: AlignmentProblem) -> int:
        """``correspondence_rounds`` with "auto" resolved: 1 on the collapsed all-rows model with the graph prior
        and at least ``MIN_CALIBRATION_PAIRS`` anchor pairs between the first two views to judge it on, else 0."""
        if self.correspondence_rounds != "auto":
            return int(self.correspondence_rounds)
        a, b = problem.views.names[:2]
        able = (self.engine == "collapsed" and self.training == "all_rows" and self.latent_prior == "graph"
                and float(self.graph_strength) > 0
                and len(problem.anchors_between(a, b, implied=True)) >= MIN_CALIBRATION_PAIRS)
        return int(able)

    def _refine_correspondences(self, problem: AlignmentProblem) -> None:
        r"""Soft correspondences as inference, EM-style (``correspondence_rounds``), each round kept on the anchors.

        Round r: (E) P = the Sinkhorn match marginals of the current posteriors at the posterior
        temperature (the model's own permutation posterior, :meth:`match_probabilities`); (M) the
        all-rows model refitted from its current q(X) means (its hyperparameters started afresh, which
        lets the ARD weights bring back a dimension the first fit switched off; going on from every
        fitted parameter, :meth:`MRD.continue_fit`, matched worse: ``benchmarks/RESULTS.md``) under the
        graph prior with every unaligned row joined to its ``correspondence_neighbors`` most probable
        partners in the other views by edges of weight P,
        :math:`p(X) = N(0, (I + \lambda (L + L_P))^{-1})`, so a probable partner counts like a
        within-view neighbour (the kNN edges of L are data-derived in the same way), at
        ``num_inducing`` for ``ROUND_FRACTION`` of MRD's ``max_iter`` evaluations.
        The M-step maximises the bound :math:`\sum_v F_v - \mathrm{KL}(q(X) \| p(X))` of the model
        whose prior holds P. Priors that differ make the bounds of different rounds incomparable
        (and on real pairs a higher bound of the model's own prior did not mean a better alignment,
        ``benchmarks/RESULTS.md``), so a round is judged on the anchors instead: each anchor pair is
        inferred again from each view alone under the round's model (:meth:`_anchor_pool`), and the
        round is kept when the FOSCTTM of those pairs among the unaligned rows is lower than the
        best so far. The rounds stop at the first that is not, or when fewer than 1% of the
        Hungarian pairs changed. With fewer than ``MIN_CALIBRATION_PAIRS`` anchor pairs there is
        nothing to judge a round on: a RuntimeWarning, and no round runs.
        ``correspondence_history_`` lists every round (round 0 is the first fit).
        """
        start = time.perf_counter()
        names = problem.views.names
        a, b = names[0], names[1]
        if len(self.shared_dims(a, b)) == 0:  # already warned by the fit: nothing to match, nothing to refine
            return
        n_pairs = len(problem.anchors_between(a, b, implied=True))
        if n_pairs < MIN_CALIBRATION_PAIRS:
            warnings.warn(f"correspondence_rounds: views {a!r} and {b!r} have "
                          f"{n_pairs} anchor pairs, fewer than MIN_CALIBRATION_PAIRS = "
                          f"{MIN_CALIBRATION_PAIRS}, to judge a round on; no round was run", RuntimeWarning,
                          stacklevel=3)
            return
        truth = _truth_pairs(problem, a, b)
        n_entities, rows = self.entities_
        best_score = self._anchor_foscttm(a, b)
        best = dict(self.__dict__)
        edges, pairs = self._correspondence_edges(n_entities, rows)
        self.correspondence_history_ = [{"round": 0, "elbo": float(self.model_.elbo()), "anchor_foscttm": best_score,
                                         "changed": None, "accuracy": _pairs_accuracy(pairs, truth), "kept": True}]
        for round_ in range(1, self.correspondence_rounds_ + 1):
            # the round's own warnings (e.g. not converged) are shown as they come, kept or not: recording them
            # with warnings.catch_warnings swaps process-wide state, which MAD fits in threads (dask) tangle
            self._fit_model(problem, init=self.embedding_, extra_edges=edges)
            score = self._anchor_foscttm(a, b)
            last = round_ == self.correspondence_rounds_
            new_edges, new_pairs = self._correspondence_edges(n_entities, rows, edges=not last)
            changed = 1.0 - len(new_pairs & pairs) / max(len(pairs), 1)
            better = bool(np.isfinite(score) and score < best_score)
            for previous in self.correspondence_history_:
                previous["kept"] = previous["kept"] and not better
            self.correspondence_history_.append({"round": round_, "elbo": float(self.model_.elbo()),
                                                 "anchor_foscttm": score, "changed": changed,
                                                 "accuracy": _pairs_accuracy(new_pairs, truth), "kept": better})
            if not better:
                break
            best_score, best = score, dict(self.__dict__)
            edges, pairs = new_edges, new_pairs
            if changed < 0.01:
                break
        history = self.correspondence_history_
        self.__dict__.update(best)  # the kept round's fitted state
        self.correspondence_history_ = history
        self.timings_ = {**self.timings_, "correspondence_seconds": time.perf_counter() - start}

    def _report_switched_off_views(self, relevance) -> None:
        """Warn when a view keeps no latent dimension, or a pair of views shares none: the matching would be random."""
        self.switched_off_views_ = [v for v, r in relevance.items()
                                    if not np.isfinite(np.max(r)) or float(np.max(r)) <= 1e-10 * max(
                                        float(np.max(other)) for other in relevance.values())]
        for view in self.switched_off_views_:
            warnings.warn(f"MAD: the fit switched view {view!r} off (every ARD relevance ~0: "
                          f"{np.asarray(relevance[view]).max():.2g} at most); its rows carry no information about "
                          "the latent space, and any matching of them is random. Try a smaller latent_dim or "
                          "num_inducing, standardize=True, or another init", RuntimeWarning, stacklevel=4)
        for (a, b), dims in self.shared_dims_.items():
            if len(dims) == 0:
                warnings.warn(f"MAD: views {a!r} and {b!r} share no latent dimension at "
                              f"{self._shared_rule_text()}; the fit found nothing in common, and align() between them "
                              "refuses rather than returning a random matching", RuntimeWarning, stacklevel=4)

    def _embedding(self, problem: AlignmentProblem) -> LatentEmbedding:
        """Every row's latent coordinates: anchor rows q(X) of their group, the others their posteriors."""
        first = tuple(problem.views.names[:2])
        relevance = {v: np.asarray(r).tolist() for v, r in self.relevance_.items()}
        info = {"relevance": relevance, "shared_threshold": self.shared_threshold_,
                "shared_by": self.shared_by_, "min_resolution": float(self.min_resolution),
                "resolution": None if self.resolution_ is None else {v: np.asarray(r).tolist()
                                                                    for v, r in self.resolution_.items()}}
        if self.entities_ is not None:  # all rows: each row's entity
            mean, var = self._entity_posteriors()
            rows = self.entities_[1]
            return LatentEmbedding({v: np.asarray(mean[rows[v]]) for v in problem.views.names},
                                   {v: np.asarray(var[rows[v]]) for v in problem.views.names},
                                   shared_dims=self.shared_dims_[first], method="mad", info=info)
        latent = self.model_.embedding_
        group_mean = np.asarray(next(iter(latent.means.values())))  # [G, Q], one row per anchor group
        group_var = latent.variance_of(next(iter(latent.means)))  # [G, Q]
        means, variances = {}, {}
        for k, view in enumerate(problem.views.names):
            n, q = problem.views.n_samples[view], group_mean.shape[1]
            means[view], variances[view] = np.zeros((n, q)), np.zeros((n, q))  # [n_v, Q]
            means[view][self.anchors_[:, k]] = group_mean
            variances[view][self.anchors_[:, k]] = group_var
            rows, mean, var = self.posteriors_[view]
            means[view][rows], variances[view][rows] = mean, var
        return LatentEmbedding(means, variances, shared_dims=self.shared_dims_[first], method="mad", info=info)

    def save(self, path) -> None:
        """Write the fitted MAD (its problem, posteriors, shared dimensions and MRD) to one ``.npz`` file, no pickle
        (:func:`bayesalign.mad_io.save_mad`); :meth:`load` reads it back and aligns exactly as before."""
        from .mad_io import save_mad

        save_mad(self, path)

    @classmethod
    def load(cls, path, device=None) -> MAD:
        """Read a MAD written by :meth:`save` (never unpickles; a corrupt file raises ``MADFileError`` naming it)."""
        from .mad_io import load_mad

        return load_mad(path, device=device)

    def _entity_posteriors(self) -> tuple[np.ndarray, np.ndarray]:
        """q(X) of every entity of the all-rows model: (means, variances) [n_entities, Q]."""
        if self.engine == "svi":
            return self.model_.entity_means_, self.model_.entity_variances_
        return self.model_.entity_means_, self.model_.entity_variances_

    def self_train(self, confidence_threshold: float = 0.9, max_rounds: int = 5) -> MAD:
        """Add confident mutual-nearest pairs as anchors and refit, round after round (two views).

        Each round aligns the first two views (Hungarian, the fitted cost, Sinkhorn
        probabilities), keeps the pairs whose probability is at least ``confidence_threshold``
        and that are mutual nearest neighbours under the cost, adds them to the anchors
        (``discovered_``), refits MRD and infers the remaining rows again; it stops when no
        pair qualifies or after ``max_rounds``. This is the paper's future work ("adding only
        pairs which the model are relatively certain about and update the model", section 5).
        With at least ``MIN_CALIBRATION_PAIRS`` given anchor pairs, the anchors judge each round: the round
        is kept unless the FOSCTTM of the anchor pairs among the rows unaligned when self-training began (a
        tied row by its entity's posterior) is higher after it than before (a tie, often at 0 where the
        anchors are few and easy, keeps it); otherwise the model goes back to the state before the round and
        self-training stops (tied pairs that look certain can be wrong on real data, and a refit can lose more
        than right pairs bring: ``benchmarks/RESULTS.md``, "Self-training from the current fit"). With
        ``training="all_rows"`` on the collapsed engine the anchor pairs are held out of ``HELD_OUT_FOLDS``
        short continuations of the fit before and after the round (:meth:`_held_out_pairs`, as
        ``calibration_pairs="held_out"`` places them), each pair placed by its own views as an unaligned row
        is; otherwise (the paper's anchors-only MRD, the SVI engine) they are inferred again under the fitted
        model, which was fitted around them: their FOSCTTM then rises after rounds that tie only right pairs
        and help, and such rounds are undone (``benchmarks/RESULTS.md``, "A self-training round judged by
        held-out anchors").
        Appends one entry per round to ``self_training_history_``.

        What each step increases (hard EM over the correspondence): the matching step picks the
        pairs of highest posterior match probability under the current model (the E-step,
        truncated to the confident mutual pairs); tying a pair makes its two rows one entity, and
        the refit maximises the bound of the model in which those rows share one latent point (the
        M-step). With ``training="all_rows"`` the refit starts from the current q(X) means (a new pair's
        entity at the mean of its two rows', the hyperparameters afresh, as a correspondence round does;
        refitted from scratch instead, the nonlinear toy's rounds could lose a shared dimension:
        ``benchmarks/RESULTS.md``, "Self-training from the current fit"); the paper's anchors-only MRD is
        fitted to the enlarged anchor set from its start, as the first fit was. With ``training="all_rows"``
        the bound is the collapsed bound of the whole data set under the new correspondence, so the bounds of
        successive rounds compare models of the same rows (``self_training_history_["elbo"]``); with
        ``training="anchors"`` it is the bound of the enlarged anchor set, and the rounds' bounds are not
        comparable.
        """
        self._check_fitted()
        problem = self.problem_
        self._check_self_training(problem, confidence_threshold, max_rounds)
        a, b = problem.views.names
        self._self_train_rounds(a, b, float(confidence_threshold), int(max_rounds), truth=_truth_pairs(problem, a, b))
        added = sum(entry["added"] for entry in self.self_training_history_)
        if self.bootstrap_ is not None:
            self.bootstrap_["self_training_added"] = int(added)
            if added == 0:
                start = f"{len(self.bootstrap_['pairs'])} unsupervised starting pairs ({self.bootstrap_['method']})"
                warnings.warn(f"MAD without anchors: self-training added no pair to the {start}, "
                              "so nothing confirmed them; the alignment is likely wrong (a mirror image is common). "
                              "Check bootstrap_ and give a few anchors if you can", RuntimeWarning, stacklevel=3)
        if not getattr(self, "_in_fit", False):  # called on its own, after fit
            self._report_convergence()
        return self

    # -- the hooks of PosteriorMatching._self_train_rounds ----------------------------------------
    def _tie(self, a, b, index_a, index_b, probability, cost, round_) -> None:
        """Add the pairs to the anchors (``discovered_``) and refit; the all-rows model goes on from the current
        q(X) (a new pair's entity at the mean of its two rows'; refitted from scratch, a round lost the shared
        dimensions it had)."""
        self._discover(a, b, index_a, index_b, probability, cost, round_)
        self.anchors_ = np.vstack([self.anchors_, np.column_stack([index_a, index_b])])
        self._fit_model(self.problem_, init=self.embedding_)

    def _n_tied(self) -> int:
        return len(self.anchors_)

    def _holds_out_anchors(self) -> bool:
        """Whether the anchor pairs can be held out of continuations of the fit (:meth:`_held_out_pairs`)."""
        return self.training == "all_rows" and self.engine == "collapsed"

    def _bound(self) -> float:
        return float(self.model_.elbo())

    def _snapshot(self) -> dict:
        return {**self.__dict__, "discovered_": copy.deepcopy(self.discovered_)}  # _discover adds in place

    def _restore(self, state: dict) -> None:
        self.__dict__.update(state)

    def _discovered_between(self, a, b) -> dict | None:
        """The pairs bootstrap / self-training discovered between a and b, oriented (a, b) (they are stored under
        the order they were found in), or None."""
        if (a, b) in self.discovered_:
            return self.discovered_[(a, b)]
        found = self.discovered_.get((b, a))
        if found is None:
            return None
        return {**found, "index_a": found["index_b"], "index_b": found["index_a"]}

    def _discover(self, a, b, index_a, index_b, probability, cost, round_) -> None:
        found = self.discovered_.setdefault((a, b), {k: np.zeros(0, t) for k, t in (
            ("index_a", np.int64), ("index_b", np.int64), ("probability", float), ("cost", float),
            ("round", np.int64))})
        for key, value in (("index_a", index_a), ("index_b", index_b), ("probability", probability),
                           ("cost", cost), ("round", np.full(len(index_a), round_))):
            found[key] = np.concatenate([found[key], np.asarray(value, found[key].dtype)])

    def _fit_bootstrapped(self, problem: AlignmentProblem, n_bootstrap: int | None, bootstrap,
                          reflections: int | None, confidence_threshold: float, max_rounds: int) -> None:
        """No anchors: from each unsupervised candidate's pairs (``_bootstrap_candidates``) the model fitted and
        self-trained; the candidate whose self-training confirmed the most pairs is kept (hard EM extends a
        start as far as the rest of the data supports it; a start it cannot extend at all is not supported,
        which :meth:`self_train` warns about), the highest final bound among those equally extended; its
        warnings re-issued, the others' dropped. Sets ``bootstrap_`` with every candidate's record. (Until
        2026-11-25 the highest bound among the extended candidates was kept: on "linear_shared_private" seed 2
        it kept a mirror image extended by 11 pairs over the right candidate extended by 52;
        benchmarks/RESULTS.md, "Zero anchors: the candidate self-training extends most".)

        With several candidates every fit (and every later refit of the one kept) uses p(X) = N(0, I)
        whatever ``latent_prior`` says (``latent_prior_`` records it): the graph prior is built over the
        entities, which each candidate's pairs merge differently, so its bounds would compare different
        priors as much as different correspondences (on "linear_shared_private" seed 1 it preferred a
        mirror image by 29 nats; under N(0, I) the right candidate wins by 297; benchmarks/RESULTS.md,
        "Zero anchors")."""
        a, b = problem.views.names
        candidates = self._bootstrap_candidates(problem, n_bootstrap, bootstrap, reflections)
        if len(candidates) > 1:
            self._fit_prior = "standard_normal"
        truth = _truth_pairs(problem, a, b)
        records, found, best = [], [], None  # best: ((pairs self-training added, final bound), k, state, warnings)
        for k, (method, signs, pairs, scores, n_mutual) in enumerate(candidates):
            correct = None if truth is None else int(sum((int(i), int(j)) in truth for i, j in pairs))
            self.anchors_, self.discovered_, self.self_training_history_ = pairs, {}, []
            self.start_ = None  # each candidate's first fit tries every start
            self.bootstrap_ = {"method": method, "n_mutual_pairs": n_mutual, "pairs": pairs, "correct": correct}
            # their scores (n T_ij or exp(-dist / delta^2)) stand in for probabilities (not calibrated)
            self._discover(a, b, pairs[:, 0], pairs[:, 1], np.clip(scores, 0.0, 1.0), np.zeros(len(pairs)), 0)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                self._fit_model(problem)
                self.self_train(confidence_threshold, max_rounds)
            bound = float(self.model_.elbo())
            added = int(sum(h["added"] for h in self.self_training_history_))
            records.append({"method": method, "signs": signs, "n_pairs": int(len(pairs)), "correct": correct,
                            "bound": bound, "self_training_added": added})
            found.append(self.anchors_.copy())  # its bootstrap and self-training pairs, for the agreement below
            if best is None or (added, bound) > best[0]:
                best = ((added, bound), k, dict(self.__dict__), list(caught))
        _, chosen, state, caught = best
        self.__dict__.update(state)
        self.bootstrap_.update(candidates=records, chosen=chosen)
        for w in caught:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        self._check_rival_candidates(a, b, records, found, chosen)

    def _check_rival_candidates(self, a, b, records: list, found: list, chosen: int) -> None:
        """Warn when a candidate that pairs the rows differently had nearly as much support as the one kept.

        Each candidate's pairs (its bootstrap pairs and those its self-training added) are read against the
        kept alignment (its own pairs, and the optimal assignment of the other rows under the fitted model):
        ``agreement`` is the fraction of them it reproduces, recorded in ``bootstrap_["candidates"]``. A
        candidate that agrees with fewer than half of its pairs is a rival, a different correspondence; if a
        rival's self-training added at least ``RIVAL_SUPPORT`` times the pairs the kept one's did, the data
        support two correspondences about equally and the choice between them is close to a coin toss: a
        RuntimeWarning says so and ``bootstrap_["ambiguous"]`` is True (the threshold's evidence, right and wrong
        pairings of the linear toys: benchmarks/RESULTS.md, "Zero anchors"). Since the candidate self-training
        extends most is kept, a wrong one can also stand
        alone with little support: when it confirmed fewer than ``WEAK_SUPPORT`` of the rows its bootstrap
        pairs left, a RuntimeWarning says so and ``bootstrap_["weak_support"]`` is True."""
        rows_a, ma, va, rows_b, mb, vb, _ = self._candidates(a, b)
        kept = {int(i): int(j) for i, j in self.anchors_[:, :2]}
        if rows_a.size and rows_b.size:
            al = posterior_assignment(self.cost, ma, va, mb, vb)
            kept.update(zip(rows_a[al.index_a].tolist(), rows_b[al.index_b].tolist()))
        support = records[chosen]["self_training_added"]
        rivals = []
        for k, (record, pairs) in enumerate(zip(records, found)):
            record["agreement"] = float(np.mean([kept.get(int(i)) == int(j) for i, j in pairs[:, :2]]))
            if k != chosen and record["agreement"] < 0.5 and record["self_training_added"] >= RIVAL_SUPPORT * support:
                rivals.append(k)
        self.bootstrap_["ambiguous"] = bool(rivals) and support > 0
        # the rows the kept candidate's self-training could confirm: those its bootstrap pairs left (fewer than
        # WEAK_SUPPORT of them confirmed: a start the data barely extend; none: self_train has warned already)
        left = min(self.problem_.views.n_samples[a], self.problem_.views.n_samples[b]) - records[chosen]["n_pairs"]
        self.bootstrap_["weak_support"] = 0 < support < WEAK_SUPPORT * left
        if self.bootstrap_["weak_support"]:
            warnings.warn(f"MAD without anchors: self-training confirmed only {support} of the {left} rows left to "
                          f"match from the kept candidate's pairs (fewer than WEAK_SUPPORT = {WEAK_SUPPORT:.0%}): the "
                          "data barely support the alignment, which is likely wrong (a mirror image is common). "
                          "Check bootstrap_['candidates'] and give a few anchors", RuntimeWarning, stacklevel=4)
        if self.bootstrap_["ambiguous"]:
            rival = records[max(rivals, key=lambda k: records[k]["self_training_added"])]

            def label(record):
                return " ".join([record["method"], *([str(tuple(record["signs"]))] if record["signs"] else [])])

            warnings.warn(f"MAD without anchors: the alignment is ambiguous. The kept candidate "
                          f"({label(records[chosen])}) was extended by "
                          f"{support} pairs in self-training, and a candidate that pairs the rows differently "
                          f"({label(rival)}, {rival['agreement']:.0%} of its pairs agree) "
                          f"by {rival['self_training_added']}: the data support both about equally. Check "
                          "bootstrap_['candidates'] and give a few anchors", RuntimeWarning, stacklevel=4)

    def _bootstrap_methods(self, bootstrap) -> tuple:
        """The unsupervised initialisers a fit without anchors tries: ``bootstrap`` (a name or a sequence of
        names of ``bayesalign.bootstrap.BOOTSTRAPS``), by default Gromov-Wasserstein and the shared-subspace
        Procrustes search with ``training="all_rows"`` (their candidates compared by the bound),
        Gromov-Wasserstein alone with ``training="anchors"``."""
        from .bootstrap import BOOTSTRAPS

        if bootstrap is None:
            bootstrap = ("gromov_wasserstein",) if self.training == "anchors" else DEFAULT_BOOTSTRAPS
        methods = (bootstrap,) if isinstance(bootstrap, str) else tuple(bootstrap)
        if not methods or any(m not in BOOTSTRAPS for m in methods):
            raise ValueError(f"bootstrap must be one of {BOOTSTRAPS} or a sequence of them, got {bootstrap!r}")
        if len(methods) > 1 and self.training == "anchors":
            raise ValueError("several bootstraps need training='all_rows': their candidates are compared by their "
                             "bounds, and the anchors-only bound covers different rows for each")
        return methods

    def _bootstrap_candidates(self, problem: AlignmentProblem, n_bootstrap: int | None, bootstrap,
                              reflections: int | None) -> list:
        """Unsupervised starting anchors: per candidate (one per reflection start of Gromov-Wasserstein, one
        for each other method) ``(method, signs, pairs (k, 2), scores (k,), mutual pairs found)``, its
        ``n_bootstrap`` highest-scored mutual pairs of :func:`bayesalign.bootstrap.unsupervised_pairs`
        (which, like the start, reads a missing entry as its column's mean)."""
        from .bootstrap import reflection_starts, unsupervised_pairs

        a, b = problem.views.names
        methods = self._bootstrap_methods(bootstrap)
        k = max(MIN_ANCHORS, 2 * int(self.latent_dim)) if n_bootstrap is None else int(n_bootstrap)
        if k < MIN_ANCHORS:
            raise ValueError(f"n_bootstrap must be at least {MIN_ANCHORS}, got {n_bootstrap!r}")
        if reflections is None:
            reflections = 0 if self.training == "anchors" else 2
        if isinstance(reflections, bool) or not isinstance(reflections, (int, np.integer)) or reflections < 0:
            raise ValueError(f"bootstrap_reflections must be an int >= 0, got {reflections!r}")
        if reflections and self.training == "anchors":
            raise ValueError("bootstrap_reflections > 0 needs training='all_rows': the candidates are compared by "
                             "their bounds, and the anchors-only bound covers different rows for each")
        views = _mean_filled(problem.views) if any(problem.views.n_missing.values()) else problem.views
        Ya, Yb = views[a], views[b]
        candidates, found = [], []
        for method in methods:
            starts = [((), None)]
            if method == "gromov_wasserstein" and reflections > 0:
                starts = reflection_starts(Ya, Yb, n_axes=int(reflections))
            for signs, start in starts:
                try:
                    pairs_all, weights = unsupervised_pairs(Ya, Yb, method, views=(a, b), init=start)
                except ValueError as exc:  # e.g. a view with one column has no plane for the subspace search
                    if bootstrap is not None or len(methods) == 1:
                        raise
                    warnings.warn(f"MAD without anchors: the {method!r} bootstrap cannot run on these views ({exc}); "
                                  f"only the other bootstraps' candidates are compared", RuntimeWarning, stacklevel=4)
                    continue
                order = np.argsort(-weights, kind="stable")[:k]
                found.append(int(order.size))
                if order.size >= MIN_ANCHORS:
                    candidates.append((method, tuple(int(x) for x in signs), pairs_all[order].astype(np.int64),
                                       weights[order], int(len(pairs_all))))
        if not candidates:
            raise ValueError(f"the unsupervised bootstrap found at most {max(found)} mutual pairs; MAD needs at least "
                             f"{MIN_ANCHORS}: give a few anchors")
        return candidates

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
        is exactly ``MRD.infer``. With ``engine="svi"`` q(u) is the fitted variational
        distribution, not one derived from rows, so it is not refreshed: every arrival is
        inferred as :meth:`StochasticMRD.infer <bayesalign.gp.StochasticMRD.infer>` infers a new
        row, and only the used-up rows of a carry the stream's history.

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
        y = self._rows_as_fitted(b, np.asarray(y, dtype=np.float64).reshape(1, -1))
        state = self._stream.get((a, b))
        if state is None:
            rows_a, mean_a, var_a, _, _, _, dims = self._candidates(a, b)
            state = self._stream[(a, b)] = {"rows": rows_a, "mean": mean_a, "var": var_a, "dims": dims,
                                            "misfit": self._misfit_for(a, b),
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
        mean, var = mean[:, dims], var[:, dims]
        if state["misfit"] is not None:  # compared as the unaligned rows of a are (_candidates)
            mean, var = state["misfit"].apply(mean, var)
        if self.cost == "mean":
            c = mean_distance_cost(state["mean"][free], mean)[:, 0]
        else:
            c = likelihood_cost(state["mean"][free], state["var"][free], mean, var)[:, 0]
        k = int(np.argmin(c))
        if cost_limit is not None and c[k] > float(cost_limit):
            return -1, float(c[k])
        state["free"][free[k]] = False
        return int(state["rows"][free[k]]), float(c[k])

    def reset_stream(self) -> None:
        """Forget the rows streamed by :meth:`match_one` (every row of a is free again)."""
        self._stream = {}

    def _rows_as_fitted(self, view: str, Y: np.ndarray) -> np.ndarray:
        """New rows [n, p] of ``view`` as the fitted model saw that view's rows: with ``standardize=True``
        mapped by the training view's column means and deviations (``Views.column_scaling``), else as given."""
        n_columns = self.model_.n_features_in_[view]
        if Y.shape[1] != n_columns:
            raise ValueError(f"view {view!r}: the row has {Y.shape[1]} values, the view has {n_columns} columns")
        if not self.standardize:
            return Y
        centre, scale = self.problem_.views.column_scaling(view)
        return (Y - centre) / scale

    def _infer_streaming(self, view: str, y: np.ndarray, state: dict):
        """q_b(x_t | X_A, X_B-hat): infer against view b's q(u) refreshed with the arrived rows (``y`` and
        the arrived rows as the model saw its training rows, :meth:`_rows_as_fitted`)."""
        model = self.model_
        if self.engine == "svi":  # q(u) is fitted, not derived from rows: nothing to refresh (match_one)
            return model.infer(view, y)
        context = None
        if state["Y"]:
            context = (np.asarray(state["Y"]), np.asarray(state["q_mean"]), np.asarray(state["q_var"]))
        return model.infer(view, y, progress=False, context=context)

    # -- alignment -------------------------------------------------------------------------
    def _check_fitted(self):
        if not hasattr(self, "model_"):
            raise AttributeError("this MAD is not fitted yet; call fit first")

    def shared_dims(self, a, b) -> np.ndarray:
        """The latent dimensions shared by views a and b (by ``shared_by_``)."""
        a, b = self._pair(a, b)
        return self.shared_dims_[(a, b)] if (a, b) in self.shared_dims_ else self.shared_dims_[(b, a)]

    def _candidates(self, a, b, cost=None):
        """Rows of a and b to match (unaligned and not yet paired between a and b) and their posteriors in the
        shared dimensions, as ``cost`` (default ``self.cost``) compares them: with the likelihood cost and a
        cross-view misfit, in the misfit's basis with the misfit added (:meth:`CrossViewMisfit.apply`)."""
        rows_a, ma, va, rows_b, mb, vb, dims = self._shared_posteriors(a, b)
        misfit = self._misfit_for(a, b, cost)
        if misfit is not None:
            (ma, va), (mb, vb) = misfit.apply(ma, va), misfit.apply(mb, vb)
        return rows_a, ma, va, rows_b, mb, vb, dims

    def _misfit_for(self, a, b, cost=None) -> CrossViewMisfit | None:
        """The misfit ``cost`` adds between a and b (None for the mean cost or ``misfit=None``)."""
        cost = self.cost if cost is None else cost
        if cost != "likelihood" or self._misfit_rule() is None:
            return None
        return self.cross_view_misfit(a, b)

    def _misfit_rule(self) -> str | None:
        """``misfit`` with "auto" resolved by the engine."""
        rule = getattr(self, "misfit", None)
        if rule == "auto":
            return "anchors" if self.engine == "collapsed" else None
        return rule

    def cross_view_misfit(self, a=None, b=None) -> CrossViewMisfit | None:
        r"""How far views a and b put the same point beyond their posterior variances, from the anchors.

        Each anchor pair (i, t) is inferred again view by view, q_a(x_i) from y_i of a alone and
        q_b(x_t) from y_t of b alone (``MRD.infer``, the fitted model fixed), as if unaligned; in the
        shared dimensions their means differ by more than S_i + S_t allows wherever the two views'
        mappings, learned from finitely many rows, do not invert to the same point. The covariance of
        that excess, Sigma_tau (:func:`bayesalign.matching.fit_misfit`: the second moments of the
        differences less the mean posterior variances, projected onto the positive semi-definite cone),
        is what the likelihood cost adds: ``-log N(mu_i - mu_j; 0, S_i + S_j + Sigma_tau)``. It also
        weighs the shared dimensions by how well the two views agree on them, where the resolution
        rule only says that each view alone resolves them. The anchors shaped the model, so Sigma_tau
        is if anything too small. Fewer than ``MIN_CALIBRATION_PAIRS`` anchor pairs: a RuntimeWarning
        and None (the posterior variances alone). Cached in ``misfit_``.
        """
        self._check_fitted()
        a, b = self._pair(a, b)
        key = (a, b) if (a, b) in self.shared_dims_ else (b, a)
        self._shared_posteriors(*key)  # raises, naming the rule, when the views share no dimension
        if key not in self.misfit_:
            anchors = self.problem_.anchors_between(*key, implied=True)
            if len(anchors) < MIN_CALIBRATION_PAIRS:
                warnings.warn(f"views {key[0]!r} and {key[1]!r} have {len(anchors)} anchor pairs, fewer than "
                              f"MIN_CALIBRATION_PAIRS = {MIN_CALIBRATION_PAIRS}, to estimate their cross-view misfit "
                              f"on; the likelihood cost uses the posterior variances alone", RuntimeWarning,
                              stacklevel=3)
                self.misfit_[key] = None
            else:
                self.misfit_[key] = fit_misfit(*self._reinferred_anchors(*key))
        return self.misfit_[key]

    def _reinferred_anchors(self, a, b) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The anchor pairs between a and b, each inferred again from its own view alone under the fitted model,
        in the shared dimensions: (mean_a, var_a, mean_b, var_b) [n, |shared|], row k the k-th anchor pair
        (cached until the next fit)."""
        if (a, b) not in self._reinferred:
            dims = self.shared_dims(a, b)
            anchors = self.problem_.anchors_between(a, b, implied=True)
            views = self._views(self.problem_)
            xa = [np.asarray(z, np.float64)[:, dims] for z in self._infer_rows(a, views[a][anchors.index_a])]
            xb = [np.asarray(z, np.float64)[:, dims] for z in self._infer_rows(b, views[b][anchors.index_b])]
            self._reinferred[(a, b)] = (xa[0], xa[1], xb[0], xb[1])
        return self._reinferred[(a, b)]

    def _held_out_pairs(self, a, b) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The anchor pairs between a and b held out of a warm continuation of the fit, in the shared dimensions:
        (mean_a, var_a, mean_b, var_b) [n, |shared|], row k the k-th anchor pair (cached until the next fit).

        The pairs fall into ``HELD_OUT_FOLDS`` folds (seeded by ``seed``). For each fold the fitted MRD is
        copied with the fold's rows of b split from the entities they share with a
        (:meth:`bayesalign.gp.MRD.split_entities`; the graph prior rebuilt over the enlarged set of entities,
        each split row keeping its own view's neighbours, the kept correspondence round's edges included)
        and continued for ``HELD_OUT_FRACTION`` of MRD's ``max_iter`` evaluations, every other parameter warm.
        Each split row starts where its own view alone places it (``split_entities(start="inferred")``; a copy of
        the pair's q(x) kept the variance of a point both views pin down through the continuation) and is then
        placed by its own view and its neighbours, as an unaligned row is, in a model that keeps the other
        folds' anchors: unlike an anchor inferred again from the fitted model, whose mappings
        and neighbours were fitted around one latent point for both of its rows, it is exchangeable with the
        unaligned rows it calibrates (up to the fold's anchors the model lacks). The fitted model is unchanged.
        """
        if (a, b) not in self._held_out:
            from .gp import MRD

            dims = self.shared_dims(a, b)
            anchors = self.problem_.anchors_between(a, b, implied=True)
            n_entities, rows = self.entities_
            views = self._views(self.problem_)
            if any(views.n_missing.values()):  # the graph sees a missing entry as its column's mean, as the fit
                views = _mean_filled(views)
            budget = max(int(HELD_OUT_FRACTION * int((self.mrd_options or {}).get("max_iter", MRD().max_iter))), 1)
            n = len(anchors)
            out = [np.empty((n, dims.size)) for _ in range(4)]
            for fold in np.array_split(as_rng(self.seed).permutation(n), min(HELD_OUT_FOLDS, n)):
                fold = fold[np.argsort(anchors.index_b[fold])]  # split_entities numbers new entities in row order
                rows_b = anchors.index_b[fold]
                split = {**rows, b: rows[b].copy()}
                split[b][rows_b] = n_entities + np.arange(fold.size)
                prior = self._entity_prior(views, split, n_entities + fold.size, getattr(self, "_prior_edges", None))
                model = self.model_.split_entities(b, rows_b, latent_prior=prior, start="inferred",
                                                   infer_max_iter=int(self.infer_max_iter))
                model._warn_convergence = False  # a held-out fold's share of the budget, not the kept fit
                model.continue_fit(budget)
                mean, var = model.entity_means_, model.entity_variances_
                for k, entity in ((0, rows[a][anchors.index_a[fold]]), (2, split[b][rows_b])):
                    out[k][fold], out[k + 1][fold] = mean[entity][:, dims], var[entity][:, dims]
            self._held_out[(a, b)] = tuple(out)
        return self._held_out[(a, b)]

    def _shared_posteriors(self, a, b):
        """Rows of a and b to match (unaligned and not yet paired between a and b) and their posteriors in the
        shared dimensions, as the model gives them."""
        dims = self.shared_dims(a, b)
        if len(dims) == 0:
            raise ValueError(f"views {a!r} and {b!r} share no latent dimension (shared_by={self.shared_by_!r}, "
                             f"{self._shared_rule_text()}): there is nothing to match them in")
        rows_a, mean_a, var_a = self.posteriors_[a]
        rows_b, mean_b, var_b = self.posteriors_[b]
        anchored = self.problem_.anchors_between(a, b, implied=True)
        keep_a = ~np.isin(rows_a, anchored.index_a)
        keep_b = ~np.isin(rows_b, anchored.index_b)
        return (rows_a[keep_a], mean_a[keep_a][:, dims], var_a[keep_a][:, dims],
                rows_b[keep_b], mean_b[keep_b][:, dims], var_b[keep_b][:, dims], dims)

    def _anchor_pool(self, a, b, cost=None, held_out: bool = False, rows=None):
        """The unaligned rows of a and b with the anchor pairs appended, each anchor inferred again from
        its own view alone (the fitted model fixed, as if unaligned; ``held_out``: held out of a continuation
        of the fit instead, :meth:`_held_out_pairs`): the pools' posteriors (means,
        variances) [n_a + n, |shared|] and [n_b + n, |shared|] in the shared dimensions, as ``cost``
        compares them (:meth:`_candidates`, the misfit from the re-inferred anchors), and the positions of the
        n true anchor pairs in them. ``rows`` (rows of a, rows of b) replaces the unaligned rows by those
        rows' posteriors in the fit (a pair self-training tied: its entity's), so that pools of fits with
        different discovered pairs hold the same rows."""
        if rows is None:
            _, ma, va, _, mb, vb, _ = self._candidates(a, b, cost)
        else:
            emb, dims = self._match_embedding(a, b, self.cost if cost is None else cost)
            ma, va = emb.means[a][rows[0]][:, dims], emb.variance_of(a)[rows[0]][:, dims]
            mb, vb = emb.means[b][rows[1]][:, dims], emb.variance_of(b)[rows[1]][:, dims]
        xa_mean, xa_var, xb_mean, xb_var = (self._held_out_pairs(a, b) if held_out else
                                            self._reinferred_anchors(a, b))
        misfit = self._misfit_for(a, b, cost)
        if misfit is not None:
            (xa_mean, xa_var), (xb_mean, xb_var) = misfit.apply(xa_mean, xa_var), misfit.apply(xb_mean, xb_var)
        n = xa_mean.shape[0]
        pool_a = (np.vstack([ma, xa_mean]), np.vstack([va, xa_var]))  # unaligned rows of a, then the anchors
        pool_b = (np.vstack([mb, xb_mean]), np.vstack([vb, xb_var]))
        return pool_a, pool_b, ma.shape[0] + np.arange(n), mb.shape[0] + np.arange(n)

    def _calibration_pool(self, a, b, cost=None):
        """The pool the temperature is fitted on (``calibration_pairs``): :meth:`_anchor_pool`."""
        return self._anchor_pool(a, b, cost, held_out=self.calibration_pairs == "held_out")

    def _calibration_method(self) -> str:
        return (f"anchors held out of {HELD_OUT_FOLDS} continuations" if self.calibration_pairs == "held_out"
                else "anchor re-inference")

    def _infer_rows(self, view, Y):
        """q(x) [n, Q] (means, variances) of rows seen in ``view`` only, under the fitted model."""
        if self.engine == "svi":
            return self.model_.infer(view, Y)
        return self.model_.infer(view, Y, max_iter=int(self.infer_max_iter))

    def _align_info(self, a, b, cost, dims) -> dict:
        """What :meth:`align` adds to the alignment's ``info``: the shared dimensions, their rule, the misfit."""
        return {"shared_dims": dims.tolist(), "shared_by": self.shared_by_, "shared_threshold": self.shared_threshold_,
                "misfit": self._misfit_for(a, b, cost) is not None}

    def _match_embedding(self, a, b, cost):
        """(embedding, dims) that :func:`~bayesalign.matching.match` compares a and b in: ``embedding_`` and the
        shared dimensions, or, with a cross-view misfit, every row's shared coordinates in the misfit's
        basis with the misfit added to the variances (as :meth:`_candidates`)."""
        dims = self.shared_dims(a, b)
        misfit = self._misfit_for(a, b, cost)
        if misfit is None:
            return self.embedding_, dims
        emb = self.embedding_
        moved = {v: misfit.apply(emb.means[v][:, dims], emb.variance_of(v)[:, dims]) for v in (a, b)}
        return (LatentEmbedding({v: m for v, (m, _) in moved.items()}, {v: s for v, (_, s) in moved.items()},
                                method="mad"), np.arange(len(dims)))
