"""What the weights are fitted on: the bitexts, the decoder's output for dev, the tables and LM the dev lattices
read (``tables_for_dev``), and the dev words as output with case comes (``cased_dev_words``)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from moses_recaser.core import casing
from moses_recaser.core.casing import has_case
from moses_recaser.core.triples import Triple, lowered
from moses_recaser.io.corpus import corpus_lines, pieces, read_piece
from moses_recaser.io.errors import RecaserError
from moses_recaser.model.reference import carry_case
from moses_recaser.model.truecaser import Truecaser, sentence_starts
from moses_recaser.moses.trace import TraceOptions, read_trace
from moses_recaser.stats.tables import Tables, TranslationTable

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Bitext:
    """A cased, tokenized bitext: source and target files, a Pharaoh word alignment (None: eflomal aligns it),
    and the lines [start, end) of them to use (None: all)."""

    source: str
    target: str
    alignment: str | None = None
    lines: tuple[int, int] | None = None

    def triples(self) -> list[Triple]:
        """Its sentence pairs, read into memory (dev sets; training sets that eflomal aligns)."""
        from moses_recaser.moses.bitext import triple_of_lines

        files = [self.source, self.target] + ([self.alignment] if self.alignment else [])
        out: list[Triple] = []
        for piece in pieces(files, 1, self.lines):
            readers = [read_piece(piece, k) for k in range(len(files))]
            for k, rows in enumerate(zip(*readers)):
                out.append(triple_of_lines(piece.first + k, [text for _, text in rows], files, rows[-1][0]))
        return out

    def split(self, held_out: int) -> tuple[Bitext, Bitext]:
        """The bitext without its last ``held_out`` lines, and those lines."""
        n = corpus_lines([f for f in (self.source, self.target, self.alignment) if f])
        start, end = self.lines or (0, n)
        cut = end - held_out
        return Bitext(self.source, self.target, self.alignment, (start, cut)), Bitext(
            self.source, self.target, self.alignment, (cut, end)
        )


@dataclass(frozen=True)
class DecoderOutput:
    """The decoder's output for the dev source (a -t trace, and its -alignment-output-file if any): the
    weights are then fitted on what recasing will read, with the reference's case carried over to the
    words that match it (``reference.carry_case``; the rest unlabeled)."""

    trace: str
    alignment: str | None = None
    options: TraceOptions = field(default_factory=TraceOptions)

    def triples(self, dev: Bitext, references: Sequence[Triple]) -> tuple[list[Triple], list[list[str | None]]]:
        if dev.lines is not None:
            raise RecaserError("decoder output for dev needs the whole dev files, not a part of a corpus", self.trace)
        out = list(read_trace(dev.source, self.trace, self.alignment, self.options))
        if len(out) != len(references):
            raise RecaserError(f"{len(out)} decoder output lines for {len(references)} dev sentences", self.trace)
        carried = [carry_case(lowered(t).target, r.target) for t, r in zip(out, references)]
        hits, words = sum(w is not None for c in carried for w in c), sum(map(len, carried))
        if not hits:  # (every weight would be fitted to 0: a model that lowercases everything)
            raise RecaserError(
                f"none of the decoder output's {words} words matches the dev reference, so none carries its case: "
                "give the decoder's output for the dev source (`dev_source`)",
                self.trace,
            )
        log.info("dev from decoder output: %.1f%% of its words carry the reference's case", 100 * hits / words)
        return out, carried


# fewer dev sentences than this fit a cased model's weights of the input's own case poorly: on WMT21 zh-en (the
# model of tests/test_do_no_harm.py), 50 lost 0.56-0.69 BLEU on each system where 100 and 200 lost none
CASED_DEV_MIN = 100


def check_dev(dev_set: Sequence[Triple], dev: Bitext, cased: bool = False) -> None:
    """A dev reference that weights can be fitted on, checked before any work: it has words (on blank lines, a
    failed earlier step's output, every weight was fitted to 0, and the model lowercased everything), and a
    warning if none has a capital (a lowercased reference: the weights learn to leave sentence starts in
    lowercase; but such text exists, TICO-19's first lines are transcripts in lowercase), or if a model for
    ``cased`` input has fewer than CASED_DEV_MIN sentences to fit on."""
    if not any(t.target for t in dev_set):
        raise RecaserError(
            f"the dev target's {len(dev_set)} lines have no words, so no weights can be fitted on them (in a "
            "pipeline this is usually a failed earlier step)",
            dev.target,
        )
    if all(lowered(t) is t for t in dev_set):
        log.warning(
            "%s: the dev target has no word with a capital letter; is it lowercased? The weights learn from it to "
            "leave every word in lowercase",
            dev.target,
        )
    if cased and len(dev_set) < CASED_DEV_MIN:
        log.warning(
            "%s: %d dev sentences fit the weights of cased input; with fewer than %d they may recase cased MT "
            "output worse than it came (give a larger dev set)",
            dev.target,
            len(dev_set),
            CASED_DEV_MIN,
        )


def tables_for_dev(
    tables: Tables,
    lm: object,
    triples: Sequence[Triple],
    refs: Sequence[Sequence[str | None]],
    cased: Sequence[Sequence[Sequence[str]]] = (),
) -> tuple[Tables, object]:
    """The tables and the LM for the dev lattices: their word pairs and n-grams whose words all have their key in
    one block of dev sentences (``DevWords``), with the vocabularies whole. A lattice is one sentence's, and its
    candidates and source words are equal to a word of that sentence up to case and diacritics, so every lookup
    the lattices make is answered as the whole ones answer it, from memory that grows with the dev set, not with
    the corpus (keeping every n-gram of words met anywhere in dev kept a share of the corpus's n-grams: the
    frequent words are all met); ``cased`` holds the dev words as cased input has them, in each variant
    (``cased_dev_words``). The registry of training types (``save_registry``) reads the vocabularies only."""
    from moses_recaser.stats.arpa_arrays import ArrayLM

    def words_of(k: int) -> Iterator[str]:
        t = triples[k]
        for w in t.source:
            yield from (w, casing.lower_all(w), casing.lower(w))
        yield from t.target
        yield from (w for w in refs[k] if w is not None)
        for variant in cased:
            yield from variant[k]

    dev = DevWords.from_sentences([words_of(k) for k in range(len(triples))])
    if isinstance(lm, ArrayLM):
        lm_rows = dev.rows(lm.vocab, ("<s>", "</s>", "<unk>"))
        lm = lm.restricted(lambda words: dev.share_a_block([lm_rows[w] for w in words]))
    rows: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def pairs(table: TranslationTable, f: np.ndarray, e: np.ndarray) -> np.ndarray:
        if id(table) not in rows:
            rows[id(table)] = dev.rows(table.src_vocab), dev.rows(table.tgt_vocab)
        src, tgt = rows[id(table)]
        return dev.share_a_block([src[f], tgt[e]])

    return tables.restricted(pairs), lm


# blocks of dev sentences whose keys ``DevWords`` tells apart (8 words of bits a key): finer blocks keep fewer
# n-grams, at a cost of memory and time per key
DEV_BLOCKS = 512


def dev_key(word: str) -> str:
    """What a word shares with its GEN candidates: its lowercase without diacritics."""
    return casing.strip_diacritics(casing.lower(word))


@dataclass(frozen=True)
class DevWords:
    """The keys (``dev_key``) of each block of consecutive dev sentences, as a bit set of blocks per key: a word
    pair or n-gram that one sentence's lattice can look up has all its words' keys in that sentence's block.
    A sentence's keys are its words' and their hyphen-separated parts'."""

    index: dict[str, int]  # key -> row of ``bits``
    bits: np.ndarray  # (keys, words) uint64: bit b of a row set when block b has the key

    @classmethod
    def from_sentences(cls, sentences: Sequence[Iterable[str]]) -> DevWords:
        """The keys of each sentence's words, the sentences cut into at most DEV_BLOCKS blocks in order."""
        size = max(-(-len(sentences) // DEV_BLOCKS), 1)
        index: dict[str, int] = {}
        blocks: list[tuple[int, int]] = []  # (row, block)
        for k, words in enumerate(sentences):
            for w in words:
                for part in (w, *w.split("-")):
                    blocks.append((index.setdefault(dev_key(part), len(index)), k // size))
        n_words = -(-max(-(-len(sentences) // size), 1) // 64)
        bits = np.zeros((len(index), n_words), dtype=np.uint64)
        if blocks:
            row, block = np.array(blocks, dtype=np.int64).T
            np.bitwise_or.at(bits, (row, block // 64), np.left_shift(np.uint64(1), (block % 64).astype(np.uint64)))
        return cls(index, bits)

    def rows(self, vocab: Iterable[str], everywhere: Iterable[str] = ()) -> np.ndarray:
        """The row of each vocabulary word's key (-1: in no block); the words ``everywhere`` (the LM's <s>, </s>
        and <unk>, in every lattice) are put in every block."""
        index, extra = self.index, set(everywhere)
        everyone = len(self.bits)  # the row past ``bits``: every block's (``share_a_block``)
        rows = [everyone if w in extra else index.get(dev_key(w), -1) for w in vocab]
        return np.array(rows, dtype=np.int64)

    def share_a_block(self, columns: Sequence[np.ndarray], chunk: int = 1 << 16) -> np.ndarray:
        """For rows of words (one array per position of the n-gram or pair; ``rows``), whether one block has them
        all."""
        full = np.vstack([self.bits, np.full((1, self.bits.shape[1]), ~np.uint64(0), dtype=np.uint64)])
        ok = np.ones(len(columns[0]), dtype=bool)
        for c in columns:
            ok &= c >= 0
        at = np.flatnonzero(ok)
        for start in range(0, len(at), chunk):
            part = at[start : start + chunk]
            common = full[columns[0][part]]
            for c in columns[1:]:
                common &= full[c[part]]
            ok[part] = common.any(axis=1)
        return ok


def cased_dev_words(dev_triples: Sequence[Triple], tables: Tables, decoder_output: bool) -> list[list[list[str]]]:
    """The dev words as output with case would come, to fit the weights of cased input, in each form such output
    takes: the decoder's output for dev as the decoder cased it (lowercased output truecased), or else the dev
    reference twice: cased as a truecased Moses system would output it (``as_decoded``), and as it is (what a
    cased MT system outputs at best)."""
    truecaser = Truecaser.from_forms(tables.forms, DECODED_SHARE)
    if decoder_output:
        return [[list(t.target) if has_case(t.target) else truecaser.truecase(t.target) for t in dev_triples]]
    forms = forms_by_lower(tables)
    return [[as_decoded(t, tables, truecaser, forms) for t in dev_triples], [list(t.target) for t in dev_triples]]


# a form makes at least this share of its word's training counts for a truecased system to output it unprompted:
# rarer ones (a headline's capitals, 'Next' in a title) come out of the decoder in the word's usual form
DECODED_SHARE = 0.1


def forms_by_lower(tables: Tables) -> dict[str, list[str]]:
    """The training target's forms of each lowercase word (those seen where they do not start a sentence)."""
    forms: dict[str, list[str]] = {}
    for form, n in zip(tables.forms.vocab, (tables.forms.count - tables.forms.initial).tolist()):
        if n > 0:
            forms.setdefault(casing.lower(form), []).append(form)
    return forms


def as_decoded(t: Triple, tables: Tables, truecaser: Truecaser, forms: Mapping[str, Sequence[str]]) -> list[str]:
    """A reference sentence cased as a truecased Moses system would likely output it: truecase.perl's form (with
    ``DECODED_SHARE``), except that a word linked to source words whose training forms differ takes the form
    those source words translate to most (p(E|F) of the cased table, summed over them), as the decoder's phrase
    table would give it, right or wrong for this sentence (a sentence start keeps truecase.perl's form)."""
    out = truecaser.truecase(t.target)
    aligned: dict[int, list[str]] = {}
    for i, j in t.links or []:
        aligned.setdefault(j, []).append(t.source[i])
    table = tables.cased
    for j, start in enumerate(sentence_starts(out)):
        options = forms.get(casing.lower(t.target[j]), ())
        if start or len(options) < 2 or j not in aligned:
            continue
        src = table.src_vocab.numbers([w if w in table.src_vocab else casing.lower(w) for w in aligned[j]])
        tgt = table.tgt_vocab.numbers(list(options))
        p = table.probs(np.repeat(src, len(tgt)), np.tile(tgt, len(src))).reshape(len(src), len(tgt)).sum(axis=0)
        out[j] = options[int(np.argmax(p))]
    return out
