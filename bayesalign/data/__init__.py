"""Data and result types shared by every method: Views, Correspondence, AlignmentProblem,
LatentEmbedding, Alignment. This layer imports nothing else of the package."""

from .alignment import Alignment
from .correspondence import Correspondence
from .embedding import LatentEmbedding
from .label_prior import LabelPrior
from .problem import AlignmentProblem
from .views import InputTypeError, Views, check_view

__all__ = ["Alignment", "AlignmentProblem", "Correspondence", "InputTypeError", "LabelPrior", "LatentEmbedding",
           "Views", "check_view"]
