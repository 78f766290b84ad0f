"""Run Pulumi programs under `pulumi.runtime.set_mocks`, optionally backed by the stand-in engine.

* `run_main(program_dir, mocks, ...)` runs `<program_dir>/__main__.py` as the Pulumi language host would (under
  set_mocks, with stack config) and returns its `pulumi.export`s. Works with any `pulumi.runtime.Mocks`.
* `EngineBackedMocks(engine)` hands every dynamic-resource registration the program makes to the real provider,
  served by the SDK's dynamic-provider server and driven by `StandInEngine` (Check -> Create on the first run,
  Check -> Diff -> Update / replace on later ones), and gives the program the real ids and outputs.
* `run_program(program_dir, engine, ...)` = one `pulumi up` (or preview) of a program through that mock; run it
  again for the next `up`, change `config` between runs, then `engine.destroy()`.

Pulumi docs: "Unit testing Pulumi programs" (set_mocks); pulumi-dynamic-providers.md §3.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import copy
import dataclasses
import json
import runpy
import sys
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pulumi
from pulumi.output import Unknown
from pulumi.runtime import rpc, settings
from pulumi.runtime.mocks import MockCallArgs, MockMonitor, MockResourceArgs

from .engine import UNKNOWN, Deployment, Registered, StandInEngine

DYNAMIC_PREFIX = "pulumi-python:dynamic"
STACK_TYPE = "pulumi:pulumi:Stack"

_TLS = threading.local()


class RecordingMonitor(MockMonitor):
    """MockMonitor that lets the mocks see the whole request: dependencies, property dependencies, options."""

    def RegisterResource(self, request):
        _TLS.current = ("register", request, self.make_urn(request.parent, request.type, request.name))
        try:
            return super().RegisterResource(request)
        finally:
            _TLS.current = None

    def ReadResource(self, request):
        _TLS.current = ("read", request, self.make_urn(request.parent, request.type, request.name))
        try:
            return super().ReadResource(request)
        finally:
            _TLS.current = None


def _unknowns_to_sentinel(value: Any) -> Any:
    if isinstance(value, Unknown):
        return UNKNOWN
    if isinstance(value, dict):
        return {k: _unknowns_to_sentinel(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_unknowns_to_sentinel(v) for v in value]
    return value


class EngineBackedMocks(pulumi.runtime.Mocks):
    """Mocks whose dynamic resources are real: registrations go through `StandInEngine` to the provider server.

    Non-dynamic custom resources get a fake id (`<name>-id`) and their inputs as outputs; components get nothing.
    `registrations` keeps every MockResourceArgs; `results` maps engine URN -> `Registered`; `errors` keeps the
    failures raised inside registrations (they are re-raised by `run_program`).
    """

    def __init__(self, engine: StandInEngine, *, preview: bool = False, deployment: Deployment | None = None):
        self.engine = engine
        self.preview = preview
        self.deployment = deployment
        self.registrations: list[MockResourceArgs] = []
        self.results: dict[str, Registered] = {}
        self.errors: list[BaseException] = []
        self._engine_urns: dict[str, str] = {}  # mock monitor URN -> engine URN
        self._lock = threading.Lock()

    def call(self, args: MockCallArgs):
        return {}

    def _engine_urn(self, request, typ: str, name: str) -> str:
        parent = getattr(request, "parent", "") if request is not None else ""
        parent_urn = self._engine_urns.get(parent, parent)
        if parent_urn and parent_urn.split("::")[2].split("$")[-1] != STACK_TYPE:
            return self.engine.urn(typ, name, parent_type=parent_urn.split("::")[2])
        return self.engine.urn(typ, name)

    def _translate(self, urns: Iterable[str]) -> list[str]:
        return [self._engine_urns.get(u, u) for u in urns]

    def new_resource(self, args: MockResourceArgs):
        kind, request, mock_urn = getattr(_TLS, "current", None) or ("register", None, None)
        with self._lock:
            self.registrations.append(args)
            urn = self._engine_urn(request, args.typ, args.name)
            if mock_urn:
                self._engine_urns[mock_urn] = urn
        if not args.typ.startswith(DYNAMIC_PREFIX):
            if kind == "read" or args.custom:
                return args.resource_id or f"{args.name}-id", dict(args.inputs)
            return "", {}
        if self.deployment is None:
            raise RuntimeError("EngineBackedMocks has no deployment: use run_program() or set .deployment")
        try:
            inputs = dict(args.inputs)
            if "__provider" in inputs:
                inputs["__provider"] = rpc.unwrap_rpc_secret(inputs["__provider"])
            inputs = _unknowns_to_sentinel(inputs)
            if kind == "read":
                registered = self.deployment.read(
                    args.typ, args.name, args.resource_id or "", inputs, urn=urn
                )
            else:
                property_dependencies = {}
                dependencies: list[str] = []
                delete_before_replace = None
                if request is not None:
                    property_dependencies = {
                        key: self._translate(deps.urns) for key, deps in request.propertyDependencies.items()
                    }
                    dependencies = self._translate(request.dependencies)
                    if request.deleteBeforeReplaceDefined:
                        delete_before_replace = request.deleteBeforeReplace
                registered = self.deployment.register(
                    args.typ,
                    args.name,
                    inputs,
                    dependencies=dependencies,
                    property_dependencies=property_dependencies,
                    delete_before_replace=delete_before_replace,
                    urn=urn,
                )
        except BaseException as exc:
            with self._lock:
                self.errors.append(exc)
            raise
        with self._lock:
            self.results[registered.urn] = registered
        # The mock monitor serializes this state back to the program: secrets stay wrapped (secret outputs),
        # the UNKNOWN sentinel becomes an unknown in preview, an empty id is an unknown id.
        return registered.id, copy.deepcopy(registered.outputs)


# ------------------------------------------------------------------------------------------------- running programs


@dataclasses.dataclass
class ProgramRun:
    """The exports (unknown ones are UNKNOWN), which were secret, and what the engine did."""

    exports: dict[str, Any]
    secret_exports: set[str]
    steps: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    resources: dict[str, Registered] = dataclasses.field(default_factory=dict)
    registrations: list[MockResourceArgs] = dataclasses.field(default_factory=list)

    def ops(self, name: str) -> list[str]:
        return [op for op, n in self.steps if n == name]


def _full_config(config: Mapping[str, Any] | None, project: str) -> dict[str, str]:
    result = {}
    for key, value in (config or {}).items():
        full = key if ":" in key else f"{project}:{key}"
        result[full] = value if isinstance(value, str) else json.dumps(value)
    return result


@contextlib.contextmanager
def _program_path(program_dir: Path):
    """sys.path[0] = the program directory while it runs; its local modules are forgotten afterwards."""
    before = set(sys.modules)
    sys.path.insert(0, str(program_dir))
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(str(program_dir))
        for name in set(sys.modules) - before:
            module_file = getattr(sys.modules.get(name), "__file__", None) or ""
            if module_file.startswith(str(program_dir)):
                del sys.modules[name]


async def _collect(outputs: Mapping[str, Any], exports: dict[str, Any], secrets: set[str]) -> None:
    for key, value in outputs.items():
        output = pulumi.Output.from_input(value)
        data = await output.future(with_unknowns=True)
        exports[key] = UNKNOWN if not await output.is_known() else _unknowns_to_sentinel(data)
        if await output.is_secret():
            secrets.add(key)


def run_main(
    program_dir: str | Path,
    mocks: pulumi.runtime.Mocks,
    *,
    project: str = "test",
    stack: str = "dev",
    preview: bool = False,
    config: Mapping[str, Any] | None = None,
    secret_keys: Iterable[str] = (),
) -> tuple[dict[str, Any], set[str]]:
    """Run `<program_dir>/__main__.py` under set_mocks with that stack config; return (exports, secret names).

    Config keys without a namespace belong to the project. A fresh root stack is created for every run.
    """
    program_dir = Path(program_dir).resolve()
    settings.ROOT.set(None)
    pulumi.runtime.set_mocks(
        mocks, project=project, stack=stack, preview=preview, monitor=RecordingMonitor(mocks)
    )
    # The SDK makes its (blocking) RegisterResource calls in the event loop's default executor. The CLI's exec
    # shim sizes it to 4 x the engine's parallelism; asyncio's default (cpu + 4 threads: 6 here) would run at
    # most 6 creates at once, which the real engine does not.
    executor = concurrent.futures.ThreadPoolExecutor(max_workers=64)
    asyncio.get_event_loop().set_default_executor(executor)
    full = _full_config(config, project)
    pulumi.runtime.set_all_config(full, [k if ":" in k else f"{project}:{k}" for k in secret_keys])
    exports: dict[str, Any] = {}
    secrets: set[str] = set()

    @pulumi.runtime.test
    def run():
        with _program_path(program_dir):
            runpy.run_path(str(program_dir / "__main__.py"), run_name="__main__")
        root = settings.get_root_resource()
        return _collect(dict(getattr(root, "outputs", {})), exports, secrets)

    loop = asyncio.get_event_loop()
    loop.set_exception_handler(_quiet_about_the_engines_own_failures)
    try:
        run()
    finally:
        executor.shutdown(wait=True)  # as the exec shim does when the program ends
        # The loop outlives this program (pytest runs later tests in it): leave it a default executor that runs.
        asyncio.get_event_loop().set_default_executor(concurrent.futures.ThreadPoolExecutor())
    return exports, secrets


def _quiet_about_the_engines_own_failures(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The loop's handler of errors nobody awaited: once one registration fails (a provider killed, a check that
    fails), the SDK leaves its other registrations' futures failed and unawaited, and asyncio would print each
    one's traceback when it is collected, long after the test that made it (hundreds of lines per run). The
    program's failure is raised, and the test judges it; anything else still goes to the default handler."""
    from .engine import CheckFailedError, ProviderRpcError

    failed = context.get("exception")
    if context.get("message") == "Future exception was never retrieved" and isinstance(
        failed, (ProviderRpcError, CheckFailedError)
    ):
        return
    loop.default_exception_handler(context)


def run_program(
    program_dir: str | Path,
    engine: StandInEngine,
    *,
    config: Mapping[str, Any] | None = None,
    secret_keys: Iterable[str] = (),
    preview: bool = False,
    refresh: bool = False,
) -> ProgramRun:
    """One `pulumi up` (`preview=True`: `pulumi preview`) of the program through the stand-in engine.

    `config` is the whole stack config: the program sees it (pulumi.Config) and, as the engine does, the
    provider gets it in Configure. None leaves the provider's configuration as it is. `refresh=True` refreshes
    first (Pulumi.yaml `options.refresh: always`; ignored in preview, where a refresh would not be persisted).
    """
    secret_keys = list(secret_keys)
    if config is not None:
        engine.configure(config, secret_keys)
    if refresh and not preview:
        engine.refresh()
    mocks = EngineBackedMocks(engine, preview=preview)
    deployment = engine.deployment(preview=preview)
    mocks.deployment = deployment
    try:
        exports, secrets = run_main(
            program_dir,
            mocks,
            project=engine.project,
            stack=engine.stack,
            preview=preview,
            config=config,
            secret_keys=secret_keys,
        )
        if mocks.errors:
            raise mocks.errors[0]
    except BaseException as exc:
        deployment.__exit__(type(exc), exc, exc.__traceback__)
        if mocks.errors and exc is not mocks.errors[0]:
            raise mocks.errors[0] from exc
        raise
    deployment.finish()
    return ProgramRun(
        exports=exports,
        secret_exports=secrets,
        steps=list(deployment.result.steps),
        resources=dict(mocks.results),
        registrations=list(mocks.registrations),
    )


__all__ = ["EngineBackedMocks", "ProgramRun", "RecordingMonitor", "run_main", "run_program"]
