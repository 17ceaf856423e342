"""Assignment solvers, match probabilities, costs, and matching an embedding.

=========================  ==================================================================
``linear_assignment``      dense optimal assignment (Hungarian / Jonker-Volgenant), rectangular,
                           optional unmatched penalty ``cost_limit``
``sparse_assignment``      assignment on a sparse candidate graph (k nearest neighbours), with an
                           LP-duality certificate of optimality for the full dense problem
``assign``                 one entry point: a cost matrix or two point sets, dense or sparse
``myopic_assignment``      points of b arrive one by one and take the nearest free point of a
``sinkhorn``               entropic (soft) assignment in the log domain (POT), optional dustbin
``sparse_sinkhorn``        the same on candidate pairs only
``perturb_and_map``        samples of assignments under Gumbel-perturbed costs
``marginal_assignment``    the matching that maximises the expected number of correct pairs
``pairwise_costs``         dense (n_a, n_b) Euclidean / squared-Euclidean costs between points
``mean_distance_cost``     MAD's D**: squared distances between posterior means
``likelihood_cost``        match negative log-likelihood of two Gaussian posteriors
``fit_misfit``             how far two views put the same point beyond their posterior variances,
                           estimated on known pairs (the likelihood cost then adds it)
``match``                  match two views of a LatentEmbedding (every method's last step)
=========================  ==================================================================

Modules: :mod:`~bayesalign.matching.costs`, :mod:`~bayesalign.matching.given_costs`,
:mod:`~bayesalign.matching.assignment`, :mod:`~bayesalign.matching.myopic`,
:mod:`~bayesalign.matching.entropic`, :mod:`~bayesalign.matching.marginals`,
:mod:`~bayesalign.matching.matcher`. The unmatched penalty
is the same everywhere: with ``cost_limit = L``, leaving one point of either view unmatched
costs ``L / 2``, so a pair costlier than ``L`` is never worth making.
"""

from .assignment import DEFAULT_VIEWS, DENSE_LIMIT, assign, linear_assignment, sparse_assignment
from .costs import (
    METRICS,
    CrossViewMisfit,
    fit_misfit,
    knn_edges,
    likelihood_cost,
    mean_distance_cost,
    mutual_nearest,
    pair_costs,
    pairwise_costs,
    squared_distances,
)
from .entropic import SinkhornResult, sinkhorn, sinkhorn_marginals, sparse_sinkhorn
from .marginals import PerturbAndMapResult, marginal_assignment, perturb_and_map
from .matcher import (
    COSTS,
    MATCHERS,
    candidate_rows,
    match,
    nearest_cost_temperature,
    posterior_assignment,
    posterior_marginals,
    posterior_temperature,
    sinkhorn_log_marginals,
    sinkhorn_probabilities,
)
from .myopic import myopic_assignment

__all__ = ["COSTS", "DEFAULT_VIEWS", "DENSE_LIMIT", "MATCHERS", "METRICS", "CrossViewMisfit", "PerturbAndMapResult",
           "SinkhornResult", "fit_misfit",
           "assign", "candidate_rows", "knn_edges", "likelihood_cost",
           "linear_assignment", "marginal_assignment", "match", "mean_distance_cost", "mutual_nearest",
           "myopic_assignment", "nearest_cost_temperature", "pair_costs", "pairwise_costs", "perturb_and_map",
           "posterior_assignment", "posterior_marginals", "posterior_temperature", "sinkhorn", "sinkhorn_marginals",
           "sinkhorn_log_marginals", "sinkhorn_probabilities", "sparse_assignment", "sparse_sinkhorn",
           "squared_distances"]
