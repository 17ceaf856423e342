"""CPU time of ``import bayesalign`` and of ``bayesalign --help``, beside ``python -c pass``.

Each command runs in a fresh interpreter ``--repeat`` times; the CPU time (user + system) of each
child is read from ``resource.getrusage(RUSAGE_CHILDREN)``, and the median and the smallest are
printed with their ratio to the bare interpreter. CPU rather than wall time, so that a machine
shared with other work changes the figures less.

    PYTHONPATH=$PWD python benchmarks/bench_import.py --repeat 7
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "import bayesalign": [sys.executable, "-c", "import bayesalign"],
    "bayesalign --help": [sys.executable, "-m", "bayesalign.cli", "--help"],
}


def cpu_seconds(command: list[str], env: dict) -> float:
    """User + system CPU seconds of one run of ``command`` in a child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL, cwd=ROOT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs of each command (default 5)")
    args = parser.parse_args(argv)
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    runs = {}
    for label, command in COMMANDS.items():
        cpu_seconds(command, env)  # one run to warm the file cache, not counted
        runs[label] = [cpu_seconds(command, env) for _ in range(args.repeat)]
    bare = statistics.median(runs["python -c pass"])
    print(f"CPU seconds (user + system) over {args.repeat} fresh interpreters")
    print(f"{'command':22s} {'median':>8s} {'min':>8s} {'x python -c pass':>17s} {'limit':>6s}")
    for label, times in runs.items():
        limit = "" if label == "python -c pass" else "1.0"
        print(f"{label:22s} {statistics.median(times):8.3f} {min(times):8.3f} "
              f"{statistics.median(times) / bare:17.1f} {limit:>6s}")


if __name__ == "__main__":
    main()
