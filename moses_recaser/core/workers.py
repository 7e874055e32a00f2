"""What every worker process of a pool does first (recasing in streaming.py, counting in stats/parallel.py)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NoReturn, TypeVar

from moses_recaser.io.errors import RecaserError
from moses_recaser.io.outputs import ENDING_SIGNALS

T = TypeVar("T")

# far above any machine this runs on; a larger number is a typo, and would fork processes until memory runs out
MAX_WORKERS = 256


def check_workers(n: int) -> int:
    """``n`` processes (the setting ``jobs``), refused unless an int with 1 <= n <= MAX_WORKERS."""
    if not isinstance(n, int) or isinstance(n, bool):  # a library caller's "2" or 2.0
        raise RecaserError(f"`jobs` must be a whole number of processes, not {n!r}")
    if not 1 <= n <= MAX_WORKERS:
        raise RecaserError(f"`jobs` must be between 1 and {MAX_WORKERS} (processes), not {n}")
    return n


# what ends a worker at once (a hang-up of the terminal, a kill sent to the process group); SIGINT is the parent's
_ENDING = set(ENDING_SIGNALS) - {signal.SIGINT}


def worker_signals() -> None:
    """Leave interruptions to the parent: it handles Ctrl-C, cleans up and kills its workers; a SIGTERM that
    reaches a worker (sent to the whole process group) ends it at once. The handler a forked worker inherits
    (``cli.common``: SIGTERM raises KeyboardInterrupt) would raise wherever the worker happens to be: a
    traceback on stderr, which EMS reads as a crash."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for sig in _ENDING:
        if signal.getsignal(sig) is not signal.SIG_IGN:  # (ignored in the parent, as under nohup: so here)
            signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _ENDING)  # held back by ``forking``: one pending ends us now


@contextlib.contextmanager
def forking() -> Iterator[None]:
    """Hold SIGTERM back while workers are forked (each unblocks it in ``worker_signals``). A SIGTERM that reaches
    a worker before it has run ``worker_signals`` (sent to the process group, or, with multiprocessing.Pool, by
    a pool ended at once) was caught by the Python handler it inherited and dropped as the child reset its
    signal state after the fork: the worker went on, and once waited on a pool's queue for ever, the parent
    joining it (seen once in the test suite). Blocked, it stays pending until the default action is set, and
    then ends the worker."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _ENDING)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def in_order(jobs: int, fn: Callable[[Any], T], tasks: Iterable[Any]) -> Iterator[T]:
    """``fn`` of each task, in order: in this process for ``jobs`` 1, else in ``jobs`` ``Workers``."""
    if check_workers(jobs) == 1:
        yield from map(fn, tasks)
        return
    with Workers(jobs, fn) as workers:
        yield from workers.map(tasks)


class Workers:
    """``n`` forked processes, each calling ``fn`` on the tasks sent to it, one task in flight each; ``map`` gives
    the replies in the order of the tasks (the same output whatever ``n`` is). There are no threads and no locks
    shared with the workers: leaving the ``with`` block on an error, an interrupt or a generator closed early
    kills the workers and reaps them, which cannot block. (``multiprocessing.Pool`` could: when a Ctrl-C or
    SIGTERM to the whole process group killed its workers first, ending the pool joined a thread blocked writing
    tasks to a pipe no worker would read again, or waited on a queue lock a killed worker held, and the run hung
    with its temporary output left behind.) Fork after what the workers need is loaded: they share its pages."""

    def __init__(self, n: int, fn: Callable[[Any], Any]) -> None:
        import multiprocessing as mp

        ctx = mp.get_context("fork")
        self._procs: list[Any] = []
        self._conns: list[Any] = []
        try:
            with forking():
                for _ in range(n):
                    here, there = ctx.Pipe()
                    # the worker closes this process's ends, its own included: once this process is gone, however
                    # it went (killed, or an interrupt that cut its clean-up short), the worker reads the end of
                    # its pipe and leaves; holding both ends, it waited for a task for ever (found by a Ctrl-C
                    # during ``train --jobs 2``: two orphans holding the caller's stderr open)
                    proc = ctx.Process(target=_serve, args=(there, fn, [*self._conns, here]), daemon=True)
                    proc.start()
                    there.close()
                    self._procs.append(proc)
                    self._conns.append(here)
        except BaseException:
            self.kill()
            raise

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, exc_type: object, *rest: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.kill()

    @property
    def pids(self) -> list[int]:
        return [proc.pid for proc in self._procs]

    @property
    def exit_codes(self) -> list[int | None]:
        """Each worker's exit code (None: still running), as ``multiprocessing.Process.exitcode`` gives it."""
        return [proc.exitcode for proc in self._procs]

    def map(self, tasks: Iterable[Any]) -> Iterator[Any]:
        """``fn(task)`` of each task, in order, the tasks sent round the workers as replies come back (a worker's
        exception is raised here; a worker that died is a RecaserError)."""
        busy: deque[int] = deque()  # the worker of each task in flight, oldest first
        for k, task in enumerate(tasks):
            j = k % len(self._conns)
            if len(busy) == len(self._conns):  # every worker has a task: the oldest is worker j's
                yield self._reply(busy.popleft())
            try:
                self._conns[j].send(task)
            except OSError:  # its end of the pipe closed: it died
                self._died(j)
            busy.append(j)
        while busy:
            yield self._reply(busy.popleft())

    def _reply(self, j: int) -> Any:
        try:
            ok, value = self._conns[j].recv()
        except (EOFError, OSError):
            self._died(j)
        if not ok:
            raise value
        return value

    def _died(self, j: int) -> NoReturn:
        self._procs[j].join()
        raise RecaserError(
            f"a worker process ended with exit code {self._procs[j].exitcode} (killed, or out of memory?)"
        ) from None

    def close(self) -> None:
        """Tell each worker to end, and reap it (one that does not end is killed)."""
        for conn in self._conns:
            with contextlib.suppress(OSError):
                conn.send(None)
        for proc in self._procs:
            proc.join(timeout=10)
        self.kill()

    def kill(self) -> None:
        """Kill the workers still running and reap them all (again, if a second interrupt, such as the SIGTERM
        that follows a Ctrl-C, cut the first pass short)."""
        try:
            self._kill()
        except KeyboardInterrupt:
            self._kill()
            raise

    def _kill(self) -> None:
        for proc in self._procs:
            if proc.exitcode is None:
                proc.kill()
        for proc in self._procs:
            proc.join()
        for conn in self._conns:
            conn.close()


def _serve(conn: Any, fn: Callable[[Any], Any], inherited: list[Any]) -> None:
    """In a worker: answer tasks until told to stop (None) or until the parent is gone (its end of the pipe
    closed)."""
    worker_signals()
    for other in inherited:  # the parent's ends of this worker's pipe and of those forked before: held here,
        other.close()  # they would not close when the parent ends
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        try:
            reply: tuple[bool, Any] = (True, fn(task))
        except Exception as exc:  # noqa: BLE001 (raised in the parent)
            reply = (False, exc)
        try:
            conn.send(reply)
        except OSError:
            return


def in_child(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` in a forked process of its own, its result (or its exception) sent back and returned (raised)
    here: what it held, the heap's fragments included, goes back to the system when it ends. The child may fork
    workers of its own. A child that dies without a word (killed, out of memory) is a RecaserError."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(send, fn, args, receive))
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


def _child(send: Any, fn: Callable[..., object], args: tuple[Any, ...], receive: Any) -> None:
    """In the child: run, send back what came of it, and leave without the parent's exit handlers. The parent's
    end is closed here: with the parent gone, sending a large result fails instead of waiting for ever."""
    receive.close()
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
