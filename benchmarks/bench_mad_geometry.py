"""MAD with q(P), the posterior over the matching (bayesalign.mad.coupling), beside MAD without it and the
optimal-transport aligners, with anchors and without, in one run.

Problems: the three MMD-MA simulations (``ba.datasets.mmdma_simulation``, 300 rows), the single-cell simulator
(``ba.datasets.single_cell_simulation``, 300 cells, 500 genes, 1000 peaks) and mocap (358 frames). Columns at 10%
anchors (``split_anchors(0.1, seed=s)``, s = 0 .. seeds - 1; mean over the draws), FOSCTTM
(:func:`bayesalign.metrics.foscttm`) of the unaligned rows and seconds:

- ``GW``: :class:`bayesalign.transport.GromovWassersteinAlignment` at its defaults, no anchor (one fit);
- ``fused GW``: :class:`bayesalign.transport.FusedGromovWassersteinAlignment` at its defaults with the anchors;
- ``MAD fit``: ``ba.MAD(seed=0, engine_options={"max_iter": 300})``, its first fit only (no rounds);
- ``MAD q(P)``: the same fit and ``ROUNDS`` rounds of :mod:`bayesalign.mad.refinement` (which fits none by
  default);
- ``by C``: the first fit and MAD q(P) with partners ranked by MAD's match cost (the likelihood cost its matchers
  read) rather than by Euclidean distance between the embedding's means, and ``by P``: ranked by q(P) itself;
- ``main``: with ``--main PATH`` (a tree holding another version of the ``bayesalign`` package, e.g. from
  ``git archive main bayesalign | tar -x -C PATH``), MAD at the same settings fitted by that version, in a child
  process (or PATH a file of the JSON lines ``--worker`` printed under that version);
- ``ratio``: MAD q(P) (by its cost) over the better of GW and fused GW (the target: at most 0.8);
- ``ECE``: of MAD q(P)'s Hungarian pairs (:func:`bayesalign.metrics.expected_calibration_error` on the truth),
  with the probabilities tempered on the anchors (``align()``) and with q(P)'s row-normalised marginals.
- ``oracle``: with ``--oracle``, the rounds' edges from the true coupling (every unaligned row joined to its true
  partner with weight 1): the ceiling of soft edges in the graph prior.

With ``--zero``: the same problems without anchors (view b's rows shuffled), GW beside MAD's zero-anchor fit
(:mod:`bayesalign.mad.zero_anchor`; ``bench_zero_anchors.py`` compares its parts).

    OMP_NUM_THREADS=1 python benchmarks/bench_mad_geometry.py [--seeds 2] [--problems mocap] [--quick]
        [--main PATH] [--oracle] [--zero]
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import subprocess
import sys
import time
import warnings

import numpy as np

import bayesalign as ba
from bayesalign.metrics import expected_calibration_error, foscttm

MAD_SETTINGS = {"seed": 0, "engine_options": {"max_iter": 300}}
#: Rounds of q(P) and q(X) of the ``MAD q(P)`` column (``refinement.ROUNDS`` for the run).
ROUNDS = 3


def problems(quick: bool, names=None) -> dict:
    n = 150 if quick else 300
    out = {"single-cell sim": lambda: ba.datasets.single_cell_simulation(n, n_genes=500, n_peaks=1000, seed=0),
           "mocap": ba.datasets.mocap}
    out.update({f"mmdma {kind}": (lambda kind=kind: ba.datasets.mmdma_simulation(kind, n_samples=n, seed=0))
                for kind in ba.datasets.MMDMA_KINDS})
    return {name: make() for name, make in out.items() if not names or name in names}


def score(embedding, problem) -> float:
    return foscttm(embedding, problem, views=problem.views.names)


def ranked(mad, problem) -> tuple[float, float]:
    """FOSCTTM of the unaligned rows with partners ranked by MAD's match cost (what its matchers read), and by
    q(P)."""
    from bayesalign.mad.coupling import mad_coupling
    from bayesalign.transport import coupling_rank

    a, b = problem.views.names
    rows_a, rows_b, C = mad.cost_matrix(a, b)
    truth = problem.truth_between(a, b)
    pos_a, pos_b = {int(r): i for i, r in enumerate(rows_a)}, {int(r): j for j, r in enumerate(rows_b)}
    pairs = [(pos_a[int(i)], pos_b[int(j)]) for i, j in zip(truth.index_a, truth.index_b)
             if int(i) in pos_a and int(j) in pos_b]
    ia, ib = (np.array(x, np.int64) for x in zip(*pairs))
    by_cost = foscttm(C, ba.Correspondence((a, b), ia, ib))
    P = mad_coupling(mad, a, b)[0][np.ix_(rows_a, rows_b)]
    return by_cost, coupling_rank(P, ia, ib)


@contextlib.contextmanager
def constants(module, **values):
    """A module's constants set to ``values`` for the block."""
    saved = {name: getattr(module, name) for name in values}
    for name, value in values.items():
        setattr(module, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(module, name, value)


def first_fit(problem):
    from bayesalign.mad import refinement

    with constants(refinement, ROUNDS=0), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        mad = ba.MAD(**MAD_SETTINGS).fit(problem)
    return mad, time.perf_counter() - start


def rounds(mad):
    from bayesalign.mad import refinement

    mad = copy.deepcopy(mad)
    start = time.perf_counter()
    with constants(refinement, ROUNDS=ROUNDS), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        refinement.refine_correspondences(mad)
    return mad, time.perf_counter() - start


def oracle_rounds(mad, problem):
    """The rounds with the true coupling's edges in place of q(P)'s (the ceiling of the mechanism)."""
    from bayesalign.mad import refinement

    def true_coupling(m, a, b, geometry=0.0, init=None, structures=None):
        n_a, n_b = problem.views.n_samples[a], problem.views.n_samples[b]
        truth = problem.truth_between(a, b)
        P = np.zeros((n_a, n_b))
        P[truth.index_a, truth.index_b] = 1.0
        rows_a, rows_b = problem.unaligned(a), problem.unaligned(b)
        return P, rows_a, rows_b, True, None

    with constants(refinement, mad_coupling=true_coupling):
        out, _ = rounds(mad)
    return out


def calibration(mad, problem) -> tuple[float, float]:
    """ECE of the Hungarian pairs: probabilities tempered on the anchors, and q(P)'s row-normalised marginals."""
    from bayesalign.mad.coupling import mad_coupling

    a, b = problem.views.names
    al = mad.align(a, b, include_discovered=False)
    tempered = expected_calibration_error(al, problem)
    P = mad_coupling(mad, a, b)[0]
    rows = P / P.sum(axis=1, keepdims=True)
    partner = dict(zip(*(c.tolist() for c in (problem.truth_between(a, b).index_a,
                                              problem.truth_between(a, b).index_b))))
    correct = np.array([partner.get(int(i)) == int(j) for i, j in zip(al.index_a, al.index_b)])
    marginal = expected_calibration_error(rows[al.index_a, al.index_b], correct)
    return tempered, marginal


def worker(names, seeds, quick) -> None:
    """The child process of ``--main``: MAD's default fit by the imported package, as JSON lines."""
    for name, problem in problems(quick, names).items():
        for s in range(seeds):
            draw = problem.split_anchors(0.1, seed=s)
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                mad = ba.MAD(**MAD_SETTINGS).fit(draw)
            seconds = time.perf_counter() - start
            al = mad.align(include_discovered=False)
            print(json.dumps({"problem": name, "seed": s, "foscttm": score(mad.embedding_, draw),
                              "ece": expected_calibration_error(al, draw), "seconds": seconds}), flush=True)


def main_results(path, names, seeds, quick) -> dict:
    """The reference version's records: run in a child process on the tree ``path``, or read from a file of the
    JSON lines that ``--worker`` prints."""
    if os.path.isfile(path):
        with open(path) as f:
            lines = f.read().splitlines()
    else:
        env = {**os.environ, "PYTHONPATH": os.path.abspath(path)}
        child = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", "--seeds", str(seeds),
                                *(["--quick"] if quick else []), "--problems", *names], env=env,
                               capture_output=True, text=True, check=True, cwd=os.path.abspath(path))
        lines = child.stdout.splitlines()
    results = {}
    for line in lines:
        record = json.loads(line)
        results.setdefault(record["problem"], []).append(record)
    return results


def with_anchors(all_problems, seeds, reference, oracle) -> None:
    from bayesalign.transport import FusedGromovWassersteinAlignment, GromovWassersteinAlignment

    header = (f"{'problem':<16} | {'GW':>5} {'fused':>5} | {'fit':>5} {'q(P)':>5} {'main':>5} | "
              f"{'fit C':>5} {'qP C':>5} {'by P':>5} "
              f"{'oracle':>6} | {'ratio':>5} | {'ECE T':>5} {'ECE P':>5} {'main':>5} | "
              f"{'s GW':>5} {'s fGW':>5} {'s fit':>5} {'s q(P)':>6} {'s main':>6}")
    print("10% anchors (FOSCTTM of the unaligned rows, mean over the anchor draws; seconds per draw)")
    print(header)
    print("-" * len(header))
    for name, problem in all_problems.items():
        draws = [problem.split_anchors(0.1, seed=s) for s in range(seeds)]
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            gw = GromovWassersteinAlignment().fit(problem)
        t_gw = time.perf_counter() - start
        row = {k: [] for k in ("gw", "fgw", "fit", "qp", "oracle", "ece_t", "ece_p", "t_fgw", "t_fit", "t_qp",
                               "fit_c", "qp_c", "qp_p")}
        for d in draws:
            row["gw"].append(score(gw.embedding_, d))
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fgw = FusedGromovWassersteinAlignment().fit(d)
            row["t_fgw"].append(time.perf_counter() - start)
            row["fgw"].append(score(fgw.embedding_, d))
            mad, t_fit = first_fit(d)
            row["fit"].append(score(mad.embedding_, d))
            refined, t_qp = rounds(mad)
            row["qp"].append(score(refined.embedding_, d))
            row["fit_c"].append(ranked(mad, d)[0])
            by_cost, by_coupling = ranked(refined, d)
            row["qp_c"].append(by_cost)
            row["qp_p"].append(by_coupling)
            row["t_fit"].append(t_fit)
            row["t_qp"].append(t_fit + t_qp)
            tempered, marginal = calibration(refined, d)
            row["ece_t"].append(tempered)
            row["ece_p"].append(marginal)
            if oracle:
                row["oracle"].append(score(oracle_rounds(mad, d).embedding_, d))
            history = refined.correspondence_history_
            print(f"{'':<16}   seed {len(row['qp']) - 1}: rounds " + ", ".join(
                f"{h['round']}: anchors {h['anchor_foscttm']:.4f}{' kept' if h['kept'] else ''}" for h in history),
                flush=True)
        if isinstance(reference, str):  # a file the reference's worker may still be writing: read it now
            reference = main_results(reference, [], seeds, False)
        ref = [r for r in reference.get(name, []) if r["seed"] < seeds]
        m = {k: (np.mean(v) if len(v) else np.nan) for k, v in row.items()}
        main_fos = np.mean([r["foscttm"] for r in ref]) if ref else np.nan
        main_ece = np.mean([r["ece"] for r in ref]) if ref else np.nan
        main_s = np.mean([r["seconds"] for r in ref]) if ref else np.nan
        ratio = m["qp_c"] / max(min(m["gw"], m["fgw"]), 1e-12)
        print(f"{name:<16} | {m['gw']:.3f} {m['fgw']:.3f} | {m['fit']:.3f} {m['qp']:.3f} {main_fos:.3f} | "
              f"{m['fit_c']:.3f} {m['qp_c']:.3f} {m['qp_p']:.3f} "
              f"{m['oracle']:6.3f} | {ratio:5.2f} | {m['ece_t']:.3f} {m['ece_p']:.3f} {main_ece:.3f} | "
              f"{t_gw:5.0f} {m['t_fgw']:5.0f} {m['t_fit']:5.0f} {m['t_qp']:6.0f} {main_s:6.0f}", flush=True)


def without_anchors(all_problems) -> None:
    from bayesalign.mad import zero_anchor
    from bayesalign.transport import GromovWassersteinAlignment

    variants = {"MAD": {}}
    print("\nno anchors (FOSCTTM of all rows; seconds)")
    header = f"{'problem':<16} | {'GW':>5} {'s':>5} | " + " | ".join(f"{v:>12} {'s':>5}" for v in variants)
    print(header)
    print("-" * len(header))
    for name, problem in all_problems.items():
        shuffled = problem.shuffle_unaligned(seed=0)
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            gw = GromovWassersteinAlignment().fit(shuffled)
        cells = [f"{score(gw.embedding_, shuffled):.3f} {time.perf_counter() - start:5.0f}"]
        for values in variants.values():
            start = time.perf_counter()
            with constants(zero_anchor, **values), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                mad = ba.MAD(**MAD_SETTINGS).fit(shuffled)
            cells.append(f"{score(mad.embedding_, shuffled):12.3f} {time.perf_counter() - start:5.0f}")
        print(f"{name:<16} | " + " | ".join(cells), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="150 rows for the simulations")
    parser.add_argument("--problems", nargs="*", default=None)
    parser.add_argument("--main", default=None, help="a tree holding the reference bayesalign package")
    parser.add_argument("--oracle", action="store_true")
    parser.add_argument("--zero", action="store_true")
    parser.add_argument("--no-anchors-only", action="store_true", help="only the part without anchors")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.problems, args.seeds, args.quick)
        return
    all_problems = problems(args.quick, args.problems)
    if not args.no_anchors_only:
        reference = {} if not args.main else args.main if os.path.isfile(args.main) else \
            main_results(args.main, list(all_problems), args.seeds, args.quick)
        with_anchors(all_problems, args.seeds, reference, args.oracle)
    if args.zero or args.no_anchors_only:
        without_anchors(all_problems)


if __name__ == "__main__":
    main()
