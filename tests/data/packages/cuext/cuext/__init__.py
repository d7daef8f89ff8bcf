from ._ext import add_one

__all__ = ["add_one"]
