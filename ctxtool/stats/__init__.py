"""What is in a transcript: figures, the fast tally, the stats operation, recorded compactions."""
