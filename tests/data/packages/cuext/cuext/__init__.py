import torch  # noqa: F401  (loads libc10 and libtorch, which _ext links against)

from ._ext import add_one

__all__ = ["add_one"]
