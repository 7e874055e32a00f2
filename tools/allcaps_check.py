#!/usr/bin/env python3
"""A test set in capitals: how much of the output comes back in capitals.

The source and the reference are upper-cased a token at a time by ``casing.upper_all`` (Moses escapes such
as ``&apos;`` stay valid escapes; a letter whose capital has another length, such as "ß", stays), the lowercased reference is recased with
the upper-cased source and its word alignment (``moses-recaser recase --source --input --input-alignment``),
and the output is compared word by word with the upper-cased reference.

    python tools/allcaps_check.py --source test.fr --input test.lc.en --input-alignment test.align \\
        --reference test.en --system after=MODEL [--system before=OLD_MODEL@OLD_CHECKOUT]

A system is a model directory, optionally with the checkout whose code runs it (``PYTHONPATH``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from moses_recaser.core.casing import upper_all
from moses_recaser.io.lines import read_lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", type=Path, required=True, help="tokenized cased source")
    ap.add_argument("--input", type=Path, required=True, help="the lowercased tokenized reference")
    ap.add_argument("--input-alignment", type=Path, required=True)
    ap.add_argument("--reference", type=Path, required=True, help="the cased tokenized reference")
    ap.add_argument("--system", action="append", required=True, metavar="NAME=MODEL[@CHECKOUT]")
    args = ap.parse_args()
    ref = [[upper_all(w) for w in x.split()] for x in read_lines(args.reference)]
    print("| system | words in capitals as the reference's (%) | lines all right (%) |")
    print("|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "source.upper"
        src.write_text(
            "".join(" ".join(map(upper_all, x.split())) + "\n" for x in read_lines(args.source)), encoding="utf-8"
        )
        for spec in args.system:
            name, _, where = spec.partition("=")
            model, _, tree = where.partition("@")
            env = {**os.environ, **({"PYTHONPATH": tree} if tree else {})}
            out = Path(tmp) / f"{name}.out"
            subprocess.run(
                [
                    sys.executable,
                    "-P",
                    "-c",
                    "from moses_recaser.cli.main import main; raise SystemExit(main())",
                    "-q",
                    "recase",
                    "--model",
                    model,
                    "--source",
                    str(src),
                    "--input",
                    str(args.input),
                    "--alignment",
                    str(args.input_alignment),
                    "-o",
                    str(out),
                ],
                check=True,
                env=env,
            )
            hyp = [x.split() for x in read_lines(out)]
            pairs = [(h, r) for hs, rs in zip(hyp, ref) for h, r in zip(hs, rs)]
            words = 100 * sum(h == r for h, r in pairs) / len(pairs)
            lines = 100 * sum(hs == rs for hs, rs in zip(hyp, ref)) / len(ref)
            print(f"| {name} | {words:.2f} | {lines:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
