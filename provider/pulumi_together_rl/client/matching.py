"""Whether a live object is what a create request describes: the one rule, at two strengths.

:func:`resource_differences` and :func:`session_differences` list the fields in which an object differs from a
create request (:class:`Difference`: field, declared, actual).

* **Declared** (``strict=False`` / ``defaults=None``): the fields the request sets, plus the two whose absence
  means something definite (``lora_enabled`` is true unless declared false, an unset ``base_weights_ref`` means
  none). This is ``adopt_id``: the user named the object, which is the proof; the check only catches a typo.
* **Strict**: every field, the ones the request leaves out compared with what the server fills in
  (:class:`ResourceDefaults`, :data:`LORA_DEFAULTS`), and a value the server does not report counts against
  the candidate (it cannot be shown equal). This is the lookup for a create whose answer was lost
  (:mod:`.reconcile`), where the match is the only evidence: an unset optimizer never matches a Muon resource.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from .models import (
    ModelResource,
    ModelResourceCreateRequest,
    MuonScalingStrategy,
    SupportedModelList,
    TrainingSession,
    TrainingSessionCreateRequest,
)


@dataclasses.dataclass(frozen=True)
class Difference:
    field: str
    declared: Any
    actual: Any

    def __str__(self) -> str:
        return f"{self.field} (declared {self.declared!r}, actual {self.actual!r})"


@dataclasses.dataclass(frozen=True)
class ResourceDefaults:
    """What the server fills in for a model-resource field a create leaves out (None: not known)."""

    gpu_type: str | None
    num_generator_replicas: int | None
    inactive_timeout: int = 3600


INACTIVE_TIMEOUT_DEFAULT = 3600


def resource_defaults(req: ModelResourceCreateRequest, models: SupportedModelList) -> ResourceDefaults:
    """The server's defaults for ``req`` from ``GET /v1/rl/supported-models``: the model's default GPU type,
    and one generator replica where that GPU offers a generator (none where it is trainer only)."""
    model = next((m for m in models.data if m.base_model == req.base_model), None)
    if model is None:
        return ResourceDefaults(gpu_type=None, num_generator_replicas=None)
    declared_gpu = req.compute_config.gpu_type if req.compute_config is not None else None
    gpu = _value(declared_gpu) or _value(model.default_gpu_type)
    offer = next((c for c in model.compute_configs if _value(c.gpu_type) == gpu), None)
    replicas = None if offer is None else (1 if offer.generator_config is not None else 0)
    return ResourceDefaults(gpu_type=gpu, num_generator_replicas=replicas)


def resource_differences(
    req: ModelResourceCreateRequest, resource: ModelResource, *, defaults: ResourceDefaults | None = None
) -> list[Difference]:
    """Where ``resource`` differs from ``req``: declared fields only, or every field with ``defaults``."""
    strict = defaults is not None
    out: list[Difference] = []

    def compare(name: str, declared: Any, actual: Any, default: Any = None) -> None:
        if declared is None and not strict:
            return
        wanted = default if declared is None else declared
        # An unknown default or an unreported value cannot be shown equal: it counts against.
        if wanted is None or actual is None or not _same_value(actual, wanted):
            out.append(Difference(name, declared, actual))

    if resource.base_model != req.base_model:
        out.append(Difference("base_model", req.base_model, resource.base_model))
    ref, got_ref = req.base_weights_ref, resource.base_weights_ref
    same_ref = got_ref == ref or (
        ref is not None and "@rv_" not in ref and (got_ref or "").startswith(ref + "@rv_")
    )
    if not same_ref:
        out.append(Difference("base_weights_ref", ref, got_ref))
    compute, got = req.compute_config, resource.compute_config
    compare(
        "compute_config.gpu_type",
        _value(compute.gpu_type) if compute is not None else None,
        _value(got.gpu_type),
        defaults.gpu_type if defaults else None,
    )
    compare(
        "compute_config.num_generator_replicas",
        compute.num_generator_replicas if compute is not None else None,
        got.num_generator_replicas,
        defaults.num_generator_replicas if defaults else None,
    )
    lora = True if req.lora_enabled is None else req.lora_enabled
    if resource.lora_enabled != lora:
        out.append(Difference("lora_enabled", req.lora_enabled, resource.lora_enabled))
    compare(
        "inactive_timeout",
        req.inactive_timeout,
        resource.inactive_timeout,
        defaults.inactive_timeout if defaults else None,
    )
    declared_kind, got_kind = (
        _optimizer_kind(req.optimizer_config),
        _optimizer_kind(resource.optimizer_config),
    )
    if (declared_kind is not None or strict) and (declared_kind or "adam") != (got_kind or "adam"):
        out.append(
            Difference("optimizer_config", _wire(req.optimizer_config), _wire(resource.optimizer_config))
        )
    elif (declared_kind or "adam") == "muon":
        declared, actual = _muon_strategy(req.optimizer_config), _muon_strategy(resource.optimizer_config)
        if (declared is not None or strict) and declared != actual:
            out.append(Difference("optimizer_config.muon.scaling_strategy", declared, actual))
    return out


#: What the server fills in for a LoRA field a session create leaves out.
LORA_DEFAULTS: dict[str, Any] = {"rank": 32, "alpha": 64, "dropout": 0.0, "train_unembed": True}
_WANDB_FIELDS = ("entity", "project", "group", "run_id", "run_name", "url")


def session_differences(
    req: TrainingSessionCreateRequest, session: TrainingSession, *, strict: bool = False
) -> list[Difference]:
    """Where ``session`` differs from ``req``.

    Declared: ``model_resources_id``, the LoRA fields the request sets, ``resume_from_checkpoint_id`` when set.
    Strict adds every LoRA field against :data:`LORA_DEFAULTS` (``seed`` only when set: the server draws one),
    an unset checkpoint, ``display_name`` (``""`` is the same as absent) and every ``metadata.wandb`` field.
    ``load_optimizer`` is not in the response, so it cannot be compared."""
    out: list[Difference] = []
    if session.model_resources_id != req.model_resources_id:
        out.append(Difference("model_resources_id", req.model_resources_id, session.model_resources_id))
    got_lora, want_lora = session.lora_config, req.lora_config
    if want_lora is not None or (strict and got_lora is not None):
        for field, default in LORA_DEFAULTS.items():
            wanted = getattr(want_lora, field, None) if want_lora is not None else None
            if wanted is None and not strict:
                continue
            got = getattr(got_lora, field, None) if got_lora is not None else None
            if got is None or not _same_value(got, default if wanted is None else wanted):
                out.append(Difference(f"lora_config.{field}", wanted, got))
        wanted_seed = want_lora.seed if want_lora is not None else None
        got_seed = got_lora.seed if got_lora is not None else None
        if wanted_seed is not None and (got_seed is None or str(got_seed) != str(wanted_seed)):
            out.append(Difference("lora_config.seed", wanted_seed, got_seed))
    checkpoint = req.resume_from_checkpoint_id
    if (checkpoint or strict) and (session.resume_from_checkpoint_id or None) != (checkpoint or None):
        out.append(Difference("resume_from_checkpoint_id", checkpoint, session.resume_from_checkpoint_id))
    if not strict:
        return out
    if (session.display_name or None) != (req.display_name or None):
        out.append(Difference("display_name", req.display_name, session.display_name))
    wanted_wandb = req.metadata.wandb if req.metadata is not None else None
    got_wandb = session.metadata.wandb if session.metadata is not None else None
    extra = {
        *(getattr(wanted_wandb, "model_extra", None) or {}),
        *(getattr(got_wandb, "model_extra", None) or {}),
    }
    for field in (*_WANDB_FIELDS, *sorted(extra)):
        wanted = getattr(wanted_wandb, field, None) if wanted_wandb is not None else None
        got = getattr(got_wandb, field, None) if got_wandb is not None else None
        if (wanted or None) != (got or None):
            out.append(Difference(f"metadata.wandb.{field}", wanted, got))
    return out


def resource_matches(
    req: ModelResourceCreateRequest, resource: ModelResource, defaults: ResourceDefaults | None = None
) -> bool:
    return not resource_differences(req, resource, defaults=defaults)


def session_matches(
    req: TrainingSessionCreateRequest, session: TrainingSession, *, strict: bool = False
) -> bool:
    return not session_differences(req, session, strict=strict)


def _same_value(got: Any, wanted: Any) -> bool:
    if isinstance(got, bool) or isinstance(wanted, bool):
        return got is wanted or got == wanted
    if isinstance(got, (int, float)) and isinstance(wanted, (int, float)):
        return math.isclose(got, wanted, rel_tol=1e-9, abs_tol=1e-12)
    return bool(got == wanted)


def _value(enum_or_str: Any) -> Any:
    return getattr(enum_or_str, "value", enum_or_str)


def _wire(config: Any) -> Any:
    return config.to_wire() if config is not None and hasattr(config, "to_wire") else config


def _optimizer_kind(config: Any) -> str | None:
    if config is None:
        return None
    if config.adam is not None or "adamw" in (config.model_extra or {}):
        return "adam"
    if config.muon is not None:
        return "muon"
    return None


def _muon_strategy(config: Any) -> str | None:
    """The Muon scaling strategy set (older ``MATCH_ADAMW`` read as ``MATCH_ADAM``); None when unset."""
    if config is None or config.muon is None or config.muon.scaling_strategy is None:
        return None
    value = config.muon.scaling_strategy.value
    if value == MuonScalingStrategy.UNSPECIFIED.value:
        return None
    if value == MuonScalingStrategy.MATCH_ADAMW.value:
        return MuonScalingStrategy.MATCH_ADAM.value
    return str(value)


__all__ = [
    "LORA_DEFAULTS",
    "Difference",
    "ResourceDefaults",
    "resource_defaults",
    "resource_differences",
    "resource_matches",
    "session_differences",
    "session_matches",
]
