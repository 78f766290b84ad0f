"""Finding orphans: active objects of the key's user that no given state holds, priced and labelled."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from typing import Any

from .. import journal
from ..client import errors
from ..client.api import TogetherRL
from ..client.models import (
    ComputeConfigParams,
    ModelResource,
    ModelResourceCreateRequest,
    TrainingSession,
)
from ..client.reconcile import LIVE_RESOURCE_STATUSES, LIVE_SESSION_STATUSES
from ._common import (
    MODEL_RESOURCE,
    TRAINING_SESSION,
    OrphanError,
    _aware,
    _oldest_first,
    _short,
    explain,
    format_age,
)

# ------------------------------------------------------------------------------------------------ orphans


@dataclasses.dataclass
class Orphan:
    """An active object of this key's user that no given stack holds."""

    kind: str
    """:data:`MODEL_RESOURCE` or :data:`TRAINING_SESSION`."""
    id: str
    status: str
    """The short status: ``READY``, ``RUNNING``."""
    created_at: datetime
    base_model: str | None = None
    price_per_hour: float | None = None
    """Model resources: the estimate-cost price of a resource like it; None when unknown."""
    currency: str | None = None
    model_resources_id: str | None = None
    """Training sessions: the model resource it runs on."""
    resource_is_orphan: bool | None = None
    """Training sessions: whether its model resource is an orphan too (None: not known to this key's user)."""
    held_sessions: list[str] = dataclasses.field(default_factory=list)
    """Model resources: active sessions of this user on it that a stack holds (they block a stop)."""
    display_name: str | None = None
    interrupted_at: datetime | None = None
    """When the journal says an interrupted ``pulumi up`` began creating it; None when it says nothing."""

    def age(self, now: datetime | None = None) -> float:
        """Seconds since it was created (never negative: the API's clock and ours can disagree)."""
        moment = now or datetime.now(timezone.utc)
        return max(0.0, (moment - _aware(self.created_at)).total_seconds())

    def to_json(self, now: datetime | None = None) -> dict[str, Any]:
        return {
            "kind": self.kind.replace(" ", "_"),
            "id": self.id,
            "status": self.status,
            "created_at": _aware(self.created_at).isoformat(),
            "age_seconds": int(self.age(now)),
            "base_model": self.base_model,
            "price_per_hour": self.price_per_hour,
            "currency": self.currency,
            "model_resources_id": self.model_resources_id,
            "held_sessions": list(self.held_sessions),
            "display_name": self.display_name,
            "interrupted_create_at": _aware(self.interrupted_at).isoformat() if self.interrupted_at else None,
        }


def find_orphans(
    client: TogetherRL,
    held: Iterable[str],
    journal_entries: Iterable[journal.Entry] = (),
    *,
    min_age: float = 0.0,
    price: bool = True,
    now: datetime | None = None,
    note: Callable[[str], None] | None = None,
) -> list[Orphan]:
    """The active model resources and training sessions of ``client``'s user whose ids are not in ``held``.

    Model resources first, then sessions, each oldest first. ``journal_entries`` (:func:`journal.entries`)
    label what an interrupted create left; an object whose entry's process is still running is being created
    right now and is left out, as is anything younger than ``min_age`` seconds; ``note`` receives one line
    about each object left out. With ``price``, each orphan model resource gets its estimated hourly price.
    Listing failures raise :class:`OrphanError`.
    """
    held = set(held)
    now = now or datetime.now(timezone.utc)
    say = note or (lambda line: None)
    resources: list[ModelResource] = _listing(
        MODEL_RESOURCE, lambda: client.iter_model_resources(status=LIVE_RESOURCE_STATUSES, created_by="me")
    )
    sessions: list[TrainingSession] = _listing(
        TRAINING_SESSION, lambda: client.iter_training_sessions(status=LIVE_SESSION_STATUSES, created_by="me")
    )
    interrupted, creating = _journal_ids(journal_entries, client.base_url)

    def is_candidate(kind: str, obj: ModelResource | TrainingSession) -> bool:
        if obj.id in held:
            return False
        if obj.id in creating:
            say(
                f"note: left out {kind} {obj.id}: a running process on this machine (pid {creating[obj.id].pid}) "
                "is creating it right now, so its stack will hold it once that create returns."
            )
            return False
        age = max(0.0, (now - _aware(obj.created_at)).total_seconds())
        if age < min_age:
            say(
                f"note: left out {kind} {obj.id}: it is {format_age(age)} old, younger than --min-age "
                f"({format_age(min_age)}); a `pulumi up` elsewhere may still be creating it."
            )
            return False
        return True

    orphan_resources = [r for r in resources if is_candidate(MODEL_RESOURCE, r)]
    orphan_sessions = [s for s in sessions if is_candidate(TRAINING_SESSION, s)]
    orphan_resource_ids = {r.id for r in orphan_resources}
    listed_resource_ids = {r.id for r in resources}

    found: list[Orphan] = []
    for r in sorted(orphan_resources, key=_oldest_first):
        entry = interrupted.get(r.id)
        cost, currency = _price(client, r) if price else (None, None)
        found.append(
            Orphan(
                kind=MODEL_RESOURCE,
                id=r.id,
                status=_short(r.status),
                created_at=r.created_at,
                base_model=r.base_model,
                price_per_hour=cost,
                currency=currency,
                held_sessions=sorted(s.id for s in sessions if s.model_resources_id == r.id and s.id in held),
                interrupted_at=entry.started if entry else None,
            )
        )
    for s in sorted(orphan_sessions, key=_oldest_first):
        entry = interrupted.get(s.id)
        found.append(
            Orphan(
                kind=TRAINING_SESSION,
                id=s.id,
                status=_short(s.status),
                created_at=s.created_at,
                base_model=s.base_model,
                model_resources_id=s.model_resources_id,
                resource_is_orphan=(
                    s.model_resources_id in orphan_resource_ids
                    if s.model_resources_id in listed_resource_ids
                    else None
                ),
                display_name=s.display_name or None,
                interrupted_at=entry.started if entry else None,
            )
        )
    return found


def price_request(resource: ModelResource) -> ModelResourceCreateRequest:
    """The estimate-cost request of a resource like ``resource`` (its base model, LoRA flag and compute)."""
    compute = resource.compute_config
    params: dict[str, Any] = {"num_generator_replicas": compute.num_generator_replicas}
    if compute.gpu_type is not None:
        params["gpu_type"] = compute.gpu_type
    return ModelResourceCreateRequest(
        base_model=resource.base_model,
        lora_enabled=resource.lora_enabled,
        compute_config=ComputeConfigParams(**params),
    )


def _price(client: TogetherRL, resource: ModelResource) -> tuple[float | None, str | None]:
    try:
        estimate = client.estimate_model_resource_cost(price_request(resource))
    except (errors.TogetherError, ValueError):  # pydantic's ValidationError is a ValueError
        return None, None
    return estimate.price_per_hour, estimate.currency


def _journal_ids(
    entries: Iterable[journal.Entry], base_url: str
) -> tuple[dict[str, journal.Entry], dict[str, journal.Entry]]:
    """(interrupted creates, creates in flight on this machine) by object id, for this API."""
    interrupted: dict[str, journal.Entry] = {}
    creating: dict[str, journal.Entry] = {}
    for entry in entries:
        if not entry.id or entry.base_url.rstrip("/") != base_url.rstrip("/"):
            continue
        # The journal's own liveness test (this process counts as alive: its creates are in flight).
        (creating if journal.alive(entry.pid) else interrupted)[entry.id] = entry
    return interrupted, creating


def _listing(kind: str, fetch: Callable[[], Iterable[Any]]) -> list[Any]:
    failure: errors.TogetherError
    try:
        return list(fetch())
    except errors.TogetherError as exc:
        failure = exc
    cause, todo = explain(failure)
    raise OrphanError(f"listing your active {kind}s", "", None, cause, todo)
