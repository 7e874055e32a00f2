"""A trained recaser: model directory -> (sentence -> recased sentence), by exact Viterbi.

``Recaser`` is the package's front door for recasing (``from moses_recaser import Recaser``): ``load`` a
model once, then ``recase`` a line, ``recase_lines`` a stream of them, or ``recase_triples`` records that are
already parsed. The command line is built on the same calls, so both give the same output.

Each sentence is scored with the weights of its input mode (``modes``: with or without its source,
phrases, word links), so a missing source or alignment never fails and never meets weights fitted for
what it lacks. Output tokens differ from the input in case only.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
import logging
import os
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np

from moses_recaser.core import casing
from moses_recaser.core.memory import keep_freed_blocks, release
from moses_recaser.core.triples import Triple, lowered
from moses_recaser.io.checks import check_files
from moses_recaser.io.errors import RecaserError
from moses_recaser.io.modeldir import PRIORS, Manifest, MappedArrays, ModelSnapshot, read_manifest, verify_files
from moses_recaser.io.outputs import atomic_output
from moses_recaser.model.batch import gc_paused
from moses_recaser.model.extractor import FeatureExtractor
from moses_recaser.model.inputs import Alignment, line_records, validated_triples
from moses_recaser.model.modes import Weights, mode_of
from moses_recaser.model.settings import TrainSettings, weights_digest
from moses_recaser.model.streaming import zip_recased
from moses_recaser.moses.formats import FORMATS, Inputs, Line, Record
from moses_recaser.moses.tokenizer import check_language
from moses_recaser.moses.trace import TraceOptions
from moses_recaser.stats.table_align import MAX_TOKENS, TableAligner, too_long
from moses_recaser.stats.tables import Tables

log = logging.getLogger(__name__)


def load_lm(path: Path) -> object:
    import kenlm

    config = kenlm.Config()
    config.show_progress = False
    config.arpa_complain = kenlm.ARPALoadComplain.NONE
    try:
        return kenlm.Model(str(path), config)
    except (OSError, RuntimeError) as exc:
        raise RecaserError(f"KenLM cannot read the LM: {exc}", str(path)) from None


def load_model_lm(model_dir: Path, manifest: Manifest) -> object:
    """The model's LM for queries: the stored query arrays (lm.npz) when present, else kenlm."""
    if "lm.npz" in manifest.files:
        from moses_recaser.stats.arpa_arrays import ArrayLM

        return ArrayLM.load(model_dir / "lm.npz")
    return load_lm(lm_file(model_dir, manifest))


def lm_file(model_dir: Path, manifest: Manifest) -> Path:
    for name in ("lm.bin", "lm.arpa"):
        if name in manifest.files:
            return model_dir / name
    raise RecaserError("the model has no LM file", str(model_dir))


# word types met while recasing that a Recaser keeps described (2.6 KB each and more); past them it forgets them
# all, so a long-running process that meets new words (names, numbers, URLs) all the time stops growing: a stream
# of random words held 2.6 GB after a million types before, 520 MB (casing's bounded caches included) now
MAX_TYPES_MET = 1 << 16
# every Recaser of this process, for the child of a fork (``_after_fork``)
_LIVE: weakref.WeakSet[Recaser] = weakref.WeakSet()


def _after_fork() -> None:
    """In a forked child, each Recaser gets a lock of its own: one that another thread of the parent held at the
    fork would never be released here, and what that thread was changing is taken as half-done."""
    for r in list(_LIVE):
        if r._lock.locked():
            r._unfinished = True
        r._lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork)

# what ``recase`` reads as a line: formats that are read line by line (moses.formats.FORMATS)
LINE_FORMATS = tuple(name for name, f in FORMATS.items() if f.read_line is not None)


def _warned_if_too_long(records: Iterable[Record], source: str) -> Iterator[Record]:
    """The records, the first pair too long to align named in a warning (``source:LINE``)."""
    warned = False
    for r in records:
        if not warned and too_long(r.triple.source, r.triple.target):
            warned = True
            log.warning(
                "%s:%d: %d source and %d target tokens: a pair with %d tokens or more on a side is not aligned, and is "
                "recased without word links (later such pairs are not named)",
                source,
                r.triple.id + 1,
                len(r.triple.source),
                len(r.triple.target),
                MAX_TOKENS,
            )
        yield r


class Recaser:
    """A trained model, loaded once (its arrays memory-mapped), that recases many sentences.

    >>> r = Recaser.load("model/")                                             # doctest: +SKIP
    >>> r.recase("the united states .", source="les États-Unis .", alignment="0-0 1-1 1-2 2-3")  # doctest: +SKIP
    'The United States .'

    Output differs from the input in case only. Errors (a bad model, a malformed line) are ``RecaserError``.
    One object may be shared by threads (its batches run one at a time: ``jobs`` is the parallelism); an error or
    an interrupt in the middle of a batch leaves it as usable as before.
    """

    def __init__(self, model_dir: str | os.PathLike[str], *, read: str | None = None) -> None:
        """``read`` ("phrase" or "links"): for input with both, read only that (its mode's weights); None reads
        both. ``Recaser.load`` is the same call."""
        from moses_recaser.io.modeldir import resolve_model

        if read not in (None, "phrase", "links"):
            raise RecaserError(f"`read` is {read!r}; choose phrase or links (None: both)")
        self.dir = resolve_model(model_dir)
        self.prefer = read
        self._lock = threading.Lock()
        self._unfinished = False  # a batch ended by an exception: the registry of types met may be half-updated
        _LIVE.add(self)
        keep_freed_blocks()  # each batch's arrays in the pages of the last one's
        with ModelSnapshot(self.dir) as snap:
            self.manifest = read_manifest(snap.root, verify=False)
            files, sizes = self.manifest.files, self.manifest.sizes
            # checksums of the files recasing reads (an ARPA file whose query arrays, lm.npz, are stored is not
            # read; nor are the eflomal priors that earlier versions stored), before anything parses them
            verify_files(snap.root, files, {PRIORS, "lm.arpa"} if "lm.npz" in files else {PRIORS}, sizes)
            self._load(snap.root)

    def _load(self, root: Path) -> None:
        where = str(root / "manifest.yaml")
        if "weights" not in self.manifest.extra:
            raise RecaserError("the model has no CRF weights (made by 'stats', not 'train')", where)
        self.weights = Weights.from_dict(self.manifest.extra["weights"], where)
        # a setting the manifest leaves out is its default, as the signature was checked with it
        self.settings = {**dataclasses.asdict(self._check_signature(where)), **self.manifest.settings}
        self.tables = Tables.load(root)
        self.lm = load_model_lm(root, self.manifest)
        self._registry = MappedArrays(root / "candidates.npz") if "candidates.npz" in self.manifest.files else None
        self.extractor = self._extractor()
        self.aligner = TableAligner(self.tables.lower)

    def _extractor(self) -> FeatureExtractor:
        """The feature extractor as loaded. Its registry is read from the arrays mapped at load, not from the
        directory, which may have changed since."""
        extractor = FeatureExtractor(
            self.tables,
            self.lm,
            self.weights.names,
            alignment=self.settings["alignment_mode"],
            max_candidates=self.settings["max_candidates"],
            candidates_file=self._registry,
        )
        extractor.compact()  # the tables' and the LM's caches of words looked up
        return extractor

    def _start_over(self) -> None:
        """The extractor as loaded again: the word types met since, and the lookups cached, forgotten."""
        self.extractor = self._extractor()
        # what was forgotten goes back to the system: left to itself, glibc's heap kept it (and grew past it)
        gc.collect()
        release()

    def _check_signature(self, where: str) -> TrainSettings:
        """The manifest is not among the files it checksums: its weights and settings are checked against the
        signature ``train`` made of them (an edit under the same signature would make two models that say they
        are one); the settings, as checked."""
        signed = self.manifest.signature.split("|")
        weights = f"w:{weights_digest(self.weights.matrix())}"
        if weights not in signed:
            digest = next((part for part in signed if part.startswith("w:")), "w:None")
            raise RecaserError(
                f"the weights do not match the signature's hash ({digest}): the manifest was edited; train the "
                "model again or copy it anew",
                where,
            )
        names = {f.name for f in dataclasses.fields(TrainSettings)}
        settings: TrainSettings | None
        try:
            settings = TrainSettings.recorded({k: v for k, v in self.manifest.settings.items() if k in names})
            made = settings.signature()
        except (TypeError, ValueError, AttributeError, RecaserError):
            settings, made = None, ""
        # (the first part is the version that wrote it)
        if (
            settings is None
            or not signed[0].startswith("moses-recaser:")
            or [*made.split("|")[1:], weights] != signed[1:]
        ):
            raise RecaserError(
                "the settings do not match the signature: the manifest was edited; train the model again or copy "
                "it anew",
                where,
            )
        return settings

    def __copy__(self) -> Recaser:
        """A second face of the same loaded model (sharing its registry, and so its lock)."""
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        _LIVE.add(new)
        return new

    def __getstate__(self) -> None:
        raise RecaserError(
            "a Recaser cannot be pickled (its model is mapped from files): load it in each process, or use jobs=N"
        )

    @classmethod
    def load(cls, model_dir: str | os.PathLike[str], *, read: str | None = None) -> Recaser:
        """The model in ``model_dir`` (a directory that ``train`` wrote, or the pointer file of
        ``moses-recaser-ems train``), checked against its checksums and memory-mapped."""
        return cls(model_dir, read=read)

    @property
    def signature(self) -> str:
        """Every setting the model was trained with and a hash of its weights (as ``train`` prints it), and what
        this Recaser was told to read of input with phrases and links (``|read:phrase``, ``|read:links``, from
        ``read``; nothing for both): what its output depends on."""
        return self.manifest.signature + (f"|read:{self.prefer}" if self.prefer else "")

    def recase(
        self,
        hyp: str,
        source: str | None = None,
        alignment: Alignment | None = None,
        *,
        trace_format: str = "text",
        trace_options: TraceOptions | None = None,
        raw: bool = False,
        source_lang: str | None = None,
        target_lang: str | None = None,
    ) -> str:
        """One sentence recased: ``hyp`` tokenized (``trace_format="text"``) or a Moses 1-best output line with its
        ``|s-e|`` markers (``trace_format="trace"``: plain, ``-t``, ``-tt``, ``-print-alignment-info``; markers are
        read, not returned). ``source`` is the cased, tokenized line the decoder translated (None:
        monolingual); ``alignment`` its word links to ``hyp``, Pharaoh ``"0-0 1-1"`` or index pairs.

        ``raw=True``: ``hyp`` and ``source`` are raw text, as MT systems print it (``"the u.s. president's
        visit."``), tokenized for the model's languages (``source_lang``, ``target_lang`` say others) and aligned
        with the model's translation table (``stats.table_align``); the output is ``hyp`` with only the case of its
        letters changed."""
        return next(
            self.recase_lines(
                [hyp],
                None if source is None else [source],
                None if alignment is None else [alignment],
                trace_format=trace_format,
                trace_options=trace_options,
                raw=raw,
                source_lang=source_lang,
                target_lang=target_lang,
            )
        )

    def recase_lines(
        self,
        hyps: Iterable[str],
        sources: Iterable[str] | None = None,
        alignments: Iterable[Alignment] | None = None,
        *,
        trace_format: str = "text",
        trace_options: TraceOptions | None = None,
        jobs: int = 1,
        raw: bool = False,
        source_lang: str | None = None,
        target_lang: str | None = None,
    ) -> Iterator[str]:
        """``recase`` over parallel streams, lazily and in order: a line is read when its chunk of 512 is
        recased, and ``jobs`` > 1 spreads chunks over worker processes (same output). A trailing newline of
        a line is dropped; so is a byte-order mark that starts a text file (``open()`` keeps it, where the command
        line and ``read_lines`` drop it; in a list of lines a U+FEFF is a character of its first token, but for ``raw``
        lines, which keep it in front of the line, untokenized), and one
        that starts an alignment; errors name the stream (``hyps``, ``sources``, ``alignments``) and its line.
        ``raw=True``: raw lines, as ``recase`` says, aligned to their sources unless ``alignments`` (of the
        tokenized lines) are given."""
        fmt = FORMATS.get(trace_format) if isinstance(trace_format, str) else None
        if fmt is None or fmt.read_line is None:
            raise RecaserError(f"trace_format is {trace_format!r}; choose one of {', '.join(LINE_FORMATS)}")
        if trace_options is not None and not isinstance(trace_options, TraceOptions):
            raise RecaserError(f"trace_options must be a TraceOptions, not {type(trace_options).__name__}")
        read_line = self._raw_reader(source_lang, target_lang, sources is not None, trace_format) if raw else None
        records = line_records(read_line or fmt.read_line, trace_options or TraceOptions(), hyps, sources, alignments)
        if raw and sources is not None and alignments is None:
            return self._recase_records(_warned_if_too_long(records, "sources"), jobs, align=True)
        return self._recase_records(records, jobs)

    def recase_triples(self, triples: Iterable[Triple], *, jobs: int = 1) -> Iterator[list[str]]:
        """The recased target tokens of each triple, in order; a triple whose spans or links do not fit it is a
        RecaserError at ``triples:N`` (``Triple.validate``)."""
        for _, tokens in zip_recased(validated_triples(triples), self._recase_batch, jobs):
            yield tokens

    def recase_file(
        self,
        input: str = "-",
        output: str = "-",
        *,
        source: str | None = None,
        alignment: str | None = None,
        trace_format: str = "text",
        trace_options: TraceOptions | None = None,
        align: bool = False,
        explain: bool = False,
        jobs: int = 1,
        raw: bool = False,
        source_lang: str | None = None,
        target_lang: str | None = None,
    ) -> None:
        """Recase a file as ``moses-recaser recase`` does: ``input`` (``-``: stdin) read as ``trace_format``
        (``moses.formats.FORMATS``: ``text``, ``trace``, ``nbest``, ``jsonl``), with its cased ``source`` and
        Pharaoh ``alignment`` files where the format takes them, or ``align``: ``input`` aligned to ``source`` with
        the model's translation table (``stats.table_align``). ``output`` (``-``: stdout, streamed) appears whole or
        not at all; ``explain`` writes ``explain``'s rows as JSON Lines instead, a blank line after each sentence.
        ``raw``: ``input`` and ``source`` are raw text (``recase``), a raw source aligned unless ``alignment`` is
        given."""
        fmt = FORMATS.get(trace_format)
        if fmt is None:
            raise RecaserError(f"`trace_format` is {trace_format!r}; choose one of {', '.join(FORMATS)}")
        for name, given, takes in (("source", source, fmt.takes_source), ("alignment", alignment, fmt.takes_alignment)):
            if given is not None and not takes:
                raise RecaserError(f"`{name}` does not go with `trace_format` {trace_format} ({fmt.description})")
        if alignment is not None and source is None:
            raise RecaserError("`alignment` links the output to its source: give `source` too")
        if align and (trace_format != "text" or source is None or alignment is not None):
            raise RecaserError("`align` links text `input` to its `source`: give both, and no `alignment`")
        # as the command line checks them: the output may replace the input (in place), never a file read beside it
        check_files({"input": input, "source": source, "alignment": alignment}, {"output": output}, rewrites=("input",))
        inputs = Inputs(input, source, alignment, trace_options or TraceOptions())
        if raw:
            from moses_recaser.moses.raw import read_raw

            records = read_raw(inputs, self._raw_reader(source_lang, target_lang, source is not None, trace_format))
        elif source_lang or target_lang:
            raise RecaserError("`source_lang` and `target_lang` say how raw text is tokenized: give `raw` too")
        else:
            records = fmt.read(inputs)
        align = align or (raw and source is not None and alignment is None)
        if align:
            records = _warned_if_too_long(records, source or "-")
        # reading lines makes no reference cycles either: the collector paused for the whole file, not a batch
        with atomic_output(output, compress=True) as out, gc_paused():
            if explain:
                for r in records:
                    if align:
                        self._align([r.triple])
                    for row in self.explain(r.triple):
                        out.write(json.dumps(row, ensure_ascii=False) + "\n")
                    out.write("\n")
                return
            end = "" if raw else "\n"  # (a raw line comes with its own line end)
            for line in self._recase_records(records, jobs, align):
                out.write(line + end)

    def _recase_records(self, records: Iterable[Record], jobs: int, align: bool = False) -> Iterator[str]:
        """The output line of each record (``moses.formats``: what a reader made of its input), in order; ``align``:
        each triple aligned first, in the process that recases its batch."""
        batch = self._align_and_recase_batch if align else self._recase_batch
        for record, tokens in zip_recased(records, batch, jobs, triple_of=lambda r: r.triple):
            yield record.line(tokens)

    def _align(self, triples: Sequence[Triple]) -> None:
        """Each triple's links, as the model's translation table aligns its target to its source."""
        links = self.aligner.align(
            [t.source for t in triples], [t.target for t in triples], str(self.settings["symmetrization"])
        )
        for t, a in zip(triples, links):
            t.links = a

    def _align_and_recase_batch(self, triples: Sequence[Triple]) -> list[list[str]]:
        self._align(triples)
        return self._recase_batch(triples)

    def _raw_reader(
        self, source_lang: str | None, target_lang: str | None, bilingual: bool, trace_format: str
    ) -> Callable[[int, Line], Record]:
        """The reader of raw lines (``moses.raw``) for the given languages, else the model's; the source's only
        for ``bilingual`` input."""
        from moses_recaser.moses.raw import line_reader

        if trace_format != "text":
            raise RecaserError(f"raw text is plain text: `trace_format` {trace_format!r} does not go with `raw`")
        langs = {"target_lang": target_lang or self.settings.get("target_lang")}
        if bilingual:
            langs["source_lang"] = source_lang or self.settings.get("source_lang")
        for name, lang in langs.items():
            if lang is None:
                raise RecaserError(
                    f"raw text is tokenized for its language, and the model does not record it (trained without "
                    f"`{name}`): give `{name}`"
                )
            check_language(name, lang)
        return line_reader(str(langs["target_lang"]), langs.get("source_lang"))

    @gc_paused()
    def _recase_batch(self, triples: Sequence[Triple]) -> list[list[str]]:
        """Recased target tokens for each triple (empty targets give empty lists)."""
        with self._one_batch():
            return self._recased(triples)

    @contextlib.contextmanager
    def _one_batch(self) -> Iterator[None]:
        """The extractor's registry of word types, for one batch at a time. A batch ended by an exception (a
        Ctrl-C may come between any two steps of its update) leaves the registry to be started over; so do more
        than MAX_TYPES_MET types met."""
        with self._lock:
            if self._unfinished:
                self._start_over()
            self._unfinished = True
            yield
            self._unfinished = False
            if self.extractor.types_met() > MAX_TYPES_MET:
                self._start_over()

    def _recased(self, triples: Sequence[Triple]) -> list[list[str]]:
        views, modes, decoded = self._views(triples)
        flat = self.extractor.flat(views, decoded=decoded)
        W = self.weights.matrix()
        if (modes == modes[0]).all():
            phi = flat.scores(W[modes[0], 1:])
        else:  # each candidate by its sentence's weights
            sent = np.repeat(np.repeat(np.arange(len(triples)), flat.n_pos), flat.per_pos)
            phi = flat.scores(W[modes[sent], 1:])
        paths = flat.best_paths(phi, W[modes, 0])
        out = flat.words(paths, self.extractor.candidates.strings)
        casing.check_case_only_all([t.target for t in triples], out)
        return out

    def _views(self, triples: Sequence[Triple]) -> tuple[list[Triple], np.ndarray, list[list[str] | None] | None]:
        """The lowercased triples as their modes see them, each one's mode (its row of the weights), and, in a
        model trained for cased input, the words of each sentence that came with case (None: lowercased input,
        or in capitals, whose case tells nothing; such a sentence is recased as by a model without it)."""
        rows = {name: k for k, name in enumerate(self.weights.modes)}
        views, modes, decoded = [], [], []
        for t in triples:
            cased = self.weights.cased and casing.tells_case(t.target)
            mode = mode_of(t, self.prefer, cased)
            views.append(mode.view(lowered(t)))
            modes.append(rows[mode.name])
            decoded.append(t.target if cased else None)
        return views, np.array(modes, dtype=np.int64), decoded if self.weights.cased else None

    def explain(self, triple: Triple) -> list[dict]:
        """Per word: the chosen form, the runner-up, and each feature's weighted value for both (the LM's
        given the best path); ``fixed_by`` names the constraint that fixed a word."""
        (triple,) = validated_triples([triple])
        with self._one_batch():
            return self._explained(triple)

    def _explained(self, triple: Triple) -> list[dict]:
        views, modes, decoded = self._views([triple])
        flat = self.extractor.flat(views, decoded=decoded)
        if not len(flat.per_pos):
            return []
        w = self.weights.matrix()[modes[0]]
        best = flat.best_paths(flat.scores(w[1:]), np.array([w[0]]))[0]
        from moses_recaser.model.crf import make_batches  # the training code, for this one view

        (batch,) = make_batches([flat])
        unary, lm = batch.unary[0], batch.lm[0]
        padded = [0, 0] + best.tolist() + [0]

        def contributions(i: int, k: int) -> dict[str, float]:
            out = {
                name: float(w[1 + d] * unary[i, k, d])
                for d, name in enumerate(self.weights.names)
                if unary[i, k, d] != 0.0
            }
            out["lm"] = float(w[0] * lm[i, padded[i], padded[i + 1], k])
            return out

        rows = []
        for i, cands in enumerate(flat.candidates(self.extractor.candidates.strings)[0]):
            j = padded[i + 2]
            scored = {k: contributions(i, k) for k in range(len(cands))}
            alts = [k for k in scored if k != j]
            runner = max(alts, key=lambda k: sum(scored[k].values())) if alts else None
            row = {
                "word": triple.target[i],
                "chosen": cands[j],
                "features": scored[j],
                "runner_up": None if runner is None else cands[runner],
                "runner_up_features": None if runner is None else scored[runner],
            }
            if i in flat.fixed:
                row["fixed_by"] = flat.fixed[i]  # a constraint's name (constraints.CONSTRAINTS)
            rows.append(row)
        return rows
