"""The process's watchers: one :class:`~pulumi_together_rl.waiting.Watcher` per API identity (base URL and API
key) and kind of object, and how fast each ticks.

Every wait of the provider (a create waiting for READY / RUNNING, a delete waiting for the slot to free) of one
kind shares one watcher: one list request per tick (``created_by=me``, the statuses a list can show a waiting
object in, every page) serves them all, and a GET is made only for a waiting object the list did not show (it
ended and left the list, or the list lags its create). 8 sessions starting at once cost one list per tick, not 8
GETs.

The tick follows the state of what is waited for (the quickest need wins):

* near an expected flip (a resource CREATING, a session starting, anything stopping, position 1 in the
  capacity queue, or an object not seen yet): :data:`FAST_TICK` (1 s), so readiness is seen within a second;
* in a capacity queue: ``2 s`` per place ahead, up to three poll intervals (30 s by default): the position
  says how far the flip is;
* under 429: at least the ``Retry-After``, else twice the pace (:class:`~pulumi_together_rl.waiting.Watcher`).

``together:pollInterval`` (``TOGETHER_RL_POLL_INTERVAL``) caps the fast tick (tests set it to a few ms).

A watcher is keyed by what its client talks to and as whom (:func:`identity`: the base URL and a digest of the
API key), not by the client object: two clients of one account share one list per tick, and two accounts (or
two APIs) never see each other's objects. A list of ``created_by=me`` is only ever right for the key that sent
it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

from .. import config
from ..client import errors
from ..client.collections import Collection, Obj, Req
from ..client.models import ApiObject, ModelResource, ModelResourceStatus
from ..waiting import Watcher

if TYPE_CHECKING:
    from ..client.api import TogetherRL

FAST_TICK = 1.0
"""Seconds between ticks near an expected flip."""

SECONDS_PER_PLACE = 2.0
"""Seconds between ticks per place ahead in a capacity queue."""


class Watched(Protocol[Obj, Req]):
    """What a watcher needs of a kind: its name, its collection and its pace. A :class:`.kind.Kind` is one; the
    kind's own default pace is this module's, so this module names no kind."""

    @property
    def name(self) -> str: ...

    collection: Collection[Obj, Req]

    def pace(self, objects: list[Obj | None]) -> float: ...


class _Client:
    """The client a watcher's requests go through: the latest one handed to :func:`watcher` for its identity.
    Clients of one identity are interchangeable, but one may be closed since (a test's, or a cache's before
    a reset), and the client of a new wait is one in use."""

    def __init__(self, client: TogetherRL) -> None:
        self.client = client


_lock = threading.Lock()
_watchers: dict[tuple[str, str, str], tuple[Watcher[Any], _Client]] = {}
"""Watchers of every kind: each one's objects are of the kind named in its key."""


def identity(client: TogetherRL) -> tuple[str, str]:
    """What ``client`` talks to and as whom: its base URL and its API key's digest (never the key itself)."""
    return (client.base_url, client.api_key_digest)


def _fast() -> float:
    return min(FAST_TICK, config.current().poll_interval)


def queue_pace(objects: Sequence[ModelResource | None]) -> float:
    """Model resources: fast near a flip, slower the further back in the capacity queue the nearest one is."""
    fast, slow = _fast(), 3 * config.current().poll_interval
    paces = [fast]
    if objects:
        paces = []
        for mr in objects:
            queue = mr.status_details.queue_position if mr is not None and mr.status_details else None
            if mr is not None and mr.status == ModelResourceStatus.PENDING and queue and queue > 1:
                paces.append(max(fast, min(slow, SECONDS_PER_PLACE * queue)))
            else:
                paces.append(fast)
    return min(paces)


def fast_pace(objects: Sequence[ApiObject | None]) -> float:
    """Training sessions: they start and stop in seconds."""
    return _fast()


def watcher(client: TogetherRL, kind: Watched[Obj, Req]) -> Watcher[Obj]:
    """The process's watcher of a kind for the API and key ``client`` uses (:func:`identity`); it makes its
    requests through ``client`` from now on."""
    key = (*identity(client), kind.name)
    with _lock:
        found = _watchers.get(key)
        if found is None:
            holder = _Client(client)
            found = _watchers[key] = (_make(holder, kind), holder)
        found[1].client = client
        # The kind's own watcher: its key names the kind, whose objects it lists.
        return cast("Watcher[Obj]", found[0])


def _make(holder: _Client, kind: Watched[Obj, Req]) -> Watcher[Obj]:
    collection = kind.collection

    def get(ident: str) -> Obj | None:
        try:
            return collection.get(holder.client, ident)
        except errors.NotFound:
            return None

    return Watcher(
        kind.name,
        list_all=lambda: collection.listed_by_me(holder.client),
        get_one=get,
        pace=kind.pace,
    )


def clear() -> None:
    """Forget the watchers (tests; their threads end with their last waiter)."""
    with _lock:
        _watchers.clear()
