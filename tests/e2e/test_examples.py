"""Every example program end to end against the emulator, offline and without the Pulumi CLI.

Each program runs under `pulumi.runtime.set_mocks` with `EngineBackedMocks`: every registration goes to the real
provider, served by the Pulumi SDK's own dynamic-provider server (`python -m pulumi.dynamic`) and driven by the
stand-in engine (Check -> Create; Check -> Diff -> Update or replace on later runs; Read on refresh; Delete on
destroy), and the program gets the real ids and outputs back. The stack config is what `pulumi config set` would
hold (the API key as a secret), so the provider is configured through Configure exactly as under the CLI.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml
from harness.engine import UNKNOWN, ProviderProcess, StandInEngine
from harness.mocks import run_program

from pulumi_together_rl import backend
from pulumi_together_rl.__main__ import build_parser
from pulumi_together_rl.client import TogetherRL
from pulumi_together_rl.client.models import ModelResourceCreateRequest, TrainingSessionCreateRequest
from pulumi_together_rl.ownership import location

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
MODEL = "Qwen/Qwen3.5-4B"
RESOURCE_GONE = ("STOPPING", "STOPPED", "ERROR")
SESSION_GONE = ("STOPPED", "EXPIRED", "ERROR")


@pytest.fixture(scope="module")
def provider_process():
    # Credentials reach the provider only through the stack config (Configure), as in a real `pulumi up`.
    env = {"TOGETHER_API_KEY": None, "TOGETHER_BASE_URL": None, "TOGETHER_RL_POLL_INTERVAL": "0.02"}
    with ProviderProcess(ROOT, env, project="examples") as process:
        yield process


def project_name(program: Path) -> str:
    project_file = program / "Pulumi.yaml"
    if not project_file.exists():  # the quickstart is the root project's `main`
        project_file = ROOT / "Pulumi.yaml"
    return yaml.safe_load(project_file.read_text())["name"]


class Stack:
    """One stack of an example: its program, config and the engine's state, run as `pulumi up` would."""

    def __init__(self, program: Path, process: ProviderProcess, emulator: Any, config: dict[str, Any]):
        self.program = program
        self.engine = StandInEngine(process, project=project_name(program), stack="dev")
        self.emulator = emulator
        self.config = {"together:apiKey": emulator.api_key, "together:baseUrl": emulator.base_url, **config}

    def up(self, preview: bool = False, **config_changes: Any):
        self.config.update(config_changes)
        return run_program(
            self.program, self.engine, config=self.config, secret_keys=["together:apiKey"], preview=preview
        )

    def requests(self) -> list[tuple[str, str]]:
        """The public API requests since the last call (method, path)."""
        return [(r["method"], r["path"]) for r in self.emulator.control.requests(clear=True)]


def active(emulator: Any) -> dict[str, list[str]]:
    state = emulator.control.state()
    return {
        "model_resources": [
            o["id"] for o in state["model_resources"] if not o["status"].endswith(RESOURCE_GONE)
        ],
        "training_sessions": [
            o["id"] for o in state["training_sessions"] if not o["status"].endswith(SESSION_GONE)
        ],
    }


def assert_refresh_changes_nothing(stack: Stack) -> None:
    inputs = {urn: entry["inputs"] for urn, entry in stack.engine.state.items()}
    refresh = stack.engine.refresh()
    assert "delete" not in {op for op, _ in refresh.steps}
    assert {urn: entry["inputs"] for urn, entry in stack.engine.state.items()} == inputs
    stack.requests()
    after = stack.up()
    assert {op for op, _ in after.steps} == {"same"}
    assert writes(stack.requests()) == []


def writes(requests: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Requests that change something: not GETs, not the estimate-cost POST of check (it creates nothing)."""
    return [(m, p) for m, p in requests if m != "GET" and p != "/v1/rl/model-resources/estimate-cost"]


def test_quickstart_up_again_refresh_and_destroy(provider_process, emulator):
    stack = Stack(EXAMPLES / "quickstart", provider_process, emulator, {})

    first = stack.up()
    assert first.steps == [("create", "qwen"), ("create", "gsm8k")]
    exports = first.exports
    assert exports["model_resource_status"] == "READY"
    assert exports["training_session_status"] == "RUNNING"
    assert exports["base_model"] == MODEL
    assert active(emulator) == {
        "model_resources": [exports["model_resource_id"]],
        "training_sessions": [exports["training_session_id"]],
    }
    assert first.secret_exports == set()

    stack.requests()
    second = stack.up()
    assert second.steps == [("same", "qwen"), ("same", "gsm8k")]
    assert second.exports == exports
    assert stack.requests() == []  # check and diff answer from the state and the process caches: no HTTP
    assert stack.engine.rpcs("Create", "Update", "Delete") == [("Create", "qwen"), ("Create", "gsm8k")]

    # Refresh (Pulumi.yaml: refresh: always) of an unchanged stack keeps both, invents no input diff, and the
    # next up has nothing to do.
    assert_refresh_changes_nothing(stack)

    stack.engine.destroy()
    assert active(emulator) == {"model_resources": [], "training_sessions": []}


def test_quickstart_refresh_sees_a_session_stopped_outside_pulumi_and_up_recreates_it(
    provider_process, emulator
):
    stack = Stack(EXAMPLES / "quickstart", provider_process, emulator, {})
    first = stack.up().exports
    with TogetherRL(api_key=emulator.api_key, base_url=emulator.base_url) as client:
        client.stop_training_session(first["training_session_id"])

    refresh = stack.engine.refresh()
    assert refresh.ops("gsm8k") == ["delete"]  # dropped from the state: gone
    assert refresh.ops("qwen") != ["delete"]
    again = stack.up()
    assert again.steps == [("same", "qwen"), ("create", "gsm8k")]
    assert again.exports["training_session_id"] != first["training_session_id"]
    assert again.exports["training_session_status"] == "RUNNING"

    stack.engine.destroy()
    assert active(emulator) == {"model_resources": [], "training_sessions": []}


def test_quickstart_preview_creates_nothing(provider_process, emulator):
    stack = Stack(EXAMPLES / "quickstart", provider_process, emulator, {})

    preview = stack.up(preview=True)
    assert preview.steps == [("create", "qwen"), ("create", "gsm8k")]
    assert preview.exports["model_resource_id"] == UNKNOWN
    assert writes(stack.requests()) == []
    assert stack.engine.rpcs("Create", "Update") == []


def test_sweep_renames_in_place_and_replaces_only_the_session_whose_rank_changed(provider_process, emulator):
    stack = Stack(EXAMPLES / "sweep", provider_process, emulator, {"sessions": 3, "loraRanks": [8, 16, 32]})

    first = stack.up()
    assert first.steps[0] == ("create", "sweep-gpu")
    assert sorted(first.steps[1:]) == [("create", "trial-0"), ("create", "trial-1"), ("create", "trial-2")]
    assert first.exports["lora_ranks"] == [8, 16, 32]
    assert first.exports["session_statuses"] == ["RUNNING"] * 3
    sessions = {s["id"]: s for s in emulator.control.state()["training_sessions"]}
    assert {s["display_name"] for s in sessions.values()} == {"sweep-0", "sweep-1", "sweep-2"}
    assert all(s["metadata"]["wandb"]["project"] == "grpo-sweep" for s in sessions.values())
    assert all(s["metadata"]["wandb"]["group"] == "sweep" for s in sessions.values())
    ids = first.exports["session_ids"]

    stack.requests()
    second = stack.up()
    assert {op for op, _ in second.steps} == {"same"}
    assert stack.requests() == []

    renamed = stack.up(namePrefix="gsm8k-v2")
    assert renamed.ops("sweep-gpu") == ["same"]
    assert [renamed.ops(f"trial-{i}") for i in range(3)] == [["update"]] * 3
    assert renamed.exports["session_ids"] == ids
    patches = [path for method, path in writes(stack.requests()) if method == "PATCH"]
    assert sorted(patches) == sorted(f"/v1/rl/training-sessions/{i}" for i in ids)
    live = {s["id"]: s for s in emulator.control.state()["training_sessions"]}
    assert [live[i]["display_name"] for i in ids] == ["gsm8k-v2-0", "gsm8k-v2-1", "gsm8k-v2-2"]
    assert [live[i]["metadata"]["wandb"]["run_name"] for i in ids] == [
        "gsm8k-v2-0",
        "gsm8k-v2-1",
        "gsm8k-v2-2",
    ]

    reranked = stack.up(loraRanks=[8, 64, 32])
    assert reranked.ops("trial-1") == ["delete-replaced", "replace"]
    assert reranked.ops("trial-0") == ["same"] and reranked.ops("trial-2") == ["same"]
    assert reranked.ops("sweep-gpu") == ["same"]
    new_ids = reranked.exports["session_ids"]
    assert new_ids[0] == ids[0] and new_ids[2] == ids[2] and new_ids[1] != ids[1]
    assert reranked.exports["lora_ranks"] == [8, 64, 32]
    assert sorted(active(emulator)["training_sessions"]) == sorted(new_ids)

    assert_refresh_changes_nothing(stack)

    stack.engine.destroy()
    assert active(emulator) == {"model_resources": [], "training_sessions": []}


def _stack_config(stack: str) -> dict[str, Any]:
    return yaml.safe_load((EXAMPLES / "gitops" / f"Pulumi.{stack}.yaml").read_text())["config"]


@pytest.mark.parametrize("stack_name", ["dev", "prod"])
def test_gitops_stack_configs_deploy_as_committed(provider_process, emulator, stack_name):
    config = _stack_config(stack_name)
    stack = Stack(EXAMPLES / "gitops", provider_process, emulator, config)
    experiments = config["together-rl-gitops:experiments"]

    run = stack.up()
    assert run.exports["model_resource_status"] == "READY"
    assert set(run.exports["sessions"]) == {e["name"] for e in experiments}
    assert set(run.exports["session_statuses"].values()) == {"RUNNING"}
    resource = emulator.control.state()["model_resources"][0]
    assert resource["inactive_timeout"] == config["together-rl-gitops:inactiveTimeout"]
    assert (
        resource["compute_config"]["num_generator_replicas"] == config["together-rl-gitops:generatorReplicas"]
    )

    stack.requests()
    assert {op for op, _ in stack.up().steps} == {"same"}
    assert stack.requests() == []

    stack.engine.destroy()
    assert active(emulator) == {"model_resources": [], "training_sessions": []}


def test_gitops_promoting_dev_config_to_prod_replaces_the_resource_and_its_sessions(
    provider_process, emulator
):
    stack = Stack(EXAMPLES / "gitops", provider_process, emulator, _stack_config("dev"))
    dev = stack.up().exports

    prod = stack.up(**_stack_config("prod"))
    assert prod.ops("team-gpu") == [
        "delete-replaced",
        "replace",
    ]  # delete-before-replace: never two allocations
    # Dropped from the config (and, running on the replaced resource, deleted before it).
    assert prod.ops("gsm8k-r16") and all(op.startswith("delete") for op in prod.ops("gsm8k-r16"))
    assert not any(urn.endswith("::gsm8k-r16") for urn in stack.engine.state)
    assert prod.ops("gsm8k-r32") == ["create"] and prod.ops("math-r64") == ["create"]
    assert prod.exports["model_resource_id"] != dev["model_resource_id"]
    assert active(emulator)["model_resources"] == [prod.exports["model_resource_id"]]
    assert sorted(active(emulator)["training_sessions"]) == sorted(prod.exports["sessions"].values())

    stack.engine.destroy()
    assert active(emulator) == {"model_resources": [], "training_sessions": []}


# ------------------------------------------------------------------------ the gitops example's workflows

WORKFLOWS = EXAMPLES / "gitops" / ".github" / "workflows"


def _workflow(name: str) -> dict[str, Any]:
    workflow = yaml.safe_load((WORKFLOWS / name).read_text())
    # Valid GitHub Actions shape: triggers (YAML 1.1 reads the key `on` as True), and jobs of steps that each
    # either use an action or run a command.
    assert workflow[True] and workflow["jobs"]
    for job in workflow["jobs"].values():
        assert job["runs-on"] and job["steps"]
        for step in job["steps"]:
            assert ("uses" in step) != ("run" in step), step
    return workflow


def _secrets(job: dict[str, Any]) -> set[str]:
    return set(re.findall(r"\$\{\{\s*secrets\.(\w+)\s*\}\}", yaml.safe_dump(job)))


@pytest.mark.parametrize("name", ["pulumi.yml", "orphans.yml", "reap.yml"])
def test_gitops_workflows_read_only_by_default_and_no_checkout_keeps_its_token(name):
    workflow = _workflow(name)
    assert workflow["permissions"] == {"contents": "read"}
    for job_name, job in workflow["jobs"].items():
        granted = job.get("permissions", workflow["permissions"])
        writes = {scope for scope, level in granted.items() if level != "read"}
        # Only the comment job writes anything: the preview's comment on the pull request.
        assert writes == ({"pull-requests"} if job_name == "comment" else set()), (job_name, granted)
        checkouts = [s for s in job["steps"] if s.get("uses", "").startswith("actions/checkout@")]
        assert bool(checkouts) == (job_name != "comment"), job_name
        for step in checkouts:
            assert step["with"]["persist-credentials"] is False, (job_name, step)


def test_gitops_preview_runs_the_pull_request_with_a_read_only_token_and_a_separate_job_posts_it():
    jobs = _workflow("pulumi.yml")["jobs"]
    preview, comment = jobs["preview"], jobs["comment"]
    # The job that runs the pull request's program (pulumi preview, uv sync) holds no write token.
    assert preview["permissions"] == {"contents": "read"}
    assert any(s.get("uses", "").startswith("pulumi/actions@") for s in preview["steps"])
    assert not any(s.get("with", {}).get("comment-on-pr") for s in preview["steps"])
    (upload,) = [s for s in preview["steps"] if s.get("uses", "").startswith("actions/upload-artifact@")]
    # The job that writes runs after it, and runs nothing of the pull request's: no checkout, no uv, no pulumi, no
    # secret; only the artifact's text reaches it.
    assert comment["needs"] == "preview" and comment["if"] == "github.event_name == 'pull_request'"
    assert comment["permissions"] == {"pull-requests": "write"}
    assert "environment" not in comment and _secrets(comment) == set()
    assert [s["uses"].split("@")[0] for s in comment["steps"] if "uses" in s] == ["actions/download-artifact"]
    (download,) = [s for s in comment["steps"] if "uses" in s]
    assert download["with"]["pattern"] == upload["with"]["name"].replace("${{ matrix.stack }}", "*")
    lines = [line.strip() for s in comment["steps"] if "run" in s for line in s["run"].splitlines()]
    commands = {line.split()[0] for line in lines if line and not line.startswith("#")}
    commands = {word for word in commands if "=" not in word}  # assignments aside
    assert commands == {"for", "printf", "done", "head", "gh"}, commands
    assert any(line.startswith("gh pr comment ") for line in lines)


def test_gitops_secrets_are_environment_secrets_and_pull_requests_reach_only_the_preview_environment():
    workflow = _workflow("pulumi.yml")
    jobs = workflow["jobs"]
    assert {name: job.get("environment") for name, job in jobs.items()} == {
        "preview": "preview",
        "comment": None,
        "up-dev": "dev",
        "up-prod": "production",
    }
    assert jobs["preview"]["if"] == "github.event_name == 'pull_request'"
    assert jobs["up-dev"]["if"] == "github.event_name == 'push'" and jobs["up-prod"]["needs"] == "up-dev"
    assert workflow[True]["push"]["branches"] == ["main"]
    # Each job holds its environment's bucket credentials (read-only ones for the preview) and the stack's
    # passphrase where it decrypts config; no secret is read outside an environment.
    bucket = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}
    assert _secrets(jobs["preview"]) == _secrets(jobs["up-dev"]) == _secrets(jobs["up-prod"])
    assert _secrets(jobs["up-dev"]) == bucket | {"PULUMI_CONFIG_PASSPHRASE"}
    orphans = _workflow("orphans.yml")["jobs"]["orphans"]
    assert orphans["environment"] == "orphans-${{ matrix.key }}"
    assert _secrets(orphans) == bucket | {"TOGETHER_API_KEY"}
    reap = _workflow("reap.yml")["jobs"]["reap"]
    assert reap["environment"] == "reap-${{ matrix.stack }}"
    assert _secrets(reap) == bucket | {"TOGETHER_API_KEY"}

    # Both the workflow and the README say so, and say how to keep dev and production to main.
    header = (WORKFLOWS / "pulumi.yml").read_text().split("\nname:")[0]
    readme = (EXAMPLES / "gitops" / "README.md").read_text()
    for text in (header, readme):
        flat = " ".join(text.replace("#", "").replace("**", "").split())  # comment marks and emphasis aside
        assert "repository secret" in flat and "environment secret" in flat
        assert "Deployment branches and tags → Selected branches → add" in flat
        assert "not run a job whose environment excludes it" in flat
    assert "| `dev` | `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`: read and write the bucket" in readme
    assert "| `preview` | `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`: only read the bucket" in readme


def test_gitops_keeps_state_and_journal_in_one_bucket_queues_deploys_and_reports_a_cancel():
    workflow = _workflow("pulumi.yml")
    # The backend is a variable every step sees; the journal needs no setting: it goes beside the state.
    assert workflow["env"]["PULUMI_BACKEND_URL"] == "${{ vars.PULUMI_BACKEND_URL }}"
    text = "".join((WORKFLOWS / name).read_text() for name in ("pulumi.yml", "orphans.yml", "reap.yml"))
    assert "TOGETHER_RL_JOURNAL_URL" not in text and "journalUrl" not in text
    assert "PULUMI_ACCESS_TOKEN" not in text  # no Pulumi Cloud: the state is in the bucket
    bucket = "s3://acme-pulumi/training?region=eu-west-1"  # the variable's example in the workflow
    assert bucket in text
    assert location.locate(backend.locate(environ={"PULUMI_BACKEND_URL": bucket})).url == (
        "s3://acme-pulumi/training/.together-rl/journal?region=eu-west-1"
    )
    for job in workflow["jobs"].values():
        for step in job["steps"]:
            if step.get("uses", "").startswith("pulumi/actions@"):
                assert step["with"]["cloud-url"] == "${{ env.PULUMI_BACKEND_URL }}", step
    assert "cancel-in-progress: true" not in text
    for name, stack in (("up-dev", "dev"), ("up-prod", "prod")):
        job = workflow["jobs"][name]
        # Deploys of a stack queue: a newer push waits, none is cancelled half-way.
        assert job["concurrency"] == {"group": f"pulumi-{stack}", "cancel-in-progress": False}, name
        steps = job["steps"]
        (up,) = [i for i, s in enumerate(steps) if s.get("with", {}).get("command") == "up"]
        cancelled = [s for s in steps if s.get("if") == "cancelled()"]
        assert len(cancelled) == 1 and steps.index(cancelled[0]) > up, name
        report = cancelled[0]
        assert report["working-directory"] == "${{ env.PROJECT_DIR }}"
        command = shlex.split(report["run"])
        assert command[:5] == ["uv", "run", "python", "-m", "pulumi_together_rl"]
        args = build_parser().parse_args(command[5:])
        assert (args.command, args.stack, args.report) == ("recover", stack, True), name
    # The scheduled orphan finder and reap read the same bucket: the stacks' state, and the journal beside it.
    for name in ("orphans.yml", "reap.yml"):
        assert _workflow(name)["env"]["PULUMI_BACKEND_URL"] == "${{ vars.PULUMI_BACKEND_URL }}", name


def test_the_scheduled_reap_stops_what_each_stack_holds_past_its_deadline_from_main_only():
    workflow = _workflow("reap.yml")
    triggers = workflow[True]  # YAML 1.1 reads the key `on` as True
    assert set(triggers) == {"schedule", "workflow_dispatch"} and triggers["schedule"][0]["cron"]
    job = workflow["jobs"]["reap"]
    assert job["if"] == "github.ref == 'refs/heads/main'"
    assert job["strategy"]["matrix"]["stack"] == ["dev", "prod"]
    steps = {step.get("name"): step for step in job["steps"]}
    assert steps["Export the stack"]["run"] == 'pulumi stack export --stack "$STACK" > state.json'
    reap = steps["Stop what is past its deadline"]
    command = shlex.split(reap["run"])
    assert command[:5] == ["uv", "run", "python", "-m", "pulumi_together_rl"]
    args = build_parser().parse_args(command[5:])
    assert (args.command, args.state, args.stop, args.yes) == ("reap", ["state.json"], True, True)
    assert reap["env"]["TOGETHER_API_KEY"] == "${{ secrets.TOGETHER_API_KEY }}"


def test_gitops_preview_takes_the_policy_settings_from_the_base_branch_and_codeowners_guard_them():
    workflow = _workflow("pulumi.yml")
    project = workflow["env"]["PROJECT_DIR"]
    steps = workflow["jobs"]["preview"]["steps"]
    base = [s for s in steps if s.get("with", {}).get("ref") == "${{ github.base_ref }}"]
    assert len(base) == 1 and base[0]["uses"].startswith("actions/checkout@"), steps
    folder = base[0]["with"]["path"]
    assert base[0]["with"]["sparse-checkout"] == "${{ env.PROJECT_DIR }}/policy"
    (preview,) = [s for s in steps if s.get("uses", "").startswith("pulumi/actions@")]
    assert preview["with"]["command"] == "preview"
    assert preview["with"]["policyPackConfigs"] == (
        f"${{{{ github.workspace }}}}/{folder}/${{{{ env.PROJECT_DIR }}}}/policy/${{{{ matrix.stack }}}}.json"
    )
    # After the merge, the up jobs apply main's own copy (the checkout of the pushed commit).
    for job in ("up-dev", "up-prod"):
        for step in workflow["jobs"][job]["steps"]:
            if step.get("uses", "").startswith("pulumi/actions@"):
                assert "/base/" not in step["with"]["policyPackConfigs"], step

    rules = {}
    for line in (EXAMPLES / "gitops" / ".github" / "CODEOWNERS").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            pattern, *owners = line.split()
            rules[pattern] = owners
    # The policy settings, the pins of the code that runs the rules and the program, and the workflows.
    assert set(rules) == {f"/{project}/policy/", "/pyproject.toml", "/uv.lock", "/.github/"}, rules
    assert all(rules.values()), rules
    readme = " ".join((EXAMPLES / "gitops" / "README.md").read_text().split())
    assert "Require review from Code Owners" in readme


def test_adopt_takes_over_existing_objects_and_only_references_the_shared_one(provider_process, emulator):
    with TogetherRL(api_key=emulator.api_key, base_url=emulator.base_url) as client:
        outside = client.create_model_resource(ModelResourceCreateRequest(base_model=MODEL))
        shared = client.create_model_resource(ModelResourceCreateRequest(base_model=MODEL))
        client.get_model_resource(outside.id)  # the emulator moves on at the next request: READY
        session = client.create_training_session(
            TrainingSessionCreateRequest(model_resources_id=outside.id, display_name="made-by-hand")
        )
    stack = Stack(
        EXAMPLES / "adopt",
        provider_process,
        emulator,
        {
            "resourceId": outside.id,
            "sessionId": session.id,
            "sharedResourceId": shared.id,
            "sessionName": "adopted",
        },
    )
    stack.requests()

    run = stack.up()
    assert run.exports["adopted_resource_id"] == outside.id
    assert run.exports["adopted_session_id"] == session.id
    assert run.exports["adopted_resource_status"] == "READY"
    assert run.exports["adopted_session_status"] == "RUNNING"
    assert run.exports["shared_resource_status"] == "READY"
    assert run.exports["shared_resource_base_model"] == MODEL
    sent = writes(stack.requests())
    assert ("POST", "/v1/rl/model-resources") not in sent and ("POST", "/v1/rl/training-sessions") not in sent
    assert sent == [("PATCH", f"/v1/rl/training-sessions/{session.id}")]  # the declared display name
    live = next(s for s in emulator.control.state()["training_sessions"] if s["id"] == session.id)
    assert live["display_name"] == "adopted"

    again = stack.up()
    assert again.ops("adopted-gpu") == ["same"] and again.ops("adopted-session") == ["same"]
    assert writes(stack.requests()) == []

    stack.engine.destroy()
    # Adopted objects are managed now, so destroy stops them; the referenced one is left running.
    assert active(emulator) == {"model_resources": [shared.id], "training_sessions": []}
    with TogetherRL(api_key=emulator.api_key, base_url=emulator.base_url) as client:
        client.stop_model_resource(shared.id)
    assert active(emulator) == {"model_resources": [], "training_sessions": []}


def test_every_session_of_a_ready_resource_starts_at_once_through_the_provider_server(
    provider_process, emulator
):
    # The dynamic-provider server has 4 workers and a create holds one until RUNNING: 8 sessions took two
    # waves. Widened (resources/_server.py), all 8 POSTs arrive while the first session is still starting.
    emulator.control.configure(session_cap_lora=16, timings={"session_creating": 4.0})
    stack = Stack(EXAMPLES / "sweep", provider_process, emulator, {"sessions": 8, "loraRanks": [8]})
    stack.requests()

    run = stack.up()

    assert run.exports["session_statuses"] == ["RUNNING"] * 8
    log = emulator.control.requests()
    posts = [r["at"] for r in log if r["method"] == "POST" and r["path"] == "/v1/rl/training-sessions"]
    assert len(posts) == 8
    spread = _seconds(max(posts)) - _seconds(min(posts))
    assert spread < 4.0, f"the 8 session creates were sent over {spread:.1f} s: some waited for a worker"
    # One watcher serves the 8 waits: the sessions are listed, not fetched one by one.
    gets = [r for r in log if r["method"] == "GET" and r["path"].startswith("/v1/rl/training-sessions/")]
    lists = [r for r in log if r["method"] == "GET" and r["path"] == "/v1/rl/training-sessions"]
    assert len(lists) >= 1 and len(gets) <= 8, (len(lists), len(gets))


def _seconds(at: str | float) -> float:
    from datetime import datetime

    return (
        at if isinstance(at, (int, float)) else datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp()
    )
