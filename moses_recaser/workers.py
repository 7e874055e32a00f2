"""What every worker process of a pool does first (recasing in streaming.py, counting in stats/parallel.py)."""

from __future__ import annotations

import signal

from moses_recaser.errors import RecaserError

# far above any machine this runs on; a larger number is a typo, and would fork processes until memory runs out
MAX_WORKERS = 256


def check_workers(n: int, what: str) -> int:
    """``n`` processes for ``what`` (a flag's name), refused unless 1 <= n <= MAX_WORKERS."""
    if not 1 <= n <= MAX_WORKERS:
        raise RecaserError(f"{what} must be between 1 and {MAX_WORKERS} (processes), not {n}")
    return n


def worker_signals() -> None:
    """Leave interruptions to the parent: it handles Ctrl-C and cleans up, and it ends the pool with SIGTERM,
    on which a worker dies at once. The handler a forked worker inherits (``cli.common``: SIGTERM raises
    KeyboardInterrupt) would raise wherever the worker happens to be: a traceback on stderr, which EMS reads as
    a crash, or a worker blocked on the pool's queue lock."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
