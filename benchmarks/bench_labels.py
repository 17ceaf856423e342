"""Labels as weak supervision: matching and label transfer with no labels, correct labels on 30% of the rows,
and those labels with 20% wrong, for MAD, fused GW (10% anchors) and GW (no anchors).

Problems: the single-cell simulator (``ba.datasets.single_cell_simulation``: RNA counts and ATAC peaks, cell
types as labels) and the shipped mfeat pair (``ba.datasets.mfeat(("fou", "kar"))``, digit classes as labels),
each split into 10% anchors (``split_anchors(0.1, seed=0)``) with its other rows shuffled.

Conditions (:meth:`bayesalign.AlignmentProblem.with_label_prior`; the hinted rows of each view drawn at random,
independently per view, ``--draws`` times; each figure is the mean (standard deviation) over the draws):

- ``none``: no label prior;
- ``30%``: the true labels of 30% of the rows, ``noise=0.05``;
- ``30%, 20% wrong``: those labels, each replaced by another class with probability 0.2; ``noise`` the rate
  at which two partners' labels then disagree, 1 - 0.8^2 - 0.2^2 / (K - 1);
- ``100%``: the true label of every row, ``noise=0.05`` (what the mechanism can do; no label transfer is
  scored, every row being hinted).

Columns, on the rows that are not anchors (GW: every row): ``FOSCTTM`` of the method's score of every pair
(MAD: the cost of :meth:`~bayesalign.MAD.cost_matrix`; transport: the coupling); ``accuracy``: the fraction of
rows of the first view matched to their true partner by the optimal assignment of that score; ``partner LT``:
the fraction of unhinted rows of the second view whose matched partner has their (true) label; ``5-NN LT``:
5-NN label transfer from the first view to the unhinted rows of the second in the method's embedding
(:func:`bayesalign.metrics.label_transfer_accuracy`). Both label-transfer columns score, in every condition, the
rows that carry no hint in the labelled ones: scoring the hinted rows would judge the labels on themselves.
MAD's fit with anchors does not read the label prior (the prior enters its matcher), so one fit per problem
serves every condition, the labelled problem taking the place of the fitted one (the same views and anchors);
its embedding, hence its 5-NN transfer, is the same in every row. ``seconds``: a fit (MAD: the fit for ``none``,
the matching under the prior for the others).

    OMP_NUM_THREADS=1 python benchmarks/bench_labels.py [--quick] [--methods mad fgw gw] [--draws 3]
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import bayesalign as ba
from bayesalign import Correspondence, LatentEmbedding
from bayesalign._utils import as_rng
from bayesalign.matching import linear_assignment
from bayesalign.metrics import foscttm, label_transfer_accuracy
from bayesalign.transport import FusedGromovWassersteinAlignment, GromovWassersteinAlignment

FRACTION, WRONG, CLEAN_NOISE = 0.3, 0.2, 0.05


def problems(quick: bool) -> dict:
    n = 200 if quick else 300
    cells = ba.datasets.single_cell_simulation(n, n_genes=300, n_peaks=600, seed=0)
    digits = ba.datasets.mfeat(("fou", "kar"), n_per_class=n // 10, seed=0)
    return {name: p.split_anchors(0.1, seed=0).shuffle_unaligned(seed=0)
            for name, p in (("single-cell sim", cells), ("mfeat fou-kar", digits))}


def hinted_rows(problem, seed: int) -> dict:
    """view -> a boolean mask of FRACTION of its rows, drawn at random for each view."""
    rng = as_rng(seed)
    out = {}
    for view in problem.views.names:
        n = problem.views.n_samples[view]
        out[view] = np.zeros(n, dtype=bool)
        out[view][rng.choice(n, int(round(FRACTION * n)), replace=False)] = True
    return out


def hints(problem, hinted: dict, wrong: float, seed: int) -> dict:
    """The true labels of the hinted rows (others None), each replaced by another class with probability
    ``wrong``."""
    rng = as_rng(seed)
    classes = np.unique(np.concatenate([problem.labels[v] for v in problem.views.names]))
    out = {}
    for view in problem.views.names:
        y = problem.labels[view]
        given = np.full(y.size, None, dtype=object)
        given[hinted[view]] = y[hinted[view]]
        for r in np.flatnonzero(hinted[view] & (rng.random(y.size) < wrong)):
            given[r] = rng.choice(classes[classes != y[r]])
        out[view] = given
    return out


def labelled_conditions(problem, hinted: dict, seed: int) -> list:
    """(name, problem with that label prior) of the two labelled conditions on the rows ``hinted``."""
    K = np.unique(np.concatenate([problem.labels[v] for v in problem.views.names])).size
    pair_noise = 1 - (1 - WRONG) ** 2 - WRONG ** 2 / (K - 1)
    return [(f"{FRACTION:.0%}", problem.with_label_prior(hints(problem, hinted, 0.0, seed), noise=CLEAN_NOISE)),
            (f"{FRACTION:.0%}, {WRONG:.0%} wrong, noise {pair_noise:.2f}",
             problem.with_label_prior(hints(problem, hinted, WRONG, seed), noise=pair_noise))]


def scores(problem, score, rows_a, rows_b, embedding, hinted) -> dict:
    """The columns for a score [len(rows_a), len(rows_b)] (lower: likelier partners) and an embedding."""
    a, b = problem.views.names
    truth = problem.truth_between(a, b)
    partner = np.full(problem.views.n_samples[a], -1)
    partner[truth.index_a] = truth.index_b
    position_b = np.full(problem.views.n_samples[b], -1)
    position_b[rows_b] = np.arange(rows_b.size)
    local_b = position_b[partner[rows_a]]  # [n_a] the true partner's column
    keep = np.flatnonzero(local_b >= 0)
    out = {"FOSCTTM": foscttm(score, Correspondence((a, b), keep, local_b[keep]))}
    match = linear_assignment(score)
    out["accuracy"] = float(np.mean(local_b[match.index_a] == match.index_b))
    y_a, y_b = problem.labels[a], problem.labels[b]
    targets = rows_b[~hinted[b][rows_b]]
    if not targets.size:  # every row hinted: label transfer would score the labels on themselves
        return {**out, "partner LT": np.nan, "5-NN LT": np.nan}
    unhinted = ~hinted[b][rows_b[match.index_b]]
    out["partner LT"] = float(np.mean(y_a[rows_a[match.index_a]][unhinted] == y_b[rows_b[match.index_b]][unhinted]))
    dims = embedding.shared_dims
    restricted = LatentEmbedding({a: embedding.means[a][:, dims], b: embedding.means[b][targets][:, dims]})
    out["5-NN LT"] = label_transfer_accuracy(restricted, {a: y_a, b: y_b[targets]}, views=(a, b), k=5)
    return out


def mad_scorer(problem, quick: bool):
    """One MAD fit on ``problem``; returns labelled problem -> (score, rows_a, rows_b, embedding)."""
    mad = ba.MAD(latent_dim=6, num_inducing=20 if quick else 30, seed=0,
                 engine_options={"max_iter": 100 if quick else 200})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence at a capped max_iter: not the question here
        mad.fit(problem)

    def score(labelled):
        mad.problem_ = labelled  # the same views and anchors; the label prior enters the matcher only
        rows_a, rows_b, C = mad.cost_matrix()
        return C, rows_a, rows_b, mad.embedding_
    return score


def transport_scorer(estimator, anchors: bool):
    """labelled problem -> (score, rows_a, rows_b, embedding) of ``estimator`` fitted on it (without its
    anchors unless ``anchors``)."""
    def score(labelled):
        fitted = labelled if anchors else labelled.replace(anchors=[])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # ambiguity / convergence: in the attributes
            model = estimator.fit(fitted)
        a, b = fitted.views.names
        rows_a, rows_b = fitted.unaligned(a), fitted.unaligned(b)
        return -model.coupling_[np.ix_(rows_a, rows_b)], rows_a, rows_b, model.embedding_
    return score


def evaluate(make_scorer, problem, n_draws: int) -> dict:
    """Condition -> (the columns per draw of the hinted rows, seconds of each fit or matching) of the scorer
    ``make_scorer(problem)``."""
    start = time.perf_counter()
    scorer = make_scorer(problem)
    unlabelled = scorer(problem)  # no label prior: one fit, scored on every draw's unhinted rows
    out = {"none": ([], [time.perf_counter() - start])}
    for draw in range(n_draws):
        hinted = hinted_rows(problem, seed=100 + draw)
        out["none"][0].append(scores(problem, *unlabelled, hinted))
        for name, labelled in labelled_conditions(problem, hinted, seed=200 + draw):
            start = time.perf_counter()
            result = scorer(labelled)
            seconds = time.perf_counter() - start
            out.setdefault(name, ([], []))
            out[name][0].append(scores(labelled, *result, hinted))
            out[name][1].append(seconds)
    start = time.perf_counter()
    result = scorer(problem.with_label_prior(noise=CLEAN_NOISE))  # the true label of every row: no draw
    every = {v: np.ones(n, dtype=bool) for v, n in problem.views.n_samples.items()}
    out["100% (no LT: circular)"] = ([scores(problem, *result, every)], [time.perf_counter() - start])
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 rows (300 by default), fewer MAD iterations")
    parser.add_argument("--methods", nargs="+", default=["mad", "fgw", "gw"], choices=["mad", "fgw", "gw"])
    parser.add_argument("--draws", type=int, default=3, help="draws of the hinted rows and of the wrong labels")
    args = parser.parse_args(argv)
    columns = ("FOSCTTM", "accuracy", "partner LT", "5-NN LT")
    for pname, problem in problems(args.quick).items():
        print(f"\n{pname}: {problem.views.n_samples}, {len(problem.anchors_between(*problem.views.names))} anchors, "
              f"{np.unique(problem.labels[problem.views.names[0]]).size} classes; mean (sd) over {args.draws} draws "
              "of the hinted rows")
        print(f"{'method':<16}{'labels':<30}" + "".join(f"{c:>15}" for c in columns) + f"{'seconds':>10}")
        makers = {"mad": ("MAD, 10% anch.", lambda p: mad_scorer(p, args.quick)),
                  "fgw": ("fused GW, 10%", lambda p: transport_scorer(FusedGromovWassersteinAlignment(), True)),
                  "gw": ("GW, 0 anchors", lambda p: transport_scorer(GromovWassersteinAlignment(), False))}
        for key in args.methods:
            method, make = makers[key]
            for name, (draws, seconds) in evaluate(make, problem, args.draws).items():
                cells = "".join(f"{np.mean([d[c] for d in draws]):>9.3f} ({np.std([d[c] for d in draws]):.3f})"
                                for c in columns)
                print(f"{method:<16}{name:<30}{cells}{np.mean(seconds):>10.1f}", flush=True)


if __name__ == "__main__":
    main()
