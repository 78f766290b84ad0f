"""The private helpers of :mod:`.model_resource` (everything but its Args, Resource and Provider).

The keys of its inputs and outputs (``_REPLACE_ON_CHANGES`` drives ``diff``), the validated inputs (pydantic,
built in ``check``) with their hints, the remote part of ``check``, the one ``_to_request`` and one
``_to_outputs``, waiting for READY, the attached-sessions listing of ``delete``, and ``adopt_id``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pulumi.dynamic import CheckFailure, CreateResult
from pydantic import Field, StrictBool, StrictFloat, model_validator

from .. import config
from ..client import errors
from ..client.matching import resource_differences
from ..client.models import (
    RESOURCE_GONE,
    ModelResourceCreateRequest,
    ModelResourceStatus,
    TrainingSessionStatus,
)
from ..client.models import ModelResource as WireModelResource
from ..waiting import printable
from . import _lookups as lookups
from ._base import api_client, needs_remote_check, remote_check
from ._errors import ProviderError, explain, log
from ._inputs import (
    ID_MAX,
    OWNER_KEY,
    PathId,
    StrictInputs,
    WholeInt,
    answers_the_input,
    contains_unknown,
    drop_none,
    id_prefix,
    iso,
    pick,
    refused_at_check,
    short_id,
    text,
)
from ._lifecycle import NOT_FOUND_GRACE, get_or_none, wait
from ._lookups import estimate_cost, supported_models
from ._transactions import Kind, adopted

KIND = "model resource"
_PATH = "/v1/rl/model-resources"

_REPLACE_ON_CHANGES = (
    "base_model",
    "base_weights_ref",
    "compute_config",
    "lora_enabled",
    "optimizer_config",
    "inactive_timeout",
)
_UPDATE_IN_PLACE = ("create_timeout", "delete_timeout", "force_stop", "adopt_id", "max_price_per_hour")
_ESTIMATE_KEYS = ("price_per_hour", "currency")  # added by check (estimate-cost); diff never looks at them
_INPUT_KEYS = (*_REPLACE_ON_CHANGES, *_UPDATE_IN_PLACE, *_ESTIMATE_KEYS, OWNER_KEY)
_REMOTE_CHECK_KEYS = (*_REPLACE_ON_CHANGES, "adopt_id")
_SESSION_FACTS = (
    "base_model",
    "compute_config",
    "lora_enabled",
)  # what a session's check needs of it  # a change of one of these asks the API again
_OUTPUT_KEYS = (
    "status",
    "queue_position",
    "error",
    "created_at",
    "updated_at",
    "created_by",
    "expires_at",
    "effective_compute_config",
    "effective_optimizer_config",
    "effective_lora_enabled",
    "effective_inactive_timeout",
    "effective_base_weights_ref",
)


# Ceilings of the numeric inputs (documented in ModelResourceArgs). Pulumi carries any double, inf included,
# and every one of these reaches a wait, the API or a comparison: each is finite and bounded.
_REPLICAS_MAX = 64  # well above any allocation on offer; 2**63 once reached the API and priced at 5e19 USD/h
_CREATE_TIMEOUT_MAX = 7 * 24 * 3600  # 604800 s: a capacity queue has no time limit, but a week is plenty
_DELETE_TIMEOUT_MAX = 24 * 3600  # 86400 s: a stop that takes longer than a day will not end by waiting
_PRICE_MAX = 10000.0  # per hour, in the estimate's currency: far above any allocation on offer


_BaseModelName = text(min_length=1, max_length=ID_MAX)
_WeightsRef = text(max_length=256, pattern=r"^together://ml_[A-Za-z0-9]+(@rv_[A-Za-z0-9]+)?$")


class _ComputeConfig(StrictInputs):
    gpu_type: Literal["B200-SXM", "H100-80GB"] | None = None
    num_generator_replicas: WholeInt | None = Field(None, ge=0, le=_REPLICAS_MAX)


class _Muon(StrictInputs):
    # Not the wire enum: that one also parses the legacy MATCH_ADAMW spelling and values it does not know.
    scaling_strategy: (
        Literal[
            "MUON_SCALING_STRATEGY_MATCH_ADAM",
            "MUON_SCALING_STRATEGY_ORIGINAL",
            "MUON_SCALING_STRATEGY_UNSPECIFIED",
        ]
        | None
    ) = None


class _Adam(StrictInputs):
    """Adam takes no settings: ``{}``."""


class _OptimizerConfig(StrictInputs):
    adam: _Adam | None = None
    muon: _Muon | None = None

    @model_validator(mode="after")
    def _one_of(self) -> _OptimizerConfig:
        if self.adam is not None and self.muon is not None:
            raise ValueError("set only one of adam or muon")
        return self


class _Inputs(StrictInputs):
    """Validated inputs of a model resource (what ``check`` returns, normalised)."""

    base_model: _BaseModelName | None = None
    base_weights_ref: _WeightsRef | None = None
    compute_config: _ComputeConfig | None = None
    lora_enabled: StrictBool | None = None
    optimizer_config: _OptimizerConfig | None = None
    inactive_timeout: WholeInt | None = Field(None, ge=300, le=86400)
    create_timeout: StrictFloat | None = Field(None, gt=0, le=_CREATE_TIMEOUT_MAX, allow_inf_nan=False)
    delete_timeout: StrictFloat | None = Field(None, gt=0, le=_DELETE_TIMEOUT_MAX, allow_inf_nan=False)
    force_stop: StrictBool | None = None
    adopt_id: PathId | None = None
    max_price_per_hour: StrictFloat | None = Field(None, gt=0, le=_PRICE_MAX, allow_inf_nan=False)


_HINTS = {
    "base_model": 'Set base_model to a model listed by GET /v1/rl/supported-models, e.g. "Qwen/Qwen3.5-4B" '
    f"(at most {ID_MAX} characters)",
    "base_weights_ref": "Use a model-registry reference such as together://ml_A1b2C3 (optionally with "
    "@rv_<revision>), at most 256 characters",
    "compute_config": "compute_config takes gpu_type and num_generator_replicas",
    "compute_config.gpu_type": 'Use "B200-SXM" or "H100-80GB", or leave it unset for the model\'s default GPU',
    "compute_config.num_generator_replicas": f"Use a whole number from 0 to {_REPLICAS_MAX} (0 = trainer only; "
    "RL needs at least 1)",
    "lora_enabled": "Use true (LoRA sessions) or false (one full-weight session)",
    "optimizer_config": 'Use {"adam": {}} or {"muon": {"scaling_strategy": ...}}',
    "optimizer_config.adam": "adam takes no settings: use {}",
    "optimizer_config.muon": "muon takes only scaling_strategy",
    "optimizer_config.muon.scaling_strategy": "Use MUON_SCALING_STRATEGY_MATCH_ADAM, "
    "MUON_SCALING_STRATEGY_ORIGINAL or MUON_SCALING_STRATEGY_UNSPECIFIED",
    "inactive_timeout": "Use a whole number of seconds from 300 to 86400 (the API default is 3600)",
    "create_timeout": f"Use a number of seconds greater than 0 and at most {_CREATE_TIMEOUT_MAX} (7 days); the "
    "default is 3600",
    "delete_timeout": f"Use a number of seconds greater than 0 and at most {_DELETE_TIMEOUT_MAX} (1 day); the "
    "default is 900",
    "force_stop": "Use true or false",
    "adopt_id": f"Use the id of an existing model resource (at most {ID_MAX} characters), or leave adopt_id unset",
    "max_price_per_hour": f"Use a price greater than 0 and at most {_PRICE_MAX:.0f} in the estimate's currency "
    "(USD), or leave it unset for no ceiling",
}


def _check_remote(
    olds: Mapping[str, Any], inputs: dict[str, Any]
) -> tuple[dict[str, Any], list[CheckFailure]]:
    """The remote part of check: what the API offers, ``adopt_id``, the estimated price and its ceiling.

    Asks the API only for a new resource or a change of :data:`_REMOTE_CHECK_KEYS`; otherwise the price checked
    last time is carried over (an unchanged ``pulumi up`` makes no HTTP call). Returns the inputs with
    ``price_per_hour``/``currency`` added when known.
    """
    base_model = inputs.get("base_model")
    if not needs_remote_check(olds, inputs, _REMOTE_CHECK_KEYS) and olds.get("price_per_hour") is not None:
        inputs = {**inputs, **pick(olds, _ESTIMATE_KEYS)}
    elif isinstance(base_model, str):
        answer = remote_check(KIND, base_model, lambda client: _ask(client, inputs))
        failures, estimate = answer if answer is not None else ([], None)
        if failures:
            return inputs, failures
        if estimate is not None:
            inputs = {**inputs, "price_per_hour": estimate.price_per_hour, "currency": estimate.currency}
            log(f"{KIND} ({base_model}): estimated {_price(inputs)} (POST {_PATH}/estimate-cost)")
    ceiling, price = inputs.get("max_price_per_hour"), inputs.get("price_per_hour")
    if isinstance(ceiling, float) and isinstance(price, (int, float)) and price > ceiling:
        return inputs, [CheckFailure("max_price_per_hour", f"the estimated price of this model resource, "
                                     f"{_price(inputs)}, exceeds max_price_per_hour {ceiling:.2f}. Choose a "
                                     "smaller GPU type or fewer generator replicas, or raise max_price_per_hour")]  # fmt: skip
    return inputs, []


def _price(inputs: Mapping[str, Any]) -> str:
    return f"{inputs['price_per_hour']:.2f} {inputs.get('currency') or 'USD'}/h"


def _ask(client: Any, inputs: dict[str, Any]) -> tuple[list[CheckFailure], Any]:
    """(failures, cost estimate or None) from the API, for a resource whose ``base_model`` is known.

    An API answer about what was asked (a 4xx, :func:`._inputs.answers_the_input`) is a failure of the field it
    was about; anything else propagates to :func:`._base.remote_check`, which skips the check."""
    try:
        models = supported_models(client)
    except errors.ApiError as exc:
        if not answers_the_input(exc):
            raise
        return [refused_at_check("base_model", "GET /v1/rl/supported-models", exc, _NOT_THE_RL_API)], None
    failures = _check_supported(inputs, models)
    adopt_id = inputs.get("adopt_id")
    if not failures and isinstance(adopt_id, str):
        failures = _check_adoptable(client, adopt_id, inputs)
    body = pick(inputs, _REPLACE_ON_CHANGES)
    if failures or contains_unknown(body):  # an unknown input: the price is known at `pulumi up`
        return failures, None
    try:
        return [], estimate_cost(client, _to_request(inputs))
    except (errors.BadRequest, errors.Conflict) as exc:  # the API would refuse this create
        field = printable(exc.param, 100) if (exc.param or "").split(".")[0] in _HINTS else "base_model"
        return [CheckFailure(field, f"the API refuses this model resource (HTTP {exc.status}: "
                                    f"{printable(exc.message or 'no message')}). "
                                    f"{_HINTS.get(field, 'Fix that input')}")], None  # fmt: skip
    except errors.ApiError as exc:
        if not answers_the_input(exc):
            raise
        return [refused_at_check("base_model", f"POST {_PATH}/estimate-cost", exc, "Check base_model and the "
                                 "other inputs of this model resource; if they are right, the API cannot price "
                                 "it now: run `pulumi preview` again later")], None  # fmt: skip


_NOT_THE_RL_API = (
    "Check together:baseUrl / TOGETHER_BASE_URL: it must be the Together API (the default, "
    "https://api.together.ai), then run the command again"
)


def _check_adoptable(client: Any, adopt_id: str, inputs: Mapping[str, Any]) -> list[CheckFailure]:
    """``adopt_id`` names an active model resource whose settings match the declared ones."""
    # The id is quoted by its first characters only (id_prefix), the request with a placeholder for it.
    quoted = id_prefix(adopt_id)
    try:
        live = lookups.model_resource(client, adopt_id)
    except errors.NotFound:
        return [CheckFailure("adopt_id", f"no model resource {quoted} exists (GET {_PATH}/<adopt_id> answered "
                                         "404). Check adopt_id, or remove it to create a new one")]  # fmt: skip
    except errors.ApiError as exc:
        if not answers_the_input(exc):
            raise
        return [refused_at_check("adopt_id", f"GET {_PATH}/<adopt_id>", exc, "Check adopt_id (the id of an "
                                 "existing model resource), or remove it to create a new one")]  # fmt: skip
    if live.status in RESOURCE_GONE:
        return [CheckFailure("adopt_id", f"model resource {quoted} is {live.status.short}: only an active "
                                         "resource can be adopted. Remove adopt_id to create a new one")]  # fmt: skip
    mismatched = [m.split(" (", 1)[0] for m in _mismatches(inputs, live)]  # field names only: no values
    if mismatched:
        return [CheckFailure("adopt_id", f"model resource {quoted} was created with other settings: "
                                         f"{', '.join(mismatched)} differ. Declare the inputs it was created "
                                         "with, or remove adopt_id to create a new one")]  # fmt: skip
    return []


def _check_supported(inputs: Mapping[str, Any], models: Any) -> list[CheckFailure]:
    """The model, GPU type, full-weight training and generator replicas on offer."""
    base_model = inputs.get("base_model")
    model = next((m for m in models.data if m.base_model == base_model), None)
    if model is None:
        offered = printable(", ".join(m.base_model for m in models.data) or "none", 1000)  # the API's words
        # The rejected value is not repeated: it could be a secret pasted into the wrong field.
        return [CheckFailure("base_model", "base_model is not a model offered for post-training. "
                                           f"Use one of: {offered}")]  # fmt: skip
    compute = inputs.get("compute_config")
    compute = compute if isinstance(compute, dict) else {}
    gpu = compute.get("gpu_type") or (model.default_gpu_type.value if model.default_gpu_type else None)
    if not isinstance(gpu, str):
        return []
    offer = next((c for c in model.compute_configs if c.gpu_type.value == gpu), None)
    if offer is None:
        offered = ", ".join(c.gpu_type.value for c in model.compute_configs) or "none"
        return [
            CheckFailure(
                "compute_config.gpu_type", f"{gpu} is not offered for {base_model}. Use one of: {offered}"
            )
        ]
    failures = []
    if inputs.get("lora_enabled") is False and not (offer.trainer_config and offer.trainer_config.full):
        failures.append(CheckFailure("lora_enabled", f"full-weight training is not offered for {base_model} on "
                                                     f"{gpu}. Set lora_enabled to true"))  # fmt: skip
    replicas = compute.get("num_generator_replicas")
    if isinstance(replicas, int) and replicas > 0 and offer.generator_config is None:
        failures.append(CheckFailure("compute_config.num_generator_replicas", f"{base_model} on {gpu} offers no "
                                     "generator replicas. Set num_generator_replicas to 0 (trainer only)"))  # fmt: skip
    return failures


def _to_request(inputs: Mapping[str, Any]) -> ModelResourceCreateRequest:
    return ModelResourceCreateRequest.model_validate(pick(inputs, _REPLACE_ON_CHANGES))


def _to_outputs(inputs: Mapping[str, Any], mr: WireModelResource) -> dict[str, Any]:
    """The state: declared inputs under their own names, then what the API reports."""
    return drop_none(
        {
            **pick(inputs, _INPUT_KEYS),
            "status": mr.status.short,
            "queue_position": mr.status_details.queue_position if mr.status_details else None,
            "error": {"code": mr.error.code, "message": mr.error.message} if mr.error else None,
            "created_at": iso(mr.created_at),
            "updated_at": iso(mr.updated_at),
            "created_by": mr.created_by,
            "expires_at": iso(mr.expires_at),
            "effective_compute_config": mr.compute_config.to_wire(),
            "effective_optimizer_config": mr.optimizer_config.to_wire(),
            "effective_lora_enabled": mr.lora_enabled,
            "effective_inactive_timeout": mr.inactive_timeout,
            "effective_base_weights_ref": mr.base_weights_ref,
        }
    )


def _inputs_from_api(mr: WireModelResource) -> dict[str, Any]:
    """Inputs that describe an existing resource (for ``.get()``, where nothing was declared)."""
    return drop_none(
        {
            "base_model": mr.base_model,
            "base_weights_ref": mr.base_weights_ref,
            "compute_config": mr.compute_config.to_wire(),
            "lora_enabled": mr.lora_enabled,
            "optimizer_config": mr.optimizer_config.to_wire() or None,
            "inactive_timeout": mr.inactive_timeout,
        }
    )


def _describe(id_: str):
    def describe(mr: WireModelResource | None) -> str:
        if mr is None:
            return f"{KIND} {short_id(id_)}: not found"
        queue = mr.status_details.queue_position if mr.status_details else None
        where = f", queue position {queue}" if mr.status == ModelResourceStatus.PENDING and queue else ""
        return f"{KIND} {short_id(id_)}: {mr.status.short}{where}"

    return describe


def _wait_ready(client: Any, first: WireModelResource, inputs: Mapping[str, Any]) -> WireModelResource:
    """Wait for READY, starting from ``first`` (the create's answer, or the adopted object as read)."""
    id_ = first.id
    return wait(
        client,
        KIND,
        id_,
        first=first,
        done=lambda mr: mr is not None and mr.status == ModelResourceStatus.READY,
        failed=lambda mr: mr is None or mr.status in RESOURCE_GONE,
        describe=_describe(id_),
        timeout=inputs.get("create_timeout") or config.MODEL_RESOURCE_CREATE_TIMEOUT,
        not_found_grace=NOT_FOUND_GRACE,  # a 404 just after the POST can be read-after-write lag
        limit="create_timeout",
    )


_RUNNING_SESSIONS = frozenset({TrainingSessionStatus.CREATING, TrainingSessionStatus.RUNNING})

_ATTACHED_TODO = (
    "Stop those sessions first: `python -m pulumi_together_rl orphans --state <pulumi stack export file> "
    "--stop` stops every session no given stack holds (or POST /v1/rl/training-sessions/<id>/stop each), and "
    "if one belongs to another stack, destroy it there; or use force_stop. Pulumi deletes a resource with the inputs it was last "
    "deployed with, so force_stop=True must be deployed on its own first: set it, undo any other change to this "
    "ModelResource for now, and run `pulumi up` (or `pulumi up --target <URN of this ModelResource>`; "
    "`pulumi stack --show-urns` lists URNs); then apply your change, or run `pulumi destroy`, again"
)


def _sessions_on(client: Any, id_: str, statuses: Any, *, quiet: bool = False) -> list[str] | None:
    """Ids of the resource's sessions in ``statuses`` (``quiet``: ``None`` if the list call fails)."""
    try:
        wanted = sorted(s.value for s in statuses)
        return [s.id for s in client.iter_training_sessions(model_resources_id=id_, status=wanted)]
    except errors.TogetherError:
        if quiet:
            return None
        raise


def _adopt(inputs: dict[str, Any], lifecycle: Kind) -> CreateResult:
    """Take over an existing active resource: verify it matches the declared inputs, then wait for READY."""
    id_ = inputs["adopt_id"]
    client = api_client("adopting", KIND, id_)
    try:
        live = get_or_none(client.get_model_resource, id_)
    except Exception as exc:
        raise ProviderError("adopting", KIND, id_, *explain(exc, "adopting")) from exc
    if live is None:
        raise ProviderError(
            "adopting",
            KIND,
            id_,
            "it does not exist",
            f"Check adopt_id (GET {_PATH}), or remove it to create a new one",
        )
    if live.status in RESOURCE_GONE:
        raise ProviderError("adopting", KIND, id_, f"it is {live.status.short}", "Only an active resource can be "
                            "adopted: remove adopt_id to create a new one")  # fmt: skip
    mismatched = _mismatches(inputs, live)
    if mismatched:
        raise ProviderError("adopting", KIND, id_, f"its settings differ from the declared inputs: {'; '.join(mismatched)}",
                            "Declare the inputs it was created with, or remove adopt_id to create a new one")  # fmt: skip
    try:
        ready = _wait_ready(client, live, inputs)
    except Exception as exc:  # not ours to stop: it existed before this program
        raise ProviderError("adopting", KIND, id_, *explain(exc, "adopting")) from exc
    adopted(lifecycle, client, _to_request(inputs), inputs.get(OWNER_KEY), id_)
    return CreateResult(id_, _to_outputs(inputs, ready))


def _mismatches(inputs: Mapping[str, Any], mr: WireModelResource) -> list[str]:
    """Where ``mr`` differs from the declared inputs (``adopt_id``: only what is declared is held against it;
    the one rule is :func:`~..client.matching.resource_differences`)."""
    known = {k: v for k, v in pick(inputs, _REPLACE_ON_CHANGES).items() if not contains_unknown(v)}
    return [str(d) for d in resource_differences(ModelResourceCreateRequest.model_validate(known), mr)]
