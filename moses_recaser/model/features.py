"""The CRF's feature functions (paper section 4.3 and beyond), each declared once, in ``FEATURES``.

A feature is a row: its name, whether it is the paper's, what it reads besides the output (nothing, the
source sentence, or the alignment: each input mode's weights switch off what its input lacks,
``modes.MODES``), a description, and the function giving its value for every candidate of a batch from
a ``FeatureInputs``. Adding one is a function and a row here; a new fact about candidates
is a column of ``candidates.Facts``. The LM (eq. 6) is the only transition feature and is not listed:
it is the lattice's (``lattice.Flat.lm``), and its weight comes first in a weight vector.

A target word E_i is aligned to every word of its aligned source phrase (``alignment="phrase"``, the
paper's choice) or, beyond the paper (``alignment="links"``), to the source words it is linked to when
it has links, else to its phrase (``batch.alignment_pairs``). A word with no aligned source word gets
0 for the features that read aligned words, for every candidate: only differences between the
candidates of a position matter. Eq. 7 and 8 are computed as log sum_k over the aligned words, not
the paper's log prod_k: the product scales every candidate of a position alike when the aligned words
are the same, and the sum keeps one unseen pair from sending a candidate to -inf.

Source words capitalized by their position (the first word with a letter, and words after ``.``, ``!``,
``?``) are looked up in lowercase when the tables know them only that way: the tables count cased
pairs and tag pairs only between words whose case is not positional.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from moses_recaser.core.casing import Tag
from moses_recaser.core.sentences import Layout
from moses_recaser.model.candidates import Facts, SourceFacts
from moses_recaser.stats.tables import Tables

RARE_PRIOR = math.log(0.5)
OTHER_PUNCT = "punct=<other>"
# what a feature reads besides the output: nothing else, the source sentence, its alignment to the output, or
# the output's own case (decoder output that has case: truecased, or cased by the MT system)
TARGET, SOURCE, ALIGNMENT, DECODED = "target", "source", "alignment", "decoded"


@dataclass
class BatchFacts:
    """What the features need to know of a batch of sentences beyond its candidates, as flat arrays (N
    target words, S sentences; built by ``extractor.FeatureExtractor``)."""

    layout: Layout
    start: np.ndarray  # (N,) each word's candidates: a segment of the candidate pool ...
    count: np.ndarray  # ... (Candidates.segment)
    first: np.ndarray  # (S,) the first position with a letter (-1: none)
    punct: np.ndarray  # (N,) feature column of the punctuation before each word (-1: none)
    after_name: np.ndarray  # (N,) the word before is an unseen word that looks like a name
    e_lower: np.ndarray  # (N,) each word's id among the lowercase table's targets
    bilingual: np.ndarray  # (S,) the sentence has a source
    headline: np.ndarray  # (S,) its source looks like a headline ...
    title: np.ndarray  # (S,) ... is title-cased (sentences.headline_flags)
    src_keys: np.ndarray  # (sentence << 32) + Candidates.strip_id of each source word whose case counts
    part_keys: np.ndarray  # (sentence << 32) + Candidates.strip_id of each capitalized part of a hyphenated source word
    spans: np.ndarray | None  # (N,) candidate id of each word's source span form (-1: none)
    pair_pos: np.ndarray  # (P,) (target word, aligned source word) pairs: the word ...
    pair_src: np.ndarray  # (P,) ... and the source word as the tables know it (Candidates.source_ids)
    gold: list[np.ndarray | None]
    gen_misses: list[int]
    fixed: dict[int, str] = field(default_factory=dict)  # words a constraint fixed, and its name
    # (N,) candidate id of each word's form as the input has it, when its sentence came with case (-1: none, or
    # a word whose case would be due to its position), and at such positions the id of that form with a capital
    # first letter (extractor.FeatureExtractor._decoded)
    decoded: np.ndarray | None = None
    decoded_start: np.ndarray | None = None
    # (S,) the line came as truecased output does: its first sentence start with a letter is in lowercase
    decoded_truecased: np.ndarray | None = None
    # (S,) the line came with case and is not truecased: cased MT output
    decoded_cased: np.ndarray | None = None
    # (N,) the word as it came begins with a capital, and so does a word beside it, neither at a sentence start
    # (sentences.capital_runs)
    decoded_run: np.ndarray | None = None


class _Gathered:
    """A candidate fact gathered for the batch's candidates on first use (``inputs.cand.tag``)."""

    def __init__(self, facts: Facts, ids: np.ndarray) -> None:
        self._facts, self._ids = facts, ids

    def __getattr__(self, name: str) -> np.ndarray:
        value = getattr(self._facts, name)[self._ids]
        setattr(self, name, value)
        return value


@dataclass
class Translation:
    """cap_t1 (eq. 7), cap_tag_t1 (eq. 8) and upper_translation of every candidate, worked out together
    (they share the expansion of every aligned pair over its position's candidates)."""

    cap_t1: np.ndarray
    cap_tag_t1: np.ndarray
    upper: np.ndarray


class FeatureInputs:
    """What a feature function reads: the batch's candidates (C rows, ``ids``), their facts (``cand``),
    where each stands (``G`` its word in the batch, ``S`` its sentence, ``P`` its position there), the
    batch's facts (``b``) and the tables. Values several features share are computed once."""

    def __init__(
        self, ids: np.ndarray, b: BatchFacts, facts: Facts, source_facts: SourceFacts, tables: Tables, has_prior: bool
    ) -> None:
        self.ids, self.b, self.tables, self.has_prior = ids, b, tables, has_prior
        self.facts, self.source_facts = facts, source_facts
        self.cand: Any = _Gathered(facts, ids)

    @cached_property
    def G(self) -> np.ndarray:
        return np.repeat(np.arange(len(self.b.count)), self.b.count)

    @cached_property
    def S(self) -> np.ndarray:
        return self.b.layout.tgt_sent[self.G]

    @cached_property
    def P(self) -> np.ndarray:
        return self.G - self.b.layout.tgt_start[self.S]

    @cached_property
    def not_an(self) -> np.ndarray:
        return self.cand.tag != int(Tag.AN)

    @cached_property
    def src_identical(self) -> np.ndarray:
        """The candidate equals, up to diacritics, a source word whose case is not explained by position."""
        return self.b.bilingual[self.S] & self.not_an & in_source(self.S, self.cand.strip, self.b.src_keys)

    @cached_property
    def decoded(self) -> np.ndarray:
        """The candidate is the word's form as the input has it (sentences that came with case)."""
        return self._is_form(self.b.decoded)

    @cached_property
    def truecased_line(self) -> np.ndarray:
        """The candidate's line starts in lowercase, as truecased output does (cased MT output starts with a
        capital)."""
        return self._of_line(self.b.decoded_truecased)

    @cached_property
    def cased_line(self) -> np.ndarray:
        """The candidate's line is cased MT output (it came with case and is not truecased)."""
        return self._of_line(self.b.decoded_cased)

    def _of_line(self, per_line: np.ndarray | None) -> np.ndarray:
        """A per-sentence flag for each candidate (False throughout where the batch has none)."""
        return np.zeros(len(self.ids), dtype=bool) if per_line is None else per_line[self.S]

    @cached_property
    def decoded_start(self) -> np.ndarray:
        """The candidate is the input's form with a capital first letter, at a sentence start."""
        return self._is_form(self.b.decoded_start)

    @cached_property
    def decoded_run(self) -> np.ndarray:
        """The candidate's word came capitalized beside another capitalized word (``BatchFacts.decoded_run``)."""
        run = self.b.decoded_run
        return np.zeros(len(self.ids), dtype=bool) if run is None else run[self.G]

    def _is_form(self, per_word: np.ndarray | None) -> np.ndarray:
        """The candidate is its word's form in ``per_word`` (a candidate id per word, -1: none; None: no word)."""
        return np.zeros(len(self.ids), dtype=bool) if per_word is None else per_word[self.G] == self.ids

    @cached_property
    def translation(self) -> Translation:
        b, C = self.b, len(self.ids)
        zero = np.zeros(C)
        pp, fk, per_pos = b.pair_pos, b.pair_src, b.count
        if not len(pp):
            return Translation(zero, zero, np.zeros(C, dtype=bool))
        SF, cand = self.source_facts, self.cand
        lex = self.tables.lower.probs(SF.lower[fk], b.e_lower[pp])
        # upper_translation: every cased aligned word is upper, and at least one is cased
        n_pos = len(per_pos)
        cased_word = SF.has_case[fk]
        any_cased = np.bincount(pp, weights=cased_word, minlength=n_pos) > 0
        not_upper = np.bincount(pp, weights=cased_word & ~SF.upper[fk], minlength=n_pos) > 0
        src_upper = any_cased & ~not_upper
        # every pair expanded over its position's candidates
        cstart = np.cumsum(per_pos) - per_pos
        reps = per_pos[pp]
        pair = np.repeat(np.arange(len(pp)), reps)
        row = cstart[pp][pair] + (np.arange(len(pair)) - np.repeat(np.cumsum(reps) - reps, reps))
        p_cased = self.tables.cased.probs(SF.cased[fk][pair], cand.cased[row])
        p_tag = lex[pair] * self.tables.tags.probs()[SF.tag[fk][pair], cand.tag[row]]
        has = np.zeros(C, dtype=bool)
        has[row] = True
        with np.errstate(divide="ignore"):
            t1 = np.where(has, np.log(np.bincount(row, weights=p_cased, minlength=C)), 0.0)
            tag1 = np.where(has, np.log(np.bincount(row, weights=p_tag, minlength=C)), 0.0)
        return Translation(t1, tag1, has & cand.upper & src_upper[self.G])


@dataclass(frozen=True)
class Feature:
    """One feature: ``value`` gives one number per candidate (a bool mask counts as 0/1). A family
    (``columns`` set) has one column per name that ``columns`` makes of the training punctuation, and its
    ``value`` gives each candidate's column among all the features' (-1: none)."""

    name: str
    doc: str
    value: Callable[[FeatureInputs], np.ndarray]
    paper: bool = False
    reads: str = TARGET  # what an input must have for the feature to be on (input modes: model/modes.py)
    columns: Callable[[Sequence[str]], list[str]] | None = None


def _headline(flags: str, tag: Tag, short: bool | None) -> Callable[[FeatureInputs], np.ndarray]:
    """The source line's headline (``hl``) or title-case (``tc``) flag crossed with the candidate's tag
    and, when ``short`` is set, whether the candidate is short."""

    def value(x: FeatureInputs) -> np.ndarray:
        line = (x.b.headline if flags == "hl" else x.b.title)[x.S]
        out = line & (x.cand.tag == int(tag))
        return out if short is None else out & (x.cand.short == short)

    return value


def _src_part(x: FeatureInputs) -> np.ndarray:
    if not len(x.b.part_keys):
        return np.zeros(len(x.ids), dtype=bool)
    head = x.cand.head
    return x.b.bilingual[x.S] & x.not_an & (head >= 0) & in_source(x.S, np.maximum(head, 0), x.b.part_keys)


def _case_prior(seen: bool) -> Callable[[FeatureInputs], np.ndarray]:
    def value(x: FeatureInputs) -> np.ndarray:
        if not x.has_prior:
            return np.zeros(len(x.ids))
        return np.where(x.cand.oov != seen, x.cand.prior, 0.0)

    return value


def _punct_columns(punctuation: Sequence[str]) -> list[str]:
    return ["punct=" + p for p in punctuation] + [OTHER_PUNCT]


FEATURES: tuple[Feature, ...] = (
    Feature(
        "cap_t1",
        "eq. 7: log sum_k p(E_i | F_k), the cased translation table over the aligned source words",
        lambda x: x.translation.cap_t1,
        paper=True,
        reads=ALIGNMENT,
    ),
    Feature(
        "cap_tag_t1",
        "eq. 8: log sum_k p(e_i | f_k) p(tag(E_i) | tag(F_k)), lowercase and tag tables",
        lambda x: x.translation.cap_tag_t1,
        paper=True,
        reads=ALIGNMENT,
    ),
    Feature(
        "upper_translation",
        "E_i is all upper case and so is every cased word of its aligned source words",
        lambda x: x.translation.upper,
        paper=True,
        reads=ALIGNMENT,
    ),
    Feature(
        "initial",
        "E_i is the sentence's first word with a letter, no number before it ('30 proposals ...'), and it is "
        "capitalized (not in cased MT output, whose first word the system cased already)",
        lambda x: x.cand.cap & (x.P == x.b.first[x.S]) & ~x.cased_line,
        paper=True,
    ),
    Feature(
        "punct",
        "E_i is capitalized and follows the punctuation token P (one column per P seen at least "
        "twice before a word in training, punct=<other> for the rest; not in cased MT output, whose system "
        "cased the word after its punctuation already: 'Harbin - chinanews.com')",
        lambda x: np.where(x.cand.cap & ~x.cased_line, x.b.punct[x.G], -1),
        paper=True,
        columns=_punct_columns,
    ),
    Feature(
        "case_prior",
        "log p(E | lower(E)) from the training target's non-initial counts, smoothed with "
        "p(tag | shape) of rare training words (prior.CasePrior)",
        _case_prior(seen=True),
    ),
    Feature(
        "case_prior:unseen",
        "the same, for words whose lowercase training never saw: p(tag | shape) alone "
        "(an unseen 'yunlong' reads like the rare 'Dalong', not like 'long')",
        _case_prior(seen=False),
    ),
    Feature(
        "src_identical",
        "the candidate, which has a cased letter, equals (up to diacritics) a source word "
        "whose case is not due to its position, or whose case is more than a capital first letter",
        lambda x: x.src_identical,
        reads=SOURCE,
    ),
    Feature(
        "src_identical:rare",
        "the same, for a candidate the case prior finds unlikely (p < 1/2): 'the Reason foundation'",
        lambda x: x.src_identical & (x.cand.prior < RARE_PRIOR),
        reads=SOURCE,
    ),
    Feature(
        "src_identical:IU",
        "the same, for a capitalized candidate of a word seen in training: a German "
        "source capitalizes every noun, so such copies tell less than acronyms and unseen names",
        lambda x: x.src_identical & (x.cand.tag == int(Tag.IU)) & ~x.cand.oov,
        reads=SOURCE,
    ),
    Feature(
        "src_part",
        "the candidate's capitalized first hyphen part equals (up to diacritics) a capitalized "
        "part of a hyphenated source word ('US' from 'US-Medienberichten')",
        _src_part,
        reads=SOURCE,
    ),
    Feature(
        "src_span",
        "E_i lies in a run of two or more words with a letter that the source repeats verbatim up "
        "to case (not counting a word lowercase in the source that training's target never had: a "
        "decoder's pass-through, nor a part after Moses' hyphen '@-@': a compound is one word), and the candidate "
        "is the source's form (copied titles and names)",
        lambda x: x.b.spans[x.G] == x.ids if x.b.spans is not None else np.zeros(len(x.ids), dtype=bool),
        reads=SOURCE,
    ),
    Feature(
        "unseen_form",
        "the candidate has a cased letter and never occurred in the training target",
        lambda x: x.not_an & x.cand.unseen,
    ),
    Feature(
        "after_name",
        "the candidate is capitalized and follows a word training never saw whose shape reads "
        "as a name's ('Yunlong County'); after an unseen word the LM has only unigrams",
        lambda x: x.cand.cap & x.b.after_name[x.G],
    ),
    Feature(
        "hl:IU",
        "the source line looks like a headline (no final punctuation, at most 20 tokens) and the "
        "candidate is capitalized and longer than 3 letters",
        _headline("hl", Tag.IU, False),
        reads=SOURCE,
    ),
    Feature(
        "hl:IU:short",
        "the same, for a capitalized candidate of at most 3 letters",
        _headline("hl", Tag.IU, True),
        reads=SOURCE,
    ),
    Feature(
        "hl:AU",
        "the source line looks like a headline and the candidate is all upper",
        _headline("hl", Tag.AU, None),
        reads=SOURCE,
    ),
    Feature(
        "tc:IU",
        "the source line is title-cased (most of its longer non-initial words capitalized) and the "
        "candidate is capitalized and longer than 3 letters",
        _headline("tc", Tag.IU, False),
        reads=SOURCE,
    ),
    Feature(
        "tc:IU:short",
        "the same, for a capitalized candidate of at most 3 letters",
        _headline("tc", Tag.IU, True),
        reads=SOURCE,
    ),
)


def _by_line(name: str, doc: str, value: Callable[[FeatureInputs], np.ndarray]) -> tuple[Feature, Feature]:
    """A feature of the input's own case, twice: in lines that start with a capital (cased MT output, whose
    case is good) and, as ``NAME:tc``, in lines that start in lowercase (truecased output, whose first words
    and names a truecaser decided): the two kinds of output deserve weights of their own."""

    def cased(x: FeatureInputs) -> np.ndarray:
        return value(x) & ~x.truecased_line

    def truecased(x: FeatureInputs) -> np.ndarray:
        return value(x) & x.truecased_line

    return (
        Feature(name, doc + "; in a line that starts with a capital", cased, reads=DECODED),
        Feature(name + ":tc", doc + "; in a line that starts in lowercase", truecased, reads=DECODED),
    )


# the features of the input's own case, on in a model trained for cased input (TrainSettings.input_case)
DECODED_FEATURES: tuple[Feature, ...] = (
    *_by_line(
        "decoded",
        "the candidate is the word as the input has it (truecased or cased decoder output)",
        lambda x: x.decoded,
    ),
    *_by_line(
        "decoded:cased",
        "the same, for a form with a capital: the decoder chose a capital (a name, a title), which tells more "
        "than a lowercase form does",
        lambda x: x.decoded & (x.cand.tag != int(Tag.AL)) & x.not_an,
    ),
    *_by_line(
        "decoded:run",
        "the same, for a capitalized form beside another one the input capitalized ('Chinese Embassy', 'Class "
        "A'): the decoder cased a name as one, which the language model would break up",
        lambda x: x.decoded & x.decoded_run,
    ),
    *_by_line(
        "decoded:start",
        "at a sentence start (where a truecaser lowercases and a cased system capitalizes), the candidate is "
        "the input's form with a capital first letter: what detruecase.perl makes of it",
        lambda x: x.decoded_start,
    ),
    *_by_line(
        "decoded:first",
        "the same, at the line's first word with a letter (no number before it), which position would capitalize",
        lambda x: x.decoded & (x.P == x.b.first[x.S]),
    ),
    *_by_line(
        "decoded:upper",
        "the same, for a form in capitals ('US', 'CD', 'II'): an acronym the decoder copied from its "
        "training text, which a language model of common words would lowercase ('us', 'cd')",
        lambda x: x.decoded & (x.cand.tag == int(Tag.AU)),
    ),
    # one weight for both kinds of line: a truecaser leaves a mixed-case form as it is, and such forms are too
    # few in dev for two weights (split, the truecased lines' weight fell from 4.5 to 1.6 as a few lines moved)
    Feature(
        "decoded:mixed",
        "the candidate is the word as the input has it, a form of mixed case ('iPhone', 'CSeries', 'NSA.gov'), "
        "which no table or rule would make: kept unless the evidence against it is strong",
        lambda x: x.decoded & (x.cand.tag == int(Tag.MX)),
        reads=DECODED,
    ),
)
BY_NAME = {f.name: f for f in FEATURES + DECODED_FEATURES}


def in_set(feature: Feature, feature_set: str) -> bool:
    return feature.paper or feature_set == "full"


def feature_names(feature_set: str, punctuation: Sequence[str], decoded: bool = False) -> list[str]:
    """The columns of a feature set, in ``FEATURES`` order (a family's columns in its place), then, with
    ``decoded``, those of ``DECODED_FEATURES``."""
    names: list[str] = []
    for f in FEATURES + (DECODED_FEATURES if decoded else ()):
        if in_set(f, feature_set) or f.reads == DECODED:
            names += f.columns(punctuation) if f.columns is not None else [f.name]
    return names


def feature_of(column: str) -> Feature:
    """The feature a column belongs to (``punct=,`` belongs to ``punct``)."""
    return BY_NAME.get(column) or BY_NAME[column.split("=", 1)[0]]


def columns_reading(names: Sequence[str], reads: Collection[str]) -> np.ndarray:
    """Per column: its feature reads only what ``reads`` names (an input mode's weights keep the others at 0)."""
    return np.array([feature_of(n).reads in reads for n in names], dtype=bool)


def fill(U: np.ndarray, x: FeatureInputs, names: Sequence[str], index: dict[str, int]) -> None:
    """Every feature's values for the batch's candidates, into the columns of U (rows: candidates)."""
    done: set[str] = set()
    bilingual = bool(x.b.bilingual.any())
    for name in names:
        f = feature_of(name)
        if f.name in done or (f.reads in (SOURCE, ALIGNMENT) and not bilingual):
            continue
        done.add(f.name)
        v = f.value(x)
        if f.columns is not None:
            rows = np.flatnonzero(v >= 0)
            U[rows, v[rows]] = 1.0
        else:
            U[:, index[f.name]] = v


def in_source(sent: np.ndarray, word: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Whether (sentence << 32) + word is among ``keys``: a bitmap over (sentence, word among the keys'
    words), as np.isin sorts both sides."""
    key_sent, key_word = keys >> 32, keys & 0xFFFFFFFF
    local = np.full(int(max(word.max(initial=0), key_word.max(initial=0))) + 1, -1, dtype=np.int64)
    local[key_word] = 0
    words = np.flatnonzero(local == 0)  # (not np.unique: its first call imports numpy.ma, 8 ms of a run)
    n_sent = int(max(sent.max(initial=0), key_sent.max(initial=0))) + 1
    if not len(words) or len(words) * n_sent > 1 << 26:
        return np.isin((sent << 32) + word, keys)
    local[words] = np.arange(len(words))
    table = np.zeros(n_sent * len(words), dtype=bool)
    table[key_sent * len(words) + local[key_word]] = True
    w = local[word]
    out = w >= 0
    out[out] = table[sent[out] * len(words) + w[out]]
    return out


def feature_revision() -> str:
    """A digest of the feature declarations and of the code that gives their values (this module, the
    candidates' facts, GEN and the extractor), so that a cached experiment model is retrained whenever a
    feature's definition changes; derived, never bumped by hand."""
    import hashlib

    digest = hashlib.sha256()
    for f in FEATURES + DECODED_FEATURES:
        digest.update(f"{f.name}\0{f.paper}\0{f.reads}\0{f.doc}\0".encode())
    # read as files, not imported: the extractor imports this module
    for name in ("features", "candidates", "extractor", "gen"):
        digest.update(Path(__file__).with_name(f"{name}.py").read_bytes())
    return digest.hexdigest()[:12]
