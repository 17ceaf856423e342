"""Calibration of MAD's match probabilities: the posterior temperature against T fitted on the anchors.

For each problem and seed it fits MAD (the defaults: all rows, centred views, graph prior), aligns with the
Hungarian method on the likelihood cost and prints the exact-match accuracy of the unaligned rows, the mean
probability of the matched pairs and their expected calibration error (ECE, 10 bins; Guo et al. 2017) at

- the posterior temperature (``temperature="posterior"``: T = 1 for the likelihood cost), and
- ``temperature="anchors"`` (the default; ``MAD.calibrate_temperature``: T fitted on the anchor pairs re-inferred
  view by view), with the fitted T, the evidence of its pairs against chance matching (twice the log-likelihood
  ratio; ``MIN_CALIBRATION_EVIDENCE``) and the seconds the calibration took,

and the ECE that exactly calibrated probabilities would show on as many pairs: the mean ECE of the fitted-T
probabilities p against outcomes drawn as Bernoulli(p) (Monte Carlo, 2,000 draws). With a few dozen pairs per
run the binned ECE is biased upwards by sampling alone; this is that floor. The summary also pools each
problem's matched pairs over its seeds (5 seeds of a toy: 400-560 pairs) and gives the ECE of the pool, at
both temperatures, beside the floor of as many pairs.

The toys are MAD's ("linear_shared", "linear_shared_private": 100 rows, 20 anchors; "nonlinear_shared_private":
160 rows, 48 anchors; MAD's default latent_dim); the real pairs take 10% anchors, as ``bench_mad_real.py``.
The inducing inputs are MAD's default unless ``--num-inducing`` is given:

    OMP_NUM_THREADS=1 python benchmarks/bench_calibration.py --toys --seeds 0 1 2 3 4
    OMP_NUM_THREADS=1 python benchmarks/bench_calibration.py --toys --seeds 0 1 2 3 4 --orders in_order shuffled
    OMP_NUM_THREADS=1 python benchmarks/bench_calibration.py --pairs "mfeat zer-kar" mocap --seeds 0 1 2
    OMP_NUM_THREADS=1 python benchmarks/bench_calibration.py --toys --seeds 0 1 2 3 4 --ensemble 10 20
    OMP_NUM_THREADS=1 python benchmarks/bench_calibration.py --toys --seeds 0 1 2 3 4 --ensemble 10 20 \
        --scalings centred standardised

``--orders`` fits each toy seed once per order of its unaligned rows named: ``in_order`` (as generated) and
``shuffled`` (view Y2's unaligned rows permuted, ``AlignmentProblem.shuffle_unaligned``, seeded, as
``bench_nonlinear_toy.py`` does): the same data seen in another row order, hence another fit; the pooled summary
covers every fit.
``--ensemble`` calibrates the pool of one MAD per latent dimension given (``MADEnsemble``) instead of one MAD;
``--scalings`` makes every member once per scaling of the views named (``scalings``).
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import bayesalign as ba
from bayesalign.metrics.calibration import _confidence_and_correct

TOYS = {"linear_shared": 20, "linear_shared_private": 20, "nonlinear_shared_private": 48}
ORDERS = ("in_order", "shuffled")


def real_pairs():
    from bench_mad_real import PAIRS

    return PAIRS


def calibrated_floor(p, draws: int = 2000, seed: int = 0) -> float:
    """Mean ECE of outcomes drawn as Bernoulli(p): what perfectly calibrated probabilities p score on len(p) pairs."""
    rng = np.random.default_rng(seed)
    p = np.asarray(p, float)
    return float(np.mean([ba.metrics.expected_calibration_error(p, rng.random(p.size) < p) for _ in range(draws)]))


def run(name, problem, seed, num_inducing, ensemble=None, scalings=("centred",)):
    a, b = problem.views.names[:2]
    options = {} if num_inducing is None else {"num_inducing": num_inducing}
    if ensemble:  # the pool of one MAD per latent_dim (MADEnsemble), its own temperature fitted on the anchors
        model = ba.MADEnsemble(latent_dims=ensemble, scalings=scalings, seed=seed,
                               member_options=options or None).fit(problem)
    else:
        model = ba.MAD(seed=seed, progress=False, **options).fit(problem)
    posterior_al = model.align(a, b, temperature="posterior")
    posterior = ba.metrics.evaluate(posterior_al, problem)
    mean_p = float(posterior_al.probabilities.mean())
    start = time.perf_counter()
    T = model.calibrate_temperature(a, b)
    seconds = time.perf_counter() - start
    fitted_al = model.align(a, b, temperature="anchors")
    fitted = ba.metrics.evaluate(fitted_al, problem)
    record = model.calibration_[(a, b, model.cost)]
    pairs, evidence = record["pairs"], record.get("evidence", float("nan"))  # no evidence: the posterior T (no pair)
    floor = calibrated_floor(fitted_al.probabilities, seed=seed)
    pooled = [_confidence_and_correct(al, problem, None) for al in (posterior_al, fitted_al)]
    print(f"| {name} | {seed} | {posterior['accuracy']:.3f} | {mean_p:.3f} | {posterior['ece']:.3f} | "
          f"{T:.3g} ({pairs}) | {evidence:.3g} | "
          f"{fitted_al.probabilities.mean():.3f} | {fitted['ece']:.3f} | {floor:.3f} | {seconds:.0f} |", flush=True)
    return (posterior["ece"], fitted["ece"], floor), pooled


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--toys", action="store_true")
    parser.add_argument("--pairs", nargs="*", default=[], metavar="PAIR")
    parser.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    parser.add_argument("--num-inducing", type=int, default=None,
                        help="inducing inputs (default: MAD's; capped at the latent points)")
    parser.add_argument("--ensemble", nargs="*", type=int, default=None, metavar="LATENT_DIM",
                        help="calibrate MADEnsemble of one MAD per latent_dim given (e.g. --ensemble 10 20) instead "
                        "of one MAD")
    parser.add_argument("--scalings", nargs="*", default=("centred",), choices=("centred", "standardised"),
                        metavar="SCALING", help="with --ensemble: every member once per scaling of the views named "
                        "(MADEnsemble's scalings)")
    parser.add_argument("--orders", nargs="*", default=["in_order"], choices=ORDERS,
                        help="fit each toy seed once per order of its unaligned rows (default: in_order)")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    print("| problem | seed | accuracy | mean p (posterior T) | ECE (posterior T) | T fitted (anchor pairs) | "
          "evidence | mean p (fitted T) | ECE (fitted T) | ECE if calibrated | calibration seconds |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    summary, pools = {}, {}
    for name in args.toys and TOYS or []:
        for order, seed in ((order, seed) for order in args.orders for seed in args.seeds):
            problem = ba.datasets.mad_toy(name, seed=seed).split_anchors(TOYS[name], seed=seed)
            if order == "shuffled":  # the same data in another row order: another fit
                problem = problem.shuffle_unaligned(seed=seed)
            label = name if order == "in_order" else f"{name}, shuffled"
            values, pooled = run(label, problem, seed, args.num_inducing, args.ensemble, args.scalings)
            summary.setdefault(name, []).append(values)
            pools.setdefault(name, []).append(pooled)
    pairs = real_pairs() if args.pairs else {}
    for name in args.pairs:
        base = pairs[name]()
        for seed in args.seeds:
            values, pooled = run(name, base.split_anchors(0.1, seed=seed), seed, args.num_inducing,
                                 args.ensemble, args.scalings)
            summary.setdefault(name, []).append(values)
            pools.setdefault(name, []).append(pooled)
    print("\nmean ECE: posterior T -> fitted T (an exactly calibrated p on as many pairs)")
    for name, values in summary.items():
        before, after, floor = np.mean(values, axis=0)
        print(f"- {name}: {before:.3f} -> {after:.3f} ({floor:.3f})")
    print("\nECE of the pairs pooled over the seeds: posterior T -> fitted T (an exactly calibrated p on as many "
          "pairs)")
    for name, runs in pools.items():
        ece = []
        for k in (0, 1):  # posterior T, fitted T
            p = np.concatenate([pooled[k][0] for pooled in runs])
            y = np.concatenate([pooled[k][1] for pooled in runs])
            ece.append(ba.metrics.expected_calibration_error(p, y))
        print(f"- {name} ({p.size} pairs): {ece[0]:.3f} -> {ece[1]:.3f} ({calibrated_floor(p):.3f})")


if __name__ == "__main__":
    main()
