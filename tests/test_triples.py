"""The (F, e, A) record and its JSON Lines form."""

from __future__ import annotations

import json

import pytest

from moses_recaser.core.triples import Triple, read_triples, triple_from_json
from moses_recaser.io.errors import RecaserError


def test_jsonl_round_trip(tmp_path):
    t = Triple(
        id=3,
        source=["Cliquez", "OK"],
        target=["click", "ok"],
        phrases=[(0, 1, 0, 1)],
        links=[(0, 0), (1, 1)],
        rank=2,
        nbest=["F= 1", "-1"],
        unknown=[1],
        factors=["", "|x"],
    )
    p = tmp_path / "t.jsonl"
    p.write_text(t.dumps() + "\n", encoding="utf-8")
    (back,) = read_triples(str(p))
    assert back == t
    assert json.loads(t.dumps())["phrases"] == [[0, 1, 0, 1]]


def test_schema_keys_are_the_documented_ones():
    obj = Triple(id=0, source=["A"], target=["a"]).to_json()
    assert obj == {"id": 0, "source": ["A"], "target": ["a"], "phrases": [], "links": None}


@pytest.mark.parametrize(
    "obj,message",
    [
        ([], "must be a JSON object"),
        ({"id": 0, "source": []}, "missing key 'target'"),
        ({"id": "0", "source": [], "target": []}, "'id' must be an integer"),
        ({"id": 0, "source": ["a"], "target": ["b"], "phrases": [[0, 0, 0]]}, "lists of 4 integers"),
        ({"id": 0, "source": ["a"], "target": ["b"], "phrases": [[0, 1, 0, 0]]}, "source span 0-1 is outside"),
        ({"id": 0, "source": ["a"], "target": ["b", "c"], "phrases": [[0, 0, 0, 0]]}, "cover 1 of 2 target tokens"),
        (
            {"id": 0, "source": ["a", "b"], "target": ["b", "c"], "phrases": [[0, 0, 1, 1], [1, 1, 0, 0]]},
            "not covered in order",
        ),
        ({"id": 0, "source": ["a"], "target": ["b"], "links": [[0, 1]]}, "link 0-1 is outside"),
        ({"id": 0, "source": ["a"], "target": ["b"], "colour": 1}, "unknown key"),
        ({"id": 0, "source": ["a"], "target": ["b"], "factors": []}, "one entry per target token"),
    ],
)
def test_bad_triples(obj, message):
    with pytest.raises(RecaserError, match=message):
        triple_from_json(obj)


def test_bad_jsonl_names_line(tmp_path):
    p = tmp_path / "t.jsonl"
    good = Triple(id=0, source=["a"], target=["a"]).dumps()
    p.write_text(good + "\n" + "{not json\n", encoding="utf-8")
    with pytest.raises(RecaserError) as err:
        list(read_triples(str(p)))
    assert (err.value.path, err.value.line) == (str(p), 2)
    assert "invalid JSON" in err.value.reason
