"""Tests of bayesalign.metrics against brute force and hand-computed values."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from bayesalign import metrics
from bayesalign.data import Alignment, AlignmentProblem, Correspondence, LatentEmbedding


# ----------------------------------------------------------------------------------------
# Kendall tau distance
# ----------------------------------------------------------------------------------------
def brute_kendall(pred, true):
    """O(m^2) count in view a's order: row i effectively holds r_i, the true a-partner of its
    predicted partner; rows whose own or whose partner's truth is unknown are not scored; ties
    (two rows sent to one row of b) count half."""
    true_a_of_b = {b: a for a, b in enumerate(true) if b >= 0}
    r = {i: true_a_of_b[pred[i]] for i in range(len(pred))
         if pred[i] >= 0 and true[i] >= 0 and pred[i] in true_a_of_b}
    discordant = 0.0
    pairs = 0
    for k, q in itertools.combinations(sorted(r), 2):
        pairs += 1
        s = (r[k] - r[q]) * (k - q)
        discordant += 1.0 if s < 0 else (0.5 if r[k] == r[q] else 0.0)
    return discordant / pairs if pairs else float("nan")


def test_kendall_tau_ignores_the_labelling_of_view_b():
    # the same matching with view b's rows relabelled scores the same (paper: sequence order)
    rng = np.random.default_rng(5)
    n = 60
    true = np.arange(n)
    pred = true.copy()
    swaps = rng.choice(n - 1, size=6, replace=False)
    pred[swaps], pred[swaps + 1] = pred[swaps + 1], pred[swaps].copy()  # a few local swaps
    relabel = rng.permutation(n)
    assert metrics.kendall_tau_distance(relabel[pred], relabel[true]) == pytest.approx(
        metrics.kendall_tau_distance(pred, true), abs=1e-12)
    assert metrics.kendall_tau_distance(pred, true) < 0.01


def test_kendall_tau_matches_brute_force():
    rng = np.random.default_rng(0)
    for n in (2, 3, 7, 40, 150):
        for _ in range(5):
            true = rng.permutation(n)
            pred = rng.permutation(n)
            pred[rng.random(n) < 0.2] = -1  # unmatched rows are not scored
            true[rng.random(n) < 0.1] = -1  # rows with no true partner are not scored
            expected = brute_kendall(pred, true)
            if np.isnan(expected):
                assert np.isnan(metrics.kendall_tau_distance(pred, true))
                continue
            assert metrics.kendall_tau_distance(pred, true) == pytest.approx(expected, abs=1e-12)


def test_kendall_tau_with_ties_in_the_prediction():
    rng = np.random.default_rng(1)
    for _ in range(10):
        true = rng.permutation(30)
        pred = rng.integers(0, 8, size=30)  # many-to-one: many ties
        assert metrics.kendall_tau_distance(pred, true) == pytest.approx(brute_kendall(pred, true), abs=1e-12)
    assert metrics.kendall_tau_distance(np.zeros(5, int), np.arange(5)) == 0.5


def test_kendall_tau_extremes_and_random():
    n = 2000
    assert metrics.kendall_tau_distance(np.arange(n), np.arange(n)) == 0.0
    assert metrics.kendall_tau_distance(np.arange(n)[::-1].copy(), np.arange(n)) == 1.0
    rng = np.random.default_rng(2)
    values = [metrics.kendall_tau_distance(rng.permutation(n), np.arange(n)) for _ in range(5)]
    # for random permutations the mean is 1/2 with sd sqrt((2n + 5) / (18 n (n - 1))) ~ 0.0075
    assert abs(np.mean(values) - 0.5) < 3 * 0.0075 / np.sqrt(5)
    assert np.isnan(metrics.kendall_tau_distance([0, -1], [0, 1]))


def test_kendall_tau_from_alignment_and_problem():
    # views a, b with 6 rows; rows 0, 1 are anchors; true partner of i is 5 - i
    truth = Correspondence.from_pairs([(i, 5 - i) for i in range(6)], views=("a", "b"))
    anchors = truth.subset([0, 1])
    rng = np.random.default_rng(3)
    problem = AlignmentProblem({"a": rng.normal(size=(6, 2)), "b": rng.normal(size=(6, 2))},
                               anchors=anchors, truth=truth)
    # the matcher saw rows 2..5 of a and rows 0..3 of b; it swapped the partners of rows 2 and 3
    al = Alignment(("a", "b"), [2, 3, 4, 5], [2, 3, 1, 0], candidates_a=[2, 3, 4, 5], candidates_b=[0, 1, 2, 3])
    pred = np.array([-1, -1, 2, 3, 1, 0])
    true = np.array([-1, -1, 3, 2, 1, 0])
    expected = brute_kendall(pred, true)
    assert expected == pytest.approx(1 / 6)
    assert metrics.kendall_tau_distance(al, problem) == pytest.approx(expected)
    assert metrics.kendall_tau_distance(al, truth) == pytest.approx(expected)
    assert metrics.matching_accuracy(al, problem) == 0.5
    # the reversed alignment against the reversed truth scores the same
    flipped = Alignment(("b", "a"), [2, 3, 1, 0], [2, 3, 4, 5])
    assert metrics.kendall_tau_distance(flipped, problem) == pytest.approx(1 / 6)


def test_matching_accuracy_counts_unmatched_as_wrong():
    truth = Correspondence.identity(5, views=("a", "b"))
    al = Alignment.from_permutation([0, 1, 3, -1, 4], views=("a", "b"), n_b=5)
    assert metrics.matching_accuracy(al, truth) == pytest.approx(3 / 5)
    with pytest.raises(ValueError, match="not"):
        metrics.matching_accuracy(al, Correspondence.identity(5, views=("a", "c")))


# ----------------------------------------------------------------------------------------
# Ranks: top-k, MRR, FOSCTTM
# ----------------------------------------------------------------------------------------
def brute_ranks(D, true):
    """For each row i, (# strictly closer, # tied other than the partner) by direct loops."""
    closer, tied = [], []
    for i, t in enumerate(true):
        closer.append(sum(D[i, j] < D[i, t] for j in range(D.shape[1])))
        tied.append(sum(D[i, j] == D[i, t] for j in range(D.shape[1]) if j != t))
    return np.array(closer), np.array(tied)


def random_tie_break_mc(D, true, k, draws, rng):
    """Monte Carlo of top-k and MRR with random tie-breaking (an independent reference)."""
    hits, rr = 0.0, 0.0
    for _ in range(draws):
        jitter = rng.random(D.shape) * 1e-6  # distances are integers: jitter only breaks ties
        rank = ((D + jitter) < (D + jitter)[np.arange(len(true)), true][:, None]).sum(1) + 1
        hits += np.mean(rank <= k)
        rr += np.mean(1.0 / rank)
    return hits / draws, rr / draws


def test_top_k_and_mrr_against_brute_force_with_ties():
    rng = np.random.default_rng(4)
    D = rng.integers(0, 4, size=(12, 12)).astype(float)  # integer distances: many ties
    true = rng.permutation(12)
    closer, tied = brute_ranks(D, true)
    for k in (1, 2, 5):
        exact = np.mean(np.clip((k - closer) / (tied + 1), 0, 1))
        assert metrics.top_k_accuracy(D, true, k=k) == pytest.approx(exact)
    exact_mrr = np.mean([np.mean(1 / np.arange(c + 1, c + e + 2)) for c, e in zip(closer, tied)])
    assert metrics.mean_reciprocal_rank(D, true) == pytest.approx(exact_mrr)
    mc_top2, mc_mrr = random_tie_break_mc(D, true, 2, 4000, rng)
    assert metrics.top_k_accuracy(D, true, k=2) == pytest.approx(mc_top2, abs=0.01)
    assert metrics.mean_reciprocal_rank(D, true) == pytest.approx(mc_mrr, abs=0.01)


def test_top_k_from_embedding_equals_sorting(monkeypatch):
    rng = np.random.default_rng(5)
    za, zb = rng.normal(size=(50, 3)), rng.normal(size=(60, 3))
    extra = rng.normal(size=(50, 1))
    emb = LatentEmbedding({"a": np.hstack([za, extra]), "b": np.hstack([zb, rng.normal(size=(60, 1))])},
                          shared_dims=[0, 1, 2])
    truth = Correspondence.from_pairs(np.column_stack([np.arange(50), rng.permutation(60)[:50]]), ("a", "b"))
    D = np.linalg.norm(za[:, None] - zb[None], axis=2)  # only the shared dimensions count
    order = np.argsort(D, axis=1)
    rank = np.array([np.flatnonzero(order[i] == j)[0] + 1 for i, j in truth.pairs])
    assert metrics.top_k_accuracy(emb, truth, k=1) == pytest.approx(np.mean(rank <= 1))
    assert metrics.top_k_accuracy(emb, truth, k=10) == pytest.approx(np.mean(rank <= 10))
    assert metrics.mean_reciprocal_rank(emb, truth) == pytest.approx(np.mean(1 / rank))
    assert metrics.top_k_accuracy(D, truth, k=10) == pytest.approx(np.mean(rank <= 10))
    monkeypatch.setattr(metrics.retrieval, "_BLOCK_ENTRIES", 7)  # blocks of a single query row
    assert metrics.mean_reciprocal_rank(emb, truth) == pytest.approx(np.mean(1 / rank))


def test_foscttm_hand_example_with_ties():
    # truth: identity. Row queries: 0 -> 0 of 2; 1 -> one closer (0.5) of 2 -> 1/2;
    # 2 -> two ties of 2 -> 1/2. Column queries: 0 -> 0; 1 -> two ties -> 1/2;
    # 2 -> one closer (0.5) and one tie -> 3/4. FOSCTTM = (1/3 + 5/12) / 2 = 0.375
    D = np.array([[0.0, 1.0, 1.0], [2.0, 1.0, 0.5], [1.0, 1.0, 1.0]])
    assert metrics.foscttm(D, np.arange(3)) == pytest.approx(0.375)


def test_foscttm_against_brute_force_on_points():
    rng = np.random.default_rng(6)
    za = rng.integers(0, 3, size=(20, 2)).astype(float)  # points on a grid: many tied distances
    p = rng.permutation(20)
    zb = za[p] + rng.integers(0, 2, size=(20, 2))  # row k of b is row p[k] of a, moved a little
    truth = np.empty(20, int)
    truth[p] = np.arange(20)  # true partner in b of each row of a
    emb = LatentEmbedding({"a": za, "b": zb})
    D = ((za[:, None] - zb[None]) ** 2).sum(-1)
    fa = [(np.sum(D[i] < D[i, t]) + 0.5 * (np.sum(D[i] == D[i, t]) - 1)) / 19 for i, t in enumerate(truth)]
    fb = [(np.sum(D[:, t] < D[i, t]) + 0.5 * (np.sum(D[:, t] == D[i, t]) - 1)) / 19 for i, t in enumerate(truth)]
    assert metrics.foscttm(emb, truth) == pytest.approx((np.mean(fa) + np.mean(fb)) / 2)
    assert metrics.foscttm(D, truth) == pytest.approx((np.mean(fa) + np.mean(fb)) / 2)


def test_retrieval_metrics_skip_anchors_when_given_a_problem():
    # row 0 is an anchor pair; the unaligned rows 1..3 of b sit 0.1 above their partners in a
    za = np.array([[9.0, 9.0], [1.0, 0.0], [2.0, 0.0], [3.0, 0.0]])
    zb = np.array([[9.0, 9.0], [1.0, 0.1], [2.0, 0.1], [3.0, 0.1]])
    truth = Correspondence.identity(4, ("a", "b"))
    problem = AlignmentProblem({"a": za, "b": zb}, anchors=truth.subset([0]), truth=truth)
    emb = LatentEmbedding({"a": za, "b": zb})
    assert metrics.top_k_accuracy(emb, problem, k=1) == 1.0
    assert metrics.foscttm(emb, problem) == 0.0
    # b's anchor moved onto a's unaligned row 2: searched among all rows it takes first place
    # for a2, and a0 (an anchor) no longer finds it; the problem scores unaligned rows only
    zb[0] = [2.0, 0.0]
    emb = LatentEmbedding({"a": za, "b": zb})
    problem = AlignmentProblem({"a": za, "b": zb}, anchors=truth.subset([0]), truth=truth)
    assert metrics.top_k_accuracy(emb, problem, k=1) == 1.0
    assert metrics.top_k_accuracy(emb, truth, k=1) == 0.5


# ----------------------------------------------------------------------------------------
# Label transfer
# ----------------------------------------------------------------------------------------
def test_label_transfer_hand_example():
    za = np.array([[0.0], [0.2], [0.4], [5.0], [5.2]])
    zb = np.array([[0.1], [4.0], [2.6], [5.1]])
    emb = LatentEmbedding({"a": za, "b": zb})
    labels = {"a": np.array(["x", "x", "y", "y", "y"]), "b": np.array(["x", "y", "y", "x"])}
    # k=1: b0 -> a0 (x, right), b1 -> a3 (y, right), b2 -> a2 (y, right), b3 -> a3/a4 (y, wrong)
    assert metrics.label_transfer_accuracy(emb, labels, k=1) == 0.75
    # k=3: b0 -> a0 a1 a2 (x x y: x, right); b1 -> a3 a4 a2 (y, right);
    # b2 (2.6) -> a2 (2.2), a1 (2.4), a3 (2.4): y x y (y, right); b3 -> a3 a4 a2 (y, wrong)
    assert metrics.label_transfer_accuracy(emb, labels, k=3) == 0.75
    problem = AlignmentProblem({"a": za, "b": zb}, labels=labels,
                               anchors=Correspondence.from_pairs([(4, 3)], ("a", "b")))
    assert metrics.label_transfer_accuracy(emb, problem, k=1) == 1.0  # b3 is an anchor: not scored


# ----------------------------------------------------------------------------------------
# Calibration
# ----------------------------------------------------------------------------------------
def probabilistic_alignment():
    # pairs: (0,0) p .95 right; (1,2) p .85 wrong; (2,1) p .55 wrong; (3,3) p .15 right; (4,4) p .05 wrong
    return Alignment(("a", "b"), [0, 1, 2, 3, 4], [0, 2, 1, 3, 4], costs=[0.1, 0.2, 0.3, 0.4, 0.5],
                     probabilities=[0.95, 0.85, 0.55, 0.15, 0.05])


def test_ece_brier_and_precision_hand_examples():
    truth = Correspondence.from_pairs([(0, 0), (1, 1), (2, 2), (3, 3), (4, 5)], ("a", "b"))
    al = probabilistic_alignment()
    # 5 bins of width 0.2: {.95, .85}: conf .9, acc .5 -> 2/5 * .4; {.55}: 1/5 * .55;
    # {.15, .05}: conf .1, acc .5 -> 2/5 * .4.   ECE = .16 + .11 + .16 = .43
    assert metrics.expected_calibration_error(al, truth, n_bins=5) == pytest.approx(0.43)
    # 10 bins: {.95}: .05; {.85}: .85; {.55}: .55; {.15}: .85; {.05}: .05 -> (2.35) / 5
    assert metrics.expected_calibration_error(al, truth, n_bins=10) == pytest.approx(0.47)
    brier = (0.05**2 + 0.85**2 + 0.55**2 + 0.85**2 + 0.05**2) / 5
    assert metrics.brier_score(al, truth) == pytest.approx(brier)
    assert metrics.precision_at_coverage(al, truth, coverage=0.2) == 1.0
    assert metrics.precision_at_coverage(al, truth, coverage=0.4) == 0.5
    assert metrics.precision_at_coverage(al, truth, coverage=1.0) == pytest.approx(2 / 5)
    # arrays: probabilities and correctness flags
    p = np.array([0.95, 0.85, 0.55, 0.15, 0.05])
    y = np.array([1, 0, 0, 1, 0], dtype=bool)
    assert metrics.expected_calibration_error(p, y, n_bins=5) == pytest.approx(0.43)
    assert metrics.brier_score(p, y) == pytest.approx(brier)


def test_calibration_scores_only_pairs_with_a_known_truth():
    truth = Correspondence.from_pairs([(0, 0), (1, 1)], ("a", "b"))  # rows 2.. of a, 2.. of b: unknown
    al = probabilistic_alignment()
    # scored: (0,0) right, (1,2) wrong (row 1's partner is 1); (2,1) wrong (b1's partner is a1)
    assert metrics.brier_score(al, truth) == pytest.approx((0.05**2 + 0.85**2 + 0.55**2) / 3)
    no_probs = Alignment(("a", "b"), [0, 1], [0, 2], costs=[0.5, 0.1])
    with pytest.raises(ValueError, match="no match probabilities"):
        metrics.brier_score(no_probs, truth)
    # without probabilities, precision_at_coverage ranks by cost: the cheaper pair (1,2) is wrong
    assert metrics.precision_at_coverage(no_probs, truth, coverage=0.5) == 0.0


def test_calibrated_probabilities_have_small_ece():
    rng = np.random.default_rng(7)
    p = rng.random(20000)
    y = rng.random(20000) < p  # calibrated by construction
    assert metrics.expected_calibration_error(p, y, n_bins=10) < 0.02
    assert metrics.expected_calibration_error(p, ~y, n_bins=10) > 0.4
