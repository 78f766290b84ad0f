"""Shared provider plumbing: the stateless provider base, the process's lazy client and its caches, the remote
part of ``check``.

Nothing in here holds per-resource logic; the resource modules read as "read the plan, call the client, wait,
write the result" on top of it and of its siblings: :mod:`._errors` (:class:`ProviderError`, :func:`explain`,
:func:`log`), :mod:`._inputs` (check and diff helpers) and :mod:`._lifecycle` (waiting, refused stops,
abandoning a failed create).

* Providers hold no state: settings live in :mod:`pulumi_together_rl.config` (a process-level registry), the
  HTTP client in a per-process cache here, so the pickled provider (``__provider`` in the state) is just a class
  reference: no key, no client, the same bytes on every run.
* The remote part of ``check`` goes through :func:`remote_check` (a quick client: short timeouts, one retry; a
  failure warns and skips, and an unreachable host is remembered for a minute) and runs only for new or changed
  inputs (:func:`needs_remote_check`), so an unchanged ``pulumi up`` makes no HTTP call.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

from pulumi.dynamic import ConfigureRequest, ResourceProvider

from .. import config
from ..client import errors
from ..waiting import format_elapsed
from . import _lookups, _watch
from ._errors import ProviderError, _configuration_cause, base_url_todo, explain, log
from ._inputs import PROVIDER_KEY, changed_keys
from ._server import shorten_tracebacks, watch_the_engine, widen_the_pool

if TYPE_CHECKING:
    from ..client.api import TogetherRL

T = TypeVar("T")


class BaseProvider(ResourceProvider):
    """Stateless provider base: ``configure`` records the stack config in :mod:`config`, never on ``self``.

    ``__getstate__`` returns an empty dict, so the dill blob is a bare class reference whatever happens to the
    instance (deterministic: no spurious ``~__provider`` diffs).
    """

    def configure(self, req: ConfigureRequest) -> None:
        config.configure(req.config)
        shorten_tracebacks()  # in the provider server only: errors shown as their one sentence
        widen_the_pool()  # in the provider server only: every create and delete runs at once
        watch_the_engine()  # in the provider server only: a killed CLI ends the waits, entries kept

    def __getstate__(self) -> dict[str, Any]:
        return {}

    def __setstate__(self, state: dict[str, Any]) -> None:
        pass


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
    optional remote checks. A client that cannot be built (a malformed base URL) is a :class:`ProviderError`.
    """
    settings = config.current()
    if not settings.api_key:
        raise ProviderError(doing, kind, ident, "no Together API key is configured", config.MISSING_KEY_HINT)
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
                raise ProviderError(
                    doing, kind, ident, _configuration_cause(exc), base_url_todo(settings.base_url_from)
                ) from exc
            _clients[cache_key] = client
    return client


def clear_caches() -> None:
    """Forget clients and cached API answers (tests)."""
    with _client_lock:
        for client in _clients.values():
            try:
                client.close()
            except Exception:
                pass
        _clients.clear()
    _lookups.clear()
    _watch.clear()
    with _failures_lock:
        _remote_failures.clear()


_CANNOT_ASK = (
    errors.ApiConnectionError,  # unreachable, or timed out (errors.ApiTimeout)
    errors.ServerError,
    errors.RateLimited,
    errors.Unauthorized,  # the key is rejected: the answer would not be about the inputs
    errors.PermissionDenied,
)
"""The failures after which the remote part of ``check`` is skipped (with a warning), and so is a 408 (the
request did not reach the server in time). Any other answer (a 404, a 400, a 414 ...) is about the inputs, and
each check turns it into a failure that names the field (:func:`._inputs.answers_the_input`)."""

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
    except ValueError:  # a malformed URL: the client refuses it anyway (a ProviderError below)
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
    except ProviderError as exc:  # no key, or a client that cannot be built
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
        "(supported model, limits, references and cost); they run again at `pulumi up`."
    )


def needs_remote_check(olds: Mapping[str, Any], inputs: Mapping[str, Any], keys: Iterable[str]) -> bool:
    """Whether ``check`` should ask the API: for a new resource (no previous inputs), or when one of ``keys``
    (the inputs the remote checks look at) changed. An unchanged ``pulumi up`` thus makes no HTTP call, even
    in a fresh provider process whose caches are empty."""
    if not any(k != PROVIDER_KEY for k in olds):
        return True
    return bool(changed_keys(olds, inputs, keys))


def declaration_owner(resource_name: str) -> str:
    """``org/project/stack/name``: which declaration a resource is, from the program that declares it (the
    provider itself never learns the stack or the resource's name). The create journal records it, and only the
    same declaration takes over what an interrupted create of it made."""
    import pulumi

    try:
        org = pulumi.get_organization()
    except Exception:  # an SDK or engine that does not know organizations
        org = ""
    return f"{org or '-'}/{pulumi.get_project()}/{pulumi.get_stack()}/{resource_name}"
