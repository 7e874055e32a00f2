"""Input modes: what a sentence to recase comes with, and so which weights score it.

A sentence comes with its cased source or without, and with the decoder's phrase segmentation, its word
links, both, or neither; and its words lowercased, or with the case the MT system gave them (truecased or
cased output: the ``+case`` twin of each mode, in a model trained for it). Each mode has weights of its own
(``Weights``), fitted on dev lattices built from what the mode has (the rest removed from the dev triples,
``Mode.view``), with the features that read what it lacks held at 0. So a model never scores a sentence with
weights fitted for an input it does not have: links-only input does not get weights fitted on phrase pairs,
and a source without an alignment does not get weights that expect translation features.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from moses_recaser.core.triples import Triple
from moses_recaser.io.errors import RecaserError
from moses_recaser.model.features import ALIGNMENT, DECODED, SOURCE, TARGET, columns_reading

CASE_SUFFIX = "+case"


@dataclass(frozen=True)
class Mode:
    name: str
    doc: str
    source: bool  # the sentence has its source ...
    phrases: bool  # ... the decoder's phrase segmentation ...
    links: bool  # ... word links
    cased: bool = False  # its words come with the MT system's case

    @property
    def reads(self) -> frozenset[str]:
        """What the mode's features may read (``features.Feature.reads``)."""
        case = {DECODED} if self.cased else set()
        if not self.source:
            return frozenset({TARGET, *case})
        return frozenset({TARGET, SOURCE, *case} | ({ALIGNMENT} if self.phrases or self.links else set()))

    def view(self, t: Triple) -> Triple:
        """The triple with only what this mode has (dev triples have everything)."""
        if (self.source or not t.source) and (self.phrases or not t.phrases) and (self.links or t.links is None):
            return t  # (as nearly every triple is: its input is its mode's)
        return dataclasses.replace(
            t,
            source=t.source if self.source else [],
            phrases=t.phrases if self.phrases else [],
            links=t.links if self.links else None,
        )


MODES: tuple[Mode, ...] = (
    Mode(
        "both",
        "phrase segmentation and word links: a -t trace with the decoder's word alignment; the "
        "model's alignment_mode says which pairs the translation features read",
        True,
        True,
        True,
    ),
    Mode(
        "phrases",
        "phrase segmentation without word links: a -t trace alone, an n-best list with its segmentation",
        True,
        True,
        False,
    ),
    Mode(
        "links",
        "word links without phrases: --input-alignment, --align, an -alignment-output-file with plain output",
        True,
        False,
        True,
    ),
    Mode("source", "the source without any alignment: --source with --input", True, False, False),
    Mode("mono", "no source: --input alone", False, False, False),
)
# the same, for words that come with the MT system's case (fitted when TrainSettings.input_case is "cased")
CASED_MODES: tuple[Mode, ...] = tuple(
    dataclasses.replace(m, name=m.name + CASE_SUFFIX, doc=m.doc + "; with the output's own case", cased=True)
    for m in MODES
)
ALL_MODES = MODES + CASED_MODES
BY_NAME = {m.name: m for m in ALL_MODES}


def mode_of(t: Triple, prefer: str | None = None, cased: bool = False) -> Mode:
    """The mode of what ``t`` has; ``prefer`` ("phrase" or "links") sets aside the other of the two when a
    triple has both; ``cased``: its twin for words with the MT system's case."""
    suffix = CASE_SUFFIX if cased else ""
    if not t.source:
        return BY_NAME["mono" + suffix]
    phrases, links = bool(t.phrases), bool(t.links)
    if phrases and links and prefer is not None:
        phrases, links = prefer == "phrase", prefer == "links"
    if phrases and links:
        return BY_NAME["both" + suffix]
    return BY_NAME[("phrases" if phrases else "links" if links else "source") + suffix]


@dataclass
class Weights:
    """A weight vector per mode over the same columns; the LM's weight comes first. Every mode of ``MODES`` has
    weights; those of ``CASED_MODES`` too in a model trained for cased input, none otherwise."""

    names: list[str]  # feature columns, without the LM
    by_mode: dict[str, np.ndarray]

    @property
    def modes(self) -> list[str]:
        """The modes with weights, in ``ALL_MODES`` order: the rows of ``matrix``."""
        return [m.name for m in ALL_MODES if m.name in self.by_mode]

    @property
    def cased(self) -> bool:
        """The model has weights for words with the MT system's case."""
        return CASED_MODES[0].name in self.by_mode

    def matrix(self) -> np.ndarray:
        """(modes, 1 + columns), rows in ``modes`` order."""
        return np.stack([self.by_mode[m] for m in self.modes])

    def to_dict(self) -> dict:
        return {
            "names": ["lm"] + self.names,
            "modes": {m: [float(x) for x in self.by_mode[m]] for m in self.modes},
        }

    @classmethod
    def from_dict(cls, doc: dict, where: str) -> Weights:
        try:
            names = [str(x) for x in doc["names"]]
            given = doc["modes"]
            cased = isinstance(given, dict) and CASED_MODES[0].name in given
            by_mode = {m.name: np.array(given[m.name], dtype=np.float64) for m in (ALL_MODES if cased else MODES)}
        except (KeyError, TypeError, ValueError) as exc:
            raise RecaserError(f"the model's weights are malformed (missing or bad {exc})", where) from None
        if names[:1] != ["lm"] or any(w.ndim != 1 or len(w) != len(names) for w in by_mode.values()):
            raise RecaserError("the model's weights do not match its feature names", where)
        return cls(names=names[1:], by_mode=by_mode)


def mask_of(mode: Mode, names: Sequence[str]) -> np.ndarray:
    """The weights a mode fits (the LM's first): the columns whose features read what the mode has."""
    return np.concatenate([[True], columns_reading(names, mode.reads)])
