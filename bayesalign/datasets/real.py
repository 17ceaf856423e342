"""Real data sets used by the seed papers, shipped inside the package (``_data/``).

- PDB 1G7O C-alpha traces (Wang, Krafft & Mahadevan 2011, section 5.4.1; Wang & Mahadevan 2008);
- CMU motion capture, subject 35 motion 01 (Damianou, Lawrence & Ek 2016, section 4);
- UCI "Multiple Features" handwritten digits (six views of 2000 digits);
- scikit-learn's 8x8 digits cut into top and bottom halves (stand-in for the MAD paper's USPS halves).

Sources of the shipped files (gzip'd, otherwise verbatim): RCSB Protein Data Bank entry 1G7O
(C-alpha coordinates of models 1, 10, 21); CMU Graphics Lab Motion Capture Database
(mocap.cs.cmu.edu), files 35.asf and 35_01.amc; UCI Machine Learning Repository, "Multiple
Features" (Duin), as CSV with a header row and the class label as last column.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from functools import cache

import numpy as np

from .._utils import as_rng
from ..data import AlignmentProblem
from ._resources import read_gzip_text
from .acclaim import Skeleton, joint_positions, read_amc, read_asf


def _check_choices(loader: str, what: str, given, available) -> tuple:
    """``given`` as a tuple of 2 or more different members of ``available``; else a ValueError naming the loader."""
    given = tuple(given)
    unknown = [g for g in given if g not in available]
    if unknown:
        raise ValueError(f"{loader}: unknown {what} {unknown} (not shipped); choose from {available}")
    if len(set(given)) != len(given) or len(given) < 2:
        raise ValueError(f"{loader}: need 2 or more different {what}, got {given}")
    return given


# ------------------------------------------------------------------------------------------------
# Protein
# ------------------------------------------------------------------------------------------------
#: Scale factors of the manifold-alignment papers: X^(1) = 4 X^(1) (model 1), X^(3) = 2 X^(3) (model 10).
PROTEIN_SCALES = {1: 4.0, 10: 2.0, 21: 1.0}
PROTEIN_RESIDUES = 215


@cache

def _protein_model(model: int) -> np.ndarray:
    lines = read_gzip_text(f"1G7O-{model}.pdb.3d.real.gz").split("\n")
    count = int(lines[0])
    coords = np.loadtxt(io.StringIO("\n".join(lines[1:])), ndmin=2)  # [215, 3]
    if coords.shape != (count, 3):
        raise ValueError(f"protein model {model}: header says {count} residues, file has {coords.shape}")
    coords.setflags(write=False)
    return coords


def protein(models: Sequence[int] = (1, 10, 21), scale: bool = True) -> AlignmentProblem:
    """C-alpha traces of glutaredoxin PDB 1G7O (NMR ensemble), 215 residues in 3-D.

    The protein experiment of Wang, Krafft & Mahadevan (2011), "Manifold Alignment",
    section 5.4.1: models 1, 21 and 10 of the ensemble, with model 1 multiplied by 4
    and model 10 by 2 so that alignment must also recover the scale (Wang & Mahadevan
    2008/2013 use models 1 and 21 with model 1 x 4). The papers then take "a fourth of
    the amino acids" as correspondences: ``protein().split_anchors(0.25, seed)``.

    Parameters
    ----------
    models : sequence of 2 or 3 of {1, 10, 21}
    scale : bool
        Apply the papers' scale factors ``PROTEIN_SCALES`` (default) or keep the raw coordinates.

    Returns
    -------
    AlignmentProblem with views "model1", "model10", "model21" (those asked for), paired by
    residue (truth = identity); labels = residue index 0..214.

    Examples
    --------
    >>> p = protein()
    >>> p.views.names, p.views.n_samples["model1"]
    (('model1', 'model10', 'model21'), 215)
    """
    models = _check_choices("protein", "models", models, sorted(PROTEIN_SCALES))
    views = {f"model{m}": _protein_model(m) * (PROTEIN_SCALES[m] if scale else 1.0) for m in models}
    return AlignmentProblem.paired(views, labels=np.arange(PROTEIN_RESIDUES), name="protein_1g7o")


# ------------------------------------------------------------------------------------------------
# Motion capture
# ------------------------------------------------------------------------------------------------
@cache
def _cmu35() -> tuple[Skeleton, np.ndarray, np.ndarray]:
    skeleton = read_asf(io.StringIO(read_gzip_text("35.asf.gz")))
    channels, frames = read_amc(io.StringIO(read_gzip_text("35_01.amc.gz")), skeleton)
    channels.setflags(write=False)
    frames.setflags(write=False)
    return skeleton, channels, frames


def mocap(representation: str = "channels", step: int = 1, n_frames: int | None = None) -> AlignmentProblem:
    """CMU motion capture, subject 35 (walking), motion 01: 358 frames.

    The MAD paper (Damianou, Lawrence & Ek 2016, section 4, Table 1: N = 350,
    N_init = 175, Kendall-tau 0.21) represents each frame by "59 coordinates for
    the skeleton joints" and makes two views "by splitting in half the dimensions".
    59 is the number of AMC channels without the root translation (62 - 3), which
    is the reading used by default.

    Parameters
    ----------
    representation : {"channels", "positions"}
        ``"channels"``: the 59 joint angles (degrees): root rx, ry, rz, then every
        bone's degrees of freedom in ASF order (``acclaim.Skeleton.channel_names``
        without the first three). ``"positions"``: the 3-D end points of the 30 bones
        relative to the root (forward kinematics on the ASF skeleton,
        ``acclaim.joint_positions``), 90 columns (x, y, z per bone, ASF order), in ASF
        length units.
    step : int
        Keep every ``step``-th frame.
    n_frames : int, optional
        Then keep the first ``n_frames`` of those (``n_frames=350`` gives the paper's N;
        the paper used motions 1-4, of which only motion 01 is shipped).

    Returns
    -------
    AlignmentProblem with views "Y1" (first half of the columns) and "Y2" (second half),
    30 and 29 columns for channels, paired by frame; labels = frame number (for colouring).

    Examples
    --------
    >>> p = mocap(step=2)
    >>> p.views.n_samples["Y1"], p.views.n_features
    (179, {'Y1': 30, 'Y2': 29})
    """
    if representation not in ("channels", "positions"):
        raise ValueError(f"mocap: representation must be 'channels' or 'positions', got {representation!r}")
    if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or step < 1:
        raise ValueError(f"mocap: step must be a positive integer, got {step!r}")
    skeleton, channels, frames = _cmu35()
    keep = np.arange(0, channels.shape[0], step)
    if n_frames is not None:
        if not isinstance(n_frames, (int, np.integer)) or not 2 <= n_frames <= keep.size:
            raise ValueError(f"mocap: n_frames must be an integer in [2, {keep.size}] for step={step}, "
                             f"got {n_frames!r}")
        keep = keep[:n_frames]
    if representation == "channels":
        translation = [k for k, c in enumerate(skeleton.channel_names) if c in ("root.tx", "root.ty", "root.tz")]
        data = np.delete(channels[keep], translation, axis=1)  # [T, 59]
    else:
        positions, _ = joint_positions(channels[keep], skeleton)  # [T, 31, 3], root first
        data = (positions[:, 1:] - positions[:, :1]).reshape(keep.size, -1)  # [T, 90]
    first, second = np.array_split(np.arange(data.shape[1]), 2)
    return AlignmentProblem.paired({"Y1": data[:, first], "Y2": data[:, second]}, labels=frames[keep],
                                   name=f"mocap_cmu35_01_{representation}")


# ------------------------------------------------------------------------------------------------
# UCI multiple features
# ------------------------------------------------------------------------------------------------
#: The six views of UCI "Multiple Features" and their numbers of features.
MFEAT_VIEWS = {"fou": 76, "fac": 216, "kar": 64, "pix": 240, "zer": 47, "mor": 6}


@cache
def _mfeat_table(code: str) -> tuple[np.ndarray, np.ndarray]:
    table = np.loadtxt(io.StringIO(read_gzip_text(f"mfeat-{code}.csv.gz")), delimiter=",", skiprows=1)
    features, labels = table[:, :-1], table[:, -1].astype(np.int64)  # [2000, p], [2000]
    if features.shape != (2000, MFEAT_VIEWS[code]):
        raise ValueError(f"mfeat-{code}: expected 2000 x {MFEAT_VIEWS[code]} features, got {features.shape}")
    features.setflags(write=False)
    labels.setflags(write=False)
    return features, labels


def mfeat(views: Sequence[str] = ("fou", "kar"), n_per_class: int | None = None, seed=0) -> AlignmentProblem:
    """UCI "Multiple Features": 2000 handwritten digits (200 per class), six feature views.

    Views: fou (76 Fourier coefficients of the contour), fac (216 profile
    correlations), kar (64 Karhunen-Loeve coefficients), pix (240 pixel averages in
    2x3 windows), zer (47 Zernike moments), mor (6 morphological features). Row i
    of every view is the same digit.

    Parameters
    ----------
    views : sequence of 2 or more of ``MFEAT_VIEWS``
    n_per_class : int, optional
        Keep that many digits of each class, drawn at random (rows stay in file order).
    seed : int, Generator or None
        For ``n_per_class``.

    Returns
    -------
    AlignmentProblem paired by digit (truth = identity), labels = digit class 0-9.

    Examples
    --------
    >>> p = mfeat(("mor", "zer"), n_per_class=5, seed=0)
    >>> p.views.n_features, p.views.n_samples["mor"]
    ({'mor': 6, 'zer': 47}, 50)
    """
    views = _check_choices("mfeat", "views", views, list(MFEAT_VIEWS))
    tables = {v: _mfeat_table(v) for v in views}
    labels = tables[views[0]][1]
    for v in views[1:]:
        if not np.array_equal(tables[v][1], labels):
            raise ValueError(f"mfeat: class labels of view {v!r} differ from those of {views[0]!r}")
    rows = _per_class_rows(labels, n_per_class, seed, "mfeat")
    return AlignmentProblem.paired({v: tables[v][0][rows] for v in views}, labels=labels[rows],
                                   name="mfeat_" + "_".join(views))


def _per_class_rows(labels: np.ndarray, n_per_class, seed, who: str) -> np.ndarray:
    """Sorted row indices: all rows, or ``n_per_class`` random rows of every class."""
    if n_per_class is None:
        return np.arange(labels.size)
    classes, counts = np.unique(labels, return_counts=True)
    if isinstance(n_per_class, bool) or not isinstance(n_per_class, (int, np.integer)) \
            or not 1 <= n_per_class <= counts.min():
        raise ValueError(f"{who}: n_per_class must be an integer in [1, {counts.min()}], got {n_per_class!r}")
    rng = as_rng(seed)
    rows = [rng.choice(np.flatnonzero(labels == c), n_per_class, replace=False) for c in classes]
    return np.sort(np.concatenate(rows))


# ------------------------------------------------------------------------------------------------
# Digit halves
# ------------------------------------------------------------------------------------------------
def digits_halves(digit: int | None = 0, n: int | None = None, seed=0) -> AlignmentProblem:
    """scikit-learn's 8x8 digits, each image cut into its top and bottom half (4 x 8 pixels each).

    The stand-in for the digits experiment of the MAD paper (Damianou, Lawrence & Ek
    2016, section 4, Table 1: 100 USPS zeros, 16 x 16 images cut horizontally,
    N_init = 50, Kendall-tau 0.28); USPS is not shipped, scikit-learn's digits are
    (1797 images, 178 zeros). Pixel values are 0-16.

    Parameters
    ----------
    digit : int in 0-9, or None for all classes
    n : int, optional
        Keep ``n`` images drawn at random (rows stay in the original order); the paper used 100.
    seed : int, Generator or None
        For ``n``.

    Returns
    -------
    AlignmentProblem with views "top" (image rows 0-3) and "bottom" (rows 4-7), 32 pixels
    each, paired by image (truth = identity); labels = digit class.

    Examples
    --------
    >>> p = digits_halves(0, n=100)
    >>> p.views.n_samples, p.views.n_features
    ({'top': 100, 'bottom': 100}, {'top': 32, 'bottom': 32})
    """
    from sklearn.datasets import load_digits  # shipped with scikit-learn, no download

    digits = load_digits()
    images, target = digits.images, digits.target  # [1797, 8, 8], [1797]
    if digit is None:
        rows = np.arange(target.size)
    else:
        if isinstance(digit, bool) or not isinstance(digit, (int, np.integer)) or not 0 <= digit <= 9:
            raise ValueError(f"digits_halves: digit must be an integer 0-9 or None, got {digit!r}")
        rows = np.flatnonzero(target == digit)
    if n is not None:
        if not isinstance(n, (int, np.integer)) or not 2 <= n <= rows.size:
            raise ValueError(f"digits_halves: n must be an integer in [2, {rows.size}], got {n!r}")
        rows = np.sort(as_rng(seed).choice(rows, n, replace=False))
    top = images[rows, :4, :].reshape(rows.size, 32)
    bottom = images[rows, 4:, :].reshape(rows.size, 32)
    name = "digits_halves" + ("" if digit is None else f"_{digit}")
    return AlignmentProblem.paired({"top": top, "bottom": bottom}, labels=target[rows], name=name)
