"""Create reconciliation: one logical create of :class:`~.api.TogetherRL` never yields two objects, and a
lookup for a lost answer never takes an object it cannot attribute to that create.

Reconciliation of an ambiguous create
-------------------------------------
Together takes no idempotency key on create, so a create whose outcome is unknown is never simply resent:

1. **Snapshot.** Before the first send, the create lists (or joins a concurrent create's in-flight listing
   of) the ids of the caller's *active* objects of that kind (model resources: ``created_by=me``,
   PENDING/CREATING/READY; sessions: ``created_by=me``, the request's ``model_resources_id``, CREATING/RUNNING).
   None of these can be the one it is about to make. If this listing fails, the create fails at once with that
   error: nothing was sent, so nothing was created. The caller's :class:`CreateRecord` (the create journal)
   records the snapshot and the time of each send.
2. **Candidates** (:meth:`CreateReconciler.find_created_model_resource` and its session twin, also used by the
   journal for a create killed before its answer): an active object of the key's user that is

   * absent from the snapshot;
   * created within the POST's own window, judged by the object's ``created_at`` on the API's clock: from the
     first send to the answer (the process that sent it: to the moment it looks, since an unanswered server may
     still be acting; the journal's take-over: to the answer it recorded, or the last send plus the read
     timeout), shifted by how far the API's clock is ahead of this machine's (measured by the ``Date`` header of
     the API's answers, recorded with the create) and widened by :data:`POST_MARGIN` (:data:`CLOCK_SKEW` when
     the clock was never measured). An identical object made outside it is someone else's;
   * equal to the request with the server's defaults filled in (:func:`.matching.resource_differences` with
     :class:`.matching.ResourceDefaults`; :func:`.matching.session_differences` strict): an unset optimizer is
     Adam, not Muon;
   * claimed by nothing else: not an id this process already returned or took, not an id the caller's record
     proves another declaration's (``judge``: the journal's entries and claims). An id the record proves this
     create's own is taken whatever else matches; one whose record proves nothing either way makes the match
     ambiguous.

   The match must be **unique and uncontested**: two candidates, or one whose creation time also falls in the
   window of another unanswered create of the same request (``rivals``: the journal's), mean that none can be
   proven this create's. Then nothing is taken: :class:`AmbiguousCreate` names them, and the create fails
   saying what was found. A candidate found is claimed (process-wide) and returned, with one line on stderr
   that says it was taken by a match, not by an answer, and how long after the send it was made.
3. **Two kinds of ambiguous failure** (:func:`.transport.ambiguity`):

   * *answered*: the API itself answered that the create failed (a 5xx with its error envelope, not a
     gateway's 502/504): it has finished handling the request, so whatever it made exists now, though a list
     may show it a few seconds late. After a short pause the create looks over ``list_lag`` seconds
     (:data:`LIST_LAG`). Found -> what it is depends on the kind (:data:`ANSWERED_LOOKALIKE_RULE`): a model
     resource is **named, never taken** (the create fails naming it, the user decides, and the journal records
     that the answer was a refusal so that a later run never takes it on a match either); a training session is
     taken as this create's. Not found -> the server did not act, and the create is resent within the same
     attempt budget. When the budget runs out, the last error is raised, saying that an object
     may exist and how to find it.
   * *unanswered*: no readable answer came from the API itself (a read timeout, a connection broken after
     sending, a gateway's 502/504, a 5xx without the API's envelope, a 2xx whose body could not be read): the
     server may still be working on the request. The create looks repeatedly over a *settle window* (by default
     the read timeout; backoff 0.5 s doubling up to 8 s between lookups); a unique candidate is taken. Not found
     -> it is **never resent** (a resend could make a second GPU allocation): the error is raised, its message
     saying that the object may exist, how to find it (``created_by=me``) and the request's identifying
     inputs.

   A lookup that fails for now (429, 5xx, no answer, after its own retries) counts as "not found yet": the
   looking goes on over the whole settle window (for an answered failure too, which is then never resent:
   nothing proved that nothing was made). Only a lookup that fails for good (400, 401, an ambiguous match, ...),
   or a window spent while the last lookup failed, ends reconciliation: the create's error is raised with the
   same "may exist" hint and the lookup's error.

Threads of one process cannot steal each other's objects: creates of one kind share a gate, and a lookup runs
only while no create of that kind is in flight (a create claims its id before it leaves the gate).
Limits: a match is evidence, not proof. Another machine's identical create whose POST landed inside this
create's own window while this create's answer was lost would be taken (on one machine the journal's records rule
it out; across machines, the shared journal does); an object whose create stays unanswered longer than the settle
window is not found, and the create fails instead of resending; an object that ended (STOPPED/ERROR) before the
lookup is not a candidate (it no longer holds anything); an API that sends no ``Date`` header leaves the window
widened by :data:`CLOCK_SKEW`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import Any, Protocol, TypeVar

from ..messages import progress_line
from ..singleflight import SingleFlight
from .errors import ApiConnectionError, ApiError, TogetherError, is_transient
from .matching import resource_defaults, resource_differences, session_differences
from .models import (
    LIVE_RESOURCE_STATUSES,
    LIVE_SESSION_STATUSES,
    ApiObject,
    ModelResource,
    ModelResourceCreateRequest,
    ModelResourceList,
    StatusFilter,
    SupportedModelList,
    TrainingSession,
    TrainingSessionCreateRequest,
    TrainingSessionList,
)
from .transport import ANSWERED, UNANSWERED, RetryPolicy, Transport, ambiguity
from .wire import _RESOURCES, _SESSIONS, _Page, _pages, _parse

Created = TypeVar("Created", ModelResource, TrainingSession)
"""The object a create makes: a model resource or a training session."""

#: Seconds a create whose failure the server itself answered keeps looking before it concludes that nothing was
#: made and resends: a list can lag a create by a few seconds, and one look right away would miss the object.
LIST_LAG = 5.0

_SNAPSHOTS: SingleFlight[frozenset[str]] = SingleFlight(ttl=0.0)

#: Delays between the lookups of an unanswered create: the first, doubling up to the cap.
SETTLE_FIRST_DELAY = 0.5
SETTLE_MAX_DELAY = 8.0

POST_MARGIN = timedelta(seconds=3)
"""How far outside a POST's own window (its send to its answer, on the API's clock) an object's ``created_at`` may
lie and still be what it made: the ``Date`` header that measures the API's clock counts whole seconds, the answer
takes its latency to arrive, and ``created_at`` is stamped somewhere inside the request."""

CLOCK_SKEW = timedelta(seconds=120)
"""The margin when the API's clock was never measured (an answer without a ``Date`` header, or an entry of an
earlier release): generous for an unsynchronised laptop, tight enough that an identical object made minutes away
from the POST is someone else's."""

log = logging.getLogger("pulumi_together_rl.client")


Window = tuple[datetime, datetime]
Verdict = str
"""``"theirs"``, ``"ours"`` or ``"doubtful"``: what a caller's record proves of an id (:meth:`CreateRecord.judge`)."""
Rival = tuple[Window, "float | None"]
"""Another unanswered create's window, and the API clock's offset it was recorded with."""


class CreateRecord(Protocol):
    """What the caller (the create journal) records of one create, and what it knows of others'."""

    def posting(self, snapshot: Iterable[str], clock_offset: float | None) -> None:
        """Before the first send: the ids that existed, and how far the API's clock is ahead of this machine's
        (seconds; None: not measured), which maps the create's window onto the API's ``created_at``."""

    def sending(self) -> None:
        """Just before each POST."""

    def answered(self, refused: bool = False) -> None:
        """The create ended without an object (its window is closed); ``refused``: the API itself answered that
        it failed (then a look-alike is never taken on a match alone)."""

    def judge(self, ids: Sequence[str]) -> Mapping[str, Verdict]:
        """What the caller's record proves of ``ids``: ``theirs`` (another declaration holds it: never a
        candidate), ``ours`` (this create's own record names it: taken as proof), ``doubtful`` (a record names it
        but proves nothing: the match is ambiguous); ids it says nothing of are left out."""

    def rivals(self) -> list[Rival]:
        """Windows of other unanswered creates of the same request."""


@dataclasses.dataclass(frozen=True)
class Attribution:
    """What a lookup may take as a create's object (the strict conditions of the ownership rule)."""

    existing: frozenset[str]
    """Active ids before the create's first send."""
    window: Window | None
    """When its POSTs could have made it (this machine's clock); None: no bound."""
    offset: float | None = None
    """Seconds the API's clock was ahead of this machine's when the window was recorded (None: not measured, and
    the window is widened by :data:`CLOCK_SKEW` instead of :data:`POST_MARGIN`)."""
    judge: Callable[[Sequence[str]], Mapping[str, Verdict]] = lambda ids: {}
    """What the caller's record proves of the candidates' ids (:meth:`CreateRecord.judge`)."""
    rivals: Callable[[], list[Rival]] = list
    """Windows of other unanswered creates of the same request."""
    claim: bool = True
    """Whether a unique candidate is claimed (False: only looked at, for a confirmation still to come)."""


class AmbiguousCreate(TogetherError):
    """Several objects (or one that another unanswered create could have made) match a create whose answer was
    lost: none can be proven its own, so none is taken."""

    maybe_created = True

    def __init__(
        self, kind: str, candidates: Sequence[ApiObject], contested: bool, *, refused: bool = False
    ) -> None:
        self.kind = kind
        self.candidates = candidates
        listed = ", ".join(f"{c.id} ({c.status.short}, created {_ago(c.created_at)})" for c in candidates)
        if refused:
            why = (
                f"{_count(len(candidates), f'new {kind}')} {'matches' if len(candidates) == 1 else 'match'} it "
                f"({listed}), but the API itself answered that the create failed, and a match is not proof "
                "against that answer (a colleague's identical create may have landed meanwhile)"
            )
            super().__init__(f"{why}, so none was taken")
            return
        if contested and len(candidates) == 1:
            why = (
                f"one new {kind} matches it ({listed}), but another create of the same request that got no "
                "answer either may have made it"
            )
        else:
            why = f"{len(candidates)} new {kind}s match it ({listed})"
        super().__init__(f"{why}, so none can be proven this create's and none was taken")


class CreateReconciler(ABC):
    """The create-reconciliation half of :class:`~.api.TogetherRL` (a base class of it, not a client alone).

    It uses the client's ``base_url``, ``settle_window``, ``list_lag`` and transport, and its list endpoints
    (the abstract methods below).
    """

    base_url: str
    settle_window: float
    list_lag: float
    _transport: Transport
    _supported_cache: tuple[float, SupportedModelList] | None = None

    @abstractmethod
    def list_model_resources(
        self,
        *,
        status: StatusFilter = None,
        created_by: str | None = None,
        limit: int | None = None,
        after: str | None = None,
    ) -> ModelResourceList: ...

    @abstractmethod
    def list_training_sessions(
        self,
        *,
        status: StatusFilter = None,
        model_resources_id: str | None = None,
        created_by: str | None = None,
        limit: int | None = None,
        after: str | None = None,
    ) -> TrainingSessionList: ...

    @abstractmethod
    def list_supported_models(self) -> SupportedModelList: ...

    def active_model_resource_ids(self) -> frozenset[str]:
        """Ids of your model resources that are PENDING, CREATING or READY (every page; strict paging)."""
        return frozenset(item.id for item in _pages(self._list_live_resources, strict=True))

    def active_training_session_ids(self, model_resources_id: str) -> frozenset[str]:
        """Ids of your CREATING or RUNNING sessions on ``model_resources_id`` (every page; strict paging)."""
        return frozenset(
            item.id
            for item in _pages(lambda after: self._list_live_sessions(model_resources_id, after), strict=True)
        )

    def claim(self, id: str) -> bool:
        """Claim ``id`` for one create of this process: False when another already returned or took it (two
        declarations never get the same object)."""
        return _CLAIMS.claim(self.base_url, id)

    def unclaim(self, id: str) -> None:
        """A create of this process gave ``id`` up (it failed and left the object for the next create of its
        declaration): another create of this process may take it over."""
        _CLAIMS.release(self.base_url, id)

    def model_resource_mismatches(
        self, req: ModelResourceCreateRequest, resource: ModelResource
    ) -> list[str]:
        """How ``resource`` differs from what ``req`` makes: every field, the server's defaults filled in (from
        ``GET /v1/rl/supported-models``, kept ten minutes): the one rule for a look-alike and for an id a record
        names. Empty: it is what ``req`` makes."""
        return [
            str(d)
            for d in resource_differences(
                req, resource, defaults=resource_defaults(req, self._supported_models())
            )
        ]

    def training_session_mismatches(
        self, req: TrainingSessionCreateRequest, session: TrainingSession
    ) -> list[str]:
        """As :meth:`model_resource_mismatches`, for a training session (every LoRA field against its default)."""
        return [str(d) for d in session_differences(req, session, strict=True)]

    def find_created_model_resource(
        self, req: ModelResourceCreateRequest, *, attribution: Attribution
    ) -> ModelResource | None:
        """The model resource a create of ``req`` made, if one can be attributed to it; claimed when found.

        See the module docstring for the rules. Raises :class:`AmbiguousCreate` when several (or a contested
        one) match, and the lookup's own error if listing fails."""

        def matches(r: ModelResource) -> bool:
            # The defaults are asked for only when a candidate gets this far (and then kept ten minutes).
            return r.status in LIVE_RESOURCE_STATUSES and not self.model_resource_mismatches(req, r)

        with _MODEL_RESOURCE.gate.reconciling():
            return self._find_and_claim(_MODEL_RESOURCE, self._list_live_resources, matches, attribution)

    def find_created_training_session(
        self, req: TrainingSessionCreateRequest, *, attribution: Attribution
    ) -> TrainingSession | None:
        """The training session a create of ``req`` made, if one can be attributed to it; claimed when found.

        ``attribution.existing``: :meth:`active_training_session_ids` of ``req.model_resources_id``."""
        with _TRAINING_SESSION.gate.reconciling():
            return self._find_and_claim(
                _TRAINING_SESSION,
                lambda after: self._list_live_sessions(req.model_resources_id, after),
                lambda s: s.status in LIVE_SESSION_STATUSES and not self.training_session_mismatches(req, s),
                attribution,
            )

    # -------------------------------------------------------------------------------------- private

    def _create(
        self,
        kind: _Kind,
        req: ModelResourceCreateRequest | TrainingSessionCreateRequest,
        model: type[Created],
        snapshot: Callable[[], frozenset[str]],
        find: Callable[[Attribution], Created | None],
        record: CreateRecord | None,
    ) -> Created:
        transport = self._transport
        # Concurrent creates of one kind (and resource) share one in-flight snapshot: it was taken before any
        # of their sends, which is all a snapshot must be. Nothing is cached past it.
        scope = (self.base_url, kind.name, getattr(req, "model_resources_id", None))
        existing: frozenset[str] = _SNAPSHOTS.get(scope, lambda: self._snapshot(kind, snapshot))
        if record is not None:
            record.posting(existing, transport.clock_offset)
        body = req.to_wire()
        budget = transport.attempts()
        first_send: datetime | None = None
        while True:
            failure: TogetherError
            try:
                with kind.gate.sending():
                    if record is not None:
                        record.sending()
                    first_send = first_send or _utcnow()
                    data = transport.request("POST", kind.path, policy=kind.policy, json=body, budget=budget)
                    created = _parse(model, data, "POST", kind.path)
                    _CLAIMS.claim(self.base_url, created.id)
                    return created
            except TogetherError as error:
                failure = error
            # Raised from here on, outside the except block: no __context__ to carry along.
            how = ambiguity(failure)
            if how is None:
                if record is not None:
                    record.answered()
                raise failure
            assert first_send is not None  # stamped before the POST that failed
            sent: datetime = first_send

            def look(
                claim: bool, existing: frozenset[str] = existing, since: datetime = sent
            ) -> Created | None:
                # What its POSTs could have made: absent from the snapshot, created between the first send and
                # now on the API's clock (the server may still be acting on a request it never answered). The
                # caller's record rules out what other declarations hold or may have made meanwhile.
                return find(
                    Attribution(
                        existing,
                        (since, _utcnow()),
                        offset=transport.clock_offset,
                        judge=record.judge if record is not None else (lambda ids: {}),
                        rivals=record.rivals if record is not None else list,
                        claim=claim,
                    )
                )

            waited: float | None = None
            if how == ANSWERED:
                # The API itself answered that the create failed: whatever it made exists now, though a list may
                # take a few seconds (list_lag) to show it. What a look-alike then is depends on the kind
                # (:attr:`_Kind.answered_lookalike_is_ours`): named, never taken, or taken as this create's.
                transport.pause(budget, failure)
                taking: bool = kind.answered_lookalike_is_ours

                def answered_look(claim: bool, taking: bool = taking) -> Created | None:
                    return look(claim and taking)

                found, lookup_error, _ = self._settle(
                    kind, failure, answered_look, self.list_lag, first_wait=False
                )
                if found is None and lookup_error is not None and is_transient(lookup_error):
                    # We could not look (the API is failing): never resend blind; look over the settle window.
                    found, lookup_error, _ = self._settle(kind, failure, answered_look, self.settle_window)
                if found is not None and not taking:
                    lookup_error, found = AmbiguousCreate(kind.name, [found], False, refused=True), None
            else:
                found, lookup_error, waited = self._settle(kind, failure, look, self.settle_window)
            if found is not None:
                made = _seconds_between(first_send, found.created_at, transport.clock_offset)
                _say(
                    f"{kind.name} {found.id}: taken as this create's by a match, not by an answer: the POST got no "
                    f"answer ({failure}), and it is the one new {kind.name} that matches the request, made {made} "
                    f"after the POST was sent ({_ago(found.created_at)})"
                )
                return found
            if lookup_error is not None or how == UNANSWERED or budget.left <= 0:
                if record is not None:
                    record.answered(refused=how == ANSWERED)
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
    def _lookup(look: Callable[[], Created | None]) -> tuple[Created | None, TogetherError | None]:
        try:
            return look(), None
        except TogetherError as error:
            return None, error

    def _settle(
        self,
        kind: _Kind,
        failure: TogetherError,
        look: Callable[[bool], Created | None],
        window: float,
        *,
        first_wait: bool = True,
    ) -> tuple[Created | None, TogetherError | None, float]:
        """Look for a failed create's object for ``window`` seconds (sleeping between lookups; the first
        lookup at once when ``first_wait`` is false, as after an answered failure's own pause).

        A candidate is taken only once it has stayed the one and only candidate for ``list_lag`` seconds (the
        looking goes on past ``window`` for that): a list can lag a create, and while it hides this create's
        own object, a look-alike that another process made meanwhile would look unique. For the same reason an
        ambiguity is reported only once ``list_lag`` seconds have passed, so that it names this create's own
        object among the candidates."""
        confirm = self.list_lag
        waited = 0.0
        delay = min(SETTLE_FIRST_DELAY, window) if first_wait else 0.0
        lookups = 0
        seen: tuple[str, float] | None = None  # the unique candidate so far, and when it was first seen alone
        while True:
            if delay > 0:
                self._transport.wait(delay)
            waited += delay
            found, lookup_error = self._lookup(lambda: look(confirm <= 0))
            lookups += 1
            # A lookup that fails for now (429, 5xx, no answer) is "not found yet": an outage that takes the
            # list down with the create must not end the looking before the window does.
            retry = lookup_error is not None and is_transient(lookup_error)
            if isinstance(lookup_error, AmbiguousCreate) and waited < confirm:
                # Look-alikes are listed, but this create's own object may not be yet: name the candidates only
                # once the list has had time to show it, or the user would be asked to decide without it.
                delay = min(SETTLE_FIRST_DELAY, confirm - waited)
                continue
            if lookup_error is not None and not retry:
                return None, lookup_error, waited
            if found is not None and confirm <= 0:
                return found, None, waited
            if found is not None:
                if seen is None or seen[0] != found.id:
                    seen = (found.id, waited)
                if waited - seen[1] >= confirm:
                    claimed, lookup_error = self._lookup(lambda: look(True))
                    if claimed is not None and claimed.id == found.id:
                        return claimed, None, waited
                    if lookup_error is not None and not is_transient(lookup_error):
                        return None, lookup_error, waited
                    seen = None  # it changed under us: keep looking
                else:
                    delay = min(SETTLE_FIRST_DELAY, confirm - (waited - seen[1]))
                    continue
            else:
                seen = None
            if waited >= window:
                return None, lookup_error, waited
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

    def _supported_models(self) -> SupportedModelList:
        """``GET /v1/rl/supported-models`` for the server's defaults, kept by this client for ten minutes (only
        a lookup for a lost answer needs it)."""
        cached = self._supported_cache
        if cached is not None and cached[0] > _monotonic():
            return cached[1]
        models = self.list_supported_models()
        self._supported_cache = (_monotonic() + 600.0, models)
        return models

    def _find_and_claim(
        self,
        kind: _Kind,
        list_page: Callable[[str | None], _Page[Created]],
        matches: Callable[[Created], bool],
        attribution: Attribution,
    ) -> Created | None:
        listed = list(_pages(list_page, strict=True))
        # What others hold and may have made is read after the list, rivals first: another create that records
        # its id meanwhile is then either still a rival (no id yet) or already a claim, never neither.
        rivals = attribution.rivals()
        candidates = [
            item
            for item in listed
            if item.id not in attribution.existing
            and (self.base_url, item.id) not in _CLAIMS
            and (
                attribution.window is None or _within(item.created_at, attribution.window, attribution.offset)
            )
            and matches(item)
        ]
        verdicts = attribution.judge([c.id for c in candidates]) if candidates else {}
        ours = [c for c in candidates if verdicts.get(c.id) == "ours"]
        if ours:
            # This create's own record names it (its id written, the answer lost before the engine had it):
            # proof, whatever else looks alike.
            item = ours[0]
            if attribution.claim and not _CLAIMS.claim(self.base_url, item.id):
                return None
            return item
        doubtful = any(verdicts.get(c.id) == "doubtful" for c in candidates)
        candidates = [c for c in candidates if verdicts.get(c.id) != "theirs"]
        if not candidates:
            return None
        contested = doubtful or any(
            _within(c.created_at, w, offset) for c in candidates for w, offset in rivals
        )
        if len(candidates) > 1 or contested:
            candidates.sort(key=lambda c: (_aware(c.created_at), c.id))
            raise AmbiguousCreate(kind.name, candidates, contested)
        item = candidates[0]
        if not attribution.claim:
            return item
        return item if _CLAIMS.claim(self.base_url, item.id) else None


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

    def release(self, scope: str, id: str) -> None:
        with self._lock:
            self._ids.discard((scope, id))

    def __contains__(self, key: tuple[str, str]) -> bool:
        with self._lock:
            return key in self._ids

    def clear(self) -> None:
        with self._lock:
            self._ids.clear()


class _Kind:
    def __init__(
        self, name: str, path: str, policy: RetryPolicy, list_query: str, *, answered_lookalike_is_ours: bool
    ) -> None:
        self.name = name
        self.path = path
        self.policy = policy
        self.list_query = list_query  # where to look for a stray object
        self.answered_lookalike_is_ours = answered_lookalike_is_ours
        """After the API's own 5xx to a create (and at a later run's take-over of such a create): whether the one
        new object that matches inside the POST's window, that no record accounts for, is taken as this
        create's. See :data:`ANSWERED_LOOKALIKE_RULE`."""
        self.gate = _CreateGate()


ANSWERED_LOOKALIKE_RULE = """\
What an identical object found after the API's own 5xx to a create is, per kind (the one place it is decided):

* a **model resource** request names only a base model and settings that any colleague with the same key can
  request identically at the same moment: against the API's own "failed", a look-alike is as likely theirs as
  ours. It is named, never taken (the user decides: ``adopt_id``, or ``journal dismiss``).
* a **training session** request names a model resource, which the stack's own state holds: a colleague does not
  start sessions on another stack's GPU. The one look-alike on that GPU made inside the POST's own window, that
  no journal entry or claim accounts for and no other unanswered create of the same request could have made, is
  this create's, and is taken (then recorded and waited for as if the POST had answered).
"""

_CLAIMS = _Claims()
_MODEL_RESOURCE = _Kind(
    "model resource", _RESOURCES, RetryPolicy.CREATE, "created_by=me", answered_lookalike_is_ours=False
)
# A 429 on a session create is the per-resource session cap: never retried.
_TRAINING_SESSION = _Kind(
    "training session",
    _SESSIONS,
    RetryPolicy.CREATE_CAPPED,
    "created_by=me&model_resources_id=<id>",
    answered_lookalike_is_ours=True,
)


def answered_lookalike_is_ours(kind_name: str) -> bool:
    """:attr:`_Kind.answered_lookalike_is_ours` of the kind named ``kind_name`` (for the journal's take-over)."""
    return {k.name: k for k in (_MODEL_RESOURCE, _TRAINING_SESSION)}[kind_name].answered_lookalike_is_ours


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
    rebuilt.lookup_error = lookup_error  # an AmbiguousCreate here asks the user, not another run, to decide
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


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


def _monotonic() -> float:
    return time.monotonic()


def _within(moment: datetime, window: Window, offset: float | None) -> bool:
    """Whether ``moment`` (the API's clock) falls in ``window`` (this machine's, ``offset`` seconds behind the
    API's), give or take :data:`POST_MARGIN`; :data:`CLOCK_SKEW` when the offset was never measured."""
    start, end = window
    margin = CLOCK_SKEW if offset is None else POST_MARGIN
    shift = timedelta(seconds=offset or 0.0)
    return _aware(start) + shift - margin <= _aware(moment) <= _aware(end) + shift + margin


def _seconds_between(sent: datetime | None, made: datetime, offset: float | None) -> str:
    """How long after ``sent`` (this machine's clock) the API stamped ``made``, for the line that says so."""
    if sent is None:
        return "an unknown time"
    seconds = (_aware(made) - _aware(sent)).total_seconds() - (offset or 0.0)
    return f"{max(0.0, seconds):.1f} s"


def _count(n: int, what: str) -> str:
    return f"one {what}" if n == 1 else f"{n} {what}s"


def _ago(moment: datetime) -> str:
    seconds = max(0, int((_utcnow() - _aware(moment)).total_seconds()))
    return f"{seconds} s ago" if seconds < 120 else f"{seconds // 60} min ago"


def _say(line: str) -> None:
    """One progress line for the user (Pulumi shows a dynamic provider's stderr), whole, under the lock every
    writer of that stream shares."""
    progress_line(line)


__all__ = [
    "CLOCK_SKEW",
    "LIVE_RESOURCE_STATUSES",
    "LIVE_SESSION_STATUSES",
    "AmbiguousCreate",
    "Attribution",
    "CreateReconciler",
    "CreateRecord",
    "describe_request",
]
