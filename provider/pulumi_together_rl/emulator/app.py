"""HTTP layer of the emulator: FastAPI routes that parse, call one state verb and serialize.

Every refusal of the state machine (:class:`~.errors.DomainError`) becomes the error envelope
``{"error": {message, type, param, code}}`` in exactly one place (:func:`_domain_error`); FastAPI's own
validation, 404 and 405 answers are rewritten into the same envelope, so no client ever sees FastAPI's 422
shape. Bodies and query strings are parsed by hand (not by FastAPI models) so that ``param`` names the
offending field the way the API does (``compute_config.gpu_type``, ``lora_config.rank``, ``limit``).

:class:`EmulatorApp` is the ASGI application: the fault / request-log layer (:mod:`.faults`) around the
routes. The public API lives under ``/v1``; the control API (no auth) under ``/_emulator``.

List extras (``PUT /_emulator/list-extras/{collection}``, ``{"items": [...]}``) are raw JSON values appended
as they are to the ``data`` of every answer of that list (``model-resources`` or ``training-sessions``,
whatever the filters and page): an object a client cannot read (``{"id": "x", "status": 7}``) sitting in the
API's lists among the real ones, which no fault rule (a whole answer replaced by an error) can express. They
are not objects of the state (no GET finds them), and ``reset`` clears them.

A team's keys (settings ``api_key`` and ``api_keys``: several keys of one user): every accepted key sees every
object as ``created_by=me``, as on the real API. The control API alone tells them apart, by
:func:`~.settings.key_digest`: ``GET /_emulator/state`` maps each object's id to the digest of the key whose
create made it (``created_with``), and each request log entry names the digest of the key that sent it
(``key``). No API answer carries either.
"""

from __future__ import annotations

import copy
import email.utils
import json
from datetime import datetime
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from .errors import CapReached, Conflict, DomainError, InvalidRequest, NotFound
from .faults import FaultBook, FaultMiddleware, RequestLog, bearer_key, envelope, error_type_for
from .records import CheckpointRecord, ModelResourceRecord, Page, TrainingSessionRecord, iso
from .settings import key_digest, shown_settings
from .state import EmulatorState
from .tables import WANDB_KEYS

# ------------------------------------------------------------------------------------------ serializers


def resource_json(rec: ModelResourceRecord) -> dict[str, Any]:
    """A ``ModelResources`` object as the API sends it."""
    out: dict[str, Any] = {
        "id": rec.id,
        "status": rec.status,
        "status_details": {} if rec.queue_position is None else {"queue_position": rec.queue_position},
        "base_model": rec.base_model,
        "compute_config": {"num_generator_replicas": rec.num_generator_replicas, "gpu_type": rec.gpu_type},
        "lora_enabled": rec.lora_enabled,
        "optimizer_config": rec.optimizer_config,
        "inactive_timeout": rec.inactive_timeout,
        "created_at": iso(rec.created_at),
        "updated_at": iso(rec.updated_at),
        "created_by": rec.created_by,
    }
    if rec.base_weights_ref is not None:
        out["base_weights_ref"] = rec.base_weights_ref
    if rec.error is not None:
        out["error"] = _error_json(rec.error)
    if rec.expires_at is not None:
        out["expires_at"] = iso(rec.expires_at)
    return out


def session_json(rec: TrainingSessionRecord) -> dict[str, Any]:
    """A ``TrainingSession`` object as the API sends it (int64 fields as strings)."""
    out: dict[str, Any] = {
        "id": rec.id,
        "status": rec.status,
        "model_resources_id": rec.model_resources_id,
        "base_model": rec.base_model,
        "created_by": rec.created_by,
        "created_at": iso(rec.created_at),
        "updated_at": iso(rec.updated_at),
        "step": str(rec.step),
        "metadata": {"wandb": dict(rec.wandb)} if rec.wandb else {},
        "inference_checkpoints": [_embedded_json(c) for c in rec.inference_checkpoints],
        "training_checkpoints": [_embedded_json(c) for c in rec.training_checkpoints],
        "policy_state": {
            "trainer_step": str(rec.step),
            "target_weights_version": str(len(rec.inference_checkpoints)),
            "applied_weights_version": str(len(rec.inference_checkpoints)),
            "pending_publish": False,
        },
    }
    if rec.display_name:
        out["display_name"] = rec.display_name
    if rec.error is not None:
        out["error"] = _error_json(rec.error)
    if rec.lora_config is not None:
        lora = dict(rec.lora_config)
        if lora.get("seed") is not None:
            lora["seed"] = str(lora["seed"])
        out["lora_config"] = lora
    if rec.resume_from_checkpoint_id:
        out["resume_from_checkpoint_id"] = rec.resume_from_checkpoint_id
    return out


def _embedded_json(ckpt: dict[str, Any]) -> dict[str, Any]:
    return {"id": ckpt["id"], "created_at": iso(ckpt["created_at"]), "step": str(ckpt["step"])}


def checkpoint_json(rec: CheckpointRecord) -> dict[str, Any]:
    """A ``Checkpoint`` as ``GET /v1/rl/checkpoints/{id}`` sends it (``step`` as a string, int64)."""
    out: dict[str, Any] = {
        "id": rec.id,
        "type": rec.type,
        "base_model": rec.base_model,
        "session_id": rec.session_id,
        "step": str(rec.step),
        "created_at": iso(rec.created_at),
    }
    if rec.lora_rank is not None:
        out["lora_rank"] = rec.lora_rank
    return out


def _error_json(err: dict[str, Any]) -> dict[str, Any]:
    occurred = err["occurred_at"]
    return {
        "code": err["code"],
        "message": err["message"],
        "occurred_at": iso(occurred) if isinstance(occurred, datetime) else occurred,
    }


def _page_json(page: Page, item: Any, extras: list[Any] | None = None) -> dict[str, Any]:
    return {
        "data": [item(x) for x in page.data] + copy.deepcopy(extras or []),
        "meta": {"limit": page.limit, "has_more": page.has_more, "next_cursor": page.next_cursor},
    }


# --------------------------------------------------------------------------------------------- parsing


class _Fields:
    """Typed access to a JSON object; a wrong type raises InvalidRequest naming the dotted field."""

    def __init__(self, data: dict[str, Any], prefix: str = "") -> None:
        self.data = data
        self.prefix = prefix

    def _get(self, name: str) -> tuple[str, Any]:
        return f"{self.prefix}{name}", self.data.get(name)

    def text(self, name: str, *, required: bool = False) -> str | None:
        param, value = self._get(name)
        if value is None:
            if required:
                raise InvalidRequest(f"{param} is required.", param=param, code="missing_field")
            return None
        if not isinstance(value, str):
            raise InvalidRequest(f"{param} must be a string.", param=param)
        if required and not value:
            raise InvalidRequest(f"{param} must not be empty.", param=param, code="missing_field")
        return value

    def integer(self, name: str, *, required: bool = False) -> int | None:
        param, value = self._get(name)
        if value is None:
            if required:
                raise InvalidRequest(f"{param} is required.", param=param, code="missing_field")
            return None
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool):
            raise InvalidRequest(f"{param} must be an integer.", param=param)
        return value

    def int64(self, name: str) -> int | None:
        """An int64 field: JSON number or decimal string (proto3 JSON mapping)."""
        param, value = self._get(name)
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                raise InvalidRequest(f"{param} must be an integer (number or string).", param=param) from None
        return self.integer(name)

    def number(self, name: str) -> float | None:
        param, value = self._get(name)
        if value is None:
            return None
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise InvalidRequest(f"{param} must be a number.", param=param)
        return float(value)

    def flag(self, name: str) -> bool | None:
        param, value = self._get(name)
        if value is None:
            return None
        if not isinstance(value, bool):
            raise InvalidRequest(f"{param} must be a boolean.", param=param)
        return value

    def object(self, name: str) -> _Fields | None:
        param, value = self._get(name)
        if value is None:
            return None
        if not isinstance(value, dict):
            raise InvalidRequest(f"{param} must be an object.", param=param)
        return _Fields(value, f"{param}.")


async def _body(request: Request, *, required: bool = True) -> _Fields:
    raw = await request.body()
    if not raw.strip():
        if required:
            raise InvalidRequest("A JSON request body is required.", code="missing_body")
        return _Fields({})
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise InvalidRequest(f"The request body is not valid JSON: {exc}.", code="invalid_json") from None
    if not isinstance(data, dict):
        raise InvalidRequest("The request body must be a JSON object.", code="invalid_json")
    return _Fields(data)


def _creator(request: Request) -> str | None:
    key = bearer_key(request.headers)
    return key_digest(key) if key else None


def _query_list(request: Request, name: str) -> list[str] | None:
    """A repeated and/or comma-joined query parameter (``status=A,B`` or ``status=A&status=B``)."""
    values = request.query_params.getlist(name)
    if not values:
        return None
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def _query_int(request: Request, name: str) -> int | None:
    value = request.query_params.get(name)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise InvalidRequest(f"{name} must be an integer.", param=name) from None


def _query_bool(request: Request, name: str) -> bool:
    value = request.query_params.get(name)
    if value is None:
        return False
    lowered = value.strip().lower()
    if lowered in ("true", "1", "t"):
        return True
    if lowered in ("false", "0", "f"):
        return False
    raise InvalidRequest(f"{name} must be true or false.", param=name)


def _resource_create_args(body: _Fields) -> dict[str, Any]:
    compute = body.object("compute_config") or _Fields({}, "compute_config.")
    optimizer = body.object("optimizer_config")
    return {
        "base_model": body.text("base_model", required=True),
        "base_weights_ref": body.text("base_weights_ref"),
        "gpu_type": compute.text("gpu_type"),
        "num_generator_replicas": compute.integer("num_generator_replicas"),
        "inactive_timeout": body.integer("inactive_timeout"),
        "lora_enabled": body.flag("lora_enabled"),
        "optimizer_config": None if optimizer is None else optimizer.data,
    }


def _wandb(body: _Fields) -> dict[str, str] | None:
    metadata = body.object("metadata")
    wandb = metadata.object("wandb") if metadata is not None else None
    if wandb is None:
        return None
    # Unknown keys are ignored (like unknown fields anywhere); known keys must be strings.
    return {key: value for key in WANDB_KEYS if (value := wandb.text(key)) is not None}


# -------------------------------------------------------------------------------------------- the app


class EmulatorApp:
    """The ASGI application: request log + faults around the FastAPI routes, over one EmulatorState.

    ``settings`` (the keys of ``/_emulator/settings``) are the start settings that ``reset`` restores.
    """

    def __init__(self, **settings: Any) -> None:
        self.state = EmulatorState(settings)
        self.faults = FaultBook()
        self.requests = RequestLog()
        #: Raw items appended to every list answer, by collection (see the module docstring).
        self.list_extras: dict[str, list[Any]] = {}
        self.api = _build_api(self)
        self._asgi = FaultMiddleware(self.api, self.faults, self.requests, now=lambda: iso(self.state.now()))

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self._asgi(scope, receive, send)
            return

        async def dated(message: Any) -> None:
            # Every answer says when it was made on the emulator's clock, which a test moves (advance), as a
            # server's Date header says it on the server's: a client can measure its clock against the API's.
            if message["type"] == "http.response.start":
                stamp = email.utils.format_datetime(self.state.now(), usegmt=True).encode("latin-1")
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"date"]
                message = {**message, "headers": [*headers, (b"date", stamp)]}
            await send(message)

        await self._asgi(scope, receive, dated)

    def reset(self) -> None:
        """Clear objects, faults and the request log; restore the start settings and the clock."""
        self.state.reset()
        self.faults.clear()
        self.requests.clear()
        self.list_extras = {}


def create_app(**settings: Any) -> EmulatorApp:
    """A fresh emulator application (serve it with any ASGI server, e.g. uvicorn)."""
    return EmulatorApp(**settings)


def _error_response(
    status: int, message: str, *, param: str | None = None, code: str | None = None, headers: Any = None
) -> JSONResponse:
    return JSONResponse(
        envelope(message, type=error_type_for(status), param=param, code=code),
        status_code=status,
        headers=headers,
    )


def _build_api(emu: EmulatorApp) -> FastAPI:
    state = emu.state
    api = FastAPI(
        title="Together RL API emulator",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        redirect_slashes=False,
    )

    # ---------------------------------------------------------------------------------------- errors

    @api.exception_handler(DomainError)
    async def _domain_error(request: Request, exc: DomainError) -> JSONResponse:
        if isinstance(exc, InvalidRequest):
            return _error_response(400, exc.message, param=exc.param, code=exc.code)
        if isinstance(exc, NotFound):
            return _error_response(404, exc.message, param=exc.param, code=exc.code)
        if isinstance(exc, CapReached):
            return _error_response(
                429,
                exc.message,
                param=exc.param,
                code=exc.code,
                headers={"Retry-After": str(exc.retry_after)},
            )
        if isinstance(exc, Conflict):
            status = int(state.setting("conflict_status"))
            return JSONResponse(
                envelope(exc.message, type="conflict", param=exc.param, code=exc.code), status_code=status
            )
        return _error_response(400, exc.message, param=exc.param, code=exc.code)

    @api.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        loc = [str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path", "header")]
        return _error_response(400, str(first.get("msg", "invalid request")), param=".".join(loc) or None)

    @api.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 404:
            message, code = f"No route for {request.method} {request.url.path}.", "unknown_route"
        elif exc.status_code == 405:
            message, code = (
                f"Method {request.method} is not allowed on {request.url.path}.",
                "method_not_allowed",
            )
        else:
            message, code = str(exc.detail), None
        return _error_response(exc.status_code, message, code=code, headers=getattr(exc, "headers", None))

    @api.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception) -> JSONResponse:
        return _error_response(500, f"Emulator internal error: {type(exc).__name__}: {exc}", code="internal")

    # ------------------------------------------------------------------------------------------ auth

    def authenticate(request: Request) -> None:
        key = bearer_key(request.headers)
        if key is None:
            raise _Unauthorized("Missing API key: send 'Authorization: Bearer <key>'.", "missing_api_key")
        # api_key and api_keys: the keys of the one user; both unset: any key is that user's.
        accepted = [k for k in [state.setting("api_key"), *state.setting("api_keys")] if k is not None]
        if accepted and key not in accepted:
            raise _Unauthorized("Invalid API key provided.", "invalid_api_key")

    @api.exception_handler(_Unauthorized)
    async def _unauthorized(request: Request, exc: _Unauthorized) -> JSONResponse:
        return _error_response(401, exc.message, code=exc.code, headers={"WWW-Authenticate": "Bearer"})

    # ------------------------------------------------------------------------------ model resources

    v1 = APIRouter(prefix="/v1/rl", dependencies=[Depends(authenticate)])

    @v1.post("/model-resources")
    async def create_model_resource(request: Request) -> Any:
        spec = state.resolve_resource_spec(**_resource_create_args(await _body(request)))
        return resource_json(state.create_model_resource(spec, created_with=_creator(request)))

    @v1.get("/model-resources")
    async def list_model_resources(request: Request) -> Any:
        page = state.list_model_resources(
            status=_query_list(request, "status"),
            created_by=request.query_params.get("created_by"),
            limit=_query_int(request, "limit"),
            after=request.query_params.get("after"),
        )
        return _page_json(page, resource_json, emu.list_extras.get("model-resources", []))

    @v1.post("/model-resources/estimate-cost")
    async def estimate_cost(request: Request) -> Any:
        spec = state.resolve_resource_spec(**_resource_create_args(await _body(request)))
        return state.estimate_cost(spec)

    @v1.get("/model-resources/{model_resources_id}")
    async def get_model_resource(model_resources_id: str) -> Any:
        return resource_json(state.get_model_resource(model_resources_id))

    @v1.post("/model-resources/{model_resources_id}/stop")
    async def stop_model_resource(model_resources_id: str, request: Request) -> Any:
        force = _query_bool(request, "force")
        return resource_json(state.stop_model_resource(model_resources_id, force=force))

    @v1.post("/model-resources/{model_resources_id}/extend-expiry")
    async def extend_expiry(model_resources_id: str, request: Request) -> Any:
        seconds = (await _body(request)).integer("seconds", required=True)
        assert seconds is not None
        return resource_json(state.extend_model_resource_expiry(model_resources_id, seconds))

    # ---------------------------------------------------------------------------- training sessions

    @v1.post("/training-sessions")
    async def create_training_session(request: Request) -> Any:
        body = await _body(request)
        lora = body.object("lora_config")
        lora_args = None
        if lora is not None:
            lora_args = {
                "rank": lora.integer("rank"),
                "alpha": lora.integer("alpha"),
                "dropout": lora.number("dropout"),
                "seed": lora.int64("seed"),
                "train_unembed": lora.flag("train_unembed"),
            }
        rec = state.create_training_session(
            model_resources_id=body.text("model_resources_id", required=True) or "",
            display_name=body.text("display_name"),
            load_optimizer=body.flag("load_optimizer"),
            lora_config=lora_args,
            wandb=_wandb(body),
            resume_from_checkpoint_id=body.text("resume_from_checkpoint_id"),
            created_with=_creator(request),
        )
        return session_json(rec)

    @v1.get("/training-sessions")
    async def list_training_sessions(request: Request) -> Any:
        page = state.list_training_sessions(
            status=_query_list(request, "status"),
            model_resources_id=request.query_params.get("model_resources_id") or None,
            created_by=request.query_params.get("created_by"),
            limit=_query_int(request, "limit"),
            after=request.query_params.get("after"),
        )
        return _page_json(page, session_json, emu.list_extras.get("training-sessions", []))

    @v1.get("/training-sessions/{session_id}")
    async def get_training_session(session_id: str) -> Any:
        return session_json(state.get_training_session(session_id))

    @v1.get("/checkpoints")
    async def list_checkpoints(request: Request) -> Any:
        page = state.list_checkpoints(
            session_id=request.query_params.get("session_id") or None,
            base_model=request.query_params.get("base_model") or None,
            type=request.query_params.get("type") or None,
            limit=_query_int(request, "limit"),
            after=request.query_params.get("after"),
        )
        return _page_json(page, checkpoint_json)

    @v1.get("/checkpoints/{checkpoint_id}")
    async def get_checkpoint(checkpoint_id: str) -> Any:
        return checkpoint_json(state.get_checkpoint(checkpoint_id))

    @v1.patch("/training-sessions/{session_id}")
    async def update_training_session(session_id: str, request: Request) -> Any:
        body = await _body(request, required=False)
        rec = state.update_training_session(
            session_id, display_name=body.text("display_name"), wandb=_wandb(body)
        )
        return session_json(rec)

    @v1.post("/training-sessions/{session_id}/stop")
    async def stop_training_session(session_id: str) -> Any:
        return session_json(state.stop_training_session(session_id))

    @v1.get("/supported-models")
    async def supported_models() -> Any:
        return {"data": state.supported_models()}

    api.include_router(v1)
    api.include_router(_control_router(emu))
    return api


class _Unauthorized(Exception):
    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


# ---------------------------------------------------------------------------------------- control API

#: The lists extra raw items can be appended to (``PUT /_emulator/list-extras/{collection}``).
LIST_COLLECTIONS = ("model-resources", "training-sessions")


def _control_router(emu: EmulatorApp) -> APIRouter:
    state = emu.state
    control = APIRouter(prefix="/_emulator")

    @control.post("/reset")
    async def reset() -> Any:
        emu.reset()
        return {"reset": True, "now": iso(state.now())}

    @control.get("/settings")
    async def get_settings() -> Any:
        return shown_settings(state.settings)

    @control.patch("/settings")
    async def patch_settings(request: Request) -> Any:
        return shown_settings(state.update_settings((await _body(request)).data))

    @control.get("/clock")
    async def clock() -> Any:
        return {"now": iso(state.now()), "offset": state.clock.offset}

    @control.post("/clock/advance")
    async def advance(request: Request) -> Any:
        body = await _body(request)
        seconds = body.number("seconds")
        if seconds is None:
            raise InvalidRequest("seconds is required.", param="seconds", code="missing_field")
        return {"now": iso(state.advance_clock(seconds))}

    @control.post("/training-sessions/{session_id}/advance")
    async def advance_session(session_id: str, request: Request) -> Any:
        body = await _body(request)
        steps = body.integer("steps", required=True)
        return session_json(state.advance_session(session_id, int(steps or 0)))

    @control.post("/training-sessions/{session_id}/checkpoints")
    async def save_checkpoint(session_id: str, request: Request) -> Any:
        body = await _body(request)
        kind = body.text("type", required=True) or ""
        return checkpoint_json(state.save_checkpoint(session_id, kind, body.integer("step")))

    @control.post("/fail-next")
    async def fail_next(request: Request) -> Any:
        body = await _body(request)
        return state.fail_next(
            kind=body.text("kind", required=True) or "",
            code=body.text("code", required=True) or "",
            message=body.text("message"),
            target=body.text("id"),
        )

    @control.post("/faults")
    async def add_fault(request: Request) -> Any:
        return {"id": emu.faults.add((await _body(request)).data).id}

    @control.get("/faults")
    async def list_faults() -> Any:
        return {"data": emu.faults.list()}

    @control.delete("/faults")
    async def clear_faults() -> Any:
        return {"deleted": emu.faults.clear()}

    @control.delete("/faults/{fault_id}")
    async def delete_fault(fault_id: str) -> Any:
        if not emu.faults.remove(fault_id):
            raise NotFound(f"No fault rule with id {fault_id!r}.", param="id")
        return {"deleted": 1}

    @control.get("/list-extras")
    async def list_extras() -> Any:
        return {"data": copy.deepcopy(emu.list_extras)}

    @control.put("/list-extras/{collection}")
    async def set_list_extras(collection: str, request: Request) -> Any:
        if collection not in LIST_COLLECTIONS:
            raise NotFound(
                f"No list {collection!r}; lists: {', '.join(LIST_COLLECTIONS)}.", param="collection"
            )
        items = (await _body(request)).data.get("items")
        if not isinstance(items, list):
            raise InvalidRequest("items must be a list of JSON values ([] for none).", param="items")
        emu.list_extras = {**emu.list_extras, collection: copy.deepcopy(items)}
        return {"collection": collection, "items": len(items)}

    @control.get("/requests")
    async def requests(request: Request) -> Any:
        return {"data": emu.requests.entries(clear=_query_bool(request, "clear"))}

    @control.delete("/requests")
    async def clear_requests() -> Any:
        emu.requests.clear()
        return {"deleted": True}

    @control.get("/state")
    async def dump_state() -> Any:
        resources, sessions = state.snapshot()
        records: list[ModelResourceRecord | TrainingSessionRecord] = [*resources, *sessions]
        return {
            "now": iso(state.now()),
            "model_resources": [resource_json(r) for r in resources],
            "training_sessions": [session_json(s) for s in sessions],
            # Which key made each object (key_digest; None: made without one, e.g. by a test calling the state).
            "created_with": {o.id: o.created_with for o in records},
        }

    return control
