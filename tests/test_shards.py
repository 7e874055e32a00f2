"""Sharded counting: count i/N + merge gives the same model as single-pass statistics."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import moses_recaser
from moses_recaser import TrainSettings
from moses_recaser.cli.main import main
from moses_recaser.io.errors import RecaserError
from moses_recaser.io.modeldir import read_manifest
from moses_recaser.stats.shards import parse_shard, shard_range

CLI = str(Path(sys.executable).parent / "moses-recaser")


@pytest.fixture(scope="module")
def bitext(tico_aligned):
    return tico_aligned


@pytest.mark.parametrize("n_shards", [1, 3])
def test_merged_shards_equal_single_pass(bitext, tmp_path, n_shards):
    d = bitext
    args = ["--source", str(d / "f"), "--target", str(d / "e"), "--alignment", str(d / "a")]
    assert main(["-q", "stats", *args, "--lm-order", "3", "-o", str(tmp_path / "single")]) == 0
    shards = []
    for i in range(1, n_shards + 1):
        out = tmp_path / f"shard{i}.npz"
        assert main(["-q", "count", *args, "--shard", f"{i}/{n_shards}", "--lm-order", "3", "-o", str(out)]) == 0
        shards.append(str(out))
    assert main(["-q", "merge", *reversed(shards), "-o", str(tmp_path / "merged")]) == 0
    single = read_manifest(tmp_path / "single").files
    merged = read_manifest(tmp_path / "merged").files
    assert single == merged  # every file, byte for byte (the LM's ARPA and the tables)


def test_shards_counted_by_xargs_merge_into_the_one_pass_model(bitext, tmp_path):
    """docs/cluster.md's recipe at small scale: the shards counted as separate processes by ``xargs -P 2`` (as
    a Slurm array or GNU parallel would run them), each within its own --memory, through the real command line,
    then merged in bounded memory: the model of one pass over the whole bitext, byte for byte."""
    d = bitext
    files = ["--source", str(d / "f"), "--target", str(d / "e"), "--alignment", str(d / "a")]
    assert main(["-q", "stats", *files, "-o", str(tmp_path / "single")]) == 0
    counts = tmp_path / "counts"
    counts.mkdir()
    script = f'"{CLI}" -q count {" ".join(files)} --shard "$1/4" --memory 256M -o "{counts}/counts.$1.npz"'
    proc = subprocess.run(
        ["xargs", "-P", "2", "-I{}", "sh", "-c", script, "sh", "{}"],
        input="1\n2\n3\n4\n",
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    shards = sorted(str(p) for p in counts.iterdir())
    assert len(shards) == 4
    merged = subprocess.run(
        [CLI, "-q", "merge", *shards, "-S", "256M", "-o", str(tmp_path / "merged")], capture_output=True, text=True
    )
    assert merged.returncode == 0, merged.stderr
    assert read_manifest(tmp_path / "single").files == read_manifest(tmp_path / "merged").files


def test_incomplete_shard_set(bitext, tmp_path, capsys):
    d = bitext
    out = tmp_path / "s1.npz"
    assert (
        main(
            [
                "-q",
                "count",
                "--source",
                str(d / "f"),
                "--target",
                str(d / "e"),
                "--alignment",
                str(d / "a"),
                "--shard",
                "1/2",
                "-o",
                str(out),
            ]
        )
        == 0
    )
    assert main(["merge", str(out), "-o", str(tmp_path / "m")]) == 2
    assert capsys.readouterr().err == (
        "moses-recaser: error: shard 2 of 2 is missing: merge takes the count files of shards 1 to 2\n"
    )
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize(
    ("shards", "said"),
    [
        (["1/4", "2/8"], "{1}: shard 2 of 8, the others are of 4: give the shards of one split"),
        (["1/3", "2/8", "3/3", "4/8"], "{1}: shard 2 of 8, 2 others are of 3: give the shards of one split"),
        (["2/4"], "shards 1, 3, 4 of 4 are missing: merge takes the count files of shards 1 to 4"),
        (["1/2", "1/2", "2/2"], "{1}: shard 1 of 2 again ({0} is that shard too): give each shard once"),
    ],
)
def test_a_merge_of_no_whole_split_says_what_is_wrong(bitext, tmp_path, capsys, shards, said):
    """It said 'got [1, 2]' for shards 1/4 and 2/8, and 'got [1, 2, 3, 4, 5, 6, 7]' for a missing shard 8 of 8
    (issue 50, item 9)."""
    files = ["--source", str(bitext / "f"), "--target", str(bitext / "e"), "--alignment", str(bitext / "a")]
    paths = []
    for k, shard in enumerate(shards):
        paths.append(str(tmp_path / f"counts.{k}.npz"))
        assert main(["-q", "count", *files, "--shard", shard, "-o", paths[-1]]) == 0
    assert main(["merge", *paths, "-o", str(tmp_path / "m")]) == 2
    assert capsys.readouterr().err == f"moses-recaser: error: {said.format(*paths)}\n"  # {k}: the k-th file
    assert not (tmp_path / "m").exists()


def test_shards_of_different_corpora_are_refused(bitext, tmp_path, capsys):
    """Shard 1/2 counted when the corpus had fewer lines than when shard 2/2 was: their line ranges leave a gap
    (or overlap), and merge refuses them by name before any work, as docs/cluster.md promises for a foreign
    shard."""
    d = bitext
    n = len((d / "e").read_text(encoding="utf-8").splitlines())
    short = tmp_path / "short"
    short.mkdir()
    for name in ("f", "e", "a"):
        lines = (d / name).read_text(encoding="utf-8").splitlines(keepends=True)
        (short / name).write_text("".join(lines[: n - 10]), encoding="utf-8")

    def count(root: Path, shard: str, out: Path) -> None:
        files = ["--source", str(root / "f"), "--target", str(root / "e"), "--alignment", str(root / "a")]
        assert main(["-q", "count", *files, "--shard", shard, "-o", str(out)]) == 0

    count(short, "1/2", tmp_path / "s1.npz")
    count(d, "2/2", tmp_path / "s2.npz")
    assert main(["merge", str(tmp_path / "s1.npz"), str(tmp_path / "s2.npz"), "-o", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 's1.npz'}: shard 1/2 holds lines 1-{(n - 10) // 2}" in err
    assert "counted from different corpora" in err
    assert not (tmp_path / "m").exists()


def test_shards_of_corpora_of_the_same_length_are_refused(bitext, tmp_path, capsys):
    """A corpus cleaned again (one word changed, the same number of lines): line ranges cannot tell its shards
    from the old one's, the corpus's digest does. The same text compressed is the same corpus."""
    import gzip

    d = bitext
    edited = tmp_path / "edited"
    edited.mkdir()
    for name in ("f", "a"):
        (edited / name).write_bytes((d / name).read_bytes())
    lines = (d / "e").read_text(encoding="utf-8").splitlines(keepends=True)
    lines[-1] = lines[-1].replace(lines[-1].split()[0], lines[-1].split()[0] + "x", 1)
    (edited / "e").write_text("".join(lines), encoding="utf-8")
    packed = tmp_path / "packed"
    packed.mkdir()
    for name in ("f", "e", "a"):
        (packed / f"{name}.gz").write_bytes(gzip.compress((d / name).read_bytes()))

    def count(files: list[Path], shard: str, out: Path) -> str:
        names = ["--source", str(files[0]), "--target", str(files[1]), "--alignment", str(files[2])]
        assert main(["-q", "count", *names, "--shard", shard, "-o", str(out)]) == 0
        return str(out)

    first = count([d / "f", d / "e", d / "a"], "1/2", tmp_path / "s1.npz")
    other = count([edited / "f", edited / "e", edited / "a"], "2/2", tmp_path / "s2.npz")
    assert main(["-q", "merge", first, other, "-o", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"moses-recaser: error: {other}: shard 2/2 was counted from another corpus than shard 1/2 (its files' "
        "text differs): count every shard from the same files\n"
    )
    assert not (tmp_path / "m").exists()
    same = count([packed / "f.gz", packed / "e.gz", packed / "a.gz"], "2/2", tmp_path / "s2gz.npz")
    assert main(["-q", "merge", first, same, "-o", str(tmp_path / "m")]) == 0


def test_shard_files_are_read_through_symlinks(bitext, tmp_path, capsys):
    """A shard file is the user's input, not a file of a model directory: reached through a symlink (a farm of
    links to the counts a cluster returned) it merges; a FIFO is refused at once, not waited on."""
    d = bitext
    files = ["--source", str(d / "f"), "--target", str(d / "e"), "--alignment", str(d / "a")]
    links = tmp_path / "links"
    links.mkdir()
    for i in (1, 2):
        assert main(["-q", "count", *files, "--shard", f"{i}/2", "-o", str(tmp_path / f"s{i}.npz")]) == 0
        (links / f"s{i}.npz").symlink_to(tmp_path / f"s{i}.npz")
    assert main(["-q", "merge", str(links / "s1.npz"), str(links / "s2.npz"), "-o", str(tmp_path / "m")]) == 0
    os.mkfifo(tmp_path / "fifo")
    assert main(["merge", str(tmp_path / "fifo"), str(links / "s2.npz"), "-o", str(tmp_path / "m2")]) == 2
    assert "fifo: not a shard count file (is not a regular file; it must be a regular file)" in capsys.readouterr().err


def test_a_damaged_or_edited_shard_file_is_refused_before_the_merge(bitext, tmp_path, capsys):
    """A shard file travels alone (from a cluster's nodes): a bad copy (one bit flipped in its counts) or arrays
    saved again by hand (negated counts, which the merge took and train --stats then crashed on; a shard place
    of two numbers; an LM order of 10^12, whose tables the merge tried to allocate) is refused by the sha256 the
    file holds, in one line, and no model is written."""
    import numpy as np

    d = bitext
    files = ["--source", str(d / "f"), "--target", str(d / "e"), "--alignment", str(d / "a")]
    for i in (1, 2):
        assert main(["-q", "count", *files, "--shard", f"{i}/2", "-o", str(tmp_path / f"s{i}.npz")]) == 0
    good = (tmp_path / "s2.npz").read_bytes()
    with np.load(tmp_path / "s2.npz") as z:
        arrays = {k: z[k] for k in z.files}
    at = good.index(arrays["cased_pairs.counts"].tobytes()[:64])  # inside the counts' data
    flipped = bytearray(good)
    flipped[at + 8] ^= 1
    (tmp_path / "flipped.npz").write_bytes(bytes(flipped))
    for name, change in (
        ("negated", {"cased_pairs.counts": -arrays["cased_pairs.counts"]}),
        ("place", {"shard": np.array([2, 2])}),
        ("order", {"order": np.array(10**12)}),
    ):
        np.savez(tmp_path / f"{name}.npz", **{**arrays, **change})
    capsys.readouterr()
    for name in ("flipped", "negated", "place", "order"):
        out = tmp_path / f"m-{name}"
        assert main(["-q", "merge", str(tmp_path / "s1.npz"), str(tmp_path / f"{name}.npz"), "-o", str(out)]) == 2
        err = capsys.readouterr().err
        assert err == (
            f"moses-recaser: error: {tmp_path / name}.npz: the shard count file is damaged or was changed after "
            "counting (its checksum does not match): count this shard again\n"
        )
        assert not out.exists()
    assert main(["-q", "merge", str(tmp_path / "s1.npz"), str(tmp_path / "s2.npz"), "-o", str(tmp_path / "m")]) == 0


def test_shard_arithmetic():
    assert [shard_range(10, i, 3) for i in (1, 2, 3)] == [(0, 3), (3, 6), (6, 10)]
    assert parse_shard("2/5") == (2, 5)
    for bad in ("0/3", "4/3", "x", "1/0"):
        with pytest.raises(RecaserError, match="`shard` must be i/N"):
            parse_shard(bad)


@pytest.fixture(scope="module")
def dev(bitext, tico) -> list[str]:
    """The dev set's training options, with its word alignment (3 L-BFGS iterations: every model compared is fitted
    alike, and any difference in what a fit reads shows in its weights after one)."""
    return [
        "--dev-source",
        str(tico / "dev.fr"),
        "--dev-target",
        str(tico / "dev.en"),
        "--dev-alignment",
        str(bitext / "dev.a"),
        "--max-iter",
        "3",
    ]


@pytest.fixture(scope="module")
def direct(bitext, dev, tmp_path_factory) -> Path:
    """The model trained in one process from the bitext, which the tests below must reproduce."""
    d = bitext
    model = tmp_path_factory.mktemp("direct") / "model"
    args = ["--source", str(d / "f"), "--target", str(d / "e"), "--alignment", str(d / "a")]
    assert main(["-q", "train", *args, *dev, "-o", str(model)]) == 0
    return model


def test_training_from_merged_shards_equals_training_from_the_bitext(bitext, dev, direct, tmp_path):
    d = bitext
    args = ["--source", str(d / "f"), "--target", str(d / "e"), "--alignment", str(d / "a")]
    shards = []
    for i in (1, 2):
        shards.append(str(tmp_path / f"s{i}.npz"))
        assert main(["-q", "count", *args, "--shard", f"{i}/2", "-o", shards[-1]]) == 0
    assert main(["-q", "merge", *shards, "-o", str(tmp_path / "merged")]) == 0
    assert main(["-q", "train", "--stats", str(tmp_path / "merged"), *dev, "-o", str(tmp_path / "scaled")]) == 0
    one, scaled = read_manifest(direct), read_manifest(tmp_path / "scaled")
    # tables, punctuation counts, LM: byte for byte
    assert one.files == scaled.files
    assert one.extra["weights"] == scaled.extra["weights"]
    assert one.signature == scaled.signature


def test_counting_in_two_processes_gives_the_same_model(bitext, dev, direct, tmp_path):
    """``train --jobs 2`` (EMS: ``-cores 2``) counts in worker processes: the model is the one of one process,
    and the workers end without a traceback on stderr (EMS reads one as a crash)."""
    d = bitext
    common = ["--source", str(d / "f"), "--target", str(d / "e"), "--alignment", str(d / "a"), *dev]
    proc = subprocess.run(
        [CLI, "-q", "train", *common, "--jobs", "2", "-o", str(tmp_path / "two")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "KeyboardInterrupt" not in proc.stderr, proc.stderr
    one, two = read_manifest(direct), read_manifest(tmp_path / "two")
    assert one.files == two.files and one.extra["weights"] == two.extra["weights"]


def test_train_needs_a_bitext_or_statistics(tico, capsys):
    assert (
        main(["train", "--dev-source", str(tico / "dev.fr"), "--dev-target", str(tico / "dev.en"), "-o", "never"]) == 2
    )
    assert "--stats" in capsys.readouterr().err


def test_train_stats_refuses_conflicting_inputs_and_old_models(bitext, tico, tmp_path, capsys):
    import yaml

    d = bitext
    args = ["--source", str(d / "f"), "--target", str(d / "e"), "--alignment", str(d / "a")]
    assert main(["-q", "stats", *args, "-o", str(tmp_path / "stats")]) == 0
    dev = ["--dev-source", str(tico / "dev.fr"), "--dev-target", str(tico / "dev.en")]
    assert main(["train", "--stats", str(tmp_path / "stats"), *args, *dev, "-o", str(tmp_path / "m")]) == 2
    assert "--stats replaces" in capsys.readouterr().err
    # the LM's settings are the statistics model's: given with --stats they would go unused
    (tmp_path / "other.arpa").write_bytes((tmp_path / "stats" / "lm.arpa").read_bytes())
    for extra, named in (
        (["--lm", str(tmp_path / "other.arpa")], "--lm cannot"),
        (["--lm-order", "4", "--lm-prune", "1"], "--lm-order, --lm-prune cannot"),
        (["--no-discount-fallback"], "--no-discount-fallback cannot"),  # as given, not as --discount-fallback
        # given at their defaults (the statistics model's order may be another): named, they are refused too
        (["--lm-order", "3"], "--lm-order cannot"),
        (["--discount-fallback", "--lm-prune", "0"], "--lm-prune, --discount-fallback cannot"),
    ):
        assert main(["train", "--stats", str(tmp_path / "stats"), *extra, *dev, "-o", str(tmp_path / "m")]) == 2
        assert f"{named} be combined with --stats" in capsys.readouterr().err
    # (the library tells a setting from its default, not a named default: the command line refuses those)
    with pytest.raises(RecaserError, match="`lm_order` cannot be combined with `stats`"):
        moses_recaser.train(
            tmp_path / "stats",
            tmp_path / "m",
            TrainSettings(lm_order=4),
            dev=moses_recaser.Bitext(tico / "dev.fr", tico / "dev.en"),
        )
    # a statistics model of an older format
    manifest = tmp_path / "stats" / "manifest.yaml"
    doc = yaml.safe_load(manifest.read_text(encoding="utf-8"))
    doc["format_version"] = 2
    manifest.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    assert (
        main(
            [
                "train",
                "--stats",
                str(tmp_path / "stats"),
                *dev,
                "--dev-alignment",
                str(d / "a"),
                "-o",
                str(tmp_path / "m"),
            ]
        )
        == 2
    )
    assert "written by an older moses-recaser" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()
