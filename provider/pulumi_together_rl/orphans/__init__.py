"""The orphan finder: active GPUs and training sessions that no Pulumi stack holds, listed and (on request) stopped.

Why: Pulumi only knows the objects its state records, and a state records a create only once the provider
answers. A ``pulumi up`` killed half-way, a CI runner thrown away mid-create, a stack removed with
``pulumi stack rm --force``, a notebook that made a session by hand: each can leave a model resource billing,
or a training session holding a slot, that no ``pulumi destroy`` will ever stop. The create journal
(:mod:`pulumi_together_rl.journal`) takes such an object over when the *same* create runs again on the *same*
machine; everything else needs a look from outside. That is this module, behind
``python -m pulumi_together_rl orphans``.

What it does:

1. Collects the ids the given stacks hold: the ``id`` of every resource in each ``pulumi stack export``
   (files, or exported through the Pulumi CLI), and of pending operations that carry one. Any id counts, not
   only ``pulumi-python:dynamic/together:*`` ones, so a ``.get()`` reference holds its object too.
2. Lists the API key's user's *active* objects (``created_by=me``): model resources PENDING, CREATING or READY
   and training sessions CREATING or RUNNING (``LIVE_RESOURCE_STATUSES`` / ``LIVE_SESSION_STATUSES``).
3. Every listed object whose id no stack holds is an orphan; the hourly price of each orphan model resource
   comes from the estimate-cost endpoint ("price unknown" when that fails). The journal labels the orphans an
   interrupted ``pulumi up`` left; an object a process on this machine is creating right now (its journal
   entry's process is alive) is left out with a note, because its stack will hold it once the create returns.
4. With ``--stop``: sessions first, then model resources, each without ``force``. A resource that still
   carries a session which is not an orphan (a stack holds it, or another user made it) is refused by the
   API, reported, and left running; a resource whose only attached sessions are the orphans just stopped
   waits for them to end (a session holds its slot while STOPPING), then is stopped.

With no stack state at all every object would look orphaned, so a source is required; ``--none`` says "no
stack holds anything" on purpose. The API key is never printed: errors come from the client, which redacts
it, and everything this command writes is scrubbed of it once more.
"""

from __future__ import annotations

from ._common import (
    DEFAULT_STOP_TIMEOUT,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_ORPHANS_FOUND,
    EXIT_USAGE,
    NO_SOURCES,
    NONE_WITH_SOURCES,
    OrphanError,
    format_age,
)
from .command import format_line, run, summary
from .finder import Orphan, find_orphans
from .states import StackState, export_stack, held_ids, list_stacks, load_state_file, parse_state
from .stopper import StopResult, stop_orphans

__all__ = [
    "DEFAULT_STOP_TIMEOUT",
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_ORPHANS_FOUND",
    "EXIT_USAGE",
    "NONE_WITH_SOURCES",
    "NO_SOURCES",
    "Orphan",
    "OrphanError",
    "StackState",
    "StopResult",
    "export_stack",
    "find_orphans",
    "format_age",
    "format_line",
    "held_ids",
    "list_stacks",
    "load_state_file",
    "parse_state",
    "run",
    "stop_orphans",
    "summary",
]
