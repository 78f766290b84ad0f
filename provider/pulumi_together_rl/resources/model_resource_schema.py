"""A model resource as a :class:`~.kind.Kind`: :data:`MODEL_RESOURCE`, its key tables and conversions (read with
the contract in :mod:`.model_resource`'s docstring).

Inputs are echoed in the state under their own names exactly as declared (after ``check``), so ``diff`` compares
like with like; what the API reports goes to distinct ``effective_*`` outputs, so a server default (``gpu_type``,
``optimizer_config``) or a pinned ``base_weights_ref`` (``together://ml_x@rv_1``) is never a perpetual diff.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from .. import config
from ..client import errors
from ..client.collections import MODEL_RESOURCES
from ..client.matching import resource_differences
from ..client.models import (
    LIVE_RESOURCE_STATUSES,
    LIVE_SESSION_STATUSES,
    RESOURCE_GONE,
    SESSION_HOLDS_SLOT,
    ModelResource,
    ModelResourceCreateRequest,
    ModelResourceStatus,
    TrainingSessionStatus,
)
from ..messages import UserError, command, log
from . import deadline, process, watch
from .inputs import contains_unknown, drop_none_items, iso, pick, short_id
from .kind import Kind, Props, State

if TYPE_CHECKING:
    from ..client.api import TogetherRL
    from ..client.errors import ApiError

REPLACE_ON_CHANGES = (
    "base_model",
    "base_weights_ref",
    "compute_config",
    "lora_enabled",
    "optimizer_config",
    "inactive_timeout",
)
"""Every API input: there is no update endpoint."""
UPDATE_IN_PLACE = (
    "create_timeout",
    "delete_timeout",
    "force_stop",
    "adopt_id",
    "max_price_per_hour",
    "keep_ready_until",
    "stop_after",
)
"""Provider options: they never replace (but a passed ``stop_after`` that moves: :func:`.lifecycle.diff`). Only
``keep_ready_until`` calls the API when changed (extend-expiry), and ``stop_after`` when it has passed."""
KEPT_BY = ("keep_ready_until",)
"""What :func:`keep` reads: an update that changes it extends the expiry."""
EXTEND_SECONDS = (60, 86400)
"""What one ``POST .../extend-expiry`` may ask for (seconds from now)."""
KEEP_WARNING_AHEAD = timedelta(days=7)
"""A ``keep_ready_until`` further ahead than this is accepted at check with a warning: it bills every hour."""
KEEP_MAX_AHEAD = timedelta(days=30)
"""The furthest ahead a ``keep_ready_until`` may reach: check refuses more, and a refresh does not extend for a
deployed one that is (a state written before this bound). A keep is a GPU billed every hour whether used or not,
and a far date is more often a typo or a placeholder (``9999-12-31``) than a plan; a longer hold is a new
``keep_ready_until`` once this one draws near."""
ESTIMATE_KEYS = ("price_per_hour", "currency")
"""Added by check (estimate-cost); diff never looks at them."""
OUTPUT_KEYS = (
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
    *deadline.OUTPUTS,
)


STEADY_OUTPUTS = ("expires_at",)
"""Outputs that move between reads without a change of the resource's own: session activity pushes
``expires_at`` out to that moment plus ``inactive_timeout``, so the sessions a stack creates right after its
resource move it by a fraction of a second."""
JITTER = timedelta(seconds=1)
KEEP_ENDED_WITHIN = timedelta(seconds=EXTEND_SECONDS[0])
"""How close to ``keep_ready_until`` a stored ``expires_at`` is when the keep set it (extend-expiry asks for
whole seconds on a clock read to the second)."""
ATTACHED_TODO = (
    f"Stop those sessions first: `{command('orphans --state <pulumi stack export file> --stop')}` stops every session no given stack holds (or POST /v1/rl/training-sessions/<id>/stop each), and "
    "if one belongs to another stack, destroy it there; or use force_stop. Pulumi deletes a resource with the "
    "inputs it was last deployed with, so force_stop=True must be deployed on its own first: set it, undo any "
    "other change to this ModelResource for now, and run `pulumi up` (or `pulumi up --target <URN of this "
    "ModelResource>`; `pulumi stack --show-urns` lists URNs); then apply your change, or run `pulumi destroy`, "
    "again"
)


class ModelResourceKind(Kind[ModelResource, ModelResourceCreateRequest]):
    """How the shared lifecycle (:mod:`.lifecycle`) runs a model resource."""

    collection = MODEL_RESOURCES
    required = "base_model"
    replace_on_changes = REPLACE_ON_CHANGES
    update_in_place = UPDATE_IN_PLACE
    check_added = ESTIMATE_KEYS
    output_keys = OUTPUT_KEYS
    target = ModelResourceStatus.READY
    failed = RESOURCE_GONE
    adoptable = frozenset(LIVE_RESOURCE_STATUSES)
    create_timeout = config.MODEL_RESOURCE_CREATE_TIMEOUT
    delete_timeout = config.MODEL_RESOURCE_DELETE_TIMEOUT
    # Without force: a resource its own create just made has no sessions of ours to take down.
    stopped_note = "nothing is left billing"
    still_held = "It may still be billing: raise {setting} and run `pulumi destroy` (or `pulumi up`) again"
    kept_by = KEPT_BY

    # Every input is fixed at creation, and there is no update endpoint: read_inputs and patch are the base's
    # (nothing drifts in place, nothing to PATCH; only provider options change in place).

    def to_request(self, inputs: Props) -> ModelResourceCreateRequest:
        return ModelResourceCreateRequest.model_validate(pick(inputs, REPLACE_ON_CHANGES))

    def to_outputs(self, inputs: Props, obj: ModelResource) -> State:
        """The state: declared inputs under their own names, then what the API reports."""
        return drop_none_items(
            {
                **pick(inputs, self.input_keys),
                "status": obj.status.short,
                "queue_position": obj.status_details.queue_position if obj.status_details else None,
                "error": {"code": obj.error.code, "message": obj.error.message} if obj.error else None,
                "created_at": iso(obj.created_at),
                "updated_at": iso(obj.updated_at),
                "created_by": obj.created_by,
                "expires_at": iso(obj.expires_at),
                "effective_compute_config": obj.compute_config.to_wire(),
                "effective_optimizer_config": obj.optimizer_config.to_wire(),
                "effective_lora_enabled": obj.lora_enabled,
                "effective_inactive_timeout": obj.inactive_timeout,
                "effective_base_weights_ref": obj.base_weights_ref,
            }
        )

    def inputs_from_api(self, obj: ModelResource) -> State:
        """Inputs that describe an existing resource (for ``.get()``, where nothing was declared)."""
        return drop_none_items(
            {
                "base_model": obj.base_model,
                "base_weights_ref": obj.base_weights_ref,
                "compute_config": obj.compute_config.to_wire(),
                "lora_enabled": obj.lora_enabled,
                "optimizer_config": obj.optimizer_config.to_wire() or None,
                "inactive_timeout": obj.inactive_timeout,
            }
        )

    def differences(self, inputs: Props, obj: ModelResource) -> list[str]:
        """Where ``obj`` differs from the declared inputs (``adopt_id``: only what is declared is held against
        it; the one rule is :func:`~..client.matching.resource_differences`)."""
        known = {k: v for k, v in pick(inputs, REPLACE_ON_CHANGES).items() if not contains_unknown(v)}
        return [str(d) for d in resource_differences(ModelResourceCreateRequest.model_validate(known), obj)]

    def subject(self, inputs: Props) -> str | None:
        base_model = inputs.get("base_model")
        return base_model if isinstance(base_model, str) else None

    def describe(self, ident: str, obj: ModelResource | None) -> str:
        if obj is None:
            return f"model resource {short_id(ident)}: not found"
        queue = obj.status_details.queue_position if obj.status_details else None
        where = f", queue position {queue}" if obj.status == ModelResourceStatus.PENDING and queue else ""
        return f"model resource {short_id(ident)}: {obj.status.short}{where}"

    def pace(self, objects: list[ModelResource | None]) -> float:
        return watch.queue_pace(objects)

    def price(self, client: TogetherRL, request: ModelResourceCreateRequest) -> str:
        return price_text(process.estimate_cost(client, request).model_dump())

    def force(self, props: Props) -> bool:
        return bool(props.get("force_stop", config.FORCE_STOP))

    def refused(
        self, client: TogetherRL, ident: str, refusal: ApiError, force: bool, doing: str = "deleting"
    ) -> None:
        """A refused stop: which refusal it is, we learn from the sessions list, never the message. The engine
        deletes a stack's sessions before their resource, so sessions still attached at a delete are not this
        stack's; at a deadline (``doing`` "stopping") they may be."""
        attached = [] if force else sessions_on(client, ident, SESSION_HOLDS_SLOT) or []
        if attached and doing != "deleting":
            raise UserError(doing, "model resource", ident, "the API refused to stop it because training "
                            f"sessions are attached: {', '.join(attached)}") from refusal  # fmt: skip
        if attached:
            raise UserError("deleting", "model resource", ident, "the API refused to stop it because training "
                            f"sessions that this stack does not manage are attached: {', '.join(attached)} (made "
                            "outside Pulumi, by another stack, or left by an interrupted run)",
                            ATTACHED_TODO) from refusal  # fmt: skip

    def after_delete(self, client: TogetherRL, ident: str, force: bool) -> Callable[[], None]:
        """A forced stop also stops the sessions on the resource: which ones is listed first, and logged
        after."""
        running = sessions_on(client, ident, LIVE_SESSION_STATUSES) if force else []

        def report() -> None:
            if running is None:
                log(f"model resource {ident}: stopped with force_stop=True; listing its training sessions failed, "
                    "so the sessions this also stopped (if any) cannot be named")  # fmt: skip
            elif running:
                log(
                    f"model resource {ident}: force_stop=True also stopped training sessions "
                    f"{', '.join(running)}"
                )

        return report

    def keep(self, client: TogetherRL, ident: str, inputs: Props, obj: ModelResource) -> ModelResource:
        """Hold a READY resource until ``keep_ready_until``: one ``extend-expiry`` when its ``expires_at`` comes
        earlier, none otherwise (the API never moves it earlier, so a later expiry already keeps the promise).
        The seconds asked for are counted on the API's clock (:func:`.process.api_now`), so a machine whose
        clock is off neither over- nor under-extends. One call reaches at most a day ahead: a longer keep is
        extended again at the next refresh or update. A keep more than :data:`KEEP_MAX_AHEAD` ahead is not
        extended at all."""
        until = parse_time(inputs.get("keep_ready_until"))
        if until is None:
            return obj
        now = process.api_now(client)
        if until <= now:
            return obj
        if until - now > KEEP_MAX_AHEAD:
            log(f"model resource {ident}: not kept READY until {iso(until)}: keep_ready_until is more than "
                f"{KEEP_MAX_AHEAD.days} days ahead, further than a keep may reach. Set a keep_ready_until within "
                f"{KEEP_MAX_AHEAD.days} days and run `pulumi up`")  # fmt: skip
            return obj
        if obj.status != ModelResourceStatus.READY:
            log(f"model resource {ident}: not kept READY until {iso(until)}: it is {obj.status.short}, and only "
                "a READY resource can be kept")  # fmt: skip
            return obj
        if obj.expires_at is not None and obj.expires_at >= until:
            return obj
        low, high = EXTEND_SECONDS
        seconds = min(high, max(low, math.ceil((until - now).total_seconds())))
        kept = client.extend_model_resource_expiry(ident, seconds)
        rest = (
            ""
            if kept.expires_at is None or kept.expires_at >= until
            else (
                "; extend-expiry reaches at most a day ahead, so a `pulumi refresh` (or `pulumi up --refresh`) "
                "before then extends it again"
            )
        )
        log(
            f"model resource {ident}: kept READY until {iso(kept.expires_at)} (keep_ready_until {iso(until)})"
            f"{rest}"
        )
        return kept

    def gone_because(self, props: Props, obj: ModelResource) -> str:
        """A resource that stopped with no error once the expiry in the state had passed stopped itself for
        inactivity: normal drift (the next ``up`` makes a new one), said as such. Its expiry is the later of its
        last session activity plus ``inactive_timeout`` and what a keep asked for, so the line says which one
        it was: a keep that ended (it then stops at the keep's end, however long it had been idle), one that a
        daily refresh did not carry far enough, or ``inactive_timeout`` idle seconds."""
        expiry = parse_time(props.get("expires_at"))
        if obj.error is not None or expiry is None or obj.updated_at < expiry:
            return ""
        kept = parse_time(props.get("keep_ready_until"))
        if kept is not None and kept <= expiry <= kept + KEEP_ENDED_WITHIN:
            return (
                f" (it stopped itself for inactivity when its keep ended: keep_ready_until, {iso(kept)}, had "
                "passed with no session activity to hold it longer)"
            )
        if kept is not None and kept > obj.updated_at:
            return (
                f" (it stopped itself for inactivity at its expires_at, {iso(expiry)}, before keep_ready_until, "
                f"{iso(kept)}: one extend-expiry reaches a day ahead, so a longer keep needs a `pulumi refresh` "
                "at least daily)"
            )
        idle = props.get("effective_inactive_timeout") or props.get("inactive_timeout")
        after = (
            f" after {float(idle):g} s without session activity (inactive_timeout)" if idle else ""
        )  # the engine's 300.0
        return f" (it stopped itself{after}: its expires_at, {iso(expiry)}, had passed)"

    def steady(self, props: Props, outputs: State) -> State:
        """The outputs of a read, where one of :data:`STEADY_OUTPUTS` moved by less than :data:`JITTER` from
        the state keeps the stored value: a refresh, or ``preview --refresh --expect-no-changes``, shows no
        change for it; a move of a second or more (an extend, an hour of training) is recorded."""
        for key in STEADY_OUTPUTS:
            stored, found = parse_time(props.get(key)), parse_time(outputs.get(key))
            if stored is not None and found is not None and abs(found - stored) < JITTER:
                outputs = {**outputs, key: props[key]}
        return outputs


def price_text(estimate: Mapping[str, Any]) -> str:
    """``11.00 USD/h`` of an estimate (``price_per_hour``, ``currency``)."""
    return f"{estimate['price_per_hour']:.2f} {estimate.get('currency') or 'USD'}/h"


def parse_time(value: object) -> datetime | None:
    """An RFC 3339 time with its zone (``2026-12-04T18:00:00Z``) as an aware datetime; None for anything else."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


def sessions_on(
    client: TogetherRL, ident: str, statuses: Iterable[TrainingSessionStatus]
) -> list[str] | None:
    """Ids of the resource's sessions in ``statuses``; None when listing them fails."""
    try:
        wanted = sorted(s.value for s in statuses)
        return [s.id for s in client.iter_training_sessions(model_resources_id=ident, status=wanted)]
    except errors.TogetherError:
        return None


MODEL_RESOURCE = ModelResourceKind()
"""How the shared lifecycle (:mod:`.lifecycle`) runs a model resource."""
