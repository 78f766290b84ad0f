"""Pulumi dynamic resources for Together AI post-training (RL) infrastructure.

    from pulumi_together_rl import ModelResource, ModelResourceArgs, TrainingSession, TrainingSessionArgs

The resource classes are imported lazily (PEP 562 ``__getattr__``), so ``import pulumi_together_rl.client``
(used by the emulator, scripts and other tools) does not pay for importing ``pulumi``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = ["ModelResource", "ModelResourceArgs", "TrainingSession", "TrainingSessionArgs", "__version__"]

_LAZY = {
    "ModelResource": ".resources.model_resource",
    "ModelResourceArgs": ".resources.model_resource",
    "TrainingSession": ".resources.training_session",
    "TrainingSessionArgs": ".resources.training_session",
}

if TYPE_CHECKING:
    from .resources.model_resource import ModelResource, ModelResourceArgs
    from .resources.training_session import TrainingSession, TrainingSessionArgs


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
