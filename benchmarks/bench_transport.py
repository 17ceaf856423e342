"""FOSCTTM of the optimal-transport aligners beside the best spectral baseline, on the synthetic benchmarks
and two shipped real pairs, with the settings each aligner chose (without the truth).

Columns, per problem (FOSCTTM, :func:`bayesalign.metrics.foscttm`, on the rows that are not anchors; 0 is
perfect, 0.5 random; mean and standard deviation over the anchor draws ``split_anchors(0.1, seed=s)``,
s = 0, 1, 2):

- ``GW``: :class:`bayesalign.transport.GromovWassersteinAlignment` at its defaults, fitted without any
  anchor (settings by stability), scored on each draw's held-out rows; ``chose``: its setting, ``!`` when
  it flagged the choice as ambiguous;
- ``fused GW``: :class:`bayesalign.transport.FusedGromovWassersteinAlignment` at its defaults with each
  draw's 10% anchors (settings by cross-fitting on them); ``chose``: the alpha of each draw;
- ``spectral``: the best of the spectral baselines (joint Laplacian, Procrustes, CCA, least squares,
  anchor similarity; ``n_components = min(5, features)``), the best picked with the truth (a reference, not
  what a user gets), and its name;
- ``ratio``: the better of GW and fused GW over the spectral figure (below 1: transport ahead).

Problems: the three MMD-MA simulations (``ba.datasets.mmdma_simulation``, 300 rows, 1000 and 2000
features), the single-cell simulator (``ba.datasets.single_cell_simulation``, 300 cells, 500 genes, 1000
peaks), mocap (358 frames) and digit halves (178 zeros).

    OMP_NUM_THREADS=1 python benchmarks/bench_transport.py [--seeds 3] [--quick] [--noise 0.1]
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import bayesalign as ba
from bayesalign.metrics import foscttm
from bayesalign.spectral import (
    AnchorSimilarityBaseline,
    CCAAlignment,
    JointLaplacianAlignment,
    LeastSquaresAlignment,
    ProcrustesAlignment,
)
from bayesalign.transport import FusedGromovWassersteinAlignment, GromovWassersteinAlignment


def _problems(quick: bool, noise: float) -> dict:
    n = 150 if quick else 300
    out = {f"mmdma {kind}": ba.datasets.mmdma_simulation(kind, n_samples=n, noise=noise, seed=0)
           for kind in ba.datasets.MMDMA_KINDS}
    out["single-cell sim"] = ba.datasets.single_cell_simulation(n, n_genes=500, n_peaks=1000, seed=0)
    out["mocap"] = ba.datasets.mocap()
    out["digit halves"] = ba.datasets.digits_halves()
    return out


def _spectral(n_components: int) -> dict:
    return {"joint-laplacian": JointLaplacianAlignment(n_components=n_components),
            "procrustes": ProcrustesAlignment(n_components=n_components),
            "cca": CCAAlignment(n_components=n_components),
            "least-squares": LeastSquaresAlignment(),
            "anchor-similarity": AnchorSimilarityBaseline()}


def _score(embedding, problem) -> float:
    return foscttm(embedding, problem, views=problem.views.names)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="150 rows for the simulations")
    parser.add_argument("--noise", type=float, default=0.1, help="noise of the MMD-MA simulations (their default)")
    args = parser.parse_args()
    header = (f"{'problem':<16} {'rows':>5} | {'GW':>13} {'chose':<18} | {'fused GW':>13} {'chose (alpha)':<16} | "
              f"{'spectral':>13} {'best':<17} | {'ratio':>5} {'s':>5}")
    print(header)
    print("-" * len(header))
    for name, problem in _problems(args.quick, args.noise).items():
        start = time.perf_counter()
        draws = [problem.split_anchors(0.1, seed=s) for s in range(args.seeds)]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            gw = GromovWassersteinAlignment().fit(problem)  # no anchors
        ambiguous = "!" if gw.ambiguous_ else ""
        gw_scores = [_score(gw.embedding_, d) for d in draws]
        fused_scores, alphas = [], []
        for d in draws:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                fgw = FusedGromovWassersteinAlignment().fit(d)
            fused_scores.append(_score(fgw.embedding_, d))
            alphas.append(fgw.setting_["alpha"])
        d_comp = min(5, *problem.views.n_features.values())
        spectral = {}
        for method, model in _spectral(d_comp).items():
            scores = []
            for d in draws:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    try:
                        scores.append(_score(model.fit(d).embedding_, d))
                    except (ValueError, np.linalg.LinAlgError):
                        break
            if len(scores) == len(draws):
                spectral[method] = scores
        best = min(spectral, key=lambda m: np.mean(spectral[m]))
        ratio = min(np.mean(gw_scores), np.mean(fused_scores)) / max(np.mean(spectral[best]), 1e-12)
        chose = f"k={gw.setting_['n_neighbors']} e={gw.setting_['epsilon']:g}{ambiguous}"
        n_rows = problem.views.n_samples[problem.views.names[0]]
        print(f"{name:<16} {n_rows:>5} | {np.mean(gw_scores):.3f} ± {np.std(gw_scores):.3f} {chose:<18} | "
              f"{np.mean(fused_scores):.3f} ± {np.std(fused_scores):.3f} {','.join(f'{a:g}' for a in alphas):<16} | "
              f"{np.mean(spectral[best]):.3f} ± {np.std(spectral[best]):.3f} {best:<17} | {ratio:5.2f} "
              f"{time.perf_counter() - start:5.0f}", flush=True)
        if caught:
            print(f"{'':<16}   GW warned: {'; '.join(sorted({str(w.message)[:90] for w in caught}))}")
        print(f"{'':<16}   GW criterion ({gw.criterion_name_}): "
              + ", ".join(f"k={c['n_neighbors']} e={c['epsilon']:g}: {c['criterion']:.3f}" for c in gw.criterion_))


if __name__ == "__main__":
    main()
