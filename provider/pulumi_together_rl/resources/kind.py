"""What the shared lifecycle needs to know of one kind of resource: :class:`Kind`.

One subclass and one instance per kind, in its own module (``model_resource_schema.MODEL_RESOURCE``,
``training_session_schema.TRAINING_SESSION``). Its tables are data, set in the subclass's body: the collection
it lives in, its key tables (which inputs replace, which update in place, which check adds, which outputs the
API reports), its wait rule (the target status, what fails a create, the default timeouts) and what a stop of
it means. Its conversions and rules are methods, typed over the kind's wire models (``Kind[ModelResource,
ModelResourceCreateRequest]``): declared inputs to a create request and to the state, an existing object back
to inputs, the PATCH of an update, how a wait shows it. A rule that a kind has no use for (no update endpoint,
nothing to keep, no price) is the base class's default. The lifecycle (:mod:`.lifecycle`) is written once over
this class; no shared code tells the kinds apart.

Declared inputs and the state are property bags (:data:`Props`, :data:`State`): the JSON values the engine
sends and records. They are the one untyped thing the core holds; a kind's conversions are where they meet its
wire models.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Generic

from ..client import errors
from ..client.collections import Collection, Obj, Req
from ..client.models import Status
from . import watch
from .keys import OWNER_KEY

if TYPE_CHECKING:
    from ..client.api import TogetherRL
    from ..client.errors import ApiError

Props = Mapping[str, Any]
"""Declared inputs, or a state, as the engine hands them over: a property bag of JSON values."""
State = dict[str, Any]
"""Inputs or outputs for the engine to record: a property bag of JSON values."""


def _nothing() -> None:
    pass


class Kind(ABC, Generic[Obj, Req]):
    """One kind of resource (see the module docstring): ``Obj`` is the wire model of its objects, ``Req`` that
    of its create request."""

    # ------------------------------------------------------------------------------------------- tables

    collection: Collection[Obj, Req]
    """Where its objects live in the API, and the calls that reach them."""
    required: str
    """The input every declaration has (``base_model``): a read without it describes an object from the API
    (``.get()``)."""
    replace_on_changes: tuple[str, ...]
    """Inputs whose change replaces the object (delete-before-replace)."""
    update_in_place: tuple[str, ...]
    """Inputs whose change is an update (a PATCH, or nothing at all for a provider option)."""
    check_added: tuple[str, ...]
    """Inputs ``check`` adds (the estimated price, a model resource's declared facts): in the state, never in a
    diff."""
    output_keys: tuple[str, ...]
    """What the API reports, beside the inputs, in the state."""
    target: Status
    """The status a create (or an adopt) waits for."""
    failed: frozenset[Status]
    """Statuses that end a create's wait as failed."""
    adoptable: frozenset[Status]
    """Statuses in which an existing object may be adopted."""
    create_timeout: float
    delete_timeout: float
    stopped_note: str
    """What a successful stop after a failed create means for billing."""
    still_held: str
    """What to do when a delete's wait for the object to end fails; ``{setting}`` is the setting that gave the
    wait its time (``delete_timeout``, ``customTimeouts.delete``)."""
    kept_by: tuple[str, ...] = ()
    """The in-place inputs that :meth:`keep` reads: an update that changes one reads the object and keeps it."""

    @property
    def name(self) -> str:
        return self.collection.name

    @property
    def path(self) -> str:
        return self.collection.path

    @property
    def input_keys(self) -> tuple[str, ...]:
        return (*self.replace_on_changes, *self.update_in_place, *self.check_added, OWNER_KEY)

    def __repr__(self) -> str:
        return f"<kind {self.name}>"

    # ------------------------------------------------------------------------------------- conversions

    @abstractmethod
    def to_request(self, inputs: Props) -> Req:
        """Declared inputs -> the create request."""

    @abstractmethod
    def to_outputs(self, inputs: Props, obj: Obj) -> State:
        """(declared inputs, the object) -> the state."""

    @abstractmethod
    def inputs_from_api(self, obj: Obj) -> State:
        """An existing object -> inputs that describe it (``.get()``, and the base of an adopt's PATCH)."""

    def read_inputs(self, inputs: State, obj: Obj) -> State:
        """(declared inputs, the object now) -> the inputs a refresh records (in-place drift brought in). By
        default nothing drifts in place: the declared inputs as they are."""
        return inputs

    def patch(self, olds: Props, news: Props) -> dict[str, Any]:
        """(old inputs, new inputs) -> the JSON body of an update's PATCH (the collection's ``patch``); ``{}``:
        nothing to send, always so by default (a kind without an update endpoint: only provider options change
        in place)."""
        return {}

    @abstractmethod
    def differences(self, inputs: Props, obj: Obj) -> list[str]:
        """(declared inputs, an object) -> how the object differs from what is declared (``adopt_id``)."""

    @abstractmethod
    def subject(self, inputs: Props) -> str | None:
        """What a create's messages name before there is an id (the base model, the session's name)."""

    @abstractmethod
    def describe(self, ident: str, obj: Obj | None) -> str:
        """How a wait's progress lines show the object (``model resource 3f2a…: PENDING, queue position 3``);
        ``obj`` None: not found."""

    def find(self, client: TogetherRL, ident: str) -> Obj | None:
        """GET the object ``ident``, with 404 as ``None`` (not-found is a state)."""
        try:
            return self.collection.get(client, ident)
        except errors.NotFound:
            return None

    # -------------------------------------------------------------------------------------------- rules

    def pace(self, objects: list[Obj | None]) -> float:
        """The watcher's tick, given the latest observation of every waiting object: by default the fast one
        (objects that start and stop in seconds)."""
        return watch.fast_pace(objects)

    def price(self, client: TogetherRL, request: Req) -> str | None:
        """What one costs (``11.00 USD/h``), for a report of look-alikes; None: unknown."""
        return None

    def force(self, props: Props) -> bool:
        """Whether a delete forces the stop (from the state's inputs)."""
        return False

    def refused(
        self, client: TogetherRL, ident: str, refusal: ApiError, force: bool, doing: str = "deleting"
    ) -> None:
        """A stop (``doing``: a delete's, or a deadline's "stopping") was refused while the object is active:
        raise the sentence where the kind knows why (by default it does not, and the lifecycle explains the
        refusal)."""

    def after_delete(self, client: TogetherRL, ident: str, force: bool) -> Callable[[], None]:
        """Called before a delete's stop; what it returns runs after it (a forced stop logs what it ended)."""
        return _nothing

    def keep(self, client: TogetherRL, ident: str, inputs: Props, obj: Obj) -> Obj:
        """(client, id, declared inputs, the object as read) -> the object once it is held as declared (a model
        resource's ``keep_ready_until`` extends its expiry). Called after a create's (or an adopt's) wait, at a
        read of a declared object, and at an update that changes one of :attr:`kept_by`; it calls the API only
        when something is due. By default there is nothing to hold."""
        return obj

    def gone_because(self, props: Props, obj: Obj) -> str:
        """(the state, the ended object) -> why it ended, when the kind can tell (``stopped itself after ...``),
        for the refresh that drops it; ``""``: nothing to add."""
        return ""

    def steady(self, props: Props, outputs: State) -> State:
        """(the state, the outputs a read found) -> the outputs to record: an output that moves by sub-second
        jitter between reads (a model resource's ``expires_at``) keeps its stored value, so a refresh shows no
        change. By default every output as found."""
        return outputs


AnyKind = Kind[Any, Any]
"""A kind its user does not know the wire models of (a face picks it by name): the lifecycle's functions are
generic, and each call binds them to the kind's own."""
