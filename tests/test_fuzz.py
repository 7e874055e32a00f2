"""Fuzzing every parser: the only failure allowed is RecaserError, carrying a path and a line number."""

from __future__ import annotations

import json
import os
import tempfile

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from moses_recaser.core.triples import read_triples
from moses_recaser.harness.experiment_config import load_config
from moses_recaser.io.errors import RecaserError
from moses_recaser.io.modeldir import read_manifest
from moses_recaser.moses.bitext import read_aligned_bitext
from moses_recaser.moses.nbest import read_nbest
from moses_recaser.moses.trace import read_trace

FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# building blocks that look like real decoder output, mixed with noise
_piece = st.one_of(
    st.sampled_from(
        [
            "das",
            "ist",
            "Haus",
            "UNKhaus",
            "|0-1|",
            "|2-2|",
            "|0-",
            "|1-0|",
            "|lm=(",
            "|lm=(2:-1)|",
            "|0-1,wa=0-0 ,total=-1, LM0= -2|",
            "|||",
            "0-0",
            "1-2",
            "x-y",
            "3=3",
            "0-1=0-1",
            "&amp;",
            "word|NN",
            '<passthrough tag="a"/>',
            "<b>",
            " ",
            "  ",
            "\t",
            "0",
            "-",
            "=",
            ",",
            "|",
        ]
    ),
    st.text(min_size=1, max_size=6),
)
_line = st.lists(_piece, max_size=12).map(lambda xs: " ".join(xs))
_lines = st.lists(_line, min_size=0, max_size=5)


def _tmp(lines, newline_at_end: bool = True, raw: bytes | None = None) -> str:
    fd, path = tempfile.mkstemp(prefix="fuzz.")
    with os.fdopen(fd, "wb") as fh:
        if raw is not None:
            fh.write(raw)
        else:
            text = "\n".join(x.replace("\n", " ").replace("\r", " ") for x in lines)
            if lines and newline_at_end:
                text += "\n"
            fh.write(text.encode("utf-8", "surrogatepass"))
    return path


def _only_recaser_errors(fn, *paths: str) -> None:
    try:
        for _ in fn():
            pass
    except RecaserError as exc:
        assert exc.path is not None, exc
        assert exc.path in paths or os.path.dirname(exc.path) in paths or exc.path.startswith(tempfile.gettempdir())
        assert exc.line >= 0
        assert str(exc).startswith(exc.path)
    finally:
        for p in paths:
            if os.path.isfile(p):
                os.unlink(p)


@FUZZ
@given(_lines, _lines, st.booleans())
def test_fuzz_one_best_trace(src_lines, trace_lines, end_newline):
    src, trace = _tmp(src_lines), _tmp(trace_lines, end_newline)
    _only_recaser_errors(lambda: read_trace(src, trace), src, trace)


@FUZZ
@given(_lines, _lines, _lines)
def test_fuzz_trace_with_alignment_file(src_lines, trace_lines, wa_lines):
    src, trace, wa = _tmp(src_lines), _tmp(trace_lines), _tmp(wa_lines)
    _only_recaser_errors(lambda: read_trace(src, trace, wa), src, trace, wa)


_nbest_line = st.tuples(st.integers(0, 4).map(str) | st.text(max_size=3), _line, _line, _line, _line).map(
    lambda t: " ||| ".join(t[: 3 + len(t[4]) % 3])
)


@FUZZ
@given(_lines, st.lists(_nbest_line, max_size=6))
def test_fuzz_nbest(src_lines, nbest_lines):
    src, nb = _tmp(src_lines), _tmp(nbest_lines)
    _only_recaser_errors(lambda: read_nbest(src, nb), src, nb)


@FUZZ
@given(_lines, _lines, _lines)
def test_fuzz_plain_aligned_bitext(src_lines, tgt_lines, wa_lines):
    src, tgt, wa = _tmp(src_lines), _tmp(tgt_lines), _tmp(wa_lines)
    _only_recaser_errors(lambda: read_aligned_bitext(src, tgt, wa), src, tgt, wa)


@FUZZ
@given(st.binary(max_size=64), st.binary(max_size=64))
def test_fuzz_raw_bytes(a, b):
    src, trace = _tmp([], raw=a), _tmp([], raw=b)
    _only_recaser_errors(lambda: read_trace(src, trace), src, trace)


_json_value = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 12) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
_triple_obj = st.fixed_dictionaries(
    {"id": st.integers(0, 3) | st.text(max_size=2)},
    optional={
        "source": _json_value | st.lists(st.text(max_size=3), max_size=4),
        "target": _json_value | st.lists(st.text(max_size=3), max_size=4),
        "phrases": _json_value | st.lists(st.lists(st.integers(-1, 4), min_size=4, max_size=4), max_size=3),
        "links": _json_value | st.lists(st.lists(st.integers(-1, 4), min_size=2, max_size=2), max_size=3),
        "rank": _json_value,
        "nbest": _json_value,
        "unknown": _json_value,
        "factors": _json_value,
        "extra": _json_value,
    },
)


@FUZZ
@given(st.lists(st.one_of(_triple_obj.map(json.dumps), _line), max_size=4))
def test_fuzz_triples_jsonl(lines):
    path = _tmp(lines)
    _only_recaser_errors(lambda: read_triples(path), path)


_yaml_value = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-2, 5)
    | st.floats(allow_nan=False, allow_infinity=False, width=32)
    | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=10,
)
_config_keys = st.sampled_from(
    [
        "name",
        "pair",
        "sigma",
        "lm_order",
        "splits",
        "systems",
        "learning_curve",
        "features",
        "sigmma",
        "train",
        "data_root",
        "heldout",
    ]
)


@FUZZ
@given(st.dictionaries(_config_keys, _yaml_value, max_size=5) | _yaml_value, st.text(max_size=20))
def test_fuzz_yaml_config(doc, noise):
    text = yaml.safe_dump(doc) + (noise if len(noise) % 2 else "")
    path = _tmp([], raw=text.encode("utf-8", "surrogatepass"))
    try:
        load_config(path)
    except RecaserError as exc:
        assert exc.path == path and exc.line >= 0
    finally:
        os.unlink(path)


@FUZZ
@given(
    st.dictionaries(
        st.sampled_from(["format_version", "files", "settings", "signature", "weights", "x"]), _yaml_value, max_size=5
    )
    | _yaml_value,
    st.sampled_from(["yaml", "json", "json cut short"]),
)
def test_fuzz_model_manifest(doc, form):
    """A manifest as YAML, as JSON (as ours are written), or as JSON cut short (read as YAML then): a RecaserError
    naming it, or a manifest."""
    d = tempfile.mkdtemp(prefix="fuzz-model.")
    text = yaml.safe_dump(doc) if form == "yaml" else json.dumps(doc, indent=1)
    with open(os.path.join(d, "manifest.yaml"), "w", encoding="utf-8") as fh:
        fh.write(text[: len(text) // 2] if form == "json cut short" else text)
    try:
        read_manifest(d)
    except RecaserError as exc:
        assert exc.path is not None and exc.path.startswith(d)
    finally:
        for name in os.listdir(d):
            os.unlink(os.path.join(d, name))
        os.rmdir(d)
