"""Seconds of the spectral baselines' probability step on 1,000 rows, calibrated and at the default temperature.

mfeat fou-kar, 100 digits of each class (1,000 rows, 100 anchors, 900 rows to match in each view), seed 0.
Per method: the fit, the probabilities of :func:`bayesalign.matching.calibration.calibrated_match` (its
cross-fitted refits and temperature search included) and, as the reference, those of
:func:`bayesalign.matching.match` at its default temperature (the median nearest cost); with each, the mean
probability beside the accuracy and the expected calibration error. ``--quick``: the joint Laplacian only.
``--dataset mocap`` (358 frames, 36 anchors) or ``digits`` (the digit halves, 178 rows, 18 anchors): the same on
a shipped pair at 10% anchors, for the calibration rather than the seconds. ``--reference``: also the default
temperature's probabilities (minutes at 1,000 rows).

    python benchmarks/bench_probabilities.py [--quick] [--reference] [--dataset mfeat|mocap|digits] [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--reference", action="store_true", help="also time match() at its default temperature")
    parser.add_argument("--dataset", choices=("mfeat", "mocap", "digits"), default="mfeat")
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import time
    import warnings

    import numpy as np
    from sklearn.base import clone

    import bayesalign as ba
    from bayesalign.matching import match
    from bayesalign.matching.calibration import calibrated_match

    problem = {"mfeat": lambda: ba.datasets.mfeat(n_per_class=100, seed=0), "mocap": ba.datasets.mocap,
               "digits": ba.datasets.digits_halves}[args.dataset]().split_anchors(0.1, seed=0)
    a, b = problem.views.names[:2]
    methods = {"joint-laplacian": ba.spectral.JointLaplacianAlignment(n_components=5)}
    if not args.quick:
        methods.update({"cca": ba.spectral.CCAAlignment(n_components=5),
                        "linear": ba.spectral.LinearAlignment(n_components=5)})
    print(f"{problem.views.n_samples} rows, {len(problem.anchors_between(a, b))} anchors")
    print(f"{'method':16s} {'fit s':>7s} {'calibrated s':>13s} {'mean p':>7s} {'acc':>6s} {'ECE':>6s}"
          + (f" | {'default s':>10s} {'mean p':>7s} {'ECE':>6s} {'ratio':>6s}" if args.reference else ""))
    for name, model in methods.items():
        start = time.perf_counter()
        embedding = model.fit(problem).embedding_
        fit_s = time.perf_counter() - start
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            start = time.perf_counter()
            al = calibrated_match(lambda p, m=model: clone(m).fit(p).embedding_, embedding, problem, a, b,
                                  method=name)
            calibrated_s = time.perf_counter() - start
        line = (f"{name:16s} {fit_s:7.2f} {calibrated_s:13.2f} {np.mean(al.probabilities):7.3f} "
                f"{ba.metrics.matching_accuracy(al, problem):6.3f} "
                f"{ba.metrics.expected_calibration_error(al, problem):6.3f}")
        if args.reference:
            start = time.perf_counter()
            ref = match(embedding, problem, a, b, method=name)
            default_s = time.perf_counter() - start
            line += (f" | {default_s:10.2f} {np.mean(ref.probabilities):7.3f} "
                     f"{ba.metrics.expected_calibration_error(ref, problem):6.3f} {default_s / calibrated_s:6.1f}")
        print(line, flush=True)
        record = al.info["calibration"]
        print(f"    calibration: {record}")
        for w in caught:
            print(f"    warning: {str(w.message).splitlines()[0][:160]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
