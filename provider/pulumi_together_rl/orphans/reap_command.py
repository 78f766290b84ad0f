"""``python -m pulumi_together_rl reap``: arguments to states, deadlines, decisions, the prompt, stops and output
(:mod:`.reap` finds and decides; the states, the APIs, the journals, the prompt and the stopper are the orphan
finder's).

What goes where: the report (the stacks checked, the APIs, one sentence per object with a deadline, the stops,
the summary) on stdout; notes, warnings, errors and the prompt on stderr. Exit statuses are ``orphans``': 0 done
(a dry run; every chosen object stopped; the stop not confirmed), 1 an error or a stop that failed, 2 bad usage,
4 ``--stop`` refused (no terminal to confirm on and no ``--yes``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import IO

from ..client import errors
from ..client.api import ENV_API_KEY, TogetherRL
from ..client.collections import MODEL_RESOURCES, TRAINING_SESSIONS
from ..client.models import LIVE_SESSION_STATUSES
from ..ours import MODEL_RESOURCE
from ..ownership import journal
from ..resources import process
from ._common import EXIT_FAILED, EXIT_OK, EXIT_REFUSED, OrphanError, _s, explain
from .command import (
    NOT_CONFIRMED,
    Emit,
    Scrubbed,
    _client,
    _journal_entries,
    chosen_words,
    confirm,
    no_terminal,
)
from .finder import journal_labels
from .reap import AHEAD, NOT_CHECKED, Due, deadlines, decide, line, live_record
from .sources import Api, gather
from .stopper import StopResult, stop_orphans

DOING = "reaping objects past their deadline"


def run(
    args: argparse.Namespace,
    *,
    stdout: IO[str] | None = None,
    stderr: IO[str] | None = None,
    stdin: IO[str] | None = None,
) -> int:
    """The ``reap`` command, from parsed arguments (see ``__main__``). Returns the exit status."""
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    stdin = stdin or sys.stdin
    scrubbed = Scrubbed()
    emit = scrubbed.emit

    def say(text: str) -> None:
        emit(stdout, text)

    def note(text: str) -> None:
        emit(stderr, text)

    try:
        gathered = gather(args, note, scrubbed.secrets.add)
        states = gathered.states
        labels = ", ".join(state.label for state in states)
        say(f"checked {len(states)} stack{_s(len(states))}" + (f": {labels}" if labels else ""))
        if not gathered.every_stack:
            note(
                "note: only the given stack states were read: the deadlines of every other stack are not kept by "
                "this run."
            )
        api_of = {label: api for api in gathered.apis for label in api.stacks}
        for api in gathered.apis:
            if api.key:
                say(api.describe())
            else:
                note(
                    f"warning: not checked: the API of {', '.join(api.stacks)} ({api.base_url}): no together:apiKey "
                    f"could be read and neither --api-key nor {ENV_API_KEY} is set."
                )
        dues = deadlines(states)
        if not dues:
            say("None of the objects the stacks read hold declares a deadline (stop_after): nothing to do.")
            return EXIT_OK
        entries = _journal_entries(gathered, say, note, doing=DOING)
        with contextlib.ExitStack() as open_clients:
            clients = {id(api): open_clients.enter_context(_client(api)) for api in gathered.apis if api.key}
            for api in gathered.apis:
                mine = [due for due in dues if api_of.get(due.state.label) is api]
                client = clients.get(id(api))
                if client is None:
                    for due in mine:
                        due.unchecked = f"no API key for {api.base_url} could be read"
                    decide(mine, states, datetime.now(timezone.utc))
                else:
                    decide(mine, states, _look(client, mine, entries))
            for due in dues:
                say(line(due))
            chosen = _unique([due for due in dues if due.stop])
            # A deadline that could not be checked is a failure of this run: a scheduled job must say so.
            unchecked = EXIT_FAILED if any(due.held_back == NOT_CHECKED for due in dues) else EXIT_OK
            if unchecked:
                failure = OrphanError(
                    DOING,
                    "",
                    None,
                    "the API could not be asked about some objects (see their lines)",
                    "Check the key and the base URL each line names, then run again",
                )
                note(f"error: {failure}")
            if not args.stop:
                say(_summary(dues, chosen, None))
                return unchecked
            return max(unchecked, _stop(args, dues, chosen, api_of, clients, emit, stdout, stderr, stdin))
    except OrphanError as exc:
        emit(stderr, f"error: {exc}")
        return EXIT_FAILED
    except KeyboardInterrupt:
        emit(stderr, f"error: {DOING}: interrupted. Run again to see what is left.")
        return 130
    except Exception as exc:  # a bug: still one sentence, never a traceback that could carry request details
        if os.environ.get("TOGETHER_RL_DEBUG") == "1":
            raise
        cause, todo = explain(exc)
        emit(stderr, f"error: {OrphanError(DOING, '', None, cause, todo)}")
        return EXIT_FAILED


def _look(client: TogetherRL, dues: Sequence[Due], entries: Sequence[journal.Seen]) -> datetime:
    """Ask the API for each object (and a model resource's active sessions), label what the journals say of
    it; now on that API's clock (its answers' Date header)."""
    labels = journal_labels(entries, client.base_url, [due.id for due in dues])
    for due in dues:
        if due.stopped_at_deadline:
            continue
        collection = MODEL_RESOURCES if due.kind == MODEL_RESOURCE else TRAINING_SESSIONS
        try:
            obj = collection.get(client, due.id)
        except errors.NotFound:
            continue
        except errors.TogetherError as exc:
            due.unchecked = f"asking the API for it failed: {explain(exc)[0].rstrip('.')}"
            continue
        if obj.status in collection.ended:
            due.live_status = obj.status.short
            continue
        due.live = labels.apply(live_record(due.kind, obj, client.base_url))
        due.live_status = due.live.status
        if due.kind == MODEL_RESOURCE:
            try:
                sessions = client.iter_training_sessions(
                    model_resources_id=due.id, status=LIVE_SESSION_STATUSES
                )
                due.attached = sorted(s.id for s in sessions)
            except errors.TogetherError as exc:
                due.live, due.unchecked = None, f"listing its sessions failed: {explain(exc)[0].rstrip('.')}"
    return process.api_now(client)


def _unique(dues: Sequence[Due]) -> list[Due]:
    """One per object: two stacks may hold the same id, both past their deadlines."""
    seen: dict[tuple[str | None, str], Due] = {}
    for due in dues:
        assert due.live is not None
        seen.setdefault((due.live.api, due.id), due)
    return list(seen.values())


def _stop(
    args: argparse.Namespace,
    dues: Sequence[Due],
    chosen: list[Due],
    api_of: dict[str, Api],
    clients: dict[int, TogetherRL],
    emit: Emit,
    stdout: IO[str],
    stderr: IO[str],
    stdin: IO[str],
) -> int:
    """Refuse or ask, then stop (sessions first, then model resources, never forced) and say what each stop
    did: nothing is stopped before every line is out and the answer is in."""
    if not chosen:
        emit(stdout, _summary(dues, chosen, []))
        return EXIT_OK
    answer = confirm(args.yes, chosen_words(len(chosen)), emit, stderr, stdin)
    if answer is None:
        emit(
            stderr,
            f"error: {OrphanError('stopping', 'objects past their deadline', None, *no_terminal(len(chosen)))}",
        )
        return EXIT_REFUSED
    if not answer:
        emit(stdout, NOT_CONFIRMED)
        return EXIT_OK
    results: list[StopResult] = []
    for key in dict.fromkeys(id(api_of[due.state.label]) for due in chosen):  # each API's sessions, then GPUs
        mine = [due.live for due in chosen if id(api_of[due.state.label]) == key and due.live is not None]
        results += stop_orphans(clients[key], mine, timeout=args.timeout, out=stderr)
    by_id = {due.id: due for due in chosen}
    for result in results:
        due = by_id[result.orphan.id]
        if result.stopped:
            emit(stdout, f"{due.state.title}: {result.message}; its deadline, {due.deadline}, had passed.")
        else:
            emit(stderr, f"error: {result.message}")
    emit(stdout, _summary(dues, chosen, results))
    return EXIT_OK if all(r.stopped for r in results) else EXIT_FAILED


def _summary(dues: Sequence[Due], chosen: Sequence[Due], results: Sequence[StopResult] | None) -> str:
    """The last line: how many objects declare a deadline, how many are past it and running, what was done."""
    stacks = len({due.state.label for due in dues})
    running = [due for due in dues if due.live is not None and due.held_back != AHEAD]
    counted = (
        f"{len(dues)} object{_s(len(dues))} with a deadline in {stacks} stack{_s(stacks)}, {len(running)} past it "
        "and running"
    )
    left = len(running) - len(chosen)
    kept = f"; {left} left running (see each line)" if left else ""
    if results is None:
        if not chosen:
            return f"{counted}. Dry run: nothing to stop{kept}."
        return f"{counted}. Dry run: nothing was stopped; run again with --stop to stop {len(chosen)}{kept}."
    done = sum(1 for r in results if r.stopped)
    failed = len(results) - done
    if not results:
        return f"{counted}. Nothing to stop{kept}."
    return (
        f"{counted}. Stopped {done}"
        + (f"; {failed} could not be stopped (see the errors above)" if failed else "")
        + f"{kept}."
    )
