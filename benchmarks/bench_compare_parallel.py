"""Wall time of the comparison suite's quick grid with --jobs 1 and --jobs 2, and whether the tables agree.

Runs :func:`bayesalign.compare.run_comparison` on the quick grid (``experiments/compare.py --quick``:
one dataset of each family at its quick size, 10% and 25% anchors, one seed, every available method)
once per value of ``--jobs``, in that order, and prints the wall time of each (loky's worker start-up
included, as a user pays it), the ratio to the first, and the largest difference of any metric
between the tables (0: identical; seconds excluded, being wall time).

    OMP_NUM_THREADS=1 python benchmarks/bench_compare_parallel.py [--jobs 1 2] [--datasets ...] [--methods ...]

Measured figures: benchmarks/RESULTS.md ("Comparison grid in parallel").
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from bayesalign import compare


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--datasets", nargs="+", default=list(compare.QUICK_DATASETS))
    parser.add_argument("--methods", nargs="+", default=None)
    args = parser.parse_args(argv)
    print(f"quick grid: {len(args.datasets)} datasets, methods: {', '.join(args.methods or ['all available'])}; "
          f"{os.cpu_count()} CPUs, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}", flush=True)
    tables, seconds = [], []
    for jobs in args.jobs:
        start = time.perf_counter()
        tables.append(compare.run_comparison(args.datasets, methods=args.methods, quick=True, jobs=jobs))
        seconds.append(time.perf_counter() - start)
        print(f"--jobs {jobs}: {len(tables[-1])} runs, {int((tables[-1]['error'] != '').sum())} failed, "
              f"{seconds[-1]:.1f} s", flush=True)
    print(f"\n| jobs | runs | wall s | speed-up vs --jobs {args.jobs[0]} | max metric difference |")
    print("|---|---|---|---|---|")
    columns = list(compare.METRICS)
    for jobs, table, wall in zip(args.jobs, tables, seconds):
        first = tables[0]
        same_rows = (table[["dataset", "method", "anchor_fraction", "seed", "error"]]
                     .equals(first[["dataset", "method", "anchor_fraction", "seed", "error"]]))
        a, b = table[columns].to_numpy(float), first[columns].to_numpy(float)
        both_nan = np.isnan(a) & np.isnan(b)
        diff = float(np.max(np.where(both_nan, 0.0, np.abs(a - b)), initial=0.0)) if same_rows else float("inf")
        print(f"| {jobs} | {len(table)} | {wall:.1f} | {seconds[0] / wall:.2f}x | {diff:.3g} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
