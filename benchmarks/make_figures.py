"""The example figures of the documentation, written to docs/_static/ (PNG).

* ``joint_digits.png``: :func:`bayesalign.plot.plot_joint` of the joint-Laplacian alignment of the
  top and bottom halves of 600 handwritten digits (scikit-learn's digits, 10% anchors), t-SNE of
  its shared dimensions, coloured by view and by digit class (a legend);
* ``joint_continuous.png``: the same map of the MAD toy coloured by a continuous value (a colour bar);
* ``bound_trace.png``: :func:`bayesalign.plot.plot_bound_trace` of a short MAD fit of the toy, one
  labelled line per optimiser run.

    PYTHONPATH=$PWD OMP_NUM_THREADS=1 python benchmarks/make_figures.py [--out docs/_static]
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import numpy as np

import bayesalign as ba

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "_static"), help="folder of the PNG files")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    digits = ba.datasets.digits_halves(None, n=600, seed=0).split_anchors(0.1, seed=0).shuffle_unaligned(seed=0)
    labels = {view: digits.labels[view] for view in digits.views.names}
    embedding = ba.spectral.JointLaplacianAlignment(n_components=8).fit(digits).embedding_
    ba.plot.plot_joint(embedding, labels=labels, method="tsne", seed=0, label_name="digit",
                       path=out / "joint_digits.png")

    toy = ba.datasets.mad_toy("nonlinear_shared_private", seed=0)
    with warnings.catch_warnings():  # a short fit on purpose: the figure, not the fit, is the point
        warnings.simplefilter("ignore")
        mad = ba.MAD(latent_dim=4, num_inducing=15, seed=0, engine_options={"max_iter": 150}).fit(toy)
    position = {view: np.asarray(mad.embedding_.means[view][:, mad.embedding_.shared_dims[0]])
                for view in toy.views.names}  # a continuous value: the first shared coordinate
    ba.plot.plot_joint(mad, labels=position, label_name="first shared coordinate", path=out / "joint_continuous.png")
    ba.plot.plot_bound_trace(mad, path=out / "bound_trace.png")
    for name in ("joint_digits.png", "joint_continuous.png", "bound_trace.png"):
        print(out / name)


if __name__ == "__main__":
    main()
