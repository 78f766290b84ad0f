"""Upgrades never replace a billed GPU: a stack made by an earlier release, with that release's code, is taken
over by this checkout's code through the real Pulumi CLI without a change.

Every state names its provider by reference (``__provider``: module and class, pickled with dill), and a release
that moves a class, renames an input or output, changes a default or a type token breaks an existing stack's next
``up``, or replaces what it bills. For each release in :data:`RELEASES` (built once per run from this repository's
history by harness/upgrade.py: the release's tree and its own venv), the release's ``examples/sweep`` runs the
first ``pulumi up``; this checkout's ``examples/sweep`` then runs every later command on the same stack (same file
backend, ``PULUMI_HOME``, create journal, secrets provider, stack config and emulator):

* each ``__provider`` of the release's state unpickles with this checkout's code to its provider classes;
* ``pulumi preview --expect-no-changes`` passes and sends no write;
* ``pulumi refresh --expect-no-changes`` passes and keeps every id and input;
* ``pulumi up`` changes nothing: no request that changes anything (no create, no stop), the same outputs;
* a rename (``namePrefix``: the sessions' display_name) is an in-place update, one PATCH a session, and its
  preview and up ask for no price and no list of models (what check adds stays in the state);
* ``pulumi destroy`` leaves nothing running.

The plugin face's stacks get the same checks (but the pickle: a plugin state names no class) for each release in
:data:`PLUGIN_RELEASES`, with the release's ``tests/e2e/projects/sweep-yaml`` and its own plugin folder and venv.

A new release tag is one more line in :data:`RELEASES`; test_every_release_tag_is_listed fails until it is there.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
from typing import Any

import dill
import pytest
from harness.cli import ESTIMATE, ROOT, CLIStack, active, writes
from harness.faces import DYNAMIC, PLUGIN
from harness.upgrade import Release, build, release_tags, resolve

from pulumi_together_rl.resources.model_resource import _ModelResourceProvider
from pulumi_together_rl.resources.training_session import _TrainingSessionProvider

pytestmark = pytest.mark.release  # the release tier (make test-release)

# The releases whose stacks this checkout must take over unchanged: a commit or a tag each, oldest first.
RELEASES = (
    "e11510f93297acf03cf8cdaae7729752a546c2b8",  # 0.1.0: before the journal, owner, estimates, model_resource_spec
    "85e163d051446f0bc6add8afb90decc724e2819e",  # 0.2.0: the journal and estimates, no owner input yet
    "8c4c08ed3eb9e6b161f5bb48e206e4b6888b4bf6",  # 0.3.0: the plugin face, checkpoint outputs; no keep_ready_until
)
PLUGIN_RELEASES = ("8c4c08ed3eb9e6b161f5bb48e206e4b6888b4bf6",)
"""The releases whose plugin-face stacks (Pulumi YAML) this checkout must take over unchanged, oldest first."""

SWEEP = ROOT / "examples" / "sweep"
CONFIG = {"sessions": 2, "loraRanks": [8, 16]}
SESSIONS = "/v1/rl/training-sessions"
PROVIDERS = {
    "pulumi-python:dynamic/together:ModelResource": _ModelResourceProvider,
    "pulumi-python:dynamic/together:TrainingSession": _TrainingSessionProvider,
}
SECRET_SIG = "4dabf18193072939515e22adb298388d"
# The API moves a model resource's idle expiry at every session create (the emulator too: its module docstring),
# so the refresh of any stack, whichever release made it, reads a later one than its up recorded.
MOVED_BY_THE_API = {"expires_at", "expiresAt"}


def label(revision: str) -> str:
    return revision[:7] if re.fullmatch(r"[0-9a-f]{40}", revision) else revision


@pytest.fixture(scope="session")
def release_build(tmp_path_factory):
    """The release of a revision, built once per run under the session's temporary folder."""
    built: dict[str, Release] = {}

    def get(revision: str) -> Release:
        if revision not in built:
            built[revision] = build(revision, tmp_path_factory.mktemp(f"release-{label(revision)}"))
        return built[revision]

    return get


def plain(value: Any) -> Any:
    """A value of ``stack export --show-secrets``: a secret's plaintext (JSON text) decoded."""
    if isinstance(value, dict) and SECRET_SIG in value:
        return json.loads(value["plaintext"])
    return value


def state(stack: CLIStack) -> dict[str, dict[str, Any]]:
    """{name: {type, id, inputs, outputs}} of the stack's Together resources, secrets in plaintext."""
    deployment = json.loads(stack.run("stack", "export", "--show-secrets").stdout)["deployment"]
    return {
        entry["urn"].rsplit("::", 1)[1]: {
            "type": entry["type"],
            "id": entry["id"],
            "inputs": {k: plain(v) for k, v in entry.get("inputs", {}).items()},
            "outputs": {k: plain(v) for k, v in entry.get("outputs", {}).items()},
        }
        for entry in deployment.get("resources", [])
        if entry.get("custom") and entry["type"].startswith((DYNAMIC.type_prefix, PLUGIN.type_prefix))
    }


def assert_providers_unpickle_to_ours(resources: dict[str, dict[str, Any]]) -> None:
    for name, entry in resources.items():
        assert entry["type"] in PROVIDERS, f"{name}: type token {entry['type']} is not one of ours"
        blob = entry["inputs"]["__provider"]
        assert entry["outputs"]["__provider"] == blob, name
        try:
            provider = dill.loads(base64.b64decode(blob))
        except Exception as exc:  # a moved or renamed class, module or attribute: every later command fails
            raise AssertionError(
                f"{name}: the release's __provider does not unpickle with this checkout's code "
                f"({type(exc).__name__}: {exc}); its class must stay where the release pickled it"
            ) from exc
        assert type(provider) is PROVIDERS[entry["type"]], (name, type(provider))


def changes(preview_json: str) -> dict[str, dict[str, Any]]:
    """The steps of ``pulumi preview --json`` that change something: {name: step}."""
    steps = json.loads(preview_json)["steps"]
    return {s["urn"].rsplit("::", 1)[1]: s for s in steps if s["op"] not in ("same", "refresh", "read")}


def changed_inputs(step: dict[str, Any]) -> set[str]:
    """The inputs a step of ``preview --json`` changes (the dynamic provider names none: the engine's diff)."""
    olds, news = (step.get(side, {}).get("inputs", {}) for side in ("oldState", "newState"))
    return {key for key in set(olds) | set(news) if olds.get(key) != news.get(key)}


def assert_taken_over_unchanged(head: CLIStack, before: dict[str, dict[str, Any]], emulator: Any) -> None:
    """This checkout takes over the release's stack (``before``: its state): a preview with nothing to change, a
    refresh that changes no id, input or output (but what the API moves itself), an up that creates, stops and
    patches nothing; none of them sends a write."""
    head.preview("--expect-no-changes")
    assert writes(emulator) == []

    head.run("refresh", "--yes", "--expect-no-changes")
    assert writes(emulator) == []
    refreshed = state(head)
    assert sorted(refreshed) == sorted(before)
    for name, entry in refreshed.items():
        was = before[name]
        assert (entry["type"], entry["id"], entry["inputs"]) == (was["type"], was["id"], was["inputs"]), name
        moved = {
            k
            for k in set(entry["outputs"]) | set(was["outputs"])
            if entry["outputs"].get(k) != was["outputs"].get(k)
        }
        assert moved <= MOVED_BY_THE_API, (
            name,
            {k: (was["outputs"].get(k), entry["outputs"].get(k)) for k in moved},
        )

    up = head.up()
    assert writes(emulator) == [], up
    assert {name: entry["id"] for name, entry in state(head).items()} == {
        n: e["id"] for n, e in before.items()
    }


def clean_up(old: CLIStack, head: CLIStack, emulator: Any) -> None:
    """Whatever the test did: destroy (with this checkout's code, then the release's if something is left
    running), remove the stack and both copies of its config file."""
    try:
        if old.initialized:
            for stack in (head, old):
                if not any(active(emulator).values()):
                    break
                stack.run("destroy", "--yes", "--skip-preview", check=False, timeout=300)
            old.run("stack", "rm", "--yes", "--force", check=False, timeout=120)
    finally:
        for stack in (old, head):
            (stack.project / f"Pulumi.{stack.name}.yaml").unlink(missing_ok=True)


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("revision", RELEASES, ids=label)
def test_a_stack_made_by_an_earlier_release_is_taken_over_unchanged(
    revision, release_build, emulator, pulumi_bin, tmp_path
):
    release = release_build(revision)
    print(f"release {label(revision)} ({release.commit}) built in {release.seconds:.1f} s at {release.root}")
    # Two project folders, one stack: the same tmp_path gives both the same backend, PULUMI_HOME and journal.
    old = CLIStack(release.example("sweep"), tmp_path, emulator, bin_dir=pulumi_bin)
    head = CLIStack(SWEEP, tmp_path, emulator, bin_dir=pulumi_bin, name=old.name)
    try:
        old.init(CONFIG)
        shutil.copyfile(old.project / f"Pulumi.{old.name}.yaml", head.project / f"Pulumi.{head.name}.yaml")
        head.initialized = True

        # The release makes the stack.
        emulator.control.clear_requests()
        old.up()
        made = old.outputs()
        assert sorted(writes(emulator)) == [
            ("POST", "/v1/rl/model-resources"),
            ("POST", SESSIONS),
            ("POST", SESSIONS),
        ]
        now = active(emulator)
        assert [o["id"] for o in now["model_resources"]] == [made["model_resource_id"]]
        assert sorted(o["id"] for o in now["training_sessions"]) == sorted(made["session_ids"])
        before = state(old)
        assert sorted(before) == ["sweep-gpu", "trial-0", "trial-1"]
        assert_providers_unpickle_to_ours(before)

        assert_taken_over_unchanged(head, before, emulator)
        assert head.outputs() == made

        # A rename is an in-place update of the sessions, one PATCH each, never a replacement. From the take-over's
        # up on, what check adds to the inputs (the price, a session's resource spec, the declaration) stays in the
        # state: the rename's preview and up ask the API for no price and no list of models.
        def writes_asking_no_price() -> list[tuple[str, str]]:
            asked = [(r["method"], r["path"]) for r in emulator.control.requests(clear=True)]
            assert ESTIMATE not in asked and ("GET", "/v1/rl/supported-models") not in asked, sorted(asked)
            return [a for a in asked if a[0] != "GET"]

        emulator.control.requests(clear=True)
        head.set("namePrefix", "renamed")
        planned = changes(head.preview("--json").stdout)
        assert sorted(planned) == ["trial-0", "trial-1"], planned
        for name, step in planned.items():
            assert step["op"] == "update", (name, step["op"], step.get("replaceReasons"))
            assert {"display_name", "metadata"} <= changed_inputs(step), (name, changed_inputs(step))
        assert writes_asking_no_price() == []
        head.up()
        assert sorted(writes_asking_no_price()) == sorted(
            ("PATCH", f"{SESSIONS}/{ident}") for ident in made["session_ids"]
        )
        renamed = head.outputs()
        assert renamed["model_resource_id"] == made["model_resource_id"]
        assert renamed["session_ids"] == made["session_ids"]
        assert sorted(s["display_name"] for s in active(emulator)["training_sessions"]) == [
            "renamed-0",
            "renamed-1",
        ]
        head.preview("--expect-no-changes")

        head.run("destroy", "--yes", "--skip-preview")
        assert active(emulator) == {"model_resources": [], "training_sessions": []}
    finally:
        clean_up(old, head, emulator)


@pytest.mark.parametrize("revision", PLUGIN_RELEASES, ids=label)
def test_a_plugin_stack_made_by_an_earlier_release_is_taken_over_unchanged(
    revision, release_build, emulator, pulumi_bin, yaml_bin, tmp_path
):
    release = release_build(revision)
    program = PLUGIN.project("sweep")
    old = CLIStack(
        release.root / program.relative_to(ROOT), tmp_path, emulator, bin_dir=pulumi_bin, face=PLUGIN
    )
    head = CLIStack(program, tmp_path, emulator, bin_dir=pulumi_bin, face=PLUGIN, name=old.name)
    for stack in (old, head):
        stack.env["PATH"] = os.pathsep.join([yaml_bin, stack.env["PATH"]])
    try:
        old.init({"sessions": 1, "loraRanks": [8]})
        shutil.copyfile(old.project / f"Pulumi.{old.name}.yaml", head.project / f"Pulumi.{head.name}.yaml")
        head.initialized = True

        # The release's plugin (its own folder, run by its own venv) makes the stack.
        emulator.control.clear_requests()
        old.up()
        made = old.outputs()
        assert sorted(writes(emulator)) == [("POST", "/v1/rl/model-resources"), ("POST", SESSIONS)]
        before = state(old)
        assert sorted(before) == ["sweep-gpu", "trial-0"]
        assert {e["type"] for e in before.values()} == {
            PLUGIN.token("ModelResource"),
            PLUGIN.token("TrainingSession"),
        }

        assert_taken_over_unchanged(head, before, emulator)
        assert head.outputs() == made

        # A rename is one PATCH, never a replacement.
        head.set("namePrefix", "renamed")
        planned = changes(head.preview("--json").stdout)
        assert {name: step["op"] for name, step in planned.items()} == {"trial-0": "update"}, planned
        head.up()
        (session,) = active(emulator)["training_sessions"]
        assert writes(emulator) == [("PATCH", f"{SESSIONS}/{session['id']}")]
        assert session["display_name"] == "renamed-0"

        head.run("destroy", "--yes", "--skip-preview")
        assert active(emulator) == {"model_resources": [], "training_sessions": []}
    finally:
        clean_up(old, head, emulator)


def test_every_release_tag_is_listed():
    """From its tag on, every release is upgrade-tested: a release tag missing from RELEASES fails here. A tag of
    the commit under test is the release being made (the release workflow runs at its tag), not an earlier one."""
    listed = {resolve(revision) for revision in RELEASES}
    head = resolve("HEAD")
    missing = sorted(tag for tag, commit in release_tags().items() if commit not in listed and commit != head)
    assert not missing, f"add the release tag(s) {missing} to RELEASES in {__file__}"
