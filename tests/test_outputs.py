"""The user's files survive every output: symlinks, FIFOs, devices, directories, modes (outputs.py)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from moses_recaser.cli.main import main
from moses_recaser.errors import RecaserError
from moses_recaser.outputs import HOST, TAG, atomic_directory, atomic_output, clean_stale, work_dir

CLI = str(Path(sys.executable).parent / "moses-recaser")
ROOT = os.geteuid() == 0


def _write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


def _stats_args(tmp_path: Path) -> list[str]:
    src = _write(tmp_path / "c.fr", "Le chat .\nLa maison .\n" * 5)
    tgt = _write(tmp_path / "c.en", "The cat .\nThe house .\n" * 5)
    wa = _write(tmp_path / "c.wa", "0-0 1-1 2-2\n0-0 1-1 2-2\n" * 5)
    return ["-q", "stats", "--source", src, "--target", tgt, "--alignment", wa]


def _umask(mask: int):
    class Umask:
        def __enter__(self):
            self.old = os.umask(mask)

        def __exit__(self, *exc):
            os.umask(self.old)

    return Umask()


def _ours(directory: Path) -> list[str]:
    return [p.name for p in directory.iterdir() if TAG in p.name]


def test_a_symlink_is_written_through(tmp_path):
    target = tmp_path / "real.txt"
    target.write_text("old\n")
    target.chmod(0o640)
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    with atomic_output(link) as out:
        out.write("new\n")
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() == "new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640  # a replaced file keeps its mode
    assert _ours(tmp_path) == []


def test_a_dangling_symlink_creates_its_target(tmp_path):
    link = tmp_path / "link.txt"
    link.symlink_to(tmp_path / "later.txt")
    with atomic_output(link) as out:
        out.write("x\n")
    assert link.is_symlink() and (tmp_path / "later.txt").read_text() == "x\n"


def test_a_fifo_is_written_in_place(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    with atomic_output(fifo) as out:
        out.write("through the pipe\n")
    reader.join(10)
    assert got == [b"through the pipe\n"]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def _device(tmp_path: Path, name: str, minor: int) -> Path:
    """A character device of the memory driver (1, minor) in tmp_path: never the real /dev nodes. Without root,
    the real node: an unprivileged process cannot replace a node in /dev, so nothing is at risk."""
    if not ROOT:
        return Path("/dev") / name
    node = tmp_path / name
    os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, minor))
    return node


def test_a_device_is_written_in_place(tmp_path):
    null = _device(tmp_path, "null", 3)
    with atomic_output(null) as out:
        out.write("discarded\n")
    assert stat.S_ISCHR(os.lstat(null).st_mode)
    assert main(["tokenize", "-l", "en", "-i", _write(tmp_path / "raw", "a b\n"), "-o", str(null)]) == 0
    assert stat.S_ISCHR(os.lstat(null).st_mode)


def test_a_full_device_is_one_line_and_stays_a_device(tmp_path, capsys):
    full = _device(tmp_path, "full", 7)
    with pytest.raises(RecaserError, match="No space left on device"):
        with atomic_output(full) as out:
            out.write("x" * 100_000)
    assert main(["tokenize", "-l", "en", "-i", _write(tmp_path / "raw", "a b\n" * 1000), "-o", str(full)]) == 2
    err = capsys.readouterr().err
    assert err == f"moses-recaser: error: {full}: cannot write: No space left on device\n"
    assert stat.S_ISCHR(os.lstat(full).st_mode)


def test_stdout_on_a_full_device_is_one_line(tmp_path):
    full = _device(tmp_path, "full", 7)
    raw = _write(tmp_path / "raw", "a b\n" * 1000)
    with open(full, "wb") as out:
        proc = subprocess.run([CLI, "tokenize", "-l", "en", "-i", raw], stdout=out, stderr=subprocess.PIPE, text=True)
    assert (
        proc.returncode == 2
        and proc.stderr == "moses-recaser: error: <stdout>: cannot write: No space left on device\n"
    )
    proc = subprocess.run(
        [CLI, "eval", "--hyp", raw, "--ref", raw], stdout=open(full, "wb"), stderr=subprocess.PIPE, text=True
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "No space left on device" in proc.stderr


def test_closed_stdout_is_refused_before_work(tmp_path):
    raw = _write(tmp_path / "raw", "a b\n")
    proc = subprocess.run(f"'{CLI}' tokenize -l en -i '{raw}' >&-", shell=True, stderr=subprocess.PIPE, text=True)
    assert proc.returncode == 2
    assert proc.stderr == "moses-recaser: error: <stdout>: standard output is closed; give an output file with -o\n"


def test_a_directory_is_not_an_output_file(tmp_path, capsys):
    d = tmp_path / "d"
    d.mkdir()
    (d / "keep").write_text("k")
    assert main(["tokenize", "-l", "en", "-i", _write(tmp_path / "raw", "a\n"), "-o", str(d)]) == 2
    assert capsys.readouterr().err == f"moses-recaser: error: {d}: is a directory; give a file name\n"
    assert (d / "keep").read_text() == "k"


@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002])
def test_new_files_and_models_take_the_umasks_mode(tmp_path, mask):
    with _umask(mask):
        with atomic_output(tmp_path / "out.txt") as out:
            out.write("x\n")
        assert main(_stats_args(tmp_path) + ["-o", str(tmp_path / "model")]) == 0
    assert stat.S_IMODE((tmp_path / "out.txt").stat().st_mode) == 0o666 & ~mask
    assert stat.S_IMODE((tmp_path / "model").stat().st_mode) == 0o777 & ~mask
    for f in (tmp_path / "model").iterdir():
        assert stat.S_IMODE(f.stat().st_mode) == 0o666 & ~mask, f.name


def test_model_path_holding_a_users_directory_is_refused(tmp_path, capsys):
    mine = tmp_path / "mydir"
    mine.mkdir()
    (mine / "thesis.txt").write_text("three years of work")
    for command in (_stats_args(tmp_path), ["-q", "merge", _write(tmp_path / "shard.npz", "not looked at")]):
        assert main(command + ["-o", str(mine)]) == 2
        err = capsys.readouterr().err
        assert err == (
            f"moses-recaser: error: {mine}: exists and is not a moses-recaser model (it has no "
            "manifest.yaml of ours); give the model a new path, or remove the directory yourself\n"
        )
    assert sorted(p.name for p in mine.iterdir()) == ["thesis.txt"]
    assert (mine / "thesis.txt").read_text() == "three years of work"


def test_a_model_holding_a_users_file_is_not_replaced(tmp_path, capsys):
    """Replacing a model would remove what a user put into its directory: refused, naming the file."""
    model = tmp_path / "model"
    assert main(_stats_args(tmp_path) + ["-o", str(model)]) == 0
    (model / "notes.txt").write_text("which corpus this was")
    before = {p.name: p.read_bytes() for p in model.iterdir()}
    assert main(_stats_args(tmp_path) + ["-o", str(model)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"moses-recaser: error: {model}: is a model, but also holds 'notes.txt', which its manifest does not name; "
        "move them out of it, or give the model a new path\n"
    )
    assert {p.name: p.read_bytes() for p in model.iterdir()} == before and not _ours(tmp_path)
    (model / "notes.txt").unlink()
    assert main(_stats_args(tmp_path) + ["-o", str(model)]) == 0


@pytest.mark.parametrize("exchange", [True, False])
def test_a_replaced_model_keeps_its_directorys_mode(tmp_path, monkeypatch, exchange):
    """Swapped in one rename-exchange, or (without renameat2) set aside and renamed in: either way the path's
    mode is the one its owner gave it."""
    from moses_recaser import outputs

    if not exchange:
        monkeypatch.setattr(outputs, "_renameat2", lambda src, dst, flags: False)
    model = tmp_path / "model"
    with _umask(0o022):
        assert main(_stats_args(tmp_path) + ["-o", str(model)]) == 0
        model.chmod(0o700)  # its owner closed it to others: a new model must not open it again
        assert main(_stats_args(tmp_path) + ["-o", str(model)]) == 0
    assert stat.S_IMODE(model.stat().st_mode) == 0o700


def test_model_path_holding_a_file_is_refused(tmp_path, capsys):
    f = tmp_path / "notes"
    f.write_text("mine")
    src = _write(tmp_path / "t.fr", "Le chat .\n")
    tgt = _write(tmp_path / "t.en", "The cat .\n")
    for command in (
        _stats_args(tmp_path),
        ["-q", "merge", _write(tmp_path / "shard.npz", "not looked at")],
        ["-q", "train", "--source", src, "--target", tgt, "--dev-source", src, "--dev-target", tgt],
    ):
        assert main(command + ["-o", str(f)]) == 2
        assert capsys.readouterr().err == (
            f"moses-recaser: error: {f}: exists and is not a directory; give the model a new path, or remove the "
            "file yourself\n"
        )
    assert f.read_text() == "mine" and not _ours(tmp_path)


def test_train_refuses_a_bad_destination_before_any_work(tmp_path, capsys):
    mine = tmp_path / "mydir"
    mine.mkdir()
    (mine / "thesis.txt").write_text("x")
    src = _write(tmp_path / "t.fr", "Le chat .\n")
    tgt = _write(tmp_path / "t.en", "The cat .\n")
    # no alignment: the first work would be eflomal; the refusal comes before it
    assert (
        main(["train", "--source", src, "--target", tgt, "--dev-source", src, "--dev-target", tgt, "-o", str(mine)])
        == 2
    )
    assert "is not a moses-recaser model" in capsys.readouterr().err
    assert (
        main(
            [
                "train",
                "--source",
                src,
                "--target",
                tgt,
                "--dev-source",
                src,
                "--dev-target",
                tgt,
                "-o",
                str(tmp_path / "no" / "such" / "parent"),
            ]
        )
        == 2
    )
    assert "parent directory" in capsys.readouterr().err


def test_the_current_directory_is_never_a_model(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data.txt").write_text("x")
    args = _stats_args(tmp_path)
    for model in (".", str(tmp_path), ".."):
        assert main(args + ["-o", model]) == 2
        assert "is the current directory (or holds it)" in capsys.readouterr().err
    assert (tmp_path / "data.txt").read_text() == "x"


def test_a_model_is_replaced_whole_and_through_a_symlink(tmp_path):
    args = _stats_args(tmp_path)
    real = tmp_path / "models" / "v1"
    real.parent.mkdir()
    link = tmp_path / "current"
    link.symlink_to(real)
    assert main(args + ["-o", str(link)]) == 0  # a dangling link: the model is made at its target
    first = {p.name: p.read_bytes() for p in real.iterdir()}
    (real / "lm.arpa").write_text("a file the old model had, edited")
    assert main(args + ["-o", str(link)]) == 0
    assert link.is_symlink() and real.is_dir()
    assert {p.name: p.read_bytes() for p in real.iterdir()} == first  # the old directory went whole
    assert _ours(real.parent) == [] and _ours(tmp_path) == []


def test_a_model_set_aside_by_a_crash_is_put_back(tmp_path):
    """A replacement without RENAME_EXCHANGE renames the old model aside, then the new one in: a crash between
    the two leaves only the aside name. The next run that writes there puts it back first."""
    with atomic_directory(tmp_path / "m") as d:
        (d / "manifest.yaml").write_text("format_version: 6\n")
    dead, host = _dead_pid(), HOST
    aside = tmp_path / f".m.{TAG}-{host}-{dead}-0badc0de.old"
    os.rename(tmp_path / "m", aside)
    clean_stale(tmp_path, "m")
    assert (tmp_path / "m" / "manifest.yaml").is_file() and not aside.exists()


def test_what_a_killed_run_left_is_removed_by_the_next(tmp_path):
    dead, host = _dead_pid(), HOST
    left = [tmp_path / f".out.txt.{TAG}-{host}-{dead}-00000001.tmp", tmp_path / f".m.{TAG}-{host}-{dead}-2.tmp"]
    left[0].write_text("half")
    left[1].mkdir()
    alive = tmp_path / f".out.txt.{TAG}-{host}-{os.getpid()}-00000003.tmp"  # a run still going: kept
    alive.write_text("busy")
    other_host = tmp_path / f".out.txt.{TAG}-elsewhere-{dead}-00000004.tmp"  # another machine's: kept
    other_host.write_text("busy")
    with atomic_output(tmp_path / "out.txt") as out:
        out.write("done\n")
    with atomic_directory(tmp_path / "m") as d:
        (d / "manifest.yaml").write_text("format_version: 6\n")
    assert not left[0].exists() and not left[1].exists()
    assert alive.exists() and other_host.exists()
    # a run that writes another name in the same directory removes them too
    other = tmp_path / f".elsewhere.txt.{TAG}-{host}-{dead}-00000005.tmp"
    other.write_text("half")
    with atomic_output(tmp_path / "b.txt") as out:
        out.write("done\n")
    assert not other.exists() and alive.exists()
    with work_dir("scratch", tmp_path) as w:
        assert Path(w).is_dir() and Path(w).parent == tmp_path
    assert not Path(w).exists()


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_without_renameat2_a_model_is_replaced_by_two_renames(tmp_path, monkeypatch):
    from moses_recaser import outputs

    monkeypatch.setattr(outputs, "_renameat2", lambda src, dst, flags: False)  # as on a system without it
    with atomic_directory(tmp_path / "m") as d:
        (d / "manifest.yaml").write_text("format_version: 6\nfiles: {old: x}\n")
        (d / "old").write_text("1")
    with atomic_directory(tmp_path / "m") as d:
        (d / "manifest.yaml").write_text("format_version: 6\n")
        (d / "new").write_text("2")
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == ["manifest.yaml", "new"]
    assert [p.name for p in tmp_path.iterdir()] == ["m"]


def test_an_output_that_is_an_input_read_beside_it_is_refused(tico, tmp_path, capsys):
    """The output may replace the text a command transforms (``recase`` and ``tokenize`` in place), never a file it
    only reads beside it (a swapped flag would have put English over the French source), also through a link."""
    src = tmp_path / "test.fr"
    src.write_bytes((tico / "test.fr").read_bytes())
    inp = tmp_path / "test.en"
    inp.write_bytes((tico / "test.lc.en").read_bytes())
    (tmp_path / "link").symlink_to(src)
    before = src.read_bytes()
    for out in (src, tmp_path / "link"):
        args = ["-q", "recase", "--model", str(tico / "model"), "--source", str(src), "--input", str(inp)]
        assert main([*args, "-o", str(out)]) == 2
        assert capsys.readouterr().err == (
            f"moses-recaser: error: {out}: this output is also the --source input, which the command only reads: "
            "give another output\n"
        )
        assert src.read_bytes() == before
    assert main(["-q", "lm", "--input", str(inp), "-o", str(inp)]) == 2
    assert "also the --input input" in capsys.readouterr().err
    pointer = tmp_path / "model.ini"  # a model pointer file, as the EMS train step writes
    pointer.write_text(f"model: {tico / 'model'}\n", encoding="utf-8")
    assert main(["-q", "recase", "--model", str(pointer), "--input", str(inp), "-o", str(pointer)]) == 2
    assert "also the --model input" in capsys.readouterr().err
    assert pointer.read_text(encoding="utf-8") == f"model: {tico / 'model'}\n"
    assert (
        main(
            ["-q", "recase", "--model", str(tico / "model"), "--source", str(src), "--input", str(inp), "-o", str(inp)]
        )
        == 0
    )
    recased = inp.read_text(encoding="utf-8").splitlines()
    assert recased != (tico / "test.lc.en").read_text(encoding="utf-8").splitlines()
    assert [x.lower() for x in recased] == (tico / "test.lc.en").read_text(encoding="utf-8").lower().splitlines()
    raw = _write(tmp_path / "raw", "It's a test.\n")
    assert main(["-q", "tokenize", "-l", "en", "-i", raw, "-o", raw]) == 0
    assert Path(raw).read_text(encoding="utf-8") == "It &apos;s a test .\n"


def test_an_output_inside_a_model_directory_is_refused(tmp_path, capsys):
    """A file written into a model would fail its next load (``-o model/tables.npz``), or be lost when the model is
    next replaced; also through a symlink to the model."""
    model = tmp_path / "model"
    assert main([*_stats_args(tmp_path), "-o", str(model)]) == 0
    before = {p.name: p.read_bytes() for p in model.iterdir()}
    (tmp_path / "link").symlink_to(model)
    raw = _write(tmp_path / "raw", "a b\n")
    for out in (model / "tables.npz", model / "notes.txt", tmp_path / "link" / "lm.arpa"):
        assert main(["-q", "tokenize", "-l", "en", "-i", raw, "-o", str(out)]) == 2
        assert capsys.readouterr().err == (
            f"moses-recaser: error: {out}: is inside the model directory {model}; give an output outside it\n"
        )
    assert {p.name: p.read_bytes() for p in model.iterdir()} == before
    assert main(["-q", "tokenize", "-l", "en", "-i", raw, "-o", str(tmp_path / "notes.txt")]) == 0


def _as_nobody(path: Path) -> str:
    """What ``output_target`` says of ``path`` in a process of an unprivileged user (root may write any file)."""
    from moses_recaser.outputs import output_target

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        os.close(r)
        try:
            if ROOT:
                os.setgid(65534)
                os.setuid(65534)
            output_target(path)
            said = "ok"
        except RecaserError as exc:
            said = str(exc)
        except BaseException as exc:  # noqa: BLE001
            said = f"unexpected {exc!r}"
        os.write(w, said.encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as fh:
        said = fh.read().decode()
    os.waitpid(pid, 0)
    return said


def test_a_read_only_output_is_refused_before_work(tmp_path):
    """The rename beside a file could replace one its user may not write (mode 0444, someone else's), which the
    shell's ``>`` refuses; so is it refused, in a directory the user may write."""
    shared = tmp_path / "shared"
    shared.mkdir()
    for d in (tmp_path, shared):
        d.chmod(0o777)
    os.chmod(tmp_path.parent, tmp_path.parent.stat().st_mode | 0o011)  # the way in, for the other user
    os.chmod(tmp_path.parent.parent, tmp_path.parent.parent.stat().st_mode | 0o011)
    kept = shared / "kept.txt"
    kept.write_text("the user's\n")
    kept.chmod(0o444)
    assert _as_nobody(kept) == f"{kept}: cannot write: permission denied (a read-only file)"
    assert _as_nobody(shared / "new.txt") == "ok"
    kept.chmod(0o666)
    assert _as_nobody(kept) == "ok"
    assert kept.read_text() == "the user's\n"
