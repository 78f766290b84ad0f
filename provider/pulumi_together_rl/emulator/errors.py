"""The refusals of the emulated API (:class:`DomainError` and its subclasses).

The state machine raises them; the HTTP layer (:mod:`.app`) turns each into the error envelope, once.
"""

from __future__ import annotations


class DomainError(Exception):
    """A refusal by the emulated API. The HTTP layer turns it into the error envelope, once."""

    code = "error"

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code


class InvalidRequest(DomainError, ValueError):
    """400: a body, query or setting failed validation; ``param`` names the field."""

    code = "invalid_value"


class NotFound(DomainError):
    """404: no object with that id."""

    code = "not_found"


class Conflict(DomainError):
    """The object's state refuses the call (HTTP status: settings.conflict_status)."""

    code = "conflict"


class CapReached(DomainError):
    """429: the resource's session cap is full. ``retry_after`` is a hint in seconds."""

    code = "session_limit_reached"

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message, param="model_resources_id")
        self.retry_after = retry_after
