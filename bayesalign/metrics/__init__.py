"""Evaluation of alignments and embeddings against a known truth.

Two families:

* **matchings** (an :class:`~bayesalign.data.Alignment`, or a permutation array
  ``perm[i] = j`` with -1 for unmatched): :func:`kendall_tau_distance`,
  :func:`matching_accuracy`, and, for matchers that give match probabilities,
  :func:`expected_calibration_error`, :func:`brier_score`, :func:`precision_at_coverage`
  (all of them at once on an alignment's candidate rows: :func:`evaluate`);
* **latent spaces** (a :class:`~bayesalign.data.LatentEmbedding`, or an (n_a, n_b) cost or
  distance matrix): :func:`top_k_accuracy`, :func:`mean_reciprocal_rank`, :func:`foscttm`,
  :func:`label_transfer_accuracy`.

The truth is a :class:`~bayesalign.data.Correspondence`, an
:class:`~bayesalign.data.AlignmentProblem` (its truth between the two views is used), or a
permutation array ``truth[i] = j`` (-1: row i of a has no true partner). When a *problem* is
given, every metric evaluates only the truth pairs whose rows are unaligned (not anchors) in
both views, and retrieval metrics search only among the unaligned rows: anchors are given,
not found. Distances in a latent space are Euclidean in the embedding's shared dimensions,
computed in row blocks (memory O(chunk * N), never an N x N matrix).

Modules: :mod:`~bayesalign.metrics.matchings` (matchings, and :func:`evaluate`),
:mod:`~bayesalign.metrics.calibration` (match probabilities), :mod:`~bayesalign.metrics.retrieval`
(latent spaces).
"""

from .calibration import brier_score, expected_calibration_error, precision_at_coverage
from .matchings import evaluate, kendall_tau_distance, matching_accuracy
from .retrieval import foscttm, label_transfer_accuracy, mean_reciprocal_rank, top_k_accuracy

__all__ = ["brier_score", "evaluate", "expected_calibration_error", "foscttm", "kendall_tau_distance",
           "label_transfer_accuracy", "matching_accuracy", "mean_reciprocal_rank", "precision_at_coverage",
           "top_k_accuracy"]
