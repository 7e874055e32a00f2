"""Modified Kneser-Ney estimation: parity with KenLM's lmplz, queried through kenlm."""

from __future__ import annotations

import io
import lzma
import re

import kenlm
import pytest
from conftest import DATA

from moses_recaser.io.errors import RecaserError
from moses_recaser.io.lines import read_lines
from moses_recaser.stats.build import lm_from_text
from moses_recaser.stats.in_memory import count_text
from moses_recaser.stats.kneser_ney import estimate

LMPLZ = DATA / "lmplz"


def _load_arpa(text: str) -> dict[str, tuple[float, float | None]]:
    out: dict[str, tuple[float, float | None]] = {}
    order = 0
    for line in text.splitlines():
        m = re.fullmatch(r"\\(\d+)-grams:", line)
        if m:
            order = int(m.group(1))
            continue
        if not order or not line or line.startswith("\\"):
            continue
        parts = line.split("\t")
        out[parts[1]] = (float(parts[0]), float(parts[2]) if len(parts) > 2 else None)
    return out


@pytest.fixture(scope="module")
def corpus() -> list[list[str]]:
    return list(lm_from_text(str(LMPLZ / "corpus.tok.en.xz")))


def _our_arpa(corpus, order: int, prune: int = 0) -> str:
    buf = io.StringIO()
    estimate(count_text(corpus, order), buf, prune=prune)
    return buf.getvalue()


def _assert_same_arpa(ours: dict, gold: dict) -> None:
    """The same n-grams, each probability and backoff within 1e-4 of lmplz's (a backoff where lmplz has one)."""
    assert set(ours) == set(gold)
    for ngram, (lp, bo) in gold.items():
        our_lp, our_bo = ours[ngram]
        assert abs(our_lp - lp) <= 1e-4, ngram
        assert (bo is None) == (our_bo is None), ngram
        if bo is not None:
            assert abs(our_bo - bo) <= 1e-4, ngram


@pytest.mark.parametrize("order", [3, 5])
def test_every_ngram_prob_and_backoff_match_lmplz(corpus, order):
    ours = _load_arpa(_our_arpa(corpus, order))
    with lzma.open(LMPLZ / f"order{order}.arpa.xz", "rt", encoding="utf-8") as fh:
        gold = _load_arpa(fh.read())
    _assert_same_arpa(ours, gold)


def test_pruned_model_matches_lmplz(corpus):
    """``lmplz -o 3 --prune 0 0 1`` (train-recaser.perl's LM): the same singleton trigrams left out, the same
    probabilities and backoffs (the pruned mass in the contexts' backoffs), the same discounts (counted before
    pruning, as lmplz counts them)."""
    ours = _load_arpa(_our_arpa(corpus, 3, prune=1))
    with lzma.open(LMPLZ / "order3.prune001.arpa.xz", "rt", encoding="utf-8") as fh:
        gold_text = fh.read()
    gold = _load_arpa(gold_text)
    _assert_same_arpa(ours, gold)
    header = [line for line in _our_arpa(corpus, 3, prune=1).splitlines()[:4]]
    assert header == gold_text.splitlines()[:4]  # \data\ and the n-gram counts, 4,259 trigrams kept
    log = (LMPLZ / "lmplz.order3.prune001.log").read_text()
    expected = [tuple(float(x) for x in m) for m in re.findall(r"D1=(\S+) D2=(\S+) D3\+=(\S+)", log)]
    got = estimate(count_text(corpus, 3), io.StringIO(), prune=1).discounts
    for g, want in zip(got, expected):
        assert g == pytest.approx(want, abs=1e-5)


def test_pruned_model_perplexity_matches_lmplz(corpus, tmp_path):
    """KenLM's query over the pruned model gives lmplz's pruned model's perplexity on held-out text."""
    arpa = tmp_path / "lm.arpa"
    arpa.write_text(_our_arpa(corpus, 3, prune=1), encoding="utf-8")
    model = kenlm.Model(str(arpa))
    scores = [s for line in read_lines(LMPLZ / "heldout.tok.en") for s in model.full_scores(line)]
    total = sum(lp for lp, _, _ in scores)
    assert 10 ** (-total / len(scores)) == pytest.approx(508.5355758737878, rel=1e-6)


def test_pruning_threshold_must_be_a_count(corpus):
    with pytest.raises(RecaserError, match="pruning threshold"):
        estimate(count_text(corpus[:50], 3), io.StringIO(), prune=-1)


@pytest.mark.parametrize("order", [3, 5])
def test_discounts_match_lmplz_log(corpus, order):
    log = (LMPLZ / f"lmplz.order{order}.log").read_text()
    expected = [tuple(float(x) for x in m) for m in re.findall(r"D1=(\S+) D2=(\S+) D3\+=(\S+)", log)]
    model = estimate(count_text(corpus, order), io.StringIO())
    assert len(expected) == order
    for got, want in zip(model.discounts, expected):
        assert got == pytest.approx(want, abs=1e-5)


@pytest.mark.parametrize(
    "order,ppl,ppl_no_oov",
    [
        (3, 508.5909811720616, 289.22158153616516),
        (5, 506.5950025672769, 288.2388130075475),
    ],
)
def test_kenlm_perplexity_matches_reference(corpus, tmp_path, order, ppl, ppl_no_oov):
    arpa = tmp_path / "lm.arpa"
    arpa.write_text(_our_arpa(corpus, order), encoding="utf-8")
    model = kenlm.Model(str(arpa))
    total = total_in = 0.0
    n = n_in = oov = 0
    for line in read_lines(LMPLZ / "heldout.tok.en"):
        for logprob, _, is_oov in model.full_scores(line):
            total += logprob
            n += 1
            if is_oov:
                oov += 1
            else:
                total_in += logprob
                n_in += 1
    assert oov == 644 and n == 6515  # words and </s>, as KenLM query counts them
    assert 10 ** (-total / n) == pytest.approx(ppl, rel=1e-6)
    assert 10 ** (-total_in / n_in) == pytest.approx(ppl_no_oov, rel=1e-6)


def test_tiny_corpus_needs_fallback():
    sents = [["a", "b"], ["a", "c"]]
    with pytest.raises(RecaserError, match="`discount_fallback`"):
        estimate(count_text(sents, 2), io.StringIO())
    model = estimate(count_text(sents, 2), io.StringIO(), discount_fallback=True)
    assert model.discounts[0] == (0.5, 1.0, 1.5)


def test_hand_computed_unigram_model():
    # corpus "a a b": unigram adjusted counts are raw counts at the top order (1)
    buf = io.StringIO()
    estimate(count_text([["a", "a", "b"]], 1), buf, discount_fallback=True)
    probs = {k: 10 ** v[0] for k, v in _load_arpa(buf.getvalue()).items()}
    # counts: a=2, b=1, </s>=1; total 4; D1=.5, D2=1; gamma = (.5*2 + 1*1)/4 = .5;
    # uniform over the vocabulary less <s>: <unk>, </s>, a, b
    assert probs["a"] == pytest.approx((2 - 1.0) / 4 + 0.5 / 4)
    assert probs["b"] == pytest.approx((1 - 0.5) / 4 + 0.5 / 4)
    assert probs["<unk>"] == pytest.approx(0.5 / 4)
    assert sum(p for k, p in probs.items() if k != "<s>") == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("cut", "reason"),
    [
        (lambda text: text[: len(text) // 2], r"lm.arpa:\d+: the ARPA file ends before its \\end\\ line"),
        (
            lambda text: re.sub(r"ngram 2=(\d+)", lambda m: f"ngram 2={int(m.group(1)) + 1}", text),
            r"lm.arpa:\d+: the ARPA file's \\data\\ header counts \d+ 2-grams, but it holds",
        ),
        (lambda text: "\n".join(text.splitlines()[1:]), r"lm.arpa:1: not an ARPA file"),
        (lambda text: "\\data\\\n\n\\end\\\n", r"lm.arpa: the ARPA file has no unigrams"),
    ],
)
def test_an_arpa_file_cut_short_or_edited_is_refused(corpus, tmp_path, cut, reason):
    """A given LM (--lm) cut short (a full disk, a copy stopped midway) gave a model without its bigrams and
    trigrams, with exit 0: the file must hold what its \\data\\ header counts and end with \\end\\, as KenLM
    requires, whether it is read into query arrays (train) or stored as it is (stats)."""
    from moses_recaser.stats.arpa_arrays import check_arpa, read_arpa

    text = _our_arpa(corpus, 3)
    whole = tmp_path / "whole.arpa"
    whole.write_text(text, encoding="utf-8")
    check_arpa(str(whole))  # the file as written passes
    arpa = tmp_path / "lm.arpa"
    arpa.write_text(cut(text), encoding="utf-8")
    with pytest.raises(RecaserError, match=reason):
        check_arpa(str(arpa))
    if "not an ARPA" not in reason:
        with pytest.raises(RecaserError, match=reason):
            read_arpa(arpa, _NoWriter())


def test_arpa_files_as_other_tools_write_them_are_taken(corpus, tmp_path):
    """What KenLM reads is taken: compressed (.gz, .xz), white space after a count line, a blank line before
    \\data\\ (SRILM), CRLF line ends; their query arrays are those of the plain file."""
    import gzip

    from moses_recaser.stats.arpa_arrays import check_arpa
    from moses_recaser.stats.build import is_arpa

    text = _our_arpa(corpus, 3)
    variants = {
        "lm.arpa.gz": gzip.compress(text.encode("utf-8")),
        "lm.arpa.xz": lzma.compress(text.encode("utf-8")),
        "spaced.arpa": re.sub(r"(ngram \d+=\d+)", "\\1 \t", text).encode("utf-8"),
        "srilm.arpa": ("\n" + text).encode("utf-8"),
        "crlf.arpa": text.replace("\n", "\r\n").encode("utf-8"),
    }
    for name, data in variants.items():
        (tmp_path / name).write_bytes(data)
        assert is_arpa(tmp_path / name), name
        check_arpa(str(tmp_path / name))


class _NoWriter:
    def add(self, *args: object) -> None:
        pass


def test_reserved_tokens_are_refused():
    with pytest.raises(RecaserError, match="reserved token '<s>'"):
        count_text([["a", "<s>"]], 2)


@pytest.mark.parametrize("order", [3, 5])
def test_array_queries_equal_kenlm_states(corpus, tmp_path, order):
    """log10 p(c | a b) from the array engine equals kenlm's, context built through kenlm states."""
    import numpy as np

    from moses_recaser.stats.arpa_arrays import ArrayLM

    arpa = tmp_path / "lm.arpa"
    arpa.write_text(_our_arpa(corpus, order), encoding="utf-8")
    model = kenlm.Model(str(arpa))
    lm = ArrayLM.from_arpa(arpa)
    lm.save(tmp_path / "lm.npz")
    lm = ArrayLM.load(tmp_path / "lm.npz")
    # the stored "a trigram extends this bigram" flags, against their definition
    contexts = set((lm.trigrams.keys() // lm.V).tolist())
    assert lm.bi_extended.tolist() == [k in contexts for k in lm.bigrams.keys().tolist()]
    assert 0 < lm.bi_extended.sum() < len(lm.bigrams)
    rng = np.random.default_rng(order)
    words = [w for s in corpus[:200] for w in s] + ["UNSEEN-1", "Zzyzx", "</s>"]
    for _ in range(3000):
        a, b, c = (words[int(rng.integers(len(words)))] for _ in range(3))
        if rng.random() < 0.2:
            a = "<s>"
        if a == "<s>" or rng.random() < 0.1:
            state = kenlm.State()
            model.BeginSentenceWrite(state)
            a_id = -1
        else:
            s0, state = kenlm.State(), kenlm.State()
            model.NullContextWrite(s0)
            model.BaseScore(s0, a, state)
            a_id = int(lm.word_ids([a])[0])
        s2, out = kenlm.State(), kenlm.State()
        model.BaseScore(state, b, s2)
        want = model.BaseScore(s2, c, out)
        if a_id == -1:
            a_id = int(lm.word_ids(["<s>"])[0])
        got = lm.score(np.array([a_id]), lm.word_ids([b]), lm.word_ids([c]))[0]
        assert got == pytest.approx(want, abs=1e-5), (a, b, c)


def test_key_set_finds_every_key_and_no_other():
    """Every stored key at its place in the permutation, nothing else found (keys of any width, queries out of
    range included), the keys given back, and the stored form answering the same."""
    import numpy as np
    from hypothesis import example, given, settings
    from hypothesis import strategies as st

    from moses_recaser.core.keyset import KeySet

    @settings(max_examples=300, deadline=None)
    @example(({0, 2**63 - 1}, [2**63 - 1, 2**62, -1]))
    @example((set(), [0, 2**63 - 1]))
    @given(
        st.integers(1, 63).flatmap(
            lambda bits: st.tuples(
                st.sets(st.integers(0, 2**bits - 1), max_size=300),
                st.lists(st.integers(-5, 2**63 - 1) | st.integers(0, min(2**bits + 5, 2**63 - 1)), max_size=50),
            )
        )
    )
    def check(case):
        keys, others = case
        k = np.array(list(keys), dtype=np.int64)
        index, order = KeySet.pack(k)
        assert sorted(order.tolist()) == list(range(len(k)))
        assert index.keys().tolist() == k[order].tolist()
        q = np.array(list(keys) + others, dtype=np.int64)
        pos, found = index.find(q)
        for x, p, f in zip(q.tolist(), pos.tolist(), found.tolist()):
            assert f == (x in keys)
            assert (k[order[p]] == x) if f else p == 0
            assert index.find_one(x) == (p if f else -1)
        again = KeySet.load(index.arrays("k"), "k").find(q)
        assert (again[0] == pos).all() and (again[1] == found).all()

    check()


def test_key_set_packs_large_sets_small():
    """Trigram-like keys (three ids of a 3,000-word vocabulary, leading words shared as in text) cost under 6 bytes
    of bucket starts and low parts a key, where int64 keys alone take 8, and no bucket holds many keys despite the
    shared leading words."""
    import numpy as np

    from moses_recaser.core.keyset import KeySet

    rng = np.random.default_rng(0)
    V, n = 3_000, 200_000
    a = rng.zipf(1.3, n) % V
    keys = np.unique((a * V + rng.integers(0, 50, n)) * V + rng.integers(0, V, n))
    index, _ = KeySet.pack(keys)
    assert (index.starts.nbytes + index.low.nbytes) / len(keys) < 6
    assert np.diff(index.starts.astype(np.int64)).max() <= 20
    assert index.find(keys)[1].all()


def test_a_compressed_lm_goes_into_a_model_as_plain_text(tmp_path):
    """``lm -o lm.arpa.gz`` then ``stats --lm lm.arpa.gz``: the model's lm.arpa held gzip bytes, which KenLM and
    ``--lm MODEL/lm.arpa`` refuse; it holds the text."""
    from moses_recaser.cli.main import main

    for name, text in (("f", "le chat .\n" * 5), ("e", "the cat .\n" * 5), ("a", "0-0 1-1 2-2\n" * 5)):
        (tmp_path / name).write_text(text, encoding="utf-8")
    arpa = tmp_path / "lm.arpa.gz"
    assert main(["-q", "lm", "-i", str(tmp_path / "e"), "-o", str(arpa), "--lm-order", "2"]) == 0
    files = ["--source", str(tmp_path / "f"), "--target", str(tmp_path / "e"), "--alignment", str(tmp_path / "a")]
    assert main(["-q", "stats", *files, "--lm", str(arpa), "-o", str(tmp_path / "m")]) == 0
    assert (tmp_path / "m" / "lm.arpa").read_text(encoding="utf-8") == "\n".join(read_lines(str(arpa))) + "\n"
    assert main(["-q", "stats", *files, "--lm", str(tmp_path / "m" / "lm.arpa"), "-o", str(tmp_path / "m2")]) == 0
