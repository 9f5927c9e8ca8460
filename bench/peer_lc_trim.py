"""A LangChain user's script: trim_messages to the last 8,000 tokens (approximate counter,
the system message kept) of each record of a chat dataset, the trimmed records written.

    python bench/peer_lc_trim.py FILE OUT   ->  the messages kept, printed; OUT: the records

Standalone, timed by `make bench` as a whole process against ``ctxtool window --max-chars
32000 -o OUT FILE`` (bench/run.py), which writes its output too.
"""

import sys
from contextlib import nullcontext
from typing import Any

import orjson
from langchain_core.messages import convert_to_openai_messages, trim_messages
from langchain_core.messages.utils import count_tokens_approximately

#: the budget: 8,000 approximate tokens, ctxtool's --max-chars 32000 at 4 characters a token
MAX_TOKENS = 8000


def trim(path: str, out: str | None = None) -> int:
    """The messages kept over every record; with ``out``, the trimmed records written there."""
    kept = 0
    sink: Any = open(out, "wb") if out else nullcontext()  # noqa: SIM115
    with open(path, "rb") as f, sink as w:
        for line in f:
            if not line.strip():
                continue
            rec = orjson.loads(line)
            msgs = trim_messages(rec["messages"], max_tokens=MAX_TOKENS, strategy="last",
                                 token_counter=count_tokens_approximately, include_system=True)
            kept += len(msgs)
            if w is not None:
                rec["messages"] = convert_to_openai_messages(msgs)
                w.write(orjson.dumps(rec) + b"\n")
    return kept


if __name__ == "__main__":
    print(trim(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None))
