"""Comparison suite: every method on every shipped dataset at 5%, 10% and 25% anchors (table and figures).

Each spectral class, MRD+Procrustes and MAD with each matcher and cost, on the MAD toy settings, swiss
roll pairs, the protein models, motion capture, digit halves and UCI multiple-features view pairs.
Metrics (held-out rows): accuracy, Kendall-tau distance, top-1/top-10 retrieval, FOSCTTM, calibration
(ECE, precision at 50% coverage) where there are probabilities, and seconds. A method that fails on a
dataset is recorded with its error. Writes experiments/results/comparison{,_quick}{_runs.csv,.csv,.md}
and one accuracy-vs-anchor-fraction figure per dataset. ``--quick`` (one dataset of each family at a
small size, 10% and 25% anchors, one seed, shorter Bayesian fits) takes minutes; the full run takes
hours on 2 cores. ``--jobs N`` runs N fits at once (``--backend dask --scheduler ADDRESS`` on a
cluster); ``--cache DIR`` keeps every finished run, so an interrupted run resumes where it stopped.

    python experiments/compare.py --quick --jobs 2 --cache ~/.cache/bayesalign-compare
    bayesalign experiment compare --datasets protein mocap --methods joint-laplacian mad-hungarian-likelihood
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bayesalign import compare
from bayesalign.cli import CommandError, add_grid_options, check_grid_options
from bayesalign.registry import COMPARE_METHODS

RESULTS = Path(__file__).resolve().parent / "results"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="compare", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="minutes: small data, one seed, short fits")
    parser.add_argument("--datasets", nargs="+", default=None, metavar="NAME",
                        help="default: every dataset of the suite (with --quick: one of each family)")
    parser.add_argument("--methods", nargs="+", default=None, metavar="METHOD",
                        help=f"default: every available one of {', '.join(COMPARE_METHODS)}")
    parser.add_argument("--anchors", nargs="+", type=float, default=None, metavar="FRACTION")
    parser.add_argument("--seeds", type=int, default=None)
    parser.add_argument("--device", default=None)
    parser.add_argument("--out", type=Path, default=RESULTS)
    add_grid_options(parser)
    args = parser.parse_args(argv)
    try:
        check_grid_options(args)
    except CommandError as exc:
        parser.error(str(exc))
    if args.datasets is None:
        args.datasets = list(compare.QUICK_DATASETS if args.quick else compare.SUITE)
    for name in args.datasets:
        compare.check_dataset(name)
    for method in args.methods or []:
        compare.check_method(method)

    def log(line):
        print(line, file=sys.stderr, flush=True)

    frame = compare.run_comparison(args.datasets, methods=args.methods, fractions=args.anchors,
                                   seeds=args.seeds, quick=args.quick, device=args.device, log=log,
                                   jobs=args.jobs, backend=args.backend, scheduler=args.scheduler,
                                   cache=args.cache, progress_bar=True)
    paths = compare.write_results(frame, args.out, stem="comparison_quick" if args.quick else "comparison")
    print(compare.markdown_summary(frame))
    log("wrote " + ", ".join(str(p) for p in paths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
