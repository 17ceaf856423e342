"""The project speaks of the code as it is: no dates of past changes, issue numbers or run history in its text."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("bayesalign", "tests", "benchmarks", "experiments", "docs")
SUFFIXES = {".py", ".md", ".rst", ".txt", ".sh", ".toml", ".cfg"}
SKIPPED = {"_build", "generated", "auto_examples", "__pycache__", "_data"}
#: references to other projects' trackers, which name a fact about that project rather than this one's history
REFERENCES = ("GPy issue #286",)

#: words and shapes that tell when or in which piece of work something was done, instead of what it is
HISTORY = {
    "a date": re.compile(r"\b20\d\d-\d\d-\d\d\b"),
    "a session": re.compile(r"\bsessions?\b", re.IGNORECASE),
    "a point in time": re.compile(r"\buntil 20\d\d\b", re.IGNORECASE),
    "an issue number": re.compile(r"\bissue\s*#?\d+|#\d+\b", re.IGNORECASE),
    "a measured figure": re.compile(r"\(measured\b|\bmeasured:? [0-9]", re.IGNORECASE),
    "a past state": re.compile(r"\bpreviously\b|\bformerly\b|\bthe old default\b|\bthe previous judge\b",
                               re.IGNORECASE),
}


def project_files() -> list[Path]:
    files = [ROOT / "README.md"]
    for folder in FOLDERS:
        files += sorted(p for p in (ROOT / folder).rglob("*") if p.is_file() and p.suffix in SUFFIXES
                        and not SKIPPED & set(p.relative_to(ROOT).parts))
    return [p for p in files if p != Path(__file__).resolve()]


def findings(text: str) -> list[tuple[int, str, str]]:
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        plain = line
        for reference in REFERENCES:
            plain = plain.replace(reference, "")
        out += [(number, what, line.strip()) for what, pattern in HISTORY.items() if pattern.search(plain)]
    return out


def test_no_file_tells_history():
    bad = [f"{path.relative_to(ROOT)}:{n} has {what}: {line[:100]}"
           for path in project_files() for n, what, line in findings(path.read_text(encoding="utf-8"))]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("line", ["measured 2026-11-25 on the idle machine", "the seventh session's run",
                                  "the default until 2026", "as issue #14 asks", "Issue 5's targets",
                                  "previously 0.3", "the old default collapsed a view",
                                  "> 0.9  # measured 1.00", "(measured: 55 pairs)"])
def test_the_patterns_catch_what_they_are_for(line):
    assert findings(line)


@pytest.mark.parametrize("line", ["| 2000 | 0.73 | 1e-3 |", "noise fixed early on (GPy issue #286)",
                                  "Command: `python benchmarks/bench_mrd.py --seeds 0`", "color='#1f77b4'",
                                  "measured in view a's row order"])
def test_the_patterns_pass_ordinary_lines(line):
    assert not findings(line)
