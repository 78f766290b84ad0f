"""Reproducible stacks through the real Pulumi CLI, against the emulator: a stack trains (its steps and
checkpoints driven through the emulator's control API), its checkpoints reach its outputs at refresh with no
diff, another stack resumes from the pinned checkpoint it published (``examples/reproduce``), bad resumes fail
at preview naming the field, and ``keep_ready_until`` holds a GPU past its ``inactive_timeout`` until an idle
stop, which a refresh handles as drift (``examples/on-demand``, on both faces). The emulator's clock is moved on
(``advance``) instead of waiting.
"""

from __future__ import annotations

import shutil
from datetime import datetime, timedelta, timezone

from harness.cli import ROOT, active, wait_until, writes
from harness.faces import DYNAMIC, PLUGIN

EXAMPLES = ROOT / "examples"
EXTEND = "/extend-expiry"


def _train(emulator, session: str, steps: int, kind: str = "training") -> dict:
    emulator.control.advance_session(session, steps)
    return emulator.control.save_checkpoint(session, kind)


def _session(emulator, ident: str) -> dict:
    return next(s for s in emulator.control.state()["training_sessions"] if s["id"] == ident)


def test_a_stack_resumes_from_the_pinned_checkpoint_another_stack_published(cli_stack, emulator):
    train = cli_stack(EXAMPLES / "reproduce" / "train").init()
    train.up()
    session = train.outputs()["session_id"]
    early = _train(emulator, session, 100)
    late = _train(emulator, session, 50)
    served = _train(emulator, session, 10, "inference")

    # The checkpoints reach the session's outputs at refresh, and are no diff.
    train.run("refresh", "--yes", "--skip-preview")
    (state,) = [r for n, r in train.resources().items() if n == "train"]
    assert state["outputs"]["latest_training_checkpoint_id"] == late["id"]
    assert state["outputs"]["latest_training_checkpoint_step"] == 150
    assert state["outputs"]["latest_inference_checkpoint_id"] == served["id"]
    emulator.control.clear_requests()
    train.preview("--expect-no-changes")
    train.up("--expect-no-changes")  # publishes them as the stack's outputs, changing nothing
    assert writes(emulator) == []
    assert train.outputs()["checkpoint_id"] == late["id"] and train.outputs()["checkpoint_step"] == 150

    # Another stack of the team's backend pins what the training stack published, and resumes from it.
    resume = cli_stack(EXAMPLES / "reproduce" / "resume", beside=train)
    source = f"organization/together-rl-reproduce-train/{train.name}"
    resume.init({"together-rl-reproduce-resume:source": source})
    resume.set("together-rl-reproduce-resume:checkpointId", train.outputs()["checkpoint_id"])
    resume.up()
    outputs = resume.outputs()
    assert outputs["resumed_from"] == late["id"] and outputs["published"] == late["id"]
    resumed = _session(emulator, outputs["session_id"])
    assert resumed["resume_from_checkpoint_id"] == late["id"] and resumed["id"] != session

    # Training goes on and publishes a newer checkpoint: the pinned stack does not move.
    newer = _train(emulator, session, 50)
    train.up("--refresh", "--expect-no-changes")
    assert train.outputs()["checkpoint_id"] == newer["id"]
    emulator.control.clear_requests()
    resume.preview("--expect-no-changes")
    resume.up("--expect-no-changes")
    assert resume.outputs()["resumed_from"] == late["id"] and resume.outputs()["published"] == newer["id"]
    assert writes(emulator) == []

    # Bad pins fail at preview, naming the field, before anything is allocated.
    key = "together-rl-reproduce-resume:"
    for pin, extra, field, says in (
        (served["id"], {}, "load_optimizer", "an inference checkpoint"),
        ("ckpt-does-not-exist", {}, "resume_from_checkpoint_id", "no checkpoint"),
        (early["id"], {"rank": 16}, "lora_config.rank", "rank 8"),
    ):
        resume.set(f"{key}checkpointId", pin)
        for name, value in extra.items():
            resume.set(f"{key}{name}", value)
        result = resume.preview(check=False)
        assert result.returncode != 0, str(result)
        assert field in result.output, str(result)
        assert says in result.output, str(result)
        assert "Traceback" not in result.output
        assert writes(emulator) == []
        for name in extra:
            resume.run("config", "rm", f"{key}{name}")

    # Unpinned, it follows the reference, with a warning that says how to pin.
    resume.run("config", "rm", f"{key}checkpointId")
    followed = resume.preview(check=False)
    assert "checkpointId is not set" in followed.output and "Pin it" in followed.output
    resume.destroy()
    train.destroy()


def _moment(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _running_session(emulator) -> str:
    """A RUNNING LoRA session (rank 8), made straight through the client: no stack holds it."""
    from pulumi_together_rl.client import TogetherRL
    from pulumi_together_rl.client.models import (
        ModelResourceCreateRequest,
        ModelResourceStatus,
        TrainingSessionCreateRequest,
        TrainingSessionStatus,
    )

    with TogetherRL(api_key=emulator.api_key, base_url=emulator.base_url) as client:
        gpu = client.create_model_resource(ModelResourceCreateRequest(base_model="Qwen/Qwen3.5-4B"))
        ready = ModelResourceStatus.READY
        wait_until(lambda: client.get_model_resource(gpu.id).status == ready, 60, "the resource to be READY")
        run = client.create_training_session(
            TrainingSessionCreateRequest(model_resources_id=gpu.id, lora_config={"rank": 8})
        )
        running = TrainingSessionStatus.RUNNING
        wait_until(lambda: client.get_training_session(run.id).status == running, 60, "the session to run")
    return run.id


def test_the_checkpoint_functions_answer_a_program_and_a_query_that_finds_nothing_fails_it(
    cli_stack, emulator, tmp_path
):
    session = _running_session(emulator)
    early = _train(emulator, session, 10)
    late = _train(emulator, session, 40)
    served = _train(emulator, session, 10, "inference")
    project = tmp_path / "query"
    project.mkdir()
    (project / "Pulumi.yaml").write_text(
        "name: checkpoint-query\nruntime:\n  name: python\n  options:\n    toolchain: uv\n"
        f"    virtualenv: {ROOT / '.venv'}\n"
    )
    shutil.copy(ROOT / "tests" / "program" / "checkpoint_query" / "__main__.py", project / "__main__.py")
    stack = cli_stack(project).init({"checkpoint-query:session": session, "checkpoint-query:min_step": "20"})
    emulator.control.clear_requests()

    stack.up()

    outputs = stack.outputs()
    assert [c["id"] for c in outputs["all"]] == [late["id"], early["id"]]  # training only, newest first
    newest = dict(outputs["all"][0])
    assert _moment(newest.pop("created_at")) == _moment(late["created_at"])
    assert newest == {
        "id": late["id"], "type": "training", "session_id": session, "base_model": "Qwen/Qwen3.5-4B",
        "step": 50, "lora_rank": 8,
    }  # fmt: skip
    assert [c["id"] for c in outputs["inference"]] == [served["id"]]
    assert outputs["latest"]["id"] == late["id"] and outputs["latest"]["step"] == 50
    assert writes(emulator) == []  # a query reads

    # Past the newest: the program fails, in one sentence that names the query.
    stack.set("checkpoint-query:min_step", "51")
    result = stack.preview(check=False)

    assert result.returncode != 0, str(result)
    assert (
        f"finding the latest checkpoint: no training checkpoint of session {session} at step 51 or later exists"
        in result.output
    ), str(result)
    assert "Traceback" not in result.output
    assert emulator.api_key not in result.output


def test_the_plugin_reads_checkpoints_with_get_checkpoints_and_refreshes_them_with_no_diff(
    cli_stack, emulator
):
    stack = cli_stack(ROOT / "tests" / "e2e" / "projects" / "checkpoints-yaml", face=PLUGIN).init()
    stack.up()
    session = stack.outputs()["session_id"]
    assert stack.outputs()["checkpoints"] == []
    first = _train(emulator, session, 20)
    second = _train(emulator, session, 20)

    stack.run("refresh", "--yes", "--skip-preview")
    emulator.control.clear_requests()
    stack.up("--expect-no-changes")

    outputs = stack.outputs()
    assert [c["id"] for c in outputs["checkpoints"]] == [second["id"], first["id"]]
    assert outputs["checkpoints"][0]["step"] == 40 and outputs["checkpoints"][0]["loraRank"] == 8
    assert outputs["latest_id"] == second["id"] and outputs["latest_step"] == 40
    assert writes(emulator) == []
    stack.destroy()


def _in(hours: float) -> str:
    return (datetime.now(timezone.utc) + timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_keep_ready_until_holds_a_gpu_past_its_idle_timeout_until_an_idle_stop_is_drift(cli_stack, emulator):
    face = DYNAMIC  # one face: the other's guard is a check-tier test
    stack = cli_stack("on-demand", face=face).init({"together-rl-on-demand:keepReadyUntil": _in(2)})
    stack.up()
    first = stack.outputs()
    extends = [r for r in emulator.control.requests() if r["path"].endswith(EXTEND)]
    assert [r["body"]["seconds"] > 7000 for r in extends] == [True]
    kept_until = datetime.fromisoformat(first["expires_at"].replace("Z", "+00:00"))
    assert kept_until >= datetime.now(timezone.utc) + timedelta(hours=1.9)

    # An hour without activity, twelve times the resource's inactive_timeout: still READY, and nothing to send.
    emulator.control.advance(3600)
    emulator.control.clear_requests()
    stack.run("refresh", "--yes", "--skip-preview")
    assert [r for r in emulator.control.requests() if r["path"].endswith(EXTEND)] == []
    stack.preview("--expect-no-changes")
    (resource,) = active(emulator)["model_resources"]
    assert resource["id"] == first["id"] and resource["status"] == "MODEL_RESOURCES_STATUS_READY"

    # Moving the keep is an update that extends, never a replacement.
    stack.set("together-rl-on-demand:keepReadyUntil", _in(3))
    moved = stack.up()
    assert "~ 1 updated" in moved.output and "replace" not in moved.output, str(moved)
    assert stack.outputs()["id"] == first["id"]
    assert len([r for r in emulator.control.requests() if r["path"].endswith(EXTEND)]) == 1

    # At the keep's end it stops on its own: the refresh says so, as drift, and the next up provisions anew.
    emulator.control.advance(3 * 3600)
    refreshed = stack.run("refresh", "--yes", "--skip-preview")
    assert (
        f"{first['id']} is STOPPED (it stopped itself for inactivity when its keep ended" in refreshed.output
    )
    assert "error" not in refreshed.output.lower()
    assert "on-demand" not in "".join(stack.resources())
    again = stack.up()
    assert again.returncode == 0 and stack.outputs()["id"] != first["id"]
    stack.destroy()
