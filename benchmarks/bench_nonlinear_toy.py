"""MAD on the paper's nonlinear toy: exact-match accuracy and Kendall-tau over 5 seeds.

The MAD toy "nonlinear_shared_private" (160 rows, 48 anchors, view 2's unaligned rows shuffled), MAD's default
latent_dim, 25 inducing points (``--num-inducing``), Hungarian on the likelihood cost; per seed the exact-match
accuracy of the unaligned rows, then the mean accuracy and mean Kendall-tau distance of each variant:

- the default (all rows, graph prior, one round of soft correspondence where the anchors can judge it),
- the all-rows model with p(X) = N(0, I) (``graph_strength=0``),
- the default followed by self-training (``.self_train()``: confident mutual pairs tied, the model refitted from
  its current q(X), each round judged by the anchors and undone if they rank worse, up to 5 rounds),
- the paper's procedure (anchors only),
- the pool of MAD fits with 10 and 20 latent dimensions, and with 5, 10 and 20 (``MADEnsemble``; each fit with
  MAD's defaults is made once per seed and shared by the variants; their seconds count every member's fit), and
  the pool of 10 and 20 latent dimensions on the centred and on the
  standardised views (``scalings=("centred", "standardised")``: four members), and of 10 on both (two); the pool
  of 10 and 20 latent dimensions followed by its self-training (``MADEnsemble.self_train``: the pool's confident
  mutual pairs tied in every member, each round judged by the pool's anchors, up to 5 rounds).

    OMP_NUM_THREADS=1 python benchmarks/bench_nonlinear_toy.py [--seeds 0 1 2 3 4] [--variants TEXT ...]
        [--num-inducing 25]

What the toy allows at best (matching with the generator's own kernel, its latent law and the other rows' true
latent points) is measured by ``bench_toy_ceiling.py``.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import bayesalign as ba

VARIANTS = {
    "all rows, graph prior (default)": {},
    "all rows, N(0, I) prior": {"graph_strength": 0.0},
    "the default, then self-training (.self_train(), up to 5 rounds)": {"self_train": True},
    "anchors only (paper)": {"training": "anchors"},
    "ensemble of 10 and 20 latent dimensions (MADEnsemble)": {"ensemble": (10, 20)},
    "ensemble of 5, 10 and 20 latent dimensions (MADEnsemble)": {"ensemble": (5, 10, 20)},
    "ensemble of 10 and 20 latent dimensions on centred and standardised views (MADEnsemble)": {
        "ensemble": (10, 20), "scalings": (False, True)},
    "ensemble of 10 latent dimensions on centred and standardised views (MADEnsemble)": {
        "ensemble": (10,), "scalings": (False, True)},
    "ensemble of 10 and 20 latent dimensions, then self-training (MADEnsemble.self_train, up to 5 rounds)": {
        "ensemble": (10, 20), "self_train": True},
}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--num-inducing", type=int, default=25,
                        help="MAD's num_inducing (MAD's default is 80)")
    parser.add_argument("--variants", nargs="*", metavar="TEXT",
                        help="run only the variants whose label contains one of these texts")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    print("| MAD | accuracy per seed | mean accuracy | mean Kendall-tau | seconds per fit |")
    print("|---|---|---|---|---|")
    fits = {}  # (seed, latent_dim, standardize) -> (MAD with its defaults otherwise, seconds): shared by the variants

    def default_fit(problem, seed, q, standardize=False):
        if (seed, q, standardize) not in fits:
            start = time.perf_counter()
            fits[seed, q, standardize] = (ba.MAD(num_inducing=args.num_inducing, seed=seed, latent_dim=q,
                                                 standardize=standardize).fit(problem), time.perf_counter() - start)
        return fits[seed, q, standardize]

    for label, options in VARIANTS.items():
        if args.variants and not any(text in label for text in args.variants):
            continue
        accuracy, tau, seconds = [], [], []
        for seed in args.seeds:
            problem = ba.datasets.mad_toy("nonlinear_shared_private", seed=seed).split_anchors(48, seed)
            problem = problem.shuffle_unaligned(seed=seed)
            start, fitted = time.perf_counter(), 0.0
            if "ensemble" in options:  # one MAD per latent_dim (each fitted once for every variant), pooled
                members = [default_fit(problem, seed, q, standardize)
                           for standardize in options.get("scalings", (False,)) for q in options["ensemble"]]
                model, fitted = ba.MADEnsemble.from_fitted([m for m, _ in members]), sum(t for _, t in members)
                if options.get("self_train"):  # ties in copies of the members: the shared fits stay as they are
                    model.self_train()
            elif not options:
                (model, fitted), start = default_fit(problem, seed, ba.MAD().latent_dim), time.perf_counter()
            elif options.get("self_train"):  # the default fit, then self-training
                model = ba.MAD(num_inducing=args.num_inducing, seed=seed).fit(problem).self_train()
            else:
                model = ba.MAD(num_inducing=args.num_inducing, seed=seed, **options).fit(problem)
            scores = ba.metrics.evaluate(model.align(), problem)
            seconds.append(time.perf_counter() - start + fitted)
            accuracy.append(scores["accuracy"])
            tau.append(scores["kendall_tau"])
        print(f"| {label} | {', '.join(f'{a:.3f}' for a in accuracy)} | {np.mean(accuracy):.3f} | "
              f"{np.mean(tau):.4f} | {np.mean(seconds):.0f} |", flush=True)


if __name__ == "__main__":
    main()
