"""From triples to the flat candidate lattice of a batch: GEN, the facts the features read, and the LM.

The Python work is per word type: GEN and each candidate's facts (``candidates.Candidates``), each
target and source word type's facts (``columns.WordTypes``), worked out the first time a type is met
and kept as numpy columns. Per batch, the sentence facts (alignment pairs, positional capitals,
headline flags) are numpy over the batch's flat token arrays (``sentences``, ``batch``), and the
feature values (``features.FEATURES``), table lookups and LM queries are numpy over every candidate.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from pathlib import Path

import numpy as np

from moses_recaser.core import casing
from moses_recaser.core.casing import Tag
from moses_recaser.core.columns import WordTypes
from moses_recaser.core.sentences import (
    FINAL,
    SENTENCE_END,
    Layout,
    after_a_number,
    capital_runs,
    first_in_sentence,
    headline_flags,
    positional,
    source_spans,
)
from moses_recaser.core.triples import Triple
from moses_recaser.core.vocab import Vocab
from moses_recaser.io.diskarrays import Scratch
from moses_recaser.io.modeldir import MappedArrays, release_mapped, text_array, trim_mapped, words_of
from moses_recaser.model.batch import alignment_pairs
from moses_recaser.model.candidates import Candidates
from moses_recaser.model.constraints import ConstraintInputs, fixed_forms
from moses_recaser.model.features import OTHER_PUNCT, BatchFacts, FeatureInputs, fill
from moses_recaser.model.gen import MAX_CANDIDATES
from moses_recaser.model.lattice import Flat
from moses_recaser.model.prior import CasePrior
from moses_recaser.model.truecaser import detruecased, sentence_starts
from moses_recaser.model.viterbi import Cells, SplitLM
from moses_recaser.stats.arpa_arrays import ArrayLM, KenlmContexts
from moses_recaser.stats.tables import Tables

REGISTRY_CHUNK = 1 << 16  # training types described between two compactions of the registry (save_registry)
# per target type: punctuation feature column (-1: none), has a letter, id among the lowercase table's
# targets, GEN's segment, what GEN's test for a source word needs (lowercase and stripped keys, length,
# ASCII, equal to its lowercase), unseen but shaped like a name, and ends a sentence
_TARGET_COLUMNS = [
    ("punct", np.int64),
    ("letter", bool),
    ("e_lower", np.int64),
    ("start", np.int64),
    ("count", np.int64),
    ("low", np.int64),
    ("strip", np.int64),
    ("len", np.int64),
    ("ascii", bool),
    ("is_low", bool),
    ("name", bool),
    ("end", bool),
]
# per source type: has a letter, ends a sentence, final punctuation, capitalized, long (> 3 characters),
# telling case, Candidates.strip_id, source keys (as is, and when capitalized by position), GEN's test's
# columns as above, hyphenated, has a lowercase letter, and all upper (tag AU)
_SOURCE_COLUMNS = [
    ("letter", bool),
    ("end", bool),
    ("final", bool),
    ("cap", bool),
    ("long", bool),
    ("telling", bool),
    ("strip_id", np.int64),
    ("key", np.int64),
    ("key_pos", np.int64),
    ("low", np.int64),
    ("strip", np.int64),
    ("len", np.int64),
    ("ascii", bool),
    ("is_low", bool),
    ("hyphen", bool),
    ("has_lower", bool),
    ("upper", bool),
]


@dataclass
class Pairs:
    """A batch's flat source tokens, their type numbers, and its (output word, source word) pairs."""

    source: list[str]
    st: np.ndarray
    pos: np.ndarray
    src: np.ndarray


NO_PAIRS = Pairs([], np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))


class FeatureExtractor:
    """Builds flat lattices from triples with the training tables and the cased LM."""

    def __init__(
        self,
        tables: Tables,
        lm: object,
        feature_names: Sequence[str],
        alignment: str = "phrase",
        max_candidates: int = MAX_CANDIDATES,
        candidates_file: str | os.PathLike[str] | MappedArrays | None = None,
    ) -> None:
        """``candidates_file``: a registry stored by training (``save_registry``), or its arrays as mapped
        already, used when it was made with the same settings."""
        self.tables = tables
        self.lm = lm
        self.names = list(feature_names)
        self.index = {name: i for i, name in enumerate(self.names)}
        self.alignment = alignment
        self.max_candidates = max_candidates
        prior = CasePrior(tables) if "case_prior" in self.index else None
        lm_ids = lm.word_ids if isinstance(lm, ArrayLM) else None
        self.candidates = Candidates(tables, prior, lm_ids, max_candidates, lm.V if isinstance(lm, ArrayLM) else -1)
        self._keys = Vocab.from_words([])  # lowercase or stripped word -> number (GEN's source-word test)
        self._target_types = WordTypes(_TARGET_COLUMNS, self._describe_target)
        self._source_types = WordTypes(_SOURCE_COLUMNS, self._describe_source)
        if candidates_file is not None:
            z = candidates_file if isinstance(candidates_file, MappedArrays) else MappedArrays(candidates_file)
            if self.candidates.load(z):
                self._restore_types(z)
        self._loaded_types = len(self._target_types) + len(self._source_types)
        self._kenlm = None if isinstance(lm, ArrayLM) else KenlmContexts(lm, self.candidates.strings)

    def save_registry(self, path: str | os.PathLike[str]) -> None:
        """The candidate registry (Candidates.save) with the facts of every training word type, target
        (lowercase) and source (cased), so that recasing meets only unseen types cold. The types are described
        REGISTRY_CHUNK at a time, the registry's strings moved into arrays between chunks (``compact``), so
        that what it holds grows by tens of bytes a type, not by a kilobyte, and its facts written to files
        beside ``path`` as they come (``spill``), removed once stored. The extractor's last use: its facts are
        then neither in memory nor in files."""
        from moses_recaser.io.outputs import work_dir

        with work_dir("moses-recaser-registry", Path(path).parent) as tmp:
            self.candidates.spill(Scratch(tmp, "candidates"))
            self._target_types.spill(Scratch(tmp, "target"))
            self._source_types.spill(Scratch(tmp, "source"))
            for types, known in (
                (self.candidates.training_types(), self._target_types),
                (self.tables.cased.src_vocab, self._source_types),
            ):
                for words in types.chunks(REGISTRY_CHUNK):
                    known.numbers(words)
                    self.compact()
                    release_mapped()
            self.candidates.save(
                path,
                extra={
                    **self._target_types.arrays("types.target"),
                    **self._source_types.arrays("types.source"),
                    **self._keys.arrays("types.keys"),
                    "types.names": text_array(self.names),
                },
            )

    def compact(self) -> None:
        """The registries' strings moved into arrays and their caches emptied (``Vocab.compact``)."""
        self.candidates.compact()
        for vocab in (self._keys, self._target_types.ids, self._source_types.ids):
            vocab.compact()
        for table in (self.tables.cased, self.tables.lower):
            table.src_vocab.compact()
            table.tgt_vocab.compact()
        if isinstance(self.lm, ArrayLM):
            self.lm.vocab.compact()

    def types_met(self) -> int:
        """The word types, target and source, described since the registry was loaded (what recasing holds for
        each input it has seen: about 2.6 KB a type)."""
        return len(self._target_types) + len(self._source_types) - self._loaded_types

    def _restore_types(self, z: Mapping[str, np.ndarray]) -> None:
        # the target types' punctuation column holds feature columns: only for the same features
        if words_of(z["types.names"]) != self.names:
            return
        self._keys = Vocab.load(z, "types.keys")
        self._target_types.restore(z, "types.target")
        self._source_types.restore(z, "types.source")

    def flat(
        self,
        triples: Sequence[Triple],
        references: Sequence[Sequence[str | None] | None] | None = None,
        decoded: Sequence[Sequence[str] | None] | None = None,
    ) -> Flat:
        """The lattice of many lowercased triples at once; with ``references``, the reference's candidate at
        each position (added to GEN where GEN misses it, as training needs); with ``decoded``, per sentence the
        words as the input had them (None: it came lowercased), which join GEN and the ``decoded`` features."""
        b = self._batch(triples, references, decoded)
        trim_mapped()  # a mapped model's pages dropped between stages: recasing holds one stage's, not all
        per_pos, n_pos = b.count, b.layout.n_tgt
        cstart = np.cumsum(per_pos) - per_pos
        ids = self.candidates.pool()[np.repeat(b.start - cstart, per_pos) + np.arange(int(per_pos.sum()))]
        U = np.zeros((len(ids), len(self.names)))
        if len(ids):
            fill(
                U,
                FeatureInputs(
                    ids,
                    b,
                    self.candidates.facts(),
                    self.candidates.source_facts(),
                    self.tables,
                    self.candidates.prior is not None,
                ),
                self.names,
                self.index,
            )
        trim_mapped()
        cells = Cells.from_lengths(per_pos, n_pos)
        if isinstance(self.lm, ArrayLM):
            specials = (self.lm.vocab.get("<s>", self.lm.unk), self.lm.vocab.get("</s>", self.lm.unk))
            split = SplitLM.from_lm(cells, self.lm, self.candidates.facts().lm[ids], specials)
        else:
            split = SplitLM.from_lm(cells, self._kenlm, ids, KenlmContexts.SPECIALS)  # type: ignore[arg-type]
        return Flat(
            ids=ids,
            per_pos=per_pos,
            n_pos=n_pos,
            unary=U,
            cells=cells,
            lm=split,
            bilingual=b.bilingual,
            gold=b.gold,
            gen_misses=b.gen_misses,
            fixed=b.fixed,
        )

    # --- word types ----------------------------------------------------------------------
    def _describe_target(self, toks: list[str]) -> dict[str, list]:
        keys, prior = self._keys, self.candidates.prior
        named = "after_name" in self.index and prior is not None
        starts, counts = self.candidates.plain_all(toks)
        low = [casing.lower(t) for t in toks]
        letter = [casing.has_letter(t) for t in toks]
        other = self.index.get(OTHER_PUNCT, -1)
        unseen = self.candidates.unseen_types(low)  # (plain_all looked them up)
        return {
            "punct": [self.index.get("punct=" + t, other) if casing.is_punctuation(t) else -1 for t in toks],
            "letter": letter,
            # the lowercase table's target words are training words
            "e_lower": self.tables.lower.tgt_vocab.numbers(low, [k for k, u in enumerate(unseen) if not u]).tolist(),
            "start": starts.tolist(),
            "count": counts.tolist(),
            "low": keys.add_all(low).tolist(),
            "strip": keys.add_all([casing.strip_diacritics(x) for x in low]).tolist(),
            "len": list(map(len, low)),
            "ascii": [t.isascii() for t in toks],
            "is_low": [t == x for t, x in zip(toks, low)],
            "name": [
                named and a and u and prior.looks_like_a_name(x)  # type: ignore[union-attr]
                for x, a, u in zip(low, letter, unseen)
            ],
            "end": [t in SENTENCE_END for t in toks],
        }

    def _describe_source(self, words: list[str]) -> dict[str, list]:
        keys = self._keys
        low = [casing.lower(w) for w in words]
        sid = self.candidates.source_ids(words)
        telling = [_telling_case(w) for w in words]
        by_position = [k for k, (w, x, t) in enumerate(zip(words, low, telling)) if not (w == x or t)]
        key_pos = list(sid)
        for k, i in zip(by_position, self.candidates.source_ids(self._as_known([words[k] for k in by_position]))):
            key_pos[k] = i
        return {
            "letter": [casing.has_letter(w) for w in words],
            "end": [w in SENTENCE_END for w in words],
            "final": [w in FINAL for w in words],
            "cap": [casing.is_capitalized(w) for w in words],
            "long": [len(w) > 3 for w in words],
            "telling": telling,
            "strip_id": self.candidates.strip_ids(words),
            "key": sid,
            # a lowercase word, and a word whose case position does not explain, is its own positional key
            "key_pos": key_pos,
            "low": keys.add_all(low).tolist(),
            "strip": keys.add_all([casing.strip_diacritics(x) for x in low]).tolist(),
            "len": list(map(len, low)),
            "ascii": [w.isascii() for w in words],
            "is_low": [w == x for w, x in zip(words, low)],
            "hyphen": ["-" in w.strip("-") for w in words],
            "has_lower": [casing.has_lower(w) for w in words],
            "upper": [casing.tag(w) is Tag.AU for w in words],
        }

    def _parts(self, word: str) -> list[int]:
        """Candidates.strip_id of each capitalized part (two or more characters) of a hyphenated word."""
        return [self.candidates.strip_id(p) for p in word.split("-") if len(p) > 1 and casing.is_capitalized(p)]

    def _as_known(self, words: list[str]) -> list[str]:
        """Source words capitalized by their position as the tables know them: in lowercase if they know them only
        that way (each word and its lowercase looked up together)."""
        lows = [casing.lower_all(w) for w in words]
        ids = self.tables.cased.src_vocab.numbers(words + lows).tolist()
        return [w if ids[k] >= 0 or ids[len(words) + k] < 0 else low for k, (w, low) in enumerate(zip(words, lows))]

    # --- a batch ---------------------------------------------------------------------------
    def _batch(
        self,
        triples: Sequence[Triple],
        references: Sequence[Sequence[str | None] | None] | None,
        decoded: Sequence[Sequence[str] | None] | None = None,
    ) -> BatchFacts:
        T = self._target_types
        layout = Layout.from_sentences([t.target for t in triples], [t.source for t in triples])
        S = len(triples)
        target = list(chain.from_iterable(t.target for t in triples))
        tt = T.numbers(target)
        b = BatchFacts(
            layout=layout,
            start=T["start"][tt],
            count=T["count"][tt],
            first=after_a_number(
                first_in_sentence(T["letter"][tt], layout.tgt_sent, layout.tgt_start), target, layout.tgt_start
            ),
            punct=_of_previous(T["punct"][tt], layout, -1),
            after_name=_of_previous(T["name"][tt], layout, False),
            e_lower=T["e_lower"][tt],
            bilingual=layout.n_src > 0,
            headline=np.zeros(S, dtype=bool),
            title=np.zeros(S, dtype=bool),
            src_keys=np.zeros(0, dtype=np.int64),
            part_keys=np.zeros(0, dtype=np.int64),
            spans=None,
            pair_pos=np.zeros(0, dtype=np.int64),
            pair_src=np.zeros(0, dtype=np.int64),
            gold=[None] * S,
            gen_misses=[0] * S,
        )
        pairs = self._source_side(b, triples, tt, target) if b.bilingual.any() else None
        if decoded is not None:
            self._decoded(b, decoded)
        if references is None:
            b.fixed = self._constrain(b, triples, tt, target, pairs or NO_PAIRS)
        else:
            self._gold(b, target, references)
        return b

    def _constrain(
        self, b: BatchFacts, triples: Sequence[Triple], tt: np.ndarray, target: list[str], pairs: Pairs
    ) -> dict[int, str]:
        """Fix the words the constraints fix (GEN: their one form); returns the rule of each."""
        T, Sr, layout = self._target_types, self._source_types, b.layout
        forms, why = fixed_forms(
            ConstraintInputs(
                triples=triples,
                layout=layout,
                target=target,
                source=pairs.source,
                tgt_positional=positional(T["letter"][tt], T["end"][tt], layout.tgt_start, layout.n_tgt),
                src_letter=Sr["letter"][pairs.st],
                src_lower=Sr["has_lower"][pairs.st],
                src_upper=Sr["upper"][pairs.st],
                pair_pos=pairs.pos,
                pair_src=pairs.src,
                candidates=self.candidates,
            )
        )
        C = self.candidates
        for g, form in forms.items():
            b.start[g], b.count[g] = C.segment([C.id(form)])
        return why

    def _decoded(self, b: BatchFacts, decoded: Sequence[Sequence[str] | None]) -> None:
        """``b.decoded``: the candidate id of each word as its sentence came (-1 in sentences that came
        lowercased), and ``b.decoded_truecased``: the line's first sentence start with a letter is in lowercase,
        as truecased output has it (a line whose sentence starts have no letter, '700 dead ...', is taken as cased:
        truecase.perl changed none of its words). In such a line, a word at a sentence start
        (``truecaser.sentence_starts``) has the form truecase.perl gave it, which tells nothing of its case there,
        so its id is -1, unless the form is of mixed case, and ``b.decoded_start`` holds the id of the form with
        its first character capitalized, as detruecase.perl makes it (in a line that starts with a capital, as
        cased MT output does, every word's form counts as it is, and no ``decoded_start`` is set). Forms GEN lacks
        ('CSeries') join the word's GEN."""
        C, layout = self.candidates, b.layout
        ids = np.full(len(b.start), -1, dtype=np.int64)
        start = ids.copy()
        run = np.zeros(len(b.start), dtype=bool)
        truecased = np.zeros(len(decoded), dtype=bool)
        words_all: list[str] = []
        forms_all: list[str] = []
        met: list[str] = []  # each sentence's words, then its start forms: the order they are registered in
        at_all, flags = [], []
        for s, words in enumerate(decoded):
            if words is None:
                continue
            at_start = sentence_starts(words)
            # the line's kind shows only where truecase.perl chose a form: '700 dead ...' it left as it came
            first = next((w for w, f in zip(words, at_start) if f and casing.has_letter(w)), "")
            truecased[s] = casing.has_letter(first) and casing.tag(first) is Tag.AL
            starts = [f and casing.has_letter(w) and casing.tag(w) is not Tag.MX for w, f in zip(words, at_start)]
            forms = [_start_form(w) if f else w for w, f in zip(words, starts)]
            met += [*words, *forms]
            words_all += words
            forms_all += forms
            at_all.append(int(layout.tgt_start[s]) + np.arange(len(words)))
            flags += [f and bool(truecased[s]) for f in starts]
            run[at_all[-1]] = capital_runs(words, at_start)
        if at_all:
            C.add(met)
            at, flag = np.concatenate(at_all), np.array(flags, dtype=bool)
            as_is = C.strings.numbers(words_all)
            start[at[flag]] = C.strings.numbers(forms_all)[flag]
            as_is[flag] = -1
            ids[at] = as_is
        self._join_gen(b, ids)
        self._join_gen(b, start)
        came = np.array([words is not None for words in decoded], dtype=bool)
        b.decoded, b.decoded_start, b.decoded_truecased, b.decoded_cased = ids, start, truecased, came & ~truecased
        b.decoded_run = run

    def _join_gen(self, b: BatchFacts, want: np.ndarray) -> None:
        """Add the candidate ``want[g]`` to the GEN of each word g that lacks it (-1: none)."""
        C = self.candidates
        pool = C.pool()
        seg = np.repeat(b.start - (np.cumsum(b.count) - b.count), b.count) + np.arange(int(b.count.sum()))
        word = np.repeat(np.arange(len(want)), b.count)
        found = np.bincount(word, weights=pool[seg] == np.repeat(want, b.count), minlength=len(want)) > 0
        for g in np.flatnonzero((want >= 0) & ~found).tolist():
            b.start[g], b.count[g] = C.segment(pool[b.start[g] : b.start[g] + b.count[g]].tolist() + [int(want[g])])

    def _gen_accepts(self, tk: np.ndarray, sk: np.ndarray) -> np.ndarray:
        """GEN's test for an aligned source word (target type numbers ``tk``, source type numbers ``sk``):
        the same length, and equal to the word up to case, or up to case and diacritics; a source word
        equal to the lowercase word itself is GEN's first candidate already, and left out."""
        T, Sr = self._target_types, self._source_types
        same_low = T["low"][tk] == Sr["low"][sk]
        return (
            (T["len"][tk] == Sr["len"][sk])
            & ~(same_low & T["is_low"][tk] & Sr["is_low"][sk])
            & (same_low | (~(T["ascii"][tk] & Sr["ascii"][sk]) & (T["strip"][tk] == Sr["strip"][sk])))
        )

    def _source_side(self, b: BatchFacts, triples: Sequence[Triple], tt: np.ndarray, target: list[str]) -> Pairs:
        """The batch's facts from its sources: source keys, headline flags, alignment pairs, and GEN with
        the aligned source words where it takes them."""
        Sr, layout = self._source_types, b.layout
        source = list(chain.from_iterable(t.source for t in triples))
        st = Sr.numbers(source)
        letter = Sr["letter"][st]
        pos = positional(letter, Sr["end"][st], layout.src_start, layout.n_src)
        counts = ~pos | Sr["telling"][st]  # source words whose case is not explained by position
        b.src_keys = (layout.src_sent[counts] << 32) + Sr["strip_id"][st[counts]]
        hyphenated = np.flatnonzero(Sr["hyphen"][st])  # few: their parts in Python
        if "src_part" in self.index and len(hyphenated):
            b.part_keys = np.array(
                [
                    (s << 32) + p
                    for s, k in zip(layout.src_sent[hyphenated].tolist(), hyphenated.tolist())
                    for p in self._parts(source[k])
                ],
                dtype=np.int64,
            )
        b.headline, b.title = headline_flags(
            letter, Sr["final"][st], Sr["cap"][st], Sr["long"][st], layout.src_sent, layout.src_start, layout.n_src
        )
        pt, ps = alignment_pairs(triples, layout, self.alignment)
        b.pair_pos = pt
        b.pair_src = np.where(pos[ps], Sr["key_pos"][st[ps]], Sr["key"][st[ps]])
        # most words have no source word GEN takes, and keep their type's GEN
        takes = self._gen_accepts(tt[pt], st[ps])
        forms: dict[int, list[str]] = {}
        for p, k in zip(pt[takes].tolist(), ps[takes].tolist()):
            forms.setdefault(p, []).append(source[k])
        if "src_span" in self.index:
            b.spans = self._spans(triples, layout, tt, st, forms, source, pos & ~Sr["telling"][st])
        at = list(forms)
        if at:
            b.start[at], b.count[at] = np.array(self.candidates.sourced([(target[p], tuple(forms[p])) for p in at])).T
        return Pairs(source=source, st=st, pos=pt, src=ps)

    def _spans(
        self,
        triples: Sequence[Triple],
        layout: Layout,
        tt: np.ndarray,
        st: np.ndarray,
        forms: dict[int, list[str]],
        source: list[str],
        by_position: np.ndarray,
    ) -> np.ndarray:
        """src_span's form of every word (candidate id, -1: none), adding it to ``forms`` where GEN takes
        it; source_spans runs only on sentences that share a word bigram with their source. A source word
        capitalized by its position (``by_position``) gives its form as the tables know it (``_as_known``):
        "In Berlin" copied into the middle of a sentence is "in Berlin"."""
        T, Sr = self._target_types, self._source_types

        def bigrams(low: np.ndarray, letter: np.ndarray, sent: np.ndarray) -> np.ndarray:
            # a run has two words with a letter, so one of its bigrams has one
            keep = (sent[1:] == sent[:-1]) & (letter[1:] | letter[:-1])
            return ((sent[1:][keep] << 42) + (low[:-1][keep] << 21) + low[1:][keep]) if len(sent) else sent

        if len(self._keys) >= 1 << 21:
            sentences = np.arange(len(triples))  # keys too many to pack: try every sentence
        else:
            tgt = bigrams(T["low"][tt], T["letter"][tt], layout.tgt_sent)
            src = np.sort(bigrams(Sr["low"][st], Sr["letter"][st], layout.src_sent))
            at = np.minimum(np.searchsorted(src, tgt), len(src) - 1)
            shared = tgt[src[at] == tgt] if len(src) else tgt[:0]
            sentences = np.flatnonzero(np.bincount(shared >> 42))  # (np.unique's first call imports numpy.ma)
        g, m = [], []  # (target word, source word) of every span word, in batch order
        for s in sentences.tolist():
            t = triples[s]
            g0, m0 = int(layout.tgt_start[s]), int(layout.src_start[s])
            unseen = (T["e_lower"][tt[g0 : g0 + len(t.target)]] < 0).tolist()  # training's target lacks them
            for i, k in enumerate(source_spans(t.source, t.target, unseen)):
                if k >= 0:
                    g.append(g0 + i)
                    m.append(m0 + k)
        spans = np.full(len(tt), -1, dtype=np.int64)
        if g:
            G, M = np.array(g), np.array(m)
            words = [source[k] for k in m]
            moved = np.flatnonzero(by_position[M]).tolist()
            for j, known in zip(moved, self._as_known([words[j] for j in moved])):
                words[j] = known
            spans[G] = self.candidates.ids(words)
            takes = self._gen_accepts(tt[G], st[M])
            for p, k in zip(G[takes].tolist(), M[takes].tolist()):
                forms.setdefault(p, []).append(source[k])
        return spans

    def _gold(self, b: BatchFacts, target: list[str], references: Sequence[Sequence[str | None] | None]) -> None:
        """Each reference word's index among its candidates (-1 for a None word: unlabeled); a reference
        form GEN did not give is counted (gen_misses), and added when it is a recasing of the word."""
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
                if r is None:  # a word the reference does not decide (decoder output): unlabeled
                    gold.append(-1)
                    continue
                g = g0 + i
                rid, c = C.id(r), pool[b.start[g] : b.start[g] + b.count[g]].tolist()
                if rid not in c:
                    b.gen_misses[s] += 1
                    if casing.is_recasing_of(r, target[g]):
                        b.start[g], b.count[g] = C.segment(c + [rid])
                        c.append(rid)
                gold.append(c.index(rid) if rid in c else 0)
            b.gold[s] = np.array(gold, dtype=np.int64)


def _start_form(word: str) -> str:
    """detruecase.perl's form of a word at a sentence start (``truecaser.detruecased``) where it differs from the
    word in case only; else the word ('ırmak': Perl's ucfirst gives 'Irmak', whose lowercase is 'irmak')."""
    form = detruecased(word)
    return form if casing.is_recasing_of(form, word) else word


def _of_previous(values: np.ndarray, layout: Layout, fill: object) -> np.ndarray:
    """Each word's value of the word before it in its sentence (``fill`` for a sentence's first word)."""
    out = np.empty_like(values)
    out[1:] = values[:-1]
    out[layout.tgt_start[layout.n_tgt > 0]] = fill  # word 0 among them
    return out


def _telling_case(word: str) -> bool:
    """Case that position does not explain: mixed (``Hans-Peter``) or all upper with >= 2 letters."""
    t = casing.tag(word)
    return t is Tag.MX or (t is Tag.AU and sum(c.isalpha() for c in word) >= 2)
