"""``TogetherRL``: one method per endpoint of the Together RL API, returning wire models.

Retries are the transport's business (see :mod:`.transport`); this module adds the one thing a transport cannot
do on its own: make sure one logical create never yields two objects.

Reconciliation of an ambiguous create
-------------------------------------
Together sends no idempotency key on create, so when a create fails in a way that means "the server may have
acted" (5xx, read timeout, connection broken after sending), the create method looks for what it made:

1. ``since`` is the wall-clock time just before the first send; candidates are objects created at or after
   ``since - CLOCK_SKEW`` (120 s, for clock skew between us and the server).
2. It lists ``created_by=me`` (sessions also by ``model_resources_id``), newest first, and stops paging once the
   list has gone past that cutoff (if the server turns out not to sort newest first, it reads every page, up to
   :data:`MAX_LOOKUP_PAGES`).
3. A candidate must match every input the request set (see :func:`resource_matches` and
   :func:`session_matches`), not be in ``exclude_ids``, and not be claimed already by this process.
4. The oldest match is claimed (a process-wide, thread-safe set that also holds every id a create returned) and
   returned. If there is none, the server provably did not act, and the create is resent within the same
   attempt budget. If the budget runs out, or the lookup itself fails, the last error is raised with a message
   saying that an object may exist and how to find it.

Threads of one process cannot steal each other's objects: creates of one kind share a gate, and a lookup runs
only while no create of that kind is in flight (a create claims its id before it leaves the gate).
Limits: another process (or person) creating an identical object with the same key in the same window can be
mistaken for ours; and a server that commits a create only after our lookup (very slow, after a read timeout)
is not seen, so the resend makes a second object. The lookup waits one backoff delay first to narrow that window.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from enum import Enum
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, ValidationError

from .errors import ApiConnectionError, ApiError, ConfigurationError, TogetherError
from .models import (
    CostEstimate,
    ExtendExpiryRequest,
    ModelResource,
    ModelResourceCreateRequest,
    ModelResourceList,
    ModelResourceStatus,
    SupportedModelList,
    TrainingSession,
    TrainingSessionCreateRequest,
    TrainingSessionList,
    TrainingSessionStatus,
    TrainingSessionUpdateRequest,
)
from .transport import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_RETRY_AFTER,
    RetryPolicy,
    Transport,
    is_ambiguous,
)

DEFAULT_BASE_URL = "https://api.together.ai"
ENV_API_KEY = "TOGETHER_API_KEY"
ENV_BASE_URL = "TOGETHER_BASE_URL"

CLOCK_SKEW = timedelta(seconds=120)
MAX_LOOKUP_PAGES = 50

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
    ``http_transport``, ``sleep`` and ``rng`` exist for tests.
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
    ) -> None:
        self.base_url = resolve_base_url(base_url)
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
        """Create a model resource (it starts PENDING). An ambiguous failure is reconciled, never resent blind."""
        return self._create(
            _MODEL_RESOURCE,
            req.to_wire(),
            ModelResource,
            lambda since: self.find_created_model_resource(req, since=since),
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
        """Start a training session (it starts CREATING). An ambiguous failure is reconciled, never resent blind."""
        return self._create(
            _TRAINING_SESSION,
            req.to_wire(),
            TrainingSession,
            lambda since: self.find_created_training_session(req, since=since),
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

    def find_created_model_resource(
        self, req: ModelResourceCreateRequest, *, since: datetime, exclude_ids: Iterable[str] = ()
    ) -> ModelResource | None:
        """The model resource a create of ``req`` sent at ``since`` made, if any; claimed when found.

        See the module docstring for the rules. Raises the lookup's own error if listing fails.
        """
        with _MODEL_RESOURCE.gate.reconciling():
            return self._find_and_claim(
                lambda after: self.list_model_resources(created_by="me", limit=100, after=after),
                lambda r: resource_matches(req, r),
                since,
                exclude_ids,
            )

    def find_created_training_session(
        self, req: TrainingSessionCreateRequest, *, since: datetime, exclude_ids: Iterable[str] = ()
    ) -> TrainingSession | None:
        """The training session a create of ``req`` sent at ``since`` made, if any; claimed when found."""
        with _TRAINING_SESSION.gate.reconciling():
            return self._find_and_claim(
                lambda after: self.list_training_sessions(
                    created_by="me", model_resources_id=req.model_resources_id, limit=100, after=after
                ),
                lambda s: session_matches(req, s),
                since,
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
        body: dict[str, Any],
        model: type[M],
        find: Callable[[datetime], M | None],
    ) -> M:
        transport = self._transport
        budget = transport.attempts()
        since = _utcnow()
        while True:
            try:
                with kind.gate.sending():
                    data = transport.request(
                        "POST", kind.path, policy=RetryPolicy.CREATE, json=body, budget=budget
                    )
                    created = _parse(model, data, "POST", kind.path)
                    _CLAIMS.claim(self.base_url, created.id)
                    return created
            except TogetherError as error:
                if not is_ambiguous(error):
                    raise
                last = error
            # The server may have acted. Give a slow server a moment to commit, then look before resending.
            transport.pause(budget, last)
            try:
                found = find(since)
            except TogetherError as lookup_error:
                raise _maybe_created(kind, last, lookup_error) from None
            if found is not None:
                _say(f"create of {kind.name} answered {last}; found the {kind.name} it made: {found.id}")
                return found
            if budget.left <= 0:
                raise _maybe_created(kind, last) from None
            # The lookup proved nothing was made: resend within the same budget.

    def _find_and_claim(
        self,
        list_page: Callable[[str | None], Any],
        matches: Callable[[Any], bool],
        since: datetime,
        exclude_ids: Iterable[str],
    ) -> Any:
        cutoff = _aware(since) - CLOCK_SKEW
        excluded = set(exclude_ids)
        candidates = []
        previous: datetime | None = None
        # Stop early only once the order is known to be newest first (seen falling, never rising).
        falling = rising = False
        after: str | None = None
        for _ in range(MAX_LOOKUP_PAGES):
            page = list_page(after)
            for item in page.data:
                created = _aware(item.created_at)
                if previous is not None:
                    rising = rising or created > previous
                    falling = falling or created < previous
                previous = created
                if created >= cutoff and item.id not in excluded and matches(item):
                    candidates.append(item)
            if not page.data or (falling and not rising and previous is not None and previous < cutoff):
                break
            after = _next_cursor(page, after)
            if after is None:
                break
        for item in sorted(candidates, key=lambda c: (_aware(c.created_at), c.id)):
            if _CLAIMS.claim(self.base_url, item.id):
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
    """The argument, else ``$TOGETHER_BASE_URL``, else ``https://api.together.ai``; without a trailing ``/v1``."""
    url = (base_url or os.environ.get(ENV_BASE_URL, "") or DEFAULT_BASE_URL).strip()
    url = url.rstrip("/")
    if url.endswith("/v1"):
        url = url[: -len("/v1")].rstrip("/")
    parsed = httpx.URL(url) if "://" in url else None
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.host:
        raise ConfigurationError(
            f"creating the Together RL client: base URL {url!r} is not an http(s) URL. "
            f"Check base_url / {ENV_BASE_URL}."
        )
    return url


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
    ref, got_ref = req.base_weights_ref, resource.base_weights_ref
    if ref is None:
        return got_ref is None
    return got_ref == ref or ("@rv_" not in ref and (got_ref or "").startswith(ref + "@rv_"))


def session_matches(req: TrainingSessionCreateRequest, session: TrainingSession) -> bool:
    """Whether ``session`` could be what a create of ``req`` made (resource, display name, LoRA rank)."""
    if session.model_resources_id != req.model_resources_id:
        return False
    if (session.display_name or None) != (req.display_name or None):
        return False
    rank = req.lora_config.rank if req.lora_config is not None else None
    got_rank = session.lora_config.rank if session.lora_config is not None else None
    if rank is not None and got_rank is not None and got_rank != rank:
        return False
    wanted_ckpt, got_ckpt = req.resume_from_checkpoint_id, session.resume_from_checkpoint_id
    return not (wanted_ckpt and got_ckpt and wanted_ckpt != got_ckpt)


def _optimizer_kind(config: Any) -> str | None:
    if config is None:
        return None
    if config.adam is not None or "adamw" in (config.model_extra or {}):
        return "adam"
    if config.muon is not None:
        return "muon"
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
    def __init__(self, name: str, path: str) -> None:
        self.name = name
        self.path = path
        self.gate = _CreateGate()


_CLAIMS = _Claims()
_MODEL_RESOURCE = _Kind("model resource", _RESOURCES)
_TRAINING_SESSION = _Kind("training session", _SESSIONS)


def _maybe_created(
    kind: _Kind, error: TogetherError, lookup_error: TogetherError | None = None
) -> TogetherError:
    """``error`` again (same class and fields), its message saying that an object may exist and how to find it."""
    plural = f"{kind.name}s"
    hint = (
        f"Creating the {kind.name} may have succeeded anyway: list your {plural} "
        f"(GET {kind.path}?created_by=me) and stop any you did not expect"
    )
    if lookup_error is not None:
        hint += f" (looking for it failed: {lookup_error})"
    if isinstance(error, ApiError):
        return type(error)(
            error.status,
            f"{error.message}. {hint}",
            type=error.type,
            code=error.code,
            param=error.param,
            request_id=error.request_id,
            method=error.method,
            path=error.path,
            retry_after=error.retry_after,
        )
    if isinstance(error, ApiConnectionError):
        return type(error)(
            f"{error.message}. {hint}", method=error.method, path=error.path, maybe_sent=error.maybe_sent
        )
    return error


# ----------------------------------------------------------------------------------------- small helpers


def _parse(model: type[M], data: Any, method: str, path: str) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0] if exc.error_count() else {}
        where = ".".join(str(p) for p in first.get("loc", ())) or "body"
        raise ApiError(
            200,
            f"unexpected response body: {where}: {first.get('msg', 'invalid')} "
            f"({exc.error_count()} problem(s)). The API may have changed; upgrade pulumi-together-rl.",
            method=method,
            path=path,
        ) from None


def _segment(id: str) -> str:
    if not isinstance(id, str) or not id:
        raise ValueError(f"an object id must be a non-empty string, got {id!r}")
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
    if not 1 <= page_size <= 100:
        raise ValueError("page_size must be between 1 and 100")
    after: str | None = None
    while True:
        page = fetch(after)
        yield from page.data
        if not page.data:
            return
        after = _next_cursor(page, after)
        if after is None:
            return


def _next_cursor(page: Any, previous: str | None) -> str | None:
    """The ``after`` of the next page, or None on the last one (also guards against a cursor that repeats)."""
    meta = page.meta
    if meta.has_more is False:
        return None
    cursor = meta.next_cursor or (page.data[-1].id if meta.has_more else None)
    if not cursor or cursor == previous:
        return None
    return cursor


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


def _say(line: str) -> None:
    """One progress line for the user (Pulumi shows a dynamic provider's stderr)."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


__all__ = [
    "CLOCK_SKEW",
    "DEFAULT_BASE_URL",
    "ENV_API_KEY",
    "ENV_BASE_URL",
    "TogetherRL",
    "resolve_api_key",
    "resolve_base_url",
    "resource_matches",
    "session_matches",
]
