"""The console commands (``moses-recaser``, ``moses-recaser-ems``): flags mapped onto the library, one line per error.

An interrupt that comes while a command is still importing its modules ends it with one line, as one that comes
later does (``common.run`` takes over from here once the command line is parsed).
"""

import os
import signal
import sys
import threading

from moses_recaser.io.outputs import ENDING_SIGNALS


def _interrupted_while_starting(signum: int, frame: object) -> None:
    sys.stderr.write(f"{os.path.basename(sys.argv[0] or 'moses-recaser')}: interrupted; no output was written\n")
    os._exit(130)


if threading.current_thread() is threading.main_thread():
    for _sig in ENDING_SIGNALS:
        if signal.getsignal(_sig) is not signal.SIG_IGN:  # (a background job's ignored SIGINT stays ignored)
            signal.signal(_sig, _interrupted_while_starting)
