"""Fault injection: every subcommand, run as a user runs it, under each fault of the system.

Faults: a full disk (a size-limited tmpfs as root, else RLIMIT_FSIZE, whose writes fail with EFBIG), a directory
it may not write (the child runs as nobody when we are root), a read-only file system (a read-only bind mount in a
mount namespace of the child's own), a closed stdout, and SIGTERM in the middle of the run. For each: exit 2 (130
for SIGTERM), one line on stderr, no traceback, no new file, and every file that was there before (an old output,
a bystander) unchanged in bytes and mode. ``tools/reliability.py`` runs the same table and counts.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import signals_restored

BIN = Path(sys.executable).parent
ROOT = os.geteuid() == 0


@dataclass(frozen=True)
class Command:
    """One subcommand's valid invocation: ``argv(inputs, out)`` writes ``out`` (a file, or a model directory);
    ``stdout``: its result goes to stdout instead (then ``out`` is not written); ``stdin``: it reads its main
    input from stdin; ``held``: the input file that a FIFO replaces for SIGTERM (either way, a run can be held
    in the middle of its input); ``busy``: a training corpus, which must be a regular file (it is read twice):
    SIGTERM comes once the run's scratch directory is there, in a TMPDIR of the test's own, which it must leave
    empty."""

    name: str
    argv: Callable[[Path, Path], list[str]]
    model: bool = False
    stdout: bool = False
    stdin: bool = False
    writes: bool = True
    held: str = ""
    busy: bool = False

    def meets(self, fault: str) -> bool:
        """Whether ``fault`` is where this command writes: a command that only reads (``check``) meets none, one
        that prints its result meets no fault of the output directory (it writes nothing there)."""
        if fault == "none" or not self.writes:
            return False
        return not (self.stdout and fault in ("eacces", "erofs"))


def _mr(*args: str) -> list[str]:
    return [str(BIN / "moses-recaser"), "-q", *args]  # -q: errors only, so stderr holds nothing but the error


def _ems(*args: str) -> list[str]:
    return [str(BIN / "moses-recaser-ems"), "-q", *args]


COMMANDS = [
    Command(
        "triples",
        lambda i, o: _mr(
            "triples", "--source", f"{i}/s.fr", "--target", f"{i}/s.en", "--alignment", f"{i}/s.wa", "-o", str(o)
        ),
    ),
    Command("tokenize", lambda i, o: _mr("tokenize", "-l", "en", "-i", "-", "-o", str(o)), stdin=True),
    Command(
        "lm", lambda i, o: _mr("lm", "--lm-order", "3", "--input", "-", "-o", str(o), "--discount-fallback"), stdin=True
    ),
    # (the 50-line slice: eflomal's time is not the subject)
    Command("align", lambda i, o: _mr("align", "--source", f"{i}/e.fr", "--target", f"{i}/e.en", "-o", str(o))),
    Command(
        "phrase-align",
        lambda i, o: _mr(
            "phrase-align", "--source", f"{i}/s.fr", "--target", f"{i}/s.en", "--alignment", f"{i}/s.wa", "-o", str(o)
        ),
    ),
    Command(
        "stats",
        lambda i, o: _mr(
            "stats", "--source", f"{i}/s.fr", "--target", f"{i}/s.en", "--alignment", f"{i}/s.wa", "-o", str(o)
        ),
        model=True,
    ),
    Command(
        "count",
        lambda i, o: _mr(
            "count",
            "--source",
            f"{i}/s.fr",
            "--target",
            f"{i}/s.en",
            "--alignment",
            f"{i}/s.wa",
            "--shard",
            "1/1",
            "-o",
            str(o),
        ),
    ),
    Command("merge", lambda i, o: _mr("merge", f"{i}/shard.npz", "-o", str(o)), model=True),
    Command(
        "train",
        lambda i, o: _mr(
            "train",
            "--source",
            f"{i}/s.fr",
            "--target",
            f"{i}/s.en",
            "--alignment",
            f"{i}/s.wa",
            "--dev-source",
            f"{i}/d.fr",
            "--dev-target",
            f"{i}/d.en",
            "--dev-alignment",
            f"{i}/d.wa",
            "--max-iter",
            "5",
            "-o",
            str(o),
        ),
        model=True,
        busy=True,
    ),
    Command("recase", lambda i, o: _mr("recase", "--model", f"{i}/model", "--input", "-", "-o", str(o)), stdin=True),
    Command("eval", lambda i, o: _mr("eval", "--hyp", f"{i}/s.en", "--ref", f"{i}/s.en"), stdout=True),
    Command(
        "experiment",
        lambda i, o: _mr(
            "experiment", f"{i}/tiny.yaml", "--data-root", f"{i}/data", "--cache", f"{i}/cache", "-o", str(o)
        ),
        model=True,
    ),
    Command("ems recase", lambda i, o: _ems("recase", "-in", "-", "-model", f"{i}/model", "-o", str(o)), stdin=True),
    Command(
        "ems train",
        lambda i, o: _ems(
            "train",
            "-dir",
            f"{o.parent}/ems",
            "-corpus",
            f"{i}/e.en",
            "-source-corpus",
            f"{i}/e.fr",
            "-alignment",
            f"{i}/e.wa",
            "-dev-size",
            "10",
            "-config",
            str(o),
        ),
        busy=True,
    ),
    Command("ems meta", lambda i, o: _ems("meta", "--moses-meta", f"{i}/experiment.meta", "-o", str(o))),
    Command("ems config", lambda i, o: _ems("config", "--merge", f"{i}/config.toy", "-o", str(o))),
    Command("ems check", lambda i, o: _ems("check", f"{i}/config.merged"), writes=False),
]

FAULTS = ["none", "enospc", "eacces", "erofs", "closed-stdout", "sigterm"]


@pytest.fixture(scope="module")
def inputs(tico) -> Path:
    """Inputs every command reads, in a directory anyone may read (the child may run as nobody)."""
    from test_ems import MOSES_META

    from moses_recaser.stats.parallel import count_corpus  # noqa: F401 - the package is importable

    d = Path(tempfile.mkdtemp(prefix="faults-in."))
    d.chmod(0o755)
    fr = (tico / "train.fr").read_text(encoding="utf-8").splitlines()[:150]
    en = (tico / "train.en").read_text(encoding="utf-8").splitlines()[:150]
    for name, lines in (("s.fr", fr), ("s.en", en), ("d.fr", fr[:25]), ("d.en", en[:25])):
        (d / name).write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    wa = ["".join(f"{k}-{k} " for k in range(min(len(a.split()), len(b.split())))).strip() for a, b in zip(fr, en)]
    (d / "s.wa").write_text("".join(x + "\n" for x in wa), encoding="utf-8")
    (d / "d.wa").write_text("".join(x + "\n" for x in wa[:25]), encoding="utf-8")
    for name, lines in (("e.fr", fr[:50]), ("e.en", en[:50]), ("e.wa", wa[:50])):  # EMS's step fits at length
        (d / name).write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    shutil.copytree(tico / "model", d / "model")
    subprocess.run(
        _mr(
            "-q",
            "count",
            "--source",
            f"{d}/s.fr",
            "--target",
            f"{d}/s.en",
            "--alignment",
            f"{d}/s.wa",
            "--shard",
            "1/1",
            "-o",
            str(d / "shard.npz"),
        ),
        check=True,
    )
    (d / "experiment.meta").write_text(MOSES_META, encoding="utf-8")
    (d / "config.toy").write_text(CONFIG, encoding="utf-8")
    subprocess.run(_ems("config", "--merge", str(d / "config.toy"), "-o", str(d / "config.merged")), check=True)
    shutil.copytree(Path(__file__).parents[1] / "data" / "tico19", d / "data" / "tico19")
    (d / "tiny.yaml").write_text(EXPERIMENT, encoding="utf-8")
    for p in d.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    yield d
    shutil.rmtree(d, ignore_errors=True)


CONFIG = """[GENERAL]
working-dir = /tmp/never-used
input-extension = fr
output-extension = en
input-tokenizer = $moses-script-dir/tokenizer/tokenizer.perl -l $input-extension
output-tokenizer = $moses-script-dir/tokenizer/tokenizer.perl -l $output-extension
input-truecaser = $moses-script-dir/recaser/truecase.perl
output-truecaser = $moses-script-dir/recaser/truecase.perl
detruecaser = $moses-script-dir/recaser/detruecase.perl
[CORPUS]
[CORPUS:toy]
raw-stem = /tmp/never-used/toy
[LM]
[LM:toy]
raw-corpus = /tmp/never-used/toy.en
[TRAINING]
[TUNING]
[TRUECASER]
trainer = $moses-script-dir/recaser/train-truecaser.perl
[RECASING]
[EVALUATION]
decoder-settings = -search-algorithm 1
[EVALUATION:test]
raw-input = /tmp/never-used/test.fr
raw-reference = /tmp/never-used/test.en
[REPORTING]
"""

EXPERIMENT = """name: faults
corpus: tico19
pair: .
source: fr
target: en
splits:
  train: ["tico19-test[0:150]"]
  dev: ["tico19-test[150:175]"]
  test: ["tico19-test[1950:1975]"]
systems: [trigram, crf]
"""


def _snapshot(d: Path) -> dict[str, tuple[str, int]]:
    out = {}
    for p in sorted(d.rglob("*")):
        st = os.lstat(p)
        digest = hashlib.sha256(p.read_bytes()).hexdigest() if stat.S_ISREG(st.st_mode) else "dir"
        out[str(p.relative_to(d))] = (digest, stat.S_IMODE(st.st_mode))
    return out


def _outdir(base: Path, cmd: Command) -> tuple[Path, Path]:
    """An output directory holding an old output (for file outputs) and a bystander file."""
    out = base / "out"
    out.mkdir()
    (out / "bystander.txt").write_text("not yours\n")
    target = out / ("result" if not cmd.model else "model")
    if not cmd.model and not cmd.stdout:
        target.write_text("old output\n")
        target.chmod(0o640)
    out.chmod(0o755)
    return out, target


def _run(cmd: Command, inputs: Path, target: Path, fault: str, out: Path, tmp: Path) -> subprocess.CompletedProcess:
    argv = cmd.argv(inputs, target)
    stdin_text = (inputs / "s.en").read_text(encoding="utf-8") if cmd.stdin else None
    preexec: Callable[[], None] | None = None
    stdout: int | object = subprocess.DEVNULL
    if fault == "eacces":
        out.chmod(0o555)
        preexec = _without_root_override if ROOT else None
    elif fault == "erofs":
        argv = [
            "unshare",
            "-m" if ROOT else "-rm",
            "sh",
            "-c",
            'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"',
            str(out),
            *argv,
        ]
    elif fault == "enospc" and not ROOT:
        preexec = _small_files
    elif fault == "enospc" and cmd.stdout:
        stdout = _full_device(tmp)
    elif fault == "closed-stdout":
        preexec = _close_stdout
        if not cmd.stdout:  # the result goes to stdout: '-'
            argv = [("-" if a == str(target) else a) for a in argv]
    if fault == "sigterm":
        return _interrupted(argv, stdin_text, inputs, tmp, cmd, out)
    return subprocess.run(
        argv, input=stdin_text, stdout=stdout, stderr=subprocess.PIPE, text=True, preexec_fn=preexec, timeout=300
    )


def _without_root_override() -> None:
    """Root as permission bits see it: without CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH (dropped from the bounding
    set, so the command exec'd next never has them), a 0555 directory is not writable, even by its owner."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def _small_files() -> None:
    import resource

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG instead of killing
    resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048))


def _close_stdout() -> None:
    os.close(1)


def _full_device(tmp: Path):  # type: ignore[no-untyped-def]
    node = tmp / "full"
    os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 7))
    return open(node, "wb")  # noqa: SIM115 - closed with the process


def _interrupted(
    argv: list[str], stdin_text: str | None, inputs: Path, tmp: Path, cmd: Command, out: Path
) -> subprocess.CompletedProcess:
    """SIGTERM in the middle of the input, on any machine however fast: the first half of the main input (stdin,
    or a FIFO in place of ``cmd.held``) is written to a pipe held open, and the signal is sent once the command
    has read it all, so it is waiting for the rest."""
    if cmd.busy:
        return _interrupted_when_busy(argv, tmp, out)
    if cmd.held:
        fifo = tmp / cmd.held
        os.mkfifo(fifo)
        argv = [str(fifo) if a == f"{inputs}/{cmd.held}" else a for a in argv]
        assert str(fifo) in argv, argv
        stdin_text = (inputs / cmd.held).read_text(encoding="utf-8")
        pipe = os.open(fifo, os.O_RDWR)  # no reader yet: O_RDWR opens without waiting, and the pipe never ends
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE if cmd.stdin else subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=signals_restored(),
    )
    if cmd.stdin:
        assert proc.stdin is not None
        pipe = proc.stdin.fileno()
    assert stdin_text is not None
    lines = stdin_text.splitlines(keepends=True)
    os.write(pipe, "".join(lines[: len(lines) // 2]).encode("utf-8"))
    deadline = time.monotonic() + 120
    while _unread(pipe) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.1)
    assert proc.poll() is None, f"{cmd.name} finished on half its input"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    if cmd.held:
        os.close(pipe)
    return subprocess.CompletedProcess(argv, proc.returncode, None, err)


def _interrupted_when_busy(argv: list[str], tmp: Path, out: Path) -> subprocess.CompletedProcess:
    """SIGTERM once the run has made its scratch directory (``outputs.work_dir``: in a TMPDIR of its own, or
    beside its output, as the EMS step keeps it): it is then past its checks and in the middle of its work,
    which takes seconds. The scratch directory must go with it."""
    scratch = tmp / "scratch"
    scratch.mkdir()
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(scratch)},
        preexec_fn=signals_restored(),
    )

    def working() -> list[Path]:
        return [*scratch.glob(".moses-recaser*.work"), *out.glob("**/.moses-recaser*.work")]

    deadline = time.monotonic() + 120
    while not working() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proc.poll() is None, "the run ended before it made its scratch directory"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert working() == [], "the scratch directory was left behind"
    return subprocess.CompletedProcess(argv, proc.returncode, None, err)


def _unread(fd: int) -> int:
    """Bytes written to a pipe and not yet read (FIONREAD)."""
    import array
    import fcntl
    import termios

    buf = array.array("i", [0])
    fcntl.ioctl(fd, termios.FIONREAD, buf)
    return buf[0]


def _mount_small(out: Path) -> None:
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0755", "tmpfs", str(out)], check=True)


def _fill(out: Path) -> None:
    """Take the disk's last free byte: then any write fails, however small."""
    with open(out / "filler", "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(b"\0" * 4096)
        except OSError:
            pass


CASES = [
    (c, f)
    for c in COMMANDS
    for f in FAULTS
    # SIGTERM where a run can be held in the middle of its input
    if f != "sigterm" or c.stdin or c.held or c.busy
]


@pytest.mark.parametrize("cmd,fault", CASES, ids=[f"{c.name}-{f}" for c, f in CASES])
def test_fault(inputs, tmp_path, cmd, fault):
    base = Path(tempfile.mkdtemp(prefix="faults-out."))
    base.chmod(0o755)
    mounted = False
    try:
        out, target = _outdir(base, cmd)
        if fault == "enospc" and ROOT and not cmd.stdout:
            saved = {p.name: (p.read_bytes(), stat.S_IMODE(p.stat().st_mode)) for p in out.iterdir()}
            _mount_small(out)
            mounted = True
            for name, (data, mode) in saved.items():
                (out / name).write_bytes(data)
                (out / name).chmod(mode)
            _fill(out)
        before = _snapshot(out)
        proc = _run(cmd, inputs, target, fault, out, tmp_path)
        err = proc.stderr or ""
        assert "Traceback" not in err and "internal error" not in err, err
        if not cmd.meets(fault):  # it runs as without the fault, and writes nothing where the fault is
            assert proc.returncode == 0 and err == "", err
            assert cmd.stdout or not cmd.writes or target.exists()
            if fault != "none":
                assert _snapshot(out) == before
            return
        prog = "moses-recaser-ems" if cmd.name.startswith("ems") else "moses-recaser"
        if fault == "sigterm":
            assert proc.returncode == 130, err
            assert err == f"{prog}: interrupted; no output was written\n", err
        else:
            assert proc.returncode == 2, err
            assert err.count("\n") == 1 and err.startswith(f"{prog}: error: "), err
        if out.stat().st_mode & 0o200 == 0:
            out.chmod(0o755)
        assert _snapshot(out) == before  # no new file, no temporary left, nothing changed
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(out)], check=False)
        shutil.rmtree(base, ignore_errors=True)


def subcommands() -> list[str]:
    """Every subcommand of both console commands, as their parsers define them (``ems NAME`` for the EMS
    ones): what the harness and the CLI fuzzers must cover, checked here rather than trusted to a list."""
    import argparse

    from moses_recaser.cli import ems, main

    def names(parser: argparse.ArgumentParser) -> list[str]:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        return list(action.choices)

    return names(main.build_parser()) + [f"ems {n}" for n in names(ems.build_parser())]


def test_the_harness_runs_every_subcommand_and_help_lists_each():
    assert sorted(c.name for c in COMMANDS) == sorted(subcommands())
    assert {c.name for c, _ in CASES if _ == "enospc"} == set(subcommands())  # every one meets the faults
    for prog, prefix in (("moses-recaser", ""), ("moses-recaser-ems", "ems ")):
        proc = subprocess.run([str(BIN / prog), "--help"], capture_output=True, text=True, check=True)
        listed = [n[len(prefix) :] for n in subcommands() if n.startswith(prefix) and (prefix or " " not in n)]
        assert listed and all(re.search(rf"^    {re.escape(n)}\s", proc.stdout, re.M) for n in listed), proc.stdout


def _small_corpus(d: Path) -> list[str]:
    """The arguments of a small word-aligned bitext in ``d`` (600 lines of TICO-19, the source lowercased, each word
    linked to its like): trained in seconds."""
    text = (Path(__file__).parents[1] / "data" / "tico19" / "tico19-test.en").read_text(encoding="utf-8")
    lines = [x.split() for x in text.splitlines()[:600]]
    for name, rows in (("fr", [x.lower() for x in map(" ".join, lines)]), ("en", map(" ".join, lines))):
        (d / f"c.{name}").write_text("".join(x + "\n" for x in rows), encoding="utf-8")
    (d / "c.wa").write_text("".join(" ".join(f"{k}-{k}" for k in range(len(x))) + "\n" for x in lines))
    return ["--source", f"{d}/c.fr", "--target", f"{d}/c.en", "--alignment", f"{d}/c.wa"]


def _address_space(mib: int) -> Callable[[], None]:
    def limit() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (mib << 20, mib << 20))

    return limit


@pytest.mark.parametrize(
    "command,mib",
    [("recase", 64), ("recase", 100), ("train", 200)],
    ids=["recase-64M", "recase-100M", "train-200M"],
)
def test_out_of_memory_under_ulimit_v_is_one_line(tico, tmp_path, command, mib):
    """An address-space limit (``ulimit -v``) too small for the run: exit 2, ``out of memory``, one line, nothing
    written. Numpy that could not load was called a bug (exit 3, at 64 MiB); OpenBLAS, short of its buffer, ended
    the process with exit 1 (numpy's, at 100 MiB) or retried for ever (scipy's, loaded for the CRF fit at 200)."""
    out = tmp_path / "out"
    if command == "recase":
        argv = _mr("recase", "--model", str(tico / "model"), "--input", str(tico / "test.lc.en"), "-o", str(out))
    else:
        argv = _mr("train", *_small_corpus(tmp_path), "--dev-size", "50", "--jobs", "2", "-o", str(out))
    proc = subprocess.run(argv, stderr=subprocess.PIPE, text=True, preexec_fn=_address_space(mib), timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert re.fullmatch(r"moses-recaser: error: out of memory(: .*)?\n", proc.stderr), proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith((".out", "out"))) == []


@pytest.mark.parametrize("jobs", ["1", "2", "raw"])
def test_a_full_scratch_disk_is_said_of_tmpdir_not_of_a_removed_directory(tmp_path, jobs):
    """Training whose scratch files cannot grow (RLIMIT_FSIZE: writes fail as on a full disk, root or not) names
    TMPDIR's directory, which the user can give room to: it named a file inside the run's scratch directory,
    removed by the time the message is read (also a file of ours written there whole: ``raw``'s tokenized text)."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    corpus = _small_corpus(tmp_path)
    if jobs == "raw":
        corpus, jobs = [*corpus[:4], "--raw", "--source-lang", "fr", "--target-lang", "en"], "1"
    proc = subprocess.run(
        _mr("train", *corpus, "--dev-size", "50", "--jobs", jobs, "-o", str(tmp_path / "model")),
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(scratch)},
        preexec_fn=_small_files,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr
    assert re.fullmatch(
        f"moses-recaser: error: {re.escape(str(scratch))}: cannot write scratch data: .*; give TMPDIR a directory "
        "with more room\n",
        proc.stderr,
    ), proc.stderr
    assert list(scratch.iterdir()) == [] and not (tmp_path / "model").exists()
