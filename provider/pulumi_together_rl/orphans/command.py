"""``python -m pulumi_together_rl orphans``: arguments to states, orphans, stops and output."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import IO

from .. import journal
from ..client import errors
from ..client.api import ENV_API_KEY, TogetherRL
from ..client.models import (
    ModelResourceStatus,
)
from ._common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_ORPHANS_FOUND,
    MODEL_RESOURCE,
    TRAINING_SESSION,
    OrphanError,
    _aware,
    _s,
    explain,
    format_age,
)
from .finder import Orphan, find_orphans
from .states import StackState, export_stack, held_ids, list_stacks, load_state_file
from .stopper import StopResult, stop_orphans

# ------------------------------------------------------------------------------------------ the command


def run(args: argparse.Namespace, *, stdout: IO[str] | None = None, stderr: IO[str] | None = None) -> int:
    """The ``orphans`` command, from parsed arguments (see ``__main__``). Returns the exit status."""
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    secret = (args.api_key if args.api_key is not None else os.environ.get(ENV_API_KEY, "")).strip()

    def emit(stream: IO[str], text: str) -> None:
        stream.write(errors.redact(text, secret) + "\n")
        stream.flush()

    def note(text: str) -> None:
        emit(stderr, text)

    try:
        states = _gather_states(args, note)
        for state in states:
            if not state.together_ids:
                note(f"note: {state.source} holds no Together model resources or training sessions.")
            if state.pending_operations:
                note(
                    f"note: {state.source} has {len(state.pending_operations)} pending operation(s): an update is "
                    "running or was interrupted, so what it is creating is not in its state yet and may show "
                    "here as an orphan."
                )
        held = held_ids(states)
        if not secret:
            raise OrphanError(
                "connecting to the Together API",
                "",
                None,
                "no API key",
                f"Set {ENV_API_KEY} (or pass --api-key) to a key that may list and stop your model resources and "
                "training sessions",
            )
        client = _client(secret, args.base_url)
        with client:
            orphans = find_orphans(
                client, held, journal.entries(), min_age=max(0.0, args.min_age) * 60, note=note
            )
            now = datetime.now(timezone.utc)
            results: list[StopResult] | None = None
            if args.stop and orphans:
                results = stop_orphans(client, orphans, timeout=args.timeout, out=stderr)
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

    stop_by_id = {r.orphan.id: r for r in results or ()}
    if args.json:
        listing = []
        for orphan in orphans:
            item = orphan.to_json(now)
            result = stop_by_id.get(orphan.id)
            item["stopped"] = bool(result and result.stopped)
            item["stop_error"] = result.message if result and not result.stopped else None
            listing.append(item)
        if results is not None:
            for result in results:
                emit(stderr, result.message)
        emit(stdout, json.dumps(listing, indent=2))
    else:
        for orphan in orphans:
            emit(stdout, format_line(orphan, now))
        if results is not None:
            for result in results:
                emit(
                    stdout if result.stopped else stderr,
                    result.message if result.stopped else f"error: {result.message}",
                )
        emit(stdout, summary(orphans, results, none=args.none, held=len(held), states=len(states)))

    if results is not None:
        return EXIT_OK if all(r.stopped for r in results) else EXIT_FAILED
    if orphans and args.fail_if_any:
        return EXIT_ORPHANS_FOUND
    return EXIT_OK


def _gather_states(args: argparse.Namespace, note: Callable[[str], None]) -> list[StackState]:
    states = [load_state_file(path) for path in args.state or ()]
    names = list(args.stack or ())
    if args.all_stacks:
        found = list_stacks(cwd=args.cwd, note=note)
        if not found and not states and not names:
            where = os.path.abspath(args.cwd or os.curdir)
            raise OrphanError(
                "listing",
                "the stacks of",
                where,
                "`pulumi stack ls` found no stacks there, so every active object would look orphaned",
                "Run it in the project's folder (or pass --cwd), or pass --none to treat every object as an orphan",
            )
        names += [n for n in found if n not in names]
    states += [export_stack(name, cwd=args.cwd) for name in names]
    return states


def _client(api_key: str, base_url: str | None) -> TogetherRL:
    failure: errors.ConfigurationError
    try:
        return TogetherRL(api_key=api_key, base_url=base_url)
    except errors.ConfigurationError as exc:
        failure = exc
    cause, todo = explain(failure)
    raise OrphanError("connecting to the Together API", "", None, cause, todo)


# --------------------------------------------------------------------------------------------- the output


def format_price(amount: float, currency: str | None) -> str:
    if currency in (None, "", "USD"):
        return f"${amount:.2f}/h"
    return f"{amount:.2f} {currency}/h"


def format_line(orphan: Orphan, now: datetime | None = None) -> str:
    """One listing line: kind, id, short status, age, and what is known of it."""
    details: list[str] = []
    if orphan.kind == MODEL_RESOURCE:
        if orphan.base_model:
            details.append(orphan.base_model)
        if orphan.price_per_hour is None:
            details.append("price unknown")
        else:
            billed = "" if orphan.status == ModelResourceStatus.READY.short else " once READY"
            details.append(format_price(orphan.price_per_hour, orphan.currency) + billed)
        if orphan.held_sessions:
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
    if orphan.interrupted_at is not None:
        moment = _aware(orphan.interrupted_at).astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        details.append(f"left by an interrupted pulumi up at {moment}")
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
) -> str:
    """The last line: how many orphans of each kind, their price, and what was (not) stopped."""
    if not orphans:
        if none:
            return "No orphans: this key's user has no active model resources or training sessions."
        return (
            "No orphans: every active model resource and training session of this key's user is held by the "
            f"given stack states ({held} held id{_s(held)} in {states} state{_s(states)})."
        )
    counted = f"{len(orphans)} orphan{_s(len(orphans))}: {_breakdown(orphans)}"
    if results is None:
        them = "it" if len(orphans) == 1 else "them"
        return f"{counted}. Dry run: nothing was stopped; run again with --stop to stop {them}."
    done = [r.orphan for r in results if r.stopped]
    failed = len(results) - len(done)
    if not failed:
        return f"{counted}. Stopped {'it' if len(orphans) == 1 else f'all {len(orphans)}'}."
    stopped = f"stopped {len(done)}" + (f" ({_breakdown(done)})" if done else "")
    return (
        f"{counted}. {stopped[0].upper()}{stopped[1:]}; {failed} could not be stopped (see the errors above)."
    )


def _breakdown(orphans: Sequence[Orphan]) -> str:
    resources = [o for o in orphans if o.kind == MODEL_RESOURCE]
    sessions = [o for o in orphans if o.kind == TRAINING_SESSION]
    parts = []
    if resources:
        known = [o for o in resources if o.price_per_hour is not None]
        unknown = len(resources) - len(known)
        if known:
            currency = known[0].currency
            same = all(o.currency == currency for o in known)
            price = (
                f"~{format_price(sum(o.price_per_hour or 0.0 for o in known), currency)}"
                if same
                else "mixed currencies"
            )
            if unknown:
                price += f", {unknown} of unknown price"
        else:
            price = "price unknown"
        parts.append(f"{len(resources)} model resource{_s(len(resources))} ({price})")
    if sessions:
        parts.append(f"{len(sessions)} training session{_s(len(sessions))}")
    return ", ".join(parts)


# ------------------------------------------------------------------------------------------ small helpers
