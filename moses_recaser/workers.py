"""What every worker process of a pool does first (recasing in streaming.py, counting in stats/counting.py)."""

from __future__ import annotations

import signal


def worker_signals() -> None:
    """Leave interruptions to the parent: it handles Ctrl-C and cleans up, and it ends the pool with SIGTERM,
    on which a worker dies at once. The handler a forked worker inherits (``cli.common``: SIGTERM raises
    KeyboardInterrupt) would raise wherever the worker happens to be: a traceback on stderr, which EMS reads as
    a crash, or a worker blocked on the pool's queue lock."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
