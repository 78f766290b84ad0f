"""``python -m pulumi_together_rl``: the operator's command line.

``orphans`` (:mod:`pulumi_together_rl.orphans`): list, and with ``--stop`` stop, the active model resources
and training sessions of the API key's user that no Pulumi stack holds (by default, every stack of the logged-in
backend). ``reap`` (:mod:`pulumi_together_rl.orphans.reap`): stop what the stacks hold past its declared
deadline (``stop_after``), with no ``pulumi up``. ``policy-pack <folder>``
(:mod:`pulumi_together_rl.policy.folder`): write the policy-pack folder that ``pulumi preview --policy-pack``
takes. ``plugin schema|path``: the plugin face's package schema, or its folder. ``recover --stack S``
(:mod:`pulumi_together_rl.ownership.recovery`): what a killed ``pulumi up`` left in a stack, cleared. This module only parses the arguments; the logic and its documentation live in those modules.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from . import __version__, orphans

PROG = "python -m pulumi_together_rl"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Operator commands of pulumi-together-rl (Together AI RL infrastructure)."
    )
    parser.add_argument("--version", action="version", version=f"pulumi-together-rl {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    sub = commands.add_parser(
        "orphans",
        help="list (and with --stop, stop) active objects that no Pulumi stack holds",
        description=(
            "List the active model resources (PENDING, CREATING, READY) and training sessions (CREATING, "
            "RUNNING) created by the API key's user that no stack state holds: by default the states of every "
            "stack of the logged-in Pulumi backend. A dry run unless --stop is given; --stop lists what it will "
            "stop and asks first. See docs/orphans.md."
        ),
        epilog=(
            "Keys and base URLs: --api-key / --base-url win, then each stack's together:apiKey / "
            "together:baseUrl (stacks of the project in --cwd), then TOGETHER_API_KEY / TOGETHER_BASE_URL. "
            "Exit status: 0 done (a dry run, even with orphans; every chosen orphan stopped; or the stop not "
            "confirmed), 1 an error or a stop that failed, 2 bad usage, 3 orphans at least --min-age old found "
            "with --fail-if-any, 4 --stop refused and nothing was stopped (no terminal to ask and no --yes, or no "
            "state read holds any Together object)."
        ),
    )
    _sources(sub).add_argument(
        "--none",
        action="store_true",
        help="read no stack: no stack holds anything, on purpose, and every active object is an orphan",
    )
    what = sub.add_argument_group("what to do")
    what.add_argument(
        "--stop",
        action="store_true",
        help="stop the orphans marked `--stop stops it` (sessions first, never forced), after listing them and "
        "asking",
    )
    what.add_argument("--yes", action="store_true", help="with --stop: do not ask (for CI)")
    what.add_argument(
        "--min-age",
        type=float,
        default=orphans.DEFAULT_MIN_AGE_MINUTES,
        metavar="MINUTES",
        help="--stop leaves orphans younger than this running (a `pulumi up` elsewhere may be creating them), "
        "unless the create journal says an interrupted create left them; every orphan is listed (default "
        f"{orphans.DEFAULT_MIN_AGE_MINUTES:g})",
    )
    what.add_argument(
        "--ignore-pending-creates",
        action="store_true",
        help="with --stop: also stop objects of a kind that a stack read has a pending create of",
    )
    what.add_argument(
        "--ignore-journal-owner",
        action="store_true",
        help="with --stop: also stop objects whose create journal entry names a stack that was not read",
    )
    what.add_argument(
        "--even-if-no-stack-holds-any",
        action="store_true",
        help="with --stop: stop even when no state read holds any Together object (refused otherwise)",
    )
    what.add_argument("--json", action="store_true", help="print a JSON list of the orphans instead of lines")
    what.add_argument(
        "--fail-if-any",
        action="store_true",
        help="exit 3 when a dry run finds orphans at least --min-age old (for a scheduled CI job)",
    )
    what.add_argument(
        "--timeout",
        type=float,
        default=orphans.DEFAULT_STOP_TIMEOUT,
        metavar="SECONDS",
        help="with --stop: how long a model resource waits for its stopping orphan sessions to end "
        f"(default {orphans.DEFAULT_STOP_TIMEOUT:g})",
    )
    sub.set_defaults(handler=_orphans, parser=sub)
    reap = commands.add_parser(
        "reap",
        help="stop the objects the stacks hold past their declared deadline (stop_after), with no `pulumi up`",
        description=(
            "Read the stack states (by default every stack of the logged-in Pulumi backend) and stop each model "
            "resource and training session a state holds whose deadline (stop_at, from stop_after) has passed on "
            "the API's clock: only an id a state holds, never what a live create may hold, never what another "
            "stack read holds with no deadline or a later one, sessions first, never forced (a model resource "
            "that sessions not past their own deadline run on is left running). A dry run unless --stop is "
            "given; --stop asks first. The next `pulumi up` records the object stopped and does not re-create "
            "it. See docs/cost.md."
        ),
        epilog=(
            "Keys and base URLs as for `orphans`. Exit status: 0 done (a dry run; every chosen object stopped; or "
            "the stop not confirmed), 1 an error or a stop that failed, 2 bad usage, 4 --stop refused and nothing "
            "was stopped (no terminal to ask and no --yes)."
        ),
    )
    _sources(reap)
    reaping = reap.add_argument_group("what to do")
    reaping.add_argument(
        "--stop",
        action="store_true",
        help="stop the objects marked `--stop stops it` (sessions first, never forced), after listing them and "
        "asking",
    )
    reaping.add_argument("--yes", action="store_true", help="with --stop: do not ask (for cron and CI)")
    reaping.add_argument(
        "--timeout",
        type=float,
        default=orphans.DEFAULT_STOP_TIMEOUT,
        metavar="SECONDS",
        help="with --stop: how long a model resource waits for its stopping sessions to end "
        f"(default {orphans.DEFAULT_STOP_TIMEOUT:g})",
    )
    reap.set_defaults(handler=_reap, parser=reap, none=False)
    entries = commands.add_parser(
        "journal",
        help="list the create journal's entries, dismiss one an ambiguous take-over named, or drop entries",
        description=(
            "List the unfinished entries of this machine's create journal (creates in flight, or left by an "
            "interrupted `pulumi up`; with --all, the done records too). `journal dismiss ENTRY` records that none "
            "of the objects an ambiguous take-over of that entry found is its declaration's: the next `pulumi up` "
            "creates a new one, and the entry stays a rival to every other create, so that none takes those "
            "objects either. `journal prune ENTRY...` removes the named entries (any state) that no running "
            "`pulumi up` holds: the record that an id is claimed goes with it, so check what it names first."
        ),
    )
    entries.add_argument("action", nargs="?", choices=["list", "dismiss", "prune"], default="list")
    entries.add_argument(
        "entry",
        nargs="*",
        metavar="ENTRY",
        help="with dismiss or prune: the entry (its file name, or a prefix of it)",
    )
    entries.add_argument("--all", action="store_true", help="with list: the done records too")
    entries.set_defaults(handler=_journal, parser=entries)
    recover = commands.add_parser(
        "recover",
        help="after a killed `pulumi up`: show what the state and the create journal hold, clear the stale lock "
        "and the pending creates the journal accounts for",
        description=(
            "For one stack: show its pending creates (`pulumi stack export`) and the create journal entries of its "
            "declarations, from every journal its creates may have used (the one its `pulumi up` writes to named). "
            "Unless --report, and only when no create of the stack is live and its lock is neither young nor held "
            "by a process of this machine (it refuses otherwise, naming whose it is): clear the stale lock "
            "(`pulumi cancel`), hand each pending create whose id the journal holds to `pulumi refresh "
            "--import-pending-creates URN --import-pending-creates ID` (the pinned CLI clears it without recording "
            "the object; the next `pulumi up` takes it over by that id), and drop those the journal accounts for "
            "otherwise, saying what the next `pulumi up` does. See docs/journal.md."
        ),
        epilog="Exit status: 0 done (always, with --report), 1 an error, 4 refused: a create of the stack is live, "
        "or its lock is young or held by a process of this machine (see --force).",
    )
    recover.add_argument(
        "--stack", required=True, metavar="STACK", help="the stack (as `pulumi --stack` takes it)"
    )
    recover.add_argument(
        "--report",
        action="store_true",
        help="only print what the state and the journal hold and what recovery would do; exit 0 (for a CI "
        "`if: cancelled()` step)",
    )
    recover.add_argument(
        "--force",
        action="store_true",
        help="remove the stack's lock even when it is young or its process runs on this machine (a run you know "
        "is gone)",
    )
    recover.add_argument(
        "--cwd",
        metavar="DIR",
        help="the project's folder, where the Pulumi CLI runs and whose backend's journal is read (default: here)",
    )
    recover.set_defaults(handler=_recover)
    pack = commands.add_parser(
        "policy-pack",
        help="write the Together RL policy-pack folder for `pulumi preview --policy-pack`",
        description=(
            "Write FOLDER/PulumiPolicy.yaml and FOLDER/__main__.py (the pack's rules live in this package), "
            "and FOLDER/policy-config.json with the default settings unless it exists. Then: pulumi preview "
            "--policy-pack FOLDER --policy-pack-config FOLDER/policy-config.json"
        ),
    )
    pack.add_argument("folder", metavar="FOLDER", help="where to write the pack (created if missing)")
    pack.add_argument(
        "--venv",
        metavar="DIR",
        help="the venv the pack runs in, with pulumi-together-rl[policy] (default: this Python's, "
        "written relative to FOLDER)",
    )
    pack.set_defaults(handler=_policy_pack)
    plugin = commands.add_parser(
        "plugin",
        help="print the plugin face's package schema, or the folder of the plugin",
        description=(
            "`plugin schema` prints the package schema of the plugin face (package together-rl), what `pulumi "
            "package get-schema` prints, without starting anything: `pulumi package gen-sdk` takes the file. "
            "`plugin path` prints the plugin folder to name under `plugins: providers:` in a Pulumi.yaml."
        ),
    )
    plugin.add_argument("what", choices=["schema", "path"])
    plugin.set_defaults(handler=_plugin)
    return parser


def _sources(sub: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    """The stack states to read and the API to use: the same for ``orphans`` and ``reap``; the states' group."""
    sources = sub.add_argument_group("stack states (default: every stack of the logged-in backend)")
    sources.add_argument(
        "--state",
        action="append",
        metavar="FILE",
        help="only this `pulumi stack export` JSON file (- for standard input); repeatable. The stacks not "
        "given are not read (a warning says so: to `orphans`, their objects look orphaned)",
    )
    sources.add_argument(
        "--stack",
        action="append",
        metavar="NAME",
        help="only this stack, exported with the Pulumi CLI on PATH (`pulumi stack export --stack NAME`); "
        "repeatable",
    )
    sources.add_argument(
        "--all-stacks",
        action="store_true",
        help="every stack of the logged-in backend, all projects (`pulumi stack ls --all`): the default; with "
        "--state / --stack, those are read too",
    )
    sources.add_argument(
        "--cwd",
        metavar="DIR",
        help="the folder the Pulumi CLI runs in; the together:apiKey / together:baseUrl of its project's stacks "
        "are read (default: here)",
    )
    api = sub.add_argument_group("Together API")
    api.add_argument(
        "--api-key",
        metavar="KEY",
        help="the API key for every stack (default: each stack's together:apiKey, else $TOGETHER_API_KEY; "
        "prefer those: a flag shows in process lists)",
    )
    api.add_argument(
        "--base-url",
        metavar="URL",
        help="the API's base URL for every stack (default: each stack's together:baseUrl, else "
        "$TOGETHER_BASE_URL, else https://api.together.ai)",
    )
    return sources


def _plugin(args: argparse.Namespace) -> int:
    from pathlib import Path

    if args.what == "path":
        print(Path(__file__).resolve().parent / "plugin")
        return 0
    from .plugin.package_schema import schema_text

    print(schema_text())
    return 0


def _policy_pack(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .policy import folder

    for path in folder.write(Path(args.folder), Path(args.venv) if args.venv else None):
        print(path)
    return 0


def _orphans(args: argparse.Namespace) -> int:
    if args.none and (args.state or args.stack or args.all_stacks):
        args.parser.error(orphans.NONE_WITH_SOURCES)
    if args.min_age < 0 or args.timeout < 0:
        args.parser.error("--min-age and --timeout must be 0 or more.")
    if args.cwd and (args.none or (args.state and not (args.stack or args.all_stacks))):
        args.parser.error(
            "--cwd is the folder the Pulumi CLI runs in; it means nothing with only --state files or --none."
        )
    if args.yes and not args.stop:
        args.parser.error("--yes answers the prompt of --stop; pass --stop with it.")
    return orphans.run(args)


def _reap(args: argparse.Namespace) -> int:
    from .orphans import reap_command

    if args.timeout < 0:
        args.parser.error("--timeout must be 0 or more.")
    if args.cwd and args.state and not (args.stack or args.all_stacks):
        args.parser.error(
            "--cwd is the folder the Pulumi CLI runs in; it means nothing with only --state files."
        )
    if args.yes and not args.stop:
        args.parser.error("--yes answers the prompt of --stop; pass --stop with it.")
    return reap_command.run(args)


def _journal(args: argparse.Namespace) -> int:
    from .messages import command
    from .ownership import journal, leases
    from .ownership.records import State, now, stamp

    try:
        opened = journal.current()
        if args.action != "list":
            opened.probe()  # a writer judges leases on the store's clock
        everything = opened.entries()
    except journal.Refused as exc:
        print(f"error: reading the create journal: {exc.cause}. {exc.todo}.", file=sys.stderr)
        return 1
    found = [s for s in everything if s.entry.state != State.DONE]
    if args.action == "list":
        if args.entry:
            args.parser.error("list takes no ENTRY")
        shown = everything if args.all else found
        for seen in shown:
            entry = seen.entry
            print(
                f"{seen.name}  {entry.state.value:<9}  {entry.kind:<16}  {entry.owner or '(no declaration)'}  "
                f"{stamp(entry.started_at)}  {entry.id or '-'}"
                + (f"  backend {entry.backend_location}" if entry.backend_location else "")
                + ("  (in flight)" if entry.state != State.DONE and seen.live() else "")
                + (f"  {entry.note}" if entry.note else "")
            )
        what = "entr" + ("y" if len(shown) == 1 else "ies")
        print(f"{len(shown)} {'' if args.all else 'unfinished '}{what} in {opened.location}")
        return 0
    if not args.entry:
        args.parser.error(f"{args.action} takes the ENTRY to {args.action}")
    doing = "dismissing" if args.action == "dismiss" else "dropping"
    pool = found if args.action == "dismiss" else everything
    status = 0
    for name in args.entry:
        matching = [s for s in pool if s.name.startswith(name.removesuffix(".json"))]
        which = "unfinished entries" if args.action == "dismiss" else "entries"
        if len(matching) != 1:
            listing = command("journal list" + (" --all" if args.action == "prune" else ""))
            print(f"error: {doing} journal entry {name}: {len(matching)} {which} match it. Run `{listing}` to "
                  "list them", file=sys.stderr)  # fmt: skip
            status = 1
            continue
        seen = matching[0]
        entry = seen.entry
        try:
            with leases.taken(seen) as held:
                if held is not None and args.action == "dismiss":
                    note = f"dismissed at {stamp(now())}: none of the objects its take-over found is this declaration's"
                    held.release(note, state=State.DISMISSED)
                elif held is not None:
                    held.remove()
        except journal.Refused as exc:
            print(f"error: {doing} journal entry {name}: {exc.cause}. {exc.todo}", file=sys.stderr)
            status = 1
            continue
        if held is None:
            print(f"error: {doing} journal entry {name}: a running `pulumi up` holds it (its lease is live, on "
                  "this machine or another). Let it finish, then run this again", file=sys.stderr)  # fmt: skip
            status = 1
        elif args.action == "dismiss":
            print(f"dismissed {seen.name}: the next `pulumi up` of {entry.owner} creates a new one")
        else:
            gone = f"; nothing records that {entry.id} is claimed any more" if entry.id else ""
            print(f"dropped {seen.name} ({entry.state.value}, {entry.kind} of {entry.owner}){gone}")
    return status


def _recover(args: argparse.Namespace) -> int:
    import os

    from .ownership import recovery

    if args.cwd:
        os.chdir(args.cwd)  # the journal is found from the working folder's backend, as the CLI finds it
    return recovery.run(args.stack, report=args.report, force=args.force)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
