"""A litellm user's script: token_counter (gpt-4o: o200k_base, exact) over each record of a
chat dataset.

    python bench/peer_litellm_count.py FILE   ->  the total, printed

Standalone, timed by `make bench` as a whole process against ``ctxtool stats --tokenizer
o200k_base FILE`` (bench/run.py). Offline: LITELLM_LOCAL_MODEL_COST_MAP=True (litellm's
bundled cost map) and TIKTOKEN_CACHE_DIR (the BPE files), both set by bench/run.py.
"""

import sys

import litellm
import orjson


def count(path: str) -> int:
    total = 0
    with open(path, "rb") as f:
        for line in f:
            if line.strip():
                total += litellm.token_counter(model="gpt-4o", messages=orjson.loads(line)["messages"])
    return total


if __name__ == "__main__":
    print(count(sys.argv[1]))
