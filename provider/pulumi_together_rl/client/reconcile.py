"""Create reconciliation: one logical create of :class:`~.api.TogetherRL` never yields two objects.

Reconciliation of an ambiguous create
-------------------------------------
Together takes no idempotency key on create, so a create whose outcome is unknown is never simply resent:

1. **Snapshot.** Before the first send, the create lists (or joins a concurrent create's in-flight listing
   of) the ids of the caller's *active* objects of that kind (model resources: ``created_by=me``, PENDING/CREATING/READY; sessions: ``created_by=me``, the
   request's ``model_resources_id``, CREATING/RUNNING). None of these can be the one it is about to make. If
   this listing fails, the create fails at once with that error: nothing was sent, so nothing was created.
2. **Candidates.** After an ambiguous failure, a candidate is an active object that is not in the snapshot,
   not already claimed by this process, and matches every input the request set
   (:func:`.matching.resource_matches`, :func:`.matching.session_matches`). No wall clock is involved, so clock
   skew between us and the server cannot hide or forge a candidate. If several qualify, the *oldest* is taken: the snapshot is taken one round trip
   before the send, so a stranger's identical object can only be older than ours if it was made in that one
   round trip, whereas every identical object made after ours is newer. The chosen object is claimed (a
   process-wide, thread-safe set that also holds every id a create returned) and returned, with one line on
   stderr ("create of model resource answered <error>; found the model resource it made: <id>").
3. **Two kinds of ambiguous failure** (:func:`.transport.ambiguity`):

   * *answered*: the server itself answered a 5xx (not a gateway's 502/504): it has finished handling the
     request, so whatever it made exists now, though a list may show it a few seconds late. After a short pause
     the create looks over ``list_lag`` seconds (:data:`LIST_LAG`); found -> returned; not found -> the server
     did not act, and the create is resent within the same attempt budget. When the
     budget runs out, the last error is raised, saying that an object may exist and how to find it.
   * *unanswered*: a read timeout, a connection broken after sending, a gateway's 502/504, or a 2xx whose
     body could not be read: the server may still be working on the request. The create looks repeatedly
     over a *settle window* (by default the read timeout; backoff 0.5 s doubling up to 8 s between lookups),
     found -> returned. Not found -> it is **never resent** (a resend could make a second GPU allocation):
     the error is raised, its message saying that the object may exist, how to find it (``created_by=me``)
     and the request's identifying inputs.

   A lookup that fails for now (429, 5xx, no answer, after its own retries) counts as "not found yet": the
   looking goes on over the whole settle window (for an answered failure too, which is then never resent:
   nothing proved that nothing was made). Only a lookup that fails for good (400, 401, ...), or a window spent
   while the last lookup failed, ends reconciliation: the create's error is raised with the same "may exist"
   hint and the lookup's error.

Threads of one process cannot steal each other's objects: creates of one kind share a gate, and a lookup runs
only while no create of that kind is in flight (a create claims its id before it leaves the gate).
Limits: another process (or person) using the same key that creates an identical object between our snapshot
and our lookup can be mistaken for ours (matching every input makes this unlikely); an object whose create
stays unanswered longer than the settle window is not found, and the create fails instead of resending; an
object that ended (STOPPED/ERROR) before the lookup is not a candidate (it no longer holds anything).
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any

from ..singleflight import SingleFlight
from .errors import ApiConnectionError, ApiError, TogetherError, is_transient
from .matching import resource_matches, session_matches
from .models import (
    ModelResource,
    ModelResourceCreateRequest,
    ModelResourceList,
    ModelResourceStatus,
    TrainingSession,
    TrainingSessionCreateRequest,
    TrainingSessionList,
    TrainingSessionStatus,
)
from .transport import ANSWERED, UNANSWERED, RetryPolicy, Transport, ambiguity
from .wire import _RESOURCES, _SESSIONS, M, _pages, _parse

#: Seconds a create whose failure the server itself answered keeps looking before it concludes that nothing was
#: made and resends: a list can lag a create by a few seconds, and one look right away would miss the object.
LIST_LAG = 5.0

_SNAPSHOTS: SingleFlight[frozenset[str]] = SingleFlight(ttl=0.0)

#: Delays between the lookups of an unanswered create: the first, doubling up to the cap.
SETTLE_FIRST_DELAY = 0.5
SETTLE_MAX_DELAY = 8.0

#: Statuses of objects that hold something (a GPU allocation, a session slot) and may be a create's result.
LIVE_RESOURCE_STATUSES = (
    ModelResourceStatus.PENDING,
    ModelResourceStatus.CREATING,
    ModelResourceStatus.READY,
)
LIVE_SESSION_STATUSES = (TrainingSessionStatus.CREATING, TrainingSessionStatus.RUNNING)

log = logging.getLogger("pulumi_together_rl.client")


class CreateReconciler:
    """The create-reconciliation half of :class:`~.api.TogetherRL` (a base class of it, not a client alone).

    It uses the client's ``base_url``, ``settle_window`` and transport, and its ``list_model_resources`` and
    ``list_training_sessions``.
    """

    base_url: str
    settle_window: float
    _transport: Transport

    def active_model_resource_ids(self) -> frozenset[str]:
        """Ids of your model resources that are PENDING, CREATING or READY (every page; strict paging)."""
        return frozenset(item.id for item in _pages(self._list_live_resources, strict=True))

    def active_training_session_ids(self, model_resources_id: str) -> frozenset[str]:
        """Ids of your CREATING or RUNNING sessions on ``model_resources_id`` (every page; strict paging)."""
        return frozenset(
            item.id
            for item in _pages(lambda after: self._list_live_sessions(model_resources_id, after), strict=True)
        )

    def find_created_model_resource(
        self, req: ModelResourceCreateRequest, *, existing_ids: Iterable[str], exclude_ids: Iterable[str] = ()
    ) -> ModelResource | None:
        """The model resource a create of ``req`` made, if any; claimed when found.

        ``existing_ids`` are the active ids listed before the create was sent
        (:meth:`active_model_resource_ids`). See the module docstring for the rules. Raises the lookup's own
        error if listing fails.
        """
        with _MODEL_RESOURCE.gate.reconciling():
            return self._find_and_claim(
                self._list_live_resources,
                lambda r: r.status in LIVE_RESOURCE_STATUSES and resource_matches(req, r),
                existing_ids,
                exclude_ids,
            )

    def find_created_training_session(
        self,
        req: TrainingSessionCreateRequest,
        *,
        existing_ids: Iterable[str],
        exclude_ids: Iterable[str] = (),
    ) -> TrainingSession | None:
        """The training session a create of ``req`` made, if any; claimed when found.

        ``existing_ids``: :meth:`active_training_session_ids` of ``req.model_resources_id`` before the send.
        """
        with _TRAINING_SESSION.gate.reconciling():
            return self._find_and_claim(
                lambda after: self._list_live_sessions(req.model_resources_id, after),
                lambda s: s.status in LIVE_SESSION_STATUSES and session_matches(req, s),
                existing_ids,
                exclude_ids,
            )

    # -------------------------------------------------------------------------------------- private

    def _create(
        self,
        kind: _Kind,
        req: ModelResourceCreateRequest | TrainingSessionCreateRequest,
        model: type[M],
        snapshot: Callable[[], frozenset[str]],
        find: Callable[[frozenset[str]], M | None],
    ) -> M:
        transport = self._transport
        # Concurrent creates of one kind (and resource) share one in-flight snapshot: it was taken before any
        # of their sends, which is all a snapshot must be. Nothing is cached past it.
        scope = (self.base_url, kind.name, getattr(req, "model_resources_id", None))
        existing = _SNAPSHOTS.get(scope, lambda: self._snapshot(kind, snapshot))
        body = req.to_wire()
        budget = transport.attempts()
        while True:
            failure: TogetherError
            try:
                with kind.gate.sending():
                    data = transport.request("POST", kind.path, policy=kind.policy, json=body, budget=budget)
                    created = _parse(model, data, "POST", kind.path)
                    _CLAIMS.claim(self.base_url, created.id)
                    return created
            except TogetherError as error:
                failure = error
            # Raised from here on, outside the except block: no __context__ to carry along.
            how = ambiguity(failure)
            if how is None:
                raise failure
            waited: float | None = None
            if how == ANSWERED:
                # The server finished with the request: whatever it made exists now, though a list may take a
                # few seconds (list_lag) to show it. Look over that window.
                transport.pause(budget, failure)
                found, lookup_error, _ = self._settle(
                    kind, failure, find, existing, self.list_lag, first_wait=False
                )
                if found is None and lookup_error is not None and is_transient(lookup_error):
                    # We could not look (the API is failing): never resend blind; look over the settle window.
                    found, lookup_error, _ = self._settle(kind, failure, find, existing, self.settle_window)
            else:
                found, lookup_error, waited = self._settle(kind, failure, find, existing, self.settle_window)
            if found is not None:
                _say(f"create of {kind.name} answered {failure}; found the {kind.name} it made: {found.id}")
                return found
            if lookup_error is not None or how == UNANSWERED or budget.left <= 0:
                raise _maybe_created(kind, req, failure, lookup_error=lookup_error, waited=waited)
            # Answered, and the lookup proved nothing was made: resend within the same budget.

    def _snapshot(self, kind: _Kind, snapshot: Callable[[], frozenset[str]]) -> frozenset[str]:
        failure: TogetherError
        try:
            return snapshot()
        except TogetherError as error:
            failure = error
        raise _with_message(
            failure,
            f"creating the {kind.name}: nothing was sent, because listing your active {kind.name}s first "
            "(to recognise the one this create makes if its answer is lost) failed: ",
        )

    @staticmethod
    def _lookup(
        find: Callable[[frozenset[str]], M | None], existing: frozenset[str]
    ) -> tuple[M | None, TogetherError | None]:
        try:
            return find(existing), None
        except TogetherError as error:
            return None, error

    def _settle(
        self,
        kind: _Kind,
        failure: TogetherError,
        find: Callable[[frozenset[str]], M | None],
        existing: frozenset[str],
        window: float,
        *,
        first_wait: bool = True,
    ) -> tuple[M | None, TogetherError | None, float]:
        """Look for a failed create's object for ``window`` seconds (sleeping between lookups; the first
        lookup at once when ``first_wait`` is false, as after an answered failure's own pause)."""
        waited = 0.0
        delay = min(SETTLE_FIRST_DELAY, window) if first_wait else 0.0
        lookups = 0
        while True:
            if delay > 0:
                self._transport.wait(delay)
            waited += delay
            found, lookup_error = self._lookup(find, existing)
            lookups += 1
            # A lookup that fails for now (429, 5xx, no answer) is "not found yet": an outage that takes the
            # list down with the create must not end the looking before the window does.
            retry = lookup_error is not None and is_transient(lookup_error)
            if found is not None or (lookup_error is not None and not retry) or waited >= window:
                return found, lookup_error, waited
            if lookups == 1:
                _say(
                    f"create of {kind.name} failed ({failure}); looking for the {kind.name} it may have "
                    f"made for up to {window:g} s"
                )
            delay = min(max(delay * 2, SETTLE_FIRST_DELAY), SETTLE_MAX_DELAY, window - waited)

    def _list_live_resources(self, after: str | None) -> ModelResourceList:
        return self.list_model_resources(
            status=LIVE_RESOURCE_STATUSES, created_by="me", limit=100, after=after
        )

    def _list_live_sessions(self, model_resources_id: str, after: str | None) -> TrainingSessionList:
        return self.list_training_sessions(
            status=LIVE_SESSION_STATUSES,
            model_resources_id=model_resources_id,
            created_by="me",
            limit=100,
            after=after,
        )

    def _find_and_claim(
        self,
        list_page: Callable[[str | None], Any],
        matches: Callable[[Any], bool],
        existing_ids: Iterable[str],
        exclude_ids: Iterable[str],
    ) -> Any:
        skip = set(existing_ids) | set(exclude_ids)
        candidates = [
            item
            for item in _pages(list_page, strict=True)
            if item.id not in skip and (self.base_url, item.id) not in _CLAIMS and matches(item)
        ]
        candidates.sort(key=lambda c: (_aware(c.created_at), c.id))
        for item in candidates:
            if _CLAIMS.claim(self.base_url, item.id):
                if len(candidates) > 1:
                    log.warning(
                        "%d new objects match the create; took the oldest, %s (others: %s)",
                        len(candidates),
                        item.id,
                        ", ".join(c.id for c in candidates if c is not item),
                    )
                return item
        return None


class _CreateGate:
    """Creates of one kind run concurrently; a lookup runs alone (no create of that kind in flight).

    A lookup waiting blocks new creates, so it cannot starve.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._sending = 0
        self._looking = False
        self._waiting_lookups = 0

    @contextmanager
    def sending(self) -> Iterator[None]:
        with self._cond:
            while self._looking or self._waiting_lookups:
                self._cond.wait()
            self._sending += 1
        try:
            yield
        finally:
            with self._cond:
                self._sending -= 1
                self._cond.notify_all()

    @contextmanager
    def reconciling(self) -> Iterator[None]:
        with self._cond:
            self._waiting_lookups += 1
            try:
                while self._looking or self._sending:
                    self._cond.wait()
            finally:
                self._waiting_lookups -= 1
            self._looking = True
        try:
            yield
        finally:
            with self._cond:
                self._looking = False
                self._cond.notify_all()


class _Claims:
    """Ids this process already owns (returned by a create, or found by a lookup), per base URL."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids: set[tuple[str, str]] = set()

    def claim(self, scope: str, id: str) -> bool:
        """Claim ``id``; False when it was already claimed."""
        with self._lock:
            if (scope, id) in self._ids:
                return False
            self._ids.add((scope, id))
            return True

    def __contains__(self, key: tuple[str, str]) -> bool:
        with self._lock:
            return key in self._ids

    def clear(self) -> None:
        with self._lock:
            self._ids.clear()


class _Kind:
    def __init__(self, name: str, path: str, policy: RetryPolicy, list_query: str) -> None:
        self.name = name
        self.path = path
        self.policy = policy
        self.list_query = list_query  # where to look for a stray object
        self.gate = _CreateGate()


_CLAIMS = _Claims()
_MODEL_RESOURCE = _Kind("model resource", _RESOURCES, RetryPolicy.CREATE, "created_by=me")
# A 429 on a session create is the per-resource session cap: never retried.
_TRAINING_SESSION = _Kind(
    "training session", _SESSIONS, RetryPolicy.CREATE_CAPPED, "created_by=me&model_resources_id=<id>"
)


def _maybe_created(
    kind: _Kind,
    req: ModelResourceCreateRequest | TrainingSessionCreateRequest,
    error: TogetherError,
    *,
    lookup_error: TogetherError | None = None,
    waited: float | None = None,
) -> TogetherError:
    """``error`` again (same class and fields), its message saying that an object may exist and how to find it."""
    plural = f"{kind.name}s"
    query = kind.list_query.replace("<id>", getattr(req, "model_resources_id", ""))
    hint = f". Creating the {kind.name} may have succeeded anyway"
    if waited is not None and lookup_error is None:
        hint += (
            f": the server gave no answer, and no new {kind.name} matching the request showed up in "
            f"{waited:g} s of looking, so it was not resent (that could make a second one)"
        )
    if lookup_error is not None:
        hint += f" (looking for it failed: {lookup_error})"
    hint += (
        f". List your {plural} (GET {kind.path}?{query}) and look for one made just now with "
        f"{describe_request(req)}; stop it (or import it) if you do not want it"
    )
    rebuilt = _with_message(error, "", hint)
    rebuilt.maybe_created = True
    return rebuilt


def describe_request(req: ModelResourceCreateRequest | TrainingSessionCreateRequest, limit: int = 400) -> str:
    """The inputs a create set, as ``a.b=value`` pairs (what identifies the object it may have made)."""
    pairs: list[str] = []

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict) and value:
            for key in sorted(value):
                walk(f"{prefix}.{key}" if prefix else key, value[key])
        else:
            pairs.append(f"{prefix}={json.dumps(value)}")

    walk("", req.to_wire())
    text = ", ".join(pairs)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _with_message(error: TogetherError, prefix: str, suffix: str = "") -> TogetherError:
    """A new exception of ``error``'s class and fields whose message is ``prefix + message + suffix``."""
    message = getattr(error, "message", None)
    base = message if isinstance(message, str) else str(error)
    if suffix.startswith(". ") and base.rstrip().endswith("."):
        base = base.rstrip()[:-1]  # the server's message ends its own sentence: no ".."
    text = f"{prefix}{base}{suffix}"
    if isinstance(error, ApiError):
        return type(error)(
            error.status,
            text,
            type=error.type,
            code=error.code,
            param=error.param,
            request_id=error.request_id,
            method=error.method,
            path=error.path,
            retry_after=error.retry_after,
        )
    if isinstance(error, ApiConnectionError):
        return type(error)(text, method=error.method, path=error.path, maybe_sent=error.maybe_sent)
    try:
        return type(error)(text)
    except TypeError:  # pragma: no cover - a subclass with another signature
        return TogetherError(text)


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def _say(line: str) -> None:
    """One progress line for the user (Pulumi shows a dynamic provider's stderr)."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


__all__ = [
    "LIVE_RESOURCE_STATUSES",
    "LIVE_SESSION_STATUSES",
    "CreateReconciler",
    "describe_request",
]
