"""The emulator's state machine: the verbs of one emulated account over its records, limits and settings.
No HTTP here.

Transitions are lazy and deterministic (:mod:`.lifecycle`, a base class of :class:`EmulatorState`): every
public verb first advances the world to "now", processing due transitions in time order. The clock is real UTC
time plus an offset that tests move forward with :meth:`EmulatorState.advance_clock`.

Every verb runs under one lock and returns deep copies, so callers never share a record with the state.
Domain failures are raised as :class:`~.errors.DomainError` subclasses; the HTTP layer maps them to the error
envelope.
"""

from __future__ import annotations

import copy
import hashlib
import math
import threading
import uuid
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any

from .errors import CapReached, Conflict, InvalidRequest, NotFound
from .lifecycle import Lifecycle
from .records import (
    ArmedFailure,
    CheckpointRecord,
    Clock,
    ModelResourceRecord,
    Page,
    ResourceSpec,
    TrainingSessionRecord,
    _newest_first,
    _oldest_first,
    _paginate,
    utcnow,
)
from .settings import DEFAULT_SETTINGS, _is_number, _merge_settings
from .tables import (
    BASE_WEIGHTS_REF,
    BUILTIN_SUPPORTED_MODELS,
    CAP_RETRY_AFTER,
    CK_INFERENCE,
    CK_TRAINING,
    CREATE_GPU_TYPES,
    DEFAULT_ERROR_MESSAGES,
    DISPLAY_NAME_MAX,
    ERROR_CODES,
    EXTEND_RANGE,
    GPU_PRICE_PER_HOUR,
    INACTIVE_TIMEOUT_DEFAULT,
    INACTIVE_TIMEOUT_RANGE,
    LORA_ALPHA_RANGE,
    LORA_DEFAULTS,
    LORA_RANK_MAX,
    MODEL_GPUS,
    MUON_STRATEGIES,
    R_CREATING,
    R_PENDING,
    R_READY,
    R_STOPPING,
    RESOURCE_KIND,
    RESOURCE_STATUSES,
    RESOURCE_TERMINAL,
    S_CREATING,
    S_RUNNING,
    S_STOPPING,
    SESSION_HOLDS_SLOT,
    SESSION_KIND,
    SESSION_STATUSES,
    SESSION_TERMINAL,
)


class EmulatorState(Lifecycle):
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
        self._checkpoints: dict[str, CheckpointRecord] = {}
        self._failures: list[ArmedFailure] = []
        self._seq = 0
        self._last_created: datetime | None = None

    # ------------------------------------------------------------------------------------ control verbs

    def reset(self) -> None:
        """Forget every object and armed failure; restore the start settings and a zero clock offset."""
        with self._lock:
            self._resources.clear()
            self._sessions.clear()
            self._checkpoints.clear()
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

    def create_model_resource(
        self, spec: ResourceSpec, *, created_with: str | None = None
    ) -> ModelResourceRecord:
        """A new PENDING resource; ``created_with``: the key_digest of the key that asked (control API only)."""
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
                created_with=created_with,
            )
            self._resources[rec.id] = rec
            return self._resource_copy(rec)

    def get_model_resource(self, resource_id: str) -> ModelResourceRecord:
        with self._lock:
            now = self.clock.now()
            self._advance(now)
            return self._resource_copy(self._visible(self._resource(resource_id), now))

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
            now = self.clock.now()
            items = [
                r
                for r in self._resources.values()
                if (statuses is None or r.status in statuses)
                and self._created_by_matches(r.created_by, created_by)
                and self._listed(r, now)
            ]
            page = _paginate(items, self._resources, limit, after)
            page.data = [self._resource_copy(r) for r in page.data]
            return page

    def stop_model_resource(self, resource_id: str, *, force: bool = False) -> ModelResourceRecord:
        with self._lock:
            now = self.clock.now()
            self._advance(now)
            rec = self._visible(self._resource(resource_id), now)
            if rec.status in (R_PENDING, R_CREATING, R_READY) and not self._stop_ignored():
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
        created_with: str | None = None,
    ) -> TrainingSessionRecord:
        """A new CREATING session; ``created_with``: the key_digest of the key that asked (control API only)."""
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
                created_with=created_with,
            )
            self._sessions[rec.id] = rec
            self._touch(res.id, created)  # a session start is activity
            return copy.deepcopy(rec)

    def get_training_session(self, session_id: str) -> TrainingSessionRecord:
        with self._lock:
            now = self.clock.now()
            self._advance(now)
            return copy.deepcopy(self._visible(self._session(session_id), now))

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
                and self._listed(s, self.clock.now())
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
            rec = self._visible(self._session(session_id), now)
            if rec.status in (S_CREATING, S_RUNNING) and not self._stop_ignored():
                self._set_session(rec, S_STOPPING, now)
            # STOPPING or terminal: harmless, answered unchanged.
            return copy.deepcopy(rec)

    # -------------------------------------------------------------------------------- training bookkeeping

    def advance_session(self, session_id: str, steps: int) -> TrainingSessionRecord:
        """Control API: ``steps`` optimizer steps taken by a RUNNING session (no training is emulated). Activity:
        it pushes the resource's expiry out, as an operation does."""
        if steps < 0:
            raise InvalidRequest("steps must be 0 or more.", param="steps")
        with self._lock:
            now = self.clock.now()
            rec = self._running(session_id, now)
            rec.step += steps
            rec.updated_at = now
            self._touch(rec.model_resources_id, now)
            return copy.deepcopy(rec)

    def save_checkpoint(self, session_id: str, kind: str, step: int | None = None) -> CheckpointRecord:
        """Control API: the session saves a ``training`` or ``inference`` checkpoint at ``step`` (default: its
        current step)."""
        types = {"training": CK_TRAINING, "inference": CK_INFERENCE}
        if kind not in types:
            raise InvalidRequest("type must be training or inference.", param="type")
        with self._lock:
            now = self.clock.now()
            rec = self._running(session_id, now)
            ckpt = CheckpointRecord(
                id=f"ckpt-{uuid.uuid4().hex[:20]}",
                type=types[kind],
                session_id=rec.id,
                base_model=rec.base_model,
                step=rec.step if step is None else int(step),
                created_at=self._creation_time(now),
                lora_rank=(rec.lora_config or {}).get("rank"),
            )
            self._checkpoints[ckpt.id] = ckpt
            embedded = rec.training_checkpoints if kind == "training" else rec.inference_checkpoints
            embedded.append({"id": ckpt.id, "created_at": ckpt.created_at, "step": ckpt.step})
            self._touch(rec.model_resources_id, now)
            return copy.deepcopy(ckpt)

    def get_checkpoint(self, checkpoint_id: str) -> CheckpointRecord:
        with self._lock:
            found = self._checkpoints.get(checkpoint_id)
            if found is None:
                raise NotFound(f"No checkpoint with id {checkpoint_id!r}.", param="id")
            return copy.deepcopy(found)

    def list_checkpoints(
        self,
        *,
        session_id: str | None = None,
        base_model: str | None = None,
        type: str | None = None,
        limit: int | None = None,
        after: str | None = None,
    ) -> Page:
        if type is not None and type not in (CK_TRAINING, CK_INFERENCE):
            raise InvalidRequest(f"type must be {CK_TRAINING} or {CK_INFERENCE}.", param="type")
        with self._lock:
            items = [
                c
                for c in self._checkpoints.values()
                if (session_id is None or c.session_id == session_id)
                and (base_model is None or c.base_model == base_model)
                and (type is None or c.type == type)
            ]
            page = _paginate(items, self._checkpoints, limit, after)
            page.data = [copy.deepcopy(c) for c in page.data]
            return page

    # ------------------------------------------------------------------------------------------ helpers

    def _running(self, session_id: str, now: datetime) -> TrainingSessionRecord:
        """The session (transitions applied up to ``now``), which must be RUNNING to train or save."""
        self._advance(now)
        rec = self._session(session_id)
        if rec.status != S_RUNNING:
            raise Conflict(
                f"training session ({rec.id}) is {rec.status}, not RUNNING.", code="session_not_active"
            )
        return rec

    def _touch(self, resource_id: str, now: datetime) -> None:
        """Activity on a resource: its expiry moves out to ``inactive_timeout`` from ``now`` (never earlier)."""
        res = self._resources.get(resource_id)
        if res is not None:
            deadline = now + timedelta(seconds=res.inactive_timeout)
            if res.expires_at is None or deadline > res.expires_at:
                res.expires_at = deadline

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

    def _visible(self, rec: Any, now: datetime) -> Any:
        """``rec``, or the 404 the API answers while it is younger than the read lag."""
        if (now - rec.created_at).total_seconds() < self._settings["read_lag"]:
            kind = "model resource" if isinstance(rec, ModelResourceRecord) else "training session"
            raise NotFound(f"No {kind} with id {rec.id!r}.", param="id")
        return rec

    def _listed(self, rec: Any, now: datetime) -> bool:
        """Whether a list shows ``rec`` yet (the list lags creates by ``list_lag`` seconds)."""
        return (now - rec.created_at).total_seconds() >= self._settings["list_lag"]

    def _stop_ignored(self) -> bool:
        """Spend one of ``stops_ignored``: this stop answers as if accepted and changes nothing."""
        if self._settings["stops_ignored"] > 0:
            self._settings["stops_ignored"] -= 1
            return True
        return False

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


def _revision_of(ref: str) -> str:
    """The revision a ref without ``@rv_`` is pinned to: stable per ref, like a registry's latest revision."""
    return hashlib.sha256(ref.encode()).hexdigest()[:20]


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
