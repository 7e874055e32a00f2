"""The memory setting (``--memory``, ``-S`` as lmplz spells it): what the whole process tree of a run that counts
may hold, and how its parts share it.

``parse_memory`` reads a size as lmplz's ``-S`` does: ``2G``, ``500M``, ``1.5g``, a number of bytes, or a share
of physical memory (``50%``; of the cgroup's limit when that is lower). A ``Memory`` is a number of bytes that
a part of the work may hold beyond what its process held when it started that part (its ``base``); the part
splits it (``split``) among processes and tables. The counters hold sorted runs up to their share and spill
them to disk (``runs``); whatever must stay in memory (the vocabularies, the Kneser-Ney estimate's lower
orders) is checked against what is left, and a run that cannot fit says which setting to raise.

The process's resident size (``rss``) is read from ``/proc``; ``release`` hands freed heap pages back to the
system (glibc's ``malloc_trim``), so that a spill's transient arrays do not stay resident.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import resource
from dataclasses import dataclass

from moses_recaser.io.errors import RecaserError
from moses_recaser.io.lines import read_system

DEFAULT_MEMORY = "2G"
WORKING_SHARE = 0.25  # of the setting, for the merges and key-set packing after counting (``Memory.working``)
# the least a run may be given: the interpreter with numpy and the package take about 100 MiB, and a run's
# vocabularies and counters about as much again before the estimate gets its share (at 128M, a 13k-sentence
# corpus was counted whole, then refused); a smaller setting is surely a slip
FLOOR = 256 << 20
LIBRARY_FLOOR = 4 << 20  # bytes given as a number: at least this (a budget that spills every chunk)
# What a training's process tree holds whatever the setting, which bounds the counts only: each process's base
# (interpreter, numpy, scipy), the model it wrote (mapped), the LM's estimate, the dev lattices, the CRF fit and,
# with jobs > 1, each CRF worker (an interpreter of its own). It grows slower than the text, as the word types and
# n-grams do. Measured on make_corpus.py corpora (docs/performance.md#the-memory-setting-as-a-promise): 554 and
# 650-676 MiB with --jobs 1 at 78 and 311 MiB of training text, 786 and 882 with --jobs 2. ``training_need``
# bounds those from above; a setting below it less SLACK is refused before any work (``check_training``).
SLACK = 100 << 20
TRAIN_BASE = 520 << 20
TRAIN_ROOT = 12 << 20  # per square root of the training text's MiB
CRF_WORKER = 128 << 20  # each, with jobs > 1 (118 MiB measured)
_SIZE = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*([bkmgtp%]?)(?:i?b)?", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}


def physical_memory() -> int:
    """Bytes of memory this process can have: MemTotal, or the cgroup's limit when that is lower."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        text = (read_system(path) or "").strip()
        if text.isdigit():
            total = min(total, int(text))
    return total


def parse_memory(text: str) -> int:
    """Bytes of a size as lmplz's -S takes it: ``2G``, ``500M``, ``1.5g``, ``4096`` (bytes) or ``50%`` (of
    physical memory); at least FLOOR (the setting ``memory``)."""
    m = _SIZE.fullmatch(text.strip())
    if m is None:
        raise RecaserError(f"`memory` must be a size such as 2G, 500M or 50%, not {text!r}")
    number, unit = float(m.group(1)), m.group(2).lower()
    value = int(number * physical_memory() / 100) if unit == "%" else int(number * _UNITS[unit])
    if value < FLOOR:
        raise RecaserError(f"`memory` {text} is too small: a run needs at least {FLOOR >> 20}M")
    if value > physical_memory():  # (a bound the machine cannot reach bounds nothing)
        logging.getLogger("moses_recaser").warning(
            "`memory` %s is more than this machine has (%s): the counts are held in memory, which may run out",
            text,
            mib(physical_memory()),
        )
    return value


# what loading scipy adds to the address space (its own OpenBLAS and its buffers: 121 MiB measured, scipy 1.x):
# OpenBLAS, short of it under ``ulimit -v``, retries for ever
SCIPY_SPACE = 160 << 20


def check_address_space(need: int, what: str) -> None:
    """A MemoryError now if the address-space limit (``ulimit -v``) leaves less than ``need`` bytes beside what
    this process maps: before loading a library that, short of them, would not raise one."""
    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    try:
        mapped = int((read_system("/proc/self/statm") or "").split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, IndexError):
        return
    if limit != resource.RLIM_INFINITY and limit - mapped < need:
        raise MemoryError(f"{what} needs {mib(need)} more address space than ulimit -v leaves")


def rss() -> int:
    """This process's resident set size, in bytes (0 where /proc is not there)."""
    try:
        return int((read_system("/proc/self/statm") or "").split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, IndexError):
        return 0


@functools.cache
def _libc() -> object:
    """The process's own symbols, libc's among them (None where they cannot be had)."""
    import ctypes  # (here: a run that never calls libc does not import it)

    try:
        return ctypes.CDLL(None)
    except OSError:
        return None


def release() -> None:
    """Give the heap's free pages back to the system (glibc's malloc_trim; elsewhere nothing)."""
    trim = getattr(_libc(), "malloc_trim", None)
    if trim is not None:
        trim(0)


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # mallopt's parameter numbers (glibc's malloc.h)
MMAP_THRESHOLD = 1 << 20


def map_large_blocks() -> None:
    """Have glibc's malloc map every block of MMAP_THRESHOLD bytes or more (numpy's arrays) and unmap it when it is
    freed (elsewhere nothing). Left to itself, malloc raises that threshold up to 32 MiB after the first large
    block is freed, and the arrays below it come from a heap that fragments: merging sorted runs, whose block
    sizes vary from round to round, then held gigabytes of freed arrays resident until the merge ended. The heap's
    free top goes back to the system past glibc's default 128 KiB, also after ``keep_freed_blocks``."""
    _mallopt((M_MMAP_THRESHOLD, MMAP_THRESHOLD), (M_TRIM_THRESHOLD, 128 << 10))


def keep_freed_blocks() -> None:
    """Have glibc's malloc keep freed blocks of up to 32 MiB for the next ones (and up to 64 MiB free at the top of
    its heap) from the start, as it does by itself once the process has freed a block that large (elsewhere
    nothing). A fresh process otherwise maps each large array anew and unmaps it when it is freed: recasing
    newstest2014 took 36k page faults where 22k do, 0.07 s of system time in 1.6 s."""
    _mallopt((M_MMAP_THRESHOLD, 32 << 20), (M_TRIM_THRESHOLD, 64 << 20))


def _mallopt(*settings: tuple[int, int]) -> None:
    set_option = getattr(_libc(), "mallopt", None)
    if set_option is not None:
        for option, value in settings:
            set_option(option, value)


def training_need(text_bytes: int, jobs: int) -> int:
    """Bytes a training's process tree holds whatever the setting, for ``text_bytes`` of training text."""
    root = (max(text_bytes, 0) / (1 << 20)) ** 0.5
    return TRAIN_BASE + int(TRAIN_ROOT * root) + (CRF_WORKER * jobs if jobs > 1 else 0)


def mib(n: int) -> str:
    return f"{n / (1 << 20):,.0f} MiB"


@dataclass(frozen=True)
class Memory:
    """Bytes a part of the work may hold beyond its process's base; ``setting`` is the flag's text, for
    messages."""

    bytes: int
    setting: str = DEFAULT_MEMORY

    @classmethod
    def from_setting(cls, setting: Memory | str | int | None) -> Memory:
        """The whole run's memory: a size as ``parse_memory`` reads it (default DEFAULT_MEMORY), or bytes."""
        if isinstance(setting, Memory):
            return setting
        if isinstance(setting, int) and not isinstance(setting, bool):
            if setting < LIBRARY_FLOOR:  # (bytes are the library's and the tests': spilling everything is allowed)
                least = LIBRARY_FLOOR >> 20
                raise RecaserError(f"`memory` of {setting} bytes is too small: give at least {least}M")
            return cls(setting, f"{setting >> 20}M")
        if setting is not None and not isinstance(setting, str):
            raise RecaserError(f"`memory` must be a size such as 2G, 500M or 50%, or bytes, not {setting!r}")
        text = DEFAULT_MEMORY if setting is None else setting
        return cls(parse_memory(text), text)

    @classmethod
    def unbounded(cls) -> Memory:
        """No limit: everything in memory (small inputs, tests)."""
        return cls(1 << 62, "unbounded")

    def check_training(self, text_bytes: int, jobs: int) -> None:
        """Refuse, before any work, a setting below what a training of ``text_bytes`` of text with ``jobs``
        processes needs (``training_need``) less SLACK, naming the least setting: at or above it, the whole
        process tree stays within the setting plus SLACK."""
        need = training_need(text_bytes, jobs)
        least = -(-(need - SLACK) // (10 << 20)) * 10  # MiB, rounded up to 10
        if self.bytes < least << 20:
            raise RecaserError(
                f"`memory` {self.setting} is below the least this training needs, {least}M (it holds about "
                f"{mib(need)} whatever the setting, with `jobs` {jobs} for {mib(text_bytes)} of training text, and "
                f"may pass the setting by {mib(SLACK)}): give at least {least}M"
            )

    def left(self) -> Memory:
        """What is left of the whole run's memory beside what this process holds now (at least 1 MiB: a run
        already over its setting spills all it can, and says so where something must fit in memory)."""
        return Memory(max(self.bytes - rss(), 1 << 20), self.setting)

    def working(self) -> Memory:
        """What a phase that sorts or merges files in blocks takes: what is left, at most a WORKING_SHARE of the
        setting (larger blocks are not faster there, and the run's peak stays the counters')."""
        return Memory(min(self.left().bytes, int(self.bytes * WORKING_SHARE)), self.setting)

    def split(self, parts: int, less: int = 0) -> Memory:
        """An equal share of what is left after ``less`` bytes, for each of ``parts``."""
        return Memory(max((self.bytes - less) // max(parts, 1), 0), self.setting)

    def rows(self, row_bytes: int, least: int = 1 << 12) -> int:
        """How many rows of ``row_bytes`` fit (at least ``least``)."""
        return max(self.bytes // max(row_bytes, 1), least)

    def need(self, nbytes: int, what: str) -> None:
        """Refuse, in one line naming the setting, what cannot fit."""
        if nbytes > self.bytes:
            raise RecaserError(
                f"{what} needs {mib(nbytes)} in memory, more than `memory` {self.setting} leaves it "
                f"({mib(self.bytes)}): give more with `memory`"
            )
