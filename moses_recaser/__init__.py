"""moses-recaser: bilingual CRF recasing of machine-translation output (Wang, Knight & Marcu 2006)."""

from .errors import RecaserError
from .triples import Triple

__version__ = "0.1.0"

__all__ = ["RecaserError", "Triple", "__version__"]
