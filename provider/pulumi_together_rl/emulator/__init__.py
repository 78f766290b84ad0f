"""An offline emulator of the Together AI post-training (RL) API, for tests, demos and users' CI.

Public API under ``/v1/rl`` (model resources, training sessions, supported models), with the documented
lifecycle, limits and error envelope; a control API under ``/_emulator`` (no auth) to reset, configure,
drive the clock, inject failures and faults, and read the request log.

    with EmulatorServer(timings={"resource_pending": 0, ...}) as server:   # uvicorn in a daemon thread
        os.environ["TOGETHER_BASE_URL"] = server.base_url                 # http://127.0.0.1:<port>
        control = EmulatorControl(server.base_url)
        control.advance(60)

    python -m pulumi_together_rl.emulator --host 127.0.0.1 --port 0      # prints the base URL first

Layout: :mod:`.state` (the verbs of the state machine; no HTTP) with :mod:`.lifecycle` (transitions over
time), :mod:`.records` (records, clock, pages), :mod:`.tables` (statuses, limits, supported models, prices,
error codes), :mod:`.settings` (defaults and validation) and :mod:`.errors` (domain errors); :mod:`.app`
(routes and the error envelope), :mod:`.faults` (fault rules, request log, the ASGI layer applying them),
:mod:`.server` (thread), :mod:`.control` (client of the control API), ``__main__`` (CLI). The official SDK
``together`` 3.1.1 is the oracle for wire shapes: every response validates with its pydantic models (tests/emulator).

Control API
-----------
``POST /_emulator/reset``; ``GET|PATCH /_emulator/settings`` (keys: ``timings`` {resource_pending,
resource_creating, resource_stopping, session_creating, session_stopping}, ``api_key``, ``api_keys``,
``user_id``, ``conflict_status``, ``session_cap_lora``, ``session_cap_full``, ``queue_position``,
``supported_models``, ``read_lag``, ``list_lag``, ``stops_ignored``);
``GET /_emulator/clock``; ``POST /_emulator/clock/advance {"seconds"}`` -> ``{"now"}``;
``POST /_emulator/fail-next {"kind", "code", "message"?, "id"?}``; ``POST|GET|DELETE /_emulator/faults`` and
``DELETE /_emulator/faults/{id}``; ``GET|DELETE /_emulator/requests`` (``?clear=true`` reads and clears);
``GET|PUT /_emulator/list-extras[/{collection}]``; ``GET /_emulator/state`` (the objects, and
``created_with``: which key made each). Control errors use the same envelope (400 with ``param``).

A team's keys: ``api_key`` plus ``api_keys`` are accepted (any non-empty key when both are unset), all of them
keys of the one user ``user_id``, so every key sees every object as ``created_by=me``. Only the control API tells
them apart, by ``key_digest(key)`` (``key-`` + 16 hex digits of its SHA-256, never the key): ``created_with`` in
``GET /_emulator/state`` (the key of each object's create) and ``key`` in each request log entry (the key that
sent it, e.g. a stop). A settings patch takes keys (how a test makes a team's keys); every answer, the settings
included, shows digests only. The control API has no authentication: on a host other than loopback the emulator
says so on stderr, since anyone who reaches it can read the state and add keys.

Choices where the public documentation is silent
------------------------------------------------
Wire format
  * Timestamps are RFC 3339 UTC with microseconds and ``Z``. IDs are random UUIDs (never reused, even
    after a reset, so a client's "already claimed" bookkeeping stays valid across tests).
  * int64 fields are strings: ``step``, ``lora_config.seed``, ``policy_state.*``, a checkpoint's ``step``.
    No training is emulated, only its bookkeeping, through the control API: ``advance`` moves a RUNNING
    session's ``step`` (and ``policy_state.trainer_step``); ``checkpoints`` saves a training or inference
    checkpoint at a step, embedded in the session (oldest first) and served by ``GET /v1/rl/checkpoints``
    (newest first; ``session_id``, ``base_model``, ``type``; cursor ``after``) and ``.../{id}``.
  * ``status_details`` is always present: ``{"queue_position": n}`` while PENDING, ``{}`` otherwise.
    ``expires_at`` is present only while READY. ``display_name`` is absent when unset or cleared;
    ``metadata`` is ``{}`` when no W&B key is set. A session on a full-weight resource has no ``lora_config``.
  * Unknown request fields (and unknown ``metadata.wandb`` keys) are ignored, as grpc-gateway does; known
    fields with the wrong JSON type are a 400. JSON ``null`` means "omitted".
  * Response ``optimizer_config`` is normalised: ``{"adam": {}}`` or ``{"muon": {...}}`` (exactly one).

Errors
  * Body ``{"error": {"message", "type", "param", "code"}}`` on every non-2xx answer, including unknown
    routes (404, code ``unknown_route``) and wrong methods (405, code ``method_not_allowed``).
  * 400 ``invalid_request_error`` for validation (``param`` = dotted field, or the query parameter; codes
    ``invalid_value``, ``missing_field``, ``missing_body``, ``invalid_json``, ``unsupported_model``,
    ``invalid_cursor``). Range checks: ``inactive_timeout`` 300-86400, extend ``seconds`` 60-86400, ``limit``
    1-100, ``display_name`` <= 128 (create and PATCH), LoRA rank 1..min(64, the model's ``max_rank``), alpha
    1-128, dropout [0, 1), ``base_weights_ref`` pattern and 256 characters.
  * 401 ``authentication_error`` (codes ``missing_api_key`` / ``invalid_api_key``), checked before body
    validation; unknown routes answer 404 without an auth check.
  * 404 ``not_found`` for unknown ids, including ``model_resources_id`` in a session create body
    (``param`` = ``model_resources_id``).
  * State conflicts answer ``settings.conflict_status`` (409) with type ``conflict`` and codes
    ``sessions_attached`` (stop without force; the message lists the session ids), ``resource_not_ready``
    (extend-expiry or session create when the resource is not READY).
  * Session cap: 429 ``rate_limit_error``, code ``session_limit_reached``, ``Retry-After``: seconds until the
    earliest STOPPING session on that resource frees its slot, else 30. Validation (400) is checked before
    the READY check (409), which is checked before the cap (429).
  * Injected faults answer type ``server_error`` (5xx) / ``rate_limit_error`` (429) with code
    ``emulator_fault``.

Lifecycle
  * Lazy and deterministic: each request first applies every transition due by "now", in time order, each
    stamped with its due time. Create answers PENDING (sessions: CREATING) and stop answers STOPPING even
    with zero timings; the *next* request sees the following state.
  * Durations are read from the current settings when evaluated, so changing a timing also moves objects
    already in that state.
  * Default timings (seconds): resource_pending 2, resource_creating 3, resource_stopping 1,
    session_creating 1, session_stopping 1.
  * ``queue_position`` (null setting) = PENDING resources of the same GPU type created earlier, plus one.
  * READY sets ``expires_at = ready_at + inactive_timeout``. Activity = a session create: ``expires_at`` moves
    to ``now + inactive_timeout`` if later. Extend-expiry moves it to ``now + seconds`` if later. Both bump
    ``updated_at`` only on extend-expiry (activity is not an update of the resource).
  * Expiry (READY and now >= ``expires_at``): resource -> STOPPING -> STOPPED; its CREATING/RUNNING sessions
    -> EXPIRED at ``expires_at``; sessions already STOPPING finish STOPPED at that instant.
  * A resource that lands in ERROR takes its CREATING/RUNNING sessions to ERROR with
    ``TRAINING_SESSION_ERROR_CODE_RESOURCE_UNAVAILABLE`` (STOPPING ones finish STOPPED).
  * Stop of a resource in PENDING/CREATING/READY -> STOPPING. Sessions in CREATING/RUNNING/STOPPING block it
    unless ``force=true``; forced, the CREATING/RUNNING ones go to STOPPING (then STOPPED on their own
    timing). Stop of a STOPPING/STOPPED/ERROR resource, or of a STOPPING/terminal session: 200, unchanged.
  * A STOPPING resource never reaches STOPPED while one of its sessions is still STOPPING: it becomes STOPPED
    at the later of its own ``resource_stopping`` and the end of its sessions' ``session_stopping`` (at a tie,
    the sessions are STOPPED first), so "resource STOPPED" always means "nothing of it is still billed".
  * ``force`` accepts true/false/1/0/t/f (case-insensitive); anything else is a 400.
  * The session cap counts CREATING, RUNNING and STOPPING sessions (a STOPPING session still holds its
    LoRA slot). Caps come from the settings (5 LoRA / 1 full), the same for every model.
  * PATCH works in every session state; ``""`` clears ``display_name`` or a W&B key; ``metadata: {}`` or
    ``{"wandb": null}`` changes nothing. There is no way to drop ``wandb`` other than clearing every key.
  * ``resume_from_checkpoint_id`` is echoed without checking;
    ``load_optimizer`` is accepted and not echoed (the response has no such field).
  * ``fail-next``: ``code`` must be one of that kind's error codes (``model_resource``:
    ``MODEL_RESOURCES_ERROR_CODE_{CAPACITY_WAIT_TIMEOUT, PROVISIONING_FAILED, RESOURCE_UNAVAILABLE}``;
    ``training_session``: ``TRAINING_SESSION_ERROR_CODE_{RESOURCE_UNAVAILABLE, RESOURCE_AT_CAPACITY, TIMED_OUT,
    SESSION_FAILED}``), else a 400 with ``param`` = ``code``: the SDK cannot parse any other ``error.code``.
    Without ``id`` it fires at the next provisioning transition (PENDING -> CREATING,
    CREATING -> READY, session CREATING -> RUNNING) of any object of that kind, including objects created
    later; with ``id`` it fires at that object's next transition, at once if it is READY/RUNNING, and is a
    conflict if the object is already terminal. Armed failures fire in the order they were armed.

Create defaults and validation
  * ``base_model`` must be in the supported-models table; ``lora_enabled`` (default true) needs
    ``trainer_config.lora``, false needs ``trainer_config.full``.
  * ``gpu_type`` omitted -> the model's ``default_gpu_type``; only ``B200-SXM`` is accepted on create.
  * ``num_generator_replicas`` omitted -> 1 when the model has a ``generator_config`` on that GPU, else 0
    (trainer-only models); > 0 on a model without a generator is a 400.
  * ``optimizer_config`` omitted -> ``{"adam": {}}``; both or neither of adam/muon, or another key, is a 400.
  * ``base_weights_ref`` without ``@rv_`` is pinned to ``@rv_<20 hex chars of sha256(ref)>`` (stable per ref).
  * LoRA defaults: rank 32, alpha 64, dropout 0.0, train_unembed true; ``seed`` only when given.
  * A custom ``supported_models`` setting is held to ``B200-SXM`` too (``default_gpu_type`` and every
    ``compute_configs[].gpu_type``): the SDK's RlSupportedModel accepts no other GPU type, so a table naming
    ``H100-80GB`` would make ``GET /v1/rl/supported-models`` unreadable (400, ``param`` names the field).
  * Built-in models (all ``B200-SXM``, the only GPU type the SDK's supported-models model allows):
    ``Qwen/Qwen3.5-4B`` (LoRA max_rank 64 + full + generator), ``Qwen/Qwen3.5-35B-A3B`` (LoRA only,
    max_rank 32, generator), ``Qwen/Qwen3-0.6B`` (LoRA + full, trainer only: no ``generator_config``).
  * estimate-cost: USD; GPUs x hourly price (B200-SXM 5.50, H100-80GB 3.25); GPUs = trainer (LoRA or full,
    per model) + replicas x generator GPUs; rounded to cents. Validation as on create; nothing is created.

Lists
  * Newest first (``created_at`` desc, then id); creation times are strictly increasing. ``after`` = the id
    of the last item of the previous page; it positions by that object's sort key even if the object no
    longer matches the filter; an id that never existed is a 400 (``param`` = ``after``). ``limit`` default
    20 for both lists. ``meta.next_cursor`` is ``""`` on the last page. ``status`` is comma-joined and/or
    repeated. ``created_by=me`` = ``settings.user_id`` (objects take the user id current at creation); a
    ``model_resources_id`` filter naming no resource yields an empty page.

Faults and the request log
  * Faults apply only to ``/v1`` paths; the first rule that fires handles the request; ``status`` is an error
    status (400-599: the answer is the error envelope, which a 1xx/2xx/3xx cannot carry) or ``null``, which
    with no drop means latency only. Extra rule fields beyond the brief: ``retry_after_ms`` (header
    ``retry-after-ms``) ``message`` and ``param`` (the error envelope's), ``keys`` (key digests: only
    requests sent with one of those keys). ``Retry-After`` is written as an integer when whole.
  * Request log entries: ``method, path, query, status`` (null when the connection was dropped), ``fault``
    (rule id or null), ``handled`` (the real handler ran), ``handler_status`` (act-then-fail only), ``at``
    (emulator time), ``user_agent``, ``key`` (the ``key_digest`` of the bearer key, None without one), ``body``
    (parsed JSON, or text). ``Authorization`` (the key itself) is never logged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["EmulatorApp", "EmulatorControl", "EmulatorServer", "create_app"]

if TYPE_CHECKING:
    from .app import EmulatorApp, create_app
    from .control import EmulatorControl
    from .server import EmulatorServer


def __getattr__(name: str) -> Any:
    # Lazy: importing the package (e.g. for .control) must not pull in FastAPI or uvicorn.
    if name in ("EmulatorApp", "create_app"):
        from . import app

        return getattr(app, name)
    if name == "EmulatorControl":
        from .control import EmulatorControl

        return EmulatorControl
    if name == "EmulatorServer":
        from .server import EmulatorServer

        return EmulatorServer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
