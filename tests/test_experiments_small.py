"""Pure helpers of the paper experiments (experiments/procrustes_theorem2.py, multiscale.py, crosslingual.py).

The scripts themselves take minutes; here their building blocks are checked against closed
forms, an ODE solver and Monte Carlo draws of Theorem 2's hypothesis.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

EXPERIMENTS = Path(__file__).resolve().parent.parent / "experiments"


def _load(name: str):
    # as ``bayesalign experiment NAME`` loads them: from the file, not registered in sys.modules
    spec = importlib.util.spec_from_file_location(f"experiment_{name}", EXPERIMENTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def theorem2():
    return _load("procrustes_theorem2")


@pytest.fixture(scope="module")
def multiscale():
    return _load("multiscale")


@pytest.fixture(scope="module")
def crosslingual():
    return _load("crosslingual")


# --- simulators ----------------------------------------------------------------------------------
def test_pendulum_step_matches_an_ode_solver(theorem2):
    """10 Euler sub-steps of 0.01 s agree with an accurate integration of Lagoudakis & Parr's ODE."""
    from scipy.integrate import solve_ivp

    c = theorem2.PENDULUM
    alpha = 1.0 / (c["m"] + c["M"])

    def rhs(_, s, u):
        th, om = s
        acc = ((c["g"] * np.sin(th) - alpha * c["m"] * c["l"] * om**2 * np.sin(2 * th) / 2
                - alpha * np.cos(th) * u) / (4 * c["l"] / 3 - alpha * c["m"] * c["l"] * np.cos(th) ** 2))
        return [om, acc]

    for theta, omega, u in [(0.2, -0.5, 50.0), (-0.7, 1.0, -40.0), (0.05, 0.0, 0.0)]:
        ref = solve_ivp(rhs, (0, 0.1), [theta, omega], args=(u,), rtol=1e-10, atol=1e-12).y[:, -1]
        th, om = theorem2.pendulum_step(np.array([theta]), np.array([omega]), np.array([u]))
        assert abs(th[0] - ref[0]) < 5e-3 and abs(om[0] - ref[1]) < 3e-2


def test_pendulum_small_angle_growth_rate(theorem2):
    """Unforced and near upright, theta'' = g theta / (4l/3 - alpha m l): the step's acceleration."""
    c = theorem2.PENDULUM
    rate = c["g"] / (4 * c["l"] / 3 - c["m"] * c["l"] / (c["m"] + c["M"]))  # 9.8 / (2/3 - 0.1)
    theta0 = 1e-4
    th, om = theorem2.pendulum_step(np.array([theta0]), np.array([0.0]), np.array([0.0]))
    # 10 Euler sub-steps of h: omega grows by about rate * theta0 * 0.1
    assert om[0] == pytest.approx(rate * theta0 * 0.1, rel=0.1)
    assert rate == pytest.approx(9.8 / (2 / 3 - 0.1))


def test_mountain_car_step_closed_form_and_wall(theorem2):
    x, v = theorem2.mountain_car_step(np.array([-0.3, -1.19]), np.array([0.01, -0.05]),
                                      np.array([-1.0, -1.0]))
    v0 = 0.01 - 0.001 - 0.0025 * np.cos(3 * -0.3)
    assert v[0] == pytest.approx(v0) and x[0] == pytest.approx(-0.3 + v0)
    assert x[1] == -1.2 and v[1] == 0.0  # hits the left wall: stops
    x, v = theorem2.mountain_car_step(np.array([-0.5]), np.array([0.07]), np.array([1.0]))
    assert v[0] == 0.07  # speed limit


def test_sampled_states_are_distinct_and_in_range(theorem2):
    S = theorem2.sample_states("pendulum", 200, seed=1)
    assert S.shape == (200, 2) and len(np.unique(S, axis=0)) == 200
    assert np.all(np.abs(S[:, 0]) <= np.pi / 2)
    with pytest.raises(ValueError, match="task"):
        theorem2.sample_states("acrobot", 10, seed=0)


def test_mountain_car_value_function(theorem2):
    """V* = -(steps to the goal): -1 one step from the goal, about 100-120 steps from the valley floor."""
    V = theorem2.value_function("mountain_car", grid_size=61)
    near_goal, bottom = V(np.array([[0.45, 0.07], [-0.5, 0.0]]))
    assert near_goal == pytest.approx(-1.0)
    assert -130 < bottom < -90


# --- Theorem 2 -----------------------------------------------------------------------------------
def test_bound_formulas(theorem2):
    eps, gap, n = 0.5, 0.02, 500
    tau = theorem2.theorem2_tau(eps, gap, n)
    assert tau == pytest.approx(2 * eps * gap / (n * (np.pi + 2 * eps)))
    assert theorem2.paper_tau(eps, gap, n) == pytest.approx(tau / 2)
    # at ||E|| = N tau the bound of eq. 2.9 is exactly eps (eq. 2.11)
    assert theorem2.kmm_bound(n * tau, gap) == pytest.approx(eps)
    assert theorem2.kmm_bound(gap / 2, gap) == float("inf")


def test_theorem2_holds_on_random_perturbations(theorem2):
    """Monte Carlo: |E_ij| <= tau(eps, d_1) => the top-M subspaces differ by at most eps (and eq. 2.9)."""
    rng = np.random.default_rng(0)
    n, eps = 60, 0.5
    values = np.sort(np.r_[rng.uniform(0, 1, 10), rng.uniform(1.3, 3, n - 10)])
    basis, _ = np.linalg.qr(rng.normal(size=(n, n)))
    A = (basis * values) @ basis.T
    chosen = np.arange(10)
    gap = theorem2.eigengap(values, chosen)
    tau = theorem2.theorem2_tau(eps, gap, n)
    worst = 0.0
    for _ in range(20):
        E = rng.uniform(-tau, tau, (n, n))
        E = np.triu(E) + np.triu(E, 1).T  # symmetric, entries still within tau
        vectors_B = np.linalg.eigh(A + E)[1]
        d = theorem2.subspace_distance(basis[:, chosen], vectors_B[:, chosen])
        assert d <= theorem2.kmm_bound(np.linalg.norm(E, 2), gap) <= eps
        worst = max(worst, d)
    assert worst > 1e-3  # the perturbation does move the subspace


def test_subspace_distance_known_angle(theorem2):
    angle = 0.3
    X = np.array([[1.0], [0.0], [0.0]])
    Y = np.array([[np.cos(angle)], [np.sin(angle)], [0.0]])
    assert theorem2.subspace_distance(X, Y) == pytest.approx(np.sin(angle))
    assert theorem2.subspace_distance(np.eye(4)[:, :2], np.eye(4)[:, [1, 0]]) == pytest.approx(0.0, abs=1e-12)


def test_jitter_keeps_theorem_hypothesis(theorem2):
    rng = np.random.default_rng(3)
    states = theorem2.sample_states("mountain_car", 120, seed=2)
    scale = theorem2.state_scale("mountain_car")
    L_A, sigma, edges = theorem2.normalized_laplacian(states, scale)
    tau = 1e-6
    L_B, E, size = theorem2.jitter_within_tau(states, scale, sigma, edges, L_A, tau, rng)
    assert np.abs(E).max() <= tau and np.abs(E).max() > tau / 10  # close to the allowed level
    assert np.allclose(L_B, L_B.T) and size > 0
    # a normalized Laplacian: eigenvalues in [0, 2], one zero per component
    values = np.linalg.eigvalsh(L_A)
    assert values[0] == pytest.approx(0.0, abs=1e-10) and values[-1] <= 2 + 1e-10


# --- multiscale helpers --------------------------------------------------------------------------
def test_family_profiles(multiscale):
    labels = np.array([0, 0, 6, 6, 1, 1])
    z = np.c_[[2.0, 2.0, 1.0, 1.0, -3.0, -3.0], [1.0, -1.0, 1.0, -1.0, 1.0, -1.0]]
    prof = multiscale.class_profiles(z, labels, [0, 6, 1])
    std = z[:, 0].std()
    assert prof[:, 0] == pytest.approx(np.array([2.0, 1.0, -3.0]) / std)
    assert prof[:, 1] == pytest.approx([0.0, 0.0, 0.0])
    assert multiscale.family_of(labels).tolist() == [0, 0, 0, 0, 1, 1]
    agree = multiscale.profile_agreement(prof[:, :1], -prof[:, :1])
    assert agree[0] == pytest.approx(-1.0)


# --- cross-lingual helpers -----------------------------------------------------------------------
def test_latent_dimension_follows_the_papers(crosslingual):
    from bayesalign.data import Views

    views = Views({"fou": np.zeros((300, 76)), "kar": np.zeros((300, 64))})
    by_label = {m.label: m for m in crosslingual.METHODS}
    assert crosslingual.latent_dimension(by_label["joint Laplacian (instance, local)"], views) == 100
    assert crosslingual.latent_dimension(by_label["CCA"], views) == 64
    assert crosslingual.latent_dimension(by_label["CCA"], views, n_anchors=30) == 29  # fitted on anchors
    assert crosslingual.latent_dimension(by_label["joint Laplacian (instance, local)"], views, 30) == 100
    assert crosslingual.latent_dimension(by_label["anchor similarity baseline"], views) is None
    small = Views({"a": np.zeros((50, 3)), "b": np.zeros((50, 4))})
    assert crosslingual.latent_dimension(by_label["global geometry (instance)"], small) == 49


def test_top_k_curve_ranks_among_held_out_rows(crosslingual):
    """View b shifted by 0.6: the partner is 2nd nearest unless the closer row is an anchor (or none)."""
    from bayesalign.data import AlignmentProblem, LatentEmbedding

    x = np.arange(10.0)[:, None]
    problem = AlignmentProblem.paired({"a": x, "b": x + 0.6}).split_anchors(1, seed=0)
    anchor = int(problem.anchors_between("a", "b").index_a[0])
    emb = LatentEmbedding({"a": x, "b": x + 0.6})
    curve = crosslingual.top_k_curve(emb, problem, "a", "b")
    # query i: row i - 1 of b (at i - 0.4) is closer than its partner unless i = 0 or i - 1 is the anchor
    first = sum(1 for i in range(10) if i != anchor and (i == 0 or i - 1 == anchor)) / 9
    assert curve[0] == pytest.approx(first)
    assert np.all(curve[1:] == 1.0)


def test_family_problem_holds_the_six_classes(multiscale):
    problem = multiscale.family_problem(5, seed=0)
    labels = problem.labels["fou"]
    assert problem.views.n_samples == {"fou": 30, "kar": 30}
    assert sorted(set(labels.tolist())) == [0, 1, 4, 6, 7, 8]
    assert np.bincount(multiscale.family_of(labels)).tolist() == [15, 15]
