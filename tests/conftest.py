"""Shared fixtures: paths to shipped data, and undoing the Moses regression-test filters."""

from __future__ import annotations

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
