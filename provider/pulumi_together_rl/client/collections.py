"""The two collections of the API as data: what kind-generic code (a wait, a read, a create, a stop, the orphan
finder) needs to know of model resources and training sessions, and the calls it makes on them.

:data:`MODEL_RESOURCES` and :data:`TRAINING_SESSIONS` name their API path and status groups (the definitions
in :mod:`.models`) and forward each verb to the one method of :class:`~.api.TogetherRL` that serves it, so
shared code says ``kind.get(client, id)`` and never tells the kinds apart.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

from .models import (
    LISTED_RESOURCE_STATUSES,
    LISTED_SESSION_STATUSES,
    LIVE_RESOURCE_STATUSES,
    LIVE_SESSION_STATUSES,
    RESOURCE_GONE,
    SESSION_GONE,
    TrainingSessionUpdateRequest,
)
from .wire import _RESOURCES, _SESSIONS


class Collection:
    """One collection of the API. Subclasses set the class attributes and forward the verbs."""

    name: ClassVar[str]
    """``"model resource"``: how messages name one of them."""
    path: ClassVar[str]
    """The API path of the collection (``/v1/rl/model-resources``)."""
    live: ClassVar[tuple[Any, ...]]
    """Statuses that hold something (a GPU allocation, a session slot): what a create can have made, and
    what the orphan finder looks at."""
    listed: ClassVar[tuple[Any, ...]]
    """What one list of them asks for: every state a wait or a refresh can find an existing one in."""
    ended: ClassVar[frozenset[Any]]
    """Statuses in which it holds nothing any more and cannot come back: a read drops it, a stop is done."""

    def get(self, client: Any, ident: str) -> Any:
        raise NotImplementedError

    def iter(self, client: Any, *, status: Any, **filters: Any) -> Iterator[Any]:
        raise NotImplementedError

    def stop(self, client: Any, ident: str, *, force: bool = False) -> Any:
        raise NotImplementedError

    def create(self, client: Any, request: Any, record: Any = None) -> Any:
        raise NotImplementedError

    def find(self, client: Any, request: Any, attribution: Any) -> Any:
        raise NotImplementedError

    def listed_by_me(self, client: Any) -> dict[str, Any]:
        """``{id: object}`` of the caller's objects in :attr:`listed` statuses (one list, every page)."""
        return {o.id: o for o in self.iter(client, status=self.listed, created_by="me")}

    def __repr__(self) -> str:
        return f"<collection {self.name}s>"


class _ModelResources(Collection):
    name = "model resource"
    path = _RESOURCES
    live = LIVE_RESOURCE_STATUSES
    listed = LISTED_RESOURCE_STATUSES
    ended = RESOURCE_GONE

    def get(self, client: Any, ident: str) -> Any:
        return client.get_model_resource(ident)

    def iter(self, client: Any, *, status: Any, **filters: Any) -> Iterator[Any]:
        return client.iter_model_resources(status=status, **filters)

    def stop(self, client: Any, ident: str, *, force: bool = False) -> Any:
        return client.stop_model_resource(ident, force=force)

    def create(self, client: Any, request: Any, record: Any = None) -> Any:
        return client.create_model_resource(request, record=record)

    def find(self, client: Any, request: Any, attribution: Any) -> Any:
        return client.find_created_model_resource(request, attribution=attribution)


class _TrainingSessions(Collection):
    name = "training session"
    path = _SESSIONS
    live = LIVE_SESSION_STATUSES
    listed = LISTED_SESSION_STATUSES
    ended = SESSION_GONE

    def get(self, client: Any, ident: str) -> Any:
        return client.get_training_session(ident)

    def iter(self, client: Any, *, status: Any, **filters: Any) -> Iterator[Any]:
        return client.iter_training_sessions(status=status, **filters)

    def stop(self, client: Any, ident: str, *, force: bool = False) -> Any:
        if force:
            raise ValueError("a training session stop takes no force")
        return client.stop_training_session(ident)

    def create(self, client: Any, request: Any, record: Any = None) -> Any:
        return client.create_training_session(request, record=record)

    def find(self, client: Any, request: Any, attribution: Any) -> Any:
        return client.find_created_training_session(request, attribution=attribution)

    def patch(self, client: Any, ident: str, body: dict[str, Any]) -> Any:
        """PATCH ``display_name`` / ``metadata``: omitted = unchanged, ``""`` = clear."""
        return client.update_training_session(ident, TrainingSessionUpdateRequest.model_validate(body))


MODEL_RESOURCES = _ModelResources()
TRAINING_SESSIONS = _TrainingSessions()

__all__ = ["MODEL_RESOURCES", "TRAINING_SESSIONS", "Collection"]
