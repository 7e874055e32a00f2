"""What every worker process of a pool does first (recasing in streaming.py, counting in stats/parallel.py)."""

from __future__ import annotations

import os
import signal
import sys

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


def single_threaded_blas() -> None:
    """One BLAS thread, when numpy is not loaded yet; every command calls this first (so this module must not
    import numpy). The project's parallelism is ``--jobs``; its matrix products are small, and OpenBLAS's extra
    threads spin between calls: on 2 cores they took 0.6 s of CPU from a 0.9 s recasing run, and doubled the
    quick start's CRF fit (91 s against 49 s). Their number also changes the sums' rounding, so with it the
    fitted weights would depend on the machine's core count."""
    if "numpy" not in sys.modules:
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(var, "1")
