"""Input and output: files as ctxtool reads them, JSON text and streams, atomic outputs, paths and URLs."""
