"""The rules of the Together RL policy pack, as plain functions over the stack's resources.

Each rule takes the stack's :class:`Item` list (what the engine planned: at preview, a new resource's checked
inputs; an unchanged one's state) and its config, and returns ``(message, urn or None)`` violations. Nothing
here imports the policy SDK, so the rules are tested without an engine; :mod:`.pack` wires them into it.

A value unknown at preview is :data:`UNKNOWN`; a rule that needs it says so rather than guessing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

MODEL_RESOURCE = "pulumi-python:dynamic/together:ModelResource"
TRAINING_SESSION = "pulumi-python:dynamic/together:TrainingSession"
PLUGIN_TYPES = {
    "together-rl:index:ModelResource": MODEL_RESOURCE,
    "together-rl:index:TrainingSession": TRAINING_SESSION,
}
"""The plugin face's tokens -> the kinds the rules know: its resources are the same objects (their properties
are read in the core's names, :func:`in_core_names`)."""

API_DEFAULT_INACTIVE_TIMEOUT = 3600  # seconds, what the API applies when inactive_timeout is unset


class _Unknown:
    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Any = _Unknown()
"""A value the engine does not know yet (preview)."""

Violation = tuple[str, str | None]


@dataclasses.dataclass(frozen=True)
class Item:
    """One resource of the stack, as the rules see it."""

    urn: str
    name: str
    type: str
    props: Mapping[str, Any]
    depends_on: Mapping[str, Sequence[str]] = dataclasses.field(default_factory=dict)
    """URNs each property depends on (``model_resources_id`` -> the ModelResource it came from)."""


def in_core_names(props: Any) -> Any:
    """A plugin resource's properties under the core's names (``maxPricePerHour`` -> ``max_price_per_hour``),
    at every depth."""
    from ..resources.keys import snake

    if isinstance(props, Mapping):
        return {snake(k): in_core_names(v) for k, v in props.items()}
    if isinstance(props, list):
        return [in_core_names(v) for v in props]
    return props


def _known(value: Any) -> bool:
    return value is not None and value is not UNKNOWN


def _of(items: Sequence[Item], kind: str) -> list[Item]:
    return [i for i in items if i.type == kind]


# ------------------------------------------------------------------------------------------------ budget


def stack_price(items: Sequence[Item]) -> tuple[float, str, list[Item], list[Item]]:
    """(total $/h, currency, priced model resources, model resources whose price is unknown)."""
    priced: list[Item] = []
    unpriced: list[Item] = []
    for item in _of(items, MODEL_RESOURCE):
        (priced if isinstance(item.props.get("price_per_hour"), (int, float)) else unpriced).append(item)
    total = round(sum(float(i.props["price_per_hour"]) for i in priced), 2)
    currencies = {c for i in priced if isinstance(c := i.props.get("currency"), str)}  # known: a string
    return total, "/".join(sorted(currencies)) or "USD", priced, unpriced


def price_summary(items: Sequence[Item]) -> str:
    """One line: the stack's total estimated price and its parts."""
    total, currency, priced, unpriced = stack_price(items)
    parts = ", ".join(
        f"{i.name} {float(i.props['price_per_hour']):.2f}" for i in sorted(priced, key=lambda i: i.name)
    )
    line = f"stack total {total:.2f} {currency}/h over {len(priced)} model resource(s)"
    line += f" ({parts})" if parts else ""
    if unpriced:
        line += f"; price unknown for {', '.join(i.name for i in unpriced)}"
    return line


def budget(items: Sequence[Item], config: Mapping[str, Any]) -> list[Violation]:
    """The stack's total estimated $/h is at most ``max_price_per_hour`` (fails closed on unknown prices)."""
    limit = config.get("max_price_per_hour")
    if not isinstance(limit, (int, float)):
        return []
    total, currency, _, unpriced = stack_price(items)
    if total > limit:
        return [(f"{price_summary(items)} exceeds the budget max_price_per_hour {float(limit):.2f}. Remove or "
                 "shrink a model resource, or raise max_price_per_hour in the policy config", None)]  # fmt: skip
    if unpriced:
        return [(f"{price_summary(items)}: the budget {float(limit):.2f} {currency}/h cannot be verified. Give "
                 "the provider an API key at preview (the estimate comes from the API), then preview again", None)]  # fmt: skip
    return []


# --------------------------------------------------------------------------------------- account budget


def stack_of(items: Sequence[Item]) -> Any:
    """The stack as its resources' declarations name it (``owner``: ``org/project/stack/name``), None if none
    does."""
    from .. import ours

    for item in _of(items, MODEL_RESOURCE):
        owner = ours.parse_owner(
            item.props.get("owner") if isinstance(item.props.get("owner"), str) else None
        )
        if owner is not None:
            return owner
    return None


def added_by_the_change(items: Sequence[Item]) -> list[Item]:
    """The model resources this change creates (new or replacing): no status yet, where an unchanged one has its
    state's."""
    return [i for i in _of(items, MODEL_RESOURCE) if not isinstance(i.props.get("status"), str)]


def account_budget(
    items: Sequence[Item], config: Mapping[str, Any], account: Callable[[], Any]
) -> list[Violation]:
    """The account's estimated $/h after this change (the API key's user's active model resources plus the
    change's new ones) is at most ``max_account_price_per_hour``; fails closed when it cannot be known.

    ``account()``: the account as :func:`..resources.spend.account` reads it, asked only when there is a cap and
    a new model resource to judge."""
    from ..resources import spend

    limit = config.get("max_account_price_per_hour")
    added = added_by_the_change(items)
    stack = stack_of(items)
    if not isinstance(limit, (int, float)) or not added or stack is None:
        return []
    unpriced = [i.name for i in added if not isinstance(i.props.get("price_per_hour"), (int, float))]
    read = account()
    if read.unread is not None or unpriced:
        why = read.unread.rstrip(".") if read.unread is not None else f"no estimate for {', '.join(unpriced)}"
        return [(f"the account's spend after this change cannot be verified against max_account_price_per_hour "
                 f"{float(limit):.2f} ({why}). Give the policy pack the API key and base URL in TOGETHER_API_KEY "
                 "and TOGETHER_BASE_URL of the pulumi command (a policy pack never sees the stack's secrets), "
                 "then preview again", None)]  # fmt: skip
    found = spend.split(read.objects, stack)
    over = spend.over_cap(
        found,
        stack,
        {i.name: float(i.props["price_per_hour"]) for i in added},
        float(limit),
        "max_account_price_per_hour",
    )
    if over is None:
        return []
    cause, todo = over
    return [(f"{cause}. {todo} in the policy config", None)]


# ------------------------------------------------------------------------------------------ session caps


def _resource_of(session: Item, resources: Mapping[str, Item]) -> tuple[str, Item | None]:
    """(group key, the stack's ModelResource or None) for a session: by dependency, else by declared id."""
    for urn in session.depends_on.get("model_resources_id", ()):
        if urn in resources:
            return urn, resources[urn]
    rid = session.props.get("model_resources_id")
    return (f"id:{rid}", None) if _known(rid) else (f"unknown:{session.urn}", None)


def session_cap(item: Item | None, config: Mapping[str, Any]) -> int:
    """The session cap of a model resource: 1 full-weight; LoRA per model (``lora_sessions_by_model``), else
    ``lora_sessions`` (default 5)."""
    full = int(config.get("full_weight_sessions", 1))
    lora = int(config.get("lora_sessions", 5))
    if item is None:
        return lora
    if not _lora_enabled(item):
        return full
    by_model = config.get("lora_sessions_by_model") or {}
    return int(by_model.get(item.props.get("base_model"), lora))


def _lora_enabled(item: Item) -> bool:
    return item.props.get("lora_enabled", item.props.get("effective_lora_enabled", True)) is not False


def session_caps(items: Sequence[Item], config: Mapping[str, Any]) -> list[Violation]:
    """No model resource has more sessions declared on it than its cap (the API refuses the next with 429)."""
    resources = {i.urn: i for i in _of(items, MODEL_RESOURCE)}
    groups: dict[str, tuple[Item | None, list[Item]]] = {}
    for session in _of(items, TRAINING_SESSION):
        key, resource = _resource_of(session, resources)
        if not key.startswith("unknown:"):
            groups.setdefault(key, (resource, []))[1].append(session)
    out: list[Violation] = []
    for key, (resource, sessions) in groups.items():
        cap = session_cap(resource, config)
        if len(sessions) <= cap:
            continue
        kind = "full-weight" if resource is not None and not _lora_enabled(resource) else "LoRA"
        what = f"model resource {resource.name}" if resource else f"model resource {key[3:]}"
        names = ", ".join(sorted(s.name for s in sessions))
        out.append((f"{what} has {len(sessions)} training sessions declared on it ({names}); a {kind} resource "
                    f"takes at most {cap}, and the API refuses the next one (HTTP 429). Move sessions to another "
                    "ModelResource, or set the cap in the policy config (lora_sessions_by_model) if this model "
                    "takes more", resource.urn if resource else None))  # fmt: skip
    return out


# ---------------------------------------------------------------------------------- per-resource rules


def idle_ceiling(items: Sequence[Item], config: Mapping[str, Any]) -> list[Violation]:
    """Every model resource stops itself after at most ``max_inactive_timeout`` idle seconds (default 3600)."""
    ceiling = config.get("max_inactive_timeout", API_DEFAULT_INACTIVE_TIMEOUT)
    out: list[Violation] = []
    for item in _of(items, MODEL_RESOURCE):
        timeout = item.props.get("inactive_timeout", API_DEFAULT_INACTIVE_TIMEOUT)
        if isinstance(timeout, (int, float)) and timeout > ceiling:
            out.append((f"model resource {item.name} bills up to {int(timeout)} s idle before it stops itself "
                        f"(inactive_timeout), over the ceiling of {int(ceiling)} s. Lower inactive_timeout, or "
                        "raise max_inactive_timeout in the policy config", item.urn))  # fmt: skip
    return out


DEFAULT_MAX_KEEP_READY_HOURS = 24.0
"""How far ahead a stack may keep a GPU by default: a day, the most one extend-expiry reaches."""


def keep_ceiling(
    items: Sequence[Item], config: Mapping[str, Any], now: datetime | None = None
) -> list[Violation]:
    """No model resource is kept READY (``keep_ready_until``) more than ``max_keep_ready_hours`` ahead of now
    (default 24): a keep bills every hour until then, used or not."""
    from ..resources.model_resource_schema import parse_time

    ceiling = float(config.get("max_keep_ready_hours", DEFAULT_MAX_KEEP_READY_HOURS))
    now = now or datetime.now(timezone.utc)
    out: list[Violation] = []
    for item in _of(items, MODEL_RESOURCE):
        until = parse_time(item.props.get("keep_ready_until"))  # unknown at preview: checked at `up`
        if until is not None and (until - now).total_seconds() > ceiling * 3600:
            hours = (until - now).total_seconds() / 3600
            out.append((f"model resource {item.name} is kept READY until {item.props['keep_ready_until']} "
                        f"(keep_ready_until), {hours:.1f} h from now, over the ceiling of {ceiling:g} h: it bills "
                        "every hour until then, used or not. Choose an earlier keep_ready_until, or raise "
                        "max_keep_ready_hours in the policy config", item.urn))  # fmt: skip
    return out


def no_force_stop(items: Sequence[Item], config: Mapping[str, Any], stack: str | None) -> list[Violation]:
    """``force_stop`` is not set on the stacks listed in ``stacks`` (default ``prod``, ``production``)."""
    stacks = list(config.get("stacks", ["prod", "production"]))
    forced = [i for i in _of(items, MODEL_RESOURCE) if i.props.get("force_stop") is True]
    if not forced:
        return []
    if stack is None:
        return [(f"cannot tell which stack this is, and model resource {i.name} sets force_stop. Unset it, "
                 "or run with a Pulumi CLI that configures policy packs with the stack", i.urn) for i in forced]  # fmt: skip
    if stack not in stacks:
        return []
    return [(f"model resource {i.name} sets force_stop, which is not allowed on stack {stack} (it stops the "
             "training sessions attached to it on delete, other stacks' too). Unset force_stop", i.urn)
            for i in forced]  # fmt: skip


def wandb_metadata(items: Sequence[Item], config: Mapping[str, Any], stack: str | None) -> list[Violation]:
    """Every training session carries the W&B keys in ``required`` (on the stacks in ``stacks``; all if unset)."""
    required = list(config.get("required") or [])
    stacks = config.get("stacks")
    if not required or (stacks and stack not in stacks):
        return []
    out: list[Violation] = []
    for item in _of(items, TRAINING_SESSION):
        metadata = item.props.get("metadata")
        if metadata is UNKNOWN:  # computed at preview: known at `pulumi up`, when the pack runs again
            continue
        wandb = metadata.get("wandb") if isinstance(metadata, Mapping) else None
        wandb = wandb if isinstance(wandb, Mapping) else {}
        missing = [k for k in required if not wandb.get(k)]
        if missing:
            out.append((f"training session {item.name} has no W&B {', '.join(missing)} in metadata.wandb. Set "
                        f"metadata={{'wandb': {{{', '.join(repr(k) + ': ...' for k in missing)}}}}}", item.urn))  # fmt: skip
    return out
