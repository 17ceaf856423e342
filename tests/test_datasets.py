"""Tests of bayesalign.datasets: sizes stated by the papers, generator structure, shipped files."""

import gzip
import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.spatial.distance import cdist, pdist

import bayesalign.datasets as ds
from bayesalign.datasets.acclaim import joint_positions, read_amc, read_asf

DATA_DIR = Path(ds.__file__).parent / "_data"


def canonical_correlations(a, b, k):
    """Canonical correlations between the top-k principal subspaces of a and b (cosines of principal angles)."""
    ua = np.linalg.svd(a - a.mean(0), full_matrices=False)[0][:, :k]
    ub = np.linalg.svd(b - b.mean(0), full_matrices=False)[0][:, :k]
    return np.linalg.svd(ua.T @ ub, compute_uv=False)


def kernel_ridge_residual(inputs, outputs, noise_var=0.01):
    """Mean squared in-sample residual of RBF (lengthscale 1) kernel ridge regression."""
    kernel = np.exp(-0.5 * cdist(inputs, inputs, "sqeuclidean"))
    fitted = kernel @ np.linalg.solve(kernel + noise_var * np.eye(len(inputs)), outputs)
    return float(((outputs - fitted) ** 2).mean())


def assert_identity_truth(problem):
    names = problem.views.names
    n = problem.views.check_paired()
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            truth = problem.truth_between(a, b)
            np.testing.assert_array_equal(truth.index_a, np.arange(n))
            np.testing.assert_array_equal(truth.index_b, np.arange(n))


# MAD toy ---------------------------------------------------------------------------------
@pytest.mark.parametrize("setting,n", [("linear_shared", 100), ("linear_shared_private", 100),
                                       ("nonlinear_shared_private", 160)])
def test_mad_toy_sizes_follow_table_1(setting, n):
    problem = ds.mad_toy(setting, seed=0)
    assert problem.views.names == ("Y1", "Y2")
    assert problem.views.n_samples == {"Y1": n, "Y2": n}
    assert problem.views.n_features == {"Y1": 20, "Y2": 20}
    assert_identity_truth(problem)
    assert ds.MAD_TOY_SETTINGS[setting]["n"] == n


def test_mad_toy_settings_hold_the_paper_values():
    assert {s: (v["n_init"], v["paper_kendall_tau"]) for s, v in ds.MAD_TOY_SETTINGS.items()} == {
        "linear_shared": (8, 0.001), "linear_shared_private": (12, 0.003),
        "nonlinear_shared_private": (48, 2e-6)}


def test_mad_toy_latent_columns_are_nearly_orthogonal_sinusoids():
    _, latent = ds.mad_toy("linear_shared_private", seed=3, return_latent=True)
    assert latent.shape == (100, 4)
    corr = np.corrcoef(latent.T)
    assert np.abs(corr - np.eye(4)).max() < 0.1  # exactly 0 before the sd-0.1 noise
    t = 2 * np.pi * np.arange(100) / 100
    clean = np.column_stack([np.sin(3 * t), np.cos(4 * t), np.cos(t), np.sin(2 * t)])
    assert 0.08 < (latent - clean).std() < 0.12  # the added latent noise has sd 0.1


def test_mad_toy_linear_shared_has_two_shared_directions_only():
    y1, y2 = ds.mad_toy("linear_shared", seed=0).views.values()
    sv = np.linalg.svd(y1 - y1.mean(0), compute_uv=False)
    assert sv[1] / sv[0] > 0.3 and sv[2] / sv[0] < 0.1  # rank 2 + noise
    cc = canonical_correlations(y1, y2, 3)
    assert cc[1] > 0.99 and cc[2] < 0.5


def test_mad_toy_linear_shared_private_shares_exactly_two_canonical_correlations():
    y1, y2 = ds.mad_toy("linear_shared_private", seed=0).views.values()
    sv = np.linalg.svd(y1 - y1.mean(0), compute_uv=False)
    assert sv[2] / sv[0] > 0.3 and sv[3] / sv[0] < 0.1  # rank 3: X12 (2) + X1 (1)
    cc = canonical_correlations(y1, y2, 3)
    assert cc[1] > 0.99 and cc[2] < 0.3  # X1 and X2 are private: no third correlation


def test_mad_toy_nonlinear_depends_on_shared_and_own_private_part():
    problem, latent = ds.mad_toy("nonlinear_shared_private", seed=0, return_latent=True)
    y1, y2 = problem.views.values()
    x1, x2, x12 = latent[:, :1], latent[:, 1:2], latent[:, 2:]
    # a GP draw on [X12 X1] is fitted to the output noise level (0.1^2) by the same kernel...
    right = kernel_ridge_residual(np.hstack([x12, x1]), y1)
    wrong = kernel_ridge_residual(np.hstack([x12, x2]), y1)
    assert right < 0.0125 and wrong > 3 * right
    assert kernel_ridge_residual(np.hstack([x12, x2]), y2) < 0.0125
    # ...and is far from linear in it
    design = np.hstack([x12, x1, np.ones((160, 1))])
    resid = y1 - design @ np.linalg.lstsq(design, y1, rcond=None)[0]
    assert 1 - (resid**2).sum() / ((y1 - y1.mean(0)) ** 2).sum() < 0.8


def test_mad_toy_seeds_and_anchors():
    a = ds.mad_toy("linear_shared", seed=1)
    b = ds.mad_toy("linear_shared", seed=1)
    c = ds.mad_toy("linear_shared", seed=2)
    np.testing.assert_array_equal(a.views["Y1"], b.views["Y1"])
    assert not np.allclose(a.views["Y1"], c.views["Y1"])
    split = ds.mad_toy("linear_shared", seed=1, n_anchors=8)
    np.testing.assert_array_equal(split.views["Y2"], a.views["Y2"])  # same data, anchors added
    assert len(split.anchors_between("Y1", "Y2")) == 8 and split.unaligned("Y1").size == 92
    assert ds.mad_toy("linear_shared", n=40).views.n_samples["Y1"] == 40
    with pytest.raises(ValueError, match="unknown setting"):
        ds.mad_toy("quadratic")
    with pytest.raises(ValueError, match="n must be"):
        ds.mad_toy("linear_shared", n=5)


# Manifold pairs ----------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["swiss_roll", "s_curve", "helix"])
def test_manifold_pair_views_are_congruent_up_to_scale_without_noise(kind):
    problem = ds.manifold_pair(kind, n=120, noise=0.0, seed=4, dim=6, scale=2.5)
    x, y = problem.views["X"], problem.views["Y"]
    assert x.shape == y.shape == (120, 6)
    np.testing.assert_allclose(pdist(y), 2.5 * pdist(x), rtol=1e-10, atol=1e-12)
    assert np.mean(np.sum((x - x.mean(0)) ** 2, axis=1)) == pytest.approx(1.0)  # unit-RMS manifold
    assert not np.allclose(y, 2.5 * x)  # but in a different orientation
    assert_identity_truth(problem)
    assert problem.labels["X"].shape == (120,)


def test_manifold_pair_labels_are_the_intrinsic_coordinate():
    # helix: X is exactly a similarity image of (cos t, sin t, t / pi) plus a shift
    helix = ds.manifold_pair("helix", n=80, noise=0.0, seed=2)
    t = helix.labels["X"]
    design = np.column_stack([np.cos(t), np.sin(t), t / np.pi, np.ones_like(t)])
    coef, *_ = np.linalg.lstsq(design, helix.views["X"], rcond=None)
    np.testing.assert_allclose(design @ coef, helix.views["X"], atol=1e-10)
    gram = coef[:3] @ coef[:3].T
    np.testing.assert_allclose(gram, gram[0, 0] * np.eye(3), atol=1e-10)
    # swiss roll: X minus its fit on (t cos t, t sin t, 1) is rank one (the unseen height)
    roll = ds.manifold_pair("swiss_roll", n=300, noise=0.0, seed=0)
    t = roll.labels["Y"]
    assert 1.5 * np.pi <= t.min() and t.max() <= 4.5 * np.pi
    design = np.column_stack([t * np.cos(t), t * np.sin(t), np.ones_like(t)])
    coef, *_ = np.linalg.lstsq(design, roll.views["Y"], rcond=None)
    sv = np.linalg.svd(roll.views["Y"] - design @ coef, compute_uv=False)
    assert sv[0] > 1.0 and sv[1] < 1e-9


def test_manifold_pair_noise_and_warp_break_congruence():
    clean = ds.manifold_pair("s_curve", n=100, noise=0.0, seed=0)
    noisy = ds.manifold_pair("s_curve", n=100, noise=0.05, seed=0)
    warped = ds.manifold_pair("s_curve", n=100, noise=0.0, warp=True, seed=0)
    ratio = pdist(warped.views["Y"]) / pdist(warped.views["X"])
    assert ratio.std() / ratio.mean() > 0.05  # not a similarity any more
    resid = noisy.views["X"] - clean.views["X"]  # same points and rotation: the difference is the noise
    assert 0.04 < resid.std() < 0.06
    other = ds.manifold_pair("s_curve", n=100, noise=0.0, seed=1)
    assert not np.allclose(other.views["X"], clean.views["X"])
    with pytest.raises(ValueError, match="warp"):
        ds.manifold_pair(warp=1.5)
    with pytest.raises(ValueError, match="dim"):
        ds.manifold_pair(dim=2)


# Protein -----------------------------------------------------------------------------------
def test_protein_sizes_and_paper_scaling():
    scaled, raw = ds.protein(), ds.protein(scale=False)
    assert scaled.views.names == ("model1", "model10", "model21")
    assert all(v.shape == (215, 3) for v in scaled.views.values())
    for model, factor in [("model1", 4.0), ("model10", 2.0), ("model21", 1.0)]:
        np.testing.assert_allclose(pdist(scaled.views[model]), factor * pdist(raw.views[model]), rtol=1e-12)
    np.testing.assert_allclose(raw.views["model1"][0], [1.097, -0.877, -2.643])  # first line of the PDB trace
    # consecutive C-alpha atoms are 3.8 angstrom apart in a real backbone
    steps = np.linalg.norm(np.diff(raw.views["model21"], axis=0), axis=1)
    assert np.median(steps) == pytest.approx(3.8, abs=0.05)
    assert ds.protein(models=(21, 1)).views.names == ("model21", "model1")
    with pytest.raises(ValueError, match="not shipped"):
        ds.protein(models=(1, 2))


# Motion capture ------------------------------------------------------------------------------
def test_mocap_channels_are_59_split_in_half():
    problem = ds.mocap()
    assert problem.views.n_samples["Y1"] == 358
    assert problem.views.n_features == {"Y1": 30, "Y2": 29}
    data = np.hstack([problem.views["Y1"], problem.views["Y2"]])
    # first AMC frame: root rx ry rz, then lfemur (the first bone with dof in the ASF)
    np.testing.assert_array_equal(data[0, :6], [-0.943965, -8.37963, -7.42612, -27.9936, -4.46438, -9.04925])
    np.testing.assert_array_equal(problem.labels["Y1"][:3], [1, 2, 3])
    sub = ds.mocap(step=3, n_frames=100)
    assert sub.views.n_samples["Y2"] == 100
    np.testing.assert_array_equal(sub.views["Y2"], problem.views["Y2"][:300:3])
    np.testing.assert_array_equal(sub.labels["Y2"][:3], [1, 4, 7])


def test_mocap_positions_stand_on_the_ground():
    problem = ds.mocap("positions")
    assert problem.views.n_features == {"Y1": 45, "Y2": 45}  # 30 bones x 3, root-relative
    skeleton, channels, _ = ds.real._cmu35()
    positions, names = joint_positions(channels, skeleton)
    height = positions[..., 1]  # y is up
    lowest_toe = np.minimum(height[:, names.index("ltoes")], height[:, names.index("rtoes")])
    # in walking one foot is always on the floor: the lowest toe stays at one height
    assert lowest_toe.std() < 0.2 and abs(lowest_toe.mean()) < 1.0
    assert (height[:, names.index("head")] - height[:, 0]).min() > 8.0
    bones = {b.name: b for b in skeleton.bones}
    for name in ("ltibia", "rhumerus"):  # rotations keep bone lengths
        seg = positions[:, names.index(name)] - positions[:, names.index(bones[name].parent)]
        np.testing.assert_allclose(np.linalg.norm(seg, axis=1), bones[name].length, rtol=1e-12)


TOY_ASF = (":units\r\n  angle deg\r\n:root\r\n order TX TY TZ RX RY RZ\r\n axis XYZ\r\n position 0 0 0\r\n"
           " orientation 0 0 0\r\n:bonedata\r\n begin\r\n  name femur\r\n  direction 0 -1 0\r\n  length 2\r\n"
           "  axis 0 0 20 XYZ\r\n  dof rx ry rz\r\n  limits (-160.0 20.0)\r\n  (-70 70)\r\n (-60 70)\r\n end\r\n"
           " begin\r\n  name tibia\r\n  direction 0 -1 0\r\n  length 3\r\n  axis 0 0 20 XYZ\r\n  dof rx\r\n"
           " end\r\n:hierarchy\r\n begin\r\n  root femur\r\n  femur tibia\r\n end\r\n")


def rodrigues(axis, angle):
    axis = np.asarray(axis) / np.linalg.norm(axis)
    k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + np.sin(angle) * k + (1 - np.cos(angle)) * k @ k


def test_forward_kinematics_rotates_about_the_bone_axis():
    skeleton = read_asf(io.StringIO(TOY_ASF))
    assert skeleton.channel_names == ["root.tx", "root.ty", "root.tz", "root.rx", "root.ry", "root.rz",
                                      "femur.rx", "femur.ry", "femur.rz", "tibia.rx"]
    amc = "1\r\nroot 1 2 3 0 0 0\r\nfemur 30 0 0\r\ntibia 0\r\n2\r\nroot 0 0 0 0 90 0\r\nfemur 0 0 0\r\ntibia 0\r\n"
    channels, frames = read_amc(io.StringIO(amc), skeleton)
    np.testing.assert_array_equal(frames, [1, 2])
    positions, names = joint_positions(channels, skeleton)
    # frame 1: femur rx = 30 deg turns the leg about the femur's local x axis, Rz(20 deg) e_x
    axis = [np.cos(np.radians(20)), np.sin(np.radians(20)), 0.0]
    turn = rodrigues(axis, np.radians(30))
    np.testing.assert_allclose(positions[0, 0], [1, 2, 3])
    np.testing.assert_allclose(positions[0, 1] - positions[0, 0], turn @ [0, -2, 0], atol=1e-12)
    np.testing.assert_allclose(positions[0, 2] - positions[0, 1], turn @ [0, -3, 0], atol=1e-12)
    # frame 2: root ry = 90 deg turns the straight-down leg about the vertical: it stays straight down
    np.testing.assert_allclose(positions[1, 2], [0, -5, 0], atol=1e-12)
    with pytest.raises(ValueError, match="femur' has 3 dof, got 2"):
        read_amc(io.StringIO("1\nroot 0 0 0 0 0 0\nfemur 1 2\ntibia 0\n"), skeleton)
    with pytest.raises(ValueError, match="frame 1.*tibia"):
        read_amc(io.StringIO("1\nroot 0 0 0 0 0 0\nfemur 1 2 3\n2\n"), skeleton)


def test_shipped_mocap_files_match_the_parser_and_crlf():
    raw = gzip.decompress((DATA_DIR / "35_01.amc.gz").read_bytes())
    assert b"\r\n" in raw  # shipped verbatim, CRLF line endings
    skeleton = read_asf(io.StringIO(gzip.decompress((DATA_DIR / "35.asf.gz").read_bytes()).decode()))
    assert len(skeleton.channel_names) == 62 and len(skeleton.bones) == 30
    channels, frames = read_amc(io.StringIO(raw.decode()), skeleton)
    assert channels.shape == (358, 62) and frames[-1] == 358


# UCI multiple features ---------------------------------------------------------------------
def test_mfeat_six_views_of_2000_digits():
    problem = ds.mfeat(tuple(ds.MFEAT_VIEWS))
    assert problem.views.n_features == {"fou": 76, "fac": 216, "kar": 64, "pix": 240, "zer": 47, "mor": 6}
    assert set(problem.views.n_samples.values()) == {2000}
    np.testing.assert_array_equal(np.bincount(problem.labels["fou"]), [200] * 10)
    np.testing.assert_array_equal(problem.views["mor"][0], [1, 0, 0, 133.15, 1.3117, 1620.2])
    assert problem.views["pix"].min() == 0 and problem.views["pix"].max() == 6  # pixel averages 0-6


def test_mfeat_subsampling_per_class_is_seeded():
    a = ds.mfeat(("fou", "kar"), n_per_class=7, seed=0)
    b = ds.mfeat(("fou", "kar"), n_per_class=7, seed=0)
    c = ds.mfeat(("fou", "kar"), n_per_class=7, seed=1)
    np.testing.assert_array_equal(np.bincount(a.labels["kar"]), [7] * 10)
    np.testing.assert_array_equal(a.views["fou"], b.views["fou"])
    assert not np.array_equal(a.views["fou"], c.views["fou"])
    full = ds.mfeat(("fou", "kar"))
    rows = [int(np.flatnonzero((full.views["fou"] == r).all(1))[0]) for r in a.views["fou"]]
    np.testing.assert_array_equal(full.views["kar"][rows], a.views["kar"])  # rows stay paired
    with pytest.raises(ValueError, match="unknown views"):
        ds.mfeat(("fou", "usps"))
    with pytest.raises(ValueError, match="2 or more"):
        ds.mfeat(("fou",))


# Digit halves ------------------------------------------------------------------------------
def test_digits_halves_rebuild_the_images():
    sklearn_datasets = pytest.importorskip("sklearn.datasets")
    digits = sklearn_datasets.load_digits()
    problem = ds.digits_halves(digit=0)
    assert problem.views.n_samples["top"] == 178 and problem.views.n_features == {"top": 32, "bottom": 32}
    images = np.concatenate([problem.views["top"], problem.views["bottom"]], axis=1).reshape(-1, 8, 8)
    np.testing.assert_array_equal(images, digits.images[digits.target == 0])
    assert set(problem.labels["top"]) == {0}
    every = ds.digits_halves(digit=None)
    assert every.views.n_samples["bottom"] == 1797 and len(set(every.labels["top"])) == 10
    a, b = ds.digits_halves(0, n=100, seed=0), ds.digits_halves(0, n=100, seed=1)
    assert a.views.n_samples["top"] == 100 and not np.array_equal(a.views["top"], b.views["top"])
    with pytest.raises(ValueError, match="digit"):
        ds.digits_halves(digit=10)


# Registry and shipped files ------------------------------------------------------------------
def test_registry_names_and_load():
    assert set(ds.DATASETS) == {"mad_toy_linear_shared", "mad_toy_linear_shared_private",
                                "mad_toy_nonlinear_shared_private", "swiss_roll", "s_curve", "helix",
                                "protein", "mocap", "mfeat", "digits_halves"}
    problem = ds.load("mad_toy_linear_shared", seed=5)
    np.testing.assert_array_equal(problem.views["Y1"], ds.mad_toy("linear_shared", seed=5).views["Y1"])
    assert ds.load("helix", n=30).views.n_samples["X"] == 30
    assert "swiss roll" in ds.DATASETS["swiss_roll"].__doc__
    with pytest.raises(ValueError, match="unknown data set 'usps'"):
        ds.load("usps")


def test_shipped_data_are_small_and_inside_the_package():
    files = sorted(p.name for p in DATA_DIR.iterdir())
    assert files == sorted(ds._resources.DATA_FILES)
    assert sum(p.stat().st_size for p in DATA_DIR.iterdir()) < 3_000_000


LOADERS_SCRIPT = """
import json, os, sys
opened = []
sys.addaudithook(lambda event, args: opened.append(str(args[0])) if event == "open" and args
                 and isinstance(args[0], (str, bytes, os.PathLike)) else None)
import bayesalign.datasets as ds
for name in ("protein", "mocap", "mfeat"):
    ds.load(name)
ds.mocap("positions"); ds.mfeat(tuple(ds.MFEAT_VIEWS))
print(json.dumps(opened))
"""


def test_loaders_read_only_the_package_data():
    result = subprocess.run([sys.executable, "-c", LOADERS_SCRIPT], capture_output=True, text=True, check=True)
    opened = [p for p in json.loads(result.stdout.strip().splitlines()[-1]) if "_data" in p or "shared" in p]
    data_files = {p for p in opened if Path(p).parent == DATA_DIR}
    assert {Path(p).name for p in data_files} == set(ds._resources.DATA_FILES)
    assert not [p for p in opened if p.startswith("/work/shared")]
