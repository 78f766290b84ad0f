"""What ``check`` judges of a model resource: the inputs' shapes and bounds (the validated-inputs model, with
a hint per field; ``keep_ready_until`` at most 30 days ahead, with a warning past a week), then, for a new
resource or a changed API input, what the API offers (model, GPU type, full-weight, replicas), ``adopt_id``
(exists, active, same settings) and the estimated price (``POST .../estimate-cost``, one request per body per
process), which goes into ``price_per_hour`` / ``currency`` and a line on stderr; ``max_price_per_hour`` below
it fails. The first such check of a process says the account's spend, and each judges the account's cap
(:mod:`.spend`). A 400 from estimate-cost names the field. No key, or an API that cannot be asked: warn and skip
(:func:`.process.remote_check`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    Field,
    Strict,
    StrictBool,
    StrictFloat,
    StringConstraints,
    model_validator,
)

from ..client import errors
from ..messages import printable
from . import checks, deadline, process, spend
from .inputs import (
    ID_MAX,
    NO_CONTROL_CHARACTERS,
    Failure,
    PathId,
    StrictInputs,
    WholeInt,
    answers_the_input,
    contains_unknown,
    pick,
    refused_at_check,
    validate_inputs,
)
from .keys import OWNER_KEY
from .model_resource_schema import (
    ESTIMATE_KEYS,
    KEEP_MAX_AHEAD,
    KEEP_WARNING_AHEAD,
    MODEL_RESOURCE,
    REPLACE_ON_CHANGES,
    parse_time,
    price_text,
)
from .secrecy import hiding_check

KIND = "model resource"
PATH = "/v1/rl/model-resources"
REMOTE_CHECK_KEYS = (*REPLACE_ON_CHANGES, "adopt_id")
"""A new resource, or a change of one of these, asks the API again."""


@hiding_check
def check(olds: Mapping[str, Any], news: Mapping[str, Any]) -> tuple[dict[str, Any], list[Failure]]:
    """(checked inputs, failures): the shapes, then what the API says (see the module docstring)."""
    declared = {k: v for k, v in news.items() if k not in ESTIMATE_KEYS}  # check's own, never declared
    inputs, failures = validate_inputs(Inputs, declared, required=("base_model",), hints=HINTS)
    if not failures:
        failures = _check_keep(olds, inputs)
    if not failures:
        inputs, failures = _check_remote(olds, inputs)
    if not failures:
        price = inputs.get("price_per_hour")
        hourly = (
            (float(price), str(inputs.get("currency") or "USD")) if isinstance(price, (int, float)) else None
        )
        failures = checks.deadline(KIND, inputs.get("base_model"), olds, inputs, hourly=hourly)
    return inputs, failures


# Ceilings of the numeric inputs (documented in ModelResourceArgs). Pulumi carries any double, inf included,
# and every one of these reaches a wait, the API or a comparison: each is finite and bounded.
_REPLICAS_MAX = 64  # well above any allocation on offer; 2**63 once reached the API and priced at 5e19 USD/h
_CREATE_TIMEOUT_MAX = 7 * 24 * 3600  # 604800 s: a capacity queue has no time limit, but a week is plenty
_DELETE_TIMEOUT_MAX = 24 * 3600  # 86400 s: a stop that takes longer than a day will not end by waiting
_PRICE_MAX = 10000.0  # per hour, in the estimate's currency: far above any allocation on offer


_BaseModelName = Annotated[
    str, Strict(), StringConstraints(min_length=1, max_length=ID_MAX), NO_CONTROL_CHARACTERS
]


def _rfc3339(value: str) -> str:
    if parse_time(value) is None:
        raise ValueError("must be an RFC 3339 time with its zone")
    return value  # echoed as declared: the state compares like with like


_Time = Annotated[
    str, Strict(), StringConstraints(max_length=64), NO_CONTROL_CHARACTERS, AfterValidator(_rfc3339)
]
_WeightsRef = Annotated[
    str,
    Strict(),
    StringConstraints(max_length=256, pattern=r"^together://ml_[A-Za-z0-9]+(@rv_[A-Za-z0-9]+)?$"),
    NO_CONTROL_CHARACTERS,
]


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


class Inputs(StrictInputs):
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
    keep_ready_until: _Time | None = None
    stop_after: deadline.StopAfter | None = None


HINTS = {
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
    "stop_after": deadline.HINT,
    "keep_ready_until": 'Use an RFC 3339 time with its zone, e.g. "2026-12-04T18:00:00Z", at most '
    f"{KEEP_MAX_AHEAD.days} days ahead, or leave it unset to let the resource stop itself after inactive_timeout "
    "idle",
}


def _check_keep(olds: Mapping[str, Any], inputs: Mapping[str, Any]) -> list[Failure]:
    """``keep_ready_until`` at most :data:`KEEP_MAX_AHEAD` ahead of now (this machine's clock: days, not
    seconds, are at stake); further than :data:`KEEP_WARNING_AHEAD`, a warning when it is new or changed."""
    until = parse_time(inputs.get("keep_ready_until"))  # None: unset or unknown (its shape was checked above)
    if until is None:
        return []
    ahead = until - datetime.now(timezone.utc)
    if ahead > KEEP_MAX_AHEAD:
        return [Failure("keep_ready_until", f"keep_ready_until is more than {KEEP_MAX_AHEAD.days} days ahead, the "
                        "furthest a keep may reach: it holds a GPU READY, billed every hour whether used or not, "
                        f"until then. {HINTS['keep_ready_until']}")]  # fmt: skip
    if ahead > KEEP_WARNING_AHEAD and olds.get("keep_ready_until") != inputs.get("keep_ready_until"):
        line = (
            f"warning: {KIND} ({inputs.get('base_model')}): keep_ready_until is {ahead.days} days ahead: the GPU "
            "stays READY, billed every hour whether used or not, until then"
        )
        process.log_once(_said_of(inputs, "keep", inputs.get("keep_ready_until")), line)
    return []


def _check_remote(olds: Mapping[str, Any], inputs: dict[str, Any]) -> tuple[dict[str, Any], list[Failure]]:
    """The remote part of check: what the API offers, ``adopt_id``, the estimated price and its ceiling.

    Asks the API only for a new resource or a change of :data:`REMOTE_CHECK_KEYS`; otherwise the price checked
    last time is carried over (an unchanged ``pulumi up`` makes no HTTP call). Returns the inputs with
    ``price_per_hour``/``currency`` added when known.
    """
    base_model = inputs.get("base_model")
    if (
        not process.needs_remote_check(olds, inputs, REMOTE_CHECK_KEYS)
        and olds.get("price_per_hour") is not None
    ):
        inputs = {**inputs, **pick(olds, ESTIMATE_KEYS)}
    elif isinstance(base_model, str):
        answer = process.remote_check(KIND, base_model, lambda client: _ask(client, inputs))
        failures, estimate = answer if answer is not None else ([], None)
        if failures:
            return inputs, failures
        if estimate is not None:
            inputs = {**inputs, "price_per_hour": estimate.price_per_hour, "currency": estimate.currency}
            line = f"{KIND} ({base_model}): estimated {price_text(inputs)} (POST {PATH}/estimate-cost)"
            process.log_once(_said_of(inputs, "price", line), line)
        if answer is not None:  # the API was asked: the account's line, and its cap
            failures = spend.judge(inputs)
            if failures:
                return inputs, failures
    ceiling, price = inputs.get("max_price_per_hour"), inputs.get("price_per_hour")
    if isinstance(ceiling, float) and isinstance(price, (int, float)) and price > ceiling:
        return inputs, [Failure("max_price_per_hour", f"the estimated price of this model resource, "
                                     f"{price_text(inputs)}, exceeds max_price_per_hour {ceiling:.2f}. Choose a "
                                     "smaller GPU type or fewer generator replicas, or raise max_price_per_hour")]  # fmt: skip
    return inputs, []


def _said_of(inputs: Mapping[str, Any], *what: Any) -> tuple[Any, ...]:
    """The key of a line check says once per declaration (:func:`.process.log_once`)."""
    body = json.dumps(pick(inputs, REPLACE_ON_CHANGES), sort_keys=True, default=str)
    return (KIND, inputs.get(OWNER_KEY), body, *what)


def _ask(client: Any, inputs: dict[str, Any]) -> tuple[list[Failure], Any]:
    """(failures, cost estimate or None) from the API, for a resource whose ``base_model`` is known.

    An API answer about what was asked (a 4xx, :func:`._inputs.answers_the_input`) is a failure of the field it
    was about; anything else propagates to :func:`._base.remote_check`, which skips the check."""
    try:
        models = process.supported_models(client)
    except errors.ApiError as exc:
        if not answers_the_input(exc):
            raise
        return [refused_at_check("base_model", "GET /v1/rl/supported-models", exc, _NOT_THE_RL_API)], None
    failures = _check_supported(inputs, models)
    adopt_id = inputs.get("adopt_id")
    if not failures and isinstance(adopt_id, str):
        failures = checks.adoptable(MODEL_RESOURCE, client, adopt_id, inputs)
    body = pick(inputs, REPLACE_ON_CHANGES)
    if failures or contains_unknown(body):  # an unknown input: the price is known at `pulumi up`
        return failures, None
    try:
        return [], process.estimate_cost(client, MODEL_RESOURCE.to_request(inputs))
    except (errors.BadRequest, errors.Conflict) as exc:  # the API would refuse this create
        param = exc.param or ""
        field = printable(param, 100) if param.split(".")[0] in HINTS else "base_model"
        return [Failure(field, f"the API refuses this model resource (HTTP {exc.status}: "
                                    f"{printable(exc.message or 'no message')}). "
                                    f"{HINTS.get(field, 'Fix that input')}")], None  # fmt: skip
    except errors.ApiError as exc:
        if not answers_the_input(exc):
            raise
        return [refused_at_check("base_model", f"POST {PATH}/estimate-cost", exc, "Check base_model and the "
                                 "other inputs of this model resource; if they are right, the API cannot price "
                                 "it now: run `pulumi preview` again later")], None  # fmt: skip


_NOT_THE_RL_API = (
    "Check together:baseUrl / TOGETHER_BASE_URL: it must be the Together API (the default, "
    "https://api.together.ai), then run the command again"
)


def _check_supported(inputs: Mapping[str, Any], models: Any) -> list[Failure]:
    """The model, GPU type, full-weight training and generator replicas on offer."""
    base_model = inputs.get("base_model")
    model = next((m for m in models.data if m.base_model == base_model), None)
    if model is None:
        offered = printable(", ".join(m.base_model for m in models.data) or "none", 1000)  # the API's words
        # The rejected value is not repeated: it could be a secret pasted into the wrong field.
        return [Failure("base_model", "base_model is not a model offered for post-training. "
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
            Failure(
                "compute_config.gpu_type", f"{gpu} is not offered for {base_model}. Use one of: {offered}"
            )
        ]
    failures = []
    if inputs.get("lora_enabled") is False and not (offer.trainer_config and offer.trainer_config.full):
        failures.append(Failure("lora_enabled", f"full-weight training is not offered for {base_model} on "
                                                     f"{gpu}. Set lora_enabled to true"))  # fmt: skip
    replicas = compute.get("num_generator_replicas")
    if isinstance(replicas, int) and replicas > 0 and offer.generator_config is None:
        failures.append(Failure("compute_config.num_generator_replicas", f"{base_model} on {gpu} offers no "
                                     "generator replicas. Set num_generator_replicas to 0 (trainer only)"))  # fmt: skip
    return failures
