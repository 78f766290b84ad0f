"""The plugin face: :class:`TogetherRLProvider`, the provider protocol for both kinds over the shared core.

Each resource method is the same four beats as the dynamic face's (:mod:`..resources.face`): read the plan (the
engine's property bags, as the core's plain dicts: :mod:`.properties`), bail on failures (a check's verdict), call
the shared lifecycle once (:mod:`..resources.lifecycle`, in a worker thread: the server is asyncio and the core
blocks on HTTP), write the state (in the schema's names). The core is the same one the dynamic face calls: the
checks, the create journal and its ownership rule, the watcher, the client.

What this face does that the dynamic one cannot:

* ``customTimeouts`` reach the waits (``create`` / ``delete``), over the ``createTimeout`` / ``deleteTimeout``
  inputs.
* Preview: ``create`` and ``update`` with ``preview`` answer from the checked inputs without calling the API, so
  the estimated price (``pricePerHour``) is an output a program can export at preview, and an unknown id never
  reaches the API.
* ``apiKey`` is a secret end to end, in the state too even when the stack config holds it in plain text (with a
  warning); an input that arrives secret is answered secret.
* Each operation's lines (queue position, status, elapsed; a stop after a failure) go to the engine's log under
  the resource's URN (:mod:`.server`), so they show on that resource's row.
* ``pulumi import <token> <name> <id>``: a read with nothing declared describes the object from the API.

The stack and resource names come from the URN: ``owner`` (the journal's proof of whose a create was) is
``-/<project>/<stack>/<name>``, the organization being unknown to a provider, and a session's ``displayName``
defaults to the resource name, as with the dynamic face.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from pulumi.provider.experimental.property_value import PropertyValue
from pulumi.provider.experimental.provider import (
    CheckFailure,
    CheckRequest,
    CheckResponse,
    ConfigureRequest,
    ConfigureResponse,
    CreateRequest,
    CreateResponse,
    DeleteRequest,
    DiffRequest,
    DiffResponse,
    GetSchemaRequest,
    GetSchemaResponse,
    InvokeRequest,
    InvokeResponse,
    PropertyDiff,
    PropertyDiffKind,
    Provider,
    ReadRequest,
    ReadResponse,
    UpdateRequest,
    UpdateResponse,
)

from .. import config, ours
from ..messages import Sink, lines_to
from ..resources.keys import DISPLAY_NAME_MAX, OWNER_KEY, SECRETS_KEY, camel
from . import stack_config
from .package_schema import BY_TOKEN, PACKAGE, Kind, schema_text
from .properties import in_words, path, resource_spec, to_core, to_wire

T = TypeVar("T")

PLAIN_KEY_WARNING = (
    f"warning: {PACKAGE}:apiKey is not a secret: the provider stores it in the state as a secret all the same, "
    f"but your stack's config file holds it in plain text. Run `pulumi config set --secret {PACKAGE}:apiKey` "
    "(it prompts for the key) to encrypt it there"
)

CONFIG_KEYS = {name: ours.DYNAMIC.config_key(name) for name in ours.SETTINGS}
"""The plugin's provider config -> the core's settings (the same environment fallbacks follow in
:func:`~..config.current`)."""


class TogetherRLProvider(Provider):
    """Both kinds over the shared core (see the module docstring). ``sink(urn)`` gives where an operation's
    lines go (the engine's log, under that URN); none: stderr."""

    def __init__(self, sink: Callable[[str], Sink] | None = None) -> None:
        self._sink = sink

    async def get_schema(self, request: GetSchemaRequest) -> GetSchemaResponse:
        return GetSchemaResponse(schema_text())

    async def check_config(self, request: CheckRequest) -> CheckResponse:
        """The provider's config as the engine records it in the state: ``apiKey`` always a secret (the schema
        says so, but the engine takes the config as the program gives it). One warning when the stack's config
        file holds the key in plain text.

        The engine strips secrets from what it sends ``CheckConfig`` (``FilterProperties`` without
        ``KeepSecrets``, pulumi v3.274.1), so a key set with ``--secret`` arrives here as plain as one that was
        not: the stack's config file, which the engine read, is what tells them apart."""
        news = dict(request.new_inputs)
        key = news.get("apiKey")
        if key is not None and not key.is_secret and isinstance(key.value, str):
            news["apiKey"] = key.with_secret(True)
            if stack_config.plain_in_config_file(request.urn, f"{PACKAGE}:apiKey"):
                from ..resources.process import log_once  # the engine may check the config more than once

                with lines_to(self._sink(request.urn)) if self._sink else contextlib.nullcontext():
                    log_once(("plain api key",), PLAIN_KEY_WARNING)
        return CheckResponse(news)

    async def configure(self, request: ConfigureRequest) -> ConfigureResponse:
        given, _ = to_core({"properties": {}}, request.args)
        config.configure({CONFIG_KEYS[k]: v for k, v in given.items() if k in CONFIG_KEYS})
        return ConfigureResponse(accept_secrets=True, supports_preview=True)

    async def check(self, request: CheckRequest) -> CheckResponse:
        kind = BY_TOKEN[request.type]
        olds, _ = _plan(kind, request.old_inputs)
        news, secrets = _plan(kind, request.new_inputs)
        news = _declared(kind, request.urn, request.name, news)
        inputs, failures = await self._run(request.urn, kind.check, olds, news)
        if failures:
            return CheckResponse(None, [CheckFailure(path(f.property), in_words(f.reason)) for f in failures])
        return CheckResponse(_state(kind, inputs, secrets))

    async def diff(self, request: DiffRequest) -> DiffResponse:
        kind = BY_TOKEN[request.type]
        olds, _ = _plan(kind, request.old_state)
        news, _ = _plan(kind, request.new_inputs)
        found = core().diff(kind.schema, olds, news)  # no HTTP: runs on the loop
        changed = found.changed
        return DiffResponse(
            changes=found.changes,
            replaces=[camel(k) for k in found.replaces],
            delete_before_replace=bool(found.delete_before_replace),
            diffs=[camel(k) for k in changed],
            detailed_diff={camel(k): _property_diff(k, olds, news, found.replaces) for k in changed},
        )

    async def create(self, request: CreateRequest) -> CreateResponse:
        kind = BY_TOKEN[request.type]
        props, secrets = _plan(kind, request.properties)
        if request.preview:
            return CreateResponse(None, _state(kind, props, secrets))
        made = await self._run(request.urn, _call(core().create, timeout=request.timeout or None),
                               kind.schema, props)  # fmt: skip
        return CreateResponse(made.id, _state(kind, made.outputs, secrets))

    async def read(self, request: ReadRequest) -> ReadResponse:
        kind = BY_TOKEN[request.type]
        props, secrets = _plan(kind, request.properties)
        found = await self._run(request.urn, core().read, kind.schema, request.resource_id, props)
        if found is None:
            return ReadResponse("", {}, {})
        inputs = request.inputs if found.inputs is None else _state(kind, found.inputs, secrets)
        return ReadResponse(found.id, _state(kind, found.outputs, secrets), inputs)

    async def update(self, request: UpdateRequest) -> UpdateResponse:
        kind = BY_TOKEN[request.type]
        olds, _ = _plan(kind, request.olds)
        news, secrets = _plan(kind, request.news)
        if request.preview:
            return UpdateResponse(_state(kind, {**olds, **news}, secrets))
        outputs = await self._run(request.urn, core().update, kind.schema, request.resource_id, olds, news)
        return UpdateResponse(_state(kind, outputs, secrets))

    async def delete(self, request: DeleteRequest) -> None:
        kind = BY_TOKEN[request.type]
        props, _ = _plan(kind, request.properties)
        await self._run(request.urn, _call(core().delete, timeout=request.timeout or None),
                        kind.schema, request.resource_id, props)  # fmt: skip

    async def invoke(self, request: InvokeRequest) -> InvokeResponse:
        from .functions import BY_TOKEN as FUNCTIONS

        function = FUNCTIONS[request.tok]
        args, _ = to_core(function.inputs, request.args)
        result, failures = await self._run("", function.call, args)
        if failures:
            return InvokeResponse(
                None, [CheckFailure(path(f.property), in_words(f.reason)) for f in failures]
            )
        return InvokeResponse(to_wire(function.outputs, result))

    async def _run(self, urn: str, call: Callable[..., T], *args: Any) -> T:
        """``call(*args)`` in a worker thread (the core blocks on HTTP), its lines routed under ``urn``."""
        if self._sink is None:
            return await asyncio.to_thread(call, *args)
        with lines_to(self._sink(urn)):
            return await asyncio.to_thread(call, *args)


def core() -> Any:
    """The shared lifecycle, imported at the first operation rather than before the plugin answers the engine
    (the server warms it up meanwhile: :func:`.server.main`)."""
    from ..resources import lifecycle

    return lifecycle


def _plan(kind: Kind, bag: Mapping[str, PropertyValue]) -> tuple[dict[str, Any], set[str]]:
    """The bag in the core's names, with the names of its secret inputs where the core looks for them."""
    plain, secrets = to_core(resource_spec(kind.token), bag)
    if secrets:
        plain[SECRETS_KEY] = sorted(secrets)
    return plain, secrets


def _state(kind: Kind, plain: Mapping[str, Any], secrets: set[str]) -> dict[str, PropertyValue]:
    """The core's dict in the schema's names (the secret markers are the bag's own, not a property)."""
    kept = {k: v for k, v in plain.items() if k != SECRETS_KEY}
    return to_wire(resource_spec(kind.token), kept, secrets)


def _declared(kind: Kind, urn: str, name: str, news: Mapping[str, Any]) -> dict[str, Any]:
    """What the dynamic face's resource classes add from the program: a session's display name (unless
    declared) and the owner (never the user's to set)."""
    stack, project = (
        urn.split("::")[0].removeprefix("urn:pulumi:"),
        urn.split("::")[1],
    )  # urn:pulumi:<stack>::<project>::…
    defaults = (
        {"display_name": name[:DISPLAY_NAME_MAX]} if "display_name" in kind.schema.update_in_place else {}
    )
    return {**defaults, **news, OWNER_KEY: ours.owner(None, project, stack, name)}


def _property_diff(
    key: str, olds: Mapping[str, Any], news: Mapping[str, Any], replaces: list[str]
) -> PropertyDiff:
    replace = key in replaces
    if olds.get(key) is None:
        kind = PropertyDiffKind.ADD_REPLACE if replace else PropertyDiffKind.ADD
    elif news.get(key) is None:
        kind = PropertyDiffKind.DELETE_REPLACE if replace else PropertyDiffKind.DELETE
    else:
        kind = PropertyDiffKind.UPDATE_REPLACE if replace else PropertyDiffKind.UPDATE
    return PropertyDiff(kind, input_diff=True)


def _call(verb: Callable[..., T], **options: Any) -> Callable[..., T]:
    return lambda *args: verb(*args, **options)
