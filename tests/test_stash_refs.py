"""The stash keeps each big text once: _stash_refs takes the texts already stored as refs out
of a stashed source object (copying only the containers on the way to one) and
unstash_refs puts them back exactly."""

import copy
from typing import Any

from ctxtool.cache import RefCache
from ctxtool.tool_outputs.stash import STASH_DEDUPE_CHARS, _BigTexts, _stash_refs, unstash_refs


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
