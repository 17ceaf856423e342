"""benchmarks/RESULTS.md is organised by claim: short, one regenerating command per section, no run history."""

import re
import shlex
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_no_history import findings  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
MAX_LINES = 800

#: beside the project-wide patterns (tests/test_no_history.py): a figure's run, instead of what it measures
RUN = re.compile(r"\bmeasured in\b", re.IGNORECASE)


def sections(text: str) -> dict[str, list[str]]:
    """``## `` heading -> the lines under it, up to the next ``## `` heading."""
    out, current = {}, None
    for line in text.splitlines():
        if line.startswith("## "):
            current = line[3:].strip()
            out[current] = []
        elif current is not None:
            out[current].append(line)
    return out


def command_target(command: str) -> str:
    """What a ``Command:`` line runs: the script's path from the repository root, or ``make ...`` / ``bayesalign``."""
    words = shlex.split(command)
    cwd = ""
    if words[:2] == ["cd", "benchmarks"] and "&&" in words:
        cwd, words = "benchmarks/", words[words.index("&&") + 1:]
    words = [w for w in words if not re.fullmatch(r"[A-Z_]+=\S*", w)]  # environment settings
    if words[0] in ("make", "bayesalign"):
        return words[0]
    script = next(w for w in words if w.endswith((".py", ".sh")))
    return cwd + script


@pytest.fixture(scope="module")
def text():
    return RESULTS.read_text(encoding="utf-8")


def test_results_file_is_short(text):
    assert len(text.splitlines()) <= MAX_LINES


def test_every_section_names_the_command_that_regenerates_it(text):
    found = sections(text)
    assert len(found) >= 10  # one per claim: the core, SVI, MAD, calibration, toys, baselines, solvers, ...
    for heading, lines in found.items():
        commands = [line for line in lines if line.startswith("Command: ")]
        assert len(commands) == 1, f"section {heading!r} has {len(commands)} 'Command:' lines, needs exactly one"
        first = next(line for line in lines if line.strip())
        assert first.startswith("Command: "), f"section {heading!r}: the 'Command:' line must come first"
        command = commands[0][len("Command: "):].strip().strip("`")
        target = command_target(command)
        if target not in ("make", "bayesalign"):
            assert target.startswith(("benchmarks/", "experiments/")), f"section {heading!r}: runs {target!r}"
            assert (ROOT / target).is_file(), f"section {heading!r}: {target} does not exist"


def test_command_target_reads_the_forms_the_file_uses():
    # the parser itself, on the shapes of command the file holds
    assert command_target("OMP_NUM_THREADS=1 python benchmarks/bench_psi.py --n 10") == "benchmarks/bench_psi.py"
    assert command_target("cd benchmarks && OMP_NUM_THREADS=1 python bench_calibration.py --toys") == \
        "benchmarks/bench_calibration.py"
    assert command_target('python experiments/mad_paper.py --parts "table 1"') == "experiments/mad_paper.py"
    assert command_target("bash benchmarks/device_check.sh") == "benchmarks/device_check.sh"
    assert command_target("make bench") == "make"


def test_no_line_tells_run_history(text):
    bad = findings(text) + [(n, "a run", line) for n, line in enumerate(text.splitlines(), 1) if RUN.search(line)]
    assert not bad, "\n".join(f"line {n} has {what}: {line[:100]}" for n, what, line in bad)
