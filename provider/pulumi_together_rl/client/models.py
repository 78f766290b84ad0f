"""Wire models of the Together RL API: one pydantic class per JSON object, 1:1 with the API.

Rules that make these safe against a live, evolving API:

* Unknown fields are tolerated (``extra="allow"``): Together adds response fields often, and a new field must
  never break ``pulumi refresh``.
* int64 fields arrive as JSON strings (proto3 JSON mapping) or ints; :data:`Int64` accepts both and keeps an
  ``int`` whenever the value is numeric.
* Request models are serialised with :meth:`WireModel.to_wire`, which sends only the fields that were set, so
  "omitted = unchanged" (PATCH) and "omitted = server default" (create) hold; ``""`` is sent as given.
* Error codes are kept as plain strings (constants below): they only ever reach a message, and an error code
  the API adds later must still be reported, not rejected.
* Statuses, GPU types and Muon scaling strategies are *open* enums (:class:`OpenEnum`): the known values are
  members the lifecycle logic branches on, and a value the API adds later parses as a pseudo-member whose
  value is the raw string (it serialises back unchanged) and which is in no status group below, so the
  resource layer treats an unknown status as "active but not ready" instead of failing ``get``/``refresh``.
  Statuses are open everywhere (``ModelResourceStatus("X")`` works: they are only ever read from the API).
  GPU types and Muon strategies are open in every wire model (:data:`OpenGpuType`,
  :data:`OpenMuonScalingStrategy`) but the bare class stays strict (``GpuType("A100")`` raises), because they
  are user inputs too, and the resource layer validates those against the class to catch typos at preview.

Status groups used by the resource layer live here too, so there is one definition of "gone" or "active".
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from enum import Enum
from typing import Annotated, Any, Protocol

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr


def _coerce_int64(value: Any) -> Any:
    # proto3 JSON renders int64 as a string ("100"); older examples even hold placeholders ("string"), which
    # we keep as text rather than fail on, as the official SDK (typed `str | int`) does.
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return value
    return value


Int64 = Annotated[int | str, BeforeValidator(_coerce_int64)]
"""An int64 field: accepted as JSON string or number, held as ``int`` when numeric."""


class WireModel(BaseModel):
    """Base of every wire model: tolerant of unknown fields, serialises only what was set."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    def to_wire(self) -> dict[str, Any]:
        """The JSON body for a request: only fields that were set and are not ``None``."""
        return self.model_dump(mode="json", exclude_unset=True, exclude_none=True)


# --------------------------------------------------------------------------------------------------- enums


_PSEUDO_MEMBERS: dict[tuple[type, str], Any] = {}


class OpenEnum(str, Enum):
    """A string enum that can stand for values it does not know (the API adds statuses and GPU types).

    :meth:`lenient` returns the member for a known value, else a pseudo-member: an instance of the class whose
    ``value`` and ``name`` are the raw string. It compares equal to that string, round-trips through
    ``model_dump``/``to_wire``/pickle, is the same object on every lookup, and is not listed by ``list(Cls)``
    (so it is in no status group). Subclasses whose ``_missing_`` calls :meth:`_open_missing` accept
    unknown values in the constructor too.
    """

    @classmethod
    def lenient(cls, value: Any) -> Any:
        """The member for ``value``, a pseudo-member for an unknown non-empty string, else ``value`` as is
        (so that pydantic reports the bad input)."""
        if isinstance(value, cls):
            return value
        known = cls._value2member_map_.get(value) if isinstance(value, str) else None
        if known is not None:
            return known
        if not isinstance(value, str) or not value:
            return value
        pseudo = _PSEUDO_MEMBERS.get((cls, value))
        if pseudo is None:
            pseudo = str.__new__(cls, value)
            pseudo._name_ = value
            pseudo._value_ = value
            # setdefault: two threads meeting the same new value still share one object.
            pseudo = _PSEUDO_MEMBERS.setdefault((cls, value), pseudo)
        return pseudo

    @classmethod
    def _open_missing(cls, value: object) -> Any:
        result = cls.lenient(value)
        return result if isinstance(result, cls) else None

    def __reduce_ex__(self, protocol: Any) -> Any:
        return (type(self).lenient, (self._value_,))

    @property
    def known(self) -> bool:
        """False for a pseudo-member made for a value this version does not know."""
        return type(self).__members__.get(self._name_) is self


class Status(OpenEnum):
    """The status of an object of the API (a model resource's, a training session's): what code written for
    every kind reads of one (its :attr:`short` name, its group membership)."""

    @classmethod
    def _missing_(cls, value: object) -> Any:  # open: a status the API adds later still parses
        return cls._open_missing(value)

    @property
    def short(self) -> str:
        """The short name the guides use (``READY``); the raw value's tail for an unknown status."""
        return str(self.value).rsplit("_STATUS_", 1)[-1]


StatusFilter = Iterable[Status | str] | str | None
"""What a list asks for: statuses (members, raw values, or short names such as ``"READY"``), or none."""


class ApiObject(Protocol):
    """What code written for every kind reads of an object of the API (a :class:`ModelResource`, a
    :class:`TrainingSession`)."""

    @property
    def id(self) -> str: ...

    @property
    def status(self) -> Status: ...

    @property
    def created_at(self) -> datetime: ...


class ModelResourceStatus(Status):
    PENDING = "MODEL_RESOURCES_STATUS_PENDING"
    CREATING = "MODEL_RESOURCES_STATUS_CREATING"
    READY = "MODEL_RESOURCES_STATUS_READY"
    ERROR = "MODEL_RESOURCES_STATUS_ERROR"
    STOPPED = "MODEL_RESOURCES_STATUS_STOPPED"
    STOPPING = "MODEL_RESOURCES_STATUS_STOPPING"


class TrainingSessionStatus(Status):
    UNSPECIFIED = "TRAINING_SESSION_STATUS_UNSPECIFIED"
    CREATING = "TRAINING_SESSION_STATUS_CREATING"
    RUNNING = "TRAINING_SESSION_STATUS_RUNNING"
    STOPPED = "TRAINING_SESSION_STATUS_STOPPED"
    STOPPING = "TRAINING_SESSION_STATUS_STOPPING"
    ERROR = "TRAINING_SESSION_STATUS_ERROR"
    EXPIRED = "TRAINING_SESSION_STATUS_EXPIRED"


class GpuType(OpenEnum):
    H100_80GB = "H100-80GB"
    B200_SXM = "B200-SXM"


class MuonScalingStrategy(OpenEnum):
    UNSPECIFIED = "MUON_SCALING_STRATEGY_UNSPECIFIED"
    MATCH_ADAM = "MUON_SCALING_STRATEGY_MATCH_ADAM"
    ORIGINAL = "MUON_SCALING_STRATEGY_ORIGINAL"
    # Older spellings seen in earlier SDK builds; accepted when parsing.
    MATCH_ADAMW = "MUON_SCALING_STRATEGY_MATCH_ADAMW"


OpenGpuType = Annotated[GpuType, BeforeValidator(GpuType.lenient)]
"""A GPU type in a wire model: a type the API adds later parses as a pseudo-member."""
OpenMuonScalingStrategy = Annotated[MuonScalingStrategy, BeforeValidator(MuonScalingStrategy.lenient)]
"""A Muon scaling strategy in a wire model: one the API adds later parses as a pseudo-member."""


class ModelResourceErrorCode:
    """Known ``ModelResources.error.code`` values (newest SDK), plus the older spelling."""

    CAPACITY_WAIT_TIMEOUT = "MODEL_RESOURCES_ERROR_CODE_CAPACITY_WAIT_TIMEOUT"
    PROVISIONING_FAILED = "MODEL_RESOURCES_ERROR_CODE_PROVISIONING_FAILED"
    RESOURCE_UNAVAILABLE = "MODEL_RESOURCES_ERROR_CODE_RESOURCE_UNAVAILABLE"
    CAPACITY_UNAVAILABLE = "MODEL_RESOURCES_ERROR_CODE_CAPACITY_UNAVAILABLE"  # older spec
    ALL = (CAPACITY_WAIT_TIMEOUT, PROVISIONING_FAILED, RESOURCE_UNAVAILABLE, CAPACITY_UNAVAILABLE)


class TrainingSessionErrorCode:
    """Known ``TrainingSession.error.code`` values."""

    RESOURCE_UNAVAILABLE = "TRAINING_SESSION_ERROR_CODE_RESOURCE_UNAVAILABLE"
    RESOURCE_AT_CAPACITY = "TRAINING_SESSION_ERROR_CODE_RESOURCE_AT_CAPACITY"
    TIMED_OUT = "TRAINING_SESSION_ERROR_CODE_TIMED_OUT"
    SESSION_FAILED = "TRAINING_SESSION_ERROR_CODE_SESSION_FAILED"
    ALL = (RESOURCE_UNAVAILABLE, RESOURCE_AT_CAPACITY, TIMED_OUT, SESSION_FAILED)


# Status groups: the one definition every layer uses (the client's reconciliation, the resources, the watcher,
# the orphan finder). Tuples where order reaches the wire (a list filter), frozensets otherwise.
RESOURCE_PROVISIONING = frozenset({ModelResourceStatus.PENDING, ModelResourceStatus.CREATING})
#: Resources that hold (or are about to hold) a GPU allocation: what a create can have made.
LIVE_RESOURCE_STATUSES = (
    ModelResourceStatus.PENDING,
    ModelResourceStatus.CREATING,
    ModelResourceStatus.READY,
)
#: A resource in one of these states no longer bills and cannot come back (billing stops at STOPPING).
RESOURCE_GONE = frozenset(
    {ModelResourceStatus.STOPPING, ModelResourceStatus.STOPPED, ModelResourceStatus.ERROR}
)
RESOURCE_ACTIVE = frozenset(set(ModelResourceStatus) - RESOURCE_GONE)
#: What one list of resources asks for: every state a wait or a refresh can find an existing one in (one that
#: has ended leaves the list, and is asked for by GET).
LISTED_RESOURCE_STATUSES = (*LIVE_RESOURCE_STATUSES, ModelResourceStatus.STOPPING)
#: Sessions that hold a slot and run (or are about to): what a create can have made.
LIVE_SESSION_STATUSES = (TrainingSessionStatus.CREATING, TrainingSessionStatus.RUNNING)
#: A session in one of these states has ended and released its slot (STOPPING still holds its LoRA slot).
SESSION_GONE = frozenset(
    {TrainingSessionStatus.STOPPED, TrainingSessionStatus.EXPIRED, TrainingSessionStatus.ERROR}
)
#: Sessions that still occupy a slot on their model resource.
SESSION_HOLDS_SLOT = frozenset(
    {TrainingSessionStatus.CREATING, TrainingSessionStatus.RUNNING, TrainingSessionStatus.STOPPING}
)
#: What one list of sessions asks for (as :data:`LISTED_RESOURCE_STATUSES`).
LISTED_SESSION_STATUSES = (*LIVE_SESSION_STATUSES, TrainingSessionStatus.STOPPING)


# ----------------------------------------------------------------------------------------- shared pieces


class ListMeta(WireModel):
    """Pagination metadata of every list response."""

    limit: int | None = None
    has_more: bool | None = None
    next_cursor: str | None = None  # "" on the last page


class _ListPage(WireModel):
    """Base of the model-resource and training-session lists, which the client reads item by item.

    ``data`` holds the items this version could read; one it could not is skipped (see
    :func:`.wire._parse_list`). ``_raw_ids`` are the ids of every item the API sent, skipped ones included
    (None for one with no string id; None altogether for a page not read that way), so paging follows what
    the API sent.
    """

    data: list[Any] = Field(default_factory=list)
    """Each list names its items' model (``list[ModelResource]``)."""
    meta: ListMeta = Field(default_factory=ListMeta)
    _raw_ids: list[str | None] | None = PrivateAttr(default=None)


class ErrorBody(WireModel):
    message: str = ""
    type: str = ""
    param: str | None = None
    code: str | None = None


class ErrorEnvelope(WireModel):
    """Every non-2xx body: ``{"error": {message, type, param, code}}``."""

    error: ErrorBody


# ------------------------------------------------------------------------------------- model resources


class AdamConfig(WireModel):
    """Adam optimizer (no settings)."""


class MuonConfig(WireModel):
    scaling_strategy: OpenMuonScalingStrategy | None = None


class OptimizerConfig(WireModel):
    """One of ``adam`` or ``muon``. Older servers answer ``adamw``, kept as an extra field."""

    adam: AdamConfig | None = None
    muon: MuonConfig | None = None


class ComputeConfigParams(WireModel):
    """Compute layout in a create / estimate-cost request."""

    gpu_type: OpenGpuType | None = None
    num_generator_replicas: int | None = None


class ComputeConfig(WireModel):
    """Compute layout as provisioned (response)."""

    num_generator_replicas: int
    gpu_type: OpenGpuType | None = None


class StatusDetails(WireModel):
    queue_position: int | None = None


class ModelResourceError(WireModel):
    code: str
    message: str = ""
    occurred_at: datetime | None = None


class ModelResource(WireModel):
    """``ModelResources``: the response of every model-resource endpoint."""

    id: str
    status: ModelResourceStatus
    status_details: StatusDetails = Field(default_factory=StatusDetails)
    base_model: str
    compute_config: ComputeConfig
    lora_enabled: bool
    optimizer_config: OptimizerConfig = Field(default_factory=OptimizerConfig)
    created_at: datetime
    updated_at: datetime
    created_by: str
    # Required in the newest SDK; optional here so an older server's answer still parses.
    inactive_timeout: int | None = None
    base_weights_ref: str | None = None
    error: ModelResourceError | None = None
    expires_at: datetime | None = None


class ModelResourceList(_ListPage):
    data: list[ModelResource] = Field(default_factory=list)
    meta: ListMeta = Field(default_factory=ListMeta)


class ModelResourceCreateRequest(WireModel):
    """Body of ``POST /v1/rl/model-resources`` and ``.../estimate-cost``."""

    base_model: str
    base_weights_ref: str | None = None
    compute_config: ComputeConfigParams | None = None
    inactive_timeout: int | None = None
    lora_enabled: bool | None = None
    optimizer_config: OptimizerConfig | None = None


class ExtendExpiryRequest(WireModel):
    seconds: int


class CostEstimate(WireModel):
    currency: str
    price_per_hour: float


# ----------------------------------------------------------------------------------- training sessions


class LoraConfig(WireModel):
    """LoRA adapter configuration (request and response)."""

    rank: int | None = None
    alpha: int | None = None
    dropout: float | None = None
    seed: Int64 | None = None
    train_unembed: bool | None = None


class WandbMetadata(WireModel):
    entity: str | None = None
    project: str | None = None
    group: str | None = None
    run_id: str | None = None
    run_name: str | None = None
    url: str | None = None


class SessionMetadata(WireModel):
    wandb: WandbMetadata | None = None


class PolicyState(WireModel):
    trainer_step: Int64 = 0
    target_weights_version: Int64 = 0
    applied_weights_version: Int64 = 0
    pending_publish: bool = False


class Checkpoint(WireModel):
    """A training or inference checkpoint embedded in a session.

    ``registration`` changed shape three times across spec revisions, so it is kept as an opaque object.
    """

    id: str
    created_at: datetime | None = None
    step: Int64 = 0
    registration: dict[str, Any] | None = None


class TrainingSessionError(WireModel):
    code: str | None = None  # the published examples of spec v3/v4 omit it
    message: str = ""
    occurred_at: datetime | None = None


class TrainingSession(WireModel):
    """``TrainingSession``: the response of every session endpoint."""

    id: str
    # Both required by the newest spec; the published examples of spec v3/v4 omit them, so they default to
    # the proto default ("not reported") and None instead of failing.
    status: TrainingSessionStatus = TrainingSessionStatus.UNSPECIFIED
    model_resources_id: str
    base_model: str | None = None
    created_by: str
    created_at: datetime
    updated_at: datetime
    step: Int64 = 0
    metadata: SessionMetadata = Field(default_factory=SessionMetadata)
    inference_checkpoints: list[Checkpoint] = Field(default_factory=list)
    training_checkpoints: list[Checkpoint] = Field(default_factory=list)
    policy_state: PolicyState | None = None
    display_name: str | None = None
    error: TrainingSessionError | None = None
    lora_config: LoraConfig | None = None
    resume_from_checkpoint_id: str | None = None


class CheckpointType(OpenEnum):
    """What a checkpoint holds: the training state (weights and optimizer, to resume from) or a model to serve."""

    UNSPECIFIED = "CHECKPOINT_TYPE_UNSPECIFIED"
    TRAINING = "CHECKPOINT_TYPE_TRAINING"
    INFERENCE = "CHECKPOINT_TYPE_INFERENCE"

    @classmethod
    def _missing_(cls, value: object) -> Any:  # open: a type the API adds later still parses
        return cls._open_missing(value)

    @property
    def short(self) -> str:
        return self.value.removeprefix("CHECKPOINT_TYPE_")


class CheckpointInfo(WireModel):
    """``GET /v1/rl/checkpoints/{id}``: a saved checkpoint on its own (which session, base model, step, rank)."""

    id: str
    type: CheckpointType = CheckpointType.UNSPECIFIED
    base_model: str | None = None
    session_id: str | None = None
    step: Int64 = 0
    created_at: datetime | None = None
    lora_rank: int | None = None
    inference_registration: dict[str, Any] | None = None
    training_registration: dict[str, Any] | None = None


class CheckpointList(WireModel):
    data: list[CheckpointInfo] = Field(default_factory=list)
    meta: ListMeta = Field(default_factory=ListMeta)


class TrainingSessionList(_ListPage):
    data: list[TrainingSession] = Field(default_factory=list)
    meta: ListMeta = Field(default_factory=ListMeta)


class TrainingSessionCreateRequest(WireModel):
    """Body of ``POST /v1/rl/training-sessions``."""

    model_resources_id: str
    display_name: str | None = None
    load_optimizer: bool | None = None
    lora_config: LoraConfig | None = None
    metadata: SessionMetadata | None = None
    resume_from_checkpoint_id: str | None = None


class TrainingSessionUpdateRequest(WireModel):
    """Body of ``PATCH /v1/rl/training-sessions/{id}``: omitted = unchanged, ``""`` = clear."""

    display_name: str | None = None
    metadata: SessionMetadata | None = None


# ------------------------------------------------------------------------------------ supported models


class SamplingDefaults(WireModel):
    logprobs: int | None = None
    max_tokens: int | None = None
    n: int | None = None
    temperature: float | None = None


class GeneratorConfig(WireModel):
    context_length: int | None = None
    sampling_defaults: SamplingDefaults | None = None


class LoraTrainerConfig(WireModel):
    max_batch_size: int | None = None
    max_rank: int | None = None
    max_seq_length: int | None = None


class FullTrainerConfig(WireModel):
    max_batch_size: int | None = None
    max_seq_length: int | None = None


class TrainerConfig(WireModel):
    lora: LoraTrainerConfig | None = None
    full: FullTrainerConfig | None = None


class SupportedComputeConfig(WireModel):
    gpu_type: OpenGpuType
    generator_config: GeneratorConfig | None = None
    trainer_config: TrainerConfig | None = None


class SupportedModel(WireModel):
    base_model: str
    default_gpu_type: OpenGpuType | None = None
    compute_configs: list[SupportedComputeConfig] = Field(default_factory=list)


class SupportedModelList(WireModel):
    data: list[SupportedModel] = Field(default_factory=list)
