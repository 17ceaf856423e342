"""MAD end to end at single-cell scale on CPU: seconds and peak memory of each stage, ELBO, FOSCTTM.

The workload: ``ba.datasets.single_cell_simulation`` with ``--n`` cells (default 20,000; 2,000 for the comparison
at the same settings), ``--genes`` negative-binomial counts and ``--peaks`` Gaussian protein features
(``second_view="gaussian"``), paired row by row; the counts enter as log1p (Gaussian likelihood on both views, the
usual log-normalisation of counts). ``--anchors`` (default 1%) of the pairs, drawn with ``--seed``, are known;
the rest are shuffled and to be matched.

Fixed settings (each a flag): ``MAD(latent_dim=5, num_inducing=50, engine="svi")`` with the SVI engine
(:class:`bayesalign.gp.StochasticMRD`) on minibatches of ``--batch-size`` 1024 entities for ``--epochs`` 30
epochs (its stopping test as in its defaults, window 10), float64 (the default: float32 loses q(u)'s positive
definiteness here); its start is MAD's joint-Laplacian
embedding and its prior MAD's graph prior. The stages, each timed:

1. data: the simulator and the anchors;
2. fit: ``MAD.fit`` (the start, the graph prior over both views' kNN graphs, the SVI fit; ``timings_``);
3. posteriors: ``MAD.posteriors()`` (the rows to match in the shared dimensions, the cross-view misfit);
4. calibration: ``MAD.calibrate_temperature()`` (each anchor re-inferred from each view alone, the
   temperature search on sparse Sinkhorn above ``SPARSE_ABOVE`` pairs); skipped with ``--temperature posterior``;
5. alignment: ``MAD.align()`` (Hungarian on kNN candidates above ``SPARSE_ABOVE`` pairs, the Sinkhorn
   probabilities warm-started from the calibration);
6. FOSCTTM of the fitted embedding in the shared dimensions (``ba.metrics.foscttm``, in row blocks) and the
   matching accuracy of the alignment.

Printed per stage: seconds and the process's peak resident memory after it (``ru_maxrss``: a dense
(n, n) float64 matrix of the rows to match alone would be ``8 n^2`` bytes, 3.1 GB at 19,800 rows); then the
ELBO per row, ``converged_``, FOSCTTM and the accuracy.

Run:  OMP_NUM_THREADS=2 python benchmarks/bench_mad_scale.py --n 20000 --threads 2
      OMP_NUM_THREADS=2 python benchmarks/bench_mad_scale.py --n 2000 --threads 2
      python -m cProfile -o mad_scale.prof benchmarks/bench_mad_scale.py --n 5000 --epochs 3
"""

from __future__ import annotations

import argparse
import resource
import time
import warnings

import numpy as np


def peak_mb() -> float:
    """The process's peak resident set so far, MB (Linux reports ru_maxrss in kB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cpu_seconds() -> float:
    """User + system CPU seconds of this process so far (the machine's cores are shared: wall time alone varies)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def simulated_cells(n: int, genes: int, peaks: int, seed: int):
    """The simulator's n cells, paired row by row: log1p counts of ``genes`` genes ("rna") and ``peaks`` Gaussian
    protein features ("protein")."""
    import bayesalign as ba

    raw = ba.datasets.single_cell_simulation(n, n_genes=genes, n_peaks=peaks, second_view="gaussian", seed=seed)
    views = ba.Views({"rna": np.log1p(raw.views["rna"]), "protein": raw.views["protein"]})
    return ba.AlignmentProblem.paired(views, labels=raw.labels, name="single_cell_simulation")


def workload(n: int, genes: int, peaks: int, anchors: float, seed: int):
    """:func:`simulated_cells` with ``anchors`` of the pairs known, the other rows shuffled."""
    return simulated_cells(n, genes, peaks, seed).split_anchors(anchors, seed=seed).shuffle_unaligned(seed=seed)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=20_000, help="cells (rows per view)")
    parser.add_argument("--genes", type=int, default=100)
    parser.add_argument("--peaks", type=int, default=50, help="features of the second (protein) view")
    parser.add_argument("--anchors", type=float, default=0.01, help="fraction of the pairs known")
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--latent-dim", type=int, default=5)
    parser.add_argument("--num-inducing", type=int, default=50)
    parser.add_argument("--dtype", default="float64")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--temperature", choices=("anchors", "posterior"), default="anchors",
                        help="the probabilities' temperature: fitted on the anchors (stage 4), or the posterior one "
                             "(no calibration stage)")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    import bayesalign as ba

    stages = []

    def stage(name, start):
        stages.append((name, time.perf_counter() - start, peak_mb(), cpu_seconds()))
        print(f"  done: {name} {stages[-1][1]:.1f} s, peak {stages[-1][2]:.0f} MB", flush=True)

    t = time.perf_counter()
    problem = workload(args.n, args.genes, args.peaks, args.anchors, args.seed)
    stage("data", t)
    n_anchors = len(problem.anchors_between("rna", "protein"))
    print(f"single_cell_simulation: {args.n} cells, rna {args.genes} genes (log1p counts), protein {args.peaks} "
          f"features; {n_anchors} anchor pairs ({args.anchors:.0%}); MAD(latent_dim={args.latent_dim}, "
          f"num_inducing={args.num_inducing}, engine='svi'), batch {args.batch_size}, {args.epochs} epochs, "
          f"{args.dtype}, {torch.get_num_threads()} thread(s)", flush=True)
    options = {"batch_size": args.batch_size, "max_epochs": args.epochs, "window": 10, "dtype": args.dtype}
    mad = ba.MAD(latent_dim=args.latent_dim, num_inducing=args.num_inducing, engine="svi", engine_options=options,
                 seed=args.seed)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = time.perf_counter()
        mad.fit(problem)
        stage("fit", t)
        t = time.perf_counter()
        posteriors = mad.posteriors()
        stage("posteriors", t)
        if args.temperature == "anchors":
            t = time.perf_counter()
            mad.calibrate_temperature()
            stage("calibration", t)
        t = time.perf_counter()
        alignment = mad.align(temperature=args.temperature)
        stage("alignment", t)
        t = time.perf_counter()
        fos = ba.metrics.foscttm(mad.embedding_, problem)
        accuracy = ba.metrics.matching_accuracy(alignment, problem)
        stage("foscttm", t)
    model = mad.model_
    elbo = float(np.mean(model.elbo_history_[-min(10, len(model.elbo_history_)):]))
    print(f"  {'stage':12s} {'seconds':>8s} {'CPU s':>8s} {'peak MB':>8s}")
    cpu_before = 0.0
    for name, seconds, peak, cpu in stages:
        print(f"  {name:12s} {seconds:8.1f} {cpu - cpu_before:8.1f} {peak:8.0f}")
        cpu_before = cpu
    total = sum(seconds for _, seconds, *_ in stages)
    print(f"  {'total':12s} {total:8.1f} {cpu_before:8.1f} {max(p for _, _, p, _ in stages):8.0f}")
    print(f"fit stages (MAD.timings_): {', '.join(f'{k} {v:.1f} s' for k, v in mad.timings_.items())}")
    record = mad.calibration_.get(("rna", "protein", mad.cost))
    fitted = (f"temperature {record['temperature']:.4g} ({record['pairs']} calibration pairs, evidence "
              f"{record.get('evidence', float('nan')):.3g})" if record else "the posterior temperature")
    print(f"rows to match {posteriors.rows_a.size} x {posteriors.rows_b.size}, shared dims "
          f"{posteriors.info['shared_dims']}; {fitted}; probabilities: {alignment.info.get('probability')}")
    print(f"epochs {model.n_epochs_}, converged_ {mad.converged_}; ELBO per entity (mean of the last epochs) "
          f"{elbo / model.n_entities_:.4f}")
    print(f"FOSCTTM {fos:.4f}; matching accuracy {accuracy:.4f}; mean probability of the pairs "
          f"{float(np.mean(alignment.probabilities)):.3f}")
    kinds = sorted({f"{w.category.__name__}: {str(w.message)[:100]}" for w in caught})
    for kind in kinds:
        print(f"warning {kind}")


if __name__ == "__main__":
    main()
