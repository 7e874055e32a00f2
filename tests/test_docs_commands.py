"""docs/cluster.md's commands, run as written on the data the clone ships: every bash block marked
``<!-- runs: tests/test_docs_commands.py -->``, in order, in one shell, from a temporary clone root."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_readme import ROOT, make_clone_root, run_bash

MARKER = "<!-- runs: tests/test_docs_commands.py -->"


def marked_blocks(doc: Path) -> list[str]:
    return re.findall(re.escape(MARKER) + r"\n```bash\n(.*?)```", doc.read_text(encoding="utf-8"), re.S)


@pytest.mark.slow
def test_the_cluster_commands_run_as_written(tmp_path):
    """The corpus and both alignments made, 4 shards counted, merged and trained on; then 8 shards by xargs,
    which replace the 4 and merge again."""
    blocks = marked_blocks(ROOT / "docs" / "cluster.md")
    assert len(blocks) == 3
    root = make_clone_root(tmp_path)
    run_bash("\n".join(blocks), root)
    work = root / "runs" / "cluster"
    assert sorted(p.name for p in (work / "counts").iterdir()) == [f"counts.{i}.npz" for i in range(1, 9)]
    assert (work / "stats" / "manifest.yaml").is_file()
    manifest = (work / "MODEL" / "manifest.yaml").read_text(encoding="utf-8")
    assert json.loads(manifest)["signature"].startswith("moses-recaser:")
