#!/usr/bin/env python3
"""The arms of a finished ``tools/ems_e2e.py`` run on the whole of newstest2014, by replaying its EMS steps.

``ems_e2e.py`` tests on the first --test-lines (500) lines of newstest2014, which is what EMS decodes twice per
layout at config.toy's search settings. A cased BLEU difference of a few tenths on 500 lines is within the noise
of the slice, so this tool measures the same systems and recasers on all of newstest2014 (3,003 lines). It
re-runs the EMS step scripts of the run's newest evaluation of set ``test`` (tokenize, truecase or lowercase,
filter, apply-filter, decode, remove-markup, the recaser's step) and of set ``test-stock``'s stock step
(detruecase.perl, recase.perl) on the test set's decode, with every path of the run's evaluation directory
moved to ``WORK/whole-test/LAYOUT/`` and its raw test files to the whole set's. The commands are EMS's own,
as experiment.perl wrote them (the same models, tuned config, recaser and scripts); nothing in the run is
written. ``--decoder-settings`` replaces the decode step's search settings (config.toy's take about an hour
per 3,003 lines on 2 cores; the search does not change what is compared: every arm of a layout reads the
same decode).

Prints, per arm, cased and case-insensitive tokenized BLEU (multi-bleu.perl) on the whole set, on the first
--test-lines lines (the run's slice) and on the rest, and for (b) and (d) the score they would have if every
word the reference decides (``reference.carry_case``) had the reference's case: what is left between that and
the bound is the words the reference does not decide. Writes ``WORK/whole-test/result.json``.

    python tools/e2e_whole_test.py --work /tmp/e2e/fr-en [--decoder-settings "-threads 2"]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from ems_e2e import ARMS, LAYOUTS, SHARED, last_run, read_lines, versions

from moses_recaser.model.reference import carry_case

# the steps replayed, per layout and set, in order: set test's chain, then the stock arm's step on its decode
STEPS = {
    "truecase": [
        ("test", s)
        for s in ("tokenize-input", "truecase-input", "tokenize-reference", "filter", "apply-filter", "decode")
    ]
    + [("test", "remove-markup"), ("test", "recase-truecased-output"), ("test-stock", "detruecase-output-stock")],
    "lowercase": [
        ("test", s)
        for s in ("tokenize-input", "lowercase-input", "tokenize-reference", "filter", "apply-filter", "decode")
    ]
    + [("test", "remove-markup"), ("test", "recase-output"), ("test-stock", "recase-output-stock")],
}


def step_commands(exp: Path, run: int, name: str, step: str) -> tuple[str, list[str]]:
    """The PATH and the commands of EMS's script for step ``name:step`` as the run used it: the lines between
    the script's ``mkdir`` of its directory and its closing ``echo 'finished at``."""
    v = versions(exp, run).get(f"EVALUATION:{name}:{step}", run)
    script = exp / "steps" / str(v) / f"EVALUATION_{name}_{step}.{v}"
    lines = script.read_text(encoding="utf-8").splitlines()
    path = next(x for x in lines if x.startswith("PATH="))[len("PATH=") :].strip('"')
    start = next(i for i, x in enumerate(lines) if x.startswith("mkdir -p ")) + 1
    end = next(i for i, x in enumerate(lines) if x.startswith("echo 'finished at"))
    return path, [x for x in lines[start:end] if x.strip()]


def moved(command: str, exp: Path, out: Path, data: Path, whole: Path) -> str:
    """A step's command with the run's evaluation files (``test.NAME.V``, ``test-stock.NAME.V``, the filter's
    directory) moved to ``out`` without their versions, the directory itself to ``out``, and its raw test files to the whole set's."""
    ev = re.escape(str(exp / "evaluation"))
    command = re.sub(ev + r"/(?:test|test-stock)\.([^\s/]+?)\.\d+((?:\.wa)?)(?=[\s/:]|$)", rf"{out}/\1\2", command)
    command = re.sub(ev + r"(?=\s|$)", str(out), command)  # the directory itself (apply-filter's mkdir)
    command = re.sub(re.escape(str(data)) + r"/test\.(\w+)", rf"{whole}/newstest2014.\1", command)
    if str(exp / "evaluation") in command or re.search(re.escape(str(data)) + r"/test\.", command):
        sys.exit(f"a path of the run's test set is left in: {command}")
    return command


def with_search(command: str, settings: str) -> str:
    """The decode command with its search settings (what EMS puts between the decoder and
    ``-alignment-output-file``) replaced."""
    new, n = re.subn(r"^(\S+) .*? (-alignment-output-file )", lambda m: f"{m[1]} {settings} {m[2]}", command)
    if n != 1:
        sys.exit(f"cannot find the search settings in the decode command: {command}")
    return new


def copy_test_set(whole: Path, pair: str) -> None:
    """The whole of newstest2014, both sides, as WHOLE/newstest2014.LANG (the replayed steps' raw files)."""
    whole.mkdir(parents=True, exist_ok=True)
    for lang in pair.split("-"):
        src = SHARED / "corpora" / "wmt-newstest" / pair / f"newstest2014.{lang}"
        (whole / f"newstest2014.{lang}").write_bytes(src.read_bytes())


def replay(work: Path, layout: str, settings: str | None) -> Path:
    """Every step of ``STEPS[layout]``, moved to WORK/whole-test/LAYOUT; returns that directory."""
    exp, whole = work / layout, work / "whole-test"
    run, out = last_run(exp), whole / layout
    out.mkdir(parents=True, exist_ok=True)
    for name, step in STEPS[layout]:
        path, commands = step_commands(exp, run, name, step)
        for command in commands:
            command = moved(command, exp, out, work / "data", whole)
            if step == "decode" and settings is not None and command.startswith("/"):
                command = with_search(command, settings)
            print(f"{layout}: {name}:{step}: {command[:160]}", flush=True)
            subprocess.run(
                ["bash", "-euo", "pipefail", "-c", command], cwd=exp, env={**os.environ, "PATH": path}, check=True
            )
    return out


def bleu(moses: Path, ref: list[str], hyp: list[str], lc: bool) -> float:
    """multi-bleu.perl's BLEU of ``hyp`` against ``ref`` (cased, or with -lc)."""
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".ref") as tmp:
        tmp.write("".join(x + "\n" for x in ref))
        tmp.flush()
        cmd = ["perl", str(moses / "scripts/generic/multi-bleu.perl")] + (["-lc"] if lc else []) + [tmp.name]
        got = subprocess.run(cmd, input="".join(x + "\n" for x in hyp), capture_output=True, text=True, check=True)
    m = re.search(r"BLEU = (\S+),", got.stdout)
    return float(m.group(1)) if m else 0.0


def decided_oracle(hyp: list[str], ref: list[str]) -> tuple[list[str], int, int]:
    """``hyp`` with every word the reference decides in the reference's case; the decided words it got wrong,
    and the words the reference does not decide."""
    out, wrong, undecided = [], 0, 0
    for h, r in zip(hyp, ref):
        words = h.split()
        for i, c in enumerate(carry_case(words, r.split())):
            if c is None:
                undecided += 1
            elif c != words[i]:
                words[i], wrong = c, wrong + 1
        out.append(" ".join(words))
    return out, wrong, undecided


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, required=True, help="the --work of a finished ems_e2e.py run")
    ap.add_argument("--decoder-settings", help="the decode step's search settings instead of the run's")
    ap.add_argument("--report-only", action="store_true", help="score what an earlier replay wrote")
    args = ap.parse_args()
    work = args.work.resolve()
    saved = json.loads((work / "settings.json").read_text(encoding="utf-8"))
    moses, slice_lines = Path(saved["moses"]), int(saved["test_lines"])
    if not args.report_only:
        copy_test_set(work / "whole-test", saved["pair"])
    dirs = {
        layout: work / "whole-test" / layout if args.report_only else replay(work, layout, args.decoder_settings)
        for layout in LAYOUTS
    }
    ref = read_lines(dirs["truecase"] / "reference.tok")
    parts = {"whole": slice(None), f"first {slice_lines}": slice(slice_lines), "rest": slice(slice_lines, None)}
    result: dict = {"pair": saved["pair"], "lines": len(ref), "decoder_settings": args.decoder_settings, "arms": {}}
    for arm, (layout, _, _, default, system) in ARMS.items():
        hyp, clean = read_lines(dirs[layout] / default), read_lines(dirs[layout] / "cleaned")
        if len(hyp) != len(ref) or any(h.lower().split() != c.lower().split() for h, c in zip(hyp, clean)):
            sys.exit(f"({arm}): {dirs[layout] / default} is not the decode's words, line for line")
        row = {"system": system, "output": str(dirs[layout] / default)}
        for part, s in parts.items():
            row[part] = {"cased": bleu(moses, ref[s], hyp[s], False), "bound": bleu(moses, ref[s], hyp[s], True)}
        if arm in ("b", "d"):
            oracle, wrong, undecided = decided_oracle(hyp, ref)
            row["decided words right"] = {
                "cased": bleu(moses, ref, oracle, False),
                "wrong": wrong,
                "undecided": undecided,
            }
        result["arms"][arm] = row
    (work / "whole-test" / "result.json").write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(f"\nnewstest2014 {saved['pair']}, {len(ref)} lines; search: {args.decoder_settings or 'as in the run'}")
    print("\n| arm | system | " + " | ".join(f"{p}: cased | bound" for p in parts) + " |")
    print("|---|---|" + "---|---|" * len(parts))
    for arm, row in result["arms"].items():
        cells = " | ".join(f"{row[p]['cased']:.2f} | {row[p]['bound']:.2f}" for p in parts)
        print(f"| ({arm}) | {row['system']} | {cells} |")
    arms = result["arms"]
    for p in parts:
        a, b, d = (arms[x][p] for x in "abd")
        print(
            f"{p}: (b) - (a) {b['cased'] - a['cased']:+.2f}; (b) below its bound {b['bound'] - b['cased']:.2f}; "
            f"(b) - (d) {b['cased'] - d['cased']:+.2f}"
        )
    for arm in ("b", "d"):
        o = arms[arm]["decided words right"]
        print(
            f"({arm}) with every decided word as the reference has it: {o['cased']:.2f} "
            f"({o['wrong']} decided words wrong, {o['undecided']} undecided)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
