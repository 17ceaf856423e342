"""Multiscale alignment by diffusion wavelets (chapter 5.3.3/5.4.3): level dimensions, aligned topics.

Wang, Krafft & Mahadevan, "Manifold Alignment" (2011), section 5.3.3 (algorithm) and
section 5.4.3 (aligning topic models, Figure 5.8; ``/work/shared/papers/000_*.txt``). The
chapter aligns the NIPS corpus in an LSI and an LDA topic space (400 topics each, 20% of
the documents as correspondences, mu = nu = 1); the diffusion wavelets find a 3-level
hierarchy with 800, 91 and 2 basis functions, and at the coarsest level the two aligned
"topics" are machine learning and neuroscience, the two top-level areas of NIPS.

Our data with a known two-level structure: UCI multiple-features digits, the Fourier view
(76 features) against the Karhunen-Loeve view (64 features) (the counterparts of the two
topic spaces: two feature sets of the same objects), restricted to six classes in two shape
families -- "round" digits {0, 6, 8} and "stroke" digits {1, 4, 7} -- so that the top level
of the hierarchy has a ground truth (the family) and the level below it too (the class).
20% of the digits are anchors, as in the chapter. ``bayesalign.spectral.MultiscaleAlignment``
(feature level, mu = nu = 1) finds the levels and their dimensions at precision ``epsilon``.

For every level we report
* the cross-view alignment of the held-out digits: top-1 / top-10 retrieval of the true
  match, FOSCTTM, and label transfer (a 5-NN classifier on the Fourier view's digits, anchors
  included, predicts the class, and the family, of the held-out Karhunen-Loeve digits;
  ``bayesalign.metrics.label_transfer_accuracy``), next to a flat feature-level alignment
  (manifold projections, ``LinearAlignment``) of the same dimension;
* the aligned "topics": basis function j of a level is column j of ``X_v F_k`` in each view;
  its class profile is the mean of that column over each class (in units of the column's
  standard deviation). We list which classes each basis function concentrates on, how well
  it separates the two families (the largest |difference of family means|), and how similar
  the profiles of the corresponding basis functions are in the two views (correlation),
  which is the chapter's "the new topics in correspondence are very similar".

Run: ``python experiments/multiscale.py [--quick] [--seed 0] [--out experiments/results]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from bayesalign._utils import atomic_write
from bayesalign.plot import save_figure

PAPER = "Wang, Krafft & Mahadevan (2011), sections 5.3.3 / 5.4.3 (Figure 5.8: levels 800 / 91 / 2)"
CHAPTER_DIMENSIONS = (800, 91, 2)
FAMILIES = {"round": (0, 6, 8), "stroke": (1, 4, 7)}
VIEWS = ("fou", "kar")


def family_problem(n_per_class: int, seed):
    """The mfeat digits of the six classes of ``FAMILIES`` (views ``VIEWS``), paired, with labels."""
    from bayesalign.data import AlignmentProblem
    from bayesalign.datasets import mfeat

    full = mfeat(VIEWS, n_per_class=n_per_class, seed=seed)
    classes = np.array([c for members in FAMILIES.values() for c in members])
    labels = np.asarray(full.labels[VIEWS[0]])
    rows = np.flatnonzero(np.isin(labels, classes))
    return AlignmentProblem.paired({v: np.asarray(full.views[v])[rows] for v in VIEWS},
                                   labels={v: labels[rows] for v in VIEWS}, name="mfeat_families")


def family_of(labels: np.ndarray) -> np.ndarray:
    """Family index (order of ``FAMILIES``) of each class label.

    >>> family_of(np.array([0, 1, 8, 7])).tolist()
    [0, 1, 0, 1]
    """
    lookup = {c: f for f, members in enumerate(FAMILIES.values()) for c in members}
    return np.array([lookup[int(c)] for c in labels])


def class_profiles(coordinates: np.ndarray, labels: np.ndarray, classes) -> np.ndarray:
    """Mean of each basis function over each class, in units of its standard deviation. [n_classes, d]

    >>> z = np.array([[1.0], [1.0], [-1.0], [-1.0]])
    >>> class_profiles(z, np.array([0, 0, 1, 1]), [0, 1]).ravel().tolist()
    [1.0, -1.0]
    """
    z = (coordinates - coordinates.mean(axis=0)) / (coordinates.std(axis=0) + 1e-300)
    return np.stack([z[labels == c].mean(axis=0) for c in classes])


def profile_agreement(profile_a: np.ndarray, profile_b: np.ndarray) -> np.ndarray:
    """Correlation, per basis function, of the two views' class profiles (1 = the same topic). [d]

    >>> p = np.array([[1.0, 2.0], [0.0, -1.0], [-1.0, 0.5]])
    >>> profile_agreement(p, 3 * p).round(6).tolist()
    [1.0, 1.0]
    """
    a = profile_a - profile_a.mean(axis=0)
    b = profile_b - profile_b.mean(axis=0)
    return (a * b).sum(axis=0) / np.sqrt((a * a).sum(axis=0) * (b * b).sum(axis=0) + 1e-300)


def level_metrics(embedding, problem, family_problem) -> dict:
    """Top-k retrieval, FOSCTTM and label / family transfer (5-NN from view a) of the held-out rows."""
    from bayesalign import metrics

    views = VIEWS
    return {
        "top1": metrics.top_k_accuracy(embedding, problem, k=1, views=views),
        "top10": metrics.top_k_accuracy(embedding, problem, k=10, views=views),
        "foscttm": metrics.foscttm(embedding, problem, views=views),
        "class_transfer": metrics.label_transfer_accuracy(embedding, problem, views=views, k=5),
        "family_transfer": metrics.label_transfer_accuracy(embedding, family_problem, views=views, k=5),
    }


def flat_alignment(problem, families, dimension: int, max_dimension: int = 20) -> dict:
    """The same metrics for a flat feature-level alignment of the level's dimension (mu = nu = 1).

    ``bayesalign.spectral.LinearAlignment`` (the chapter's manifold projections, section 5.3.1):
    the "flat" method whose dimension has to be chosen, against which the chapter motivates the
    multiscale one. Empty for levels above ``max_dimension`` or if the class is not installed.
    """
    from bayesalign import spectral

    cls = getattr(spectral, "LinearAlignment", None)
    if cls is None or dimension > max_dimension:
        return {}
    emb = cls(n_components=dimension, mu=1.0, nu=1.0, affinity="heat").fit(problem).embedding_
    return {f"flat_{key}": value for key, value in level_metrics(emb, problem, families).items()
            if key in ("top10", "class_transfer", "family_transfer")}


def topic_rows(level: int, embedding, labels: np.ndarray, classes) -> tuple[list[dict], dict]:
    """One row per (basis function, view): class profile, classes it concentrates on, family separation."""
    profiles = {v: class_profiles(embedding.means[v], labels, classes) for v in VIEWS}  # [C, d]
    agreement = profile_agreement(profiles[VIEWS[0]], profiles[VIEWS[1]])
    fam = family_of(np.asarray(classes))
    rows = []
    for j in range(embedding.n_components):
        for v in VIEWS:
            prof = profiles[v][:, j]
            order = np.argsort(-np.abs(prof))
            strong = [f"{classes[c]}{'+' if prof[c] > 0 else '-'}" for c in order if abs(prof[c]) >= 0.5]
            rows.append({"level": level, "dimension": embedding.n_components, "basis": j, "view": v,
                         **{f"class_{c}": float(prof[i]) for i, c in enumerate(classes)},
                         "family_separation": float(abs(prof[fam == 0].mean() - prof[fam == 1].mean())),
                         "concentrates_on": " ".join(strong) or "-",
                         "agreement_across_views": float(agreement[j])})
    return rows, profiles


def markdown_table(frame) -> str:
    """A pipe table of a DataFrame (numbers to 3 significant digits)."""
    cols = list(frame.columns)
    fmt = lambda x: f"{x:.3g}" if isinstance(x, (float, np.floating)) else str(x)
    lines = ["| " + " | ".join(str(c) for c in cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines) + "\n"


def plot(levels, profiles_by_level, classes, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [k for k, p in profiles_by_level.items() if p[VIEWS[0]].shape[1] <= 12][:3]
    fig = plt.figure(figsize=(4.5 + 3.2 * len(shown), 6.0))
    grid = fig.add_gridspec(2, 1 + len(shown), width_ratios=[1.5] + [1] * len(shown), hspace=0.3, wspace=0.35)
    ax = fig.add_subplot(grid[:, 0])
    x = np.arange(len(levels))
    for key, marker in (("top10", "o"), ("class_transfer", "s"), ("family_transfer", "^")):
        ax.plot(x, levels[key], marker=marker, label=key.replace("_", " "))
    ax.axhline(1 / len(classes), color="grey", lw=0.8, ls=":", label="chance (class)")
    ax.axhline(0.5, color="grey", lw=0.8, ls="--", label="chance (family)")
    ax.set_xticks(x, [str(d) for d in levels["dimension"]])
    ax.set_xlabel("level (its dimension)")
    ax.set_ylabel("held-out digits")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=7)
    ax.set_title("cross-view alignment per level", fontsize=9)
    for col, k in enumerate(shown, start=1):
        for row, v in enumerate(VIEWS):
            prof = profiles_by_level[k][v]
            ax = fig.add_subplot(grid[row, col])
            image = ax.imshow(prof, cmap="RdBu_r", vmin=-1.5, vmax=1.5, aspect="auto")
            ax.set_yticks(range(len(classes)), [str(c) for c in classes])
            ax.set_xticks(range(prof.shape[1]))
            if row == len(VIEWS) - 1:
                ax.set_xlabel("basis function (topic)", fontsize=8)
            ax.set_ylabel("digit class", fontsize=8)
            ax.set_title(f"level {k} ({prof.shape[1]}-d), view {v}", fontsize=9)
    fig.colorbar(image, ax=fig.axes[1:], shrink=0.6, label="class mean (std units)")
    fig.suptitle("Multiscale alignment, mfeat round {0,6,8} vs stroke {1,4,7} digits "
                 "(chapter Figure 5.8 analogue)", fontsize=10)
    save_figure(fig, path, dpi=120)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="60 digits per class, one split (seconds)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"),
                        help="output folder (default experiments/results/)")
    parser.add_argument("--epsilon", type=float, default=1e-3, help="precision of the diffusion wavelets")
    parser.add_argument("--anchors", type=float, default=0.2, help="fraction of anchors (chapter: 20%%)")
    args = parser.parse_args(argv)
    import pandas as pd

    from bayesalign.spectral import MultiscaleAlignment

    started = time.perf_counter()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"Reproducing {PAPER}")
    n_per_class = 60 if args.quick else 200
    problem = family_problem(n_per_class, args.seed).split_anchors(args.anchors, seed=args.seed)
    labels = np.asarray(problem.labels[VIEWS[0]])
    classes = [c for members in FAMILIES.values() for c in members]
    held = problem.unaligned(VIEWS[0])
    families = problem.replace(labels={v: family_of(np.asarray(problem.labels[v])) for v in VIEWS})
    # the chapter's settings: feature level, mu = nu = 1, one heat-kernel width per view
    model = MultiscaleAlignment(epsilon=args.epsilon, level="feature", mu=1.0, nu=1.0, affinity="heat").fit(problem)
    level_rows, topics, profiles_by_level = [], [], {}
    for k, emb in enumerate(model.embeddings_, start=1):
        row = {"level": k, "dimension": emb.n_components, "power": emb.info["power"],
               **level_metrics(emb, problem, families)}
        rows, profiles = topic_rows(k, emb, labels, classes)
        agree = [r["agreement_across_views"] for r in rows if r["view"] == VIEWS[0]]
        row["topic_agreement"] = float(np.mean(agree))
        row.update(flat_alignment(problem, families, emb.n_components))
        level_rows.append(row)
        topics += rows
        profiles_by_level[k] = profiles
    levels = pd.DataFrame(level_rows)
    topic_frame = pd.DataFrame(topics)
    with atomic_write(out / "multiscale_levels.csv") as handle:
        levels.to_csv(handle, index=False)
    with atomic_write(out / "multiscale_topics.csv") as handle:
        topic_frame.to_csv(handle, index=False)
    coarse = topic_frame[topic_frame["dimension"] <= 12]
    with atomic_write(out / "multiscale.md") as handle:
        handle.write(f"# {PAPER}\n\nmfeat {VIEWS[0]} ({problem.views.n_features[VIEWS[0]]} features) vs "
                     f"{VIEWS[1]} ({problem.views.n_features[VIEWS[1]]}), classes {classes} in families "
                     f"{FAMILIES}, {len(problem.anchors_between(*VIEWS))} anchors, "
                     f"epsilon = {args.epsilon}.\n\n"
                     f"Level dimensions: ours {model.dimensions_}, chapter {list(CHAPTER_DIMENSIONS)}.\n\n")
        handle.write(markdown_table(levels))
        handle.write("\nAligned topics of the coarse levels "
                     "(class profile of each basis function per view).\n\n")
        handle.write(markdown_table(coarse[["level", "dimension", "basis", "view", "concentrates_on",
                                            "family_separation", "agreement_across_views"]]))
    plot(levels, profiles_by_level, classes, out / "multiscale_topics.png")

    print(f"data: mfeat {VIEWS[0]} vs {VIEWS[1]}, {problem.views.n_samples[VIEWS[0]]} digits "
          f"({len(held)} held out), families {FAMILIES}")
    print(f"level dimensions: ours {model.dimensions_} (finest = {problem.views.n_features[VIEWS[0]]} + "
          f"{problem.views.n_features[VIEWS[1]]} features) vs chapter {list(CHAPTER_DIMENSIONS)} "
          "(finest = 400 LSI + 400 LDA topics)")
    pd.set_option("display.width", 200)
    print(levels.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    two = topic_frame[topic_frame["dimension"] == min(d for d in model.dimensions_ if d >= 2)]
    print("\ncoarsest level with 2+ basis functions (chapter: 2 topics, machine learning vs neuroscience):")
    print(two[["basis", "view", "concentrates_on", "family_separation", "agreement_across_views"]]
          .to_string(index=False, float_format=lambda x: f"{x:.2f}"))
    print(f"\nwrote {out}/multiscale_levels.csv, multiscale_topics.csv, multiscale.md, multiscale_topics.png "
          f"({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
