"""What both console commands share: running a parsed command, its one-line errors, and leaving fast."""

from __future__ import annotations

import argparse
import contextlib
import errno
import io
import logging
import os
import re
import shlex
import signal
import sys
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NoReturn

from moses_recaser import RecaserError, TraceOptions, __version__
from moses_recaser.cli.options import REQUIRED, add, finish_settings, require_after_parsing
from moses_recaser.core.workers import single_threaded_blas
from moses_recaser.io.checks import check_files
from moses_recaser.io.outputs import ENDING_SIGNALS, outputs_written
from moses_recaser.io.streams import STDOUT, in_place_lines, write_error

log = logging.getLogger("moses_recaser")


TRACE_FLAGS = ("trace_format", "nbest", "unknown_prefix", "unknown_suffix", "factor_delimiter", "xml_input")


def add_trace_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("decoder output format")
    for name in TRACE_FLAGS:
        add(g, name)  # type: ignore[arg-type]  # a group takes arguments as its parser does


def trace_options(args: argparse.Namespace) -> TraceOptions:
    return TraceOptions(
        unknown_prefix=args.unknown_prefix,
        unknown_suffix=args.unknown_suffix,
        factor_delimiter=args.factor_delimiter,
        xml_input=args.xml_input,
    )


def _verbosity(p: argparse.ArgumentParser, default: Any) -> None:
    p.add_argument("-q", "--quiet", action="store_true", default=default, help="only errors on stderr, no progress")
    p.add_argument("-v", "--verbose", action="store_true", default=default, help="debug logging")


class Parser(argparse.ArgumentParser):
    """argparse's parser, with a usage error as one line that points at ``--help`` (argparse prints the whole
    usage block first: 17 lines for ``train``), named by the program as every other error is."""

    def error(self, message: str) -> NoReturn:
        _error(self.prog.split()[0], f"{message} (see {self.prog} --help)")
        raise SystemExit(2)

    def parse_args(  # type: ignore[override]  # (argparse's overloads take any namespace)
        self, args: Sequence[str] | None = None, namespace: None = None
    ) -> argparse.Namespace:
        """argparse's, with arguments it does not know said by the subcommand given them (argparse says them
        by the top-level parser), an unknown option with its closest spelling there."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            parser = getattr(parsed, "subparser", self)
            parser.error(_unknown(parser, extras))
        return parsed

    def format_usage(self) -> str:
        with self._required_shown():
            return super().format_usage()

    def format_help(self) -> str:
        with self._required_shown():
            return super().format_help()

    @contextlib.contextmanager
    def _required_shown(self) -> Iterator[None]:
        """Settings added with ``required=True`` shown without brackets: argparse is not told they are required
        (``options.finish_settings`` checks them after parsing), only its usage."""
        names = {name for name, _ in self.get_default(REQUIRED) or []}
        shown = [a for a in self._actions if a.dest in names and not a.required and a.help != argparse.SUPPRESS]
        for a in shown:
            a.required = True
        try:
            yield
        finally:
            for a in shown:
                a.required = False


# options a release renamed, where the old name is unknown: said by the new one (a close spelling may mislead)
RENAMED = {"--alignment-mode": "--read"}


def _unknown(parser: argparse.ArgumentParser, extras: Sequence[str]) -> str:
    """The first unknown option of ``extras`` and the shown spelling of ``parser`` closest to it (``--modle``:
    ``--model``; ``-modle``: ``-model`` for EMS); argparse's words when they hold no option (a stray file)."""
    option = next((a.split("=", 1)[0] for a in extras if a.startswith("-") and a != "-"), None)
    if option is None:
        return "unrecognized arguments: " + " ".join(extras)
    shown = [o for a in parser._actions if a.help != argparse.SUPPRESS for o in a.option_strings]
    import difflib

    if RENAMED.get(option) in shown:
        return f"unknown option {option}: it is {RENAMED[option]} now"
    close = difflib.get_close_matches(option, shown, n=1)
    return f"unknown option {option}" + (f"; did you mean {close[0]}?" if close else "")


def command_parser(
    prog: str,
    description: str,
    commands: Sequence[tuple[str, str, Callable[[argparse.ArgumentParser], None], Callable[..., int]]],
) -> argparse.ArgumentParser:
    """A console command's parser: one subparser a row of ``commands`` (name, help, the function that adds its
    flags, the function that runs it). ``-q`` and ``-v`` go before or after the subcommand."""
    parser = Parser(prog=prog, description=description)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    _verbosity(parser, False)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, help_text, add_flags, func in commands:
        p = sub.add_parser(name, help=help_text, description=help_text)
        add_flags(p)
        require_after_parsing(p)
        _verbosity(p, argparse.SUPPRESS)  # after the subcommand too, without undoing one given before it
        p.set_defaults(func=func, subparser=p)
        _files_once(p)
    return parser


GIVEN = "_files_given"  # the namespace's record of _StoreOnce options met, removed after parsing


class _StoreOnce(argparse._StoreAction):
    """A file option given a second time is an error: argparse would keep the last, the first file silently
    unused (or not written). Counted by destination, so two spellings of one file option count too."""

    def __call__(self, parser, namespace, values, option_string=None):  # type: ignore[no-untyped-def]
        given = namespace.__dict__.setdefault(GIVEN, {})
        if self.dest in given:
            first = f"{given[self.dest]} {getattr(namespace, self.dest)}"
            parser.error(f"{first} and {option_string} {values}: a file is given once (the first would go unused)")
        given[self.dest] = option_string
        super().__call__(parser, namespace, values, option_string)


def _files_once(p: argparse.ArgumentParser) -> None:
    """Every plain single-value option among the command's files (its ``reads``, ``reads_if_there`` and
    ``writes`` defaults, and ``once``: directories it reads) taken at most once (``_StoreOnce``)."""
    files = {name for key in ("reads", "reads_if_there", "writes", "once") for name in p.get_default(key) or ()}
    for action in p._actions:  # argparse keeps no public list of them
        if type(action) is argparse._StoreAction and action.dest in files:
            action.__class__ = _StoreOnce


def long_options(parser: argparse.ArgumentParser) -> set[str]:
    """Every ``--name`` option of the parser and its subcommands."""
    found: set[str] = set()
    for action in parser._actions:  # argparse keeps no public list of them
        found.update(o for o in action.option_strings if o.startswith("--"))
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= long_options(sub)
    return found


def single_dash_long(argv: Sequence[str], known: set[str]) -> list[str]:
    """``-name`` read as ``--name`` where that is an option, as Moses' Perl scripts (Getopt::Long) read it:
    ``recase -model M`` works as EMS users type it. (argparse would read ``-model`` as ``-m odel``.)"""
    return [
        "-" + a if len(a) > 2 and a[0] == "-" and a[1] != "-" and "-" + a.split("=", 1)[0] in known else a for a in argv
    ]


# options whose value is another program's flags ("-mu", "-v 0", "-S 80%"): argparse would take such a value for
# an option of ours, so it is attached to its flag ("--decoder-settings=-mu"), where argparse takes it whole
FLAGS_AS_VALUE = ("--decoder-settings", "--lmplz-options")


def attached_values(argv: Sequence[str]) -> list[str]:
    """``argv`` with the value after each of FLAGS_AS_VALUE attached to it by ``=``. After ``FLAG --`` the rest of
    the line is the value, word by word as the shell split it (quoted again, ``shlex.join``): EMS's step script
    passes its decoder-settings so, unquoted, as it passes them to the decoder, whatever quotes they hold
    (``-weight-overwrite 'LM0= 0.5'``)."""
    out: list[str] = []
    it = iter(argv)
    for a in it:
        value = next(it, None) if a in FLAGS_AS_VALUE else None
        if value == "--":
            value = shlex.join(it)
        out.append(a if value is None else f"{a}={value}")
    return out


class _Formatter(logging.Formatter):
    """``PROG: message``, and ``PROG: warning: message`` for a warning (as a deprecated flag is said); the
    library's backquoted argument names spelled as the command's flags, as in its errors."""

    def __init__(self, prog: str, args: argparse.Namespace) -> None:
        super().__init__(f"{prog}: %(message)s")
        self.warning = logging.Formatter(f"{prog}: warning: %(message)s")
        self.args = args

    def format(self, record: logging.LogRecord) -> str:
        text = self.warning.format(record) if record.levelno == logging.WARNING else super().format(record)
        return with_flag_names(text, self.args) if "`" in text else text


def _setup_logging(args: argparse.Namespace, prog: str) -> None:
    level = logging.ERROR if args.quiet else (logging.DEBUG if args.verbose else logging.INFO)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter(prog, args))
    logging.basicConfig(level=level, handlers=[handler])


def check_destinations(args: argparse.Namespace) -> None:
    """The command's files checked before any work (``io.checks.check_files``): its ``reads``, ``writes``,
    ``reads_if_there``, ``rewrites`` and ``prints`` defaults name its arguments."""

    def named(key: str) -> dict[str, Any]:
        return {name: getattr(args, name) for name in getattr(args, key, ())}

    check_files(
        named("reads"),
        named("writes"),
        reads_if_there=named("reads_if_there"),
        rewrites=getattr(args, "rewrites", ()),
        binary=("lm", "shards"),  # need not be text: a KenLM binary, shard count files
        prints=getattr(args, "prints", False),
    )


def flag_for(args: argparse.Namespace, name: str) -> str:
    """The library's argument or setting ``name`` as the command spells it: its ``spellings`` (a library name the
    command calls otherwise: ``-corpus`` for ``target``), ``input_flags`` (a flag inside another's value), else the
    first long spelling of its option in the command's parser (``-in`` in moses-recaser-ems, ``--input`` here)."""
    given = {**getattr(args, "spellings", {}), **getattr(args, "input_flags", {})}.get(name)
    if given is not None:
        return str(given)
    parser = getattr(args, "subparser", None)
    for action in parser._actions if isinstance(parser, argparse.ArgumentParser) else []:
        if action.dest == name and action.option_strings:
            return next((o for o in action.option_strings if len(o) > 2), action.option_strings[0])
    return "--" + name.replace("_", "-")


def with_flag_names(message: str, args: argparse.Namespace) -> str:
    """A library message with each backquoted name (```dev_size```, errors.py) spelled as the command's flag."""
    return re.sub(r"`([a-z][a-z0-9_]*)`", lambda m: flag_for(args, m.group(1)), message)


def print_result(text: str) -> None:
    """A result line on stdout (a signature, a score); an error if stdout cannot take it."""
    if sys.stdout is None:
        raise RecaserError("standard output is closed", STDOUT)
    try:
        print(text)
    except BrokenPipeError:
        raise
    except OSError as exc:  # (unbuffered stdout, PYTHONUNBUFFERED, fails here rather than at the flush)
        raise write_error(exc, STDOUT) from None


def _flush_stdout() -> None:
    if sys.stdout is not None:
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise write_error(exc, STDOUT) from None


def _already_written(since: dict[str, int]) -> str:
    """How many lines the run wrote to each output written where it stands (``since``: the counts when it began),
    which no rename can undo; "" if none."""
    now = in_place_lines()
    return "; ".join(
        f"{n:,} line{'s' * (n != 1)} of output were already written to "
        + ("standard output" if name == STDOUT else name)
        for name, n in ((name, now[name] - since.get(name, 0)) for name in now)
        if n
    )


def _error(prog: str, message: str, *, since: dict[str, int] | None = None) -> None:
    """One line, whatever the message holds (a YAML parser's, say, spans several); with ``since``
    (``in_place_lines`` when the run began), the lines it already wrote where no rename can undo them."""
    already = _already_written(since) if since is not None else ""
    if already:
        message += f" ({already})"
    if sys.stderr is not None:
        print(
            f"{prog}: error: " + " ".join(part.strip() for part in message.splitlines() if part.strip()),
            file=sys.stderr,
        )


_CAME: list[int] = []  # the ending signal that began the interrupt


def _interrupt(signum: int, frame: object) -> None:
    """The first ending signal raises KeyboardInterrupt; those after it are let be, so that the cleanup it starts
    (scratch files removed, workers ended, the one line said) is not itself cut short by a second Ctrl-C. (Not
    SIG_IGN: Python reports a signal already on its way to a handler that became SIG_IGN, on stderr.)"""
    _CAME[:] = [signum]
    for sig in ENDING_SIGNALS:
        signal.signal(sig, _let_be)
    raise KeyboardInterrupt


def _let_be(signum: int, frame: object) -> None:
    """An ending signal after the first (``_interrupt``)."""


def _unraisable(hook: Any) -> None:
    """An interrupt raised where Python drops exceptions (a finalizer such as ``Popen.__del__``, with a traceback
    on stderr) is raised again after it: the run ends as it would have, not later or never."""
    if isinstance(hook.exc_value, KeyboardInterrupt) and _CAME:
        for sig in ENDING_SIGNALS:
            if signal.getsignal(sig) is _let_be:
                signal.signal(sig, _interrupt)
        # (sent from another thread, once this hook is done: raised in it, it would be dropped again)
        threading.Timer(0.01, os.kill, (os.getpid(), _CAME[0])).start()
    else:
        sys.__unraisablehook__(hook)


def run(argv: Sequence[str] | None, parser_factory: Callable[[], argparse.ArgumentParser], prog: str) -> int:
    """Parse, dispatch and turn every failure into one line on stderr: exit code 2 for bad input, a bad model,
    a bad setting or a fault of the system (a full disk, a read-only or unreadable file, memory), 3 for a bug
    (-v adds its traceback), 130 for an interruption."""
    single_threaded_blas()
    parser = parser_factory()
    shown = io.StringIO()  # what --help and --version print: argparse would drop a write error on the floor
    try:
        with contextlib.redirect_stdout(shown):
            given = single_dash_long(sys.argv[1:] if argv is None else argv, long_options(parser))
            args = parser.parse_args(attached_values(given))
            vars(args).pop(GIVEN, None)
        finish_settings(args.subparser, args)
    except SystemExit as done:
        return _after_argparse(prog, done, shown.getvalue())
    _setup_logging(args, prog)
    # a kill or a hang-up ends the run as Ctrl-C does: temporary files and child processes go with it; one
    # ignored as the command started stays so (nohup's SIGHUP, a background job's SIGINT)
    for sig in ENDING_SIGNALS:
        if signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, _interrupt)
    sys.unraisablehook = _unraisable
    # (earlier runs in this process: ``main`` called from Python)
    already, lines = len(outputs_written()), in_place_lines()
    try:
        check_destinations(args)
        with warnings.catch_warnings():
            # numpy's warnings (a NaN met in arithmetic) are failures of the run, one line each, not notes
            warnings.simplefilter("error", RuntimeWarning)
            code = int(args.func(args) or 0)
        _flush_stdout()
        return code
    except RecaserError as exc:
        _error(prog, with_flag_names(str(exc), args), since=lines)
        return 2
    except KeyboardInterrupt:
        if sys.stderr is not None:
            # (an interrupt held off while an output was put in place comes after it)
            whole = outputs_written()[already:]
            if len(whole) > 3:  # (an experiment's cache: still one line to read)
                whole = [*whole[:2], f"{len(whole) - 2} more"]
            said = f"{', '.join(whole)} already written whole, nothing else" if whole else "no output was written"
            in_place = _already_written(lines)
            if in_place:
                said = in_place + (f"; {', '.join(whole)} written whole" if whole else "")
            print(f"{prog}: interrupted; {said}", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (e.g. `| head`); not an error of ours
        with contextlib.suppress(OSError, AttributeError):
            sys.stderr.close()
        return 0
    except RecursionError:
        _error(prog, "input nested too deeply", since=lines)
        return 2
    except Exception as exc:  # noqa: BLE001 - a bug: still one line, with the traceback on request
        if _out_of_memory(exc):
            _error(prog, "out of memory", since=lines)
            return 2
        if isinstance(exc, OSError):  # a fault no reader or writer of ours turned into a RecaserError
            where = f"{exc.filename}: " if exc.filename else ""
            _error(prog, f"{where}{exc.strerror or exc}", since=lines)
            return 2
        log.debug("traceback of the internal error", exc_info=True)
        bug = f"internal error (a bug; please report it, with the traceback -v prints): {type(exc).__name__}: {exc}"
        _error(prog, bug, since=lines)
        return 3


def _out_of_memory(exc: BaseException | None) -> bool:
    """Whether memory ran out, however it was said: a MemoryError, an ENOMEM (mmap, fork), or a library that
    could not be mapped (dlopen under ``ulimit -v``: numpy's ImportError holds it), here or as the cause."""
    while exc is not None:
        if isinstance(exc, MemoryError) or (isinstance(exc, OSError) and exc.errno == errno.ENOMEM):
            return True
        if isinstance(exc, ImportError) and "failed to map segment" in str(exc):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _after_argparse(prog: str, done: SystemExit, text: str) -> int:
    """argparse's own exit after ``text`` (help, version) is on stdout; exit 2 if stdout cannot take it
    (``--help >/dev/full``)."""
    try:
        if text:
            if sys.stdout is None:
                raise RecaserError("standard output is closed", STDOUT)
            try:
                sys.stdout.write(text)
            except BrokenPipeError:
                raise
            except OSError as exc:
                raise write_error(exc, STDOUT) from None
        _flush_stdout()
    except BrokenPipeError:
        with contextlib.suppress(OSError, AttributeError):
            sys.stderr.close()
    except RecaserError as exc:
        _error(prog, str(exc))
        return 2
    return done.code if isinstance(done.code, int) else 2


def exit_now(code: int) -> NoReturn:
    """End a command-line process without tearing its objects down one by one (a loaded model is
    millions of them: 0.1 s of a 1 s recasing run): flush the streams and leave. Outputs are complete
    and renamed into place before this; pools and threads are joined by their ``with`` blocks."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):  # closed (None), or the reader went away
            pass
    os._exit(code)


def main_of(build_parser: Callable[[], argparse.ArgumentParser], prog: str) -> Callable[..., int]:
    """A console command's ``main``: ``main(argv)`` returns the exit code; ``main()`` (the console
    script, a process of its own) leaves with it at once (``exit_now``)."""

    def main(argv: Sequence[str] | None = None) -> int:
        if argv is None:
            exit_now(run(argv, build_parser, prog))
        before, hook = {sig: signal.getsignal(sig) for sig in ENDING_SIGNALS}, sys.unraisablehook
        try:
            return run(argv, build_parser, prog)
        finally:  # (called from Python: the caller's handlers back, an interrupt's ignoring included)
            for sig, handler in before.items():
                signal.signal(sig, handler)
            sys.unraisablehook = hook

    return main
