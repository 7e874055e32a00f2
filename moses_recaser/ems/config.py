"""Read, check and amend a Moses EMS config the way ``experiment.perl`` (``read_config``) reads it.

``merge`` turns a working EMS config into one that recases with moses-recaser: it switches truecasing to
lowercasing, enables ``[RECASING]`` and sets what the patched meta's steps read, and (``stock_set``)
adds an evaluation set that recases the same test set with Moses' own recaser. Every line it does not
change stays as it was; a changed line is kept, commented out, above its replacement. ``check`` names
what keeps a config from running the recaser.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from moses_recaser.ems.lines import join_config, logical_lines
from moses_recaser.errors import RecaserError
from moses_recaser.model.settings import DEV_SIZE

# experiment.perl's read_config
_SECTION = re.compile(r"^\[(.+)\]")
_PARAM = re.compile(r"^(\S+) = (.+)$")
LOWERCASER = "$moses-script-dir/tokenizer/lowercase.perl"
TRUECASING = ("input-truecaser", "output-truecaser", "detruecaser")
MARK = "# moses-recaser-ems config: "


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
    cfg = Config(lines=text.splitlines(keepends=True))
    section = Section("GENERAL", ignored=False, start=-1, end=0)
    cfg.sections.append(section)
    for start, i, line in logical_lines(cfg.lines, join_config):
        m = _SECTION.match(line)
        if m:
            if not any(p.section == "GENERAL" for p in cfg.params) and cfg.sections[0].start < 0:
                cfg.sections.pop(0)  # no parameters before the first header: [GENERAL] is a header of its own
            section = Section(m.group(1), ignored=bool(re.search("ignore", line, re.I)), start=start, end=start + 1)
            cfg.sections.append(section)
            continue
        p = _PARAM.match(line)
        if p is not None:
            value = " ".join(p.group(2).split())
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


def merge(text: str, ems_command: str, stock_set: bool = False) -> Merged:
    """The config switched to the bilingual recaser (see the module docstring). ``ems_command``: how EMS's
    step scripts call moses-recaser-ems (an absolute path, so that they find it whatever their PATH)."""
    cfg = read_config(text)
    if not cfg.params and all(s.start < 0 for s in cfg.sections):
        raise RecaserError(
            "no sections and no settings: not an EMS config (give a working one, such as Moses' config.toy)", line=1
        )
    ed = _Editor(cfg)
    notes: list[str] = []
    for p in [p for p in cfg.params if p.key in TRUECASING]:
        ed.comment_out(p, "truecasing off: the recaser restores case from lowercased output")
        notes.append(
            f"[{p.section}] {p.key}: commented out (EMS runs detruecase-output, not a recaser, while "
            "output-truecaser is set)"
        )
    for key in ("input-lowercaser", "output-lowercaser"):
        if cfg.lookup("GENERAL", key) is None:
            ed.set("GENERAL", key, LOWERCASER, "")
            notes.append(f"[GENERAL] {key} = {LOWERCASER}: the system translates lowercased text")
    recasing = cfg.section("RECASING")
    if recasing is not None and recasing.ignored:
        ed.enable(recasing)
        notes.append("[RECASING]: enabled (it was IGNORE)")
    ed.set("RECASING", "recaser-train", f'"{ems_command} train"', "moses-recaser: the recaser's training step")
    if "-dev-size" not in (cfg.lookup("RECASING", "recasing-settings") or ""):  # not ours yet
        cores = " -cores $cores" if cfg.lookup("GENERAL", "cores") else ""
        ed.set("RECASING", "recasing-settings", f'"-dev-size {DEV_SIZE}{cores}"', "")
    if cfg.lookup("RECASING", "decoder") is None:
        ed.set("RECASING", "decoder", "$moses-bin-dir/moses", "")
    ed.set("EVALUATION", "recaser", f'"{ems_command} recase"', "moses-recaser: the recaser of every evaluation set")
    ed.set("EVALUATION", "report-segmentation", "yes", "")
    ed.set("EVALUATION", "report-precision-by-coverage", "yes", "")
    notes.append(
        "[RECASING] recaser-train, recasing-settings; [EVALUATION] recaser, report-segmentation, "
        "report-precision-by-coverage: set (the decoder writes -t markers and word links, the recaser "
        "reads them)"
    )
    if stock_set:
        notes += _stock_set(cfg, ed)
    merged = ed.text()
    return Merged(merged, notes + check(read_config(merged)))


def _stock_set(cfg: Config, ed: _Editor) -> list[str]:
    """A copy of the first evaluation set that recases with Moses' recase.perl (trained by EMS on the same
    cased corpus: the patched meta's [RECASING] train-stock)."""
    sets = cfg.sets("EVALUATION")
    if not sets:
        return ["no [EVALUATION:set] to compare the stock recaser on: none added"]
    first = sets[0]
    name = f"{first}-stock"
    lines = ["# the same test set, recased by Moses' own recaser (trained on the same corpus)\n"]
    lines += [f"{p.key} = {_quoted(p.value)}\n" for p in cfg.params if p.section == first]
    lines.append("stock-recaser = $moses-script-dir/recaser/recase.perl\n")
    ed.trailing.setdefault(name, []).extend(lines)
    return [f"[{name}]: added, {first} recased by recase.perl (stock-recaser)"]


def _quoted(value: str) -> str:
    return f'"{value}"' if " " in value else value


def check(cfg: Config) -> list[str]:
    """What keeps the config from running moses-recaser, each with what to change."""
    problems = []
    if cfg.lookup("GENERAL", "output-truecaser") is not None:
        problems.append(
            "problem: output-truecaser is set, so EMS runs detruecase-output and never the recaser: "
            "replace input-truecaser, output-truecaser and detruecaser with input-lowercaser and "
            "output-lowercaser (moses-recaser-ems config --merge does it)"
        )
    recasing = cfg.section("RECASING")
    if recasing is None or recasing.ignored:
        problems.append("problem: [RECASING] is missing or IGNORE: EMS trains no recaser")
    if cfg.lookup("EVALUATION", "recaser") is None and not any(cfg.get(s, "recaser") for s in cfg.sets("EVALUATION")):
        problems.append("problem: no evaluation set sets 'recaser': EMS recases nothing")
    if cfg.lookup("RECASING", "recaser-train") is None:
        problems.append('problem: [RECASING] recaser-train is not set ("moses-recaser-ems train")')
    if cfg.lookup("TRAINING", "config") is not None and cfg.lookup("TRAINING", "word-alignment") is None:
        problems.append(
            "note: [TRAINING] config is given, so EMS aligns nothing for the system, but the recaser's "
            "training reads TRAINING:word-alignment: set [TRAINING] word-alignment to the alignment of "
            "the run that trained the model (.../model/aligned), else EMS aligns the corpus for the "
            "recaser alone"
        )
    if cfg.lookup("EVALUATION", "report-precision-by-coverage") != "yes":
        problems.append(
            "note: without report-precision-by-coverage the decoder writes no word links (.wa): the "
            "recaser uses its phrase spans only"
        )
    return problems
