"""Seconds of the spectral baselines' calibrated probability step on 1,000 rows, beside their fit.

mfeat fou-kar, 100 digits of each class (1,000 rows, 100 anchors, 900 rows to match in each view), seed 0.
Per method: the fit (the reference) and the probabilities of
:func:`bayesalign.matching.calibration.calibrated_match` (its cross-fitted refits and temperature search
included), in wall and CPU seconds (CPU seconds are steadier on a shared machine), and their ratio to the fit;
the mean probability beside the accuracy and the expected calibration error. POT (and with it torch) is
imported once before the timings, and its seconds printed: the first Sinkhorn solve of a process pays them.
``--reference``: also :func:`bayesalign.matching.match` at its default temperature (the median nearest cost).
``--quick``: the joint Laplacian only.
``--dataset mocap`` (358 frames, 36 anchors) or ``digits`` (the digit halves, 178 rows, 18 anchors): the same on
a shipped pair at 10% anchors, for the calibration rather than the seconds.

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

    start = time.perf_counter()
    import ot  # noqa: F401  (loads torch: once per process, in the first solve otherwise)

    import_s = time.perf_counter() - start
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
    print(f"{problem.views.n_samples} rows, {len(problem.anchors_between(a, b))} anchors; import ot {import_s:.2f} s")
    print(f"{'method':16s} {'fit s':>7s} {'calibrated s':>13s} {'cpu s':>6s} {'x fit':>7s} {'mean p':>7s} "
          f"{'acc':>6s} {'ECE':>6s}"
          + (f" | {'default s':>10s} {'mean p':>7s} {'ECE':>6s} {'ratio':>6s}" if args.reference else ""))
    for name, model in methods.items():
        start = time.perf_counter()
        embedding = model.fit(problem).embedding_
        fit_s = time.perf_counter() - start
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            start, cpu = time.perf_counter(), time.process_time()
            al = calibrated_match(lambda p, m=model: clone(m).fit(p).embedding_, embedding, problem, a, b,
                                  method=name)
            calibrated_s, cpu_s = time.perf_counter() - start, time.process_time() - cpu
        line = (f"{name:16s} {fit_s:7.2f} {calibrated_s:13.2f} {cpu_s:6.2f} {calibrated_s / fit_s:7.0f} "
                f"{np.mean(al.probabilities):7.3f} "
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
