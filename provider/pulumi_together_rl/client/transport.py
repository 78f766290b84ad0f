"""The HTTP layer: one ``httpx.Client``, authentication, timeouts, retries, and the one error mapping.

Every request carries ``Authorization: Bearer <key>``, a User-Agent naming this project, and a timeout.
Failures leave this module only as :mod:`.errors` exceptions, never as ``httpx`` ones, and they are raised
outside the ``except`` block that caught the ``httpx`` error, so neither ``__cause__`` nor ``__context__`` leads
back to an ``httpx.Request`` (which holds the ``Authorization`` header).

Retries live here and nowhere else. Each request names a :class:`RetryPolicy`:

* ``IDEMPOTENT`` (GET, PATCH, stop, extend-expiry, estimate-cost): resending cannot do harm, so connection
  errors, timeouts, 429 and 5xx are retried.
* ``CREATE``: a create is resent only when it provably did not reach the server (the connection or its
  timeout failed before anything was written) or when the server refused it with 429 ("nothing created").
  A 5xx, a read timeout or a connection broken after sending is *ambiguous*: the server may have made the
  object, so the error goes back to the caller (``api.py``), which looks the object up (see
  :func:`ambiguity` for the two kinds of ambiguous failure).
* ``CREATE_CAPPED``: like ``CREATE``, except that a 429 that is the per-resource session cap is not retried
  (resending cannot succeed until a session ends, so it is raised at once). A 429 is taken for the cap when the
  answer says so (:func:`is_session_cap`: an ``error.code`` naming a session limit, or ``param``
  ``model_resources_id``); any other 429 is throttling, retried like under ``CREATE``. The API documents the
  cap's 429 but not its code, so an uncoded cap costs a few bounded retries before it is raised; the opposite
  mistake would fail a healthy ``pulumi up`` on a blip.

Delays: capped exponential backoff with full jitter (``uniform(0, min(cap, base * 2**n))``), unless the server
says how long to wait (``retry-after-ms``, then ``Retry-After`` in seconds or as an HTTP date), which is honoured
up to ``max_retry_after``. Attempts are bounded by an :class:`Attempts` budget, which a create shares with its
resends after reconciliation.

The API key is held in a :class:`_Secret`: it shows as ``***`` in reprs, is added to requests by an
``httpx.Auth``, and is scrubbed from every message built from a server answer or a transport failure.
"""

from __future__ import annotations

import email.utils
import enum
import logging
import math
import random
import sys
import time
from collections.abc import Callable, Generator, Mapping
from datetime import timezone
from typing import Any

import httpx

from .errors import (
    ApiConnectionError,
    ApiError,
    ApiTimeout,
    ConfigurationError,
    RateLimited,
    ServerError,
    TogetherError,
    error_from_response,
    redact,
)

log = logging.getLogger("pulumi_together_rl.client")

DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_READ_TIMEOUT = 60.0
DEFAULT_MAX_ATTEMPTS = 5
DEFAULT_BACKOFF_BASE = 0.5
DEFAULT_BACKOFF_CAP = 8.0
DEFAULT_MAX_RETRY_AFTER = 60.0

_REQUEST_ID_HEADERS = ("x-request-id", "request-id", "x-together-request-id")


class RetryPolicy(enum.Enum):
    """How a request may be resent; see the module docstring."""

    IDEMPOTENT = "idempotent"
    CREATE = "create"
    CREATE_CAPPED = "create-capped"


#: A create failure the caller cannot read as "created" or "not created"; see :func:`ambiguity`.
ANSWERED = "answered"
UNANSWERED = "unanswered"

#: 5xx statuses a gateway or proxy answers for an origin that did not (or not in time): the origin may still
#: be working on the request. 520-524 are the usual CDN "origin failed" statuses.
GATEWAY_STATUSES = frozenset({502, 504, 520, 521, 522, 523, 524})


class Attempts:
    """The attempt budget of one logical call, shared by every send it makes (including resends after a
    create was reconciled). Not shared between threads: each call makes its own."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("max_attempts must be at least 1")
        self.limit = limit
        self.used = 0

    @property
    def left(self) -> int:
        return self.limit - self.used

    def __repr__(self) -> str:
        return f"Attempts(used={self.used}, limit={self.limit})"


class _Secret:
    """A string that never shows itself in a repr or str."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "'***'"

    __str__ = __repr__

    def __reduce__(self) -> Any:
        # Never pickled into Pulumi state by accident.
        raise TypeError("the API key is not picklable")


class _BearerAuth(httpx.Auth):
    def __init__(self, secret: _Secret) -> None:
        self._secret = secret

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = f"Bearer {self._secret.reveal()}"
        yield request

    def __repr__(self) -> str:
        return "_BearerAuth(***)"


def user_agent() -> str:
    """``pulumi-together-rl/<version> (python <x.y>; httpx <v>)``."""
    try:
        from .. import __version__ as version
    except ImportError:  # pragma: no cover - the package always defines it
        version = "unknown"
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    return f"pulumi-together-rl/{version} (python {py}; httpx {httpx.__version__})"


def make_timeout(timeout: float | httpx.Timeout | None) -> httpx.Timeout:
    """A float is the read/write/pool timeout; connecting gets at most :data:`DEFAULT_CONNECT_TIMEOUT`."""
    if isinstance(timeout, httpx.Timeout):
        return timeout
    read = DEFAULT_READ_TIMEOUT if timeout is None else float(timeout)
    if read <= 0:
        raise ValueError("timeout must be positive")
    return httpx.Timeout(read, connect=min(read, DEFAULT_CONNECT_TIMEOUT))


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds the server asks us to wait: ``retry-after-ms``, else ``Retry-After`` (seconds or HTTP date).

    Returns ``None`` when neither header is present or parseable; never negative.
    """
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None:
        try:
            ms = float(raw_ms)
        except ValueError:
            ms = math.nan
        if math.isfinite(ms):
            return max(0.0, ms / 1000.0)
    raw = headers.get("retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if math.isfinite(seconds):
        return max(0.0, seconds)
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


#: ``error.code`` fragments that name a session cap (the emulator says ``session_limit_reached``; the API's own
#: code is not documented, so the words are matched, not one value).
_CAP_WORDS = ("session_limit", "session_cap", "sessions_limit", "max_sessions", "at_capacity")


def is_session_cap(error: RateLimited) -> bool:
    """Whether a 429 on a session create is the resource's session cap rather than throttling."""
    code = (error.code or "").lower()
    return any(word in code for word in _CAP_WORDS) or error.param == "model_resources_id"


def ambiguity(error: BaseException) -> str | None:
    """How a failed create may have acted: ``None`` (it did not), :data:`ANSWERED` or :data:`UNANSWERED`.

    * ``ANSWERED``: the API itself answered that it failed: a 5xx (other than the gateway statuses) carrying
      the API's own error envelope. It has finished handling the request, so whatever it made exists by now;
      but its answer says "failed", so an identical object is not taken on a match alone (it is as likely a
      colleague's that landed meanwhile).
    * ``UNANSWERED``: no readable answer came from the API itself (read timeout, connection broken after
      sending, a gateway's 502/504, a 5xx without the API's envelope, a 2xx whose body could not be read): the
      server may still be working on the request, and an object may appear later.
    """
    if isinstance(error, ServerError):
        if error.status in GATEWAY_STATUSES or not (error.type or error.code):
            return UNANSWERED
        return ANSWERED
    if isinstance(error, ApiConnectionError):
        return UNANSWERED if error.maybe_sent else None
    # A 2xx whose body could not be read: the server acted, we just cannot tell what it made.
    if isinstance(error, ApiError) and 200 <= error.status < 300:
        return UNANSWERED
    return None


def is_ambiguous(error: BaseException) -> bool:
    """True when a failed create may nevertheless have created its object on the server."""
    return ambiguity(error) is not None


class Transport:
    """``httpx.Client`` wrapper: base URL, auth, user agent, timeouts, retries and error mapping.

    Thread-safe: ``httpx.Client`` is, and the only other state is immutable configuration.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float | httpx.Timeout | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        backoff_base: float = DEFAULT_BACKOFF_BASE,
        backoff_cap: float = DEFAULT_BACKOFF_CAP,
        max_retry_after: float = DEFAULT_MAX_RETRY_AFTER,
        http_transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: Callable[[], float] | None = None,
    ) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.base_url = base_url
        self.max_attempts = max_attempts
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.max_retry_after = max_retry_after
        self.timeout = make_timeout(timeout)
        self._secret = _Secret(api_key)
        self._sleep = sleep
        self._rng = rng if rng is not None else random.random
        self.clock_offset: float | None = None
        """Seconds the API's clock is ahead of this machine's (negative: behind), from the ``Date`` header of the
        latest answer that had one; None before any. The header counts whole seconds and the answer takes a
        while to arrive, so this errs low by up to a second and the latency: a time counted from it on the
        API's clock comes out early, never late (a keep asks for a second more, never less)."""
        self._http = httpx.Client(
            base_url=base_url,
            auth=_BearerAuth(self._secret),
            headers={"User-Agent": user_agent(), "Accept": "application/json"},
            timeout=self.timeout,
            transport=http_transport,
            follow_redirects=False,
        )

    # ------------------------------------------------------------------------------------------- public

    def attempts(self) -> Attempts:
        """A fresh attempt budget for one logical call."""
        return Attempts(self.max_attempts)

    def request(
        self,
        method: str,
        path: str,
        *,
        policy: RetryPolicy = RetryPolicy.IDEMPOTENT,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        budget: Attempts | None = None,
    ) -> Any:
        """Send, retrying as ``policy`` allows within ``budget``; return the parsed JSON body of a 2xx.

        Raises an :class:`~.errors.ApiError` subclass for a non-2xx answer, :class:`~.errors.ApiTimeout` or
        :class:`~.errors.ApiConnectionError` when no answer came.
        """
        budget = budget if budget is not None else self.attempts()
        query = {k: v for k, v in (params or {}).items() if v is not None}
        while True:
            budget.used += 1
            try:
                return self._send_once(method, path, query, json)
            except TogetherError as error:
                if budget.left <= 0 or not self._may_retry(policy, error):
                    raise
                delay = self.retry_delay(budget, error)
                log.info(
                    "%s %s failed (%s); retrying in %.2f s (attempt %d of %d)",
                    method,
                    path,
                    error,
                    delay,
                    budget.used + 1,
                    budget.limit,
                )
            self._sleep(delay)

    def retry_delay(self, budget: Attempts, error: BaseException | None = None) -> float:
        """Seconds to wait before the next send: the server's ``Retry-After`` (capped) when it gave one,
        else full-jitter exponential backoff on the number of sends made so far."""
        retry_after = getattr(error, "retry_after", None)
        if retry_after is not None:
            return min(float(retry_after), self.max_retry_after)
        exponent = max(0, budget.used - 1)
        ceiling = min(self.backoff_cap, self.backoff_base * (2.0**exponent))
        return self._rng() * ceiling

    def pause(self, budget: Attempts, error: BaseException | None = None) -> None:
        """Sleep :meth:`retry_delay` (used by the create path between a failed send and its lookup)."""
        self._sleep(self.retry_delay(budget, error))

    def wait(self, seconds: float) -> None:
        """Sleep through the injected ``sleep`` (so tests never wait for real)."""
        self._sleep(seconds)

    def close(self) -> None:
        self._http.close()

    def __repr__(self) -> str:
        return f"Transport(base_url={self.base_url!r}, max_attempts={self.max_attempts})"

    # ------------------------------------------------------------------------------------------ private

    @staticmethod
    def _may_retry(policy: RetryPolicy, error: TogetherError) -> bool:
        if isinstance(error, _UnusableRequest):
            return False
        if isinstance(error, ApiConnectionError):
            # Connect errors are always safe; after sending, only an idempotent call may go again.
            return policy is RetryPolicy.IDEMPOTENT or not error.maybe_sent
        if isinstance(error, RateLimited):
            # "Refused, nothing done": safe even for a create, unless the 429 is a hard cap.
            return policy is not RetryPolicy.CREATE_CAPPED or not is_session_cap(error)
        if isinstance(error, ServerError):
            return policy is RetryPolicy.IDEMPOTENT
        return False

    def _send_once(self, method: str, path: str, query: Mapping[str, Any], body: Any) -> Any:
        """One HTTP exchange: the parsed body of a 2xx, else the mapped error is raised.

        Every error is raised after its ``except`` block has ended, so it carries no ``__context__``.
        """
        if self._http.is_closed:
            raise _closed()
        response, failure = self._exchange(method, path, query, body)
        if failure is not None:
            raise failure
        assert response is not None
        self._note_clock(response.headers.get("date"))
        status = response.status_code
        try:
            payload = response.json() if response.content else {}
        except ValueError:
            payload = None
        if 200 <= status < 300:
            if payload is None:
                raise ApiError(status, "the response body is not JSON", method=method, path=path)
            return payload
        raise error_from_response(
            status,
            payload if payload is not None else response.text,
            method=method,
            path=path,
            request_id=_request_id(response.headers),
            retry_after=parse_retry_after(response.headers),
            secret=self._secret.reveal(),
        )

    def _note_clock(self, date: str | None) -> None:
        """Measure :attr:`clock_offset` by an answer's ``Date`` header (an HTTP date; ignored if unreadable)."""
        if not date:
            return
        try:
            when = email.utils.parsedate_to_datetime(date)
        except (TypeError, ValueError, IndexError):
            return
        if when is None:
            return
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        self.clock_offset = when.timestamp() - time.time()

    def _exchange(
        self, method: str, path: str, query: Mapping[str, Any], body: Any
    ) -> tuple[httpx.Response | None, TogetherError | None]:
        """Send; return the response, or the mapped error (not raised here: see :meth:`_send_once`)."""
        key = self._secret.reveal()
        where = {"method": method, "path": path}
        try:
            return self._http.request(method, path, params=query or None, json=body), None
        except httpx.TimeoutException as exc:
            sent = not isinstance(exc, (httpx.ConnectTimeout, httpx.PoolTimeout))
            what = "timed out after the request was sent" if sent else "timed out before connecting"
            return None, ApiTimeout(_describe(what, exc, key), maybe_sent=sent, **where)
        except (httpx.UnsupportedProtocol, httpx.LocalProtocolError, httpx.InvalidURL) as exc:
            # Our request is unusable (bad URL, bad header): resending cannot help.
            return None, _UnusableRequest(_describe("request not sent", exc, key), method=method, path=path)
        except httpx.TransportError as exc:
            sent = not isinstance(exc, httpx.ConnectError)
            what = "connection broke after the request was sent" if sent else "could not connect"
            return None, ApiConnectionError(_describe(what, exc, key), maybe_sent=sent, **where)
        except httpx.DecodingError as exc:
            # The server answered, but the body could not be decoded (for example a bad Content-Encoding
            # from a proxy): for a create, whatever it did is unknown.
            what = "the response could not be decoded"
            return None, ApiConnectionError(_describe(what, exc, key), maybe_sent=True, **where)
        except httpx.HTTPError as exc:
            # Any other httpx failure (TooManyRedirects, ...): the request may have been sent.
            return None, ApiConnectionError(_describe("request failed", exc, key), maybe_sent=True, **where)
        except RuntimeError:
            if not self._http.is_closed:  # pragma: no cover - httpx raises RuntimeError only when closed
                raise
            return None, _closed()


class _UnusableRequest(ApiConnectionError):
    """The request could not be built or sent at all (never retried)."""


def _closed() -> ConfigurationError:
    return ConfigurationError(
        "this Together RL client is closed (close() was called, or its `with` block ended); create a new one"
    )


def _describe(what: str, exc: Exception, key: str) -> str:
    return f"{what} ({type(exc).__name__}: {redact(str(exc), key) or 'no detail'})"


def _request_id(headers: Mapping[str, str]) -> str | None:
    for name in _REQUEST_ID_HEADERS:
        value = headers.get(name)
        if value:
            return value
    return None
