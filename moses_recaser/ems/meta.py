"""Read and patch Moses EMS ``experiment.meta`` files, the way ``experiment.perl`` (``read_meta``) reads them.

experiment.perl reads a meta line by line: it strips ``#`` and what follows, skips blank lines, joins a
line ending in ``\\`` with the next (``s/\\s*\\\\\\s*[\\n\\r]*\\s+/ /``), then takes ``[SECTION] type`` as a
section, a line starting with a non-blank as a step, and ``  key: value`` as one of the step's attributes.
``read_meta`` does the same and remembers the physical lines of each step, so that ``patch_meta`` can
rewrite the steps it patches and leave every other line of the user's file byte for byte.

What the patch does is declared once, in ``PATCHES``; the steps it adds are in ``recaser.meta`` beside
this module (``moses-recaser-ems meta`` merges them, the file is not a meta of its own).

Which of the steps that write ``recased-output`` runs is decided by experiment.perl's conditions alone
(``ignore-unless``: ignored unless one of the names is set, all of them after ``AND``; ``ignore-if``:
ignored if one is set), so that exactly one runs in each evaluation set:

===================================  ==========================  ===========================
config of the set                    lowercase (no truecaser)    truecase (output-truecaser)
===================================  ==========================  ===========================
no ``recaser``                       recase-output, passed       detruecase-output (stock)
``recaser``                          recase-output               recase-truecased-output
``recaser`` and ``stock-recaser``    recase-output-stock         detruecase-output-stock
===================================  ==========================  ===========================
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources

from moses_recaser.ems.file_lines import join_meta, logical_lines
from moses_recaser.io.errors import RecaserError

# experiment.perl's read_meta, regex by regex
_SECTION = re.compile(r"^\[(.+)\]\s+(\S+)")
_STEP = re.compile(r"^(\S+)")
_ATTR = re.compile(r"^\s+(\S+): (.+\S)\s*$")
# EMS attributes whose values experiment.perl accumulates rather than replaces
_ACCUMULATED = {"rerun-on-change", "pass-unless", "pass-if", "error", "not-error"}


@dataclass
class Step:
    """A step of a meta: its section, name, attributes (as experiment.perl reads them) and physical lines
    ``[start, end)`` of the file, from the step line to its last attribute."""

    section: str
    name: str
    start: int
    end: int
    attrs: dict[str, str] = field(default_factory=dict)

    def names(self, key: str) -> list[str]:
        return self.attrs.get(key, "").split()


@dataclass
class Meta:
    lines: list[str]  # the file's physical lines, with their line ends
    path: str
    sections: dict[str, str] = field(default_factory=dict)  # name -> type (single, multiple, ...)
    steps: list[Step] = field(default_factory=list)

    def find(self, section: str, name: str) -> Step | None:
        return next((s for s in self.steps if (s.section, s.name) == (section, name)), None)

    def uses_optional_variables(self) -> bool:
        """Whether templates use ``$?name`` (empty when unset): experiment.perl reads them from RELEASE-4.0 on,
        and a meta that uses them comes with such an experiment.perl."""
        return any("$?" in s.attrs.get("template", "") for s in self.steps)


def read_meta(text: str, path: str = "experiment.meta") -> Meta:
    meta = Meta(lines=text.splitlines(keepends=True), path=path)
    section: str | None = None
    step: Step | None = None
    for start, i, line in logical_lines(meta.lines, join_meta):
        m = _SECTION.match(line)
        if m:
            section, step = m.group(1), None
            meta.sections[section] = m.group(2)
            continue
        if _STEP.match(line):
            if section is None:
                raise RecaserError(f"step {line.strip()!r} comes before any [SECTION]", path, start + 1)
            step = Step(section=section, name=_STEP.match(line).group(1), start=start, end=i)  # type: ignore[union-attr]
            first = meta.find(section, step.name)
            if first is not None:  # which of the two experiment.perl runs, and which to patch, is anyone's guess
                raise RecaserError(
                    f"step [{section}] {step.name} is defined twice (first at line {first.start + 1}); keep one",
                    path,
                    start + 1,
                )
            meta.steps.append(step)
            continue
        a = _ATTR.match(line)
        if a is not None and step is not None:  # experiment.perl passes over lines of no other form
            key, value = a.group(1), a.group(2)
            step.attrs[key] = f"{step.attrs[key]} {value}" if key in _ACCUMULATED and key in step.attrs else value
            step.end = i
    return meta


def step_text(name: str, attrs: dict[str, str]) -> str:
    """A step block in the meta format."""
    return name + "\n" + "".join(f"\t{k}: {v}\n" for k, v in attrs.items())


@dataclass(frozen=True)
class Patch:
    """One change to a meta's step. ``make`` gives the new step's name and attributes from the user's step
    ``base`` (the step of that name, or ``derive_from``'s) and the overlay's step of that name."""

    section: str
    name: str
    make: Callable[[Step | None, Step | None, Meta], dict[str, str]]
    derive_from: str | None = None  # an added step made from another of the user's steps
    after: str | None = None  # an added step goes after this one (else before ``before``)
    before: str | None = None
    note: str = ""

    @property
    def adds(self) -> bool:
        return self.after is not None or self.before is not None


def _our_attrs(base: Step | None, ours: Step | None, meta: Meta) -> dict[str, str]:
    assert ours is not None
    return dict(ours.attrs)


def _recase_output(base: Step | None, ours: Step | None, meta: Meta) -> dict[str, str]:
    """Ours, reading the output that the user's step reads (RELEASE-2.1: cleaned-output, later releases:
    transliterated-output), with the decoder's settings where experiment.perl can leave them out."""
    assert base is not None and ours is not None
    attrs = dict(ours.attrs)
    attrs["in"] = " ".join([base.names("in")[0]] + ours.names("in")[1:])
    if meta.uses_optional_variables():
        # unquoted, the rest of the line, as experiment.perl gives them to the decoder: quotes in them stay whole
        attrs["template"] = attrs["template"].replace(" > OUT", " -decoder-settings -- $?decoder-settings > OUT")
    return attrs


def _recase_truecased_output(base: Step | None, ours: Step | None, meta: Meta) -> dict[str, str]:
    """recase-output as patched (the same inputs and command), in detruecase-output's place: run where the set
    truecases and sets ``recaser``, not beside ``stock-recaser``."""
    attrs = _recase_output(
        meta.find("EVALUATION", "recase-output"), overlay().find("EVALUATION", "recase-output"), meta
    )
    conditions = {
        "pass-unless": ("ignore-unless", "AND output-truecaser recaser"),
        "ignore-if": ("ignore-if", "stock-recaser"),
    }
    return dict(conditions.get(k, (k, v)) for k, v in attrs.items())


def _train_stock(base: Step | None, ours: Step | None, meta: Meta) -> dict[str, str]:
    """Moses' own train step (train-recaser.perl, with its release's flags) on the cased corpus ours reads, for
    an evaluation set that compares the two (``stock-recaser``)."""
    assert base is not None
    template = re.sub(r"-corpus IN\b", "-corpus IN.$output-extension", base.attrs["template"])
    template = template.replace(" $recasing-settings", "")  # those are moses-recaser's
    attrs = {
        **base.attrs,
        "in": "cased-corpus",
        "out": "stock-recase-config",
        "default-name": "recasing/stock-moses.ini",
        "tmp-name": "recasing/stock-model",
        "template": template,
    }
    attrs.pop("ignore-unless", None)  # needed only when an evaluation set sets stock-recaser
    return attrs


def _recase_output_stock(base: Step | None, ours: Step | None, meta: Meta) -> dict[str, str]:
    assert base is not None
    return {
        "in": f"{base.names('in')[0]} RECASING:stock-recase-config",
        "out": "recased-output",
        "default-name": "evaluation/recased-stock",
        "ignore-unless": "stock-recaser",
        "ignore-if": "output-truecaser",
        "rerun-on-change": "stock-recaser",
        "template": "$stock-recaser -moses $RECASING:decoder -in IN -model IN1 > OUT",
    }


def _with_name_added(attrs: dict[str, str], key: str, name: str) -> dict[str, str]:
    """``attrs`` with ``name`` added to the names of ``key`` (experiment.perl keeps one ``ignore-if`` line)."""
    return {**attrs, key: " ".join(dict.fromkeys([*attrs.get(key, "").split(), name]))}


def _detruecase_output(base: Step | None, ours: Step | None, meta: Meta) -> dict[str, str]:
    """Moses' step, ignored where the recaser takes its place: a config without ``recaser`` runs it as before."""
    assert base is not None
    return _with_name_added(base.attrs, "ignore-if", "recaser")


def _detruecase_output_stock(base: Step | None, ours: Step | None, meta: Meta) -> dict[str, str]:
    """Moses' detruecase step, in truecasing sets that set ``stock-recaser`` (``$detruecaser``, what the set
    would run without the recaser) where ``recaser`` ignores detruecase-output: the truecase layout's
    comparison, beside the recaser's set. Without ``recaser``, detruecase-output runs and this is ignored."""
    assert base is not None
    return {
        "in": base.names("in")[0],
        "out": "recased-output",
        "default-name": base.attrs.get("default-name", "evaluation/truecased"),
        "ignore-unless": "AND output-truecaser recaser stock-recaser",
        "rerun-on-change": "stock-recaser",
        "template": "$stock-recaser < IN > OUT",
    }


def _tokenize_raw(base: Step | None, ours: Step | None, meta: Meta) -> dict[str, str]:
    """Moses' step, ignored without ``raw``: the recaser's training then reads no ``-mono`` text (an empty
    input) instead of tokenizing a file the config does not name."""
    assert base is not None
    return {**base.attrs, "ignore-unless": "raw"}


def _remove_markup(base: Step | None, ours: Step | None, meta: Meta) -> dict[str, str]:
    """Moses' step, also run when report-precision-by-coverage alone makes the decoder write -t markers."""
    assert base is not None
    return {**base.attrs, "pass-unless": "report-segmentation report-precision-by-coverage"}


PATCHES: tuple[Patch, ...] = (
    Patch(
        "RECASING",
        "tokenize",
        _tokenize_raw,
        note="changed: ignored without [RECASING] raw (the recaser's -mono text is then none, or 'tokenized')",
    ),
    Patch(
        "RECASING",
        "consolidate-cased",
        _our_attrs,
        before="train",
        note="added: the cased, cleaned bitext, consolidated from [CORPUS] as the truecaser's",
    ),
    Patch(
        "RECASING",
        "train",
        _our_attrs,
        note="replaced: moses-recaser-ems train on that bitext and TRAINING:word-alignment, with [RECASING] "
        "tokenized (if any) as -mono",
    ),
    Patch(
        "RECASING",
        "train-stock",
        _train_stock,
        derive_from="train",
        after="train",
        note="added: Moses' train-recaser.perl on the same bitext, for a 'stock-recaser' evaluation set",
    ),
    Patch(
        "EVALUATION",
        "remove-markup",
        _remove_markup,
        note="changed: also run with report-precision-by-coverage, which makes the decoder write -t markers",
    ),
    Patch(
        "EVALUATION",
        "recase-output",
        _recase_output,
        note="replaced: the recaser also reads the decoder's -t output, the tokenized input and the .wa file",
    ),
    Patch(
        "EVALUATION",
        "recase-output-stock",
        _recase_output_stock,
        derive_from="recase-output",
        after="recase-output",
        note="added: recase.perl, in evaluation sets that set stock-recaser",
    ),
    Patch(
        "EVALUATION",
        "detruecase-output",
        _detruecase_output,
        note="changed: ignored when recaser is set (truecasing configs without it run it as before)",
    ),
    Patch(
        "EVALUATION",
        "recase-truecased-output",
        _recase_truecased_output,
        derive_from="detruecase-output",
        after="detruecase-output",
        note="added: the recaser in detruecase-output's place, reading what recase-output reads, when both "
        "output-truecaser and recaser are set",
    ),
    Patch(
        "EVALUATION",
        "detruecase-output-stock",
        _detruecase_output_stock,
        derive_from="detruecase-output",
        after="detruecase-output",
        note="added: detruecase.perl, in truecasing evaluation sets that set stock-recaser",
    ),
)


def overlay() -> Meta:
    text = resources.files("moses_recaser.ems").joinpath("recaser.meta").read_text(encoding="utf-8")
    return read_meta(text, "recaser.meta")


@dataclass
class Patched:
    text: str
    notes: list[str]  # what was changed, and what the meta lacks


def patch_meta(text: str, path: str = "experiment.meta") -> Patched:
    """Moses' meta with the recaser's steps (``PATCHES``); every other line as it was."""
    meta, ours = read_meta(text, path), overlay()
    missing = list(
        dict.fromkeys(  # several patches derive from one step: named once
            f"[{p.section}] {p.derive_from or p.name}"
            for p in PATCHES
            if meta.find(p.section, p.derive_from or p.name) is None and (not p.adds or p.derive_from)
        )
    )
    if missing:
        raise RecaserError(
            f"this meta lacks the steps the recaser patches: {', '.join(missing)}; it does not look "
            "like a Moses experiment.meta",
            path,
        )
    replace: dict[int, tuple[int, str]] = {}  # first line -> (end line, new text)
    insert: dict[int, list[str]] = {}  # line -> blocks to insert before it
    notes = []
    for p in PATCHES:
        base = meta.find(p.section, p.derive_from or p.name)
        block = step_text(p.name, p.make(base, ours.find(p.section, p.name), meta))
        if p.adds:
            if meta.find(p.section, p.name) is not None:
                raise RecaserError(f"[{p.section}] {p.name} is there already: this meta was patched before", path)
            anchor = meta.find(p.section, p.after or p.before)  # type: ignore[arg-type]
            assert anchor is not None
            insert.setdefault(anchor.end if p.after else anchor.start, []).append(block)
        else:
            assert base is not None
            replace[base.start] = (base.end, block)
        notes.append(f"[{p.section}] {p.name}: {p.note}")
    if not meta.uses_optional_variables():
        notes.append(
            "this experiment.perl has no optional template variables ($?name, from RELEASE-4.0 on), so an "
            "-alignment-output-file in decoder-settings does not reach the recaser: set "
            "report-precision-by-coverage instead"
        )
    out: list[str] = []
    i = 0
    while i < len(meta.lines):
        out += insert.get(i, [])
        if i in replace:
            end, block = replace[i]
            out.append(block)
            i = end
            continue
        out.append(meta.lines[i])
        i += 1
    out += insert.get(len(meta.lines), [])
    return Patched("".join(out), notes)


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
