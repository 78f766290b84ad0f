"""The two collections of the API as data: what kind-generic code (a wait, a read, a create, a stop, the orphan
finder) needs to know of model resources and training sessions, and the calls it makes on them.

:data:`MODEL_RESOURCES` and :data:`TRAINING_SESSIONS` name their API path and status groups (the definitions
in :mod:`.models`) and forward each verb to the one method of :class:`~.api.TogetherRL` that serves it, so
shared code says ``kind.get(client, id)`` and never tells the kinds apart. A :class:`Collection` is generic
over the wire model of its objects and of its create request: ``MODEL_RESOURCES.get`` returns a
:class:`~.models.ModelResource`, and code written for any collection reads what :class:`~.models.ApiObject` promises.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from .models import (
    LISTED_RESOURCE_STATUSES,
    LISTED_SESSION_STATUSES,
    LIVE_RESOURCE_STATUSES,
    LIVE_SESSION_STATUSES,
    RESOURCE_GONE,
    SESSION_GONE,
    ApiObject,
    ModelResource,
    ModelResourceCreateRequest,
    Status,
    StatusFilter,
    TrainingSession,
    TrainingSessionCreateRequest,
    TrainingSessionUpdateRequest,
    WireModel,
)
from .reconcile import answered_lookalike_is_ours
from .wire import _RESOURCES, _SESSIONS

if TYPE_CHECKING:
    from .api import TogetherRL
    from .reconcile import Attribution, CreateRecord


Obj = TypeVar("Obj", bound=ApiObject)
"""The wire model of a collection's objects."""
Req = TypeVar("Req", bound=WireModel)
"""The wire model of a collection's create request."""


class Collection(ABC, Generic[Obj, Req]):
    """One collection of the API. Subclasses set the class attributes and forward the verbs."""

    name: ClassVar[str]
    """``"model resource"``: how messages name one of them."""
    path: ClassVar[str]
    """The API path of the collection (``/v1/rl/model-resources``)."""
    live: ClassVar[tuple[Status, ...]]
    """Statuses that hold something (a GPU allocation, a session slot): what a create can have made, and
    what the orphan finder looks at."""
    listed: ClassVar[tuple[Status, ...]]
    """What one list of them asks for: every state a wait or a refresh can find an existing one in."""
    ended: ClassVar[frozenset[Status]]
    """Statuses in which it holds nothing any more and cannot come back: a read drops it, a stop is done."""

    @abstractmethod
    def get(self, client: TogetherRL, ident: str) -> Obj: ...

    @abstractmethod
    def iter(
        self, client: TogetherRL, *, status: StatusFilter, created_by: str | None = None
    ) -> Iterator[Obj]:
        """Every object in ``status`` (of ``created_by``: ``"me"`` is the caller), every page."""

    @abstractmethod
    def stop(self, client: TogetherRL, ident: str, *, force: bool = False) -> Obj: ...

    @abstractmethod
    def create(self, client: TogetherRL, request: Req, record: CreateRecord | None = None) -> Obj: ...

    @abstractmethod
    def find(self, client: TogetherRL, request: Req, attribution: Attribution) -> Obj | None: ...

    @abstractmethod
    def mismatches(self, client: TogetherRL, request: Req, obj: Obj) -> list[str]:
        """How ``obj`` differs from what ``request`` makes, the server's defaults filled in (the rule a
        look-alike is matched by, and an id a journal entry names is held to); empty: it is what it makes."""

    @property
    def answered_lookalike_is_ours(self) -> bool:
        """Whether the one look-alike found after the API's own 5xx to a create is taken as that create's
        (:data:`.reconcile.ANSWERED_LOOKALIKE_RULE`)."""
        return answered_lookalike_is_ours(self.name)

    def patch(self, client: TogetherRL, ident: str, body: dict[str, Any]) -> Obj:
        """PATCH what may change in place (``body``: the JSON of the update request). A collection without an
        update endpoint refuses: only a kind whose ``patch`` ever has something to send may live in it."""
        raise NotImplementedError(f"{self.name}s have no update endpoint")

    def listed_by_me(self, client: TogetherRL) -> dict[str, Obj]:
        """``{id: object}`` of the caller's objects in :attr:`listed` statuses (one list, every page)."""
        return {o.id: o for o in self.iter(client, status=self.listed, created_by="me")}

    def __repr__(self) -> str:
        return f"<collection {self.name}s>"


class _ModelResources(Collection[ModelResource, ModelResourceCreateRequest]):
    name = "model resource"
    path = _RESOURCES
    live = LIVE_RESOURCE_STATUSES
    listed = LISTED_RESOURCE_STATUSES
    ended = RESOURCE_GONE

    def get(self, client: TogetherRL, ident: str) -> ModelResource:
        return client.get_model_resource(ident)

    def iter(
        self, client: TogetherRL, *, status: StatusFilter, created_by: str | None = None
    ) -> Iterator[ModelResource]:
        return client.iter_model_resources(status=status, created_by=created_by)

    def stop(self, client: TogetherRL, ident: str, *, force: bool = False) -> ModelResource:
        return client.stop_model_resource(ident, force=force)

    def create(
        self, client: TogetherRL, request: ModelResourceCreateRequest, record: CreateRecord | None = None
    ) -> ModelResource:
        return client.create_model_resource(request, record=record)

    def find(
        self, client: TogetherRL, request: ModelResourceCreateRequest, attribution: Attribution
    ) -> ModelResource | None:
        return client.find_created_model_resource(request, attribution=attribution)

    def mismatches(
        self, client: TogetherRL, request: ModelResourceCreateRequest, obj: ModelResource
    ) -> list[str]:
        return client.model_resource_mismatches(request, obj)


class _TrainingSessions(Collection[TrainingSession, TrainingSessionCreateRequest]):
    name = "training session"
    path = _SESSIONS
    live = LIVE_SESSION_STATUSES
    listed = LISTED_SESSION_STATUSES
    ended = SESSION_GONE

    def get(self, client: TogetherRL, ident: str) -> TrainingSession:
        return client.get_training_session(ident)

    def iter(
        self, client: TogetherRL, *, status: StatusFilter, created_by: str | None = None
    ) -> Iterator[TrainingSession]:
        return client.iter_training_sessions(status=status, created_by=created_by)

    def stop(self, client: TogetherRL, ident: str, *, force: bool = False) -> TrainingSession:
        if force:
            raise ValueError("a training session stop takes no force")
        return client.stop_training_session(ident)

    def create(
        self, client: TogetherRL, request: TrainingSessionCreateRequest, record: CreateRecord | None = None
    ) -> TrainingSession:
        return client.create_training_session(request, record=record)

    def find(
        self, client: TogetherRL, request: TrainingSessionCreateRequest, attribution: Attribution
    ) -> TrainingSession | None:
        return client.find_created_training_session(request, attribution=attribution)

    def mismatches(
        self, client: TogetherRL, request: TrainingSessionCreateRequest, obj: TrainingSession
    ) -> list[str]:
        return client.training_session_mismatches(request, obj)

    def patch(self, client: TogetherRL, ident: str, body: dict[str, Any]) -> TrainingSession:
        """PATCH ``display_name`` / ``metadata``: omitted = unchanged, ``""`` = clear."""
        return client.update_training_session(ident, TrainingSessionUpdateRequest.model_validate(body))


MODEL_RESOURCES = _ModelResources()
TRAINING_SESSIONS = _TrainingSessions()

__all__ = ["MODEL_RESOURCES", "TRAINING_SESSIONS", "ApiObject", "Collection", "Obj", "Req"]
