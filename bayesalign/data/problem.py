"""``AlignmentProblem``: views, known anchor pairs and (for evaluation only) the truth."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from .._utils import as_rng
from .correspondence import Correspondence, _anchor_count
from .label_prior import LabelPrior
from .views import InputTypeError, Views


def _as_correspondences(items, views: Views, what: str) -> dict[tuple[str, str], Correspondence]:
    if items is None:
        return {}
    if isinstance(items, Correspondence):
        items = [items]
    elif isinstance(items, Mapping):
        items = list(items.values())
    out: dict[tuple[str, str], Correspondence] = {}
    for corr in items:
        if not isinstance(corr, Correspondence):
            raise InputTypeError(f"{what} must be Correspondence objects, got {type(corr).__name__}")
        for name in corr.views:
            if name not in views:
                raise ValueError(f"{what} name view {name!r}, which does not exist; views are "
                                 f"{list(views.names)}")
        a, b = corr.views
        corr.check_bounds(views.n_samples[a], views.n_samples[b])
        # store each pair of views once, in the order of the views
        if views.names.index(a) > views.names.index(b):
            corr = corr.reversed()
        key = corr.views
        out[key] = out[key].concat(corr) if key in out else corr
    return out


class AlignmentProblem:
    """What every method's ``fit`` accepts: views, anchors, and optionally the truth.

    Parameters
    ----------
    views : Views or anything ``Views`` accepts
    anchors : Correspondence, list of them, or dict, optional
        Known pairs between views (one Correspondence per pair of views that has any).
    truth : Correspondence, list or dict, optional
        The true correspondence; used only by metrics, never by methods.
    labels : dict view -> 1-D array, optional
        Class labels per row, for label-transfer metrics and coloured plots; never seen by a method.
    name : str, optional
    label_prior : LabelPrior, optional
        Labels as partner hints, which the methods do use; set it with :meth:`with_label_prior`.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(10, 3))
    >>> problem = AlignmentProblem.paired({"a": X, "b": X @ np.eye(3)[:, ::-1]})
    >>> half = problem.split_anchors(0.3, seed=0)
    >>> len(half.anchors_between("a", "b")), half.unaligned("a").size
    (3, 7)
    """

    def __init__(self, views, anchors=None, truth=None, labels=None, name: str = "",
                 label_prior: LabelPrior | None = None):
        self.views = views if isinstance(views, Views) else Views(views)
        self.anchors = _as_correspondences(anchors, self.views, "anchors")
        self.truth = _as_correspondences(truth, self.views, "truth")
        self.labels = {}
        if labels is not None and not isinstance(labels, Mapping):
            raise InputTypeError(f"labels must be a dict view -> 1-D array, got {type(labels).__name__}; "
                                 "(AlignmentProblem.paired accepts one array for all its views)")
        for view, lab in (labels or {}).items():
            if view not in self.views.names:
                raise ValueError(f"labels name view {view!r}, which does not exist; views are {list(self.views.names)}")
            lab = np.asarray(lab).copy()
            if lab.shape != (self.views.n_samples[view],):
                raise ValueError(f"labels of view {view!r}: expected shape ({self.views.n_samples[view]},), "
                                 f"got {lab.shape}")
            lab.setflags(write=False)
            self.labels[view] = lab
        self.name = name
        if label_prior is not None:
            if not isinstance(label_prior, LabelPrior):
                raise InputTypeError(f"label_prior must be a LabelPrior (see with_label_prior), got "
                                     f"{type(label_prior).__name__}")
            label_prior.check(self.views)
        self.label_prior = label_prior

    @classmethod
    def paired(cls, views, labels=None, name: str = "") -> AlignmentProblem:
        """Fully paired views (row i of every view is the same thing): truth = identity, no anchors."""
        views = views if isinstance(views, Views) else Views(views)
        n = views.check_paired()
        names = views.names
        truth = [Correspondence.identity(n, (a, b)) for i, a in enumerate(names) for b in names[i + 1:]]
        if labels is not None and not isinstance(labels, Mapping):
            labels = {v: labels for v in names}
        return cls(views, truth=truth, labels=labels, name=name)

    def __repr__(self) -> str:
        anchors = ", ".join(f"{a}-{b}: {len(c)}" for (a, b), c in self.anchors.items()) or "none"
        return (f"AlignmentProblem({self.name + ', ' if self.name else ''}{self.views!r}, anchors: {anchors}, "
                f"truth: {'yes' if self.truth else 'no'}{', label prior' if self.label_prior else ''})")

    # Queries -----------------------------------------------------------------------------
    def _between(self, store, a, b, what) -> Correspondence | None:
        a, b = self.views.name_of(a), self.views.name_of(b)
        if (a, b) in store:
            return store[(a, b)]
        if (b, a) in store:
            return store[(b, a)].reversed()
        return None

    def anchors_between(self, a, b, implied: bool = False) -> Correspondence:
        """Anchor pairs oriented as (a, b); empty if there are none.

        ``implied=True``: every pair of rows of a and b that the anchors make one thing, directly or
        through a chain of anchors across other views (a0-c2 and c2-b5 imply a0-b5; :meth:`entities`),
        sorted by the row of a. With two views the same pairs as the given ones.

        Examples
        --------
        >>> X = np.zeros((3, 2))
        >>> problem = AlignmentProblem({"a": X, "b": X, "c": X}, anchors=[
        ...     Correspondence.from_pairs([(0, 2)], ("a", "c")), Correspondence.from_pairs([(2, 1)], ("c", "b"))])
        >>> len(problem.anchors_between("a", "b")), problem.anchors_between("a", "b", implied=True).pairs.tolist()
        (0, [[0, 1]])
        """
        if implied:
            a, b = self.views.name_of(a), self.views.name_of(b)
            n_entities, rows = self.entities()
            row_of_b = np.full(n_entities, -1, dtype=np.int64)  # entity -> its row of b (-1: none)
            row_of_b[rows[b]] = np.arange(rows[b].size)
            index_a = np.flatnonzero(row_of_b[rows[a]] >= 0)
            return Correspondence((a, b), index_a, row_of_b[rows[a][index_a]])
        corr = self._between(self.anchors, a, b, "anchors")
        if corr is None:
            a, b = self.views.name_of(a), self.views.name_of(b)
            return Correspondence((a, b), np.zeros(0, np.int64), np.zeros(0, np.int64))
        return corr

    def truth_between(self, a, b) -> Correspondence:
        """Ground-truth pairs oriented as (a, b); raises if the problem has none for them."""
        corr = self._between(self.truth, a, b, "truth")
        if corr is None:
            raise ValueError(f"this problem has no ground truth between {a!r} and {b!r}")
        return corr

    @property
    def has_truth(self) -> bool:
        return bool(self.truth)

    def anchored(self, view) -> np.ndarray:
        """Sorted indices of the rows of ``view`` that take part in any anchor pair."""
        view = self.views.name_of(view)
        idx = [c.index_a if c.views[0] == view else c.index_b
               for c in self.anchors.values() if view in c.views]
        return np.unique(np.concatenate(idx)) if idx else np.zeros(0, np.int64)

    def _anchor_components(self):
        """Connected components of the anchor graph over the rows of all views.

        Returns ``(component, view_of, row_of)``, one entry per row of every view (views in order,
        rows in order), or ``(None, None, None)`` without anchors. Raises ``ValueError`` for
        duplicated or contradicting anchors (see :meth:`anchor_groups`).
        """
        names = list(self.views.names)
        sizes = [self.views.n_samples[v] for v in names]
        offset = np.cumsum([0] + sizes)  # node id = offset[view] + row
        heads, tails = [], []
        for corr in self.anchors.values():
            a, b = corr.views
            for name in (a, b):  # checked again: the anchors dict may have been changed after construction
                if name not in self.views:
                    raise ValueError(f"anchors name view {name!r}, which does not exist; views are {names}")
            corr.check_bounds(self.views.n_samples[a], self.views.n_samples[b])
            pairs = corr.pairs
            uniq, counts = np.unique(pairs, axis=0, return_counts=True)
            if (counts > 1).any():
                i, j = uniq[np.argmax(counts > 1)]
                raise ValueError(f"duplicate anchor ({i}, {j}) between views {a!r} and {b!r}")
            for side, (this, other) in ((0, (a, b)), (1, (b, a))):
                rows, counts = np.unique(pairs[:, side], return_counts=True)
                if (counts > 1).any():
                    r = rows[np.argmax(counts > 1)]
                    partners = pairs[pairs[:, side] == r, 1 - side].tolist()
                    raise ValueError(f"contradicting anchors: row {r} of view {this!r} is anchored to rows "
                                     f"{partners} of view {other!r}")
            heads.append(offset[names.index(a)] + corr.index_a)
            tails.append(offset[names.index(b)] + corr.index_b)
        n_nodes = int(offset[-1])
        if not heads:
            return None, None, None
        heads, tails = np.concatenate(heads), np.concatenate(tails)
        graph = sp.csr_matrix((np.ones(heads.size), (heads, tails)), shape=(n_nodes, n_nodes))
        _, component = connected_components(graph, directed=False)  # [n_nodes]
        view_of = np.repeat(np.arange(len(names)), sizes)  # [n_nodes]
        row_of = np.arange(n_nodes) - offset[view_of]
        # a component holding two rows of one view contradicts itself
        order = np.lexsort((row_of, view_of, component))
        comp, view, row = component[order], view_of[order], row_of[order]
        clash = np.flatnonzero((comp[1:] == comp[:-1]) & (view[1:] == view[:-1]))
        if clash.size:
            t = clash[0]
            raise ValueError(f"contradicting anchors: rows {row[t]} and {row[t + 1]} of view {names[view[t]]!r} are "
                             "anchored to the same point through other views")
        return component, view_of, row_of

    def entities(self) -> tuple[int, dict[str, np.ndarray]]:
        """One entity per thing seen by some view: ``(n_entities, {view: entity of each row})``.

        The rows joined by anchors (directly or through a chain of anchors, across any views) are
        one entity; every other row is an entity of its own, seen by its view alone. This is the
        latent-point layout of a partially observed MRD (``MRD.fit(views, observed=...)``): the
        entities seen by every view come first, in the order of :meth:`anchor_groups`, then the
        other anchored entities, then each view's unanchored rows in view and row order.

        Examples
        --------
        >>> X = np.zeros((3, 2))
        >>> problem = AlignmentProblem({"a": X, "b": X}, anchors=Correspondence.from_pairs([(2, 0)], ("a", "b")))
        >>> n, rows = problem.entities()
        >>> n, rows["a"].tolist(), rows["b"].tolist()
        (5, [1, 2, 0], [0, 3, 4])
        """
        names = list(self.views.names)
        sizes = [self.views.n_samples[v] for v in names]
        component, view_of, row_of = self._anchor_components()
        if component is None:  # no anchors: every row its own entity
            component = np.arange(sum(sizes))
            view_of = np.repeat(np.arange(len(names)), sizes)
            row_of = np.concatenate([np.arange(n) for n in sizes])
        members = np.bincount(component)  # rows per component
        groups = self.anchor_groups()
        offset = np.cumsum([0] + sizes)
        entity_of = np.full(members.size, -1)  # component -> entity
        entity_of[component[offset[0] + groups[:, 0]]] = np.arange(len(groups))  # complete groups first
        partial = np.flatnonzero((members > 1) & (entity_of < 0))
        entity_of[partial] = len(groups) + np.arange(partial.size)
        single_nodes = np.flatnonzero(members[component] == 1)  # in (view, row) order
        entity_of[component[single_nodes]] = len(groups) + partial.size + np.arange(single_nodes.size)
        entity = entity_of[component]
        return int(members.size), {name: entity[view_of == k][np.argsort(row_of[view_of == k])]
                                   for k, name in enumerate(names)}

    def anchor_groups(self) -> np.ndarray:
        """Rows that are one thing seen in every view: int array (G, V), column k for view k.

        Anchors are joined across pairs of views (a-b and b-c make one group a-b-c): the groups
        are the connected components of the graph whose nodes are the rows of all views and
        whose edges are the anchor pairs. Only groups holding exactly one row of *every* view
        are returned (sorted), the rows that every multi-view method can train on. Raises
        ``ValueError`` for duplicated pairs and contradicting anchors (a row anchored to two
        different rows of one view, directly or through a chain of anchors).

        Examples
        --------
        >>> X = np.zeros((4, 2))
        >>> problem = AlignmentProblem({"a": X, "b": X, "c": X}, anchors=[
        ...     Correspondence.from_pairs([(0, 1), (2, 3)], ("a", "b")),
        ...     Correspondence.from_pairs([(1, 2)], ("b", "c"))])
        >>> problem.anchor_groups().tolist()   # a0-b1-c2; a2-b3 is not seen in view c
        [[0, 1, 2]]
        """
        names = list(self.views.names)
        component, view_of, row_of = self._anchor_components()
        if component is None:
            return np.zeros((0, len(names)), dtype=np.int64)
        members = np.bincount(component, minlength=component.max() + 1)  # rows per component
        full = np.flatnonzero(members == len(names))
        groups = np.full((full.size, len(names)), -1, dtype=np.int64)  # [G, V]
        slot = np.full(component.max() + 1, -1)
        slot[full] = np.arange(full.size)
        keep = slot[component] >= 0
        groups[slot[component[keep]], view_of[keep]] = row_of[keep]
        return groups[np.lexsort(groups.T[::-1])] if groups.size else groups

    def unaligned(self, view) -> np.ndarray:
        """Sorted indices of the rows of ``view`` that take part in no anchor pair."""
        view = self.views.name_of(view)
        mask = np.ones(self.views.n_samples[view], dtype=bool)
        mask[self.anchored(view)] = False
        return np.flatnonzero(mask)

    # Labels as partner hints ----------------------------------------------------------------
    def with_label_prior(self, labels=None, table=None, noise: float = 0.1) -> AlignmentProblem:
        r"""A copy whose methods prefer partners with corresponding labels: a prior over partners.

        Row j of view b is row i of view a's partner with prior probability :math:`p(j \mid i) \propto
        (1 - \varepsilon)` when their labels correspond (equal, or paired by ``table``) and
        :math:`\varepsilon / (K - 1)` when not, K the number of labels of b, and :math:`1/K` when either row is
        unlabelled (no information); :mod:`bayesalign.data.label_prior` gives the general form of a table. The
        aligners add :math:`-\log p` to their cost (:meth:`label_cost`): MAD's matcher, so its match
        probabilities are the posterior under this prior; the feature cost of the optimal-transport aligners.

        Parameters
        ----------
        labels : dict view -> 1-D array, optional
            A label per row, None or NaN where a row has none. Default: the problem's ``labels``. Evaluating label
            transfer with the labels that supervised the alignment is circular: keep the hinted rows out of it.
        table : pairs, dict, or dict (view a, view b) -> pairs or dict, optional
            Which labels correspond, when the views' vocabularies differ: (label of a, label of b) pairs or a
            dict label of a -> label(s) of b, for the first two views; or such tables keyed by pairs of views.
            Without one, equal labels correspond.
        noise : float in (0, 1)
            :math:`\varepsilon`, the probability that a labelled row's label does not correspond to its
            partner's. (K - 1)/K makes equal labels uninformative.

        Examples
        --------
        >>> X = np.zeros((3, 2))
        >>> problem = AlignmentProblem({"a": X, "b": X}).with_label_prior(
        ...     {"a": ["T", None, "B"], "b": ["B", "T", "T"]}, noise=0.1)
        >>> np.round(problem.label_cost("a", "b"), 2).tolist()   # -log(2 * 0.9) = -0.59, -log(2 * 0.1) = 1.61
        [[1.61, -0.59, -0.59], [0.0, 0.0, 0.0], [-0.59, 1.61, 1.61]]
        """
        names = list(self.views.names)
        labels = self.labels if labels is None else labels
        if not isinstance(labels, Mapping):
            raise InputTypeError(f"labels must be a dict view -> 1-D array, got {type(labels).__name__}")
        if not labels:
            raise ValueError("with_label_prior needs labels: this problem has none; pass labels={view: array}")
        tables = {}
        if table is not None:
            per_pair = isinstance(table, Mapping) and table and all(  # keyed by (view, view): a view is named
                isinstance(k, tuple) and len(k) == 2 and any(v in names for v in k) for k in table)
            if per_pair:
                tables = dict(table)
            elif len(names) == 2:
                tables = {(names[0], names[1]): table}
            else:
                raise ValueError(f"with {len(names)} views, key the label table by pairs of views, e.g. "
                                 f"{{({names[0]!r}, {names[1]!r}): pairs}}")
        prior = LabelPrior(labels, noise, tables)
        prior.check(self.views)
        prior.check_overlap(names)
        return self.replace(label_prior=prior)

    def label_cost(self, a, b, rows_a=None, rows_b=None) -> np.ndarray | None:
        r"""The label prior's cost :math:`-\log(K\, p)` between rows of views a and b (nats), or None when it
        carries no information between them (no label prior, or every entry 0).

        ``rows_a``, ``rows_b`` (default every row) select the rows; the cost is computed in the problem's view
        order and transposed when a comes after b, so both orders give the same prior. Dense
        (len(rows_a), len(rows_b)): its consumers' costs are dense matrices.
        """
        if self.label_prior is None:
            return None
        a, b = self.views.name_of(a), self.views.name_of(b)
        if self.views.names.index(a) > self.views.names.index(b):
            cost = self.label_cost(b, a, rows_b, rows_a)
            return None if cost is None else cost.T
        n = self.views.n_samples
        codes_a, codes_b, table = self.label_prior.label_costs(a, b, n[a], n[b])
        codes_a = codes_a if rows_a is None else codes_a[np.asarray(rows_a, np.int64)]
        codes_b = codes_b if rows_b is None else codes_b[np.asarray(rows_b, np.int64)]
        cost = table[codes_a][:, codes_b]  # code -1: the last row / column, all 0
        return cost if np.any(cost) else None

    def replace(self, **changes) -> AlignmentProblem:
        """A copy with some of views / anchors / truth / labels / name / label_prior replaced."""
        kwargs = dict(views=self.views, anchors=list(self.anchors.values()),
                      truth=list(self.truth.values()), labels=self.labels, name=self.name,
                      label_prior=self.label_prior)
        kwargs.update(changes)
        return AlignmentProblem(**kwargs)

    # Helpers for experiments -------------------------------------------------------------
    def split_anchors(self, n_anchors, seed=None) -> AlignmentProblem:
        """Turn fully paired views into anchors + held-out rows.

        ``n_anchors`` is a count or a fraction in (0, 1) of the paired rows. The same
        rows are anchors in every view (an anchor is one thing seen in all views); the
        truth is kept whole for the metrics, which evaluate on the held-out rows.
        """
        n = self.views.check_paired()
        if self.truth:
            ident = np.arange(n)
            for corr in self.truth.values():
                if len(corr) != n or not (np.array_equal(np.sort(corr.index_a), ident)
                                          and np.array_equal(corr.index_b[np.argsort(corr.index_a)], ident)):
                    raise ValueError("split_anchors needs row-i-to-row-i paired views; this problem's truth "
                                     f"between {corr.views} is not the identity (shuffled already?)")
        k = _anchor_count(n_anchors, n)
        if k >= n:
            raise ValueError(f"split_anchors: {k} anchors leave no held-out rows out of {n}")
        rows = np.sort(as_rng(seed).permutation(n)[:k])
        names = self.views.names
        anchors = [Correspondence((a, b), rows, rows.copy()) for i, a in enumerate(names) for b in names[i + 1:]]
        truth = list(self.truth.values()) or [Correspondence.identity(n, (a, b))
                                              for i, a in enumerate(names) for b in names[i + 1:]]
        return self.replace(anchors=anchors, truth=truth)

    def shuffle_unaligned(self, view=None, seed=None) -> AlignmentProblem:
        """Permute the held-out (non-anchor) rows of one view (default: the last one).

        Anchors, truth and labels are re-indexed to match, so nothing downstream can
        find the correspondence from the row order.
        """
        view = self.views.name_of(self.views.names[-1] if view is None else view)
        n = self.views.n_samples[view]
        held = self.unaligned(view)
        order = np.arange(n)
        order[held] = held[as_rng(seed).permutation(held.size)]  # new row k is old row order[k]
        new_index = np.empty(n, dtype=np.int64)
        new_index[order] = np.arange(n)  # old row r is now row new_index[r]
        views = self.views.take({view: order})

        def remap(corrs: Iterable[Correspondence]):
            out = []
            for c in corrs:
                a = new_index[c.index_a] if c.views[0] == view else c.index_a
                b = new_index[c.index_b] if c.views[1] == view else c.index_b
                out.append(Correspondence(c.views, a, b, c.weights))
            return out

        labels = dict(self.labels)
        if view in labels:
            labels[view] = labels[view][order]
        prior = None if self.label_prior is None else self.label_prior.reindexed(view, order)
        return AlignmentProblem(views, remap(self.anchors.values()), remap(self.truth.values()),
                                labels, self.name, prior)
