"""Fixtures of the end-to-end suite: throwaway stacks driven through the real Pulumi CLI.

`cli_stack(project, **env)` makes a :class:`support.cli.CLIStack` against the test's emulator and destroys and
removes it afterwards, whatever the test did. `runners(...)` makes machines (:mod:`harness.runner`) whose stacks
live in the test's bucket of an S3-compatible server. Every test that uses them needs the CLI: without one it is
skipped with the reason, or fails where TOGETHER_RL_REQUIRE_CLI=1 (CI).

`dist` is the release's artifacts (``make dist``), built once per run for every worker (harness/artifacts.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from harness.artifacts import provide_dist, shared_folder
from harness.cli import CLIStack
from harness.faces import DYNAMIC, FACES, Face
from harness.runner import Runner


@pytest.fixture
def cli_stack(emulator, tmp_path, pulumi_bin, request):
    made: list[CLIStack] = []

    def make(
        project,
        *,
        face: Face = DYNAMIC,
        like: CLIStack | None = None,
        beside: CLIStack | None = None,
        name: str | None = None,
        **env,
    ) -> CLIStack:
        """A stack of ``project`` (a path, or a scenario name that ``face`` maps to its program); ``like``: the
        same stack (name, backend, home, journal) run from another program, as a user's change of program;
        ``beside``: another stack in that stack's backend (a team's, where a ``StackReference`` reads it);
        ``name``: the stack's name (a namesake of another backend's stack)."""
        program = face.project(project) if isinstance(project, str) else project
        where = like.tmp if like is not None else tmp_path / f"stack{len(made)}"
        name = like.name if like is not None else name
        backend = beside.backend if beside is not None else None
        stack = CLIStack(
            program, where, emulator, bin_dir=pulumi_bin, face=face, name=name, backend=backend, **env
        )
        if face.needs_yaml_host:
            stack.env["PATH"] = os.pathsep.join([request.getfixturevalue("yaml_bin"), stack.env["PATH"]])
        made.append(stack)
        return stack

    yield make
    left: list[str] = []
    for stack in made:
        try:
            stack.destroy_and_remove()
        except AssertionError as exc:
            left.append(str(exc))
    assert not left, "; ".join(left)


@pytest.fixture
def runners(emulator, tmp_path, pulumi_bin, bucket, request):
    """``runners(project="sweep", *, face, like, name)``: a :class:`harness.runner.Runner` (a machine of its own)
    logged into this test's bucket; ``like``: another machine of that runner's stack. At the end every runner's
    processes are killed, and a stack still holding active objects is destroyed and fails the test."""
    made: list[Runner] = []

    def make(
        project: str | os.PathLike[str] = "sweep",
        *,
        face: Face = DYNAMIC,
        like: Runner | None = None,
        name: str | None = None,
        **env,
    ) -> Runner:
        face = like.face if like is not None else face
        program = face.project(project) if isinstance(project, str) else project
        runner = Runner(
            Path(program),
            tmp_path / f"runner{len(made)}",
            emulator,
            bucket,
            bin_dir=pulumi_bin,
            face=face,
            like=like,
            name=name,
            **env,
        )
        if face.needs_yaml_host:
            runner.env["PATH"] = os.pathsep.join([request.getfixturevalue("yaml_bin"), runner.env["PATH"]])
        made.append(runner)
        return runner.login()

    yield make
    for runner in made:
        runner.kill()
    left: list[str] = []
    checked: set[str] = set()
    for runner in reversed(made):  # the last machine of each stack speaks for it
        if runner.gone or runner.name in checked:
            continue
        checked.add(runner.name)
        try:
            runner.destroy_and_remove()
        except AssertionError as exc:
            left.append(str(exc))
    assert not left, "; ".join(left)


@pytest.fixture(params=FACES, ids=str)
def face(request) -> Face:
    """Each face in turn: a scenario that takes ``face`` runs against the dynamic resources and the plugin."""
    return request.param


@pytest.fixture(scope="session")
def dist(tmp_path_factory):
    return provide_dist(shared_folder(tmp_path_factory.getbasetemp()))
