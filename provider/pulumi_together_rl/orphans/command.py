"""``python -m pulumi_together_rl orphans``: arguments to states, orphans, decisions, the prompt, stops and
output.

What goes where: the report (the stacks checked, the APIs, the listing, the stops, the summary) on stdout; notes,
warnings, errors and the prompt on stderr. With ``--json``, stdout holds only the JSON list, and everything else
(with ``--stop``, the listing too, before anything is stopped) goes to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import IO

from ..client import errors
from ..client.api import ENV_API_KEY, TogetherRL
from ..client.models import ModelResourceStatus
from ..ours import MODEL_RESOURCE, TRAINING_SESSION
from ..ownership import journal
from ._common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_ORPHANS_FOUND,
    EXIT_REFUSED,
    OrphanError,
    _s,
    explain,
    format_age,
)
from .decide import Rules, decide
from .finder import Orphan, find_orphans
from .sources import Api, Gathered, gather
from .states import StackState, held_ids
from .stopper import StopResult, stop_orphans

# ------------------------------------------------------------------------------------------ the command


def run(
    args: argparse.Namespace,
    *,
    stdout: IO[str] | None = None,
    stderr: IO[str] | None = None,
    stdin: IO[str] | None = None,
    now: datetime | None = None,
) -> int:
    """The ``orphans`` command, from parsed arguments (see ``__main__``). Returns the exit status.

    ``now`` is the moment ages are measured at (default: the clock's now)."""
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    stdin = stdin or sys.stdin
    scrubbed = Scrubbed()
    emit = scrubbed.emit
    report = stderr if args.json else stdout

    def note(text: str) -> None:
        emit(stderr, text)

    try:
        gathered = gather(args, note, scrubbed.secrets.add)
        states = gathered.states
        held = held_ids(states)
        _report_sources(args, gathered, lambda line: emit(report, line), note)
        keyed = [api for api in gathered.apis if api.key]
        if not keyed:
            raise OrphanError(
                "connecting to the Together API",
                "",
                None,
                "no API key",
                f"Set {ENV_API_KEY} (or pass --api-key, or set together:apiKey in the stacks' config) to a key "
                "that may list and stop your model resources and training sessions",
            )
        for api in gathered.apis:
            if not api.key:
                note(
                    f"warning: not checked: the API of {', '.join(api.stacks)} ({api.base_url}): no together:apiKey "
                    f"could be read and neither --api-key nor {ENV_API_KEY} is set."
                )
        entries = _journal_entries(gathered, lambda line: emit(report, line), note)
        with contextlib.ExitStack() as open_clients:
            clients = {id(api): open_clients.enter_context(_client(api)) for api in keyed}
            orphans, listed_by = _find(keyed, clients, held, entries)
            moment = now or datetime.now(timezone.utc)
            rules = Rules(
                min_age=max(0.0, args.min_age) * 60,
                ignore_pending_creates=args.ignore_pending_creates,
                ignore_journal_owner=args.ignore_journal_owner,
                none=args.none,
            )
            decide(orphans, states, rules, moment)
            if not args.stop:
                return _dry_run(args, orphans, held, states, moment, emit, stdout)
            return _stop(args, orphans, held, states, moment, listed_by, clients, emit, stdout, stderr, stdin)
    except OrphanError as exc:
        emit(stderr, f"error: {exc}")
        return EXIT_FAILED
    except KeyboardInterrupt:
        emit(stderr, "error: finding orphans: interrupted. Run again to see what is left.")
        return 130
    except Exception as exc:  # a bug: still one sentence, never a traceback that could carry request details
        if os.environ.get("TOGETHER_RL_DEBUG") == "1":
            raise
        cause, todo = explain(exc)
        emit(stderr, f"error: {OrphanError('finding orphans', '', None, cause, todo)}")
        return EXIT_FAILED


Emit = Callable[[IO[str], str], None]


class Scrubbed:
    """How these commands write: a line at a time, flushed, scrubbed of every API key read (``secrets``, filled
    by :func:`.sources.gather` before anything is written)."""

    def __init__(self) -> None:
        self.secrets: set[str] = set()

    def emit(self, stream: IO[str], text: str) -> None:
        for secret in sorted(self.secrets, key=len, reverse=True):  # a longer key may contain a shorter one
            text = errors.redact(text, secret)
        stream.write(text + "\n")
        stream.flush()


def _journal_entries(
    gathered: Gathered,
    say: Callable[[str], None],
    note: Callable[[str], None],
    doing: str = "finding orphans",
) -> list[journal.Seen]:
    """The entries of every journal a create of the stacks read may have written to (:func:`.sources.gather`),
    merged: an object any of them names is judged by it. A shared journal that cannot be read stops the command:
    without it, an object that a create on another machine is making would look orphaned."""
    found: list[journal.Seen] = []
    for read in gathered.journals:
        if read.url is not None:
            say(read.describe())
        try:
            found += journal.at(read.url).entries(warn=note)
        except journal.Refused as exc:
            raise OrphanError(
                doing,
                "",
                None,
                exc.cause,
                "Nothing was stopped. Check that store and this machine's credentials for it, or pass --state "
                "files and --stack names whose creates used no other journal",
            ) from None
    return found


def _report_sources(
    args: argparse.Namespace, gathered: Gathered, say: Callable[[str], None], note: Callable[[str], None]
) -> None:
    """What was read, before anything is listed: the stacks, the warnings that bear on the listing, the APIs."""
    states = gathered.states
    labels = ", ".join(state.label for state in states)
    say(f"checked {len(states)} stack{_s(len(states))}" + (f": {labels}" if labels else ""))
    if args.none:
        note("note: --none: no stack state was read, on purpose: every active object counts as an orphan.")
    elif not gathered.every_stack:
        note(
            "warning: only the given stack states were read, so the objects of every other stack (other projects, "
            "CI, colleagues) look orphaned below; run without --state and --stack to check every stack of the "
            "logged-in backend."
        )
    if not args.none and not any(state.together_ids for state in states):
        if len(states) > 1:
            read = f"none of the {len(states)} stack states read holds a"
        elif states:
            read = "the stack state read holds no"
        else:
            read = "no stack state was read, so none holds a"
        note(
            f"warning: {read} Together model resource or training session, so every active object of the key's "
            "user looks orphaned below; --stop refuses to stop them unless you pass --even-if-no-stack-holds-any."
        )
    elif not gathered.every_stack:
        for state in states:
            if not state.together_ids:
                note(f"note: {state.source} holds no Together model resources or training sessions.")
    for state in states:
        _report_pending(state, note)
    for api in gathered.apis:
        if api.key:
            say(api.describe())


def _report_pending(state: StackState, note: Callable[[str], None]) -> None:
    pending = state.pending
    if not pending:
        return
    cancel, refresh, where = state.clear_commands()
    listed = ", ".join(operation.describe() for operation in pending)
    note(
        f"warning: {state.title} has {len(pending)} pending operation{_s(len(pending))} ({listed}): an update "
        "of it is running now, or one was killed before its state recorded the outcome, so --stop leaves objects "
        f"of those kinds running. Once no update of it is running, clear them: `{cancel}` (removes a killed "
        f"update's lock), then `{refresh}`{where}."
    )


def _find(
    apis: Sequence[Api], clients: dict[int, TogetherRL], held: set[str], entries: list[journal.Seen]
) -> tuple[list[Orphan], dict[int, Api]]:
    """The orphans of every API, and the API each was listed from (by ``id()`` of the orphan): its stop goes
    through the same key."""
    found: list[Orphan] = []
    listed_by: dict[int, Api] = {}
    seen: set[tuple[str, str]] = set()
    for api in apis:
        try:
            listed = find_orphans(clients[id(api)], held, entries)
        except OrphanError as exc:
            # Name the API and the key's source: with several, "check the key" alone says nothing.
            cause = exc.cause
            todo = f"Check {api.key_source}" if "rejected the key" in cause else exc.todo
            raise OrphanError(exc.doing, exc.kind, api.base_url, cause, todo) from None
        for orphan in listed:
            if (api.base_url, orphan.id) not in seen:  # two keys of one user list the same objects
                seen.add((api.base_url, orphan.id))
                found.append(orphan)
                listed_by[id(orphan)] = api
    return found, listed_by


def _dry_run(
    args: argparse.Namespace,
    orphans: list[Orphan],
    held: set[str],
    states: Sequence[StackState],
    now: datetime,
    emit: Emit,
    stdout: IO[str],
) -> int:
    if args.json:
        emit(stdout, json.dumps(_json(orphans, now, {}), indent=2))
    else:
        for orphan in orphans:
            emit(stdout, format_line(orphan, now))
        emit(stdout, summary(orphans, none=args.none, held=len(held), states=len(states)))
    if args.fail_if_any and any(not o.young for o in orphans):
        return EXIT_ORPHANS_FOUND
    return EXIT_OK


def _stop(
    args: argparse.Namespace,
    orphans: list[Orphan],
    held: set[str],
    states: Sequence[StackState],
    now: datetime,
    listed_by: dict[int, Api],
    clients: dict[int, TogetherRL],
    emit: Emit,
    stdout: IO[str],
    stderr: IO[str],
    stdin: IO[str],
) -> int:
    """List, refuse or ask, then stop: nothing is stopped before the whole list is out and the answer is in."""
    listing = stderr if args.json else stdout
    for orphan in orphans:
        emit(listing, format_line(orphan, now))
    chosen = [o for o in orphans if o.stop]

    def finish(results: list[StopResult] | None, line: str | None = None) -> None:
        if args.json:
            emit(stdout, json.dumps(_json(orphans, now, {r.orphan.id: r for r in results or ()}), indent=2))
        if line is not None:
            emit(listing, line)

    def refuse(cause: str, advice: str) -> int:
        emit(stderr, f"error: {OrphanError('stopping', 'orphans', None, cause, advice)}")
        finish(None)
        return EXIT_REFUSED

    if not chosen:
        finish(None, summary(orphans, none=args.none, held=len(held), states=len(states), stopping=True))
        return EXIT_OK
    if not args.none and not args.even_if_no_stack_holds_any and not any(s.together_ids for s in states):
        return refuse(
            "no stack state read holds any Together model resource or training session, so every active object "
            "looks orphaned, and some may be another stack's",
            "Check that the right backend and stacks were read; pass --even-if-no-stack-holds-any if none holds "
            "any on purpose (nothing was stopped)",
        )
    answer = confirm(args.yes, chosen_words(len(chosen), _price_of(chosen)), emit, stderr, stdin)
    if answer is None:
        return refuse(*no_terminal(len(chosen)))
    if not answer:
        finish(None, NOT_CONFIRMED)
        return EXIT_OK
    results: list[StopResult] = []
    for key in dict.fromkeys(id(listed_by[id(o)]) for o in chosen):  # each API's sessions, then resources
        mine = [o for o in chosen if id(listed_by[id(o)]) == key]
        results += stop_orphans(clients[key], mine, timeout=args.timeout, out=stderr)
    for result in results:
        if args.json:
            emit(stderr, result.message if result.stopped else f"error: {result.message}")
        else:
            emit(
                stdout if result.stopped else stderr,
                result.message if result.stopped else f"error: {result.message}",
            )
    finish(results, summary(orphans, results, none=args.none, held=len(held), states=len(states)))
    return EXIT_OK if all(r.stopped for r in results) else EXIT_FAILED


NOT_CONFIRMED = "Nothing was stopped: the stop was not confirmed."


def no_terminal(count: int) -> tuple[str, str]:
    """(cause, what to do) of a ``--stop`` with no terminal to confirm on and no ``--yes``."""
    return (
        "standard input is not a terminal, so there is nobody to confirm the stop",
        f"Run it in a terminal, or pass --yes to stop the {_count(count)} marked `--stop stops it` above without "
        "asking (nothing was stopped)",
    )


def chosen_words(count: int, price: str | None = None) -> str:
    """``this 1 object``, ``these 3 objects (~$33.00/h)``: what the prompt names."""
    them = "this 1 object" if count == 1 else f"these {count} objects"
    return f"{them} ({price})" if price else them


def confirm(yes: bool, them: str, emit: Emit, stderr: IO[str], stdin: IO[str]) -> bool | None:
    """The rule of every ``--stop``: ``--yes`` goes ahead (and says so); else a terminal is asked (True: it
    answered y); else None: nobody to confirm on, refuse."""
    if yes:
        emit(stderr, f"--yes: stopping {them} without asking.")
        return True
    if not _is_terminal(stdin):
        return None
    stderr.write(f"Stop {them}? [y/N] ")
    stderr.flush()
    return stdin.readline().strip().lower() in ("y", "yes")


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
        return False


def _client(api: Api) -> TogetherRL:
    failure: errors.ConfigurationError
    try:
        return TogetherRL(api_key=api.key, base_url=api.base_url)
    except errors.ConfigurationError as exc:
        failure = exc
    cause, _ = explain(failure)
    raise OrphanError("connecting to the Together API", "", api.base_url, cause, f"Check {api.key_source}")


def _json(orphans: Sequence[Orphan], now: datetime, results: dict[str, StopResult]) -> list[dict]:
    listing = []
    for orphan in orphans:
        item = orphan.to_json(now)
        result = results.get(orphan.id)
        item["stopped"] = bool(result and result.stopped)
        item["stop_error"] = result.message if result and not result.stopped else None
        listing.append(item)
    return listing


# --------------------------------------------------------------------------------------------- the output


def format_price(amount: float, currency: str | None) -> str:
    if currency in (None, "", "USD"):
        return f"${amount:.2f}/h"
    return f"{amount:.2f} {currency}/h"


def format_line(orphan: Orphan, now: datetime | None = None) -> str:
    """One listing line: kind, id, short status, age, what is known of it, and what ``--stop`` does with it."""
    details: list[str] = []
    if orphan.kind == MODEL_RESOURCE:
        if orphan.base_model:
            details.append(orphan.base_model)
        if orphan.price_per_hour is None:
            details.append("price unknown")
        else:
            billed = "" if orphan.status == ModelResourceStatus.READY.short else " once READY"
            details.append(format_price(orphan.price_per_hour, orphan.currency) + billed)
        if orphan.held_sessions and orphan.stop is None:  # once decided, the decision says it
            details.append(
                f"held training sessions on it: {', '.join(orphan.held_sessions)} (--stop will leave it running)"
            )
    else:
        where = {True: "an orphan too", False: "held by a stack", None: "not yours or not active"}
        details.append(
            f"on {MODEL_RESOURCE} {orphan.model_resources_id} ({where[orphan.resource_is_orphan]})"
        )
        if orphan.display_name:
            details.append(repr(orphan.display_name))
    if orphan.journal_label:
        details.append(orphan.journal_label)
    if orphan.stop is not None and orphan.why:
        details.append(
            f"--stop stops it: {orphan.why}" if orphan.stop else f"--stop leaves it running: {orphan.why}"
        )
    return (
        f"{orphan.kind:<16}  {orphan.id}  {orphan.status:<8}  {format_age(orphan.age(now)):>10}  "
        + "; ".join(details)
    )


def summary(
    orphans: Sequence[Orphan],
    results: Sequence[StopResult] | None = None,
    *,
    none: bool = False,
    held: int = 0,
    states: int = 0,
    stopping: bool = False,
) -> str:
    """The last line: how many orphans of each kind, their price, and what was (or would be) stopped.
    ``stopping`` without ``results``: ``--stop`` found none it may stop."""
    if not orphans:
        if none:
            return "No orphans: this key's user has no active model resources or training sessions."
        return (
            "No orphans: every active model resource and training session of this key's user is held by the "
            f"stack states read ({held} held id{_s(held)} in {states} state{_s(states)})."
        )
    counted = f"{len(orphans)} orphan{_s(len(orphans))}: {_breakdown(orphans)}"
    chosen = [o for o in orphans if o.stop is not False]  # undecided (a bare listing) counts as chosen
    kept = len(orphans) - len(chosen)
    if results is None and stopping:
        them = "it" if len(orphans) == 1 else "them all"
        return f"{counted}. Nothing was stopped: --stop leaves {them} running (see each line)."
    if results is None:
        if not kept:
            them = "it" if len(orphans) == 1 else "them"
            return f"{counted}. Dry run: nothing was stopped; run again with --stop to stop {them}."
        if not chosen:
            them = "it" if len(orphans) == 1 else "them all"
            return (
                f"{counted}. Dry run: nothing was stopped; --stop would leave {them} running (see each line)."
            )
        return (
            f"{counted}. Dry run: nothing was stopped; --stop would stop {len(chosen)} of them and leave {kept} "
            "running (see each line)."
        )
    done = [r.orphan for r in results if r.stopped]
    failed = len(results) - len(done)
    left = f" {kept} left running (see each line)." if kept else ""
    if not failed:
        if not kept:
            return f"{counted}. Stopped {'it' if len(orphans) == 1 else f'all {len(orphans)}'}."
        return f"{counted}. Stopped {len(done)} ({_breakdown(done)});{left}"
    stopped = f"stopped {len(done)}" + (f" ({_breakdown(done)})" if done else "")
    return (
        f"{counted}. {stopped[0].upper()}{stopped[1:]}; {failed} could not be stopped (see the errors above)."
        + left
    )


def _breakdown(orphans: Sequence[Orphan]) -> str:
    resources = [o for o in orphans if o.kind == MODEL_RESOURCE]
    sessions = [o for o in orphans if o.kind == TRAINING_SESSION]
    parts = []
    if resources:
        parts.append(f"{len(resources)} model resource{_s(len(resources))} ({_price_of(resources)})")
    if sessions:
        parts.append(f"{len(sessions)} training session{_s(len(sessions))}")
    return ", ".join(parts)


def _price_of(orphans: Sequence[Orphan]) -> str:
    """The hourly price of the model resources among ``orphans`` (sessions are billed through theirs)."""
    resources = [o for o in orphans if o.kind == MODEL_RESOURCE]
    known = [o for o in resources if o.price_per_hour is not None]
    unknown = len(resources) - len(known)
    if not known:
        return "price unknown" if unknown else "~$0.00/h"
    currency = known[0].currency
    if all(o.currency == currency for o in known):
        price = f"~{format_price(sum(o.price_per_hour or 0.0 for o in known), currency)}"
    else:
        price = "mixed currencies"
    return price + (f", {unknown} of unknown price" if unknown else "")


def _count(n: int) -> str:
    return f"{n} object{_s(n)}"
