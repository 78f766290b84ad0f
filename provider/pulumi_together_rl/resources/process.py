"""What one provider process holds, for every face: the lazy HTTP client per settings, the cached single-flight
lookups behind ``check``, and the remote part of ``check``.

* Providers hold no state: settings live in :mod:`pulumi_together_rl.config` (a process-level registry), the
  HTTP client in a per-process cache here, so a pickled provider (``__provider`` in the state) is just a class
  reference: no key, no client, the same bytes on every run.
* Lookups (supported models, a referenced object, a cost estimate, one list of a kind's live objects) are
  **single-flight**: N threads that ask for the same key at once make one request and all get its answer (or
  its exception). A preview checks every resource of the stack concurrently; a refresh reads every object.
* The remote part of ``check`` goes through :func:`remote_check` (a quick client: short timeouts, one retry; a
  failure warns and skips, and an unreachable host is remembered for a minute) and runs only for new or changed
  inputs (:func:`needs_remote_check`), so an unchanged ``pulumi up`` makes no HTTP call.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

from .. import config
from ..client import errors
from ..messages import UserError, _configuration_cause, base_url_todo, explain, format_elapsed, log
from ..singleflight import SingleFlight
from . import watch
from .inputs import changed_keys
from .keys import PROVIDER_KEY

if TYPE_CHECKING:
    from ..client.api import TogetherRL
    from ..client.collections import Collection, Obj, Req
    from ..client.models import CostEstimate, ModelResourceCreateRequest, SupportedModelList
    from .kind import Kind

T = TypeVar("T")

CHECK_MAX_ATTEMPTS = 2
"""Attempts per request of the remote part of ``check``: a preview must not hang on an unreachable API."""

CHECK_READ_TIMEOUT = 5.0
"""Read timeout (seconds) of the remote part of ``check`` (connecting gets as long at most)."""

CHECK_MAX_RETRY_AFTER = 2.0
"""The longest ``Retry-After`` (seconds) the remote part of ``check`` honours before its one retry."""

REMOTE_CHECK_BACKOFF = 60.0
"""After a remote check finds the API's host unreachable (no connection, or no answer in time), the next ones
in this process skip it for this long (seconds), so a preview of many resources pays that wait once."""

_client_lock = threading.Lock()
_clients: dict[tuple[str, str | None, bool], TogetherRL] = {}


def api_client(doing: str, kind: str, ident: str | None, *, quick: bool = False) -> TogetherRL:
    """The process's client for the current settings (built lazily, shared by all threads).

    ``quick`` gives a client with one retry, a short read timeout and a short ``Retry-After`` cap, for the
    optional remote checks. A client that cannot be built (a malformed base URL) is a :class:`UserError`.
    """
    settings = config.current()
    if not settings.api_key:
        raise UserError(doing, kind, ident, "no Together API key is configured", config.MISSING_KEY_HINT)
    cache_key = (settings.api_key, settings.base_url, quick)
    with _client_lock:
        client = _clients.get(cache_key)
        if client is None:
            from ..client.api import TogetherRL

            extra: dict[str, Any] = {}
            if quick:
                extra = {
                    "max_attempts": CHECK_MAX_ATTEMPTS,
                    "timeout": CHECK_READ_TIMEOUT,
                    "max_retry_after": CHECK_MAX_RETRY_AFTER,
                }
            try:
                client = TogetherRL(api_key=settings.api_key, base_url=settings.base_url, **extra)
            except errors.ConfigurationError as exc:
                raise UserError(
                    doing, kind, ident, _configuration_cause(exc), base_url_todo(settings.base_url_from)
                ) from exc
            _clients[cache_key] = client
    return client


_also_cleared: list[Callable[[], None]] = []


def also_clear(clear: Callable[[], None]) -> None:
    """Have :func:`clear_caches` call ``clear`` too: the process-wide state of a module that builds on this one
    (:mod:`.spend`), which this one must not import."""
    _also_cleared.append(clear)


def clear_caches() -> None:
    """Forget clients, cached API answers and the lines said once (tests)."""
    with _client_lock:
        for client in _clients.values():
            try:
                client.close()
            except Exception:
                pass
        _clients.clear()
    clear_lookups()
    watch.clear()
    for clear in _also_cleared:
        clear()
    with _failures_lock:
        _remote_failures.clear()
    with _said_lock:
        _said.clear()


CLOCK_SKEW_WARNING = 60.0
"""Seconds between this machine's clock and the API's from which :func:`api_now` warns (once per process)."""


def api_now(client: TogetherRL) -> datetime:
    """Now on the API's clock: this machine's, moved by the offset the API's latest answer showed (its ``Date``
    header, :attr:`~..client.api.TogetherRL.clock_offset`); this machine's alone before any answer. A time the API
    compares with its own clock (how many seconds until ``keep_ready_until``) is counted from this, so a machine
    whose clock is off asks neither too much nor too little. A skew of :data:`CLOCK_SKEW_WARNING` or more is
    said once."""
    now = datetime.now(timezone.utc)
    offset = getattr(client, "clock_offset", None)
    if not isinstance(offset, (int, float)):
        return now
    if abs(offset) >= CLOCK_SKEW_WARNING:
        side = "behind" if offset > 0 else "ahead of"
        log_once(("clock skew",), f"warning: this machine's clock is {format_elapsed(abs(offset))} {side} the "
                 "Together API's (the Date header of its answers): times it compares with its own, such as "
                 "keep_ready_until, are counted on the API's clock. Set this machine's clock (NTP)")  # fmt: skip
    return now + timedelta(seconds=offset)


_said_lock = threading.Lock()
_said: set[tuple[Any, ...]] = set()


def log_once(key: tuple[Any, ...], line: str) -> None:
    """:func:`~..messages.log` ``line``, unless this process said it for ``key`` already. For what ``check``
    says: the engine checks a resource it is about to replace twice (the second time without its old inputs, so
    that a provider can generate new names), and the second check would repeat every line of the first."""
    with _said_lock:
        if key in _said:
            return
        _said.add(key)
    log(line)


_CANNOT_ASK = (
    errors.ApiConnectionError,  # unreachable, or timed out (errors.ApiTimeout)
    errors.ServerError,
    errors.RateLimited,
    errors.Unauthorized,  # the key is rejected: the answer would not be about the inputs
    errors.PermissionDenied,
)
"""The failures after which the remote part of ``check`` is skipped (with a warning), and so is a 408 (the
request did not reach the server in time). Any other answer (a 404, a 400, a 414 ...) is about the inputs, and
each check turns it into a failure that names the field (:func:`.inputs.answers_the_input`)."""

_HOST_FAILURES = (errors.ApiConnectionError,)
"""The failures remembered for :data:`REMOTE_CHECK_BACKOFF`: no connection or no answer in time (a timeout is
an ``ApiConnectionError`` too) is the host's doing and would cost every check the same wait. A 5xx, 429,
401 or 403 is an answer: it skips only the check that met it (one bad id, one throttled moment must not switch
off the checks of every other resource)."""

_failures_lock = threading.Lock()
_remote_failures: dict[str, tuple[float, str]] = {}


def _host(base_url: str | None) -> str:
    """The host (and port) of ``base_url``: what a connection failure is about, whatever the key or path."""
    try:
        netloc = urlsplit(base_url or "").netloc
    except ValueError:  # a malformed URL: the client refuses it anyway (a UserError below)
        return base_url or ""
    return netloc.rpartition("@")[2].lower()


def _cannot_ask(exc: BaseException) -> bool:
    return isinstance(exc, _CANNOT_ASK) or (isinstance(exc, errors.ApiError) and exc.status == 408)


def remote_check(kind: str, ident: str | None, call: Callable[[TogetherRL], T]) -> T | None:
    """Run the remote part of a ``check``: ``call(client)`` with the quick client, or ``None`` if it was skipped.

    Without a key, with a client that cannot be built, or when the API cannot be asked (:data:`_CANNOT_ASK`:
    unreachable, timed out, 5xx, 429, 401/403, or a 408), it warns on stderr and skips instead of failing the
    preview. Only a host failure (:data:`_HOST_FAILURES`) is remembered, per host of the base URL, for
    :data:`REMOTE_CHECK_BACKOFF` seconds: later checks in this process skip at once (each still warns, so every
    resource says its remote checks were skipped). Other API errors (404, 400, any other 4xx) are answers about
    the inputs: they propagate, for ``call``'s caller to name the field.
    """
    host = _host(config.current().base_url)
    now = time.monotonic()
    with _failures_lock:
        remembered = _remote_failures.get(host)
    if remembered is not None and now - remembered[0] < REMOTE_CHECK_BACKOFF:
        seen = format_elapsed(now - remembered[0])
        _warn_remote_check_skipped(kind, ident, f"{remembered[1]} ({seen} ago; not asked again for now)")
        return None
    try:
        return call(api_client("checking", kind, ident, quick=True))
    except UserError as exc:  # no key, or a client that cannot be built
        _warn_remote_check_skipped(kind, ident, exc.cause)
    except errors.TogetherError as exc:
        if not _cannot_ask(exc):
            raise
        cause, _ = explain(exc)
        if isinstance(exc, _HOST_FAILURES):
            with _failures_lock:
                _remote_failures[host] = (time.monotonic(), cause)
        _warn_remote_check_skipped(kind, ident, cause)
    return None


def _warn_remote_check_skipped(kind: str, ident: str | None, cause: str) -> None:
    log(
        f"warning: checking {kind} ({ident}) against the API: {cause}. Skipped the remote checks "
        "(supported model, limits, references and cost) this time: the next preview or update asks again, and "
        "the API checks a create itself."
    )


def needs_remote_check(olds: Mapping[str, Any], inputs: Mapping[str, Any], keys: Iterable[str]) -> bool:
    """Whether ``check`` should ask the API: for a new resource (no previous inputs), or when one of ``keys``
    (the inputs the remote checks look at) changed. An unchanged ``pulumi up`` thus makes no HTTP call, even
    in a fresh provider process whose caches are empty."""
    if not any(k != PROVIDER_KEY for k in olds):
        return True
    return bool(changed_keys(olds, inputs, keys))


SUPPORTED_MODELS_TTL = 600.0
"""How long (seconds) one process trusts its copy of ``GET /v1/rl/supported-models``."""

ESTIMATE_TTL = 600.0
"""How long (seconds) one process trusts a cost estimate for one create body."""

OBJECT_TTL = 10.0
"""How long (seconds) a looked-up resource or session serves other checks (its status can change)."""


LIST_TTL = 2.0
"""How long (seconds) one list of a kind's live objects answers refresh reads: a refresh reads every object
of the stack at once, and N reads should cost one list, not N GETs."""

_supported: SingleFlight[SupportedModelList] = SingleFlight(SUPPORTED_MODELS_TTL)
_estimates: SingleFlight[CostEstimate] = SingleFlight(ESTIMATE_TTL)
_objects: SingleFlight[Any] = SingleFlight(OBJECT_TTL)


def supported_models(client: TogetherRL) -> SupportedModelList:
    """``GET /v1/rl/supported-models``, cached per process for :data:`SUPPORTED_MODELS_TTL` seconds."""
    return _supported.get(config.current().base_url, client.list_supported_models)


def estimate_cost(client: TogetherRL, request: ModelResourceCreateRequest) -> CostEstimate:
    """``POST /v1/rl/model-resources/estimate-cost`` for one create body, cached per body."""
    key = (config.current().base_url, json.dumps(request.to_wire(), sort_keys=True))
    return _estimates.get(key, lambda: client.estimate_model_resource_cost(request))


def lookup(client: TogetherRL, collection: Collection[Obj, Req], ident: str) -> Obj:
    """``GET`` of an object a check refers to (a model resource of a session, an ``adopt_id``), shared for
    :data:`OBJECT_TTL` seconds; an error, ``NotFound`` included, propagates uncached."""
    # The cache holds every kind; its key names the collection the object came from.
    found: Obj = _objects.get(
        (*watch.identity(client), collection.name, ident), lambda: collection.get(client, ident)
    )
    return found


_listed: SingleFlight[dict[str, Any]] = SingleFlight(LIST_TTL)


def listed(client: TogetherRL, kind: Kind[Obj, Req]) -> dict[str, Obj]:
    """``{id: object}`` of the caller's existing objects of a kind (the watcher's own list), shared for
    :data:`LIST_TTL` seconds. An id missing from it is not proof of anything (a list may lag, or the object is
    another user's): the caller asks by GET."""
    # The cache holds every kind; its key names the kind.
    found: dict[str, Obj] = _listed.get(
        (*watch.identity(client), kind.name), lambda: kind.collection.listed_by_me(client)
    )
    return found


def clear_lookups() -> None:
    """Forget cached API answers (a new refresh, or a test)."""
    for cache in (_supported, _estimates, _objects, _listed):
        cache.clear()
