"""The acceptance tier (``make acceptance``, docs/releasing.md): the gate, the run, its plan and price, the ledger
and the sweeps, shared by ``scripts/acceptance.py`` (what ``make acceptance`` runs) and ``acceptance/`` (the tests).

It runs the product against a real, shared, paid Together account, so everything here is about touching only what
the run can prove it made, and bounding what it may cost:

* **The gate** (:func:`gate_refusal`): ``TOGETHER_RL_ACC=1`` and ``TOGETHER_API_KEY`` must both be set, else one
  sentence names what is missing and nothing is asked of any API.
* **The run** (:class:`Run`): an id ``YYYYMMDD-HHMMSS-xxxxxx`` (its start in UTC, and 6 random hex digits) and the
  name prefix ``acc-<run id>-``, which every training session the run makes carries in its ``display_name``. A
  model resource carries no name (its create body has no name, tag or label field: see the API reference, section
  3.1), so the **ledger** is its only proof: the id of every object the run's POSTs made is appended to the ledger
  file the moment the answer arrives (:class:`Ledger`), sessions included.
* **The plan and the ceiling** (:class:`Plan`, :func:`price`): before anything is created, each planned model
  resource is priced with ``POST /v1/rl/model-resources/estimate-cost`` (its very create body) times the longest it
  may bill (:meth:`Step.billable_seconds`: the time the test lets it be READY, a stop allowance, and its
  ``inactive_timeout``, the longest it stays READY on its own should every stop fail); the run is refused above
  ``TOGETHER_RL_ACC_MAX_USD`` (default 2). The tests cannot create anything the plan did not price (:class:`Guard`).
* **The sweeps** (:func:`sweep_before`, :func:`sweep_after`): see their docstrings. They stop an object only with
  proof (the ledger, or the prefix of a session), only when the key's user made it, never with ``force``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

ENV_ON = "TOGETHER_RL_ACC"
ENV_KEY = "TOGETHER_API_KEY"
ENV_BASE_URL = "TOGETHER_BASE_URL"
ENV_MAX_USD = "TOGETHER_RL_ACC_MAX_USD"
ENV_MODEL = "TOGETHER_RL_ACC_MODEL"
ENV_PRE_READY = "TOGETHER_RL_ACC_PRE_READY_SECONDS"
ENV_READY = "TOGETHER_RL_ACC_READY_SECONDS"
ENV_QUEUE = "TOGETHER_RL_ACC_QUEUE_SECONDS"
ENV_LEDGER = "TOGETHER_RL_ACC_LEDGER"
ENV_RUN = "TOGETHER_RL_ACC_RUN"
"""Set by scripts/acceptance.py for its pytest run: the run id. The tests refuse to run without it, so that
``pytest acceptance`` cannot skip the gate, the ceiling and the sweeps."""

DEFAULT_MAX_USD = 2.0
DEFAULT_MODEL = "Qwen/Qwen3.5-4B"
DEFAULT_PRE_READY = 20.0
DEFAULT_READY = 240.0
DEFAULT_QUEUE = 1800.0

INACTIVE_TIMEOUT = 300
"""The shortest ``inactive_timeout`` the API allows (300-86400 s): a READY resource nobody uses stops itself after
this long, which bounds what a run whose stops all fail can leave billing."""
STOP_ALLOWANCE = 30.0
"""Seconds a planned stop may take until billing stops (the API answers a model resource's stop with STOPPING, the
state billing stops at)."""
LISTING_WINDOW = 30.0
"""Seconds the READY step's resource may exist before its adopt starts (the orphan finder lists it meanwhile)."""
POLL_SLACK = 10.0
"""A wait sees READY at its next poll, at most the provider's poll interval (10 s) after it happened."""
STOP_TIMEOUT = 300.0
"""The ``delete_timeout`` of every stop the tier sends: its tests' clean-ups and its sweeps."""
SWEEP_ALLOWANCE = 900.0
"""Seconds a run's deadline allows for its two sweeps and pytest's start."""
FOREIGN_RUN_MAX = timedelta(hours=3)
"""How long a run that left no line in this ledger (another machine's) is taken to be still running, from the
start its id says: longer than any run's deadline with the default settings."""

CLOCK_NOISE = 2.0
"""Seconds of the API's clock offset (measured from its ``Date`` header, whole seconds) taken for rounding."""

PREFIX = "acc-"
_RUN_ID = re.compile(r"^(\d{8})-(\d{6})-([0-9a-f]{6})$")
_PREFIXED = re.compile(r"^acc-(\d{8}-\d{6}-[0-9a-f]{6})-")


# ------------------------------------------------------------------------------------------------- the gate


def gate_refusal(environ: dict[str, str] | os._Environ[str]) -> str | None:
    """The one sentence that refuses to start (None: the gate is open)."""
    missing = []
    switch = environ.get(ENV_ON)
    if switch is None or switch == "":
        missing.append(f"{ENV_ON} is not set")
    elif switch != "1":
        missing.append(f"{ENV_ON} is {switch!r}, not 1")
    if not environ.get(ENV_KEY, "").strip():
        missing.append(f"{ENV_KEY} is not set")
    if not missing:
        return None
    return (
        f"starting the acceptance tests: {' and '.join(missing)}. They create billed objects in the Together "
        f"account of the key, so they run only with {ENV_ON}=1 and {ENV_KEY} set to that account's key "
        "(docs/releasing.md)."
    )


# ------------------------------------------------------------------------------------------------ settings


class SettingError(ValueError):
    """A setting of the tier that cannot be used: its message is the one sentence."""


@dataclasses.dataclass(frozen=True)
class Settings:
    model: str
    max_usd: float
    pre_ready: float
    ready: float
    queue: float
    ledger: Path

    @classmethod
    def from_env(cls, environ: dict[str, str] | os._Environ[str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        return cls(
            model=env.get(ENV_MODEL, "").strip() or DEFAULT_MODEL,
            max_usd=_number(env, ENV_MAX_USD, DEFAULT_MAX_USD, low=0.0, high=1000.0),
            pre_ready=_number(env, ENV_PRE_READY, DEFAULT_PRE_READY, low=0.5, high=600.0),
            ready=_number(env, ENV_READY, DEFAULT_READY, low=10.0, high=3600.0),
            queue=_number(env, ENV_QUEUE, DEFAULT_QUEUE, low=5.0, high=86400.0),
            ledger=Path(env.get(ENV_LEDGER) or default_ledger(env)).expanduser(),
        )


def default_ledger(environ: dict[str, str] | os._Environ[str]) -> str:
    """Beside the tools the scripts cache: ``$TOGETHER_RL_CACHE_DIR`` (default ``~/.cache/pulumi-together-rl``)."""
    cache = environ.get("TOGETHER_RL_CACHE_DIR") or os.path.join(
        environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "pulumi-together-rl"
    )
    return os.path.join(cache, "acceptance-ledger.jsonl")


def _number(env: Any, name: str, default: float, *, low: float, high: float) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not low <= value <= high:  # also NaN
        raise SettingError(
            f"starting the acceptance tests: {name} is {raw!r}, not a number from {low:g} to {high:g}. "
            f"Set it to one, or unset it for the default ({default:g})."
        )
    return value


# -------------------------------------------------------------------------------------------------- the run


@dataclasses.dataclass(frozen=True)
class Run:
    id: str
    started: datetime

    @classmethod
    def new(cls, now: datetime | None = None) -> Run:
        moment = now or datetime.now(timezone.utc)  # exact: an object made a moment before is older
        return cls(f"{moment:%Y%m%d-%H%M%S}-{secrets.token_hex(3)}", moment)

    @property
    def prefix(self) -> str:
        """What every name the run gives starts with: ``acc-<run id>-``."""
        return f"{PREFIX}{self.id}-"

    def name(self, suffix: str) -> str:
        return self.prefix + suffix


def started_at(run_id: str) -> datetime | None:
    """The start a run id says (None: not a run id)."""
    match = _RUN_ID.match(run_id)
    if not match:
        return None
    try:
        moment = datetime.strptime(match.group(1) + match.group(2), "%Y%m%d%H%M%S")
    except ValueError:  # digits that are no date
        return None
    return moment.replace(tzinfo=timezone.utc)


def run_of_name(display_name: str | None) -> str | None:
    """The run a name carries by its prefix (``acc-<run id>-...``), None for any other name."""
    match = _PREFIXED.match(display_name or "")
    return match.group(1) if match and started_at(match.group(1)) else None


# ---------------------------------------------------------------------------------------- the plan and price


@dataclasses.dataclass(frozen=True)
class Step:
    """One test's planned model resource: how long the test lets it be READY, and the test's deadline."""

    test: str
    what: str
    ready_seconds: float
    deadline: float

    def billable_seconds(self) -> float:
        """The longest it may bill: its READY time, the stop, and ``inactive_timeout`` (should every stop fail,
        the API stops a READY resource once it has been idle that long)."""
        return self.ready_seconds + STOP_ALLOWANCE + INACTIVE_TIMEOUT


@dataclasses.dataclass(frozen=True)
class Plan:
    """What a run creates: one model resource per step (all from :meth:`request`) and one training session."""

    settings: Settings
    sessions: int = 1

    @property
    def steps(self) -> tuple[Step, ...]:
        s = self.settings
        return (
            Step(
                "test_a_create_that_times_out_is_stopped_before_ready",
                "pre-READY create",
                ready_seconds=s.pre_ready,  # only if it were READY inside its create window
                deadline=s.pre_ready + 2 * STOP_TIMEOUT,
            ),
            Step(
                "test_listed_as_an_orphan_then_adopted_trained_on_renamed_and_stopped",
                "READY step",
                ready_seconds=LISTING_WINDOW + POLL_SLACK + s.ready,
                deadline=LISTING_WINDOW + s.queue + s.ready + 3 * STOP_TIMEOUT,
            ),
        )

    def step(self, test: str) -> Step:
        for step in self.steps:
            if step.test == test:
                return step
        raise KeyError(test)

    def request(self) -> dict[str, Any]:
        """The create body of every planned model resource: the cheapest shape the tests need (LoRA, trainer
        only: no generator replicas), stopping itself after the shortest idle time the API allows."""
        return {
            "base_model": self.settings.model,
            "compute_config": {"num_generator_replicas": 0},
            "inactive_timeout": INACTIVE_TIMEOUT,
            "lora_enabled": True,
        }

    def run_seconds(self) -> float:
        """A run's deadline, from its start: every test's deadline and the sweeps."""
        return sum(step.deadline for step in self.steps) + SWEEP_ALLOWANCE


@dataclasses.dataclass(frozen=True)
class Priced:
    step: Step
    price_per_hour: float
    currency: str

    @property
    def cost(self) -> float:
        return self.price_per_hour * self.step.billable_seconds() / 3600


def price(estimate: Callable[[dict[str, Any]], tuple[float, str]], plan: Plan) -> list[Priced]:
    """Every step priced: ``estimate(body)`` is the API's ``(price_per_hour, currency)`` for a create body."""
    per_hour, currency = estimate(plan.request())
    return [Priced(step, per_hour, currency) for step in plan.steps]


def describe_price(priced: Sequence[Priced]) -> str:
    parts = [
        f"{p.step.what} {p.price_per_hour:.2f} {p.currency}/h x {p.step.billable_seconds():.0f} s = "
        f"{p.cost:.2f} {p.currency}"
        for p in priced
    ]
    return "; ".join(parts)


def ceiling_refusal(run: Run, priced: Sequence[Priced], ceiling: float) -> str | None:
    """The one sentence that refuses a run whose plan may cost more than ``ceiling`` USD (None: it fits)."""
    currencies = {p.currency for p in priced}
    if currencies != {"USD"}:
        return (
            f"starting acceptance run ({run.id}): the API prices its plan in {', '.join(sorted(currencies))}, "
            f"not USD, so it cannot be held to {ENV_MAX_USD}. Nothing was created; ask for USD prices before "
            "running it."
        )
    total = sum(p.cost for p in priced)
    if total <= ceiling:
        return None
    return (
        f"starting acceptance run ({run.id}): its plan may cost up to {total:.2f} USD ({describe_price(priced)}; "
        f"READY time plus {STOP_ALLOWANCE:.0f} s to stop and {INACTIVE_TIMEOUT} s of inactive_timeout each), "
        f"above {ENV_MAX_USD}={ceiling:.2f} USD. Nothing was created; set {ENV_MAX_USD} to {total:.2f} or "
        "more to run it."
    )


# ---------------------------------------------------------------------------------------------- the ledger

MODEL_RESOURCE = "model resource"
TRAINING_SESSION = "training session"


@dataclasses.dataclass(frozen=True)
class Made:
    run: str
    kind: str
    id: str
    base_url: str


class Ledger:
    """An append-only JSON-lines file: each run's start (with its deadline), every id its POSTs made, its end.

    Only ids and times go in (never a key). Lines are appended whole and flushed to disk before the test goes on,
    so a run killed right after a create still left that id for the next run's sweep."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def _append(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, sort_keys=True) + "\n"
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as out:
                out.write(line)
                out.flush()
                os.fsync(out.fileno())

    def records(self) -> Iterator[dict[str, Any]]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return
        for line in text.splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue  # a line cut by a crash: what it would have said is lost, nothing else
            if isinstance(record, dict) and isinstance(record.get("run"), str):
                yield record

    def start(self, run: Run, deadline: datetime, base_url: str) -> None:
        self._append(
            {
                "event": "start",
                "run": run.id,
                "at": _iso(run.started),
                "deadline": _iso(deadline),
                "base_url": base_url,
            }
        )

    def made(self, run: Run, kind: str, ident: str, base_url: str, test: str) -> None:
        self._append(
            {
                "event": "created",
                "run": run.id,
                "kind": kind,
                "id": ident,
                "base_url": base_url,
                "test": test,
                "at": _iso(datetime.now(timezone.utc)),
            }
        )

    def end(self, run: Run) -> None:
        self._append({"event": "end", "run": run.id, "at": _iso(datetime.now(timezone.utc))})

    def open(self, run_id: str) -> bool:
        """Whether run ``run_id`` has started (its start line) and not ended (no end line)."""
        events = {r.get("event") for r in self.records() if r["run"] == run_id}
        return "start" in events and "end" not in events

    def created(self, base_url: str, run: str | None = None) -> list[Made]:
        """Every id the ledger records for ``base_url`` (of one run, or of every run)."""
        return [
            Made(r["run"], r.get("kind", ""), r.get("id", ""), base_url)
            for r in self.records()
            if r.get("event") == "created"
            and r.get("base_url") == base_url
            and (run is None or r["run"] == run)
            and isinstance(r.get("id"), str)
        ]

    def over(self, run_id: str, now: datetime) -> tuple[bool, str]:
        """Whether run ``run_id`` is over, and how that is known: its end line, or its deadline passed (the one its
        start line records; for a run with no line here, another machine's, :data:`FOREIGN_RUN_MAX` after the
        start its id says)."""
        deadline: datetime | None = None
        for record in self.records():
            if record["run"] != run_id:
                continue
            if record.get("event") == "end":
                return True, f"run {run_id} ended at {record.get('at')}"
            if record.get("event") == "start":
                deadline = _parse_time(record.get("deadline"))
        if deadline is None:
            begun = started_at(run_id)
            if begun is None:
                return False, f"{run_id!r} is not a run id"
            deadline = begun + FOREIGN_RUN_MAX
            source = f"{FOREIGN_RUN_MAX.total_seconds() / 3600:g} h after its start: it is not in this ledger"
        else:
            source = "its deadline in the ledger"
        if now >= deadline:
            return True, f"run {run_id} is past {_iso(deadline)} ({source})"
        return False, f"run {run_id} may still be running until {_iso(deadline)} ({source})"


def _iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_time(raw: Any) -> datetime | None:
    if not isinstance(raw, str):
        return None
    try:
        return datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return None


# ---------------------------------------------------------------------------------------------- the guard


class Guard:
    """Installed around the client's two creates in the tests' process: a create the plan did not price is refused
    before anything is sent (a model resource beyond the plan's count or with another body; a session without the
    run's prefix or beyond the plan's count), and the id each create returns goes to the ledger at once, and to
    the list of what the current test made (which its clean-up stops)."""

    def __init__(self, plan: Plan, run: Run, ledger: Ledger, base_url: str) -> None:
        self.plan, self.run, self.ledger, self.base_url = plan, run, ledger, base_url
        self.counts = {MODEL_RESOURCE: 0, TRAINING_SESSION: 0}
        self.test = ""
        self.made: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def allow(self, kind: str, body: dict[str, Any]) -> None:
        with self._lock:
            if kind == MODEL_RESOURCE:
                limit = len(self.plan.steps)
                if body != self.plan.request():
                    raise GuardRefusal(
                        f"creating model resource ({self.test}): its body {body} is not the one the plan priced "
                        f"({self.plan.request()}). Change the plan (harness/acceptance.py) so it is priced."
                    )
            else:
                limit = self.plan.sessions
                name = body.get("display_name") or ""
                if not name.startswith(self.run.prefix):
                    raise GuardRefusal(
                        f"creating training session ({self.test}): its display_name {name!r} does not start with "
                        f"the run's prefix {self.run.prefix!r}, the sweeps' proof that it is the run's. Name it "
                        "with run.name(...)."
                    )
            if self.counts[kind] >= limit:
                raise GuardRefusal(
                    f"creating {kind} ({self.test}): the plan priced {limit}, and this would be one more. Add it "
                    "to the plan (harness/acceptance.py) so it is priced."
                )
            self.counts[kind] += 1

    def record(self, kind: str, ident: str) -> None:
        self.ledger.made(self.run, kind, ident, self.base_url, self.test)
        with self._lock:
            self.made.append((kind, ident))


class GuardRefusal(RuntimeError):
    """A create the plan did not price: refused before it was sent."""


# ---------------------------------------------------------------------------------------------- the sweeps


@dataclasses.dataclass(frozen=True)
class Swept:
    kind: str
    id: str
    action: str  # "stopped", "left", "failed"
    why: str

    def line(self) -> str:
        return f"  {self.action} {self.kind} {self.id}: {self.why}"


Stop = Callable[[str, str], None]
"""``stop(kind, id)``: stop and wait until it holds nothing (the providers' own delete); raises on failure."""


def _stop_all(targets: list[tuple[str, str, str]], stop: Stop) -> list[Swept]:
    """Stop ``(kind, id, why)`` targets, the training sessions first (a model resource with a running session
    refuses a stop without force, and the tier never forces), each failure reported, never raised."""
    done = []
    for kind in (TRAINING_SESSION, MODEL_RESOURCE):
        for target_kind, ident, why in targets:
            if target_kind != kind:
                continue
            try:
                stop(kind, ident)
            except Exception as exc:
                done.append(Swept(kind, ident, "failed", f"{why}; the stop failed: {exc}"))
            else:
                done.append(Swept(kind, ident, "stopped", why))
    return done


def sweep_before(client: Any, ledger: Ledger, run: Run, base_url: str, stop: Stop) -> tuple[list[Swept], int]:
    """Before the tests: stop what earlier runs left. An active object (model resource PENDING, CREATING or READY;
    training session CREATING or RUNNING) is stopped only when all of these hold:

    1. the key's user made it (it is in the API's ``created_by=me`` lists);
    2. the run's proof names an earlier run: its id is in the ledger (for this base URL), or, for a training
       session, its ``display_name`` starts with ``acc-<run id>-`` (a model resource has no name: the ledger only);
    3. it was made before this run started (on the API's clock);
    4. that run is over: the ledger has its end, or its deadline has passed (for a run this ledger does not know,
       another machine's, :data:`FOREIGN_RUN_MAX` after the start its id says).

    Anything else is never touched; one that meets 1-3 but not 4 is named as left. Returns what was done and how
    many active objects of the user were not the tier's (left alone, uncounted by id)."""
    now = datetime.now(timezone.utc)
    # The run's start on the API's clock. The offset comes from the Date header, whole seconds: under CLOCK_NOISE
    # it is the header's rounding, not a clock that is off.
    offset = client.clock_offset or 0.0
    begun = run.started + timedelta(seconds=offset if abs(offset) > CLOCK_NOISE else 0.0)
    proven = {m.id: m.run for m in ledger.created(base_url)}
    targets: list[tuple[str, str, str]] = []
    report: list[Swept] = []
    others = 0
    listed = [
        (
            TRAINING_SESSION,
            s.id,
            s.created_at,
            proven.get(s.id) or run_of_name(s.display_name),
            s.display_name,
        )
        for s in client.iter_training_sessions(status=_LIVE_SESSIONS, created_by="me")
    ] + [
        (MODEL_RESOURCE, r.id, r.created_at, proven.get(r.id), None)
        for r in client.iter_model_resources(status=_LIVE_RESOURCES, created_by="me")
    ]
    for kind, ident, created, owner_run, name in listed:
        if owner_run is None:
            others += 1
            continue
        proof = f"in the ledger as run {owner_run}'s" if ident in proven else f"named {name!r}"
        if owner_run == run.id:
            report.append(Swept(kind, ident, "left", f"{proof}: this run's own"))
        elif created >= begun:
            report.append(Swept(kind, ident, "left", f"{proof}, but made after this run started"))
        else:
            over, how = ledger.over(owner_run, now)
            if over:
                targets.append((kind, ident, f"{proof}, made {_iso(created)}: {how}"))
            else:
                report.append(Swept(kind, ident, "left", f"{proof}: {how}"))
    return report + _stop_all(targets, stop), others


def sweep_after(client: Any, ledger: Ledger, run: Run, base_url: str, stop: Stop) -> tuple[list[Swept], int]:
    """After the tests: every object this run made has ended. Its ids are the ledger's lines of this run (each
    read by id: a list may lag) and the training sessions the user's lists show with this run's prefix (a create
    whose answer was lost has no ledger line). Whatever of them is still active (a resource not yet STOPPING, a
    session not yet ended) is stopped; age does not matter, the proof does. Returns what was done (a stop here
    means a test's clean-up missed it) and how many objects of this run were checked."""
    from pulumi_together_rl.client import errors

    ours: dict[str, str] = {m.id: m.kind for m in ledger.created(base_url, run.id)}
    for session in client.iter_training_sessions(status=_LIVE_SESSIONS, created_by="me"):
        if run_of_name(session.display_name) == run.id:
            ours.setdefault(session.id, TRAINING_SESSION)
    targets: list[tuple[str, str, str]] = []
    report: list[Swept] = []
    for ident, kind in ours.items():
        try:
            live = (
                client.get_model_resource(ident)
                if kind == MODEL_RESOURCE
                else client.get_training_session(ident)
            )
        except errors.NotFound:
            continue
        except Exception as exc:
            report.append(Swept(kind, ident, "failed", f"this run's; reading it failed: {exc}"))
            continue
        if live.status.short in _ACTIVE[kind]:
            targets.append(
                (kind, ident, f"this run's, still {live.status.short}: a test's clean-up missed it")
            )
    return report + _stop_all(targets, stop), len(ours)


_LIVE_RESOURCES = ("PENDING", "CREATING", "READY")
_LIVE_SESSIONS = ("CREATING", "RUNNING")
_ACTIVE = {MODEL_RESOURCE: _LIVE_RESOURCES, TRAINING_SESSION: (*_LIVE_SESSIONS, "STOPPING")}
"""What the after sweep stops: a model resource that still bills or may (billing stops at STOPPING), a session
that still holds its slot."""


def provider_stop(kind: str, ident: str) -> None:
    """The providers' own delete (stop without force, then wait until it holds nothing), with the tier's
    ``delete_timeout``; configured from the environment (``TOGETHER_API_KEY``, ``TOGETHER_BASE_URL``)."""
    providers()[kind].delete(ident, {"delete_timeout": STOP_TIMEOUT})


def providers() -> dict[str, Any]:
    """The two providers, configured as the dynamic-provider server configures them, from no stack config: the
    key and base URL come from the environment."""
    from pulumi.dynamic import Config, ConfigureRequest

    from pulumi_together_rl.resources.model_resource import _ModelResourceProvider
    from pulumi_together_rl.resources.training_session import _TrainingSessionProvider

    made = {MODEL_RESOURCE: _ModelResourceProvider(), TRAINING_SESSION: _TrainingSessionProvider()}
    for provider in made.values():
        provider.configure(ConfigureRequest(config=Config(raw_config={}, project_name="acceptance")))
    return made


# ------------------------------------------------------------------------------------ what a test works with


@dataclasses.dataclass(frozen=True)
class Context:
    """The run as the tests see it."""

    run: Run
    plan: Plan
    ledger: Ledger
    base_url: str


class Deadline:
    """Seconds left of a budget that started when it was made."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.start = seconds, time.monotonic()

    def spent(self) -> float:
        return time.monotonic() - self.start

    def left(self) -> float:
        return self.seconds - self.spent()


@dataclasses.dataclass
class Live:
    """One test's world: the run, its plan step, the providers, a client, and what the test made so far."""

    context: Context
    step: Step
    providers: dict[str, Any]
    client: Any  # pulumi_together_rl.client.TogetherRL
    made: list[tuple[str, str]]

    @property
    def run(self) -> Run:
        return self.context.run

    @property
    def resources(self) -> Any:
        return self.providers[MODEL_RESOURCE]

    @property
    def sessions(self) -> Any:
        return self.providers[TRAINING_SESSION]

    def owner(self, name: str) -> str:
        """A declaration of this run (``org/project/stack/name``), as a program's resource class gives it."""
        return f"organization/acceptance/{self.run.id}/{name}"
