"""The scores of a comparison's runs and the tables and figures made of them.

:func:`evaluate_method_result` scores one run (the suite's :data:`METRICS`); :func:`summarize`,
:func:`markdown_summary` and :func:`write_results` turn the runs of :func:`bayesalign.compare.run_comparison`
into tables and one accuracy figure per dataset; :func:`plot_matched_halves` is the MAD paper's Figure 3.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from .data import AlignmentProblem
from .registry import METHODS

METRICS = ("accuracy", "kendall_tau", "top1", "top10", "foscttm", "ece", "precision_at_50")


# Metrics ---------------------------------------------------------------------------------------
def evaluate_method_result(result, problem: AlignmentProblem) -> dict[str, float]:
    """The suite's metrics for one :class:`~bayesalign.registry.MethodResult`, averaged over pairs of views.

    Unlike :func:`bayesalign.metrics.evaluate` (one Alignment's matching and calibration metrics), this
    scores a whole method run: every pair of views, and the retrieval metrics of its latent space.
    Everything is measured on the held-out rows (the candidates of each Alignment); top-k and FOSCTTM
    in the method's latent space (NaN when it has none), calibration only where there are probabilities.
    """
    from . import metrics

    per_pair: dict[str, list[float]] = {m: [] for m in METRICS}
    for (a, b), al in result.alignments.items():
        # given the problem, every metric scores the true pairs of unaligned rows only, and
        # retrieval searches among the unaligned rows (anchors are given, not found)
        pair = (a, b)
        per_pair["accuracy"].append(metrics.matching_accuracy(al, problem, views=pair))
        per_pair["kendall_tau"].append(metrics.kendall_tau_distance(al, problem, views=pair))
        emb = result.embedding
        if emb is not None and a in emb.means and b in emb.means:
            per_pair["top1"].append(metrics.top_k_accuracy(emb, problem, k=1, views=pair))
            per_pair["top10"].append(metrics.top_k_accuracy(emb, problem, k=10, views=pair))
            per_pair["foscttm"].append(metrics.foscttm(emb, problem, views=pair))
        if al.probabilities is not None and len(al):
            per_pair["ece"].append(metrics.expected_calibration_error(al, problem, views=pair))
            per_pair["precision_at_50"].append(metrics.precision_at_coverage(al, problem, 0.5, views=pair))
    return {m: float(np.mean(v)) if v else float("nan") for m, v in per_pair.items()}


def summarize(frame):
    """Mean over seeds per dataset, method and anchor fraction (``*_sd``: spread of accuracy and
    Kendall-tau); runs that failed are counted in ``failed`` with their first error."""
    import pandas as pd

    keys = ["dataset", "method", "anchor_fraction"]
    out = []
    for key, group in frame.groupby(keys, sort=False):
        ok = group[group["error"] == ""]
        row = dict(zip(keys, key))
        row["runs"] = len(group)
        row["failed"] = int(len(group) - len(ok))
        for m in METRICS + ("seconds",):
            row[m] = float(ok[m].mean()) if len(ok) else float("nan")
        for m in ("accuracy", "kendall_tau"):
            row[f"{m}_sd"] = float(ok[m].std(ddof=1)) if len(ok) > 1 else float("nan")
        row["error"] = group.loc[group["error"] != "", "error"].iloc[0] if row["failed"] else ""
        out.append(row)
    return pd.DataFrame(out)


def markdown_summary(frame) -> str:
    """The summary as a Markdown table (mean +- sd over seeds)."""
    from .io import markdown_table

    if len(frame) == 0:
        return "(no runs)\n"
    summary = summarize(frame)

    def pm(mean, sd):
        if np.isnan(mean):
            return ""
        return f"{mean:.3f}" + (f" ± {sd:.3f}" if not np.isnan(sd) else "")

    table = summary[["dataset", "method", "anchor_fraction"]].copy()
    table["accuracy"] = [pm(m, s) for m, s in zip(summary["accuracy"], summary["accuracy_sd"])]
    table["kendall_tau"] = [pm(m, s) for m, s in zip(summary["kendall_tau"], summary["kendall_tau_sd"])]
    for m in ("top1", "top10", "foscttm", "ece", "precision_at_50", "seconds"):
        table[m] = summary[m]
    table["failed"] = [f"{f}/{r}: {e}" if f else "" for f, r, e in zip(summary["failed"], summary["runs"],
                                                                       summary["error"])]
    return markdown_table(table)


def plot_accuracy(frame, dataset: str, path) -> Path:
    """Accuracy against anchor fraction, one line per method (mean and spread over seeds)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    summary = summarize(frame[frame["dataset"] == dataset])
    fig, ax = plt.subplots(figsize=(8.0, 4.4))
    colors = plt.get_cmap("tab20").colors  # 20 distinct colours: one per method of the suite
    for index, (method, group) in enumerate(summary.groupby("method", sort=False)):
        group = group.sort_values("anchor_fraction")
        if group["accuracy"].notna().any():
            bayesian = method in METHODS and METHODS[method].bayesian  # dashed: the Bayesian methods
            ax.errorbar(group["anchor_fraction"], group["accuracy"], yerr=group["accuracy_sd"].fillna(0.0),
                        marker="o", capsize=3, label=method, linestyle="--" if bayesian else "-",
                        color=colors[index % len(colors)])
    ax.set_xlabel("anchor fraction")
    ax.set_ylabel("matching accuracy (held-out rows)")
    ax.set_title(dataset)
    ax.set_ylim(-0.02, 1.02)
    if ax.lines:
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    fig.tight_layout()
    return _save(fig, path)


def write_results(frame, out_dir, stem: str = "comparison") -> list[Path]:
    """Write the runs (CSV), the summary (CSV and Markdown) and one accuracy figure per dataset."""
    from .io import write_table

    out_dir = Path(out_dir)
    from ._utils import atomic_write

    runs, summary, markdown = out_dir / f"{stem}_runs.csv", out_dir / f"{stem}.csv", out_dir / f"{stem}.md"
    write_table(runs, frame)
    written = [runs]
    if len(frame):
        write_table(summary, summarize(frame))
        written.append(summary)
    with atomic_write(markdown, "w") as handle:
        handle.write(markdown_summary(frame))
    written.append(markdown)
    for dataset in (frame["dataset"].unique() if len(frame) else []):
        written.append(plot_accuracy(frame, dataset, out_dir / f"{stem}_{dataset}_accuracy.png"))
    return written  # only what this call wrote (a summary left by an earlier run in out_dir is not among them)


def _save(fig, path) -> Path:
    from .plot import save_figure

    return save_figure(fig, Path(path), dpi=110)


def plot_matched_halves(runs: Mapping, path, n_show: int = 12, seed: int = 0) -> Path:
    """The MAD paper's Figure 3 for each method: held-out top halves with the bottom half each was
    matched to (8x8 digits; green frame: the true bottom, red: another image's)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(runs), n_show, figsize=(n_show * 0.8, len(runs) * 1.05 + 0.3), squeeze=False)
    for r, (method, (result, problem)) in enumerate(runs.items()):
        al = result.alignments[("top", "bottom")]
        truth = problem.truth_between("top", "bottom").mapping()
        pick = np.sort(np.random.default_rng(seed).permutation(len(al))[:n_show])
        for c, t in enumerate(pick):
            i, j = int(al.index_a[t]), int(al.index_b[t])
            top, bottom = problem.views["top"][i], problem.views["bottom"][j]  # 32 pixels each
            image = np.vstack([top.reshape(4, 8), bottom.reshape(4, 8)])
            ax = axes[r, c]
            ax.imshow(image, cmap="gray_r", vmin=0, vmax=16)
            ax.set_xticks([])
            ax.set_yticks([])
            for spine in ax.spines.values():
                spine.set_color("tab:green" if truth.get(i) == j else "tab:red")
                spine.set_linewidth(2)
        axes[r, 0].set_ylabel(method, rotation=0, ha="right", va="center", fontsize=8)
    fig.suptitle("top halves (held out) with the bottom half each method matched to them", fontsize=9)
    fig.tight_layout()
    return _save(fig, path)
