"""Feature functions (paper section 4.3) over the candidate lattices of triples.

``FeatureExtractor.lattices`` builds a batch at once: GEN and the sentence-level facts are per token
(cached by token), while the feature values, the table lookups and the LM queries are numpy over
every candidate of the batch; ``lattice`` is the one-triple case of the same code.

Every feature is defined per target word E_i and summed over the sentence. A target word is
aligned to every word of its aligned source phrase (``alignment="phrase"``, the paper's
choice) or, beyond the paper (``alignment="links"``), to the source words it is linked to when
it has links, else to its phrase.

Paper features:
- ``lm`` (eq. 6): log10 p(E_i | E_{i-2}, E_{i-1}) from the cased LM (the model's query arrays, equal to
  kenlm's scores; kenlm states for a binary LM given with ``--lm``), with
  ``<s>`` and ``</s>``; the only transition feature (it lives in ``Lattice.lm``);
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
  p(tag | last three letters) so that unseen words (``lebanese``) get a prior too;
- ``src_identical``: the candidate, which has a cased letter, equals (up to diacritics) a source word
  that is not capitalized by its position (names, acronyms, odd case copied through); a positional
  source word counts when its case is more than a capital first letter (``Hans-Peter``, ``NSA``);
- ``src_identical:rare``: the same, for a candidate that the case prior finds unlikely (p < 1/2):
  ``Reason`` for ``reason`` when the source names the Reason foundation;
- ``src_span``: the target word lies in a run of at least two words with a letter that the source
  repeats verbatim up to case (``The Next Day``, ``Like A Rocket Man``), and the candidate is the
  source's form; such runs are copied titles and names, whatever the alignment says;
- ``unseen_form``: the candidate has a cased letter and never occurred in the training target;
- headline features: the source line looks like a headline (no sentence-final punctuation, at most
  ``HEADLINE_MAX`` tokens) or is title-cased (most of its longer non-initial words capitalized),
  crossed with the candidate's tag (IU, AU) and with whether the word is short (<= 3 letters, the
  function words that title case leaves lower): ``hl:IU``, ``hl:IU:short``, ``hl:AU``, ``tc:IU``,
  ``tc:IU:short``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from . import casing
from .casing import Tag, is_punctuation
from .gen import MAX_CANDIDATES, gen
from .tables import Tables
from .triples import Triple

PAPER_FEATURES = ["cap_t1", "cap_tag_t1", "upper_translation", "initial"]
EXTRA_FEATURES = ["case_prior", "src_identical", "src_identical:rare", "src_span", "unseen_form",
                  "hl:IU", "hl:IU:short", "hl:AU", "tc:IU", "tc:IU:short"]
MONOLINGUAL_OFF = {"cap_t1", "cap_tag_t1", "upper_translation"} | {
    f for f in EXTRA_FEATURES if f.startswith(("hl:", "tc:", "src_"))
}
FEATURE_SETS = ("paper", "full")
OTHER_PUNCT = "punct=<other>"
HEADLINE_MAX = 20
# bumped whenever a feature's definition changes, so that cached experiment models are retrained
FEATURE_REVISION = 2
RARE_PRIOR = math.log(0.5)
_FINAL = {".", "!", "?", ":", ";", "…", "&quot;", "&apos;", "»", "\"", "'", ")", "&#93;"}


def is_upper_word(token: str) -> bool:
    """Every cased character upper, and at least one."""
    if token.isascii():
        return token.isupper()  # the same test for ASCII
    cased = [c for c in token if c.isupper() or c.islower()]
    return bool(cased) and all(c.isupper() for c in cased)


def first_letter_position(tokens: Sequence[str]) -> int:
    for i, tok in enumerate(tokens):
        if casing.has_letter(tok):
            return i
    return -1


def source_spans(source: Sequence[str], target: Sequence[str]) -> list[str | None]:
    """For each target position, the source form when the word lies in a run of >= 2 words with a
    letter that the source repeats verbatim up to case (the longest run wins, then the first)."""
    src = [w.lower() for w in source]  # casing.lower, inlined: this runs on every sentence
    tgt = [w.lower() for w in target]
    if len(set(src).intersection(tgt)) < 2:
        return [None] * len(tgt)
    where: dict[str, list[int]] = {}
    for k, w in enumerate(src):
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
class _Sentence:
    """What the batch feature computation needs from one sentence."""

    cands: list[list[str]]
    aligned: list[list[int]]
    spans: list[str | None]
    gold: np.ndarray | None
    gen_misses: int
    punct: list[int]  # feature column of the punctuation before each position (-1: none)
    first: int  # the first position with a letter
    src_words: set[str] | None = None  # source words whose case counts, without diacritics
    src_keys: list[str] | None = None  # source words as the tables know them (None: no source)
    headline: bool = False
    title: bool = False
    target: list[str] | None = None  # lowercased target words (with a source only)


class FeatureExtractor:
    """Builds lattices from triples with the training tables and the cased LM."""

    def __init__(
        self,
        tables: Tables,
        lm: object,
        feature_names: Sequence[str],
        alignment: str = "phrase",
        max_candidates: int = MAX_CANDIDATES,
    ) -> None:
        self.tables = tables
        self.lm = lm
        self.names = list(feature_names)
        self.index = {name: i for i, name in enumerate(self.names)}
        self.alignment = alignment
        self.max_candidates = max_candidates
        self.forms = {k: [tables.forms.vocab[i] for i in ids] for k, ids in tables.forms.by_lower().items()}
        self.form_set = set(tables.forms.vocab)
        self._tag_probs = tables.tags.probs()
        self._lm_cache: dict[tuple[str, str, str], float] = {}
        self._prior = CasePrior(tables) if "case_prior" in self.index else None

    @lru_cache(maxsize=1 << 17)  # noqa: B019 - per extractor, kept for its life
    def _gen_plain(self, tok: str) -> tuple[str, ...]:
        return tuple(gen(tok, self.forms.get(casing.lower(tok), ()), (), self.max_candidates))

    # --- alignment -----------------------------------------------------------------------
    def aligned_sources(self, triple: Triple) -> list[list[int]]:
        n = len(triple.target)
        none: list[int] = []  # shared, never mutated
        phrase_src: list[list[int]] = [none] * n
        for s0, s1, t0, t1 in triple.phrases:
            span = list(range(s0, s1 + 1))
            for t in range(t0, t1 + 1):
                phrase_src[t] = span
        if (self.alignment == "phrase" and triple.phrases) or not triple.links:
            return phrase_src
        linked: dict[int, list[int]] = {}
        for s, t in triple.links:
            linked.setdefault(t, []).append(s)
        out = list(phrase_src)
        for t, srcs in linked.items():
            out[t] = sorted(srcs)
        return out

    # --- lattices ------------------------------------------------------------------------
    def lattice(self, triple: Triple, reference: Sequence[str] | None = None) -> Lattice:
        return self.lattices([triple], None if reference is None else [reference])[0]

    def lattices(self, triples: Sequence[Triple],
                 references: Sequence[Sequence[str] | None] | None = None) -> list[Lattice]:
        """Lattices of many triples at once: the Python work is per token (GEN, cached), the feature
        values are computed with numpy over every candidate of the batch together."""
        refs = references if references is not None else [None] * len(triples)
        sents = [self._sentence(t, r) for t, r in zip(triples, refs)]
        flat = [c for s in sents for cs in s.cands for c in cs]
        per_pos = np.fromiter((len(cs) for s in sents for cs in s.cands), dtype=np.int64)
        n_pos = np.fromiter((len(s.cands) for s in sents), dtype=np.int64, count=len(sents))
        U = np.zeros((len(flat), len(self.names)))
        if flat:
            self._features(U, sents, flat, per_pos, n_pos)
        lms = self._lm_batch([s.cands for s in sents])
        # each candidate's (position in its sentence, index at its position)
        P = np.repeat(np.arange(len(per_pos)) - np.repeat(np.cumsum(n_pos) - n_pos, n_pos), per_pos)
        J = np.arange(len(flat)) - np.repeat(np.cumsum(per_pos) - per_pos, per_pos)
        out = []
        c0 = 0
        for s, lm in zip(sents, lms):
            K = max((len(c) for c in s.cands), default=1)
            sl = slice(c0, c0 + sum(len(c) for c in s.cands))
            unary = np.zeros((len(s.cands), K, len(self.names)))
            valid = np.zeros((len(s.cands), K), dtype=bool)
            unary[P[sl], J[sl]] = U[sl]
            valid[P[sl], J[sl]] = True
            c0 = sl.stop
            out.append(Lattice(cands=s.cands, unary=unary, lm=lm, valid=valid, gold=s.gold,
                               gen_misses=s.gen_misses))
        return out

    def _sentence(self, triple: Triple, reference: Sequence[str] | None) -> _Sentence:
        """Per-sentence work: alignment, GEN, and the sentence-level facts the features need."""
        target, source = triple.target, triple.source
        n = len(target)
        aligned = self.aligned_sources(triple) if source else [[] for _ in range(n)]
        spans = source_spans(source, target) if source and "src_span" in self.index else [None] * n
        cands: list[list[str]] = []
        misses = 0
        for i, tok in enumerate(target):
            if aligned[i] or spans[i]:
                forms = tuple(source[k] for k in aligned[i]) + ((spans[i],) if spans[i] else ())
                c = list(self._gen_source(tok, forms))
            else:
                c = list(self._gen_plain(tok))
            if reference is not None and reference[i] not in c:
                misses += 1
                if casing.is_recasing_of(reference[i], tok):
                    c.append(reference[i])
            cands.append(c)
        gold = None
        if reference is not None:
            gold = np.array([cs.index(r) if r in cs else 0 for cs, r in zip(cands, reference)], dtype=np.int64)
        punct = [-1] * n
        for i in range(1, n):
            if is_punctuation(target[i - 1]):
                punct[i] = self.index.get("punct=" + target[i - 1], self.index.get(OTHER_PUNCT, -1))
        sent = _Sentence(cands=cands, aligned=aligned, spans=spans, gold=gold, punct=punct,
                         first=first_letter_position(target), gen_misses=misses)
        if source:
            src_pos = casing.positional(source)
            sent.src_words = {casing.strip_diacritics(w) for k, w in enumerate(source)
                              if k not in src_pos or _telling_case(w)}
            sent.headline, sent.title = source_flags(source)
            # a source word capitalized by its position says nothing about case: look it up as the
            # table knows it (the tables skip positional words too)
            sent.src_keys = [self._source_key(w) if k in src_pos else w for k, w in enumerate(source)]
            sent.target = [casing.lower(t) for t in target]
        return sent

    def _features(self, U: np.ndarray, sents: list[_Sentence], flat: list[str], per_pos: np.ndarray,
                  n_pos: np.ndarray) -> None:
        """Unary feature values of every candidate of the batch (rows of U, in order)."""
        idx = self.index
        G = np.repeat(np.arange(len(per_pos)), per_pos)  # global position of each candidate
        S = np.repeat(np.arange(len(sents)), n_pos)[G]  # sentence of each candidate
        pos_start = np.cumsum(n_pos) - n_pos
        P = G - pos_start[S]  # position within its sentence
        info = [self._candidate(c) for c in flat]
        cap = np.fromiter((x[0] for x in info), dtype=bool, count=len(info))
        tags = np.fromiter((x[1] for x in info), dtype=np.int64, count=len(info))
        prior = np.fromiter((x[2] for x in info), dtype=np.float64, count=len(info))
        short = np.fromiter((x[4] for x in info), dtype=bool, count=len(info))
        not_an = tags != int(Tag.AN)

        def put(name: str, mask: np.ndarray, value: np.ndarray | float = 1.0) -> None:
            col = idx.get(name)
            if col is not None and mask.any():
                U[mask, col] = value if np.isscalar(value) else value[mask]  # type: ignore[index]

        if self._prior is not None:
            put("case_prior", np.ones(len(info), dtype=bool), prior)
        first = np.fromiter((s.first for s in sents), dtype=np.int64, count=len(sents))
        put("initial", cap & (P == first[S]))
        pc = np.fromiter((p for s in sents for p in s.punct), dtype=np.int64, count=len(per_pos))[G]
        m = cap & (pc >= 0)
        U[np.nonzero(m)[0], pc[m]] = 1.0
        put("unseen_form", not_an & np.fromiter((x[3] for x in info), dtype=bool, count=len(info)))
        bil = np.fromiter((s.src_keys is not None for s in sents), dtype=bool, count=len(sents))
        if not bil.any():
            return
        on = bil[S]
        s_list = S.tolist()
        ident = on & not_an & np.fromiter(
            (s is not None and x[5] in s for x, s in zip(info, (sents[k].src_words for k in s_list))),
            dtype=bool, count=len(info))
        put("src_identical", ident)
        put("src_identical:rare", ident & (prior < RARE_PRIOR))
        spans = [sp for s in sents for sp in s.spans]
        if any(spans):
            g_list = G.tolist()
            put("src_span", np.fromiter((spans[g] == c for g, c in zip(g_list, flat)), dtype=bool, count=len(flat)))
        hl = np.fromiter((s.headline for s in sents), dtype=bool, count=len(sents))[S]
        tc = np.fromiter((s.title for s in sents), dtype=bool, count=len(sents))[S]
        iu, au = tags == int(Tag.IU), tags == int(Tag.AU)
        put("hl:IU", hl & iu & ~short)
        put("hl:IU:short", hl & iu & short)
        put("hl:AU", hl & au)
        put("tc:IU", tc & iu & ~short)
        put("tc:IU:short", tc & iu & short)
        self._bilingual(U, sents, info, per_pos, tags)

    def _bilingual(self, U: np.ndarray, sents: list[_Sentence], info: list[tuple], per_pos: np.ndarray,
                   tags: np.ndarray) -> None:
        """cap_t1 (eq. 7), cap_tag_t1 (eq. 8) and upper_translation of every candidate with aligned words."""
        cols = [self.index.get(x) for x in ("cap_t1", "cap_tag_t1", "upper_translation")]
        if all(c is None for c in cols):
            return
        cased, lower = self.tables.cased, self.tables.lower
        # one row per (position, aligned source word)
        pair_pos: list[int] = []
        pair_keys: list[str] = []
        g = 0
        for s in sents:
            if s.src_keys is not None:
                keys = s.src_keys
                for i, al in enumerate(s.aligned):
                    for k in al:
                        pair_pos.append(g + i)
                        pair_keys.append(keys[k])
            g += len(s.cands)
        if not pair_pos:
            return
        targets = [t for s in sents for t in (s.target or [""] * len(s.cands))]
        pp = np.array(pair_pos, dtype=np.int64)
        src = [self._source_facts(f) for f in pair_keys]
        f_cased = np.fromiter((x[0] for x in src), dtype=np.int64, count=len(src))
        f_lower = np.fromiter((x[1] for x in src), dtype=np.int64, count=len(src))
        f_tag = np.fromiter((x[2] for x in src), dtype=np.int64, count=len(src))
        f_cased_word = np.fromiter((x[3] for x in src), dtype=bool, count=len(src))
        f_upper = np.fromiter((x[4] for x in src), dtype=bool, count=len(src))
        e_lower = np.fromiter((lower.tgt_ids.get(targets[p], -1) for p in pair_pos), dtype=np.int64, count=len(pp))
        lex = lower.probs(f_lower, e_lower)
        # upper_translation: every cased aligned word is upper, and at least one is cased
        n_pos = len(per_pos)
        any_cased = np.bincount(pp, weights=f_cased_word, minlength=n_pos) > 0
        not_upper = np.bincount(pp, weights=f_cased_word & ~f_upper, minlength=n_pos) > 0
        src_upper = any_cased & ~not_upper
        # expand every pair over its position's candidates
        cstart = np.cumsum(per_pos) - per_pos
        reps = per_pos[pp]
        pair = np.repeat(np.arange(len(pp)), reps)
        cand = cstart[pp][pair] + (np.arange(len(pair)) - np.repeat(np.cumsum(reps) - reps, reps))
        e_cased = np.fromiter((x[6] for x in info), dtype=np.int64, count=len(info))
        p_cased = cased.probs(f_cased[pair], e_cased[cand])
        p_tag = lex[pair] * self._tag_probs[f_tag[pair], tags[cand]]
        has = np.zeros(len(info), dtype=bool)
        has[cand] = True
        with np.errstate(divide="ignore"):
            if cols[0] is not None:
                U[has, cols[0]] = np.log(np.bincount(cand, weights=p_cased, minlength=len(info))[has])
            if cols[1] is not None:
                U[has, cols[1]] = np.log(np.bincount(cand, weights=p_tag, minlength=len(info))[has])
        if cols[2] is not None:
            G = np.repeat(np.arange(n_pos), per_pos)
            upper = np.fromiter((x[7] for x in info), dtype=bool, count=len(info))
            U[has & upper & src_upper[G], cols[2]] = 1.0

    @lru_cache(maxsize=1 << 17)  # noqa: B019 - per extractor, kept for its life
    def _candidate(self, c: str) -> tuple[bool, int, float, bool, bool, str, int, bool]:
        """Candidate-only facts: capitalized, tag, case prior, unseen, short, without diacritics,
        id in the cased table's targets (-1: none), all upper."""
        prior = self._prior.log_prob(c) if self._prior is not None else 0.0
        return (casing.is_capitalized(c), int(casing.tag(c)), prior, c not in self.form_set,
                len(c) <= 3 or sum(map(str.isalpha, c)) <= 3, casing.strip_diacritics(c),
                self.tables.cased.tgt_ids.get(c, -1), is_upper_word(c))

    @lru_cache(maxsize=1 << 17)  # noqa: B019
    def _source_facts(self, f: str) -> tuple[int, int, int, bool, bool]:
        """Source-word facts: cased id, lowercase id (-1: none), tag, has case, all upper."""
        t = casing.tag(f)
        return (self.tables.cased.src_ids.get(f, -1), self.tables.lower.src_ids.get(casing.lower(f), -1), int(t),
                t is not Tag.AN, is_upper_word(f))

    @lru_cache(maxsize=1 << 17)  # noqa: B019
    def _gen_source(self, tok: str, src_forms: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(gen(tok, self.forms.get(casing.lower(tok), ()), src_forms, self.max_candidates))

    def _source_key(self, word: str) -> str:
        ids = self.tables.cased.src_ids
        if word in ids:
            return word
        low = casing.lower_all(word)
        return low if low in ids else word

    def _lm_batch(self, cands: list[list[list[str]]]) -> list[np.ndarray]:
        from .lmquery import ArrayLM, batch_lattice_scores

        if isinstance(self.lm, ArrayLM):
            return batch_lattice_scores(self.lm, cands)
        return [self._kenlm_scores(c, max((len(x) for x in c), default=1)) for c in cands]

    def _kenlm_scores(self, cands: list[list[str]], K: int) -> np.ndarray:
        """The LM scores of one lattice through kenlm states, one query per triple (a binary LM given
        with ``--lm`` has no query arrays)."""
        import kenlm

        model = self.lm
        n = len(cands)
        out = np.zeros((n + 1, K, K, K))
        cache = self._lm_cache
        bos = kenlm.State()
        model.BeginSentenceWrite(bos)  # type: ignore[attr-defined]
        padded: list[list[str]] = [["<s>"], ["<s>"]] + cands + [["</s>"]]
        for i in range(n + 1):
            hist2, hist1, words = padded[i], padded[i + 1], padded[i + 2]
            for a, wa in enumerate(hist2):
                for b, wb in enumerate(hist1):
                    state = None
                    for c, wc in enumerate(words):
                        key = (wa, wb, wc)
                        v = cache.get(key)
                        if v is None:
                            if state is None:
                                state = self._context(wa, wb, bos)
                            out_state = kenlm.State()
                            v = model.BaseScore(state, wc, out_state)  # type: ignore[attr-defined]
                            cache[key] = v
                        out[i, a, b, c] = v
        if len(cache) > 2_000_000:
            cache.clear()
        return out

    def _context(self, wa: str, wb: str, bos: object) -> object:
        import kenlm

        model = self.lm
        if wb == "<s>":
            return bos
        s1, s2 = kenlm.State(), kenlm.State()
        if wa == "<s>":
            model.BaseScore(bos, wb, s2)  # type: ignore[attr-defined]
            return s2
        model.NullContextWrite(s1)  # type: ignore[attr-defined]
        mid = kenlm.State()
        model.BaseScore(s1, wa, mid)  # type: ignore[attr-defined]
        model.BaseScore(mid, wb, s2)  # type: ignore[attr-defined]
        return s2


def _telling_case(word: str) -> bool:
    """Case that position does not explain: mixed (``Hans-Peter``) or all upper with >= 2 letters."""
    t = casing.tag(word)
    return t is Tag.MX or (t is Tag.AU and sum(c.isalpha() for c in word) >= 2)


class CasePrior:
    """log p(E | lower(E)) from non-initial training counts, backed off to p(tag | 3-letter suffix)."""

    BETA = 1.0

    def __init__(self, tables: Tables) -> None:
        f = tables.forms
        counts = (f.count - f.initial).tolist()
        self.form = dict(zip(f.vocab, counts))
        self.lower: dict[str, int] = {}
        suffix: dict[str, np.ndarray] = {}
        for form, c in zip(f.vocab, counts):
            low = casing.lower(form)
            self.lower[low] = self.lower.get(low, 0) + c
            if c and casing.has_letter(form):
                suffix.setdefault(low[-3:], np.zeros(len(Tag)))[int(casing.tag(form))] += c
        self.suffix = {k: (v + 1.0) / (v.sum() + len(Tag)) for k, v in suffix.items()}
        self.uniform = np.full(len(Tag), 1.0 / len(Tag))

    @lru_cache(maxsize=1 << 18)  # noqa: B019 - one prior per loaded model, kept for its life
    def log_prob(self, form: str) -> float:
        low = casing.lower(form)
        q = float(self.suffix.get(low[-3:], self.uniform)[int(casing.tag(form))])
        return math.log((self.form.get(form, 0) + self.BETA * q) / (self.lower.get(low, 0) + self.BETA))


def feature_names(feature_set: str, punctuation: Sequence[str]) -> list[str]:
    names = list(PAPER_FEATURES) + ["punct=" + p for p in punctuation] + [OTHER_PUNCT]
    if feature_set == "full":
        names += EXTRA_FEATURES
    return names
