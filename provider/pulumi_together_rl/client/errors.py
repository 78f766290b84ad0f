"""The client's exception tree and the one place an HTTP status becomes an exception.

Resources never see ``httpx`` exceptions: the transport turns every failure into one of these.
No message built here ever contains the API key: messages are made from the server's error body, the HTTP
method and the path, and :func:`redact` scrubs the key out of anything echoed back.
"""

from __future__ import annotations

import re
from typing import Any


class TogetherError(Exception):
    """Base of every error this client raises.

    ``maybe_created`` is True on the error a create raises when the object it asked for may exist anyway
    (its answer was lost and it was not found): running the create again could make a second one;
    ``lookup_error`` is then why looking for that object proved nothing (None: it was not found).
    """

    maybe_created: bool = False
    lookup_error: TogetherError | None = None


class ConfigurationError(TogetherError):
    """The client cannot be built or used as configured (for example: no API key, or it is closed)."""


class InvalidArgument(TogetherError, ValueError):
    """A call this client refuses before sending anything (for example: an id that is not one path segment)."""


class ApiError(TogetherError):
    """The API answered with a non-2xx status.

    Attributes mirror the error envelope ``{"error": {message, type, param, code}}``, plus the HTTP ``status``,
    the request's ``method`` and ``path``, and a ``request_id`` when the server sent one.
    """

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str | None = None,
        code: str | None = None,
        param: str | None = None,
        request_id: str | None = None,
        method: str | None = None,
        path: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        self.status = status
        self.message = message
        self.type = type
        self.code = code
        self.param = param
        self.request_id = request_id
        self.method = method
        self.path = path
        self.retry_after = retry_after
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.method} {self.path}: " if self.method and self.path else ""
        extras = [
            f"{k}={v}" for k, v in (("type", self.type), ("code", self.code), ("param", self.param)) if v
        ]
        tail = f" ({', '.join(extras)})" if extras else ""
        return f"{where}HTTP {self.status}: {self.message or 'no message'}{tail}"


class BadRequest(ApiError):
    """400 / 422: the request was invalid; ``param`` names the field when the server says which."""


class Unauthorized(ApiError):
    """401: the API key is missing or wrong."""


class PermissionDenied(ApiError):
    """403: the key may not do this."""


class NotFound(ApiError):
    """404: no such object (for this key's project)."""


class Conflict(ApiError):
    """409: the object is in a state that refuses this call (for example: sessions still attached)."""


class RateLimited(ApiError):
    """429: throttled, or a hard cap such as the per-resource session limit."""


class ServerError(ApiError):
    """5xx: the server failed. For a create this is ambiguous: it may have acted."""


class ApiConnectionError(TogetherError):
    """The request did not get an HTTP answer (refused, reset, DNS, TLS...).

    ``maybe_sent`` is True when the request may have reached the server (the connection broke after the
    request was written), which makes a create ambiguous.
    """

    def __init__(
        self, message: str, *, method: str | None = None, path: str | None = None, maybe_sent: bool = False
    ):
        self.message = message
        self.method = method
        self.path = path
        self.maybe_sent = maybe_sent
        super().__init__(f"{method} {path}: {message}" if method and path else message)


class ApiTimeout(ApiConnectionError):
    """The request timed out. A read timeout means the server may have acted."""


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` says "not now" rather than "no": throttling (429), a server failure (5xx), or no answer
    at all. A read (GET, list) that fails this way is worth trying again later; a wait treats it as no news."""
    return isinstance(exc, (RateLimited, ServerError, ApiConnectionError))


#: Longest server message kept in an error (a proxy can answer a whole HTML page).
MAX_MESSAGE = 2000

_STATUS_CLASSES: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: PermissionDenied,
    404: NotFound,
    409: Conflict,
    422: BadRequest,
    429: RateLimited,
}


def error_class_for(status: int) -> type[ApiError]:
    if status >= 500:
        return ServerError
    return _STATUS_CLASSES.get(status, ApiError)


UNMISTAKABLE_SECRET = 16
"""Characters from which a secret is masked wherever it occurs, inside a longer token too (``Bearer%20<key>``,
``key=<key>``): a run that long never happens to be part of an ordinary word. A shorter one (a test key, a
placeholder such as ``k``) is masked only where it stands as a whole token: ``checked`` stays ``checked``."""

_TOKEN_CHARACTER = "A-Za-z0-9_"


def redact(text: str, secret: str | None) -> str:
    """Mask ``secret`` in ``text`` as ``***`` (belt and braces: a server or proxy could echo a header back); see
    :data:`UNMISTAKABLE_SECRET` for where."""
    if not secret or secret not in text:
        return text
    if len(secret) >= UNMISTAKABLE_SECRET:
        return text.replace(secret, "***")
    whole = rf"(?<![{_TOKEN_CHARACTER}]){re.escape(secret)}(?![{_TOKEN_CHARACTER}])"
    return re.sub(whole, "***", text)


def error_from_response(
    status: int,
    body: Any,
    *,
    method: str | None = None,
    path: str | None = None,
    request_id: str | None = None,
    retry_after: float | None = None,
    secret: str | None = None,
) -> ApiError:
    """Build the one exception for a non-2xx answer. ``body`` is the parsed JSON (or text) of the response."""
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict):
        message = str(err.get("message") or "")
        etype, code, param = err.get("type"), err.get("code"), err.get("param")
    else:
        message = body if isinstance(body, str) else ""
        etype = code = param = None
    return error_class_for(status)(
        status,
        # Redact first: truncating first could cut a key in two and leave its prefix in the message.
        redact(message, secret)[:MAX_MESSAGE],
        type=redact(etype, secret) if isinstance(etype, str) else None,
        code=redact(code, secret) if isinstance(code, str) else None,
        param=redact(param, secret) if isinstance(param, str) else None,
        request_id=redact(request_id, secret) if request_id else None,
        method=method,
        path=path,
        retry_after=retry_after,
    )
