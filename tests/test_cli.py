"""End-to-end tests of the ``bayesalign`` command: every subcommand on tiny data, and bad input."""

import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bayesalign import cli, compare
from bayesalign.io import MATCH_COLUMNS, write_view
from bayesalign.registry import METHODS

SPECTRAL = [name for name in ("joint-laplacian", "procrustes", "global-geometry", "multiscale")
            if METHODS[name].available]
pytestmark = pytest.mark.skipif(not SPECTRAL, reason="no spectral method installed yet")


def curve(n=40, seed=0):
    """Two views of one noisy closed curve: b is a rotated, scaled copy in 3-D; rows paired."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 2 * np.pi, n, endpoint=False)
    a = np.c_[np.cos(t), np.sin(t), 0.5 * np.sin(2 * t)] + 0.01 * rng.normal(size=(n, 3))  # [n, 3]
    q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    return a, 2.0 * a @ q + 0.01 * rng.normal(size=(n, 3))


@pytest.fixture
def files(tmp_path):
    """View a as CSV with row names, view b as .npy with its rows shuffled, 10 anchors by name/index."""
    a, b = curve()
    n = len(a)
    order = np.random.default_rng(1).permutation(n)  # row k of file b is row order[k] of b
    names = [f"pt{i}" for i in range(n)]
    write_view(tmp_path / "a.csv", a, row_names=names, columns=["x", "y", "z"])
    np.save(tmp_path / "b.npy", b[order])
    where = np.argsort(order)  # row i of a <-> row where[i] of file b
    anchors = np.arange(0, n, 4)
    lines = ["a,b"] + [f"{names[i]},{where[i]}" for i in anchors]
    (tmp_path / "pairs.csv").write_text("\n".join(lines) + "\n")
    return tmp_path, where, anchors


def run(argv, capsys):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


# align ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("method", SPECTRAL[:2])
def test_align_writes_every_pair_with_probabilities(files, capsys, method):
    folder, where, anchors = files
    code, _, err = run(["align", folder / "a.csv", folder / "b.npy", "--anchors", folder / "pairs.csv",
                        "--method", method, "--out", folder / "m.csv", "--embedding", folder / "e.npz",
                        "--latent-dim", 2], capsys)
    assert code == 0, err
    frame = pd.read_csv(folder / "m.csv")
    assert tuple(frame.columns) == MATCH_COLUMNS
    n = len(where)
    assert len(frame) == n  # equal sizes: every row of a is in exactly one pair
    assert sorted(frame["index_a"]) == list(range(n)) and sorted(frame["index_b"]) == list(range(n))
    assert frame["probability"].between(0, 1).all()
    # every anchor is kept as given, marked, with probability 1
    kept = frame[frame["anchor"]]
    assert sorted(kept["index_a"]) == anchors.tolist()
    assert (kept["index_b"].to_numpy() == where[kept["index_a"]]).all() and (kept["probability"] == 1).all()
    assert set(frame["row_a"]) == {f"pt{i}" for i in range(n)}  # row names carried to the output
    # a rotated, scaled copy of a curve with a quarter of it anchored: most pairs must be right
    matched = frame[~frame["anchor"]]
    accuracy = float(np.mean(matched["index_b"].to_numpy() == where[matched["index_a"]]))
    assert accuracy >= 0.8, accuracy
    assert f"{len(matched)} matched, 0 of a and 0 of b left unmatched, {len(anchors)} anchors kept" in err
    assert "mean confidence" in err
    with np.load(folder / "e.npz") as z:
        assert z["means_a"].shape == (n, 2) and z["means_b"].shape == (n, 2)
        assert z["row_names_a"].tolist()[:2] == ["pt0", "pt1"]


def test_align_cost_limit_leaves_rows_unmatched(files, capsys):
    folder, where, anchors = files
    code, _, err = run(["align", folder / "a.csv", folder / "b.npy", "--anchors", folder / "pairs.csv",
                        "--method", SPECTRAL[0], "--out", folder / "m.csv", "--cost-limit", 0], capsys)
    assert code == 0, err
    frame = pd.read_csv(folder / "m.csv")
    assert frame["anchor"].all() and len(frame) == len(anchors)  # a zero limit makes no pair worth it
    n_free = len(where) - len(anchors)
    assert f"0 matched, {n_free} of a and {n_free} of b left unmatched" in err


def test_align_three_views_matches_every_pair_of_views(tmp_path, capsys):
    a, b = curve(30)
    write_view(tmp_path / "a.csv", a)
    write_view(tmp_path / "b.tsv", b)
    write_view(tmp_path / "c.npz", a[:, ::-1] * 3.0)
    # wide layout, one column per view; the third line's thing is not in view b
    rows = [f"{i},{i},{i}" for i in range(0, 30, 3)] + ["1,-,1"]
    (tmp_path / "anchors.csv").write_text("\n".join(rows) + "\n")
    code, _, err = run(["align", tmp_path / "a.csv", tmp_path / "b.tsv", tmp_path / "c.npz", "--anchors",
                        tmp_path / "anchors.csv", "--method", SPECTRAL[0], "--out", tmp_path / "m.csv"],
                       capsys)
    assert code == 0, err
    frame = pd.read_csv(tmp_path / "m.csv")
    counts = frame.groupby(["view_a", "view_b"]).size().to_dict()
    assert counts == {("a", "b"): 30, ("a", "c"): 30, ("b", "c"): 30}
    anchors = frame[frame["anchor"]].groupby(["view_a", "view_b"]).size().to_dict()
    assert anchors == {("a", "b"): 10, ("a", "c"): 11, ("b", "c"): 10}


def test_align_with_a_tiny_mad_run(tmp_path, capsys):
    """One short MAD fit end to end: probabilities from its matcher, every anchor kept, and on two noisy
    linear maps of one latent curve most held-out pairs are found."""
    pytest.importorskip("torch")
    from bayesalign.datasets import mad_toy

    problem = mad_toy("linear_shared", seed=0, n=40)
    write_view(tmp_path / "y1.csv", problem.views["Y1"])
    write_view(tmp_path / "y2.csv", problem.views["Y2"])
    (tmp_path / "pairs.csv").write_text("".join(f"{i},{i}\n" for i in range(0, 40, 4)))
    code, _, err = run(["align", tmp_path / "y1.csv", tmp_path / "y2.csv", "--anchors",
                        tmp_path / "pairs.csv", "--method", "mad", "--matcher", "hungarian", "--cost",
                        "likelihood", "--latent-dim", 3, "--set", "max_iter=60", "--set", "warmup_iters=30",
                        "--set", "num_inducing=8", "--out", tmp_path / "m.csv", "--embedding",
                        tmp_path / "e.npz"], capsys)
    assert code == 0, err
    frame = pd.read_csv(tmp_path / "m.csv")
    assert len(frame) == 40 and frame["probability"].between(0, 1).all()
    assert frame.loc[frame["anchor"], "index_a"].tolist() == list(range(0, 40, 4))
    matched = frame[~frame["anchor"]]
    assert np.mean(matched["index_a"] == matched["index_b"]) >= 0.7
    with np.load(tmp_path / "e.npz") as z:
        assert z["means_y1"].shape == (40, 3) and (z["variances_y2"] > 0).all()


def test_registry_mad_names_follow_mad():
    from bayesalign import matching
    from bayesalign.registry import MAD_COSTS, MAD_MATCHERS

    assert MAD_MATCHERS == matching.MATCHERS and set(MAD_COSTS) == set(matching.COSTS)


# bad input: one line, exit status 2, no traceback ---------------------------------------------------
def bad(argv, capsys):
    if argv[0] == "align" and "--method" not in argv:
        argv = [*argv, "--method", SPECTRAL[0]]
    code, out, err = run(argv, capsys)
    assert code == 2
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


def test_missing_view_file(files, capsys):
    folder, _, _ = files
    err = bad(["align", folder / "nope.csv", folder / "b.npy", "--anchors", folder / "pairs.csv",
               "--out", folder / "m.csv"], capsys)
    assert "nope.csv: no such file" in err


def test_malformed_anchors_name_the_line(files, capsys):
    folder, _, _ = files
    (folder / "pairs.csv").write_text("a,b\npt0,3\npt1\npt2,5\n")
    err = bad(["align", folder / "a.csv", folder / "b.npy", "--anchors", folder / "pairs.csv",
               "--out", folder / "m.csv"], capsys)
    assert "pairs.csv line 3: 1 cells, expected 2" in err
    (folder / "pairs.csv").write_text("pt0,3\nnobody,4\n")
    err = bad(["align", folder / "a.csv", folder / "b.npy", "--anchors", folder / "pairs.csv",
               "--out", folder / "m.csv"], capsys)
    assert "pairs.csv line 2: 'nobody' is not a row name of view 'a'" in err
    assert not (folder / "m.csv").exists()  # nothing written on error


def test_mismatched_row_lengths_in_a_view(files, capsys):
    folder, _, _ = files
    (folder / "ragged.csv").write_text("1,2,3\n4,5,6\n7,8\n")
    err = bad(["align", folder / "ragged.csv", folder / "b.npy", "--anchors", folder / "pairs.csv",
               "--out", folder / "m.csv"], capsys)
    assert "ragged.csv line 3: 2 cells, but line 1 has 3" in err


def test_unknown_method_lists_the_known_ones(files, capsys):
    folder, _, _ = files
    err = bad(["align", folder / "a.csv", folder / "b.npy", "--anchors", folder / "pairs.csv",
               "--method", "magic", "--out", folder / "m.csv"], capsys)
    assert "unknown method 'magic'; known methods: joint-laplacian, linear, procrustes" in err


def test_a_warning_is_one_line_naming_the_command(files, capsys, monkeypatch):
    """A library warning during a command prints as one line, "bayesalign <command>: warning: ..." (not Python's
    two lines with the library's source); --debug keeps Python's; the hook is restored after the command."""
    import warnings

    folder, _, _ = files
    spec = METHODS[SPECTRAL[0]]
    cls = spec.load()
    fit = cls.fit

    def warned_fit(self, *args, **kwargs):
        warnings.warn("the degrees of the graph\n  spread widely", RuntimeWarning, stacklevel=2)
        return fit(self, *args, **kwargs)

    monkeypatch.setattr(cls, "fit", warned_fit)
    before = warnings.showwarning
    argv = ["align", folder / "a.csv", folder / "b.npy", "--anchors", folder / "pairs.csv", "--out",
            folder / "m.csv", "--method", spec.name]
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        code, _, err = run(argv, capsys)
    assert code == 0, err
    lines = [line for line in err.splitlines() if "Warning" in line or "spread" in line]
    assert lines == ["bayesalign align: warning: the degrees of the graph spread widely (RuntimeWarning)"]
    assert "warned_fit" not in err and "warnings.warn" not in err
    assert warnings.showwarning is before
    with pytest.warns(RuntimeWarning, match="the degrees of the graph"):  # --debug: Python's own hook shows it
        code, _, err = run(["--debug", *argv], capsys)
    assert code == 0 and "bayesalign align: warning" not in err


def test_debug_shows_the_traceback(files):
    folder, _, _ = files
    with pytest.raises(Exception, match="no such file"):
        cli.main(["--debug", "align", str(folder / "nope.csv"), str(folder / "b.npy"), "--anchors",
                  str(folder / "pairs.csv"), "--out", str(folder / "m.csv"), "--method", SPECTRAL[0]])


def test_interrupted_write_leaves_the_old_file(files, capsys, monkeypatch):
    folder, _, _ = files
    out = folder / "m.csv"
    out.write_text("previous results\n")

    def crash(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(pd.DataFrame, "to_csv", crash)
    code, _, err = run(["align", folder / "a.csv", folder / "b.npy", "--anchors", folder / "pairs.csv",
                        "--method", SPECTRAL[0], "--out", out], capsys)
    assert code == 1 and "internal error: RuntimeError: disk full" in err
    assert out.read_text() == "previous results\n"
    assert [p.name for p in folder.iterdir() if p.name.startswith(".m.csv")] == []  # no temp file left


# compare, experiment, demo ----------------------------------------------------------------------------
def test_compare_on_paired_files(tmp_path, capsys):
    pytest.importorskip("bayesalign.metrics")
    a, b = curve(40)
    write_view(tmp_path / "a.csv", a)
    write_view(tmp_path / "b.csv", b)
    code, out, err = run(["compare", tmp_path / "a.csv", tmp_path / "b.csv", "--methods", *SPECTRAL[:2],
                          "--anchors", 0.25, 0.5, "--seeds", 2, "--out", tmp_path / "res"], capsys)
    assert code == 0, err
    runs = pd.read_csv(tmp_path / "res" / "comparison_runs.csv", keep_default_na=False)
    n_methods = len(SPECTRAL[:2])
    assert len(runs) == n_methods * 2 * 2
    assert set(runs["anchor_fraction"]) == {0.25, 0.5} and set(runs["seed"]) == {0, 1}
    assert (runs["n_anchors"].isin([10, 20])).all() and (runs["n_heldout"] == 40 - runs["n_anchors"]).all()
    ok = runs[runs["error"] == ""]
    assert len(ok) == len(runs)
    assert ok["accuracy"].astype(float).between(0, 1).all()
    summary = pd.read_csv(tmp_path / "res" / "comparison.csv")
    assert len(summary) == n_methods * 2 and (summary["runs"] == 2).all()
    assert (tmp_path / "res" / "comparison_files_accuracy.png").stat().st_size > 1000
    assert out.startswith("| dataset | method | anchor_fraction | accuracy |")


def test_compare_records_failures_without_crashing(tmp_path, capsys):
    a, b = curve(20)
    problem = {"tiny": compare.AlignmentProblem.paired({"a": a, "b": b})}
    frame = compare.run_comparison(problem, methods=[SPECTRAL[0]], fractions=[0.05], seeds=1,
                                   latent_dim=50)  # 1 anchor and 50 dimensions: the method must refuse
    assert len(frame) == 1 and np.isnan(frame["accuracy"].iloc[0]) and np.isnan(frame["seconds"].iloc[0])
    assert frame["error"].iloc[0].startswith("ValueError: ")  # the method's own message, kept


def test_compare_files_must_be_paired(tmp_path, capsys):
    a, b = curve(40)
    write_view(tmp_path / "a.csv", a)
    write_view(tmp_path / "b.csv", b[:39])
    err = bad(["compare", tmp_path / "a.csv", tmp_path / "b.csv", "--methods", SPECTRAL[0]], capsys)
    assert "paired files need the same number of rows (or row names in every file); got {'a': 40, 'b': 39}" in err


def test_bad_option_and_names(files, capsys):
    folder, _, _ = files
    common = ["align", folder / "a.csv", folder / "b.npy", "--anchors", folder / "pairs.csv", "--out",
              folder / "m.csv"]
    assert "--names gives 1 names for 2 view files" in bad([*common, "--names", "x"], capsys)
    assert "--set 'oops': expected KEY=VALUE" in bad([*common, "--set", "oops"], capsys)
    assert "--matcher and --cost are MAD's" in bad([*common, "--matcher", "myopic"], capsys)


def test_compare_unknown_dataset(capsys):
    err = bad(["compare", "--dataset", "nothing"], capsys)
    assert "unknown dataset 'nothing'; datasets: mad_toy_linear_shared" in err


def test_experiment_list_and_run(tmp_path, capsys, monkeypatch):
    (tmp_path / "toy_exp.py").write_text(
        '"""Reproduces nothing: a toy for the test.\n\nMore text."""\n'
        "import sys\n"
        "def main(argv=None):\n"
        "    open(argv[0], 'w').write('ran')\n"
        "    return 0\n")
    (tmp_path / "_helper.py").write_text("")
    monkeypatch.setattr(cli, "experiments_dir", lambda: tmp_path)
    code, out, _ = run(["experiment", "--list"], capsys)
    assert code == 0 and out.split() == "toy_exp Reproduces nothing: a toy for the test.".split()
    code, _, _ = run(["experiment", "toy-exp", tmp_path / "flag.txt"], capsys)
    assert code == 0 and (tmp_path / "flag.txt").read_text() == "ran"
    err = bad(["experiment", "nope"], capsys)
    assert "unknown experiment 'nope'; experiments: toy_exp" in err
    monkeypatch.setattr(cli, "experiments_dir", lambda: None)
    err = bad(["experiment", "--list"], capsys)
    assert "experiments/ folder is not available" in err


def test_experiment_list_of_the_repository(capsys):
    found = cli.list_experiments()
    folder = cli.experiments_dir()
    expected = sorted(p.stem for p in folder.glob("*.py") if not p.name.startswith("_")) if folder else []
    assert sorted(found) == expected


def test_demo_with_spectral_methods(tmp_path, capsys, monkeypatch):
    pytest.importorskip("bayesalign.metrics")
    monkeypatch.setattr(compare, "DEMO_METHODS", tuple(SPECTRAL[:2]))  # MAD is too slow for a test
    monkeypatch.setitem(compare.DEMO_DATASETS, "digits", ("digits_halves", {"digit": 0, "n": 40}, "zeros"))
    code, out, err = run(["demo", "--dataset", "digits", "--out", tmp_path / "demo"], capsys)
    assert code == 0, err
    runs = pd.read_csv(tmp_path / "demo" / "demo_runs.csv", keep_default_na=False)
    assert sorted(set(runs["method"])) == sorted(SPECTRAL[:2]) and set(runs["anchor_fraction"]) == {0.25, 0.5}
    assert (runs["error"] == "").all() and (runs["n_anchors"] == [10, 10, 20, 20]).all()
    assert "| zeros |" in out
    written = {p.name for p in (tmp_path / "demo").iterdir()}
    assert {"demo.md", "demo_reliability.png", "demo_matched_digits.png", "demo_zeros_accuracy.png"} \
        <= written


# the installed entry point --------------------------------------------------------------------------
def test_console_script_entry_point(files):
    folder, _, _ = files
    exe = shutil.which("bayesalign", path=str(Path(sys.executable).parent)) or shutil.which("bayesalign")
    if exe is None:
        pytest.skip("the bayesalign console script is not installed")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    argv = ["align", folder / "a.csv", folder / "b.npy", "--anchors", folder / "pairs.csv", "--method",
            SPECTRAL[0], "--out", folder / "m.csv"]
    done = subprocess.run([exe, *map(str, argv)], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert len(pd.read_csv(folder / "m.csv")) == 40
    done = subprocess.run([exe, "align", "x.csv", "y.csv", "--anchors", "p.csv", "--out", "m.csv", "--method",
                           SPECTRAL[0]],
                          capture_output=True, text=True, env=env, timeout=120, cwd=folder)
    assert done.returncode == 2 and done.stderr.strip() == "bayesalign align: error: x.csv: no such file"


# the registry's matching of deterministic embeddings ------------------------------------------------
def test_match_embedding_recovers_a_permutation_with_confident_probabilities():
    from bayesalign.data import AlignmentProblem, Correspondence, LatentEmbedding
    from bayesalign.registry import match_embedding

    rng = np.random.default_rng(0)
    a = np.arange(12.0)[:, None]  # [12, 1] one unit apart
    perm = rng.permutation(12)  # row i of a is row perm[i] of b
    b = np.empty_like(a)
    b[perm] = a + 0.01 * rng.normal(size=a.shape)
    anchors = Correspondence.from_pairs([(i, perm[i]) for i in range(3)], ("a", "b"))
    problem = AlignmentProblem({"a": a, "b": b}, anchors=anchors)
    al = match_embedding(LatentEmbedding({"a": a, "b": b}), problem, "a", "b")
    assert al.index_a.tolist() == list(range(3, 12)) and al.index_b.tolist() == perm[3:].tolist()
    rows_b = np.setdiff1d(np.arange(12), perm[:3])
    cost = (a[3:] - b[rows_b].T) ** 2  # [9, 9]
    assert al.info["temperature"] == pytest.approx(np.median(np.r_[cost.min(1), cost.min(0)]))
    assert al.probabilities.min() > 0.999  # the next candidate is ~1e4 temperatures away


def test_match_embedding_gives_one_half_to_a_symmetric_tie():
    from bayesalign.data import AlignmentProblem, LatentEmbedding
    from bayesalign.registry import match_embedding

    a, b = np.array([[0.0], [1.0]]), np.array([[0.5], [0.5]])  # every pair costs 0.25
    problem = AlignmentProblem({"a": a, "b": b})
    al = match_embedding(LatentEmbedding({"a": a, "b": b}), problem, "a", "b")
    np.testing.assert_allclose(al.probabilities, [0.5, 0.5], atol=1e-9)
    np.testing.assert_allclose(al.costs, [0.25, 0.25])


def test_build_maps_common_settings_onto_each_class():
    from bayesalign.registry import _build

    class Spectral:
        def __init__(self, n_components=2, random_state=None):
            self.n_components, self.random_state = n_components, random_state

    class Bayesian:
        def __init__(self, latent_dim=5, seed=None, device=None, progress=True, **kwargs):
            self.latent_dim, self.seed, self.device, self.progress, self.kwargs = (latent_dim, seed, device,
                                                                                  progress, kwargs)

    s = _build(Spectral, latent_dim=3, seed=7, device="cuda", progress=False)
    assert (s.n_components, s.random_state) == (3, 7)
    m = _build(Bayesian, latent_dim=3, seed=7, device="cuda", progress=False, max_iter=10)
    assert (m.latent_dim, m.seed, m.device, m.progress, m.kwargs) == (3, 7, "cuda", False, {"max_iter": 10})
    with pytest.raises(ValueError, match="Spectral has no option 'max_iter'"):
        _build(Spectral, max_iter=10)


# trustworthy outputs: interrupts, refusals before the fit, all-or-none writes ------------------------
MAD_FOREVER = ["--method", "mad", "--latent-dim", "3", "--set", "num_inducing=30", "--set", "max_iter=1000000",
               "--set", "warmup_iters=10", "--set", "tol=0"]


def _long_fit_files(folder):
    """Two views of a noisy closed curve, 300 rows each (a.csv, b.npy), 30 anchor pairs (pairs.csv) and an
    existing output file m.csv: a MAD fit on them runs for seconds (on 40 rows L-BFGS may stop within the
    second an interrupt test waits). Returns the output file."""
    rng = np.random.default_rng(0)
    t = np.linspace(0, 2 * np.pi, 300, endpoint=False)
    a = np.c_[np.cos(t), np.sin(t), 0.5 * np.sin(2 * t)] + 0.1 * rng.normal(size=(300, 3))  # [300, 3]
    np.savetxt(folder / "a.csv", a, delimiter=",")
    np.save(folder / "b.npy", 2.0 * a[:, ::-1] + 0.1 * rng.normal(size=(300, 3)))
    (folder / "pairs.csv").write_text("".join(f"{i},{i}\n" for i in range(0, 300, 10)))
    out = folder / "m.csv"
    out.write_text("previous results\n")
    return out


def test_sigint_during_a_mad_fit_exits_130_and_leaves_the_output(tmp_path):
    """Ctrl-C (SIGINT) while `bayesalign align --method mad` fits: the command stops at once with exit
    status 130, the existing output file is unchanged and no temporary file is left."""
    folder = tmp_path
    out = _long_fit_files(folder)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    argv = [sys.executable, "-m", "bayesalign.cli", "align", folder / "a.csv", folder / "b.npy", "--anchors",
            folder / "pairs.csv", *MAD_FOREVER, "--out", out]
    proc = subprocess.Popen([str(a) for a in argv], stderr=subprocess.PIPE, text=True, env=env)
    try:
        for line in proc.stderr:  # the line printed just before the fit starts
            if "anchor pairs" in line:
                break
        time.sleep(1.0)  # well inside the fit (about 10 s uninterrupted here; L-BFGS stops on its own)
        assert proc.poll() is None, "the fit ended before it could be interrupted"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted; no output written" in err
    assert out.read_text() == "previous results\n"
    assert [p.name for p in folder.iterdir() if p.name.endswith(".tmp")] == []


def test_sigint_during_a_parallel_ensemble_fit_stops_the_workers_too(tmp_path):
    """Ctrl-C (SIGINT to the process group, as a terminal sends it) while `bayesalign align --method mad-ensemble`
    fits its members in two worker processes (``n_jobs=2``): exit status 130, the output file unchanged, and no
    process of the command (workers, joblib's resource tracker) left behind within a few seconds."""
    out = _long_fit_files(tmp_path)
    forever = "{'num_inducing': 30, 'max_iter': 1000000, 'warmup_iters': 10, 'tol': 0}"
    argv = [sys.executable, "-m", "bayesalign.cli", "align", tmp_path / "a.csv", tmp_path / "b.npy", "--anchors",
            tmp_path / "pairs.csv", "--method", "mad-ensemble", "--set", "latent_dims=(3,)", "--set", "n_jobs=2",
            "--set", f"member_options={forever}", "--out", out]
    proc = subprocess.Popen([str(x) for x in argv], stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env=dict(os.environ, OMP_NUM_THREADS="1"))
    try:
        for line in proc.stderr:  # the line printed just before the fit starts
            if "anchor pairs" in line:
                break
        time.sleep(8.0)  # the workers start (a few seconds: each imports torch) and fit
        assert proc.poll() is None, "the fit ended before it could be interrupted"
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        deadline = time.monotonic() + 20.0
        while True:  # the command's process group: empty once every worker and helper process has gone
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                break
            assert time.monotonic() < deadline, "worker processes of the interrupted command are still running"
            time.sleep(0.2)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert proc.returncode == 130, err
    assert "interrupted; no output written" in err
    assert out.read_text() == "previous results\n"


def test_an_interrupted_fit_writes_nothing(files, capsys, monkeypatch):
    """In process: KeyboardInterrupt from the method -> 130, no output file appears."""
    from bayesalign import registry

    folder, _, _ = files

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(registry, "run_method", interrupted)
    code, _, err = run(["align", folder / "a.csv", folder / "b.npy", "--anchors", folder / "pairs.csv",
                        "--method", SPECTRAL[0], "--out", folder / "m.csv", "--embedding", folder / "e.npz"], capsys)
    assert code == 130 and "interrupted" in err
    assert not (folder / "m.csv").exists() and not (folder / "e.npz").exists()


@pytest.mark.parametrize("target", ["a.csv", "b.npy", "pairs.csv", "./sub/../b.npy"])
def test_out_naming_an_input_file_is_refused(files, capsys, target):
    folder, _, _ = files
    (folder / "sub").mkdir()
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    for flag in ("--out", "--embedding"):
        outputs = {"--out": folder / "m.csv", "--embedding": folder / "e.npz"}
        outputs[flag] = folder / target
        code, _, err = run(["align", folder / "a.csv", folder / "b.npy", "--anchors", folder / "pairs.csv",
                            "--method", SPECTRAL[0], *(x for kv in outputs.items() for x in kv)], capsys)
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert f"{flag} " in err and "would be overwritten" in err
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == before


@pytest.mark.parametrize("case", ["directory", "folder is a file", "same file twice", "bad device",
                                  "no cuda", "embedding is a directory"])
def test_bad_outputs_and_device_fail_before_the_fit(files, capsys, case):
    """Exit 2 with one line before any view is read or fitted (the line announcing the fit never comes),
    and nothing is written."""
    folder, _, _ = files
    (folder / "outdir").mkdir()
    (folder / "plain").write_text("a file\n")
    out, embedding, extra = folder / "m.csv", folder / "e.npz", []
    expected = {"directory": "is a directory", "folder is a file": "is not a directory",
                "same file twice": "name the same file", "bad device": "not a torch device",
                "no cuda": "no CUDA device", "embedding is a directory": "is a directory"}[case]
    if case == "directory":
        out = folder / "outdir"
    elif case == "folder is a file":
        out = folder / "plain" / "m.csv"
    elif case == "same file twice":
        embedding = out
    elif case == "bad device":
        extra = ["--device", "gpu-please"]
    elif case == "no cuda":
        if __import__("torch").cuda.is_available():
            pytest.skip("this machine has CUDA")
        extra = ["--device", "cuda"]
    else:
        embedding = folder / "outdir"
    before = sorted(p.name for p in folder.rglob("*"))
    code, _, err = run(["align", folder / "a.csv", folder / "b.npy", "--anchors", folder / "pairs.csv",
                        "--method", "mad", "--out", out, "--embedding", embedding, *extra], capsys)
    assert code == 2 and expected in err and len(err.strip().splitlines()) == 1, err
    assert "anchor pairs" not in err  # refused before the fit was announced
    assert sorted(p.name for p in folder.rglob("*")) == before


def test_outputs_are_written_all_or_none(files, capsys, monkeypatch):
    """A failure while writing the embedding leaves the matches file as it was too."""
    folder, _, _ = files
    out, embedding = folder / "m.csv", folder / "e.npz"
    out.write_text("previous results\n")

    def crash(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savez", crash)
    code, _, err = run(["align", folder / "a.csv", folder / "b.npy", "--anchors", folder / "pairs.csv",
                        "--method", SPECTRAL[0], "--out", out, "--embedding", embedding], capsys)
    assert code == 2 and "No space left" in err
    assert out.read_text() == "previous results\n" and not embedding.exists()
    assert [p.name for p in folder.iterdir() if p.name.endswith(".tmp")] == []


def test_replacing_an_output_keeps_its_mode_and_writes_through_a_link(files, capsys):
    folder, _, _ = files
    argv = ["align", folder / "a.csv", folder / "b.npy", "--anchors", folder / "pairs.csv", "--method",
            SPECTRAL[0], "--out"]
    private = folder / "private.csv"
    private.write_text("old\n")
    private.chmod(0o600)
    assert run([*argv, private], capsys)[0] == 0
    assert stat.S_IMODE(private.stat().st_mode) == 0o600 and len(pd.read_csv(private)) == 40
    (folder / "results").mkdir()
    target = folder / "results" / "m.csv"
    target.write_text("old\n")
    link = folder / "latest.csv"
    link.symlink_to(target)
    assert run([*argv, link], capsys)[0] == 0
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert len(pd.read_csv(target)) == 40


def test_sigterm_mid_write_leaves_no_temporary_file(tmp_path):
    """The command turns SIGTERM into SystemExit(143), so a writer killed mid-write removes its
    temporary file and leaves the old output."""
    out = tmp_path / "m.csv"
    out.write_text("previous results\n")
    script = ("import os, signal, sys\n"
              "from bayesalign import cli\n"
              "from bayesalign._utils import atomic_write\n"
              "cli._terminate_cleanly()\n"
              "with atomic_write(sys.argv[1]) as handle:\n"
              "    handle.write('half of it')\n"
              "    os.kill(os.getpid(), signal.SIGTERM)\n"
              "    handle.write('never')\n")
    done = subprocess.run([sys.executable, "-c", script, str(out)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 143, done.stderr
    assert out.read_text() == "previous results\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.csv"]


def test_standardise_makes_the_matches_independent_of_column_units(files, capsys):
    """--standardise: a column of view b in other units (x 1e6, shifted) gives the same matches as the
    original; without it the scaled column dominates and the matches change."""
    folder, _, _ = files
    b = np.load(folder / "b.npy")
    scaled = b.copy()
    scaled[:, 0] = scaled[:, 0] * 1e6 + 5e6
    np.save(folder / "c.npy", scaled)
    common = ["--anchors", folder / "pairs.csv", "--method", SPECTRAL[0], "--names", "a", "b"]
    outs = {}
    for name, view, extra in (("plain", "b.npy", ["--standardise"]), ("scaled", "c.npy", ["--standardise"]),
                              ("raw", "c.npy", [])):
        code, _, err = run(["align", folder / "a.csv", folder / view, *common, *extra, "--out",
                            folder / f"{name}.csv"], capsys)
        assert code == 0, err
        outs[name] = pd.read_csv(folder / f"{name}.csv")[["index_a", "index_b"]]
    pd.testing.assert_frame_equal(outs["plain"], outs["scaled"])
    assert not outs["raw"].equals(outs["plain"])


@pytest.mark.parametrize("argv", [["demo", "--device", "gpu-please"], ["demo", "--out", "{plain}"],
                                  ["compare", "--dataset", "x", "--out", "{plain}/sub"]])
def test_demo_and_compare_refuse_a_bad_device_or_out_folder_before_running(tmp_path, capsys, argv):
    plain = tmp_path / "plain"
    plain.write_text("a file, not a folder\n")
    code, _, err = run([a.format(plain=plain) for a in argv], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "not a torch device" in err or "is not a directory" in err
    assert plain.read_text() == "a file, not a folder\n"


def test_an_interrupt_a_library_swallowed_still_writes_nothing(files, capsys, monkeypatch):
    """Ctrl-C whose KeyboardInterrupt was caught inside a library (a bare ``except``) during the fit: the
    recorded interrupt stops the command before it writes (exit 130, no output file)."""
    from bayesalign import registry

    folder, _, _ = files
    real = registry.run_method

    def swallowing(*args, **kwargs):
        try:
            os.kill(os.getpid(), signal.SIGINT)  # goes to the command's handler: recorded, then raised
            time.sleep(1.0)  # the handler runs here at the latest
        except KeyboardInterrupt:
            pass  # what a bare ``except`` in a library does
        return real(*args, **kwargs)

    monkeypatch.setattr(registry, "run_method", swallowing)
    before = signal.getsignal(signal.SIGINT)  # Python's default, or SIG_IGN when run in the background by a shell
    code, _, err = run(["align", folder / "a.csv", folder / "b.npy", "--anchors", folder / "pairs.csv",
                        "--method", SPECTRAL[0], "--out", folder / "m.csv"], capsys)
    assert code == 130 and "interrupted; no output written" in err
    assert not (folder / "m.csv").exists()
    assert signal.getsignal(signal.SIGINT) is before  # the handler is put back


def test_every_command_s_help_prints_without_escapes_or_placeholders():
    """Each subcommand's --help renders: no doubled percent sign (argparse formats arguments' help with %,
    not descriptions) and no unformatted placeholder."""
    import argparse
    import contextlib
    import io

    from bayesalign.cli import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    for name, sub in [("bayesalign", parser), *commands.items()]:
        text = io.StringIO()
        with contextlib.redirect_stdout(text):
            sub.print_help()
        assert text.getvalue().strip(), name
        assert "%%" not in text.getvalue() and "%(" not in text.getvalue(), name


def test_compare_pairs_files_by_row_name(tmp_path, capsys):
    # the same named rows in another order: the metrics must be those of the files in one order
    a, b = curve(40)
    names = [f"r{i}" for i in range(40)]
    order = np.random.default_rng(1).permutation(40)
    write_view(tmp_path / "a.csv", a, row_names=names)
    write_view(tmp_path / "b.csv", b[order], row_names=[names[i] for i in order])
    write_view(tmp_path / "b_sorted.csv", b, row_names=names)
    accuracies = []
    for other in ("b.csv", "b_sorted.csv"):
        code, _, err = run(["compare", tmp_path / "a.csv", tmp_path / other, "--methods", SPECTRAL[0],
                            "--anchors", 0.25, "--seeds", 1, "--out", tmp_path / other.split(".")[0]], capsys)
        assert code == 0, err
        assert "rows paired by their names" in err
        runs = pd.read_csv(tmp_path / other.split(".")[0] / "comparison_runs.csv")
        accuracies.append(float(runs["accuracy"].iloc[0]))
    assert accuracies[0] == pytest.approx(accuracies[1], abs=1e-12)  # the same problem, the same seeded fit


def test_rough_edges_name_the_argument(files, capsys, monkeypatch):
    folder, _, _ = files
    common = ["align", folder / "a.csv", folder / "b.npy", "--anchors", folder / "pairs.csv", "--out",
              folder / "m.csv"]
    code, _, err = run([*common, "--seed", "-1"], capsys)
    assert code == 2 and "argument --seed: expected a non-negative integer, got -1" in err
    if METHODS["mad"].available:
        assert "--set max_iter=abc: max_iter takes a number" in bad([*common, "--method", "mad", "--set",
                                                                     "max_iter=abc"], capsys)
    write_view(folder / "one.csv", np.zeros((1, 3)))
    one = ["align", folder / "one.csv", folder / "b.npy", "--anchors", folder / "none.csv", "--out", folder / "m.csv"]
    (folder / "none.csv").write_text("0,0\n")
    assert f"view file {folder / 'one.csv'}: 1 row" in bad(one, capsys)
    (folder / "dir.csv").mkdir()
    assert "not a file" in bad([*common[:4], folder / "dir.csv", *common[5:]], capsys)

    def denied(path):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr("bayesalign.io.views._open_text", denied)
    assert "a.csv: cannot be read (Permission denied)" in bad(common, capsys)


def test_ctrl_c_while_the_modules_load_exits_130_without_traceback(capsys, monkeypatch):
    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", interrupted)
    code, _, err = run(["align", "--list-methods"], capsys)
    assert code == 130 and "Traceback" not in err and "interrupted" in err
