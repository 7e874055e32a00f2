"""The table aligner of recasing (``stats.table_align``): against a slow reference written from its docstring, the
same links in any batch, and near eflomal's on real text."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from moses_recaser.core import casing
from moses_recaser.moses.pharaoh import parse_links
from moses_recaser.stats import table_align
from moses_recaser.stats.symal import symmetrize
from moses_recaser.stats.table_align import TableAligner, log_normaliser
from moses_recaser.stats.tables import Tables


@pytest.fixture(scope="module")
def tables(tico) -> Tables:
    return Tables.load(tico / "model")


@pytest.fixture(scope="module")
def test_set(tico) -> tuple[list[list[str]], list[list[str]]]:
    def read(name):
        return [x.split(" ") if x else [] for x in (tico / name).read_text(encoding="utf-8").splitlines()]

    return read("test.fr"), read("test.lc.en")


def reference_links(tables: Tables, src: list[str], tgt: list[str], method: str) -> list[tuple[int, int]]:
    """One pair, word by word and sum by sum, as the module docstring says."""
    t = tables.lower
    n_links = float(t.tgt_count.sum())

    def count(f: str, e: str) -> float:
        return float(t.count(f, e))

    def total(side: str, w: str) -> float:
        vocab, counts = (t.src_vocab, t.src_total) if side == "src" else (t.tgt_vocab, t.tgt_count)
        i = vocab.get(w)
        return float(counts[i]) if i >= 0 else 0.0

    def p0(side: str, w: str) -> float:
        return (total(side, w) + 1.0) / (n_links + len(t.src_vocab if side == "src" else t.tgt_vocab) + 1)

    def known(side: str, w: str) -> bool:
        return (t.src_vocab if side == "src" else t.tgt_vocab).get(w) >= 0

    F, E = [casing.lower(w) for w in src], [casing.lower(w) for w in tgt]

    def picks(side: str) -> list[int]:
        words, others = (E, F) if side == "tgt" else (F, E)
        other = "src" if side == "tgt" else "tgt"
        out = []
        for j, w in enumerate(words):
            n, m = len(words), len(others)
            z = sum(math.exp(-table_align.TENSION * abs(i / m - (j + 1) / n)) for i in range(1, m + 1))
            best, arg = -math.inf, -1
            for i, o in enumerate(others):
                c = count(o, w) if side == "tgt" else count(w, o)
                p = (c + p0(side, w)) / (total(other, o) + 1.0)
                if w == o and any(ch.isalnum() for ch in w) and not (known(side, w) and known(other, o)):
                    p = max(p, table_align.SAME_SPELLING)
                s = math.log(p) - table_align.TENSION * abs((i + 1) / m - (j + 1) / n) - math.log(z)
                s += math.log(1 - table_align.P_NULL)
                if s > best:
                    best, arg = s, i
            null = math.log(table_align.P_NULL) + math.log(p0(side, w))
            out.append(arg if best > null else -1)
        return out

    b = [(s, j) for j, s in enumerate(picks("tgt")) if s >= 0]
    a = [(i, s) for i, s in enumerate(picks("src")) if s >= 0]
    return symmetrize(a, b, method)


def test_the_links_are_the_slow_reference_s(tables, test_set):
    src, tgt = test_set
    aligner = TableAligner(tables.lower)
    got = aligner.align(src[:60], tgt[:60])
    assert got == [reference_links(tables, s, t, "grow-diag-final-and") for s, t in zip(src[:60], tgt[:60])]
    assert sum(map(len, got)) > 0.8 * sum(map(len, tgt[:60]))


@given(st.integers(1, 200), st.integers(1, 200), st.data())
def test_the_normaliser_in_closed_form_is_the_sum(m, n, data):
    j = data.draw(st.integers(1, n))
    direct = math.log(sum(math.exp(-table_align.TENSION * abs(i / m - j / n)) for i in range(1, m + 1)))
    got = float(log_normaliser(np.array([j]), np.array([n]), np.array([m]))[0])
    assert math.isclose(got, direct, rel_tol=1e-12, abs_tol=1e-12)


def test_a_pair_gets_the_same_links_in_any_batch(tables, test_set):
    """Alone, in its batch, in a shuffled batch of other lengths: the same links (every value is its own
    pair's), so recasing gives the same bytes at any --jobs and through any entry."""
    src, tgt = test_set
    aligner = TableAligner(tables.lower)
    whole = aligner.align(src, tgt)
    alone = [aligner.align([s], [t])[0] for s, t in zip(src[:40], tgt[:40])]
    assert alone == whole[:40]
    order = list(range(len(src)))
    random.Random(7).shuffle(order)
    shuffled = aligner.align([src[k] for k in order], [tgt[k] for k in order])
    assert [shuffled[order.index(k)] for k in range(len(src))] == whole


def test_empty_sides_and_names_the_table_never_saw(tables):
    aligner = TableAligner(tables.lower)
    assert aligner.align([[], ["la"], []], [["the"], [], []]) == [[], [], []]
    # a name and a number neither side's table holds are linked to their own spelling, wherever they stand
    links = aligner.align(
        [["Zorglub", "a", "dit", "1234567", "fois", "."]], [["1234567", "times", ",", "zorglub", "said", "."]]
    )
    assert {(0, 3), (3, 0)} <= set(links[0])


def test_the_links_are_near_eflomals_on_the_test_set(tables, tico, test_set):
    """Against eflomal's links of the same sentences (its run over the whole bitext, tests/data/links): the
    alignment error rate with eflomal's links as the reference is far below that of the diagonal alone."""
    src, tgt = test_set
    ref = [parse_links(x) for x in (tico / "test.wa").read_text(encoding="utf-8").splitlines()]

    def aer(hyp):
        both = sum(len(set(a) & set(r)) for a, r in zip(hyp, ref))
        return 1 - 2 * both / (sum(map(len, hyp)) + sum(map(len, ref)))

    diagonal = [[(round(j * len(s) / len(t)), j) for j in range(len(t))] if s and t else [] for s, t in zip(src, tgt)]
    ours = aer(TableAligner(tables.lower).align(src, tgt))
    assert ours < 0.3 and ours < aer(diagonal) - 0.1, (ours, aer(diagonal))


def test_a_pair_too_long_to_align_gets_no_links_and_is_named(tico, caplog):
    """A pair with MAX_TOKENS tokens or more on a side is not aligned (its cells would take memory by the square):
    no links, a warning naming its line, and it is still recased, case only."""
    from moses_recaser import Recaser

    r = Recaser.load(tico / "model")
    long_src, long_hyp = " ".join(["la", "France", "."] * 400), " ".join(["france", "is", "."] * 400)
    assert TableAligner(Tables.load(tico / "model").lower).align([long_src.split()], [long_hyp.split()]) == [[]]
    with caplog.at_level("WARNING"):
        out = list(
            r.recase_lines(
                ["the cat .", long_hyp], ["le chat .", long_src], raw=True, source_lang="fr", target_lang="en"
            )
        )
    said = [x.getMessage() for x in caplog.records if "not aligned" in x.getMessage()]
    assert said == [
        f"sources:2: 1200 source and 1200 target tokens: a pair with {table_align.MAX_TOKENS} tokens or more on a "
        "side is not aligned, and is recased without word links (later such pairs are not named)"
    ]
    assert out[0] == "The cat ." and out[1].lower() == long_hyp
