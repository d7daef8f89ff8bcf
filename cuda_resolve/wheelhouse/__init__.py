"""The wheelhouse: built wheels keyed by their full ABI, in a PEP 503 folder any static server can serve."""
