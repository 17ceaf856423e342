"""bayesalign.plot: every figure renders to a PNG and draws the numbers of the model it shows."""

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

from matplotlib.image import imread  # noqa: E402

from bayesalign import metrics, plot  # noqa: E402
from bayesalign.data import Alignment, AlignmentProblem, Correspondence, LatentEmbedding  # noqa: E402
from bayesalign.datasets import mad_toy  # noqa: E402
from bayesalign.mad import MAD  # noqa: E402

# the fits are short on purpose (figures, not fit quality, are under test)
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


@pytest.fixture(scope="module")
def mad():
    problem = mad_toy("linear_shared", seed=0, n=60, n_anchors=20).shuffle_unaligned(seed=0)
    model = MAD(latent_dim=3, num_inducing=8, seed=0, engine_options={"max_iter": 60, "warmup_iters": 20})
    return problem, model.fit(problem)


def _png(path):
    image = imread(path)
    assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100
    assert image[..., :3].std() > 0.01  # something is drawn, not a blank canvas
    return image


def test_relevance_bars_are_the_relevance_of_each_view(mad, tmp_path):
    _, model = mad
    fig = plot.plot_relevance(model, path=tmp_path / "relevance.png")
    _png(tmp_path / "relevance.png")
    views = list(model.relevance_)
    assert len(fig.axes) == len(views)
    for ax, view in zip(fig.axes, views):
        weights = np.asarray(model.relevance_[view])
        heights = [patch.get_height() for patch in ax.patches]
        np.testing.assert_allclose(heights, weights / weights.max(), rtol=1e-12)  # the same float division
        assert ax.get_title() == view
    raw = plot.plot_relevance({"x": [1.0, 4.0]}, normalize=False)
    assert [p.get_height() for p in raw.axes[0].patches] == [1.0, 4.0]


def test_latent_scatter_draws_every_row_in_the_shared_dimensions(tmp_path):
    rng = np.random.default_rng(0)
    emb = LatentEmbedding({"a": rng.normal(size=(30, 4)), "b": rng.normal(size=(25, 4))},
                          variances={"a": rng.uniform(0.1, 1, (30, 4)), "b": rng.uniform(0.1, 1, (25, 4))},
                          shared_dims=[2, 3], method="toy")
    labels = {"a": np.repeat(["x", "y", "z"], 10), "b": np.arange(25) % 2}
    fig = plot.plot_latent(emb, labels=labels, path=tmp_path / "latent.png")
    _png(tmp_path / "latent.png")
    assert len(fig.axes) == 2
    for ax, view in zip(fig.axes, ("a", "b")):
        np.testing.assert_array_equal(ax.collections[0].get_offsets(), emb.means[view][:, [2, 3]])
    np.testing.assert_array_equal(fig.axes[0].collections[0].get_array(), np.repeat([0, 1, 2], 10))
    with pytest.raises(ValueError, match="one entry per row"):
        plot.plot_latent(emb, labels=np.zeros(7))
    with pytest.raises(ValueError, match="dims"):
        plot.plot_latent(emb, dims=(0, 4))


def test_latent_coloured_by_match_confidence_has_a_probability_colour_bar(tmp_path):
    rng = np.random.default_rng(1)
    emb = LatentEmbedding({"a": rng.normal(size=(6, 2)), "b": rng.normal(size=(5, 2))})
    al = Alignment(("a", "b"), [0, 2, 5], [4, 1, 0], probabilities=[0.9, 0.2, 0.6])
    fig = plot.plot_latent(emb, confidence=al, path=tmp_path / "conf.png")
    _png(tmp_path / "conf.png")
    panels, colour_bar = fig.axes[:2], fig.axes[2]
    assert colour_bar.get_ylim() == (0.0, 1.0)  # probabilities, whatever the values drawn
    colours_a = np.ma.filled(panels[0].collections[0].get_array(), np.nan)
    np.testing.assert_array_equal(colours_a, [0.9, np.nan, 0.2, np.nan, np.nan, 0.6])  # NaN: in no pair
    colours_b = np.ma.filled(panels[1].collections[0].get_array(), np.nan)
    np.testing.assert_array_equal(colours_b, [0.6, 0.2, np.nan, np.nan, 0.9])
    with pytest.raises(ValueError, match="no match probabilities"):
        plot.plot_latent(emb, confidence=Alignment(("a", "b"), [0], [0]))


def test_cost_heatmap_is_mads_cost_matrix_with_truth_on_the_diagonal(mad, tmp_path):
    problem, model = mad
    rows_a, rows_b, C = model.cost_matrix()
    fig = plot.plot_cost_heatmap(model, path=tmp_path / "cost.png")
    _png(tmp_path / "cost.png")
    ax, colour_bar = fig.axes
    np.testing.assert_array_equal(ax.images[0].get_array(), C)
    np.testing.assert_allclose(colour_bar.get_ylim(), (C.min(), C.max()))
    fig = plot.plot_cost_heatmap(model, truth=problem)
    drawn = np.asarray(fig.axes[0].images[0].get_array())
    partner = problem.truth_between(*problem.views.names[:2]).mapping()
    column = {int(r): k for k, r in enumerate(rows_b)}
    on_truth = [C[i, column[partner[int(r)]]] for i, r in enumerate(rows_a) if partner.get(int(r)) in column]
    assert len(on_truth) > 10
    np.testing.assert_array_equal(np.diag(drawn)[:len(on_truth)], on_truth)  # rows with a partner come first
    assert sorted(drawn.ravel()) == sorted(C.ravel())  # a permutation of rows and columns


def test_reliability_bins_give_the_metrics_ece(tmp_path):
    rng = np.random.default_rng(2)
    n = 200
    perm = rng.permutation(n)
    truth = Correspondence.from_pairs(np.stack([np.arange(n), perm], 1), views=("a", "b"))
    guess = np.where(rng.random(n) < 0.6, perm, rng.permutation(n))
    al = Alignment(("a", "b"), np.arange(n), guess, probabilities=rng.uniform(0, 1, n), method="toy")
    conf, correct, count = plot.reliability_bins(al, truth)
    assert count.sum() == n
    ece = float(np.sum(count / n * np.abs(correct - conf)))
    # the same bins summed in another order: agreement to float round-off
    assert ece == pytest.approx(metrics.expected_calibration_error(al, truth), abs=1e-12)
    other = Alignment(("a", "b"), np.arange(n), perm, probabilities=np.full(n, 0.95), method="right")
    fig = plot.plot_reliability({"toy": al, "right": other}, truth, path=tmp_path / "reliability.png")
    _png(tmp_path / "reliability.png")
    lines = fig.axes[0].lines
    assert len(lines) == 3  # the diagonal and one line per alignment
    np.testing.assert_allclose(lines[1].get_ydata(), correct)
    np.testing.assert_allclose(lines[2].get_xydata(), [[0.95, 1.0]])  # every pair right at 0.95


def test_bound_trace_draws_each_optimiser_run_as_its_own_labelled_line(mad, tmp_path):
    _, model = mad
    fit = model.model_
    fig = plot.plot_bound_trace(model, path=tmp_path / "trace.png")
    _png(tmp_path / "trace.png")
    ax = fig.axes[0]
    runs = [(start, name) for k, (start, name) in enumerate(fit.history_phases_)
            if start < ([s for s, _ in fit.history_phases_[k + 1:]] or [fit.history_.size])[0]]
    assert len(runs) >= 2 and runs[0][1].endswith("warm-up")  # a warm-up, then all parameters
    assert len(ax.lines) == len(runs)
    # together the lines are the whole history, each starting at its run's first evaluation (1-based)
    np.testing.assert_array_equal(np.concatenate([line.get_ydata() for line in ax.lines]), fit.history_)
    assert [line.get_xdata()[0] for line in ax.lines] == [start + 1 for start, _ in runs]
    legend = [text.get_text() for text in ax.get_legend().get_texts()]
    assert [t.rsplit(" (", 1)[0] for t in legend] == [f"{k + 1}. {name}" for k, (_, name) in enumerate(runs)]
    assert all(line.get_linestyle() == "-" for line in ax.lines)  # no dotted marker line left

    class WarmedUp:  # a model that records only where its warm-up ended
        history_ = np.array([-9.0, -5.0, -4.0, -6.0, -3.0])
        n_warmup_ = 3

    ax = plot.plot_bound_trace(WarmedUp()).axes[0]
    np.testing.assert_array_equal(ax.lines[1].get_xydata(), [[4, -6.0], [5, -3.0]])
    assert ax.get_legend().get_texts()[0].get_text() == "1. warm-up (noise fixed) (3)"
    bare = plot.plot_bound_trace([3.0, 2.0, 1.0]).axes[0]
    np.testing.assert_array_equal(bare.lines[0].get_ydata(), [3, 2, 1])
    assert bare.get_legend() is None  # one run: nothing to tell apart


def _joint_embedding(seed=0, q=4, shared=(0, 1, 2)):
    """Two views of one cloud of 3 classes (b: the rows of a, shifted a little), in q dimensions."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=6.0, size=(3, q))
    labels_a = np.repeat(["B", "NK", "T"], 15)
    za = centres[np.searchsorted(["B", "NK", "T"], labels_a)] + rng.normal(size=(45, q))
    zb = za[:30] + 0.1 * rng.normal(size=(30, q))
    return LatentEmbedding({"rna": za, "atac": zb}, shared_dims=list(shared), method="toy"), labels_a


def test_joint_view_overlays_the_views_with_a_legend_of_views_and_of_classes(tmp_path):
    emb, labels = _joint_embedding(shared=(1, 3))
    fig = plot.plot_joint(emb, labels={"rna": labels, "atac": labels[:30]}, path=tmp_path / "joint.png")
    _png(tmp_path / "joint.png")
    by_view, by_label = fig.axes[:2]
    # two shared dimensions: drawn as they are, every view on the same axes
    for ax in (by_view, by_label):
        assert len(ax.collections) == 2
        np.testing.assert_array_equal(ax.collections[0].get_offsets(), emb.means["rna"][:, [1, 3]])
        np.testing.assert_array_equal(ax.collections[1].get_offsets(), emb.means["atac"][:, [1, 3]])
        assert (ax.get_xlabel(), ax.get_ylabel()) == ("latent dimension 1", "latent dimension 3")
    assert [t.get_text() for t in by_view.get_legend().get_texts()] == ["rna (45)", "atac (30)"]
    assert [t.get_text() for t in by_label.get_legend().get_texts()] == ["B", "NK", "T"]
    assert by_label.get_legend().get_title().get_text() == "label"
    # the colour of each point is its class's, the colour of that class in the legend
    legend_colours = [handle.get_color() for handle in by_label.get_legend().legend_handles]
    drawn = by_label.collections[1].get_facecolors()[:, :3]
    for row in (0, 15, 29):
        k = ["B", "NK", "T"].index(labels[row])
        np.testing.assert_allclose(drawn[row], matplotlib.colors.to_rgb(legend_colours[k]), atol=1e-12)
    assert len(fig.axes) == 2  # categorical labels: a legend, no colour bar
    only_views = plot.plot_joint(emb)
    assert len(only_views.axes) == 1 and only_views.axes[0].get_legend() is not None


def test_joint_view_of_a_continuous_label_has_a_colour_bar_over_its_range():
    emb, _ = _joint_embedding(shared=(0, 2))
    pseudotime = {"rna": np.linspace(0.0, 1.0, 45), "atac": np.linspace(0.5, 2.0, 30)}
    fig = plot.plot_joint(emb, labels=pseudotime, label_name="pseudotime")
    by_label, colour_bar = fig.axes[1], fig.axes[2]
    assert colour_bar.get_ylabel() == "pseudotime"
    assert by_label.get_legend() is None
    np.testing.assert_allclose(colour_bar.get_ylim(), (0.0, 2.0))  # both views' values on one scale
    np.testing.assert_array_equal(by_label.collections[1].get_array(), pseudotime["atac"])
    with pytest.raises(ValueError, match="labels of view 'atac' must have one entry per row"):
        plot.plot_joint(emb, labels={"atac": np.zeros(3)})


def test_joint_view_of_more_than_two_shared_dimensions_is_one_tsne_of_every_view():
    from sklearn.manifold import TSNE

    emb, labels = _joint_embedding(q=5, shared=(0, 1, 2, 4))
    xy, method, names = plot.joint_coordinates(emb, method="tsne", seed=0)
    assert method == "tsne" and names == ["t-SNE 1", "t-SNE 2"]
    stacked = np.vstack([emb.means["rna"][:, [0, 1, 2, 4]], emb.means["atac"][:, [0, 1, 2, 4]]])
    reference = TSNE(2, perplexity=min(30.0, 74 / 3), init="pca", random_state=0).fit_transform(stacked)
    # the same t-SNE run on the same stacked rows: equal to the float round-off of its threads
    np.testing.assert_allclose(np.vstack([xy["rna"], xy["atac"]]), reference, rtol=1e-6, atol=1e-6)
    # one map for both views: a row of atac lies next to its own row of rna (b is a copy of a)
    nearest = np.argmin(((xy["atac"][:, None] - xy["rna"][None]) ** 2).sum(-1), axis=1)
    assert np.mean(labels[nearest] == labels[:30]) >= 0.9
    assert plot.joint_coordinates(emb, method="leading")[1] == "leading"
    with pytest.raises(ValueError, match="method must be"):
        plot.joint_coordinates(emb, method="pca")


def test_write_figures_of_a_mad_run(mad, tmp_path):
    from bayesalign.registry import run_method

    problem, _ = mad
    result = run_method("mad", problem, seed=0, latent_dim=3,
                        options={"num_inducing": 8, "engine_options": {"max_iter": 40, "warmup_iters": 10}})
    paths = plot.write_figures(result, tmp_path, problem=problem)
    names = sorted(p.name for p in paths)
    a, b = problem.views.names[:2]
    assert names == sorted([f"latent_{a}_{b}.png", "relevance.png", "bound_trace.png", f"cost_{a}_{b}.png",
                            "reliability.png"])
    for path in paths:
        _png(path)


def test_problem_without_truth_gets_no_reliability(tmp_path):
    rng = np.random.default_rng(3)
    emb = LatentEmbedding({"a": rng.normal(size=(5, 2)), "b": rng.normal(size=(5, 2))})

    class Result:  # the fields of a MethodResult that write_figures reads
        model = None
        embedding = emb
        alignments = {("a", "b"): Alignment(("a", "b"), [0, 1], [1, 0], probabilities=[0.5, 0.5])}

    problem = AlignmentProblem({"a": np.zeros((5, 2)), "b": np.ones((5, 2))})
    paths = plot.write_figures(Result(), tmp_path, problem=problem)
    assert [p.name for p in paths] == ["latent_a_b.png"]


def test_align_command_writes_the_figures(tmp_path, capsys):
    from bayesalign import cli
    from bayesalign.io import write_view

    problem = mad_toy("linear_shared", seed=0, n=40)
    write_view(tmp_path / "y1.csv", problem.views["Y1"])
    write_view(tmp_path / "y2.csv", problem.views["Y2"])
    (tmp_path / "pairs.csv").write_text("".join(f"{i},{i}\n" for i in range(0, 40, 4)))
    code = cli.main([str(a) for a in ["align", tmp_path / "y1.csv", tmp_path / "y2.csv", "--anchors",
                                      tmp_path / "pairs.csv", "--method", "joint-laplacian", "--out",
                                      tmp_path / "m.csv", "--plots", tmp_path / "figures"]])
    assert code == 0, capsys.readouterr().err
    written = sorted(p.name for p in (tmp_path / "figures").iterdir())
    assert written == ["latent_y1_y2.png"]  # a spectral method: its latent space only; no truth, no reliability
    _png(tmp_path / "figures" / "latent_y1_y2.png")
