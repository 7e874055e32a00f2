"""Read, patch and check EMS ``experiment.meta`` files.

The format: ``[SECTION] single|multiple`` headers; a step is a line at column 0; its attributes
are the indented ``key: value`` lines below it; ``#`` starts a comment. Patching replaces whole
step blocks and keeps every other line of the user's file byte for byte.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from moses_recaser.errors import RecaserError

_SECTION = re.compile(r"\[([A-Z0-9_-]+)\]\s*(single|multiple)?\s*$")
_ATTR = re.compile(r"\s+([a-z][a-z0-9-]*):\s?(.*)$")

# what the overlay replaces (must exist in the user's meta) and what it adds (before "train")
REPLACES = {("RECASING", "train"), ("EVALUATION", "recase-output")}
ADDS = {("RECASING", "consolidate-cased")}


@dataclass
class Step:
    section: str
    name: str
    lines: list[str]  # the block, step line first
    attrs: dict[str, list[str]] = field(default_factory=dict)

    def names(self, key: str) -> list[str]:
        return [n for v in self.attrs.get(key, []) for n in v.split()]


@dataclass
class Meta:
    """A parsed meta file: the lines before the first step of each section, and the steps."""

    chunks: list[tuple[str, object]]  # ("text", str) or ("step", Step), in file order

    @property
    def steps(self) -> list[Step]:
        return [c for kind, c in self.chunks if kind == "step"]  # type: ignore[misc]

    def find(self, section: str, name: str) -> Step | None:
        for s in self.steps:
            if (s.section, s.name) == (section, name):
                return s
        return None

    def text(self) -> str:
        out = []
        for kind, c in self.chunks:
            out.append(c if kind == "text" else "".join(c.lines))  # type: ignore[union-attr]
        return "".join(out)


def parse_meta(text: str, path: str = "<meta>") -> Meta:
    chunks: list[tuple[str, object]] = []
    section = None
    step: Step | None = None
    for lineno, line in enumerate(text.splitlines(keepends=True), 1):
        bare = line.rstrip("\n")
        m = _SECTION.match(bare)
        if m:
            section, step = m.group(1), None
            chunks.append(("text", line))
            continue
        if bare[:1] and not bare[:1].isspace() and not bare.startswith("#"):
            if section is None:
                raise RecaserError(f"step {bare.strip()!r} outside any [SECTION]", path, lineno)
            step = Step(section=section, name=bare.strip(), lines=[line])
            chunks.append(("step", step))
            continue
        if step is not None and bare.strip() and not bare.lstrip().startswith("#"):
            a = _ATTR.match(bare)
            if a is None:
                raise RecaserError(f"cannot read the step attribute {bare.strip()!r}", path, lineno)
            step.attrs.setdefault(a.group(1), []).append(a.group(2))
            step.lines.append(line)
            continue
        if step is not None and not bare.strip():
            # a blank line ends nothing by itself; keep it with the text that follows
            chunks.append(("text", line))
            continue
        if step is not None:
            step.lines.append(line)
        else:
            chunks.append(("text", line))
    return Meta(chunks)


def overlay() -> Meta:
    text = resources.files("moses_recaser.ems").joinpath("recaser.meta").read_text(encoding="utf-8")
    return parse_meta(text, "recaser.meta")


def patch_meta(text: str, path: str = "experiment.meta") -> str:
    """Moses' meta with the recaser's steps in place of [RECASING] train and [EVALUATION] recase-output."""
    meta = parse_meta(text, path)
    ours = overlay()
    missing = [f"[{s}] {n}" for s, n in sorted(REPLACES) if meta.find(s, n) is None]
    if missing:
        raise RecaserError(f"the steps to replace are not in this meta: {', '.join(missing)}", path)
    for step in ours.steps:
        key = (step.section, step.name)
        if key in REPLACES:
            for i, (kind, c) in enumerate(meta.chunks):
                if kind == "step" and (c.section, c.name) == key:  # type: ignore[union-attr]
                    meta.chunks[i] = ("step", step)
        elif key in ADDS and meta.find(*key) is None:
            anchor = meta.find(step.section, "train")
            idx = next(i for i, (k, c) in enumerate(meta.chunks) if c is anchor)
            meta.chunks.insert(idx, ("step", step))
    return meta.text()


def dangling_inputs(meta: Meta, steps: list[Step]) -> list[str]:
    """``in:`` names of ``steps`` that no step of ``meta`` has as ``out:`` (SECTION:name or same section)."""
    outs = {(s.section, n) for s in meta.steps for n in s.names("out")}
    bad = []
    for s in steps:
        for name in s.names("in"):
            for alt in name.split("=OR="):
                sec, _, n = alt.rpartition(":")
                if (sec or s.section, n) in outs:
                    break
            else:
                bad.append(f"[{s.section}] {s.name}: {name}")
    return bad


def patch_meta_file(path: str) -> str:
    """``patch_meta`` of an installed experiment.meta."""
    p = Path(path)
    if not p.is_file():
        raise RecaserError("Moses experiment.meta not found", path)
    return patch_meta(p.read_text(encoding="utf-8"), path)
