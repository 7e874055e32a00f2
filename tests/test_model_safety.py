"""A model directory can come from someone else: it is read only through the regular files inside it that its
manifest names, checked before they are parsed; a damaged or hostile one is one RecaserError, never a hang, a
memory blow-up or a traceback; a model replaced while it loads is seen whole or refused."""

from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import numpy as np
import pytest
import yaml

from moses_recaser.errors import RecaserError
from moses_recaser.model.modes import Weights
from moses_recaser.model.recaser import Recaser
from moses_recaser.model.settings import weights_digest
from moses_recaser.modeldir import save_npz
from moses_recaser.moses.formats import FORMATS, Inputs
from moses_recaser.outputs import HOST, TAG, atomic_directory
from moses_recaser.triples import Triple

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
    "no alignment_mode": lambda doc: doc["settings"].pop("alignment_mode"),
    "alignment_mode a list": lambda doc: doc["settings"].__setitem__("alignment_mode", [1]),
    "max_candidates a string": lambda doc: doc["settings"].__setitem__("max_candidates", "many"),
    "no weights": lambda doc: doc.pop("weights"),
    "weights a string": lambda doc: doc.__setitem__("weights", "w"),
    "weights without names": lambda doc: doc["weights"].pop("names"),
    "format_version a string": lambda doc: doc.__setitem__("format_version", "6"),
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


def _edited(arrays: dict[str, np.ndarray], name: str, how: str) -> dict[str, np.ndarray]:
    out = dict(arrays)
    a = arrays[name]
    if how == "missing":
        del out[name]
    elif how == "dtype":
        out[name] = (
            a.astype(np.float64)
            if a.dtype.kind in "biu"
            else np.zeros(a.shape, np.int8)
            if a.dtype.kind == "f"
            else np.zeros(a.shape, np.float32)
        )
    elif how == "shorter" or a.dtype.kind not in "iuf" or not a.size:  # values: numbers only
        out[name] = a.reshape(-1)[: max(a.size // 2, 0)] if a.ndim else np.zeros(3, dtype=a.dtype)
    elif how == "negative":  # a count or an index below 0; a NaN probability
        out[name] = np.full(a.shape, np.nan, a.dtype) if a.dtype.kind == "f" else -np.abs(a) - 1
    elif how == "huge":  # an index past any array; an infinite probability
        out[name] = np.full(a.shape, np.inf if a.dtype.kind == "f" else np.iinfo(a.dtype).max, a.dtype)
    elif how == "reverse":  # every value in range, each in another's place
        out[name] = a.reshape(-1)[::-1].reshape(a.shape).copy()
    else:  # "one-..." the middle value, "tail-..." the second half: an edit that loading alone may not meet
        flat = a.reshape(-1).copy()
        part = slice(flat.size // 2, flat.size // 2 + 1) if how.startswith("one") else slice(flat.size // 2, None)
        flat[part] = _partial_value(a, how.endswith("huge"))
        out[name] = flat.reshape(a.shape)
    return out


def _partial_value(a: np.ndarray, huge: bool) -> float | int:
    """A value that no model holds: an index far past any array (in an int32 slot too), a count below zero, -1 where
    -1 means none is allowed, so -2; NaN or -inf for a probability."""
    if a.dtype.kind == "f":
        return np.nan if huge else -np.inf
    info = np.iinfo(a.dtype)
    return min(info.max, 2**31 - 2) if huge or info.min == 0 else -2


EDITS = ("missing", "dtype", "shorter", "negative", "huge")


def _arrays(path: Path) -> dict[str, np.ndarray]:
    with zipfile.ZipFile(path) as zf:
        return {n[:-4]: np.lib.format.read_array(io.BytesIO(zf.read(n))) for n in zf.namelist()}


def test_every_hand_edit_of_the_arrays_is_an_error_or_a_case_only_output(model, tico):
    """Every array of every .npz, dropped, given another dtype, cut short, or its values made negative (NaN) or
    huge (infinite), with the checksums made to match: loading and recasing either works (the edit did not matter,
    and output differs from input in case only) or raises RecaserError; nothing else escapes, not even a numpy
    warning (pytest makes RuntimeWarning an error)."""
    lines = (tico / "test.lc.en").read_text(encoding="utf-8").splitlines()[:20]
    src = tico / "lines.en"
    src.write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    triples = [r.triple for r in FORMATS["text"].read(Inputs(str(src)))]
    pristine = {f: _arrays(model / f) for f in ("tables.npz", "lm.npz", "candidates.npz")}
    tried = errors = 0
    for k, (npz, arrays) in enumerate(sorted(pristine.items())):
        for i, name in enumerate(sorted(arrays)):
            how = EDITS[(i + k) % len(EDITS)]  # every array, each kind of edit in turn
            save_npz(model / npz, _edited(arrays, name, how))
            _rehash(model)
            tried += 1
            try:
                out = Recaser(model).recase_batch(triples)
            except RecaserError:
                errors += 1
            else:
                assert [[w.lower() for w in s] for s in out] == [[w.lower() for w in t.target] for t in triples]
        save_npz(model / npz, arrays)
    _rehash(model)
    assert tried == sum(len(a) for a in pristine.values()) and errors > tried // 2


def _bilingual(tico: Path) -> list[Triple]:
    """The training and test lines, lowercased, with their sources and the diagonal word links: recasing them
    meets nearly every word type of the model, on both sides."""
    triples = []
    for part in ("train", "test"):
        src = (tico / f"{part}.fr").read_text(encoding="utf-8").splitlines()
        tgt = (tico / f"{part}.en").read_text(encoding="utf-8").splitlines()
        for f, e in zip(src, tgt):
            fs, es = f.split(" "), e.lower().split(" ")
            triples.append(Triple(len(triples), fs, es, links=[(i, i) for i in range(min(len(fs), len(es)))]))
    return triples


# edits of one value, half an array or its order, each of which an earlier version met only in the middle of
# recasing (an IndexError, a division by zero, a token changed by a candidate that was not a recasing: exit 3)
PARTIAL_EDITS = [
    ("candidates.npz", "facts.lm", "one-huge"),
    ("candidates.npz", "facts.tag", "one-huge"),
    ("candidates.npz", "facts.cased", "one-huge"),
    ("candidates.npz", "src.cased", "one-huge"),
    ("candidates.npz", "src.lower", "tail-huge"),
    ("candidates.npz", "src.tag", "tail-huge"),
    ("candidates.npz", "types.source.key", "one-huge"),
    ("candidates.npz", "types.source.key_pos", "tail-huge"),
    ("candidates.npz", "types.target.e_lower", "one-huge"),
    ("candidates.npz", "gen", "reverse"),
    ("candidates.npz", "strings.blob", "reverse"),
    ("candidates.npz", "strings.offsets", "one-negative"),
    ("candidates.npz", "strings.offsets", "one-huge"),
    ("tables.npz", "lower_src_total", "tail-negative"),
    ("tables.npz", "cased_src_types", "tail-negative"),
]


@pytest.mark.parametrize(("npz", "name", "how"), PARTIAL_EDITS, ids=[":".join(e) for e in PARTIAL_EDITS])
def test_a_partly_edited_array_is_an_error_or_a_case_only_output(model, tico, npz, name, how):
    """Checksums made to match an edit of part of an array: recasing sentences that meet it is a RecaserError
    (checked at load, or where the value is used) or case-only output; nothing else escapes, no numpy warning."""
    triples = _bilingual(tico)
    save_npz(model / npz, _edited(_arrays(model / npz), name, how))
    _rehash(model)
    try:
        out = Recaser(model).recase_batch(triples)
    except RecaserError as exc:
        assert "\n" not in str(exc)
        return
    assert [[w.lower() for w in s] for s in out] == [t.target for t in triples]


@pytest.mark.parametrize("through", ["directory", "pointer"])
def test_a_model_left_aside_by_a_dead_replacement_is_put_back_by_the_next_reader(model, tico, through):
    """A replacement without RENAME_EXCHANGE that died between its two renames left the model only under its
    aside name: recasing (a reading run, not just the next writing one) puts it back and uses it, named
    directly or through the pointer file of ``moses-recaser-ems train -config``."""
    with subprocess.Popen([sys.executable, "-c", "pass"]) as child:
        child.wait()
    aside = model.parent / f".{model.name}.{TAG}-{HOST}-{child.pid}-0badc0de.old"
    os.rename(model, aside)
    pointer = model.parent / "recaser.config"
    pointer.write_text(f"model: {model.name}\n", encoding="utf-8")
    proc = _recase_cli(model if through == "directory" else pointer, tico / "test.lc.en")
    assert proc.returncode == 0 and model.is_dir() and not aside.exists(), proc.stderr
    assert "put back" in proc.stderr


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
    expected = {"a": Recaser(model).recase_batch(triples), "b": Recaser(other).recase_batch(triples)}
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
                out = Recaser(model).recase_batch(triples)
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


def test_a_model_loaded_by_a_relative_name_is_found_after_a_chdir(model, tmp_path, monkeypatch):
    """What a loaded model reads later (--align's priors) is where it was loaded from, whatever the working
    directory has become (it was looked for relative to the new one, and could be another model's)."""
    monkeypatch.chdir(model.parent)
    r = Recaser.load(model.name)
    monkeypatch.chdir("/")
    assert r.aligner_priors() == model / "aligner.priors" and r.aligner_priors().is_file()


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


def test_align_reads_only_the_priors_its_manifest_names(model, tmp_path, tico):
    """--align's priors are read as every model file is: named by the manifest, a regular file inside the model,
    its checksum checked; priors that are not eflomal's are one error at their line, not eflomal's IndexError."""
    other = tmp_path / "other.priors"
    shutil.copyfile(model / "aligner.priors", other)
    doc = _manifest(model)
    del doc["files"]["aligner.priors"]
    doc.get("sizes", {}).pop("aligner.priors", None)
    _write_manifest(model, doc)
    (model / "aligner.priors").unlink()
    (model / "aligner.priors").symlink_to(other)
    with pytest.raises(RecaserError, match="--align needs a model trained with eflomal alignment"):
        Recaser.load(model).aligner_priors()
    (model / "aligner.priors").unlink()
    (model / "aligner.priors").write_text("0-0 1-1\n", encoding="utf-8")  # a word alignment, not priors
    doc["files"]["aligner.priors"] = hashlib.sha256(b"0-0 1-1\n").hexdigest()
    _write_manifest(model, doc)
    cmd = [CLI, "recase", "--model", str(model), "--input", str(tico / "test.lc.en"), "--source", str(tico / "test.fr")]
    _one_error(
        subprocess.run(cmd + ["--align"], capture_output=True, text=True, timeout=120),
        "aligner.priors:1: not eflomal priors",
    )


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
    as is the same file through a symlink; two outputs to /dev/null are fine."""
    cmd = [CLI, "align", "--source", str(tico / "dev.fr"), "--target", str(tico / "dev.en")]
    (tmp_path / "link").symlink_to(tmp_path / "same")
    for a, b in (("same", "same"), ("same", "link")):
        proc = subprocess.run(
            cmd + ["-o", str(tmp_path / a), "--priors-out", str(tmp_path / b)], capture_output=True, text=True
        )
        _one_error(proc, f"{tmp_path / b}: this output is also the one given as --output")
        assert not (tmp_path / "same").exists()
    proc = subprocess.run(
        cmd + ["-o", os.devnull, "--priors-out", os.devnull], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr


def test_the_recase_signature_says_what_a_recaser_was_told_to_read(model):
    """``alignment_mode`` at recase changes the output of input with phrases and links: the signature the recase
    logs says so."""
    assert Recaser.load(model).recase_signature == Recaser.load(model).signature
    for mode in ("phrase", "links"):
        assert (
            Recaser.load(model, alignment_mode=mode).recase_signature == Recaser.load(model).signature + f"|read:{mode}"
        )
