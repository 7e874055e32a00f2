"""The console commands (``moses-recaser``, ``moses-recaser-ems``): flags mapped onto the library, one line per error.

Two failures can come while a command is still importing its modules, before ``common.run`` takes over once the
command line is parsed; each ends it with one line here, as it would later: an address-space limit (``ulimit -v``)
too small to load numpy, which OpenBLAS would end with exit 1 (exit 2, checked before any further import), and an
interrupt (exit 130).
"""

import os
import resource
import signal
import sys
import threading

_PROG = "moses-recaser-ems" if os.path.basename(sys.argv[0] or "").startswith("moses-recaser-ems") else "moses-recaser"
# numpy with its OpenBLAS maps 109 MiB of address space (numpy 2, x86-64); under 100 MiB OpenBLAS cannot allocate
# its buffer and exits the process itself, before any Python handler could say why
START_SPACE = 128 << 20


_space = resource.getrlimit(resource.RLIMIT_AS)[0]
if _space != resource.RLIM_INFINITY and _space < START_SPACE:  # (before the next import, which may not fit)
    sys.stderr.write(
        f"{_PROG}: error: out of memory: ulimit -v allows {_space >> 20} MiB, less than the {START_SPACE >> 20} MiB "
        "this command needs to load numpy\n"
    )
    os._exit(2)

from moses_recaser.io.outputs import ENDING_SIGNALS  # noqa: E402 - after the check above


def _interrupted_while_starting(signum: int, frame: object) -> None:
    sys.stderr.write(f"{_PROG}: interrupted; no output was written\n")
    os._exit(130)


if threading.current_thread() is threading.main_thread():
    for _sig in ENDING_SIGNALS:
        if signal.getsignal(_sig) is not signal.SIG_IGN:  # (a background job's ignored SIGINT stays ignored)
            signal.signal(_sig, _interrupted_while_starting)
