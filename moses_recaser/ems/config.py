"""Read, check and amend a Moses EMS config the way ``experiment.perl`` (``read_config``) reads it.

``merge`` turns a working EMS config into one that recases with moses-recaser, in one of two layouts
(``LAYOUTS``): a truecasing config keeps its truecasing and the recaser takes detruecase.perl's place; a
lowercasing one (or any, with ``lowercase``) runs the recaser in recase.perl's place. It enables
``[RECASING]``, sets what the patched meta's steps read, names the cased target-language text the
recaser's training reads as ``-mono``, and (``stock_set``) adds an evaluation set that restores case on the
same test set as stock Moses does in that layout. Every line it does not change stays as it was; a changed
line is kept, commented out, above its replacement. ``check`` names what keeps a config from running the
recaser in its layout.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from moses_recaser.ems.file_lines import join_config, logical_lines, split_lines
from moses_recaser.io.errors import RecaserError
from moses_recaser.model.settings import DEV_SIZE

# experiment.perl's read_config
_SECTION = re.compile(r"^\[(.+)\]")
_PARAM = re.compile(r"^(\S+) = (.+)$", re.A)
_BLANKS = re.compile(r"\s+", re.A)
LOWERCASER = "$moses-script-dir/tokenizer/lowercase.perl"
DETRUECASER = "$moses-script-dir/recaser/detruecase.perl"
TRUECASING = ("input-truecaser", "output-truecaser", "detruecaser")
MARK = "# moses-recaser-ems config: "
# [LM] set settings whose tokenized-corpus is not the set's own cased target text
_NOT_OWN_TEXT = ("parallel-corpus-stem", "concatenate-files", "concatenate-files-split", "bilingual-lm")
_OWN_TEXT = ("raw-corpus", "tokenized-corpus", "get-corpus-script")
_VARIABLE = re.compile(r"\$\{([a-z][a-z\-:\d]*)\}|\$([a-z][a-z\-:\d]*)", re.I | re.A)  # read_config's


@dataclass(frozen=True)
class Placement:
    """How a config restores case, and the recaser in it: ``step`` is the patched meta's step that runs it,
    in place of ``replaces``; ``settings``, added to ``recasing-settings``, fit its weights for what it reads;
    ``stock``, the ``stock-recaser`` of a ``--stock-set`` set, is what stock Moses runs in its place."""

    name: str
    step: str
    replaces: str
    settings: str
    stock: str


LAYOUTS = {
    "truecase": Placement(
        "truecase",
        "recase-truecased-output",
        "detruecase-output (detruecase.perl)",
        "-input-case cased",
        "$detruecaser",
    ),
    "lowercase": Placement(
        "lowercase", "recase-output", "recase-output (recase.perl)", "", "$moses-script-dir/recaser/recase.perl"
    ),
}


@dataclass
class Param:
    section: str  # as written: GENERAL, EVALUATION, EVALUATION:newstest2014 ...
    key: str
    value: str
    start: int  # physical lines [start, end)
    end: int


@dataclass
class Section:
    name: str
    ignored: bool  # "[NAME] IGNORE": experiment.perl skips its parameters
    start: int  # the header line
    end: int  # one past its last parameter line (the header's when it has none)


@dataclass
class Config:
    lines: list[str]
    sections: list[Section] = field(default_factory=list)
    params: list[Param] = field(default_factory=list)

    def section(self, name: str) -> Section | None:
        return next((s for s in self.sections if s.name == name), None)

    def get(self, section: str, key: str) -> Param | None:
        """The parameter as set in ``section`` (not backed off), the last one when set twice."""
        found = [p for p in self.params if p.section == section and p.key == key]
        return found[-1] if found else None

    def lookup(self, section: str, key: str) -> str | None:
        """experiment.perl's backoff: the set's own section, its module's, then [GENERAL]."""
        module = section.split(":")[0]
        for name in dict.fromkeys((section, module, "GENERAL")):
            s = self.section(name)
            p = self.get(name, key)
            if p is not None and s is not None and not s.ignored:
                return p.value
        return None

    def sets(self, module: str) -> list[str]:
        return [s.name for s in self.sections if s.name.startswith(module + ":") and not s.ignored]


def read_config(text: str) -> Config:
    cfg = Config(lines=split_lines(text))
    section = Section("GENERAL", ignored=False, start=-1, end=0)
    cfg.sections.append(section)
    for start, i, line in logical_lines(cfg.lines, join_config):
        m = _SECTION.match(line)
        if m:
            if not any(p.section == "GENERAL" for p in cfg.params) and cfg.sections[0].start < 0:
                cfg.sections.pop(0)  # no parameters before the first header: [GENERAL] is a header of its own
            section = Section(
                m.group(1), ignored=bool(re.search("ignore", line, re.I | re.A)), start=start, end=start + 1
            )
            cfg.sections.append(section)
            continue
        p = _PARAM.match(line)
        if p is not None:
            value = _BLANKS.sub(" ", p.group(2)).strip(" ")
            if value.startswith('"') and value.endswith('"') and len(value) > 1:
                value = value[1:-1]
            cfg.params.append(Param(section.name, p.group(1), value, start, i))
            section.end = i
    return cfg


@dataclass
class Merged:
    text: str
    notes: list[str]


class _Editor:
    """Line edits of a config, applied at the end so that line numbers stay those of the original."""

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.replaced: dict[int, tuple[int, list[str]]] = {}
        self.appended: dict[int, list[str]] = {}  # after line (index) -> lines
        self.trailing: dict[str, list[str]] = {}  # sections added at the end -> their lines

    def set(self, section: str, key: str, value: str, why: str) -> None:
        """``key = value`` in ``section``: replaces the line that sets it there, else is added to the section
        (the section is added at the end of the file when missing)."""
        line = f"{key} = {value}\n"
        p = self.cfg.get(section, key)
        if p is not None:
            if p.value == value.strip('"'):
                return
            old = [MARK + f"was: {x}" for x in self.cfg.lines[p.start : p.end]]
            self.replaced[p.start] = (p.end, [*old, line])
            return
        s = self.cfg.section(section)
        if s is None:  # a section the config lacks: added at the end, once
            self.trailing.setdefault(section, []).extend([f"# {why}\n" if why else "", line])
            return
        self.appended.setdefault(s.end - 1, []).append(line)

    def comment_out(self, p: Param, why: str) -> None:
        self.replaced[p.start] = (p.end, [MARK + why + "\n"] + [f"#{x}" for x in self.cfg.lines[p.start : p.end]])

    def enable(self, section: Section) -> None:
        self.replaced[section.start] = (section.start + 1, [f"[{section.name}]\n"])

    def text(self) -> str:
        out, i = [], 0
        lines = self.cfg.lines
        while i < len(lines):
            if i in self.replaced:
                end, new = self.replaced[i]
                out += new
                for k in range(i, end):
                    out += self.appended.get(k, [])
                i = end
                continue
            out.append(lines[i] if lines[i].endswith("\n") else lines[i] + "\n")
            out += self.appended.get(i, [])
            i += 1
        for section, added in self.trailing.items():
            out += [f"\n[{section}]\n", *added]
        return "".join(out)


def layout_of(cfg: Config) -> Placement | None:
    """The config's layout: truecase when it sets output-truecaser (EMS then runs detruecase-output, never
    recase-output), lowercase when it sets output-lowercaser, None when its decoder writes cased text."""
    if cfg.lookup("GENERAL", "output-truecaser") is not None:
        return LAYOUTS["truecase"]
    if cfg.lookup("GENERAL", "output-lowercaser") is not None:
        return LAYOUTS["lowercase"]
    return None


def merge(text: str, ems_command: str, stock_set: bool = False, lowercase: bool = False) -> Merged:
    """The config with the bilingual recaser in its layout (see the module docstring); ``lowercase`` switches a
    truecasing (or cased) config to lowercasing first. ``ems_command``: how EMS's step scripts call
    moses-recaser-ems (an absolute path, so that they find it whatever their PATH)."""
    cfg = read_config(text)
    _check_is_config(cfg)
    chart = _chart_param(cfg)
    if chart is not None:
        raise RecaserError(CHART_DECODING, line=chart.start + 1)
    layout = LAYOUTS["lowercase"] if lowercase else layout_of(cfg)
    if layout is None:
        raise RecaserError(
            "this config neither truecases (output-truecaser) nor lowercases (output-lowercaser): its decoder "
            "writes cased text; give `lowercase` to switch it to lowercasing and the recaser"
        )
    ed = _Editor(cfg)
    notes = _to_lowercasing(cfg, ed) if layout.name == "lowercase" else [_kept_truecasing(cfg, layout)]
    recasing = cfg.section("RECASING")
    if recasing is not None and recasing.ignored:
        ed.enable(recasing)
        notes.append("[RECASING]: enabled (it was IGNORE)")
    ed.set("RECASING", "recaser-train", f'"{ems_command} train"', "moses-recaser: the recaser's training step")
    ed.set("RECASING", "recasing-settings", _recasing_settings(cfg, layout), "")
    if cfg.lookup("RECASING", "decoder") is None:
        ed.set("RECASING", "decoder", "$moses-bin-dir/moses", "")
    ed.set("EVALUATION", "recaser", f'"{ems_command} recase"', "moses-recaser: the recaser of every evaluation set")
    for key in TRACE_SETTINGS:
        ed.set("EVALUATION", key, "yes", "")
    notes.append(
        "[RECASING] recaser-train, recasing-settings; [EVALUATION] recaser, report-segmentation, "
        "report-precision-by-coverage: set (the decoder writes -t markers and word links, the recaser "
        "reads them)"
    )
    notes += _trace_in_every_set(cfg, ed)
    notes += _recaser_in_every_set(cfg, ed, ems_command)
    notes.append(_mono_text(cfg, ed))
    # a stock set an earlier merge added is kept in step with the layout (its stock recaser switched with it)
    if stock_set or any(cfg.get(name, "stock-recaser") is not None for name in cfg.sets("EVALUATION")):
        notes += _stock_set(cfg, ed, layout)
    merged = ed.text()
    return Merged(merged, notes + check(read_config(merged)))


def _chart_param(cfg: Config) -> Param | None:
    """[TRAINING] hierarchical-rule-set where it makes experiment.perl decode with moses_chart: read as its
    ``get`` reads it (that section alone, not IGNOREd; the first word, ``$variables`` resolved), true in Perl's
    sense (not "" or "0")."""
    p, section = cfg.get("TRAINING", "hierarchical-rule-set"), cfg.section("TRAINING")
    if p is None or section is None or section.ignored:
        return None
    words = resolve(cfg, "TRAINING", p.value).split()
    return p if words and words[0] != "0" else None


CHART_DECODING = (
    "[TRAINING] hierarchical-rule-set: EMS decodes this config with moses_chart, whose output has no -t phrase "
    "markers and whose word alignment counts <s> and </s>; moses-recaser reads phrase-based decoder output only: "
    "keep detruecase.perl for this config"
)


# what makes EMS's decode step write the -t markers and the word links (.wa) the recaser reads
TRACE_SETTINGS = ("report-segmentation", "report-precision-by-coverage")


def _trace_in_every_set(cfg: Config, ed: _Editor) -> list[str]:
    """TRACE_SETTINGS set to yes in each evaluation set that turns one off itself: a set's own value wins over
    [EVALUATION]'s (experiment.perl's backoff), and its recaser would get no phrases and no links."""
    notes = []
    for name in cfg.sets("EVALUATION"):
        for key in TRACE_SETTINGS:
            p = cfg.get(name, key)
            if p is not None and p.value != "yes":
                ed.set(name, key, "yes", "")
                notes.append(f"[{name}] {key}: set to yes (was {p.value!r}, which overrides [EVALUATION]'s)")
    return notes


def _recaser_in_every_set(cfg: Config, ed: _Editor, ems_command: str) -> list[str]:
    """``recaser`` set to ours in each evaluation set that sets another itself (a set's own value wins over
    [EVALUATION]'s): EMS would run that one, recase.perl say, with the recaser's flags. A --stock-set set
    restores case with its stock-recaser and is left as it is."""
    notes = []
    for name in cfg.sets("EVALUATION"):
        p = cfg.get(name, "recaser")
        if p is None or "moses-recaser-ems" in p.value or cfg.get(name, "stock-recaser") is not None:
            continue
        ed.set(name, "recaser", f'"{ems_command} recase"', "")
        notes.append(
            f"[{name}] recaser: set to moses-recaser-ems recase (was {p.value!r}, which overrides [EVALUATION]'s)"
        )
    return notes


def _to_lowercasing(cfg: Config, ed: _Editor) -> list[str]:
    """The lowercase layout: truecasing commented out (with output-truecaser set, EMS runs detruecase-output
    and never recase-output), the lowercasers set where missing."""
    notes = []
    for p in [p for p in cfg.params if p.key in TRUECASING]:
        ed.comment_out(p, "truecasing off (--lowercase): the recaser restores case from lowercased output")
        notes.append(f"[{p.section}] {p.key}: commented out (--lowercase: the system translates lowercased text)")
    for key in ("input-lowercaser", "output-lowercaser"):
        if cfg.lookup("GENERAL", key) is None:
            ed.set("GENERAL", key, LOWERCASER, "")
            notes.append(f"[GENERAL] {key} = {LOWERCASER}: the system translates lowercased text")
    return notes


def _kept_truecasing(cfg: Config, layout: Placement) -> str:
    kept = [k for k in TRUECASING if cfg.lookup("GENERAL", k) is not None]
    return (
        f"[GENERAL] {', '.join(kept)}: kept; the recaser runs in place of {layout.replaces}, as {layout.step}, "
        "reading the truecased output (--lowercase switches to lowercasing instead)"
    )


def _recasing_settings(cfg: Config, layout: Placement) -> str:
    """The layout's recasing-settings: ours (they hold -dev-size) kept but for -input-case, which the layout
    decides; anything else (Moses' recasing-settings are train-recaser.perl's) replaced by the defaults."""
    words = (_set_in_section(cfg, "RECASING", "recasing-settings") or "").split()
    if "-dev-size" not in words:
        cores = ["-cores", "$cores"] if cfg.lookup("GENERAL", "cores") else []
        words = ["-dev-size", str(DEV_SIZE), *cores]
    kept, _ = _input_case(words)
    return '"' + " ".join([*kept, *layout.settings.split()]) + '"'


def _input_case(words: list[str]) -> tuple[list[str], str | None]:
    """recasing-settings' words without their ``-input-case VALUE``, and that value (None: not given)."""
    kept, value = [], None
    for k, w in enumerate(words):
        if w == "-input-case":
            value = words[k + 1] if k + 1 < len(words) else ""
        elif k == 0 or words[k - 1] != "-input-case":
            kept.append(w)
    return kept, value


def _set_in_section(cfg: Config, section: str, key: str) -> str | None:
    """A setting as ``section`` sets it, read even where the section is IGNORE (merge enables [RECASING]),
    else backed off as experiment.perl does."""
    p = cfg.get(section, key)
    return p.value if p is not None else cfg.lookup(section, key)


def resolve(cfg: Config, section: str, value: str) -> str:
    """``value`` with its ``$name`` and ``${name}`` replaced as experiment.perl's read_config does (from the set's
    section, its module's, then [GENERAL]; ``$MODULE:name`` from that module); an unknown name stays."""
    for _ in range(100):  # experiment.perl's limit: a circular definition stays unresolved

        def value_of(m: re.Match[str]) -> str:
            where, _, key = (m.group(1) or m.group(2)).rpartition(":")
            return cfg.lookup(where or section, key) or m.group(0)

        resolved = _VARIABLE.sub(value_of, value)
        if resolved == value:
            break
        value = resolved
    return value


def _bitext_targets(cfg: Config) -> set[str]:
    """The target-side files of the [CORPUS] sets, resolved: an LM corpus among them adds no text."""
    return {
        resolve(cfg, s, f"{stem}.$output-extension")
        for s in cfg.sets("CORPUS")
        for stem in (cfg.lookup(s, "raw-stem"), cfg.lookup(s, "tokenized-stem"))
        if stem
    }


def lm_text_sets(cfg: Config) -> tuple[list[str], list[str]]:
    """The [LM] sets whose tokenized-corpus is cased target-language text of their own, and those whose corpus
    is a bitext's target side (no more text, and it holds the lines the recaser's training holds out as dev)."""
    own: list[str] = []
    bitext: list[str] = []
    targets = _bitext_targets(cfg)
    for s in cfg.sets("LM"):
        if not any(cfg.lookup(s, k) for k in _OWN_TEXT) or any(cfg.lookup(s, k) for k in _NOT_OWN_TEXT):
            continue
        corpus = cfg.lookup(s, "raw-corpus") or cfg.lookup(s, "tokenized-corpus")
        (bitext if corpus and resolve(cfg, s, corpus) in targets else own).append(s.split(":", 1)[1])
    return own, bitext


def _mono_text(cfg: Config, ed: _Editor) -> str:
    """[RECASING] tokenized, the text Moses' own recaser trains on and the patched train step reads as -mono:
    the config's own (raw or tokenized, read even where [RECASING] was IGNORE, which merge enables), else the
    first [LM] set's tokenized corpus that is not a bitext's target side, cross-directed as Moses' example
    configs suggest."""
    for key in ("tokenized", "raw"):
        if _set_in_section(cfg, "RECASING", key) is not None:
            return f"[RECASING] {key}: kept; the recaser's training reads it (tokenized) as -mono"
    sets, bitext = lm_text_sets(cfg)
    passed = (
        f"; {', '.join(f'[LM:{b}]' for b in bitext)} passed over: the bitext's target side, which holds the "
        "recaser's held-out dev lines"
        if bitext
        else ""
    )
    if not sets:
        return (
            "no cased target-language text beyond the bitext ([RECASING] raw or tokenized, or an [LM] set's "
            f"corpus): the recaser trains on the bitext alone{passed}"
        )
    ed.set("RECASING", "tokenized", f"[LM:{sets[0]}:tokenized-corpus]", "")
    others = f"; {len(sets) - 1} other LM set(s) not read: -mono takes one" if len(sets) > 1 else ""
    return (
        f"[RECASING] tokenized = [LM:{sets[0]}:tokenized-corpus]: the recaser's training reads the LM corpus "
        f"(cased, tokenized) as -mono{others}{passed}"
    )


def _stock_set(cfg: Config, ed: _Editor, layout: Placement) -> list[str]:
    """A copy of the first evaluation set that restores case as stock Moses does in the layout, with
    ``stock-recaser``: detruecase.perl (the config's own detruecaser) in the truecase layout, recase.perl
    (trained by EMS on the same cased corpus: the patched meta's [RECASING] train-stock) in the lowercase."""
    sets = cfg.sets("EVALUATION")
    if not sets:
        return ["no [EVALUATION:set] to compare the stock recaser on: none added"]
    first = sets[0]
    name = f"{first}-stock"
    stock = layout.stock
    if stock == "$detruecaser" and cfg.lookup("GENERAL", "detruecaser") is None:
        stock = DETRUECASER
    if cfg.section(name) is not None:  # an earlier merge added it: kept, the layout's stock recaser in it
        given = cfg.get(name, "stock-recaser")
        if given is None or given.value.split()[:1] != [stock]:  # the user's own flags after it stay
            ed.set(name, "stock-recaser", stock, "")
        return [f"[{name}]: kept (an earlier merge added it)"]
    lines = [f"# the same test set, its case restored as stock Moses does ({stock})\n"]
    lines += [f"{p.key} = {_quoted(p.value)}\n" for p in cfg.params if p.section == first]
    lines.append(f"stock-recaser = {stock}\n")
    ed.trailing.setdefault(name, []).extend(lines)
    return [f"[{name}]: added, {first} with its case restored by {stock} (stock-recaser)"]


def _quoted(value: str) -> str:
    return f'"{value}"' if " " in value else value


def _check_is_config(cfg: Config) -> None:
    if not cfg.params and all(s.start < 0 for s in cfg.sections):
        raise RecaserError(
            "no sections and no settings: not an EMS config (give a working one, such as Moses' config.toy)", line=1
        )


def check(cfg: Config) -> list[str]:
    """What keeps the config from running moses-recaser in its layout, each with what to change (a file that is no
    EMS config at all is refused as ``merge`` refuses it)."""
    _check_is_config(cfg)
    layout = layout_of(cfg)
    if layout is None:
        problems = [
            "problem: the config neither truecases (output-truecaser) nor lowercases (output-lowercaser), so "
            "its decoder writes cased text and no step restores case (moses-recaser-ems config --merge "
            "--lowercase switches it to lowercasing)"
        ]
    else:
        problems = [f"note: {layout.name} layout: the patched meta runs the recaser as {layout.step}"]
    if _chart_param(cfg) is not None:
        problems.append(f"problem: {CHART_DECODING}")
    recasing = cfg.section("RECASING")
    if recasing is None or recasing.ignored:
        problems.append("problem: [RECASING] is missing or IGNORE: EMS trains no recaser")
    if cfg.lookup("EVALUATION", "recaser") is None and not any(cfg.get(s, "recaser") for s in cfg.sets("EVALUATION")):
        what = "detruecase.perl runs" if layout is LAYOUTS["truecase"] else "EMS recases nothing"
        problems.append(f"problem: no evaluation set sets 'recaser': {what}")
    if cfg.lookup("RECASING", "recaser-train") is None:
        problems.append('problem: [RECASING] recaser-train is not set ("moses-recaser-ems train")')
    if not cfg.sets("EVALUATION"):
        problems.append(
            "problem: no [EVALUATION:set]: EMS decodes no test set, so the recaser is trained but never run"
        )
    for name in cfg.sets("EVALUATION") or ["EVALUATION"]:
        recaser = cfg.lookup(name, "recaser") or ""
        if recaser and "moses-recaser-ems" not in recaser and cfg.get(name, "stock-recaser") is None:
            problems.append(
                f"note: [{name}] recaser is {recaser!r}: the patched meta's steps pass it -trace, -source and "
                "-alignment, which only moses-recaser-ems recase takes (Moses' recase.perl goes in a --stock-set set)"
            )
    problems += _check_settings(cfg, layout)
    if cfg.lookup("TRAINING", "config") is not None and cfg.lookup("TRAINING", "word-alignment") is None:
        problems.append(
            "note: [TRAINING] config is given, so EMS aligns nothing for the system, but the recaser's "
            "training reads TRAINING:word-alignment: set [TRAINING] word-alignment to the alignment of "
            "the run that trained the model (.../model/aligned), else EMS aligns the corpus for the "
            "recaser alone"
        )
    for name in cfg.sets("EVALUATION") or ["EVALUATION"]:
        if name.endswith("-stock") and cfg.get(name, "stock-recaser") is not None:
            continue  # a --stock-set set: restored by stock Moses, which reads no trace
        if cfg.lookup(name, "report-precision-by-coverage") != "yes":
            problems.append(
                f"note: [{name}] without report-precision-by-coverage the decoder writes no word links (.wa): "
                "the recaser uses its phrase spans only"
            )
        if all(cfg.lookup(name, key) != "yes" for key in TRACE_SETTINGS):
            problems.append(
                f"note: [{name}] without report-segmentation the decoder writes no -t markers: the recaser "
                "reads no phrases"
            )
    if all(cfg.lookup("RECASING", k) is None for k in ("raw", "tokenized")):
        problems.append(
            "note: no [RECASING] raw or tokenized: the recaser's training reads no cased target-language text "
            "beyond the bitext (-mono); e.g. tokenized = [LM:set:tokenized-corpus]"
        )
    return problems


def _check_settings(cfg: Config, layout: Placement | None) -> list[str]:
    """recasing-settings against the layout: fitted for the input case the recaser will read."""
    words = (cfg.lookup("RECASING", "recasing-settings") or "").split()
    cased = _input_case(words)[1] == "cased"
    if layout is LAYOUTS["truecase"] and not cased:
        return [
            "note: recasing-settings lack -input-case cased: the recaser's weights are fitted for lowercased "
            "input, and it reads truecased output here"
        ]
    if layout is LAYOUTS["lowercase"] and cased:
        return ["note: recasing-settings hold -input-case cased, but the recaser reads lowercased output here: drop it"]
    return []
