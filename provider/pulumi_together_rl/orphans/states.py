"""Stack states: the ids that ``pulumi stack export`` files (or the Pulumi CLI) say a stack holds, its pending
operations, and the stacks' ``together:*`` config.

What the Pulumi CLI answers (measured with v3.274.1 and a file backend):

* ``pulumi stack ls --all --json --fully-qualify-stack-names`` lists every project's stacks of the logged-in
  backend, from any folder: ``[{"name": "organization/proj/dev", "current": false, "lastUpdate": "...",
  "resourceCount": 2}, ...]`` (Pulumi Cloud adds ``updateInProgress`` and ``url``). Without
  ``--fully-qualify-stack-names``, the stacks of the project in the current folder are listed by their short
  name. Without ``--all`` it lists only that project's stacks, and fails outside a project folder.
* ``pulumi stack export --stack org/proj/dev`` works from any folder; a short name needs its project's folder.
* ``pulumi config --json --show-secrets --stack S`` answers ``{"together:apiKey": {"value": "...", "secret":
  true}, "together:baseUrl": {"value": "...", "secret": false}}`` (``{}`` without config). It reads
  ``Pulumi.<stack>.yaml`` of the project in the current folder *whatever project S names*: asked for another
  project's stack it answers this project's stack of the same name, so it is asked only for the stacks of the
  project in that folder. Secrets need the passphrase (``PULUMI_CONFIG_PASSPHRASE``), as for any command.
* A ``pulumi up`` whose CLI is killed leaves the stack locked and a ``deployment.pending_operations`` entry
  ``{"type": "creating", "resource": {"urn": ..., "type": ..., "inputs": ...}}`` without an id. The pending
  create stays through ``up``, ``refresh`` and ``destroy``; ``pulumi cancel --yes --stack S`` removes the lock
  (from any folder, also when there is none) and ``pulumi refresh --clear-pending-creates --yes --stack S``, in
  the project's folder, drops the pending create.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from .. import backend as stack_backend
from .. import ours
from ._common import (
    PULUMI_TIMEOUT,
    OrphanError,
    _is_id,
)

# ------------------------------------------------------------------------------------------ stack states


@dataclasses.dataclass(frozen=True)
class PendingOperation:
    """One entry of ``deployment.pending_operations``."""

    type: str
    """``creating``, ``updating``, ``deleting``, ..."""
    urn: str
    resource_type: str
    kind: str | None
    """:data:`MODEL_RESOURCE` or :data:`TRAINING_SESSION` for a Together resource, else None."""

    @property
    def name(self) -> str:
        return self.urn.rsplit("::", 1)[-1] if "::" in self.urn else self.urn

    def describe(self) -> str:
        return " ".join(part for part in (self.type, self.kind or self.resource_type, self.name) if part)


@dataclasses.dataclass(frozen=True)
class StackState:
    """One ``pulumi stack export``: where it came from (``dev.json``, ``stack dev``) and its JSON."""

    source: str
    data: Mapping[str, Any]
    name: str | None = None
    """The stack's name as the CLI took it (fully qualified when listed); None for a file."""
    folder: str | None = None
    """Its project's folder when that is the folder the CLI ran in (where ``pulumi refresh`` runs)."""
    backend: str | None = None
    """The identity of the backend it was read from (:mod:`...backend`); None for a file, whose backend is not
    known."""

    @property
    def label(self) -> str:
        """How the output names it: the stack name, else the file."""
        return self.name or self.source

    @property
    def title(self) -> str:
        """How a sentence names it: ``stack org/proj/dev``, ``dev.json (stack dev of project proj)``."""
        if self.name:
            return f"stack {self.name}"
        identity = self.project_and_stack
        return f"{self.source} (stack {identity[1]} of project {identity[0]})" if identity else self.source

    @property
    def resources(self) -> list[Mapping[str, Any]]:
        return [r for r in self._deployment.get("resources") or [] if isinstance(r, Mapping)]

    @property
    def pending_operations(self) -> list[Mapping[str, Any]]:
        return [p for p in self._deployment.get("pending_operations") or [] if isinstance(p, Mapping)]

    @property
    def pending(self) -> list[PendingOperation]:
        found = []
        for operation in self.pending_operations:
            resource = operation.get("resource")
            resource = resource if isinstance(resource, Mapping) else {}
            kind = str(resource.get("type", ""))
            found.append(
                PendingOperation(
                    type=str(operation.get("type") or "unknown"),
                    urn=str(resource.get("urn") or ""),
                    resource_type=kind,
                    kind=ours.kind_of(kind),
                )
            )
        return found

    @property
    def pending_creates(self) -> list[PendingOperation]:
        """Pending creates of Together objects: what a running or killed update may have made."""
        return [p for p in self.pending if p.type == "creating" and p.kind is not None]

    @property
    def together_ids(self) -> set[str]:
        """Ids of the stack's Together model resources and training sessions."""
        return {
            r["id"]
            for r in self.resources
            if _is_id(r.get("id")) and ours.kind_of(str(r.get("type", ""))) is not None
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
    def project_and_stack(self) -> tuple[str, str] | None:
        """(project, stack) from its URNs (``urn:pulumi:<stack>::<project>::...``); None when it has none."""
        urns = [str(r.get("urn") or "") for r in self.resources] + [p.urn for p in self.pending]
        for urn in urns:
            parts = urn.split("::")
            if len(parts) >= 2 and parts[0].startswith("urn:pulumi:"):
                return parts[1], parts[0].removeprefix("urn:pulumi:")
        if self.name and self.name.count("/") == 2:
            _, project, stack = self.name.split("/")
            return project, stack
        return None

    def holds_declarations_of(self, owner: ours.Owner, backend: str | None) -> bool:
        """Whether this is the stack a journal entry's declaration ``owner`` (in ``backend``: its identity, None
        for an entry that did not record one) belongs to: the same organization (when both name one), project and
        stack, read from the same backend (when both are known; a file names no backend)."""
        if backend is not None and self.backend is not None and backend != self.backend:
            return False
        if self.name and self.name.count("/") == 2:
            org, project, stack = self.name.split("/")
            return (project, stack) == (owner.project, owner.stack) and owner.org in (None, org)
        return self.project_and_stack == (owner.project, owner.stack)

    def clear_commands(self) -> tuple[str, str, str]:
        """What clears what a killed ``pulumi up`` left in it: (the command that removes its lock, the command
        that drops its pending creates, where that one runs: ``""`` when it names its folder itself)."""
        identity = self.project_and_stack
        ref = shlex.quote(self.name or (identity[1] if identity else "<stack>"))
        refresh = f"pulumi refresh --clear-pending-creates --yes --stack {ref}"
        where = ""
        if self.folder:
            refresh += f" --cwd {shlex.quote(self.folder)}"
        elif identity:
            where = f" in the folder of project {identity[0]}"
        else:
            where = " in its project's folder"
        return f"pulumi cancel --yes --stack {ref}", refresh, where

    @property
    def _deployment(self) -> Mapping[str, Any]:
        deployment = self.data.get("deployment")
        return deployment if isinstance(deployment, Mapping) else {}


def parse_state(
    text: str, source: str, *, name: str | None = None, folder: str | None = None, backend: str | None = None
) -> StackState:
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
    return StackState(source, data, name=name, folder=folder, backend=backend)


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


# ------------------------------------------------------------------------------------------ the Pulumi CLI

Runner = Callable[..., "subprocess.CompletedProcess[str]"]


def export_stack(
    name: str, *, cwd: str | None = None, run: Runner = subprocess.run, folder: str | None = None
) -> StackState:
    """``pulumi stack export --stack NAME`` through the Pulumi CLI on PATH, in ``cwd``."""
    result = _pulumi(
        ["stack", "export", "--stack", name], doing="exporting", what="stack", ident=name, cwd=cwd, run=run
    )
    # Read with the backend that the CLI run in ``cwd`` with this environment uses.
    read_from = stack_backend.locate(cwd).identity
    return parse_state(result, f"stack {name}", name=name, folder=folder, backend=read_from)


def list_stacks(
    *,
    cwd: str | None = None,
    run: Runner = subprocess.run,
    note: Callable[[str], None] | None = None,
    all_projects: bool = True,
) -> list[str]:
    """Fully qualified names of the stacks of the logged-in backend (``all_projects``), or of the project in
    ``cwd`` (``pulumi stack ls [--all] --json --fully-qualify-stack-names``)."""
    where = os.path.abspath(cwd or os.curdir)
    args = ["stack", "ls", *(["--all"] if all_projects else []), "--json", "--fully-qualify-stack-names"]
    what = "the stacks of the backend, from" if all_projects else "the stacks of the project in"
    text = _pulumi(args, doing="listing", what=what, ident=where, cwd=cwd, run=run)
    try:
        listed = json.loads(text)
        names = [str(s["name"]) for s in listed]
    except (ValueError, TypeError, KeyError):
        raise OrphanError(
            "listing",
            what,
            where,
            "`pulumi stack ls --json` did not answer a list of stacks",
            "Check that the Pulumi CLI on PATH is a recent Pulumi v3",
        ) from None
    for stack in listed:
        if isinstance(stack, dict) and stack.get("updateInProgress") and note is not None:
            note(
                f"note: stack {stack['name']} has an update in progress: what it is creating right now is in "
                "its state only as a pending create (see below), so --stop leaves objects of that kind running."
            )
    return names


def stack_config(name: str, *, cwd: str | None = None, run: Runner = subprocess.run) -> dict[str, str]:
    """``together:apiKey``, ``together:baseUrl`` and ``together:journalUrl`` of stack ``name`` of the project in
    ``cwd`` (and their ``together-rl:`` keys), those it sets
    (``pulumi config --json --show-secrets``). Its output holds every secret of the stack: nothing of it is
    ever shown, not even in an error."""
    doing = "reading the config of"
    text = _pulumi(
        ["config", "--json", "--show-secrets", "--stack", name],
        doing=doing,
        what="stack",
        ident=name,
        cwd=cwd,
        run=run,
        secret_output=True,
    )
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise OrphanError(
            doing,
            "stack",
            name,
            "`pulumi config --json` did not answer a JSON object",
            "Check that the Pulumi CLI on PATH is a recent Pulumi v3",
        )
    found: dict[str, str] = {}
    for key in (*ours.config_keys("apiKey"), *ours.config_keys("baseUrl"), *ours.config_keys("journalUrl")):
        item = data.get(key)
        if not isinstance(item, dict):
            continue
        value = item.get("value")
        if isinstance(value, str) and value.strip():
            found[key] = value.strip()
        elif item.get("secret"):
            raise OrphanError(
                doing,
                "stack",
                name,
                f"`pulumi config --show-secrets` did not show the secret {key}",
                "Check the secrets provider's access (the passphrase, or the cloud key)",
            )
    return found


def _pulumi(
    args: list[str],
    *,
    doing: str,
    what: str,
    ident: str,
    cwd: str | None,
    run: Runner,
    secret_output: bool = False,
) -> str:
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
        # A command whose output holds secrets is quoted from its stderr only.
        text = result.stderr if secret_output else (result.stderr or result.stdout)
        lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
        detail = lines[-1] if lines else f"exit status {result.returncode}"
        raise OrphanError(
            doing,
            what,
            ident,
            f"`pulumi {' '.join(args)}` failed: {detail.rstrip('.')}",
            "Check the stack name (`pulumi stack ls`), the project folder (--cwd) and the login (`pulumi whoami`)",
        )
    return result.stdout
