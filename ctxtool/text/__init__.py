"""Text helpers: regular expressions compiled on first use, clipped lines and sentences."""
