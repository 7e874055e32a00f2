"""Shared fixtures: paths to shipped data, and undoing the Moses regression-test filters."""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import pytest
from hypothesis import HealthCheck, settings

from moses_recaser import TrainSettings

# on a machine busy with other work, drawing examples takes longer: slowness is for tools/ benchmarks, not tests
settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")

DATA = Path(__file__).parent / "data"
TRACES = DATA / "moses-traces"
# word links made once by eflomal (tools/make_test_links.py), for tests whose subject is not the aligner
LINKS = DATA / "links"

_ONE_BEST = re.compile(r"TRANSLATION_(\d+)=(.*)$")
_NBEST = re.compile(r"TRANSLATION_(\d+)_NBEST_(\d+)=(.*)$")


def regtest_to_moses(truth: Path) -> tuple[list[str], list[str]]:
    """Rebuild the decoder's raw 1-best and n-best lines from a regression test's truth file.

    The test harness wrote stdout line k as ``TRANSLATION_k=<line>`` and split n-best lines on
    ``\\s*|||\\s*`` before rejoining them with `` ||| ``, dropping the hypothesis' trailing space;
    Moses itself prints ``id ||| hyp  ||| ...`` (word, space, then `` |||``).
    """
    one_best: list[str] = []
    nbest: list[str] = []
    for line in truth.read_text(encoding="utf-8").splitlines():
        m = _NBEST.match(line)
        if m:
            hyp, *rest = m.group(3).split(" ||| ")
            nbest.append(" ||| ".join([m.group(1), hyp + " "] + rest))
            continue
        m = _ONE_BEST.match(line)
        if m:
            one_best.append(m.group(2))
    return one_best, nbest


# The longest files first (as -n 2 --durations=0 measured them): with -n 2 a worker takes whole files in collection
# order (--dist loadfile, --no-loadscope-reorder in pyproject), and a long file started last runs alone at the end.
LONGEST_FIRST = [
    "test_do_no_harm.py",
    "test_faults.py",
    "test_experiment.py",
    "test_readme.py",
    "test_docs_commands.py",
    "test_cased_input.py",
    "test_memory.py",
    "test_aligner.py",
    "test_raw.py",
    "test_lm.py",
    "test_ems.py",
    "test_api.py",
    "test_monolingual.py",
    "test_fuzz_cli.py",
    "test_recaser.py",
    "test_model_safety.py",
    "test_shards.py",
    "test_bad_inputs.py",
    "test_ems_moses.py",
    "test_decoder_output.py",
    "test_interrupts.py",
    "test_batch.py",
]


# fixtures that train a model, run eflomal or unpack Moses: a test that takes one is `slow` (besides those marked
# so in their module), and `pytest -m "not slow"` is the contributor's quick tier
TRAINING_FIXTURES = {"tico", "tico_aligned", "moses_scripts", "quickstart", "tiny"}  # (the last two: one module's each)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: k for k, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
    for item in items:
        if TRAINING_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


# the signals the tests send a command, each restored to its default in the command they start: a test run under
# ``nohup`` (SIGHUP ignored) or in a script's background (SIGINT ignored) hands its children those ignored, and the
# command rightly keeps an inherited SIG_IGN, so such a test would test its parent's shell, not the command
SENT = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


def signals_restored(ignored: tuple[int, ...] = (), then: Callable[[], None] | None = None) -> Callable[[], None]:
    """A ``preexec_fn``: every signal of SENT at its default, but ``ignored`` (as ``nohup`` starts a command);
    then ``then``."""

    def start() -> None:
        for sig in SENT:
            signal.signal(sig, signal.SIG_IGN if sig in ignored else signal.SIG_DFL)
        if then is not None:
            then()

    return start


@pytest.fixture
def data_dir() -> Path:
    return DATA


TICO = Path(__file__).parents[1] / "data" / "tico19"


@pytest.fixture(scope="session")
def tico(tmp_path_factory):
    """A small bilingual model trained on shipped TICO-19 fr-en data, and tokenized slices around it with their
    word links (NAME.wa), aligned in one eflomal run.

    Train: lines 1-700, dev: 701-800, test: 1951-2100 (the demo's test lines).
    """
    return built_once(tmp_path_factory, "tico", _train_tico)


@pytest.fixture(scope="session")
def tico_aligned(tico, tmp_path_factory) -> Path:
    """tico's training set and its links under short names (f, e, a), and its dev set's links (dev.a)."""
    d = tmp_path_factory.mktemp("aligned")
    for name, short in (("train.fr", "f"), ("train.en", "e"), ("train.wa", "a"), ("dev.wa", "dev.a")):
        shutil.copyfile(tico / name, d / short)
    return d


def built_once(tmp_path_factory, name: str, build: Callable[[Path], None]) -> Path:
    """A directory of this worker's own that ``build`` filled once a run: under xdist the workers share the run's
    temporary directory, the first to take the lock builds there, and each takes a copy (tests write beside it)."""
    d = tmp_path_factory.mktemp(name)
    if "PYTEST_XDIST_WORKER" not in os.environ:
        build(d)
        return d
    root = tmp_path_factory.getbasetemp().parent
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / name).is_dir():
            part = root / f"{name}.{os.getpid()}"
            part.mkdir()
            build(part)
            part.rename(root / name)
    shutil.copytree(root / name, d, dirs_exist_ok=True)
    return d


def tico_slices(d: Path, langs: tuple[str, str], parts: dict[str, slice]) -> None:
    """Slices of the shipped TICO-19 bitext in ``d``, tokenized (NAME.LANG), and their word links (NAME.wa): the
    lines of LINKS' eflomal run over the whole bitext, which every test whose subject is not the aligner takes."""
    from moses_recaser.moses.tokenizer import tokenizer

    links = (LINKS / f"tico19.{langs[0]}-{langs[1]}.wa").read_text(encoding="utf-8").splitlines()
    for lang in langs:
        tok, lines = tokenizer(lang), (TICO / f"tico19-test.{lang}").read_text(encoding="utf-8").splitlines()
        for name, part in parts.items():
            (d / f"{name}.{lang}").write_text("".join(" ".join(tok(x)) + "\n" for x in lines[part]), encoding="utf-8")
    for name, part in parts.items():
        (d / f"{name}.wa").write_text("".join(x + "\n" for x in links[part]), encoding="utf-8")


def _train_tico(d: Path) -> None:
    tico_slices(d, ("fr", "en"), {"train": slice(0, 700), "dev": slice(700, 800), "test": slice(1950, None)})
    (d / "test.lc.en").write_text((d / "test.en").read_text(encoding="utf-8").lower(), encoding="utf-8")
    train_on_tico(d, d / "model")


TICO_SETTINGS = TrainSettings(max_iter=60)


def train_on_tico(
    d: Path, model: Path, settings: TrainSettings = TICO_SETTINGS, langs: tuple[str, str] = ("fr", "en")
) -> None:
    """A model trained on ``tico_slices``' train and dev files in ``d``, as the suite's own is."""
    from moses_recaser import Bitext, train

    f, e = langs
    dev = Bitext(d / f"dev.{f}", d / f"dev.{e}", d / "dev.wa")
    train(Bitext(d / f"train.{f}", d / f"train.{e}", d / "train.wa"), model, settings, dev=dev)


# Moses' own scripts: MOSES_SCRIPTS names them (a mosesdecoder checkout or release, its scripts/ directory, or a
# directory holding a mosesdecoder-*.tar.xz and the four released metas in experiment-meta/), ../shared/moses
# beside the project by default. The tests that drive them skip without them, and CI
# (MOSES_RECASER_REQUIRE_SHARED=1) fails instead.
SHARED = Path(__file__).resolve().parents[2] / "shared" / "moses"
MOSES = Path(os.environ.get("MOSES_SCRIPTS") or SHARED)
_GET = (
    "get a Moses checkout (git clone https://github.com/moses-smt/mosesdecoder) or release, "
    "then MOSES_SCRIPTS=.../mosesdecoder/scripts"
)


def need_shared(what: str) -> NoReturn:
    reason = f"needs {what}"
    if os.environ.get("MOSES_RECASER_REQUIRE_SHARED") == "1":
        pytest.fail(reason + "; MOSES_RECASER_REQUIRE_SHARED=1 makes that a failure")
    pytest.skip(reason)


def _scripts_in(where: Path) -> Path | None:
    for scripts in (where, where / "scripts", where / "mosesdecoder" / "scripts"):
        if (scripts / "ems" / "experiment.perl").is_file():
            return scripts
    return None


@pytest.fixture(scope="session")
def moses_scripts(tmp_path_factory) -> Path:
    """Moses' scripts/ directory, unpacked once a worker where MOSES_SCRIPTS names an archive."""
    scripts = _scripts_in(MOSES)
    if scripts:
        return scripts
    tarballs = sorted(MOSES.glob("mosesdecoder-*.tar.xz"))
    if not tarballs:
        need_shared(f"Moses' own scripts, not in {MOSES} (MOSES_SCRIPTS, else ../shared/moses): {_GET}")
    root = tmp_path_factory.mktemp("mosesdecoder")
    subprocess.run(["tar", "-xJf", str(tarballs[-1]), "-C", str(root), "mosesdecoder/scripts"], check=True)
    return root / "mosesdecoder" / "scripts"


def moses_meta(name: str) -> Path:
    """A release's scripts/ems/experiment.meta, from experiment-meta/ beside the archive (master's is also a
    checkout's own)."""
    path = MOSES / "experiment-meta" / f"{name}.experiment.meta"
    scripts = _scripts_in(MOSES)
    if not path.is_file() and name.startswith("master") and scripts:
        path = scripts / "ems" / "experiment.meta"
    if not path.is_file():
        ref = name.removeprefix("master-")
        need_shared(f"{path}, which is `git -C mosesdecoder show {ref}:scripts/ems/experiment.meta`")
    return path
