"""Experiment configs (YAML): a typed schema, with errors that name the file, the line and the key.

An unknown key is an error that suggests the closest valid key (``sigmma`` -> ``sigma``), because a
misspelt setting that is silently ignored gives results for a different experiment than the one
the user wrote down.
"""

from __future__ import annotations

import difflib
import logging
import os
from dataclasses import dataclass, field, fields
from typing import Any

import yaml

from moses_recaser.io.errors import RecaserError
from moses_recaser.io.lines import read_text
from moses_recaser.model.settings import TrainSettings

log = logging.getLogger(__name__)


@dataclass
class SplitConfig:
    """Newstest set names (files ``<name>.<lang>`` in the pair's directory), concatenated in order."""

    train: list[str] = field(default_factory=list)
    dev: list[str] = field(default_factory=list)
    test: list[str] = field(default_factory=list)


@dataclass
class ExperimentConfig:
    name: str = "experiment"
    data_root: str | None = None  # default: the shared corpora beside the project; MOSES_RECASER_DATA or --data-root
    corpus: str = "wmt-newstest"  # folder under the data root
    pair: str = "fr-en"  # folder under the corpus
    source: str = "fr"
    target: str = "en"
    source_dir: str | None = None  # multi-parallel sets: the source side from another pair's folder
    target_dir: str | None = None
    pivot: str = "en"  # ... whose sides in this language must match line by line
    splits: SplitConfig = field(default_factory=SplitConfig)
    symmetrization: str = "grow-diag-final-and"
    # the training settings' defaults are TrainSettings' (the command line's)
    lm_order: int = TrainSettings.lm_order
    feature_set: str = TrainSettings.feature_set
    alignment_mode: str = TrainSettings.alignment_mode
    sigma: float = TrainSettings.sigma
    feature_scaling: bool = TrainSettings.feature_scaling
    heldout_sentences: int = TrainSettings.heldout_sentences
    input_case: str = TrainSettings.input_case
    systems: list[str] = field(default_factory=lambda: ["unigram", "trigram", "sacremoses", "crf-monolingual", "crf"])
    learning_curve: list[int] = field(default_factory=list)  # training sizes in target words
    wmt21: str | None = None  # end-to-end BLEU on WMT21 system outputs of this pair (e.g. de-en)
    wmt21_systems: list[str] = field(default_factory=list)  # empty: every system
    # target-language files under the corpus folder (``de-en/newstest2020.de``, slices as in splits) whose
    # text joins the LM and the case prior of every capitalizer (not the translation tables)
    monolingual: list[str] = field(default_factory=list)


# list settings of numbers, from the declarations (the other lists hold names)
_INT_LISTS = tuple(f.name for c in (ExperimentConfig, SplitConfig) for f in fields(c) if f.type == "list[int]")


def _suggest(key: str, valid: list[str]) -> str:
    close = difflib.get_close_matches(key, valid, n=1, cutoff=0.5)
    return f"; did you mean '{close[0]}'?" if close else f"; valid keys: {', '.join(valid)}"


def _check_type(value: Any, default: Any, key: str, path: str, line: int) -> Any:
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise RecaserError(f"'{key}' must be true or false, got {value!r}", path, line)
        return value
    if default is None:
        if value is not None and not isinstance(value, str):
            raise RecaserError(f"'{key}' must be a string", path, line)
        return value
    if isinstance(default, float) and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(default, list):
        if not isinstance(value, list):
            raise RecaserError(f"'{key}' must be a list", path, line)
        item = int if key in _INT_LISTS else str
        for v in value:  # (a bool is an int to Python, not to a config)
            if not isinstance(v, item) or isinstance(v, bool) or (isinstance(v, int) and v < 1):
                what = "positive whole numbers" if item is int else "strings"
                raise RecaserError(f"'{key}' must be a list of {what}, got {v!r} in it", path, line)
        return value
    if not isinstance(value, type(default)) or isinstance(value, bool) != isinstance(default, bool):
        raise RecaserError(f"'{key}' must be a {type(default).__name__}, got {value!r}", path, line)
    return value


# settings that become part of file names in the cache and the results directory: one plain name each
_NAMES = ("name", "source", "target", "pivot", "wmt21")
# settings that name folders and files under the data root: relative ones stay inside it (an absolute path is
# taken as given, on purpose)
_UNDER_ROOT = ("corpus", "pair", "source_dir", "target_dir", "monolingual", "train", "dev", "test")


def _check_path(key: str, value: Any, path: str, line: int) -> None:
    """A setting that names a file cannot lead out of the cache or the data root: ``name: ../../x`` would
    write outside the cache, ``pair: ../../etc`` read outside the data root."""
    for v in value if isinstance(value, list) else [value]:
        if not isinstance(v, str):
            continue
        parts = v.replace("\\", "/").split("/")
        if key in _NAMES and (not v or len(parts) > 1 or v in (".", "..") or "\0" in v):
            raise RecaserError(f"'{key}' must be a plain name (it becomes part of file names), got {v!r}", path, line)
        if key in _UNDER_ROOT and (".." in parts or "\0" in v):
            raise RecaserError(
                f"'{key}' leads out of the data root ({v!r}): give a path inside it without '..', or an absolute path",
                path,
                line,
            )


def _build(cls: type, node: yaml.MappingNode, path: str) -> Any:
    obj = cls()
    valid = [f.name for f in fields(cls)]
    for key_node, value_node in node.value:
        key = key_node.value
        line = key_node.start_mark.line + 1
        if key not in valid:
            raise RecaserError(f"unknown key '{key}'{_suggest(key, valid)}", path, line)
        current = getattr(obj, key)
        if hasattr(current, "__dataclass_fields__"):
            if not isinstance(value_node, yaml.MappingNode):
                raise RecaserError(f"'{key}' must be a mapping", path, line)
            setattr(obj, key, _build(type(current), value_node, path))
            continue
        try:
            value = yaml.safe_load(yaml.serialize(value_node))
        except yaml.YAMLError as exc:  # a value that does not read back as plain YAML (a tag, an empty node)
            problem = getattr(exc, "problem", None) or type(exc).__name__
            raise RecaserError(f"'{key}' has a value that is not plain YAML ({problem})", path, line) from None
        except ValueError as exc:  # a number of thousands of digits (Python's int conversion limit)
            reason = str(exc).split(";")[0]
            raise RecaserError(f"'{key}' has a number too long to read ({reason})", path, line) from None
        setattr(obj, key, _check_type(value, current, key, path, line))
        _check_path(key, value, path, line)
        if key == "systems":
            _check_systems(value_node, path)
    return obj


def _check_systems(node: yaml.Node, path: str) -> None:
    """Every listed system is in the registry (``systems.SYSTEMS``): a misspelt one is refused before any
    stage runs."""
    from moses_recaser.harness.systems import SYSTEMS

    for item in node.value if isinstance(node, yaml.SequenceNode) else ():
        if not isinstance(item, yaml.ScalarNode) or item.value not in SYSTEMS:
            name = getattr(item, "value", item)
            close = difflib.get_close_matches(str(name), list(SYSTEMS), n=1, cutoff=0.5)
            hint = f"; did you mean '{close[0]}'?" if close else f"; choose from {', '.join(SYSTEMS)}"
            raise RecaserError(f"unknown system {name!r}{hint}", path, item.start_mark.line + 1)


def load_config(path: str | os.PathLike[str]) -> ExperimentConfig:
    p = os.fspath(path)
    text = read_text(p)  # (bad UTF-8 named at its line; a file without line ends refused, not read whole)
    try:
        node = yaml.compose(text)
    except RecursionError:
        raise RecaserError("nested too deeply to be a config", p) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise RecaserError(
            f"not valid YAML: {getattr(exc, 'problem', exc)}", p, mark.line + 1 if mark is not None else 1
        ) from None
    if node is None:
        raise RecaserError("empty config", p, 1)
    if not isinstance(node, yaml.MappingNode):
        raise RecaserError("a config must be a YAML mapping of settings", p, node.start_mark.line + 1)
    try:
        cfg = _build(ExperimentConfig, node, p)
    except RecursionError:
        raise RecaserError("nested too deeply to be a config", p) from None
    if cfg.learning_curve and not {"trigram", "crf"} <= set(cfg.systems):
        line = next(k.start_mark.line + 1 for k, _ in node.value if k.value == "learning_curve")
        raise RecaserError("a learning curve compares crf with trigram: list both under 'systems'", p, line)
    return cfg
