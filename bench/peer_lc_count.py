"""A LangChain user's script: count_tokens_approximately over each record of a chat dataset.

    python bench/peer_lc_count.py FILE   ->  the total, printed

Standalone (imports, the file read line by line with orjson, the result printed), so that
`make bench` times it as a whole process against ``ctxtool stats FILE`` (bench/run.py).
"""

import sys

import orjson
from langchain_core.messages.utils import count_tokens_approximately


def count(path: str) -> int:
    total = 0
    with open(path, "rb") as f:
        for line in f:
            if line.strip():
                total += count_tokens_approximately(orjson.loads(line)["messages"])
    return total


if __name__ == "__main__":
    print(count(sys.argv[1]))
