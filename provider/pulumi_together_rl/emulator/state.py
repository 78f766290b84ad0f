"""The emulator's state machine: records, lifecycle transitions, limits, settings and the clock. No HTTP here.

Transitions are lazy and deterministic: there is no background thread. Every public verb first advances the
world to "now" (:meth:`EmulatorState.advance_to_now`), processing due transitions in time order, each stamped
with the instant it was due (not the instant it was observed). The clock is real UTC time plus an offset
that tests move forward with :meth:`EmulatorState.advance_clock`.

A state's duration is read from the settings' ``timings`` when the transition is evaluated, so changing a
timing also moves objects already in that state (a huge ``resource_pending`` holds resources in PENDING;
setting it back to 0 releases them).

Every verb runs under one lock and returns deep copies, so callers never share a record with the state.
Domain failures are raised as :class:`DomainError` subclasses; the HTTP layer maps them to the error envelope.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import math
import re
import threading
import uuid
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta, timezone
from typing import Any

# ---------------------------------------------------------------------------------------------- constants

R_PENDING = "MODEL_RESOURCES_STATUS_PENDING"
R_CREATING = "MODEL_RESOURCES_STATUS_CREATING"
R_READY = "MODEL_RESOURCES_STATUS_READY"
R_ERROR = "MODEL_RESOURCES_STATUS_ERROR"
R_STOPPED = "MODEL_RESOURCES_STATUS_STOPPED"
R_STOPPING = "MODEL_RESOURCES_STATUS_STOPPING"
RESOURCE_STATUSES = (R_PENDING, R_CREATING, R_READY, R_ERROR, R_STOPPED, R_STOPPING)

S_CREATING = "TRAINING_SESSION_STATUS_CREATING"
S_RUNNING = "TRAINING_SESSION_STATUS_RUNNING"
S_STOPPED = "TRAINING_SESSION_STATUS_STOPPED"
S_STOPPING = "TRAINING_SESSION_STATUS_STOPPING"
S_ERROR = "TRAINING_SESSION_STATUS_ERROR"
S_EXPIRED = "TRAINING_SESSION_STATUS_EXPIRED"
#: The list filter accepts these (UNSPECIFIED is only a proto default).
SESSION_STATUSES = (S_CREATING, S_RUNNING, S_STOPPED, S_STOPPING, S_ERROR, S_EXPIRED)

#: Sessions that occupy a slot on their resource (and block a stop without force).
SESSION_HOLDS_SLOT = frozenset({S_CREATING, S_RUNNING, S_STOPPING})
SESSION_TERMINAL = frozenset({S_STOPPED, S_ERROR, S_EXPIRED})
RESOURCE_TERMINAL = frozenset({R_STOPPED, R_ERROR})

RESOURCE_KIND = "model_resource"
SESSION_KIND = "training_session"

GPU_TYPES = ("H100-80GB", "B200-SXM")  # what a ModelResources object may report
CREATE_GPU_TYPES = ("B200-SXM",)  # the only GPU type the API accepts on create today
#: The only GPU type the SDK's RlSupportedModel accepts (``default_gpu_type`` and ``compute_configs[].gpu_type``
#: are ``Literal["B200-SXM"]`` in together 3.1.1), so a custom supported-models table is held to it: a table
#: naming H100-80GB would make ``GET /v1/rl/supported-models`` unreadable by the SDK.
SUPPORTED_MODEL_GPU_TYPES = ("B200-SXM",)
MUON_STRATEGIES = (
    "MUON_SCALING_STRATEGY_UNSPECIFIED",
    "MUON_SCALING_STRATEGY_MATCH_ADAM",
    "MUON_SCALING_STRATEGY_ORIGINAL",
)
BASE_WEIGHTS_REF = re.compile(r"^together://ml_[A-Za-z0-9]+(@rv_[A-Za-z0-9]+)?$")
WANDB_KEYS = ("entity", "project", "group", "run_id", "run_name", "url")

INACTIVE_TIMEOUT_DEFAULT = 3600
INACTIVE_TIMEOUT_RANGE = (300, 86400)
EXTEND_RANGE = (60, 86400)
LIMIT_RANGE = (1, 100)
LIMIT_DEFAULT = 20
DISPLAY_NAME_MAX = 128
LORA_RANK_MAX = 64
LORA_ALPHA_RANGE = (1, 128)
LORA_DEFAULTS = {"rank": 32, "alpha": 64, "dropout": 0.0, "train_unembed": True}
#: Retry-After (seconds) of a session-cap 429 when no slot is about to free up.
CAP_RETRY_AFTER = 30

TIMING_KEYS = (
    "resource_pending",
    "resource_creating",
    "resource_stopping",
    "session_creating",
    "session_stopping",
)
DEFAULT_SETTINGS: dict[str, Any] = {
    "timings": {
        "resource_pending": 2.0,
        "resource_creating": 3.0,
        "resource_stopping": 1.0,
        "session_creating": 1.0,
        "session_stopping": 1.0,
    },
    "api_key": None,
    "user_id": "user_emulator",
    "conflict_status": 409,
    "session_cap_lora": 5,
    "session_cap_full": 1,
    "queue_position": None,
    "supported_models": None,
}

_SAMPLING = {"logprobs": 1, "max_tokens": 100, "n": 1, "temperature": 1.0}
#: The built-in `GET /v1/rl/supported-models` table (used while settings.supported_models is null).
BUILTIN_SUPPORTED_MODELS: list[dict[str, Any]] = [
    {
        "base_model": "Qwen/Qwen3.5-4B",
        "default_gpu_type": "B200-SXM",
        "compute_configs": [
            {
                "gpu_type": "B200-SXM",
                "generator_config": {"context_length": 32768, "sampling_defaults": dict(_SAMPLING)},
                "trainer_config": {
                    "lora": {"max_batch_size": 64, "max_rank": 64, "max_seq_length": 32768},
                    "full": {"max_batch_size": 32, "max_seq_length": 16384},
                },
            }
        ],
    },
    {
        "base_model": "Qwen/Qwen3.5-35B-A3B",
        "default_gpu_type": "B200-SXM",
        "compute_configs": [
            {
                "gpu_type": "B200-SXM",
                "generator_config": {"context_length": 65536, "sampling_defaults": dict(_SAMPLING)},
                "trainer_config": {"lora": {"max_batch_size": 32, "max_rank": 32, "max_seq_length": 32768}},
            }
        ],
    },
    {
        # Trainer only (SFT/DPO): no generator_config, so num_generator_replicas must be 0.
        "base_model": "Qwen/Qwen3-0.6B",
        "default_gpu_type": "B200-SXM",
        "compute_configs": [
            {
                "gpu_type": "B200-SXM",
                "trainer_config": {
                    "lora": {"max_batch_size": 128, "max_rank": 64, "max_seq_length": 16384},
                    "full": {"max_batch_size": 64, "max_seq_length": 16384},
                },
            }
        ],
    },
]

#: estimate-cost: on-demand USD per GPU-hour, and GPUs per part of a resource (unknown models: 1 GPU each).
GPU_PRICE_PER_HOUR = {"B200-SXM": 5.50, "H100-80GB": 3.25}
MODEL_GPUS = {
    "Qwen/Qwen3.5-4B": {"trainer_lora": 1, "trainer_full": 2, "generator": 1},
    "Qwen/Qwen3.5-35B-A3B": {"trainer_lora": 4, "trainer_full": 8, "generator": 2},
    "Qwen/Qwen3-0.6B": {"trainer_lora": 1, "trainer_full": 1, "generator": 1},
}

#: The error codes each kind's ``error.code`` may carry (the SDK's ModelResourcesErrorCode / SessionErrorCode
#: enums): ``fail-next`` refuses any other code, which the SDK could not parse.
ERROR_CODES = {
    "model_resource": (
        "MODEL_RESOURCES_ERROR_CODE_CAPACITY_WAIT_TIMEOUT",
        "MODEL_RESOURCES_ERROR_CODE_PROVISIONING_FAILED",
        "MODEL_RESOURCES_ERROR_CODE_RESOURCE_UNAVAILABLE",
    ),
    "training_session": (
        "TRAINING_SESSION_ERROR_CODE_RESOURCE_UNAVAILABLE",
        "TRAINING_SESSION_ERROR_CODE_RESOURCE_AT_CAPACITY",
        "TRAINING_SESSION_ERROR_CODE_TIMED_OUT",
        "TRAINING_SESSION_ERROR_CODE_SESSION_FAILED",
    ),
}

DEFAULT_ERROR_MESSAGES = {
    "MODEL_RESOURCES_ERROR_CODE_CAPACITY_WAIT_TIMEOUT": (
        "No GPU capacity became available for the model resource in time."
    ),
    "MODEL_RESOURCES_ERROR_CODE_PROVISIONING_FAILED": "The model resource could not be provisioned.",
    "MODEL_RESOURCES_ERROR_CODE_RESOURCE_UNAVAILABLE": "The model resource became unavailable.",
    "TRAINING_SESSION_ERROR_CODE_RESOURCE_UNAVAILABLE": (
        "The session could not start because the selected resource is unavailable."
    ),
    "TRAINING_SESSION_ERROR_CODE_RESOURCE_AT_CAPACITY": (
        "The session could not start because the selected resource has no available capacity."
    ),
    "TRAINING_SESSION_ERROR_CODE_TIMED_OUT": "The session did not start in time.",
    "TRAINING_SESSION_ERROR_CODE_SESSION_FAILED": "The session failed.",
}
SESSION_RESOURCE_LOST_CODE = "TRAINING_SESSION_ERROR_CODE_RESOURCE_UNAVAILABLE"


# ------------------------------------------------------------------------------------------------ errors


class DomainError(Exception):
    """A refusal by the emulated API. The HTTP layer turns it into the error envelope, once."""

    code = "error"

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code


class InvalidRequest(DomainError, ValueError):
    """400: a body, query or setting failed validation; ``param`` names the field."""

    code = "invalid_value"


class NotFound(DomainError):
    """404: no object with that id."""

    code = "not_found"


class Conflict(DomainError):
    """The object's state refuses the call (HTTP status: settings.conflict_status)."""

    code = "conflict"


class CapReached(DomainError):
    """429: the resource's session cap is full. ``retry_after`` is a hint in seconds."""

    code = "session_limit_reached"

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message, param="model_resources_id")
        self.retry_after = retry_after


# ------------------------------------------------------------------------------------------------- clock


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class Clock:
    """Real UTC time (or an injected source) plus an offset that only moves forward."""

    def __init__(self, wall: Callable[[], datetime] = utcnow) -> None:
        self._wall = wall
        self.offset = 0.0

    def now(self) -> datetime:
        return self._wall() + timedelta(seconds=self.offset)


def iso(dt: datetime) -> str:
    """RFC 3339 in UTC with a ``Z``, microsecond precision (what pydantic and the SDK parse)."""
    return dt.astimezone(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


# ----------------------------------------------------------------------------------------------- records


@dataclasses.dataclass
class ModelResourceRecord:
    id: str
    seq: int
    base_model: str
    gpu_type: str
    num_generator_replicas: int
    lora_enabled: bool
    optimizer_config: dict[str, Any]
    inactive_timeout: int
    base_weights_ref: str | None
    created_by: str
    created_at: datetime
    updated_at: datetime
    status: str
    entered_at: datetime
    expires_at: datetime | None = None
    error: dict[str, Any] | None = None
    #: Filled on the copies handed out: place in the GPU queue while PENDING.
    queue_position: int | None = None


@dataclasses.dataclass
class TrainingSessionRecord:
    id: str
    seq: int
    model_resources_id: str
    base_model: str
    created_by: str
    created_at: datetime
    updated_at: datetime
    status: str
    entered_at: datetime
    display_name: str | None = None
    wandb: dict[str, str] = dataclasses.field(default_factory=dict)
    lora_config: dict[str, Any] | None = None
    resume_from_checkpoint_id: str | None = None
    load_optimizer: bool | None = None
    error: dict[str, Any] | None = None


@dataclasses.dataclass
class ArmedFailure:
    id: str
    kind: str
    code: str
    message: str
    target: str | None  # object id, or None = the next transition of any object of that kind

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "code": self.code,
            "message": self.message,
            "target": self.target,
        }


@dataclasses.dataclass
class ResourceSpec:
    """A validated create / estimate-cost body, with server defaults filled in."""

    base_model: str
    gpu_type: str
    num_generator_replicas: int
    lora_enabled: bool
    optimizer_config: dict[str, Any]
    inactive_timeout: int
    base_weights_ref: str | None


@dataclasses.dataclass
class Page:
    data: list[Any]
    limit: int
    has_more: bool
    next_cursor: str


# ------------------------------------------------------------------------------------------------ state


class EmulatorState:
    """All objects, settings and the clock of one emulated Together RL account."""

    def __init__(
        self, settings: dict[str, Any] | None = None, *, wall: Callable[[], datetime] = utcnow
    ) -> None:
        self._lock = threading.RLock()
        self.clock = Clock(wall)
        base = copy.deepcopy(DEFAULT_SETTINGS)
        self._initial = _merge_settings(base, settings or {})
        self._settings = copy.deepcopy(self._initial)
        self._resources: dict[str, ModelResourceRecord] = {}
        self._sessions: dict[str, TrainingSessionRecord] = {}
        self._failures: list[ArmedFailure] = []
        self._seq = 0
        self._last_created: datetime | None = None

    # ------------------------------------------------------------------------------------ control verbs

    def reset(self) -> None:
        """Forget every object and armed failure; restore the start settings and a zero clock offset."""
        with self._lock:
            self._resources.clear()
            self._sessions.clear()
            self._failures.clear()
            self._settings = copy.deepcopy(self._initial)
            self.clock.offset = 0.0
            self._last_created = None

    @property
    def settings(self) -> dict[str, Any]:
        with self._lock:
            return copy.deepcopy(self._settings)

    def setting(self, key: str) -> Any:
        """One setting (a copy), cheaper than :attr:`settings` on every request."""
        with self._lock:
            return copy.deepcopy(self._settings[key])

    def update_settings(self, patch: dict[str, Any]) -> dict[str, Any]:
        """Apply a partial settings object (``timings`` merge key by key); returns the new settings."""
        with self._lock:
            self._settings = _merge_settings(self._settings, patch)
            return copy.deepcopy(self._settings)

    def now(self) -> datetime:
        return self.clock.now()

    def advance_clock(self, seconds: float) -> datetime:
        """Move the emulator clock forward and process what became due. Returns the new now."""
        if not _is_number(seconds) or seconds < 0 or not math.isfinite(seconds):
            raise InvalidRequest("seconds must be a finite number >= 0.", param="seconds")
        with self._lock:
            self.clock.offset += float(seconds)
            now = self.clock.now()
            self._advance(now)
            return now

    def fail_next(
        self, kind: str, code: str, message: str | None = None, target: str | None = None
    ) -> dict[str, Any]:
        """Make the next lifecycle transition of ``target`` (or of any object of ``kind``) land in ERROR.

        Without a target, only provisioning transitions fire it (PENDING -> CREATING, CREATING -> READY,
        session CREATING -> RUNNING). With a target that is READY / RUNNING (no transition of its own ahead),
        the failure happens at once; a target in STOPPING fails instead of reaching STOPPED.
        """
        if kind not in (RESOURCE_KIND, SESSION_KIND):
            raise InvalidRequest(f"kind must be {RESOURCE_KIND!r} or {SESSION_KIND!r}.", param="kind")
        if code not in ERROR_CODES[kind]:
            raise InvalidRequest(
                f"code must be one of the {kind} error codes: {', '.join(ERROR_CODES[kind])}.", param="code"
            )
        if message is not None and not isinstance(message, str):
            raise InvalidRequest("message must be a string.", param="message")
        with self._lock:
            now = self.clock.now()
            self._advance(now)
            armed = ArmedFailure(
                id=f"fail_{uuid.uuid4().hex[:12]}",
                kind=kind,
                code=code,
                message=message or DEFAULT_ERROR_MESSAGES[code],
                target=target,
            )
            if target is not None:
                table: dict[str, Any] = self._resources if kind == RESOURCE_KIND else self._sessions
                obj = table.get(target)
                if obj is None:
                    raise NotFound(f"No {kind.replace('_', ' ')} with id {target!r}.", param="id")
                if obj.status in RESOURCE_TERMINAL or obj.status in SESSION_TERMINAL:
                    what = kind.replace("_", " ")
                    raise Conflict(
                        f"arming a failure for {what} ({target}): it is already {obj.status}.",
                        code="already_terminal",
                    )
                if obj.status in (R_READY, S_RUNNING):
                    self._fail(obj, now, armed.code, armed.message)
                    return armed.to_dict()
            self._failures.append(armed)
            return armed.to_dict()

    def snapshot(self) -> tuple[list[ModelResourceRecord], list[TrainingSessionRecord]]:
        """Every object (advanced to now), newest first."""
        with self._lock:
            self._advance(self.clock.now())
            resources = [self._resource_copy(r) for r in _newest_first(self._resources.values())]
            sessions = [copy.deepcopy(s) for s in _newest_first(self._sessions.values())]
            return resources, sessions

    @property
    def user_id(self) -> str:
        with self._lock:
            return str(self._settings["user_id"])

    # --------------------------------------------------------------------------------- model resources

    def supported_models(self) -> list[dict[str, Any]]:
        with self._lock:
            return copy.deepcopy(self._models())

    def resolve_resource_spec(
        self,
        *,
        base_model: str,
        base_weights_ref: str | None = None,
        gpu_type: str | None = None,
        num_generator_replicas: int | None = None,
        inactive_timeout: int | None = None,
        lora_enabled: bool | None = None,
        optimizer_config: dict[str, Any] | None = None,
    ) -> ResourceSpec:
        """Validate a create / estimate-cost body against the supported-models table; fill defaults."""
        with self._lock:
            model = self._model(base_model)
            if model is None:
                known = ", ".join(m["base_model"] for m in self._models())
                raise InvalidRequest(
                    f"base_model {base_model!r} is not supported for RL. Supported: {known}.",
                    param="base_model",
                    code="unsupported_model",
                )
            if gpu_type is None:
                gpu_type = str(model.get("default_gpu_type") or CREATE_GPU_TYPES[0])
            elif gpu_type not in CREATE_GPU_TYPES:
                raise InvalidRequest(
                    f"compute_config.gpu_type must be one of {', '.join(CREATE_GPU_TYPES)}.",
                    param="compute_config.gpu_type",
                )
            compute = next(
                (c for c in model.get("compute_configs") or [] if c.get("gpu_type") == gpu_type), None
            )
            if compute is None:
                raise InvalidRequest(
                    f"{base_model} has no compute configuration for gpu_type {gpu_type}.",
                    param="compute_config.gpu_type",
                )
            trainer = compute.get("trainer_config") or {}
            lora = True if lora_enabled is None else lora_enabled
            if lora and not trainer.get("lora"):
                raise InvalidRequest(f"{base_model} does not support LoRA training.", param="lora_enabled")
            if not lora and not trainer.get("full"):
                raise InvalidRequest(
                    f"{base_model} does not support full-weight training (lora_enabled=false).",
                    param="lora_enabled",
                )
            has_generator = bool(compute.get("generator_config"))
            if num_generator_replicas is None:
                num_generator_replicas = 1 if has_generator else 0
            elif num_generator_replicas < 0:
                raise InvalidRequest(
                    "compute_config.num_generator_replicas must be >= 0.",
                    param="compute_config.num_generator_replicas",
                )
            elif num_generator_replicas > 0 and not has_generator:
                raise InvalidRequest(
                    f"{base_model} cannot run generator replicas on {gpu_type} (trainer only): "
                    "set compute_config.num_generator_replicas to 0.",
                    param="compute_config.num_generator_replicas",
                )
            if inactive_timeout is None:
                inactive_timeout = INACTIVE_TIMEOUT_DEFAULT
            elif not INACTIVE_TIMEOUT_RANGE[0] <= inactive_timeout <= INACTIVE_TIMEOUT_RANGE[1]:
                raise InvalidRequest(
                    f"inactive_timeout must be between {INACTIVE_TIMEOUT_RANGE[0]} and "
                    f"{INACTIVE_TIMEOUT_RANGE[1]} seconds.",
                    param="inactive_timeout",
                )
            if base_weights_ref is not None:
                if len(base_weights_ref) > 256 or not BASE_WEIGHTS_REF.match(base_weights_ref):
                    raise InvalidRequest(
                        "base_weights_ref must match ^together://ml_[A-Za-z0-9]+(@rv_[A-Za-z0-9]+)?$ "
                        "(at most 256 characters).",
                        param="base_weights_ref",
                    )
                if "@rv_" not in base_weights_ref:
                    base_weights_ref = f"{base_weights_ref}@rv_{_revision_of(base_weights_ref)}"
            return ResourceSpec(
                base_model=base_model,
                gpu_type=gpu_type,
                num_generator_replicas=num_generator_replicas,
                lora_enabled=lora,
                optimizer_config=_check_optimizer(optimizer_config),
                inactive_timeout=inactive_timeout,
                base_weights_ref=base_weights_ref,
            )

    def estimate_cost(self, spec: ResourceSpec) -> dict[str, Any]:
        gpus = MODEL_GPUS.get(spec.base_model, {"trainer_lora": 1, "trainer_full": 1, "generator": 1})
        count = gpus["trainer_lora" if spec.lora_enabled else "trainer_full"]
        count += spec.num_generator_replicas * gpus["generator"]
        price = round(count * GPU_PRICE_PER_HOUR.get(spec.gpu_type, 5.0), 2)
        return {"currency": "USD", "price_per_hour": price}

    def create_model_resource(self, spec: ResourceSpec) -> ModelResourceRecord:
        with self._lock:
            now = self.clock.now()
            self._advance(now)
            created = self._creation_time(now)
            rec = ModelResourceRecord(
                id=str(uuid.uuid4()),
                seq=self._next_seq(),
                base_model=spec.base_model,
                gpu_type=spec.gpu_type,
                num_generator_replicas=spec.num_generator_replicas,
                lora_enabled=spec.lora_enabled,
                optimizer_config=copy.deepcopy(spec.optimizer_config),
                inactive_timeout=spec.inactive_timeout,
                base_weights_ref=spec.base_weights_ref,
                created_by=str(self._settings["user_id"]),
                created_at=created,
                updated_at=created,
                status=R_PENDING,
                entered_at=created,
            )
            self._resources[rec.id] = rec
            return self._resource_copy(rec)

    def get_model_resource(self, resource_id: str) -> ModelResourceRecord:
        with self._lock:
            self._advance(self.clock.now())
            return self._resource_copy(self._resource(resource_id))

    def list_model_resources(
        self,
        *,
        status: Iterable[str] | None = None,
        created_by: str | None = None,
        limit: int | None = None,
        after: str | None = None,
    ) -> Page:
        statuses = _check_statuses(status, RESOURCE_STATUSES)
        with self._lock:
            self._advance(self.clock.now())
            items = [
                r
                for r in self._resources.values()
                if (statuses is None or r.status in statuses)
                and self._created_by_matches(r.created_by, created_by)
            ]
            page = _paginate(items, self._resources, limit, after)
            page.data = [self._resource_copy(r) for r in page.data]
            return page

    def stop_model_resource(self, resource_id: str, *, force: bool = False) -> ModelResourceRecord:
        with self._lock:
            now = self.clock.now()
            self._advance(now)
            rec = self._resource(resource_id)
            if rec.status in (R_PENDING, R_CREATING, R_READY):
                attached = [
                    s
                    for s in _oldest_first(self._sessions.values())
                    if s.model_resources_id == rec.id and s.status in SESSION_HOLDS_SLOT
                ]
                if attached and not force:
                    ids = ", ".join(s.id for s in attached)
                    raise Conflict(
                        f"stopping model resource ({rec.id}): training sessions are still attached: {ids}. "
                        "Stop them first, or stop with force=true to stop them too.",
                        code="sessions_attached",
                    )
                for s in attached:
                    if s.status != S_STOPPING:
                        self._set_session(s, S_STOPPING, now)
                self._set_resource(rec, R_STOPPING, now)
            # Already STOPPING / STOPPED / ERROR: harmless, answered unchanged.
            return self._resource_copy(rec)

    def extend_model_resource_expiry(self, resource_id: str, seconds: int) -> ModelResourceRecord:
        with self._lock:
            now = self.clock.now()
            self._advance(now)
            rec = self._resource(resource_id)
            if not EXTEND_RANGE[0] <= seconds <= EXTEND_RANGE[1]:
                raise InvalidRequest(
                    f"seconds must be between {EXTEND_RANGE[0]} and {EXTEND_RANGE[1]}.", param="seconds"
                )
            if rec.status != R_READY:
                raise Conflict(
                    f"extending the expiry of model resource ({rec.id}): it is {rec.status}, not READY. "
                    "Only a READY resource can be kept alive.",
                    code="resource_not_ready",
                )
            target = now + timedelta(seconds=seconds)
            if rec.expires_at is None or target > rec.expires_at:
                rec.expires_at = target
            rec.updated_at = now
            return self._resource_copy(rec)

    # ------------------------------------------------------------------------------- training sessions

    def create_training_session(
        self,
        *,
        model_resources_id: str,
        display_name: str | None = None,
        load_optimizer: bool | None = None,
        lora_config: dict[str, Any] | None = None,
        wandb: dict[str, str] | None = None,
        resume_from_checkpoint_id: str | None = None,
    ) -> TrainingSessionRecord:
        if display_name is not None and len(display_name) > DISPLAY_NAME_MAX:
            raise InvalidRequest(
                f"display_name must be at most {DISPLAY_NAME_MAX} characters.", param="display_name"
            )
        with self._lock:
            now = self.clock.now()
            self._advance(now)
            res = self._resources.get(model_resources_id)
            if res is None:
                raise NotFound(
                    f"No model resource with id {model_resources_id!r}.", param="model_resources_id"
                )
            if lora_config is not None and not res.lora_enabled:
                raise InvalidRequest(
                    f"model resource ({res.id}) is a full-weight resource (lora_enabled=false): "
                    "lora_config is only accepted on LoRA resources.",
                    param="lora_config",
                )
            lora = self._check_lora(res, lora_config) if res.lora_enabled else None
            if res.status != R_READY:
                raise Conflict(
                    f"creating a training session on model resource ({res.id}): it is {res.status}, "
                    "not READY. Wait until the resource is READY.",
                    code="resource_not_ready",
                )
            cap = int(self._settings["session_cap_lora" if res.lora_enabled else "session_cap_full"])
            holding = [
                s
                for s in self._sessions.values()
                if s.model_resources_id == res.id and s.status in SESSION_HOLDS_SLOT
            ]
            if len(holding) >= cap:
                raise CapReached(
                    f"creating a training session on model resource ({res.id}): the resource already holds "
                    f"{len(holding)} of its {cap} session slots. Stop a session first.",
                    retry_after=self._cap_retry_after(holding, now),
                )
            created = self._creation_time(now)
            rec = TrainingSessionRecord(
                id=str(uuid.uuid4()),
                seq=self._next_seq(),
                model_resources_id=res.id,
                base_model=res.base_model,
                created_by=str(self._settings["user_id"]),
                created_at=created,
                updated_at=created,
                status=S_CREATING,
                entered_at=created,
                display_name=display_name or None,
                wandb={k: v for k, v in (wandb or {}).items() if v != ""},
                lora_config=lora,
                resume_from_checkpoint_id=resume_from_checkpoint_id or None,
                load_optimizer=load_optimizer,
            )
            self._sessions[rec.id] = rec
            # A session start is activity: it pushes the resource's expiry out (never earlier).
            deadline = created + timedelta(seconds=res.inactive_timeout)
            if res.expires_at is None or deadline > res.expires_at:
                res.expires_at = deadline
            return copy.deepcopy(rec)

    def get_training_session(self, session_id: str) -> TrainingSessionRecord:
        with self._lock:
            self._advance(self.clock.now())
            return copy.deepcopy(self._session(session_id))

    def list_training_sessions(
        self,
        *,
        status: Iterable[str] | None = None,
        model_resources_id: str | None = None,
        created_by: str | None = None,
        limit: int | None = None,
        after: str | None = None,
    ) -> Page:
        statuses = _check_statuses(status, SESSION_STATUSES)
        with self._lock:
            self._advance(self.clock.now())
            items = [
                s
                for s in self._sessions.values()
                if (statuses is None or s.status in statuses)
                and (model_resources_id is None or s.model_resources_id == model_resources_id)
                and self._created_by_matches(s.created_by, created_by)
            ]
            page = _paginate(items, self._sessions, limit, after)
            page.data = [copy.deepcopy(s) for s in page.data]
            return page

    def update_training_session(
        self,
        session_id: str,
        *,
        display_name: str | None = None,
        wandb: dict[str, str] | None = None,
    ) -> TrainingSessionRecord:
        """PATCH: ``None`` = omitted (unchanged), ``""`` clears; ``wandb`` merges key by key."""
        if display_name is not None and len(display_name) > DISPLAY_NAME_MAX:
            raise InvalidRequest(
                f"display_name must be at most {DISPLAY_NAME_MAX} characters.", param="display_name"
            )
        with self._lock:
            now = self.clock.now()
            self._advance(now)
            rec = self._session(session_id)
            changed = False
            if display_name is not None:
                rec.display_name = display_name or None
                changed = True
            for key, value in (wandb or {}).items():
                if value == "":
                    rec.wandb.pop(key, None)
                else:
                    rec.wandb[key] = value
                changed = True
            if changed:
                rec.updated_at = now
            return copy.deepcopy(rec)

    def stop_training_session(self, session_id: str) -> TrainingSessionRecord:
        with self._lock:
            now = self.clock.now()
            self._advance(now)
            rec = self._session(session_id)
            if rec.status in (S_CREATING, S_RUNNING):
                self._set_session(rec, S_STOPPING, now)
            # STOPPING or terminal: harmless, answered unchanged.
            return copy.deepcopy(rec)

    # ------------------------------------------------------------------------------------------ helpers

    def advance_to_now(self) -> datetime:
        with self._lock:
            now = self.clock.now()
            self._advance(now)
            return now

    def _advance(self, now: datetime) -> None:
        """Process every transition due at or before ``now``, earliest first (ties: creation order)."""
        while True:
            best: tuple[datetime, int, Any] | None = None
            for obj in (*self._resources.values(), *self._sessions.values()):
                due = self._due(obj)
                if due is not None and due <= now and (best is None or (due, obj.seq) < best[:2]):
                    best = (due, obj.seq, obj)
            if best is None:
                return
            self._transition(best[2], best[0])

    def _due(self, obj: ModelResourceRecord | TrainingSessionRecord) -> datetime | None:
        t = self._settings["timings"]
        if isinstance(obj, ModelResourceRecord):
            if obj.status == R_PENDING:
                return obj.entered_at + timedelta(seconds=t["resource_pending"])
            if obj.status == R_CREATING:
                return obj.entered_at + timedelta(seconds=t["resource_creating"])
            if obj.status == R_READY:
                return obj.expires_at
            if obj.status == R_STOPPING:
                # A forced stop leaves its sessions STOPPING: the resource is not STOPPED before they are.
                due = obj.entered_at + timedelta(seconds=t["resource_stopping"])
                for s in self._stopping_sessions(obj):
                    due = max(due, s.entered_at + timedelta(seconds=t["session_stopping"]))
                return due
            return None
        if obj.status == S_CREATING:
            return obj.entered_at + timedelta(seconds=t["session_creating"])
        if obj.status == S_STOPPING:
            return obj.entered_at + timedelta(seconds=t["session_stopping"])
        return None

    def _transition(self, obj: ModelResourceRecord | TrainingSessionRecord, at: datetime) -> None:
        provisioning = obj.status in (R_PENDING, R_CREATING, S_CREATING)
        failure = self._take_failure(obj, provisioning)
        if failure is not None:
            self._fail(obj, at, failure.code, failure.message)
            return
        if isinstance(obj, ModelResourceRecord):
            if obj.status == R_PENDING:
                self._set_resource(obj, R_CREATING, at)
            elif obj.status == R_CREATING:
                self._set_resource(obj, R_READY, at)
                obj.expires_at = at + timedelta(seconds=obj.inactive_timeout)
            elif obj.status == R_READY:  # idle past expires_at: stop for inactivity, sessions expire
                self._end_sessions(obj, at, S_EXPIRED)
                self._set_resource(obj, R_STOPPING, at)
            elif obj.status == R_STOPPING:
                # Its STOPPING sessions are due at or before `at` (see _due); on a tie they go first, through
                # _transition so that a failure armed for one of them still fires.
                for s in self._stopping_sessions(obj):
                    self._transition(s, at)
                self._set_resource(obj, R_STOPPED, at)
        elif obj.status == S_CREATING:
            self._set_session(obj, S_RUNNING, at)
        elif obj.status == S_STOPPING:
            self._set_session(obj, S_STOPPED, at)

    def _stopping_sessions(self, res: ModelResourceRecord) -> list[TrainingSessionRecord]:
        return [
            s
            for s in _oldest_first(self._sessions.values())
            if s.model_resources_id == res.id and s.status == S_STOPPING
        ]

    def _take_failure(
        self, obj: ModelResourceRecord | TrainingSessionRecord, provisioning: bool
    ) -> ArmedFailure | None:
        kind = RESOURCE_KIND if isinstance(obj, ModelResourceRecord) else SESSION_KIND
        for i, f in enumerate(self._failures):
            if f.kind == kind and (f.target == obj.id or (f.target is None and provisioning)):
                return self._failures.pop(i)
        return None

    def _fail(
        self, obj: ModelResourceRecord | TrainingSessionRecord, at: datetime, code: str, message: str
    ) -> None:
        obj.error = {"code": code, "message": message, "occurred_at": at}
        if isinstance(obj, ModelResourceRecord):
            self._end_sessions(obj, at, S_ERROR)
            self._set_resource(obj, R_ERROR, at)
        else:
            self._set_session(obj, S_ERROR, at)

    def _end_sessions(self, res: ModelResourceRecord, at: datetime, status: str) -> None:
        """The resource went away: live sessions end in ``status``; those already stopping finish STOPPED."""
        for s in _oldest_first(self._sessions.values()):
            if s.model_resources_id != res.id or s.status not in SESSION_HOLDS_SLOT:
                continue
            if s.status == S_STOPPING:
                self._set_session(s, S_STOPPED, at)
                continue
            if status == S_ERROR:
                s.error = {
                    "code": SESSION_RESOURCE_LOST_CODE,
                    "message": DEFAULT_ERROR_MESSAGES[SESSION_RESOURCE_LOST_CODE],
                    "occurred_at": at,
                }
            self._set_session(s, status, at)

    @staticmethod
    def _set_resource(rec: ModelResourceRecord, status: str, at: datetime) -> None:
        rec.status = status
        rec.entered_at = at
        rec.updated_at = at
        if status != R_READY:
            rec.expires_at = None

    @staticmethod
    def _set_session(rec: TrainingSessionRecord, status: str, at: datetime) -> None:
        rec.status = status
        rec.entered_at = at
        rec.updated_at = at

    def _cap_retry_after(self, holding: list[TrainingSessionRecord], now: datetime) -> int:
        stopping = [s for s in holding if s.status == S_STOPPING]
        if not stopping:
            return CAP_RETRY_AFTER
        due = min(s.entered_at for s in stopping) + timedelta(
            seconds=self._settings["timings"]["session_stopping"]
        )
        return max(1, math.ceil((due - now).total_seconds()))

    def _check_lora(self, res: ModelResourceRecord, given: dict[str, Any] | None) -> dict[str, Any]:
        lora = dict(LORA_DEFAULTS)
        for key, value in (given or {}).items():
            if value is not None:
                lora[key] = value
        max_rank = LORA_RANK_MAX
        model = self._model(res.base_model)
        for c in (model or {}).get("compute_configs") or []:
            if c.get("gpu_type") == res.gpu_type:
                max_rank = min(
                    max_rank, ((c.get("trainer_config") or {}).get("lora") or {}).get("max_rank", max_rank)
                )
        if not 1 <= lora["rank"] <= max_rank:
            raise InvalidRequest(
                f"lora_config.rank must be between 1 and {max_rank} for {res.base_model}.",
                param="lora_config.rank",
            )
        if not LORA_ALPHA_RANGE[0] <= lora["alpha"] <= LORA_ALPHA_RANGE[1]:
            raise InvalidRequest("lora_config.alpha must be between 1 and 128.", param="lora_config.alpha")
        if not 0 <= lora["dropout"] < 1:
            raise InvalidRequest("lora_config.dropout must be >= 0 and < 1.", param="lora_config.dropout")
        lora["dropout"] = float(lora["dropout"])
        return lora

    def _models(self) -> list[dict[str, Any]]:
        custom = self._settings.get("supported_models")
        return BUILTIN_SUPPORTED_MODELS if custom is None else custom

    def _model(self, base_model: str) -> dict[str, Any] | None:
        return next((m for m in self._models() if m.get("base_model") == base_model), None)

    def _created_by_matches(self, owner: str, wanted: str | None) -> bool:
        if wanted is None or wanted == "":
            return True
        return owner == (self._settings["user_id"] if wanted == "me" else wanted)

    def _resource(self, resource_id: str) -> ModelResourceRecord:
        rec = self._resources.get(resource_id)
        if rec is None:
            raise NotFound(f"No model resource with id {resource_id!r}.", param="model_resources_id")
        return rec

    def _session(self, session_id: str) -> TrainingSessionRecord:
        rec = self._sessions.get(session_id)
        if rec is None:
            raise NotFound(f"No training session with id {session_id!r}.", param="session_id")
        return rec

    def _resource_copy(self, rec: ModelResourceRecord) -> ModelResourceRecord:
        out = copy.deepcopy(rec)
        if rec.status == R_PENDING:
            fixed = self._settings.get("queue_position")
            if fixed is not None:
                out.queue_position = int(fixed)
            else:  # older resources of the same GPU type still waiting, plus one
                out.queue_position = 1 + sum(
                    1
                    for r in self._resources.values()
                    if r.status == R_PENDING and r.gpu_type == rec.gpu_type and r.seq < rec.seq
                )
        return out

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _creation_time(self, now: datetime) -> datetime:
        # Strictly increasing creation times keep "newest first" unambiguous even on a coarse clock.
        if self._last_created is not None and now <= self._last_created:
            now = self._last_created + timedelta(microseconds=1)
        self._last_created = now
        return now


# ------------------------------------------------------------------------------------ module helpers


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _revision_of(ref: str) -> str:
    """The revision a ref without ``@rv_`` is pinned to: stable per ref, like a registry's latest revision."""
    return hashlib.sha256(ref.encode()).hexdigest()[:20]


def _sort_key(obj: Any) -> tuple[datetime, str]:
    return (obj.created_at, obj.id)


def _newest_first(items: Iterable[Any]) -> list[Any]:
    return sorted(items, key=_sort_key, reverse=True)


def _oldest_first(items: Iterable[Any]) -> list[Any]:
    return sorted(items, key=_sort_key)


def _paginate(items: list[Any], everything: dict[str, Any], limit: int | None, after: str | None) -> Page:
    if limit is None:
        limit = LIMIT_DEFAULT
    if not LIMIT_RANGE[0] <= limit <= LIMIT_RANGE[1]:
        raise InvalidRequest(f"limit must be between {LIMIT_RANGE[0]} and {LIMIT_RANGE[1]}.", param="limit")
    ordered = _newest_first(items)
    if after:
        cursor = everything.get(after)
        if cursor is None:
            raise InvalidRequest(f"after: unknown cursor {after!r}.", param="after", code="invalid_cursor")
        # Position by the cursor object's sort key, so a cursor that no longer matches the filter still works.
        key = _sort_key(cursor)
        ordered = [o for o in ordered if _sort_key(o) < key]
    data = ordered[:limit]
    has_more = len(ordered) > limit
    return Page(data=data, limit=limit, has_more=has_more, next_cursor=data[-1].id if has_more else "")


def _check_statuses(status: Iterable[str] | None, allowed: tuple[str, ...]) -> set[str] | None:
    if status is None:
        return None
    wanted = {s for s in status if s}
    for s in wanted:
        if s not in allowed:
            raise InvalidRequest(f"status: {s!r} is not one of {', '.join(allowed)}.", param="status")
    return wanted or None


def _check_optimizer(config: dict[str, Any] | None) -> dict[str, Any]:
    if config is None:
        return {"adam": {}}
    if not isinstance(config, dict):
        raise InvalidRequest("optimizer_config must be an object.", param="optimizer_config")
    chosen = {k: v for k, v in config.items() if v is not None}
    unknown = set(chosen) - {"adam", "muon"}
    if unknown:
        raise InvalidRequest(
            f"optimizer_config: unknown optimizer {sorted(unknown)[0]!r}; use 'adam' or 'muon'.",
            param=f"optimizer_config.{sorted(unknown)[0]}",
        )
    if len(chosen) != 1:
        raise InvalidRequest(
            "optimizer_config must set exactly one of 'adam' or 'muon'.", param="optimizer_config"
        )
    ((name, body),) = chosen.items()
    if not isinstance(body, dict):
        raise InvalidRequest(f"optimizer_config.{name} must be an object.", param=f"optimizer_config.{name}")
    if name == "adam":
        return {"adam": {}}
    strategy = body.get("scaling_strategy")
    if strategy is None:
        return {"muon": {}}
    if strategy not in MUON_STRATEGIES:
        raise InvalidRequest(
            f"optimizer_config.muon.scaling_strategy must be one of {', '.join(MUON_STRATEGIES)}.",
            param="optimizer_config.muon.scaling_strategy",
        )
    return {"muon": {"scaling_strategy": strategy}}


def _merge_settings(current: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """Validate ``patch`` and return ``current`` with it applied (``timings`` merged key by key)."""
    if not isinstance(patch, dict):
        raise InvalidRequest("settings must be an object.")
    out = copy.deepcopy(current)
    for key, value in patch.items():
        if key not in DEFAULT_SETTINGS:
            raise InvalidRequest(
                f"unknown setting {key!r}; known: {', '.join(DEFAULT_SETTINGS)}.",
                param=key,
                code="unknown_setting",
            )
        if key == "timings":
            if not isinstance(value, dict):
                raise InvalidRequest("timings must be an object of seconds.", param="timings")
            for name, seconds in value.items():
                if name not in TIMING_KEYS:
                    raise InvalidRequest(
                        f"unknown timing {name!r}; known: {', '.join(TIMING_KEYS)}.", param=f"timings.{name}"
                    )
                if not _is_number(seconds) or seconds < 0 or not math.isfinite(seconds):
                    raise InvalidRequest(f"timings.{name} must be a number >= 0.", param=f"timings.{name}")
                out["timings"][name] = float(seconds)
        elif key == "api_key":
            if value is not None and (not isinstance(value, str) or not value):
                raise InvalidRequest("api_key must be a non-empty string or null.", param=key)
            out[key] = value
        elif key == "user_id":
            if not isinstance(value, str) or not value or value == "me":
                raise InvalidRequest("user_id must be a non-empty string other than 'me'.", param=key)
            out[key] = value
        elif key == "conflict_status":
            if not isinstance(value, int) or isinstance(value, bool) or not 400 <= value <= 599:
                raise InvalidRequest("conflict_status must be an HTTP status between 400 and 599.", param=key)
            out[key] = value
        elif key in ("session_cap_lora", "session_cap_full"):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise InvalidRequest(f"{key} must be an integer >= 0.", param=key)
            out[key] = value
        elif key == "queue_position":
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise InvalidRequest("queue_position must be an integer >= 1 or null.", param=key)
            out[key] = value
        elif key == "supported_models":
            out[key] = None if value is None else _check_supported_models(value)
    return out


def _check_supported_models(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, dict) and "data" in value:
        value = value["data"]
    if not isinstance(value, list):
        raise InvalidRequest("supported_models must be a list of models or null.", param="supported_models")
    for i, model in enumerate(value):
        where = f"supported_models[{i}]"
        if (
            not isinstance(model, dict)
            or not isinstance(model.get("base_model"), str)
            or not model["base_model"]
        ):
            raise InvalidRequest(f"{where} must be an object with a base_model.", param=where)
        gpus = ", ".join(SUPPORTED_MODEL_GPU_TYPES)
        if model.get("default_gpu_type") not in SUPPORTED_MODEL_GPU_TYPES:
            raise InvalidRequest(
                f"{where}.default_gpu_type must be one of: {gpus}.", param=f"{where}.default_gpu_type"
            )
        configs = model.get("compute_configs")
        if configs is None:
            continue
        if not isinstance(configs, list):
            raise InvalidRequest(f"{where}.compute_configs must be a list.", param=f"{where}.compute_configs")
        for j, config in enumerate(configs):
            at = f"{where}.compute_configs[{j}]"
            if not isinstance(config, dict) or config.get("gpu_type") not in SUPPORTED_MODEL_GPU_TYPES:
                raise InvalidRequest(
                    f"{at} must be an object whose gpu_type is one of: {gpus}.", param=f"{at}.gpu_type"
                )
    return copy.deepcopy(value)
