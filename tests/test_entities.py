"""AlignmentProblem.entities: one latent point per thing seen by some view (the partially observed MRD's layout)."""

import numpy as np

import bayesalign as ba
from bayesalign.data import AlignmentProblem, Correspondence


def _brute_force_entities(problem):
    """Union-find over (view, row) nodes joined by anchor pairs: the reference partition."""
    parent = {}

    def find(x):
        parent.setdefault(x, x)
        while parent[x] != x:
            x = parent[x]
        return x

    for corr in problem.anchors.values():
        a, b = corr.views
        for i, j in corr.pairs:
            parent[find((a, int(i)))] = find((b, int(j)))
    return {(v, r): find((v, r)) for v in problem.views.names for r in range(problem.views.n_samples[v])}


def test_entities_partition_the_rows_as_the_anchor_graph_does():
    rng = np.random.default_rng(0)
    views = {"a": rng.normal(size=(7, 2)), "b": rng.normal(size=(6, 3)), "c": rng.normal(size=(5, 2))}
    anchors = [Correspondence.from_pairs([(0, 1), (2, 3), (5, 0)], ("a", "b")),
               Correspondence.from_pairs([(1, 4), (0, 2)], ("b", "c"))]
    problem = AlignmentProblem(views, anchors=anchors)
    n, rows = problem.entities()
    reference = _brute_force_entities(problem)
    nodes = [(v, r) for v in problem.views.names for r in range(problem.views.n_samples[v])]
    # the same partition: two rows share an entity exactly when the union-find joins them
    for p in nodes:
        for q in nodes:
            assert (rows[p[0]][p[1]] == rows[q[0]][q[1]]) == (reference[p] == reference[q])
    assert n == len(set(reference.values()))
    # every entity index used, complete groups first in anchor_groups order
    used = np.concatenate(list(rows.values()))
    assert set(used.tolist()) == set(range(n))
    groups = problem.anchor_groups()  # a0-b1-c4 and a5-b0-c2 are seen by every view; a2-b3 is not
    assert groups.tolist() == [[0, 1, 4], [5, 0, 2]]
    assert rows["a"][0] == rows["b"][1] == rows["c"][4] == 0
    assert rows["a"][5] == rows["b"][0] == rows["c"][2] == 1
    assert rows["a"][2] == rows["b"][3] == 2  # the partial group next


def test_entities_without_anchors_are_the_rows_in_view_order():
    X = np.zeros((3, 1))
    problem = AlignmentProblem({"a": X, "b": np.zeros((2, 1))})
    n, rows = problem.entities()
    assert n == 5 and rows["a"].tolist() == [0, 1, 2] and rows["b"].tolist() == [3, 4]


def test_entities_of_split_anchors_give_one_entity_per_anchor_and_per_unaligned_row():
    problem = ba.datasets.mad_toy("linear_shared", seed=0, n_anchors=10)
    n, rows = problem.entities()
    assert n == 10 + 90 + 90
    groups = problem.anchor_groups()
    np.testing.assert_array_equal(rows["Y1"][groups[:, 0]], np.arange(10))
    np.testing.assert_array_equal(rows["Y2"][groups[:, 1]], np.arange(10))
