"""MAD with no anchor at all on the two linear toys of the MAD paper.

For each toy ("linear_shared", "linear_shared_private"; N = 100, view 2 shuffled) and seed 0-3, MAD
(training="all_rows", the paper's toy settings: latent_dim 4 / 5, 8 / 12 inducing points) is fitted with no
anchor: the Gromov-Wasserstein bootstrap, then self-training. Printed side by side in one run:

- "gromov_wasserstein": one bootstrap, Gromov-Wasserstein from its default start;
- "gromov_wasserstein, reflections": Gromov-Wasserstein from each of the 4 reflections of the views' two leading
  principal axes, the model fitted and self-trained from each, the best supported kept;
- "default": those and the shared-subspace Procrustes candidate (``bayesalign.mad.zero_anchor``);
each candidate's right pairs (of its 2 x latent_dim bootstrap pairs) and final bound are listed. The variants set
the constants of ``bayesalign.mad.zero_anchor`` for the run.

``--pairs`` runs the same on shipped real pairs with every anchor removed.
A run counts as right when its exact-match accuracy exceeds 0.5 (the failures are mirror images, near 0).

    OMP_NUM_THREADS=1 python benchmarks/bench_zero_anchors.py [--seeds 0 1 2 3] [--toys linear_shared]
        [--variants default]
    cd benchmarks && OMP_NUM_THREADS=1 python bench_zero_anchors.py --toys --pairs mocap --seeds 0 --variants default
"""

from __future__ import annotations

import argparse
import time
import warnings

from bench_mad_geometry import constants  # a module's constants set for a block

import bayesalign as ba
from bayesalign.mad import zero_anchor

VARIANTS = {"gromov_wasserstein": dict(BOOTSTRAPS=("gromov_wasserstein",), REFLECTIONS=0),
            "gromov_wasserstein, reflections": dict(BOOTSTRAPS=("gromov_wasserstein",), REFLECTIONS=2),
            "default": {}}


SETTINGS = {"linear_shared": dict(latent_dim=4, num_inducing=8),
            "linear_shared_private": dict(latent_dim=5, num_inducing=12)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--toys", nargs="*", default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2, 3])
    parser.add_argument("--variants", nargs="*", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--pairs", nargs="*", default=[], metavar="PAIR",
                        help="shipped real pairs of bench_mad_real.py, without anchors (latent_dim 5, 30 inducing "
                             "points, view b's rows shuffled); give --toys with no name to run these alone")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    print("| toy | seed | bootstrap | accuracy | Kendall-tau | candidates: method signs right/pairs +self-trained "
          "bound agreement with the kept alignment | warned | seconds |")
    print("|---|---|---|---|---|---|---|---|")
    right = {}
    real = {}
    if args.pairs:
        from bench_mad_real import PAIRS

        real = {name: PAIRS[name]() for name in args.pairs}
    for toy in [*args.toys, *args.pairs]:
        for seed in args.seeds:
            if toy in real:
                problem = real[toy].split_anchors(0, seed=seed).shuffle_unaligned(seed=seed)
                settings = dict(latent_dim=5, num_inducing=30)
            else:
                problem = ba.datasets.mad_toy(toy, seed=seed, n_anchors=0).shuffle_unaligned(seed=seed)
                settings = SETTINGS[toy]
            for variant in args.variants:
                start = time.perf_counter()
                with constants(zero_anchor, **VARIANTS[variant]):
                    mad = ba.MAD(seed=seed, progress=False, **settings).fit(problem)
                result = ba.metrics.evaluate(mad.align(matcher="hungarian"), problem)
                chosen = mad.bootstrap_.get("chosen", 0)
                listed = "; ".join(f"{'*' if k == chosen else ''}{c['method']} {tuple(c['signs'])} "
                                   f"{c['correct']}/{c['n_pairs']} +{c['self_training_added']} {c['bound']:.1f} "
                                   f"{c.get('agreement', float('nan')):.2f}"
                                   for k, c in enumerate(mad.bootstrap_["candidates"]))
                right.setdefault((toy, variant), []).append(result["accuracy"] > 0.5)
                warned = ", ".join(w for w, key in (("ambiguous", "ambiguous"), ("weak support", "weak_support"))
                                   if mad.bootstrap_.get(key)) or "no"
                print(f"| {toy} | {seed} | {variant} | {result['accuracy']:.3f} | {result['kendall_tau']:.3f} | "
                      f"{listed} | {warned} | {time.perf_counter() - start:.0f} |", flush=True)
    print("\nRuns right (accuracy > 0.5), * = the candidate kept:")
    for (toy, variant), hits in right.items():
        print(f"- {toy}, {variant}: {sum(hits)} of {len(hits)}")


if __name__ == "__main__":
    main()
