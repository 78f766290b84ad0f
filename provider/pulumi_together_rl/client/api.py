"""``TogetherRL``: one method per endpoint of the Together RL API, returning wire models.

Retries are the transport's business (see :mod:`.transport`); this module adds the one thing a transport cannot
do on its own: make sure one logical create never yields two objects.

Reconciliation of an ambiguous create
-------------------------------------
Together takes no idempotency key on create, so a create whose outcome is unknown is never simply resent:

1. **Snapshot.** Before the first send, the create lists the ids of the caller's *active* objects of that
   kind (model resources: ``created_by=me``, PENDING/CREATING/READY; sessions: ``created_by=me``, the
   request's ``model_resources_id``, CREATING/RUNNING). None of these can be the one it is about to make. If
   this listing fails, the create fails at once with that error: nothing was sent, so nothing was created.
2. **Candidates.** After an ambiguous failure, a candidate is an active object that is not in the snapshot,
   not already claimed by this process, and matches every input the request set (:func:`resource_matches`,
   :func:`session_matches`). No wall clock is involved, so clock skew between us and the server cannot hide
   or forge a candidate. If several qualify, the *oldest* is taken: the snapshot is taken one round trip
   before the send, so a stranger's identical object can only be older than ours if it was made in that one
   round trip, whereas every identical object made after ours is newer. The chosen object is claimed (a
   process-wide, thread-safe set that also holds every id a create returned) and returned, with one line on
   stderr ("create of model resource answered <error>; found the model resource it made: <id>").
3. **Two kinds of ambiguous failure** (:func:`.transport.ambiguity`):

   * *answered*: the server itself answered a 5xx (not a gateway's 502/504): it has finished handling the
     request, so whatever it made exists now. After a short pause the create looks once; found -> returned;
     not found -> the server did not act, and the create is resent within the same attempt budget. When the
     budget runs out, the last error is raised, saying that an object may exist and how to find it.
   * *unanswered*: a read timeout, a connection broken after sending, a gateway's 502/504, or a 2xx whose
     body could not be read: the server may still be working on the request. The create looks repeatedly
     over a *settle window* (by default the read timeout; backoff 0.5 s doubling up to 8 s between lookups),
     found -> returned. Not found -> it is **never resent** (a resend could make a second GPU allocation):
     the error is raised, its message saying that the object may exist, how to find it (``created_by=me``)
     and the request's identifying inputs.

   A lookup that fails (after its own retries) ends reconciliation: the create's error is raised with the
   same "may exist" hint and the lookup's error.

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
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from enum import Enum
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, ValidationError

from .errors import ApiConnectionError, ApiError, ConfigurationError, InvalidArgument, TogetherError
from .models import (
    CostEstimate,
    ExtendExpiryRequest,
    ModelResource,
    ModelResourceCreateRequest,
    ModelResourceList,
    ModelResourceStatus,
    MuonScalingStrategy,
    SupportedModelList,
    TrainingSession,
    TrainingSessionCreateRequest,
    TrainingSessionList,
    TrainingSessionStatus,
    TrainingSessionUpdateRequest,
)
from .transport import (
    ANSWERED,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_RETRY_AFTER,
    DEFAULT_READ_TIMEOUT,
    UNANSWERED,
    RetryPolicy,
    Transport,
    ambiguity,
)

DEFAULT_BASE_URL = "https://api.together.ai"
ENV_API_KEY = "TOGETHER_API_KEY"
ENV_BASE_URL = "TOGETHER_BASE_URL"

#: Most pages any listing follows (a server whose cursors never end cannot loop us forever).
MAX_PAGES = 1000
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

_RESOURCES = "/v1/rl/model-resources"
_SESSIONS = "/v1/rl/training-sessions"
_SUPPORTED_MODELS = "/v1/rl/supported-models"

M = TypeVar("M", bound=BaseModel)
StatusFilter = Iterable["ModelResourceStatus | TrainingSessionStatus | str"] | str | None


class TogetherRL:
    """Client of the Together RL API (model resources, training sessions, supported models).

    Thread-safe: one ``httpx.Client`` shared by every thread. ``api_key`` defaults to ``$TOGETHER_API_KEY``,
    ``base_url`` to ``$TOGETHER_BASE_URL``, then ``https://api.together.ai`` (a trailing ``/v1`` is tolerated).
    ``timeout`` is the read timeout in seconds (connecting gets at most 10 s) or an ``httpx.Timeout``.
    ``settle_window`` is how long (seconds) a create that got no answer keeps looking for what it made
    (default: the read timeout); see the module docstring. ``http_transport``, ``sleep`` and ``rng`` exist
    for tests.
    """

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        *,
        timeout: float | httpx.Timeout | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        max_retry_after: float = DEFAULT_MAX_RETRY_AFTER,
        http_transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: Callable[[], float] | None = None,
        settle_window: float | None = None,
    ) -> None:
        self.base_url = resolve_base_url(base_url)
        if settle_window is not None and (not math.isfinite(settle_window) or settle_window < 0):
            raise ValueError("settle_window must be a finite number of seconds >= 0")
        self._transport = Transport(
            self.base_url,
            resolve_api_key(api_key),
            timeout=timeout,
            max_attempts=max_attempts,
            max_retry_after=max_retry_after,
            http_transport=http_transport,
            sleep=sleep,
            rng=rng,
        )
        read = self._transport.timeout.read
        self.settle_window = float(
            settle_window if settle_window is not None else read or DEFAULT_READ_TIMEOUT
        )

    # ------------------------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        self._transport.close()

    def __enter__(self) -> TogetherRL:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"TogetherRL(base_url={self.base_url!r})"

    # ------------------------------------------------------------------------------ model resources

    def create_model_resource(self, req: ModelResourceCreateRequest) -> ModelResource:
        """Create a model resource (it starts PENDING); one call never yields two.

        First lists your active model resources (a failure there fails the create, nothing sent). A refusal
        (4xx but 429) is raised as is; 429 and connect failures are retried (nothing was created). When the server
        may have acted, the resource it made is looked up (new since that listing, matching every input set):
        after a 5xx the server answered, found -> returned, else resent within the attempt budget; after no
        answer (read timeout, broken connection, 502/504), it is looked for over ``settle_window`` seconds and
        never resent: not found -> the error says it may exist and how to find it (``created_by=me``).
        """
        return self._create(
            _MODEL_RESOURCE,
            req,
            ModelResource,
            self.active_model_resource_ids,
            lambda existing: self.find_created_model_resource(req, existing_ids=existing),
        )

    def get_model_resource(self, id: str) -> ModelResource:
        return self._call(ModelResource, "GET", f"{_RESOURCES}/{_segment(id)}")

    def list_model_resources(
        self,
        *,
        status: StatusFilter = None,
        created_by: str | None = None,
        limit: int | None = None,
        after: str | None = None,
    ) -> ModelResourceList:
        """One page, newest first. ``status`` is sent comma-joined; ``created_by="me"`` means the caller."""
        params = {
            "status": _join_statuses(status, ModelResourceStatus),
            "created_by": created_by,
            "limit": limit,
            "after": after,
        }
        return self._call(ModelResourceList, "GET", _RESOURCES, params=params)

    def iter_model_resources(
        self, *, status: StatusFilter = None, created_by: str | None = None, page_size: int = 100
    ) -> Iterator[ModelResource]:
        """Every matching model resource, following the ``after`` cursor across pages."""
        return _paginate(
            lambda after: self.list_model_resources(
                status=status, created_by=created_by, limit=page_size, after=after
            ),
            page_size,
        )

    def stop_model_resource(self, id: str, *, force: bool = False) -> ModelResource:
        """Stop (tear down) a model resource; ``force`` also stops its attached sessions."""
        params = {"force": "true" if force else "false"}
        return self._call(ModelResource, "POST", f"{_RESOURCES}/{_segment(id)}/stop", params=params)

    def extend_model_resource_expiry(self, id: str, seconds: int) -> ModelResource:
        """Keep a READY resource up for at least ``seconds`` (60-86400) from now. Safe to resend."""
        body = ExtendExpiryRequest(seconds=seconds).to_wire()
        return self._call(ModelResource, "POST", f"{_RESOURCES}/{_segment(id)}/extend-expiry", json=body)

    def estimate_model_resource_cost(self, req: ModelResourceCreateRequest) -> CostEstimate:
        """The hourly price of a resource like ``req``; creates nothing, so it is safe to resend."""
        return self._call(CostEstimate, "POST", f"{_RESOURCES}/estimate-cost", json=req.to_wire())

    # ---------------------------------------------------------------------------- training sessions

    def create_training_session(self, req: TrainingSessionCreateRequest) -> TrainingSession:
        """Start a training session (it starts CREATING); one call never yields two.

        As :meth:`create_model_resource`, with two differences: the listing is of your active sessions on
        ``req.model_resources_id``, and a 429 is raised at once, never retried: it is the documented
        per-resource session cap, which no resend can get past until a session ends.
        """
        return self._create(
            _TRAINING_SESSION,
            req,
            TrainingSession,
            lambda: self.active_training_session_ids(req.model_resources_id),
            lambda existing: self.find_created_training_session(req, existing_ids=existing),
        )

    def get_training_session(self, id: str) -> TrainingSession:
        return self._call(TrainingSession, "GET", f"{_SESSIONS}/{_segment(id)}")

    def list_training_sessions(
        self,
        *,
        status: StatusFilter = None,
        model_resources_id: str | None = None,
        created_by: str | None = None,
        limit: int | None = None,
        after: str | None = None,
    ) -> TrainingSessionList:
        """One page, newest first. ``status`` is sent comma-joined; ``created_by="me"`` means the caller."""
        params = {
            "status": _join_statuses(status, TrainingSessionStatus),
            "model_resources_id": model_resources_id,
            "created_by": created_by,
            "limit": limit,
            "after": after,
        }
        return self._call(TrainingSessionList, "GET", _SESSIONS, params=params)

    def iter_training_sessions(
        self,
        *,
        status: StatusFilter = None,
        model_resources_id: str | None = None,
        created_by: str | None = None,
        page_size: int = 100,
    ) -> Iterator[TrainingSession]:
        """Every matching training session, following the ``after`` cursor across pages."""
        return _paginate(
            lambda after: self.list_training_sessions(
                status=status,
                model_resources_id=model_resources_id,
                created_by=created_by,
                limit=page_size,
                after=after,
            ),
            page_size,
        )

    def update_training_session(self, id: str, req: TrainingSessionUpdateRequest) -> TrainingSession:
        """PATCH: omitted fields stay unchanged, ``""`` clears."""
        return self._call(TrainingSession, "PATCH", f"{_SESSIONS}/{_segment(id)}", json=req.to_wire())

    def stop_training_session(self, id: str) -> TrainingSession:
        return self._call(TrainingSession, "POST", f"{_SESSIONS}/{_segment(id)}/stop")

    # ----------------------------------------------------------------------------- supported models

    def list_supported_models(self) -> SupportedModelList:
        return self._call(SupportedModelList, "GET", _SUPPORTED_MODELS)

    # ------------------------------------------------------------------------------- reconciliation

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

    def _call(
        self,
        model: type[M],
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        json: Any = None,
        policy: RetryPolicy = RetryPolicy.IDEMPOTENT,
    ) -> M:
        data = self._transport.request(method, path, policy=policy, params=params, json=json)
        return _parse(model, data, method, path)

    def _create(
        self,
        kind: _Kind,
        req: ModelResourceCreateRequest | TrainingSessionCreateRequest,
        model: type[M],
        snapshot: Callable[[], frozenset[str]],
        find: Callable[[frozenset[str]], M | None],
    ) -> M:
        transport = self._transport
        existing = self._snapshot(kind, snapshot)
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
                # The server finished with the request: whatever it made exists now. Look once.
                transport.pause(budget, failure)
                found, lookup_error = self._lookup(find, existing)
            else:
                found, lookup_error, waited = self._settle(kind, failure, find, existing)
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
    ) -> tuple[M | None, TogetherError | None, float]:
        """Look for an unanswered create's object over the settle window (sleeping between lookups)."""
        window = self.settle_window
        waited = 0.0
        delay = min(SETTLE_FIRST_DELAY, window)
        lookups = 0
        while True:
            self._transport.wait(delay)
            waited += delay
            found, lookup_error = self._lookup(find, existing)
            lookups += 1
            if found is not None or lookup_error is not None or waited >= window:
                return found, lookup_error, waited
            if lookups == 1:
                _say(
                    f"create of {kind.name} got no answer ({failure}); looking for the {kind.name} it may have "
                    f"made for up to {window:g} s"
                )
            delay = min(delay * 2, SETTLE_MAX_DELAY, window - waited)

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


# ------------------------------------------------------------------------------- configuration helpers


def resolve_api_key(api_key: str | None) -> str:
    """The argument, else ``$TOGETHER_API_KEY``; a :class:`ConfigurationError` naming both when neither is set."""
    key = (api_key if api_key is not None else os.environ.get(ENV_API_KEY, "")).strip()
    if not key:
        raise ConfigurationError(
            "creating the Together RL client: no API key. Pass api_key (Pulumi config together:apiKey) or set "
            f"the {ENV_API_KEY} environment variable."
        )
    if not key.isascii() or not key.isprintable() or any(c.isspace() for c in key):
        raise ConfigurationError(
            "creating the Together RL client: the API key contains characters that cannot go in an HTTP "
            f"header (whitespace or non-ASCII). Check api_key / {ENV_API_KEY}."
        )
    return key


def resolve_base_url(base_url: str | None) -> str:
    """The argument, else ``$TOGETHER_BASE_URL``, else ``https://api.together.ai``; without a trailing ``/v1``.

    A URL that is not a usable http(s) URL is a :class:`ConfigurationError` naming where it came from.
    """
    if base_url:
        raw, source = str(base_url), "the base_url argument (Pulumi config together:baseUrl)"
    elif os.environ.get(ENV_BASE_URL, "").strip():
        raw, source = os.environ[ENV_BASE_URL], f"the {ENV_BASE_URL} environment variable"
    else:
        raw, source = DEFAULT_BASE_URL, "the default"
    url = raw.strip().rstrip("/")
    if url.endswith("/v1"):
        url = url[: -len("/v1")].rstrip("/")
    if not _usable_url(url):
        raise ConfigurationError(
            f"creating the Together RL client: base URL {url!r} (from {source}) is not a valid http(s) URL. "
            f"Check base_url / together:baseUrl / {ENV_BASE_URL}."
        )
    return url


def _usable_url(url: str) -> bool:
    if "://" not in url or any(c.isspace() for c in url):
        return False
    try:
        parsed = httpx.URL(url)
        port = parsed.port
    except (httpx.InvalidURL, ValueError, TypeError):
        return False
    return parsed.scheme in ("http", "https") and bool(parsed.host) and (port is None or 0 < port < 65536)


# -------------------------------------------------------------------------------------- reconciliation


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


# ----------------------------------------------------------------------------------------- small helpers


def _parse(model: type[M], data: Any, method: str, path: str) -> M:
    failure: ApiError
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0] if exc.error_count() else {}
        where = ".".join(str(p) for p in first.get("loc", ())) or "body"
        failure = ApiError(
            200,
            f"unexpected response body: {where}: {first.get('msg', 'invalid')} "
            f"({exc.error_count()} problem(s)). The API may have changed; upgrade pulumi-together-rl.",
            method=method,
            path=path,
        )
    raise failure  # outside the except block: no __context__


def _segment(id: str) -> str:
    """``id`` as one escaped path segment; ids that could change the path ("..", "a/b") are refused."""
    if not isinstance(id, str) or not id:
        raise InvalidArgument(f"an object id must be a non-empty string, got {id!r}")
    if id in (".", "..") or "/" in id or "\\" in id:
        raise InvalidArgument(f"{id!r} is not an object id: it would change the request path")
    return quote(id, safe="")


def _join_statuses(status: StatusFilter, enum: type[Enum]) -> str | None:
    if status is None:
        return None
    if isinstance(status, (str, Enum)):
        status = [status]
    values = []
    for item in status:
        if isinstance(item, Enum):
            values.append(str(item.value))
        elif item in enum.__members__:  # short name: "READY"
            values.append(str(enum.__members__[item].value))
        else:
            values.append(str(item))
    return ",".join(values) or None


def _paginate(fetch: Callable[[str | None], Any], page_size: int) -> Iterator[Any]:
    """Validate ``page_size`` now (not at the first ``next``), then iterate lazily."""
    if isinstance(page_size, bool) or not isinstance(page_size, int) or not 1 <= page_size <= 100:
        raise InvalidArgument(f"page_size must be an integer between 1 and 100, got {page_size!r}")
    return _pages(fetch)


def _pages(fetch: Callable[[str | None], Any], *, strict: bool = False) -> Iterator[Any]:
    """Every item of every page, following ``after``, for at most :data:`MAX_PAGES` pages.

    A cursor seen before (the server's paging is going round in circles) or the page cap ends the iteration:
    with a warning in the log, or, when ``strict`` (reconciliation, which must see everything), with a
    :class:`TogetherError`.
    """
    seen: set[str] = set()
    after: str | None = None
    for _ in range(MAX_PAGES):
        page = fetch(after)
        yield from page.data
        if not page.data:
            return
        after = _next_cursor(page)
        if after is None:
            return
        if after in seen:
            problem = f"the API returned the cursor {after!r} twice; its paging goes round in circles"
            break
        seen.add(after)
    else:
        problem = f"the listing did not end after {MAX_PAGES} pages"
    if strict:
        raise TogetherError(f"listing stopped: {problem}")
    log.warning("listing stopped early: %s", problem)


def _next_cursor(page: Any) -> str | None:
    """The ``after`` of the next page, or None on the last one."""
    meta = page.meta
    if meta.has_more is False:
        return None
    cursor = meta.next_cursor or (page.data[-1].id if meta.has_more else None)
    return cursor or None


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def _say(line: str) -> None:
    """One progress line for the user (Pulumi shows a dynamic provider's stderr)."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


__all__ = [
    "DEFAULT_BASE_URL",
    "ENV_API_KEY",
    "ENV_BASE_URL",
    "LIVE_RESOURCE_STATUSES",
    "LIVE_SESSION_STATUSES",
    "LORA_DEFAULTS",
    "TogetherRL",
    "describe_request",
    "resolve_api_key",
    "resolve_base_url",
    "resource_matches",
    "session_matches",
]
