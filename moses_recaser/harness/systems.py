"""The capitalizers experiments compare, by name: one row each in ``SYSTEMS``.

A system is built from what an experiment trained (``Trained``: the model directory and the target
text), and recases batches of triples (``Capitalizer``). Configs name systems from this registry, and
an unknown name is refused when the config is read. A new baseline is a class in ``baselines`` and a
row here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol

from moses_recaser.core.triples import Triple


class Capitalizer(Protocol):
    """Recases lowercased triples; ``signature`` records every setting that changes its output."""

    signature: str

    def recase_triples(self, triples: Sequence[Triple]) -> Iterable[list[str]]: ...


class Trained:
    """What the systems of one experiment are built from, each built once and shared (the CRF with and
    without the source is one model, sacremoses with and without the copy rule one truecaser)."""

    def __init__(self, model: Path, target_text: Sequence[Path]) -> None:
        self.model = model
        self.target_text = list(target_text)  # the text sacremoses trains on (training target, monolingual)

    @cached_property
    def recaser(self) -> Any:
        from moses_recaser.model.recaser import Recaser

        return Recaser(self.model)

    @cached_property
    def truecaser(self) -> Any:
        from moses_recaser.harness.baselines import MosesTruecaserBaseline
        from moses_recaser.io.lines import read_lines

        return MosesTruecaserBaseline(x.split() for p in self.target_text for x in read_lines(p))


class WithoutSource:
    """A capitalizer given the target alone (the CRF then uses its monolingual weights)."""

    def __init__(self, inner: Capitalizer) -> None:
        self.inner = inner
        self.signature = f"{inner.signature}|mode:monolingual"

    def recase_triples(self, triples: Sequence[Triple]) -> list[list[str]]:
        return list(self.inner.recase_triples([Triple(t.id, [], t.target) for t in triples]))


@dataclass(frozen=True)
class System:
    name: str
    description: str
    build: Callable[[Trained], Capitalizer]
    reads_source: bool = False  # it needs the source and an alignment to it


def _unigram(t: Trained) -> Capitalizer:
    from moses_recaser.harness.baselines import UnigramRecaser

    return UnigramRecaser(t.model)


def _trigram(t: Trained) -> Capitalizer:
    from moses_recaser.harness.baselines import TrigramRecaser

    return TrigramRecaser(t.model)


def _copy(t: Trained) -> Capitalizer:
    from moses_recaser.harness.baselines import CopySourceBaseline

    return CopySourceBaseline(t.truecaser)


SYSTEMS: dict[str, System] = {
    s.name: s
    for s in (
        System(
            "unigram", "each word's most frequent training form, the first word capitalized (paper section 2)", _unigram
        ),
        System(
            "trigram",
            "exact Viterbi over GEN with the cased LM alone, then the first word capitalized (Lita et al. "
            "2003, the paper's strong baseline)",
            _trigram,
        ),
        System(
            "sacremoses",
            "sacremoses' MosesTruecaser trained on the target text, then Moses' detruecase rule",
            lambda t: t.truecaser,
        ),
        System(
            "sacremoses+copy",
            "sacremoses, then every word equal to a source word not capitalized by its position takes that word's case",
            _copy,
            reads_source=True,
        ),
        System(
            "crf-monolingual",
            "the CRF without the source (its monolingual weights)",
            lambda t: WithoutSource(t.recaser),
        ),
        System("crf", "the bilingual CRF (this package's recaser)", lambda t: t.recaser, reads_source=True),
    )
}


def build(names: Sequence[str], trained: Trained) -> dict[str, Capitalizer]:
    """The named systems, built from one experiment's model and text."""
    return {name: SYSTEMS[name].build(trained) for name in names}
