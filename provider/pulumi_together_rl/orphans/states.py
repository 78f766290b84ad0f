"""Stack states: the ids that ``pulumi stack export`` files (or the Pulumi CLI) say a stack holds."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from ._common import PULUMI_TIMEOUT, TOGETHER_TYPE_PREFIX, OrphanError, _is_id

# ------------------------------------------------------------------------------------------ stack states


@dataclasses.dataclass(frozen=True)
class StackState:
    """One ``pulumi stack export``: where it came from (``dev.json``, ``stack dev``) and its JSON."""

    source: str
    data: Mapping[str, Any]

    @property
    def resources(self) -> list[Mapping[str, Any]]:
        return [r for r in self._deployment.get("resources") or [] if isinstance(r, Mapping)]

    @property
    def pending_operations(self) -> list[Mapping[str, Any]]:
        return [p for p in self._deployment.get("pending_operations") or [] if isinstance(p, Mapping)]

    @property
    def together_ids(self) -> set[str]:
        """Ids of the stack's Together model resources and training sessions."""
        return {
            r["id"]
            for r in self.resources
            if _is_id(r.get("id")) and str(r.get("type", "")).startswith(TOGETHER_TYPE_PREFIX)
        }

    @property
    def ids(self) -> set[str]:
        """Every id the stack holds: its resources', and its pending operations' that have one."""
        held = {r["id"] for r in self.resources if _is_id(r.get("id"))}
        for operation in self.pending_operations:
            resource = operation.get("resource")
            if isinstance(resource, Mapping) and _is_id(resource.get("id")):
                held.add(resource["id"])
        return held

    @property
    def _deployment(self) -> Mapping[str, Any]:
        deployment = self.data.get("deployment")
        return deployment if isinstance(deployment, Mapping) else {}


def parse_state(text: str, source: str) -> StackState:
    """A ``pulumi stack export`` (``{"version": 3, "deployment": {"resources": [...]}}``) from its text."""
    doing = "reading the stack export"
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise OrphanError(
            doing, "", source, f"it is not JSON ({exc})", "Pass the output of `pulumi stack export`"
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("deployment"), dict):
        raise OrphanError(
            doing,
            "",
            source,
            "it is not a `pulumi stack export` (there is no deployment object)",
            "Pass the output of `pulumi stack export --stack <name>`",
        )
    resources = data["deployment"].get("resources")
    if resources is not None and not isinstance(resources, list):
        raise OrphanError(
            doing,
            "",
            source,
            "its deployment.resources is not a list",
            "Pass the output of `pulumi stack export --stack <name>`",
        )
    return StackState(source, data)


def load_state_file(path: str | os.PathLike[str]) -> StackState:
    """Read a ``pulumi stack export`` file (``-`` is standard input)."""
    name = str(path)
    if name == "-":
        return parse_state(sys.stdin.read(), "standard input")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise OrphanError(
            "reading the stack export",
            "",
            name,
            exc.strerror or type(exc).__name__,
            "Write it with `pulumi stack export --stack <name> > FILE` and pass that file",
        ) from None
    except UnicodeDecodeError:
        raise OrphanError(
            "reading the stack export",
            "",
            name,
            "it is not UTF-8 text",
            "Pass the output of `pulumi stack export`",
        ) from None
    return parse_state(text, name)


def held_ids(states: Iterable[StackState | Mapping[str, Any]]) -> set[str]:
    """Every id any of ``states`` holds (``StackState`` or a bare ``pulumi stack export`` dict)."""
    held: set[str] = set()
    for state in states:
        held |= (state if isinstance(state, StackState) else StackState("", state)).ids
    return held


Runner = Callable[..., "subprocess.CompletedProcess[str]"]


def export_stack(name: str, *, cwd: str | None = None, run: Runner = subprocess.run) -> StackState:
    """``pulumi stack export --stack NAME`` through the Pulumi CLI on PATH, in ``cwd``."""
    result = _pulumi(
        ["stack", "export", "--stack", name], doing="exporting", what="stack", ident=name, cwd=cwd, run=run
    )
    return parse_state(result, f"stack {name}")


def list_stacks(
    *, cwd: str | None = None, run: Runner = subprocess.run, note: Callable[[str], None] | None = None
) -> list[str]:
    """Names of the stacks of the project in ``cwd`` (``pulumi stack ls --json``)."""
    where = os.path.abspath(cwd or os.curdir)
    text = _pulumi(
        ["stack", "ls", "--json"], doing="listing", what="the stacks of", ident=where, cwd=cwd, run=run
    )
    try:
        listed = json.loads(text)
        names = [str(s["name"]) for s in listed]
    except (ValueError, TypeError, KeyError):
        raise OrphanError(
            "listing",
            "the stacks of",
            where,
            "`pulumi stack ls --json` did not answer a list of stacks",
            "Check that the Pulumi CLI on PATH is a recent Pulumi v3",
        ) from None
    for stack in listed:
        if isinstance(stack, dict) and stack.get("updateInProgress") and note is not None:
            note(
                f"note: stack {stack['name']} has an update in progress: what it is creating right now is not "
                "in its state yet and shows here as an orphan. Run again once it finishes before using --stop."
            )
    return names


def _pulumi(args: list[str], *, doing: str, what: str, ident: str, cwd: str | None, run: Runner) -> str:
    todo_cli = (
        "Install the Pulumi CLI (https://www.pulumi.com/docs/iac/download-install/) and put it on PATH, or pass "
        "exported files with --state"
    )
    executable = shutil.which("pulumi")
    if executable is None:
        raise OrphanError(doing, what, ident, "the Pulumi CLI (`pulumi`) is not on PATH", todo_cli)
    command = [executable, *args, "--non-interactive"]
    try:
        result = run(command, cwd=cwd, capture_output=True, text=True, timeout=PULUMI_TIMEOUT, check=False)
    except FileNotFoundError:
        raise OrphanError(
            doing,
            what,
            ident,
            f"the project folder {cwd!r} does not exist",
            "Pass the project's folder with --cwd",
        ) from None
    except NotADirectoryError:
        raise OrphanError(
            doing, what, ident, f"{cwd!r} is not a folder", "Pass the project's folder with --cwd"
        ) from None
    except subprocess.TimeoutExpired:
        raise OrphanError(
            doing,
            what,
            ident,
            f"`pulumi {' '.join(args)}` did not finish in {PULUMI_TIMEOUT:g} s",
            "Check that the backend is reachable (`pulumi whoami`), or pass exported files with --state",
        ) from None
    except OSError as exc:
        raise OrphanError(doing, what, ident, f"the Pulumi CLI could not be run ({exc})", todo_cli) from None
    if result.returncode != 0:
        lines = [line.strip() for line in (result.stderr or result.stdout or "").splitlines() if line.strip()]
        detail = lines[-1] if lines else f"exit status {result.returncode}"
        raise OrphanError(
            doing,
            what,
            ident,
            f"`pulumi {' '.join(args)}` failed: {detail.rstrip('.')}",
            "Check the stack name (`pulumi stack ls`), the project folder (--cwd) and the login (`pulumi whoami`)",
        )
    return result.stdout
