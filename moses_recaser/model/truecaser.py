"""A truecaser of the kind Moses' ``truecase.perl`` is, made from a model's form counts.

Moses' ``train-truecaser.perl`` counts, for each lowercase word, the forms it takes where it does not start a
sentence, and calls the most frequent the best; ``truecase.perl`` then gives a word that starts a sentence its
best form, keeps any other word whose form was seen, gives an unseen form of a known word its best form, and
keeps an unknown word as it is. The form counts of the training statistics (``stats.tables.Forms``: each form's
count, less its count as a sentence's first word with a letter) are that model, so no second pass over the
corpus is needed. Training a recaser for cased input truecases its dev reference with it, so that the weights
are fitted on words cased as a truecased Moses system cases them (``TrainSettings.input_case``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from moses_recaser.core import casing
from moses_recaser.stats.tables import Forms

# truecase.perl's %SENTENCE_END and %DELAYED_SENTENCE_START: a sentence starts after the first, and a word
# after a sentence start and the second still starts it
SENTENCE_END = frozenset({".", ":", "?", "!"})
DELAYED_SENTENCE_START = frozenset({"(", "[", '"', "'", "&apos;", "&quot;", "&#91;", "&#93;"})


@dataclass(frozen=True)
class Truecaser:
    best: dict[str, str]  # lowercase word -> its most frequent form where it does not start a sentence
    known: frozenset[str]  # every form seen where it does not start a sentence

    @classmethod
    def from_forms(cls, forms: Forms, min_share: float = 0.0) -> Truecaser:
        """The truecasing model of the training target's form counts (``train-truecaser.perl``'s, but for
        ties, which go to the form that sorts first). With ``min_share``, a form is known only when it makes at
        least that share of its lowercase word's counts: rarer forms (a headline's capitals) take the best."""
        top: dict[str, tuple[int, str]] = {}
        total: dict[str, int] = {}
        counted = []
        for form, n in zip(forms.vocab, (forms.count - forms.initial).tolist()):
            if n <= 0 or not casing.has_letter(form):
                continue
            low = casing.lower(form)
            counted.append((form, low, n))
            total[low] = total.get(low, 0) + n
            if n > top.get(low, (0, ""))[0]:
                top[low] = (n, form)
        known = frozenset(form for form, low, n in counted if n >= min_share * total[low])
        return cls(best={low: form for low, (_, form) in top.items()}, known=known)

    def truecase(self, tokens: Sequence[str]) -> list[str]:
        """A tokenized sentence truecased as ``truecase.perl`` does it."""
        out = []
        for word, start in zip(tokens, sentence_starts(tokens)):
            best = self.best.get(casing.lower(word))
            out.append(best if best is not None and (start or word not in self.known) else word)
        return out


def sentence_starts(tokens: Sequence[str]) -> list[bool]:
    """Per token: it starts a sentence as truecase.perl and detruecase.perl see it (the first token, the token
    after ``.``, ``:``, ``?`` or ``!``, and a token after such a start and ``(``, ``"``, ...): truecase.perl gives
    it its best form, detruecase.perl a capital first letter."""
    out = []
    start = True
    for word in tokens:
        out.append(start)
        if word in SENTENCE_END:
            start = True
        elif word not in DELAYED_SENTENCE_START:
            start = False
    return out


def detruecased(word: str) -> str:
    """The word as detruecase.perl makes it at a sentence start: its first character upper-cased, the rest as
    it is ('&apos;cause' stays: '&' has no case); a first character whose upper case is longer ('ß') stays."""
    first = word[:1].upper()
    return first + word[1:] if len(first) == 1 else word
