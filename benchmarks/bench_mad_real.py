"""MAD against the suite's baselines on every shipped real pair at 10% anchors.

For each pair and anchor draw (``split_anchors(0.1, seed)``, seeds 0-2) it prints the FOSCTTM of the
unaligned rows (lower is better; 0.5 is random) of:

- the baselines at each setting of a small documented grid: CCA and the joint Laplacian with
  n_components 2, 5, 10 (where the views allow it), least squares, the anchor-similarity baseline;
  "best baseline" is the one with the lowest mean over the seeds, at its best setting. The same grid also
  runs on the standardised views (``Views.standardised``; rows marked "[standardised]"), so that each MAD
  variant is compared with the baselines on the same data. The summary also names the best baseline over both;
- MAD learning from every row (``training="all_rows"``, the default) and MAD on the anchors only (the paper's
  procedure, ``training="anchors"``), each on standardised and on centred views, the all-rows model with
  p(X) = N(0, I) instead of the graph prior (``graph_strength=0``), the centred all-rows fit followed by
  self-training (``.self_train()``: its rounds judged by the anchors; scored over the rows unaligned in the
  problem, a tied row by its entity's posterior; the same fit as the centred row when that ran, its seconds
  added), and pools of MAD fits (``MADEnsemble``: 10 and 20 latent dimensions on centred, on standardised or on
  both scalings, 5, 10 and 20 on centred views, 10 alone on both scalings; a pool's 10-dimensional member of
  each scaling is the single fit of that scaling when that variant ran in the same call, its seconds then that
  fit's plus the rest; with ``--ensemble-jobs N`` every member is fitted from scratch, N at a time, and the
  seconds are the wall time), and pools followed by their self-training (``--variants`` picks some of them).

MAD's FOSCTTM ranks by the cost it aligns by (``MAD.cost_matrix``: the likelihood cost with the cross-view
misfit fitted on the anchors); the baselines' by the Euclidean distances of their embeddings. A second column
ranks each MAD variant's partners by its match probabilities (``MAD.match_log_probabilities``), and, to show
what that ranking alone is worth, the best baseline of each scaling ranked by the Sinkhorn marginals of its
squared distances (at the best of ``BASELINE_TEMPERATURES`` times its nearest-match temperature, chosen on the
truth: generous to the baseline; ``--skip-baseline-ranking`` leaves them out). The last column gives the FOSCTTM
of MAD's posterior means (Euclidean, in the shared dimensions). For MAD also the expected calibration error of its
match probabilities (Hungarian) and the seconds of fit + alignment. Every number of the table comes from this
one run:

    OMP_NUM_THREADS=1 python benchmarks/bench_mad_real.py                 # all pairs, 3 seeds
    OMP_NUM_THREADS=1 python benchmarks/bench_mad_real.py --pairs mocap --seeds 0
    python benchmarks/bench_mad_real.py --pairs mocap --seeds 0 --device cuda   # MAD on a GPU
"""

from __future__ import annotations

import argparse
import copy
import time
import warnings

import numpy as np

import bayesalign as ba
from bayesalign import spectral

PAIRS = {
    "mfeat fou-kar": lambda: ba.datasets.mfeat(("fou", "kar")),
    "mfeat fou-pix": lambda: ba.datasets.mfeat(("fou", "pix")),
    "mfeat zer-kar": lambda: ba.datasets.mfeat(("zer", "kar")),
    "mfeat fac-pix": lambda: ba.datasets.mfeat(("fac", "pix")),
    "mocap": lambda: ba.datasets.mocap(),
    "digits halves": lambda: ba.datasets.digits_halves(),
    "protein 1-21": lambda: ba.datasets.protein(models=(1, 21)),
}


STANDARDISED = " [standardised]"


def baselines():
    out = {}
    for k in (2, 5, 10):
        out[f"cca({k})"] = lambda k=k: spectral.CCAAlignment(n_components=k)
        out[f"joint-laplacian({k})"] = lambda k=k: spectral.JointLaplacianAlignment(n_components=k)
    out["least-squares"] = spectral.LeastSquaresAlignment
    out["anchor-similarity"] = spectral.AnchorSimilarityBaseline
    return out


def mads(args):
    common = dict(num_inducing=args.num_inducing, progress=False,
                  **({} if args.device is None else {"device": args.device}),
                  **({} if args.latent_dim is None else {"latent_dim": args.latent_dim}))
    return {
        "MAD (all rows, standardised)": lambda seed: ba.MAD(**common, seed=seed, training="all_rows",
                                                            standardize=True),
        "MAD (all rows, centred)": lambda seed: ba.MAD(**common, seed=seed, training="all_rows", standardize=False),
        "MAD (anchors only, paper, centred)": lambda seed: ba.MAD(**common, seed=seed, training="anchors"),
        "MAD (anchors only, standardised)": lambda seed: ba.MAD(**common, seed=seed, training="anchors",
                                                                standardize=True),
        "MAD (all rows, centred, N(0, I) prior)": lambda seed: ba.MAD(**common, seed=seed, training="all_rows",
                                                                      graph_strength=0.0),
        # .self_train(): built in main() from the centred fit above when it ran
        "MAD (all rows, centred, then self-training)": lambda seed: ba.MAD(**common, seed=seed),
        # the pools: built in main() around the variant of the same scaling fitted above, when it ran
        "MAD ensemble (10 + 20 dims, centred)": lambda seed: ensemble(common, seed, (10, 20), CENTRED, args),
        "MAD ensemble (5 + 10 + 20 dims, centred)": lambda seed: ensemble(common, seed, (5, 10, 20), CENTRED, args),
        "MAD ensemble (10 + 20 dims, standardised)": lambda seed: ensemble(common, seed, (10, 20), STANDARD, args),
        "MAD ensemble (10 + 20 dims, both scalings)": lambda seed: ensemble(common, seed, (10, 20), BOTH, args),
        "MAD ensemble (10 dims, both scalings)": lambda seed: ensemble(common, seed, (10,), BOTH, args),
        # MADEnsemble.self_train: built in main() from the pool above when it ran
        "MAD ensemble (10 + 20 dims, centred, then self-training)": lambda seed: ensemble(
            common, seed, (10, 20), CENTRED, args),
        "MAD ensemble (10 + 20 dims, both scalings, then self-training)": lambda seed: ensemble(
            common, seed, (10, 20), BOTH, args),
    }


CENTRED, STANDARD, BOTH = ("centred",), ("standardised",), ("centred", "standardised")  # MADEnsemble's scalings


def ensemble(common, seed, dims, scalings, args):
    options = {k: v for k, v in common.items() if k not in ("progress", "device", "latent_dim")}
    return ba.MADEnsemble(latent_dims=dims, seed=seed, device=common.get("device"),
                          scalings=scalings, member_options=options, n_jobs=args.ensemble_jobs)


#: the single fits an ensemble variant reuses as its members of MAD's default latent_dim (same scaling, MAD's
#: defaults otherwise)
REUSED = {"MAD ensemble (10 + 20 dims, centred)": ("MAD (all rows, centred)",),
          "MAD ensemble (5 + 10 + 20 dims, centred)": ("MAD (all rows, centred)",),
          "MAD ensemble (10 + 20 dims, standardised)": ("MAD (all rows, standardised)",),
          "MAD ensemble (10 + 20 dims, both scalings)": ("MAD (all rows, centred)", "MAD (all rows, standardised)"),
          "MAD ensemble (10 dims, both scalings)": ("MAD (all rows, centred)", "MAD (all rows, standardised)")}


#: the self-training variants: the fit of the same draw each goes on from (fitted there if it did not run)
SELF_TRAINED = {"MAD (all rows, centred, then self-training)": "MAD (all rows, centred)",
                "MAD ensemble (10 + 20 dims, centred, then self-training)": "MAD ensemble (10 + 20 dims, centred)",
                "MAD ensemble (10 + 20 dims, both scalings, then self-training)":
                    "MAD ensemble (10 + 20 dims, both scalings)"}


def _cost_foscttm(model, problem, a, b) -> float:
    """FOSCTTM of the unaligned rows under the cost MAD aligns by (``MAD.cost_matrix``, its current settings); after
    self-training, of the rows unaligned in the problem, a row it tied by its entity's posterior."""
    rows_a, rows_b, cost = _cost_block(model, problem, a, b)
    return _scored(cost, rows_a, rows_b, problem, a, b)


def _cost_block(model, problem, a, b):
    """(rows_a, rows_b, C): the cost MAD aligns by between the rows unaligned in the problem (after self-training, a
    row it tied by its entity's posterior), as :func:`_cost_foscttm` scores it."""
    posteriors = model.posteriors(a, b)
    if posteriors.discovered is not None:
        emb = posteriors.embedding
        rows_a, rows_b = problem.unaligned(a), problem.unaligned(b)
        ma, va = emb.means[a][rows_a], emb.variance_of(a)[rows_a]
        mb, vb = emb.means[b][rows_b], emb.variance_of(b)[rows_b]
        cost = (ba.matching.mean_distance_cost(ma, mb) if model.cost == "mean" else
                ba.matching.likelihood_cost(ma, va, mb, vb))
        return rows_a, rows_b, cost
    return model.cost_matrix(a, b)


def _probability_foscttm(model, problem, a, b) -> float:
    """FOSCTTM of the unaligned rows ranked by MAD's match probabilities (``MAD.match_log_probabilities``: the
    Sinkhorn marginals at the temperature it reports them at); after self-training, the Sinkhorn marginals of the
    cost block of :func:`_cost_block` at that temperature."""
    if model.posteriors(a, b).discovered is None:
        rows_a, rows_b, L = model.match_log_probabilities(a, b)
    else:
        rows_a, rows_b, C = _cost_block(model, problem, a, b)
        L = ba.matching.sinkhorn_log_marginals(C, model.calibrate_temperature(a, b))
    return _scored(-L, rows_a, rows_b, problem, a, b)


def _scored(cost, rows_a, rows_b, problem, a, b) -> float:
    full = np.zeros((problem.views.n_samples[a], problem.views.n_samples[b]))  # [n_a, n_b]; only the unaligned
    full[np.ix_(rows_a, rows_b)] = cost  # rows' block is read (the anchors are no candidates)
    return ba.metrics.foscttm(full, problem, views=(a, b))


#: multiples of the baselines' nearest-match temperature (``nearest_cost_temperature`` of their embeddings) at which
#: their squared distances are ranked by Sinkhorn marginals too; the best of them is reported
BASELINE_TEMPERATURES = (0.25, 1.0, 4.0)


def _baseline_probability_foscttm(embedding, problem, a, b) -> float:
    """The best FOSCTTM over ``BASELINE_TEMPERATURES`` of a baseline's embedding ranked as MAD's match probabilities
    are: the Sinkhorn marginals of its squared distances between the unaligned rows (how much of MAD's gain from
    that ranking the ranking alone gives)."""
    rows_a, rows_b = problem.unaligned(a), problem.unaligned(b)
    ea, eb = embedding.means[a][rows_a], embedding.means[b][rows_b]
    C = ba.matching.squared_distances(ea, eb)
    T0 = ba.matching.nearest_cost_temperature(ea, eb)
    return min(_scored(-ba.matching.sinkhorn_log_marginals(C, T0 * k), rows_a, rows_b, problem, a, b)
               for k in BASELINE_TEMPERATURES)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", nargs="*", default=list(PAIRS), choices=list(PAIRS), metavar="PAIR")
    parser.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    parser.add_argument("--latent-dim", type=int, default=None, help="MAD's latent_dim (default: MAD's own, 10)")
    parser.add_argument("--num-inducing", type=int, default=80, help="MAD's num_inducing (its default)")
    parser.add_argument("--skip-anchors-only", action="store_true")
    parser.add_argument("--skip-baseline-ranking", action="store_true",
                        help="leave out the best baselines ranked by Sinkhorn marginals (minutes per draw on mfeat)")
    parser.add_argument("--ensemble-jobs", type=int, default=None,
                        help="fit the ensemble variants' members from scratch, this many at once (MADEnsemble's "
                        "n_jobs; its seconds are then the wall time), instead of reusing the single fit")
    parser.add_argument("--device", default=None, help="MAD's torch device, e.g. cuda (default: MAD's own, cpu)")
    parser.add_argument("--variants", nargs="*", metavar="TEXT",
                        help="run only the MAD variants whose label contains one of these texts")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    rows = []
    for name in args.pairs:
        base = PAIRS[name]()
        a, b = base.views.names[:2]
        scores: dict[str, list[float]] = {}
        ranked: dict[str, list[float]] = {}  # label -> FOSCTTM ranked by match probabilities, per draw
        embeddings: dict[str, list] = {}  # baseline label -> (embedding, problem) per draw
        extra: dict[str, list[tuple[float, float]]] = {}
        for seed in args.seeds:
            problem = base.split_anchors(0.1, seed=seed)
            standardised = problem.replace(views=problem.views.standardised())
            for data, suffix in ((problem, ""), (standardised, STANDARDISED)):
                for label, make in baselines().items():
                    try:
                        emb = make().fit(data).embedding_
                    except ValueError:  # n_components above what the views allow
                        continue
                    scores.setdefault(label + suffix, []).append(ba.metrics.foscttm(emb, data, views=(a, b)))
                    embeddings.setdefault(label + suffix, []).append((emb, data))
            fitted = {}  # label -> (fitted model, seconds) of this draw
            for label, make in mads(args).items():
                if args.skip_anchors_only and "anchors" in label:
                    continue
                if args.variants and not any(text in label for text in args.variants):
                    continue
                start = time.perf_counter()
                reused = [fitted[r] for r in REUSED.get(label, ()) if r in fitted]
                if args.latent_dim is not None or args.ensemble_jobs is not None:
                    reused = []  # the members are fitted from scratch: the seconds are the wall time
                if reused:  # the single fits above are the (racing) members of their latent_dim and scaling
                    members = []
                    for member in make(seed)._members():
                        same = next((m for m, _ in reused if member.latent_dim == m.latent_dim
                                     and member.standardize == m.standardize), None)
                        members.append(same if same is not None else member.fit(problem))
                    model = ba.MADEnsemble.from_fitted(members)
                elif label in SELF_TRAINED:  # the fit of this draw it goes on from (fitted here if it did not run)
                    before, before_seconds = fitted.get(SELF_TRAINED[label], (None, 0.0))
                    if before is None:
                        before, before_seconds = make(seed).fit(problem), time.perf_counter() - start
                    start = time.perf_counter() - before_seconds
                    model = copy.deepcopy(before).self_train()
                    print(f"({label}, draw {seed}: rounds (added, correct, kept) "
                          f"{[(h['added'], h['correct'], h['kept']) for h in model.self_training_history_]})",
                          flush=True)
                else:
                    model = make(seed).fit(problem)
                alignment = model.align(a, b, matcher="hungarian")
                seconds = time.perf_counter() - start + sum(s for _, s in reused)
                means = (ba.metrics.foscttm(model.embedding_, problem, views=(a, b)) if isinstance(model, ba.MAD)
                         else float("nan"))  # an ensemble has no single latent space
                fitted[label] = (model, seconds)
                scores.setdefault(label, []).append(_cost_foscttm(model, problem, a, b))
                ranked.setdefault(label, []).append(_probability_foscttm(model, problem, a, b))
                ece = ba.metrics.expected_calibration_error(alignment, problem)
                extra.setdefault(label, []).append((ece, seconds, means, getattr(model, "converged_", None)))
        complete = {k: v for k, v in scores.items() if len(v) == len(args.seeds)}
        bests = {}  # "" (the views as given) and STANDARDISED -> (label, mean) of the best baseline on them
        for suffix in ("", STANDARDISED):
            label = min((k for k in complete if not k.startswith("MAD") and k.endswith(suffix)
                         and (suffix or not k.endswith(STANDARDISED))), key=lambda k: np.mean(complete[k]))
            bests[suffix] = (label, float(np.mean(complete[label])))
            if not args.skip_baseline_ranking:
                ranked[label] = [_baseline_probability_foscttm(emb, data, a, b) for emb, data in embeddings[label]]

        def reference(label, bests=bests):  # the best baseline on the same data as the row (either, for both)
            if "both scalings" in label:
                return min(bests.values(), key=lambda best: best[1])
            return bests[STANDARDISED if (label.endswith(STANDARDISED) or "standardised" in label) else ""]

        print(f"\n## {name} ({len(args.seeds)} anchor draws, 10% anchors)")
        print("| method | FOSCTTM mean ± sd | / best baseline on the same views | ranked by match probability "
              "(baselines: by Sinkhorn marginals of their distances) | / best baseline (as in column 2) | ECE | "
              "seconds: mean (max) over the draws | FOSCTTM of MAD's means | draws converged by the fit's rule |")
        print("|---|---|---|---|---|---|---|---|---|")
        for label, values in sorted(complete.items(), key=lambda kv: np.mean(kv[1])):
            ece = sec = means = converged = ""
            if label in extra:
                ece = f"{np.mean([e for e, _, _, _ in extra[label]]):.3f}"
                times = [s for _, s, _, _ in extra[label]]
                sec = f"{np.mean(times):.0f} (max {max(times):.0f})"
                means = f"{np.mean([m for _, _, m, _ in extra[label]]):.3f}"
                flags = [c for _, _, _, c in extra[label] if c is not None]
                converged = f"{sum(flags)} of {len(flags)}" if flags else ""
            mark = " (best baseline)" if label in (bests[""][0], bests[STANDARDISED][0]) else ""
            digits = 3 if np.mean(values) >= 0.01 else 5  # fac-pix and the protein score below 0.001
            by_p = by_p_ratio = ""
            if len(ranked.get(label, ())) == len(args.seeds):
                by_p = f"{np.mean(ranked[label]):.{digits}f} ± {np.std(ranked[label]):.{digits}f}"
                by_p_ratio = f"{np.mean(ranked[label]) / max(reference(label)[1], 1e-12):.2f}"
            print(f"| {label}{mark} | {np.mean(values):.{digits}f} ± {np.std(values):.{digits}f} | "
                  f"{np.mean(values) / max(reference(label)[1], 1e-12):.2f} | {by_p} | {by_p_ratio} | {ece} | {sec} | "
                  f"{means} | {converged} |", flush=True)
        mad = {k: (float(np.mean(v)), reference(k)[1], float(np.mean(ranked[k]))) for k, v in complete.items()
               if k.startswith("MAD") and len(ranked.get(k, ())) == len(args.seeds)}
        ranked_bests = {suffix: float(np.mean(ranked.get(label, np.nan))) for suffix, (label, _) in bests.items()}
        rows.append((name, bests, ranked_bests, mad))
    print("\n## Summary: each MAD variant's FOSCTTM / the best baseline's on the same views (and on either); then "
          "ranked by its match probabilities / the same (and / the best baseline of either scaling ranked by the "
          "Sinkhorn marginals of its distances)")
    for name, bests, ranked_bests, mad in rows:
        (best, best_mean), (best_std, best_std_mean) = bests[""], bests[STANDARDISED]
        either, either_ranked = min(best_mean, best_std_mean), min(ranked_bests.values())
        ratios = ", ".join(f"{label[5:-1] if label.startswith('MAD (') else label[4:]} "
                           f"{value / max(ref, 1e-12):.2f} ({value / max(either, 1e-12):.2f}); by probability "
                           f"{by_p / max(ref, 1e-12):.2f} ({by_p / max(either, 1e-12):.2f}; "
                           f"{by_p / max(either_ranked, 1e-12):.2f})"
                           for label, (value, ref, by_p) in mad.items())
        print(f"- {name} (best baseline {best} {best_mean:.4f}; on standardised views {best_std[:-len(STANDARDISED)]} "
              f"{best_std_mean:.4f}; ranked by Sinkhorn marginals {ranked_bests['']:.4f} and "
              f"{ranked_bests[STANDARDISED]:.4f}): {ratios}")


if __name__ == "__main__":
    main()
