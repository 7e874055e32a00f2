"""GEN (paper section 4.4): the cased candidates of one output token.

GEN(w) is the union of (listed in this order, which only breaks ties deterministically):

1. {AL(w), IU(w), AU(w)}, and for hyphenated words each part capitalized (``Montreal-Trudeau``);
2. the aligned source words whose lowercase equals lower(w) (URLs, file names, odd case), and the
   case pattern of an aligned source word equal to w up to diacritics and case (``Montréal``);
3. the cased forms seen in training whose lowercase is lower(w), most frequent first (for an unseen
   hyphenated word, its parts' most frequent forms joined: ``Candidates.gen_forms``).

Every candidate differs from the input token in case only (same length, same lowercase); any
form that would not is dropped, so recasing can never change a token. The list is capped at
``max_candidates`` by dropping the rarest training forms (3.); (1.) and (2.) always stay.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from moses_recaser.core import casing

MAX_CANDIDATES = 5


def gen(
    token: str,
    seen_forms: Sequence[str] = (),
    source_words: Iterable[str] = (),
    max_candidates: int = MAX_CANDIDATES,
) -> list[str]:
    """Candidates for ``token``; ``seen_forms`` are training forms of lower(token), most frequent first;
    ``source_words`` are aligned source words GEN takes: of the token's length, and equal to it up to case,
    or up to case and diacritics (``extractor.FeatureExtractor._takes`` picks them)."""
    low = casing.lower_all(token)
    if token.isascii() and "&" not in token:  # ASCII case mappings keep length and lowercase
        out = list(dict.fromkeys((low, casing.upper_first(low), low.upper())))
    else:
        out = [
            f
            for f in dict.fromkeys((low, casing.upper_first(low), casing.upper_all(low)))
            if casing.is_recasing_of(f, token)
        ]
    seen = set(out)

    def add(form: str) -> None:
        if form not in seen and casing.is_recasing_of(form, token):
            seen.add(form)
            out.append(form)

    key = casing.lower(token)
    if "-" in low.strip("-"):
        add("-".join(casing.upper_first(part) for part in low.split("-")))
    for form in source_words:
        if casing.lower(form) == key:
            add(form)
        else:
            # the same word up to diacritics (Montréal-Trudeau / montreal-trudeau): copy its case pattern
            add("".join(casing.case_like(t, f) for t, f in zip(low, form)))
    for form in seen_forms:
        if len(out) >= max_candidates:
            break
        add(form)
    return out
