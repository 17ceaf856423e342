"""Dense Sinkhorn: bayesalign.matching.sinkhorn (POT's stabilised solver, epsilon scaling) against POT's log-domain
solver on the same near-hard costs, side by side in one run.

Points X in R^3 (n x 3, standard normal) and a noisy copy (noise 0.3); cost = squared distance / 0.01, so the costs
span thousands of temperatures (the regime of MAD's likelihood costs). Both stop at a largest column-marginal error
of 1e-3: ours checks it itself; POT's ``sinkhorn_log`` is run in chunks of 100 sweeps from its own warm start and
stopped at the same error. Prints seconds, sweeps and the largest difference of the marginals.

    OMP_NUM_THREADS=1 python benchmarks/bench_sinkhorn.py [--n 475] [--temperatures 1 10]

Measured figures: benchmarks/RESULTS.md ("MAD and matching").
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import ot

from bayesalign.matching import sinkhorn


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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
