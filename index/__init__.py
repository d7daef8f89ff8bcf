"""The curated, cited index shipped with cuda-resolve (TOML files, read via importlib.resources)."""
