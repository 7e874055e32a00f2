"""moses-recaser: bilingual CRF recasing of machine-translation output (Wang, Knight & Marcu 2006)."""

from moses_recaser.errors import RecaserError
from moses_recaser.triples import Triple

__version__ = "0.1.0"

__all__ = ["RecaserError", "Triple", "__version__"]
