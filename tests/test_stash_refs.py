"""The stash keeps each big text once: _stash_refs takes the texts already stored as refs out
of a stashed source object (copying only the containers on the way to one) and
unstash_refs puts them back exactly."""

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxtool.cache import RefCache
from ctxtool.io import jsontext
from ctxtool.tool_outputs.stash import (
    STASH_DEDUPE_CHARS,
    _BigTexts,
    _flat_without,
    _stash_refs,
    _without,
    unstash_refs,
)


def test_big_texts_taken_out_and_put_back(tmp_path: Any) -> None:
    cache = RefCache(tmp_path / "cache")
    big1 = "a" * STASH_DEDUPE_CHARS
    big2 = "line\n" * STASH_DEDUPE_CHARS
    small = {"kept": [1, 2.5, None, "short"]}
    obj = {"role": "tool", "content": big1, "parts": [small, {"text": big2}, big1], "n": 3}
    before = copy.deepcopy(obj)
    big = _BigTexts()
    big.add(big1, cache.put(big1).id)
    big.add(big2, cache.put(big2).id)
    item: dict[str, Any] = {"lineno": 1, "obj": obj}
    _stash_refs(item, big)
    assert obj == before  # the source object is not changed
    out = item["obj"]
    assert out["content"] is None and out["parts"][1]["text"] is None and out["parts"][2] is None
    assert out["parts"][0] is small  # untouched containers are shared, not copied
    assert [p[:-1] for p in item["refs_at"]] == [["content"], ["parts", 1, "text"], ["parts", 2]]
    assert unstash_refs(item, cache)["obj"] == before


def test_nothing_big_leaves_the_item_alone() -> None:
    obj = {"content": "x" * (STASH_DEDUPE_CHARS - 1), "list": [{"a": "b"}]}
    item: dict[str, Any] = {"obj": obj}
    big = _BigTexts()
    big.add("y" * STASH_DEDUPE_CHARS, "0" * 64)
    _stash_refs(item, big)
    assert item["obj"] is obj and "refs_at" not in item


BIG = ["a" * STASH_DEDUPE_CHARS, "b" * (STASH_DEDUPE_CHARS + 5), "c" * (STASH_DEDUPE_CHARS - 1)]
_leaf = st.one_of(st.sampled_from(BIG), st.text(max_size=4), st.integers(), st.none(), st.booleans(), st.floats(),
                  st.builds(jsontext.FloatText, st.sampled_from(["1.0", "1e5"])))


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["role", "content", "name", "id", "x"]),
                       st.one_of(_leaf, st.lists(_leaf, max_size=2), st.dictionaries(st.just("text"), _leaf, max_size=1)),
                       max_size=5),
       st.lists(st.sampled_from(BIG), max_size=3))
def test_a_flat_message_is_taken_apart_as_the_walk_does(obj: dict[str, Any], texts: list[str]) -> None:
    """A dataset record's message (a dict of plain values) skips the walk: the same copy and the
    same paths as :func:`_without`; a dict holding a container is left to the walk (None)."""
    big = _BigTexts()
    for k, text in enumerate(texts):
        big.add(text, f"{k:064x}")
    found_walk: list[list[Any]] = []
    walked = _without(obj, big, [], found_walk)
    found_flat: list[list[Any]] = []
    flat = _flat_without(obj, big, found_flat)
    if any(isinstance(v, dict | list) for v in obj.values()):
        assert flat is None and found_flat == []
        return
    assert flat == walked and (flat is obj) == (walked is obj) and found_flat == found_walk
