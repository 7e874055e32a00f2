"""Training settings: every setting that changes a model's output, recorded in the model and its signature.

Kept apart from ``train`` (no numpy at import) so that the command line can show their defaults cheaply.
"""

from __future__ import annotations

import copy
import hashlib
import math
import numbers
import os
from collections.abc import Collection
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from moses_recaser.core.signature import signature
from moses_recaser.io.errors import RecaserError
from moses_recaser.model.gen import MAX_CANDIDATES
from moses_recaser.moses.tokenizer import check_language

# the paper's features, or the paper's and this package's (features.FEATURES rows marked paper=True)
FEATURE_SETS = ("paper", "full")
# sentence pairs held out from the end of the training bitext to fit the weights, when no dev set is given
DEV_SIZE = 2000
SIGMA_RANGE = (1e-6, 1e6)  # the Gaussian prior's sigma: beyond these, 1 / sigma^2 overflows or vanishes in the fit
# times a punctuation token must come before a word (training and dev) to get a feature column of its own
PUNCT_MIN_COUNT = 2
# what the output to recase comes as: "lower" (lowercased, the paper's setting), or "cased" (truecased or cased
# MT output, whose case is then a feature: weights fitted on dev words cased as a truecaser cases them, or as
# the decoder did with --dev-trace; lowercased lines are still recased by the "lower" weights)
INPUT_CASES = ("lower", "cased")
LM_ESTIMATORS = ("kn", "lmplz")
ALIGNMENT_SOURCES = ("files", "eflomal", "files+dev:eflomal")
# set by train from its inputs (the aligner run or not, lmplz given, dev decoder output, the monolingual text's
# contents), not by the caller (they are not arguments of TrainSettings): what the signature says of them is true
DERIVED = ("alignment_source", "lm_estimator", "dev_decoded", "monolingual_digest")
# what a statistics model fixed when it was made (``moses-recaser stats``/``merge``): train cannot change them
STATS_SETTINGS = ("lm", "lm_order", "lm_prune", "discount_fallback", "lmplz_options")


@dataclass
class TrainSettings:
    """Every setting that changes the model's output; recorded in the model and its signature."""

    lm_order: int = 3
    lm: str | None = None
    symmetrization: str = "grow-diag-final-and"
    feature_set: str = "full"
    # what the translation features of input with phrases and word links read: "links" (a word's links, its
    # phrase where it has none) or "phrase" (its whole phrase, as the paper)
    alignment_mode: str = "links"
    sigma: float = 1.0
    sigma_grid: tuple[float, ...] = ()  # when set, sigma is picked by 2-fold cross-validation on dev
    # each weight's prior scaled by its feature's typical size (crf.feature_scale), not one sigma for all
    feature_scaling: bool = False
    max_iter: int = 200
    max_candidates: int = MAX_CANDIDATES
    npa_seed: int = 0
    npa_lengths: dict[int, float] | None = None
    heldout_sentences: int = 0
    heldout_folds: int = 2
    punct_min_count: int = PUNCT_MIN_COUNT
    discount_fallback: bool = True
    # highest-order n-grams seen at most this often are left out of the LM, as lmplz --prune 0 0 N
    # (train-recaser.perl's LM: 1); 0: none
    lm_prune: int = 0
    lm_estimator: str = field(default="kn", init=False)  # "kn": ours; "lmplz": KenLM's (RunOptions.lmplz)
    lmplz_options: str = ""
    alignment_source: str = field(default="files", init=False)  # or "eflomal", or "files+dev:eflomal" (dev only)
    # cased, tokenized target-language text without a source: its sentences join the LM and the
    # target-side counts (case prior, training forms), not the translation tables
    monolingual: list[str] = field(default_factory=list)
    monolingual_digest: str | None = field(default=None, init=False)  # sha256 of their contents, set when read
    dev_decoded: bool = field(default=False, init=False)  # the weights were fitted on decoder output for dev
    input_case: str = "lower"  # INPUT_CASES
    # the languages (ISO 639-1) of the training text, so that raw text to recase is tokenized as it was (None:
    # not said; raw text then needs them at recasing)
    source_lang: str | None = None
    target_lang: str | None = None

    @classmethod
    def recorded(cls, doc: dict[str, Any]) -> TrainSettings:
        """The settings a model records (its manifest's): the derived ones set too. Unknown names: TypeError."""
        derived = {k: doc[k] for k in DERIVED if k in doc}
        return cls(**{k: v for k, v in doc.items() if k not in derived}).changed(**derived)

    def changed(self, **values: Any) -> TrainSettings:
        """A copy with these settings changed, DERIVED ones too (``dataclasses.replace`` would reset those)."""
        new = copy.copy(self)
        for name, value in values.items():
            if not hasattr(new, name):
                raise TypeError(f"TrainSettings has no setting {name!r}")
            setattr(new, name, value)
        return new

    def check(self) -> None:
        from moses_recaser.stats.symal import SYMMETRIZATIONS

        self._check_types()
        for name, allowed in (
            ("feature_set", FEATURE_SETS),
            ("input_case", INPUT_CASES),
            ("alignment_mode", ("phrase", "links")),
            ("symmetrization", SYMMETRIZATIONS),
            ("lm_estimator", LM_ESTIMATORS),
            ("alignment_source", ALIGNMENT_SOURCES),
        ):
            if getattr(self, name) not in allowed:
                raise RecaserError(f"`{name}` is {getattr(self, name)!r}; choose one of {', '.join(allowed)}")
        for name in ("source_lang", "target_lang"):
            check_language(name, getattr(self, name))
        for name, sigma in (("sigma", self.sigma), *(("sigma_grid", x) for x in self.sigma_grid)):
            # NaN would pass 'sigma <= 0' and leave weights unfitted; past the bounds, the prior's 1 / sigma^2
            # overflows or vanishes in the middle of the fit
            if not (math.isfinite(sigma) and SIGMA_RANGE[0] <= sigma <= SIGMA_RANGE[1]):
                raise RecaserError(
                    f"`{name}` must be a positive number from {SIGMA_RANGE[0]:g} to {SIGMA_RANGE[1]:g} (the "
                    f"default sigma is 1), got {sigma}"
                )
        for name, least, what in (
            ("heldout_folds", 2, "statistics from the other folds"),
            ("heldout_sentences", 0, "0: none held out"),
            ("punct_min_count", 1, "times a punctuation token comes before a word"),
            ("max_candidates", 1, "GEN's forms of a word"),
            ("max_iter", 0, "L-BFGS iterations"),
            ("lm_prune", 0, "0: no pruning"),
            ("npa_seed", 0, "the naive phrase aligner's seed"),
        ):
            if getattr(self, name) < least:
                raise RecaserError(f"`{name}` must be at least {least} ({what}), not {getattr(self, name)}")
        if self.npa_lengths is not None and not (
            all(k >= 1 and v >= 0 and math.isfinite(v) for k, v in self.npa_lengths.items())
            and sum(self.npa_lengths.values()) > 0
        ):
            raise RecaserError(
                f"npa_lengths maps phrase lengths (1 or more) to weights (0 or more, not all 0), not "
                f"{self.npa_lengths!r}"[:300]
            )
        from moses_recaser.stats.counter import check_lm_order  # numpy: not at the CLI's start

        check_lm_order(self.lm_order)

    def _check_types(self) -> None:
        """Each number a number, each flag a bool, each name a str, as a library caller may give them from a
        config ('3' for 3): refused by name now, not a TypeError in the middle of training. numpy's numbers are
        taken as Python's."""
        kinds = {
            "int": (numbers.Integral,),
            "float": (numbers.Real,),
            "bool": (bool,),
            "str": (str,),
            "str | None": (str, type(None)),
            "list[str]": (list, tuple),  # a str would be read a character a file
            "tuple[float, ...]": (list, tuple),
            "dict[int, float] | None": (dict, type(None)),
        }
        for f in fields(self):
            want = kinds.get(str(f.type))
            value = getattr(self, f.name)
            if want is None or (isinstance(value, want) and not (isinstance(value, bool) and bool not in want)):
                if str(f.type) in ("int", "float"):  # numpy's numbers as Python's: the manifest is YAML
                    setattr(self, f.name, int(value) if str(f.type) == "int" else float(value))
                elif isinstance(value, (list, tuple, dict)):
                    setattr(self, f.name, _items(f.name, value))
                continue
            kind = {
                "int": "a whole number",
                "float": "a number",
                "bool": "True or False",
                "list[str]": "a list",
                "tuple[float, ...]": "a list of numbers",
                "dict[int, float] | None": "a dict of phrase lengths to weights",
            }.get(str(f.type), "a str")
            raise RecaserError(f"setting `{f.name}` must be {kind}, not {value!r}"[:300])

    def signature(self, weights: Any = None) -> str:
        """The settings as one string; with ``weights`` (a numpy array), a hash of them too."""
        lm = f"file:{Path(self.lm).name}" if self.lm else f"{self.lm_estimator}{self.lm_order}"
        align = self.alignment_source + (f"+{self.symmetrization}" if "eflomal" in self.alignment_source else "")
        parts = [
            ("lm", lm),
            ("align", align),
            ("feat", self.feature_set),
            ("a", self.alignment_mode),
            ("sigma", f"{self.sigma:g}" + ("/scaled" if self.feature_scaling else "")),
            ("gen", str(self.max_candidates)),
            ("npa", str(self.npa_seed)),
        ]
        if self.heldout_sentences:
            parts.append(("heldout", f"{self.heldout_sentences}x{self.heldout_folds}"))
        if self.lm_prune:  # shown when pruning, so unpruned signatures stay as they were
            parts.append(("prune", str(self.lm_prune)))
        if self.punct_min_count != PUNCT_MIN_COUNT:  # shown when not the default, so default signatures stay
            parts.append(("punct", str(self.punct_min_count)))
        if self.monolingual_digest:
            parts.append(("mono", self.monolingual_digest[:8]))
        if self.dev_decoded:
            parts.append(("dev", "decoded"))
        if self.input_case != "lower":
            parts.append(("in", self.input_case))
        if self.source_lang or self.target_lang:  # shown when said, so signatures without them stay
            parts.append(("lang", f"{self.source_lang or '?'}-{self.target_lang or '?'}"))
        if weights is not None:
            parts.append(("w", weights_digest(weights)))
        return signature(*parts)


def _items(name: str, value: list | tuple | dict) -> Any:
    """A list, tuple or dict setting with each item of its kind: monolingual's file names (a path is taken as its
    str), sigma_grid's numbers, npa_lengths' lengths and weights."""

    def refuse(item: object, kind: str) -> RecaserError:
        return RecaserError(f"setting `{name}` holds {item!r}, not {kind}"[:300])

    def number(x: object, whole: bool) -> float:
        if isinstance(x, numbers.Integral) and not isinstance(x, bool):
            return int(x)
        if isinstance(x, numbers.Real) and not whole:
            return float(x)
        raise refuse(x, "a whole number" if whole else "a number")

    if name == "monolingual":
        if not all(isinstance(m, (str, os.PathLike)) for m in value):
            raise refuse(next(m for m in value if not isinstance(m, (str, os.PathLike))), "a file name")
        return [os.fspath(m) for m in value]
    if name == "sigma_grid":
        return tuple(number(x, False) for x in value)
    if name == "npa_lengths" and isinstance(value, dict):
        return {int(number(k, True)): number(v, False) for k, v in value.items()}
    return value


def weights_digest(weights: Any) -> str:
    """The signature's ``w:`` part: a hash of the weight matrix (a numpy array), as stored in little-endian
    doubles, so that two models' signatures tell whether their weights are the same."""
    return hashlib.sha256(weights.astype("<f8").tobytes()).hexdigest()[:8]


def check_stats_fixed(settings: TrainSettings, given: Collection[str] = (), lmplz: str | None = None) -> None:
    """For training with a statistics model: the settings it fixed (STATS_SETTINGS) that ``settings`` changes, or
    that the caller names as ``given`` (at any value: ``lm_order=3`` on an order-4 model would go unused), and
    ``lmplz``, are refused."""
    default = TrainSettings()
    named = [n for n in STATS_SETTINGS if n in given or getattr(settings, n) != getattr(default, n)]
    # (a switch on by default is turned off as --no-NAME)
    fixed = [f"`no_{n}`" if getattr(settings, n) is False else f"`{n}`" for n in named]
    fixed += ["`lmplz`"] if lmplz is not None else []
    if fixed:
        raise RecaserError(
            f"{', '.join(fixed)} cannot be combined with `stats`: the statistics model's LM is final (set "
            "them when it is made, with moses-recaser stats or merge)"
        )
