"""The resource classes under pulumi mocks: type tokens, what they register, the display_name default, get()."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys

import pulumi
import pytest

import pulumi_together_rl
from pulumi_together_rl import ModelResource, ModelResourceArgs, TrainingSession, TrainingSessionArgs


class CapturingMocks(pulumi.runtime.Mocks):
    def __init__(self) -> None:
        self.registered: list[pulumi.runtime.MockResourceArgs] = []

    def new_resource(self, args):
        self.registered.append(args)
        outputs = {k: v for k, v in args.inputs.items() if k != "__provider"}
        if args.typ.endswith(":ModelResource"):
            outputs.update(status="READY", effective_compute_config={"gpu_type": "B200-SXM"})
        return [args.resource_id or f"{args.name}-id", outputs]

    def call(self, args):
        return {}


@pytest.fixture
def mocks():
    mocks = CapturingMocks()
    pulumi.runtime.set_mocks(mocks, project="test", stack="dev", preview=False)
    return mocks


@pulumi.runtime.test
def test_session_display_name_defaults_to_the_resource_name_and_wires_the_resource_id(mocks):
    gpu = ModelResource("qwen", ModelResourceArgs(base_model="Qwen/Qwen3.5-4B"))
    run = TrainingSession("gsm8k-2", TrainingSessionArgs(model_resources_id=gpu.id, lora_config={"rank": 32}))

    def verify(values):
        display_name, resource_id, status, effective = values
        by_name = {r.name: r for r in mocks.registered}
        assert by_name["qwen"].typ == "pulumi-python:dynamic/together:ModelResource"
        assert by_name["gsm8k-2"].typ == "pulumi-python:dynamic/together:TrainingSession"
        assert by_name["gsm8k-2"].inputs["display_name"] == "gsm8k-2"
        assert by_name["gsm8k-2"].inputs["model_resources_id"] == "qwen-id"
        assert display_name == "gsm8k-2" and resource_id == "qwen-id"
        assert status == "READY" and effective == {"gpu_type": "B200-SXM"}

    return pulumi.Output.all(
        run.display_name, run.model_resources_id, gpu.status, gpu.effective_compute_config
    ).apply(verify)


@pulumi.runtime.test
def test_an_explicit_display_name_is_kept(mocks):
    run = TrainingSession("res-name", TrainingSessionArgs(model_resources_id="mr-1", display_name="shown"))
    return run.display_name.apply(lambda name: _equal(name, "shown"))


@pulumi.runtime.test
def test_the_display_name_default_is_cut_to_the_apis_128_characters(mocks):
    name = "sweep-" + "x" * 200
    run = TrainingSession(name, TrainingSessionArgs(model_resources_id="mr-1"))
    return run.display_name.apply(lambda shown: _equal(shown, name[:128]))


@pulumi.runtime.test
def test_get_reads_an_existing_object_by_id(mocks):
    session = TrainingSession.get("existing", "ts-123")

    def verify(ident):
        assert ident == "ts-123"
        assert mocks.registered[-1].resource_id == "ts-123"
        assert "display_name" not in mocks.registered[-1].inputs  # get() declares nothing

    return session.id.apply(verify)


def test_public_surface():
    assert set(pulumi_together_rl.__all__) >= {"ModelResource", "ModelResourceArgs", "TrainingSession"}
    assert pulumi_together_rl.__version__ == importlib.metadata.version("pulumi-together-rl")
    with pytest.raises(AttributeError):
        _ = pulumi_together_rl.NoSuchThing


def _equal(actual, expected):
    assert actual == expected


def test_importing_the_client_does_not_import_pulumi():
    import subprocess
    import sys

    code = "import sys, pulumi_together_rl.client; print('pulumi' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_every_typed_dict_field_has_a_docstring():
    """The Args' nested shapes are the user's reference too: each field is followed by its docstring."""
    import ast
    import inspect

    from pulumi_together_rl.resources import model_resource, training_session

    missing = []
    for module in (model_resource, training_session):
        for node in ast.parse(inspect.getsource(module)).body:
            is_typed_dict = isinstance(node, ast.ClassDef) and any(
                isinstance(base, ast.Name) and base.id == "TypedDict" for base in node.bases
            )
            if not is_typed_dict:
                continue
            body = node.body
            for i, item in enumerate(body):
                if isinstance(item, ast.AnnAssign):
                    following = body[i + 1] if i + 1 < len(body) else None
                    documented = isinstance(following, ast.Expr) and isinstance(
                        getattr(following, "value", None), ast.Constant
                    )
                    if not documented:
                        missing.append(f"{node.name}.{item.target.id}")
    assert missing == []


@pytest.mark.parametrize(
    ("module", "cls", "schema"),
    [
        ("model_resource", "ModelResource", "MODEL_RESOURCE"),
        ("training_session", "TrainingSession", "TRAINING_SESSION"),
    ],
)
def test_a_resource_class_registers_exactly_its_kinds_inputs_and_outputs(module, cls, schema):
    """The program side takes its property names from the class's annotations (it imports no schema): they
    must be the kind's own tables, every input and every output, nothing else."""
    import importlib

    resource = getattr(importlib.import_module(f"pulumi_together_rl.resources.{module}"), cls)
    kind = getattr(importlib.import_module(f"pulumi_together_rl.resources.{module}_schema"), schema)
    annotated = {name for name in vars(resource)["__annotations__"] if not name.startswith("_")}
    assert annotated == {*kind.input_keys, *kind.output_keys}


def test_a_program_that_declares_resources_imports_no_http_client_no_wire_models_and_no_journal():
    """Only what builds the declaration: the provider side loads the rest at its first call."""
    code = (
        "import sys\n"
        "import pulumi\n"
        "from pulumi_together_rl import ModelResource, ModelResourceArgs, TrainingSession, TrainingSessionArgs\n"
        "heavy = ('httpx', 'pydantic', 'pulumi_together_rl.ownership.journal', 'pulumi_together_rl.client.api',\n"
        "         'pulumi_together_rl.client.models', 'pulumi_together_rl.resources.lifecycle')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    found = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert found.stdout.strip() == "[]"
