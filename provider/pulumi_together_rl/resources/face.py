"""The dynamic face: the ``pulumi.dynamic`` provider every resource of this package is served by, written once
over the shared lifecycle.

A kind's provider (``model_resource._ModelResourceProvider``) is this class with two attributes naming its
:class:`~.kind.Kind` and its ``check``, which load at the provider's first call (a program that declares
resources imports neither). Each method is the same four beats: read the plan (the engine's
property bags), bail on failures (a check's verdict), call the shared lifecycle once (:mod:`.lifecycle`), write
the state (this face's result types). Providers hold no state: :meth:`configure` records the stack config in
:mod:`..config`, never on ``self``, and ``__getstate__`` is empty, so the pickled provider in the state is a bare
class reference (no key, the same bytes on every run, no spurious ``~__provider`` diff).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, ClassVar

from pulumi.dynamic import (
    CheckFailure,
    CheckResult,
    ConfigureRequest,
    CreateResult,
    DiffResult,
    ReadResult,
    ResourceProvider,
    UpdateResult,
)

from .. import config
from .keys import OWNER_KEY, SECRETS_KEY

if TYPE_CHECKING:
    from .kind import AnyKind


class KindProvider(ResourceProvider):
    """The dynamic provider of one kind: :attr:`schema_at` and :attr:`checks_at` name (``module:attribute``)
    its :class:`~.kind.Kind` and its check. They are loaded at the provider's first call, not when a program
    declares a resource: a program imports no HTTP client, no wire models and no journal."""

    schema_at: ClassVar[str]
    checks_at: ClassVar[str]

    @property
    def schema(self) -> AnyKind:
        from .kind import Kind

        kind = _load(self.schema_at)
        if not isinstance(kind, Kind):
            raise TypeError(f"{self.schema_at} is not a Kind: {kind!r}")
        return kind

    def configure(self, req: ConfigureRequest) -> None:
        from . import sdk_seams

        config.configure(req.config)
        sdk_seams.install()  # in the provider server only

    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        inputs, failures = _load(self.checks_at)(olds, news)
        return CheckResult(inputs, [CheckFailure(f.property, f.reason) for f in failures])

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        found = _lifecycle().diff(self.schema, olds, news)
        return DiffResult(
            changes=found.changes,
            replaces=found.replaces,
            stables=[],
            delete_before_replace=found.delete_before_replace,
        )

    def create(self, props: dict[str, Any]) -> CreateResult:
        made = _lifecycle().create(self.schema, props)
        return CreateResult(made.id, made.outputs)

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        found = _lifecycle().read(self.schema, id_, props)
        return (
            ReadResult("", {}) if found is None else ReadResult(found.id, found.outputs, inputs=found.inputs)
        )

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(_lifecycle().update(self.schema, id_, olds, news))

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        _lifecycle().delete(self.schema, id_, props)

    def __getstate__(self) -> dict[str, Any]:
        return {}

    def __setstate__(self, state: dict[str, Any]) -> None:
        pass


_loaded: dict[str, Any] = {}


def _load(where: str) -> Any:
    """The object ``module:attribute`` names, imported once (the provider side's modules load at first use)."""
    found = _loaded.get(where)
    if found is None:
        module, _, attribute = where.partition(":")
        found = _loaded[where] = getattr(importlib.import_module(module), attribute)
    return found


def _lifecycle() -> Any:
    from . import lifecycle

    return lifecycle


def declared_props(resource: type, args: Any, resource_name: str) -> dict[str, Any]:
    """The property bag a Resource class registers: every output it annotates (its inputs as declared in
    ``args``, ``None`` for the rest, which the engine fills in), and the declaration (:data:`~.keys.OWNER_KEY`).
    A class's annotations are its table on the program side; a test holds them equal to the kind's schema."""
    names = [name for name in vars(resource).get("__annotations__", {}) if not name.startswith("_")]
    props: dict[str, Any] = {name: getattr(args, name, None) for name in names}
    props[SECRETS_KEY] = secret_names({k: v for k, v in props.items() if v is not None})
    props[OWNER_KEY] = declaration_owner(resource_name)
    return props


def secret_names(inputs: dict[str, Any]) -> Any:
    """An ``Output`` of the names of ``inputs`` whose values are secret (:data:`~.keys.SECRETS_KEY`): the engine
    hands a dynamic provider every value in plain text, so only the program can tell it which ones to keep out
    of its lines and its journal. A list of names, never a value."""
    import pulumi

    async def names() -> list[str] | None:
        found = [key for key, value in inputs.items() if await pulumi.Output.from_input(value).is_secret()]
        return sorted(found) or None  # none: nothing is sent, as for any unset input

    return pulumi.Output.from_input(names())


def declaration_owner(resource_name: str) -> str:
    """``org/project/stack/name``: which declaration a resource is, from the program that declares it (the
    provider itself never learns the stack or the resource's name). The create journal records it, and only the
    same declaration takes over what an interrupted create of it made."""
    import pulumi

    from .. import ours

    try:
        org = pulumi.get_organization()
    except Exception:  # an SDK or engine that does not know organizations
        org = ""
    return ours.owner(org, pulumi.get_project(), pulumi.get_stack(), resource_name)
