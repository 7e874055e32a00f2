"""Feature functions (paper section 4.3) over the candidate lattices of triples.

``FeatureExtractor.flat`` builds a batch at once, in flat form: GEN and each candidate's facts are
worked out once per word type (``candidates.Candidates``), each word's facts once per type
(``batch.WordTypes``), the sentence-level facts (alignment pairs, positional capitals, headline
flags) as numpy over the batch's flat token arrays (``batch``), and the feature values, table lookups
and LM queries as numpy over every candidate of the batch.
Recasing decodes the flat form directly; ``lattices`` splits it into per-sentence lattices for
training, and ``lattice`` is the one-triple case.

Every feature is defined per target word E_i and summed over the sentence. A target word is
aligned to every word of its aligned source phrase (``alignment="phrase"``, the paper's
choice) or, beyond the paper (``alignment="links"``), to the source words it is linked to when
it has links, else to its phrase.

Paper features:
- ``lm`` (eq. 6): log10 p(E_i | E_{i-2}, E_{i-1}) from the cased LM (the model's query arrays, equal to
  kenlm's scores; kenlm states for a binary LM given with ``--lm``), with
  ``<s>`` and ``</s>``; the only transition feature (``Flat.lm``, ``Lattice.lm``);
- ``cap_t1`` (eq. 7): log sum_k p(E_i | F_k) over the aligned source words;
- ``cap_tag_t1`` (eq. 8): log sum_k p(e_i | f_k) p(tag(E_i) | tag(F_k));
- ``upper_translation``: E_i is all upper case and so is every cased word of its source phrase;
- ``initial``: E_i is the first word with a letter, and it is capitalized;
- ``punct=P``: E_i is capitalized and follows the punctuation token P (one weight per P seen in
  training, ``punct=<other>`` for the rest), so commas can learn negative weights.

Source words capitalized by their position (the first word with a letter, and words after ``.``,
``!``, ``?``) are looked up in lowercase when the tables know them only that way: the tables count
cased pairs and tag pairs only between words whose case is not positional.

A word with no aligned source word gets 0 for ``cap_t1``, ``cap_tag_t1`` and
``upper_translation`` for every candidate: a neutral value, since only differences between the
candidates of a position matter.

Beyond the paper (feature set ``full``):
- ``case_prior``: log p(E | lower(E)) from the training target's non-initial counts, smoothed with
  p(tag | shape), the tags of rare training words of the same length and ending
  (``candidates.CasePrior``); ``case_prior:unseen``, the same for words whose lowercase never
  occurred in training, where it is p(tag | shape) alone (``yunlong`` like the rare ``Dalong``, not
  like ``long``), so the two get their own weights;
- ``src_identical``: the candidate, which has a cased letter, equals (up to diacritics) a source word
  that is not capitalized by its position (names, acronyms, odd case copied through); a positional
  source word counts when its case is more than a capital first letter (``Hans-Peter``, ``NSA``);
- ``src_identical:rare``: the same, for a candidate that the case prior finds unlikely (p < 1/2):
  ``Reason`` for ``reason`` when the source names the Reason foundation; ``src_identical:IU``, the
  same for a capitalized candidate of a word seen in training: a German source capitalizes every
  noun (``Park``, ``Test``), so such copies tell less there than acronyms, mixed case and unseen
  words (``Lausitzring``) do;
- ``src_part``: the candidate's first hyphen part is capitalized and equals (up to diacritics) a
  capitalized part of a hyphenated source word: names inside compounds (``Rakoczy`` from
  ``Rakoczy-Fest``, ``US`` from ``US-Medienberichten``);
- ``src_span``: the target word lies in a run of at least two words with a letter that the source
  repeats verbatim up to case (``The Next Day``, ``Like A Rocket Man``), and the candidate is the
  source's form; such runs are copied titles and names, whatever the alignment says;
- ``unseen_form``: the candidate has a cased letter and never occurred in the training target;
- ``after_name``: the candidate is capitalized and follows a word that training never saw and whose
  shape reads as a name's (``CasePrior.looks_like_a_name``): "Yunlong County", "Golmud City". The LM
  backs off to unigrams after an unseen word, so it cannot tell this itself;
- headline features: the source line looks like a headline (no sentence-final punctuation, at most
  ``HEADLINE_MAX`` tokens) or is title-cased (most of its longer non-initial words capitalized),
  crossed with the candidate's tag (IU, AU) and with whether the word is short (<= 3 letters, the
  function words that title case leaves lower): ``hl:IU``, ``hl:IU:short``, ``hl:AU``, ``tc:IU``,
  ``tc:IU:short``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain

import numpy as np

from moses_recaser import casing
from moses_recaser.model import viterbi as decode
from moses_recaser.model.batch import Layout, WordTypes, alignment_pairs, first_in_sentence, positional
from moses_recaser.model.batch import source_flags as batch_source_flags
from moses_recaser.model.candidates import Candidates, CasePrior
from moses_recaser.casing import Tag, is_punctuation
from moses_recaser.model.viterbi import Cells, SplitLM
from moses_recaser.model.gen import MAX_CANDIDATES, takes_source_word
from moses_recaser.stats.arpa_arrays import ArrayLM, KenlmContexts
from moses_recaser.modeldir import text_array, words_of
from moses_recaser.stats.tables import Tables
from moses_recaser.triples import Triple

PAPER_FEATURES = ["cap_t1", "cap_tag_t1", "upper_translation", "initial"]
EXTRA_FEATURES = ["case_prior", "case_prior:unseen", "src_identical", "src_identical:rare", "src_identical:IU",
                  "src_part", "src_span", "unseen_form", "after_name",
                  "hl:IU", "hl:IU:short", "hl:AU", "tc:IU", "tc:IU:short"]
MONOLINGUAL_OFF = {"cap_t1", "cap_tag_t1", "upper_translation"} | {
    f for f in EXTRA_FEATURES if f.startswith(("hl:", "tc:", "src_"))
}
FEATURE_SETS = ("paper", "full")
OTHER_PUNCT = "punct=<other>"
HEADLINE_MAX = 20
# bumped whenever a feature's definition changes, so that cached experiment models are retrained
FEATURE_REVISION = 7
RARE_PRIOR = math.log(0.5)
_FINAL = {".", "!", "?", ":", ";", "…", "&quot;", "&apos;", "»", "\"", "'", ")", "&#93;"}


def first_letter_position(tokens: Sequence[str]) -> int:
    for i, tok in enumerate(tokens):
        if casing.has_letter(tok):
            return i
    return -1


def source_spans(source: Sequence[str], target: Sequence[str]) -> list[str | None]:
    """For each target position, the source form when the word lies in a run of >= 2 words with a
    letter that the source repeats verbatim up to case (the longest run wins, then the first)."""
    src = list(map(str.lower, source))  # casing.lower, mapped in C: this runs on every sentence
    tgt = list(map(str.lower, target))
    common = set(src).intersection(tgt)
    if len(common) < 2:
        return [None] * len(tgt)
    where: dict[str, list[int]] = {}
    for k, w in enumerate(src):
        if w in common:
            where.setdefault(w, []).append(k)
    out: list[str | None] = [None] * len(tgt)
    best = [0] * len(tgt)
    for i, w in enumerate(tgt):
        for k in where.get(w, ()):
            if i and k and tgt[i - 1] == src[k - 1]:
                continue  # not the start of a run
            n = 0
            while i + n < len(tgt) and k + n < len(src) and tgt[i + n] == src[k + n]:
                n += 1
            if n < 2 or sum(casing.has_letter(t) for t in tgt[i:i + n]) < 2:
                continue
            for d in range(n):
                if n > best[i + d]:
                    best[i + d], out[i + d] = n, source[k + d]
    return out


def source_flags(source: Sequence[str]) -> tuple[bool, bool]:
    """(looks like a headline, is title-cased) for a source line."""
    if not source or not any(casing.has_letter(t) for t in source):
        return False, False
    headline = len(source) <= HEADLINE_MAX and source[-1] not in _FINAL
    first = first_letter_position(source)
    longer = [t for i, t in enumerate(source) if i > first and casing.has_letter(t) and len(t) > 3]
    title = len(longer) >= 2 and sum(casing.is_capitalized(t) for t in longer) >= 0.6 * len(longer)
    return headline, title


@dataclass
class Lattice:
    """Candidates and feature values of one sentence (n words, at most K candidates a position)."""

    cands: list[list[str]]
    unary: np.ndarray  # (n, K, D) unary feature values; padding rows are 0
    lm: np.ndarray  # (n + 1, K, K, K): lm[i, a, b, c] = log10 p(c_i | c_{i-2}=a, c_{i-1}=b); i = n is </s>
    valid: np.ndarray  # (n, K) bool
    gold: np.ndarray | None = None  # (n,) index of the reference form, when training
    gen_misses: int = 0  # positions whose reference form GEN did not give (then added, if a recasing), when training

    @property
    def n(self) -> int:
        return len(self.cands)


@dataclass
class Flat:
    """A batch of lattices in flat form: every candidate of every position of every sentence, in order,
    and the LM over the batch's state cells (``decode``). Recasing decodes it directly
    (``best_paths``); ``lattices`` makes per-sentence lattices of it for training."""

    ids: np.ndarray  # (C,) candidate ids (FeatureExtractor.candidates)
    per_pos: np.ndarray  # (N,) candidates per position
    n_pos: np.ndarray  # (S,) positions per sentence
    unary: np.ndarray  # (C, D) unary feature values
    cells: Cells
    lm: SplitLM
    bilingual: np.ndarray  # (S,) bool: the sentence has a source
    gold: list[np.ndarray | None]
    gen_misses: list[int]

    def best_paths(self, phi: np.ndarray, lm_weight: np.ndarray) -> list[np.ndarray]:
        """Viterbi: per sentence, the best candidate index per position, for unary scores ``phi`` (C,)
        and each sentence's LM weight."""
        return decode.viterbi(self.cells, self.lm, lm_weight, phi, self.n_pos)

    def words(self, paths: Sequence[np.ndarray], strings: Sequence[str]) -> list[list[str]]:
        """Per sentence, the candidates that ``paths`` choose (an index per position)."""
        if not len(self.per_pos):
            return [[] for _ in paths]
        chosen = self.ids[np.cumsum(self.per_pos) - self.per_pos + np.concatenate(paths)].tolist()
        out, p0 = [], 0
        for n in self.n_pos.tolist():
            out.append([strings[i] for i in chosen[p0:p0 + n]])
            p0 += n
        return out

    def lattices(self, strings: Sequence[str]) -> list[Lattice]:
        dense = decode.dense(self.cells, self.lm, self.per_pos, self.n_pos)
        ids = self.ids.tolist()
        per_pos = self.per_pos.tolist()
        # each candidate's (position in its sentence, index at its position)
        P = np.repeat(np.arange(len(self.per_pos)) - np.repeat(np.cumsum(self.n_pos) - self.n_pos, self.n_pos),
                      self.per_pos)
        J = np.arange(len(self.ids)) - np.repeat(np.cumsum(self.per_pos) - self.per_pos, self.per_pos)
        out = []
        c0 = p0 = 0
        for s, n in enumerate(self.n_pos.tolist()):
            sizes = per_pos[p0:p0 + n]
            cands = []
            for k in sizes:
                cands.append([strings[i] for i in ids[c0:c0 + k]])
                c0 += k
            K = max(sizes, default=1)
            sl = slice(c0 - sum(sizes), c0)
            unary = np.zeros((n, K, self.unary.shape[1]))
            valid = np.zeros((n, K), dtype=bool)
            unary[P[sl], J[sl]] = self.unary[sl]
            valid[P[sl], J[sl]] = True
            p0 += n
            out.append(Lattice(cands=cands, unary=unary, lm=dense[s], valid=valid, gold=self.gold[s],
                               gen_misses=self.gen_misses[s]))
        return out


@dataclass
class _Batch:
    """What the feature computation needs from a batch of triples, as flat arrays (N target words,
    S sentences; see ``batch``)."""

    layout: Layout
    start: np.ndarray  # (N,) each word's candidates: a segment of the candidate pool ...
    count: np.ndarray  # ... (Candidates.segment)
    first: np.ndarray  # (S,) the first position with a letter (-1: none)
    punct: np.ndarray  # (N,) feature column of the punctuation before each word (-1: none)
    after_name: np.ndarray  # (N,) the word before is an unseen word that looks like a name
    e_lower: np.ndarray  # (N,) each word's id among the lowercase table's targets
    bilingual: np.ndarray  # (S,) the sentence has a source
    headline: np.ndarray  # (S,) its source looks like a headline ...
    title: np.ndarray  # (S,) ... is title-cased (source_flags)
    src_keys: np.ndarray  # (sentence << 32) + Candidates.strip_id of each source word whose case counts
    part_keys: np.ndarray  # (sentence << 32) + Candidates.strip_id of each capitalized part of a hyphenated source word
    spans: np.ndarray | None  # (N,) candidate id of each word's source span form (-1: none)
    pair_pos: np.ndarray  # (P,) (target word, aligned source word) pairs: the word ...
    pair_src: np.ndarray  # (P,) ... and the source word as the tables know it (Candidates.source_id)
    gold: list[np.ndarray | None]
    gen_misses: list[int]


# per target type: punctuation feature column (-1: none), has a letter, id among the lowercase table's
# targets, GEN's segment, what GEN's test for a source word needs (lowercase and stripped keys, length,
# ASCII, equal to its lowercase), and unseen but shaped like a name
_TARGET_COLUMNS = [("punct", np.int64), ("letter", bool), ("e_lower", np.int64), ("start", np.int64),
                   ("count", np.int64), ("low", np.int64), ("strip", np.int64), ("len", np.int64), ("ascii", bool),
                   ("is_low", bool), ("name", bool)]
# per source type: has a letter, ends a sentence, final punctuation, capitalized, long (> 3 characters),
# telling case, Candidates.strip_id, source keys (as is, and when capitalized by position), as above, and
# hyphenated
_SOURCE_COLUMNS = [("letter", bool), ("end", bool), ("final", bool), ("cap", bool), ("long", bool),
                   ("telling", bool), ("strip_id", np.int64), ("key", np.int64), ("key_pos", np.int64),
                   ("low", np.int64), ("strip", np.int64), ("len", np.int64), ("ascii", bool), ("is_low", bool),
                   ("hyphen", bool)]


class FeatureExtractor:
    """Builds lattices from triples with the training tables and the cased LM."""

    def __init__(
        self,
        tables: Tables,
        lm: object,
        feature_names: Sequence[str],
        alignment: str = "phrase",
        max_candidates: int = MAX_CANDIDATES,
        candidates_file: str | os.PathLike[str] | None = None,
    ) -> None:
        """``candidates_file``: a registry stored by training (Candidates.save), used when
        it was made with the same settings."""
        self.tables = tables
        self.lm = lm
        self.names = list(feature_names)
        self.index = {name: i for i, name in enumerate(self.names)}
        self.alignment = alignment
        self.max_candidates = max_candidates
        self._tag_probs = tables.tags.probs()
        prior = CasePrior(tables) if "case_prior" in self.index else None
        lm_id, lm_vocab = None, -1
        if isinstance(lm, ArrayLM):
            ids, unk, lm_vocab = lm.ids, lm.unk, lm.V
            lm_id = lambda w: ids.get(w, unk)
        self.candidates = Candidates(tables, prior, lm_id, max_candidates, lm_vocab)
        self._keys: dict[str, int] = {}  # lowercase or stripped word -> number (GEN's source-word test)
        self._target_types = WordTypes(_TARGET_COLUMNS, self._describe_target)
        self._source_types = WordTypes(_SOURCE_COLUMNS, self._describe_source)
        if candidates_file is not None:
            with np.load(candidates_file, allow_pickle=False) as z:
                if self.candidates.load(z):
                    self._restore_types(z)
        self._kenlm = None if isinstance(lm, ArrayLM) else KenlmContexts(lm, self.candidates.strings)

    def save_registry(self, path: str | os.PathLike[str]) -> None:
        """The candidate registry (Candidates.save) with the facts of every training word type, target
        (lowercase) and source (cased), so that recasing meets only unseen types cold."""
        self._target_types.numbers(sorted(self.candidates.forms))
        self._source_types.numbers(list(self.tables.cased.src_vocab))
        self.candidates.save(path, extra={**self._target_types.arrays("types.target"),
                                          **self._source_types.arrays("types.source"),
                                          "types.keys": text_array(self._keys),
                                          "types.names": text_array(self.names)})

    def _restore_types(self, z: Mapping[str, np.ndarray]) -> None:
        # registries of earlier versions have no types; the punctuation columns need the same features
        if "types.keys" not in z or words_of(z["types.names"]) != self.names:
            return
        keys = words_of(z["types.keys"])
        self._keys = dict(zip(keys, range(len(keys))))
        self._target_types.restore(z, "types.target")
        self._source_types.restore(z, "types.source")

    # --- lattices ------------------------------------------------------------------------
    def lattice(self, triple: Triple, reference: Sequence[str] | None = None) -> Lattice:
        return self.lattices([triple], None if reference is None else [reference])[0]

    def lattices(self, triples: Sequence[Triple],
                 references: Sequence[Sequence[str] | None] | None = None) -> list[Lattice]:
        return self.flat(triples, references).lattices(self.candidates.strings)

    def flat(self, triples: Sequence[Triple], references: Sequence[Sequence[str] | None] | None = None) -> Flat:
        """The lattices of many triples at once: the Python work is per word type (GEN and the
        candidates' facts, kept in ``self.candidates``; the words' facts, in ``WordTypes``); the
        feature values are numpy over every candidate of the batch together."""
        b = self._batch(triples, references)
        per_pos, n_pos = b.count, b.layout.n_tgt
        cstart = np.cumsum(per_pos) - per_pos
        ids = self.candidates.pool()[np.repeat(b.start - cstart, per_pos) + np.arange(int(per_pos.sum()))]
        U = np.zeros((len(ids), len(self.names)))
        if len(ids):
            self._features(U, b, ids)
        cells = Cells.of(per_pos, n_pos)
        if isinstance(self.lm, ArrayLM):
            specials = (self.lm.ids.get("<s>", self.lm.unk), self.lm.ids.get("</s>", self.lm.unk))
            split = SplitLM.of(cells, self.lm, self.candidates.facts().lm[ids], specials)
        else:
            split = SplitLM.of(cells, self._kenlm, ids, KenlmContexts.SPECIALS)
        return Flat(ids=ids, per_pos=per_pos, n_pos=n_pos, unary=U, cells=cells, lm=split,
                    bilingual=b.bilingual, gold=b.gold, gen_misses=b.gen_misses)

    def _describe_target(self, toks: list[str]) -> Iterable[tuple]:
        key, prior, training = self._key, self.candidates.prior, self.candidates.is_training_type
        named = "after_name" in self.index and prior is not None
        segs = self.candidates.plain_all(toks)
        for tok, (start, count) in zip(toks, segs):
            col = -1
            if is_punctuation(tok):
                col = self.index.get("punct=" + tok, self.index.get(OTHER_PUNCT, -1))
            low, letter = casing.lower(tok), casing.has_letter(tok)
            yield (col, letter, self.tables.lower.tgt_ids.get(low, -1), start, count,
                   key(low), key(casing.strip_diacritics(low)), len(tok), tok.isascii(), tok == low,
                   named and letter and not training(low) and prior.looks_like_a_name(low))

    def _describe_source(self, words: list[str]) -> Iterable[tuple]:
        key, source_id, strip_id = self._key, self._source_id, self.candidates.strip_id
        for word in words:
            low = casing.lower(word)
            sid = source_id(word, False)
            yield (casing.has_letter(word), word in casing.SENTENCE_END, word in _FINAL, casing.is_capitalized(word),
                   len(word) > 3, _telling_case(word), strip_id(word), sid,
                   sid if word == low else source_id(word, True),  # a lowercase word is its own positional key
                   key(low), key(casing.strip_diacritics(low)), len(word), word.isascii(), word == low,
                   "-" in word.strip("-"))

    def _parts(self, word: str) -> list[int]:
        """Candidates.strip_id of each capitalized part (two or more characters) of a hyphenated word."""
        return [self.candidates.strip_id(p) for p in word.split("-") if len(p) > 1 and casing.is_capitalized(p)]

    def _key(self, s: str) -> int:
        return self._keys.setdefault(s, len(self._keys))

    def _batch(self, triples: Sequence[Triple], references: Sequence[Sequence[str] | None] | None) -> _Batch:
        T = self._target_types
        layout = Layout.of(triples)
        S = len(triples)
        target = list(chain.from_iterable(t.target for t in triples))
        tt = T.numbers(target)
        b = _Batch(layout=layout, start=T["start"][tt], count=T["count"][tt],
                   first=first_in_sentence(T["letter"][tt], layout.tgt_sent, layout.tgt_start),
                   punct=_of_previous(T["punct"][tt], layout, -1), after_name=_of_previous(T["name"][tt], layout, False),
                   e_lower=T["e_lower"][tt], bilingual=layout.n_src > 0, headline=np.zeros(S, dtype=bool),
                   title=np.zeros(S, dtype=bool), src_keys=np.zeros(0, dtype=np.int64),
                   part_keys=np.zeros(0, dtype=np.int64), spans=None,
                   pair_pos=np.zeros(0, dtype=np.int64), pair_src=np.zeros(0, dtype=np.int64),
                   gold=[None] * S, gen_misses=[0] * S)
        if b.bilingual.any():
            self._source_side(b, triples, tt, target)
        if references is not None:
            self._gold(b, target, references)
        return b

    def _source_side(self, b: _Batch, triples: Sequence[Triple], tt: np.ndarray, target: list[str]) -> None:
        """The batch's facts from its sources: source keys, headline flags, alignment pairs, and GEN with
        the aligned source words where it takes them."""
        T, Sr, layout = self._target_types, self._source_types, b.layout
        source = list(chain.from_iterable(t.source for t in triples))
        st = Sr.numbers(source)
        letter = Sr["letter"][st]
        pos = positional(letter, Sr["end"][st], layout)
        counts = ~pos | Sr["telling"][st]  # source words whose case is not explained by position
        b.src_keys = (layout.src_sent[counts] << 32) + Sr["strip_id"][st[counts]]
        hyphenated = np.flatnonzero(Sr["hyphen"][st])  # few: their parts in Python
        if "src_part" in self.index and len(hyphenated):
            b.part_keys = np.array([(s << 32) + p for s, k in zip(layout.src_sent[hyphenated].tolist(),
                                                                   hyphenated.tolist())
                                    for p in self._parts(source[k])], dtype=np.int64)
        b.headline, b.title = batch_source_flags(letter, Sr["final"][st], Sr["cap"][st], Sr["long"][st], layout,
                                                 HEADLINE_MAX)
        pt, ps = alignment_pairs(triples, layout, self.alignment)
        b.pair_pos = pt
        b.pair_src = np.where(pos[ps], Sr["key_pos"][st[ps]], Sr["key"][st[ps]])
        # GEN takes an aligned source word equal to the word up to case (and diacritics, at its
        # length): most words have none, and keep their type's GEN; a source word equal to the
        # word itself (",", "2014") is GEN's first candidate already
        tk, sk = tt[pt], st[ps]
        same_low = T["low"][tk] == Sr["low"][sk]
        takes = (T["len"][tk] == Sr["len"][sk]) & ~(same_low & T["is_low"][tk] & Sr["is_low"][sk]) & (
            same_low | (~(T["ascii"][tk] & Sr["ascii"][sk]) & (T["strip"][tk] == Sr["strip"][sk])))
        forms: dict[int, list[str]] = {}
        for p, k in zip(pt[takes].tolist(), ps[takes].tolist()):
            forms.setdefault(p, []).append(source[k])
        if "src_span" in self.index:
            b.spans = self._spans(triples, layout, tt, st, forms, target)
        for p, fs in forms.items():
            b.start[p], b.count[p] = self.candidates.sourced(target[p], tuple(fs))

    def _spans(self, triples: Sequence[Triple], layout: Layout, tt: np.ndarray, st: np.ndarray,
               forms: dict[int, list[str]], target: list[str]) -> np.ndarray:
        """src_span's form of every word (candidate id, -1: none), adding it to ``forms`` where GEN takes
        it; source_spans runs only on sentences that share a word bigram with their source."""
        T, Sr = self._target_types, self._source_types
        spans = np.full(len(tt), -1, dtype=np.int64)

        def bigrams(low: np.ndarray, letter: np.ndarray, sent: np.ndarray) -> np.ndarray:
            # a run has two words with a letter, so one of its bigrams has one
            keep = (sent[1:] == sent[:-1]) & (letter[1:] | letter[:-1])
            return ((sent[1:][keep] << 42) + (low[:-1][keep] << 21) + low[1:][keep]) if len(sent) else sent

        if len(self._keys) >= 1 << 21:
            candidates = np.arange(len(triples))  # keys too many to pack: try every sentence
        else:
            shared = np.intersect1d(bigrams(T["low"][tt], T["letter"][tt], layout.tgt_sent),
                                    bigrams(Sr["low"][st], Sr["letter"][st], layout.src_sent))
            candidates = np.unique(shared >> 42)
        for s in candidates.tolist():
            t = triples[s]
            g0 = int(layout.tgt_start[s])
            for i, form in enumerate(source_spans(t.source, t.target)):
                if form is not None:
                    spans[g0 + i] = self.candidates.id(form)
                    if takes_source_word(form, target[g0 + i]):
                        forms.setdefault(g0 + i, []).append(form)
        return spans

    def _gold(self, b: _Batch, target: list[str], references: Sequence[Sequence[str] | None]) -> None:
        """Each reference word's index among its candidates; a reference form GEN did not give is
        counted (gen_misses), and added when it is a recasing of the word."""
        C, layout = self.candidates, b.layout
        pool = C.pool()  # segments added below are not read again
        for s, ref in enumerate(references):
            if ref is None:
                continue
            g0, n = int(layout.tgt_start[s]), int(layout.n_tgt[s])
            if len(ref) != n:
                raise ValueError(f"reference of {len(ref)} words for a target of {n}")
            gold = []
            for i, r in enumerate(ref):
                g = g0 + i
                rid, c = C.id(r), pool[b.start[g]:b.start[g] + b.count[g]].tolist()
                if rid not in c:
                    b.gen_misses[s] += 1
                    if casing.is_recasing_of(r, target[g]):
                        b.start[g], b.count[g] = C.segment(c + [rid])
                        c.append(rid)
                gold.append(c.index(rid) if rid in c else 0)
            b.gold[s] = np.array(gold, dtype=np.int64)

    def _features(self, U: np.ndarray, b: _Batch, ids: np.ndarray) -> None:
        """Unary feature values of every candidate of the batch (rows of U, in order)."""
        idx = self.index
        F = self.candidates.facts()
        per_pos = b.count
        G = np.repeat(np.arange(len(per_pos)), per_pos)  # global position of each candidate
        S = b.layout.tgt_sent[G]  # sentence of each candidate
        P = G - b.layout.tgt_start[S]  # position within its sentence
        cap, tags, prior, short = F.cap[ids], F.tag[ids], F.prior[ids], F.short[ids]
        not_an = tags != int(Tag.AN)

        def put(name: str, mask: np.ndarray, value: np.ndarray | float = 1.0) -> None:
            col = idx.get(name)
            if col is not None and mask.any():
                U[mask, col] = value if np.isscalar(value) else value[mask]  # type: ignore[index]

        if self.candidates.prior is not None and "case_prior" in idx:
            if "case_prior:unseen" in idx:
                oov = F.oov[ids]
                U[:, idx["case_prior"]] = np.where(oov, 0.0, prior)
                U[:, idx["case_prior:unseen"]] = np.where(oov, prior, 0.0)
            else:  # models of feature revision 2 and before
                U[:, idx["case_prior"]] = prior
        put("initial", cap & (P == b.first[S]))
        pc = b.punct[G]
        m = cap & (pc >= 0)
        U[np.nonzero(m)[0], pc[m]] = 1.0
        put("unseen_form", not_an & F.unseen[ids])
        put("after_name", cap & b.after_name[G])
        if not b.bilingual.any():
            return
        # src_identical: (sentence, word without diacritics) of the candidate among the source's
        ident = b.bilingual[S] & not_an & _in_source(S, F.strip[ids], b.src_keys)
        put("src_identical", ident)
        put("src_identical:rare", ident & (prior < RARE_PRIOR))
        put("src_identical:IU", ident & (tags == int(Tag.IU)) & ~F.oov[ids])
        if "src_part" in idx and len(b.part_keys):
            head = F.head[ids]
            put("src_part", b.bilingual[S] & not_an & (head >= 0) & _in_source(S, np.maximum(head, 0), b.part_keys))
        if b.spans is not None:
            put("src_span", b.spans[G] == ids)
        hl, tc = b.headline[S], b.title[S]
        iu, au = tags == int(Tag.IU), tags == int(Tag.AU)
        put("hl:IU", hl & iu & ~short)
        put("hl:IU:short", hl & iu & short)
        put("hl:AU", hl & au)
        put("tc:IU", tc & iu & ~short)
        put("tc:IU:short", tc & iu & short)
        self._bilingual(U, b, ids, tags)

    def _bilingual(self, U: np.ndarray, b: _Batch, ids: np.ndarray, tags: np.ndarray) -> None:
        """cap_t1 (eq. 7), cap_tag_t1 (eq. 8) and upper_translation of every candidate with aligned words."""
        cols = [self.index.get(x) for x in ("cap_t1", "cap_tag_t1", "upper_translation")]
        pp, fk, per_pos = b.pair_pos, b.pair_src, b.count
        if all(c is None for c in cols) or not len(pp):
            return
        SF, F = self.candidates.source_facts(), self.candidates.facts()
        cased, lower = self.tables.cased, self.tables.lower
        f_cased, f_tag, f_cased_word = SF.cased[fk], SF.tag[fk], SF.has_case[fk]
        lex = lower.probs(SF.lower[fk], b.e_lower[pp])
        # upper_translation: every cased aligned word is upper, and at least one is cased
        n_pos = len(per_pos)
        any_cased = np.bincount(pp, weights=f_cased_word, minlength=n_pos) > 0
        not_upper = np.bincount(pp, weights=f_cased_word & ~SF.upper[fk], minlength=n_pos) > 0
        src_upper = any_cased & ~not_upper
        # expand every pair over its position's candidates
        cstart = np.cumsum(per_pos) - per_pos
        reps = per_pos[pp]
        pair = np.repeat(np.arange(len(pp)), reps)
        cand = cstart[pp][pair] + (np.arange(len(pair)) - np.repeat(np.cumsum(reps) - reps, reps))
        p_cased = cased.probs(f_cased[pair], F.cased[ids][cand])
        p_tag = lex[pair] * self._tag_probs[f_tag[pair], tags[cand]]
        has = np.zeros(len(ids), dtype=bool)
        has[cand] = True
        with np.errstate(divide="ignore"):
            if cols[0] is not None:
                U[has, cols[0]] = np.log(np.bincount(cand, weights=p_cased, minlength=len(ids))[has])
            if cols[1] is not None:
                U[has, cols[1]] = np.log(np.bincount(cand, weights=p_tag, minlength=len(ids))[has])
        if cols[2] is not None:
            G = np.repeat(np.arange(n_pos), per_pos)
            U[has & F.upper[ids] & src_upper[G], cols[2]] = 1.0

    def _source_id(self, word: str, positional: bool) -> int:
        """``Candidates.source_id`` of a source word as the tables know it: a word capitalized by its
        position in lowercase, if the tables know it only that way."""
        w = word
        if positional:
            ids = self.tables.cased.src_ids
            low = casing.lower_all(word)
            w = word if word in ids or low not in ids else low
        return self.candidates.source_id(w)


def _of_previous(values: np.ndarray, layout: Layout, fill: object) -> np.ndarray:
    """Each word's value of the word before it in its sentence (``fill`` for a sentence's first word)."""
    out = np.empty_like(values)
    out[1:] = values[:-1]
    out[layout.tgt_start[layout.n_tgt > 0]] = fill  # word 0 among them
    return out


def _in_source(sent: np.ndarray, word: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Whether (sentence << 32) + word is among ``keys``: a bitmap over (sentence, word among the keys'
    words), as np.isin sorts both sides."""
    key_sent, key_word = keys >> 32, keys & 0xFFFFFFFF
    words = np.unique(key_word)
    n_sent = int(max(sent.max(initial=0), key_sent.max(initial=0))) + 1
    if not len(words) or len(words) * n_sent > 1 << 26:
        return np.isin((sent << 32) + word, keys)
    local = np.full(int(max(word.max(initial=0), words[-1])) + 1, -1, dtype=np.int64)
    local[words] = np.arange(len(words))
    table = np.zeros(n_sent * len(words), dtype=bool)
    table[key_sent * len(words) + local[key_word]] = True
    w = local[word]
    out = w >= 0
    out[out] = table[sent[out] * len(words) + w[out]]
    return out


def _telling_case(word: str) -> bool:
    """Case that position does not explain: mixed (``Hans-Peter``) or all upper with >= 2 letters."""
    t = casing.tag(word)
    return t is Tag.MX or (t is Tag.AU and sum(c.isalpha() for c in word) >= 2)


def feature_names(feature_set: str, punctuation: Sequence[str]) -> list[str]:
    names = list(PAPER_FEATURES) + ["punct=" + p for p in punctuation] + [OTHER_PUNCT]
    if feature_set == "full":
        names += EXTRA_FEATURES
    return names
