"""``python -m pulumi_together_rl``: the operator's command line.

``orphans`` (:mod:`pulumi_together_rl.orphans`): list, and with ``--stop`` stop, the active model resources
and training sessions of the API key's user that no given Pulumi stack holds. ``policy-pack <folder>``
(:mod:`pulumi_together_rl.policy.folder`): write the policy-pack folder that ``pulumi preview --policy-pack``
takes. This module only parses the arguments; the logic and its documentation live in those modules.
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
            "RUNNING) created by the API key's user that none of the given Pulumi stack states holds. A dry "
            "run unless --stop is given."
        ),
        epilog=(
            "Exit status: 0 done (a dry run, even with orphans; or every orphan stopped), 1 an error or a stop "
            "that failed, 2 bad usage (for example no stack state), 3 orphans found with --fail-if-any."
        ),
    )
    sources = sub.add_argument_group("stack states (at least one, or --none)")
    sources.add_argument(
        "--state",
        action="append",
        metavar="FILE",
        help="a `pulumi stack export` JSON file (- for standard input); repeatable",
    )
    sources.add_argument(
        "--stack",
        action="append",
        metavar="NAME",
        help="export this stack with the Pulumi CLI on PATH (`pulumi stack export --stack NAME`); repeatable",
    )
    sources.add_argument(
        "--all-stacks",
        action="store_true",
        help="export every stack of the project (`pulumi stack ls --json`)",
    )
    sources.add_argument(
        "--cwd", metavar="DIR", help="the Pulumi project folder for --stack / --all-stacks (default: here)"
    )
    sources.add_argument(
        "--none",
        action="store_true",
        help="no stack holds anything: every active object is an orphan",
    )
    api = sub.add_argument_group("Together API")
    api.add_argument(
        "--api-key",
        metavar="KEY",
        help="the API key (default: $TOGETHER_API_KEY; prefer the variable: a flag shows in process lists)",
    )
    api.add_argument(
        "--base-url",
        metavar="URL",
        help="the API's base URL (default: $TOGETHER_BASE_URL, else https://api.together.ai)",
    )
    what = sub.add_argument_group("what to do")
    what.add_argument("--stop", action="store_true", help="stop the orphans (sessions first, never forced)")
    what.add_argument("--json", action="store_true", help="print a JSON list of the orphans instead of lines")
    what.add_argument(
        "--fail-if-any",
        action="store_true",
        help="exit 3 when a dry run finds orphans (for a scheduled CI job)",
    )
    what.add_argument(
        "--min-age",
        type=float,
        default=0.0,
        metavar="MINUTES",
        help="leave out objects younger than this (a `pulumi up` elsewhere may be creating them); default 0",
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
    return parser


def _policy_pack(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .policy import folder

    for path in folder.write(Path(args.folder), Path(args.venv) if args.venv else None):
        print(path)
    return 0


def _orphans(args: argparse.Namespace) -> int:
    given = bool(args.state or args.stack or args.all_stacks)
    if args.none and given:
        args.parser.error(orphans.NONE_WITH_SOURCES)
    if not args.none and not given:
        args.parser.error(orphans.NO_SOURCES)
    if args.min_age < 0 or args.timeout < 0:
        args.parser.error("--min-age and --timeout must be 0 or more.")
    if args.cwd and not (args.stack or args.all_stacks):
        args.parser.error("--cwd is the project folder of --stack / --all-stacks; pass one of them with it.")
    return orphans.run(args)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
