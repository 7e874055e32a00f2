"""The package's one error type for bad user input, and how its messages spell a setting."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar

# a setting's spelling where the face in use does not spell it --name-with-dashes (``spelled_as``)
_SPELLINGS: ContextVar[Mapping[str, str]] = ContextVar("spellings", default={})


def flag_of(name: str) -> str:
    """The setting ``name`` as the command line in use spells it: ``--dev-size`` (``moses-recaser``, whose flags
    the library's errors name too), or ``-dev-size`` under ``moses-recaser-ems`` (``spelled_as``)."""
    return _SPELLINGS.get().get(name) or "--" + name.replace("_", "-")


@contextlib.contextmanager
def spelled_as(spellings: Mapping[str, str]) -> Iterator[None]:
    """Within the block (and in processes forked there), errors name these settings so: a console command whose
    flags are not ``moses-recaser``'s (EMS's ``-cores`` for ``jobs``) runs the library inside one."""
    token = _SPELLINGS.set(dict(spellings))
    try:
        yield
    finally:
        _SPELLINGS.reset(token)


class RecaserError(Exception):
    """Bad input, a bad model or a bad setting.

    Carries the file, the 1-based line number (0 when the problem is not on a
    line) and the reason, so that the CLI can print ``FILE:LINE: reason``.
    """

    def __init__(self, reason: str, path: str | None = None, line: int = 0) -> None:
        self.reason = reason
        self.path = path
        self.line = line
        super().__init__(self.location() + reason)

    def __reduce__(self) -> tuple[type, tuple[str, str | None, int]]:
        """Pickled with its parts (from a process of its own, it is raised here as it was there)."""
        return (RecaserError, (self.reason, self.path, self.line))

    def location(self) -> str:
        if self.path is None:
            return ""
        if self.line:
            return f"{self.path}:{self.line}: "
        return f"{self.path}: "

    def at(self, path: str | None, line: int) -> RecaserError:
        """The same reason, placed at a file and line (for errors raised by line parsers)."""
        return RecaserError(self.reason, path, line)
