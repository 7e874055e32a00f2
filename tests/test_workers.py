"""workers.Workers: forked processes answering tasks in order, ended without blocking whatever happened to them."""

from __future__ import annotations

import os
import signal
import time

import pytest

from moses_recaser.core.workers import Workers
from moses_recaser.io.errors import RecaserError


def _slow_square(x: int) -> int:
    time.sleep(0.01 * (x % 3))  # uneven work: replies come back out of order, map must give them in order
    if x == 13:
        raise ValueError("thirteen")
    return x * x


@pytest.mark.parametrize("n", [1, 2, 3])
def test_replies_come_in_the_order_of_the_tasks(n):
    with Workers(n, _slow_square) as workers:
        assert list(workers.map(range(12))) == [x * x for x in range(12)]
        assert list(workers.map([])) == []
        assert list(workers.map([5, 4])) == [25, 16]  # a second map on the same workers
    assert workers.exit_codes == [0] * n


def test_a_workers_exception_is_raised_here_and_the_others_are_ended():
    got = []
    with pytest.raises(ValueError, match="thirteen"), Workers(2, _slow_square) as workers:
        for y in workers.map(range(20)):
            got.append(y)
    assert got == [x * x for x in range(13)]
    assert None not in workers.exit_codes


def test_a_killed_worker_is_an_error_not_a_hang():
    """A worker killed from outside (out of memory, a signal to the process group): the next reply it owes is a
    RecaserError, and leaving the block reaps every worker at once."""
    start = time.monotonic()
    with pytest.raises(RecaserError, match="exit code -9"), Workers(2, _slow_square) as workers:
        for k, _ in enumerate(workers.map(range(1000))):
            if k == 3:
                for pid in workers.pids:
                    os.kill(pid, signal.SIGKILL)
    assert time.monotonic() - start < 30
    assert workers.exit_codes == [-9, -9]


def test_stopping_early_ends_the_workers():
    """A consumer that stops reading (``| head``, an error in its own loop) closes the generator: the workers
    are killed and reaped, none left running."""
    with Workers(2, _slow_square) as workers:
        replies = workers.map(iter(range(10**6)))
        assert next(replies) == 0
        replies.close()
    assert None not in workers.exit_codes


def _orphan_workers(report: int) -> None:
    """In a child: fork two workers, give one a task, write their pids to ``report``, and end at once, without
    the clean-up that kills them (as when a second interrupt cuts it short, or the process is killed)."""
    workers = Workers(2, _slow_square)
    assert next(workers.map([2])) == 4
    os.write(report, " ".join(map(str, workers.pids)).encode())
    os._exit(0)


def test_workers_whose_parent_is_gone_end_by_themselves():
    """Each worker held both ends of its own pipe, so it never read the end of it: a Ctrl-C during
    ``train --jobs 2`` whose clean-up a second signal cut short left two orphans waiting for a task for ever,
    holding the caller's stderr open (``... | tee log`` never ended)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        _orphan_workers(write)
    os.close(write)
    pids = [int(p) for p in os.read(read, 100).split()]
    os.close(read)
    os.waitpid(pid, 0)
    assert len(pids) == 2

    def alive(p: int) -> bool:
        try:
            with open(f"/proc/{p}/stat") as fh:
                return fh.read().rsplit(")", 1)[1].split()[0] != "Z"  # (a zombie has ended)
        except FileNotFoundError:
            return False

    deadline = time.monotonic() + 20
    while any(map(alive, pids)) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [p for p in pids if alive(p)]
    for p in left:
        os.kill(p, signal.SIGKILL)
    assert not left
