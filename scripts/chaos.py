"""A seeded fault campaign: many full stacks brought up and destroyed while the emulator misbehaves.

Every cycle declares a stack: 1 model resource (``gpu``) and 1-3 LoRA training sessions (``trial-<i>``, LoRA rank
from {8, 16, 32}, a random display name). It is deployed through the provider exactly as ``pulumi up`` deploys it:
the Pulumi SDK's own dynamic-provider server in a subprocess (``python -m pulumi.dynamic``, a fresh one for every
command, as the CLI starts a fresh plugin per command), driven over gRPC by the suite's stand-in engine
(``harness/engine.py``): refresh (the examples' ``refresh: always``), then Check/Create of the resource,
then the sessions at once (the engine runs independent steps in parallel). The API key reaches the provider only
through Configure (a secret stack config value); the emulator checks it.

What a cycle injects (a random mix, drawn from the cycle's own RNG; probabilities are per cycle):

* fault rules (``emulator/faults.py``), each with its own seeded ``probability`` and ``times``:
  429 with and without ``Retry-After`` (anywhere, creates included); 500/502/503/504 and dropped connections on
  reads, lists and stops; latency (creates included); act-then-fail on creates (the object is made, the answer
  is a 5xx or a dropped connection) and on stops; a refused create that did not act (an answered 500/503);
  rarely (about 1 cycle in 25, each costing the create's 60 s settle window) an *unanswered* create that did
  not act (502/504/drop); a time-windowed outage of every endpoint (``duration`` 0.5-2 s, ``armed_by`` a
  create being accepted; 503 or 500, so the creates it catches are answered failures);
* ERROR during provisioning (``fail-next`` for the next model resource or session);
* a create timeout: the resource (or the sessions) declare ``create_timeout: 1`` and provision for 2.5 s in
  the first try only (a long capacity queue), so that create fails and must stop what it made; the next try
  provisions at the cycle's own pace;
* settings: ``read_lag`` (GET/stop of a young object answers 404), ``list_lag`` (lists leave young objects
  out), ``stops_ignored`` (a stop answers 200 and does nothing; the provider re-stops after 15 s);
* an out-of-band stop of one object (a session, or the resource with ``force``) between the first ``up``
  and a second ``up``, which must recreate it;
* an interrupt: SIGKILL of the provider process mid-create, either while it waits for READY/RUNNING (the
  create journal holds the id) or while the create's POST is in flight (a 1 s injected latency: the journal
  has no id, the object appears after the provider died). The next ``up`` of the same stack (after the
  in-flight POST has landed, as a user re-running it would) must take the object over.

A failed ``up`` is run again (the user re-running ``pulumi up``), at most 3 tries in all; after the final
``up`` (and, with an out-of-band stop, after the second ``up``'s tries) comes ``destroy``, at most 3 tries, with
every fault rule and lag setting cleared before the last one so the cleanup can finish. The emulator is reset
between cycles; the create journal (``TOGETHER_RL_STATE_DIR``) lives in the campaign's own temporary folder
for the whole campaign, as a user's would.

Audits (against the emulator's control API, which is never faulted, and the engine's state):

* **orphans**: after each ``up`` phase (converged or not), an active object (resource PENDING/CREATING/READY,
  session CREATING/RUNNING) whose id the engine state does not hold. Counted once per object.
* **duplicates**: no two objects made for one declared name (the resource: every model resource of the cycle;
  a session: by its unique display name; an object matching no declared name counts as a duplicate) were ever
  active at the same time. An object is active from its ``created_at`` to the moment it left the active
  statuses, which the emulator's timestamps give (``updated_at`` of STOPPING/ERROR/EXPIRED; for STOPPED,
  ``updated_at`` minus the longest stopping time that can precede it, a lower bound). A second object for a
  name is therefore fine only once the first ended: by an injected ERROR, an out-of-band stop, or a failed
  create that was stopped (delete-before-replace also stops first). Each object made while another of its
  name was active counts once (``stops_ignored`` can keep a "stopped" one active: that is what it probes).
  Overlaps shorter than the stopping time (< 0.3 s) can be missed, never invented. Together with the orphan
  audit this is the rule "after the final converged ``up`` every active object is in the state, the state
  holds exactly the declared resources, and no name ever had two objects active at once".
* **lost state**: after each ``up`` phase, a state entry whose id the emulator does not know, whose object is
  not active (the ``up``'s refresh should have dropped it), or whose id another entry also holds; and, after
  a converged ``up``, a declared resource missing from the state. Counted once per entry.
* **billed after destroy**: active objects after the last ``destroy`` try.
* **key leaks**: the API key in the engine state (JSON dump), a provider process's stdout/stderr, the emulator's
  request log (bodies, paths, queries), the create journal's files, or any error message seen (CLI cycles:
  ``pulumi stack export`` and the CLI's output). Counted once per place per cycle.

``faults injected`` is the sum of ``fired`` over every rule, plus what the script counts itself: each
fail-next that landed an object in ERROR, each create that timed out, each 404 that read_lag caused (a 404
without a fault for an object the emulator knows), 1 per cycle in which list_lag was set and a list was made,
each ignored stop, each out-of-band stop, each kill. ``failed operations`` counts the ups and destroys that
raised (each try).

With ``--cli-cycles K``, K more cycles run through the real Pulumi CLI (``harness/cli.py``,
``examples/sweep`` with config ``sessions``, ``loraRanks``, ``namePrefix``): the same faults and audits, except
the kill and the create timeout (the example declares no ``create_timeout``).

Run it (deterministic given the seed, apart from thread timing):

    uv run --frozen python scripts/chaos.py --cycles 50 --seed 1             # or: make chaos
    uv run --frozen python scripts/chaos.py --cycles 50 --seed 1 --cli-cycles 2 --verbose
    uv run --frozen python scripts/chaos.py --seed 1 --first-cycle 17 --cycles 1 --verbose   # replay cycle 17
    uv run --frozen python scripts/chaos.py --seed 1 --cycles 50 --dry-run   # print the plans only

The last lines are the figures (``cycles``, ``faults injected``, ``failed operations``, ``orphans``,
``duplicates``, ``billed after destroy``, ``lost state``, ``key leaks``); the exit status is 1 when any of the
last five is not 0, and every finding is described on stderr with the cycle that replays it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
import types
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

from harness.engine import EngineError, ProviderProcess, StandInEngine, provider_blob  # noqa: E402

from pulumi_together_rl import journal  # noqa: E402
from pulumi_together_rl.client import TogetherRL  # noqa: E402
from pulumi_together_rl.emulator.control import EmulatorControl  # noqa: E402
from pulumi_together_rl.emulator.server import EmulatorServer  # noqa: E402
from pulumi_together_rl.resources.model_resource import _ModelResourceProvider  # noqa: E402
from pulumi_together_rl.resources.training_session import _TrainingSessionProvider  # noqa: E402

MR = "pulumi-python:dynamic/together:ModelResource"
TS = "pulumi-python:dynamic/together:TrainingSession"
PROJECT = "chaos"
MODEL = "Qwen/Qwen3.5-4B"
SWEEP = ROOT / "examples" / "sweep"
# Distinctive, so that finding it anywhere is unambiguous; the emulator refuses any other key.
KEY_CORE = "c4a05e1f0c9a7b3d2468"
API_KEY = f"tk-chaos-{KEY_CORE}-never-shown"

RESOURCES = "/v1/rl/model-resources"
SESSIONS = "/v1/rl/training-sessions"
ANY_PATH = r"^/v1/"
CREATES = r"^/v1/rl/(model-resources|training-sessions)$"  # POST: create; GET: list
OBJECTS = r"^/v1/rl/(model-resources|training-sessions)/[^/]+$"
STOPS = r"^/v1/rl/(model-resources|training-sessions)/[^/]+/stop$"
SUPPORTED = r"^/v1/rl/supported-models$"

RESOURCE_ACTIVE = ("PENDING", "CREATING", "READY")
SESSION_ACTIVE = ("CREATING", "RUNNING")
TIMING_KEYS = (
    "resource_pending",
    "resource_creating",
    "resource_stopping",
    "session_creating",
    "session_stopping",
)
EMULATOR_KIND = {"resource": "model_resource", "session": "training_session"}
JOURNAL_KIND = {"resource": "model resource", "session": "training session"}
RESOURCE_CODES = (
    "MODEL_RESOURCES_ERROR_CODE_CAPACITY_WAIT_TIMEOUT",
    "MODEL_RESOURCES_ERROR_CODE_PROVISIONING_FAILED",
    "MODEL_RESOURCES_ERROR_CODE_RESOURCE_UNAVAILABLE",
)
SESSION_CODES = (
    "TRAINING_SESSION_ERROR_CODE_RESOURCE_AT_CAPACITY",
    "TRAINING_SESSION_ERROR_CODE_TIMED_OUT",
    "TRAINING_SESSION_ERROR_CODE_SESSION_FAILED",
)
WORDS = "otter heron lynx ibis marten wren bison gecko koi tern puffin vole".split()
TRIES = 3  # tries of an up phase and of destroy (the first one included)
KILL_LATENCY = 1.0  # the in-flight POST an interrupt lands in
KILL_WAIT_TIMING = 0.8  # provisioning time of the object whose wait an interrupt lands in
SLOW_TIMEOUT = 1.0  # the declared create_timeout of the kind a create-timeout fault slows down
SLOW_TIMING = 2.5  # its provisioning time in the first try (then back to the cycle's own)


def short(status: str) -> str:
    """``MODEL_RESOURCES_STATUS_READY`` -> ``READY``."""
    return status.rsplit("_", 1)[-1]


def active_resource(obj: dict[str, Any]) -> bool:
    return short(obj["status"]) in RESOURCE_ACTIVE


def active_session(obj: dict[str, Any]) -> bool:
    return short(obj["status"]) in SESSION_ACTIVE


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


# ------------------------------------------------------------------------------------------------- plans


@dataclasses.dataclass
class Plan:
    """Everything one cycle declares and injects, drawn from ``random.Random(f"...:{seed}:{cycle}")``."""

    seed: int
    cycle: int
    cli: bool
    sessions: list[tuple[str, str, int]]  # (Pulumi name, display name, LoRA rank)
    prefix: str
    timings: dict[str, float]
    rules: list[tuple[str, dict[str, Any]]]  # (label, fault rule)
    settings: dict[str, Any]
    fail_next: list[tuple[str, str]]  # (emulator kind, error code)
    oob_stop: str | None  # "session" | "resource"
    oob_index: int
    kill: tuple[str, str] | None  # ("resource" | "session", "wait" | "post")
    kill_delay: float
    slow: str | None = None  # "resource" | "session": provisions past its create_timeout in the first try
    slow_restore: float = 0.0  # that kind's provisioning time from the second try on

    @property
    def message(self) -> str:
        return f"chaos seed {self.seed} cycle {self.cycle}: injected ERROR"

    def labels(self) -> list[str]:
        out = [label for label, _ in self.rules]
        out += [f"error-{kind.split('_')[-1]}" for kind, _ in self.fail_next]
        out += [f"{key}={value:g}" for key, value in self.settings.items()]
        if self.oob_stop:
            out.append(f"oob-stop-{self.oob_stop}")
        if self.kill:
            out.append(f"kill-{self.kill[0]}-{self.kill[1]}")
        if self.slow:
            out.append(f"create-timeout-{self.slow}")
        return out

    @property
    def slow_key(self) -> str:
        return "resource_pending" if self.slow == "resource" else "session_creating"


def make_plan(seed: int, cycle: int, *, cli: bool = False) -> Plan:
    rng = random.Random(f"together-rl-chaos:{seed}:{cycle}")
    tag = f"{rng.randrange(16**6):06x}"
    count = rng.randint(1, 3)
    prefix = f"cx{tag}-{rng.choice(WORDS)}"
    if cli:  # examples/sweep names its sessions "<namePrefix>-<index>"
        sessions = [(f"trial-{i}", f"{prefix}-{i}", rng.choice((8, 16, 32))) for i in range(count)]
    else:
        sessions = [
            (f"trial-{i}", f"{prefix}-{rng.choice(WORDS)}-{i}", rng.choice((8, 16, 32))) for i in range(count)
        ]
    timings = {key: round(rng.uniform(0.05, 0.3), 3) for key in TIMING_KEYS}
    rules: list[tuple[str, dict[str, Any]]] = []

    def rule(label: str, **fields: Any) -> None:
        fields.setdefault("seed", rng.randrange(2**31))
        rules.append((label, fields))

    if rng.random() < 0.45:  # throttling, with and without Retry-After; creates included (nothing created)
        method, path = rng.choice([(None, ANY_PATH), ("POST", CREATES), ("GET", OBJECTS), ("POST", STOPS)])
        after = rng.choice([None, None, 0.1, 0.25, "ms"])
        extra: dict[str, Any] = {}
        if after == "ms":
            extra["retry_after_ms"] = 150
        elif after is not None:
            extra["retry_after"] = after
        label = "429" + ("" if after is None else "+retry-after")
        rule(
            label,
            method=method,
            path=path,
            status=429,
            times=rng.randint(2, 6),
            probability=round(rng.uniform(0.1, 0.35), 2),
            **extra,
        )
    if rng.random() < 0.45:  # server errors on reads, lists and stops
        status = rng.choice((500, 502, 503, 504))
        method, path = rng.choice(
            [("GET", ANY_PATH), ("GET", OBJECTS), ("GET", CREATES), ("POST", STOPS), ("GET", SUPPORTED)]
        )
        rule(
            str(status),
            method=method,
            path=path,
            status=status,
            times=rng.randint(1, 4),
            probability=round(rng.uniform(0.1, 0.3), 2),
        )
    if rng.random() < 0.3:  # the server hangs up before acting
        method, path = rng.choice([("GET", ANY_PATH), ("GET", OBJECTS), ("POST", STOPS)])
        rule(
            "drop",
            method=method,
            path=path,
            status=None,
            drop_connection=True,
            times=rng.randint(1, 3),
            probability=round(rng.uniform(0.1, 0.25), 2),
        )
    if rng.random() < 0.4:  # slowness, creates included
        rule(
            "latency",
            path=ANY_PATH,
            status=None,
            latency=round(rng.uniform(0.05, 0.4), 2),
            times=rng.randint(3, 10),
            probability=0.3,
        )
    if rng.random() < 0.35:  # the create acts, its answer is lost or an error: the duplicate-create hazard
        path = rng.choice([f"^{RESOURCES}$", f"^{SESSIONS}$", CREATES])
        if rng.random() < 0.3:
            rule(
                "act-then-drop-create",
                method="POST",
                path=path,
                status=None,
                drop_connection=True,
                act_then_fail=True,
                times=rng.randint(1, 2),
            )
        else:
            status = rng.choice((500, 502, 503, 504))
            rule(
                f"act-then-{status}-create",
                method="POST",
                path=path,
                status=status,
                act_then_fail=True,
                times=rng.randint(1, 2),
            )
    if rng.random() < 0.3:  # the stop acts, its answer is lost
        if rng.random() < 0.3:
            rule(
                "act-then-drop-stop",
                method="POST",
                path=STOPS,
                status=None,
                drop_connection=True,
                act_then_fail=True,
                times=rng.randint(1, 2),
            )
        else:
            status = rng.choice((500, 503, 504))
            rule(
                f"act-then-{status}-stop",
                method="POST",
                path=STOPS,
                status=status,
                act_then_fail=True,
                times=rng.randint(1, 2),
            )
    if rng.random() < 0.15:  # a create refused without acting, answered by the server itself
        status = rng.choice((500, 503))
        rule(f"refused-{status}-create", method="POST", path=CREATES, status=status, times=1)
    if rng.random() < 0.04:  # a create that got no answer and did not act (costs the 60 s settle window)
        how = rng.choice((502, 504, "drop"))
        if how == "drop":
            rule(
                "unanswered-drop-create",
                method="POST",
                path=CREATES,
                status=None,
                drop_connection=True,
                times=1,
            )
        else:
            rule(f"unanswered-{how}-create", method="POST", path=CREATES, status=how, times=1)
    if rng.random() < 0.25:  # every endpoint down for a moment from when a create is accepted
        armed = rng.choice((RESOURCES, SESSIONS))
        rule(
            "outage",
            path=ANY_PATH,
            status=rng.choice((503, 500)),
            times=None,
            duration=round(rng.uniform(0.5, 2.0), 2),
            armed_by=f"^POST {armed}$",
        )
    fail_next: list[tuple[str, str]] = []
    if rng.random() < 0.25:
        if rng.random() < 0.5:
            fail_next.append(("model_resource", rng.choice(RESOURCE_CODES)))
        else:
            fail_next.append(("training_session", rng.choice(SESSION_CODES)))
    settings: dict[str, Any] = {}
    if rng.random() < 0.2:
        settings["read_lag"] = round(rng.uniform(0.05, 0.3), 2)
    if rng.random() < 0.2:
        settings["list_lag"] = round(rng.uniform(0.2, 1.0), 2)
    if rng.random() < 0.1:
        settings["stops_ignored"] = 1
    oob_stop = None
    if rng.random() < 0.3:
        oob_stop = "resource" if rng.random() < 0.3 else "session"
    oob_index = rng.randrange(count)
    kill = None
    if not cli and rng.random() < 0.2:
        kill = (rng.choice(("resource", "session")), rng.choice(("wait", "post")))
    kill_delay = round(rng.uniform(0.0, 0.15), 3)
    if kill and kill[1] == "post":
        # First in order, so that it is the rule that fires for the first create of that kind.
        path = RESOURCES if kill[0] == "resource" else SESSIONS
        rules.insert(
            0,
            (
                "kill-latency",
                {"method": "POST", "path": f"^{path}$", "status": None, "latency": KILL_LATENCY, "times": 1},
            ),
        )
    elif kill:
        timings["resource_pending" if kill[0] == "resource" else "session_creating"] = KILL_WAIT_TIMING
    slow = None
    if not cli and not kill and rng.random() < 0.15:
        slow = rng.choice(("resource", "session"))
    plan = Plan(
        seed,
        cycle,
        cli,
        sessions,
        prefix,
        timings,
        rules,
        settings,
        fail_next,
        oob_stop,
        oob_index,
        kill,
        kill_delay,
    )
    if slow:
        plan.slow = slow
        plan.slow_restore = timings[plan.slow_key]
        timings[plan.slow_key] = SLOW_TIMING
    return plan


# ------------------------------------------------------------------------------------------------- results


@dataclasses.dataclass
class Report:
    """What one cycle did and found."""

    plan: Plan
    faults: int = 0
    fired: int = 0  # what the rules cleared before the last destroy had fired
    failed_ops: int = 0
    orphans: set[str] = dataclasses.field(default_factory=set)
    duplicates: set[str] = dataclasses.field(default_factory=set)
    billed: set[str] = dataclasses.field(default_factory=set)
    lost: set[str] = dataclasses.field(default_factory=set)
    leaks: set[str] = dataclasses.field(default_factory=set)
    errors: list[str] = dataclasses.field(default_factory=list)  # every error message seen
    outputs: list[str] = dataclasses.field(default_factory=list)  # provider / CLI output
    findings: list[str] = dataclasses.field(default_factory=list)
    outcome: str = ""
    seconds: float = 0.0
    killed: bool = False
    oob_done: bool = False
    stops_left: int | None = None  # ignored stops the emulator had not spent when the faults were cleared
    error_lines: list[str] = dataclasses.field(default_factory=list)  # the provider's own error line of each

    def find(self, bucket: set[str], key: str, text: str) -> None:
        if key not in bucket:
            bucket.add(key)
            self.findings.append(text)


def first_line(exc: BaseException, limit: int = 400) -> str:
    """The provider's own error line of a failed command (an RPC failure carries the server's traceback)."""
    details = getattr(exc, "details", None)
    if details is None:
        text = str(exc)
    else:
        code = getattr(exc, "code", None)
        if code is not None and code.name == "UNAVAILABLE":
            return f"{exc.rpc}({exc.resource}): the provider process is gone (UNAVAILABLE)"  # type: ignore[attr-defined]
        text = details.split("\n[the provider process has exited", 1)[0]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if "Traceback (most recent call last)" in text:  # not a ProviderError: a bug, its last line says which
        return ("BUG? " + (lines[-1] if lines else ""))[:limit]
    return " ".join(lines)[:limit]  # a ProviderError is its message alone


# ------------------------------------------------------------------------------------------------- campaign


class Campaign:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.tmp = Path(tempfile.mkdtemp(prefix="together-rl-chaos-"))
        self.state_dir = self.tmp / "state"
        # The create journal of every provider this campaign starts (and of this process: the killer reads it).
        os.environ["TOGETHER_RL_STATE_DIR"] = str(self.state_dir)
        start = {key: 0.1 for key in TIMING_KEYS}
        self.server = EmulatorServer(timings=start, api_key=API_KEY).start()
        self.control = EmulatorControl(self.server.base_url)
        self.config = {"together:apiKey": API_KEY, "together:baseUrl": self.server.base_url}
        self.provider_env = {
            "TOGETHER_API_KEY": None,
            "TOGETHER_BASE_URL": None,
            "TOGETHER_RL_POLL_INTERVAL": "0.05",
            "TOGETHER_RL_STATE_DIR": str(self.state_dir),
        }
        self.mr_blob = provider_blob(_ModelResourceProvider())
        self.ts_blob = provider_blob(_TrainingSessionProvider())
        self._lock = threading.Lock()
        self._current: ProviderProcess | None = None

    def close(self) -> None:
        self.control.close()
        self.server.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # ---------------------------------------------------------------------------------------- arming

    def arm(self, plan: Plan) -> list[str]:
        self.control.reset()
        self.control.configure(timings=plan.timings, **plan.settings)
        for kind, code in plan.fail_next:
            self.control.fail_next(kind, code, message=plan.message)
        return [self.control.add_fault(**fields) for _, fields in plan.rules]

    def disarm(self, report: Report | None = None) -> dict[str, Any]:
        """Clear every rule and lag setting (adding what the rules fired to ``report``); returns the settings
        as they were (``stops_ignored``: the ignored stops not spent)."""
        before = self.control.settings()
        if report is not None:
            report.fired += sum(rule["fired"] for rule in self.control.faults())
        self.control.clear_faults()
        self.control.configure(read_lag=0.0, list_lag=0.0, stops_ignored=0)
        return before

    # ---------------------------------------------------------------------------------------- commands

    def current(self) -> ProviderProcess | None:
        with self._lock:
            return self._current

    def kill(self, process: ProviderProcess) -> bool:
        with self._lock:
            if self._current is not process or not process.alive or process.proc is None:
                return False
            os.kill(process.proc.pid, signal.SIGKILL)
            return True

    def command(self, report: Report, engine: StandInEngine, what: str, action: Callable[[], None]) -> bool:
        """One CLI command (up / destroy) in a fresh provider process; False when it raised."""
        process = ProviderProcess(ROOT, self.provider_env, project=PROJECT)
        engine.process = process
        # A fresh plugin: the engine handshakes and configures it again (the stand-in keeps its state).
        engine._started = False
        engine._configured = False
        with self._lock:
            self._current = process
        try:
            engine.configure(self.config, secret_keys=["together:apiKey"])
            action()
            return True
        except EngineError as exc:
            report.failed_ops += 1
            report.errors.append(str(exc))
            report.error_lines.append(f"{what}: {first_line(exc)}")
            return False
        finally:
            with self._lock:
                self._current = None
            process.stop()  # also reaps a killed one: the journal must see its pid as gone
            report.outputs.append(process.output())

    def up(self, plan: Plan, engine: StandInEngine, report: Report) -> None:
        engine.refresh()  # refresh: always (every example's Pulumi.yaml)
        with engine.deployment() as deployment:
            gpu = deployment.register(
                MR,
                "gpu",
                {
                    "__provider": self.mr_blob,
                    "base_model": MODEL,
                    "lora_enabled": True,
                    "compute_config": {"num_generator_replicas": 1},
                    **({"create_timeout": SLOW_TIMEOUT} if plan.slow == "resource" else {}),
                },
            )

            def register(session: tuple[str, str, int]) -> Any:
                name, display, rank = session
                inputs = {
                    "__provider": self.ts_blob,
                    "model_resources_id": gpu.id,
                    "lora_config": {"rank": rank, "alpha": 2 * rank},
                    "display_name": display,
                    **({"create_timeout": SLOW_TIMEOUT} if plan.slow == "session" else {}),
                }
                return deployment.register(
                    TS, name, inputs, property_dependencies={"model_resources_id": [gpu.urn]}
                )

            # The engine runs the sessions' steps in parallel; one failing does not stop the others.
            with ThreadPoolExecutor(max_workers=len(plan.sessions)) as pool:
                futures = [pool.submit(register, s) for s in plan.sessions]
            failures = [f.exception() for f in futures if f.exception() is not None]
            for extra in failures[1:]:
                report.errors.append(str(extra))
                report.error_lines.append(f"up: {first_line(extra)}")
            if failures:
                raise failures[0]

    def up_phase(
        self, plan: Plan, engine: StandInEngine, report: Report, killer: Killer | None, *, first: bool
    ) -> bool:
        for attempt in range(1, TRIES + 1):
            ok = self.command(report, engine, "up", lambda: self.up(plan, engine, report))
            if first and attempt == 1 and plan.slow:
                # The capacity queue was long for the first try only: a user raising nothing, re-running.
                report.faults += sum("timed out after" in line for line in report.error_lines)
                self.control.configure(timings={plan.slow_key: plan.slow_restore})
            if killer is not None and killer.fired.is_set() and not report.killed:
                report.killed = True
                killer.stop.set()
                self.await_inflight(killer)
            if ok:
                return True
        return False

    def await_inflight(self, killer: Killer) -> None:
        """After a kill during a POST's latency: let that POST land before the user's next `pulumi up`."""
        if killer.when != "post":
            return
        deadline = time.monotonic() + KILL_LATENCY + 5
        while time.monotonic() < deadline:
            if any(r.get("fault") == killer.rule_id for r in self.control.requests()):
                return
            time.sleep(0.05)

    def destroy_phase(self, engine: StandInEngine, report: Report) -> bool:
        for attempt in range(1, TRIES + 1):
            if attempt == TRIES:
                report.stops_left = self.disarm(report)["stops_ignored"]
            if self.command(report, engine, "destroy", engine.destroy):
                return True
        return False

    # ---------------------------------------------------------------------------------------- one cycle

    def run_cycle(self, plan: Plan) -> Report:
        report = Report(plan)
        started = time.monotonic()
        rule_ids = self.arm(plan)
        engine = StandInEngine(None, project=PROJECT, stack=f"c{plan.cycle}")  # type: ignore[arg-type]
        killer = None
        if plan.kill:
            kill_rule = rule_ids[0] if plan.kill[1] == "post" else None
            killer = Killer(self, plan, kill_rule)
            killer.start()
        try:
            converged = self.up_phase(plan, engine, report, killer, first=True)
        finally:
            if killer is not None:
                killer.stop.set()
                killer.join(timeout=10)
        self.audit_up(plan, engine, report, converged)
        ups = "converged" if converged else "UNCONVERGED"
        if converged and plan.oob_stop:
            report.oob_done = self.oob_stop(plan, engine, report)
            converged = self.up_phase(plan, engine, report, None, first=False)
            self.audit_up(plan, engine, report, converged)
            ups += ", re-up " + ("converged" if converged else "UNCONVERGED")
        destroyed = self.destroy_phase(engine, report)
        self.finish(
            plan, report, {"engine state": json.dumps([engine.state, engine._pending_deletes], default=str)}
        )
        self.disarm()
        if plan.kill:
            ups += ", provider killed" if report.killed else ", the planned kill never came"
        report.outcome = ups + ("" if destroyed else ", DESTROY FAILED")
        report.seconds = time.monotonic() - started
        return report

    def oob_stop(self, plan: Plan, engine: StandInEngine, report: Report) -> bool:
        """Someone stops one object outside Pulumi (through the same, faulted, API)."""
        try:
            with TogetherRL(api_key=API_KEY, base_url=self.server.base_url) as client:
                if plan.oob_stop == "resource":
                    client.stop_model_resource(engine.resource("gpu")["id"], force=True)
                else:
                    name = plan.sessions[plan.oob_index][0]
                    client.stop_training_session(engine.resource(name)["id"])
            return True
        except Exception as exc:  # the other person's stop failed: the second up runs all the same
            report.errors.append(f"out-of-band stop: {exc}")
            return False

    # ---------------------------------------------------------------------------------------- audits

    def finish(self, plan: Plan, report: Report, places: dict[str, str]) -> None:
        """The audits after the last destroy: billed objects, duplicates, leaks; and the faults that fired."""
        state = self.control.state()
        for obj in state["model_resources"]:
            if active_resource(obj):
                report.find(
                    report.billed,
                    obj["id"],
                    f"billed after destroy: model resource {obj['id']} is {short(obj['status'])}",
                )
        for obj in state["training_sessions"]:
            if active_session(obj):
                report.find(
                    report.billed,
                    obj["id"],
                    f"billed after destroy: training session {obj['id']} ({obj.get('display_name')}) is "
                    f"{short(obj['status'])}",
                )
        self.audit_duplicates(plan, state, report)
        requests = self.control.requests()
        report.faults += self.count_faults(plan, state, requests, report)
        self.audit_leaks(report, {**places, "request log": json.dumps(requests)})

    def audit_up(self, plan: Plan, engine: StandInEngine, report: Report, converged: bool) -> None:
        held = {urn.rsplit("::", 1)[1]: entry["id"] for urn, entry in engine.state.items()}
        pending = {entry["id"] for _urn, entry, _meta in engine._pending_deletes}
        self.audit_state(plan, report, held, converged, pending)

    def audit_state(
        self,
        plan: Plan,
        report: Report,
        held: dict[str, str],
        converged: bool,
        pending: Iterable[str] = (),
    ) -> None:
        """Orphans and lost state after an up phase: ``held`` is {name: id} of the state's resources,
        ``pending`` the ids of replaced ones still waiting for their delete (the state holds them too)."""
        state = self.control.state()
        known = {o["id"]: o for o in (*state["model_resources"], *state["training_sessions"])}
        ids = set(held.values()) | set(pending)
        for obj in state["model_resources"]:
            if active_resource(obj) and obj["id"] not in ids:
                report.find(
                    report.orphans,
                    obj["id"],
                    f"orphan: model resource {obj['id']} is {short(obj['status'])} and no state holds it",
                )
        for obj in state["training_sessions"]:
            if active_session(obj) and obj["id"] not in ids:
                report.find(
                    report.orphans,
                    obj["id"],
                    f"orphan: training session {obj['id']} "
                    f"({obj.get('display_name')}) is {short(obj['status'])} and no state holds it",
                )
        seen: dict[str, str] = {}
        for name, ident in held.items():
            obj = known.get(ident)
            key = f"{name}={ident}"
            if obj is None:
                report.find(
                    report.lost, key, f"lost state: {name} holds {ident}, which the API does not know"
                )
            elif not (active_resource(obj) if "lora_enabled" in obj else active_session(obj)):
                report.find(
                    report.lost,
                    key,
                    f"lost state: {name} holds {ident}, which is "
                    f"{short(obj['status'])} (the up's refresh should have dropped it)",
                )
            if ident in seen:
                report.find(report.lost, key, f"lost state: {name} and {seen[ident]} both hold {ident}")
            seen[ident] = name
        if converged:
            gpu = "sweep-gpu" if plan.cli else "gpu"
            for name in (gpu, *(s[0] for s in plan.sessions)):
                if name not in held:
                    report.find(
                        report.lost,
                        name,
                        f"lost state: {name} is declared, the up succeeded, and the state does not hold it",
                    )

    def audit_duplicates(self, plan: Plan, state: dict[str, Any], report: Report) -> None:
        t = plan.timings
        by_name: dict[str, list[tuple[datetime, datetime | None, str]]] = {}
        names = {display: name for name, display, _ in plan.sessions}
        resource_slack = timedelta(seconds=max(t["resource_stopping"], t["session_stopping"]))
        session_slack = timedelta(seconds=t["session_stopping"])
        for kind, objects in (
            ("resource", state["model_resources"]),
            ("session", state["training_sessions"]),
        ):
            for obj in objects:
                status = short(obj["status"])
                start, changed = parse_time(obj["created_at"]), parse_time(obj["updated_at"])
                if status in (RESOURCE_ACTIVE if kind == "resource" else SESSION_ACTIVE):
                    end = None
                elif status == "STOPPED":
                    end = max(start, changed - (resource_slack if kind == "resource" else session_slack))
                else:  # STOPPING, ERROR, EXPIRED: entered at updated_at
                    end = changed
                if kind == "resource":
                    name = "sweep-gpu" if plan.cli else "gpu"
                else:
                    name = names.get(obj.get("display_name") or "")
                    if name is None:
                        report.find(
                            report.duplicates,
                            obj["id"],
                            f"duplicate: training session {obj['id']} "
                            f"({obj.get('display_name')}) matches no declared session",
                        )
                        continue
                by_name.setdefault(name, []).append((start, end, obj["id"]))
        for name, objects in by_name.items():
            objects.sort(key=lambda o: o[0])
            for i, (start, _end, ident) in enumerate(objects):
                overlapping = [o[2] for o in objects[:i] if o[1] is None or o[1] > start]
                if overlapping:
                    report.find(
                        report.duplicates,
                        ident,
                        f"duplicate: {ident} was made for {name} while "
                        f"{', '.join(overlapping)} (made for it too) was still active",
                    )

    def count_faults(
        self, plan: Plan, state: dict[str, Any], requests: list[dict[str, Any]], report: Report
    ) -> int:
        fired = report.fired + sum(rule["fired"] for rule in self.control.faults())
        known = {o["id"] for o in (*state["model_resources"], *state["training_sessions"])}
        errored = sum(
            1
            for obj in (*state["model_resources"], *state["training_sessions"])
            if (obj.get("error") or {}).get("message") == plan.message
        )
        lagged = 0
        if plan.settings.get("read_lag"):
            for r in requests:
                parts = r["path"].rstrip("/").split("/")
                if r["status"] == 404 and not r["fault"] and any(p in known for p in parts):
                    lagged += 1
        listed = int(
            bool(plan.settings.get("list_lag"))
            and any(r["method"] == "GET" and re.match(CREATES, r["path"]) for r in requests)
        )
        if report.stops_left is None:
            report.stops_left = self.control.settings()["stops_ignored"]
        ignored = int(plan.settings.get("stops_ignored", 0)) - int(report.stops_left)
        return fired + errored + lagged + listed + max(0, ignored) + int(report.oob_done) + int(report.killed)

    def audit_leaks(self, report: Report, extra: dict[str, str]) -> None:
        places = dict(extra)
        places["provider output"] = "\n".join(report.outputs)
        places["error messages"] = "\n".join(report.errors)
        texts = []
        for path in sorted(self.state_dir.rglob("*")):
            if path.is_file():
                texts.append(path.read_text(errors="replace"))
        places["create journal"] = "\n".join(texts)
        for place, text in places.items():
            if API_KEY in text or KEY_CORE in text:
                report.find(report.leaks, place, f"key leak: the API key appears in the {place}")

    # ---------------------------------------------------------------------------------------- CLI cycles

    def run_cli_cycle(self, plan: Plan) -> Report | None:
        from harness.cli import CLIStack, provide

        found, reason = provide()
        if not found:
            print(f"chaos: skipping the CLI cycles: {reason}", file=sys.stderr)
            return None
        report = Report(plan)
        started = time.monotonic()
        self.control.reset()
        emulator = types.SimpleNamespace(base_url=self.server.base_url, api_key=API_KEY, control=self.control)
        stack = CLIStack(
            SWEEP,
            self.tmp / f"cli-{plan.cycle}",
            emulator,
            bin_dir=found,
            name=f"chaos-{plan.cycle}-{plan.prefix}",
            TOGETHER_RL_STATE_DIR=str(self.state_dir),
            TOGETHER_RL_POLL_INTERVAL="0.05",
        )

        def run(*args: str) -> bool:
            result = stack.run(*args, check=False, timeout=600)
            report.outputs.append(result.output)
            if result.returncode != 0:
                report.failed_ops += 1
                report.errors.append(result.output)
                said = [line.strip() for line in result.output.splitlines() if "error:" in line]
                report.error_lines.append(
                    f"pulumi {args[0]}: {(said or ['exit status ' + str(result.returncode)])[-1]}"
                )
            return result.returncode == 0

        def held() -> dict[str, str]:
            return {name: entry["id"] for name, entry in stack.resources().items() if entry.get("id")}

        try:
            stack.init(
                {
                    "sessions": len(plan.sessions),
                    "loraRanks": [s[2] for s in plan.sessions],
                    "namePrefix": plan.prefix,
                },
                api_key=API_KEY,
            )
            self.arm(plan)
            up = ("up", "--yes", "--skip-preview")
            converged = any(run(*up) for _ in range(TRIES))  # stops at the first success
            self.audit_state(plan, report, held(), converged)
            ups = "converged" if converged else "UNCONVERGED"
            if converged and plan.oob_stop:
                try:
                    ids = held()
                    with TogetherRL(api_key=API_KEY, base_url=self.server.base_url) as client:
                        if plan.oob_stop == "resource":
                            client.stop_model_resource(ids["sweep-gpu"], force=True)
                        else:
                            client.stop_training_session(ids[plan.sessions[plan.oob_index][0]])
                    report.oob_done = True
                except Exception as exc:
                    report.errors.append(f"out-of-band stop: {exc}")
                converged = any(run(*up) for _ in range(TRIES))
                self.audit_state(plan, report, held(), converged)
                ups += ", re-up " + ("converged" if converged else "UNCONVERGED")
            destroyed = False
            for attempt in range(1, TRIES + 1):
                if attempt == TRIES:
                    report.stops_left = self.disarm(report)["stops_ignored"]
                if run("destroy", "--yes", "--skip-preview"):
                    destroyed = True
                    break
            self.finish(plan, report, {"stack export": stack.export()})
            report.outcome = "CLI: " + ups + ("" if destroyed else ", DESTROY FAILED")
        finally:
            self.disarm()
            stack.run("stack", "rm", "--yes", "--force", check=False, timeout=120)
            (SWEEP / f"Pulumi.{stack.name}.yaml").unlink(missing_ok=True)
        report.seconds = time.monotonic() - started
        return report


class Killer(threading.Thread):
    """SIGKILLs the provider once the planned create is in flight (its wait, or its POST)."""

    def __init__(self, campaign: Campaign, plan: Plan, rule_id: str | None):
        super().__init__(name="chaos-killer", daemon=True)
        assert plan.kill is not None
        self.campaign = campaign
        self.kind, self.when = plan.kill
        self.delay = plan.kill_delay
        self.rule_id = rule_id
        self.fired = threading.Event()
        self.stop = threading.Event()

    def run(self) -> None:
        control = EmulatorControl(self.campaign.server.base_url)
        seen: dict[str, float] = {}
        try:
            while not self.stop.is_set():
                process = self.campaign.current()
                if process is not None and self.ready(control, seen):
                    time.sleep(self.delay)
                    if self.campaign.kill(process):
                        self.fired.set()
                        return
                time.sleep(0.02)
        finally:
            control.close()

    def ready(self, control: EmulatorControl, seen: dict[str, float]) -> bool:
        if self.when == "wait":
            if self.kind == "resource":
                return any(short(o["status"]) == "PENDING" for o in control.state()["model_resources"])
            return any(short(o["status"]) == "CREATING" for o in control.state()["training_sessions"])
        # "post": a journal entry of that kind still without an id, for a quarter of the injected latency.
        now = time.monotonic()
        for entry in journal.entries():
            if entry.kind == JOURNAL_KIND[self.kind] and entry.id is None and entry.pid == self.pid():
                first = seen.setdefault(str(entry.path), now)
                if now - first >= KILL_LATENCY / 4:
                    return True
        return False

    def pid(self) -> int | None:
        process = self.campaign.current()
        return process.proc.pid if process is not None and process.proc is not None else None


# ------------------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cycles", type=int, default=50, help="cycles through the provider server")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--first-cycle", type=int, default=0, help="number of the first cycle (to replay one)"
    )
    parser.add_argument(
        "--cli-cycles", type=int, default=0, help="further cycles through the real Pulumi CLI"
    )
    parser.add_argument("--verbose", action="store_true", help="one line per cycle, findings as they come")
    parser.add_argument("--dry-run", action="store_true", help="print each cycle's plan and run nothing")
    args = parser.parse_args(argv)

    cycles = range(args.first_cycle, args.first_cycle + args.cycles)
    cli_cycles = range(cycles.stop, cycles.stop + args.cli_cycles)
    if args.dry_run:
        for cycle in (*cycles, *cli_cycles):
            plan = make_plan(args.seed, cycle, cli=cycle in cli_cycles)
            ranks = ",".join(str(s[2]) for s in plan.sessions)
            print(
                f"cycle {cycle}{' (CLI)' if plan.cli else ''}: {len(plan.sessions)} sessions (ranks {ranks}); "
                f"{' '.join(plan.labels()) or 'no faults'}"
            )
        return 0

    campaign = Campaign(args)
    reports: list[Report] = []
    started = time.monotonic()
    try:
        for cycle in (*cycles, *cli_cycles):
            plan = make_plan(args.seed, cycle, cli=cycle in cli_cycles)
            report = campaign.run_cli_cycle(plan) if plan.cli else campaign.run_cycle(plan)
            if report is None:
                continue
            reports.append(report)
            if args.verbose:
                print(
                    f"cycle {cycle} seed {args.seed}: {len(plan.sessions)} sessions; faults {report.faults} "
                    f"[{' '.join(plan.labels()) or '-'}]; {report.outcome}; failed ops {report.failed_ops}; "
                    f"{report.seconds:.1f} s",
                    flush=True,
                )
            for finding in report.findings:
                replay = f"--seed {args.seed} --first-cycle {cycle} " + (
                    "--cycles 0 --cli-cycles 1" if plan.cli else "--cycles 1"
                )
                print(f"chaos: cycle {cycle} (replay: {replay}): {finding}", file=sys.stderr, flush=True)
            if report.findings or args.verbose:
                for line in report.error_lines:
                    print(f"chaos: cycle {cycle}: {line}", file=sys.stderr)
    finally:
        campaign.close()
    totals = {
        "orphans": sum(len(r.orphans) for r in reports),
        "duplicates": sum(len(r.duplicates) for r in reports),
        "billed after destroy": sum(len(r.billed) for r in reports),
        "lost state": sum(len(r.lost) for r in reports),
        "key leaks": sum(len(r.leaks) for r in reports),
    }
    if args.verbose:
        print(f"wall time: {time.monotonic() - started:.1f} s", file=sys.stderr)
    print(f"cycles: {len(reports)}")
    print(f"faults injected: {sum(r.faults for r in reports)}")
    print(f"failed operations: {sum(r.failed_ops for r in reports)}")
    for name, value in totals.items():
        print(f"{name}: {value}")
    sys.stdout.flush()
    return 1 if any(totals.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
