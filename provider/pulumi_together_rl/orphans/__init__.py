"""The orphan finder: active GPUs and training sessions that no Pulumi stack holds, listed and (on request) stopped.

Why: Pulumi only knows the objects its state records, and a state records a create only once the provider
answers. A ``pulumi up`` killed half-way, a CI runner thrown away mid-create, a stack removed with
``pulumi stack rm --force``, a notebook that made a session by hand: each can leave a model resource billing,
or a training session holding a slot, that no ``pulumi destroy`` will ever stop. The create journal
(:mod:`pulumi_together_rl.journal`) takes such an object over when the *same* create runs again on the *same*
machine; everything else needs a look from outside. That is this module, behind
``python -m pulumi_together_rl orphans``.

What it does (``docs/orphans.md`` is the user's page):

1. Reads the stack states: by default every stack of the logged-in backend, all projects (``pulumi stack ls
   --all``, each exported through the Pulumi CLI), or only the given ones (``--state`` files, ``--stack``
   names: then it warns that other stacks' objects look orphaned), or none (``--none``). It says which it read.
   The ids they hold are the ``id`` of every resource and of pending operations that carry one; any id counts,
   not only ``pulumi-python:dynamic/together:*`` ones, so a ``.get()`` reference holds its object too.
2. Resolves the API of each stack (:mod:`.sources`): ``--api-key`` / ``--base-url``, else the stack's own
   ``together:apiKey`` / ``together:baseUrl`` (the stacks of the project in ``--cwd``), else ``TOGETHER_API_KEY``
   / ``TOGETHER_BASE_URL``, and says where each key came from (never the key). Each distinct API is listed.
3. Lists each API key's user's *active* objects (``created_by=me``): model resources PENDING, CREATING or READY
   and training sessions CREATING or RUNNING (``LIVE_RESOURCE_STATUSES`` / ``LIVE_SESSION_STATUSES``). Every
   one whose id no state holds is an orphan and is listed, with its age, its hourly price (model resources, from
   the estimate-cost endpoint) and what the create journal of this machine says of it.
4. Decides what ``--stop`` would do with each (:mod:`.decide`, the ownership rule): an object is stopped only
   when no state read holds it and nothing says somebody is creating it: not a create in flight on this machine,
   not possibly a pending create of a state read, not younger than ``--min-age`` (unless the journal says an
   interrupted create left it), and not journalled as made by a stack that was not read.
5. With ``--stop``: prints the whole list, refuses when no state read holds any Together object (unless told
   otherwise), asks on a terminal (``--yes`` skips that; no terminal and no ``--yes`` refuses), then stops
   sessions first, then model resources, each without ``force``. A resource that still carries a session which
   is not an orphan (a stack holds it, or another user made it) is refused by the API, reported, and left
   running; a resource whose only attached sessions are the orphans just stopped waits for them to end (a session
   holds its slot while STOPPING), then is stopped.

The API keys are never printed: errors come from the client, which redacts its key, and everything this command
writes is scrubbed of every key it read once more. ``pulumi config --show-secrets`` output is never shown.
"""

from __future__ import annotations

from ._common import (
    DEFAULT_MIN_AGE_MINUTES,
    DEFAULT_STOP_TIMEOUT,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_ORPHANS_FOUND,
    EXIT_REFUSED,
    EXIT_USAGE,
    NONE_WITH_SOURCES,
    OrphanError,
    format_age,
)
from .command import format_line, run, summary
from .decide import Rules, decide
from .finder import Orphan, find_orphans
from .states import (
    PendingOperation,
    StackState,
    export_stack,
    held_ids,
    list_stacks,
    load_state_file,
    parse_state,
    stack_config,
)
from .stopper import StopResult, stop_orphans

__all__ = [
    "DEFAULT_MIN_AGE_MINUTES",
    "DEFAULT_STOP_TIMEOUT",
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_ORPHANS_FOUND",
    "EXIT_REFUSED",
    "EXIT_USAGE",
    "NONE_WITH_SOURCES",
    "Orphan",
    "OrphanError",
    "PendingOperation",
    "Rules",
    "StackState",
    "StopResult",
    "decide",
    "export_stack",
    "find_orphans",
    "format_age",
    "format_line",
    "held_ids",
    "list_stacks",
    "load_state_file",
    "parse_state",
    "run",
    "stack_config",
    "stop_orphans",
    "summary",
]
