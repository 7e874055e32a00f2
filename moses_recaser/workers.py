"""What every worker process of a pool does first (recasing in streaming.py, counting in stats/parallel.py)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from moses_recaser.errors import RecaserError

T = TypeVar("T")

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
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})  # held back by ``forking``: it ends us now


@contextlib.contextmanager
def forking() -> Iterator[None]:
    """Hold SIGTERM back while a pool forks its workers (each unblocks it in ``worker_signals``). A pool ended at
    once (an input error) sends SIGTERM to workers that may not have run ``worker_signals`` yet: caught by the
    Python handler they inherited, the signal was dropped as the child reset its signal state after the fork,
    and the worker then waited on the pool's queue for ever, the parent joining it (seen once in the test
    suite). Blocked, it stays pending until the default action is set, and then ends the worker."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def in_child(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` in a forked process of its own, its result (or its exception) sent back and returned (raised)
    here: what it held, the heap's fragments included, goes back to the system when it ends. The child may fork
    workers of its own. A child that dies without a word (killed, out of memory) is a RecaserError."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(send, fn, args))
    proc.start()
    send.close()
    try:
        ok, value = receive.recv()
    except EOFError:
        proc.join()
        raise RecaserError(f"a worker process ended with exit code {proc.exitcode} (out of memory?)") from None
    except BaseException:
        proc.terminate()
        proc.join()
        raise
    proc.join()
    if not ok:
        raise value
    return value


def _child(send: Any, fn: Callable[..., object], args: tuple[Any, ...]) -> None:
    """In the child: run, send back what came of it, and leave without the parent's exit handlers."""
    try:
        out: tuple[bool, object] = (True, fn(*args))
    except BaseException as exc:  # noqa: BLE001 (raised in the parent)
        out = (False, exc)
    try:
        send.send(out)
    finally:
        send.close()
        os._exit(0)


def single_threaded_blas() -> None:
    """One BLAS thread, when numpy is not loaded yet; every command calls this first (so this module must not
    import numpy). The project's parallelism is ``--jobs``; its matrix products are small, and OpenBLAS's extra
    threads spin between calls: on 2 cores they took 0.6 s of CPU from a 0.9 s recasing run, and doubled the
    quick start's CRF fit (91 s against 49 s). Their number also changes the sums' rounding, so with it the
    fitted weights would depend on the machine's core count."""
    if "numpy" not in sys.modules:
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(var, "1")
