"""Pulumi dynamic resources for Together AI post-training (RL) infrastructure.

    from pulumi_together_rl import ModelResource, ModelResourceArgs, TrainingSession, TrainingSessionArgs

The nested shapes of the Args are ``TypedDict`` classes, exported here too (``ComputeConfigArgs``,
``OptimizerConfigArgs``, ``MuonConfigArgs``, ``LoraConfigArgs``, ``SessionMetadataArgs``,
``WandbMetadataArgs``), so a dict built ahead of its Args can be annotated. The package ships ``py.typed``.

The functions ``get_checkpoints`` and ``latest_checkpoint`` answer "which checkpoints of this session (or base
model) are there" as ``Output`` values (typed ``Checkpoint``), for a resume a program can state.

The resource classes are imported lazily (PEP 562 ``__getattr__``), so ``import pulumi_together_rl.client``
(used by the emulator, scripts and other tools) does not pay for importing ``pulumi``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.4.0"
"""The one place the version is set: the wheel's metadata (hatch reads it, pyproject.toml), the plugin's schema
and so the generated SDKs, the plugin, both policy packs and the release archives take it from here. A release
is this line, a CHANGELOG.md section and a ``v<version>`` tag (docs/releasing.md)."""

__all__ = [
    "Checkpoint",
    "CheckpointQuery",
    "ComputeConfigArgs",
    "LoraConfigArgs",
    "ModelResource",
    "ModelResourceArgs",
    "MuonConfigArgs",
    "OptimizerConfigArgs",
    "SessionMetadataArgs",
    "TrainingSession",
    "TrainingSessionArgs",
    "WandbMetadataArgs",
    "__version__",
    "get_checkpoints",
    "latest_checkpoint",
]

_LAZY = {
    "ModelResource": ".resources.model_resource",
    "ModelResourceArgs": ".resources.model_resource",
    "ComputeConfigArgs": ".resources.model_resource",
    "OptimizerConfigArgs": ".resources.model_resource",
    "MuonConfigArgs": ".resources.model_resource",
    "TrainingSession": ".resources.training_session",
    "TrainingSessionArgs": ".resources.training_session",
    "LoraConfigArgs": ".resources.training_session",
    "SessionMetadataArgs": ".resources.training_session",
    "WandbMetadataArgs": ".resources.training_session",
    "Checkpoint": ".resources.functions",
    "CheckpointQuery": ".resources.functions",
    "get_checkpoints": ".resources.functions",
    "latest_checkpoint": ".resources.functions",
}

# What type checkers see (the names above, typed); at run time they are imported on first use, below.
if TYPE_CHECKING:
    from .resources.functions import Checkpoint, CheckpointQuery, get_checkpoints, latest_checkpoint
    from .resources.model_resource import (
        ComputeConfigArgs,
        ModelResource,
        ModelResourceArgs,
        MuonConfigArgs,
        OptimizerConfigArgs,
    )
    from .resources.training_session import (
        LoraConfigArgs,
        SessionMetadataArgs,
        TrainingSession,
        TrainingSessionArgs,
        WandbMetadataArgs,
    )


if not TYPE_CHECKING:
    # Hidden from type checkers: to them a module ``__getattr__`` makes every attribute exist, typed ``Any``, so
    # a misspelled name would pass and a name only it provides would go unchecked. They see the imports above.
    def __getattr__(name: str) -> Any:
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, __name__), name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
