"""bayesalign.compare in parallel: the same table whatever the backend, and a cache that resumes a grid."""

import json

import numpy as np
import pandas as pd
import pytest

from bayesalign import compare

# the MAD fits are short on purpose: the tables are compared with each other, not with a good fit
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

# a tiny grid: two fast spectral methods and one MAD fit with two matchers (one task), two seeds
METHODS = ["cca", "joint-laplacian", "mad-hungarian-likelihood", "mad-sinkhorn-mean"]
GRID = dict(datasets=["mad_toy_linear_shared"], methods=METHODS, fractions=[0.2], seeds=2, quick=True,
            latent_dim=3)
# columns that depend on the data and the seeds only (seconds are wall time)
RESULT_COLUMNS = ["dataset", "method", "anchor_fraction", "seed", "n_anchors", "n_heldout", *compare.METRICS,
                  "error"]
# the fits run in other processes but one thread each (OMP_NUM_THREADS=1 in the test environment, loky's
# limit in its workers): the same arithmetic, so agreement is to round-off of a different summation order
# at most
TOL = 1e-9


@pytest.fixture(scope="module", autouse=True)
def short_bayesian_fits():
    saved = compare.QUICK_BAYESIAN
    compare.QUICK_BAYESIAN = {"max_iter": 40, "warmup_iters": 10, "num_inducing": 8}
    yield
    compare.QUICK_BAYESIAN = saved


def assert_same_table(left, right):
    left, right = left[RESULT_COLUMNS], right[RESULT_COLUMNS]
    pd.testing.assert_frame_equal(left, right, check_exact=False, rtol=TOL, atol=TOL)


@pytest.fixture(scope="module")
def serial_table(short_bayesian_fits):
    return compare.run_comparison(**GRID, jobs=1)


def test_the_grid_is_in_grid_order_and_ran(serial_table):
    assert list(serial_table["method"]) == METHODS * 2
    assert list(serial_table["seed"]) == [0] * 4 + [1] * 4
    assert (serial_table["error"] == "").all(), serial_table["error"].tolist()
    assert serial_table["accuracy"].between(0, 1).all()


def test_two_processes_give_the_same_table(serial_table):
    # the spectral methods only: a worker that fits MAD imports torch first (seconds); the Dask test below
    # runs the shared MAD fit in parallel
    spectral = METHODS[:2]
    parallel = compare.run_comparison(**dict(GRID, methods=spectral), jobs=2)
    assert_same_table(parallel, serial_table[serial_table["method"].isin(spectral)].reset_index(drop=True))


def test_a_resumed_run_fits_nothing_that_is_cached(serial_table, tmp_path, monkeypatch):
    calls = []
    real = compare.run_method

    def counting(name, problem, **kwargs):
        calls.append((name, kwargs.get("fitted") is not None))
        return real(name, problem, **kwargs)

    monkeypatch.setattr(compare, "run_method", counting)
    half = dict(GRID, seeds=[0])
    first = compare.run_comparison(**half, cache=tmp_path)
    assert len(calls) == 4 and len(list(tmp_path.glob("*.json"))) == 4
    calls.clear()
    resumed = compare.run_comparison(**GRID, cache=tmp_path)  # extends the grid to seed 1
    assert sorted(name for name, _ in calls) == sorted(METHODS)  # only seed 1 ran: one call per method
    assert_same_table(resumed, serial_table)
    assert_same_table(resumed[resumed["seed"] == 0].reset_index(drop=True), first)
    calls.clear()
    again = compare.run_comparison(**GRID, cache=tmp_path)
    assert calls == []  # nothing left to fit
    assert_same_table(again, serial_table)
    # a cache made with other settings is not read
    compare.run_comparison(**dict(half, latent_dim=2, methods=["cca"]), cache=tmp_path)
    assert calls == [("cca", False)]
    stored = json.loads((tmp_path / "mad_toy_linear_shared__cca__0.2__0.json").read_text())
    assert stored["settings"]["latent_dim"] == 2 and stored["row"]["method"] == "cca"


def test_dask_cluster_gives_the_same_table(serial_table):
    distributed = pytest.importorskip("dask.distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) \
            as cluster:
        table = compare.run_comparison(**GRID, jobs=-1, backend="dask", scheduler=cluster.scheduler_address)
    assert_same_table(table, serial_table)


def test_failed_runs_are_recorded_not_cached(tmp_path, monkeypatch):
    def failing(name, problem, **kwargs):
        raise np.linalg.LinAlgError("not positive definite")

    monkeypatch.setattr(compare, "run_method", failing)
    table = compare.run_comparison(**dict(GRID, methods=["cca"], seeds=1), cache=tmp_path)
    assert table["error"].tolist() == ["LinAlgError: not positive definite"]
    assert list(tmp_path.glob("*.json")) == []


def test_unknown_backend_and_missing_scheduler_are_refused():
    with pytest.raises(ValueError, match="backend must be one of"):
        compare.run_comparison(**dict(GRID, methods=["cca"]), backend="ray")
    pytest.importorskip("dask.distributed")
    with pytest.raises(ValueError, match="needs a scheduler address"):
        compare.run_comparison(**dict(GRID, methods=["cca"]), jobs=2, backend="dask")


def test_compare_command_with_jobs_and_cache(tmp_path, capsys):
    from bayesalign import cli

    argv = ["compare", "--dataset", "mad_toy_linear_shared", "--methods", "cca", "--anchors", "0.2", "--seeds", "1",
            "--quick", "--latent-dim", "2", "--out", str(tmp_path / "out"), "--cache", str(tmp_path / "cache")]
    assert cli.main(argv) == 0, capsys.readouterr().err
    assert [p.name for p in (tmp_path / "cache").iterdir()] == ["mad_toy_linear_shared__cca__0.2__0.json"]
    capsys.readouterr()
    assert cli.main(argv) == 0
    assert "(cached)" in capsys.readouterr().err
    for bad, message in ((["--jobs", "0"], "--jobs must be"), (["--scheduler", "tcp://x:1"], "add --backend dask"),
                         (["--backend", "dask"], "--backend dask needs")):
        assert cli.main(argv + bad) == 2
        assert message in capsys.readouterr().err


def test_write_results_lists_only_what_it_wrote(tmp_path, serial_table):
    (tmp_path / "comparison.csv").write_text("a summary of an earlier run\n")
    written = compare.write_results(serial_table.iloc[:0], tmp_path)  # no runs: no summary to write
    assert [p.name for p in written] == ["comparison_runs.csv", "comparison.md"]
    written = compare.write_results(serial_table, tmp_path)
    assert {"comparison_runs.csv", "comparison.csv", "comparison.md"} <= {p.name for p in written}
    assert all(p.exists() for p in written)
