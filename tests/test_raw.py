"""Raw text in, raw text out (#49): recased Moses tokens projected back onto the raw line (moses.raw). The output
is the input line with only the case of its letters changed, whatever the tokens and whatever the recaser says."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from moses_recaser.core import casing
from moses_recaser.moses.raw import locate, project, unescape
from moses_recaser.moses.tokenizer import tokenizer

ROOT = Path(__file__).parents[1]
WMT = ROOT.parent / "shared" / "corpora" / "wmt-system-outputs" / "wmt21" / "txt"
SIGMAS = {"σ", "ς", "Σ"}


def case_only(out: str, line: str) -> None:
    """``out`` equals ``line`` under str.lower(), and every code point that changed changed by case mapping alone
    (``İ`` counted as the two characters of its lowercase; KELVIN SIGN and its like never change)."""
    assert out.lower() == line.lower()
    a, b = (x.replace(casing.DOTTED_I, "I\u0307") for x in (out, line))
    assert len(a) == len(b)
    for x, y in zip(a, b):
        if x != y:
            assert x.lower() == y.lower() or {x, y} <= SIGMAS, (x, y)
            assert x not in casing.VARIANTS and y not in casing.VARIANTS


def recased_with(line: str, lang: str, how) -> str:
    tokens = tokenizer(lang)(line)
    return project(line, tokens, [how(t) for t in tokens])


def test_every_other_byte_is_the_inputs():
    line = 'the u.s. president\'s visit, on monday... "ok" & <b> at http://x.com/a?b=c&d=e 😀\t[a|b]  end .\r'
    out = recased_with(line, "en", casing.upper_all)
    assert out == line.upper()  # (ASCII letters only: every one of them was in a token)
    case_only(out, line)
    assert recased_with(line, "en", casing.upper_first).startswith(
        'The U.s. President\'S Visit, On Monday... "Ok" & <B> At'
    )  # ('s: a token)


def test_the_tokens_are_found_where_the_tokenizer_changed_nothing_else():
    line = "l'homme  a\tdit : « x » & co."
    tokens = tokenizer("fr")(line)
    assert "&amp;" in tokens  # the model's vocabulary is escaped; the line is not
    for token, pos in zip(tokens, locate(line, tokens)):
        assert pos is not None and "".join(line[p] for p in pos) == unescape(token)


@given(st.text(alphabet="&|<>'\"[]ab;#", max_size=30))
def test_unescape_inverts_the_tokenizers_escaping(text):
    from sacremoses import MosesTokenizer

    assert unescape(MosesTokenizer(lang="en").escape_xml(text)) == text


def test_a_control_character_inside_a_word_stays_and_the_word_is_recased():
    line = "ab\x01cd ef"
    assert recased_with(line, "en", casing.upper_all) == "AB\x01CD EF"


def test_a_token_the_tokenizer_changed_is_left_as_it_is():
    # sacremoses' marker for runs of dots: a literal DOTDOTMULTI comes back as ".."
    line = "xdotdotmultiy and xDOTDOTMULTIy then more"
    out = recased_with(line, "en", casing.upper_all)
    assert out == "XDOTDOTMULTIY AND xDOTDOTMULTIy THEN MORE"


def test_a_recased_token_that_is_not_a_recasing_changes_nothing():
    line = "the cat & the <dog>"
    tokens = tokenizer("en")(line)
    assert project(line, tokens, ["a" * len(t) for t in tokens]) == line
    assert project(line, tokens, [t.replace("&", "&AMP") if t == "&amp;" else t for t in tokens]) == line
    assert project(line, tokens, [t.upper() for t in tokens]) == "THE CAT & THE <DOG>"  # (&AMP; &LT; left out)


@pytest.mark.parametrize(
    ("line", "how", "expected"),
    [
        ("\u212aelvin 5 \u212a, 3 \u2126, 1 \u212b", casing.upper_all, "\u212aELVIN 5 \u212a, 3 \u2126, 1 \u212b"),
        ("\u212aELVIN \u2126", casing.lower_all, "\u212aelvin \u2126"),
        ("straße", casing.upper_all, "STRAßE"),  # "SS" would change the length
        ("STRAẞE", casing.lower_all, "straße"),
        ("ırmak istanbul", casing.upper_first, "ırmak Istanbul"),  # I would lowercase to i
        ("İSTANBUL", casing.lower_all, "İSTANBUL"),  # its lowercase, i̇stanbul, is longer: the token stays
        ("οδος μας", casing.upper_all, "ΟΔΟΣ ΜΑΣ"),
        ("ΟΔΟΣ ΜΑΣ", casing.lower_all, "οδος μας"),
        ("οδος'α", casing.upper_all, "οδος'Α"),  # ΟΔΟΣ'Α would lowercase to οδοσ'α: that token stays
        ("ǆemal ǆ", casing.upper_first, "ǅemal ǅ"),
        ("ǆemal", casing.upper_all, "ǄEMAL"),
    ],
)
def test_special_letters_as_the_token_mode_handles_them(line, how, expected):
    out = recased_with(line, "en", how)
    assert out == expected
    case_only(out, line)


def test_a_dotted_i_written_as_one_character_as_the_token_mode_writes_it():
    line = "i\u0307stanbul"
    tokens = ["i\u0307stanbul"]  # as a tokenizer that keeps combining marks would cut it
    out = project(line, tokens, ["İstanbul"])
    assert out == "İstanbul"
    case_only(out, line)


TRICKY = "aAbzZ ßẞıIİi\u0307σςΣǅǆǄ\u212a\u2126\u212bkKΩå'\".,&<>|[]-\t\r\x01\u00a0😀é\u0301"
TAGS = [casing.lower_all, casing.upper_first, casing.upper_all, lambda t: t, str.upper, str.swapcase, str.title]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=TRICKY, max_size=40), st.lists(st.sampled_from(range(len(TAGS))), min_size=1), st.data())
def test_the_output_is_the_input_in_another_case_whatever_the_tokens_become(line, tags, data):
    tokens = tokenizer(data.draw(st.sampled_from(["en", "fr", "de"])))(line)
    recased = [TAGS[tags[k % len(tags)]](t) for k, t in enumerate(tokens)]
    out = project(line, tokens, recased)
    case_only(out, line)
    assert project(line, tokens, tokens) == line
    if len(out) == len(line):  # (no İ written for i̇): what is outside the tokens found is as it was
        found = {p for pos in locate(line, tokens) if pos for p in pos}
        assert all(out[p] == c for p, c in enumerate(line) if p not in found)


def shipped_lines() -> list[tuple[str, str]]:
    lang = {"en": "en", "fr": "fr"}
    files = [ROOT / "data" / "tico19" / f"tico19-test.{x}" for x in lang]
    files += sorted((ROOT / "tests" / "data" / "wmt21-zh-en").glob("*.en"))
    return [(line, f.suffix[1:]) for f in files for line in f.read_text(encoding="utf-8").splitlines()]


def check_restores(pairs: list[tuple[str, str]]) -> int:
    """Each lowercased line recased with the tokens of the line it came from comes back as that line, byte for
    byte, where the two tokenize alike; returns how many did. (The lowercased line is tokenized as raw mode
    tokenizes a line without capitals, ``caseless``: tokenizer.perl's own rules read case, "Jan." is one token and
    "jan." two, "ends. The" three and "ends. the" two.)"""
    restored = 0
    for line, lang in pairs:
        low = line.lower()
        tokens, cased = tokenizer(lang, caseless=True)(low), tokenizer(lang)(line)
        case_only(recased_with(low, lang, casing.upper_all), low)
        if len(tokens) != len(cased):
            continue
        out = project(low, tokens, cased)
        case_only(out, low)
        assert casing.is_recasing_of(line, low)  # (so are all their lines)
        if all(map(casing.is_recasing_of, cased, tokens)):
            assert out == line
            restored += 1
    return restored


def test_the_shipped_corpora_come_back_as_they_were():
    pairs = shipped_lines()
    assert check_restores(pairs) > 0.99 * len(pairs)


def test_a_line_without_capitals_is_tokenized_as_it_would_be_in_its_case():
    """On the shipped corpora the caseless tokenizer gives a lowercased line the tokens of the cased line (but
    for their case) on more than 99% of lines; tokenizer.perl's rules, which read case, on under 96%."""
    pairs = shipped_lines()

    def alike(caseless: bool) -> int:
        return sum(
            tokenizer(lang, caseless=caseless)(line.lower()) == [t.lower() for t in tokenizer(lang)(line)]
            for line, lang in pairs
        )

    assert alike(True) > 0.99 * len(pairs) and alike(False) < 0.96 * len(pairs)
    assert tokenizer("de", caseless=True)("die nr. 5 kam. er ging z.b. am 3. mai.") == (
        "die nr. 5 kam . er ging z.b. am 3. mai .".split()
    )


def test_wmt21_system_outputs_come_back_as_they_were():
    if not WMT.is_dir():
        pytest.skip(f"needs the WMT21 system outputs in {WMT} (the project's shared corpora)")
    pairs = []
    for f in sorted((WMT / "system-outputs").glob("*.hyp.*")):
        if f.suffix[1:] in ("en", "de", "fr"):
            pairs += [(line, f.suffix[1:]) for line in f.read_text(encoding="utf-8").splitlines()[:20]]
    assert check_restores(pairs) > 0.99 * len(pairs)


# recasing raw lines with a model -------------------------------------------------------------------------------
def raw_slice(lang: str, lines: slice = slice(1950, 1990)) -> list[str]:
    return (ROOT / "data" / "tico19" / f"tico19-test.{lang}").read_text(encoding="utf-8").splitlines()[lines]


def test_a_raw_line_is_recased_as_its_tokens_are_and_projected_back(tico):
    from moses_recaser import Recaser

    r = Recaser.load(tico / "model")
    low = [x.lower() for x in raw_slice("en")]
    out = list(r.recase_lines(low, raw=True, target_lang="en"))
    tok = tokenizer("en", caseless=True)  # (lines without capitals)
    tokenized = list(r.recase_lines([" ".join(tok(x)) for x in low]))
    assert out == [project(x, tok(x), y.split(" ")) for x, y in zip(low, tokenized)]
    for x, y in zip(out, low):
        case_only(x, y)
    assert sum(x != y for x, y in zip(out, low)) > 0.9 * len(low)


def test_raw_lines_with_their_raw_sources_are_aligned_and_recased(tico):
    from moses_recaser import Recaser

    r = Recaser.load(tico / "model")
    low = [x.lower() for x in raw_slice("en")]
    out = list(r.recase_lines(low, raw_slice("fr"), raw=True, source_lang="fr", target_lang="en"))
    for x, y in zip(out, low):
        case_only(x, y)
    assert sum(x != y for x, y in zip(out, low)) > 0.9 * len(low)
    line = 'the u.s. president\'s visit, on monday... "ok" & <b> at http://x.com/a?b=c 😀\t[a|b]  end .\r'
    one = r.recase(line, source="La visite du président, lundi.", raw=True, source_lang="fr", target_lang="en")
    case_only(one, line)
    assert one.startswith("The ")


@pytest.mark.parametrize("route", ["raw", "tokenized"])
def test_recasing_with_a_source_to_align_gives_the_same_bytes_every_run_and_at_every_jobs(tico, tmp_path, route):
    """``recase --raw --source`` and ``recase --align`` align in this process, from the model's tables: two runs,
    ``--jobs 1`` and ``--jobs 2`` (more lines than a chunk: both workers recase) give the same bytes, and
    ``recase_lines`` in the library the same lines; each a recasing of its input."""
    from moses_recaser import Recaser
    from moses_recaser.cli.main import main

    if route == "raw":
        hyps, srcs = [x.lower() for x in raw_slice("en", slice(1950, 2100))], raw_slice("fr", slice(1950, 2100))
        flags = ["--raw", "--source-lang", "fr", "--target-lang", "en"]
        kw = {"raw": True, "source_lang": "fr", "target_lang": "en"}
    else:
        hyps = (tico / "test.lc.en").read_text(encoding="utf-8").splitlines()
        srcs = (tico / "test.fr").read_text(encoding="utf-8").splitlines()
        flags, kw = ["--align"], {}
    hyps, srcs = hyps * 4, srcs * 4  # 600 lines: two chunks of recasing
    hyp, src = tmp_path / "hyp", tmp_path / "src"
    hyp.write_text("".join(x + "\n" for x in hyps), encoding="utf-8")
    src.write_text("".join(x + "\n" for x in srcs), encoding="utf-8")
    outs = []
    for jobs in ("1", "2", "1"):
        out = tmp_path / f"out{len(outs)}"
        argv = ["-q", "recase", "--model", str(tico / "model"), "--input", str(hyp), "--source", str(src)]
        assert main([*argv, *flags, "--jobs", jobs, "-o", str(out)]) == 0
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] == outs[2]
    got = outs[0].decode("utf-8").splitlines()
    if route == "raw":
        from moses_recaser.stats.table_align import TableAligner

        r = Recaser.load(tico / "model")
        assert isinstance(r.aligner, TableAligner)
        assert list(r.recase_lines(hyps, srcs, **kw)) == got == list(r.recase_lines(hyps, srcs, jobs=2, **kw))
        for x, y in zip(got, hyps):
            case_only(x, y)
        # the links it aligned with: the model's, not none (a line recased without its source differs)
        assert got != list(r.recase_lines(hyps, raw=True, target_lang="en"))
    else:
        alignment = [
            " ".join(f"{i}-{j}" for i, j in a)
            for a in Recaser.load(tico / "model").aligner.align(
                [x.split(" ") if x else [] for x in srcs], [x.split(" ") if x else [] for x in hyps]
            )
        ]
        r = Recaser.load(tico / "model")
        assert list(r.recase_lines(hyps, srcs, alignment)) == got
        assert [x.lower() for x in got] == hyps


@pytest.mark.parametrize("with_source", [True, False])
def test_raw_output_is_the_input_byte_for_byte_but_for_case(tico, tmp_path, with_source):
    """A byte-order mark, Windows line ends, an empty line, a last line without a line end and decomposed accents
    (NFD) come back as they came: the output's bytes are the input's, but for the case of letters; the library
    keeps them too (a line given as a string keeps its ``\\r``, and a leading U+FEFF), and the first word after a
    mark is still a sentence start."""
    from moses_recaser import Recaser
    from moses_recaser.cli.main import main

    hyp = "\ufeffthe who met in paris.\r\nthe e\u0301lyse\u0301e is in paris.\r\n\r\nno line end in paris"
    src = "L'OMS s'est réunie à Paris.\r\nL'Élysée est à Paris.\r\n\r\nPas de fin de ligne à Paris"
    (tmp_path / "hyp").write_bytes(hyp.encode("utf-8"))
    (tmp_path / "src").write_bytes(src.encode("utf-8"))
    argv = ["-q", "recase", "--raw", "--model", str(tico / "model"), "--input", str(tmp_path / "hyp")]
    argv += ["--source-lang", "fr", "--target-lang", "en", "-o", str(tmp_path / "out")]
    assert main([*argv, *(["--source", str(tmp_path / "src")] if with_source else [])]) == 0
    got = (tmp_path / "out").read_bytes().decode("utf-8")
    case_only(got, hyp)
    assert got.startswith("\ufeffThe ") and got.count("\r\n") == 3 and got.lower().endswith("paris")
    lines = hyp.split("\n")  # (as open(newline="") and a split give them: each with its \r)
    srcs = src.split("\n") if with_source else None
    out = list(Recaser.load(tico / "model").recase_lines(lines, srcs, raw=True, source_lang="fr", target_lang="en"))
    assert "\n".join(out) == got


def test_a_line_is_recased_the_same_in_either_normalization_form(tico):
    """Decomposed accents (NFD, as macOS writes them) are composed for the tokenizer and the model, whose split at
    each combining mark made ``cafe\u0301`` two words (``Café ÉTé``), and the output keeps the line's own
    characters: the same case as the composed line's, each mark where it was."""
    import unicodedata

    from moses_recaser import Recaser

    r = Recaser.load(tico / "model")
    kw = {"raw": True, "source_lang": "fr", "target_lang": "en"}
    extra = ["café été in zürich .", "we visited the élysée palace in são paulo ."]
    nfc = [x.lower() for x in raw_slice("en", slice(1950, 2100))] + extra
    srcs = raw_slice("fr", slice(1950, 2100)) + ["Café été à Zürich.", "Nous avons visité l'Élysée à São Paulo."]
    nfd = [unicodedata.normalize("NFD", x) for x in nfc]
    assert nfd[-2].startswith("cafe\u0301 e\u0301te\u0301")
    for sources in (srcs, [unicodedata.normalize("NFD", x) for x in srcs]):
        got = list(r.recase_lines(nfd, sources, **kw))
        for x, y in zip(got, nfd):
            case_only(x, y)
        assert [unicodedata.normalize("NFC", x) for x in got] == list(r.recase_lines(nfc, srcs, **kw))
    assert not got[-2].startswith("Cafe\u0301 E")


def test_raw_text_needs_its_languages(tico):
    from moses_recaser import Recaser
    from moses_recaser.io.errors import RecaserError

    r = Recaser.load(tico / "model")  # trained without --source-lang and --target-lang
    with pytest.raises(RecaserError, match="does not record it .trained without `target_lang`.: give `target_lang`"):
        r.recase("the cat .", raw=True)
    with pytest.raises(RecaserError, match="give `source_lang`"):
        r.recase("the cat .", source="le chat .", raw=True, target_lang="en")
    with pytest.raises(RecaserError, match="`target_lang` is 'english'; give a language code"):
        r.recase("the cat .", raw=True, target_lang="english")
    with pytest.raises(RecaserError, match="`source_lang` is 5; give a language code"):
        r.recase("the cat .", source="le chat .", raw=True, target_lang="en", source_lang=5)  # type: ignore[arg-type]
    with pytest.raises(RecaserError, match="raw text is plain text: `trace_format` 'trace'"):
        r.recase("the cat .", raw=True, target_lang="en", trace_format="trace")


def test_the_languages_are_settings_of_the_model():
    from moses_recaser.io.errors import RecaserError
    from moses_recaser.model.settings import TrainSettings

    assert "lang" not in TrainSettings().signature()
    assert "|lang:fr-en|" in TrainSettings(source_lang="fr", target_lang="en").signature() + "|"
    with pytest.raises(RecaserError, match="`source_lang` is 'FR'"):
        TrainSettings(source_lang="FR").check()


def test_one_command_recases_raw_text_case_only_byte_for_byte(tmp_path, capsys):
    """``train --raw`` tokenizes a raw bitext and raw monolingual text itself and records the languages;
    ``recase --raw --source --align`` reads them, tokenizes, aligns, recases and writes the input back with only
    its letters' case changed."""
    import yaml

    from moses_recaser.cli.main import main

    for lang in ("fr", "en"):
        (tmp_path / f"train.{lang}").write_text("\n".join(raw_slice(lang, slice(600, 700))) + "\n", encoding="utf-8")
    mono = tmp_path / "mono.en"
    mono.write_text("\n".join(raw_slice("en", slice(800, 900))) + "\n", encoding="utf-8")
    model = tmp_path / "model"
    common = ["--raw", "--source", str(tmp_path / "train.fr"), "--target", str(tmp_path / "train.en")]
    common += ["--dev-size", "10", "--max-iter", "20", "--monolingual", str(mono)]
    assert main(["train", *common, "--target-lang", "en", "-o", str(model)]) == 2
    assert "give --source-lang with --raw" in capsys.readouterr().err
    assert main(["train", *common, "--source-lang", "fr", "--target-lang", "en", "-o", str(model)]) == 0
    assert "|lang:fr-en|" in capsys.readouterr().out
    # the model records the monolingual file the user named (not its tokenized copy), and learned Moses tokens:
    # the raw "in its RBD, which" gave "RBD" ",", the raw "'virus" "&apos;" "virus"
    manifest = yaml.safe_load((model / "manifest.yaml").read_text(encoding="utf-8"))
    assert manifest["settings"]["monolingual"] == [str(mono.resolve())]
    from moses_recaser.stats.tables import Tables

    vocab = set(Tables.load(model).forms.vocab)
    assert {"RBD", ",", "&apos;", "virus"} <= vocab and not {"RBD,", "'virus"} & vocab
    src, hyp, out = tmp_path / "src.fr", tmp_path / "hyp.en", tmp_path / "out.en"
    extra = "the who's “covid-19” &amp; <b>x</b>\tüber 5\u212a  e-mail: a@b.com 😀 ."
    src.write_text("\n".join([*raw_slice("fr"), "L'OMS."]) + "\n", encoding="utf-8")
    hyp.write_text("\n".join([*(x.lower() for x in raw_slice("en")), extra]) + "\n", encoding="utf-8")
    assert (
        main(
            [
                "recase",
                "--raw",
                "--model",
                str(model),
                "--source",
                str(src),
                "--input",
                str(hyp),
                "--align",
                "-o",
                str(out),
            ]
        )
        == 0
    )
    given, got = hyp.read_text(encoding="utf-8"), out.read_text(encoding="utf-8")
    case_only(got, given)
    assert got != given
    # without a source: monolingual; the model's languages overridden
    assert (
        main(["recase", "--raw", "--model", str(model), "--input", str(hyp), "--target-lang", "de", "-o", str(out)])
        == 0
    )
    case_only(out.read_text(encoding="utf-8"), given)


def test_raw_recasing_without_languages_is_a_one_line_error(tico, tmp_path, capsys):
    from moses_recaser.cli.main import main

    hyp = tmp_path / "hyp.en"
    hyp.write_text("the cat .\n", encoding="utf-8")
    assert main(["recase", "--raw", "--model", str(tico / "model"), "--input", str(hyp)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("moses-recaser: error: raw text is tokenized for its language") and err.count("\n") == 1
    assert main(["recase", "--model", str(tico / "model"), "--input", str(hyp), "--target-lang", "en"]) == 2
    assert "--source-lang and --target-lang say how raw text is tokenized: give --raw too" in capsys.readouterr().err


def test_eval_scores_raw_files_as_sacrebleu_does(tmp_path, capsys):
    """``eval --raw``: BLEU with sacrebleu's tokenizer for the target language and its signature; precision and
    F1 over the same tokens. Tokenized files keep the tokenized scoring (``tok:none``)."""
    import sacrebleu

    from moses_recaser.cli.main import main

    ref, hyp = tmp_path / "ref", tmp_path / "hyp"
    ref.write_text('The U.S. president said "no" on Monday.\nIt is Paris.\n', encoding="utf-8")
    hyp.write_text('The U.S. President said "no" on monday.\nIt is paris.\n', encoding="utf-8")
    refs, hyps = ref.read_text().splitlines(), hyp.read_text().splitlines()
    assert main(["eval", "--raw", "--hyp", str(hyp), "--ref", str(ref)]) == 0
    out = capsys.readouterr().out
    bleu = sacrebleu.corpus_bleu(hyps, [refs])
    words = sum(len(sacrebleu.BLEU().tokenizer(x).split()) for x in refs)  # 13a: "U.S." stays, "." splits off
    assert f"BLEU {bleu.score:.2f}" in out and f"words {words}  errors 3" in out and "|tok:13a|" in out
    assert f"case-insensitive BLEU {sacrebleu.corpus_bleu(hyps, [refs], lowercase=True).score:.2f}" in out
    assert main(["eval", "--hyp", str(hyp), "--ref", str(ref)]) == 0
    assert "|tok:none|" in capsys.readouterr().out
    zh = tmp_path / "zh"
    zh.write_text("我们在 Paris 见面。\n", encoding="utf-8")
    assert main(["eval", "--raw", "--target-lang", "zh", "--hyp", str(zh), "--ref", str(zh)]) == 0
    out = capsys.readouterr().out
    words = len(sacrebleu.BLEU(trg_lang="zh").tokenizer(zh.read_text(encoding="utf-8")).split())  # a character each
    assert "|tok:zh|" in out and f"words {words}  errors 0" in out and words == 7
    # not a recasing of the reference: named at its line, as tokenized files are
    hyp.write_text('The U.S. President said "no" on monday.\nIt is Rome.\n', encoding="utf-8")
    assert main(["eval", "--raw", "--hyp", str(hyp), "--ref", str(ref)]) == 2
    assert capsys.readouterr().err.startswith(f"moses-recaser: error: {hyp}:2: output and reference differ")
    assert main(["eval", "--target-lang", "en", "--hyp", str(hyp), "--ref", str(ref)]) == 2
    assert "--target-lang chooses how raw text is tokenized for BLEU: give --raw too" in capsys.readouterr().err


def test_a_raw_training_file_is_named_as_the_user_named_it(tmp_path):
    """An error in a raw training file names that file and line, not the tokenized copy train reads."""
    from moses_recaser import Bitext, TrainSettings, train
    from moses_recaser.io.errors import RecaserError

    src, tgt = tmp_path / "train.fr", tmp_path / "train.en"
    src.write_text("\n".join(raw_slice("fr", slice(0, 40))) + "\n", encoding="utf-8")
    lines = raw_slice("en", slice(0, 40))
    lines[12] = "word " * 10_001
    tgt.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(RecaserError, match=f"^{tgt}:13: 10001 tokens on one line"):
        train(
            Bitext(src, tgt),
            tmp_path / "model",
            TrainSettings(source_lang="fr", target_lang="en"),
            raw=True,
            dev_size=4,
        )
    assert not (tmp_path / "model").exists()
