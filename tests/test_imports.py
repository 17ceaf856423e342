"""What ``import bayesalign`` and ``bayesalign --help`` load: the core types only, not the heavy stacks.

Each check runs in a fresh interpreter (this test process has long imported everything) and asserts a
fact, which modules are in ``sys.modules``, not a time (benchmarks/bench_import.py measures that).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "gpytorch", "pyro", "ot", "sklearn.cross_decomposition", "matplotlib")


def loaded_after(code: str, modules=HEAVY) -> set[str]:
    """The ``modules`` that a fresh interpreter holds after running ``code``."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps([m for m in {tuple(modules)!r} if m in sys.modules]))"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_import_bayesalign_loads_no_heavy_stack():
    assert loaded_after("import bayesalign") == set()


def test_the_command_line_help_loads_no_heavy_stack():
    code = ("import contextlib, io\nfrom bayesalign import cli\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n    status = cli.main(['--help'])\n"
            "assert status == 0, status")
    assert loaded_after(code) == set()


@pytest.mark.parametrize("name, module", [("spectral", "sklearn.neighbors"), ("MRD", "torch")])
def test_a_part_is_loaded_on_first_use(name, module):
    # the lazy attribute really is the part (and it brings its stack with it)
    assert loaded_after(f"import bayesalign\nbayesalign.{name}", [module]) == {module}


def test_every_public_name_resolves():
    import bayesalign

    for name in bayesalign.__all__:
        assert getattr(bayesalign, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        bayesalign.nothing  # noqa: B018
