"""bayesalign.compare's cache is keyed by every setting of a run, and its progress bar stays out of log files."""

import io
import json
import sys

import pytest

import bayesalign
from bayesalign import compare

GRID = dict(datasets=["mad_toy_linear_shared"], methods=["cca"], fractions=[0.2], seeds=1, quick=True, latent_dim=2)


def runs_of(monkeypatch):
    calls = []
    real = compare.run_method

    def counting(name, problem, **kwargs):
        calls.append(name)
        return real(name, problem, **kwargs)

    monkeypatch.setattr(compare, "run_method", counting)
    return calls


def test_a_cached_run_records_every_setting_and_is_read_only_under_the_same(tmp_path, monkeypatch):
    calls = runs_of(monkeypatch)
    first = compare.run_comparison(**GRID, cache=tmp_path)
    (path,) = tmp_path.glob("*.json")
    settings = json.loads(path.read_text())["settings"]
    assert settings == {"version": bayesalign.__version__, "quick": compare.QUICK_BAYESIAN, "latent_dim": 2,
                        "device": None, "dataset": "mad_toy_linear_shared", "label": "mad_toy_linear_shared",
                        "method": "cca", "target": "bayesalign.spectral:CCAAlignment", "method_options": {},
                        "anchor_fraction": 0.2, "seed": 0}
    again = compare.run_comparison(**GRID, cache=tmp_path)
    assert calls == ["cca"]  # the second call read the cache
    assert again["accuracy"].tolist() == first["accuracy"].tolist()  # the stored row, read back
    # another version of the package: the cached numbers may be out of date, so the run is made again
    monkeypatch.setattr(bayesalign, "__version__", "0.0.0-other")
    compare.run_comparison(**GRID, cache=tmp_path)
    assert calls == ["cca", "cca"]
    # other quick settings of the Bayesian fits are another run too
    monkeypatch.setattr(compare, "QUICK_BAYESIAN", dict(compare.QUICK_BAYESIAN, max_iter=7))
    compare.run_comparison(**GRID, cache=tmp_path)
    assert calls == ["cca"] * 3
    assert json.loads(path.read_text())["settings"]["quick"]["max_iter"] == 7


@pytest.mark.parametrize("terminal", [False, True])
def test_the_progress_bar_draws_only_on_a_terminal(monkeypatch, terminal):
    stream = io.StringIO()
    stream.isatty = lambda: terminal
    monkeypatch.setattr(sys, "stderr", stream)
    compare.run_comparison(**GRID, progress_bar=True)
    drawn = stream.getvalue()
    if terminal:
        assert "comparison" in drawn and "1/1" in drawn
    else:
        assert drawn == ""  # a log file gets no redraws
