r"""``LabelPrior``: class labels as weak supervision, a prior over which rows of two views are partners.

Rows of two views that carry corresponding labels (the same label, or a pair of a label-to-label table) are
likelier partners. With :math:`\varepsilon` the label-noise rate (the probability that a labelled row's label
does not correspond to its partner's), K the number of labels of view b and T(l) the labels of b that label l
of view a corresponds to, the partner's label follows the noisy channel

.. math:: P(m \mid l) = \begin{cases} (1 - \varepsilon) / |T(l)| & m \in T(l) \\
          \varepsilon / (K - |T(l)|) & m \notin T(l) \end{cases}

and an unlabelled row's label is unknown: :math:`P(m \mid l) = 1/K`, the channel's average over m (also for a
label l with no counterpart, or one that corresponds to every label). Under a uniform prior over partners and
uniform labels of the non-partners, the posterior that row j of b is the partner of row i of a is

.. math:: p(j \mid i) = \frac{P(m_j \mid l_i)}{\sum_{j'} P(m_{j'} \mid l_i)},

the additive cost :math:`c_{ij} = -\log(K\, P(m_j \mid l_i))` (nats): 0 for every pair with an unlabelled row,
and 0 everywhere at the uninformative rate :math:`\varepsilon = (K - 1)/K` of one-to-one labels. The aligners
add it to their own cost so that their probabilities are multiplied by the prior
(:meth:`AlignmentProblem.with_label_prior`, :meth:`AlignmentProblem.label_cost`).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .views import InputTypeError

__all__ = ["LabelPrior", "is_missing_label"]


def is_missing_label(value) -> bool:
    """Whether a label entry means "no label": None, a float NaN or pandas' NA."""
    if value is None or type(value).__name__ in ("NAType", "NaTType"):
        return True
    return isinstance(value, (float, np.floating)) and bool(np.isnan(value))


def _table_pairs(table, a: str, b: str) -> set:
    """The (label of a, label of b) pairs of one view pair's table: pairs, or a dict label -> label(s)."""
    if isinstance(table, Mapping):
        pairs = []
        for la, lb in table.items():
            many = isinstance(lb, (list, tuple, set, frozenset, np.ndarray))
            pairs.extend((la, m) for m in (lb if many else [lb]))
    else:
        pairs = list(table)
    out = set()
    for pair in pairs:
        if not isinstance(pair, (tuple, list, np.ndarray)) or len(pair) != 2:
            raise ValueError(f"label table between views {a!r} and {b!r}: each entry must be a pair (label of "
                             f"{a!r}, label of {b!r}), got {pair!r}")
        if is_missing_label(pair[0]) or is_missing_label(pair[1]):
            raise ValueError(f"label table between views {a!r} and {b!r}: the pair {tuple(pair)!r} holds a missing "
                             "label")
        out.add((pair[0], pair[1]))
    if not out:
        raise ValueError(f"label table between views {a!r} and {b!r} is empty")
    return out


class LabelPrior:
    r"""Partner hints from class labels: per view a label per row (missing: no information), a noise rate and
    optional label-to-label tables (the equations are in :mod:`bayesalign.data.label_prior`).

    Build it through :meth:`AlignmentProblem.with_label_prior`, which checks it against the views.

    Parameters
    ----------
    labels : dict view -> 1-D array
        A label per row; None or NaN where a row has none. Copied.
    noise : float in (0, 1)
        :math:`\varepsilon`, the probability that a labelled row's label does not correspond to its partner's
        (labels of one view wrong at rate r, the other's right: r; both wrong independently at rate r:
        about 2r).
    tables : dict (view a, view b) -> pairs or dict, optional
        Which labels of a correspond to which of b: (label of a, label of b) pairs, or a dict label of a ->
        label(s) of b. A pair of views without a table pairs equal labels.
    """

    def __init__(self, labels: Mapping, noise: float = 0.1, tables: Mapping | None = None):
        if not isinstance(labels, Mapping) or not labels:
            raise InputTypeError(f"label hints must be a non-empty dict view -> 1-D array, got "
                                 f"{type(labels).__name__}")
        if isinstance(noise, bool) or not isinstance(noise, (int, float, np.integer, np.floating)) \
                or not 0.0 < float(noise) < 1.0:
            raise ValueError(f"noise must be a probability in (0, 1) (the rate of wrong labels), got {noise!r}")
        self.noise = float(noise)
        self.labels = {}
        for view, values in labels.items():
            values = np.array(values, dtype=object)
            if values.ndim != 1:
                raise ValueError(f"label hints of view {view!r} must be 1-D, got shape {values.shape}")
            values.setflags(write=False)
            self.labels[view] = values
        self.tables = {}
        for key, table in (tables or {}).items():
            if not (isinstance(key, tuple) and len(key) == 2):
                raise ValueError(f"label tables are keyed by a pair of views (a, b), got {key!r}")
            self.tables[key] = _table_pairs(table, *key)

    def __repr__(self) -> str:
        counts = ", ".join(f"{v}: {sum(not is_missing_label(x) for x in lab)}/{lab.size}"
                           for v, lab in self.labels.items())
        return f"LabelPrior(labelled rows {counts}, noise={self.noise}, tables: {sorted(self.tables) or 'none'})"

    def check(self, views) -> None:
        """Raise ``ValueError`` unless every hinted view and table names a view of ``views`` and the hints have
        one entry per row."""
        names = list(views.names)
        for view, values in self.labels.items():
            if view not in names:
                raise ValueError(f"label hints name view {view!r}, which does not exist; views are {names}")
            if values.shape != (views.n_samples[view],):
                raise ValueError(f"label hints of view {view!r}: expected shape ({views.n_samples[view]},), got "
                                 f"{values.shape}")
        for key in self.tables:
            for view in key:
                if view not in names:
                    raise ValueError(f"a label table names view {view!r}, which does not exist; views are {names}")
            if key[0] == key[1]:
                raise ValueError(f"a label table relates two different views, got {key!r}")

    def check_overlap(self, names) -> None:
        """Raise ``ValueError`` for two hinted views whose labels never correspond: no label in common (and no
        table between them), or a table that pairs none of the labels present; such a prior only pushes rows apart.
        """
        present = {v: {x for x in self.labels[v] if not is_missing_label(x)} for v in names if v in self.labels}
        hinted = [v for v in names if present.get(v)]
        for i, a in enumerate(hinted):
            for b in hinted[i + 1:]:
                pairs = self.tables.get((a, b))
                if pairs is None and (b, a) in self.tables:
                    pairs = {(lb, la) for la, lb in self.tables[(b, a)]}
                if pairs is None and not present[a] & present[b]:
                    raise ValueError(f"the label hints of views {a!r} and {b!r} have no label in common (e.g. "
                                     f"{sorted(map(str, present[a]))[:3]} and {sorted(map(str, present[b]))[:3]}); "
                                     "pass a table saying which labels correspond")
                if pairs is not None and not any(la in present[a] and lb in present[b] for la, lb in pairs):
                    raise ValueError(f"the label table between views {a!r} and {b!r} pairs none of the labels "
                                     "their hints carry")

    def reindexed(self, view: str, order) -> LabelPrior:
        """The same prior with the rows of ``view`` reordered: new row k is old row ``order[k]``."""
        labels = dict(self.labels)
        if view in labels:
            labels[view] = labels[view][np.asarray(order, np.int64)]
        out = LabelPrior(labels, self.noise)
        out.tables = dict(self.tables)
        return out

    def to_arrays(self) -> tuple[dict, dict]:
        """The prior as plain arrays and JSON-able metadata, for files that load without pickle
        (:meth:`from_arrays`): every label a code into one vocabulary, -1 for none."""
        values = [x for lab in self.labels.values() for x in lab if not is_missing_label(x)]
        values += [x for pairs in self.tables.values() for pair in pairs for x in pair]
        vocabulary = {x: k for k, x in enumerate(dict.fromkeys(values))}
        arrays = {f"labels/{k}": self._codes(view, vocabulary, self.labels[view].size)
                  for k, view in enumerate(self.labels)}
        for k, pairs in enumerate(self.tables.values()):
            arrays[f"tables/{k}"] = np.array([[vocabulary[la], vocabulary[lb]] for la, lb in pairs], np.int64)
        meta = {"noise": self.noise, "views": list(self.labels), "tables": [list(key) for key in self.tables],
                "vocabulary": [str(x) for x in vocabulary]}
        return arrays, meta

    @classmethod
    def from_arrays(cls, arrays: Mapping, meta: Mapping) -> LabelPrior:
        """The prior :meth:`to_arrays` wrote; labels come back as their text (as codes where two texts coincide),
        so every label corresponds to the same ones as before."""
        text = list(meta["vocabulary"])
        names = np.array(text if len(set(text)) == len(text) else range(len(text)), dtype=object)

        def decode(codes):
            codes = np.asarray(codes, np.int64)
            if codes.size and (codes.min() < -1 or codes.max() >= len(names)):
                raise ValueError("label prior arrays hold codes outside their vocabulary")
            return np.where(codes >= 0, names[np.maximum(codes, 0)], None)

        labels = {view: decode(arrays[f"labels/{k}"]) for k, view in enumerate(meta["views"])}
        tables = {tuple(key): [tuple(pair) for pair in decode(arrays[f"tables/{k}"]).reshape(-1, 2)]
                  for k, key in enumerate(meta["tables"])}
        return cls(labels, meta["noise"], tables)

    def _codes(self, view: str, vocabulary: dict, n_rows: int) -> np.ndarray:
        """Each row's label as its position in ``vocabulary`` (-1: no label, or not in it)."""
        values = self.labels.get(view)
        if values is None:
            return np.full(n_rows, -1, dtype=np.int64)
        return np.array([-1 if is_missing_label(x) else vocabulary.get(x, -1) for x in values], dtype=np.int64)

    def label_costs(self, a: str, b: str, n_a: int, n_b: int):
        r"""``(codes_a, codes_b, cost)``: each row's label code (-1 for none) and the cost
        :math:`-\log(K P(m \mid l))` of every (label of a, label of b), an array (K_a + 1, K_b + 1) whose last row
        and column (code -1: no label) are 0. Oriented as given: a's labels are the channel's input."""
        present = {v: [x for x in self.labels.get(v, ()) if not is_missing_label(x)] for v in (a, b)}
        if (a, b) in self.tables:
            pairs = self.tables[(a, b)]
        elif (b, a) in self.tables:
            pairs = {(lb, la) for la, lb in self.tables[(b, a)]}
        else:  # same-label form: the identity on both views' labels
            pairs = {(x, x) for x in {*present[a], *present[b]}}
        vocab_a = {x: k for k, x in enumerate(dict.fromkeys([*present[a], *(la for la, _ in pairs)]))}
        vocab_b = {x: k for k, x in enumerate(dict.fromkeys([*present[b], *(lb for _, lb in pairs)]))}
        K = len(vocab_b)
        cost = np.zeros((len(vocab_a) + 1, K + 1))  # [K_a + 1, K_b + 1]
        corresponds = np.zeros((len(vocab_a), K), dtype=bool)
        for la, lb in pairs:
            corresponds[vocab_a[la], vocab_b[lb]] = True
        eps = self.noise
        for la, row in enumerate(corresponds):
            t = int(row.sum())
            if 0 < t < K:  # otherwise the channel is uniform: cost 0
                cost[la, :K] = -np.log(K * np.where(row, (1.0 - eps) / t, eps / (K - t)))
        return self._codes(a, vocab_a, n_a), self._codes(b, vocab_b, n_b), cost
