"""The shared-subspace Procrustes bootstrap (bayesalign.bootstrap.subspace_procrustes) and MAD without anchors."""

from itertools import permutations

import numpy as np
import pytest

from bayesalign.bootstrap import _whitened_components, subspace_procrustes, unsupervised_pairs


def _two_views(n, seed, private=True, noise=0.05):
    """Views generated linearly from a figure eight (shared) and, each, its own sinusoid; b's rows shuffled."""
    rng = np.random.default_rng(seed)
    t = 2 * np.pi * np.arange(n) / n
    shared = np.column_stack([np.cos(t), np.sin(2 * t)]) + noise * rng.standard_normal((n, 2))
    order = rng.permutation(n)  # b's row i is a's row order[i]
    la = np.column_stack([shared, np.sin(3 * t)]) if private else shared
    lb = np.column_stack([shared, np.cos(4 * t)]) if private else shared
    a = la @ rng.standard_normal((la.shape[1], 10)) + noise * rng.standard_normal((n, 10))
    b = lb[order] @ rng.standard_normal((lb.shape[1], 12)) + noise * rng.standard_normal((n, 12))
    return a, b, order


def _brute_force(Za, Zb):
    """max over permutations pi of the sum of the two leading singular values of Za^T Pi Zb (the objective, with A
    at its optimum for each pi), and the maximising pi."""
    best = (-np.inf, None)
    for pi in permutations(range(len(Zb))):
        value = np.linalg.svd(Za.T @ Zb[list(pi)], compute_uv=False)[:2].sum()
        if value > best[0]:
            best = (value, np.array(pi))
    return best


@pytest.mark.parametrize("private", [True, False])
def test_the_search_reaches_the_brute_force_optimum_over_every_permutation(private):
    # 7 rows: all 5,040 assignments enumerated; the search's value and assignment must be the global optimum's
    # (the best assignment leads the second by 0.011 / 0.024 of a value near 14, far above round-off; the value
    # is computed two ways, singular values here and QR-based canonical correlations there: rel 1e-10)
    a, b, _ = _two_views(7, seed=3, private=private)
    found = subspace_procrustes(a, b, n_components=3 if private else 2)
    Za, Zb = (_whitened_components(v, found.n_components, 0.01) for v in (a, b))
    value, pi = _brute_force(Za, Zb)
    assert found.correlation * 2 * 7 == pytest.approx(value, rel=1e-10)
    np.testing.assert_array_equal(found.assignment[:, 1], pi)


def test_recovers_the_shuffle_of_views_with_private_signals_where_gromov_wasserstein_cannot():
    a, b, order = _two_views(80, seed=0)
    found = subspace_procrustes(a, b)
    assert found.n_components == 3  # two shared and one private direction carry the variance of each view
    right = order[found.assignment[:, 1]] == found.assignment[:, 0]
    assert right.mean() > 0.9  # the noise (0.05) is below the spacing of the curve's points
    assert found.correlation > 0.99
    # the coordinates it returns are the shared plane, b rotated onto a: true partners lie close together
    inv = np.argsort(order)
    gaps = np.linalg.norm(found.coordinates_a - found.coordinates_b[inv], axis=1)
    assert np.median(gaps) < 0.1 * np.linalg.norm(found.coordinates_a, axis=1).mean()
    pairs, scores = unsupervised_pairs(a, b, "subspace_procrustes")
    top = pairs[np.argsort(-scores)[:10]]
    assert np.all(order[top[:, 1]] == top[:, 0]) and np.all((scores > 0) & (scores <= 1))
    pairs, scores = unsupervised_pairs(a, b, "gromov_wasserstein")  # within-view distances: private signal confounds
    top = pairs[np.argsort(-scores)[:10]]
    assert np.mean(order[top[:, 1]] == top[:, 0]) < 0.5


def test_views_of_different_sizes():
    a, b, order = _two_views(120, seed=1)
    keep = np.sort(np.random.default_rng(0).choice(120, 100, replace=False))  # b loses 20 rows
    found = subspace_procrustes(a, b[keep])
    assert found.assignment.shape == (100, 2)  # every row of the smaller view assigned
    right = order[keep][found.assignment[:, 1]] == found.assignment[:, 0]
    assert right.mean() > 0.5  # 20 rows of a have no partner to be found
    pairs, scores = unsupervised_pairs(a, b[keep], "subspace_procrustes")
    top = pairs[np.argsort(-scores)[:10]]
    assert np.all(order[keep][top[:, 1]] == top[:, 0])  # the bootstrap's most confident pairs: all right


def test_bad_arguments_are_refused():
    a, b, _ = _two_views(20, seed=0)
    with pytest.raises(ValueError, match="n_components must be 2 or 3"):
        subspace_procrustes(a, b, n_components=4)
    with pytest.raises(ValueError, match="angle_step"):
        subspace_procrustes(a, b, angle_step=0)
    with pytest.raises(ValueError, match="n_planes must be a positive int"):
        subspace_procrustes(a, b, n_planes=0)
    holed = a.copy()
    holed[3, 2] = np.nan
    with pytest.raises(ValueError, match="view_a has missing or infinite entries"):
        subspace_procrustes(holed, b)
    assert np.isnan(holed[3, 2])  # the caller's array untouched
    with pytest.raises(ValueError, match="at least 2 non-constant columns"):
        subspace_procrustes(a[:, :1], b[:, :1])
    with pytest.raises(ValueError, match="init .* is for bootstrap='gromov_wasserstein' only"):
        unsupervised_pairs(a, b, "subspace_procrustes", init=np.ones((20, 20)))


def test_mad_without_anchors_keeps_the_subspace_candidate_where_gromov_wasserstein_fails(monkeypatch):
    # "linear_shared_private" seed 3, no anchor: every Gromov-Wasserstein reflection start gives 0 right pairs
    # (benchmarks/RESULTS.md, zero anchors); the subspace search's pairs are right and its fit has the highest bound
    from bayesalign import MAD
    from bayesalign.datasets import mad_toy

    problem = mad_toy("linear_shared_private", seed=3, n_anchors=0).shuffle_unaligned(seed=3)
    # one reflection axis (two Gromov-Wasserstein starts) and one short self-training round per candidate keep the
    # test to seconds; the right start is kept all the same
    monkeypatch.setattr("bayesalign.mad.zero_anchor.REFLECTIONS", 1)
    monkeypatch.setattr("bayesalign.mad.zero_anchor.MAX_ROUNDS", 1)
    mad = MAD(latent_dim=5, num_inducing=12, seed=3, progress=False, engine_options={"max_iter": 150}).fit(problem)
    candidates = mad.bootstrap_["candidates"]
    assert [c["method"] for c in candidates] == ["gromov_wasserstein"] * 2 + ["subspace_procrustes"]
    chosen = candidates[mad.bootstrap_["chosen"]]
    assert chosen["method"] == "subspace_procrustes" and chosen["bound"] == max(c["bound"] for c in candidates)
    assert chosen["correct"] == chosen["n_pairs"]
    assert all(c["correct"] == 0 for c in candidates[:2])  # the reflections' mirror images
    # (self-training from it at the default budget matches 0.98 of the rows: benchmarks/bench_zero_anchors.py; the
    # short fits here only check that the right start is kept)


def test_a_default_bootstrap_that_cannot_run_is_skipped_with_a_warning(monkeypatch):
    # a view of one column has no plane for the subspace search; Gromov-Wasserstein's candidates still run
    from bayesalign import MAD, AlignmentProblem

    rng = np.random.default_rng(0)
    t = np.sort(rng.uniform(0, 3, 30))
    problem = AlignmentProblem.paired({"a": np.column_stack([t, t ** 2]) + 0.01 * rng.standard_normal((30, 2)),
                                       "b": t[:, None] ** 3}).shuffle_unaligned(seed=0)
    monkeypatch.setattr("bayesalign.mad.zero_anchor.REFLECTIONS", 1)
    monkeypatch.setattr("bayesalign.mad.zero_anchor.MAX_ROUNDS", 1)
    with pytest.warns(RuntimeWarning, match="'subspace_procrustes' bootstrap cannot run on these views"):
        mad = MAD(latent_dim=2, num_inducing=5, seed=0, progress=False, engine_options={"max_iter": 50}).fit(problem)
    assert {c["method"] for c in mad.bootstrap_["candidates"]} == {"gromov_wasserstein"}


def test_a_rival_correspondence_with_nearly_as_much_support_is_reported_as_ambiguous():
    # the rule of zero_anchor._check_rivals on a fitted model: a candidate's pairs are read against the kept
    # alignment; a disagreeing candidate (agreement < 0.5) extended by >= RIVAL_SUPPORT times the kept one's
    # self-training pairs makes the alignment ambiguous; an agreeing one, or a weakly supported one, does not
    import warnings

    from bayesalign import MAD
    from bayesalign.datasets import mad_toy
    from bayesalign.mad.zero_anchor import RIVAL_SUPPORT, _check_rivals

    problem = mad_toy("linear_shared", seed=0, n=40, n_anchors=12)
    mad = MAD(latent_dim=3, num_inducing=8, seed=0, progress=False, engine_options={"max_iter": 60}).fit(problem)
    a, b = problem.views.names
    kept = mad.anchors_[:, :2]  # the kept candidate's own pairs agree with its alignment by construction
    mirror = np.column_stack([kept[:, 0], np.roll(kept[:, 1], 1)])  # every pair different from the kept one's

    def check(rival_pairs, rival_support, kept_support=20, weak=False):
        mad.bootstrap_ = {}
        records = [{"method": "kept", "signs": (), "self_training_added": kept_support, "n_pairs": len(kept)},
                   {"method": "rival", "signs": (1, -1), "self_training_added": rival_support,
                    "n_pairs": len(rival_pairs)}]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _check_rivals(mad, a, b, records, [kept, rival_pairs], 0)
        messages = [str(w.message) for w in caught if "ambiguous" in str(w.message)]
        weak_messages = [str(w.message) for w in caught if "barely support" in str(w.message)]
        assert mad.bootstrap_["weak_support"] == weak and len(weak_messages) == int(weak)
        return mad.bootstrap_["ambiguous"], records, messages

    ambiguous, records, messages = check(mirror, int(np.ceil(RIVAL_SUPPORT * 20)))
    assert ambiguous and records[0]["agreement"] == 1.0 and records[1]["agreement"] == 0.0
    assert len(messages) == 1 and "rival (1, -1)" in messages[0] and "by 15" in messages[0]
    ambiguous, _, messages = check(mirror, int(RIVAL_SUPPORT * 20) - 1)  # 14 < 0.75 * 20: clearly less support
    assert not ambiguous and not messages
    ambiguous, records, messages = check(kept.copy(), 40)  # more support, but the same correspondence
    assert not ambiguous and not messages and records[1]["agreement"] == 1.0
    ambiguous, _, messages = check(mirror, 0, kept_support=0)  # nothing extended: self_train's own warning says it
    assert not ambiguous and not messages
    # the kept candidate alone, weakly supported: 5 of the 28 rows its 12 pairs left, under WEAK_SUPPORT = 0.2
    ambiguous, _, messages = check(mirror, 2, kept_support=5, weak=True)
    assert not ambiguous and not messages
    check(mirror, 2, kept_support=6)  # 6 >= 0.2 * 28: not weak
