"""Where a MAD fit spends its time on a device: cProfile of MAD's defaults (all rows, centred) on mfeat fou-kar,
2000 rows, 10% anchors, draw 0; prints the 25 functions of most cumulative and most own time.

    python benchmarks/device_profile.py --device cuda
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import warnings

import bayesalign as ba


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", default=None, help="write the pstats file here")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    problem = ba.datasets.mfeat(("fou", "kar")).split_anchors(0.1, seed=0)
    profile = cProfile.Profile()
    profile.enable()
    ba.MAD(seed=0, device=args.device, progress=False).fit(problem).align("fou", "kar", matcher="hungarian")
    profile.disable()
    if args.out:
        profile.dump_stats(args.out)
    stats = pstats.Stats(profile)
    stats.sort_stats("cumulative").print_stats(25)
    stats.sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
