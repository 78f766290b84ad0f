"""What the state holds and hands out: records, the clock and timestamps, ordering and pages.

Records are plain dataclasses; the state hands out deep copies, never the records it holds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta, timezone
from typing import Any

from .errors import InvalidRequest
from .tables import LIMIT_DEFAULT, LIMIT_RANGE

# ------------------------------------------------------------------------------------------------- clock


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class Clock:
    """Real UTC time (or an injected source) plus an offset that only moves forward."""

    def __init__(self, wall: Callable[[], datetime] = utcnow) -> None:
        self._wall = wall
        self.offset = 0.0

    def now(self) -> datetime:
        return self._wall() + timedelta(seconds=self.offset)


def iso(dt: datetime) -> str:
    """RFC 3339 in UTC with a ``Z``, microsecond precision (what pydantic and the SDK parse)."""
    return dt.astimezone(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


# ----------------------------------------------------------------------------------------------- records


@dataclasses.dataclass
class ModelResourceRecord:
    id: str
    seq: int
    base_model: str
    gpu_type: str
    num_generator_replicas: int
    lora_enabled: bool
    optimizer_config: dict[str, Any]
    inactive_timeout: int
    base_weights_ref: str | None
    created_by: str
    created_at: datetime
    updated_at: datetime
    status: str
    entered_at: datetime
    expires_at: datetime | None = None
    error: dict[str, Any] | None = None
    #: Filled on the copies handed out: place in the GPU queue while PENDING.
    queue_position: int | None = None
    #: The key_digest of the key whose create made it (control API only; never in an API answer).
    created_with: str | None = None


@dataclasses.dataclass
class TrainingSessionRecord:
    id: str
    seq: int
    model_resources_id: str
    base_model: str
    created_by: str
    created_at: datetime
    updated_at: datetime
    status: str
    entered_at: datetime
    display_name: str | None = None
    wandb: dict[str, str] = dataclasses.field(default_factory=dict)
    lora_config: dict[str, Any] | None = None
    resume_from_checkpoint_id: str | None = None
    load_optimizer: bool | None = None
    error: dict[str, Any] | None = None
    #: The key_digest of the key whose create made it (control API only; never in an API answer).
    created_with: str | None = None
    #: Optimizer steps taken (the control API's ``advance``: no training is emulated, only its bookkeeping).
    step: int = 0
    #: ``{id, created_at, step}`` of each checkpoint it saved, oldest first, as the session embeds them.
    training_checkpoints: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    inference_checkpoints: list[dict[str, Any]] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class CheckpointRecord:
    """A checkpoint a session saved (made through the control API)."""

    id: str
    type: str
    """``CHECKPOINT_TYPE_TRAINING`` or ``CHECKPOINT_TYPE_INFERENCE``."""
    session_id: str
    base_model: str
    step: int
    created_at: datetime
    lora_rank: int | None = None


@dataclasses.dataclass
class ArmedFailure:
    id: str
    kind: str
    code: str
    message: str
    target: str | None  # object id, or None = the next transition of any object of that kind

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class ResourceSpec:
    """A validated create / estimate-cost body, with server defaults filled in."""

    base_model: str
    gpu_type: str
    num_generator_replicas: int
    lora_enabled: bool
    optimizer_config: dict[str, Any]
    inactive_timeout: int
    base_weights_ref: str | None


@dataclasses.dataclass
class Page:
    data: list[Any]
    limit: int
    has_more: bool
    next_cursor: str


# ------------------------------------------------------------------------------------ order and pages


def _sort_key(obj: Any) -> tuple[datetime, str]:
    return (obj.created_at, obj.id)


def _newest_first(items: Iterable[Any]) -> list[Any]:
    return sorted(items, key=_sort_key, reverse=True)


def _oldest_first(items: Iterable[Any]) -> list[Any]:
    return sorted(items, key=_sort_key)


def _paginate(items: list[Any], everything: dict[str, Any], limit: int | None, after: str | None) -> Page:
    if limit is None:
        limit = LIMIT_DEFAULT
    if not LIMIT_RANGE[0] <= limit <= LIMIT_RANGE[1]:
        raise InvalidRequest(f"limit must be between {LIMIT_RANGE[0]} and {LIMIT_RANGE[1]}.", param="limit")
    ordered = _newest_first(items)
    if after:
        cursor = everything.get(after)
        if cursor is None:
            raise InvalidRequest(f"after: unknown cursor {after!r}.", param="after", code="invalid_cursor")
        # Position by the cursor object's sort key, so a cursor that no longer matches the filter still works.
        key = _sort_key(cursor)
        ordered = [o for o in ordered if _sort_key(o) < key]
    data = ordered[:limit]
    has_more = len(ordered) > limit
    return Page(data=data, limit=limit, has_more=has_more, next_cursor=data[-1].id if has_more else "")
