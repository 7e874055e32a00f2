"""Bounded memory: the memory setting, sorted runs spilled to disk and merged k ways, key sets packed in parts,
and the same model whatever the memory (a tiny budget spills many runs)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import moses_recaser.core.memory as memory_module
from moses_recaser import Bitext, RunOptions, TrainSettings
from moses_recaser.cli.main import main
from moses_recaser.core.keyset import KeySet, pack_blocks
from moses_recaser.core.memory import Memory, parse_memory, physical_memory
from moses_recaser.io.diskarrays import Scratch, Sink, whole
from moses_recaser.io.errors import RecaserError
from moses_recaser.io.modeldir import read_manifest
from moses_recaser.stats.keycounts import KeyCounts
from moses_recaser.stats.runs import PAIRS, KeyKind, Table, collect, merge_blocks


@pytest.mark.parametrize(
    "text,expected",
    [("2G", 2 << 30), ("500M", 500 << 20), ("1.5g", 3 << 29), ("300MiB", 300 << 20), (str(1 << 28), 1 << 28)],
)
def test_memory_sizes_as_lmplz_takes_them(text, expected):
    assert parse_memory(text) == expected


def test_memory_share_of_physical_memory():
    assert parse_memory("50%") == physical_memory() // 2


@pytest.mark.parametrize("text", ["lots", "2X", "-1G", "", "10M", "200M"])  # 200M: below the floor
def test_bad_memory_sizes_are_one_line_errors(text):
    with pytest.raises(RecaserError, match="`memory`"):
        parse_memory(text)


def test_memory_that_cannot_hold_what_must_stay_says_which_setting_to_raise():
    with pytest.raises(
        RecaserError, match=r"needs 2 MiB in memory, more than `memory` 1G leaves it .*: give more with `memory`$"
    ):
        Memory(1 << 20, "1G").need(2 << 20, "this")


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.tuples(st.integers(0, 40), st.integers(1, 5)), max_size=60), min_size=1, max_size=6),
    st.integers(1, 7),
)
def test_k_way_merge_sums_every_key_once(runs, rows):
    """Sorted runs merged a few rows at a time give each key once, in order, with its counts summed."""
    tables, expected = [], {}
    for run in runs:
        d: dict[int, int] = {}
        for k, c in run:
            d[k] = d.get(k, 0) + c
            expected[k] = expected.get(k, 0) + c
        keys = np.array(sorted(d), dtype=np.int64)
        tables.append(Table(PAIRS, keys, np.array([d[k] for k in keys.tolist()], dtype=np.int64)))
    merged = collect(merge_blocks([t.blocks(rows) for t in tables]), PAIRS, None)
    assert whole(merged.keys).tolist() == sorted(expected)
    assert whole(merged.counts).tolist() == [expected[k] for k in sorted(expected)]


@pytest.mark.parametrize("bits", [21, 0])
def test_key_kinds_sort_as_their_rows(bits):
    """Packed int64 keys and big-endian byte-string keys both sort word by word."""
    rng = np.random.default_rng(bits)
    rows = rng.integers(0, 1 << 20, size=(500, 3))
    kind = KeyKind(3, bits)
    keys = kind.pack(rows)
    assert (kind.unpack(keys) == rows).all()
    by_key = kind.unpack(np.sort(keys))
    assert by_key.tolist() == sorted(rows.tolist())


def test_spilled_counts_are_the_counts_held(tmp_path):
    """Counts spilled to runs in files, a widened kind among them, merge to what one table in memory holds."""
    rng = np.random.default_rng(0)
    scratch = Scratch(tmp_path)
    spilled, held = KeyCounts(KeyKind.ngrams(3, 0)), KeyCounts(KeyKind.ngrams(3, 0))
    for k in range(12):
        top = 1 << 22 if k == 7 else 50  # an id too wide for packed trigram keys
        rows = rng.integers(0, 50, size=(300, 3))
        rows[0, 1] = top
        spilled.add_rows(rows)
        held.add_rows(rows)
        if k % 3 == 2:
            spilled.spill(scratch, "ngrams3")
    assert len(spilled.runs) == 4 and {t.kind.bits for t in spilled.runs} == {21, 0}
    kind = KeyKind(3, 0)
    from moses_recaser.stats.runs import renumbered_blocks

    merged = collect(merge_blocks([renumbered_blocks(t, kind, 64) for t in spilled.tables()]), kind, None)
    (expected,) = held.tables()
    assert whole(merged.keys).tolist() == whole(expected.keys).tolist()
    assert whole(merged.counts).tolist() == whole(expected.counts).tolist()


def test_key_set_packed_in_parts_is_the_key_set(tmp_path):
    """A key set built from blocks in parts spilled to disk (a tiny memory) is the one packed in memory, and
    its payloads are in its order; the parts' files are gone after."""
    rng = np.random.default_rng(1)
    keys = np.unique(rng.integers(0, 1 << 40, size=20_000))
    rng.shuffle(keys)
    whole_set, order = KeySet.pack(keys)
    payload = np.arange(len(keys), dtype=np.int64) * 3
    blocks = [(keys[i : i + 1000], [payload[i : i + 1000]]) for i in range(0, len(keys), 1000)]
    packed = pack_blocks(
        lambda: blocks,
        len(keys),
        int(keys.max()),
        [Sink(tmp_path / "p", np.int64)],
        Memory(64 << 10),
        Scratch(tmp_path),
    )
    assert (packed.starts == whole_set.starts).all()
    assert (whole(packed.low) == whole_set.low).all()
    assert (whole(packed.payloads[0]) == payload[order]).all()
    assert not [p for p in tmp_path.iterdir() if "part" in p.name]


@pytest.fixture(scope="module")
def aligned(tico_aligned):
    return tico_aligned


def _tiny_memory(monkeypatch) -> None:
    """Every process looks empty (so a budget is all its own), and counters take 40 lines a chunk and keep 3 word
    types in each vocabulary's dict at a spill: with a budget of a few MiB, every chunk spills a run and compacts
    the vocabularies, and every merge reads many blocks."""
    import moses_recaser.stats.counter as counter
    import moses_recaser.stats.in_memory as in_memory
    import moses_recaser.stats.parallel as parallel

    for module in (memory_module, counter, in_memory, parallel):
        monkeypatch.setattr(module, "rss", lambda: 0)
    monkeypatch.setattr(counter, "CHUNK_LINES", 40)
    monkeypatch.setattr(counter, "KEEP_KNOWN", 3)


def _training(aligned: Path, tico: Path, jobs: int = 1, **run: object) -> dict:
    """train()'s keywords for the TICO slice with its word alignment (5 L-BFGS iterations: the tests compare
    models, not their quality)."""
    return dict(
        data=Bitext(aligned / "f", aligned / "e", aligned / "a"),
        dev=Bitext(tico / "dev.fr", tico / "dev.en", aligned / "dev.a"),
        settings=TrainSettings(max_iter=5),
        run=RunOptions(jobs, **run),
    )


@pytest.fixture(scope="module")
def roomy(aligned, tico, tmp_path_factory) -> Path:
    """The model of ``_training`` with everything in memory, in one process."""
    from moses_recaser import train

    model = tmp_path_factory.mktemp("roomy") / "model"
    train(model=model, **_training(aligned, tico))
    return model


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_model_from_spilled_counts_is_the_in_memory_model(aligned, tico, roomy, tmp_path, monkeypatch, jobs):
    """Training within a tiny memory (every chunk spilled, runs renumbered and merged k ways, key sets packed in
    parts), in one process or two, writes the model of training with everything in memory in one, byte for byte;
    no scratch file is left."""
    from moses_recaser import train

    _tiny_memory(monkeypatch)
    work = tmp_path / "work"
    work.mkdir()
    train(model=tmp_path / "tiny", **_training(aligned, tico, jobs, memory=6 << 20, work=work))
    roomy, tiny = read_manifest(roomy), read_manifest(tmp_path / "tiny")
    assert roomy.files == tiny.files and set(roomy.files) >= {"tables.npz", "lm.arpa", "lm.npz", "candidates.npz"}
    assert list(work.iterdir()) == []


def test_a_spill_leaves_the_counters_word_types_in_arrays(tmp_path, monkeypatch):
    """A spill writes the counts held and moves the word types out of Python strings (all but the first
    KEEP_KNOWN of each vocabulary); counting goes on with the same numbers, new types after the old."""
    import moses_recaser.stats.counter as counter

    KEEP_KNOWN = 10
    monkeypatch.setattr(counter, "KEEP_KNOWN", KEEP_KNOWN)
    lines = [f"Word{k} and w{k} , the {k % 7} rest ." for k in range(30)]
    kept, spilled = counter.Counter(3), counter.Counter(3)
    for c in (kept, spilled):
        c.add([x.split() for x in lines[:-5]])
    spilled.spill(Scratch(tmp_path))
    vocabs = [spilled.tgt_lower, spilled.target.ids]
    assert spilled.held() == 0 and [v.held() for v in vocabs] == [KEEP_KNOWN, KEEP_KNOWN]
    assert kept.tgt_lower.held() > 2 * KEEP_KNOWN
    for c in (kept, spilled):
        c.add([x.split() for x in lines[-5:]])
    assert list(spilled.target.ids) == list(kept.target.ids)
    assert np.array_equal(spilled.target["lower"], kept.target["lower"])


def test_a_registry_compacted_as_it_grows_recases_the_same(aligned, tico, roomy, tmp_path, monkeypatch):
    """The registry of training types described 50 at a time, its strings moved into arrays between (as a large
    corpus' are, REGISTRY_CHUNK at a time), and its columns filled 7 rows at a time: its numbering differs, not
    what it says: the same tables and LM, and the same recased test set."""
    import moses_recaser.core.columns as columns
    import moses_recaser.model.extractor as extractor
    from moses_recaser import Recaser, train

    monkeypatch.setattr(extractor, "REGISTRY_CHUNK", 50)
    monkeypatch.setattr(columns, "FLUSH_ROWS", 7)
    train(model=tmp_path / "chunked", **_training(aligned, tico))
    whole_files, chunked_files = read_manifest(roomy).files, read_manifest(tmp_path / "chunked").files
    assert {k: v for k, v in whole_files.items() if k != "candidates.npz"} == {
        k: v for k, v in chunked_files.items() if k != "candidates.npz"
    }
    lines = (tico / "test.lc.en").read_text(encoding="utf-8").splitlines()
    sources = (tico / "test.fr").read_text(encoding="utf-8").splitlines()
    got = [list(Recaser.load(m).recase_lines(lines, sources)) for m in (roomy, tmp_path / "chunked")]
    assert got[0] == got[1]


def test_scratch_files_are_removed_when_a_run_fails(aligned, tmp_path, monkeypatch):
    """A failure after counting (here, in the estimate) leaves no file in the temporary directory: the runs,
    the merged counts and the tables are all removed, and no model is written."""
    import tempfile

    import moses_recaser.stats.build as build
    from moses_recaser.stats.build import StatsSettings, write_statistics

    _tiny_memory(monkeypatch)
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))

    def broken(*args, **kwargs):
        raise RecaserError("broken on purpose")

    monkeypatch.setattr(build, "estimate", broken)
    with pytest.raises(RecaserError, match="broken on purpose"):
        files = (str(aligned / "f"), str(aligned / "e"), str(aligned / "a"))
        write_statistics(*files, StatsSettings(), str(tmp_path / "model"), 2, Memory(6 << 20))
    assert list(temp.iterdir()) == []
    assert not (tmp_path / "model").exists()


def test_memory_flag_in_every_command_that_counts(aligned, tmp_path, capsys):
    """-S/--memory is taken by stats, count and merge (train: the library test above), and a bad size is one
    line naming the setting."""
    args = ["--source", str(aligned / "f"), "--target", str(aligned / "e"), "--alignment", str(aligned / "a")]
    assert main(["-q", "stats", *args, "-S", "300M", "-o", str(tmp_path / "s")]) == 0
    assert main(["-q", "count", *args, "--shard", "1/1", "--memory", "300M", "-o", str(tmp_path / "c.npz")]) == 0
    assert main(["-q", "merge", str(tmp_path / "c.npz"), "-S", "1G", "-o", str(tmp_path / "m")]) == 0
    assert read_manifest(tmp_path / "s").files == read_manifest(tmp_path / "m").files
    capsys.readouterr()
    assert main(["stats", *args, "-S", "lots", "-o", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["moses-recaser: error: --memory must be a size such as 2G, 500M or 50%, not 'lots'"]
    assert not os.path.exists(tmp_path / "x")


def test_train_refuses_a_setting_below_what_it_needs(aligned, tmp_path, capsys):
    """A --memory below what a training holds whatever the setting (its processes' bases, the model it wrote, the
    CRF workers: ``memory.training_need``), less the SLACK it may pass it by, is refused before any work, naming
    the least setting, on both commands; at that setting the check passes, 10M below it fails."""
    from moses_recaser.cli.ems import main as ems_main

    files = [str(aligned / n) for n in ("f", "e", "a")]
    text = sum(os.path.getsize(f) for f in files)
    need = memory_module.training_need(text, 2)
    least = -(-(need - memory_module.SLACK) // (10 << 20)) * 10
    args = ["--source", files[0], "--target", files[1], "--alignment", files[2]]
    assert main(["train", *args, "-j", "2", "-S", "300M", "-o", str(tmp_path / "m")]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"moses-recaser: error: --memory 300M is below the least this training needs, {least}M (it holds about "
        f"{need >> 20} MiB whatever the setting, with --jobs 2 for 0 MiB of training text, and may pass the setting "
        f"by 100 MiB): give at least {least}M"
    ]
    assert not (tmp_path / "m").exists()
    ems = ["train", "-dir", str(tmp_path / "d"), "-corpus", files[1], "-source-corpus", files[0]]
    assert (
        ems_main([*ems, "-alignment", files[2], "-config", str(tmp_path / "c"), "-cores", "2", "-memory", "300M"]) == 2
    )
    err = capsys.readouterr().err
    assert f"-memory 300M is below the least this training needs, {least}M" in err and "with -cores 2" in err
    assert not (tmp_path / "c").exists() and not (tmp_path / "d").exists()
    Memory.from_setting(f"{least}M").check_training(text, 2)
    with pytest.raises(RecaserError, match="below the least"):
        Memory.from_setting(f"{least - 10}M").check_training(text, 2)
    # jobs 1 has no CRF workers; more text needs more
    assert memory_module.training_need(text, 1) == need - 2 * memory_module.CRF_WORKER
    assert memory_module.training_need(300 << 20, 1) > memory_module.training_need(80 << 20, 1)


def _same(a: object, b: object) -> bool:
    """Lattices (and their parts) equal field by field, arrays by value."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(a, b)  # type: ignore[arg-type]
    if isinstance(a, list | tuple):
        return isinstance(b, list | tuple) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if hasattr(a, "__dataclass_fields__"):
        return all(_same(getattr(a, f), getattr(b, f)) for f in a.__dataclass_fields__)  # type: ignore[attr-defined]
    return a == b


def test_dev_lattices_read_the_ngrams_of_one_block_of_dev_and_equal_the_whole_models(aligned, tico, monkeypatch):
    """The LM and tables for the dev lattices (``tables_for_dev``) keep the n-grams and word pairs whose words all occur
    in one block of dev sentences (here 4 sentences a block): fewer than those of words met anywhere in dev (a
    share of the corpus's: the frequent words are all met), and the lattices of every input mode read from them
    are the lattices of the whole tables and LM."""
    import moses_recaser.model.data as data
    import moses_recaser.model.train as training
    from moses_recaser.model.extractor import FeatureExtractor
    from moses_recaser.model.features import feature_names
    from moses_recaser.model.modes import MODES
    from moses_recaser.model.settings import TrainSettings
    from moses_recaser.stats.arpa_arrays import ArrayLM
    from moses_recaser.stats.npa import phrase_align_triple
    from moses_recaser.stats.tables import Tables

    monkeypatch.setattr(data, "DEV_BLOCKS", 25)
    settings = TrainSettings()
    tables, lm = Tables.load(tico / "model"), ArrayLM.load(tico / "model" / "lm.npz")
    dev = data.Bitext(str(tico / "dev.fr"), str(tico / "dev.en"), str(aligned / "dev.a")).triples()
    triples = [phrase_align_triple(t, None, 0) for t in dev]
    refs = [list(t.target) for t in dev]
    dev_tables, dev_lm = data.tables_for_dev(tables, lm, triples, refs)
    assert isinstance(dev_lm, ArrayLM)

    met = {data.dev_key(p) for t in triples for w in (*t.source, *t.target) for p in (w, *w.split("-"))}
    met |= {data.dev_key(casing_form) for t in triples for casing_form in t.source}
    anywhere = np.array([data.dev_key(w) in met or w in ("<s>", "</s>", "<unk>") for w in lm.vocab])
    keys = lm.trigrams.keys_at(0, len(lm.trigrams))
    V = lm.V
    of_met = anywhere[keys % V] & anywhere[keys // V % V] & anywhere[keys // V // V]
    assert 0 < len(dev_lm.trigrams) < int(of_met.sum())
    assert 0 < len(dev_tables.cased.pairs) < len(tables.cased.pairs)

    punct = training.punctuation_vocabulary(triples, settings.punct_min_count, tables.punct)
    names = feature_names(settings.feature_set, punct)
    whole = FeatureExtractor(tables, lm, names, settings.alignment_mode, settings.max_candidates)
    restricted = FeatureExtractor(dev_tables, dev_lm, names, settings.alignment_mode, settings.max_candidates)
    for mode in MODES:
        views = [mode.view(t) for t in triples]
        got = training.reference_lattices(restricted, views, refs)[0]
        assert _same(training.reference_lattices(whole, views, refs)[0], got), mode.name


def test_training_forms_are_grouped_in_arrays_not_in_dicts(tico):
    """The candidates' and the case prior's lookups over the training forms (GEN's forms by lowercase, the
    lowercase counts) are arrays: after the registry of every training type is described, no dict or list that
    they hold has an entry per training form (such dicts took gigabytes at 200M words)."""
    from moses_recaser.model.extractor import FeatureExtractor
    from moses_recaser.model.features import feature_names
    from moses_recaser.model.settings import TrainSettings
    from moses_recaser.stats.arpa_arrays import ArrayLM
    from moses_recaser.stats.tables import Tables

    settings = TrainSettings()
    tables, lm = Tables.load(tico / "model"), ArrayLM.load(tico / "model" / "lm.npz")
    fx = FeatureExtractor(tables, lm, feature_names(settings.feature_set, []), "links", settings.max_candidates)
    types = list(fx.candidates.training_types())
    assert fx.candidates.seen("the") == [tables.forms.vocab[i] for i in tables.forms.by_lower()["the"]]
    fx.candidates.plain_all(types)
    fx.candidates.compact()
    held = [vars(fx.candidates), vars(fx.candidates.prior)]
    lows = set(types)
    sizes = {
        k: len(lows.intersection(v)) if isinstance(v, dict) else len(v)
        for d in held
        for k, v in d.items()
        if isinstance(v, dict | list)
    }
    assert len(types) > 1000 and max(sizes.values()) < len(types) // 10, sizes


def test_spilled_columns_store_what_columns_in_memory_hold(tmp_path):
    """Columns spilled to files (``Columns.spill``) take rows as before, hold none of them in memory, and store
    the columns that kept in memory they would have; they cannot be read, nor grown once stored."""
    from moses_recaser.core.columns import Columns
    from moses_recaser.io.diskarrays import Stored

    spec = [("a", np.int64), ("b", bool)]
    rows = [{"a": list(range(k, k + 5)), "b": [k % 2 == 0] * 5} for k in range(0, 50, 5)]
    kept, spilled = Columns(spec), Columns(spec)
    for k, block in enumerate(rows):
        kept.add(block)
        spilled.add(block)
        if k == 3:
            spilled.spill(Scratch(tmp_path))
    assert all(len(v) == 0 for v in spilled._data.values())
    with pytest.raises(ValueError, match="stored, not read"):
        spilled["a"]
    stored = spilled.stored()
    assert all(isinstance(v, Stored) for v in stored.values())
    assert all(np.array_equal(whole(stored[name]), kept[name]) for name, _ in spec)
    with pytest.raises(ValueError, match="already stored"):
        spilled.add({"a": [1], "b": [True]})
        spilled.stored()


def test_a_registry_saved_with_its_facts_in_files_is_the_one_saved_from_memory(tico, tmp_path, monkeypatch):
    """``save_registry`` writes the facts of every training type to files as they come (no column of them in
    memory), and stores the registry a registry kept in memory gives, byte for byte; its files are removed."""
    import moses_recaser.core.columns as columns
    from moses_recaser.model.extractor import FeatureExtractor
    from moses_recaser.model.features import feature_names
    from moses_recaser.model.settings import TrainSettings
    from moses_recaser.stats.arpa_arrays import ArrayLM
    from moses_recaser.stats.tables import Tables

    settings = TrainSettings()
    tables, lm = Tables.load(tico / "model"), ArrayLM.load(tico / "model" / "lm.npz")
    names = feature_names(settings.feature_set, [])

    def saved(name: str) -> bytes:
        out = tmp_path / name
        out.mkdir()
        fx = FeatureExtractor(tables, lm, names, "links", settings.max_candidates)
        fx.save_registry(out / "candidates.npz")
        assert [p.name for p in out.iterdir()] == ["candidates.npz"]
        return (out / "candidates.npz").read_bytes()

    spilled = saved("spilled")
    monkeypatch.setattr(columns.Columns, "spill", lambda self, scratch: None)
    assert saved("memory") == spilled


def test_a_setting_above_the_machines_memory_is_warned_of(caplog):
    """A bound the machine cannot reach bounds nothing: said, and taken."""
    import logging

    with caplog.at_level(logging.WARNING, logger="moses_recaser"):
        assert parse_memory("200%") > physical_memory()
    assert "`memory` 200% is more than this machine has" in caplog.text
