"""The (F, e, A) record: one sentence's cased source, lowercased output and alignment.

JSON Lines schema, one object per line::

    {"id": 0,                         # sentence number, 0-based (Moses' translation id)
     "source": ["Cliquez", "OK"],     # F: cased source tokens, as the decoder saw them
     "target": ["click", "ok"],       # e: output tokens, trace markers removed
     "phrases": [[0, 1, 0, 1]],       # [s_start, s_end, t_start, t_end], 0-based, inclusive,
                                      #   in target order (as Moses prints them)
     "links": [[0, 0], [1, 1]]}       # word links [s, t], or null when none were given

Optional keys, written only when set: ``rank`` (n-best rank, 0-based), ``nbest`` (the
untouched n-best fields after the hypothesis), ``unknown`` (target positions the decoder
marked unknown), ``factors`` (extra output factors per target token, "" for none),
``passthrough`` (the decoder's ``<passthrough .../>`` tag).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from moses_recaser.io.errors import RecaserError
from moses_recaser.io.lines import EDGE, NOT_IN_TOKEN, LineReader, check_length

Phrase = tuple[int, int, int, int]
Link = tuple[int, int]


@dataclass
class Triple:
    """One sentence: cased source F, output e, phrase pairs and optional word links."""

    id: int
    source: list[str]
    target: list[str]
    phrases: list[Phrase] = field(default_factory=list)
    links: list[Link] | None = None
    rank: int | None = None
    nbest: list[str] | None = None
    unknown: list[int] = field(default_factory=list)
    factors: list[str] | None = None
    passthrough: str | None = None

    def validate(self) -> None:
        """Check lengths, spans and links against the sentence; raise RecaserError (no location) if bad."""
        check_length(self.source)
        check_length(self.target)
        check_phrases(self.phrases, len(self.source), len(self.target))
        if self.links is not None:
            check_links(self.links, len(self.source), len(self.target))
            if self.phrases:
                check_links_in_phrases(self.links, self.phrases)

    def to_json(self) -> dict[str, Any]:
        obj: dict[str, Any] = {
            "id": self.id,
            "source": self.source,
            "target": self.target,
            "phrases": [list(p) for p in self.phrases],
            "links": None if self.links is None else [list(a) for a in self.links],
        }
        if self.rank is not None:
            obj["rank"] = self.rank
        if self.nbest is not None:
            obj["nbest"] = self.nbest
        if self.unknown:
            obj["unknown"] = self.unknown
        if self.factors is not None:
            obj["factors"] = self.factors
        if self.passthrough is not None:
            obj["passthrough"] = self.passthrough
        return obj

    def dumps(self) -> str:
        return json.dumps(self.to_json(), ensure_ascii=False, separators=(", ", ": "))


def lowered(t: Triple) -> Triple:
    """The triple with its target lowercased (a recaser's input is lowercase by definition)."""
    from moses_recaser.core.casing import VARIANTS, lower_all

    joined = "\n".join(t.target)  # "\n" ends a word for the final-sigma rule as a token's end does
    if joined.lower() == joined:  # (one call for the common case, lowercase input: this runs on every sentence)
        return t
    low = list(map(str.lower, t.target))  # casing.lower, mapped in C
    if list(map(len, low)) != list(map(len, t.target)) or not VARIANTS.isdisjoint(joined):
        low = [lower_all(x) for x in t.target]
    return dataclasses.replace(t, target=low)


def check_phrases(phrases: list[Phrase], n_source: int, n_target: int) -> None:
    """Phrase pairs must lie inside the sentence and their target spans tile the output in order."""
    if not phrases:
        return
    covered = [False] * n_source
    expect = 0
    for s0, s1, t0, t1 in phrases:
        if not (0 <= s0 <= s1 < n_source):
            raise RecaserError(f"source span {s0}-{s1} is outside the source sentence ({n_source} tokens)")
        if t0 != expect or t1 < t0:
            raise RecaserError(
                f"target tokens not covered in order: phrase target span {t0}-{t1}, expected it to start at {expect}"
            )
        for s in range(s0, s1 + 1):
            if covered[s]:
                raise RecaserError(f"source word {s} is covered by two phrases")
            covered[s] = True
        expect = t1 + 1
    if expect != n_target:
        raise RecaserError(f"target tokens not covered in order: phrases cover {expect} of {n_target} target tokens")


def check_links(links: list[Link], n_source: int, n_target: int) -> None:
    if links:  # the common case first, with the loops in C: this runs on every line
        src, tgt = zip(*links)
        if min(src) >= 0 and max(src) < n_source and min(tgt) >= 0 and max(tgt) < n_target:
            return
    for s, t in links:
        if not (0 <= s < n_source and 0 <= t < n_target):
            raise RecaserError(
                f"alignment link {s}-{t} is outside the sentence ({n_source} source, {n_target} target tokens)"
            )


def check_links_in_phrases(links: Iterable[Link], phrases: list[Phrase]) -> None:
    owner: dict[int, Phrase] = {}
    for p in phrases:
        for t in range(p[2], p[3] + 1):
            owner[t] = p
    for s, t in links:
        q = owner.get(t)
        if q is None or not (q[0] <= s <= q[1]):
            span = "no phrase" if q is None else f"phrase {q[0]}-{q[1]}={q[2]}-{q[3]}"
            raise RecaserError(f"alignment link {s}-{t} crosses the phrase boundary ({span})")


# --- JSON Lines I/O -----------------------------------------------------------------------


def _int_list(value: Any, width: int, key: str) -> list[tuple[int, ...]]:
    if not isinstance(value, list):
        raise RecaserError(f"'{key}' must be a list")
    out = []
    for item in value:
        if (
            not isinstance(item, list)
            or len(item) != width
            or not all(isinstance(x, int) and not isinstance(x, bool) for x in item)
        ):
            raise RecaserError(f"'{key}' entries must be lists of {width} integers, got {item!r}")
        out.append(tuple(item))
    return out


def _ints(value: Any, key: str) -> list[int]:
    if not isinstance(value, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in value):
        raise RecaserError(f"'{key}' must be a list of integers")
    return value


# what no string written on a line can hold: a line end would split the line, a NUL is not text (numpy's string
# arrays drop it); a token holds neither, nor a space or tab (``textio.NOT_IN_TOKEN``: the one tokenization's)
_NOT_IN_FIELD = re.compile(r"[\n\r\0]")


def _str_list(value: Any, key: str, *, tokens: bool = False, in_token: bool = False) -> list[str]:
    """A list of strings that can be written back on one line: ``tokens``, each a non-empty token that splits
    back into itself (``textio.NOT_IN_TOKEN``: other Unicode white space is a token's, as in Moses);
    ``in_token``, parts written onto a token (a word's extra factors), empty or not, none splitting it; else
    strings without line ends. Text that is not Unicode (a lone surrogate, "\\ud800") is refused:
    it cannot be written as UTF-8."""
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise RecaserError(f"'{key}' must be a list of strings")
    for k, x in enumerate(value):
        if tokens and (not x or NOT_IN_TOKEN.search(x)):
            raise RecaserError(
                f"'{key}' entry {k} ({x!r}) is not a token: it is empty or holds a space, tab, newline or NUL "
                "(tokens are split on spaces and tabs, as in Moses)"
            )
        if tokens and ((k == 0 and x.startswith(EDGE)) or (k == len(value) - 1 and x.endswith(EDGE))):
            raise RecaserError(
                f"'{key}' entry {k} ({x!r}) has a carriage return at the line's edge, which a line's reader trims"
            )
        if in_token and NOT_IN_TOKEN.search(x):
            raise RecaserError(
                f"'{key}' entry {k} ({x!r}) holds a space, tab, newline or NUL: it is written onto its word, which "
                "it would split"
            )
        if not tokens and _NOT_IN_FIELD.search(x):
            raise RecaserError(f"'{key}' entry {k} ({x!r}) holds a line end or a NUL")
        _unicode(x, key, k)
    return value


def _unicode(x: str, key: str, k: int) -> None:
    try:
        x.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise RecaserError(
            f"'{key}' entry {k} holds a lone surrogate ({x[exc.start]!r}), which is not Unicode text"
        ) from None


_KEYS = {"id", "source", "target", "phrases", "links", "rank", "nbest", "unknown", "factors", "passthrough"}


def triple_from_json(obj: Any) -> Triple:
    """Build and validate a Triple from a parsed JSON object (RecaserError without location)."""
    if not isinstance(obj, dict):
        raise RecaserError("a triple must be a JSON object")
    unknown_keys = set(obj) - _KEYS
    if unknown_keys:
        raise RecaserError(f"unknown key(s) {sorted(unknown_keys)}; allowed: {sorted(_KEYS)}")
    for key in ("id", "source", "target"):
        if key not in obj:
            raise RecaserError(f"missing key '{key}'")
    if not isinstance(obj["id"], int) or isinstance(obj["id"], bool):
        raise RecaserError("'id' must be an integer")
    links = obj.get("links")
    rank = obj.get("rank")
    if rank is not None and (not isinstance(rank, int) or isinstance(rank, bool)):
        raise RecaserError("'rank' must be an integer")
    passthrough = obj.get("passthrough")
    if passthrough is not None:
        if not isinstance(passthrough, str) or _NOT_IN_FIELD.search(passthrough):
            raise RecaserError("'passthrough' must be a string without line ends")
        _unicode(passthrough, "passthrough", 0)
    triple = Triple(
        id=obj["id"],
        source=_str_list(obj["source"], "source", tokens=True),
        target=_str_list(obj["target"], "target", tokens=True),
        phrases=_int_list(obj.get("phrases", []), 4, "phrases"),  # type: ignore[arg-type]
        links=None if links is None else _int_list(links, 2, "links"),  # type: ignore[arg-type]
        rank=rank,
        nbest=None if obj.get("nbest") is None else _str_list(obj["nbest"], "nbest"),
        unknown=_ints(obj.get("unknown", []), "unknown"),
        factors=None if obj.get("factors") is None else _str_list(obj["factors"], "factors", in_token=True),
        passthrough=passthrough,
    )
    if triple.factors is not None and len(triple.factors) != len(triple.target):
        raise RecaserError("'factors' must have one entry per target token")
    for u in triple.unknown:
        if not 0 <= u < len(triple.target):
            raise RecaserError(f"'unknown' position {u} is outside the target sentence")
    triple.validate()
    return triple


def read_triples(path: str) -> Iterator[Triple]:
    """Stream triples from a JSON Lines file; errors name the file and line."""
    reader = LineReader(path)
    for line in reader:
        if not line.strip():
            raise reader.error("empty line in a triples file")
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise reader.error(f"invalid JSON: {exc.msg} at column {exc.colno}") from None
        except ValueError as exc:  # a number of thousands of digits (Python's int conversion limit)
            raise reader.error(f"invalid JSON: {exc}".split(";")[0]) from None
        except RecursionError:
            raise reader.error("invalid JSON: nested too deeply") from None
        try:
            yield triple_from_json(obj)
        except RecaserError as exc:
            raise exc.at(reader.name, reader.lineno) from None


def write_triples(triples: Iterable[Triple], out: IO[str]) -> int:
    n = 0
    for triple in triples:
        out.write(triple.dumps())
        out.write("\n")
        n += 1
    return n
