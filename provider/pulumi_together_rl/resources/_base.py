"""Plumbing shared by both resource providers: configure, the lazy client, check/diff helpers, errors, waiting.

Nothing in here holds per-resource logic; the resource modules read as "read the plan, call the client, wait,
write the result" on top of it.

* Providers hold no state: settings live in :mod:`pulumi_together_rl.config` (a process-level registry), the
  HTTP client in a per-process cache here, so the pickled provider (``__provider`` in the state) is just a class
  reference: no key, no client, the same bytes on every run.
* Every user-facing error is a :class:`ProviderError` whose message follows the project grammar
  ``<doing what> <kind> (<id>): <cause>. <what to do>``.
* ``check`` helpers validate with the resource's pydantic "validated inputs" model, turn every pydantic error
  into one ``CheckFailure`` per property path, and leave values that are unknown at preview untouched.
* ``diff`` helpers compare canonical forms of the real inputs only; they never make HTTP calls.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

from pulumi.dynamic import CheckFailure, ConfigureRequest, DiffResult, ResourceProvider
from pulumi.output import Unknown
from pydantic import BaseModel, BeforeValidator, Strict, ValidationError

from .. import config
from ..client import errors
from ..waiting import WaitFailed, WaitTimeout, format_elapsed, wait_for

if TYPE_CHECKING:
    from ..client.api import TogetherRL
    from ..client.models import SupportedModelList

T = TypeVar("T")

PROVIDER_KEY = "__provider"
UNKNOWN_SENTINEL = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # pulumi.runtime.rpc.UNKNOWN, without importing rpc

SUPPORTED_MODELS_TTL = 600.0
"""How long (seconds) one process trusts its copy of ``GET /v1/rl/supported-models``."""


# ------------------------------------------------------------------------------------------------ errors


class ProviderError(Exception):
    """An error shown to the user: ``<doing> <kind> (<ident>): <cause>. <todo>``."""

    def __init__(self, doing: str, kind: str, ident: str | None, cause: str, todo: str = "") -> None:
        self.doing, self.kind, self.ident, self.cause, self.todo = doing, kind, ident, cause, todo
        where = f" ({ident})" if ident else ""
        tail = f" {todo.rstrip('.')}." if todo else ""
        super().__init__(f"{doing} {kind}{where}: {cause.rstrip('.')}.{tail}")


def explain(exc: BaseException) -> tuple[str, str]:
    """(cause, what to do) for an exception raised by the client or a wait."""
    if isinstance(exc, ProviderError):
        return exc.cause, exc.todo
    if isinstance(exc, errors.Unauthorized):
        return f"the API rejected the key (HTTP 401: {exc.message})", (
            "Check together:apiKey (`pulumi config set --secret together:apiKey <key>`) or TOGETHER_API_KEY"
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
    if isinstance(exc, errors.ApiError):
        return f"the API answered HTTP {exc.status}: {exc.message or 'no message'}", "Run the command again"
    if isinstance(exc, errors.ApiConnectionError):
        return f"the API could not be reached ({exc})", (
            "Check together:baseUrl / TOGETHER_BASE_URL and the network, then run the command again"
        )
    if isinstance(exc, (WaitFailed, WaitTimeout)):
        state = exc.description.split(": ", 1)[-1]  # the message already names the kind and id
        if isinstance(exc, WaitTimeout):
            return f"timed out after {format_elapsed(exc.timeout)}; last state: {state}", ""
        detail = f" with {exc.code}: {exc.api_message or 'no message'}" if exc.code else ""
        return f"it reached {state}{detail}", ""
    return f"{type(exc).__name__}: {exc}", ""


def log(message: str) -> None:
    """One line on stderr: the Pulumi CLI shows a dynamic provider's stderr."""
    try:
        print(message, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


# ------------------------------------------------------------------------------------ provider base + client


class BaseProvider(ResourceProvider):
    """Stateless provider base: ``configure`` records the stack config in :mod:`config`, never on ``self``.

    ``__getstate__`` returns an empty dict, so the dill blob is a bare class reference whatever happens to the
    instance (deterministic: no spurious ``~__provider`` diffs).
    """

    def configure(self, req: ConfigureRequest) -> None:
        config.configure(req.config)

    def __getstate__(self) -> dict[str, Any]:
        return {}

    def __setstate__(self, state: dict[str, Any]) -> None:
        pass


CHECK_MAX_ATTEMPTS = 2
"""Attempts per request of the remote part of ``check``: a preview must not hang on an unreachable API."""

_client_lock = threading.Lock()
_clients: dict[tuple[str, str | None, bool], TogetherRL] = {}


def api_client(doing: str, kind: str, ident: str | None, *, quick: bool = False) -> TogetherRL:
    """The process's client for the current settings (built lazily, shared by all threads).

    ``quick`` gives a client with few retries, for the optional remote checks.
    """
    settings = config.current()
    if not settings.api_key:
        raise ProviderError(doing, kind, ident, "no Together API key is configured", config.MISSING_KEY_HINT)
    cache_key = (settings.api_key, settings.base_url, quick)
    with _client_lock:
        client = _clients.get(cache_key)
        if client is None:
            from ..client.api import TogetherRL

            extra = {"max_attempts": CHECK_MAX_ATTEMPTS} if quick else {}
            client = TogetherRL(api_key=settings.api_key, base_url=settings.base_url, **extra)
            _clients[cache_key] = client
    return client


_supported_lock = threading.Lock()
_supported: dict[str | None, tuple[float, SupportedModelList]] = {}
_resource_facts: dict[tuple[str | None, str], dict[str, Any]] = {}


def supported_models(client: TogetherRL) -> SupportedModelList:
    """``GET /v1/rl/supported-models``, cached per process for :data:`SUPPORTED_MODELS_TTL` seconds."""
    base_url = config.current().base_url
    now = time.monotonic()
    with _supported_lock:
        cached = _supported.get(base_url)
        if cached and now - cached[0] < SUPPORTED_MODELS_TTL:
            return cached[1]
    models = client.list_supported_models()
    with _supported_lock:
        _supported[base_url] = (now, models)
    return models


def resource_facts(client: TogetherRL, resource_id: str) -> dict[str, Any]:
    """The immutable facts of a model resource a session check needs (cached: they never change)."""
    key = (config.current().base_url, resource_id)
    with _supported_lock:
        if key in _resource_facts:
            return _resource_facts[key]
    mr = client.get_model_resource(resource_id)
    facts = {
        "base_model": mr.base_model,
        "gpu_type": mr.compute_config.gpu_type.value if mr.compute_config.gpu_type else None,
        "lora_enabled": mr.lora_enabled,
    }
    with _supported_lock:
        _resource_facts[key] = facts
    return facts


def clear_caches() -> None:
    """Forget clients and cached API answers (tests)."""
    with _client_lock:
        for client in _clients.values():
            try:
                client.close()
            except Exception:
                pass
        _clients.clear()
    with _supported_lock:
        _supported.clear()
        _resource_facts.clear()


def warn_remote_check_skipped(kind: str, ident: str | None, exc: BaseException) -> None:
    cause, _ = explain(exc)
    log(
        f"warning: checking {kind} ({ident}) against the API: {cause}. Skipped the remote checks "
        "(supported model, rank and replica limits); they run again at `pulumi up`."
    )


# --------------------------------------------------------------------------------------- unknowns + shapes


def is_unknown(value: Any) -> bool:
    return isinstance(value, Unknown) or (isinstance(value, str) and value == UNKNOWN_SENTINEL)


def contains_unknown(value: Any) -> bool:
    if is_unknown(value):
        return True
    if isinstance(value, Mapping):
        return any(contains_unknown(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(contains_unknown(v) for v in value)
    return False


def canonical(value: Any, *, top: bool = True) -> Any:
    """The comparable form of an input: ``None`` entries dropped, whole floats as ints, and an empty object at
    the top equal to an unset input (``compute_config={}`` means the defaults). Nested empty objects are kept:
    ``{"adam": {}}`` and ``{"muon": {}}`` differ."""
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if key == PROVIDER_KEY or item is None:
                continue
            out[key] = canonical(item, top=False)
        return (out or None) if top else out
    if isinstance(value, (list, tuple)):
        return [canonical(v, top=False) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def drop_none(value: Any) -> Any:
    """``value`` without ``None`` entries (the wire drops them anyway; do it here so outputs are stable)."""
    if isinstance(value, Mapping):
        return {k: drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [drop_none(v) for v in value]
    return value


def pick(props: Mapping[str, Any], keys: Iterable[str]) -> dict[str, Any]:
    """The entries of ``props`` named in ``keys`` that are set."""
    return {k: props[k] for k in keys if props.get(k) is not None}


def iso(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value is not None else None


def short_id(ident: str) -> str:
    return ident if len(ident) <= 12 else ident[:8] + "…"


# --------------------------------------------------------------------------------------------------- check


def _whole(value: Any) -> Any:
    # Numbers cross the Pulumi wire as doubles: 32 arrives as 32.0. Take whole floats back to ints.
    return int(value) if isinstance(value, float) and value.is_integer() else value


WholeInt = Annotated[int, Strict(), BeforeValidator(_whole)]
"""An integer input: whole floats (from the wire) become ints; bools, strings and fractions are rejected."""


def validate_inputs(
    model: type[BaseModel],
    news: Mapping[str, Any],
    *,
    required: Iterable[str],
    hints: Mapping[str, str],
) -> tuple[dict[str, Any], list[CheckFailure]]:
    """Validate ``news`` with ``model``: (normalised inputs, one failure per bad property path).

    Values unknown at preview are left out of validation and put back unchanged; a required property that is
    unknown is fine. On failure the inputs come back as given.
    """
    props = {k: v for k, v in news.items() if k != PROVIDER_KEY and v is not None}
    known, unknowns = _split_unknowns(props, ())
    failures: list[CheckFailure] = []
    seen: set[str] = set()
    for name in required:
        if name not in props:
            failures.append(CheckFailure(name, f"{name} is required. {hints.get(name, '')}".strip()))
            seen.add(name)
    try:
        validated = model.model_validate(known)
    except ValidationError as exc:
        for err in exc.errors():
            path = ".".join(str(part) for part in err["loc"])
            if path not in seen:
                seen.add(path)
                failures.append(CheckFailure(path, _reason(err, path, hints)))
        return props, failures
    if failures:
        return props, failures
    inputs = drop_none(validated.model_dump(mode="json", exclude_unset=True))
    for path, value in unknowns:
        target = inputs
        for part in path[:-1]:
            target = target.setdefault(part, {})
        target[path[-1]] = value
    return inputs, failures


def _split_unknowns(value: Mapping[str, Any], path: tuple[str, ...]) -> tuple[dict[str, Any], list]:
    known: dict[str, Any] = {}
    unknowns: list[tuple[tuple[str, ...], Any]] = []
    for key, item in value.items():
        if contains_unknown(item) and isinstance(item, Mapping) and not is_unknown(item):
            known[key], inner = _split_unknowns(item, (*path, key))
            unknowns.extend(inner)
        elif contains_unknown(item):
            unknowns.append(((*path, key), item))
        elif item is not None:
            known[key] = item
    return known, unknowns


def _reason(err: Mapping[str, Any], path: str, hints: Mapping[str, str]) -> str:
    kind = err["type"]
    if kind == "extra_forbidden":
        parent = path.rpartition(".")[0]
        return f"{path} is not a known input. Remove it{' from ' + parent if parent else ''} (check the spelling)"
    message = str(err.get("ctx", {}).get("error", "")) if kind == "value_error" else err["msg"]
    message = message[0].lower() + message[1:] if message else "invalid value"
    got = repr(err.get("input"))
    got = got if len(got) <= 60 else got[:57] + "..."
    hint = hints.get(path) or hints.get(path.rpartition(".")[0], "")
    return f"{path}: {message} (got {got}). {hint}".strip()


# ---------------------------------------------------------------------------------------------------- diff


def changed_keys(olds: Mapping[str, Any], news: Mapping[str, Any], keys: Iterable[str]) -> list[str]:
    """Input keys whose value differs (canonical forms; an unknown new value always counts as a change)."""
    return [
        k for k in keys if contains_unknown(news.get(k)) or canonical(olds.get(k)) != canonical(news.get(k))
    ]


def diff_inputs(
    olds: Mapping[str, Any],
    news: Mapping[str, Any],
    *,
    replace_on_changes: tuple[str, ...],
    update_in_place: tuple[str, ...],
) -> DiffResult:
    """``DiffResult`` over the real inputs only: never ``__provider``, never outputs or server-filled values.

    Replacement is always delete-before-replace (see each resource's module docstring for why).
    """
    changed = changed_keys(olds, news, (*replace_on_changes, *update_in_place))
    replaces = [k for k in changed if k in replace_on_changes]
    return DiffResult(
        changes=bool(changed),
        replaces=replaces,
        stables=[],
        delete_before_replace=True if replaces else None,
    )


# ------------------------------------------------------------------------------------------------- waiting


def get_or_none(getter: Callable[[str], T], ident: str) -> T | None:
    """``getter(ident)``, with 404 as ``None`` (not-found is a state)."""
    try:
        return getter(ident)
    except errors.NotFound:
        return None


def wait(
    fetch: Callable[[], T | None],
    *,
    done: Callable[[T | None], bool],
    failed: Callable[[T | None], bool],
    describe: Callable[[T | None], str],
    timeout: float,
) -> T | None:
    """:func:`waiting.wait_for` with the configured poll interval."""
    return wait_for(
        fetch,
        done=done,
        failed=failed,
        describe=describe,
        timeout=float(timeout),
        poll_interval=config.current().poll_interval,
    )


def abandon(doing: str, kind: str, ident: str, stop: Callable[[], Any], exc: BaseException) -> NoReturn:
    """After a failed create: stop what was made (best effort, logged), then raise the error naming the id.

    ``KeyboardInterrupt``/``SystemExit`` are re-raised as they are, after the stop."""
    try:
        stop()
        stopped = "It has been stopped, so nothing is left billing"
        log(f"{kind} {ident}: create failed; stopped it")
    except errors.NotFound:
        stopped = "It no longer exists"
    except Exception as stop_exc:
        stop_cause, _ = explain(stop_exc)
        stopped = f"Stopping it failed too ({stop_cause}); stop it yourself (POST .../{ident}/stop)"
        log(f"{kind} {ident}: create failed and stopping it failed: {stop_cause}")
    if not isinstance(exc, Exception):
        raise exc
    cause, todo = explain(exc)
    if isinstance(exc, WaitTimeout):
        todo = "If it was queued for capacity, raise create_timeout; then run `pulumi up` again"
    todo = todo or "Run `pulumi up` again to retry"
    raise ProviderError(doing, kind, ident, cause, f"{stopped}. {todo}") from exc
