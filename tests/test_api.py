"""The public API (``from moses_recaser import Recaser, train``): one import, one load, one call per sentence,
and the same output as the command line on the same inputs."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import moses_recaser
from moses_recaser import Bitext, Recaser, RecaserError, RunOptions, TrainSettings, Triple, train
from moses_recaser.cli.main import main
from moses_recaser.io.lines import split_tokens


def _segments(n_src: int, n_tgt: int) -> list[tuple[int, int, int, int]]:
    """Monotone phrase pairs tiling both sides (source start, end, target start, end; inclusive)."""
    n = min(n_src, n_tgt)
    return [(j * n_src // n, (j + 1) * n_src // n - 1, j * n_tgt // n, (j + 1) * n_tgt // n - 1) for j in range(n)]


@pytest.fixture(scope="module")
def inputs(tico, tmp_path_factory):
    """The tico test set as text with a word alignment, and as a Moses -t trace with its -alignment-output-file."""
    d = tmp_path_factory.mktemp("api")
    src = (tico / "test.fr").read_text(encoding="utf-8").splitlines()
    hyp = (tico / "test.lc.en").read_text(encoding="utf-8").splitlines()
    trace, wa = [], []
    for s, h in zip(src, hyp):
        words, segs = split_tokens(h), _segments(len(split_tokens(s)), len(split_tokens(h)))
        trace.append(" ".join(" ".join(words[c : d + 1]) + f" |{a}-{b}|" for a, b, c, d in segs))
        wa.append(" ".join(f"{a}-{c}" for a, _, c, _ in segs))
    for name, lines in (("src", src), ("hyp", hyp), ("trace", trace), ("wa", wa)):
        (d / name).write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    return d, src, hyp, trace, wa


def _cli(*args: str) -> list[str]:
    out = args[args.index("-o") + 1]
    assert main(["-q", "recase", *args]) == 0
    with open(out, encoding="utf-8") as fh:
        return fh.read().splitlines()


def test_the_issue_example_is_one_import_one_load_one_call(tico):
    code = (
        "from moses_recaser import Recaser; r = Recaser.load(M); "
        "print(r.recase('the united states .', source='les États-Unis .', alignment='0-0 1-1 1-2 2-3'))"
    ).replace("M", repr(str(tico / "model")))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    words = done.stdout.split()
    assert [w.lower() for w in words] == ["the", "united", "states", "."]
    assert words[1] == "United"  # the source's capital, carried by the link


def test_api_equals_cli_on_text_with_links(tico, inputs, tmp_path):
    d, src, hyp, _, wa = inputs
    out = str(tmp_path / "cli")
    cli = _cli("--model", str(tico / "model"), "--source", str(d / "src"), "--input", str(d / "hyp"),
               "--alignment", str(d / "wa"), "-o", out)  # fmt: skip
    r = Recaser.load(tico / "model")
    assert list(r.recase_lines(hyp, src, wa)) == cli
    assert [r.recase(h, source=s, alignment=a) for h, s, a in zip(hyp, src, wa)] == cli
    # index pairs are the same links as the Pharaoh line
    pairs = [[tuple(map(int, x.split("-"))) for x in a.split()] for a in wa]
    assert list(r.recase_lines(hyp, src, pairs, jobs=2)) == cli
    # and the links matter: without them (source only) some line comes out otherwise
    assert list(r.recase_lines(hyp, src)) != cli


def test_api_equals_cli_on_a_trace(tico, inputs, tmp_path):
    d, src, _, trace, wa = inputs
    out = str(tmp_path / "cli")
    cli = _cli("--model", str(tico / "model"), "--source", str(d / "src"), "--trace", str(d / "trace"),
               "--alignment", str(d / "wa"), "-o", out)  # fmt: skip
    r = Recaser.load(tico / "model")
    assert list(r.recase_lines(trace, src, wa, trace_format="trace")) == cli
    assert r.recase(trace[0], source=src[0], alignment=wa[0], trace_format="trace") == cli[0]
    assert "|" not in "".join(cli)


def test_api_equals_cli_monolingual(tico, inputs, tmp_path):
    d, _, hyp, _, _ = inputs
    out = str(tmp_path / "cli")
    cli = _cli("--model", str(tico / "model"), "--input", str(d / "hyp"), "-o", out)
    r = Recaser.load(tico / "model")
    # lines as a file gives them, newline and all
    with open(d / "hyp", encoding="utf-8") as fh:
        assert list(r.recase_lines(fh)) == cli
    assert r.recase(hyp[0]) == cli[0]


def test_case_only_and_signature(tico):
    r = Recaser.load(tico / "model")
    out = r.recase("the who published a report on covid-19 in geneva .")
    assert out.lower() == "the who published a report on covid-19 in geneva ."
    assert r.signature.startswith("moses-recaser:") and "|w:" in r.signature


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda r: r.recase("a b", alignment="0-0"), "give the source too"),
        (lambda r: r.recase("a\nb"), "hyps:1: a line break inside the line"),
        (lambda r: r.recase("a b", source="A B", alignment="0-0 5-1"), "outside"),
        (lambda r: r.recase("a b", source="A B", alignment=[(0, 0.5)]), "index pairs"),
        (lambda r: r.recase("a |0-0|", source="A", trace_format="nbest"), "choose one of trace, text"),
        (lambda r: list(r.recase_lines(["a", "b"], ["A"])), "hyps:2: line-count mismatch: sources has only 1 lines"),
        (lambda r: list(r.recase_lines(["a"], ["A"], ["0-0", "0-0"])), "alignments:2: line-count mismatch: hyps has"),
        (lambda r: list(r.recase_lines(["a"], ["A " * 10_001])), "sources:1: 10001 tokens on one line"),
        (lambda r: r.recase(b"a b"), "must be a str"),  # type: ignore[arg-type]
        (lambda r: r.recase("a " * 10_001), "hyps:1: 10001 tokens on one line"),
        # what the command line refuses in a file is refused here too, not a UnicodeEncodeError at the output
        (lambda r: r.recase("the \ud800 cat"), "hyps:1: character 4 of the line is not text"),
        (lambda r: r.recase("a\0b"), "hyps:1: a NUL at character 1"),
        (lambda r: r.recase(None), "hyps:1: a line must be a str, got NoneType"),  # type: ignore[arg-type]
        (lambda r: list(r.recase_lines(["a"], [None])), "sources:1: a line must be a str"),  # type: ignore[list-item]
        # a str is an iterable of characters: each would be recased as a line
        (lambda r: list(r.recase_lines("the cat")), "hyps must be an iterable of lines"),
        (lambda r: list(r.recase_lines(["a"], "A")), "sources must be an iterable of lines"),
        # a Triple made by hand is checked as a line read from a file is
        (
            lambda r: list(r.recase_triples([Triple(0, ["A"], ["a"]), Triple(1, ["A"], ["a"], links=[(0, 5)])])),
            "triples:2: alignment link 0-5 is outside",
        ),
        (lambda r: r.explain(Triple(0, ["A", "B"], ["a", "b"], phrases=[(0, 1, 0, 3)])), "triples:1: "),
        # a count of processes as a string (read from a config) is refused by name, not a TypeError
        (lambda r: list(r.recase_lines(["a"], jobs="2")), "`jobs` must be a whole number of processes, not '2'"),  # type: ignore[arg-type]
        (lambda r: list(r.recase_lines(["a"], jobs=0)), "`jobs` must be between 1 and"),
        (lambda r: train("s", "m", run=RunOptions(jobs=2.0)), "`jobs` must be a whole number"),  # type: ignore[arg-type]
        # settings refused before any work, not a model that load refuses, nor a TypeError midway
        (
            lambda r: train("s", "m", settings=TrainSettings(max_candidates=0)),
            "`max_candidates` must be at least 1",
        ),
        (
            lambda r: train("s", "m", settings=TrainSettings(sigma="1")),
            "setting `sigma` must be a number, not '1'",
        ),
        (
            lambda r: train("s", "m", settings=TrainSettings(monolingual="a.en")),
            "setting `monolingual` must be a list",
        ),
        (lambda r: train("s", "m", run=RunOptions(memory=1)), "`memory` of 1 bytes is too small"),
        (
            lambda r: train("s", "m", settings=TrainSettings(heldout_sentences=-5)),
            "`heldout_sentences` must be at least 0",
        ),
        (
            lambda r: train("s", "m", settings=TrainSettings(symmetrization="nope")),
            "`symmetrization` is 'nope'; choose",
        ),
        (
            lambda r: train("s", "m", settings=TrainSettings(sigma_grid=["a"])),
            "setting `sigma_grid` holds 'a', not a number",
        ),
        (
            lambda r: train("s", "m", settings=TrainSettings(npa_lengths={1: "b"})),
            "setting `npa_lengths` holds 'b', not a",
        ),
        (lambda r: train("s", "m", dev_size="5"), "`dev_size` must be a whole number"),  # type: ignore[arg-type]
        (lambda r: train("s", "m", dev=5), "`dev` must be a Bitext, not int"),  # type: ignore[arg-type]
        (lambda r: train("s", "m"), "with a statistics model, give the dev set"),
        (lambda r: train("s", "m", run="fast"), "`run` must be a RunOptions, not str"),  # type: ignore[arg-type]
        (lambda r: train("s", "m", raw="yes"), "`raw` must be a bool, not str"),  # type: ignore[arg-type]
        (lambda r: train("s", "m", dev_output="t"), "`dev_output` must be a DecoderOutput, not str"),  # type: ignore[arg-type]
        (lambda r: r.recase("a", trace_format=[]), "trace_format is \\[\\]; choose one of"),  # type: ignore[arg-type]
        (lambda r: r.recase("a", trace_options=5), "trace_options must be a TraceOptions, not int"),  # type: ignore[arg-type]
        (lambda r: list(r.recase_triples(None)), "triples must be an iterable"),  # type: ignore[arg-type]
        (lambda r: moses_recaser.read_lines(5), "read_lines takes a file name, not 5"),  # type: ignore[arg-type]
        (lambda r: train(Bitext(5, "t.en"), "m"), "`source` must be a file name, not 5"),  # type: ignore[arg-type]
        (lambda r: train("s", None), "`model` must be a file name, not None"),  # type: ignore[arg-type]
        (lambda r: Recaser.load(""), "a model is a directory name, not ''"),
        (lambda r: list(r.recase_lines(5)), "hyps must be an iterable of lines"),  # type: ignore[arg-type]
        (lambda r: list(r.recase_lines(b"the cat")), "hyps must be an iterable of lines .* not bytes"),  # type: ignore[arg-type]
        # a Triple made by hand is checked as a JSON Lines triple is
        (lambda r: list(r.recase_triples([Triple(0, ["A"], ["a"], unknown=[7])])), "triples:1: 'unknown' position 7"),
        (lambda r: list(r.recase_triples([Triple(0, ["A"], ["a\ud800"])])), "triples:1: 'target' entry 0 holds a lone"),
        (lambda r: list(r.recase_triples(["a b"])), "triples:1: an item must be a Triple, not str"),  # type: ignore[list-item]
        (lambda r: __import__("pickle").dumps(r), "a Recaser cannot be pickled"),
    ],
)
def test_errors_are_recaser_errors_with_a_place(tico, call, message):
    r = Recaser.load(tico / "model")
    with pytest.raises(RecaserError, match=message.replace("|", r"\|")):
        call(r)


def test_load_refuses_what_is_not_a_model(tmp_path):
    with pytest.raises(RecaserError):
        Recaser.load(tmp_path)
    with pytest.raises(RecaserError, match="`read` is 'words'"):
        Recaser.load(tmp_path, read="words")
    # what the system refuses to open or read is one RecaserError naming the path (it was a bare OSError)
    long_name = str(tmp_path / ("y" * 300))
    with pytest.raises(RecaserError, match="cannot read the model: File name too long") as caught:
        Recaser.load(long_name)
    assert caught.value.path == long_name
    with pytest.raises(RecaserError, match="^/proc/self/mem: cannot read the model: Input/output error"):
        Recaser.load("/proc/self/mem")


def test_public_names_are_listed_and_documented():
    for name in moses_recaser.__all__:
        obj = getattr(moses_recaser, name)
        assert name == "__version__" or obj.__doc__, name
    with pytest.raises(AttributeError):
        moses_recaser.no_such_name  # noqa: B018


def test_train_holds_out_dev_and_refuses_unknown_settings(tico, tico_aligned, tmp_path):
    bitext = Bitext(tico_aligned / "f", tico_aligned / "e", tico_aligned / "a")
    with pytest.raises(TypeError, match="sigmma"):  # settings come as one typed object
        moses_recaser.train(bitext, tmp_path / "m", sigmma=2.0)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="target"):  # a bitext is two files
        moses_recaser.train(Bitext(tico / "train.fr"), tmp_path / "m")  # type: ignore[call-arg]
    # no dev set: the last pairs of the bitext (and their links) fit the weights (100 of 700: at most a tenth)
    model = moses_recaser.train(bitext, tmp_path / "m", TrainSettings(max_iter=5), dev_size=100)
    r = Recaser.load(model)
    assert "sigma:1" in r.signature
    assert r.recase("the who .").lower() == "the who ."


def _made_up_words(n: int, seed: int) -> list[str]:
    """Lines of words no model has seen (as a stream of names, numbers and URLs brings them)."""
    import random

    rng = random.Random(seed)
    return [
        " ".join(["the"] + ["".join(rng.choices("bcdfghklmnpqrstvz", k=7)) for _ in range(6)] + ["."]) for _ in range(n)
    ]


def test_a_recaser_shared_by_threads_answers_as_one_thread_does(tico):
    """Threads of a server sharing one Recaser: each line comes back as a lone Recaser recases it (the registry
    of word types that every batch updates was changed by two at once: IndexErrors, and a false 'damaged')."""
    import threading

    hyp = (tico / "test.lc.en").read_text(encoding="utf-8").splitlines() + _made_up_words(200, 1)
    expected = list(Recaser.load(tico / "model").recase_lines(hyp))
    shared, got, errors = Recaser.load(tico / "model"), [None] * len(hyp), []

    def work(part: int) -> None:
        try:
            for i in range(part, len(hyp), 3):
                got[i] = shared.recase(hyp[i])
        except Exception as exc:  # noqa: BLE001 (reported below)
            errors.append(repr(exc))

    threads = [threading.Thread(target=work, args=(p,)) for p in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and got == expected


def test_a_batch_ended_midway_leaves_the_recaser_as_it_was(tico, monkeypatch):
    """Ctrl-C (or any exception) between two steps of a batch's update of the word types: the next calls answer
    as a fresh Recaser does (they used to fail with IndexErrors until the model was loaded again)."""
    from moses_recaser.core.columns import Columns
    from moses_recaser.core.vocab import Vocab
    from moses_recaser.model.candidates import Candidates
    from moses_recaser.model.extractor import FeatureExtractor

    hyp = (tico / "test.lc.en").read_text(encoding="utf-8").splitlines() + _made_up_words(100, 2)
    src = ["X"] * len(hyp)  # source words the model never saw: their types are described too
    expected = list(Recaser.load(tico / "model").recase_lines(hyp, src))
    # new types numbered but not yet described; candidates numbered, their facts not added; facts added, the
    # rest of the batch not
    for owner, name in ((Vocab, "add_all"), (Candidates, "_describe"), (Columns, "add"), (FeatureExtractor, "_spans")):
        r = Recaser.load(tico / "model")
        step = getattr(owner, name)

        def interrupted(*args, step=step, **kwargs):  # type: ignore[no-untyped-def]
            step(*args, **kwargs)
            raise KeyboardInterrupt

        monkeypatch.setattr(owner, name, interrupted)
        with pytest.raises(KeyboardInterrupt):
            list(r.recase_lines(hyp, src))
        monkeypatch.setattr(owner, name, step)
        assert list(r.recase_lines(hyp, src)) == expected, name


def test_the_word_types_a_recaser_keeps_are_bounded(tico, monkeypatch):
    """A long-running process that meets new words all the time: past MAX_TYPES_MET types met, the Recaser
    forgets them (it held every type it ever met: 2.6 GB after a million), and answers as before."""
    import moses_recaser.model.recaser as recaser

    hyp = _made_up_words(300, 3)
    expected = list(Recaser.load(tico / "model").recase_lines(hyp))
    monkeypatch.setattr(recaser, "MAX_TYPES_MET", 500)
    r = Recaser.load(tico / "model")
    got = []
    for k in range(0, len(hyp), 50):
        got += r.recase_lines(hyp[k : k + 50])
        assert r.extractor.types_met() <= 500 + 2 * 50 * 8  # one batch's types past the bound, at most
    assert got == expected


def test_a_byte_order_mark_is_dropped_as_the_command_line_drops_it(tico, tmp_path):
    """A file that starts with a UTF-8 BOM, opened with ``open()`` as the README does: the same lines as the
    command line gives (the first came back as '\\ufeffThe ...')."""
    path = tmp_path / "bom.en"
    path.write_text("\ufeff" + (tico / "test.lc.en").read_text(encoding="utf-8"), encoding="utf-8")
    cli = _cli("--model", str(tico / "model"), "--input", str(path), "-o", str(tmp_path / "cli"))
    with open(path, encoding="utf-8") as fh:
        assert list(Recaser.load(tico / "model").recase_lines(fh)) == cli
    assert not cli[0].startswith("\ufeff")


def test_a_u_feff_is_a_byte_order_mark_only_where_a_text_file_starts(tico, tmp_path):
    """``recase`` of one sentence, or a list of lines, is not a file: a U+FEFF that starts it is part of its
    first token (it was dropped on every call, a token lost: '\ufeff' gave ''). A file from ``open()`` drops it as
    the command line does; ``read_lines`` has dropped it already (a second one was dropped too). An alignment
    cannot hold one: there it is always a byte-order mark."""
    r = Recaser.load(tico / "model")
    for line in ["\ufeff", "\ufeff the cat .", "\ufeffthe cat ."]:
        out = r.recase(line)
        assert out.split(" ")[0].lower() == line.split(" ")[0].lower() and len(out) == len(line)
    lines = ["\ufeff the cat .", "\ufeff the cat ."]
    assert list(r.recase_lines(lines)) == [r.recase(lines[0])] * 2
    assert r.recase("the cat .", source="le chat .", alignment="\ufeff0-0 1-1 2-2") == r.recase(
        "the cat .", source="le chat .", alignment="0-0 1-1 2-2"
    )
    path = tmp_path / "two.en"
    path.write_text("\ufeff\ufeffthe united states .\n", encoding="utf-8")
    cli = _cli("--model", str(tico / "model"), "--input", str(path), "-o", str(tmp_path / "cli"))
    assert cli[0].startswith("\ufeff") and list(r.recase_lines(moses_recaser.read_lines(path))) == cli
    with open(path, encoding="utf-8") as fh:
        assert list(r.recase_lines(fh)) == cli


def test_read_lines_gives_the_lines_the_command_line_reads(tico, tmp_path):
    """Carriage returns (a lone one inside a line, \\r\\n line ends) and a byte-order mark: recase_lines over
    read_lines gives the command line's output, line for line (a lone \\r was refused as a line break, and a
    file from open() splits there: one line more)."""
    path = tmp_path / "cr.en"
    lines = (tico / "test.lc.en").read_text(encoding="utf-8").splitlines()[:20]
    lines[3] = lines[3].replace(" ", "\r", 1)
    path.write_bytes(("\ufeff" + "".join(x + "\r\n" for x in lines)).encode("utf-8"))
    assert (
        main(["-q", "recase", "--model", str(tico / "model"), "--input", str(path), "-o", str(tmp_path / "cli")]) == 0
    )
    cli = (tmp_path / "cli").read_bytes().decode("utf-8").split("\n")[:-1]
    r = Recaser.load(tico / "model")
    assert list(r.recase_lines(moses_recaser.read_lines(path))) == cli and len(cli) == 20 and "\r" in cli[3]
    with open(path, encoding="utf-8") as fh:
        assert len(list(r.recase_lines(fh))) == 21  # Python's universal newlines


def test_a_stream_that_cannot_be_decoded_is_a_recaser_error(tico, tmp_path):
    path = tmp_path / "bad.en"
    path.write_bytes(b"the cat .\nthe \xff dog .\n")
    r = Recaser.load(tico / "model")
    with open(path, encoding="utf-8") as fh, pytest.raises(RecaserError, match="^sources: cannot be decoded after"):
        list(r.recase_lines(["a .", "b ."], fh))
    with pytest.raises(RecaserError, match=f"^{path}:2: invalid UTF-8 at byte 4"):
        list(r.recase_lines(moses_recaser.read_lines(path)))


def test_an_exception_of_the_callers_own_iterable_passes_as_it_is(tico):
    """Only a text file object's failure to decode is told as a RecaserError naming the stream: a UnicodeDecodeError
    the caller's own generator raises is theirs."""
    mine = UnicodeDecodeError("utf-8", b"\xff", 0, 1, "from my database")

    def hyps():
        yield "the cat ."
        raise mine

    with pytest.raises(UnicodeDecodeError) as caught:
        list(Recaser.load(tico / "model").recase_lines(hyps()))
    assert caught.value is mine


@pytest.mark.parametrize(
    "values", [{"unknown_prefix": 3}, {"xml_input": "no"}, {"factor_delimiter": None}, {"unknown_suffix": b"x"}]
)
def test_trace_options_of_the_wrong_type_are_refused(values):
    """unknown_prefix=3 was a TypeError deep in the trace reader; xml_input="no" (true) turned XML stripping on."""
    with pytest.raises(RecaserError, match=f"TraceOptions {next(iter(values))} is"):
        moses_recaser.TraceOptions(**values)


def test_a_scratch_directory_inside_the_model_is_refused_before_work(tico, tmp_path):
    """work=MODEL made the run's scratch directory inside the model it replaces, then blamed the user for a
    file in the model ('also holds .moses-recaser...work; move them out')."""
    import shutil

    model = tmp_path / "model"
    shutil.copytree(tico / "model", model)
    before = sorted(p.name for p in model.iterdir())
    for work in (model, model / "sub"):
        with pytest.raises(RecaserError, match="`work` is inside the model directory"):
            train(
                Bitext(tico / "train.fr", tico / "train.en"),
                model,
                dev=Bitext(tico / "dev.fr", tico / "dev.en"),
                run=RunOptions(work=work),
            )
        assert sorted(p.name for p in model.iterdir()) == before


def test_what_train_records_from_its_inputs_is_not_a_setting():
    """The derived settings (the aligner run or not, lmplz, decoder output for dev, the monolingual digest) are no
    arguments of TrainSettings: what the signature says of them is train's, from its inputs. A copy keeps them."""
    from moses_recaser.model.settings import DERIVED

    for name in DERIVED:
        with pytest.raises(TypeError):
            TrainSettings(**{name: None})
    made = TrainSettings().changed(dev_decoded=True, lm_estimator="lmplz")
    assert made.changed(sigma=2.0).signature() == made.signature().replace("sigma:1", "sigma:2")
    assert TrainSettings.recorded({"dev_decoded": True, "sigma": 2.0}) == made.changed(lm_estimator="kn", sigma=2.0)


def test_train_returns_the_model_and_its_signature(tico, tico_aligned, tmp_path):
    """``train`` is the one entry point of training (the command lines, the EMS step, the experiments and the
    tests' fixtures call it): it returns the model's path and signature, and is a path itself."""
    from moses_recaser import TrainedModel

    a = tico_aligned  # the links made once for the suite: eflomal is not the subject
    made = train(Bitext(a / "f", a / "e", a / "a"), tmp_path / "m", TrainSettings(max_iter=2), dev=Bitext(tico / "dev.fr", tico / "dev.en", a / "dev.a"))  # fmt: skip
    assert isinstance(made, TrainedModel) and made.path == tmp_path / "m" and os.fspath(made) == str(tmp_path / "m")
    assert made.signature == Recaser.load(made).signature and "|w:" in made.signature


def test_recase_file_checks_its_files_before_any_work_as_the_command_does(tico, tmp_path):
    """The library's recase_file refuses an output that is its source (the command line's check, where a Python
    caller gets it too), an input that is not there, and two inputs on one stream; the source is left whole."""
    r = Recaser.load(tico / "model")
    src = tmp_path / "src"
    src.write_bytes((tico / "test.fr").read_bytes())
    with pytest.raises(RecaserError, match="also the file given as `source`"):
        r.recase_file(str(tico / "test.lc.en"), str(src), source=str(src), align=True)
    assert src.read_bytes() == (tico / "test.fr").read_bytes()
    with pytest.raises(RecaserError, match="no such file"):
        r.recase_file(str(tmp_path / "missing"), str(tmp_path / "out"))
    with pytest.raises(RecaserError, match="`input` and `source` both read standard input"):
        r.recase_file("-", str(tmp_path / "out"), source="-", align=True)
    assert not (tmp_path / "out").exists()


def test_every_public_function_that_writes_refuses_an_output_that_is_one_of_its_inputs(tico_aligned, tmp_path):
    """The front door's functions check their files as the command line does (io.checks.check_files): an output
    that is an input (also through a symbolic link) is refused before any work, the input left whole; a value
    that is not a file name is a RecaserError naming the argument, not a TypeError midway."""
    import shutil

    from moses_recaser import (
        DEFAULT_MEMORY,
        RecaseStep,
        TrainStep,
        align,
        count_shard,
        make_lm,
        make_triples,
        phrase_align,
        recase_step,
        train_step,
    )

    for name in ("f", "e", "a"):
        shutil.copyfile(tico_aligned / name, tmp_path / name)
    f, e, a = (str(tmp_path / n) for n in ("f", "e", "a"))
    (tmp_path / "link").symlink_to(tmp_path / "e")
    before = {p: (tmp_path / p).read_bytes() for p in ("f", "e", "a")}
    calls = [
        (lambda: make_triples(f, f, target=e, alignment=a), "`output` is also|also the file given as `source`"),
        (lambda: make_lm(e, str(tmp_path / "link")), "also the file given as `input`"),
        (lambda: phrase_align(f, e, a, a), "also the file given as `alignment`"),
        (lambda: align(f, e, str(tmp_path / "o"), priors_out=e), "also the file given as `target`"),
        (lambda: count_shard(Bitext(f, e, a), "1/2", f, memory=DEFAULT_MEMORY), "also the file given as `source`"),
        (
            lambda: recase_step(RecaseStep(infile=e, model=str(tmp_path), output=f, source=f, trace=e)),
            "also the file given as `source`",
        ),
        (
            lambda: train_step(TrainStep(str(tmp_path / "d"), e, e, f, a, {"dev_size": 50})),
            "also the file given as `corpus`",
        ),
        (lambda: make_lm(5, str(tmp_path / "lm")), "`input` must be a file name, not 5"),  # type: ignore[arg-type]
        (lambda: make_lm(e, str(tmp_path / "lm"), lm_order="3"), "`lm_order` must be a whole number"),  # type: ignore[arg-type]
        (lambda: count_shard(f, "1/2", str(tmp_path / "c")), "`bitext` must be a Bitext, not str"),  # type: ignore[arg-type]
        (lambda: make_triples(f, str(tmp_path / "t"), target=e, trace_format="x"), "`trace_format` is 'x'"),
        (lambda: train(None, tmp_path / "m"), "give the training bitext"),  # type: ignore[arg-type]
    ]
    for call, said in calls:
        with pytest.raises(RecaserError, match=said):
            call()
    assert {p: (tmp_path / p).read_bytes() for p in ("f", "e", "a")} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "e", "f", "link"]


def test_train_refuses_an_input_inside_the_model_it_replaces_before_reading_the_corpus(tico_aligned, tmp_path, caplog):
    """A statistics model, an LM or a corpus in the directory the new model replaces is refused (it was replaced
    by the model trained from it), and so is a destination that cannot take a model, before the corpus is read."""
    import logging

    stats = tmp_path / "stats"
    a = tico_aligned
    bitext = Bitext(a / "f", a / "e", a / "a")
    moses_recaser.statistics(bitext, stats)
    with pytest.raises(RecaserError, match="`stats` is inside the model directory"):
        train(stats, stats, dev=Bitext(a / "f", a / "e", a / "a"))
    with pytest.raises(RecaserError, match="`lm` is inside the model directory"):
        train(bitext, stats, TrainSettings(lm=str(stats / "lm.arpa")))
    assert (stats / "manifest.yaml").is_file() and (stats / "lm.arpa").is_file()
    with caplog.at_level(logging.INFO, logger="moses_recaser"):
        with pytest.raises(RecaserError):
            train(bitext, a / "f")  # a file, not a model directory
    assert "fitting the weights" not in caplog.text  # (the held-out dev set is counted after the check)
