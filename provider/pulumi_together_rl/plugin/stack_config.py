"""What the stack's config file says of a key: whether it holds it in plain text.

The engine reads ``Pulumi.<stack>.yaml`` and hands the provider its values with the secrets stripped (both a
``pulumi config set --secret`` value and a plain one arrive plain), so the file is the one witness of how the
key was stored. The provider runs in the program's folder; the file is the project's (``Pulumi.yaml`` found from
there upwards, as the CLI finds it), under its ``stackConfigDir`` when it names one.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from ..backend import PROJECT_FILES


def plain_in_config_file(urn: str, key: str, cwd: str | os.PathLike[str] | None = None) -> bool:
    """Whether the config file of the stack ``urn`` names holds ``key`` in plain text (not ``secure:``). False
    when it cannot tell: no project file, no config file, no such key (the value came from elsewhere: the
    environment, an ESC environment, a program's explicit provider)."""
    stack = _stack_of(urn)
    project = _project_file(Path(cwd or os.getcwd()).absolute())
    if stack is None or project is None:
        return False
    settings = _yaml(project)
    where = settings.get("stackConfigDir") if isinstance(settings, dict) else None
    folder = project.parent / where if isinstance(where, str) and where else project.parent
    config = _yaml(folder / f"Pulumi.{stack}.yaml")
    values = config.get("config") if isinstance(config, dict) else None
    if not isinstance(values, dict):
        return False
    return isinstance(values.get(key), (str, int, float, bool))


def _stack_of(urn: str) -> str | None:
    """``dev`` of ``urn:pulumi:dev::project::type::name`` (a qualified stack's file is named by its last part)."""
    if not urn.startswith("urn:pulumi:"):
        return None
    stack = urn[len("urn:pulumi:") :].split("::", 1)[0]
    return stack.rsplit("/", 1)[-1] or None


def _project_file(start: Path) -> Path | None:
    for folder in (start, *start.parents):
        for name in PROJECT_FILES:
            candidate = folder / name
            if candidate.is_file():
                return candidate
    return None


def _yaml(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return None
