"""What the shared lifecycle needs to know of one kind of resource, as data: :class:`Schema`.

One instance per kind, in its own module (``model_resource_schema.MODEL_RESOURCE``,
``training_session_schema.TRAINING_SESSION``): the collection it lives in, its key tables (which inputs replace,
which update in place, which check adds, which outputs the API reports), its conversions (declared inputs to a
create request and to the state, an existing object back to inputs), its wait rule (the target status, what
fails a create, the default timeouts, the watcher's pace) and what a stop of it means. The lifecycle
(:mod:`.lifecycle`) is written once over this; no shared code tells the kinds apart.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from ..client.collections import Collection
from .inputs import OWNER_KEY


@dataclasses.dataclass(frozen=True)
class Schema:
    """One kind of resource, as data (see the module docstring)."""

    collection: Collection
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
    to_request: Callable[[Mapping[str, Any]], Any]
    """Declared inputs -> the create request (a wire model)."""
    to_outputs: Callable[[Mapping[str, Any], Any], dict[str, Any]]
    """(declared inputs, the object) -> the state."""
    inputs_from_api: Callable[[Any], dict[str, Any]]
    """An existing object -> inputs that describe it (``.get()``, and the base of an adopt's PATCH)."""
    read_inputs: Callable[[dict[str, Any], Any], dict[str, Any]]
    """(declared inputs, the object now) -> the inputs a refresh records (in-place drift brought in)."""
    patch: Callable[[Mapping[str, Any], Mapping[str, Any]], dict[str, Any]]
    """(old inputs, new inputs) -> the PATCH body of an update; ``{}``: nothing to send."""
    differences: Callable[[Mapping[str, Any], Any], list[str]]
    """(declared inputs, an object) -> how the object differs from what is declared (``adopt_id``)."""
    subject: Callable[[Mapping[str, Any]], str | None]
    """What a create's messages name before there is an id (the base model, the session's name)."""
    describe: Callable[[str], Callable[[Any], str]]
    """id -> how a wait's progress lines show the object (``model resource 3f2a…: PENDING, queue position 3``)."""
    target: Any
    """The status a create (or an adopt) waits for."""
    failed: frozenset[Any]
    """Statuses that end a create's wait as failed."""
    adoptable: frozenset[Any]
    """Statuses in which an existing object may be adopted."""
    create_timeout: float
    delete_timeout: float
    pace: Callable[[list[Any]], float]
    """The watcher's tick, given the latest observation of every waiting object."""
    stopped_note: str
    """What a successful stop after a failed create means for billing."""
    still_held: str
    """What to do when a delete's wait for the object to end fails; ``{setting}`` is the setting that gave the
    wait its time (``delete_timeout``, ``customTimeouts.delete``)."""
    price: Callable[[Any, Any], str | None] = lambda client, request: None
    """(client, create request) -> what one costs (``11.00 USD/h``), for a report of look-alikes; None: unknown."""
    force: Callable[[Mapping[str, Any]], bool] = lambda props: False
    """Whether a delete forces the stop (from the state's inputs)."""
    refused: Callable[[Any, str, Exception, bool], None] = lambda client, ident, refusal, force: None
    """A delete's stop was refused while the object is active: raise the sentence where the kind knows why."""
    after_delete: Callable[[Any, str, bool], Callable[[], None]] = lambda client, ident, force: lambda: None
    """Called before a delete's stop; what it returns runs after it (a forced stop logs what it ended)."""
    keep: Callable[[Any, str, Mapping[str, Any], Any], Any] = lambda client, ident, inputs, live: live
    """(client, id, declared inputs, the object as read) -> the object once it is held as declared (a model
    resource's ``keep_ready_until`` extends its expiry). Called after a create's (or an adopt's) wait, at a read
    of a declared object, and at an update that changes one of :attr:`kept_by`; it calls the API only when
    something is due."""
    kept_by: tuple[str, ...] = ()
    """The in-place inputs that :attr:`keep` reads: an update that changes one reads the object and keeps it."""
    gone_because: Callable[[Mapping[str, Any], Any], str] = lambda props, live: ""
    """(the state, the ended object) -> why it ended, when the kind can tell (``stopped itself after ...``),
    for the refresh that drops it; ``""``: nothing to add."""
    steady: Callable[[Mapping[str, Any], dict[str, Any]], dict[str, Any]] = lambda props, outputs: outputs
    """(the state, the outputs a read found) -> the outputs to record: an output that moves by sub-second jitter
    between reads (a model resource's ``expires_at``) keeps its stored value, so a refresh shows no change."""

    @property
    def name(self) -> str:
        return self.collection.name

    @property
    def path(self) -> str:
        return self.collection.path

    @property
    def input_keys(self) -> tuple[str, ...]:
        return (*self.replace_on_changes, *self.update_in_place, *self.check_added, OWNER_KEY)
