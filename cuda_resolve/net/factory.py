"""An :class:`HttpClient` set up from cuda-resolve's configuration (mirror rewrites, proxies).

Entry points (CLI commands, doctor) call :func:`client_from_config`; library code takes a client
as an argument, so tests hand in one pointed at a loopback bench.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .client import HttpClient

if TYPE_CHECKING:
    from ..config import Config

__all__ = ["client_from_config"]


def client_from_config(config: Config | None = None, **kwargs: Any) -> HttpClient:
    """``HttpClient(rewrite=config.rewrite, proxies=<config [proxy]>, **kwargs)``; the config
    is read from its usual place when not given. Without a [proxy] table the environment's
    proxies apply."""
    if config is None:
        from ..config import load_config

        config = load_config()
    proxies = config.proxies.as_requests()
    kwargs.setdefault("rewrite", config.rewrite if config.rewrites else None)
    kwargs.setdefault("proxies", proxies or None)
    return HttpClient(**kwargs)
