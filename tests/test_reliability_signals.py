"""Warnings, interrupts and resources that a run must not leak: numeric overflow in the sparse Sinkhorn, worker
processes that Ctrl-C reaches while they start, semaphores of parallel runs."""

import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from bayesalign.matching import matcher, mean_distance_cost, sinkhorn


def _packed_beside_spread(seed: int, n: int = 100):
    """Half of a's rows packed near the origin beside b's spread rows: many of b's rows are in few rows' nearest
    neighbours, so the potentials of the candidates-only solve give left-out pairs masses far above 1."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, 3)) * np.r_[np.ones(n // 2), np.full(n - n // 2, 0.05)][:, None]
    return a, rng.standard_normal((n, 3))


@pytest.mark.parametrize("seed", [0, 1])
def test_sparse_sinkhorn_completion_overflows_nothing_and_matches_the_dense_marginals(monkeypatch, seed):
    # the candidate path that sinkhorn_probabilities takes above DENSE_SINKHORN_MAX pairs, on a small problem
    monkeypatch.setattr(matcher, "DENSE_SINKHORN_MAX", 0)
    a, b = _packed_beside_spread(seed)
    T = 0.1
    C = mean_distance_cost(a, b)
    info = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        P = matcher.sinkhorn_probabilities(C, T, None, a, b, info=info)
    assert info["sinkhorn_error"] <= 1e-3
    dense = sinkhorn(C, temperature=T, tol=1e-3, n_iter=20_000).marginals
    # 5e-3: both solves stop at a column error of 1e-3 (the sparse one with at most 1e-3 of mass left out per
    # row), which moves a marginal by a few times that
    np.testing.assert_allclose(P, dense, atol=5e-3)


# Ctrl-C as a terminal sends it: SIGINT to the command's whole process group -----------------------------------
posix = pytest.mark.skipif(os.name != "posix", reason="process groups and signal masks are POSIX")


def _start(argv, tmp_path):
    """The command in a process group of its own (that group is the one signalled), SIGINT at its default
    disposition (a shell running the tests in the background ignores it, and children inherit that)."""
    def deliverable():
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    return subprocess.Popen([str(x) for x in argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path, start_new_session=True, preexec_fn=deliverable,
                            env=dict(os.environ, OMP_NUM_THREADS="1"))


def _children(pid: int) -> list[int]:
    """Process ids whose parent is ``pid`` (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _sigint_blocked_or_ignored(pid: int) -> bool | None:
    """Whether process ``pid`` blocks or ignores SIGINT (its /proc status masks); None if it has gone."""
    try:
        status = dict(line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                      if ":\t" in line)
    except OSError:
        return None
    bit = 1 << (signal.SIGINT - 1)
    return bool((int(status["SigBlk"], 16) | int(status["SigIgn"], 16)) & bit)


def _finish(proc, timeout=60.0):
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return out, err


def _compare(methods, seeds: int, out) -> list:
    """``bayesalign compare`` on two worker processes (one task per method and seed)."""
    return [sys.executable, "-m", "bayesalign.cli", "compare", "--dataset", "mad_toy_linear_shared", "--methods",
            *methods, "--anchors", "0.2", "--quick", "--latent-dim", "2", "--jobs", "2", "--seeds", str(seeds),
            "--out", out]


def _interrupt_as_workers_start(argv, tmp_path):
    """Start the command, SIGINT its process group once two loky workers and the resource tracker exist (the
    workers import numpy and joblib for a second or more after they appear: Ctrl-C then reaches them too), and
    check that it stops at once with status 130, no traceback or leaked semaphore, and that every child process
    started deaf to SIGINT (only the command itself takes Ctrl-C)."""
    proc = _start(argv, tmp_path)
    deadline = time.monotonic() + 60.0
    while len(_children(proc.pid)) < 3 and proc.poll() is None:  # the two workers and loky's resource tracker
        assert time.monotonic() < deadline, "no worker process started"
        time.sleep(0.02)
    deaf = [_sigint_blocked_or_ignored(pid) for pid in _children(proc.pid)]
    os.killpg(proc.pid, signal.SIGINT)
    started = time.monotonic()
    _, err = _finish(proc)
    assert proc.returncode == 130, err
    assert time.monotonic() - started < 20.0, "the interrupted command took long to stop"
    assert "Traceback" not in err and "leaked semaphore" not in err, err
    assert "interrupted; no output written" in err
    assert all(d for d in deaf if d is not None), deaf


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process table from /proc")
def test_ctrl_c_while_the_parallel_workers_start_leaks_nothing(tmp_path):
    _interrupt_as_workers_start(_compare(["cca", "joint-laplacian"], 20, tmp_path / "out"), tmp_path)
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process table from /proc")
def test_ctrl_c_while_the_ensemble_s_workers_start_leaks_nothing(tmp_path):
    # MADEnsemble fitting its two members in two worker processes (`align --method mad-ensemble`)
    from test_cli import _long_fit_files

    out = _long_fit_files(tmp_path)
    _interrupt_as_workers_start([sys.executable, "-m", "bayesalign.cli", "align", tmp_path / "a.csv",
                                 tmp_path / "b.npy", "--anchors", tmp_path / "pairs.csv", "--method", "mad-ensemble",
                                 "--set", "n_jobs=2", "--out", out], tmp_path)
    assert out.read_text() == "previous results\n"


@posix
def test_a_parallel_comparison_leaks_no_semaphore(tmp_path):
    script = ("from bayesalign import compare; compare.run_comparison(datasets=['mad_toy_linear_shared'], "
              "methods=['cca'], fractions=[0.2], seeds=2, quick=True, latent_dim=2, jobs=2)")  # two tasks, two workers
    proc = _start([sys.executable, "-c", script], tmp_path)
    _, err = _finish(proc, timeout=300.0)
    assert proc.returncode == 0, err
    assert "leaked semaphore" not in err and "Traceback" not in err, err


# Ctrl-C while the command line starts ---------------------------------------------------------------------------
@posix
@pytest.mark.parametrize("after", ["numpy.version", "bayesalign.cli_checks", "bayesalign.io"])
def test_ctrl_c_while_the_command_starts_exits_130_and_writes_nothing(tmp_path, after):
    # -X importtime names each module as its import ends: the interrupt lands while numpy's import is under way
    # (import bayesalign), as the command's module loads, or while main() loads the file readers
    rng = np.random.default_rng(0)
    for name in ("a.csv", "b.csv"):
        np.savetxt(tmp_path / name, rng.normal(size=(20, 3)), delimiter=",")
    (tmp_path / "pairs.csv").write_text("".join(f"{i},{i}\n" for i in range(0, 20, 2)))
    proc = _start([sys.executable, "-X", "importtime", "-m", "bayesalign.cli", "align", "a.csv", "b.csv", "--anchors",
                   "pairs.csv", "--out", "m.csv"], tmp_path)
    for line in proc.stderr:
        if line.startswith("import time:") and line.rsplit("|", 1)[-1].strip() == after:
            break
    else:
        pytest.fail(f"the command ended before it imported {after}")
    os.kill(proc.pid, signal.SIGINT)
    started = time.monotonic()
    _, err = _finish(proc)
    said = [line for line in err.splitlines() if not line.startswith("import time:")]
    assert proc.returncode == 130, said
    assert time.monotonic() - started < 10.0
    assert said == ["bayesalign: interrupted; no output written"] or \
        said == ["bayesalign align: interrupted; no output written"], said
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv", "b.csv", "pairs.csv"]


def test_sparse_sinkhorn_recentres_underflowing_potentials_and_goes_on_in_the_scaling_form(monkeypatch):
    # a cold temperature (a tenth of the median nearest cost): from the start f_i = min_j C_ij, a column far from
    # every row's nearest candidate has kernel entries that all underflow. One log-domain sweep re-centres them and
    # the scaling form goes on; the fixed point is the one the log domain alone reaches, and dense Sinkhorn's
    from bayesalign.matching import entropic

    monkeypatch.setattr(matcher, "DENSE_SINKHORN_MAX", 0)
    a, b = _packed_beside_spread(0)
    C = mean_distance_cost(a, b)
    T = 0.1 * float(np.median(C.min(1)))
    calls = []
    log_sweeps = entropic._SparseSinkhorn.solve_log

    def counted(self, temp, f, g, stage_tol, budget):
        out = log_sweeps(self, temp, f, g, stage_tol, budget)
        calls.append(out[2])
        return out

    monkeypatch.setattr(entropic._SparseSinkhorn, "solve_log", counted)
    P = matcher.sinkhorn_probabilities(C, T, None, a, b)
    assert calls and max(calls) == 1  # re-centring sweeps only: no stage finished in the log domain
    monkeypatch.setattr(entropic, "_LOG_RESETS", 0)  # every stuck stage in the log domain
    calls.clear()
    P_log = matcher.sinkhorn_probabilities(C, T, None, a, b)
    assert max(calls) > 1
    dense = sinkhorn(C, temperature=T, tol=1e-3, n_iter=50_000).marginals
    # 5e-3: each solve stops at a column error of 1e-3, which moves a marginal by a few times that
    np.testing.assert_allclose(P.toarray() if hasattr(P, "toarray") else P, dense, atol=5e-3)
    np.testing.assert_allclose(P_log.toarray() if hasattr(P_log, "toarray") else P_log, dense, atol=5e-3)
