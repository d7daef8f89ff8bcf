"""Re-deriving index entries from the real indexes (PyPI, kaolin's wheel pages)."""
