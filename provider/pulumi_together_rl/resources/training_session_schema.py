"""A training session as a :class:`~.kind.Kind`: :data:`TRAINING_SESSION`, its key tables and conversions (read
with the contract in :mod:`.training_session`'s docstring).

Inputs are echoed in the state under their own names as declared; the API's view of the LoRA adapter goes to
``effective_lora_config`` (server defaults such as rank 32 are never a diff). ``display_name`` and ``metadata``
change in place: a refresh brings their drift into the state (so the next ``up`` puts yours back), and an update
PATCHes only what changed, a removed value sent as ``""`` (omitting it would keep the old one).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import config
from ..client.collections import TRAINING_SESSIONS
from ..client.matching import session_differences
from ..client.models import (
    LIVE_SESSION_STATUSES,
    SESSION_GONE,
    Checkpoint,
    TrainingSession,
    TrainingSessionCreateRequest,
    TrainingSessionStatus,
)
from . import deadline
from .inputs import drop_none_items, is_unknown, iso, pick, short_id
from .keys import SPEC_KEY
from .kind import Kind, Props, State

REPLACE_ON_CHANGES = ("model_resources_id", "lora_config", "resume_from_checkpoint_id", "load_optimizer")
UPDATE_IN_PLACE = ("display_name", "metadata", "create_timeout", "delete_timeout", "adopt_id", "stop_after")
OUTPUT_KEYS = (
    "status",
    "step",
    "base_model",
    "created_by",
    "created_at",
    "updated_at",
    "error",
    "policy_state",
    "inference_checkpoints",
    "training_checkpoints",
    "latest_training_checkpoint_id",
    "latest_training_checkpoint_step",
    "latest_inference_checkpoint_id",
    "latest_inference_checkpoint_step",
    "effective_lora_config",
    *deadline.OUTPUTS,
)
WANDB_KEYS = ("entity", "project", "group", "run_id", "run_name", "url")


class TrainingSessionKind(Kind[TrainingSession, TrainingSessionCreateRequest]):
    """How the shared lifecycle (:mod:`.lifecycle`) runs a training session."""

    collection = TRAINING_SESSIONS
    required = "model_resources_id"
    replace_on_changes = REPLACE_ON_CHANGES
    update_in_place = UPDATE_IN_PLACE
    check_added = (SPEC_KEY,)
    output_keys = OUTPUT_KEYS
    target = TrainingSessionStatus.RUNNING
    failed = frozenset({*SESSION_GONE, TrainingSessionStatus.STOPPING})
    adoptable = frozenset(LIVE_SESSION_STATUSES)
    create_timeout = config.TRAINING_SESSION_CREATE_TIMEOUT
    delete_timeout = config.TRAINING_SESSION_DELETE_TIMEOUT
    stopped_note = "the session is over; its model resource is not affected (it bills until destroyed)"
    still_held = "Its slot is still held: raise {setting} and run `pulumi destroy` (or `pulumi up`) again"

    # Sessions start and stop in seconds: the base's fast pace. Nothing to force, keep or price: the base's.

    def to_request(self, inputs: Props) -> TrainingSessionCreateRequest:
        body = pick(inputs, REPLACE_ON_CHANGES)
        if inputs.get("display_name"):
            body["display_name"] = inputs["display_name"]
        wandb = {k: v for k, v in ((inputs.get("metadata") or {}).get("wandb") or {}).items() if v}
        if wandb:
            body["metadata"] = {"wandb": wandb}
        return TrainingSessionCreateRequest.model_validate(body)

    def to_outputs(self, inputs: Props, obj: TrainingSession) -> State:
        """The state: declared inputs under their own names, then what the API reports."""
        return drop_none_items(
            {
                **pick(inputs, self.input_keys),
                "status": obj.status.short,
                "step": obj.step,
                "base_model": obj.base_model,
                "created_by": obj.created_by,
                "created_at": iso(obj.created_at),
                "updated_at": iso(obj.updated_at),
                "error": {"code": obj.error.code, "message": obj.error.message} if obj.error else None,
                "policy_state": obj.policy_state.model_dump(mode="json") if obj.policy_state else None,
                "inference_checkpoints": [c.model_dump(mode="json") for c in obj.inference_checkpoints],
                "training_checkpoints": [c.model_dump(mode="json") for c in obj.training_checkpoints],
                **_latest("training", obj.training_checkpoints),
                **_latest("inference", obj.inference_checkpoints),
                "effective_lora_config": obj.lora_config.to_wire() if obj.lora_config else None,
            }
        )

    def inputs_from_api(self, obj: TrainingSession) -> State:
        """Inputs that describe an existing session (for ``.get()``, where nothing was declared)."""
        wandb = _live_wandb(obj)
        return drop_none_items(
            {
                "model_resources_id": obj.model_resources_id,
                "lora_config": obj.lora_config.to_wire() if obj.lora_config else None,
                "resume_from_checkpoint_id": obj.resume_from_checkpoint_id,
                "display_name": obj.display_name,
                "metadata": {"wandb": wandb} if wandb else None,
            }
        )

    def read_inputs(self, inputs: State, obj: TrainingSession) -> State:
        """Declared inputs with ``display_name``/``metadata`` as they are now (drift shows at the next ``up``)."""
        inputs = dict(inputs)
        if (inputs.get("display_name") or "") != (obj.display_name or ""):
            inputs["display_name"] = obj.display_name or ""
        declared = {k: v for k, v in ((inputs.get("metadata") or {}).get("wandb") or {}).items() if v}
        live = _live_wandb(obj)
        if declared != live:
            inputs["metadata"] = {"wandb": live} if live else {}
        return inputs

    def patch(self, olds: Props, news: Props) -> dict[str, Any]:
        """The PATCH body: only what changed; a removed display name or W&B key is sent as ``""`` to clear
        it."""
        body: dict[str, Any] = {}
        if (olds.get("display_name") or "") != (news.get("display_name") or ""):
            body["display_name"] = news.get("display_name") or ""
        old_w = (olds.get("metadata") or {}).get("wandb") or {}
        new_w = (news.get("metadata") or {}).get("wandb") or {}
        wandb = {k: new_w.get(k) or "" for k in WANDB_KEYS if (old_w.get(k) or "") != (new_w.get(k) or "")}
        if wandb:
            body["metadata"] = {"wandb": wandb}
        return body

    def differences(self, inputs: Props, obj: TrainingSession) -> list[str]:
        """Where ``obj`` differs from the declared inputs (``adopt_id``: only what is declared is held against
        it; the one rule is :func:`~..client.matching.session_differences`)."""
        known = {k: v for k, v in inputs.items() if not is_unknown(v)}
        return [str(d) for d in session_differences(self.to_request(known), obj)]

    def subject(self, inputs: Props) -> str | None:
        named = inputs.get("display_name") or inputs.get("model_resources_id")
        return named if isinstance(named, str) else None

    def describe(self, ident: str, obj: TrainingSession | None) -> str:
        name = f" ({obj.display_name})" if obj is not None and obj.display_name else ""
        return f"training session {short_id(ident)}{name}: {obj.status.short if obj else 'not found'}"

    def gone_because(self, props: Props, obj: TrainingSession) -> str:
        """EXPIRED: its model resource stopped for inactivity (normal drift: the next ``up`` makes both
        again)."""
        if obj.status == TrainingSessionStatus.EXPIRED:
            return " (it ended when its model resource stopped itself for inactivity)"
        return ""


def _latest(kind: str, checkpoints: Sequence[Checkpoint]) -> dict[str, Any]:
    """``latest_<kind>_checkpoint_id`` / ``_step`` of the newest checkpoint (the last saved; the API's order of
    the list is not promised, so by creation time); none: nothing."""
    if not checkpoints:
        return {}
    newest = max(
        enumerate(checkpoints), key=lambda ic: (ic[1].created_at is not None, ic[1].created_at, ic[0])
    )[1]
    return {f"latest_{kind}_checkpoint_id": newest.id, f"latest_{kind}_checkpoint_step": int(newest.step)}


def _live_wandb(ts: TrainingSession) -> dict[str, str]:
    wandb = ts.metadata.wandb.to_wire() if ts.metadata and ts.metadata.wandb else {}
    return {k: v for k, v in wandb.items() if k in WANDB_KEYS and v}


TRAINING_SESSION = TrainingSessionKind()
"""How the shared lifecycle (:mod:`.lifecycle`) runs a training session."""
