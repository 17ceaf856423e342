"""Dense Sinkhorn: bayesalign.matching.sinkhorn (POT's stabilised solver, epsilon scaling) against POT's log-domain
solver on the same near-hard costs, side by side in one run.

Points X in R^3 (n x 3, standard normal) and a noisy copy (noise 0.3); cost = squared distance / 0.01, so the costs
span thousands of temperatures (the regime of MAD's likelihood costs). Both stop at a largest column-marginal error
of 1e-3: ours checks it itself; POT's ``sinkhorn_log`` is run in chunks of 100 sweeps from its own warm start and
stopped at the same error. Prints seconds, sweeps and the largest difference of the marginals.

Sparse Sinkhorn (``--sparse-n``, 2000 by default; 0 skips it): the path MAD's probabilities and temperature fit take
above 250,000 pairs (``sinkhorn_probabilities``: kNN candidate pairs completed until no row leaves out more than the
tolerance, epsilon scaling), on points in R^10 and a noisy copy (noise 0.7), cost = squared distance / 0.05, at
each temperature, solved by the stabilised scaling sweeps (two sparse products a sweep; the default)
and by the log-domain sweeps (two segmented log-sum-exps a sweep), side by side, with the
largest difference of their marginals.

    OMP_NUM_THREADS=1 python benchmarks/bench_sinkhorn.py [--n 475] [--temperatures 1 10] [--sparse-n 2000]

Measured figures: benchmarks/RESULTS.md ("MAD and matching").
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import ot

from bayesalign.matching import entropic, sinkhorn, sinkhorn_probabilities


def pot_log_domain(C, T, tol, budget=20000):
    a, b = np.ones(C.shape[0]), np.ones(C.shape[1])
    warm, sweeps = None, 0
    while sweeps < budget:
        with warnings.catch_warnings(), np.errstate(over="ignore"):
            warnings.simplefilter("ignore")
            plan, log = ot.bregman.sinkhorn_log(a, b, C, T, numItermax=100, stopThr=0.0, log=True, warn=False,
                                                warmstart=warm)
        sweeps += 100
        warm = (log["log_u"], log["log_v"])
        if np.abs(plan.sum(0) - 1.0).max() <= tol:
            break
    return plan, sweeps


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=475)
    parser.add_argument("--temperatures", type=float, nargs="+", default=[1.0, 10.0])
    parser.add_argument("--sparse-n", type=int, default=2000)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(args.n, 3))
    Y = X + 0.3 * rng.normal(size=(args.n, 3))
    C = ((X[:, None] - Y[None]) ** 2).sum(-1) / 0.01  # [n, n]
    print(f"{args.n} x {args.n}, cost spread {C.max() - C.min():.3g}, tolerance 1e-3 on the column marginals")
    for T in args.temperatures:
        start = time.perf_counter()
        ours = sinkhorn(C, temperature=T, n_iter=20000, tol=1e-3)
        t_ours = time.perf_counter() - start
        start = time.perf_counter()
        plan, sweeps = pot_log_domain(C, T, 1e-3)
        t_pot = time.perf_counter() - start
        print(f"T = {T:g}: bayesalign (stabilised, epsilon scaling) {t_ours:.2f} s, {ours.n_iter} sweeps | POT "
              f"sinkhorn_log from T directly {t_pot:.2f} s, {sweeps} sweeps | {t_pot / t_ours:.1f}x | largest "
              f"marginal difference {np.abs(ours.marginals - plan).max():.2e}", flush=True)
    if args.sparse_n:
        sparse(args.sparse_n, args.temperatures)
    return 0


def sparse(n, temperatures):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(n, 10))
    Y = X + 0.7 * rng.normal(size=(n, 10))
    C = ((X[:, None] - Y[None]) ** 2).sum(-1) / 0.05  # [n, n]
    print(f"\nsparse: {n} x {n} (kNN candidates, completed), cost spread {C.max() - C.min():.3g}, tolerance 1e-3")
    scaling = entropic._SparseSinkhorn.solve
    for T in temperatures:
        results = {}
        for name, solve in (("scaling", scaling), ("log-domain", entropic._SparseSinkhorn.solve_log)):
            entropic._SparseSinkhorn.solve = solve
            try:
                start, info = time.perf_counter(), {}
                P = sinkhorn_probabilities(C, T, mean_a=X, mean_b=Y, info=info)
                results[name] = (time.perf_counter() - start, P, info["sinkhorn_error"])
            finally:
                entropic._SparseSinkhorn.solve = scaling
        (t_new, P_new, e_new), (t_old, P_old, e_old) = results["scaling"], results["log-domain"]
        print(f"T = {T:g}: scaling sweeps {t_new:.2f} s (error {e_new:.1e}) | log-domain sweeps {t_old:.2f} s "
              f"(error {e_old:.1e}) | {t_old / t_new:.1f}x | largest marginal difference "
              f"{np.abs(P_new - P_old).max():.2e}", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
