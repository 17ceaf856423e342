"""MAD, Manifold Alignment Determination (Damianou, Lawrence & Ek, 2016): the estimator and its parts.

=======================  ====================================================================
``MAD``                  the estimator: a multi-view GP-LVM fitted on the problem, its posteriors matched
``MADEnsemble``          several MAD fits of one problem pooled into one match distribution
``MatchPosteriors``      two views' posteriors as a cost compares them: what every matcher reads
``save`` / ``load``      a fitted MAD or MADEnsemble as one ``.npz`` file, never pickled
=======================  ====================================================================

Modules, one job each: ``estimator``, ``training`` (the anchors only or every row), ``anchors`` (anchor pairs
placed as unaligned rows), ``posteriors`` and ``calibration`` (matching, the temperature fitted on the anchors),
``coupling`` (q(P), the posterior over the unaligned rows' matching), ``refinement`` (rounds of q(P) and q(X),
``refinement.ROUNDS`` of them: none by default), ``self_training``, ``zero_anchor``, ``streaming``, ``ensemble``,
``files``.
"""

from .calibration import MIN_CALIBRATION_EVIDENCE, MIN_CALIBRATION_PAIRS, TEMPERATURES
from .ensemble import SCALINGS, MADEnsemble
from .estimator import ENGINES, MAD, MIN_RESOLUTION, TRAININGS
from .files import MADFileError, load, save
from .posteriors import AnchorPool, MatchPosteriors
from .training import MIN_ANCHORS, STARTS

__all__ = ["ENGINES", "MAD", "MADEnsemble", "MADFileError", "MIN_ANCHORS", "MIN_CALIBRATION_EVIDENCE",
           "MIN_CALIBRATION_PAIRS", "MIN_RESOLUTION", "SCALINGS", "STARTS", "TEMPERATURES", "TRAININGS", "AnchorPool",
           "MatchPosteriors", "load", "save"]
