"""Engine protocol (issue 3, Tests item 2): the real providers served by the SDK's own dynamic-provider server.

`python -m pulumi.dynamic` runs in a subprocess whose environment has no Together key or URL: the key reaches
the provider only as the secret stack config `together:apiKey` in Configure, as with `pulumi config set
--secret`. The stand-in engine (harness/engine.py) sends Check/Diff/Create/Read/Update/Delete with the
`__provider` blobs the SDK's serializer makes, in the order the Pulumi engine does; the emulator's request log
shows what reached the API.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness.engine import (
    UNKNOWN,
    ProviderProcess,
    ProviderRpcError,
    StandInEngine,
    blob_bytes,
    provider_blob,
    reveal,
)
from harness.mocks import run_program

from pulumi_together_rl.client import TogetherRL
from pulumi_together_rl.client.models import (
    RESOURCE_ACTIVE,
    SESSION_GONE,
    ModelResourceStatus,
    TrainingSessionCreateRequest,
)
from pulumi_together_rl.resources.model_resource import _ModelResourceProvider
from pulumi_together_rl.resources.training_session import _TrainingSessionProvider

MODEL = "Qwen/Qwen3.5-4B"
MR = "pulumi-python:dynamic/together:ModelResource"
TS = "pulumi-python:dynamic/together:TrainingSession"
MR_BLOB = provider_blob(_ModelResourceProvider())
TS_BLOB = provider_blob(_TrainingSessionProvider())
PROGRAM = Path(__file__).resolve().parents[1] / "program" / "training_stack"
NO_API_ENV = {"TOGETHER_API_KEY": None, "TOGETHER_BASE_URL": None, "TOGETHER_RL_POLL_INTERVAL": None}


@pytest.fixture(scope="module")
def provider_process(emulator_server):
    with ProviderProcess(env=NO_API_ENV) as process:
        yield process


def stack_config(emulator) -> dict[str, str]:
    return {
        "together:apiKey": emulator.api_key,
        "together:baseUrl": emulator.base_url,
        "together:pollInterval": "0.01",
    }


@pytest.fixture
def engine(provider_process, emulator) -> StandInEngine:
    emulator.control.configure(api_key=emulator.api_key)  # any other key (or none) is refused with 401
    engine = StandInEngine(provider_process)
    engine.configure(stack_config(emulator), secret_keys=["together:apiKey"])
    return engine


def up(engine, *, display_name="run", rank=8, inactive_timeout=None, preview=False):
    """The registrations of a one-resource, one-session program, in program order (the session waits for the id)."""
    gpu_urn = engine.urn(MR, "gpu")
    gpu_inputs = {"__provider": MR_BLOB, "base_model": MODEL, "compute_config": {"num_generator_replicas": 1}}
    if inactive_timeout is not None:
        gpu_inputs["inactive_timeout"] = inactive_timeout
    with engine.deployment(preview=preview) as deployment:
        gpu = deployment.register(MR, "gpu", gpu_inputs)
        deployment.register(
            TS,
            "run",
            {
                "__provider": TS_BLOB,
                "model_resources_id": gpu.id or UNKNOWN,  # an empty id is unknown to the program (preview)
                "display_name": display_name,
                "lora_config": {"rank": rank},
                "metadata": {"wandb": {"project": "grpo-gsm8k"}},
            },
            dependencies=[gpu_urn],
            property_dependencies={"model_resources_id": [gpu_urn]},
        )
    return deployment.result


def next_command(engine: StandInEngine, emulator) -> ProviderProcess:
    """The next `pulumi` command: the Pulumi CLI starts the dynamic-provider plugin afresh for each command, so
    this is a NEW provider process (no cache of the earlier commands), configured the same way, on an engine
    holding the same state. The caller stops the process."""
    process = ProviderProcess(env=NO_API_ENV)
    fresh = StandInEngine(process)
    fresh.state = copy.deepcopy(engine.state)
    fresh._meta = copy.deepcopy(engine._meta)  # dependencies and order, as the state file keeps them
    fresh.configure(stack_config(emulator), secret_keys=["together:apiKey"])
    return fresh


def live(emulator) -> tuple[dict[str, dict], dict[str, dict]]:
    state = emulator.control.state()
    return (
        {r["id"]: r for r in state["model_resources"]},
        {s["id"]: s for s in state["training_sessions"]},
    )


def writes(emulator) -> list[tuple[str, str]]:
    return [(r["method"], r["path"]) for r in emulator.control.requests() if r["method"] != "GET"]


def assert_nothing_active(emulator) -> None:
    resources, sessions = live(emulator)
    assert all(r["status"] not in {s.value for s in RESOURCE_ACTIVE} for r in resources.values()), resources
    assert all(s["status"] in {g.value for g in SESSION_GONE} for s in sessions.values()), sessions


def test_create_same_rename_new_rank_refresh_destroy(engine, emulator):
    control = emulator.control

    # create
    assert up(engine).steps == [("create", "gpu"), ("create", "run")]
    gpu, run = engine.resource("gpu"), engine.resource("run")
    resources, sessions = live(emulator)
    assert resources[gpu["id"]]["status"].endswith("READY") and gpu["outputs"]["status"] == "READY"
    assert sessions[run["id"]]["status"].endswith("RUNNING") and run["outputs"]["status"] == "RUNNING"
    assert sessions[run["id"]]["model_resources_id"] == gpu["id"]

    # unchanged up, as a new command: a NEW provider process (empty caches), same steps (DIFF_NONE), no
    # Create/Update, no HTTP at all (check asks the API only about inputs that changed)
    fresh = next_command(engine, emulator)
    try:
        control.requests(clear=True)
        assert up(fresh).steps == [("same", "gpu"), ("same", "run")]
        assert fresh.rpcs() == [("Check", "gpu"), ("Diff", "gpu"), ("Check", "run"), ("Diff", "run")]
        assert control.requests() == []
    finally:
        fresh.process.stop()

    # rename: PATCH in place
    control.requests(clear=True)
    engine.calls.clear()
    assert up(engine, display_name="run-renamed").steps == [("same", "gpu"), ("update", "run")]
    assert engine.rpcs("Create", "Update", "Delete") == [("Update", "run")]
    assert writes(emulator) == [("PATCH", f"/v1/rl/training-sessions/{run['id']}")]
    assert engine.resource("run")["id"] == run["id"]
    assert live(emulator)[1][run["id"]]["display_name"] == "run-renamed"

    # new LoRA rank: replace, the old session stopped first (delete-before-replace frees its slot)
    control.requests(clear=True)
    engine.calls.clear()
    result = up(engine, display_name="run-renamed", rank=16)
    assert result.steps == [("same", "gpu"), ("delete-replaced", "run"), ("replace", "run")]
    assert engine.rpcs("Create", "Update", "Delete") == [("Delete", "run"), ("Create", "run")]
    new_run = engine.resource("run")
    assert new_run["id"] != run["id"]
    assert writes(emulator) == [
        ("POST", f"/v1/rl/training-sessions/{run['id']}/stop"),
        ("POST", "/v1/rl/training-sessions"),
    ]
    sessions = live(emulator)[1]
    assert sessions[run["id"]]["status"] in {s.value for s in SESSION_GONE}
    assert sessions[new_run["id"]]["lora_config"]["rank"] == 16

    # refresh after an out-of-band stop: both are gone (the forced stop ended the session too)
    with TogetherRL(api_key=emulator.api_key, base_url=emulator.base_url) as client:
        client.stop_model_resource(gpu["id"], force=True)
    engine.calls.clear()
    assert engine.refresh().steps == [("delete", "gpu"), ("delete", "run")]
    assert engine.rpcs() == [("Read", "gpu"), ("Read", "run")]
    assert engine.state == {}

    # the next up recreates them
    assert up(engine).steps == [("create", "gpu"), ("create", "run")]
    assert engine.resource("gpu")["id"] != gpu["id"]

    # destroy: the session first, then its resource; nothing is left billing
    engine.calls.clear()
    assert engine.destroy().steps == [("delete", "run"), ("delete", "gpu")]
    assert engine.rpcs() == [("Delete", "run"), ("Delete", "gpu")]
    assert engine.state == {}
    assert_nothing_active(emulator)


def test_replacing_the_model_resource_first_replaces_its_sessions(engine, emulator):
    up(engine)
    old_gpu, old_run = engine.resource("gpu")["id"], engine.resource("run")["id"]
    engine.calls.clear()

    result = up(engine, inactive_timeout=600)

    # Delete-before-replace of the resource: its session would be replaced (model_resources_id changes), so the
    # engine deletes it first; stopping the resource with a session attached would be refused.
    assert engine.rpcs() == [
        ("Check", "gpu"),
        ("Diff", "gpu"),
        ("Diff", "run"),
        ("Delete", "run"),
        ("Delete", "gpu"),
        ("Create", "gpu"),
        ("Check", "run"),
        ("Create", "run"),
    ]
    assert result.steps == [
        ("delete-replaced", "run"),
        ("delete-replaced", "gpu"),
        ("replace", "gpu"),
        ("replace", "run"),
    ]
    resources, sessions = live(emulator)
    assert resources[old_gpu]["status"] not in {s.value for s in RESOURCE_ACTIVE}
    assert sessions[old_run]["status"] in {s.value for s in SESSION_GONE}
    new_gpu = engine.resource("gpu")["id"]
    assert resources[new_gpu]["inactive_timeout"] == 600
    assert sessions[engine.resource("run")["id"]]["model_resources_id"] == new_gpu
    engine.destroy()
    assert_nothing_active(emulator)


@pytest.fixture
def first_command(emulator) -> Iterator[StandInEngine]:
    """An engine on a provider process of its own, started for this test: the first command of a stack, with
    nothing cached (the module's shared process holds what earlier tests looked up)."""
    emulator.control.configure(api_key=emulator.api_key)
    with ProviderProcess(env=NO_API_ENV) as process:
        engine = StandInEngine(process)
        engine.configure(stack_config(emulator), secret_keys=["together:apiKey"])
        yield engine


def test_preview_with_unknown_inputs_creates_nothing(first_command, emulator):
    control, engine = emulator.control, first_command

    # A new stack: the session's model_resources_id is unknown until the resource exists.
    result = up(engine, preview=True)
    assert result.steps == [("create", "gpu"), ("create", "run")]
    assert engine.rpcs() == [("Check", "gpu"), ("Check", "run")]
    assert result.resources[engine.urn(TS, "run")].outputs["model_resources_id"] == UNKNOWN
    assert engine.state == {}
    # Check reads the supported-models catalogue (validation) and asks the price of the declared GPUs (its
    # estimate); no object is created or even looked up.
    assert [(r["method"], r["path"]) for r in control.requests()] == [
        ("GET", "/v1/rl/supported-models"),
        ("POST", "/v1/rl/model-resources/estimate-cost"),
    ]
    assert live(emulator) == ({}, {})

    # An existing stack whose resource would be replaced: the session's input becomes unknown again.
    up(engine)
    state = json.loads(json.dumps(engine.state))
    control.requests(clear=True)
    engine.calls.clear()
    result = up(engine, inactive_timeout=600, preview=True)
    assert result.steps == [("replace", "gpu"), ("replace", "run")]
    assert engine.rpcs() == [("Check", "gpu"), ("Diff", "gpu"), ("Check", "run"), ("Diff", "run")]
    # The changed declaration's price (the estimate is per request body), and nothing else: no object created,
    # stopped or looked up.
    assert [(r["method"], r["path"]) for r in control.requests()] == [
        ("POST", "/v1/rl/model-resources/estimate-cost")
    ]
    assert engine.state == state
    engine.destroy()


def test_blob_is_by_reference_and_the_key_is_nowhere_in_state_or_logs(engine, emulator, provider_process):
    assert "TOGETHER_API_KEY" not in provider_process.env  # the creates below got the key from Configure
    up(engine)

    for name, blob, cls in (
        ("gpu", MR_BLOB, _ModelResourceProvider),
        ("run", TS_BLOB, _TrainingSessionProvider),
    ):
        entry = engine.resource(name)
        assert entry["inputs"]["__provider"] == entry["outputs"]["__provider"] == blob
        raw = blob_bytes(blob)
        assert b"_create_code" not in raw and b"_create_function" not in raw
        assert cls.__module__.encode() in raw and cls.__name__.encode() in raw
        assert emulator.api_key.encode() not in raw
    assert emulator.api_key not in json.dumps(reveal(engine.state))
    assert emulator.api_key not in provider_process.output()
    engine.destroy()


def test_without_a_configured_key_preview_warns_and_create_names_both_ways_to_set_it(emulator_server):
    with ProviderProcess(env=NO_API_ENV) as process:
        engine = StandInEngine(process)
        engine.configure({"together:baseUrl": emulator_server.base_url})
        registration = (MR, "gpu", {"__provider": MR_BLOB, "base_model": MODEL})

        assert engine.up([registration], preview=True).steps == [("create", "gpu")]

        with pytest.raises(ProviderRpcError) as caught:
            engine.up([registration])
        assert caught.value.rpc == "Create"
        assert "together:apiKey" in caught.value.details and "TOGETHER_API_KEY" in caught.value.details
        assert "skipped the remote checks" in process.stderr_text().lower()


def test_program_through_engine_backed_mocks_up_again_change_config_destroy(engine, emulator):
    config = {**stack_config(emulator), "ranks": [8, 16]}
    secret_keys = ["together:apiKey"]

    first = run_program(PROGRAM, engine, config=config, secret_keys=secret_keys)
    assert sorted(first.steps) == [("create", "gpu"), ("create", "run-0"), ("create", "run-1")]
    gpu_id = engine.resource("gpu")["id"]
    assert first.exports["gpu_id"] == gpu_id and first.exports["gpu_status"] == "READY"
    assert first.exports["session_resource_ids"] == [gpu_id, gpu_id]
    assert first.exports["session_statuses"] == ["RUNNING", "RUNNING"]
    assert first.exports["session_base_models"] == [MODEL, MODEL]
    assert first.exports["display_names"] == ["run-0", "run-1"]

    emulator.control.requests(clear=True)
    engine.calls.clear()
    second = run_program(PROGRAM, engine, config=config, secret_keys=secret_keys)
    assert sorted(second.steps) == [("same", "gpu"), ("same", "run-0"), ("same", "run-1")]
    assert engine.rpcs("Create", "Update", "Delete") == []
    assert emulator.control.requests() == []
    assert second.exports == first.exports

    emulator.control.requests(clear=True)
    changed = {**config, "ranks": [8, 32], "displayName0": "renamed"}
    third = run_program(PROGRAM, engine, config=changed, secret_keys=secret_keys)
    assert third.ops("gpu") == ["same"]
    assert third.ops("run-0") == ["update"]
    assert third.ops("run-1") == ["delete-replaced", "replace"]
    assert third.exports["display_names"] == ["renamed", "run-1"]
    assert third.exports["session_ids"][0] == first.exports["session_ids"][0]
    assert third.exports["session_ids"][1] != first.exports["session_ids"][1]
    assert sum(1 for method, _ in writes(emulator) if method == "PATCH") == 1

    engine.destroy()
    assert engine.state == {}
    assert_nothing_active(emulator)


def test_force_stop_deployed_on_its_own_lets_a_replacement_stop_a_resource_with_sessions(engine, emulator):
    """Pulumi deletes the old resource with its OLD inputs, so force_stop=True set in the same `up` as a replacing
    change cannot reach that delete: the refusal says to deploy force_stop=True on its own first."""
    with engine.deployment() as deployment:
        deployment.register(MR, "gpu", {"__provider": MR_BLOB, "base_model": MODEL})
    gpu_id = engine.resource("gpu")["id"]
    with TogetherRL(api_key=emulator.api_key, base_url=emulator.base_url) as client:
        # A session started outside Pulumi (a training script using the SDK on the Pulumi-managed GPU).
        outside = client.create_training_session(TrainingSessionCreateRequest(model_resources_id=gpu_id))

    def up_gpu(**extra):
        with engine.deployment() as deployment:
            deployment.register(MR, "gpu", {"__provider": MR_BLOB, "base_model": MODEL, **extra})
        return deployment.result

    with pytest.raises(ProviderRpcError) as refused:
        up_gpu(inactive_timeout=600, force_stop=True)  # in the same `up` as the change: too late
    assert outside.id in refused.value.details and "pulumi up --target" in refused.value.details

    # The advice: deploy force_stop=True as the only change (an update that calls nothing) ...
    emulator.control.requests(clear=True)
    assert up_gpu(force_stop=True).steps == [("update", "gpu")]
    assert writes(emulator) == []
    # ... then apply the change: the forced stop takes the outside session down too.
    assert up_gpu(inactive_timeout=600, force_stop=True).ops("gpu") == ["delete-replaced", "replace"]
    resources, sessions = live(emulator)
    assert resources[gpu_id]["status"] in {
        ModelResourceStatus.STOPPING.value,
        ModelResourceStatus.STOPPED.value,
    }
    assert sessions[outside.id]["status"] not in {"TRAINING_SESSION_STATUS_RUNNING"}
    engine.destroy()
    assert_nothing_active(emulator)


def test_a_failed_create_reaches_the_engine_as_one_sentence_without_a_traceback(emulator_server):
    with ProviderProcess(env=NO_API_ENV) as process:
        engine = StandInEngine(process)
        engine.configure({"together:baseUrl": emulator_server.base_url})
        with pytest.raises(ProviderRpcError) as caught:
            engine.up([(MR, "gpu", {"__provider": MR_BLOB, "base_model": MODEL})])
    details = caught.value.details
    assert details.startswith(f"creating model resource ({MODEL}): no Together API key is configured.")
    assert "Traceback" not in details and len(details.splitlines()) == 1, details


def test_with_together_rl_debug_the_full_traceback_is_kept(emulator_server):
    with ProviderProcess(env={**NO_API_ENV, "TOGETHER_RL_DEBUG": "1"}) as process:
        engine = StandInEngine(process)
        engine.configure({"together:baseUrl": emulator_server.base_url})
        with pytest.raises(ProviderRpcError) as caught:
            engine.up([(MR, "gpu", {"__provider": MR_BLOB, "base_model": MODEL})])
    assert "Traceback (most recent call last)" in caught.value.details
    assert "no Together API key is configured" in caught.value.details


def test_a_bug_after_the_post_keeps_its_traceback_and_its_object_is_stopped(emulator, tmp_path):
    """A bug (not a UserError) after the POST, in the real server: the create stops what it made, and the
    engine gets the sentence *and* the bug's traceback, with where it happened (not `RuntimeError: .`)."""
    (tmp_path / "sitecustomize.py").write_text(
        "import pulumi_together_rl.resources.model_resource_schema as module\n"
        "def planted_bug(inputs, ready):\n"
        "    raise RuntimeError()\n"
        "object.__setattr__(module.MODEL_RESOURCE, 'to_outputs', planted_bug)\n"
    )
    env = {"PYTHONPATH": str(tmp_path), "TOGETHER_RL_POLL_INTERVAL": "0.05"}
    with ProviderProcess(env=env) as process:
        engine = StandInEngine(process)
        engine.configure({"together:baseUrl": emulator.base_url, "together:apiKey": emulator.api_key})
        with pytest.raises(ProviderRpcError) as caught:
            engine.up([(MR, "gpu", {"__provider": MR_BLOB, "base_model": MODEL})])
    details = caught.value.details
    assert "RuntimeError at sitecustomize.py:3 in planted_bug: no message" in details
    assert "Traceback (most recent call last)" in details and "It has been stopped" in details
    assert_nothing_active(emulator)
