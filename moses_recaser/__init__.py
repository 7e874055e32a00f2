"""moses-recaser: bilingual CRF recasing of machine-translation output (Wang, Knight & Marcu 2006).

    >>> from moses_recaser import Recaser
    >>> r = Recaser.load("model/")                                      # doctest: +SKIP
    >>> r.recase("the united states .", source="les États-Unis .", alignment="0-0 1-1 1-2 2-3")  # doctest: +SKIP
    'The United States .'

``Recaser`` and ``train`` load numpy and the model code when first used, so that ``import moses_recaser``
stays cheap (and the command line can set up BLAS threads before numpy loads).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from moses_recaser._version import __version__
from moses_recaser.core.triples import Triple
from moses_recaser.io.errors import RecaserError

if TYPE_CHECKING:
    from moses_recaser.api import Bitext, DecoderOutput, Recaser, RunOptions, TrainedModel, train
    from moses_recaser.io.lines import read_lines
    from moses_recaser.model.settings import TrainSettings
    from moses_recaser.moses.trace import TraceOptions

__all__ = [
    "Bitext",
    "DecoderOutput",
    "Recaser",
    "RecaserError",
    "RunOptions",
    "TraceOptions",
    "TrainSettings",
    "TrainedModel",
    "Triple",
    "__version__",
    "read_lines",
    "train",
]

_LAZY = {
    "Recaser": "moses_recaser.api",
    "train": "moses_recaser.api",
    "TrainedModel": "moses_recaser.api",
    "Bitext": "moses_recaser.api",
    "DecoderOutput": "moses_recaser.api",
    "RunOptions": "moses_recaser.api",
    "TrainSettings": "moses_recaser.model.settings",
    "TraceOptions": "moses_recaser.moses.trace",
    "read_lines": "moses_recaser.io.lines",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'moses_recaser' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
