#!/usr/bin/env python3
"""End to end with Moses EMS and a real decoder: four ways to restore case, in two EMS runs on the same data.

1. builds Moses from ../shared/moses (about 20 minutes on 2 cores; skipped when --moses-dir has bin/moses);
2. takes Moses' example config (scripts/ems/example/config.toy) and points it at shipped data: a --pair
   (fr-en or de-en) system trained on newstest 2008-2012 (about 13.5k sentence pairs), its LM on the English
   side and, as a Moses user's LM has more text than the bitext, on English news from other WMT test sets
   (``NEWS``, 0.75M words; ``config --merge`` has the recaser's training read that corpus as -mono; --lm-text
   bitext: the English side alone), untuned (config.toy's weights), tested on the first --test-lines of
   newstest2014; scored with
   tokenized BLEU (multi-bleu.perl, cased and -lc) and sacrebleu (cased and -lc), as EMS's report reads them;
3. follows docs/ems.md twice, with ``moses-recaser-ems meta`` and ``moses-recaser-ems config --merge``:
   - ``truecase/``: config.toy's truecasing kept, ``config --merge --stock-set``: set ``test`` is
     (b) truecase + moses-recaser (recase-truecased-output), set ``test-stock`` is (a) config.toy as
     shipped, truecase + detruecase.perl, on the same truecased system;
   - ``lowercase/``: ``config --merge --lowercase --stock-set``: set ``test`` is (d) lowercase +
     moses-recaser (recase-output), set ``test-stock`` is (c) lowercase + recase.perl, with a model
     train-recaser.perl trains in the same run on the same cased corpus;
4. every arm reads the same word alignment: EMS's eflomal step aligns the corpus once, in ``truecase/``;
   the file is copied to ``alignment/`` and named in ``lowercase/``'s config (``[TRAINING] word-alignment``:
   experiment.perl runs no step whose output the config names). The tool checks from EMS's step files that
   ``lowercase/`` ran no alignment step and that both runs trained on the same sentence pairs;
5. prints the table (per arm: cased and case-insensitive BLEU) from EMS's score files, writes result.json,
   and, where (a) and (b) case a word differently, counts which of the two the reference agrees with
   (``diagnosis.md``, with examples).

    python tools/ems_e2e.py --work /tmp/e2e/fr-en --moses-dir MOSES [--pair fr-en] [--test-lines 500]
    python tools/ems_e2e.py --work /tmp/e2e/fr-en --rerecase     # the recaser arms (b), (d) again, current code
    python tools/ems_e2e.py --work /tmp/e2e/fr-en --resume       # a run that did not finish, again
    python tools/ems_e2e.py --work /tmp/e2e/fr-en --report-only  # the table of the runs in --work

``--rerecase`` uses EMS's own re-use logic: it writes the meta and both configs again with this checkout's
moses-recaser-ems, deletes the ``.DONE`` files of the ``RECASING_train`` steps (so that no earlier run's
model can be re-used), checks with a dry run (``experiment.perl`` without ``-exec``) that only the recaser's
training, its recase steps and what reads their output (detokenizing, scoring, analysis, the report) would
run, and runs experiment.perl again: a new run number, every other step (corpus, alignment, LM, the
translation models, decoding, the stock arms) re-used from the earlier runs. Then it rescores all arms.

Needs perl, the build's packages (see ../shared/moses/README.md), and eflomal-align and sacrebleu on PATH
(``pip install -e '.[align]'``). Two EMS runs, each 20-35 minutes on 2 cores beyond the build; --rerecase about 3 minutes per run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
TRAIN = ["news-test2008", "newssyscomb2009", "newstest2009", "newstest2010", "newstest2011", "newstest2012"]
# English news beyond the bitext, for the LM (--lm-text news): WMT test sets that share no document with either
# pair's training (2008-2012) or test (newstest2014) sets; the 2008-2013 sets are one English text for both
# pairs, and the two pairs' 2014 sets share their English-original documents, so none of those is here
NEWS = [("de-en", f"newstest{y}") for y in range(2015, 2021)] + [("zh-en", f"newstest{y}") for y in range(2017, 2022)]
BIN = Path(sys.executable).parent
LAYOUTS = ("truecase", "lowercase")
SCORES = ("multi-bleu-c", "multi-bleu", "sacre-bleu-c", "sacre-bleu")
# arm -> (layout, evaluation set, the step that restores case, its output's default name, what it is)
ARMS = {
    "a": (
        "truecase",
        "test-stock",
        "detruecase-output-stock",
        "truecased",
        "config.toy as shipped: truecase + detruecase.perl",
    ),
    "b": ("truecase", "test", "recase-truecased-output", "recased", "truecase + moses-recaser"),
    "c": (
        "lowercase",
        "test-stock",
        "recase-output-stock",
        "recased-stock",
        "lowercase + recase.perl (train-recaser.perl)",
    ),
    "d": ("lowercase", "test", "recase-output", "recased", "lowercase + moses-recaser"),
}
# EMS steps that align words: none may run in the lowercase run (it reads the truecase run's alignment)
ALIGNING = re.compile(
    r"^TRAINING_(prepare-data|eflomal|symmetrize|fast-align|run-giza|run-berkeley|process-berkeley|mml-filter)"
)
# what --rerecase may run again: the recaser's training, its recase steps and what reads their output; the
# scores of any set (their scorer's path is this checkout's venv, which may differ from the first run's)
RERECASE = re.compile(
    r"^(RECASING:train|REPORTING:report|EVALUATION:[^:]+:(multi-bleu|multi-bleu-c|sacre-bleu|sacre-bleu-c)"
    r"|EVALUATION:test:(recase-output|recase-truecased-output|detokenize-output|wrap|analysis|analysis-precision))$"
)


def build_moses(target: Path) -> Path:
    tree = target / "mosesdecoder"
    if (tree / "bin" / "moses").is_file():
        return tree
    tarball = next((SHARED / "moses").glob("mosesdecoder-*.tar.xz"))
    print(f"building Moses in {tree} (15-25 minutes)", flush=True)
    subprocess.run(["tar", "-xJf", str(tarball), "-C", str(target)], check=True)
    subprocess.run(
        ["./bjam", f"-j{os.cpu_count() or 2}", "-q", "--with-boost=/usr"],
        cwd=tree,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return tree


def prepare_data(corpora: Path, data: Path, pair: str, test_lines: int, lm_text: str) -> None:
    """Raw text: the training bitext (one stem, .SRC/.en), the test set's first lines, and the LM's English
    with ``lm_text`` "news" (``lm.en``): the bitext's side and the lines of NEWS (each once, none of the test
    reference's)."""
    data.mkdir(parents=True, exist_ok=True)
    src = corpora / "wmt-newstest" / pair
    for lang in pair.split("-"):
        with open(data / f"train.{lang}", "w", encoding="utf-8") as out:
            for name in TRAIN:
                out.write((src / f"{name}.{lang}").read_text(encoding="utf-8"))
        lines = (src / f"newstest2014.{lang}").read_text(encoding="utf-8").splitlines()[:test_lines]
        (data / f"test.{lang}").write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    if lm_text == "news":
        tgt = pair.split("-")[1]
        test = set((data / f"test.{tgt}").read_text(encoding="utf-8").splitlines())
        news: dict[str, None] = {}
        for other, name in NEWS:
            for line in (corpora / "wmt-newstest" / other / f"{name}.{tgt}").read_text(encoding="utf-8").splitlines():
                if line.strip() and line not in test:
                    news[line] = None
        lm = (data / f"train.{tgt}").read_text(encoding="utf-8") + "".join(x + "\n" for x in news)
        (data / f"lm.{tgt}").write_text(lm, encoding="utf-8")


def system_config(
    moses: Path, exp: Path, data: Path, pair: str, cores: int, lm_text: str, alignment: Path | None = None
) -> str:
    """config.toy, pointed at this Moses, this data and this machine: the working EMS setup the doc starts
    from (still truecasing, as config.toy does); ``lm_text``: the LM's English (``prepare_data``);
    ``alignment``: a word alignment (stem) to use, not compute."""
    src, tgt = pair.split("-")
    text = (moses / "scripts/ems/example/config.toy").read_text(encoding="utf-8")
    subs = {
        "working-dir": str(exp),
        "moses-src-dir": str(moses),
        "external-bin-dir": str(moses / "bin"),
        "cores": str(cores),
        "input-extension": src,
        "output-extension": tgt,
        "pair-extension": pair,
    }
    for key, value in subs.items():
        text = re.sub(rf"(?m)^{re.escape(key)} = .*$", f"{key} = {value}", text)
    text = re.sub(r"(?m)^(srilm-dir|irstlm-dir|randlm-dir) = .*$", r"#\g<0>", text)
    text = text.replace("raw-stem = $toy-data/nc-5k", f"raw-stem = {data}/train")
    text = text.replace(
        "raw-corpus = $toy-data/nc-5k.$output-extension",
        f"raw-corpus = {data}/{'lm' if lm_text == 'news' else 'train'}.{tgt}",
    )
    # EMS's own eflomal step aligns (GIZA++ is not in the Moses source); its settings must not be empty
    training = '[TRAINING]\neflomal-settings = "-m 3"\n'
    if alignment is not None:  # experiment.perl runs no step whose output the config names
        training += f"word-alignment = {alignment}\n"
    text = text.replace("[TRAINING]\n", training, 1)
    # the test set as raw text, scored tokenized and with sacrebleu, cased and case-insensitive
    evaluation = (
        f"raw-input = {data}/test.{src}\nraw-reference = {data}/test.{tgt}\n"
        'multi-bleu = "$moses-script-dir/generic/multi-bleu.perl -lc"\n'
        "multi-bleu-c = $moses-script-dir/generic/multi-bleu.perl\n"
        f'sacre-bleu = "{BIN}/sacrebleu -lc -f text"\nsacre-bleu-c = "{BIN}/sacrebleu -f text"\n'
    )
    text = re.sub(r"(?m)^\[EVALUATION:test\]\n(?:(?!\[).*\n)*", "[EVALUATION:test]\n" + evaluation + "\n", text)
    text = re.sub(r"(?m)^(nist-bleu|nist-bleu-c|wrapping-script) = .*$", r"#\g<0>", text)
    return text


def write_configs(args: argparse.Namespace, moses: Path, alignment: Path | None) -> dict[str, Path]:
    """docs/ems.md, steps 1 and 2, for both layouts: the meta and the merged configs (``WORK/LAYOUT.config``);
    the lowercase one only once the truecase run's alignment is there."""
    work, data = args.work.resolve(), args.work.resolve() / "data"
    ems = str(BIN / "moses-recaser-ems")
    meta = work / "recaser.meta"
    subprocess.run(
        [ems, "-q", "meta", "--moses-meta", str(moses / "scripts/ems/experiment.meta"), "-o", str(meta)], check=True
    )
    configs = {}
    for layout in LAYOUTS:
        if layout == "lowercase" and alignment is None:
            continue
        toy = work / f"{layout}.config.toy"
        stem = alignment if layout == "lowercase" else None
        toy.write_text(
            system_config(moses, work / layout, data, args.pair, args.cores, args.lm_text, stem), encoding="utf-8"
        )
        config = work / f"{layout}.config"
        merge = [ems, "-q", "config", "--merge", str(toy), "--stock-set", "-o", str(config)]
        subprocess.run(merge + (["--lowercase"] if layout == "lowercase" else []), check=True)
        configs[layout] = config
    return configs


def experiment(args: argparse.Namespace, moses: Path, layout: str, execute: bool = True) -> str:
    """experiment.perl on WORK/LAYOUT.config, in WORK/LAYOUT; its output (a dry run's is returned, a run's is
    appended to WORK/LAYOUT.log)."""
    work = args.work.resolve()
    exp = work / layout
    exp.mkdir(exist_ok=True)  # experiment.perl's chdir into a missing working-dir fails silently
    # train-model.perl's lexical step writes model/lex.N but does not create model/: with the word alignment
    # given, no earlier step (symmetrize-*) need have, and in the order EMS picks, build-lex-trans can be first
    (exp / "model").mkdir(exist_ok=True)
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}
    cmd = ["perl", str(moses / "scripts/ems/experiment.perl"), "-config", str(work / f"{layout}.config")]
    cmd += ["-meta", str(work / "recaser.meta"), "-no-graph", "-max-active", str(args.max_active)]
    if not execute:
        return subprocess.run(cmd, cwd=exp, env=env, check=True, capture_output=True, text=True).stdout
    print(f"EMS run: {exp} (log: {work / f'{layout}.log'})", flush=True)
    with open(work / f"{layout}.log", "a") as log:
        subprocess.run(cmd + ["-exec"], cwd=exp, env=env, check=True, stdout=log, stderr=subprocess.STDOUT)
    return ""


def reported(exp: Path) -> list[int]:
    """The runs of an EMS directory whose report step is done, in order."""
    return sorted(int(p.parent.name) for p in exp.glob("steps/*/REPORTING_report.*.DONE"))


def last_run(exp: Path) -> int:
    """The newest run whose report is done; it fails with the crashed steps' names when there is none."""
    done = reported(exp)
    newest = max((int(p.name) for p in (exp / "steps").glob("[0-9]*") if p.name != "0"), default=0)
    crashed = sorted(p.name for p in (exp / "steps" / str(newest)).glob("*.STDERR.digest") if p.stat().st_size)
    if crashed or not done or done[-1] != newest:
        sys.exit(f"{exp}: run {newest} did not finish; crashed steps: {', '.join(crashed) or 'none'}")
    return done[-1]


def versions(exp: Path, run: int) -> dict[str, int]:
    """Per step of ``run`` that re-used an earlier run's output, that run (steps/N/re-use.N)."""
    reuse = exp / "steps" / str(run) / f"re-use.{run}"
    out = {}
    for line in reuse.read_text(encoding="utf-8").splitlines() if reuse.is_file() else []:
        step, version = line.rsplit(" ", 1)
        out[step] = int(version)
    return out


def outputs(work: Path) -> dict[str, dict]:
    """Per layout, the files of its newest finished run: every score of both sets, and the arm's output."""
    got: dict[str, dict] = {}
    for layout in LAYOUTS:
        exp = work / layout
        run = last_run(exp)
        used = versions(exp, run)
        files = {}
        for arm, (lay, name, step, default, _) in ARMS.items():
            if lay != layout:
                continue
            for kind in SCORES:
                v = used.get(f"EVALUATION:{name}:{kind}", run)
                files[f"{arm}:{kind}"] = exp / "evaluation" / f"{name}.{kind}.{v}"
            v = used.get(f"EVALUATION:{name}:{step}", run)
            files[f"{arm}:output"] = exp / "evaluation" / f"{name}.{default}.{v}"
        got[layout] = {"run": run, "files": files}
    return got


def score(path: Path, kind: str) -> float:
    """A score file as report-experiment-scores.perl reads it."""
    text = path.read_text(encoding="utf-8")
    m = re.search(r"BLEU = (\S+), ", text) if kind.startswith("multi") else None
    return float(m.group(1) if m else text.split()[2])


def version(exp: Path, step: str) -> int:
    """The run whose output ``step`` (MODULE:SET:STEP) of the newest finished run reads."""
    run = last_run(exp)
    return versions(exp, run).get(step, run)


def test_files(exp: Path, name: str = "test") -> dict[str, Path]:
    """The test set's files, what the recaser reads."""
    ev = exp / "evaluation"
    tok, dec, clean, ref = (
        version(exp, f"EVALUATION:{name}:{step}")
        for step in ("tokenize-input", "decode", "remove-markup", "tokenize-reference")
    )
    return {
        "tokenized cased source": ev / f"{name}.input.tok.{tok}",
        "-t output": ev / f"{name}.output.{dec}",
        "word links": ev / f"{name}.output.{dec}.wa",
        "markup-free output": ev / f"{name}.cleaned.{clean}",
        "tokenized reference": ev / f"{name}.reference.tok.{ref}",
    }


def read_lines(path: str | Path) -> list[str]:
    return Path(path).read_text(encoding="utf-8").splitlines()


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def check_alignment(work: Path) -> dict[str, str]:
    """Every arm read one word alignment: the lowercase run ran no alignment step, named the truecase run's
    (copied) file, and trained on the same sentence pairs (its corpus is the truecase run's, lowercased)."""
    low, true = work / "lowercase", work / "truecase"
    aligned = sorted(p.name for p in low.glob("steps/*/TRAINING_*.DONE") if ALIGNING.match(p.name))
    if aligned:
        sys.exit(f"the lowercase run aligned the corpus itself: {', '.join(aligned)}")
    runs = sorted(p.name for p in true.glob("steps/*/TRAINING_*.DONE") if ALIGNING.match(p.name))
    if any(not name.endswith(".1.DONE") for name in runs):
        sys.exit(f"the truecase run aligned again after its first run: {', '.join(runs)}")
    copied = work / "alignment" / "aligned.grow-diag-final-and"
    original = true / "model" / "aligned.1.grow-diag-final-and"
    digest = sha256(original)
    if sha256(copied) != digest:
        sys.exit(f"{copied} is not {original}")
    corpora = [x / "training" / f"corpus.{version(x, 'TRAINING:consolidate')}" for x in (true, low)]
    for ext in {p.suffix for p in corpora[1].parent.glob(corpora[1].name + ".*")}:
        a, b = (str(c) + ext for c in corpora)
        if [len(x.split()) for x in read_lines(a)] != [len(x.split()) for x in read_lines(b)]:
            sys.exit(f"the two runs' training corpora ({a}, {b}) differ in lines or tokens")
    return {"file": str(original), "sha256": digest, "steps (truecase run)": ", ".join(runs)}


def diagnose(moses: Path, work: Path, b: Path, examples: int = 20) -> dict[str, int]:
    """Where (a) and (b) case a token differently, which one the reference agrees with
    (``reference.carry_case``: the output matched to the reference in order; undecided where it does not
    decide the word's case), and the decided tokens both get wrong; ``examples`` of each kind, with context,
    to WORK/diagnosis.md. (a) is detruecase.perl run here on (b)'s own input, the markup-free output of set
    ``test``: the two sets decode the test set separately, and the decoder may break a tie between two
    cased forms differently (the lines where the two decodes differ are counted)."""
    from moses_recaser.model.reference import carry_case

    files = test_files(work / "truecase")
    stock = test_files(work / "truecase", "test-stock")["markup-free output"]
    a = work / "diagnosis.detruecased"
    with open(files["markup-free output"], "rb") as inp, open(a, "wb") as out:
        subprocess.run(["perl", str(moses / "scripts/recaser/detruecase.perl")], stdin=inp, stdout=out, check=True)
    decodes = [p.read_text(encoding="utf-8").splitlines() for p in (files["markup-free output"], stock)]
    kinds: dict[str, list[str]] = {"(b) right": [], "(a) right": [], "neither": [], "undecided": []}
    shared: Counter[tuple[str, str]] = Counter()
    texts = (p.read_text(encoding="utf-8").splitlines() for p in (a, b, files["tokenized reference"]))
    for n, (la, lb, lr) in enumerate(zip(*texts), 1):
        ta, tb, tr = la.split(), lb.split(), lr.split()
        if [w.lower() for w in ta] != [w.lower() for w in tb]:
            sys.exit(f"{a}:{n} and {b}:{n} differ in more than case")
        carried = carry_case(ta, tr)
        for i, (wa, wb) in enumerate(zip(ta, tb)):
            c = carried[i]
            if wa == wb:
                if c is not None and wa != c:
                    shared[wa, c] += 1
                continue
            kind = "undecided" if c is None else "(b) right" if wb == c else "(a) right" if wa == c else "neither"
            left, right = " ".join(tb[max(0, i - 4) : i]), " ".join(tb[i + 1 : i + 5])
            kinds[kind].append(f"{n}: ... {left} [(a) {wa} | (b) {wb} | ref {c or '?'}] {right} ...")
    counts = {k: len(v) for k, v in kinds.items()}
    counts["both wrong"] = sum(shared.values())
    counts["lines the two decodes differ"] = sum(x != y for x, y in zip(*decodes))
    lines = [
        "# Tokens where (a) detruecase.perl and (b) moses-recaser disagree",
        "",
        f"- (a): {a} (detruecase.perl on (b)'s input, {files['markup-free output']})",
        f"- (b): {b}",
        f"- reference: {files['tokenized reference']}",
        f"- the decoder's input, -t output and word links: {files['tokenized cased source']}, "
        f"{files['-t output']}, {files['word links']}",
        "",
        ", ".join(f"{k}: {v}" for k, v in counts.items()),
    ]
    for kind, found in kinds.items():
        lines += ["", f"## {kind} ({len(found)}; line: context, (b)'s output around the token)", ""]
        lines += [f"- {x}" for x in found[:examples]]
    lines += ["", f"## both wrong, decided by the reference ({counts['both wrong']}; output -> reference: count)", ""]
    lines += [f"- {x} -> {c}: {k}" for (x, c), k in shared.most_common(examples * 2)]
    (work / "diagnosis.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return counts


def rerecase(args: argparse.Namespace, moses: Path) -> None:
    """The recaser arms again with this checkout's code, every other step re-used (see the module doc)."""
    work = args.work.resolve()
    for layout in LAYOUTS:
        if not reported(work / layout):
            sys.exit(f"{work / layout}: no finished EMS run to re-use (run the tool without --rerecase first)")
    write_configs(args, moses, work / "alignment" / "aligned")
    for layout in LAYOUTS:
        exp = work / layout
        for done in exp.glob("steps/*/RECASING_train.*.DONE"):
            done.unlink()  # no earlier run's model is re-used
        summary = experiment(args, moses, layout, execute=False)
        steps = re.findall(r"(?m)^\d+ (\S+) ->\s*run$", summary)
        unexpected = [s for s in steps if not RERECASE.match(s)]
        if unexpected or "RECASING:train" not in steps:
            sys.exit(f"{layout}: the dry run would also run {', '.join(unexpected)}; not run (see {exp}/steps/0)")
        print(f"{layout}: re-running {', '.join(steps)}", flush=True)
        experiment(args, moses, layout)


def run(args: argparse.Namespace, moses: Path) -> None:
    """Prepare the data and the configs, and run EMS twice: truecase, then lowercase on its alignment. With
    ``--resume``, a run that did not finish is run again (experiment.perl re-uses its finished steps), a
    finished one is kept."""
    work = args.work.resolve()
    if not args.resume:
        prepare_data(args.data_root, work / "data", args.pair, args.test_lines, args.lm_text)
        for layout in LAYOUTS:
            if (work / layout).exists():
                shutil.rmtree(work / layout)
    aligned = work / "alignment" / "aligned"  # the stem; the file is aligned.grow-diag-final-and
    copy = aligned.parent / "aligned.grow-diag-final-and"
    for layout in LAYOUTS:
        if args.resume and reported(work / layout):
            continue
        if layout == "lowercase" and (not args.resume or not copy.exists()):
            last_run(work / "truecase")
            aligned.parent.mkdir(exist_ok=True)
            shutil.copyfile(work / "truecase/model/aligned.1.grow-diag-final-and", copy)
        write_configs(args, moses, aligned if layout == "lowercase" else None)
        experiment(args, moses, layout)


def report(args: argparse.Namespace) -> dict:
    work = args.work.resolve()
    got = outputs(work)
    files = {k: v for layout in got.values() for k, v in layout["files"].items()}
    rows: dict[str, dict[str, float]] = {}
    for arm in ARMS:
        rows[arm] = {k: score(files[f"{arm}:{k}"], k) for k in SCORES}
    for x, y in (("a", "b"), ("c", "d")):  # both sets of a run decode the same input with the same system
        if rows[x]["multi-bleu"] != rows[y]["multi-bleu"]:
            print(f"warning: ({x}) and ({y}) differ case-insensitively: the two decodes differ", file=sys.stderr)
    alignment = check_alignment(work)
    diag = diagnose(args.moses_dir, work, files["b:output"])
    result = {
        "pair": args.pair,
        "test_lines": args.test_lines,
        "lm_text": args.lm_text,
        "runs": {layout: got[layout]["run"] for layout in LAYOUTS},
        "arms": {
            arm: {"system": ARMS[arm][4], "set": f"{ARMS[arm][0]}/{ARMS[arm][1]}", **r} for arm, r in rows.items()
        },
        "outputs": {arm: str(files[f"{arm}:output"]) for arm in ARMS},
        "test_files": {layout: {k: str(v) for k, v in test_files(work / layout).items()} for layout in LAYOUTS},
        "alignment": alignment,
        "disagreements_a_b": diag,
        "reports": {
            layout: (work / layout / "evaluation" / f"report.{got[layout]['run']}").read_text() for layout in LAYOUTS
        },
    }
    (work / "result.json").write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(
        f"newstest2014 {args.pair}, first {args.test_lines} lines; LM text: {args.lm_text}; runs: "
        + ", ".join(f"{k}/ run {v}" for k, v in result["runs"].items())
    )
    print("\n| arm | system | tokenized BLEU, cased | case-insensitive | sacrebleu, cased | case-insensitive |")
    print("|---|---|---|---|---|---|")
    for arm, r in rows.items():
        print(
            f"| ({arm}) | {ARMS[arm][4]} | {r['multi-bleu-c']:.2f} | {r['multi-bleu']:.2f} | "
            f"{r['sacre-bleu-c']:.2f} | {r['sacre-bleu']:.2f} |"
        )
    a, b = rows["a"], rows["b"]
    print(
        f"\n(b) - (a): {b['multi-bleu-c'] - a['multi-bleu-c']:+.2f} cased (tokenized); (b) below its bound: "
        f"{b['multi-bleu'] - b['multi-bleu-c']:.2f}; (b) - (d): {b['multi-bleu-c'] - rows['d']['multi-bleu-c']:+.2f}"
    )
    print(f"tokens where (a) and (b) disagree: {diag} (examples: {work / 'diagnosis.md'})")
    print(f"one word alignment for all arms: {alignment['file']} (sha256 {alignment['sha256'][:12]})")
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, required=True, help="a directory for the build, data and both EMS runs")
    ap.add_argument("--moses-dir", type=Path, help="a built Moses (its bin/moses); default: built in --work")
    ap.add_argument("--pair", choices=["fr-en", "de-en"], default="fr-en")
    ap.add_argument("--data-root", type=Path, default=SHARED / "corpora")
    ap.add_argument("--test-lines", type=int, default=500)
    ap.add_argument(
        "--lm-text",
        choices=["news", "bitext"],
        default="news",
        help="the LM's English: the bitext's side and English news from other WMT test sets (NEWS; the recaser's "
        "training reads it as -mono, as config --merge sets it up), or the bitext's side alone (default: news)",
    )
    ap.add_argument("--cores", type=int, default=min(2, os.cpu_count() or 2), help="EMS's cores (default: 2)")
    ap.add_argument("--max-active", type=int, default=1, help="EMS steps run at once (experiment.perl -max-active)")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--rerecase", action="store_true", help="retrain and rerun the recaser arms (b), (d) only")
    mode.add_argument("--resume", action="store_true", help="run again what did not finish, re-using the rest")
    mode.add_argument("--report-only", action="store_true", help="the table of the runs already in --work")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    settings = args.work / "settings.json"
    if args.rerecase or args.resume or args.report_only:  # the pair and test lines of the runs in --work
        saved = json.loads(settings.read_text(encoding="utf-8"))
        args.pair, args.test_lines, args.moses_dir = saved["pair"], saved["test_lines"], Path(saved["moses"])
        args.lm_text = saved.get("lm_text", "bitext")  # (runs before the setting had the bitext's side alone)
    else:
        moses = args.moses_dir.resolve() if args.moses_dir else build_moses(args.work.resolve())
        saved = {"pair": args.pair, "test_lines": args.test_lines, "moses": str(moses), "lm_text": args.lm_text}
        settings.write_text(json.dumps(saved), encoding="utf-8")
        args.moses_dir = moses
    if not args.report_only:
        (rerecase if args.rerecase else run)(args, args.moses_dir)
    report(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
