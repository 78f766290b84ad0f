"""A stand-in for the Pulumi engine, driving the Pulumi SDK's own dynamic-provider server over gRPC.

The Pulumi CLI is not needed: `ProviderProcess` starts the very server the engine starts for Python dynamic
resources (`python -u -m pulumi.dynamic`, the `pulumi-resource-pulumi-python` plugin) with the engine's cwd and
environment, and `StandInEngine` sends it the real `provider_pb2` request messages the way the engine does, then
keeps a state file's worth of `{urn: {"type", "id", "inputs", "outputs"}}` in memory.

Reference: ../shared/docs/pulumi-dynamic-providers.md §1.3-1.10 and §2 (engine source citations are there).

API (property values are plain JSON-like data; `UNKNOWN` marks an unknown, `secret(v)` a secret):

    with ProviderProcess(ROOT, env={"TOGETHER_API_KEY": None}) as process:   # .stub .stderr_text() .output()
        engine = StandInEngine(process, project="test", stack="dev")
        engine.configure({"together:apiKey": key}, secret_keys=["together:apiKey"])
        engine.up([(type_token, name, {"__provider": provider_blob(MyProvider()), ...}), ...])  # preview=True
        with engine.deployment() as up:           # registrations one at a time, e.g. to wire ids
            gpu = up.register(type_token, "gpu", inputs)                       # -> Registered(urn, op, id, outputs)
            up.register(..., property_dependencies={"model_resources_id": [gpu.urn]})
        engine.refresh(); engine.destroy()        # -> OperationResult(steps=[(op, name)], resources)
        engine.state, engine.calls, engine.rpcs("Create", "Update"), engine.resource("gpu")
        engine.check/diff/create/read/update/delete(...)                     # one raw RPC each

Failures raise `CheckFailedError` (`.failures`), `ProviderRpcError` (`.rpc`, `.code`, `.details` = the
server's traceback) or `EngineError`. Programs: see mocks.py (`EngineBackedMocks`, `run_program`).

The plugin face: `PluginProcess` starts the provider plugin (`python -m pulumi_together_rl.plugin <engine>`) with
the engine's `Log` service at that address (`process.log`); the same `StandInEngine` on it sends Configure only
the plugin's own config namespace (`together-rl:apiKey` -> `apiKey`) and, as the plugin answers that it accepts
secrets and supports previews, keeps secrets in every RPC and asks Create / Update for the preview's state.

Interrupts: `ProviderProcess(..., under_engine=True)` runs the provider as the child of a process in the engine's
place; `process.kill_engine(reap=False)` leaves that process a zombie, `process.signal(SIGINT)` signals the
provider itself, `process.wait_exited()` waits for it to end. harness/stack.py builds stacks and interrupts on it.
`ProviderUnderEngine` (the fault campaign's) is that, with the stand-in's RPCs ending when the engine is killed
(a dead engine reads no answer) and a `stop()` that waits for the provider to see it and exit on its own
(`.exited_alone`, `.engine_state_at_exit`) before it reaps the engine.

What is emulated (engine source: sdk/go/common/resource/plugin/provider_plugin.go, pkg/resource/deploy/
step_generator.go, step.go, target.go, pkg/host/host.go):

* plugin start: cwd = project dir, env + `PULUMI_PROJECT`, `PULUMI_CONFIG` (the plugin's own namespace: `{}`),
  `PULUMI_RUNTIME_<OPTION>`; port read from the first stdout line; then Handshake (UNIMPLEMENTED -> legacy
  protocol), GetPluginInfo, CheckConfig (UNIMPLEMENTED -> config passes through), Configure with the whole stack
  config, namespaced keys, secrets wrapped (target.go `isDynamicProvider`) plus the deprecated `variables` map.
* marshalling: the server answers `acceptSecrets=False`, so secrets are stripped before every resource RPC and
  re-marked afterwards on same-named properties (`annotateSecrets`, recursive into objects); unknowns travel as
  the sentinel string only where the engine allows them (Check/Diff during preview); `None` is dropped from
  property maps.
* `up`: new resource -> Check(olds={}) -> Create; existing -> Check(olds=stored inputs) -> Diff(olds=stored
  OUTPUTS, news=checked inputs, old_inputs) -> DIFF_UNKNOWN: compare old and new inputs (unknown = change) ->
  none: same step (new inputs recorded, OLD outputs kept) / replaces: Create new then delete the old one at the
  end of the deployment, or, with delete-before-replace (provider's answer, or the resource option), first
  delete every dependent that a changed dependency would replace (the provider's Diff with the affected
  properties unknown, as `calculateDependentReplacements`), then the resource, then Create / otherwise Update.
  Preview: Check and Diff only, the checked inputs are the predicted outputs, nothing is written.
  Resources no longer registered (and replaced ones) are deleted at the end in reverse dependency order.
* `refresh`: Read(id, properties=outputs, inputs=inputs); an empty id drops the resource; returned inputs replace
  the stored ones. `destroy`: Delete(properties=outputs, old_inputs=inputs) in reverse dependency order.
* `read_resource` (`Resource.get` / `opts.id`): Read(properties=props, inputs=props), kept as external.

Not emulated: parallel step execution (registrations are processed as they arrive; concurrent ones may overlap
but there is no step-level scheduler), ignoreChanges / replaceOnChanges / additionalSecretOutputs / aliases /
protect / retainOnDelete, customTimeouts (the dynamic server ignores them anyway), partial-failure
(`initErrors`) handling, plans, import, explicit provider resources (only each package's default provider), and
a fresh plugin process per command (harness/stack.py starts one per command): one `ProviderProcess` may serve
several `up`s, so `configure()` reaches only providers (blobs) the process has not already unpickled (the SDK
caches them per process).
"""

from __future__ import annotations

import base64
import contextlib
import copy
import dataclasses
import hashlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import struct_pb2
from pulumi.output import Unknown
from pulumi.runtime import rpc
from pulumi.runtime._grpc_settings import _GRPC_CHANNEL_OPTIONS
from pulumi.runtime.proto import engine_pb2_grpc, provider_pb2, provider_pb2_grpc

ROOT = Path(__file__).resolve().parents[1]

# The marker a registration input carries for a value that is not known yet (it depends on another resource's
# output during a preview). It is the SDK's and the engine's wire sentinel.
UNKNOWN: str = rpc.UNKNOWN
SECRET_SIG_KEY: str = rpc._special_sig_key
SECRET_SIG: str = rpc._special_secret_sig

DIFF_UNKNOWN = provider_pb2.DiffResponse.DIFF_UNKNOWN
DIFF_NONE = provider_pb2.DiffResponse.DIFF_NONE
DIFF_SOME = provider_pb2.DiffResponse.DIFF_SOME

DEFAULT_PROVIDER_TYPE = "pulumi:providers:pulumi-python"


# ------------------------------------------------------------------------------------------------- errors


def sigint_as_the_engine_leaves_it() -> None:
    """Give this process a SIGINT handler if it was started with SIGINT ignored (call from the main thread).

    A shell without job control (a CI step, ``make test &``) starts its background jobs with SIGINT ignored, and an
    ignored signal stays ignored across ``exec``: the provider processes, CLIs and ``make demo`` the suite starts
    would then ignore the SIGINT the tests send, and a Python provider never sees its ``KeyboardInterrupt``. The
    Pulumi CLI handles SIGINT itself (Go's ``signal.Notify``), so the plugins it starts have SIGINT at its default,
    as a terminal's processes do; a handled signal is reset to the default in a child, so handling it here gives the
    suite's children what the engine and a terminal give theirs."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


class EngineError(Exception):
    """Something the real engine would refuse (duplicate URN, empty id from create, unknowns outside preview)."""


class ProviderRpcError(EngineError):
    """A provider RPC failed; `details` is the server's message (since pulumi 3.260 the full Python traceback)."""

    def __init__(self, rpc_name: str, resource: str, code: grpc.StatusCode, details: str):
        self.rpc = rpc_name
        self.resource = resource
        self.code = code
        self.details = details or ""
        super().__init__(f"{rpc_name}({resource}) failed with {code.name}:\n{self.details}")


class CheckFailedError(EngineError):
    """Check returned failures; `failures` is a list of (property, reason)."""

    def __init__(self, urn: str, failures: list[tuple[str, str]]):
        self.urn = urn
        self.failures = failures
        lines = "\n".join(f"  {prop or '<resource>'}: {reason}" for prop, reason in failures)
        super().__init__(f"Check of {urn} failed:\n{lines}")


# ------------------------------------------------------------------------------------------------- provider process


class ProviderProcess:
    """`python -u -m pulumi.dynamic 127.0.0.1:0` in a subprocess, started the way the engine starts the plugin.

    `env` entries are layered over this process's environment (the engine passes its own environment on); a value
    of None removes the variable (e.g. `{"TOGETHER_API_KEY": None}`). `runtime_options` become
    `PULUMI_RUNTIME_<OPTION>` like Pulumi.yaml's `runtime.options`. PYTHONPATH gets `provider/` and the repository
    root prepended so the package and `harness.*` modules unpickle by reference.

    `under_engine=True` puts a process in the engine's place in the process tree: the provider is the child of a
    small `python` process (:data:`ENGINE_PARENT`) instead of this one, so that a test can kill its engine
    (:meth:`kill_engine`, reaped or left a zombie) while it goes on talking to the provider. `pid` is the
    provider's own pid either way, `signal()` sends it a signal, `wait_exited()` waits for it to end.
    """

    package: str | None = None
    """The package whose config the engine sends in Configure: None for the dynamic-provider server (it gets the
    whole stack config), a package name for a provider plugin (its own namespace only)."""

    def command(self, python: str) -> list[str]:
        """How the engine starts this provider: `pulumi-resource-pulumi-python` runs the SDK's server."""
        return [python, "-u", "-m", "pulumi.dynamic", "127.0.0.1:0"]

    def __init__(
        self,
        cwd: str | os.PathLike[str] = ROOT,
        env: Mapping[str, str | None] | None = None,
        *,
        project: str = "test",
        runtime_options: Mapping[str, Any] | None = None,
        python: str = sys.executable,
        start_timeout: float = 60.0,
        under_engine: bool = False,
    ):
        self.cwd = Path(cwd)
        self.project = project
        self.env = self._build_env(env, runtime_options)
        self.under_engine = under_engine
        self.args = self.command(python)
        if under_engine:
            self.args = [python, "-c", ENGINE_PARENT, *self.args]
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self._pid: int | None = None
        self.port: int | None = None
        self.channel: grpc.Channel | None = None
        self.stub: provider_pb2_grpc.ResourceProviderStub | None = None
        self._stdout: list[str] = []
        self._stderr: list[str] = []
        self._port_lines: queue.Queue[str | None] = queue.Queue()
        self._threads: list[threading.Thread] = []
        self.start()

    def _build_env(self, overrides, runtime_options) -> dict[str, str]:
        env = dict(os.environ)
        pythonpath = [str(ROOT / "provider"), str(ROOT)]
        if env.get("PYTHONPATH"):
            pythonpath.append(env["PYTHONPATH"])
        env["PYTHONPATH"] = os.pathsep.join(pythonpath)
        for key, value in (runtime_options or {}).items():
            env[f"PULUMI_RUNTIME_{key.upper()}"] = str(value)
        env["PULUMI_PROJECT"] = self.project
        env["PULUMI_CONFIG"] = "{}"  # host.go: only config in the plugin's own namespace (pulumi-python:*)
        for key, value in (overrides or {}).items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        return env

    def start(self) -> None:
        self.proc = subprocess.Popen(
            self.args,
            cwd=self.cwd,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self._threads = [
            threading.Thread(target=self._drain_stdout, name="provider-stdout", daemon=True),
            threading.Thread(target=self._drain, args=(self.proc.stderr, self._stderr), daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        try:
            line = self._port_lines.get(timeout=self.start_timeout)
        except queue.Empty:
            self.stop()
            raise EngineError(f"provider did not announce a port within {self.start_timeout} s") from None
        if not line or not line.strip().isdigit():
            self.stop()
            raise EngineError(
                f"provider did not announce a port (first line {line!r}):\n{self.stderr_text()}"
            )
        self.port = int(line)
        self._pid = self.proc.pid if not self.under_engine else _only_child(self.proc.pid)
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.port}", options=_GRPC_CHANNEL_OPTIONS)
        grpc.channel_ready_future(self.channel).result(timeout=self.start_timeout)
        self.stub = provider_pb2_grpc.ResourceProviderStub(self.channel)

    def _drain_stdout(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        first = True
        for raw in iter(self.proc.stdout.readline, b""):
            text = raw.decode("utf-8", "replace")
            if first:
                first = False
                self._port_lines.put(text)
            else:
                self._stdout.append(text)
        if first:
            self._port_lines.put(None)

    @staticmethod
    def _drain(stream, sink: list[str]) -> None:
        for raw in iter(stream.readline, b""):
            sink.append(raw.decode("utf-8", "replace"))

    def stdout_text(self) -> str:
        """What the provider printed on stdout after the port line."""
        return "".join(self._stdout)

    def stderr_text(self) -> str:
        """What the provider printed on stderr (progress lines, tracebacks)."""
        return "".join(self._stderr)

    def output(self) -> str:
        return self.stdout_text() + self.stderr_text()

    @property
    def pid(self) -> int:
        """The provider's own process (under an engine process, that process's child)."""
        if self._pid is None:
            raise EngineError("the provider process has not started")
        return self._pid

    @property
    def provider_pid(self) -> int | None:
        """The provider's pid, None before it started (what its create journal entries record)."""
        return self._pid

    @property
    def engine_pid(self) -> int | None:
        """The process in the engine's place (`under_engine`), else None (this process is its engine)."""
        return self.proc.pid if self.under_engine and self.proc is not None else None

    @property
    def alive(self) -> bool:
        if self.proc is None:
            return False
        if not self.under_engine:
            return self.proc.poll() is None
        # Never poll the engine process here: a test may be keeping it an unreaped zombie on purpose.
        return self._pid is not None and _running(self._pid)

    def signal(self, number: int) -> None:
        """Send the provider process (never its engine) the signal ``number``."""
        os.kill(self.pid, number)

    def kill_engine(self, *, reap: bool = True) -> None:
        """SIGKILL the process in the engine's place; ``reap=False`` leaves it a zombie (a parent that never
        waits for its children, as some CI supervisors), until :meth:`stop`."""
        if not self.under_engine or self.proc is None:
            raise EngineError("kill_engine needs a provider started with under_engine=True")
        self.proc.kill()
        if reap:
            self.proc.wait(timeout=10)

    def engine_is_zombie(self) -> bool:
        """Whether the engine process has ended and nobody has reaped it yet."""
        return self.engine_pid is not None and _state_of(self.engine_pid) == "Z"

    def wait_exited(self, timeout: float = 30.0) -> None:
        """Wait for the provider process to end (however it was ended); EngineError after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while self.alive:
            if time.monotonic() > deadline:
                raise EngineError(f"the provider process (pid {self._pid}) still runs after {timeout} s")
            time.sleep(0.02)

    def stop(self) -> None:
        if self.channel is not None:
            self.channel.close()
            self.channel = None
        if self.under_engine and self.alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGTERM)
            try:
                self.wait_exited(timeout=5)
            except EngineError:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, signal.SIGKILL)
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        for thread in self._threads:
            thread.join(timeout=2)

    def __enter__(self) -> ProviderProcess:
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()


ENGINE_PARENT = (
    "import subprocess, sys\n"
    "sys.exit(subprocess.call(sys.argv[1:]))  # the engine's place: the provider's parent, and nothing else\n"
)
"""The process a provider started `under_engine` runs under: it starts the provider (which writes to this
process's pipes directly) and waits for it, as the CLI does."""


def _state_of(pid: int) -> str | None:
    """The state letter of ``pid`` in /proc (``R``, ``S``, ``Z`` ...), None when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2 :].split()[0]


def _running(pid: int) -> bool:
    """Whether ``pid`` runs: it exists and has not ended (a zombie, whoever its parent is now, has)."""
    return _state_of(pid) not in (None, "Z", "X", "x")


def _only_child(pid: int) -> int:
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    if len(children) != 1:
        raise EngineError(f"the engine process {pid} should have one child, the provider: {children}")
    return int(children[0])


class EngineLog(engine_pb2_grpc.EngineServicer):
    """The engine's `Log` service, which a provider plugin writes its lines to: kept as (severity, urn, message,
    ephemeral), severity as the engine names it (`info`, `warning`, ...)."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str, str, bool]] = []
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), options=_GRPC_CHANNEL_OPTIONS)
        engine_pb2_grpc.add_EngineServicer_to_server(self, self._server)
        self.address = f"127.0.0.1:{self._server.add_insecure_port('127.0.0.1:0')}"
        self._server.start()

    def Log(self, request, context):
        from google.protobuf import empty_pb2
        from pulumi.runtime.proto import engine_pb2

        severity = engine_pb2.LogSeverity.Name(request.severity).lower()
        self.lines.append((severity, request.urn, request.message, request.ephemeral))
        return empty_pb2.Empty()

    def text(self) -> str:
        return "".join(f"{message}\n" for _severity, _urn, message, _ephemeral in self.lines)

    def stop(self) -> None:
        self._server.stop(0)


class PluginProcess(ProviderProcess):
    """The provider plugin (`python -m pulumi_together_rl.plugin <engine address>`), started as the engine starts
    a plugin, with the engine's `Log` service (:class:`EngineLog`, `.log`) at that address. The same API as
    :class:`ProviderProcess`; a :class:`StandInEngine` on it speaks the plugin protocol (its own config
    namespace, secrets and previews passed through, as the provider answers in Configure)."""

    package = "together-rl"

    def __init__(self, *args: Any, **kwargs: Any):
        self.log = EngineLog()
        super().__init__(*args, **kwargs)

    def command(self, python: str) -> list[str]:
        return [python, "-u", "-m", "pulumi_together_rl.plugin", self.log.address]

    def output(self) -> str:
        return super().output() + self.log.text()

    def stop(self) -> None:
        super().stop()
        self.log.stop()


class EngineKilled(grpc.RpcError):
    """An RPC of an engine that was killed: the engine reads no answer any more, whatever the provider sends."""

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.CANCELLED

    def details(self) -> str:
        return "the engine was killed (SIGKILL) before it got the answer"


class _EngineStub:
    """The provider stub as a killable engine holds it: once the engine is killed, no call starts and no answer
    is read, even one that arrives after the kill."""

    def __init__(self, stub: provider_pb2_grpc.ResourceProviderStub, process: ProviderUnderEngine):
        self._stub = stub
        self._process = process

    def __getattr__(self, method: str) -> Any:
        call = getattr(self._stub, method)

        def guarded(*args: Any, **kwargs: Any) -> Any:
            if self._process.engine_killed is not None:
                raise EngineKilled()
            try:
                answer = call(*args, **kwargs)
            except (grpc.RpcError, ValueError):  # ValueError: a call on the channel the kill closed
                if self._process.engine_killed is not None:
                    raise EngineKilled() from None
                raise
            if self._process.engine_killed is not None:
                raise EngineKilled()
            return answer

        return guarded


class ProviderUnderEngine(ProviderProcess):
    """A `ProviderProcess` under an engine process of its own (`under_engine`), for the fault campaign: the
    engine can die while the provider lives on, as when the `pulumi` CLI is killed.

    :meth:`kill` SIGKILLs the engine and never reaps it (a zombie, as a CI runner's supervisor that never waits
    leaves it), and the stand-in's RPCs end with it. :meth:`stop` then waits up to ``exit_timeout`` seconds for
    the provider to see that and exit on its own (``exited_alone``; after that it is SIGKILLed), notes whether
    the engine was still a zombie then (``engine_state_at_exit``), and only then reaps it. Without a kill,
    :meth:`stop` ends the provider and its engine as `ProviderProcess` does.
    """

    def __init__(self, *args: Any, exit_timeout: float = 60.0, **kwargs: Any):
        self.engine_killed: float | None = None
        """When (``time.time()``) the engine was killed, or None."""
        self.exit_timeout = exit_timeout
        self.exited_alone: bool | None = None
        self.engine_state_at_exit: str | None = None
        super().__init__(*args, under_engine=True, **kwargs)

    def start(self) -> None:
        super().start()
        self.stub = _EngineStub(self.stub, self)  # type: ignore[arg-type,assignment]

    @property
    def alive(self) -> bool:
        """Whether the engine runs (never polled once killed: polling would reap the zombie)."""
        return self.engine_killed is None and self.proc is not None and _running(self.proc.pid)

    def provider_running(self) -> bool:
        """Whether the provider process still runs (a zombie of it, not yet reaped by its new parent, does not)."""
        return self._pid is not None and _running(self._pid)

    def kill(self) -> bool:
        """SIGKILL the engine and leave it unreaped; whether it was killed (False: it had already ended)."""
        if self.engine_killed is not None or self.proc is None or _state_of(self.proc.pid) in (None, "Z"):
            return False
        self.engine_killed = time.time()
        self.kill_engine(reap=False)
        if self.channel is not None:
            self.channel.close()  # the calls in flight end: the engine that made them is gone
        return True

    def stop(self) -> None:
        if self.engine_killed is None:
            super().stop()
            return
        deadline = time.monotonic() + self.exit_timeout
        while self.provider_running() and time.monotonic() < deadline:
            time.sleep(0.05)
        self.exited_alone = not self.provider_running()
        assert self.proc is not None
        self.engine_state_at_exit = _state_of(self.proc.pid)
        if self.provider_running():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)  # reap the zombie: nothing is left behind
        self.channel = None
        for thread in self._threads:
            thread.join(timeout=2)


# ------------------------------------------------------------------------------------------------- the __provider blob


def provider_blob(provider: Any) -> str:
    """The `__provider` string exactly as `pulumi.dynamic.Resource.__init__` makes it (before secret-wrapping)."""
    from pulumi.dynamic.dynamic import serialize_provider
    from pulumi.runtime._serialization import _serialize

    blob, _contains_secrets = _serialize(True, serialize_provider, provider)
    return blob


def blob_bytes(blob: str) -> bytes:
    """The dill pickle inside a `__provider` string, for assertions (by reference, no credentials)."""
    return base64.b64decode(blob)


# ------------------------------------------------------------------------------------------------- property values


def is_secret(value: Any) -> bool:
    return isinstance(value, dict) and value.get(SECRET_SIG_KEY) == SECRET_SIG


def secret(value: Any) -> dict[str, Any]:
    """Mark a registration input (or config value) secret, as the SDK does on the wire."""
    return {SECRET_SIG_KEY: SECRET_SIG, "value": value}


def reveal(value: Any) -> Any:
    """`value` with every secret wrapper removed (what the provider sees)."""
    if is_secret(value):
        return reveal(value["value"])
    if isinstance(value, dict):
        return {k: reveal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [reveal(v) for v in value]
    return value


def contains_unknowns(value: Any) -> bool:
    if value == UNKNOWN:
        return True
    if isinstance(value, dict):
        return any(contains_unknowns(v) for v in value.values())
    if isinstance(value, list):
        return any(contains_unknowns(v) for v in value)
    return False


def _contains_secrets(value: Any) -> bool:
    if is_secret(value):
        return True
    if isinstance(value, dict):
        return any(_contains_secrets(v) for v in value.values())
    if isinstance(value, list):
        return any(_contains_secrets(v) for v in value)
    return False


def normalize(value: Any) -> Any:
    """A registration value in the engine's property model: JSON-like, None dropped from maps, unknown = UNKNOWN."""
    if isinstance(value, Unknown):
        return UNKNOWN
    if isinstance(value, Mapping):
        return {str(k): normalize(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [normalize(v) for v in value]
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    raise TypeError(f"unsupported property value {value!r} ({type(value).__name__})")


def _strip_secrets(value: Any) -> Any:
    return reveal(value)


def to_struct(
    props: Mapping[str, Any], *, keep_unknowns: bool, keep_secrets: bool = False, label: str = ""
) -> Any:
    """Marshal a property map as the engine does for a provider that does not accept secrets."""
    props = normalize(props)
    if not keep_secrets:
        props = _strip_secrets(props)
    if not keep_unknowns and contains_unknowns(props):
        raise EngineError(f"{label}: unknown values cannot be sent outside a preview: {props!r}")
    struct = struct_pb2.Struct()
    struct.update(props)
    return struct


def _from_value(value: struct_pb2.Value) -> Any:
    kind = value.WhichOneof("kind")
    if kind == "struct_value":
        return from_struct(value.struct_value)
    if kind == "list_value":
        return [_from_value(v) for v in value.list_value.values]
    if kind == "number_value":
        return value.number_value
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return value.bool_value
    return None


def from_struct(struct: struct_pb2.Struct | None) -> dict[str, Any]:
    """Unmarshal a property map (numbers are floats, as on the wire; nulls dropped; secrets stay wrapped)."""
    if struct is None:
        return {}
    out = {}
    for key, value in struct.fields.items():
        converted = _from_value(value)
        if converted is not None:
            out[key] = converted
    return out


def _is_object(value: Any) -> bool:
    return isinstance(value, dict) and not is_secret(value)


def annotate_secrets(outs: dict[str, Any], ins: Mapping[str, Any]) -> dict[str, Any]:
    """provider_plugin.go `annotateSecrets`: re-mark outputs whose same-named input contained a secret.

    Objects present on both sides are walked recursively; anything else becomes a secret as a whole.
    """
    result = dict(outs)
    for key, in_value in ins.items():
        if key not in result:
            continue
        out_value = result[key]
        if _is_object(out_value) and _is_object(in_value):
            result[key] = annotate_secrets(out_value, in_value)
        elif not is_secret(out_value) and _contains_secrets(in_value):
            result[key] = secret(out_value)
    return result


def _same_inputs(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """PropertyMap.Diff(...).AnyChanges() == False: unknowns always differ, secrets compare by value."""
    if contains_unknowns(new):
        return False
    return _strip_secrets(normalize(old)) == _strip_secrets(normalize(new))


# ------------------------------------------------------------------------------------------------- results


@dataclasses.dataclass
class CheckResult:
    inputs: dict[str, Any]
    failures: list[tuple[str, str]]


@dataclasses.dataclass
class DiffResult:
    changes: int
    replaces: list[str]
    delete_before_replace: bool
    stables: list[str]

    @property
    def change_name(self) -> str:
        return {DIFF_UNKNOWN: "DIFF_UNKNOWN", DIFF_NONE: "DIFF_NONE", DIFF_SOME: "DIFF_SOME"}[self.changes]


@dataclasses.dataclass
class ReadResult:
    id: str
    outputs: dict[str, Any]
    inputs: dict[str, Any] | None


@dataclasses.dataclass
class Registered:
    """What a registration resolved to: the program sees `id` (empty = unknown, in preview) and `outputs`."""

    urn: str
    op: str  # create | same | update | replace | read
    id: str
    outputs: dict[str, Any]


@dataclasses.dataclass
class Registration:
    type: str
    name: str
    inputs: Mapping[str, Any]
    dependencies: Sequence[str] = ()
    property_dependencies: Mapping[str, Sequence[str]] = dataclasses.field(default_factory=dict)
    delete_before_replace: bool | None = None  # the resource option; None = the provider decides
    urn: str | None = None  # only needed for parented resources (the type chain is part of the URN)


@dataclasses.dataclass
class OperationResult:
    """Steps of an up / refresh / destroy: (op, resource name) in the order they were decided."""

    steps: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    resources: dict[str, Registered] = dataclasses.field(default_factory=dict)

    def ops(self, name: str) -> list[str]:
        return [op for op, n in self.steps if n == name]


# ------------------------------------------------------------------------------------------------- the engine


def _name_of(urn: str) -> str:
    return urn.split("::")[-1]


class StandInEngine:
    """Drives a `ProviderProcess` the way the Pulumi engine drives the dynamic-provider plugin.

    `state` is `{urn: {"type", "id", "inputs", "outputs"}}` in dependency order; `calls` logs every RPC as
    `(rpc, resource name)` (the default provider's own RPCs use the name "default").
    """

    def __init__(
        self, process: ProviderProcess, project: str | None = None, stack: str = "dev", *, rpc_timeout=120.0
    ):
        self.process = process
        self.project = project or process.project
        self.stack = stack
        self.rpc_timeout = rpc_timeout
        self.state: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, str]] = []
        self.config: dict[str, str] = {}
        self.secret_keys: set[str] = set()
        package = process.package if process is not None else None  # a process set later (the campaign)
        self.provider_type = f"pulumi:providers:{package}" if package else DEFAULT_PROVIDER_TYPE
        self.provider_urn = self.urn(self.provider_type, "default")
        self.accepts_secrets = False  # what the provider answers in Configure
        self.supports_preview = False
        self.provider_id = str(uuid.uuid4())
        self._meta: dict[
            str, dict[str, Any]
        ] = {}  # urn -> {dependencies, property_dependencies, external, seq}
        self._pending_deletes: list[
            tuple[str, dict[str, Any], dict[str, Any]]
        ] = []  # replaced olds not yet gone
        self._seq = 0
        self._lock = threading.RLock()
        self._started = False
        self._configured = False

    # ---------------------------------------------------------------------------------------- plumbing

    def urn(self, type_: str, name: str, parent_type: str | None = None) -> str:
        qualified = f"{parent_type}${type_}" if parent_type else type_
        return f"urn:pulumi:{self.stack}::{self.project}::{qualified}::{name}"

    def rpcs(self, *names: str) -> list[tuple[str, str]]:
        """The logged calls of the given RPCs (all resource RPCs if none given)."""
        wanted = set(names) or {"Check", "Diff", "Create", "Read", "Update", "Delete"}
        return [call for call in self.calls if call[0] in wanted]

    def _call(self, method: str, name: str, request: Any, *, tolerate_unimplemented: bool = False) -> Any:
        with self._lock:
            self.calls.append((method, name))
        stub = self.process.stub
        if stub is None:
            raise EngineError("the provider process is not running")
        try:
            return getattr(stub, method)(request, timeout=self.rpc_timeout)
        except grpc.RpcError as exc:
            code = exc.code()
            if tolerate_unimplemented and code == grpc.StatusCode.UNIMPLEMENTED:
                return None
            details = exc.details() or ""
            if not self.process.alive:
                details += f"\n[the provider process has exited; its stderr:]\n{self.process.stderr_text()}"
            raise ProviderRpcError(method, name, code, details) from None

    def _start(self) -> None:
        if self._started:
            return
        self._started = True
        from google.protobuf import empty_pb2

        # The engine handshakes first; the Python server does not implement it, so the legacy protocol is used.
        self._call(
            "Handshake",
            "default",
            provider_pb2.ProviderHandshakeRequest(
                engine_address="127.0.0.1:0",
                root_directory=str(self.process.cwd),
                program_directory=str(self.process.cwd),
                configure_with_urn=True,
                supports_views=True,
            ),
            tolerate_unimplemented=True,
        )
        self._call("GetPluginInfo", "default", empty_pb2.Empty())

    def _ensure_configured(self) -> None:
        if not self._configured:
            self.configure({})

    # ---------------------------------------------------------------------------------------- Configure

    def configure(self, config: Mapping[str, Any] | None = None, secret_keys: Iterable[str] = ()) -> Any:
        """Send the stack config as the engine does (target.go GetPackageConfig): the whole of it to the dynamic
        provider, only the keys of its own namespace (without it) to a provider plugin.

        Keys without a namespace belong to the project (`gpus` -> `<project>:gpus`); values are strings (others are
        JSON-encoded, like structured config); `secret_keys` are sent wrapped as secrets.
        """
        self._start()
        package = self.process.package

        def full_key(key: str) -> str:
            return key if ":" in key else f"{self.project}:{key}"

        secrets = {full_key(k) for k in secret_keys}
        args: dict[str, Any] = {}
        variables: dict[str, str] = {}
        plain: dict[str, str] = {}
        for key, value in (config or {}).items():
            key = full_key(key)
            text = value if isinstance(value, str) else json.dumps(value)
            plain[key] = text
            namespace, _, name = key.partition(":")
            if package is None:
                args[key] = secret(text) if key in secrets else text
                variables[f"pulumi-python:config:{key}"] = text
            elif namespace == package:
                args[name] = secret(text) if key in secrets else text
                variables[f"{package}:config:{name}"] = text
        # The default provider's config first goes through CheckConfig (the dynamic server: UNIMPLEMENTED, passed
        # through unchanged); what it answers is what Configure gets.
        checked = self._call(
            "CheckConfig",
            "default",
            provider_pb2.CheckRequest(
                urn=self.provider_urn,
                name="default",
                type=self.provider_type,
                olds=struct_pb2.Struct(),
                news=to_struct(args, keep_unknowns=True, keep_secrets=True),
            ),
            tolerate_unimplemented=True,
        )
        if checked is not None and checked.failures:
            raise CheckFailedError(self.provider_urn, [(f.property, f.reason) for f in checked.failures])
        if checked is not None and checked.HasField("inputs"):
            args = from_struct(checked.inputs)
        response = self._call(
            "Configure",
            "default",
            provider_pb2.ConfigureRequest(
                variables=variables,
                args=to_struct(args, keep_unknowns=True, keep_secrets=True),
                acceptSecrets=True,
                acceptResources=True,
                sends_old_inputs=True,
                sends_old_inputs_to_delete=True,
                urn=self.provider_urn,
                name="default",
                type=self.provider_type,
                id=self.provider_id,
            ),
        )
        if package is None and (response.acceptSecrets or response.supportsPreview):
            raise EngineError(
                "the dynamic provider changed its protocol (acceptSecrets/supportsPreview): update the stand-in"
            )
        self.accepts_secrets = response.acceptSecrets
        self.supports_preview = response.supportsPreview
        self.config = plain
        self.secret_keys = secrets
        self._configured = True
        return response

    # ---------------------------------------------------------------------------------------- raw RPCs

    def _marshal(self, props: Mapping[str, Any], *, keep_unknowns: bool, label: str = "") -> Any:
        """A property map as the engine sends it to this provider: secrets only where it accepts them."""
        return to_struct(props, keep_unknowns=keep_unknowns, keep_secrets=self.accepts_secrets, label=label)

    def _annotate(self, outs: dict[str, Any], ins: Mapping[str, Any]) -> dict[str, Any]:
        """provider_plugin.go: only for a provider that does not accept secrets, the engine re-marks them."""
        return outs if self.accepts_secrets else annotate_secrets(outs, ins)

    def check(
        self,
        type_: str,
        name: str,
        olds: Mapping[str, Any],
        news: Mapping[str, Any],
        *,
        allow_unknowns: bool = False,
        urn: str | None = None,
    ) -> CheckResult:
        self._ensure_configured()
        urn = urn or self.urn(type_, name)
        response = self._call(
            "Check",
            name,
            provider_pb2.CheckRequest(
                urn=urn,
                name=name,
                type=type_,
                olds=self._marshal(olds, keep_unknowns=allow_unknowns, label=f"Check({name}).olds"),
                news=self._marshal(news, keep_unknowns=allow_unknowns, label=f"Check({name}).news"),
                randomSeed=hashlib.sha256(urn.encode()).digest(),
            ),
        )
        inputs = self._annotate(from_struct(response.inputs), normalize(news))
        failures = [(f.property, f.reason) for f in response.failures]
        if not allow_unknowns and contains_unknowns(inputs):
            raise EngineError(f"Check({name}) returned unknown values outside a preview")
        return CheckResult(inputs=inputs, failures=failures)

    def diff(
        self,
        type_: str,
        name: str,
        id_: str,
        olds: Mapping[str, Any],
        news: Mapping[str, Any],
        old_inputs: Mapping[str, Any] | None = None,
        *,
        allow_unknowns: bool = False,
        urn: str | None = None,
    ) -> DiffResult:
        self._ensure_configured()
        response = self._call(
            "Diff",
            name,
            provider_pb2.DiffRequest(
                id=id_,
                urn=urn or self.urn(type_, name),
                name=name,
                type=type_,
                olds=self._marshal(olds, keep_unknowns=allow_unknowns, label=f"Diff({name}).olds"),
                news=self._marshal(news, keep_unknowns=allow_unknowns, label=f"Diff({name}).news"),
                old_inputs=self._marshal(
                    old_inputs or {}, keep_unknowns=allow_unknowns, label=f"Diff({name}).old_inputs"
                ),
                ignoreChanges=[],
            ),
        )
        return DiffResult(
            changes=response.changes,
            replaces=list(response.replaces),
            delete_before_replace=response.deleteBeforeReplace,
            stables=list(response.stables),
        )

    def create(
        self,
        type_: str,
        name: str,
        properties: Mapping[str, Any],
        *,
        timeout: float = 0.0,
        urn: str | None = None,
        preview: bool = False,
    ) -> tuple[str, dict[str, Any]]:
        """Create; ``preview=True`` (only for a provider that supports previews) asks for the predicted state,
        whose id is empty."""
        self._ensure_configured()
        urn = urn or self.urn(type_, name)
        response = self._call(
            "Create",
            name,
            provider_pb2.CreateRequest(
                urn=urn,
                name=name,
                type=type_,
                properties=self._marshal(properties, keep_unknowns=preview, label=f"Create({name})"),
                timeout=timeout,
                preview=preview,
            ),
        )
        if preview:
            return "", self._annotate(from_struct(response.properties), normalize(properties))
        if not response.id:
            raise EngineError(
                f"plugin for package '{self.process.package or 'pulumi-python'}' returned empty resource.ID from create '{urn}'"
            )
        outputs = self._annotate(from_struct(response.properties), normalize(properties))
        return response.id, outputs

    def read(
        self,
        type_: str,
        name: str,
        id_: str,
        properties: Mapping[str, Any],
        inputs: Mapping[str, Any] | None = None,
        *,
        urn: str | None = None,
    ) -> ReadResult:
        self._ensure_configured()
        response = self._call(
            "Read",
            name,
            provider_pb2.ReadRequest(
                id=id_,
                urn=urn or self.urn(type_, name),
                name=name,
                type=type_,
                properties=self._marshal(properties, keep_unknowns=False, label=f"Read({name}).properties"),
                inputs=None
                if inputs is None
                else self._marshal(inputs, keep_unknowns=False, label=f"Read({name})"),
            ),
        )
        new_inputs = None
        if response.HasField("inputs"):
            new_inputs = self._annotate(from_struct(response.inputs), normalize(inputs or {}))
        outputs = self._annotate(from_struct(response.properties), normalize(properties))
        return ReadResult(id=response.id, outputs=outputs, inputs=new_inputs)

    def update(
        self,
        type_: str,
        name: str,
        id_: str,
        olds: Mapping[str, Any],
        news: Mapping[str, Any],
        old_inputs: Mapping[str, Any] | None = None,
        *,
        timeout: float = 0.0,
        urn: str | None = None,
        preview: bool = False,
    ) -> dict[str, Any]:
        self._ensure_configured()
        response = self._call(
            "Update",
            name,
            provider_pb2.UpdateRequest(
                id=id_,
                urn=urn or self.urn(type_, name),
                name=name,
                type=type_,
                olds=self._marshal(olds, keep_unknowns=preview, label=f"Update({name}).olds"),
                news=self._marshal(news, keep_unknowns=preview, label=f"Update({name}).news"),
                old_inputs=self._marshal(
                    old_inputs or {}, keep_unknowns=preview, label=f"Update({name}).old_inputs"
                ),
                timeout=timeout,
                ignoreChanges=[],
                preview=preview,
            ),
        )
        return self._annotate(from_struct(response.properties), normalize(news))

    def delete(
        self,
        type_: str,
        name: str,
        id_: str,
        properties: Mapping[str, Any],
        old_inputs: Mapping[str, Any] | None = None,
        *,
        timeout: float = 0.0,
        urn: str | None = None,
    ) -> None:
        self._ensure_configured()
        self._call(
            "Delete",
            name,
            provider_pb2.DeleteRequest(
                id=id_,
                urn=urn or self.urn(type_, name),
                name=name,
                type=type_,
                properties=self._marshal(properties, keep_unknowns=False, label=f"Delete({name}).properties"),
                old_inputs=self._marshal(
                    old_inputs or {}, keep_unknowns=False, label=f"Delete({name}).old_inputs"
                ),
                timeout=timeout,
            ),
        )

    # ---------------------------------------------------------------------------------------- orchestration

    def deployment(self, *, preview: bool = False) -> Deployment:
        """An `up` whose registrations arrive one at a time (the program's order); use as a context manager."""
        return Deployment(self, preview=preview)

    def up(
        self,
        registrations: Iterable[Registration | tuple[str, str, Mapping[str, Any]]],
        *,
        preview: bool = False,
        refresh: bool = False,
    ) -> OperationResult:
        """`pulumi up` (or `pulumi preview`) of a program that registers exactly `registrations`, in order."""
        if refresh:
            self.refresh()
        with self.deployment(preview=preview) as deployment:
            for registration in registrations:
                if not isinstance(registration, Registration):
                    registration = Registration(*registration)
                deployment.register_registration(registration)
        return deployment.result

    def refresh(self) -> OperationResult:
        """`pulumi refresh`: Read every resource; an empty id drops it, returned inputs replace the stored ones."""
        self._ensure_configured()
        result = OperationResult()
        for urn in list(self.state):
            entry = self.state[urn]
            name = _name_of(urn)
            read = self.read(entry["type"], name, entry["id"], entry["outputs"], entry["inputs"], urn=urn)
            with self._lock:
                if not read.id:
                    del self.state[urn]
                    self._meta.pop(urn, None)
                    result.steps.append(("delete", name))
                    continue
                new_entry = {
                    "type": entry["type"],
                    "id": read.id,
                    "inputs": read.inputs if read.inputs is not None else entry["inputs"],
                    "outputs": read.outputs,
                }
                changed = new_entry != entry
                self.state[urn] = new_entry
                result.steps.append(("update" if changed else "same", name))
        return result

    def destroy(self) -> OperationResult:
        """`pulumi destroy`: Delete(properties=outputs, old_inputs=inputs), dependents first."""
        self._ensure_configured()
        result = OperationResult()
        for urn, entry, _meta in reversed(list(self._pending_deletes)):
            self.delete(entry["type"], _name_of(urn), entry["id"], entry["outputs"], entry["inputs"], urn=urn)
            self._pending_deletes.remove((urn, entry, _meta))
            result.steps.append(("delete-replaced", _name_of(urn)))
        # As the engine walks a destroy: dependents first, and independent deletes all go ahead (they run in
        # parallel there), so one failing delete leaves only what depends on it (what it depends on) in place.
        failed: list[BaseException] = []
        for urn in reversed(list(self.state)):
            entry = self.state[urn]
            if any(urn in self._dependencies_of(other) for other in self.state if other != urn):
                continue  # a dependent of it failed to go: it stays, as the engine leaves it
            if not self._meta.get(urn, {}).get("external"):
                try:
                    self.delete(
                        entry["type"], _name_of(urn), entry["id"], entry["outputs"], entry["inputs"], urn=urn
                    )
                except Exception as exc:
                    failed.append(exc)
                    continue
            with self._lock:
                del self.state[urn]
                self._meta.pop(urn, None)
            result.steps.append(("delete", _name_of(urn)))
        if failed:
            raise failed[0]
        return result

    # ---------------------------------------------------------------------------------------- state helpers

    def resource(self, name: str, type_: str | None = None) -> dict[str, Any]:
        """The state entry of the (only) resource with that name."""
        matches = [
            e for u, e in self.state.items() if _name_of(u) == name and (type_ is None or e["type"] == type_)
        ]
        if len(matches) != 1:
            raise KeyError(f"{len(matches)} resources named {name!r} in state: {list(self.state)}")
        return matches[0]

    def _dependencies_of(self, urn: str) -> set[str]:
        meta = self._meta.get(urn, {})
        deps = set(meta.get("dependencies", ()))
        for urns in meta.get("property_dependencies", {}).values():
            deps.update(urns)
        return deps

    def _commit(self, urn: str, entry: dict[str, Any], meta: dict[str, Any]) -> None:
        with self._lock:
            self._seq += 1
            self.state[urn] = entry
            self._meta[urn] = {**meta, "seq": self._seq}

    def _reorder(self) -> None:
        """Keep `state` in dependency order (the snapshot's invariant), tie-broken by when steps completed."""
        with self._lock:
            by_seq = sorted(self.state, key=lambda u: self._meta.get(u, {}).get("seq", 0))
            ordered: list[str] = []
            visiting: set[str] = set()

            def visit(urn: str) -> None:
                if urn in ordered or urn in visiting or urn not in self.state:
                    return
                visiting.add(urn)
                for dep in sorted(
                    self._dependencies_of(urn), key=lambda u: self._meta.get(u, {}).get("seq", 0)
                ):
                    visit(dep)
                visiting.discard(urn)
                ordered.append(urn)

            for urn in by_seq:
                visit(urn)
            self.state = {urn: self.state[urn] for urn in ordered}


class Deployment:
    """One `pulumi up`/`preview`: `register()` each resource as the program does, then `finish()` (or `with`)."""

    def __init__(self, engine: StandInEngine, *, preview: bool):
        self.engine = engine
        self.preview = preview
        self.result = OperationResult()
        self._old_order = {urn: index for index, urn in enumerate(engine.state)}
        self._seen: set[str] = set()
        self._condemned: dict[str, dict[str, Any]] = {}  # dependents deleted by a delete-before-replace
        self._replaced: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
        self._finished = False
        engine._ensure_configured()

    def __enter__(self) -> Deployment:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.finish()
        else:
            # A failed program deletes nothing; replaced resources stay pending deletion (the engine's
            # `delete: true` entries) and go at the next up or destroy.
            self.engine._pending_deletes.extend(self._replaced)
            self.engine._reorder()

    def _step(self, op: str, urn: str) -> None:
        with self.engine._lock:
            self.result.steps.append((op, _name_of(urn)))

    def register_registration(self, registration: Registration) -> Registered:
        return self.register(
            registration.type,
            registration.name,
            registration.inputs,
            dependencies=registration.dependencies,
            property_dependencies=registration.property_dependencies,
            delete_before_replace=registration.delete_before_replace,
            urn=registration.urn,
        )

    def register(
        self,
        type_: str,
        name: str,
        inputs: Mapping[str, Any],
        *,
        dependencies: Sequence[str] = (),
        property_dependencies: Mapping[str, Sequence[str]] | None = None,
        delete_before_replace: bool | None = None,
        urn: str | None = None,
    ) -> Registered:
        """RegisterResource: decide and run this resource's step; returns what the program gets back."""
        registered = self._register(
            type_, name, inputs, dependencies, property_dependencies or {}, delete_before_replace, urn
        )
        with self.engine._lock:
            self.result.resources[registered.urn] = registered
        return registered

    def _register(self, type_, name, inputs, dependencies, property_dependencies, delete_before_replace, urn):
        engine = self.engine
        urn = urn or engine.urn(type_, name)
        news = normalize(inputs)
        if not self.preview and contains_unknowns(news):
            raise EngineError(
                f"{urn}: unknown inputs outside a preview (the engine waits for them): {news!r}"
            )
        meta = {
            "dependencies": list(dependencies),
            "property_dependencies": {k: list(v) for k, v in property_dependencies.items()},
            "external": False,
        }
        with engine._lock:
            if urn in self._seen:
                raise EngineError(f"Duplicate resource URN '{urn}'; try giving it a unique name")
            self._seen.add(urn)
            old = copy.deepcopy(engine.state.get(urn))
            condemned = self._condemned.get(urn)

        olds_for_check = old["inputs"] if old else (condemned["inputs"] if condemned else {})
        checked = engine.check(type_, name, olds_for_check, news, allow_unknowns=self.preview, urn=urn)
        if checked.failures:
            raise CheckFailedError(urn, checked.failures)
        inputs_ = checked.inputs

        if old is None:
            op = "replace" if condemned else "create"
            return self._create(urn, type_, name, inputs_, meta, op)

        diff = engine.diff(
            type_,
            name,
            old["id"],
            old["outputs"],
            inputs_,
            old["inputs"],
            allow_unknowns=self.preview,
            urn=urn,
        )
        changes = diff.changes
        if changes == DIFF_UNKNOWN:
            changes = DIFF_NONE if _same_inputs(old["inputs"], inputs_) else DIFF_SOME
        if changes == DIFF_NONE:
            entry = {"type": type_, "id": old["id"], "inputs": inputs_, "outputs": old["outputs"]}
            if not self.preview:
                engine._commit(urn, entry, meta)
            self._step("same", urn)
            return Registered(urn, "same", old["id"], copy.deepcopy(old["outputs"]))
        if diff.replaces:
            dbr = diff.delete_before_replace if delete_before_replace is None else delete_before_replace
            if self.preview:
                return self._create(urn, type_, name, inputs_, meta, "replace")
            if dbr:
                self._delete_before_replace(urn, old)
                return self._create(urn, type_, name, inputs_, meta, "replace")
            old_meta = copy.deepcopy(engine._meta.get(urn, {}))
            registered = self._create(urn, type_, name, inputs_, meta, "replace")
            with engine._lock:
                self._replaced.append((urn, old, old_meta))
            return registered
        if self.preview:
            self._step("update", urn)
            if self.engine.supports_preview:
                predicted = self.engine.update(
                    type_, name, old["id"], old["outputs"], inputs_, old["inputs"], urn=urn, preview=True
                )
                return Registered(urn, "update", old["id"], predicted)
            return Registered(urn, "update", old["id"], copy.deepcopy(inputs_))
        outputs = engine.update(type_, name, old["id"], old["outputs"], inputs_, old["inputs"], urn=urn)
        engine._commit(urn, {"type": type_, "id": old["id"], "inputs": inputs_, "outputs": outputs}, meta)
        self._step("update", urn)
        return Registered(urn, "update", old["id"], copy.deepcopy(outputs))

    def _create(self, urn, type_, name, inputs_, meta, op) -> Registered:
        if self.preview:
            self._step(op, urn)
            if self.engine.supports_preview:
                _id, predicted = self.engine.create(type_, name, inputs_, urn=urn, preview=True)
                return Registered(urn, op, "", predicted)
            # supportsPreview is false: the engine hands the checked inputs back as the predicted outputs.
            return Registered(urn, op, "", copy.deepcopy(inputs_))
        id_, outputs = self.engine.create(type_, name, inputs_, urn=urn)
        self.engine._commit(urn, {"type": type_, "id": id_, "inputs": inputs_, "outputs": outputs}, meta)
        self._step(op, urn)
        return Registered(urn, op, id_, copy.deepcopy(outputs))

    def _delete_before_replace(self, root: str, old_root: dict[str, Any]) -> None:
        """step_generator.go: delete the dependents a replacement would replace, then the resource itself."""
        engine = self.engine
        with engine._lock:
            order = [u for u in engine.state if u not in self._seen or u == root]
            replace_set = {root}
            reach = {root}
            to_replace: list[str] = []
            for urn in order[order.index(root) + 1 :] if root in order else []:
                if not engine._dependencies_of(urn) & reach:
                    continue
                reach.add(urn)
                entry = engine.state[urn]
                prop_deps = engine._meta.get(urn, {}).get("property_dependencies", {})
                inputs_for_diff = dict(entry["inputs"])
                affected = False
                for key in entry["inputs"]:
                    if set(prop_deps.get(key, ())) & replace_set:
                        inputs_for_diff[key] = UNKNOWN
                        affected = True
                if not affected:
                    continue
                diff = engine.diff(
                    entry["type"],
                    _name_of(urn),
                    entry["id"],
                    entry["outputs"],
                    inputs_for_diff,
                    entry["inputs"],
                    allow_unknowns=True,
                    urn=urn,
                )
                if diff.replaces:
                    to_replace.append(urn)
                    replace_set.add(urn)
            for urn in reversed(to_replace):
                entry = engine.state[urn]
                engine.delete(
                    entry["type"], _name_of(urn), entry["id"], entry["outputs"], entry["inputs"], urn=urn
                )
                self._condemned[urn] = entry
                del engine.state[urn]
                engine._meta.pop(urn, None)
                self._step("delete-replaced", urn)
            engine.delete(
                old_root["type"],
                _name_of(root),
                old_root["id"],
                old_root["outputs"],
                old_root["inputs"],
                urn=root,
            )
            engine.state.pop(root, None)
            engine._meta.pop(root, None)
            self._step("delete-replaced", root)

    def read(
        self, type_: str, name: str, id_: str, props: Mapping[str, Any], *, urn: str | None = None
    ) -> Registered:
        """ReadStep (`Resource.get` / `opts.id`): Read(properties=props, inputs=props); kept as external."""
        engine = self.engine
        urn = urn or engine.urn(type_, name)
        props = normalize(props)
        with engine._lock:
            if urn in self._seen:
                raise EngineError(f"Duplicate resource URN '{urn}'; try giving it a unique name")
            self._seen.add(urn)
        if contains_unknowns(props) or id_ in ("", UNKNOWN):
            self._step("read", urn)
            return Registered(urn, "read", "", {})
        result = engine.read(type_, name, id_, props, props, urn=urn)
        if not result.id:
            raise EngineError(f"reading resource {urn}: resource '{id_}' does not exist")
        if not self.preview:
            entry = {
                "type": type_,
                "id": result.id,
                "inputs": result.inputs if result.inputs is not None else props,
                "outputs": result.outputs,
            }
            engine._commit(urn, entry, {"dependencies": [], "property_dependencies": {}, "external": True})
        self._step("read", urn)
        registered = Registered(urn, "read", result.id, copy.deepcopy(result.outputs))
        with engine._lock:
            self.result.resources[urn] = registered
        return registered

    def finish(self) -> OperationResult:
        """Delete what the program no longer registers, and replaced resources, in reverse dependency order."""
        if self._finished:
            return self.result
        self._finished = True
        engine = self.engine
        removed = [urn for urn in self._old_order if urn not in self._seen and urn not in self._condemned]
        if self.preview:
            for urn in reversed(removed):
                self._step("delete", urn)
            return self.result
        # Replaced resources are pending deletion until their Delete succeeds (a failure leaves them for later).
        with engine._lock:
            engine._pending_deletes.extend(self._replaced)
            self._replaced = []
        deletions: list[tuple[float, str, dict[str, Any], str]] = []
        for urn, entry, _meta in engine._pending_deletes:
            deletions.append((self._old_order.get(urn, -1) + 0.5, urn, entry, "delete-replaced"))
        for urn in removed:
            if urn in engine.state:
                deletions.append((self._old_order[urn], urn, engine.state[urn], "delete"))
        try:
            for _index, urn, entry, op in sorted(deletions, key=lambda d: d[0], reverse=True):
                external = op == "delete" and engine._meta.get(urn, {}).get("external")
                if not external:
                    engine.delete(
                        entry["type"], _name_of(urn), entry["id"], entry["outputs"], entry["inputs"], urn=urn
                    )
                with engine._lock:
                    if op == "delete":
                        engine.state.pop(urn, None)
                        engine._meta.pop(urn, None)
                    else:
                        engine._pending_deletes = [p for p in engine._pending_deletes if p[1] is not entry]
                self._step(op, urn)
        finally:
            engine._reorder()
        return self.result


@contextlib.contextmanager
def started_engine(cwd: str | os.PathLike[str] = ROOT, env=None, *, project="test", stack="dev", **kwargs):
    """A fresh provider process and an engine on it (for one-off use; tests share a process via a fixture)."""
    with ProviderProcess(cwd, env, project=project, **kwargs) as process:
        yield StandInEngine(process, project=project, stack=stack)


__all__ = [
    "DIFF_NONE",
    "DIFF_SOME",
    "DIFF_UNKNOWN",
    "UNKNOWN",
    "CheckFailedError",
    "CheckResult",
    "Deployment",
    "DiffResult",
    "EngineError",
    "OperationResult",
    "ProviderProcess",
    "ProviderRpcError",
    "ReadResult",
    "Registered",
    "Registration",
    "StandInEngine",
    "blob_bytes",
    "from_struct",
    "is_secret",
    "provider_blob",
    "reveal",
    "secret",
    "started_engine",
    "to_struct",
]
