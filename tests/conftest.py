"""Shared fixtures: paths to shipped data, and undoing the Moses regression-test filters."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
TRACES = DATA / "moses-traces"

_ONE_BEST = re.compile(r"TRANSLATION_(\d+)=(.*)$")
_NBEST = re.compile(r"TRANSLATION_(\d+)_NBEST_(\d+)=(.*)$")


def regtest_to_moses(truth: Path) -> tuple[list[str], list[str]]:
    """Rebuild the decoder's raw 1-best and n-best lines from a regression test's truth file.

    The test harness wrote stdout line k as ``TRANSLATION_k=<line>`` and split n-best lines on
    ``\\s*|||\\s*`` before rejoining them with `` ||| ``, dropping the hypothesis' trailing space;
    Moses itself prints ``id ||| hyp  ||| ...`` (word, space, then `` |||``).
    """
    one_best: list[str] = []
    nbest: list[str] = []
    for line in truth.read_text(encoding="utf-8").splitlines():
        m = _NBEST.match(line)
        if m:
            hyp, *rest = m.group(3).split(" ||| ")
            nbest.append(" ||| ".join([m.group(1), hyp + " "] + rest))
            continue
        m = _ONE_BEST.match(line)
        if m:
            one_best.append(m.group(2))
    return one_best, nbest


@pytest.fixture
def data_dir() -> Path:
    return DATA


TICO = Path(__file__).parents[1] / "data" / "tico19"


@pytest.fixture(scope="session")
def tico(tmp_path_factory):
    """A small bilingual model trained on shipped TICO-19 fr-en data, and tokenized slices around it.

    Train: lines 1-700, dev: 701-800, test: 1951-2100 (the demo's test lines).
    """
    from moses_recaser import train
    from moses_recaser.moses.tokenizer import tokenizer

    d = tmp_path_factory.mktemp("tico")
    sides = {}
    for lang in ("fr", "en"):
        tok = tokenizer(lang)
        lines = [" ".join(tok(x)) for x in (TICO / f"tico19-test.{lang}").read_text(encoding="utf-8").splitlines()]
        sides[lang] = lines
        for name, part in (("train", lines[:700]), ("dev", lines[700:800]), ("test", lines[1950:])):
            (d / f"{name}.{lang}").write_text("".join(x + "\n" for x in part), encoding="utf-8")
    (d / "test.lc.en").write_text((d / "test.en").read_text(encoding="utf-8").lower(), encoding="utf-8")
    train(d / "train.fr", d / "train.en", d / "model", dev_source=d / "dev.fr", dev_target=d / "dev.en", max_iter=60)
    return d


# Moses' own scripts and metas (../shared/moses beside the project): the tests that drive them skip without it,
# and CI (MOSES_RECASER_REQUIRE_SHARED=1) fails instead
SHARED = Path(__file__).resolve().parents[2] / "shared" / "moses"


def need_shared() -> None:
    if not list(SHARED.glob("mosesdecoder-*.tar.xz")):
        reason = f"needs Moses' own scripts: {SHARED} (../shared/moses beside the project) is missing"
        if os.environ.get("MOSES_RECASER_REQUIRE_SHARED") == "1":
            pytest.fail(reason + "; MOSES_RECASER_REQUIRE_SHARED=1 makes that a failure")
        pytest.skip(reason)
