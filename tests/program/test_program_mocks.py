"""Programs under plain `pulumi.runtime.set_mocks` (issue 3, Tests item 3): no provider runs here.

What reaches the engine from a program: the type tokens, the inputs (None dropped, display_name defaulted, the
model resource's id wired into the session), the `__provider` blobs (pickled by reference, secret, no key), and
how outputs the engine returns flow back into the program's exports.
"""

from __future__ import annotations

import base64
import textwrap
from pathlib import Path

import dill
import pulumi
import pytest
from harness.engine import provider_blob
from harness.mocks import run_main
from pulumi.output import Unknown
from pulumi.runtime import rpc
from pulumi.runtime.mocks import MockResourceArgs

from pulumi_together_rl.resources.model_resource import _ModelResourceProvider
from pulumi_together_rl.resources.training_session import _TrainingSessionProvider

PROGRAM = Path(__file__).resolve().parent / "training_stack"
MR = "pulumi-python:dynamic/together:ModelResource"
TS = "pulumi-python:dynamic/together:TrainingSession"
MODEL = "Qwen/Qwen3.5-4B"


class RecordingMocks(pulumi.runtime.Mocks):
    """Plays the engine: records every registration and answers with made-up ids and outputs."""

    def __init__(self, *, preview: bool = False) -> None:
        self.preview = preview
        self.args: list[MockResourceArgs] = []

    def new_resource(self, args: MockResourceArgs):
        self.args.append(args)
        if args.typ == MR:
            resource_id = args.resource_id or ("" if self.preview else f"mr-{args.name}")
            return resource_id, {
                **args.inputs,
                "status": "READY",
                "base_model": args.inputs.get("base_model", MODEL),
            }
        if args.typ == TS:
            resource_id = args.resource_id or f"ts-{args.name}"
            return resource_id, {**args.inputs, "status": "RUNNING", "base_model": MODEL, "step": 0}
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args):
        return {}

    def registered(self, name: str) -> MockResourceArgs:
        (match,) = [a for a in self.args if a.name == name]
        return match


@pytest.fixture(autouse=True)
def no_key_in_env(monkeypatch):
    # A key in the environment must not end up in a blob either: the providers read it only when they run.
    monkeypatch.setenv("TOGETHER_API_KEY", "tk-env-key-that-must-not-be-pickled")


def test_resources_register_with_their_type_tokens():
    mocks = RecordingMocks()
    run_main(PROGRAM, mocks, config={"ranks": [8, 16]})

    registered = [(a.typ, a.name) for a in mocks.args]
    # The sessions wait for the resource's id, so it registers first; the sessions then race each other.
    assert registered[0] == (MR, "gpu")
    assert sorted(registered[1:]) == [(TS, "run-0"), (TS, "run-1")]
    assert all(a.custom for a in mocks.args)


def test_inputs_are_declared_values_only_with_the_session_wired_to_the_resource_id():
    mocks = RecordingMocks()
    exports, _secrets = run_main(PROGRAM, mocks, config={"ranks": [8, 16], "displayName1": "second"})

    gpu = mocks.registered("gpu").inputs
    assert {k: v for k, v in gpu.items() if k != "__provider"} == {
        "base_model": MODEL,
        "compute_config": {"num_generator_replicas": 1},
        "owner": "-/test/dev/gpu",  # the declaration (these mocks set no organization: "-")
    }  # unset inputs and the declared outputs (None) are not sent
    session = mocks.registered("run-0").inputs
    assert session["owner"] == "-/test/dev/run-0"
    assert session["model_resources_id"] == "mr-gpu"
    assert session["lora_config"] == {"rank": 8}
    assert session["display_name"] == "run-0"  # defaults to the Pulumi resource name
    assert session["metadata"] == {"wandb": {"project": "grpo", "run_name": "run-0"}}
    assert mocks.registered("run-1").inputs["display_name"] == "second"
    assert exports["session_resource_ids"] == ["mr-gpu", "mr-gpu"]


def test_the_names_of_secret_inputs_are_sent_never_their_values(tmp_path):
    """The engine hands a dynamic provider secrets in plain text: the program says which inputs were secret."""
    (tmp_path / "__main__.py").write_text(
        textwrap.dedent(
            """
            import pulumi
            from pulumi_together_rl import ModelResource, ModelResourceArgs, TrainingSession, TrainingSessionArgs

            gpu = ModelResource("gpu", ModelResourceArgs(base_model="Qwen/Qwen3.5-4B"))
            TrainingSession(
                "run",
                TrainingSessionArgs(
                    model_resources_id=gpu.id,
                    display_name=pulumi.Output.secret("customer-acme-eval"),
                    metadata={"wandb": {"project": pulumi.Output.secret("acme-private")}},
                ),
            )
            """
        )
    )
    mocks = RecordingMocks()
    run_main(tmp_path, mocks)

    assert "secret_inputs" not in mocks.registered("gpu").inputs  # none secret: nothing sent
    assert mocks.registered("run").inputs["secret_inputs"] == ["display_name", "metadata"]


def test_outputs_from_the_engine_reach_the_program_exports():
    exports, secrets = run_main(PROGRAM, RecordingMocks(), config={"ranks": [4]})

    assert exports == {
        "gpu_id": "mr-gpu",
        "gpu_status": "READY",
        "session_ids": ["ts-run-0"],
        "session_resource_ids": ["mr-gpu"],
        "session_statuses": ["RUNNING"],
        "session_base_models": [MODEL],
        "display_names": ["run-0"],
    }
    assert secrets == set()


def test_preview_leaves_the_session_resource_id_unknown():
    mocks = RecordingMocks(preview=True)
    exports, _secrets = run_main(PROGRAM, mocks, preview=True)

    assert isinstance(mocks.registered("run-0").inputs["model_resources_id"], Unknown)
    assert exports["gpu_id"] == rpc.UNKNOWN
    assert exports["gpu_status"] == "READY"  # known outputs stay known in preview


@pytest.mark.parametrize(
    ("name", "provider_class"), [("gpu", _ModelResourceProvider), ("run-0", _TrainingSessionProvider)]
)
def test_both_providers_are_pickled_by_reference_as_secrets_without_a_key(name, provider_class):
    mocks = RecordingMocks()
    run_main(PROGRAM, mocks)

    wrapped = mocks.registered(name).inputs["__provider"]
    assert rpc.is_rpc_secret(wrapped)  # serialize_as_secret_always: encrypted in state
    blob = rpc.unwrap_rpc_secret(wrapped)
    raw = base64.b64decode(blob)
    assert b"_create_code" not in raw and b"_create_function" not in raw
    assert provider_class.__module__.encode() in raw and provider_class.__name__.encode() in raw
    assert b"tk-env-key-that-must-not-be-pickled" not in raw and b"TogetherRL" not in raw
    assert blob == provider_blob(provider_class())  # deterministic: no spurious ~__provider diff
    assert type(dill.loads(raw)) is provider_class


def test_get_reads_existing_objects_by_id(tmp_path):
    (tmp_path / "__main__.py").write_text(
        textwrap.dedent(
            """
            import pulumi
            from pulumi_together_rl import ModelResource, TrainingSession

            gpu = ModelResource.get("existing-gpu", "mr-123")
            run = TrainingSession.get("existing-run", "ts-456")
            pulumi.export("gpu_status", gpu.status)
            pulumi.export("run_id", run.id)
            """
        )
    )
    mocks = RecordingMocks()
    exports, _secrets = run_main(tmp_path, mocks)

    # Independent reads: they may reach the engine in either order.
    assert sorted((a.typ, a.name, a.resource_id) for a in mocks.args) == [
        (MR, "existing-gpu", "mr-123"),
        (TS, "existing-run", "ts-456"),
    ]
    assert all("__provider" in a.inputs for a in mocks.args)  # Read needs the blob to find the provider
    assert exports == {"gpu_status": "READY", "run_id": "ts-456"}


MODEL_RESOURCE_PROGRAM = """
import pulumi
from pulumi_together_rl import ModelResource, ModelResourceArgs, TrainingSession, TrainingSessionArgs

gpu = ModelResource("gpu", ModelResourceArgs(base_model="Qwen/Qwen3.5-4B", lora_enabled=False,
                                             compute_config={"num_generator_replicas": 1}))
run = TrainingSession("run", TrainingSessionArgs(model_resource=gpu))
pulumi.export("run_resource", run.model_resources_id)
"""


@pytest.mark.parametrize("preview", [False, True])
def test_model_resource_wires_the_id_and_the_declared_inputs_known_at_preview(tmp_path, preview):
    (tmp_path / "__main__.py").write_text(MODEL_RESOURCE_PROGRAM)
    mocks = RecordingMocks(preview=preview)
    exports, _secrets = run_main(tmp_path, mocks, preview=preview)

    session = mocks.registered("run").inputs
    # The id is unknown until the resource exists; what check validates against is known at preview.
    assert (
        isinstance(session["model_resources_id"], Unknown)
        if preview
        else session["model_resources_id"] == "mr-gpu"
    )
    assert session["model_resource_spec"] == {
        "base_model": MODEL,
        "lora_enabled": False,
        "compute_config": {"num_generator_replicas": 1},
    }
    assert preview or exports["run_resource"] == "mr-gpu"


@pytest.mark.parametrize("both", [True, False])
def test_a_session_names_its_resource_exactly_once(both):
    from pulumi_together_rl import TrainingSession, TrainingSessionArgs

    args = (
        TrainingSessionArgs(model_resources_id="mr-1", model_resource=object())
        if both
        else TrainingSessionArgs()
    )
    with pytest.raises(TypeError, match=r"set exactly one of model_resource .* or model_resources_id"):
        TrainingSession("run", args)
