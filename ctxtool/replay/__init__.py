"""Replay a transcript turn by turn as its agent lived it (adk-code's token tracker):
:mod:`.core` walks the turns, :mod:`.charts` draws them."""
