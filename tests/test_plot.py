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


def test_bound_trace_is_the_models_history(mad, tmp_path):
    _, model = mad
    fig = plot.plot_bound_trace(model, path=tmp_path / "trace.png")
    _png(tmp_path / "trace.png")
    ax = fig.axes[0]
    np.testing.assert_array_equal(ax.lines[0].get_ydata(), model.model_.history_)
    if 0 < model.model_.n_warmup_ < model.model_.history_.size:
        assert ax.lines[1].get_xdata()[0] == model.model_.n_warmup_
    np.testing.assert_array_equal(plot.plot_bound_trace([3.0, 2.0, 1.0]).axes[0].lines[0].get_ydata(), [3, 2, 1])


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
