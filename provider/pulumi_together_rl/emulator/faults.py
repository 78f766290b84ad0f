"""Fault injection and the request log: the ASGI layer wrapped around the public API.

A fault rule matches public requests (``/v1/...``; the control API under ``/_emulator`` is never faulted) by
method and by a regular expression searched in the URL path. When a matching rule *fires* (it has
``times`` left, and its seeded ``probability`` roll succeeds), the request is handled as follows:

1. ``latency`` seconds pass first (the event loop keeps serving other requests meanwhile);
2. ``act_then_fail``: the real handler runs (state changes: the duplicate-create hazard), its answer is
   discarded, and the client gets ``status`` instead, or a dropped connection when ``drop_connection``;
3. otherwise ``drop_connection`` drops the connection before anything is done, and ``status`` answers the
   error envelope without acting; a rule with ``status: null`` and no drop only adds latency.

``status`` is an error status (400-599) or null: the answer is always the error envelope.

Outages in time: ``duration`` (seconds of wall time) limits a rule to a window, counted from when the rule
was added, or, with ``armed_by``, from the first request whose ``"METHOD /path"`` the regular expression
``armed_by`` matches and which the real handler answered with a 2xx (an act-then-fail request counts: it was
acted on). Until then an armed-by rule never fires. ``{"path": "^/v1/", "times": null, "duration": 12,
"armed_by": "^POST /v1/rl/model-resources$"}`` is "every endpoint down for 12 s from the instant a create is
accepted", the outage that used to end a create's wait on its first failed poll.

A team's keys (several keys of one user, settings ``api_keys``): ``keys``, a list of key digests
(``settings.key_digest``), limits a rule to the requests sent with one of those keys (null: any key), so that a
fault can hit one member's requests and not another's.

Only the first rule that fires applies to a request. Rules are evaluated in the order they were added.
The request body is read in full before any of this, so a request whose client gives up during an injected
latency (a client read timeout) is still acted on: exactly the ambiguity a real timeout has.

Dropping a connection: ASGI has no "abort" message. Under uvicorn the ``receive`` callable is a bound method
of the connection's request cycle, which holds the asyncio transport; closing that transport before any
response byte is written makes the client see the server hang up (httpx: ``RemoteProtocolError: Server
disconnected without sending a response``). On a server that hides its transport the fallback promises a
1 KiB body, sends one byte of it and returns, which every HTTP/1.1 server must answer by closing the
connection mid-body (httpx: ``RemoteProtocolError`` from the incomplete read). Either way the client gets a
transport error, never an HTTP response.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
import re
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from .errors import InvalidRequest
from .settings import KEY_DIGEST, key_digest

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

PUBLIC_PREFIX = "/v1"
FAULT_CODE = "emulator_fault"

_RULE_FIELDS = (
    "method",
    "path",
    "status",
    "times",
    "probability",
    "seed",
    "retry_after",
    "retry_after_ms",
    "latency",
    "drop_connection",
    "act_then_fail",
    "message",
    "param",
    "duration",
    "armed_by",
    "keys",
)


def error_type_for(status: int) -> str:
    """The envelope's ``error.type`` for an HTTP status (shared with the routes)."""
    if status == 401:
        return "authentication_error"
    if status == 403:
        return "permission_error"
    if status == 404:
        return "not_found"
    if status == 409:
        return "conflict"
    if status == 429:
        return "rate_limit_error"
    if status >= 500:
        return "server_error"
    return "invalid_request_error"


def envelope(message: str, *, type: str, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


# ----------------------------------------------------------------------------------------------- rules


@dataclasses.dataclass
class FaultRule:
    """One fault. Fields mirror the control API's JSON (see the module docstring)."""

    id: str
    method: str | None = None
    path: str | None = None
    status: int | None = 503
    times: int | None = 1
    probability: float | None = None
    seed: int | None = None
    retry_after: float | None = None
    retry_after_ms: int | None = None
    latency: float = 0.0
    drop_connection: bool = False
    act_then_fail: bool = False
    message: str | None = None
    param: str | None = None
    duration: float | None = None
    armed_by: str | None = None
    keys: list[str] | None = None
    fired: int = 0
    _regex: re.Pattern[str] | None = dataclasses.field(default=None, repr=False)
    _armed_by: re.Pattern[str] | None = dataclasses.field(default=None, repr=False)
    _armed_at: float | None = dataclasses.field(default=None, repr=False)
    _rng: random.Random = dataclasses.field(default_factory=random.Random, repr=False)

    @classmethod
    def from_dict(cls, data: Any) -> FaultRule:
        if not isinstance(data, dict):
            raise InvalidRequest("a fault rule must be a JSON object.")
        unknown = set(data) - set(_RULE_FIELDS)
        if unknown:
            name = sorted(unknown)[0]
            raise InvalidRequest(
                f"unknown fault field {name!r}; known: {', '.join(_RULE_FIELDS)}.", param=name
            )
        rule = cls(id=f"fault_{uuid.uuid4().hex[:12]}")
        for name in _RULE_FIELDS:
            if name in data:
                setattr(rule, name, data[name])
        rule._validate()
        rule._regex = re.compile(rule.path) if rule.path else None
        rule._armed_by = re.compile(rule.armed_by) if rule.armed_by else None
        rule._armed_at = None if rule.armed_by else time.monotonic()
        rule._rng = random.Random(rule.seed)
        if rule.method:
            rule.method = rule.method.upper()
        return rule

    def _validate(self) -> None:
        def is_int(v: Any) -> bool:
            return isinstance(v, int) and not isinstance(v, bool)

        def is_num(v: Any) -> bool:
            return isinstance(v, (int, float)) and not isinstance(v, bool)

        if self.method is not None and (not isinstance(self.method, str) or not self.method):
            raise InvalidRequest("method must be an HTTP method or null.", param="method")
        _check_regex("path", self.path)
        # Only error statuses: the fault answers the error envelope, which a 1xx cannot carry (h11 refuses to
        # send it: the client would see a dropped connection), nor a 204/304 (no body allowed), and a 2xx/3xx
        # "fault" would hand the client an envelope where it expects an object.
        if self.status is not None and (not is_int(self.status) or not 400 <= self.status <= 599):
            raise InvalidRequest(
                "status must be an HTTP error status (400-599), or null for latency only / drop_connection.",
                param="status",
            )
        if self.times is not None and (not is_int(self.times) or self.times < 1):
            raise InvalidRequest("times must be an integer >= 1, or null for every time.", param="times")
        if self.probability is not None and (not is_num(self.probability) or not 0 <= self.probability <= 1):
            raise InvalidRequest(
                "probability must be a number between 0 and 1, or null.", param="probability"
            )
        if self.seed is not None and not is_int(self.seed):
            raise InvalidRequest("seed must be an integer or null.", param="seed")
        if self.retry_after is not None and (not is_num(self.retry_after) or self.retry_after < 0):
            raise InvalidRequest(
                "retry_after must be a number of seconds >= 0, or null.", param="retry_after"
            )
        if self.retry_after_ms is not None and (not is_int(self.retry_after_ms) or self.retry_after_ms < 0):
            raise InvalidRequest("retry_after_ms must be an integer >= 0, or null.", param="retry_after_ms")
        if not is_num(self.latency) or self.latency < 0:
            raise InvalidRequest("latency must be a number of seconds >= 0.", param="latency")
        for flag in ("drop_connection", "act_then_fail"):
            if not isinstance(getattr(self, flag), bool):
                raise InvalidRequest(f"{flag} must be a boolean.", param=flag)
        if self.message is not None and not isinstance(self.message, str):
            raise InvalidRequest("message must be a string or null.", param="message")
        if self.param is not None and not isinstance(self.param, str):
            raise InvalidRequest("param must be a string or null.", param="param")
        if self.duration is not None and (not is_num(self.duration) or self.duration <= 0):
            raise InvalidRequest("duration must be a number of seconds > 0, or null.", param="duration")
        _check_regex("armed_by", self.armed_by)
        # Digests only: a rule is read back by GET /faults, and a key written there would be shown to anyone.
        if self.keys is not None and (
            not isinstance(self.keys, list)
            or not all(isinstance(k, str) and KEY_DIGEST.fullmatch(k) for k in self.keys)
        ):
            raise InvalidRequest(
                "keys must be a list of key digests (key_digest(key): 'key-' and 16 hex digits), or null for "
                "any key.",
                param="keys",
            )
        if self.act_then_fail and self.status is None and not self.drop_connection:
            raise InvalidRequest("act_then_fail needs a status or drop_connection.", param="act_then_fail")

    def matches(self, method: str, path: str, key: str | None = None) -> bool:
        """Whether a request (``key``: the key_digest of its bearer key) is one this rule is for."""
        if self.method and self.method != method.upper():
            return False
        if self.keys is not None and key not in self.keys:
            return False
        return self._regex is None or self._regex.search(path) is not None

    @property
    def exhausted(self) -> bool:
        if self.times is not None and self.fired >= self.times:
            return True
        return (
            self.duration is not None
            and self._armed_at is not None
            and time.monotonic() - self._armed_at > self.duration
        )

    @property
    def armed(self) -> bool:
        return self._armed_at is not None

    def to_dict(self) -> dict[str, Any]:
        out = {"id": self.id, **{name: getattr(self, name) for name in _RULE_FIELDS}}
        out["fired"] = self.fired
        out["armed"] = self.armed
        out["remaining"] = None if self.times is None else max(0, self.times - self.fired)
        return out


def _check_regex(name: str, value: Any) -> None:
    """A rule field that holds a regular expression (or null)."""
    if value is None:
        return
    if not isinstance(value, str):
        raise InvalidRequest(f"{name} must be a regular expression or null.", param=name)
    try:
        re.compile(value)
    except re.error as exc:
        raise InvalidRequest(f"{name} is not a valid regular expression: {exc}.", param=name) from None


class FaultBook:
    """The active fault rules (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list[FaultRule] = []

    def add(self, data: Any) -> FaultRule:
        rule = FaultRule.from_dict(data)
        with self._lock:
            self._rules.append(rule)
        return rule

    def list(self) -> list[dict[str, Any]]:
        with self._lock:
            return [r.to_dict() for r in self._rules]

    def remove(self, rule_id: str) -> bool:
        with self._lock:
            before = len(self._rules)
            self._rules = [r for r in self._rules if r.id != rule_id]
            return len(self._rules) != before

    def clear(self) -> int:
        with self._lock:
            count = len(self._rules)
            self._rules.clear()
            return count

    def observe(self, method: str, path: str, status: int | None) -> None:
        """A request the real handler answered: arm the rules waiting for it (``armed_by``)."""
        if status is None or not 200 <= status < 300:
            return
        line = f"{method.upper()} {path}"
        with self._lock:
            for rule in self._rules:
                if not rule.armed and rule._armed_by is not None and rule._armed_by.search(line):
                    rule._armed_at = time.monotonic()

    def pick(self, method: str, path: str, key: str | None = None) -> FaultRule | None:
        """The first matching rule that fires for this request (consumes one of its ``times``); ``key``: the
        key_digest of its bearer key."""
        with self._lock:
            for rule in self._rules:
                if not rule.armed or rule.exhausted or not rule.matches(method, path, key):
                    continue
                if rule.probability is not None and rule._rng.random() >= rule.probability:
                    continue
                rule.fired += 1
                return rule
            return None


class RequestLog:
    """What reached the public API, in arrival order (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: list[dict[str, Any]] = []

    def append(self, entry: dict[str, Any]) -> None:
        with self._lock:
            self._entries.append(entry)

    def entries(self, *, clear: bool = False) -> list[dict[str, Any]]:
        with self._lock:
            out = [dict(e) for e in self._entries]
            if clear:
                self._entries.clear()
            return out

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


# ------------------------------------------------------------------------------------------ middleware


class FaultMiddleware:
    """Pure ASGI wrapper: logs every public request and applies the fault rule that fires for it."""

    def __init__(self, app: ASGIApp, faults: FaultBook, log: RequestLog, now: Callable[[], str]) -> None:
        self.app = app
        self.faults = faults
        self.log = log
        self.now = now

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not (path == PUBLIC_PREFIX or path.startswith(PUBLIC_PREFIX + "/")):
            await self.app(scope, receive, send)
            return
        method = scope.get("method", "GET")
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        entry: dict[str, Any] = {
            "method": method,
            "path": path,
            "query": scope.get("query_string", b"").decode("latin-1"),
            "status": None,
            "fault": None,
            "handled": False,
            "at": self.now(),
            "user_agent": headers.get("user-agent"),
            # Which of the user's keys sent it (key_digest, never the key; None: no bearer key).
            "key": _key_of(headers),
            "body": None,
        }
        # The whole request is read before anything else: a request that reached the server is acted on even
        # if the client gives up while an injected latency runs (that is what makes a timeout ambiguous).
        body = await _read_body(receive)
        replay = _replaying(body, receive)

        async def passthrough_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                entry["status"] = message["status"]
            await send(message)

        async def discard_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                entry["handler_status"] = message["status"]

        rule = self.faults.pick(method, path, entry["key"])
        try:
            if rule is not None:
                entry["fault"] = rule.id
                if rule.latency:
                    await asyncio.sleep(rule.latency)
            if rule is None or (rule.status is None and not rule.drop_connection):
                entry["handled"] = True
                await self.app(scope, replay, passthrough_send)
                self.faults.observe(method, path, entry["status"])
                return
            if rule.act_then_fail:
                entry["handled"] = True
                await self.app(scope, replay, discard_send)
                self.faults.observe(method, path, entry.get("handler_status"))
            if rule.drop_connection:
                await _drop_connection(receive, send)
                return
            assert rule.status is not None
            entry["status"] = rule.status
            await _send_fault(send, rule, rule.status)
        finally:
            entry["body"] = _decode_body(body)
            self.log.append(entry)


def bearer_key(headers: Any) -> str | None:
    """The key of an ``Authorization: Bearer <key>`` header (None when there is none)."""
    scheme, _, key = (headers.get("authorization") or "").partition(" ")
    key = key.strip()
    return key if scheme.lower() == "bearer" and key else None


def _key_of(headers: Any) -> str | None:
    key = bearer_key(headers)
    return key_digest(key) if key else None


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break  # the client went away mid-body: act on what arrived
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replaying(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the buffered body to the app once, then defers to the server's."""
    delivered = False

    async def replay() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _drop_connection(receive: Receive, send: Send) -> None:
    transport = getattr(getattr(receive, "__self__", None), "transport", None)
    if transport is not None and callable(getattr(transport, "close", None)):
        transport.close()
        # Let the server see the connection as lost before we return, so it does not try to answer.
        await asyncio.sleep(0)
        return
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json"), (b"content-length", b"1024")],
        }
    )
    await send({"type": "http.response.body", "body": b"{", "more_body": True})


async def _send_fault(send: Send, rule: FaultRule, status: int) -> None:
    body = json.dumps(
        envelope(
            rule.message or f"Injected fault: HTTP {status}.",
            type=error_type_for(status),
            param=rule.param,
            code=FAULT_CODE,
        )
    ).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if rule.retry_after is not None:
        value = rule.retry_after
        text = str(int(value)) if float(value).is_integer() else repr(float(value))
        headers.append((b"retry-after", text.encode()))
    if rule.retry_after_ms is not None:
        headers.append((b"retry-after-ms", str(rule.retry_after_ms).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def _decode_body(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")
