"""A stack driven through the stand-in engine as the Pulumi CLI drives one, on either face, and what interrupts it.

Every command (`up`, `preview`, `destroy`) starts its provider afresh, as the CLI starts a fresh plugin for each
command: the SDK's dynamic-provider server (:class:`~.engine.ProviderProcess`) for the dynamic face, whose
program is a Python program run under :class:`~.mocks.EngineBackedMocks`; the provider plugin
(:class:`~.engine.PluginProcess`) for the plugin face, whose program is its registrations in the schema's names.
The engine's state is carried from one command to the next. Credentials reach the provider only through the stack
config (the API key a secret), and its create journal is the test's own (``TOGETHER_RL_STATE_DIR`` is inherited).

An interrupted command (:meth:`Stack.interrupted_up`) is a real signal to a real process: the `up` runs until
``when()`` holds (a create waits for its object, say), then one :data:`INTERRUPTS` entry hits its provider (SIGINT,
SIGTERM, SIGKILL) or the process in the engine's place (SIGKILL, reaped or left a zombie); the `up` fails as the
engine sees it fail, and the call returns once the provider process has ended.

    stack = Stack(emulator, DYNAMIC, sweep_program(DYNAMIC), project="together-rl-sweep", config={...})
    left = stack.interrupted_up(INTERRUPTS["sigkill"], when=lambda: emulator.control.state()["model_resources"])
    stack.up(); stack.preview(); stack.destroy()       # a command each, or several on one provider process:
    with stack.command() as engine: stack.up(engine); stack.preview(engine); stack.destroy(engine)
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from .engine import UNKNOWN, Deployment, EngineError, PluginProcess, ProviderProcess, StandInEngine
from .faces import DYNAMIC, PLUGIN, Face
from .mocks import run_program

ROOT = Path(__file__).resolve().parents[1]

Program = Callable[[StandInEngine, Mapping[str, Any], bool], list[tuple[str, str]]]
"""Runs one `up` (or, with True, a preview) of the program on an engine with that stack config; the steps."""


# ------------------------------------------------------------------------------------------------ programs


def python_program(folder: Path) -> Program:
    """A Python program of the dynamic face (``__main__.py`` in ``folder``), as the language host runs it."""

    def run(engine: StandInEngine, config: Mapping[str, Any], preview: bool) -> list[tuple[str, str]]:
        secrets = [key for key in config if key.endswith(":apiKey")]
        return run_program(folder, engine, config=config, secret_keys=secrets, preview=preview).steps

    return run


def _sweep_registrations(face: Face, config: Mapping[str, Any]) -> Callable[[Deployment], None]:
    """``tests/e2e/projects/sweep-yaml``: examples/sweep's resources in the schema's names."""
    rank = config.get("loraRanks", [8])[0]
    prefix = config.get("namePrefix", "sweep")

    def register(deployment: Deployment) -> None:
        gpu = deployment.register(
            face.token("ModelResource"),
            "sweep-gpu",
            {
                "baseModel": "Qwen/Qwen3.5-4B",
                "loraEnabled": True,
                "computeConfig": {"numGeneratorReplicas": 1},
            },
        )
        deployment.register(
            face.token("TrainingSession"),
            "trial-0",
            {
                "modelResourcesId": gpu.id or UNKNOWN,
                "displayName": f"{prefix}-0",
                "loraConfig": {"rank": rank},
                "metadata": {"wandb": {"project": "grpo-sweep", "group": prefix, "runName": f"{prefix}-0"}},
            },
            dependencies=[gpu.urn],
            property_dependencies={"modelResourcesId": [gpu.urn]},
        )

    return register


def sweep_program(face: Face) -> Program:
    """The sweep scenario (one LoRA model resource ``sweep-gpu``, one session ``trial-0``) on ``face``: the
    example itself on the dynamic face, its Pulumi YAML twin's registrations on the plugin face."""
    if face is DYNAMIC:
        return python_program(ROOT / "examples" / "sweep")

    def run(engine: StandInEngine, config: Mapping[str, Any], preview: bool) -> list[tuple[str, str]]:
        engine.configure(config, [key for key in config if key.endswith(":apiKey")])
        with engine.deployment(preview=preview) as deployment:
            _sweep_registrations(face, config)(deployment)
        return deployment.result.steps

    return run


def provider_config(face: Face, emulator: Any, poll_interval: float = 0.02) -> dict[str, Any]:
    """The provider's settings as stack config of ``face``'s namespace (the API key is sent as a secret)."""
    return {
        f"{face.config}:apiKey": emulator.api_key,
        f"{face.config}:baseUrl": emulator.base_url,
        f"{face.config}:pollInterval": str(poll_interval),
    }


# ------------------------------------------------------------------------------------------------ interrupts


@dataclasses.dataclass(frozen=True)
class Interrupt:
    """One way an `up` is cut short: what it does to the provider process of the running command."""

    name: str
    under_engine: bool
    """Whether the provider must run under a process in the engine's place (that process is what gets killed)."""
    act: Callable[[ProviderProcess], None]

    def __str__(self) -> str:
        return self.name


INTERRUPTS = {
    interrupt.name: interrupt
    for interrupt in (
        # The engine ends its plugins with SIGINT; a language host or a supervisor with SIGTERM.
        Interrupt("sigint", False, lambda process: process.signal(signal.SIGINT)),
        Interrupt("sigterm", False, lambda process: process.signal(signal.SIGTERM)),
        # The OOM killer, a hard cancel of the plugin alone: nothing runs after it.
        Interrupt("sigkill", False, lambda process: process.signal(signal.SIGKILL)),
        # The engine (the `pulumi` CLI) killed: the provider lives on, its answers reach nobody.
        Interrupt("engine-killed", True, lambda process: process.kill_engine(reap=True)),
        # ... and its parent never reaps it: a zombie keeps its pid and start time.
        Interrupt("engine-zombie", True, lambda process: process.kill_engine(reap=False)),
    )
}


@dataclasses.dataclass
class Interrupted:
    """What an interrupted `up` left: the error the engine saw, the provider's output, whether the engine process
    was still an unreaped zombie when the provider ended (only for ``engine-zombie``)."""

    error: BaseException
    output: str
    engine_was_zombie: bool


# ------------------------------------------------------------------------------------------------ the stack


class Stack:
    """One stack of ``program`` on ``face``: its config and the engine's state across commands."""

    def __init__(
        self, emulator: Any, face: Face, program: Program, *, project: str, config: Mapping[str, Any]
    ) -> None:
        self.emulator = emulator
        self.face = face
        self.program = program
        self.project = project
        self.config = {**provider_config(face, emulator), **config}
        self.state: dict[str, dict[str, Any]] = {}
        self._meta: dict[str, dict[str, Any]] = {}
        self._pending_deletes: list[Any] = []
        self.outputs: list[str] = []
        """Every command's provider output (stdout, stderr, the plugin's engine log), in order."""
        self._live: StandInEngine | None = None

    @contextlib.contextmanager
    def command(self, *, under_engine: bool = False) -> Iterator[StandInEngine]:
        """One command: a fresh provider process, an engine holding the stack's state; the state is kept after."""
        kind = PluginProcess if self.face is PLUGIN else ProviderProcess
        env = {"TOGETHER_API_KEY": None, "TOGETHER_BASE_URL": None}
        process = kind(ROOT, env, project=self.project, under_engine=under_engine)
        engine = StandInEngine(process, project=self.project)
        engine.state = copy.deepcopy(self.state)
        engine._meta = copy.deepcopy(self._meta)
        engine._pending_deletes = copy.deepcopy(self._pending_deletes)
        self._live = engine
        try:
            yield engine
        finally:
            self._live = None
            self.state, self._meta = engine.state, engine._meta
            self._pending_deletes = engine._pending_deletes
            process.stop()
            self.outputs.append(process.output())

    @contextlib.contextmanager
    def _on(self, engine: StandInEngine | None) -> Iterator[StandInEngine]:
        if engine is not None:
            yield engine
        else:
            with self.command() as fresh:
                yield fresh

    def up(self, engine: StandInEngine | None = None, *, preview: bool = False) -> list[tuple[str, str]]:
        """`pulumi up` (`preview=True`: `pulumi preview`) as a command of its own, or on ``engine`` (a command
        already open, for several operations on one provider process); the steps."""
        with self._on(engine) as on:
            return self.program(on, self.config, preview)

    def preview(self, engine: StandInEngine | None = None) -> list[tuple[str, str]]:
        return self.up(engine, preview=True)

    def destroy(self, engine: StandInEngine | None = None) -> list[tuple[str, str]]:
        with self._on(engine) as on:
            on.configure(self.config, [key for key in self.config if key.endswith(":apiKey")])
            return on.destroy().steps

    def interrupted_up(
        self, interrupt: Interrupt, *, when: Callable[[], Any], settle: float = 0.3, timeout: float = 60.0
    ) -> Interrupted:
        """`pulumi up`, interrupted by ``interrupt`` ``settle`` seconds after ``when()`` first holds (polled every
        20 ms); returns once the up has failed and the provider process has ended."""
        failure: list[BaseException] = []
        with self.command(under_engine=interrupt.under_engine) as engine:
            process = engine.process

            def interrupter() -> None:
                deadline = time.monotonic() + timeout
                while not when():
                    if time.monotonic() > deadline or not process.alive:
                        failure.append(AssertionError(f"the moment to interrupt never came ({interrupt})"))
                        if process.alive:
                            process.signal(signal.SIGKILL)  # end the up, which may be waiting for a long time
                        return
                    time.sleep(0.02)
                time.sleep(settle)
                interrupt.act(process)
                try:
                    process.wait_exited(timeout)
                except EngineError as exc:
                    # An interrupt the provider never answers would leave the up waiting as long as the test holds
                    # the create: fail now, naming it.
                    failure.append(AssertionError(f"the provider outlived {interrupt}: {exc}"))
                    process.signal(signal.SIGKILL)

            thread = threading.Thread(target=interrupter, name=f"interrupt-{interrupt}", daemon=True)
            thread.start()
            error: BaseException | None = None
            try:
                self.program(engine, self.config, False)
            except Exception as exc:  # what the engine sees of the interrupted command
                error = exc
            thread.join(timeout)
            if failure:
                raise failure[0]
            if error is None:
                raise AssertionError(f"the up was never interrupted ({interrupt}): it succeeded")
            process.wait_exited(timeout)
            zombie = process.engine_is_zombie()
        return Interrupted(error=error, output=self.outputs[-1], engine_was_zombie=zombie)

    def ids(self) -> dict[str, str]:
        """The state's ids by resource name (during a command, that command's engine's state)."""
        state = self._live.state if self._live is not None else self.state
        return {urn.rsplit("::", 1)[-1]: entry["id"] for urn, entry in state.items()}


__all__ = [
    "INTERRUPTS",
    "Interrupt",
    "Interrupted",
    "Program",
    "Stack",
    "provider_config",
    "python_program",
    "sweep_program",
]
