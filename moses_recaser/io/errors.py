"""The package's one error type for bad user input.

Its messages name the library's arguments and settings in backquotes (```dev_size```), as ``train`` and ``Recaser``
take them; a command line spells each as its flag (``--dev-size``, ``-dev-size``) when it prints the message.
"""

from __future__ import annotations

from typing import Any


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
        where = self.path or "''"  # an empty name given (-o ''), shown as the shell would spell it
        return f"{where}:{self.line}: " if self.line else f"{where}: "

    def at(self, path: str | None, line: int) -> RecaserError:
        """The same reason, placed at a file and line (for errors raised by line parsers)."""
        return RecaserError(self.reason, path, line)


def of_kind(name: str, value: Any, kind: type) -> Any:
    """``value``, which must be a ``kind`` (a record of the library's: ``Bitext``, ``RunOptions``): otherwise a
    RecaserError naming the argument, not an AttributeError midway."""
    if not isinstance(value, kind):
        raise RecaserError(f"`{name}` must be a {kind.__name__}, not {type(value).__name__}")
    return value
