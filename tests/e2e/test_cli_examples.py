"""Every example through the real Pulumi CLI, against the emulator, as a user runs it.

Each stack has a file backend in the test's temporary folder and KMS-encrypted secrets (harness/cli.py). Per
example: preview shows the creates and sends no write; up; `preview --expect-no-changes`; a rename is an
in-place update (one PATCH); a LoRA rank change is a replacement, deleted before it is created; an out-of-band
stop is dropped by refresh and recreated by up; destroy leaves nothing active in the emulator.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import yaml
from harness.cli import ESTIMATE, ROOT, active, writes
from harness.faces import DYNAMIC, PLUGIN

from pulumi_together_rl.client import TogetherRL
from pulumi_together_rl.client.models import ModelResourceCreateRequest, TrainingSessionCreateRequest

EXAMPLES = ROOT / "examples"
MODEL = "Qwen/Qwen3.5-4B"
RESOURCES = "/v1/rl/model-resources"
SESSIONS = "/v1/rl/training-sessions"


HEADER = re.compile(r"^\s*(?:\+-|[~+-])?\s*pulumi[\w:/-]+: \(([\w-]+)\)$")


def diff_blocks(text: str) -> dict[str, tuple[str, set[str]]]:
    """`pulumi preview --diff` output as {resource name: (step, top-level properties marked changed)}.

    Refresh blocks (``options.refresh: always``) and unchanged ones are left out: only the plan counts.
    """
    blocks: dict[str, tuple[str, set[str]]] = {}
    lines = text.splitlines()
    for index, line in enumerate(lines):
        header = HEADER.match(line)
        if not header or header.group(1) in ("refresh", "same"):
            continue
        name, props, depth = None, set(), None
        for body in lines[index + 1 :]:
            if HEADER.match(body) or body.startswith(("Resources:", "    --outputs:--")):
                break
            urn = re.match(r"^\s+\[urn=.*::([^:\]]+)\]$", body)
            if urn:
                name = urn.group(1)
                continue
            prop = re.match(r"^(\s+)([~+-]?)\s*(\w+)\s*:", body)
            if prop and not body.strip().startswith("["):
                indent = len(prop.group(1)) + (0 if prop.group(2) else 2)
                depth = indent if depth is None else min(depth, indent)
                if indent == depth and prop.group(2):
                    props.add(prop.group(3))
        if name:
            blocks[name] = (header.group(1), props)
    return blocks


def ids(objects: list[dict]) -> list[str]:
    return sorted(o["id"] for o in objects)


def assert_nothing_active(emulator) -> None:
    assert active(emulator) == {"model_resources": [], "training_sessions": []}


def stop_out_of_band(emulator, kind: str, ident: str) -> None:
    with TogetherRL(api_key=emulator.api_key, base_url=emulator.base_url) as client:
        if kind == "session":
            client.stop_training_session(ident)
        else:
            client.stop_model_resource(ident, force=True)


def test_quickstart_with_a_bare_pulumi_up_at_the_root(cli_stack, emulator):
    stack = cli_stack(ROOT).init()
    emulator.control.clear_requests()

    preview = stack.preview()
    assert re.search(r"\+\s+pulumi-python:dynamic/together:ModelResource\s+qwen\s+create", preview.stdout)
    assert re.search(r"\+\s+pulumi-python:dynamic/together:TrainingSession\s+gsm8k\s+create", preview.stdout)
    assert "3 to create" in preview.stdout
    assert writes(emulator) == []

    # A bare `pulumi up` (with its preview), as the README says.
    stack.run("up", "--yes")
    outputs = stack.outputs()
    assert outputs["model_resource_status"] == "READY"
    assert outputs["training_session_status"] == "RUNNING"
    assert outputs["base_model"] == MODEL
    now = active(emulator)
    assert ids(now["model_resources"]) == [outputs["model_resource_id"]]
    assert ids(now["training_sessions"]) == [outputs["training_session_id"]]
    writes(emulator)

    stack.preview("--expect-no-changes")
    assert writes(emulator) == []

    stack.run("destroy", "--yes")
    assert_nothing_active(emulator)


def test_sweep_rename_is_one_patch_and_a_rank_change_deletes_before_it_creates(cli_stack, emulator):
    stack = cli_stack(EXAMPLES / "sweep").init({"sessions": 2, "loraRanks": [8, 16]})
    emulator.control.clear_requests()
    preview = stack.preview()
    assert preview.stdout.count("together:TrainingSession") >= 2 and "4 to create" in preview.stdout
    assert writes(emulator) == []

    stack.up()
    outputs = stack.outputs()
    assert len(outputs["session_ids"]) == 2
    assert sorted(o["lora_config"]["rank"] for o in active(emulator)["training_sessions"]) == [8, 16]
    stack.preview("--expect-no-changes")
    writes(emulator)

    # A rename: an in-place update whose diff names only display_name and metadata, then one PATCH each.
    stack.set("namePrefix", "renamed")
    diff = stack.preview("--diff")
    blocks = diff_blocks(diff.stdout)
    assert blocks["trial-0"] == ("update", {"display_name", "metadata"}), diff
    assert blocks["trial-1"] == ("update", {"display_name", "metadata"}), diff
    assert "sweep-gpu" not in blocks, diff
    assert writes(emulator) == []
    stack.up()
    sent = writes(emulator)
    assert sorted(sent) == sorted(("PATCH", f"{SESSIONS}/{ident}") for ident in outputs["session_ids"])
    assert sorted(s["display_name"] for s in active(emulator)["training_sessions"]) == [
        "renamed-0",
        "renamed-1",
    ]

    # A rank change: a replacement of that session only, and the engine deletes it before it creates the new one.
    stack.set("loraRanks", [8, 32])
    diff = stack.preview("--diff")
    blocks = diff_blocks(diff.stdout)
    assert blocks["trial-1"][0] == "replace" and "lora_config" in blocks["trial-1"][1], diff
    assert "trial-0" not in blocks and "sweep-gpu" not in blocks, diff
    up = stack.up()
    sent = writes(emulator)
    old = outputs["session_ids"][1]
    stop = sent.index(("POST", f"{SESSIONS}/{old}/stop"))
    create = sent.index(("POST", SESSIONS))
    assert stop < create, sent
    assert re.search(r"TrainingSession trial-1 deleted original", up.stdout), up
    after = stack.outputs()
    assert after["session_ids"][0] == outputs["session_ids"][0] and after["session_ids"][1] != old
    assert sorted(o["lora_config"]["rank"] for o in active(emulator)["training_sessions"]) == [8, 32]
    stack.preview("--expect-no-changes")

    stack.run("destroy", "--yes")
    assert_nothing_active(emulator)


def test_sweep_refresh_drops_an_out_of_band_stop_and_up_recreates_it(cli_stack, emulator):
    stack = cli_stack(EXAMPLES / "sweep").init({"sessions": 1, "loraRanks": [8]})
    stack.up()
    outputs = stack.outputs()
    gone = outputs["session_ids"][0]
    stop_out_of_band(emulator, "session", gone)

    refresh = stack.run("refresh", "--yes")
    assert re.search(
        r"-\s+pulumi-python:dynamic/together:TrainingSession\s+trial-0\s+deleted", refresh.stdout
    ), refresh
    assert "trial-0" not in stack.resources()

    emulator.control.clear_requests()
    stack.up()
    assert writes(emulator) == [("POST", SESSIONS)]
    fresh = stack.outputs()["session_ids"][0]
    assert fresh != gone
    assert ids(active(emulator)["training_sessions"]) == [fresh]

    # The model resource too: stopped by hand (with its session), refreshed away, made again.
    stop_out_of_band(emulator, "resource", outputs["model_resource_id"])
    stack.run("refresh", "--yes")
    assert stack.resources() == {}
    stack.up()
    now = active(emulator)
    assert len(now["model_resources"]) == 1 and len(now["training_sessions"]) == 1
    assert now["model_resources"][0]["id"] != outputs["model_resource_id"]

    stack.run("destroy", "--yes")
    assert_nothing_active(emulator)


WORKFLOW = EXAMPLES / "gitops" / ".github" / "workflows" / "pulumi.yml"


def expand(text: str, values: dict[str, str]) -> str:
    """A workflow value with its ``${{ ... }}`` expressions replaced; an expression not in ``values`` fails."""

    def one(match: re.Match) -> str:
        expression = match.group(1).strip()
        assert expression in values, f"the workflow now uses {expression!r}: simulate it here too"
        return values[expression]

    return re.sub(r"\$\{\{(.*?)\}\}", one, text)


GIT = ("git", "-c", "user.name=e2e", "-c", "user.email=e2e@example.invalid", "-c", "commit.gpgsign=false")


def git(workspace: Path, *args: str) -> None:
    subprocess.run([*GIT, *args], cwd=workspace, check=True, capture_output=True)


def test_gitops_dev_stack_up_rename_and_destroy(cli_stack, emulator, tmp_path):
    # The committed Pulumi.dev.yaml belongs to the repository: run a copy of the project, with the venv by path,
    # where the workflow has it in a checkout of the repository (the runner's workspace).
    workflow = yaml.safe_load(WORKFLOW.read_text())
    workspace = tmp_path / "workspace"
    project = workspace / workflow["env"]["PROJECT_DIR"]
    shutil.copytree(EXAMPLES / "gitops", project, ignore=shutil.ignore_patterns(".github"))
    settings = yaml.safe_load((project / "Pulumi.yaml").read_text())
    settings["runtime"]["options"]["virtualenv"] = str(ROOT / ".venv")
    (project / "Pulumi.yaml").write_text(yaml.safe_dump(settings))
    pack = yaml.safe_load((project / "policy" / "PulumiPolicy.yaml").read_text())
    pack["runtime"]["options"]["virtualenv"] = str(ROOT / ".venv")
    (project / "policy" / "PulumiPolicy.yaml").write_text(yaml.safe_dump(pack))
    stack = cli_stack(project)
    stack.name = "dev"
    stack.init()
    emulator.control.clear_requests()

    preview = stack.preview()
    assert "together:ModelResource" in preview.stdout and "team-gpu" in preview.stdout
    assert "gsm8k-r16" in preview.stdout and "3 to create" in preview.stdout
    assert "estimated 11.00 USD/h" in preview.output
    assert writes(emulator, estimates=True) == [ESTIMATE]

    # The workflow's preview: the policy pack with dev's settings reports the total and passes...
    policy = (
        "--policy-pack",
        str(project / "policy"),
        "--policy-pack-config",
        str(project / "policy" / "dev.json"),
    )
    assert "together-rl: stack total 11.00 USD/h over 1 model resource(s)" in stack.preview(*policy).output
    assert writes(emulator) == []

    # A pull request that takes dev over its budget (20 USD/h on main) and raises the budget to 100 USD/h in the
    # same change: a branch of a real git repository, checked out as the preview job checks it out.
    (workspace / ".gitignore").write_text("__pycache__/\n")
    git(workspace, "init", "--quiet", "--initial-branch=main")
    git(workspace, "add", "--all")
    git(workspace, "commit", "--quiet", "--message=main")
    git(workspace, "switch", "--quiet", "--create", "raise-budget")
    stack.set("generatorReplicas", 3)
    settings = json.loads((project / "policy" / "dev.json").read_text())
    settings["together-rl-budget"]["max_price_per_hour"] = 100
    (project / "policy" / "dev.json").write_text(json.dumps(settings))
    git(workspace, "commit", "--quiet", "--all", "--message=3 generator replicas, and the budget to match")
    job = workflow["jobs"]["preview"]
    (base,) = [step for step in job["steps"] if step.get("with", {}).get("ref") == "${{ github.base_ref }}"]
    (action,) = [step for step in job["steps"] if step.get("uses", "").startswith("pulumi/actions@")]
    values = {
        "github.workspace": str(workspace),
        "github.base_ref": "main",  # the pull request's base branch
        "env.PROJECT_DIR": workflow["env"]["PROJECT_DIR"],
        "matrix.stack": "dev",
    }
    # actions/checkout with `ref` and `path`: the base branch's tree in that folder of the workspace.
    base_dir = workspace / expand(base["with"]["path"], values)
    git(
        workspace,
        "worktree",
        "add",
        "--quiet",
        "--detach",
        str(base_dir),
        expand(base["with"]["ref"], values),
    )
    packs, configs = (expand(action["with"][key], values) for key in ("policyPacks", "policyPackConfigs"))
    assert Path(packs) == project / "policy"
    assert Path(configs) == base_dir / project.relative_to(workspace) / "policy" / "dev.json"

    over = stack.preview("--policy-pack", packs, "--policy-pack-config", configs, check=False)
    assert over.returncode != 0 and "together-rl-budget" in over.output, over
    assert (
        "stack total 22.00 USD/h" in over.output
        and "exceeds the budget max_price_per_hour 20.00" in over.output
    )
    # The branch's own settings would have let it through: the base branch's copy is what stopped it.
    own = str(project / "policy" / "dev.json")
    passed = stack.preview("--policy-pack", packs, "--policy-pack-config", own)
    assert "stack total 22.00 USD/h" in passed.output and "exceeds the budget" not in passed.output
    assert writes(emulator) == []
    git(workspace, "switch", "--quiet", "main")  # the pull request is not merged
    assert json.loads(Path(own).read_text())["together-rl-budget"]["max_price_per_hour"] == 20

    stack.up()
    assert len(active(emulator)["model_resources"]) == 1
    assert [s["lora_config"]["rank"] for s in active(emulator)["training_sessions"]] == [16]
    stack.preview("--expect-no-changes")
    writes(emulator)

    config = yaml.safe_load((project / "Pulumi.dev.yaml").read_text())
    experiments = config["config"]["together-rl-gitops:experiments"]
    experiments[0]["wandbProject"] = "grpo-gsm8k-renamed"
    stack.set("experiments", experiments)
    diff = stack.preview("--diff")
    assert diff_blocks(diff.stdout) == {"gsm8k-r16": ("update", {"metadata"})}, diff
    stack.up()
    assert [method for method, _ in writes(emulator)] == ["PATCH"]

    stack.run("destroy", "--yes")
    assert_nothing_active(emulator)


def test_adopt_takes_over_objects_made_outside_and_destroy_stops_only_those(cli_stack, emulator):
    with TogetherRL(api_key=emulator.api_key, base_url=emulator.base_url) as client:
        outside = client.create_model_resource(ModelResourceCreateRequest(base_model=MODEL))
        shared = client.create_model_resource(ModelResourceCreateRequest(base_model=MODEL))
        client.get_model_resource(outside.id)
        session = client.create_training_session(
            TrainingSessionCreateRequest(model_resources_id=outside.id, display_name="made-by-hand")
        )
    stack = cli_stack(EXAMPLES / "adopt").init(
        {
            "resourceId": outside.id,
            "sessionId": session.id,
            "sharedResourceId": shared.id,
            "sessionName": "adopted",
        }
    )
    emulator.control.clear_requests()
    stack.preview()
    assert writes(emulator) == []

    stack.up()
    outputs = stack.outputs()
    assert outputs["adopted_resource_id"] == outside.id and outputs["adopted_session_id"] == session.id
    assert outputs["shared_resource_status"] == "READY"
    assert writes(emulator) == [("PATCH", f"{SESSIONS}/{session.id}")]  # the declared display name
    stack.preview("--expect-no-changes")

    stack.run("destroy", "--yes")
    assert ids(active(emulator)["model_resources"]) == [shared.id]
    assert active(emulator)["training_sessions"] == []
    stop_out_of_band(emulator, "resource", shared.id)


def test_bad_input_fails_preview_naming_the_field_and_creates_nothing(cli_stack, emulator):
    face = PLUGIN  # one face: the other's guard is a check-tier test
    stack = cli_stack("sweep", face=face).init({"sessions": 1, "loraRanks": [0]})
    emulator.control.clear_requests()
    preview = stack.preview(check=False)
    assert preview.returncode != 0, preview
    assert face.field("lora_config.rank") in preview.output, preview
    assert writes(emulator) == []
    assert "Traceback" not in preview.output


def test_a_secret_api_key_appears_only_as_ciphertext(cli_stack, emulator, face):
    key = "tk-distinctive-" + "9f3c1e7a5b2d4680" * 2
    emulator.control.configure(api_key=key)
    try:
        stack = cli_stack("sweep", face=face).init({"sessions": 1, "loraRanks": [8]}, api_key=key)
        config_file = Path(stack.project) / f"Pulumi.{stack.name}.yaml"
        assert key not in config_file.read_text() and "secure:" in config_file.read_text()

        # The up with the engine's most verbose logs on stderr, flowed to the plugins too.
        verbose = stack.up("-v=9", "--logtostderr", "--logflow")
        assert len(verbose.stderr) > 10_000  # the logs really are there
        seen = [stack.preview(), verbose, stack.run("refresh", "--yes"), stack.preview("--diff")]
        seen.append(stack.run("stack", "output", "--json"))
        export = stack.export()
        assert key not in export
        # The only copy in the state is the secrets-provider ciphertext of the config, never plaintext.
        seen.append(stack.run("destroy", "--yes"))
        for result in seen:
            assert key not in result.output, result.args
        logs = list((stack.tmp / "pulumi-home").rglob("*"))
        for path in logs:
            if path.is_file() and path.stat().st_size < 50_000_000:
                assert key.encode() not in path.read_bytes(), path
    finally:
        emulator.control.reset()


def test_a_secret_in_a_field_that_fails_check_is_not_printed(cli_stack, emulator):
    face = DYNAMIC  # one face: the other's guard is a check-tier test
    leaked = "tk-pasted-in-the-wrong-field-" + "5e2b9c0d7f1a3864" * 2
    stack = cli_stack("sweep", face=face).init({"sessions": 1, "loraRanks": [8]})
    stack.run("config", "set", "--secret", "baseModel", leaked)
    emulator.control.clear_requests()

    preview = stack.preview(check=False)

    assert preview.returncode != 0, preview
    assert face.field("base_model") in preview.output and "not a model offered" in preview.output, preview
    assert leaked not in preview.output
    assert writes(emulator) == []


def test_a_secret_display_name_is_never_printed_nor_journalled(cli_stack, emulator, face):
    """A session's display name and W&B run from secret config: a failed create's sentence, the progress lines
    and the create journal show ``[secret]``, never the value."""
    name = "customer-acme-churn-eval-7f3c"
    stack = cli_stack("secret-names", face=face).init()
    stack.run("config", "set", "--secret", "displayName", name)
    emulator.control.add_fault(method="POST", path="/v1/rl/training-sessions$", status=400, times=1)

    failed = stack.up(check=False)
    assert failed.returncode != 0, failed
    assert "creating training session ([secret]): the API rejected the request (HTTP 400" in failed.output, (
        failed
    )
    done = stack.up()
    assert [s["display_name"] for s in active(emulator)["training_sessions"]] == [name]  # it was sent

    journal = stack.tmp / "state" / "journal"
    written = b"".join(p.read_bytes() for p in journal.rglob("*.json"))
    assert written and b"[secret]" in written
    for text in (failed.output, done.output, stack.preview().output, stack.export(), stack.destroy().output):
        assert name not in text and name[:8] not in text
    assert name.encode() not in written


def test_a_failed_create_shows_one_sentence_not_a_traceback(cli_stack, emulator):
    face = PLUGIN  # one face: the other's guard is a check-tier test
    emulator.control.configure(api_key=emulator.api_key)  # the emulator checks the key from here on
    stack = cli_stack("sweep", face=face).init({"sessions": 1, "loraRanks": [8]}, api_key="tk-wrong-key-0000")

    up = stack.up(check=False)

    assert up.returncode != 0, up
    assert "creating model resource (Qwen/Qwen3.5-4B): the API rejected the key (HTTP 401" in up.output, up
    assert f"The key comes from the stack config {face.config}:apiKey" in up.output
    assert "Traceback" not in up.output and "tk-wrong-key-0000" not in up.output
    assert active(emulator)["model_resources"] == []
