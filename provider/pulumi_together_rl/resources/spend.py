"""The account's spend at a preview, and its cap (``together:maxAccountPricePerHour``).

At the first ``check`` of a provider process that asks the API about a model resource (a new one, or a change of
its API inputs: what a preview that can change the bill does), the provider reads what the API key's user runs:

* one list of the user's model resources (``created_by=me``, every page: the list every refresh read shares),
  of which the active ones count (PENDING, CREATING, READY: billed, or about to be);
* one estimate per distinct configuration (base model, GPU type, generator replicas, LoRA or full weight),
  through the process's estimate cache, so a preview of N objects of k configurations asks k prices, not N;
* the create journal this process's creates use (one listing of its store, and in a bucket one read of each entry
  not read before; never a write), whose entries record
  each created object's id and its declaration (``org/project/stack/name``).

and says one line on stderr, once per process::

    account spend: 27.50 USD/h over 4 active model resources of this API key's user: this stack 5.50 (1),
    other stacks 11.00 (proj/a 5.50 (1), proj/b 5.50 (1)), nothing names 11.00 (2)

*This stack* is what the journal names as the stack's own (project and stack of the declaration being checked,
and its organization when both are known); *other stacks* are named by the declaration their entry records;
*nothing names* is every other active object: made outside Pulumi, by an adopt, by a stack whose journal is not
this one (another machine's folder), or whose entry was pruned.

The cap: with ``together:maxAccountPricePerHour`` set, each new or replaced model resource of this process adds
its estimate to the account's spend (a replacement bills beside the object it replaces until the engine deletes
that one: Pulumi creates first), and a check whose addition takes the total over the cap fails with the figures
and the largest spenders. The account is read once per process: an object this command creates is counted by its
addition, never twice.

Reading the account can fail (no key, an unreachable API, an answer it cannot use): the line then says why, the
cap is not judged at this preview (the ``pulumi up`` that would create runs ``check`` again, and judges it then),
and nothing else changes. Nothing here writes anything, to the API or to the journal.
"""

from __future__ import annotations

import dataclasses
import json
import math
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .. import config, ours
from ..client import errors
from ..messages import UserError, explain, printable
from ..singleflight import SingleFlight
from . import process, watch
from .inputs import Failure
from .keys import OWNER_KEY

if TYPE_CHECKING:
    from ..client.api import TogetherRL
    from ..client.models import ModelResource, ModelResourceCreateRequest

KIND = ours.MODEL_RESOURCE
SETTING = config.CONFIG_MAX_ACCOUNT_PRICE
LARGEST = 3
"""How many of the largest spenders a cap failure names."""


@dataclasses.dataclass(frozen=True)
class Active:
    """One active model resource of the account, as the split sees it."""

    id: str
    price: float | None
    """Its estimated $/h; None: the API would not price its configuration."""
    owner: str | None = None
    """The declaration the create journal records for it (``org/project/stack/name``); None: nothing names it."""
    currency: str = "USD"


@dataclasses.dataclass(frozen=True)
class Split:
    """The account's active model resources: this stack's, other stacks' (by stack), and those nothing names."""

    this: tuple[Active, ...]
    others: dict[str, tuple[Active, ...]]
    """``project/stack`` -> its objects, largest total first."""
    unnamed: tuple[Active, ...]

    @property
    def everything(self) -> tuple[Active, ...]:
        return (*self.this, *(a for group in self.others.values() for a in group), *self.unnamed)

    @property
    def total(self) -> float:
        return _sum(self.everything)

    @property
    def currency(self) -> str:
        return "/".join(sorted({a.currency for a in self.everything if a.price is not None})) or "USD"

    @property
    def unpriced(self) -> tuple[Active, ...]:
        return tuple(a for a in self.everything if a.price is None)


def _sum(objects: Iterable[Active]) -> float:
    return round(sum(a.price for a in objects if a.price is not None), 2)


def _stack_label(owner: ours.Owner) -> str:
    return f"{owner.project}/{owner.stack}"


def _same_stack(owner: ours.Owner, stack: ours.Owner) -> bool:
    """The same stack: its project and name, and its organization where both are known."""
    orgs_known = owner.org is not None and stack.org is not None
    return (owner.project, owner.stack) == (stack.project, stack.stack) and (
        not orgs_known or owner.org == stack.org
    )


def split(objects: Iterable[Active], stack: ours.Owner) -> Split:
    """``objects`` split by whose the journal says they are: ``stack``'s, other stacks', nothing's."""
    this: list[Active] = []
    others: dict[str, list[Active]] = {}
    unnamed: list[Active] = []
    for active in objects:
        owner = ours.parse_owner(active.owner)
        if owner is None:
            unnamed.append(active)
        elif _same_stack(owner, stack):
            this.append(active)
        else:
            others.setdefault(_stack_label(owner), []).append(active)
    ordered = sorted(others.items(), key=lambda item: (-_sum(item[1]), item[0]))
    return Split(tuple(this), {label: tuple(group) for label, group in ordered}, tuple(unnamed))


def _part(objects: Sequence[Active]) -> str:
    return f"{_sum(objects):.2f} ({len(objects)})"


def parts(found: Split) -> str:
    """``this stack 5.50 (1), other stacks 11.00 (proj/a 5.50 (1), ...), nothing names 0.00 (0)``."""
    others = [a for group in found.others.values() for a in group]
    named = ", ".join(f"{label} {_part(group)}" for label, group in found.others.items())
    return (
        f"this stack {_part(found.this)}, other stacks {_part(others)}{f' ({named})' if named else ''}, "
        f"nothing names {_part(found.unnamed)}"
    )


def line(found: Split) -> str:
    """The one line a preview says of the account's spend."""
    count = len(found.everything)
    text = (
        f"account spend: {found.total:.2f} {found.currency}/h over {count} active model resource"
        f"{'' if count == 1 else 's'} of this API key's user: {parts(found)}"
    )
    if found.unpriced:
        text += f"; price unknown for {', '.join(a.id for a in found.unpriced)}"
    return text


def _name(active: Active, stack: ours.Owner) -> str:
    owner = ours.parse_owner(active.owner)
    if owner is None:
        return f"{active.id} (nothing names it)"
    if _same_stack(owner, stack):
        return f"{owner.name} ({active.id}, this stack)"
    return f"{_stack_label(owner)}/{owner.name} ({active.id})"


def over_cap(
    found: Split, stack: ours.Owner, added: Mapping[str, float], cap: float, setting: str = SETTING
) -> tuple[str, str] | None:
    """(cause, what to do) when this change takes the account's spend over ``cap``; None within it.

    ``added``: this change's new model resources (declaration name -> estimated $/h); ``setting``: what the
    reader sets the cap with (the provider's config key, or the policy's config)."""
    now = found.total
    adds = round(sum(added.values()), 2)
    after = round(now + adds, 2)
    if after <= cap:
        return None
    spenders: list[tuple[float, str]] = [
        (a.price, _name(a, stack)) for a in found.everything if a.price is not None
    ]
    spenders += [(price, f"{name} (this change)") for name, price in added.items()]
    spenders.sort(key=lambda item: (-item[0], item[1]))
    largest = ", ".join(f"{name} {price:.2f}" for price, name in spenders[:LARGEST])
    adding = ", ".join(f"{name} {price:.2f}" for name, price in sorted(added.items()))
    cause = (
        f"the account's spend after this change, {after:.2f} {found.currency}/h (now {now:.2f}: {parts(found)}; "
        f"this change adds {adds:.2f}: {adding}), exceeds {setting} {cap:.2f} by {after - cap:.2f}; the largest "
        f"spenders: {largest}"
    )
    return cause, f"Stop model resources the account no longer needs, or raise {setting}"


def cap_failure(
    found: Split, stack: ours.Owner, added: Mapping[str, float], cap: float, subject: str
) -> str | None:
    """The sentence that fails the check of ``subject`` (a declaration's name) whose change takes the account's
    spend over the provider's cap (:func:`over_cap`); None within it."""
    over = over_cap(found, stack, added, cap)
    return None if over is None else str(UserError("checking", KIND, subject, *over))


# ------------------------------------------------------------------------------------------ the account


@dataclasses.dataclass(frozen=True)
class Account:
    """What one process read of the account: its active model resources (priced, named), or why not."""

    objects: tuple[Active, ...] = ()
    unread: str | None = None
    """Why the account could not be read (then ``objects`` is empty)."""
    journal_note: str | None = None
    """Why the journal's names are missing, if they are."""


def _body(obj: ModelResource) -> ModelResourceCreateRequest:
    """The priced configuration of a live object: model, GPU type, generator replicas, LoRA or full weight."""
    from ..client.models import ComputeConfigParams, ModelResourceCreateRequest

    return ModelResourceCreateRequest(
        base_model=obj.base_model,
        compute_config=ComputeConfigParams(
            gpu_type=obj.compute_config.gpu_type,
            num_generator_replicas=obj.compute_config.num_generator_replicas,
        ),
        lora_enabled=obj.lora_enabled,
    )


def _names(base_url: str) -> tuple[dict[str, str], str | None]:
    """``{id: owner}`` of this API's model resources the create journal records, and why not, if not."""
    from ..ownership import journal

    try:
        entries = journal.current().entries(warn=None)
    except (journal.Refused, OSError) as exc:
        return {}, f"the create journal could not be read ({getattr(exc, 'cause', exc)}), so nothing is named"
    names: dict[str, str] = {}
    for seen in entries:  # oldest first: a newer entry of the same id wins
        entry = seen.entry
        if (
            entry.id
            and entry.owner
            and entry.kind == KIND
            and entry.base_url.rstrip("/") == base_url.rstrip("/")
        ):
            names[entry.id] = entry.owner
    return names, None


def read_account(client: TogetherRL) -> Account:
    """The account's active model resources, priced and named (see the module docstring). Raises the client's
    errors when the list cannot be read; a configuration the API will not price is kept with no price."""
    from ..client.models import LIVE_RESOURCE_STATUSES
    from .model_resource_schema import MODEL_RESOURCE

    live = [o for o in process.listed(client, MODEL_RESOURCE).values() if o.status in LIVE_RESOURCE_STATUSES]
    prices: dict[str, tuple[float, str] | None] = {}
    for obj in live:
        body = _body(obj)
        key = json.dumps(body.to_wire(), sort_keys=True)
        if key in prices:
            continue
        try:
            estimate = process.estimate_cost(client, body)
        except errors.ApiError as exc:
            if exc.status is None or exc.status >= 500 or exc.status in (401, 403, 408, 429):
                raise
            # The API will not price this configuration (an older GPU type, a retired model).
            prices[key] = None
        else:
            prices[key] = (estimate.price_per_hour, estimate.currency)
    names, note = _names(client.base_url)
    objects = []
    for obj in sorted(live, key=lambda o: o.id):
        price = prices[json.dumps(_body(obj).to_wire(), sort_keys=True)]
        objects.append(
            Active(
                obj.id,
                None if price is None else price[0],
                names.get(obj.id),
                "USD" if price is None else price[1],
            )
        )
    return Account(tuple(objects), journal_note=note)


_accounts: SingleFlight[Account] = SingleFlight(math.inf)
_added_lock = threading.Lock()
_added: dict[tuple[Any, ...], dict[str, float]] = {}


def account() -> Account:
    """The account as this process read it the first time it was asked (once per process, whatever the
    number of checks: the figure is the command's), or why it could not be."""
    settings = config.current()
    try:
        client = process.api_client("reading the spend of", "account", None, quick=True)
    except UserError as exc:
        return Account(unread=exc.cause)

    def read() -> Account:
        try:
            return read_account(client)
        except errors.TogetherError as exc:
            return Account(unread=explain(exc)[0])

    return _accounts.get((*watch.identity(client), settings.journal_url), read)


def clear() -> None:
    """Forget the account read and this process's additions (tests; a new command is a new process)."""
    _accounts.clear()
    with _added_lock:
        _added.clear()


process.also_clear(clear)


def cap_setting() -> tuple[float | None, str | None]:
    """(the cap, or None when unset; why the value set cannot be used, if so)."""
    raw = config.current().max_account_price_per_hour
    if raw is None:
        return None, None
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        return None, (
            f"{SETTING} is {printable(str(raw), 40)!r}, not a price: it must be a number of the estimate's currency "
            f"per hour, greater than 0. Set it with `pulumi config set {SETTING} 50`, or remove it"
        )
    return value, None


def judge(inputs: Mapping[str, Any]) -> list[Failure]:
    """At the check of a new or changed model resource (its estimate in ``price_per_hour`` when known): say the
    account's line (once per process) and judge the cap. Nothing without a declaration (``owner``)."""
    stack = ours.parse_owner(inputs.get(OWNER_KEY) if isinstance(inputs.get(OWNER_KEY), str) else None)
    if stack is None:
        return []
    cap, bad = cap_setting()
    if bad is not None:
        return [Failure("", str(UserError("checking", KIND, stack.name, bad)))]
    read = account()
    found = split(read.objects, stack)
    if read.unread is not None:
        process.log_once(("account spend",), f"warning: account spend unknown: {read.unread.rstrip('.')}"
                         + ("; the account's cap is not judged at this preview" if cap is not None else ""))  # fmt: skip
        return []
    said = line(found) + (f"; {read.journal_note}" if read.journal_note else "")
    process.log_once(("account spend",), said)
    price = inputs.get("price_per_hour")
    if cap is None or not isinstance(price, (int, float)):
        return []
    with _added_lock:
        added = _added.setdefault((stack.stack_name,), {})
        added[stack.name] = float(price)
        adding = dict(added)
    failure = cap_failure(found, stack, adding, cap, stack.name)
    return [] if failure is None else [Failure("", failure)]
