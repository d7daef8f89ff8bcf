"""What the configuration files say now (``mirror show``), with warnings worth acting on.

Reads pip's user files (new and legacy), the target environment's site file, the file named by
``PIP_CONFIG_FILE``, the user and environment ``.condarc`` (and ``$CONDARC``), and cuda-resolve's
own config. Nothing here raises for a broken file: its state carries the error instead.
:func:`status_to_dict` (what ``mirror show`` prints) replaces credentials in URLs by ``***``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._bounded import read_text
from .._frozen import field, frozen
from ..config import Config, config_path, config_to_dict, load_config
from ..errors import CudaResolveError
from ..redaction import redact_data
from .condarc import CondaSettings, read_conda_settings
from .pipconf import PipSettings, read_pip_settings
from .presets import Preset
from .targets import (
    conda_env_file,
    conda_user_file,
    is_conda_prefix,
    pip_env_file,
    pip_global_files,
    pip_legacy_user_file,
    pip_user_file,
)

__all__ = ["FileState", "Status", "preset_to_dict", "read_status", "status_to_dict"]

#: Environment variables that override what the files say.
PIP_VARIABLES = (
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "PIP_FIND_LINKS",
    "PIP_TRUSTED_HOST",
    "PIP_CERT",
)
CONDA_VARIABLES = ("CONDA_SSL_VERIFY", "CONDA_CHANNELS", "CONDA_CHANNEL_ALIAS")


@frozen
class FileState:
    tool: str  # "pip" | "conda"
    role: str  # "global", "user", "legacy user", "site (<prefix>)", "PIP_CONFIG_FILE", "env",
    # "CONDARC"
    path: Path
    exists: bool
    pip: PipSettings | None = None
    conda: CondaSettings | None = None
    error: str | None = None
    warnings: tuple[str, ...] = ()


@frozen
class Status:
    config: Config | None
    config_error: str | None
    config_path: Path | None = None  # where the config is read from (also when it is broken)
    files: tuple[FileState, ...]
    variables: tuple[tuple[str, str], ...] = ()
    warnings: tuple[str, ...] = field(default_factory=tuple)


def _pip_state(role: str, path: Path) -> FileState:
    if not path.is_file():
        return FileState(tool="pip", role=role, path=path, exists=False)
    try:
        settings = read_pip_settings(read_text(path), origin=str(path))
    except (OSError, UnicodeDecodeError) as exc:
        return FileState(
            tool="pip", role=role, path=path, exists=True, error=f"cannot be read: {exc}"
        )
    except CudaResolveError as exc:
        return FileState(tool="pip", role=role, path=path, exists=True, error=exc.message)
    warnings = []
    if settings.trusted_hosts:
        warnings.append(
            f"trusted-host {' '.join(settings.trusted_hosts)} turns certificate checks off for "
            "those hosts; pip >= 24.2 uses the system trust store, so remove it"
        )
    return FileState(
        tool="pip", role=role, path=path, exists=True, pip=settings, warnings=tuple(warnings)
    )


def _conda_state(role: str, path: Path) -> FileState:
    if not path.is_file():
        return FileState(tool="conda", role=role, path=path, exists=False)
    try:
        settings = read_conda_settings(read_text(path), origin=str(path))
    except (OSError, UnicodeDecodeError) as exc:
        return FileState(
            tool="conda", role=role, path=path, exists=True, error=f"cannot be read: {exc}"
        )
    except CudaResolveError as exc:
        return FileState(tool="conda", role=role, path=path, exists=True, error=exc.message)
    warnings = []
    verify = settings.ssl_verify
    if verify is False or (isinstance(verify, str) and verify.lower() == "false"):
        warnings.append(
            "ssl_verify: false turns certificate checks off; use `ssl_verify: truststore`"
        )
    return FileState(
        tool="conda", role=role, path=path, exists=True, conda=settings, warnings=tuple(warnings)
    )


def read_status(
    *,
    home: Path | None = None,
    environ: Mapping[str, str] | None = None,
    prefix: Path | None = None,
    platform: str = sys.platform,
) -> Status:
    env = os.environ if environ is None else environ
    home = Path.home() if home is None else home
    if prefix is None:
        for variable in ("VIRTUAL_ENV", "CONDA_PREFIX"):
            if env.get(variable):
                prefix = Path(env[variable])
                break
    files = [
        # pip reads the site-wide files first (a lab's /etc/pip.conf may set its mirror); shown
        # only where they exist, as they are not the files `mirror set` writes
        *(
            state
            for state in (_pip_state("global", path) for path in pip_global_files(env, platform))
            if state.exists
        ),
        _pip_state("legacy user", pip_legacy_user_file(home, platform)),
        _pip_state("user", pip_user_file(home, env, platform)),
    ]
    if prefix is not None:
        files.append(_pip_state(f"site ({prefix})", pip_env_file(prefix, platform)))
    if env.get("PIP_CONFIG_FILE"):
        state = _pip_state("PIP_CONFIG_FILE", Path(env["PIP_CONFIG_FILE"]))
        note = "PIP_CONFIG_FILE is read last: it overrides every file above"
        files.append(
            FileState(
                tool=state.tool,
                role=state.role,
                path=state.path,
                exists=state.exists,
                pip=state.pip,
                error=state.error,
                warnings=(*state.warnings, note),
            )
        )
    files.append(_conda_state("user", conda_user_file(home)))
    if prefix is not None and is_conda_prefix(prefix):
        files.append(_conda_state(f"env ({prefix})", conda_env_file(prefix)))
    if env.get("CONDARC"):
        files.append(_conda_state("CONDARC", Path(env["CONDARC"])))

    variables = tuple(
        (name, env[name]) for name in (*PIP_VARIABLES, *CONDA_VARIABLES) if env.get(name)
    )
    warnings = [f"{name} is set: it overrides the config files" for name, _ in variables]
    config: Config | None = None
    config_error: str | None = None
    try:
        config = load_config(environ=env)
    except CudaResolveError as exc:
        config_error = exc.message
    return Status(
        config=config,
        config_error=config_error,
        config_path=config_path(env),
        files=tuple(files),
        variables=variables,
        warnings=tuple(warnings),
    )


def _file_to_dict(state: FileState) -> dict[str, Any]:
    data: dict[str, Any] = {
        "tool": state.tool,
        "role": state.role,
        "path": str(state.path),
        "exists": state.exists,
    }
    if state.pip is not None:
        data.update(
            index_url=state.pip.index_url,
            extra_index_urls=list(state.pip.extra_index_urls),
            find_links=list(state.pip.find_links),
            trusted_hosts=list(state.pip.trusted_hosts),
        )
    if state.conda is not None:
        data.update(
            channels=list(state.conda.channels),
            default_channels=list(state.conda.default_channels),
            custom_channels=dict(state.conda.custom_channels),
            channel_alias=state.conda.channel_alias,
            ssl_verify=state.conda.ssl_verify,
        )
    if state.error is not None:
        data["error"] = state.error
    data["warnings"] = list(state.warnings)
    return data


def status_to_dict(status: Status) -> dict[str, Any]:
    path = (
        status.config.path
        if status.config is not None and status.config.path is not None
        else status.config_path
    )
    config: dict[str, Any] = {
        "path": str(path) if path is not None else None,
        "exists": bool(path and path.exists()),
    }
    if status.config is not None:
        config.update(config_to_dict(status.config))
    if status.config_error is not None:
        config["error"] = status.config_error
    data = {
        "config": config,
        "files": [_file_to_dict(state) for state in status.files],
        "variables": dict(status.variables),
        "warnings": list(status.warnings),
    }
    return dict(
        redact_data(data)
    )  # what is shown: credentials in URLs (mirrors, proxies) become ***


def preset_to_dict(preset: Preset) -> dict[str, Any]:
    data: dict[str, Any] = {"name": preset.name, "title": preset.title, "source": preset.source}
    if preset.pypi is not None:
        data["pypi"] = {
            "simple": preset.pypi.simple,
            "files": preset.pypi.files,
            "on_miss": preset.pypi.on_miss,
            "verified": preset.pypi.verified,
            "source": preset.pypi.source,
            "note": preset.pypi.note,
        }
    if preset.pytorch is not None:
        data["pytorch"] = {
            "layout": preset.pytorch.layout,
            "url": preset.pytorch.url,
            "on_miss": preset.pytorch.on_miss,
            "verified": preset.pytorch.verified,
            "source": preset.pytorch.source,
            "note": preset.pytorch.note,
        }
    data["conda"] = None
    if preset.conda is not None:
        data["conda"] = {
            "default_channels": list(preset.conda.default_channels),
            "custom_channels": dict(preset.conda.custom_channels),
            "channel_alias": preset.conda.channel_alias,
            "on_miss": preset.conda.on_miss,
            "verified": preset.conda.verified,
            "source": preset.conda.source,
            "note": preset.conda.note,
        }
    data["kaolin"] = preset.kaolin
    data["rewrites"] = [
        {"canonical": rule.canonical, "mirror": rule.mirror, "artifacts_only": rule.artifacts_only}
        for rule in preset.rewrites()
    ]
    return data
