"""``TogetherRL``: one method per endpoint of the Together RL API, returning wire models.

Retries are the transport's business (see :mod:`.transport`); this client adds the one thing a transport
cannot do on its own: make sure one logical create never yields two objects. That is :mod:`.reconcile` (the
create loop, the snapshot, lookups and claims, which :class:`TogetherRL` inherits), with :mod:`.matching`
(could a listed object be what a create made?) and :mod:`.wire` (paths, body parsing and paging, shared by
both).
"""

from __future__ import annotations

import hashlib
import math
import os
import time
from collections.abc import Callable, Iterator
from enum import Enum
from typing import Any
from urllib.parse import quote

import httpx

from ..config import DEFAULT_BASE_URL
from . import reconcile
from .errors import ConfigurationError, InvalidArgument
from .models import (
    CheckpointInfo,
    CheckpointList,
    CheckpointType,
    CostEstimate,
    ExtendExpiryRequest,
    ModelResource,
    ModelResourceCreateRequest,
    ModelResourceList,
    ModelResourceStatus,
    StatusFilter,
    SupportedModelList,
    TrainingSession,
    TrainingSessionCreateRequest,
    TrainingSessionList,
    TrainingSessionStatus,
    TrainingSessionUpdateRequest,
)
from .reconcile import _MODEL_RESOURCE, _TRAINING_SESSION, CreateReconciler, CreateRecord
from .transport import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_RETRY_AFTER,
    DEFAULT_READ_TIMEOUT,
    RetryPolicy,
    Transport,
)
from .wire import _CHECKPOINTS, _RESOURCES, _SESSIONS, _SUPPORTED_MODELS, M, _paginate, _parse, _parse_list

ENV_API_KEY = "TOGETHER_API_KEY"
ENV_BASE_URL = "TOGETHER_BASE_URL"


class TogetherRL(CreateReconciler):
    """Client of the Together RL API (model resources, training sessions, supported models).

    Thread-safe: one ``httpx.Client`` shared by every thread. ``api_key`` defaults to ``$TOGETHER_API_KEY``,
    ``base_url`` to ``$TOGETHER_BASE_URL``, then ``https://api.together.ai`` (a trailing ``/v1`` is tolerated).
    ``timeout`` is the read timeout in seconds (connecting gets at most 10 s) or an ``httpx.Timeout``.
    ``settle_window`` is how long (seconds) a create that got no answer keeps looking for what it made
    (default: the read timeout); ``list_lag`` how long one whose failure the server itself answered keeps
    looking before it concludes that nothing was made (default :data:`.reconcile.LIST_LAG`: a list may lag a
    create); see :mod:`.reconcile`. ``http_transport``, ``sleep`` and ``rng`` exist for tests.
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
        list_lag: float | None = None,
    ) -> None:
        self.base_url = resolve_base_url(base_url)
        if settle_window is not None and (not math.isfinite(settle_window) or settle_window < 0):
            raise ValueError("settle_window must be a finite number of seconds >= 0")
        if list_lag is None:
            list_lag = reconcile.LIST_LAG  # read now, not at import: the suite scales it for its emulator
        if not math.isfinite(list_lag) or list_lag < 0:
            raise ValueError("list_lag must be a finite number of seconds >= 0")
        self.list_lag = float(list_lag)
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

    @property
    def clock_offset(self) -> float | None:
        """Seconds the API's clock is ahead of this machine's, by the ``Date`` header of its latest answer (None
        before one); see :attr:`.transport.Transport.clock_offset`."""
        return self._transport.clock_offset

    @property
    def api_key_digest(self) -> str:
        """16 hex digits of the SHA-256 of the API key: tells two keys apart (what the client acts as) without
        holding or showing the key itself (the provider's watchers are one per base URL and key digest)."""
        return hashlib.sha256(self._transport._secret.reveal().encode()).hexdigest()[:16]

    # ------------------------------------------------------------------------------ model resources

    def create_model_resource(
        self, req: ModelResourceCreateRequest, *, record: CreateRecord | None = None
    ) -> ModelResource:
        """Create a model resource (it starts PENDING); one call never yields two.

        First lists your active model resources (a failure there fails the create, nothing sent). A refusal
        (4xx but 429) is raised as is; 429 and connect failures are retried (nothing was created). When the server
        may have acted, the resource it made is looked up (new since that listing, matching every input set):
        after a 5xx the server answered, found -> returned, else resent within the attempt budget; after no
        answer (read timeout, broken connection, 502/504), it is looked for over ``settle_window`` seconds and
        never resent: not found -> the error says it may exist and how to find it (``created_by=me``).
        ``record`` (the create journal) is told the snapshot and each send, and says which ids others hold.
        """
        return self._create(
            _MODEL_RESOURCE,
            req,
            ModelResource,
            self.active_model_resource_ids,
            lambda attribution: self.find_created_model_resource(req, attribution=attribution),
            record,
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
        """One page, newest first. ``status`` is sent comma-joined; ``created_by="me"`` means the caller.

        A listed object this version cannot read is left out of ``data``, with one warning line on stderr
        (see :func:`.wire._parse_list`); a body that is not a list answer raises :class:`.ApiError`.
        """
        params = {
            "status": _join_statuses(status, ModelResourceStatus),
            "created_by": created_by,
            "limit": limit,
            "after": after,
        }
        data = self._transport.request("GET", _RESOURCES, params=params)
        return _parse_list(ModelResourceList, ModelResource, data, "GET", _RESOURCES)

    def iter_model_resources(
        self, *, status: StatusFilter = None, created_by: str | None = None, page_size: int = 100
    ) -> Iterator[ModelResource]:
        """Every matching model resource, following the ``after`` cursor across pages (one this version
        cannot read is skipped, as in :meth:`list_model_resources`)."""
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

    def create_training_session(
        self, req: TrainingSessionCreateRequest, *, record: CreateRecord | None = None
    ) -> TrainingSession:
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
            lambda attribution: self.find_created_training_session(req, attribution=attribution),
            record,
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
        """One page, newest first. ``status`` is sent comma-joined; ``created_by="me"`` means the caller.

        A listed session this version cannot read is left out of ``data``, as in :meth:`list_model_resources`.
        """
        params = {
            "status": _join_statuses(status, TrainingSessionStatus),
            "model_resources_id": model_resources_id,
            "created_by": created_by,
            "limit": limit,
            "after": after,
        }
        data = self._transport.request("GET", _SESSIONS, params=params)
        return _parse_list(TrainingSessionList, TrainingSession, data, "GET", _SESSIONS)

    def iter_training_sessions(
        self,
        *,
        status: StatusFilter = None,
        model_resources_id: str | None = None,
        created_by: str | None = None,
        page_size: int = 100,
    ) -> Iterator[TrainingSession]:
        """Every matching training session, following the ``after`` cursor across pages (one this version
        cannot read is skipped, as in :meth:`list_training_sessions`)."""
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

    # ------------------------------------------------------------------------------------ checkpoints

    def get_checkpoint(self, id: str) -> CheckpointInfo:
        return self._call(CheckpointInfo, "GET", f"{_CHECKPOINTS}/{_segment(id)}")

    def list_checkpoints(
        self,
        *,
        session_id: str | None = None,
        base_model: str | None = None,
        type: CheckpointType | str | None = None,
        limit: int | None = None,
        after: str | None = None,
    ) -> CheckpointList:
        """One page, newest first, filtered by session, base model and type."""
        kind = type.value if isinstance(type, CheckpointType) else type
        params = {
            "session_id": session_id,
            "base_model": base_model,
            "type": kind,
            "limit": limit,
            "after": after,
        }
        return self._call(CheckpointList, "GET", _CHECKPOINTS, params=params)

    def iter_checkpoints(
        self,
        *,
        session_id: str | None = None,
        base_model: str | None = None,
        type: CheckpointType | str | None = None,
        page_size: int = 100,
    ) -> Iterator[CheckpointInfo]:
        """Every matching checkpoint, newest first, following the ``after`` cursor across pages."""
        return _paginate(
            lambda after: self.list_checkpoints(
                session_id=session_id, base_model=base_model, type=type, limit=page_size, after=after
            ),
            page_size,
        )

    # ----------------------------------------------------------------------------- supported models

    def list_supported_models(self) -> SupportedModelList:
        return self._call(SupportedModelList, "GET", _SUPPORTED_MODELS)

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
        raw, source = str(base_url), "the base_url argument"
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


# ----------------------------------------------------------------------------------------- small helpers


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


__all__ = [
    "DEFAULT_BASE_URL",
    "ENV_API_KEY",
    "ENV_BASE_URL",
    "TogetherRL",
    "resolve_api_key",
    "resolve_base_url",
]
