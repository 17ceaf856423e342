"""MAD with no anchor at all beside the Gromov-Wasserstein aligner, in one run.

Problems, every anchor removed and view b's rows shuffled (``shuffle_unaligned(seed=0)``): the three MMD-MA
simulations (``ba.datasets.mmdma_simulation``, 300 rows), the single-cell simulation
(``ba.datasets.single_cell_simulation``, 300 cells, 500 genes, 1000 peaks), mocap (358 frames), digit halves (the
178 zeros) and mfeat fou-kar (40 digits per class: 400 rows). ``--quick``: 150 rows and cells, every second mocap
frame, 100 zeros, 15 digits per class. ``--large``: the single-cell simulation and mfeat fou-kar at 1,000 rows per
view (100 digits per class), the other problems left out.

Columns, FOSCTTM of all rows (:func:`bayesalign.metrics.foscttm` of each embedding, MAD's in its shared
dimensions) and seconds:

- ``GW``: :class:`bayesalign.transport.GromovWassersteinAlignment` at its defaults;
- ``start``: the right pairs among the starting pairs MAD takes from that coupling
  (:func:`bayesalign.mad.zero_anchor.gromov_wasserstein_pairs`);
- ``MAD``: ``ba.MAD(seed=0)`` at its defaults: its fit from those pairs and its refit under the coupling's edges
  (``zero_anchor.COUPLING_EDGES``);
- with ``--parts``, ``pairs``: the fit from the pairs alone (``COUPLING_EDGES = False``), and ``+ST``: MAD followed
  by self-training (``.self_train()``, up to 5 rounds; seconds of the fit and the rounds);
- ``oracle``: with ``--oracle``, on the problems where MAD ends above GW, MAD started from the true partners of
  the same rows of view a (the ceiling of a start of that size);
- ``old``: with ``--main PATH`` (a tree holding another version of the package, e.g. ``git archive <commit>
  bayesalign | tar -x -C PATH``), that version's ``ba.MAD(seed=0)`` on the problems named by ``--main-problems``
  (default: MMD-MA branch alone), in a child process;
- ``ratio``: MAD over GW (the target: at most 1.0);
- ``cpu``: the CPU seconds of MAD's fit (the process's, one thread: its seconds on an idle core).

    OMP_NUM_THREADS=1 python benchmarks/bench_zero_anchors.py [--quick | --large] [--problems "mocap"]
        [--oracle] [--parts] [--main PATH [--main-problems "mmdma branch"]]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import time
import warnings

import numpy as np
from bench_mad_geometry import constants  # a module's constants set for a block

import bayesalign as ba
from bayesalign.metrics import foscttm

MAD_SETTINGS = {"seed": 0}


def problems(quick: bool, large: bool) -> dict:
    """name -> a function building the problem (with its truth and no anchor)."""
    if large:
        return {"single-cell sim": lambda: ba.datasets.single_cell_simulation(1000, n_genes=500, n_peaks=1000, seed=0),
                "mfeat fou-kar": lambda: ba.datasets.mfeat(("fou", "kar"), n_per_class=100, seed=0)}
    n = 150 if quick else 300
    out = {f"mmdma {kind}": (lambda kind=kind: ba.datasets.mmdma_simulation(kind, n_samples=n, seed=0))
           for kind in ba.datasets.MMDMA_KINDS}
    out.update({
        "single-cell sim": lambda: ba.datasets.single_cell_simulation(n, n_genes=500, n_peaks=1000, seed=0),
        "mocap": lambda: ba.datasets.mocap(step=2 if quick else 1),
        "digit halves": lambda: ba.datasets.digits_halves(n=100 if quick else None, seed=0),
        "mfeat fou-kar": lambda: ba.datasets.mfeat(("fou", "kar"), n_per_class=15 if quick else 40, seed=0)})
    return out


def unanchored(make) -> ba.AlignmentProblem:
    return make().split_anchors(0, seed=0).shuffle_unaligned(seed=0)


def score(embedding, problem) -> float:
    return foscttm(embedding, problem, views=problem.views.names)


def quiet_fit(problem, **constant_values):
    """``ba.MAD(**MAD_SETTINGS).fit(problem)`` with zero_anchor's constants set, warnings off; (model, seconds)."""
    from bayesalign.mad import zero_anchor

    start, cpu = time.perf_counter(), time.process_time()
    with constants(zero_anchor, **constant_values), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mad = ba.MAD(**MAD_SETTINGS).fit(problem)
    return mad, time.perf_counter() - start, time.process_time() - cpu


def part(mad, problem) -> float:
    return np.nan if mad is None else score(mad.embedding_, problem)


def self_trained(mad):
    """A copy of a fit, self-trained (``.self_train()`` at its defaults); (model, seconds, CPU seconds)."""
    mad = copy.deepcopy(mad)
    start, cpu = time.perf_counter(), time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mad.self_train()
    return mad, time.perf_counter() - start, time.process_time() - cpu


def oracle(problem, mad) -> float:
    """FOSCTTM of MAD started from the true partners of its starting pairs' rows of view a."""
    from bayesalign.mad import zero_anchor

    a, b = problem.views.names
    partner = dict(zip(*(c.tolist() for c in (problem.truth_between(a, b).index_a,
                                              problem.truth_between(a, b).index_b))))
    start = mad.bootstrap_["pairs"]
    rows = np.array([i for i in start[:, 0] if int(i) in partner], np.int64)
    true_pairs = np.c_[rows, [partner[int(i)] for i in rows]].astype(np.int64)
    found = zero_anchor.gromov_wasserstein_pairs

    def truth_start(views, a_, b_):  # the coupling kept (its edges), its starting pairs replaced
        return true_pairs, np.ones(len(true_pairs)), found(views, a_, b_)[2]

    fitted, *_ = quiet_fit(problem, gromov_wasserstein_pairs=truth_start)
    return score(fitted.embedding_, problem)


def worker(names, quick, large) -> None:
    """The child process of ``--main``: the imported version's ``ba.MAD(seed=0)`` fit, as JSON lines."""
    for name, make in problems(quick, large).items():
        if name not in names:
            continue
        problem = unanchored(make)
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mad = ba.MAD(**MAD_SETTINGS).fit(problem)
        print(json.dumps({"problem": name, "foscttm": score(mad.embedding_, problem),
                          "seconds": time.perf_counter() - start}), flush=True)


def old_version(path, names, quick, large) -> subprocess.Popen:
    """The child process running the version at ``path`` (started now, read at the end)."""
    env = {**os.environ, "PYTHONPATH": f"{os.path.abspath(path)}{os.pathsep}{os.path.dirname(__file__)}"}
    flags = ["--quick"] if quick else ["--large"] if large else []
    return subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", *flags, "--main-problems",
                             *names], env=env, stdout=subprocess.PIPE, text=True, cwd=os.path.abspath(path))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="150 rows")
    size.add_argument("--large", action="store_true", help="1,000 rows per view, two problems")
    parser.add_argument("--problems", nargs="*", default=None)
    parser.add_argument("--oracle", action="store_true")
    parser.add_argument("--parts", action="store_true", help="also the fit from the pairs alone, and self-training")
    parser.add_argument("--main", default=None, help="a tree holding another version of the bayesalign package")
    parser.add_argument("--main-problems", nargs="*", default=["mmdma branch"])
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.main_problems, args.quick, args.large)
        return
    from bayesalign.transport import GromovWassersteinAlignment

    child = None if args.main is None else old_version(args.main, args.main_problems, args.quick, args.large)
    header = (f"{'problem':<16} {'rows':>5} | {'GW':>5} {'s':>4} | {'start':>6} | {'pairs':>5} | "
              f"{'MAD':>5} {'s':>4} {'cpu':>4} | {'+ST':>5} {'s':>4} | {'oracle':>6} | {'ratio':>5}")
    print("no anchors: FOSCTTM of all rows, seconds")
    print(header)
    print("-" * len(header))
    ratios = []
    for name, make in problems(args.quick, args.large).items():
        if args.problems and name not in args.problems:
            continue
        problem = unanchored(make)
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            gw = GromovWassersteinAlignment().fit(problem)
        t_gw, gw_score = time.perf_counter() - start, score(gw.embedding_, problem)
        mad, t_fit, cpu_fit = quiet_fit(problem)
        pairs_only = quiet_fit(problem, COUPLING_EDGES=False)[0] if args.parts else None
        trained, t_rounds, _ = self_trained(mad) if args.parts else (None, np.nan, np.nan)
        boot = mad.bootstrap_
        mad_score = score(mad.embedding_, problem)
        ratios.append(mad_score / max(gw_score, 1e-12))
        ceiling = oracle(problem, mad) if args.oracle and ratios[-1] > 1.0 else np.nan
        rows = "x".join(str(n) for n in problem.views.n_samples.values())
        print(f"{name:<16} {rows:>5} | {gw_score:.3f} {t_gw:4.0f} | {boot['correct']:>2}/{len(boot['pairs']):<3} | "
              f"{part(pairs_only, problem):5.3f} | {mad_score:.3f} {t_fit:4.0f} {cpu_fit:4.0f} | "
              f"{part(trained, problem):5.3f} {t_fit + t_rounds:4.0f} | {ceiling:6.3f} | "
              f"{ratios[-1]:5.2f}", flush=True)
    print(f"\nMAD at most 1.0x GW on {sum(r <= 1.0 for r in ratios)} of {len(ratios)} problems")
    if child is not None:
        print(f"\nthe version at {args.main} (its ba.MAD(seed=0) without anchors):")
        for line in child.communicate()[0].splitlines():
            record = json.loads(line)
            print(f"- {record['problem']}: FOSCTTM {record['foscttm']:.3f}, {record['seconds']:.0f} s")


if __name__ == "__main__":
    main()
