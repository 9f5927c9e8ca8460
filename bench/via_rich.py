"""``ctxtool`` with every table and report line laid out by rich, as on a terminal, for the
bench's plain-tables row: ``python bench/via_rich.py ARGS...`` is ``ctxtool ARGS...`` with
:attr:`ctxtool.cli.table.Out.plain_text` off (the switch the test suite uses to compare the two
paths). Into a pipe both print the same text; the row times the difference."""

import sys

sys.argv[0] = "ctxtool"
import ctxtool.cli.table as table  # noqa: E402

table.Out.plain_text = False
import ctxtool.__main__  # noqa: E402,F401  (runs the command)
