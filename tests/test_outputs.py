"""The user's files survive every output: symlinks, FIFOs, devices, directories, modes (io/outputs.py)."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from moses_recaser.cli.main import main
from moses_recaser.io import lines as textio
from moses_recaser.io.errors import RecaserError
from moses_recaser.io.outputs import atomic_directory, atomic_output, work_dir

TAG = "moses-recaser"  # in every temporary name

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


def _through_a_fifo(fifo: Path, text: str, *, compress: bool = False, fail: bool = False) -> bytes:
    """What a reader of a new FIFO gets when ``atomic_output`` writes ``text`` to it (with ``fail``, then an
    error); the FIFO stays one."""
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    with contextlib.suppress(RuntimeError), atomic_output(fifo, compress=compress) as out:
        out.write(text)
        if fail:
            raise RuntimeError("cut short")
    reader.join(10)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    return got[0]


def test_a_fifo_is_written_in_place(tmp_path):
    assert _through_a_fifo(tmp_path / "pipe", "through the pipe\n") == b"through the pipe\n"


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
    # a command that prints its result has no -o to offer (eval)
    proc = subprocess.run(
        f"'{CLI}' eval --hyp '{raw}' --ref '{raw}' >&-", shell=True, stderr=subprocess.PIPE, text=True
    )
    assert proc.returncode == 2
    assert proc.stderr == (
        "moses-recaser: error: <stdout>: standard output is closed, and this command prints its result there\n"
    )


def test_a_directory_is_not_an_output_file(tmp_path, capsys):
    d = tmp_path / "d"
    d.mkdir()
    (d / "keep").write_text("k")
    assert main(["tokenize", "-l", "en", "-i", _write(tmp_path / "raw", "a\n"), "-o", str(d)]) == 2
    assert capsys.readouterr().err == f"moses-recaser: error: {d}: is a directory; give a file name\n"
    assert (d / "keep").read_text() == "k"


def test_an_empty_name_is_named_as_the_shell_spells_it(tmp_path, capsys, monkeypatch):
    """-o '' (a variable left unset) was taken for '.', 'is a directory', with an empty FILE field."""
    monkeypatch.chdir(tmp_path)
    raw = _write(tmp_path / "raw", "a\n")
    assert main(["tokenize", "-l", "en", "-i", raw, "-o", ""]) == 2
    assert capsys.readouterr().err == "moses-recaser: error: '': an empty name; give a file name\n"
    assert main(["tokenize", "-l", "en", "-i", "", "-o", "out"]) == 2
    assert capsys.readouterr().err == "moses-recaser: error: '': no such file\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["raw"]


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
        f"moses-recaser: error: {model}: is a model, but also holds 'notes.txt', which is not a regular file its manifest names; "
        "move them out of it, or give the model a new path\n"
    )
    assert {p.name: p.read_bytes() for p in model.iterdir()} == before and not _ours(tmp_path)
    (model / "notes.txt").unlink()
    assert main(_stats_args(tmp_path) + ["-o", str(model)]) == 0


def test_a_model_file_replaced_by_a_symlink_is_named_as_such(tmp_path, capsys):
    """A file the manifest names that is now a symlink (to a copy the user keeps elsewhere) is not the tool's to
    remove: the refusal says it is no regular file, not that the manifest does not name it."""
    model = tmp_path / "model"
    assert main(_stats_args(tmp_path) + ["-o", str(model)]) == 0
    kept = tmp_path / "kept.arpa"
    (model / "lm.arpa").rename(kept)
    (model / "lm.arpa").symlink_to(kept)
    assert main(_stats_args(tmp_path) + ["-o", str(model)]) == 2
    assert capsys.readouterr().err == (
        f"moses-recaser: error: {model}: is a model, but also holds 'lm.arpa', which is not a regular file its "
        "manifest names; move them out of it, or give the model a new path\n"
    )
    assert (model / "lm.arpa").is_symlink() and kept.is_file() and not _ours(tmp_path)


def test_a_named_entry_that_is_no_file_is_the_users(tmp_path, capsys):
    """A manifest (edited, or another version's) that names a directory: what the directory holds is not the
    tool's to remove, so the model is not replaced."""
    import yaml

    model = tmp_path / "model"
    assert main(_stats_args(tmp_path) + ["-o", str(model)]) == 0
    (model / "extra.d").mkdir()
    (model / "extra.d" / "thesis.tex").write_text("three years of work")
    doc = yaml.safe_load((model / "manifest.yaml").read_text())
    doc["files"]["extra.d"] = "0" * 64
    (model / "manifest.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    assert main(_stats_args(tmp_path) + ["-o", str(model)]) == 2
    assert "also holds 'extra.d', which is not a regular file its manifest names" in capsys.readouterr().err
    assert (model / "extra.d" / "thesis.tex").read_text() == "three years of work" and not _ours(tmp_path)


@pytest.mark.parametrize("exchange", [True, False])
def test_a_replaced_model_keeps_its_directorys_mode(tmp_path, monkeypatch, exchange):
    """Swapped in one rename-exchange, or (without renameat2) set aside and renamed in: either way the path's
    mode is the one its owner gave it. The files in it are new, and take the umask's mode, as a new model's do."""
    from moses_recaser.io import outputs

    if not exchange:
        monkeypatch.setattr(outputs, "_renameat2", lambda src, dst, flags: False)
    model = tmp_path / "model"
    with _umask(0o022):
        assert main(_stats_args(tmp_path) + ["-o", str(model)]) == 0
        model.chmod(0o700)  # its owner closed it to others: a new model must not open it again
        (model / "lm.arpa").chmod(0o600)
        assert main(_stats_args(tmp_path) + ["-o", str(model)]) == 0
    assert stat.S_IMODE(model.stat().st_mode) == 0o700
    assert {stat.S_IMODE(f.stat().st_mode) for f in model.iterdir()} == {0o644}


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


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_without_renameat2_a_model_is_replaced_by_two_renames(tmp_path, monkeypatch):
    from moses_recaser.io import outputs

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
            f"moses-recaser: error: {out}: this output is also the file given as --source, which the command only reads: "
            "give another output\n"
        )
        assert src.read_bytes() == before
    assert main(["-q", "lm", "--input", str(inp), "-o", str(inp)]) == 2
    assert "also the file given as --input," in capsys.readouterr().err
    pointer = tmp_path / "model.ini"  # a model pointer file, as the EMS train step writes
    pointer.write_text(f"model: {tico / 'model'}\n", encoding="utf-8")
    assert main(["-q", "recase", "--model", str(pointer), "--input", str(inp), "-o", str(pointer)]) == 2
    assert "also the file given as --model," in capsys.readouterr().err
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
    # nor a model inside a model: the outer one could then never be replaced (it would hold a directory)
    (model / "sub").mkdir()  # (a directory a user made in it: below it too)
    for inner in (model / "inner", model / "sub" / "inner"):
        assert main([*_stats_args(tmp_path), "-o", str(inner)]) == 2
        assert capsys.readouterr().err == (
            f"moses-recaser: error: {inner}: is inside the model directory {model}; give the model a path outside it\n"
        )
    (model / "sub").rmdir()
    assert {p.name: p.read_bytes() for p in model.iterdir()} == before


def _as_nobody(path: Path) -> str:
    """What ``output_target`` says of ``path`` in a process of an unprivileged user (root may write any file)."""
    from moses_recaser.io.outputs import output_target

    return _as_nobody_do(lambda: output_target(path))


def _as_nobody_do(work) -> str:  # type: ignore[no-untyped-def]
    """``work()`` in a child process of an unprivileged user (nobody, when we are root): "ok", or its error."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        os.close(r)
        try:
            if ROOT:
                os.setgid(65534)
                os.setuid(65534)
            work()
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


def _open_to_others(tmp_path: Path) -> None:
    """tmp_path writable by anyone, and the way to it open (for a child that runs as another user)."""
    tmp_path.chmod(0o777)
    for parent in tmp_path.parents:  # up to one others may pass (an xdist worker's tmp_path is a level deeper)
        if parent.stat().st_mode & 0o001:
            break
        os.chmod(parent, parent.stat().st_mode | 0o011)


def test_a_read_only_output_is_refused_before_work(tmp_path):
    """The rename beside a file could replace one its user may not write (mode 0444, someone else's), which the
    shell's ``>`` refuses; so is it refused, in a directory the user may write."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    _open_to_others(tmp_path)
    kept = shared / "kept.txt"
    kept.write_text("the user's\n")
    kept.chmod(0o444)
    assert _as_nobody(kept) == f"{kept}: cannot write: permission denied (a read-only file)"
    assert _as_nobody(shared / "new.txt") == "ok"
    kept.chmod(0o666)
    assert _as_nobody(kept) == "ok"
    assert kept.read_text() == "the user's\n"


@pytest.mark.parametrize("exchange", [True, False])
def test_a_file_added_to_a_model_during_the_run_stops_its_replacement(tmp_path, monkeypatch, exchange):
    """A model is replaced only if it still holds nothing but its own files when the new one is ready: a file a
    user put into it meanwhile is kept, with the old model, and the new one is not written."""
    from moses_recaser.io import outputs

    if not exchange:
        monkeypatch.setattr(outputs, "_renameat2", lambda src, dst, flags: False)
    model = tmp_path / "m"
    with atomic_directory(model) as d:
        (d / "manifest.yaml").write_text("format_version: 6\nfiles: {old: x}\n")
        (d / "old").write_text("1")
    with pytest.raises(RecaserError, match="during the run came to hold 'NOTES.txt'.*the new model was not written"):
        with atomic_directory(model) as d:
            (d / "manifest.yaml").write_text("format_version: 6\nfiles: {new: x}\n")
            (d / "new").write_text("2")
            (model / "NOTES.txt").write_text("the user's")
    assert sorted(p.name for p in model.iterdir()) == ["NOTES.txt", "manifest.yaml", "old"]
    assert [p.name for p in tmp_path.iterdir()] == ["m"]


def test_a_read_only_model_is_replaced_without_leaving_the_old_one(tmp_path):
    """A model kept at mode 555 is replaced (it keeps the mode), and the old one is removed, not left hidden
    beside it, by a user whom the mode binds (nobody, when we are root)."""
    _open_to_others(tmp_path)
    model = tmp_path / "m"

    def replace_three_times() -> None:
        for k in range(3):
            with atomic_directory(model) as d:
                (d / "manifest.yaml").write_text(f"format_version: 6\nfiles: {{f{k}: x}}\n")
                (d / f"f{k}").write_text(str(k))
            model.chmod(0o555)

    assert _as_nobody_do(replace_three_times) == "ok"
    assert [p.name for p in tmp_path.iterdir()] == ["m"]
    assert sorted(p.name for p in model.iterdir()) == ["f2", "manifest.yaml"]
    assert stat.S_IMODE(model.stat().st_mode) == 0o555


def test_an_experiment_run_replaces_only_a_run_of_its_own(tmp_path):
    """``experiment -o DIR`` replaces DIR whole, and only when it is new, empty or an earlier run holding nothing
    a run does not write (a user's results.md in a directory of theirs, a learning_curve.tmp.png)."""
    from moses_recaser.harness.experiment import RUN

    mine = tmp_path / "mydocs"
    mine.mkdir()
    (mine / "results.md").write_text("my notes")
    with pytest.raises(RecaserError, match="is not a moses-recaser run directory"):
        with atomic_directory(mine, RUN):
            raise AssertionError("refused before the block")
    assert (mine / "results.md").read_text() == "my notes"
    run = tmp_path / "run"
    run.mkdir()  # empty: taken
    with atomic_directory(run, RUN) as d:
        cfg = {"target": "en", "systems": ["crf"], "wmt21": "de-en"}
        (d / "results.json").write_text(json.dumps({"name": "x", "version": "0", "model": "m", "config": cfg}))
        (d / "test.crf.en").write_text("a\n")
        (d / "wmt21").mkdir()
        (d / "wmt21" / "de-en.Online-A.crf.en").write_text("b\n")
    (run / "learning_curve.tmp.png").write_text("the user's")
    with pytest.raises(RecaserError, match="also holds 'learning_curve.tmp.png'"):
        with atomic_directory(run, RUN):
            raise AssertionError("refused before the block")
    (run / "learning_curve.tmp.png").unlink()
    with atomic_directory(run, RUN) as d:
        (d / "results.json").write_text(json.dumps({"name": "x", "version": "1", "model": "m", "config": cfg}))
    assert sorted(p.name for p in run.iterdir()) == ["results.json"]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_the_learning_curve_plot_is_written_as_an_output(tmp_path):
    """The plot is written as every output is: a file of the user's named like a temporary one, or a symlink
    there pointing elsewhere, is left alone."""
    pytest.importorskip("matplotlib")
    from moses_recaser.harness.report import plot_curve

    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("keep")
    (tmp_path / "learning_curve.tmp.png").symlink_to(elsewhere)
    plot_curve([{"words": 1000, "crf": 0.9, "trigram": 0.8}], tmp_path / "learning_curve.png", "t")
    assert (tmp_path / "learning_curve.png").read_bytes()[:4] == b"\x89PNG"
    assert elsewhere.read_text() == "keep"


def test_directories_made_for_a_run_that_fails_are_removed(tmp_path):
    """``made_dirs``: the missing directories of a path are made, and removed again (only they, only if empty)
    when the run fails; a run that succeeds keeps them."""
    from moses_recaser.io.outputs import made_dirs

    (tmp_path / "a").mkdir()
    with pytest.raises(RuntimeError), made_dirs(tmp_path / "a" / "b" / "c") as d:
        assert d.is_dir()
        raise RuntimeError("the step failed")
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a"]
    with made_dirs(tmp_path / "a" / "b" / "c") as d:
        (d / "model").write_text("x")
    assert (tmp_path / "a" / "b" / "c" / "model").is_file()
    (tmp_path / "f").write_text("a file")
    with pytest.raises(RecaserError, match="is a file, not a directory"), made_dirs(tmp_path / "f" / "x"):
        pass


def test_a_write_only_file_is_replaced_and_keeps_its_mode(tmp_path):
    out = tmp_path / "dropbox.txt"
    out.write_text("old\n")
    out.chmod(0o222)
    with atomic_output(out) as fh:
        fh.write("new\n")
    assert stat.S_IMODE(out.stat().st_mode) == 0o222
    out.chmod(0o644)
    assert out.read_text() == "new\n" and [p.name for p in tmp_path.iterdir()] == ["dropbox.txt"]


def test_a_run_directory_is_known_by_the_names_its_config_gives(tmp_path):
    """A run directory holds what its results.json's config makes: a test file of another name (the user's
    test.gold.en), a FIFO named results.json, or a results.json of the user's make it no run directory."""
    from moses_recaser.harness.experiment import RUN

    run = tmp_path / "run"
    with atomic_directory(run, RUN) as d:
        cfg = {"target": "en", "systems": ["crf"], "learning_curve": [3000], "wmt21": "de-en"}
        (d / "results.json").write_text(json.dumps({"name": "x", "version": "0", "model": "m", "config": cfg}))
        for name in ("test.crf.en", "test.w3000.crf.en", "test.w3000.trigram.en"):
            (d / name).write_text("a\n")
        (d / "wmt21").mkdir()
        (d / "wmt21" / "de-en.Online-A.native-crf.en").write_text("b\n")
    assert RUN.foreign(run) == []
    (run / "test.gold.en").write_text("the user's reference")
    (run / "wmt21" / "my-notes.draft.txt").write_text("notes")
    assert RUN.foreign(run) == ["test.gold.en", "wmt21/my-notes.draft.txt"]
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "results.json").write_text('{"name": "mine", "version": "2"}')
    assert not RUN.ours(mine)
    fifo = tmp_path / "fifo"
    fifo.mkdir()
    os.mkfifo(fifo / "results.json")
    assert not RUN.ours(fifo)  # (without blocking on the FIFO)


def test_made_dirs_never_removes_a_directory_it_did_not_make(tmp_path):
    """``new/../old`` names ``old``, which exists: a failed run removes neither it nor anything else."""
    from moses_recaser.io.outputs import made_dirs

    (tmp_path / "results").mkdir()
    with pytest.raises(RuntimeError), made_dirs(tmp_path / "new1" / ".." / "results") as d:
        assert d == (tmp_path / "results").resolve()
        raise RuntimeError("the run failed")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results"]


def test_an_interrupt_while_an_output_is_put_in_place_comes_after_it(tmp_path, monkeypatch, capsys):
    """Ctrl-C (here SIGINT sent by the rename itself) is held off while the output is put in place, then taken:
    exit 130, and the message says which output was already written whole rather than that none was."""
    import signal

    from moses_recaser.io import outputs

    # Ctrl-C as a terminal's shell gives it: a suite started in the background (`pytest &`) ignores SIGINT, and
    # a signal ignored before the output is put in place stays ignored after it
    before = signal.signal(signal.SIGINT, signal.default_int_handler)

    src = tmp_path / "in.en"
    src.write_text("Hello, world!\n")
    out = tmp_path / "out.tok"
    out.write_text("old\n")
    real_replace = os.replace

    def interrupted_replace(a, b):  # type: ignore[no-untyped-def]
        os.kill(os.getpid(), signal.SIGINT)
        real_replace(a, b)

    monkeypatch.setattr(outputs.os, "replace", interrupted_replace)
    try:
        assert main(["tokenize", "-l", "en", "-i", str(src), "-o", str(out)]) == 130
    finally:
        signal.signal(signal.SIGINT, before)
    assert capsys.readouterr().err == f"moses-recaser: interrupted; {out} already written whole, nothing else\n"
    assert out.read_text() == "Hello , world !\n"


@pytest.mark.parametrize("name", ["/dev/stdout", "/dev/fd/1"])
def test_dev_stdout_is_the_open_descriptor_not_the_file_behind_it(tmp_path, name):
    """``-o /dev/stdout`` with stdout appended to a log writes where stdout stands, as bash does: the log keeps
    what it held and what comes after (resolving the path to the log file and replacing it lost both)."""
    src = tmp_path / "in.en"
    src.write_text("Hello, world!\n")
    log = tmp_path / "log.txt"
    log.write_text("old line\n")
    mr = Path(sys.executable).parent / "moses-recaser"
    script = f'{{ echo header; "{mr}" -q tokenize -l en -i "{src}" -o {name}; echo footer; }} >> "{log}"'
    assert subprocess.run(["bash", "-c", script]).returncode == 0
    assert log.read_text() == "old line\nheader\nHello , world !\nfooter\n"


def test_another_processs_pipe_is_written_in_place(tmp_path):
    """``-o /proc/PID/fd/1`` naming another process's pipe, whose path resolves to no file ("pipe:[N]"), is written
    in place as the shell's ``>`` writes it (it was refused: "No such file or directory")."""
    src = tmp_path / "in.en"
    src.write_text("Hello, world!\n")
    holder = subprocess.Popen(["sleep", "60"], stdout=subprocess.PIPE)
    try:
        args = [CLI, "-q", "tokenize", "-l", "en", "-i", str(src), "-o", f"/proc/{holder.pid}/fd/1"]
        done = subprocess.run(args, capture_output=True, text=True)
    finally:
        holder.kill()
        holder.wait()
    assert done.returncode == 0, done.stderr
    assert holder.stdout is not None and holder.stdout.read() == b"Hello , world !\n"
    holder.stdout.close()


@pytest.mark.parametrize("suffix", [".gz", ".xz"])
def test_text_to_a_compressed_name_is_compressed_as_the_readers_take_it(tmp_path, suffix):
    """``lm -o x.arpa.gz`` once wrote plain text under a .gz name, which the ARPA reader (and zcat) then refused:
    text written to .gz or .xz is compressed, the same bytes for the same text, and a FIFO so named too."""
    from moses_recaser.io.lines import read_lines

    corpus = _write(tmp_path / "corpus", "the cat sat .\nthe dog sat .\n")
    arpa = tmp_path / f"lm.arpa{suffix}"
    assert main(["lm", "-i", corpus, "-o", str(arpa), "--lm-order", "2"]) == 0
    assert main(["lm", "-i", corpus, "-o", str(tmp_path / "lm.arpa"), "--lm-order", "2"]) == 0
    assert list(read_lines(str(arpa))) == (tmp_path / "lm.arpa").read_text(encoding="utf-8").splitlines()
    first = arpa.read_bytes()
    assert main(["lm", "-i", corpus, "-o", str(arpa), "--lm-order", "2"]) == 0
    assert arpa.read_bytes() == first  # no time or name in the stream
    assert _ours(tmp_path) == []
    text = "".join(f"line {k}\n" for k in range(50_000))
    (tmp_path / f"copy{suffix}").write_bytes(_through_a_fifo(tmp_path / f"pipe{suffix}", text, compress=True))
    assert list(read_lines(str(tmp_path / f"copy{suffix}"))) == text.splitlines()
    # an output cut short by an error ends without the stream's end, which its reader reports (the FIFO named
    # so: 'cut.gz.pipe' got plain text, refused only because the reader went by the name 'cut.gz')
    cut = _through_a_fifo(tmp_path / f"cut-pipe{suffix}", text, compress=True, fail=True)
    assert textio.compression(cut) == suffix
    (tmp_path / f"cut{suffix}").write_bytes(cut)
    with pytest.raises(RecaserError):
        list(read_lines(str(tmp_path / f"cut{suffix}")))


def test_compression_follows_the_file_written_and_only_data_outputs(tmp_path):
    """A symlink named .gz to a plain file gets plain text, a plain name linked to a .gz file gets gzip (the name
    given decided); a config file named .gz, which experiment.perl reads, stays plain text."""
    (tmp_path / "plain.txt").write_text("old\n")
    (tmp_path / "lnk.gz").symlink_to(tmp_path / "plain.txt")
    (tmp_path / "out").symlink_to(tmp_path / "real.gz")
    for name in ("lnk.gz", "out"):
        with atomic_output(tmp_path / name, compress=True) as out:
            out.write("new\n")
    assert (tmp_path / "plain.txt").read_text() == "new\n"
    assert gzip.decompress((tmp_path / "real.gz").read_bytes()) == b"new\n"
    with atomic_output(tmp_path / "config.gz") as out:
        out.write("[GENERAL]\n")
    assert (tmp_path / "config.gz").read_text() == "[GENERAL]\n"


def test_a_compressed_output_that_fails_leaves_the_old_file(tmp_path):
    old = tmp_path / "out.gz"
    old.write_bytes(b"old")
    with pytest.raises(RuntimeError), atomic_output(old, compress=True) as out:
        out.write("half\n")
        raise RuntimeError("stop")
    assert old.read_bytes() == b"old" and _ours(tmp_path) == []


def test_binary_outputs_are_written_as_given_whatever_their_name(tmp_path):
    with atomic_output(tmp_path / "x.gz", binary=True, compress=True) as out:
        out.write(b"raw bytes")
    assert (tmp_path / "x.gz").read_bytes() == b"raw bytes"


def test_what_a_scratch_directory_held_is_no_output_to_name(tmp_path):
    """An interrupt names the outputs already in place; a file put in place in a scratch directory went with it
    (an interrupted train named its scratch aligner.priors as 'already written whole')."""
    from moses_recaser.io.outputs import outputs_written

    with atomic_output(tmp_path / "kept") as fh:
        fh.write("x\n")
    with work_dir("moses-recaser-test", tmp_path) as work:
        with atomic_output(Path(work) / "aligner.priors") as fh:
            fh.write("LEX\ta\tb\t1\n")
        assert outputs_written()[-1] == str(Path(work) / "aligner.priors")
    assert outputs_written()[-1] == str(tmp_path / "kept") and not any(w.startswith(work) for w in outputs_written())


@pytest.mark.parametrize("name", ["out/", "out/.", "./out/"])
def test_a_name_ending_in_a_slash_names_a_directory_and_is_refused(tmp_path, name, monkeypatch, capsys):
    """`-o NAME/` is refused as the shell's `>` refuses it: the file NAME stays as it was (it was replaced)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out").write_text("the user's\n")
    (tmp_path / "in.txt").write_text("a b\n")
    assert main(["-q", "tokenize", "-l", "en", "--input", "in.txt", "-o", name]) == 2
    assert "names a directory; give a file name" in capsys.readouterr().err
    assert (tmp_path / "out").read_text() == "the user's\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "out"]


@pytest.mark.parametrize("where", ["stdout", "/dev/fd/3"])
def test_an_error_after_lines_went_to_stdout_says_how_many(tico, tmp_path, where):
    """Standard output cannot be taken back, nor can another output written where it stands (``-o /dev/fd/3
    3>OUT``, a FIFO): an error that comes after lines went there says how many did (a descriptor's were not)."""
    hyp = tmp_path / "hyp"
    hyp.write_text("the cat .\n" * 600 + "a b\n", encoding="utf-8")
    src = tmp_path / "src"
    src.write_text("le chat .\n" * 600 + "x " * 10_001 + "\n", encoding="utf-8")
    out = tmp_path / "out"
    cmd = f"{CLI} -q recase -m {tico / 'model'} --input {hyp} --source {src}"
    cmd += " >OUT" if where == "stdout" else f" -o {where} 3>OUT"
    proc = subprocess.run(["bash", "-c", cmd.replace("OUT", str(out))], capture_output=True, text=True)
    assert proc.returncode == 2
    shown = out.read_text(encoding="utf-8").count("\n")
    assert shown >= 512, shown  # (a chunk of 512 lines at a time)
    assert proc.stderr.count("\n") == 1
    name = "standard output" if where == "stdout" else where
    assert f"({shown:,} lines of output were already written to {name})" in proc.stderr, proc.stderr


@pytest.mark.parametrize("made_by", ["file", "directory", "scratch"])
def test_an_interrupt_just_after_a_temporary_is_made_removes_it(tmp_path, monkeypatch, made_by):
    """SIGINT the moment a temporary file, model directory or scratch directory exists, before the code that
    made it has kept its name (here sent by the making call itself): it is removed all the same (a SIGTERMed
    EMS train once left its scratch directory behind)."""
    import signal
    import tempfile

    from moses_recaser.io import outputs

    before = signal.signal(signal.SIGINT, signal.default_int_handler)  # (see the test above)
    where, name = {"file": (outputs, "_open"), "directory": (outputs.os, "mkdir"), "scratch": (tempfile, "mkdtemp")}[
        made_by
    ]
    real = getattr(where, name)

    def interrupted(*args, **kwargs):  # type: ignore[no-untyped-def]
        made = real(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGINT)
        return made

    monkeypatch.setattr(where, name, interrupted)
    try:
        with pytest.raises(KeyboardInterrupt):
            if made_by == "file":
                with atomic_output(tmp_path / "out") as fh:
                    fh.write("never\n")
            elif made_by == "directory":
                with atomic_directory(tmp_path / "model") as d:
                    (d / "manifest.yaml").write_text("format_version: 6\n")
            else:
                with work_dir("moses-recaser", tmp_path):
                    pass
    finally:
        signal.signal(signal.SIGINT, before)
    assert list(tmp_path.iterdir()) == []


def test_a_name_near_the_limit_is_written_its_temporary_name_cut_to_fit(tmp_path):
    """A 250-byte name (the shell's > takes it) is written, as file and as model directory: its temporary's name,
    ``.NAME.XXXXXXXX.moses-recaser.tmp``, would pass the 255 bytes a name may have, and is cut (the run trained
    for its whole length, then failed)."""
    name = "é" * 125  # 250 bytes, and a cut inside a character
    with atomic_output(tmp_path / name) as fh:
        assert [len(os.fsencode(p)) for p in _ours(tmp_path)] == [255]
        fh.write("whole\n")
    with atomic_directory(tmp_path / ("m" + name[1:])) as d:
        (d / "file").write_text("x")
    assert (tmp_path / name).read_text() == "whole\n" and (tmp_path / ("m" + name[1:]) / "file").is_file()
    assert _ours(tmp_path) == []


def test_removing_a_tree_never_touches_the_directory_that_holds_it(tmp_path):
    """A scratch tree removed by someone else first (a tmp cleaner), or one that cannot be emptied, leaves the
    directory that holds it as it was: a failure on the tree itself made its parent (TMPDIR, /tmp) mode 700."""
    from moses_recaser.io.outputs import remove_tree

    parent = tmp_path / "parent"
    parent.mkdir()
    parent.chmod(0o755)
    remove_tree(parent / "gone")
    tree = parent / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "f").write_text("x")
    (tree / "sub").chmod(0o500)  # read-only: made writable again to empty it
    remove_tree(tree)
    assert not tree.exists() and stat.S_IMODE(parent.stat().st_mode) == 0o755


def test_an_input_written_into_as_it_is_read_is_refused(tico, tmp_path):
    """Recasing in place replaces the input whole once it is done; an output written where it stands into the
    input as it is read (``-o /dev/fd/3 3>>IN``, or stdout ``>> IN``) grew it without end, until the disk was full."""
    inp = tmp_path / "in.en"
    inp.write_bytes((tico / "test.lc.en").read_bytes())
    before = inp.read_bytes()
    for redirect in ("-o /dev/fd/3 3>>IN", ">>IN"):
        cmd = f"{CLI} -q recase --model {tico / 'model'} --input IN {redirect}".replace("IN", str(inp))
        done = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and "this output is also the file given as --input," in done.stderr, done.stderr
        assert inp.read_bytes() == before


@pytest.mark.parametrize("command", ["recase --model MODEL", "tokenize -l en", "eval --hyp - --ref REF"])
def test_a_closed_standard_input_is_one_line(tico, command):
    """``<&-``: standard input read by a command, closed (sys.stdin is None), is a user's error in one line, before
    the work (it was an internal error, exit 3)."""
    cmd = command.replace("MODEL", str(tico / "model")).replace("REF", str(tico / "test.en"))
    done = subprocess.run(["bash", "-c", f"{CLI} -q {cmd} <&-"], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (
        2,
        "moses-recaser: error: <stdin>: standard input is closed; give an input file\n",
    )


@pytest.mark.parametrize("output", ["/dev/fd/5", "/dev/stdin"])
def test_a_descriptor_not_open_for_writing_is_refused_before_the_work(tico, tmp_path, output):
    """``-o /dev/fd/N`` with N not opened by the shell, or ``-o /dev/stdin`` (read only): refused as the run starts,
    as a file that cannot be written is (it failed with 'Bad file descriptor' after the work)."""
    inp = tmp_path / "in.txt"
    inp.write_text("the cat .\n", encoding="utf-8")
    cmd = f"{CLI} -q tokenize -l en -i {inp} -o {output} < {inp}"
    done = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=60)
    fd = output.rsplit("/", 1)[1].replace("stdin", "0")
    assert (done.returncode, done.stderr) == (
        2,
        f"moses-recaser: error: {output}: descriptor {fd} is not open for writing (as N>FILE opens it)\n",
    )
