"""The dynamic face: the ``pulumi.dynamic`` provider every resource of this package is served by, written once
over the shared lifecycle.

A kind's provider (``model_resource._ModelResourceProvider``) is this class with two attributes: its
:class:`~.schema.Schema` and its ``check``. Each method is the same four beats: read the plan (the engine's
property bags), bail on failures (a check's verdict), call the shared lifecycle once (:mod:`.lifecycle`), write
the state (this face's result types). Providers hold no state: :meth:`configure` records the stack config in
:mod:`..config`, never on ``self``, and ``__getstate__`` is empty, so the pickled provider in the state is a bare
class reference (no key, the same bytes on every run, no spurious ``~__provider`` diff).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

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
from . import lifecycle, sdk_seams
from .inputs import Failure
from .schema import Schema


class KindProvider(ResourceProvider):
    """The dynamic provider of one kind: its :attr:`schema` and its :attr:`judge` (what ``check`` says)."""

    schema: ClassVar[Schema]
    judge: ClassVar[Callable[[Mapping[str, Any], Mapping[str, Any]], tuple[dict[str, Any], list[Failure]]]]

    def configure(self, req: ConfigureRequest) -> None:
        config.configure(req.config)
        sdk_seams.install()  # in the provider server only

    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        inputs, failures = type(self).judge(olds, news)
        return CheckResult(inputs, [CheckFailure(f.property, f.reason) for f in failures])

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        found = lifecycle.diff(self.schema, olds, news)
        return DiffResult(
            changes=found.changes,
            replaces=found.replaces,
            stables=[],
            delete_before_replace=found.delete_before_replace,
        )

    def create(self, props: dict[str, Any]) -> CreateResult:
        made = lifecycle.create(self.schema, props)
        return CreateResult(made.id, made.outputs)

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        found = lifecycle.read(self.schema, id_, props)
        return (
            ReadResult("", {}) if found is None else ReadResult(found.id, found.outputs, inputs=found.inputs)
        )

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(lifecycle.update(self.schema, id_, olds, news))

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        lifecycle.delete(self.schema, id_, props)

    def __getstate__(self) -> dict[str, Any]:
        return {}

    def __setstate__(self, state: dict[str, Any]) -> None:
        pass


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
