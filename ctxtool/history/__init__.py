"""The history of a transcript: cut points, windows, repair, archiving, tool-call pairing, validation."""
