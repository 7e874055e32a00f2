"""moses-recaser: bilingual CRF recasing of machine-translation output (Wang, Knight & Marcu 2006).

    >>> from moses_recaser import Recaser
    >>> r = Recaser.load("model/")                                      # doctest: +SKIP
    >>> r.recase("the united states .", source="les États-Unis .", alignment="0-0 1-1 1-2 2-3")  # doctest: +SKIP
    'The United States .'

``Recaser`` and ``train`` load numpy and the model code when first used, so that ``import moses_recaser``
stays cheap (and the command line can set up BLAS threads before numpy loads).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from moses_recaser._version import __version__
from moses_recaser.core.triples import Triple
from moses_recaser.io.errors import RecaserError

# the public names and the module of each, imported when first used
_LAZY = {
    **dict.fromkeys(
        (
            "RunOptions",
            "TrainedModel",
            "align",
            "count_shard",
            "make_lm",
            "make_triples",
            "merge_shards",
            "phrase_align",
            "phrase_lengths",
            "statistics",
            "train",
        ),
        "moses_recaser.api",
    ),
    **dict.fromkeys(
        ("RecaseStep", "TrainStep", "check_config", "recase_step", "train_step", "write_config", "write_meta"),
        "moses_recaser.ems.steps",
    ),
    **dict.fromkeys(("Bitext", "DecoderOutput"), "moses_recaser.model.data"),
    "Recaser": "moses_recaser.model.recaser",
    "StatsSettings": "moses_recaser.stats.build",
    "experiment": "moses_recaser.harness.experiment",
    "evaluate_files": "moses_recaser.harness.metrics",
    "read_lines": "moses_recaser.io.lines",
    # the settings and their choices (registries by name: the command lines' choices and defaults)
    **dict.fromkeys(("DEV_SIZE", "FEATURE_SETS", "INPUT_CASES", "TrainSettings"), "moses_recaser.model.settings"),
    "DEFAULT_MEMORY": "moses_recaser.core.memory",
    "FORMATS": "moses_recaser.moses.formats",
    "SYMMETRIZATIONS": "moses_recaser.stats.symal",
    "TraceOptions": "moses_recaser.moses.trace",
    "tokenize_file": "moses_recaser.moses.tokenizer",
}
__all__ = [
    "Bitext",
    "DEFAULT_MEMORY",
    "DEV_SIZE",
    "DecoderOutput",
    "FEATURE_SETS",
    "FORMATS",
    "INPUT_CASES",
    "RecaseStep",
    "Recaser",
    "RecaserError",
    "RunOptions",
    "SYMMETRIZATIONS",
    "StatsSettings",
    "TraceOptions",
    "TrainSettings",
    "TrainStep",
    "TrainedModel",
    "Triple",
    "__version__",
    "align",
    "check_config",
    "count_shard",
    "evaluate_files",
    "experiment",
    "make_lm",
    "make_triples",
    "merge_shards",
    "phrase_align",
    "phrase_lengths",
    "read_lines",
    "recase_step",
    "statistics",
    "tokenize_file",
    "train",
    "train_step",
    "write_config",
    "write_meta",
]

if TYPE_CHECKING:
    from moses_recaser.api import (
        RunOptions,
        TrainedModel,
        align,
        count_shard,
        make_lm,
        make_triples,
        merge_shards,
        phrase_align,
        phrase_lengths,
        statistics,
        train,
    )
    from moses_recaser.core.memory import DEFAULT_MEMORY
    from moses_recaser.ems.steps import (
        RecaseStep,
        TrainStep,
        check_config,
        recase_step,
        train_step,
        write_config,
        write_meta,
    )
    from moses_recaser.harness.experiment import experiment
    from moses_recaser.harness.metrics import evaluate_files
    from moses_recaser.io.lines import read_lines
    from moses_recaser.model.data import Bitext, DecoderOutput
    from moses_recaser.model.recaser import Recaser
    from moses_recaser.model.settings import DEV_SIZE, FEATURE_SETS, INPUT_CASES, TrainSettings
    from moses_recaser.moses.formats import FORMATS
    from moses_recaser.moses.tokenizer import tokenize_file
    from moses_recaser.moses.trace import TraceOptions
    from moses_recaser.stats.build import StatsSettings
    from moses_recaser.stats.symal import SYMMETRIZATIONS


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'moses_recaser' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
