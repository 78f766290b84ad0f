"""Whether a listed object could be what a create made (:func:`resource_matches`, :func:`session_matches`).

Used by :mod:`.reconcile` to recognise the object an ambiguous create made: every input the request set must
agree, and a value the server did not report is not held against the candidate.
"""

from __future__ import annotations

import math
from typing import Any

from .models import (
    ModelResource,
    ModelResourceCreateRequest,
    MuonScalingStrategy,
    TrainingSession,
    TrainingSessionCreateRequest,
)


def resource_matches(req: ModelResourceCreateRequest, resource: ModelResource) -> bool:
    """Whether ``resource`` could be what a create of ``req`` made: every input ``req`` set must agree.

    A value the server did not report is not held against the candidate.
    """
    if resource.base_model != req.base_model:
        return False
    if resource.lora_enabled != (True if req.lora_enabled is None else req.lora_enabled):
        return False
    compute = req.compute_config
    if compute is not None:
        got = resource.compute_config
        if compute.gpu_type is not None and got.gpu_type is not None and got.gpu_type != compute.gpu_type:
            return False
        if (
            compute.num_generator_replicas is not None
            and got.num_generator_replicas != compute.num_generator_replicas
        ):
            return False
    if (
        req.inactive_timeout is not None
        and resource.inactive_timeout is not None
        and resource.inactive_timeout != req.inactive_timeout
    ):
        return False
    wanted_optimizer = _optimizer_kind(req.optimizer_config)
    got_optimizer = _optimizer_kind(resource.optimizer_config)
    if wanted_optimizer and got_optimizer and wanted_optimizer != got_optimizer:
        return False
    wanted_strategy = _muon_strategy(req.optimizer_config)
    got_strategy = _muon_strategy(resource.optimizer_config)
    if wanted_strategy and got_strategy and wanted_strategy != got_strategy:
        return False
    ref, got_ref = req.base_weights_ref, resource.base_weights_ref
    if ref is None:
        return got_ref is None
    return got_ref == ref or ("@rv_" not in ref and (got_ref or "").startswith(ref + "@rv_"))


#: What the server fills in for a LoRA field a session create leaves out.
LORA_DEFAULTS: dict[str, Any] = {"rank": 32, "alpha": 64, "dropout": 0.0, "train_unembed": True}
_WANDB_FIELDS = ("entity", "project", "group", "run_id", "run_name", "url")


def session_matches(req: TrainingSessionCreateRequest, session: TrainingSession) -> bool:
    """Whether ``session`` could be what a create of ``req`` made: every input ``req`` set must agree.

    * ``model_resources_id``; ``display_name`` (``""`` is the same as absent, on both sides);
    * ``lora_config`` (when the session reports one): rank, alpha, dropout and train_unembed, each compared
      with the server's default (:data:`LORA_DEFAULTS`) when the request left it out; ``seed`` only when the
      request set it and the server reports it;
    * ``resume_from_checkpoint_id`` when set; every ``metadata.wandb`` key the request set to a non-empty value.

    ``load_optimizer`` is not in the response, so it cannot be compared.
    """
    if session.model_resources_id != req.model_resources_id:
        return False
    if (session.display_name or None) != (req.display_name or None):
        return False
    got_lora, want_lora = session.lora_config, req.lora_config
    if got_lora is not None:
        for field, default in LORA_DEFAULTS.items():
            wanted = getattr(want_lora, field, None) if want_lora is not None else None
            got = getattr(got_lora, field)
            if got is not None and not _same_value(got, default if wanted is None else wanted):
                return False
        wanted_seed = want_lora.seed if want_lora is not None else None
        if wanted_seed is not None and got_lora.seed is not None and str(got_lora.seed) != str(wanted_seed):
            return False
    if req.resume_from_checkpoint_id and session.resume_from_checkpoint_id != req.resume_from_checkpoint_id:
        return False
    wanted_wandb = req.metadata.wandb if req.metadata is not None else None
    if wanted_wandb is not None:
        got_wandb = session.metadata.wandb
        for field in (*_WANDB_FIELDS, *(wanted_wandb.model_extra or {})):
            wanted = getattr(wanted_wandb, field, None)
            if wanted is None or wanted == "":
                continue
            got = getattr(got_wandb, field, None) if got_wandb is not None else None
            if got != wanted:
                return False
    return True


def _same_value(got: Any, wanted: Any) -> bool:
    if isinstance(got, bool) or isinstance(wanted, bool):
        return got is wanted or got == wanted
    if isinstance(got, (int, float)) and isinstance(wanted, (int, float)):
        return math.isclose(got, wanted, rel_tol=1e-9, abs_tol=1e-12)
    return bool(got == wanted)


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


__all__ = ["LORA_DEFAULTS", "resource_matches", "session_matches"]
