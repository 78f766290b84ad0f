"""What the user reads when something goes wrong: :class:`ProviderError`, :func:`explain` and :func:`log`.

* Every user-facing error is a :class:`ProviderError` whose message follows the project grammar
  ``<doing what> <kind> (<id>): <cause>. <what to do>``.
* :func:`explain` turns an exception raised by the client or a wait into that cause and "what to do".
* :func:`log` writes one progress or warning line on stderr, which the Pulumi CLI shows.
"""

from __future__ import annotations

import re

from .. import config
from ..client import errors
from ..waiting import WaitFailed, WaitTimeout, format_elapsed, progress_line


class ProviderError(Exception):
    """An error shown to the user: ``<doing> <kind> (<ident>): <cause>. <todo>``."""

    def __init__(self, doing: str, kind: str, ident: str | None, cause: str, todo: str = "") -> None:
        self.doing, self.kind, self.ident, self.cause, self.todo = doing, kind, ident, cause, todo
        where = f" ({ident})" if ident else ""
        tail = f" {todo.rstrip('.')}." if todo else ""
        super().__init__(f"{doing} {kind}{where}: {cause.rstrip('.')}.{tail}")


RERUN = "Run the command again"
UNEXPECTED_TODO = (
    "Run the command again; if it fails the same way, report it as a bug of pulumi-together-rl, "
    "with this message"
)


def base_url_todo(source: str | None) -> str:
    """What to do about a malformed base URL, naming the setting it really came from."""
    if source == "TOGETHER_BASE_URL":
        return (
            "The URL comes from the environment variable TOGETHER_BASE_URL (together:baseUrl is not set): set it to "
            "an http(s) URL, or unset it for the default"
        )
    return (
        "The URL comes from the stack config together:baseUrl: set it to an http(s) URL "
        "(`pulumi config set together:baseUrl https://api.together.ai`), or remove it for the default"
    )


def api_key_todo(source: str | None) -> str:
    """What to do about a rejected key, naming the setting it came from."""
    if source == "TOGETHER_API_KEY":
        return (
            "The key comes from the environment variable TOGETHER_API_KEY (together:apiKey is not set): fix it, or "
            "set the stack's key with `pulumi config set --secret together:apiKey <key>`"
        )
    return "The key comes from the stack config together:apiKey: `pulumi config set --secret together:apiKey <key>`"


def explain(exc: BaseException, doing: str = "") -> tuple[str, str]:
    """(cause, what to do) for an exception raised by the client or a wait; the "what to do" is never empty.

    ``doing`` ("creating", "adopting", "deleting", ...) picks the advice where it depends on the operation:
    which timeout to raise, and what to check when an adopt fails.
    """
    adopting = doing == "adopting"
    if getattr(exc, "maybe_created", False):
        # The client could not tell whether the create happened and did not resend it. Running `pulumi up`
        # blindly could make a second object: the user must look first (the message says where and what).
        return str(exc), (
            "Before running `pulumi up` again, look for it as the message says: if it exists, set adopt_id to "
            "its id to take it over (or stop it); if it does not, run `pulumi up` again"
        )
    if isinstance(exc, ProviderError):
        return exc.cause, exc.todo or UNEXPECTED_TODO
    if isinstance(exc, errors.Unauthorized):
        return f"the API rejected the key (HTTP 401: {exc.message})", api_key_todo(
            config.current().api_key_from
        )
    if isinstance(exc, errors.PermissionDenied):
        return f"the key may not do this (HTTP 403: {exc.message})", "Use a key of the project that owns it"
    if isinstance(exc, errors.RateLimited):
        return f"the API refused it for now (HTTP 429: {exc.message})", (
            "Wait and run `pulumi up` again; if a session cap is reached, stop a session on that model resource"
        )
    if isinstance(exc, errors.BadRequest):
        param = f", param {exc.param}" if exc.param else ""
        return f"the API rejected the request (HTTP {exc.status}{param}: {exc.message})", (
            "Fix that input and run `pulumi up` again"
        )
    if isinstance(exc, errors.NotFound):
        return f"the API answered HTTP 404: {exc.message or 'not found'}", (
            "Check adopt_id, or remove it to create a new object"
            if adopting
            else "Run `pulumi refresh` to drop objects that no longer exist, then run the command again"
        )
    if isinstance(exc, errors.Conflict):
        message = exc.message or "no message"
        return f"the API refused it in the object's current state (HTTP 409: {message})", (
            "Check the object's status, then run the command again"
        )
    if isinstance(exc, errors.ServerError):
        return f"the API failed (HTTP {exc.status}: {exc.message or 'no message'})", (
            "Run the command again in a few minutes"
        )
    if isinstance(exc, errors.ApiError):
        return f"the API answered HTTP {exc.status}: {exc.message or 'no message'}", RERUN
    if isinstance(exc, errors.ApiConnectionError):
        return f"the API could not be reached ({exc})", (
            "Check together:baseUrl / TOGETHER_BASE_URL and the network, then run the command again"
        )
    if isinstance(exc, errors.ConfigurationError):
        return _configuration_cause(exc), (
            "Check together:apiKey / TOGETHER_API_KEY and together:baseUrl / TOGETHER_BASE_URL, then run the "
            "command again"
        )
    if isinstance(exc, WaitTimeout):
        state = exc.description.split(": ", 1)[-1]  # the message already names the kind and id
        cause = f"timed out after {format_elapsed(exc.timeout)}; last state: {state}"
        if doing == "deleting":
            return cause, "Raise delete_timeout and run the command again"
        return cause, "If it is waiting in a capacity queue, raise create_timeout; then run `pulumi up` again"
    if isinstance(exc, WaitFailed):
        alternative = ", or remove adopt_id to create a new one" if adopting else ""
        if exc.last is None:
            return "the API answered 404 (not found) for it", (
                "It may have been deleted outside Pulumi, or the API is lagging: run `pulumi up` again"
                + alternative
            )
        state = exc.description.split(": ", 1)[-1]  # the message already names the kind and id
        if exc.code or exc.api_message:
            detail = f" with {exc.code or 'an error'}: {exc.api_message or 'no message'}"
            todo = "Fix the cause the API's error gives (inputs, capacity, quota), then run `pulumi up` again"
        else:
            detail = ""
            todo = "Look up why in the API (its status and error), fix that, then run `pulumi up` again"
        return f"it reached {state}{detail}", todo + alternative
    return f"{type(exc).__name__}: {exc}", UNEXPECTED_TODO


def _configuration_cause(exc: BaseException) -> str:
    # The client's message carries its own prefix and advice; keep only what went wrong.
    message = str(exc).removeprefix("creating the Together RL client: ")
    return re.sub(r"\.\s*Check [^.]*\.?$", "", message).strip()


def log(message: str) -> None:
    """One whole line on stderr (the Pulumi CLI shows a dynamic provider's stderr), never interleaved."""
    progress_line(message)
