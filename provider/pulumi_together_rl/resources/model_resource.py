"""ModelResource: a Together RL model resource (GPUs + a frozen base model) as a Pulumi dynamic resource.

Lifecycle
    check    at preview: the inputs' shapes, then (for a new resource or a changed API input) what the API
             offers (model, GPU type, full-weight, replicas), ``adopt_id`` (exists, active, same settings) and
             the estimated price (``POST .../estimate-cost``, one request per body per process), which goes
             into ``price_per_hour``/``currency`` and a line on stderr; ``max_price_per_hour`` below it fails.
             A 400 from estimate-cost names the field. No key, or an API that cannot be asked: warn and skip.
    create   ``POST /v1/rl/model-resources`` (through the client, whose reconciliation guarantees one logical
             create never makes two allocations), then wait until READY, printing status, queue position and
             elapsed time on stderr, then extend its expiry to ``keep_ready_until`` when that is ahead. ERROR
             fails at once with the API's error code and message. Any failure after the POST that the provider
             sees (error state, timeout, exception, a refused extend) stops the resource (without ``force``)
             and raises an error naming its id. A 404 just after the POST is read-after-write lag
             (``NOT_FOUND_GRACE``), not a failure; an API outage during the wait is no news. What the
             provider never sees (an interrupt that kills it) is covered by the create journal
             (``journal.py``): the next create of the same declaration takes the object over.
    read     one list (``GET`` for what it misses); a 404 or a STOPPING / STOPPED / ERROR resource is reported
             as gone, so the next ``pulumi up`` recreates it: resources stop themselves after
             ``inactive_timeout`` idle seconds (or when a keep ends), normal drift, which the line names as
             such. A READY one is kept until ``keep_ready_until`` (extend-expiry when ``expires_at`` comes
             earlier: the one change a refresh may make; a failure is a line, not a failed refresh).
    update   only provider options change in place; ``keep_ready_until`` is the one that calls the API
             (a GET, then extend-expiry when due).
    delete   stop without ``force``. If the API refuses because training sessions are attached, the error lists
             them; with ``force_stop=True`` the stop is forced (the attached sessions stop too, and are logged).
             Then wait until billing has stopped (STOPPING or STOPPED). 404 or already stopped = done; a
             stop refused with 409/400 is judged by the object's state (404 or STOPPING/STOPPED/ERROR = done).

Replacement
    Every API input (``base_model``, ``base_weights_ref``, ``compute_config``, ``lora_enabled``,
    ``optimizer_config``, ``inactive_timeout``) forces replacement, and replacement is **delete-before-replace**:
    creating first would bill two allocations at once and queue the new one behind the old one for capacity.
    The cost is a gap while the new resource provisions (its sessions are replaced too, as their
    ``model_resources_id`` changes).

Provider options (inputs that never replace; only ``keep_ready_until`` calls the API when changed)
    ``create_timeout`` (default 3600 s: capacity queues can be long), ``delete_timeout`` (900 s),
    ``force_stop`` (False), ``adopt_id``, ``max_price_per_hour``, ``keep_ready_until``. Pulumi deletes a
    resource with the inputs it was last deployed with, so a changed option must be deployed on its own (a
    ``pulumi up`` in which it is the only change) before the ``pulumi destroy`` or the replacing change whose
    delete it should govern; the refusal to stop a resource with attached sessions says so. ``adopt_id``
    makes create take over an existing active resource instead of creating one (``pulumi import`` cannot
    work for dynamic resources, pulumi/pulumi#16175): it must match every declared input (``lora_enabled``
    defaults to true, an unset ``base_weights_ref`` means none, an optimizer is compared by kind and Muon's
    ``scaling_strategy`` only when declared), or create fails naming the mismatched fields; then it waits for
    READY. A failed adopt never stops the object.
    Once adopted, the resource is managed like any other (destroy stops it, and so does a replacement). Remove
    ``adopt_id`` with or before a change that replaces the resource: the replacement would otherwise try to
    adopt the stopped original.

Keys in the state
    Inputs are echoed under their own names exactly as declared (after ``check``), so ``diff`` compares like
    with like. What the API reports goes to distinct ``effective_*`` outputs: a server default (``gpu_type``,
    ``optimizer_config``) or a pinned ``base_weights_ref`` (``together://ml_x@rv_1``) therefore never shows up
    as a perpetual diff. ``status`` holds the short name (``READY``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

import pulumi
import pulumi.dynamic

from .face import KindProvider, declared_props

SESSION_FACTS = ("base_model", "compute_config", "lora_enabled")
"""What a session given ``model_resource=`` validates against at preview (the declared inputs)."""


class ComputeConfigArgs(TypedDict, total=False):
    """Compute layout of a model resource."""

    gpu_type: pulumi.Input[str]
    """``"B200-SXM"`` or ``"H100-80GB"``; unset = the model's ``default_gpu_type``."""
    num_generator_replicas: pulumi.Input[int]
    """Generator replicas, 0-64; 0 = trainer only (SFT/DPO), RL needs at least 1. Unset = the API default (1)."""


class MuonConfigArgs(TypedDict, total=False):
    """Settings of the Muon optimizer."""

    scaling_strategy: pulumi.Input[str]
    """``"MUON_SCALING_STRATEGY_MATCH_ADAM"``, ``"MUON_SCALING_STRATEGY_ORIGINAL"`` or
    ``"MUON_SCALING_STRATEGY_UNSPECIFIED"`` (the server's choice); unset = the API default."""


class OptimizerConfigArgs(TypedDict, total=False):
    """Exactly one of ``adam`` (``{}``) or ``muon`` (``{"scaling_strategy": ...}``)."""

    adam: pulumi.Input[Mapping[str, Any]]
    """Adam, the API default. Takes no settings: always ``{}``."""
    muon: pulumi.Input[MuonConfigArgs]
    """Muon, with an optional ``scaling_strategy``."""


class ModelResourceArgs:
    """Inputs of a :class:`ModelResource`. Every API input forces replacement (delete-before-replace).

    ``check`` (at preview) holds every input to the bounds given here: numbers finite and within their range,
    strings free of control characters (newlines, tabs, escape sequences), ids at most 256 characters."""

    base_model: pulumi.Input[str]
    """Required. A model from ``GET /v1/rl/supported-models``, e.g. ``"Qwen/Qwen3.5-4B"`` (at most 256
    characters)."""
    base_weights_ref: pulumi.Input[str] | None
    """Model-registry weights to train instead of the base model's: ``together://ml_<id>[@rv_<revision>]``, at
    most 256 characters."""
    compute_config: pulumi.Input[ComputeConfigArgs] | None
    """``{"gpu_type": ..., "num_generator_replicas": 0-64}``; both optional."""
    lora_enabled: pulumi.Input[bool] | None
    """True (API default): hosts several LoRA sessions. False: one full-weight session."""
    optimizer_config: pulumi.Input[OptimizerConfigArgs] | None
    """``{"adam": {}}`` (API default) or ``{"muon": {"scaling_strategy": "MUON_SCALING_STRATEGY_..."}}``."""
    inactive_timeout: pulumi.Input[int] | None
    """Seconds (300-86400, API default 3600) without session activity after which the resource stops itself."""
    create_timeout: pulumi.Input[float] | None
    """Provider option: seconds to wait for READY, more than 0 and at most 604800 (7 days: a capacity queue has
    no time limit); default 3600. On timeout the resource is stopped."""
    delete_timeout: pulumi.Input[float] | None
    """Provider option: seconds to wait for STOPPING/STOPPED on delete, more than 0 and at most 86400 (1 day);
    default 900."""
    force_stop: pulumi.Input[bool] | None
    """Provider option: on delete, stop even with training sessions attached (they stop too). Default False."""
    adopt_id: pulumi.Input[str] | None
    """Provider option: id of an existing active model resource to take over instead of creating one (at most
    256 characters)."""
    max_price_per_hour: pulumi.Input[float] | None
    """Provider option: a ceiling on the estimated hourly price (the API's estimate-cost, in its currency, USD),
    more than 0 and at most 10000. ``pulumi preview`` fails when the estimate exceeds it. Never replaces;
    changing it calls no API."""
    keep_ready_until: pulumi.Input[str] | None
    """Provider option: an RFC 3339 time with its zone (``"2026-12-04T18:00:00Z"``), at most 30 days ahead
    (a warning past a week), until which the resource must not stop itself for inactivity. The provider calls
    ``POST .../extend-expiry`` after the create, at an update that changes it and at every refresh, whenever
    ``expires_at`` comes earlier, counting the seconds on the API's clock; ``expires_at`` shows the result. One
    call reaches at most a day ahead, so a longer keep needs a refresh (or ``pulumi up --refresh``) at least
    daily. The API never moves an expiry earlier: a time moved back takes effect once the later one passes. At
    this time the resource stops itself (not ``inactive_timeout`` later), unless session activity keeps it.
    Never replaces."""
    stop_after: pulumi.Input[str] | None
    """A deadline: this GPU must not run past it. A duration from its creation (``"8h"``, ``"90m"``,
    ``"1d12h"``; 1 minute to 30 days) or an RFC 3339 time with its zone (``"2026-12-24T18:00:00Z"``, at most 30
    days ahead); ``keep_ready_until`` may not reach past it. Preview prints it and the most the resource can cost
    until then. Past it the resource is stopped and stays stopped (``stop_reason``): by ``pulumi up``, by a
    create still waiting for READY, or by ``python -m pulumi_together_rl reap --stop`` run on a schedule with no
    other command. Sessions attached to it are not forced (unless ``force_stop``): give them a ``stop_after``
    no later than this one; ``reap`` stops the sessions its stack holds first. Moving it updates in place while
    it is ahead, and replaces the resource (a new one, with the new deadline) once it has passed."""

    def __init__(
        self,
        base_model: pulumi.Input[str],
        base_weights_ref: pulumi.Input[str] | None = None,
        compute_config: pulumi.Input[ComputeConfigArgs] | None = None,
        lora_enabled: pulumi.Input[bool] | None = None,
        optimizer_config: pulumi.Input[OptimizerConfigArgs] | None = None,
        inactive_timeout: pulumi.Input[int] | None = None,
        create_timeout: pulumi.Input[float] | None = None,
        delete_timeout: pulumi.Input[float] | None = None,
        force_stop: pulumi.Input[bool] | None = None,
        adopt_id: pulumi.Input[str] | None = None,
        max_price_per_hour: pulumi.Input[float] | None = None,
        keep_ready_until: pulumi.Input[str] | None = None,
        stop_after: pulumi.Input[str] | None = None,
    ) -> None:
        self.base_model = base_model
        self.base_weights_ref = base_weights_ref
        self.compute_config = compute_config
        self.lora_enabled = lora_enabled
        self.optimizer_config = optimizer_config
        self.inactive_timeout = inactive_timeout
        self.create_timeout = create_timeout
        self.delete_timeout = delete_timeout
        self.force_stop = force_stop
        self.adopt_id = adopt_id
        self.max_price_per_hour = max_price_per_hour
        self.keep_ready_until = keep_ready_until
        self.stop_after = stop_after


class ModelResource(pulumi.dynamic.Resource, module="together", name="ModelResource"):
    """A Together RL model resource. Type token ``pulumi-python:dynamic/together:ModelResource``.

    Input attributes (``base_model`` ... ``adopt_id``) hold the inputs as declared; ``effective_*`` hold what
    the API reports.
    """

    base_model: pulumi.Output[str]
    """The base model, as declared."""
    base_weights_ref: pulumi.Output[str | None]
    """The declared ``base_weights_ref`` (see ``effective_base_weights_ref`` for the pinned revision)."""
    compute_config: pulumi.Output[dict[str, Any] | None]
    """The declared compute layout (see ``effective_compute_config``)."""
    lora_enabled: pulumi.Output[bool | None]
    """The declared ``lora_enabled`` (see ``effective_lora_enabled``)."""
    optimizer_config: pulumi.Output[dict[str, Any] | None]
    """The declared optimizer (see ``effective_optimizer_config``)."""
    inactive_timeout: pulumi.Output[int | None]
    """The declared inactivity timeout (see ``effective_inactive_timeout``)."""
    create_timeout: pulumi.Output[float | None]
    """Provider option, as declared."""
    delete_timeout: pulumi.Output[float | None]
    """Provider option, as declared."""
    force_stop: pulumi.Output[bool | None]
    """Provider option, as declared."""
    adopt_id: pulumi.Output[str | None]
    """Provider option, as declared."""
    max_price_per_hour: pulumi.Output[float | None]
    """Provider option, as declared."""
    keep_ready_until: pulumi.Output[str | None]
    """Provider option, as declared (see ``expires_at`` for what the API holds)."""
    stop_after: pulumi.Output[str | None]
    """The declared deadline (see ``stop_at``)."""
    stop_at: pulumi.Output[str | None]
    """The deadline as an RFC 3339 time (a duration counted from ``created_at``); unset without one."""
    stop_reason: pulumi.Output[str | None]
    """``"deadline"`` once the resource was stopped at its deadline (it then stays stopped); unset otherwise."""
    owner: pulumi.Output[str]
    """The declaration that made it: ``org/project/stack/name``, from the program. The create journal records
    it, so that only this declaration takes over what an interrupted create of it made. Never causes a diff."""
    price_per_hour: pulumi.Output[float | None]
    """The estimated hourly price (``POST /v1/rl/model-resources/estimate-cost``), as of the last change of its
    inputs; known at preview. Unset when the estimate could not be had (the API could not be asked)."""
    currency: pulumi.Output[str | None]
    """The ISO 4217 currency of ``price_per_hour`` (``USD``)."""
    status: pulumi.Output[str]
    """Short status: PENDING, CREATING, READY (after create), STOPPING, STOPPED or ERROR."""
    queue_position: pulumi.Output[int | None]
    """Place in the capacity queue while PENDING, as of the last create/refresh."""
    error: pulumi.Output[dict[str, str] | None]
    """``{"code", "message"}`` when the resource is in ERROR."""
    created_at: pulumi.Output[str]
    """RFC 3339 creation time."""
    updated_at: pulumi.Output[str]
    """RFC 3339 time of the last change, as of the last create/refresh."""
    created_by: pulumi.Output[str]
    """User id of the creator."""
    expires_at: pulumi.Output[str | None]
    """While READY: when the resource stops itself for inactivity, as of the last create, update or refresh
    (at least ``keep_ready_until`` while that is ahead and within a day)."""
    effective_compute_config: pulumi.Output[dict[str, Any]]
    """The compute layout the API provisioned, defaults filled in (``gpu_type``, ``num_generator_replicas``)."""
    effective_optimizer_config: pulumi.Output[dict[str, Any]]
    """The optimizer the API reports (``{"adam": {}}`` when none was declared)."""
    effective_lora_enabled: pulumi.Output[bool]
    """Whether the resource hosts LoRA sessions, as the API reports."""
    effective_inactive_timeout: pulumi.Output[int | None]
    """The inactivity timeout the API applies (seconds)."""
    effective_base_weights_ref: pulumi.Output[str | None]
    """The custom weights, pinned to a revision (``together://ml_x@rv_y``), as the API reports."""

    def __init__(
        self,
        resource_name: str,
        args: ModelResourceArgs | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        props = declared_props(ModelResource, args, resource_name)
        super().__init__(_ModelResourceProvider(), resource_name, props, opts)
        # What a TrainingSession given `model_resource=self` validates against at preview, when the id is not
        # known yet (a resource created in the same change): the declared inputs, not the outputs.
        self._declared = {k: props[k] for k in SESSION_FACTS} if args is not None else None

    @staticmethod
    def get(
        resource_name: str, id: pulumi.Input[str], opts: pulumi.ResourceOptions | None = None
    ) -> ModelResource:
        """Read an existing model resource by id (its inputs are taken from the API)."""
        return ModelResource(
            resource_name, None, pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(id=id))
        )


class _ModelResourceProvider(KindProvider):
    """The dynamic provider behind :class:`ModelResource`: the shared lifecycle over :data:`MODEL_RESOURCE`.
    This module and class name are pickled into every stack's state (``__provider``): they must not move."""

    schema_at = "pulumi_together_rl.resources.model_resource_schema:MODEL_RESOURCE"
    checks_at = "pulumi_together_rl.resources.model_resource_checks:check"
