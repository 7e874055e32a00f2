"""README's Quick start and Python blocks, run as written, in a temporary directory laid out as the clone's root
(its data/, and a .venv/bin/activate that puts this interpreter's commands on PATH): an example that no longer
runs, or no longer prints what its comments say, fails here."""

from __future__ import annotations

import contextlib
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
README = ROOT / "README.md"


def fenced_block(doc: Path, marker: str, lang: str) -> str:
    """The first ```LANG block after the line ``<!-- MARKER ...`` of DOC."""
    text = doc.read_text(encoding="utf-8")
    start = text.index(f"<!-- {marker}")
    match = re.compile(rf"```{lang}\n(.*?)```", re.S).search(text, start)
    assert match, f"{doc.name}: no {lang} block after <!-- {marker}"
    return match.group(1)


def make_clone_root(root: Path) -> Path:
    """ROOT's data/ and a .venv/bin/activate for this interpreter, as the set-up commands leave a clone."""
    (root / "data").symlink_to(ROOT / "data")
    activate = root / ".venv" / "bin" / "activate"
    activate.parent.mkdir(parents=True)
    activate.write_text(f'PATH="{Path(sys.executable).parent}:$PATH"\n', encoding="utf-8")
    return root


def run_bash(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script], cwd=cwd, capture_output=True, text=True, timeout=1200
    )
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stderr[-3000:]}"
    return result


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory) -> tuple[Path, str]:
    """The clone's root after the Quick start ran there, and what it printed."""
    root = make_clone_root(tmp_path_factory.mktemp("clone"))
    return root, run_bash(fenced_block(README, "quickstart", "bash"), root).stdout


def test_the_quick_start_runs_as_written(quickstart):
    """From a raw bitext to a score, raw and then tokenized: a model, a recased test set that is its input with
    only the case of letters changed (raw: character by character; tokenized: its tokens), and a precision."""
    root, stdout = quickstart
    qs = root / "runs" / "quickstart"
    # raw text: eflomal aligned the training bitext and dev; recasing aligns with the model's table, no priors stored
    assert "|align:eflomal+grow-diag-final-and|" in (qs / "model" / "manifest.yaml").read_text(encoding="utf-8")
    assert not (qs / "model" / "aligner.priors").exists()
    for name in ("test", "tok.test"):
        lowered = (qs / f"{name}.lc.en").read_text(encoding="utf-8").splitlines()
        recased = (qs / f"{name}.recased.en").read_text(encoding="utf-8").splitlines()
        assert len(recased) == len(lowered) == 150
        assert [x.lower() for x in recased] == lowered and recased != lowered
    raw, tokenized = re.findall(r"^precision (\d+\.\d+) .*\nsignature: (.*)", stdout, re.M)
    assert "|tok:13a|" in raw[1] and "|tok:none|" in tokenized[1]
    assert min(float(raw[0]), float(tokenized[0])) > 95.0  # the lowercased input itself scores about 85


def test_the_python_block_runs_as_written(quickstart, monkeypatch):
    """Each `# OUTPUT` comment under a print is what that print prints; then the test set streams, recased, and the
    model's signature."""
    root, _ = quickstart
    block = fenced_block(README, "python", "python")
    lines = block.split("\n")
    claims = [
        re.split(r"\s{2,}", nxt[2:])[0]
        for line, nxt in zip(lines, lines[1:])
        if line.startswith("print(") and nxt.startswith("# ")
    ]
    assert len(claims) == 4, claims
    monkeypatch.chdir(root)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, str(README), "exec"), {"__name__": "readme"})
    printed = out.getvalue().split("\n")
    assert printed[: len(claims)] == claims
    streamed, signature = printed[len(claims) : -2], printed[-2]
    lowered = (root / "runs" / "quickstart" / "test.lc.en").read_text(encoding="utf-8").splitlines()
    assert [x.lower() for x in streamed] == lowered and streamed != lowered
    manifest = (root / "runs" / "quickstart" / "model" / "manifest.yaml").read_text(encoding="utf-8")
    assert signature.startswith("moses-recaser:") and signature in manifest
