"""A model directory can come from someone else: it is read only through the regular files inside it that its
manifest names, their sizes and checksums checked before they are parsed; one that fails them is one RecaserError,
never a hang or a traceback; a model replaced while it loads is seen whole or refused (docs/reliability.md, 7)."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

from moses_recaser.io.errors import RecaserError
from moses_recaser.io.outputs import atomic_directory
from moses_recaser.model.modes import Weights
from moses_recaser.model.recaser import Recaser
from moses_recaser.model.settings import weights_digest
from moses_recaser.moses.formats import FORMATS, Inputs

CLI = str(Path(sys.executable).parent / "moses-recaser")


@pytest.fixture
def model(tico, tmp_path) -> Path:
    d = tmp_path / "model"
    shutil.copytree(tico / "model", d)
    return d


def _manifest(d: Path) -> dict:
    return yaml.safe_load((d / "manifest.yaml").read_text(encoding="utf-8"))


def _write_manifest(d: Path, doc: dict) -> None:
    (d / "manifest.yaml").write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), encoding="utf-8")


def _rehash(d: Path) -> None:
    """Checksums made to match the files again, as someone who edits a model on purpose would."""
    doc = _manifest(d)
    doc["files"] = {n: hashlib.sha256((d / n).read_bytes()).hexdigest() for n in doc["files"]}
    doc["sizes"] = {n: (d / n).stat().st_size for n in doc["files"]}
    _write_manifest(d, doc)


def _recase_cli(d: Path, lines: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [CLI, "recase", "--model", str(d), "--input", str(lines)], capture_output=True, text=True, timeout=timeout
    )


def _one_error(proc: subprocess.CompletedProcess, *needles: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("moses-recaser: error: "), proc.stderr
    for needle in needles:
        assert needle in proc.stderr, proc.stderr


def test_a_symlink_to_dev_zero_is_refused_without_reading_it(model, tico):
    (model / "tables.npz").unlink()
    (model / "tables.npz").symlink_to("/dev/zero")
    proc = _recase_cli(model, tico / "test.lc.en", timeout=30)  # reading /dev/zero would never end
    _one_error(proc, "tables.npz", "symlink")


def test_a_fifo_in_place_of_a_model_file_does_not_hang(model, tico):
    (model / "lm.npz").unlink()
    os.mkfifo(model / "lm.npz")
    proc = _recase_cli(model, tico / "test.lc.en", timeout=30)
    _one_error(proc, "lm.npz", "not a regular file")


def test_a_symlink_to_a_regular_file_outside_is_refused(model, tmp_path, tico):
    outside = tmp_path / "elsewhere.npz"
    shutil.move(model / "candidates.npz", outside)
    (model / "candidates.npz").symlink_to(outside)
    _one_error(_recase_cli(model, tico / "test.lc.en"), "candidates.npz", "symlink")


@pytest.mark.parametrize("name", ["../outside", "/etc/passwd", "sub/x", ".hidden", ""])
def test_manifest_entries_outside_the_directory_are_refused(model, name):
    doc = _manifest(model)
    doc["files"][name] = "0" * 64
    _write_manifest(model, doc)
    with pytest.raises(RecaserError, match="not a plain file name inside the model directory") as err:
        Recaser(model)
    assert err.value.path == str(model / "manifest.yaml")


def test_a_manifest_that_is_a_fifo_does_not_hang(model, tico):
    (model / "manifest.yaml").unlink()
    os.mkfifo(model / "manifest.yaml")
    _one_error(_recase_cli(model, tico / "test.lc.en", timeout=30), "manifest.yaml", "not a regular file")


def test_checksums_come_before_parsing(model):
    """A file that would crash the parser is reported as damaged by its size, or at the same size by its checksum,
    both checked first."""
    size = (model / "tables.npz").stat().st_size
    (model / "tables.npz").write_bytes(b"PK\x03\x04 not an archive")
    with pytest.raises(RecaserError, match="tables.npz has 19 bytes, not the"):
        Recaser(model)
    (model / "tables.npz").write_bytes(b"PK\x03\x04".ljust(size, b"x"))
    with pytest.raises(RecaserError, match="checksum mismatch for tables.npz"):
        Recaser(model)


_MANIFEST_EDITS = {
    "no settings": lambda doc: doc.pop("settings"),
    "alignment_mode changed": lambda doc: doc["settings"].__setitem__("alignment_mode", "phrase"),
    "alignment_mode a list": lambda doc: doc["settings"].__setitem__("alignment_mode", [1]),
    "max_candidates a string": lambda doc: doc["settings"].__setitem__("max_candidates", "many"),
    "no weights": lambda doc: doc.pop("weights"),
    "weights a string": lambda doc: doc.__setitem__("weights", "w"),
    "weights without names": lambda doc: doc["weights"].pop("names"),
    "format_version a string": lambda doc: doc.__setitem__("format_version", "6"),
    "format_version true": lambda doc: doc.__setitem__("format_version", True),
    "files a list": lambda doc: doc.__setitem__("files", ["tables.npz"]),
    "a digest a number": lambda doc: doc["files"].__setitem__("tables.npz", 5),
    "no files": lambda doc: doc.pop("files"),
    "a weight NaN": lambda doc: doc["weights"]["modes"]["both"].__setitem__(0, float("nan")),
    "a weight 1e308": lambda doc: doc["weights"]["modes"]["both"].__setitem__(1, 1e308),
    "a weight a list": lambda doc: doc["weights"]["modes"]["both"].__setitem__(1, [1.0, 2.0]),
    "a weight changed": lambda doc: doc["weights"]["modes"]["both"].__setitem__(1, 0.5),
    "a setting changed": lambda doc: doc["settings"].__setitem__("sigma", 0.25),
    "a setting NaN": lambda doc: doc["settings"].__setitem__("sigma", float("nan")),
    "the signature without weights": lambda doc: doc.__setitem__("signature", doc["signature"].split("|w:")[0]),
    "the signature not ours": lambda doc: doc.__setitem__("signature", "x" + doc["signature"]),
    "sizes a list": lambda doc: doc.__setitem__("sizes", [1]),
    "a size negative": lambda doc: doc["sizes"].__setitem__("lm.npz", -1),
    "a size of another file": lambda doc: doc["sizes"].__setitem__("other.npz", 1),
    "a size off by one": lambda doc: doc["sizes"].__setitem__("tables.npz", doc["sizes"]["tables.npz"] + 1),
}


@pytest.mark.parametrize("edit", sorted(_MANIFEST_EDITS))
def test_a_damaged_manifest_is_one_error(model, edit):
    doc = _manifest(model)
    _MANIFEST_EDITS[edit](doc)
    _write_manifest(model, doc)
    with pytest.raises(RecaserError) as err:
        Recaser(model)
    assert err.value.path is not None and err.value.path.startswith(str(model))
    if edit == "format_version true":  # (YAML's true is no version 1: "written by an older moses-recaser")
        assert "no integer format_version" in err.value.reason


def test_weights_edited_in_the_manifest_are_refused_by_its_signature(model):
    """The manifest holds the weights and is not among the files it checksums: weights edited there (all negated:
    every word came out in capitals) under the same signature, which says they are the same model's, are refused."""
    doc = _manifest(model)
    doc["weights"]["modes"] = {m: [-w for w in ws] for m, ws in doc["weights"]["modes"].items()}
    _write_manifest(model, doc)
    signed = doc["signature"].split("|w:")[1]
    with pytest.raises(RecaserError, match=f"the weights do not match the signature's hash \\(w:{signed}\\)"):
        Recaser(model)
    doc = _manifest(model)
    doc["weights"]["modes"] = {m: [-w for w in ws] for m, ws in doc["weights"]["modes"].items()}  # back
    doc["settings"]["input_case"] = "cased"  # the signature would say in:cased
    _write_manifest(model, doc)
    with pytest.raises(RecaserError, match="the settings do not match the signature: the manifest was edited"):
        Recaser(model)


def test_a_file_of_the_wrong_size_is_refused_before_it_is_read(model):
    """A model file grown (a sparse 1 GiB tail: hashing it would take seconds) with its checksum made to match: the
    size in the manifest refuses it at once, by name."""
    doc = _manifest(model)
    with open(model / "tables.npz", "r+b") as fh:
        fh.truncate(doc["sizes"]["tables.npz"] + (1 << 30))
    doc["files"]["tables.npz"] = "0" * 64  # never compared: the size is checked first
    _write_manifest(model, doc)
    with pytest.raises(RecaserError, match=r"tables.npz has 1\d+ bytes, not the \d+ of its manifest"):
        Recaser(model)


def _flipped(model: Path, tmp_path: Path) -> Path:
    """The same model with other weights: a second, different model to swap with."""
    other = tmp_path / "other"
    shutil.copytree(model, other)
    doc = _manifest(other)
    doc["weights"]["modes"] = {m: [-w for w in ws] for m, ws in doc["weights"]["modes"].items()}
    digest = weights_digest(Weights.from_dict(doc["weights"], "manifest").matrix())
    doc["signature"] = re.sub(r"\|w:[0-9a-f]+", f"|w:{digest}", doc["signature"])  # as training would sign them
    _write_manifest(other, doc)
    return other


def test_a_model_replaced_while_it_loads_is_seen_whole_or_refused(model, tmp_path, tico):
    lines = (tico / "test.lc.en").read_text(encoding="utf-8").splitlines()[:10]
    src = tmp_path / "lines.en"
    src.write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    triples = [r.triple for r in FORMATS["text"].read(Inputs(str(src)))]
    other = _flipped(model, tmp_path)
    expected = {"a": list(Recaser(model).recase_triples(triples)), "b": list(Recaser(other).recase_triples(triples))}
    assert expected["a"] != expected["b"]
    sources = {"a": tmp_path / "keep-a", "b": tmp_path / "keep-b"}
    shutil.copytree(model, sources["a"])
    shutil.copytree(other, sources["b"])
    stop = threading.Event()

    def replace_again_and_again() -> None:  # as training runs write it: a new directory, swapped in
        k = 0
        while not stop.is_set():
            with atomic_directory(model) as d:
                for f in sources["ab"[k % 2]].iterdir():
                    shutil.copyfile(f, d / f.name)
            k += 1

    writer = threading.Thread(target=replace_again_and_again)
    writer.start()
    seen = {"a": 0, "b": 0, "refused": 0}
    try:
        for _ in range(40):
            try:
                out = list(Recaser(model).recase_triples(triples))
            except RecaserError as exc:
                assert "replaced while it was loading" in str(exc), exc
                seen["refused"] += 1
                continue
            which = [k for k, v in expected.items() if v == out]
            assert which, "a model mixed from two directories"
            seen[which[0]] += 1
    finally:
        stop.set()
        writer.join()
    assert seen["a"] + seen["b"] > 0, seen


@pytest.mark.parametrize("line", ["model: MODEL\0junk", "model:", "model:   "])
def test_a_pointer_naming_no_directory_is_refused_at_its_line(model, tmp_path, line):
    """A pointer file's 'model:' line with a NUL (a ValueError from the system) or naming nothing (its own
    directory, which holds the pointer) is one RecaserError at the pointer's line."""
    pointer = tmp_path / "model.ptr"
    pointer.write_text("# made by hand\n" + line.replace("MODEL", str(model)) + "\n", encoding="utf-8")
    with pytest.raises(RecaserError, match=re.escape(f"{pointer}:2: not a moses-recaser model pointer")):
        Recaser.load(pointer)


def test_a_pointer_with_a_byte_order_mark_loads_and_one_with_two_models_is_refused(model, tmp_path):
    """An editor's UTF-8 byte-order mark is dropped, as in any text input (the pointer was 'not a model
    pointer'); a second 'model:' line is refused at its line, not left unread while the first wins."""
    pointer = tmp_path / "bom.ptr"
    pointer.write_bytes(b"\xef\xbb\xbfmodel: " + str(model).encode() + b"\r\n")
    assert Recaser.load(pointer).recase("the cat .") == Recaser.load(model).recase("the cat .")
    two = tmp_path / "two.ptr"
    two.write_text(f"model: {model}\n# another\nmodel: {tmp_path / 'nosuch'}\n", encoding="utf-8")
    with pytest.raises(RecaserError, match=re.escape(f"{two}:3: a second 'model:' line: a pointer names one model")):
        Recaser.load(two)


def _align_recased(r: Recaser, tico, out) -> list[str]:
    """``r`` recasing the tico test set with --align: the lines, each a recasing of its input line."""
    hyps = (tico / "test.lc.en").read_text(encoding="utf-8").splitlines()[:20]
    (out.parent / "hyp").write_text("\n".join(hyps) + "\n", encoding="utf-8")
    (out.parent / "src").write_text(
        "\n".join((tico / "test.fr").read_text(encoding="utf-8").splitlines()[:20]) + "\n", encoding="utf-8"
    )
    r.recase_file(str(out.parent / "hyp"), str(out), source=str(out.parent / "src"), align=True)
    lines = out.read_text(encoding="utf-8").splitlines()
    assert [x.lower() for x in lines] == hyps
    return lines


def _broken_tables(model: Path) -> None:
    """The model's tables replaced by a file that is not one (rehashed): loaded, it is an error."""
    (model / "tables.npz").write_bytes(b"not an npz file\n")
    _rehash(model)


def test_a_model_loaded_by_a_relative_name_is_found_after_a_chdir(model, tmp_path, tico, monkeypatch):
    """A model loaded by a relative name is the one it was loaded from, whatever the working directory has become
    (another directory of that name, broken, changes nothing for it)."""
    monkeypatch.chdir(model.parent)
    r = Recaser.load(model.name)
    before = _align_recased(r, tico, tmp_path / "out")
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(model, elsewhere / model.name)
    _broken_tables(elsewhere / model.name)
    monkeypatch.chdir(elsewhere)
    assert _align_recased(r, tico, tmp_path / "out") == before
    with pytest.raises(RecaserError, match="tables.npz"):
        Recaser.load(model.name)


def test_a_model_replaced_under_a_loaded_recaser_is_the_old_one_to_it(model, tmp_path, tico):
    """A loaded Recaser keeps the files it mapped: a model replaced since (as train replaces one) is the old model
    to it, not a checksum mismatch at use ("damaged")."""
    r = Recaser.load(model)
    before = _align_recased(r, tico, tmp_path / "out")
    newer = tmp_path / "newer"
    shutil.copytree(model, newer)
    _broken_tables(newer)
    with atomic_directory(model) as d:
        for f in newer.iterdir():
            shutil.copyfile(f, d / f.name)
    assert _align_recased(r, tico, tmp_path / "out") == before
    with pytest.raises(RecaserError, match="tables.npz"):
        Recaser.load(model)


def test_the_eflomal_priors_of_an_earlier_version_are_not_read(model, tmp_path, tico):
    """Models of earlier versions list ``aligner.priors`` (eflomal's, for --align): checked or not, they are not
    read, and --align gives what it gives without them."""
    before = _align_recased(Recaser.load(model), tico, tmp_path / "out")
    (model / "aligner.priors").write_text("0-0 1-1\n", encoding="utf-8")  # not eflomal priors at all
    doc = _manifest(model)
    doc["files"]["aligner.priors"] = "0" * 64  # nor its checksum
    _write_manifest(model, doc)
    assert _align_recased(Recaser.load(model), tico, tmp_path / "out") == before


def test_a_model_path_that_is_no_directory_or_pointer_says_so(tmp_path):
    """A FIFO or a symlink loop given as the model was refused with the wording of a file inside a model ('a model
    directory holds regular files only'); a link to nothing is a model not found."""
    os.mkfifo(tmp_path / "fifo")
    os.symlink(tmp_path / "loop", tmp_path / "loop")
    os.symlink(tmp_path / "nothing", tmp_path / "dangling")
    for name, said in (
        ("fifo", "not a model directory or a model pointer file"),
        ("loop", "not a model directory or a model pointer file (Too many levels of symbolic links)"),
        ("dangling", "model not found"),
    ):
        with pytest.raises(RecaserError, match=re.escape(f"{tmp_path / name}: {said}")):
            Recaser.load(tmp_path / name)


def test_align_refuses_priors_that_are_not_eflomals_at_their_line(tico, tmp_path):
    """``align --priors`` given another file (a word alignment, a line with a word for its number): one error at
    the line, before eflomal reads it."""
    priors = tmp_path / "priors"
    cmd = [CLI, "align", "--source", str(tico / "dev.fr"), "--target", str(tico / "dev.en"), "--priors", str(priors)]
    for text, line in (("0-0 1-1\n", 1), ("LEX\tle\tthe\t1.5\nHMMF\tfar\t2\n", 2), ("LEX\tle\tthe\tmany\n", 1)):
        priors.write_text(text, encoding="utf-8")
        proc = subprocess.run(cmd + ["-o", str(tmp_path / "wa")], capture_output=True, text=True, timeout=120)
        _one_error(proc, f"{priors}:{line}: not eflomal priors")
        assert not (tmp_path / "wa").exists()


def test_two_outputs_naming_one_file_are_refused(tico, tmp_path):
    """``align -o X --priors-out X`` wrote the priors and then the alignment over them: refused before the work,
    as is the same file through a symlink, and stdout named two ways (``-o - --priors-out /dev/stdout`` mixed
    both into it); two outputs to /dev/null are fine."""
    for side in ("fr", "en"):  # ten lines: what eflomal makes of them is not the subject
        lines = (tico / f"dev.{side}").read_text(encoding="utf-8").splitlines(True)[:10]
        (tmp_path / f"d.{side}").write_text("".join(lines), encoding="utf-8")
    cmd = [CLI, "align", "--source", str(tmp_path / "d.fr"), "--target", str(tmp_path / "d.en")]
    (tmp_path / "link").symlink_to(tmp_path / "same")
    for a, b in (("same", "same"), ("same", "link")):
        proc = subprocess.run(
            cmd + ["-o", str(tmp_path / a), "--priors-out", str(tmp_path / b)], capture_output=True, text=True
        )
        _one_error(proc, f"{tmp_path / b}: this output is also the one given as --output")
        assert not (tmp_path / "same").exists()
    proc = subprocess.run(cmd + ["-o", "-", "--priors-out", "/dev/stdout"], capture_output=True, text=True)
    _one_error(proc, "/dev/stdout: this output is also the one given as --output")
    assert proc.stdout == ""
    proc = subprocess.run(
        cmd + ["-o", os.devnull, "--priors-out", os.devnull], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr


def test_the_signature_says_what_a_recaser_was_told_to_read(model):
    """``read`` at recase changes the output of input with phrases and links: the signature the recase
    logs says so."""
    plain = Recaser.load(model).signature
    assert plain == _manifest(model)["signature"]
    for mode in ("phrase", "links"):
        assert Recaser.load(model, read=mode).signature == plain + f"|read:{mode}"
