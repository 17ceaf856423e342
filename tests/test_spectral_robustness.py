"""Spectral methods on awkward data: spread-out rows, degenerate embeddings, badly scaled views, view order.

The spread-out case: 300 rows from a 5-d standard normal, the first five
drawn with 12 times the spread, the second view a random linear map of the first, 10% anchors.
"""

import re
import warnings

import numpy as np
import pytest

from bayesalign.data import AlignmentProblem, Correspondence
from bayesalign.graph import DEGREE_RATIO_LIMIT
from bayesalign.metrics import foscttm
from bayesalign.spectral import (
    AffineAlignment,
    GlobalGeometryAlignment,
    JointLaplacianAlignment,
    LeastSquaresAlignment,
    LinearAlignment,
    LocalPatternAlignment,
    MultiscaleAlignment,
    ProcrustesAlignment,
)
from bayesalign.spectral._base import embedding_degeneracy

SPREAD_ROWS = {0, 1, 2, 3, 4}


def spread_problems():
    """(ordinary problem, the same with rows 0-4 spread 12 times wider)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5))
    spread = X.copy()
    spread[:5] *= 12.0
    A = rng.normal(size=(5, 5))
    return tuple(AlignmentProblem.paired({"a": Z, "b": Z @ A}).split_anchors(0.1, seed=0) for Z in (X, spread))


def fit_recording(model, problem):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(problem)
    return model, [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]


def largest(embedding):
    return max(float(np.abs(embedding[v]).max()) for v in ("a", "b"))


def warned_rows(messages):
    """Row indices named by degree warnings ('rows (degree) 3 (1e-05), ...')."""
    rows = set()
    for m in messages:
        if "row degrees span" in m:
            rows |= {int(r) for r in re.findall(r"(\d+) \([^)]*\)", m.split("rows (degree)")[1])}
    return rows


GRAPH_METHODS = {
    "joint Laplacian": lambda affinity: JointLaplacianAlignment(3, affinity=affinity),
    "linear": lambda affinity: LinearAlignment(3, affinity=affinity),
    "Procrustes laplacian": lambda affinity: ProcrustesAlignment(3, embedding="laplacian", affinity=affinity),
    "Procrustes lpp": lambda affinity: ProcrustesAlignment(3, affinity=affinity),
    "affine diffusion": lambda affinity: AffineAlignment(3, affinity=affinity),
    "multiscale feature": lambda affinity: MultiscaleAlignment(level="feature", min_components=3, affinity=affinity),
    "multiscale instance": lambda affinity: MultiscaleAlignment(level="instance", min_components=3, affinity=affinity),
}

# The spread rows are 12 times farther out, so any map that is linear in the features moves them
# 12 times farther; a factor of 25 leaves room for that and for a rotation of the latent axes.
BOUNDED_FACTOR = 25.0


@pytest.mark.parametrize("method", sorted(GRAPH_METHODS))
def test_spread_out_rows_give_bounded_coordinates_or_a_warning_naming_them(method):
    ordinary, spread = spread_problems()
    scale, ordinary_warnings = fit_recording(GRAPH_METHODS[method]("local"), ordinary)
    assert ordinary_warnings == []  # the ordinary case is quiet
    model, messages = fit_recording(GRAPH_METHODS[method]("local"), spread)
    factor = largest(model.embedding_) / largest(scale.embedding_)
    # either the coordinates stay in scale, or the fit says which rows are cut off
    assert factor <= BOUNDED_FACTOR or warned_rows(messages) == SPREAD_ROWS, (factor, messages)
    # the single-width heat kernel strands exactly those rows: the warning names them and the view,
    # and the attribute degree_ratios_ holds the spread of the degrees
    heat, heat_messages = fit_recording(GRAPH_METHODS[method]("heat"), spread)
    assert warned_rows(heat_messages) == SPREAD_ROWS
    assert any("view 'a'" in m for m in heat_messages)
    assert heat.degree_ratios_["a"] > DEGREE_RATIO_LIMIT
    assert max(scale.degree_ratios_.values()) < DEGREE_RATIO_LIMIT
    # with local scaling the attribute agrees with the warning: above the limit iff rows were named
    assert (max(model.degree_ratios_.values()) > DEGREE_RATIO_LIMIT) == bool(warned_rows(messages))


def test_joint_laplacian_local_scaling_keeps_spread_rows_in_scale():
    # the example: largest coordinate 0.03 ordinary, ~1e40 with the single-width heat kernel.
    # With local scaling row 2 keeps a degree ~1e-6 of the others' (it lies far from everything), and
    # the D-normalised eigenvectors scale like 1/sqrt(degree): a factor of up to sqrt(1e4) = 100 is
    # what the degree warning's threshold (graph.DEGREE_RATIO_LIMIT = 1e4) lets through unannounced;
    # beyond it the warning must have named the row
    ordinary, spread = spread_problems()
    base = JointLaplacianAlignment(3).fit(ordinary)
    model, messages = fit_recording(JointLaplacianAlignment(3), spread)
    assert largest(model.embedding_) <= 100.0 * largest(base.embedding_)
    assert 2 in warned_rows(messages)
    # it still aligns (random: 0.5): within 0.1 of the ordinary case (0.18 and 0.25 measured; an
    # eigenvector is partly spent on the far-out rows)
    assert foscttm(model.embedding_, spread) < foscttm(base.embedding_, ordinary) + 0.1
    assert model.degenerate_views_ == {}
    heat, heat_messages = fit_recording(JointLaplacianAlignment(3, affinity="heat"), spread)
    assert largest(heat.embedding_) > 1e10 * largest(base.embedding_)
    assert set(heat.degenerate_views_) == {"a", "b"}  # the other 295 rows collapse to ~0
    assert any("is degenerate" in m for m in heat_messages)


@pytest.mark.parametrize("model", [GlobalGeometryAlignment(3),
                                   LocalPatternAlignment(JointLaplacianAlignment(3), prefilter=20)])
def test_methods_without_heat_kernel_on_spread_rows(model):
    # global geometry uses geodesic distances (no kernel width): the spread rows are 12 times
    # farther out and stay so; local patterns run a joint Laplacian (local scaling) on inferred pairs
    ordinary, spread = spread_problems()
    base, _ = fit_recording(type(model)(**model.get_params(deep=False)), ordinary)
    fitted, messages = fit_recording(model, spread)
    assert largest(fitted.embedding_) <= BOUNDED_FACTOR * largest(base.embedding_) or \
        warned_rows(messages) == SPREAD_ROWS


# --- degenerate embeddings -----------------------------------------------------------------------
def test_embedding_degeneracy_detects_rank_and_collapse():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(50, 4))
    assert embedding_degeneracy(X[:, :3], X) is None
    copied = np.c_[X[:, :2], 2.0 * X[:, 0]]  # third column a multiple of the first
    assert embedding_degeneracy(copied, X).startswith("rank 2 < 3")
    # five rows 1e12 out, the rest within 1e-6 of that: 45 rows collapse to one point
    blown = np.vstack([1e12 * rng.normal(size=(5, 3)), rng.normal(size=(45, 3))])
    assert embedding_degeneracy(blown, X).startswith("6 distinct rows")
    # duplicated input rows may share their coordinates: 10 distinct rows, each 5 times, are not a collapse
    repeated = np.repeat(X[:10], 5, axis=0)
    assert embedding_degeneracy(repeated[:, :3], repeated) is None
    # a view of rank 2 cannot fill 3 dimensions: not reported
    flat = np.c_[X[:, :2], X[:, 0] + X[:, 1]]
    assert embedding_degeneracy(np.c_[flat[:, :2], flat[:, 0] - flat[:, 1]], flat) is None


def test_procrustes_default_does_not_collapse_a_view():
    # Laplacian eigenmaps on the heat kernel collapse such a view to a few distinct points; the default
    # (LPP on local scaling) keeps every distinct row distinct and says nothing, and so do Laplacian
    # eigenmaps on local scaling
    _, spread = spread_problems()
    for model in (ProcrustesAlignment(3), ProcrustesAlignment(3, embedding="laplacian")):
        model, messages = fit_recording(model, spread)
        assert model.degenerate_views_ == {} and not any("degenerate" in m for m in messages)
        for v in ("a", "b"):  # rows distinct to 1e-6 of the largest coordinate, as the check counts them
            coords = model.embedding_[v]
            assert np.unique(np.round(coords / (1e-6 * np.abs(coords).max())), axis=0).shape[0] == 300
    old, old_messages = fit_recording(ProcrustesAlignment(3, embedding="laplacian", affinity="heat"), spread)
    assert set(old.degenerate_views_) and any("degenerate" in m for m in old_messages)


# --- badly scaled views ---------------------------------------------------------------------------
@pytest.mark.parametrize("scale", [1e154, 1e-160])
@pytest.mark.parametrize("model", [JointLaplacianAlignment(2), LinearAlignment(2), ProcrustesAlignment(2),
                                   MultiscaleAlignment(), GlobalGeometryAlignment(2), LeastSquaresAlignment()])
def test_badly_scaled_view_is_named(model, scale):
    # 1e154: squares overflow (refused when the Views are built); 1e-160: squares underflow to 0
    # (refused at fit); either way a ValueError names the view instead of failing deep in a solver
    ordinary, _ = spread_problems()
    X = ordinary.views["b"] * scale
    with pytest.raises(ValueError, match=r"view 'b' is badly scaled"):
        model.fit(ordinary.replace(views={"a": ordinary.views["a"], "b": X}))


# --- least squares and the view order ---------------------------------------------------------------
def test_least_squares_symmetric_does_not_depend_on_view_order():
    rng = np.random.default_rng(3)
    Z = rng.normal(size=(120, 3))
    a = Z @ rng.normal(size=(3, 6)) + 0.3 * rng.normal(size=(120, 6))
    b = np.tanh(Z) @ rng.normal(size=(3, 4)) + 0.3 * rng.normal(size=(120, 4))
    forward = AlignmentProblem.paired({"a": a, "b": b}).split_anchors(30, seed=0)
    backward = AlignmentProblem({"b": b, "a": a}, anchors=forward.anchors_between("b", "a"),
                                truth=forward.truth_between("b", "a"))
    emb_f = LeastSquaresAlignment(direction="symmetric").fit(forward).embedding_
    emb_b = LeastSquaresAlignment(direction="symmetric").fit(backward).embedding_
    # the latent blocks are permuted, the geometry is the same: equal pairwise distances
    for v in ("a", "b"):
        cols = np.r_[4:10, 0:4]  # backward order is [b block (4), a block (6)]
        np.testing.assert_allclose(emb_b[v][:, cols], emb_f[v], atol=1e-10)  # round-off of two lstsq solves
    assert foscttm(emb_f, forward) == pytest.approx(foscttm(emb_b, backward), abs=1e-12)
    # the one-sided form does depend on the order (the reason for the automatic reference)
    one_f = foscttm(LeastSquaresAlignment(direction="to_first").fit(forward).embedding_, forward)
    one_b = foscttm(LeastSquaresAlignment(direction="to_first").fit(backward).embedding_, backward)
    assert abs(one_f - one_b) > 1e-3
    # the default picks its reference from the anchors: the same reference, the same result in either order
    auto_f, auto_b = LeastSquaresAlignment().fit(forward), LeastSquaresAlignment().fit(backward)
    assert auto_f.reference_ == auto_b.reference_
    assert auto_f.reference_scores_ == pytest.approx(auto_b.reference_scores_, abs=1e-12)
    for v in ("a", "b"):
        np.testing.assert_allclose(auto_b.embedding_[v], auto_f.embedding_[v], atol=1e-10)
    # and it is the better of the two one-sided forms here, where they differ
    assert foscttm(auto_f.embedding_, forward) == pytest.approx(min(one_f, one_b), abs=1e-12)


def test_least_squares_auto_reference_score_is_cross_validated_foscttm_by_hand():
    rng = np.random.default_rng(7)
    Z = rng.normal(size=(60, 2))
    a = Z @ rng.normal(size=(2, 5)) + 0.2 * rng.normal(size=(60, 5))
    b = np.sin(2 * Z) @ rng.normal(size=(2, 3)) + 0.2 * rng.normal(size=(60, 3))
    problem = AlignmentProblem.paired({"a": a, "b": b}).split_anchors(23, seed=1)
    model = LeastSquaresAlignment().fit(problem)
    for ref, other in (("a", "b"), ("b", "a")):
        corr = problem.anchors_between(other, ref)
        X, Y = problem.views[other][corr.index_a], problem.views[ref][corr.index_b]
        scores = []
        own = problem.views[ref] - problem.views[ref].mean(0)  # the reference's centred features
        for fold in range(5):  # interleaved folds over the 23 anchor pairs
            held = np.arange(23) % 5 == fold
            F = np.linalg.pinv(X[~held] - X[~held].mean(0)) @ (Y[~held] - Y[~held].mean(0))
            mapped = (problem.views[other] - X[~held].mean(0)) @ F + Y[~held].mean(0) - problem.views[ref].mean(0)
            D = np.linalg.norm(mapped[:, None, :] - own[None, :, :], axis=2)  # every row of both views
            ia, ib = corr.index_a[held], corr.index_b[held]
            true = D[ia, ib]
            side_a = [(np.sum(D[i] < t) + 0.5 * (np.sum(D[i] == t) - 1)) / (D.shape[1] - 1) for i, t in zip(ia, true)]
            side_b = [(np.sum(D[:, j] < t) + 0.5 * (np.sum(D[:, j] == t) - 1)) / (D.shape[0] - 1)
                      for j, t in zip(ib, true)]
            scores.append(0.5 * (np.mean(side_a) + np.mean(side_b)))
        assert model.reference_scores_[ref] == pytest.approx(np.mean(scores), abs=1e-12)
    assert model.reference_ == min(("a", "b"), key=lambda r: (model.reference_scores_[r], r != "a"))
    assert LeastSquaresAlignment(direction="to_first").fit(problem).reference_scores_ == {}


def test_least_squares_symmetric_blocks_are_the_two_regressions():
    rng = np.random.default_rng(4)
    a, b = rng.normal(size=(40, 3)), rng.normal(size=(40, 5))
    problem = AlignmentProblem.paired({"a": a, "b": b}).split_anchors(15, seed=0)
    model = LeastSquaresAlignment(direction="symmetric").fit(problem)
    rows = problem.anchors_between("a", "b").index_a
    ac, bc = a[rows] - a[rows].mean(0), b[rows] - b[rows].mean(0)
    np.testing.assert_allclose(model.coef_[("a", "b")], np.linalg.pinv(ac) @ bc, atol=1e-10)
    np.testing.assert_allclose(model.coef_[("b", "a")], np.linalg.pinv(bc) @ ac, atol=1e-10)
    s_a = np.sqrt(np.mean(np.sum((a - a.mean(0)) ** 2, axis=1)))
    s_b = np.sqrt(np.mean(np.sum((b - b.mean(0)) ** 2, axis=1)))
    emb = model.embedding_
    np.testing.assert_allclose(emb["a"][:, :3], (a - a.mean(0)) / s_a, atol=1e-12)  # own block, scaled
    predicted_b = (a - a[rows].mean(0)) @ model.coef_[("a", "b")] + b[rows].mean(0)
    np.testing.assert_allclose(emb["a"][:, 3:], (predicted_b - b.mean(0)) / s_b, atol=1e-10)
    np.testing.assert_allclose(emb.transform("a", a[:4]), emb["a"][:4], atol=1e-12)


def test_least_squares_three_views_need_anchors_between_every_pair_when_symmetric():
    rng = np.random.default_rng(5)
    a, b, c = rng.normal(size=(30, 2)), rng.normal(size=(30, 3)), rng.normal(size=(30, 2))
    anchors = [Correspondence.from_pairs([(i, i) for i in range(10)], ("a", "b")),
               Correspondence.from_pairs([(i, i) for i in range(10)], ("a", "c"))]  # none between b and c
    problem = AlignmentProblem({"a": a, "b": b, "c": c}, anchors=anchors)
    with pytest.raises(ValueError, match=r"0 anchor pair\(s\) between views 'b' and 'c'.*direction='to_first'"):
        LeastSquaresAlignment(direction="symmetric").fit(problem)
    auto = LeastSquaresAlignment().fit(problem)  # only view a is anchored to both others
    assert auto.reference_ == "a" and set(auto.reference_scores_) == {"a"}
    emb = LeastSquaresAlignment(direction="to_first").fit(problem).embedding_
    assert emb.n_components == 2  # the first view's feature space


def test_auto_affinity_is_the_heat_kernel_unless_it_strands_rows():
    from bayesalign.graph import degree_spread
    from bayesalign.spectral._base import within_view_affinity

    ordinary, spread = spread_problems()
    for problem, expected in ((ordinary, "heat"), (spread, "local")):
        X = problem.views["a"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the heat kernel's own degree warning on the spread rows
            auto = within_view_affinity(X, 10, affinity="auto")
            chosen = within_view_affinity(X, 10, affinity=expected)
            heat = within_view_affinity(X, 10, affinity="heat")
        assert (auto != chosen).nnz == 0  # the same weights, entry for entry
        assert (degree_spread(heat)[0] <= DEGREE_RATIO_LIMIT) == (expected == "heat")
    # the stranded case warns as local scaling does (its own hint), not about the heat kernel it set aside
    messages = {}
    for affinity in ("auto", "local"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            within_view_affinity(spread.views["a"], 10, affinity=affinity)
        messages[affinity] = [str(w.message) for w in caught]
    assert messages["auto"] == messages["local"]
    assert not any("affinity='local'" in m for m in messages["auto"])
