"""A tiny dynamic provider for testing the stand-in engine itself (harness/engine.py).

It lives in an importable module, so its `__provider` blob is pickled by reference, exactly like the real
providers. Its "cloud" is a JSON file named by $DUMMY_PROVIDER_STATE, shared by the provider server (a
subprocess) and the test, which can inspect it or change it out of band (`mark_gone`).

Resource `Thing` (`pulumi-python:dynamic/dummy:Thing`), inputs:
  label (str, replaces), parent_id (str, replaces), size (whole number >= 0, updates in place),
  note (str, updates in place), replace_first (bool: ask the engine to delete before replacing),
  fail ("create" | "update" | "delete" | "read": that operation raises).
Outputs: the inputs plus `serial` (bumped by every create/update) and `greeting` (config `dummy:greeting`).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

import pulumi
from pulumi.dynamic import (
    CheckFailure,
    CheckResult,
    CreateResult,
    DiffResult,
    ReadResult,
    ResourceProvider,
    UpdateResult,
)
from pulumi.output import Unknown

STATE_ENV = "DUMMY_PROVIDER_STATE"
THING_TYPE = "pulumi-python:dynamic/dummy:Thing"
ECHO_TYPE = "pulumi-python:dynamic/dummy:Echo"

INPUT_KEYS = ("label", "parent_id", "size", "note", "replace_first", "fail")
REPLACE_KEYS = ("label", "parent_id")

_LOCK = threading.Lock()


# ------------------------------------------------------------------------------------------------- the "cloud"


def _store_path() -> Path:
    return Path(os.environ[STATE_ENV])


def load_store(path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    path = Path(path) if path else _store_path()
    if not path.exists() or not path.read_text():
        return {"objects": {}, "log": [], "serial": 0}
    return json.loads(path.read_text())


def _save_store(store: dict[str, Any], path: Path) -> None:
    tmp = path.with_name(path.name + f".{uuid.uuid4().hex}.tmp")
    tmp.write_text(json.dumps(store, indent=1, sort_keys=True))
    tmp.replace(path)


def mutate_store(change, path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    path = Path(path) if path else _store_path()
    with _LOCK:
        store = load_store(path)
        change(store)
        _save_store(store, path)
        return store


def reset_store(path: str | os.PathLike[str]) -> None:
    _save_store({"objects": {}, "log": [], "serial": 0}, Path(path))


def mark_gone(path: str | os.PathLike[str], object_id: str) -> None:
    """Out-of-band deletion: the next Read reports the object gone."""
    mutate_store(lambda store: store["objects"][object_id].update(gone=True), path)


# ------------------------------------------------------------------------------------------------- provider


def _changed(old: Any, new: Any) -> bool:
    return isinstance(new, Unknown) or old != new


def _inputs(props: dict[str, Any]) -> dict[str, Any]:
    return {k: props[k] for k in INPUT_KEYS if k in props}


class DummyProvider(ResourceProvider):
    """Records every operation in the store's log as [op, id, label]."""

    def __init__(self, flavour: str = "plain") -> None:
        # Plain data only: the instance is pickled into state. A different flavour gives a different blob, hence a
        # separately configured provider instance in the server.
        self.flavour = flavour
        self.greeting: str | None = None

    def configure(self, req) -> None:
        self.greeting = req.config.get("dummy:greeting")

    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        inputs = dict(news)
        failures = []
        size = news.get("size", 1)
        if not isinstance(size, Unknown):
            if isinstance(size, bool) or not isinstance(size, (int, float)) or size < 0 or size != int(size):
                failures.append(CheckFailure("size", f"size must be a whole number >= 0, got {size!r}"))
            else:
                inputs["size"] = int(size)  # numbers arrive as floats
        return CheckResult(inputs, failures)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        changed = [k for k in INPUT_KEYS if _changed(olds.get(k), news.get(k))]
        replaces = [k for k in REPLACE_KEYS if k in changed]
        return DiffResult(
            changes=bool(changed), replaces=replaces, delete_before_replace=bool(news.get("replace_first"))
        )

    def create(self, props: dict[str, Any]) -> CreateResult:
        self._maybe_fail("create", props)
        object_id = f"thing-{uuid.uuid4().hex[:10]}"
        inputs = _inputs(props)

        def change(store):
            store["serial"] += 1
            store["objects"][object_id] = {"inputs": inputs, "serial": store["serial"], "gone": False}
            store["log"].append(["create", object_id, inputs.get("label")])

        store = mutate_store(change)
        print(f"dummy: created {object_id}", file=sys.stderr, flush=True)
        return CreateResult(object_id, self._outs(inputs, store["objects"][object_id]["serial"]))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        self._maybe_fail("read", props)
        obj = load_store()["objects"].get(id_)
        if obj is None or obj["gone"]:
            return ReadResult(None, {})
        return ReadResult(id_, self._outs(obj["inputs"], obj["serial"]), inputs=dict(obj["inputs"]))

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        self._maybe_fail("update", news)
        inputs = _inputs(news)

        def change(store):
            store["serial"] += 1
            store["objects"][id_].update(inputs=inputs, serial=store["serial"])
            store["log"].append(["update", id_, inputs.get("label")])

        store = mutate_store(change)
        return UpdateResult(self._outs(inputs, store["objects"][id_]["serial"]))

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        self._maybe_fail("delete", props)

        def change(store):
            store["objects"].pop(id_, None)
            store["log"].append(["delete", id_, props.get("label")])

        mutate_store(change)

    def _outs(self, inputs: dict[str, Any], serial: int) -> dict[str, Any]:
        outs = {**inputs, "serial": serial}
        if self.greeting is not None:
            outs["greeting"] = self.greeting
        return outs

    @staticmethod
    def _maybe_fail(op: str, props: dict[str, Any]) -> None:
        if props.get("fail") == op:
            raise RuntimeError(f"dummy {op} failed on purpose")


class EchoProvider(ResourceProvider):
    """Keeps the SDK's default `diff` (DIFF_UNKNOWN), so the engine must compare inputs itself."""

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(f"echo-{uuid.uuid4().hex[:10]}", dict(props))

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(dict(news))


# ------------------------------------------------------------------------------------------------- resources


class Thing(pulumi.dynamic.Resource, module="dummy", name="Thing"):
    label: pulumi.Output[str]
    parent_id: pulumi.Output[str | None]
    size: pulumi.Output[int]
    note: pulumi.Output[str | None]
    serial: pulumi.Output[int]
    greeting: pulumi.Output[str | None]

    def __init__(
        self,
        resource_name: str,
        *,
        label: pulumi.Input[str],
        size: pulumi.Input[int] = 1,
        note: pulumi.Input[str] | None = None,
        parent_id: pulumi.Input[str] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        props = {
            "label": label,
            "size": size,
            "note": note,
            "parent_id": parent_id,
            "serial": None,
            "greeting": None,
        }
        super().__init__(DummyProvider(), resource_name, props, opts)


class Echo(pulumi.dynamic.Resource, module="dummy", name="Echo"):
    value: pulumi.Output[str]

    def __init__(self, resource_name: str, value: pulumi.Input[str], opts=None) -> None:
        super().__init__(EchoProvider(), resource_name, {"value": value}, opts)
