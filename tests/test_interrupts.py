"""Interrupting recasing or training (SIGINT, SIGTERM, SIGHUP, SIGQUIT) leaves no half-written output or model."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import signals_restored

CLI = str(Path(sys.executable).parent / "moses-recaser")


def _leftovers(directory: Path, name: str) -> list[str]:
    return [p.name for p in directory.iterdir() if p.name.startswith(f".{name}.")]


def _wait_for(proc: subprocess.Popen, marker: Path | None, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        if marker is None or marker.exists():
            return
        time.sleep(0.05)


def _recasing_under_way(
    tico: Path, out: Path, jobs: int, own_group: bool, ignored: tuple[int, ...] = ()
) -> subprocess.Popen:
    """``recase`` started with its input through a pipe left open, returned once it writes its output (its
    temporary file exists): still under way when a signal comes, however fast the machine. The signals the tests
    send are at their defaults (``signals_restored``: the suite may run under ``nohup`` or in the background of a
    script), but ``ignored``: signals it starts with ignored (``nohup``'s SIGHUP)."""

    lines = (tico / "test.lc.en").read_text(encoding="utf-8").splitlines() * 4
    proc = subprocess.Popen(
        [CLI, "recase", "--model", str(tico / "model"), "--input", "-", "--jobs", str(jobs), "-o", str(out)],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=signals_restored(ignored, os.setsid if own_group else None),
    )
    assert proc.stdin is not None
    proc.stdin.write("\n".join(lines) + "\n")
    proc.stdin.flush()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None and not _leftovers(out.parent, out.name):
        time.sleep(0.02)
    time.sleep(0.5)  # (with workers: idle, waiting for chunks the open input has not given yet)
    assert proc.poll() is None, "recasing finished before it could be interrupted"
    return proc


def _ended_by_interrupt(proc: subprocess.Popen, err: str, out: Path) -> None:
    assert proc.returncode == 130, err
    assert err.strip() == "moses-recaser: interrupted; no output was written", err
    assert not out.exists() and _leftovers(out.parent, out.name) == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT])
def test_interrupted_recasing_writes_nothing(tico, tmp_path, sig):
    out = tmp_path / "out"
    proc = _recasing_under_way(tico, out, jobs=1, own_group=False)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)  # closes stdin: a process the signal missed ends with 0
    _ended_by_interrupt(proc, err, out)


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_hang_up_ignored_as_under_nohup_stays_ignored(tico, tmp_path, jobs):
    """``nohup moses-recaser ... &``: SIGHUP, ignored as the command starts, stays ignored by it and its workers,
    and the run ends with its whole output (the command set its own handler: a logout ended a long training with
    nothing written)."""
    out = tmp_path / "out"
    proc = _recasing_under_way(tico, out, jobs=jobs, own_group=True, ignored=(signal.SIGHUP,))
    os.killpg(proc.pid, signal.SIGHUP)  # (the terminal's hang-up goes to the whole group)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    lines = (tico / "test.lc.en").read_text(encoding="utf-8").splitlines() * 4
    assert len(out.read_text(encoding="utf-8").splitlines()) == len(lines)


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_burst_of_interrupts_ends_the_run_as_one_does(tico, tmp_path, jobs):
    """Ctrl-C pressed again and again, or a supervisor's INT, TERM and HUP one after another: the first ends the
    run, and the others do not cut short the cleanup it starts (a traceback came after the one line, and a
    training's scratch directory was left)."""
    out = tmp_path / "out"
    proc = _recasing_under_way(tico, out, jobs=jobs, own_group=True)
    burst = [signal.SIGINT, signal.SIGINT, signal.SIGTERM, signal.SIGHUP] * 250  # (1,000: until the run ends)
    while burst and proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, burst.pop())
        time.sleep(0.001)
    _, err = proc.communicate(timeout=60)
    _ended_by_interrupt(proc, err, out)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_recasing_workers_signalled_with_their_parent_end_it(tico, tmp_path, sig):
    """Ctrl-C at a terminal, or a service manager's SIGTERM, goes to the whole process group: the workers of
    `recase --jobs 2` get it too (SIGTERM ends them first). The run must still end at once, with its one line and
    nothing written. With multiprocessing.Pool it hung: an idle worker killed while it held the task queue's
    lock, ending the pool waited on that lock for ever."""
    out = tmp_path / "out"
    proc = _recasing_under_way(tico, out, jobs=2, own_group=True)
    try:
        os.killpg(proc.pid, sig)
        _, err = proc.communicate(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    _ended_by_interrupt(proc, err, out)


def test_interrupted_training_leaves_no_model(tico, tmp_path):
    model = tmp_path / "model"
    proc = subprocess.Popen(
        [
            CLI,
            "train",
            "--source",
            str(tico / "train.fr"),
            "--target",
            str(tico / "train.en"),
            "--dev-source",
            str(tico / "dev.fr"),
            "--dev-target",
            str(tico / "dev.en"),
            "-o",
            str(model),
        ],
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=signals_restored(),
    )
    time.sleep(4.0)
    assert proc.poll() is None, "training finished before it could be interrupted"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert not model.exists() and _leftovers(tmp_path, "model") == []


_POOL_ENDED_AT_ONCE = """
import signal
from moses_recaser.model.streaming import zip_recased

def interrupted(*args):  # as cli.common's SIGTERM handler, which a forked worker inherits
    raise KeyboardInterrupt

signal.signal(signal.SIGTERM, interrupted)

def same(triples):
    return [list(t) for t in triples]

def bad_input():
    raise ValueError("bad input")
    yield

for _ in range(200):
    try:
        for _ in zip_recased(bad_input(), same, jobs=2):
            pass
    except ValueError:
        pass
print("done")
"""


def test_a_pool_ended_as_it_starts_ends_its_workers():
    """A pool of recasing workers ended at once (its input fails on the first line) sends SIGTERM to workers that
    may not have set their own signal handling yet: each must end, without a traceback, and the parent go on
    (before ``workers.forking`` a worker could lose the signal and wait for ever, and the parent with it)."""
    proc = subprocess.run([sys.executable, "-c", _POOL_ENDED_AT_ONCE], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout == "done\n", proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]


def test_an_interrupt_while_the_command_imports_its_modules_is_one_line(tmp_path):
    """Ctrl-C before ``common.run`` has taken over (the command still importing its modules): one line and exit
    130, as later, not a KeyboardInterrupt's traceback. An import hook (a sitecustomize of the test's own) holds
    the command in the import of ``moses_recaser.cli.main``, the console command's first import after the handler
    of ``moses_recaser.cli``; the signal is sent once it is held there (the model is never reached)."""
    hook, held = tmp_path / "hook", tmp_path / "held"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(
        "import os, sys, time\n"
        "class Held:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'moses_recaser.cli.main':\n"
        f"            open({str(held)!r}, 'w').close()\n"
        "            time.sleep(60)\n"
        "sys.meta_path.insert(0, Held())\n",
        encoding="utf-8",
    )
    out = tmp_path / "out"
    # (the package under test first after the hook, as pytest imports it)
    paths = [str(hook), str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    argv = ["recase", "--model", str(tmp_path / "model"), "--input", "-", "-o", str(out)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "moses_recaser", *argv],
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=signals_restored(),  # (as a terminal's Ctrl-C finds it)
    )
    _wait_for(proc, held, 60)
    assert held.exists(), "the command did not reach its imports"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    _ended_by_interrupt(proc, err, out)


# a command whose work drops an object that signals its own process in its finalizer: the handler runs there
_IN_A_FINALIZER = """
import argparse, os, signal, sys, time
from moses_recaser.cli.common import run

class Finalized:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(1000):
            pass

def work(args):
    Finalized()
    time.sleep(10)
    print("not interrupted")

def parser():
    p = argparse.ArgumentParser(prog="moses-recaser")
    p.set_defaults(func=work, subparser=p, quiet=True, verbose=False)
    return p

sys.exit(run([], parser, "moses-recaser"))
"""


def test_an_interrupt_that_lands_in_a_finalizer_still_ends_the_run():
    """A signal handled while a finalizer runs (``Popen.__del__``, in CI) raised KeyboardInterrupt where Python drops
    it: a traceback on stderr ('Exception ignored in'), and the run went on to its end as if not interrupted."""
    done = subprocess.run(
        [sys.executable, "-c", _IN_A_FINALIZER],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=signals_restored(),
    )
    assert (done.returncode, done.stderr, done.stdout) == (
        130,
        "moses-recaser: interrupted; no output was written\n",
        "",
    )
