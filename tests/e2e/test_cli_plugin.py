"""The plugin face through the real CLI and the official Pulumi YAML language host: examples/yaml end to end,
`pulumi import` of both kinds, and the move of a dynamic-resource stack to the plugin without a new GPU."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from harness.cli import ROOT, active, writes
from harness.faces import DYNAMIC, PLUGIN

from pulumi_together_rl.client import TogetherRL

YAML_EXAMPLE = ROOT / "examples" / "yaml"
PLUGIN_DIR = ROOT / "provider" / "pulumi_together_rl" / "plugin"
MR, TS = PLUGIN.token("ModelResource"), PLUGIN.token("TrainingSession")


def _posts(found: list[tuple[str, str]], suffix: str) -> int:
    return sum(1 for method, path in found if method == "POST" and path.endswith(suffix))


def test_the_yaml_example_previews_its_price_lives_patches_replaces_refreshes_and_ends(cli_stack, emulator):
    stack = cli_stack("yaml", face=PLUGIN).init()

    preview = stack.preview()
    # The price shows on the model resource's own row, and is an output known at preview.
    assert (
        "together-rl:index:ModelResource gpu" in preview.stdout and "estimated 11.00 USD/h" in preview.stdout
    )
    assert "pricePerHour         : 11" in preview.stdout
    assert writes(emulator) == []  # a preview changes nothing

    up = stack.up("--json")  # the engine's events, one JSON object a line
    assert "Traceback" not in up.output
    outputs = stack.outputs()
    assert outputs["pricePerHour"] == 11 and len(outputs["sessionIds"]) == 3
    now = active(emulator)
    assert [o["id"] for o in now["model_resources"]] == [outputs["modelResourceId"]]
    assert sorted(o["id"] for o in now["training_sessions"]) == sorted(outputs["sessionIds"])
    # Each wait's progress went to the engine under that resource's own URN, not the stack's.
    events = [json.loads(line) for line in up.stdout.splitlines() if line.startswith("{")]
    progress = [
        e["diagnosticEvent"]
        for e in events
        if "diagnosticEvent" in e and "waiting for READY" in e["diagnosticEvent"]["message"]
    ]
    assert progress and all(d["urn"].endswith(f"{MR}::gpu") for d in progress)
    writes(emulator)
    stack.preview("--expect-no-changes")

    stack.set("namePrefix", "grpo")  # a rename: three PATCHes, nothing replaced
    stack.up()
    found = writes(emulator)
    assert sorted(found) == sorted(("PATCH", f"/v1/rl/training-sessions/{i}") for i in outputs["sessionIds"])
    names = {o["display_name"] for o in active(emulator)["training_sessions"]}
    assert names == {"grpo-0", "grpo-1", "grpo-2"}

    stack.set("ranks", [8, 16, 64])  # a rank change: that session is replaced, the others stay
    stack.up()
    found = writes(emulator)
    replaced = outputs["sessionIds"][2]
    assert ("POST", f"/v1/rl/training-sessions/{replaced}/stop") in found
    assert _posts(found, "/training-sessions") == 1 and _posts(found, "/model-resources") == 0
    stack.preview("--expect-no-changes")

    # Out of band: someone stops trial0. A refresh drops it; the next up makes a new one.
    gone = outputs["sessionIds"][0]
    with TogetherRL(api_key=emulator.api_key, base_url=emulator.base_url) as client:
        client.stop_training_session(gone)
    stack.run("refresh", "--yes", "--skip-preview")
    assert "trial0" not in stack.resources()
    stack.up()
    assert stack.resources()["trial0"]["id"] != gone
    assert len(active(emulator)["training_sessions"]) == 3

    stack.run("destroy", "--yes", "--skip-preview")
    assert active(emulator) == {"model_resources": [], "training_sessions": []}


def _imported_project(tmp: Path, name: str) -> Path:
    """An empty YAML project on the plugin, in ``tmp``."""
    project = tmp / name
    project.mkdir()
    (project / "Pulumi.yaml").write_text(
        yaml.safe_dump(
            {
                "name": name,
                "runtime": "yaml",
                "plugins": {"providers": [{"name": "together-rl", "path": str(PLUGIN_DIR)}]},
                "resources": {},
            }
        )
    )
    return project


def test_pulumi_import_of_both_kinds_prints_code_that_previews_with_no_changes(cli_stack, emulator, tmp_path):
    with TogetherRL(api_key=emulator.api_key, base_url=emulator.base_url) as client:
        from pulumi_together_rl.client.models import ModelResourceCreateRequest, TrainingSessionCreateRequest

        mr = client.create_model_resource(ModelResourceCreateRequest(base_model="Qwen/Qwen3.5-4B"))
        ts = client.create_training_session(
            TrainingSessionCreateRequest(
                model_resources_id=mr.id, display_name="made-elsewhere", lora_config={"rank": 8}
            )
        )
    project = _imported_project(tmp_path, "imports")
    stack = cli_stack(project, face=PLUGIN).init()
    writes(emulator)
    for token, name, ident in ((MR, "gpu", mr.id), (TS, "run", ts.id)):
        result = stack.run("import", token, name, ident, "--yes", "--out", str(tmp_path / f"{name}.yaml"))
        assert "Traceback" not in result.output
    # Paste the printed code into the program (unprotected, so that the fixture's destroy can end them).
    program = yaml.safe_load((project / "Pulumi.yaml").read_text())
    for name in ("gpu", "run"):
        code = yaml.safe_load((tmp_path / f"{name}.yaml").read_text())["resources"]
        for declared in code.values():
            declared.pop("options", None)
        program["resources"].update(code)
    assert program["resources"]["run"]["properties"]["modelResourcesId"] == mr.id
    # The code names the resource by its id; a program names it by reference (the same value, so no change),
    # which gives the engine the order of a destroy: sessions first.
    program["resources"]["run"]["properties"]["modelResourcesId"] = "${gpu.id}"
    (project / "Pulumi.yaml").write_text(yaml.safe_dump(program))
    stack.run("state", "unprotect", "--all", "--yes")
    stack.preview("--expect-no-changes")
    stack.up("--expect-no-changes")
    assert writes(emulator) == []  # reading is all an import does
    stack.run("destroy", "--yes", "--skip-preview")
    assert active(emulator) == {"model_resources": [], "training_sessions": []}


def test_pulumi_import_of_an_id_that_does_not_exist_fails_in_one_sentence_and_records_nothing(
    cli_stack, emulator, tmp_path
):
    stack = cli_stack(_imported_project(tmp_path, "imports"), face=PLUGIN).init()

    for name, ident, shown in (
        ("gpu", "mr-nope", "mr-nope"),
        ("red", "mr\x1b[31mred\x07", "mr\\x1b[31mred\\x07"),
    ):
        result = stack.run("import", MR, name, ident, "--yes", check=False)

        assert result.returncode != 0, str(result)
        sentence = f"reading model resource ({shown}): the API answers 404 (not found). Check the id given to"
        assert sentence in result.output, str(result)
        assert "Traceback" not in result.output and "bug" not in result.output
        assert name not in stack.resources()  # no entry without outputs in the state
        assert "\x1b" not in result.output and "\x07" not in result.output  # escaped, never raw
    assert "\x07" not in stack.export()


def test_a_plain_api_key_is_a_secret_in_the_state_with_one_warning(cli_stack, emulator, tmp_path):
    project = _imported_project(tmp_path, "plainkey")
    program = yaml.safe_load((project / "Pulumi.yaml").read_text())
    program["resources"]["gpu"] = {
        "type": "together-rl:ModelResource",
        "properties": {"baseModel": "Qwen/Qwen3.5-4B"},
    }
    (project / "Pulumi.yaml").write_text(yaml.safe_dump(program))
    stack = cli_stack(project, face=PLUGIN).init()
    stack.run("config", "set", "together-rl:apiKey", emulator.api_key)  # not --secret

    up = stack.up()

    diagnostics = up.stdout.split("Diagnostics:", 1)[1]
    assert diagnostics.count("warning: together-rl:apiKey is not a secret") == 1, up.stdout
    assert "pulumi config set --secret together-rl:apiKey" in diagnostics
    assert emulator.api_key not in up.output
    state = stack.export()
    assert "gpu" in stack.resources() and emulator.api_key not in state
    (default,) = [
        r for r in json.loads(state)["deployment"]["resources"] if r["type"] == "pulumi:providers:together-rl"
    ]
    assert "ciphertext" in default["inputs"]["apiKey"] and "ciphertext" in default["outputs"]["apiKey"]
    stack.destroy()


def test_a_key_set_as_a_secret_gets_no_warning(cli_stack, emulator, tmp_path):
    """`pulumi config set --secret together-rl:apiKey` (what the stack's init does here): preview and up say nothing
    about the key, although the engine hands the provider's CheckConfig every value with its secrecy stripped."""
    project = _imported_project(tmp_path, "secretkey")
    program = yaml.safe_load((project / "Pulumi.yaml").read_text())
    program["resources"]["gpu"] = {
        "type": "together-rl:ModelResource",
        "properties": {"baseModel": "Qwen/Qwen3.5-4B"},
    }
    (project / "Pulumi.yaml").write_text(yaml.safe_dump(program))
    stack = cli_stack(project, face=PLUGIN).init()
    assert "secure:" in (project / f"Pulumi.{stack.name}.yaml").read_text()

    preview, up = stack.preview(), stack.up()

    for run in (preview, up):
        assert "is not a secret" not in run.output, run.output
    stack.destroy()


def test_a_dynamic_stack_moves_to_the_plugin_with_the_same_ids_and_no_call(cli_stack, emulator, tmp_path):
    """docs/plugin.md's migration: import each object into the plugin program, paste the code, drop the dynamic
    entries from the state. Same stack, same ids; nothing is created or stopped."""
    old = cli_stack("sweep", face=DYNAMIC).init({"sessions": 1, "loraRanks": [8]})
    old.up()
    before = {name: entry["id"] for name, entry in old.resources().items()}
    writes(emulator)

    # The stack's new program: a YAML project of the same name, its config file beside it.
    project = _imported_project(tmp_path, "together-rl-sweep")
    new = cli_stack(project, face=PLUGIN, like=old)
    shutil.copy(old.project / f"Pulumi.{old.name}.yaml", project / f"Pulumi.{old.name}.yaml")
    new.run("config", "set", "together-rl:baseUrl", emulator.base_url)
    new.run("config", "set", "--secret", "together-rl:apiKey", emulator.api_key)
    new.initialized = True
    # 1. The backup (and the ids). 2. The dynamic entries out of the state (sessions first), with the dynamic
    # provider, which a YAML project cannot start. 3. Each object imported into the new program, its code pasted.
    backup = new.export()
    assert before["sweep-gpu"] in backup
    for name, kind in (("trial-0", "TrainingSession"), ("sweep-gpu", "ModelResource")):
        new.run(
            "state",
            "delete",
            f"urn:pulumi:{old.name}::together-rl-sweep::{DYNAMIC.token(kind)}::{name}",
            "--yes",
        )
    new.run(
        "state",
        "delete",
        f"urn:pulumi:{old.name}::together-rl-sweep::pulumi:providers:pulumi-python::default",
        "--yes",
    )
    program = yaml.safe_load((project / "Pulumi.yaml").read_text())
    for token, name in ((MR, "sweep-gpu"), (TS, "trial-0")):
        new.run("import", token, name, before[name], "--yes", "--out", str(tmp_path / f"{name}.yaml"))
        code = yaml.safe_load((tmp_path / f"{name}.yaml").read_text())["resources"]
        for declared in code.values():
            declared.pop("options", None)
        program["resources"].update(code)
    program["resources"]["trial-0"]["properties"]["modelResourcesId"] = "${sweep-gpu.id}"
    (project / "Pulumi.yaml").write_text(yaml.safe_dump(program))
    new.run("state", "unprotect", "--all", "--yes")
    new.preview("--expect-no-changes")
    new.up("--expect-no-changes")

    assert {name: entry["id"] for name, entry in new.resources().items()} == before
    assert writes(emulator) == []  # not one create, stop or PATCH
    assert [o["id"] for o in active(emulator)["model_resources"]] == [before["sweep-gpu"]]
    new.run("destroy", "--yes", "--skip-preview")
    assert active(emulator) == {"model_resources": [], "training_sessions": []}
    (project / f"Pulumi.{old.name}.yaml").unlink()


def test_pulumi_package_get_schema_lists_both_resources_and_their_functions(cli_stack, tmp_path):
    stack = cli_stack(tmp_path, face=PLUGIN)
    printed = json.loads(stack.run("package", "get-schema", str(PLUGIN_DIR), stack=False).stdout)
    assert sorted(printed["resources"]) == [MR, TS]
    assert sorted(printed["functions"]) == [
        "together-rl:index:estimateCost",
        "together-rl:index:getCheckpoints",
        "together-rl:index:getSupportedModels",
        "together-rl:index:latestCheckpoint",
    ]
    assert all(p["description"] for r in printed["resources"].values() for p in r["inputProperties"].values())
    # The engine had the language host install the folder's dependencies first: in a uv project, into the
    # project's venv, never a venv inside the package folder (which a build would pack).
    assert not (PLUGIN_DIR / "venv").exists()


def _example_copy(tmp: Path, name: str) -> Path:
    """examples/<name> copied into ``tmp`` laid out as the repository is (its .venv and provider/ linked): the
    example's relative paths resolve as they do in a clone, and its stack's config file lands in the copy, never
    in the checkout, even when the run is killed before its clean-up."""
    project = tmp / "workspace" / "examples" / name
    shutil.copytree(
        ROOT / "examples" / name, project, ignore=shutil.ignore_patterns("__pycache__", "Pulumi.*.yaml")
    )
    for linked in (".venv", "provider"):
        (tmp / "workspace" / linked).symlink_to(ROOT / linked)
    return project


def test_the_python_sdk_example_runs_both_faces_on_one_gpu(cli_stack, emulator, tmp_path):
    project = _example_copy(tmp_path, "python-sdk")
    stack = cli_stack(project, face=PLUGIN).init()
    assert (project / f"Pulumi.{stack.name}.yaml").exists()
    assert not list((ROOT / "examples" / "python-sdk").glob("Pulumi.e2e-*.yaml"))
    stack.run(
        "config", "set", f"{DYNAMIC.config}:baseUrl", emulator.base_url
    )  # the dynamic session's settings
    stack.run("config", "set", "--secret", f"{DYNAMIC.config}:apiKey", emulator.api_key)

    up = stack.up()
    assert "is not a secret" not in up.output  # both keys set with --secret: no face warns
    outputs = stack.outputs()
    assert outputs["price_per_hour"] == outputs["estimated_price_per_hour"] == 11
    now = active(emulator)
    assert [o["id"] for o in now["model_resources"]] == [outputs["model_resource_id"]]
    assert sorted(o["id"] for o in now["training_sessions"]) == sorted(outputs["session_ids"])
    assert {o["model_resources_id"] for o in now["training_sessions"]} == {outputs["model_resource_id"]}
    writes(emulator)
    stack.preview("--expect-no-changes")
    stack.run("destroy", "--yes", "--skip-preview")
    assert active(emulator) == {"model_resources": [], "training_sessions": []}


def test_get_reads_an_object_made_elsewhere_and_never_stops_it(cli_stack, emulator, tmp_path):
    with TogetherRL(api_key=emulator.api_key, base_url=emulator.base_url) as client:
        from pulumi_together_rl.client.models import ModelResourceCreateRequest

        shared = client.create_model_resource(ModelResourceCreateRequest(base_model="Qwen/Qwen3.5-4B"))
    project = _imported_project(tmp_path, "reads")
    program = yaml.safe_load((project / "Pulumi.yaml").read_text())
    program["resources"]["shared"] = {"type": "together-rl:ModelResource", "get": {"id": shared.id}}
    program["outputs"] = {"baseModel": "${shared.baseModel}", "status": "${shared.status}"}
    (project / "Pulumi.yaml").write_text(yaml.safe_dump(program))
    stack = cli_stack(project, face=PLUGIN).init()
    writes(emulator)

    stack.up()
    assert stack.outputs() == {"baseModel": "Qwen/Qwen3.5-4B", "status": "READY"}
    stack.run("destroy", "--yes", "--skip-preview")
    assert writes(emulator) == []  # read, never stopped
    assert [o["id"] for o in active(emulator)["model_resources"]] == [shared.id]


@pytest.mark.release  # installs the release's wheel
def test_the_plugin_runs_from_a_pip_installed_wheel(cli_stack, emulator, dist, tmp_path):
    """A user's venv (pip, no uv project): the engine runs the folder's executable with that venv's Python. The
    wheel from its file, its dependencies from PyPI."""
    import os
    import subprocess
    import sys

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_", "VIRTUAL_ENV"))}
    subprocess.run(
        ["uv", "pip", "install", "--python", str(venv / "bin" / "python"), str(dist.wheel)],
        check=True,
        capture_output=True,
        env=env,
    )
    folder = subprocess.run([str(venv / "bin" / "python"), "-m", "pulumi_together_rl", "plugin", "path"],
                            check=True, capture_output=True, text=True).stdout.strip()  # fmt: skip
    assert folder.startswith(str(venv))
    project = _imported_project(tmp_path, "installed")
    program = yaml.safe_load((project / "Pulumi.yaml").read_text())
    program["plugins"]["providers"][0]["path"] = folder
    program["resources"]["gpu"] = {
        "type": "together-rl:ModelResource",
        "properties": {"baseModel": "Qwen/Qwen3.5-4B"},
    }
    program["outputs"] = {"id": "${gpu.id}"}
    (project / "Pulumi.yaml").write_text(yaml.safe_dump(program))
    stack = cli_stack(project, face=PLUGIN).init()

    stack.up()
    assert [o["id"] for o in active(emulator)["model_resources"]] == [stack.outputs()["id"]]
    stack.run("destroy", "--yes", "--skip-preview")
    assert active(emulator)["model_resources"] == []


def test_custom_timeouts_from_the_program_reach_the_wait_through_the_cli(cli_stack, emulator, tmp_path):
    emulator.control.configure(timings={"resource_pending": 60.0})
    project = _imported_project(tmp_path, "timeouts")
    program = yaml.safe_load((project / "Pulumi.yaml").read_text())
    program["resources"]["gpu"] = {
        "type": "together-rl:ModelResource",
        "properties": {"baseModel": "Qwen/Qwen3.5-4B"},
        "options": {"customTimeouts": {"create": "3s", "delete": "3s"}},
    }
    (project / "Pulumi.yaml").write_text(yaml.safe_dump(program))
    stack = cli_stack(project, face=PLUGIN).init()

    up = stack.up(check=False)

    assert up.returncode != 0, up
    assert "timed out after 3 s" in up.output and "raise customTimeouts.create" in up.output, up
    assert "Traceback" not in up.output
    assert active(emulator)["model_resources"] == []  # the timed-out create stopped what it made

    # customTimeouts.delete reaches the delete's wait, and an outage's error names it.
    emulator.control.configure(timings={"resource_pending": 0.0}, stops_ignored=1000)  # accepted, never taken
    stack.up()
    slow = stack.run("destroy", "--yes", "--skip-preview", check=False)
    assert slow.returncode != 0 and "timed out after 3 s" in slow.output, slow
    assert "raise customTimeouts.delete and run" in slow.output, slow
    emulator.control.configure(stops_ignored=0)
    stack.run("destroy", "--yes", "--skip-preview")
    stack.up()
    emulator.control.add_fault(method="POST", path="/stop$", status=503, times=None)
    down = stack.run("destroy", "--yes", "--skip-preview", check=False)
    assert down.returncode != 0 and "through all of customTimeouts.delete (3 s)" in down.output, down
    assert "or raise customTimeouts.delete" in down.output, down
    emulator.control.clear_faults()
    stack.destroy()
