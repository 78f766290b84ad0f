"""Finding orphans: active objects of the key's user that no given state holds, priced and labelled."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from typing import Any

from ..client import errors
from ..client.api import TogetherRL
from ..client.models import (
    LIVE_RESOURCE_STATUSES,
    LIVE_SESSION_STATUSES,
    ComputeConfigParams,
    ModelResource,
    ModelResourceCreateRequest,
    TrainingSession,
)
from ..client.reconcile import _within as within_window  # the create's own window test, not a second copy
from ..ours import MODEL_RESOURCE, TRAINING_SESSION
from ..ownership import journal
from ._common import (
    OrphanError,
    _aware,
    _oldest_first,
    _short,
    explain,
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
    api: str | None = None
    """The base URL of the API it was listed from."""
    journal: str | None = None
    """What the create journal says of it: ``in_flight``, ``interrupted``, ``done``, or ``window`` (no entry
    records its id, but it was made in the POST window of an interrupted create that got no id); None:
    nothing."""
    journal_label: str | None = None
    """That, as the clause the listing shows (``left by an interrupted pulumi up of ... at ...``)."""
    journal_owner: str | None = None
    """The declaration its journal entry names (``org/project/stack/name``); None for a v1 entry."""
    journal_backend: str | None = None
    """The identity of the backend of that declaration's stack; None when the entry did not record one."""
    journal_backend_location: str | None = None
    """That backend's location, as the entry recorded it."""
    journal_note: str | None = None
    journal_where: str | None = None
    """The shared journal (its URL, printable) of the entry that says it; None: this machine's folder."""
    pending_creates: list[str] = dataclasses.field(default_factory=list)
    """Stacks read with a pending create of its kind (``stack dev: sweep-gpu``): it may be what they create."""
    stop: bool | None = None
    """Whether ``--stop`` stops it (None until decided: :func:`.decide.decide`)."""
    held_back: str | None = None
    """Why ``--stop`` leaves it running: ``in_flight``, ``journal_window``, ``pending_create``,
    ``owner_not_read``, ``held_sessions``, ``too_young`` (:mod:`.decide`)."""
    why: str | None = None
    """That decision as one clause, with how to stop it anyway where there is a way."""
    young: bool = False
    """Younger than ``--min-age`` and not left by an interrupted create: a ``pulumi up`` may be creating it
    (``--fail-if-any`` does not count it)."""

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
            "api": self.api,
            "journal": self.journal,
            "journal_label": self.journal_label,
            "journal_owner": self.journal_owner,
            "journal_backend": self.journal_backend_location,
            "journal_note": self.journal_note,
            "journal_where": self.journal_where,
            "possible_pending_create_of": list(self.pending_creates),
            "stop_eligible": bool(self.stop),
            "held_back": self.held_back,
            "why": self.why,
        }


def find_orphans(
    client: TogetherRL,
    held: Iterable[str],
    journal_entries: Iterable[journal.Seen] = (),
    *,
    price: bool = True,
) -> list[Orphan]:
    """The active model resources and training sessions of ``client``'s user whose ids are not in ``held``.

    Model resources first, then sessions, each oldest first; every one is listed, whatever its age (what
    ``--stop`` does with each is :func:`.decide.decide`'s). ``journal_entries`` (:func:`journal.entries`) label
    what the create journal of this machine says of an orphan: being created right now by a running process,
    left by an interrupted create, or created and answered. With ``price``, each orphan model resource gets its
    estimated hourly price. Listing failures raise :class:`OrphanError`.
    """
    held = set(held)
    resources: list[ModelResource] = _listing(
        MODEL_RESOURCE, lambda: client.iter_model_resources(status=LIVE_RESOURCE_STATUSES, created_by="me")
    )
    sessions: list[TrainingSession] = _listing(
        TRAINING_SESSION, lambda: client.iter_training_sessions(status=LIVE_SESSION_STATUSES, created_by="me")
    )
    orphan_resources = [r for r in resources if r.id not in held]
    orphan_sessions = [s for s in sessions if s.id not in held]
    orphan_resource_ids = {r.id for r in orphan_resources}
    listed_resource_ids = {r.id for r in resources}
    wanted = orphan_resource_ids | {s.id for s in orphan_sessions}
    labels = journal_labels(journal_entries, client.base_url, wanted)

    found: list[Orphan] = []
    for r in sorted(orphan_resources, key=_oldest_first):
        cost, currency = _price(client, r) if price else (None, None)
        found.append(
            labels.apply(
                Orphan(
                    kind=MODEL_RESOURCE,
                    id=r.id,
                    status=_short(r.status),
                    created_at=r.created_at,
                    base_model=r.base_model,
                    price_per_hour=cost,
                    currency=currency,
                    held_sessions=sorted(
                        s.id for s in sessions if s.model_resources_id == r.id and s.id in held
                    ),
                    api=client.base_url,
                )
            )
        )
    for s in sorted(orphan_sessions, key=_oldest_first):
        found.append(
            labels.apply(
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
                    api=client.base_url,
                )
            )
        )
    return found


# ------------------------------------------------------------------------------------------ the journal


@dataclasses.dataclass
class JournalLabels:
    """What the journals say of each orphan id: the entry that records it and matters most (in flight, then
    unfinished, then done), and whether a process holds it; else the interrupted creates that got no id, whose
    POST windows may hold it."""

    entries: dict[str, journal.Seen]
    in_flight: set[str]
    windows: list[tuple[journal.Seen, bool]] = dataclasses.field(default_factory=list)
    """Unfinished entries with a POST sent and no id, younger than :data:`journal.MAX_AGE` (a later create of
    the declaration still takes a unique match in that window over; older ones are the finder's), and whether
    each is in flight."""

    def apply(self, orphan: Orphan) -> Orphan:
        seen = self.entries.get(orphan.id)
        if seen is None:
            return self._window(orphan)
        entry = seen.entry
        owner = entry.owner
        self._name(orphan, seen)
        if orphan.id in self.in_flight:
            orphan.journal = "in_flight"
            orphan.journal_label = f"{_running(seen)} is creating it for {owner or 'an unknown declaration'}"
        elif entry.state != journal.State.DONE:
            orphan.journal = "interrupted"
            orphan.interrupted_at = seen.modified  # the store's clock of its last write: no writer's clock
            of = f" of {owner}" if owner else ""
            orphan.journal_label = f"left by an interrupted pulumi up{of} at {_stamp(entry.started_at)}"
        else:
            orphan.journal = "done"
            finished = entry.answered_at or entry.started_at
            orphan.journal_label = (
                f"its create for {owner or 'an unknown declaration'} finished at {_stamp(finished)}, but no "
                "given state holds it (the answer may not have reached the engine, or the state lost it)"
            )
        return orphan

    def _window(self, orphan: Orphan) -> Orphan:
        """An orphan no entry records: held by the first create whose POST window it was made in, if any (a
        running one first)."""
        for seen, live in sorted(self.windows, key=lambda item: not item[1]):
            entry = seen.entry
            window = entry.window()
            if (
                window is None
                or entry.kind != orphan.kind
                or entry.base_url.rstrip("/") != (orphan.api or "").rstrip("/")
                or orphan.id in (entry.snapshot or ())
                or not within_window(_aware(orphan.created_at), window, entry.clock_offset)
            ):
                continue
            self._name(orphan, seen)
            owner = entry.owner or "an unknown declaration"
            sent = _stamp(min(entry.sends))
            orphan.journal = "in_flight" if live else "window"
            orphan.journal_label = (
                f"{_running(seen)} is creating one like it for {owner} and has no id yet: this may be it"
                if live
                else f"made while an interrupted pulumi up of {owner} waited for the answer to its POST (sent at "
                f"{sent}), which never came: it may be what that create made (entry {seen.name})"
            )
            return orphan
        return orphan

    @staticmethod
    def _name(orphan: Orphan, seen: journal.Seen) -> None:
        entry = seen.entry
        orphan.journal_owner = entry.owner
        orphan.journal_backend = entry.backend
        orphan.journal_backend_location = entry.backend_location
        orphan.journal_note = entry.note
        orphan.journal_where = seen.journal.location if seen.journal.shared else None


def _running(seen: journal.Seen) -> str:
    """Who holds an entry in flight: a create whose lease is live (in this machine's folder, or a shared one)."""
    entry = seen.entry
    by = entry.process.describe() if entry.process else "a process"
    if not seen.journal.shared:
        return f"a running process on this machine ({by})"
    return f"a running create ({by}, its lease in {seen.journal.location} is live)"


def journal_labels(entries: Iterable[journal.Seen], base_url: str, ids: Iterable[str] = ()) -> JournalLabels:
    """The journal entries of this API that record one of ``ids`` (every id when empty), one per id, and the
    interrupted or running creates of this API that got no id (:attr:`JournalLabels.windows`)."""
    wanted = set(ids)
    rank = {"in_flight": 0, "interrupted": 1, "done": 2}
    chosen: dict[str, tuple[int, journal.Seen]] = {}
    windows: list[tuple[journal.Seen, bool]] = []
    for seen in entries:
        entry = seen.entry
        if entry.base_url.rstrip("/") != base_url.rstrip("/"):
            continue
        live = entry.state not in journal.ENDED and seen.live()  # the journal's own liveness test: its lease
        if not entry.id:
            if entry.sends and entry.state not in journal.ENDED and seen.age() < journal.MAX_AGE:
                windows.append((seen, live))
            continue
        if wanted and entry.id not in wanted:
            continue
        state = "in_flight" if live else "interrupted" if entry.state != journal.State.DONE else "done"
        previous = chosen.get(entry.id)
        if previous is None or rank[state] < previous[0]:
            chosen[entry.id] = (rank[state], seen)
    return JournalLabels(
        entries={i: e for i, (_, e) in chosen.items()},
        in_flight={i for i, (r, _) in chosen.items() if r == 0},
        windows=windows,
    )


def _stamp(moment: datetime) -> str:
    return _aware(moment).astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


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


def _listing(kind: str, fetch: Callable[[], Iterable[Any]]) -> list[Any]:
    failure: errors.TogetherError
    try:
        return list(fetch())
    except errors.TogetherError as exc:
        failure = exc
    cause, todo = explain(failure)
    raise OrphanError(f"listing your active {kind}s", "", None, cause, todo)
