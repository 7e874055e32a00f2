"""The one signature builder: every setting that changes a result, as one string printed beside it.

Like sacrebleu's ``nrefs:1|case:mixed|tok:13a|...``: ``moses-recaser:VERSION|key:value|...``. Models record
theirs (``train``, ``stats``, ``merge``) and ``eval`` prints one with its scores.
"""

from __future__ import annotations

from moses_recaser._version import __version__


def signature(*parts: tuple[str, str]) -> str:
    """``moses-recaser:VERSION`` then each ``key:value`` in order, joined by ``|``."""
    return "|".join([f"moses-recaser:{__version__}", *(f"{key}:{value}" for key, value in parts)])
