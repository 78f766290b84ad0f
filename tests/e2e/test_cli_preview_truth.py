"""Through the real Pulumi CLI: what `pulumi preview` refuses before anything bills, what it says a stack costs,
and the Together RL policy pack (budget, session caps) run with `--policy-pack`.

Every preview here must leave the emulator without a single write: a check that fails after a POST would be a
GPU billing for a change that `up` cannot finish.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from harness.cli import ESTIMATE, active, policy_pack, writes

from pulumi_together_rl.client import TogetherRL
from pulumi_together_rl.client.models import ModelResourceCreateRequest

ROOT = Path(__file__).resolve().parents[2]
BIG = "Qwen/Qwen3.5-35B-A3B"  # emulator: max_rank 32, LoRA only, 4 trainer GPUs + 2 per generator replica
SMALL = "Qwen/Qwen3.5-4B"  # max_rank 64; LoRA or full weight

# One program, shaped by its stack config: `resources` is a list of {name, base_model, lora_enabled?,
# max_price?, replicas?, adopt_id?, force_stop?, keep?}; `sessions` is a list of {name, on (a resource name) | id, rank?, adopt_id?}.
PROGRAM = """
import pulumi
from pulumi_together_rl import ModelResource, ModelResourceArgs, TrainingSession, TrainingSessionArgs

config = pulumi.Config()
resources = {}
for r in config.get_object("resources") or []:
    resources[r["name"]] = ModelResource(r["name"], ModelResourceArgs(
        base_model=r["base_model"],
        lora_enabled=r.get("lora_enabled"),
        compute_config={"num_generator_replicas": r.get("replicas", 1)},
        max_price_per_hour=r.get("max_price"),
        adopt_id=r.get("adopt_id"),
        force_stop=r.get("force_stop"),
        keep_ready_until=r.get("keep"),
    ))
for s in config.get_object("sessions") or []:
    TrainingSession(s["name"], TrainingSessionArgs(
        model_resource=resources[s["on"]] if "on" in s else None,
        model_resources_id=s.get("id"),
        lora_config={"rank": s["rank"]} if "rank" in s else None,
        adopt_id=s.get("adopt_id"),
    ))
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "Pulumi.yaml").write_text(
        "name: preview-truth\nruntime:\n  name: python\n  options:\n    toolchain: uv\n"
        f"    virtualenv: {ROOT / '.venv'}\n"
    )
    (folder / "__main__.py").write_text(PROGRAM)
    return folder


def _stack(cli_stack, project, emulator, **config):
    stack = cli_stack(project)
    stack.init({f"preview-truth:{k}": v for k, v in config.items()})
    emulator.control.clear_requests()
    return stack


def _refused(result, field: str) -> str:
    """The preview failed on a check failure naming ``field``; its text."""
    assert result.returncode != 0, str(result)
    output = result.output
    assert re.search(rf"\b{re.escape(field)}\b", output), str(result)
    assert "Traceback" not in output
    return output


def test_a_too_high_rank_on_a_new_resource_fails_preview_with_no_post(cli_stack, project, emulator):
    stack = _stack(
        cli_stack,
        project,
        emulator,
        resources=[{"name": "gpu", "base_model": BIG}],
        sessions=[{"name": "run", "on": "gpu", "rank": 48}],
    )

    output = _refused(stack.preview(check=False), "lora_config.rank")

    assert "rank 48 exceeds the max_rank 32 of Qwen/Qwen3.5-35B-A3B" in output
    assert writes(emulator) == []
    # And `pulumi up` (its preview) fails the same way, before the model resource is created. (With
    # --skip-preview the engine registers the session only once the resource has its id: too late.)
    _refused(stack.run("up", "--yes", check=False), "lora_config.rank")
    assert writes(emulator) == [] and active(emulator)["model_resources"] == []


def test_lora_config_on_a_new_full_weight_resource_fails_preview(cli_stack, project, emulator):
    stack = _stack(
        cli_stack,
        project,
        emulator,
        resources=[{"name": "gpu", "base_model": SMALL, "lora_enabled": False}],
        sessions=[{"name": "run", "on": "gpu", "rank": 8}],
    )

    output = _refused(stack.preview(check=False), "lora_config")

    assert "full-weight" in output and writes(emulator) == []


# One case through the CLI; the adopt_id cases are check-tier tests (tests/resources/test_preview_truth.py).
@pytest.mark.parametrize("what", ["model_resources_id"])
def test_a_reference_that_does_not_exist_fails_preview_naming_its_field(cli_stack, project, emulator, what):
    with TogetherRL(api_key=emulator.api_key, base_url=emulator.base_url) as client:
        live = client.create_model_resource(ModelResourceCreateRequest(base_model=SMALL)).id
    config = {
        "model_resources_id": {"sessions": [{"name": "run", "id": "mr-does-not-exist"}]},
        "session adopt_id": {"sessions": [{"name": "run", "id": live, "adopt_id": "ts-does-not-exist"}]},
        "resource adopt_id": {"resources": [{"name": "gpu", "base_model": SMALL, "adopt_id": "mr-nope"}]},
    }[what]
    stack = _stack(cli_stack, project, emulator, **config)

    output = _refused(stack.preview(check=False), what.split()[-1])

    assert "exists" in output and "404" in output
    assert "skipped" not in output.lower() and "pulumi refresh" not in output
    assert writes(emulator) == []


def test_preview_shows_each_model_resources_price_and_the_ceiling_fails_it(cli_stack, project, emulator):
    stack = _stack(
        cli_stack,
        project,
        emulator,
        resources=[
            {"name": "small", "base_model": SMALL},  # 1 + 1 GPUs at 5.50 = 11.00
            {"name": "big", "base_model": BIG, "replicas": 2},  # 4 + 2 x 2 GPUs = 44.00
        ],
    )

    preview = stack.preview("--diff")

    assert "model resource (Qwen/Qwen3.5-4B): estimated 11.00 USD/h" in preview.output
    assert "model resource (Qwen/Qwen3.5-35B-A3B): estimated 44.00 USD/h" in preview.output
    assert re.search(r"price_per_hour\s*:\s*11", preview.stdout) and re.search(
        r"currency\s*:\s*\"USD\"", preview.stdout
    )
    assert writes(emulator, estimates=True) == [ESTIMATE] * 2

    stack.set("preview-truth:resources", [{"name": "big", "base_model": BIG, "replicas": 2, "max_price": 40}])
    output = _refused(stack.preview(check=False), "max_price_per_hour")
    assert "44.00 USD/h, exceeds max_price_per_hour 40.00" in output
    assert writes(emulator) == []

    # Deployed, the price is an output with its currency; an unchanged preview asks the API nothing.
    stack.set("preview-truth:resources", [{"name": "small", "base_model": SMALL}])
    stack.up()
    outputs = stack.resources()["small"]["outputs"]
    assert outputs["price_per_hour"] == 11.0 and outputs["currency"] == "USD"
    writes(emulator)
    stack.preview("--expect-no-changes")
    assert writes(emulator) == []

    # A replacement: the engine checks the new inputs twice (the second time without the old ones); the price is
    # said once.
    stack.set("preview-truth:resources", [{"name": "small", "base_model": SMALL, "replicas": 2}])
    replace = stack.preview()
    assert "small replace" in replace.stdout
    diagnostics = replace.stdout.split("Diagnostics:", 1)[1]
    assert diagnostics.count("model resource (Qwen/Qwen3.5-4B): estimated 16.50 USD/h") == 1, replace.stdout
    stack.destroy()


# ------------------------------------------------------------------------------------------- policy pack


def test_the_policy_pack_enforces_the_budget_and_reports_the_total(cli_stack, project, emulator, tmp_path):
    stack = _stack(
        cli_stack,
        project,
        emulator,
        resources=[{"name": "small", "base_model": SMALL}, {"name": "big", "base_model": BIG}],
    )  # 11.00 + 33.00 (4 trainer GPUs + 2 for the generator replica) = 44.00 USD/h
    over, over_config = policy_pack(tmp_path, {"together-rl-budget": {"max_price_per_hour": 40}})

    result = stack.preview("--policy-pack", str(over), "--policy-pack-config", str(over_config), check=False)

    assert result.returncode != 0, str(result)
    assert "together-rl-budget" in result.output and "mandatory" in result.output
    assert "stack total 44.00 USD/h over 2 model resource(s) (big 33.00, small 11.00)" in result.output
    assert "exceeds the budget max_price_per_hour 40.00" in result.output
    assert writes(emulator, estimates=True) == [ESTIMATE] * 2  # nothing created

    over_config.write_text(json.dumps({"together-rl-budget": {"max_price_per_hour": 50}}))
    passed = stack.preview("--policy-pack", str(over), "--policy-pack-config", str(over_config))
    assert "stack total 44.00 USD/h over 2 model resource(s)" in passed.output
    assert "exceeds" not in passed.output


def test_the_policy_pack_refuses_six_sessions_on_one_lora_resource(cli_stack, project, emulator, tmp_path):
    sessions = [{"name": f"run-{i}", "on": "gpu", "rank": 8} for i in range(6)]
    stack = _stack(
        cli_stack, project, emulator, resources=[{"name": "gpu", "base_model": SMALL}], sessions=sessions
    )
    folder, settings = policy_pack(tmp_path, {})

    result = stack.preview("--policy-pack", str(folder), "--policy-pack-config", str(settings), check=False)

    assert result.returncode != 0, str(result)
    assert "together-rl-session-caps" in result.output
    assert "model resource gpu has 6 training sessions declared on it" in result.output
    assert "takes at most 5" in result.output
    assert writes(emulator) == []
    # Five pass.
    stack.set("preview-truth:sessions", sessions[:5])
    stack.preview("--policy-pack", str(folder), "--policy-pack-config", str(settings))


def test_the_policy_pack_runs_as_an_executable_too(cli_stack, project, emulator, tmp_path):
    stack = _stack(
        cli_stack, project, emulator, resources=[{"name": "gpu", "base_model": SMALL, "force_stop": True}]
    )
    # The stack's name is random: the rule is configured with it.
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"together-rl-no-force-stop": {"stacks": [stack.name]}}))

    result = stack.preview(
        "--policy-pack",
        str(ROOT / ".venv" / "bin" / "together-rl-policy-pack"),
        "--policy-pack-config",
        str(settings),
        check=False,
    )

    assert result.returncode != 0, str(result)
    assert f"sets force_stop, which is not allowed on stack {stack.name}" in result.output
    settings.write_text(json.dumps({"together-rl-no-force-stop": {"stacks": ["prod"]}}))
    stack.preview(
        "--policy-pack",
        str(ROOT / ".venv" / "bin" / "together-rl-policy-pack"),
        "--policy-pack-config",
        str(settings),
    )


def test_the_policy_pack_caps_how_far_ahead_a_stack_keeps_a_gpu(cli_stack, project, emulator, tmp_path):
    from datetime import datetime, timedelta, timezone

    keep = (datetime.now(timezone.utc) + timedelta(hours=54)).strftime("%Y-%m-%dT%H:%M:%SZ")
    stack = _stack(
        cli_stack, project, emulator, resources=[{"name": "demo", "base_model": SMALL, "keep": keep}]
    )
    folder, settings = policy_pack(tmp_path, {})  # the default ceiling: 24 h

    result = stack.preview("--policy-pack", str(folder), "--policy-pack-config", str(settings), check=False)

    assert result.returncode != 0, str(result)
    assert "together-rl-keep-ceiling" in result.output
    assert f"model resource demo is kept READY until {keep} (keep_ready_until)" in result.output
    assert "over the ceiling of 24 h" in result.output
    assert writes(emulator) == []
    # A stack whose config allows three days passes.
    settings.write_text(json.dumps({"together-rl-keep-ceiling": {"max_keep_ready_hours": 72}}))
    passed = stack.preview("--policy-pack", str(folder), "--policy-pack-config", str(settings))
    assert "keep_ready_until" not in passed.output


# The same pack over the plugin face: a Pulumi YAML program of two priced resources and six sessions on one.
PLUGIN_PROGRAM = {
    "name": "preview-truth",
    "runtime": "yaml",
    "plugins": {"providers": [{"name": "together-rl", "path": str(ROOT / "provider" / "pulumi_together_rl" / "plugin")}]},
    "config": {"sessions": {"type": "integer", "default": 6}},
    "resources": {
        "small": {"type": "together-rl:ModelResource", "properties": {"baseModel": SMALL, "computeConfig": {"numGeneratorReplicas": 1}}},
        "big": {"type": "together-rl:ModelResource", "properties": {"baseModel": BIG, "computeConfig": {"numGeneratorReplicas": 1}}},
        **{
            f"run-{i}": {"type": "together-rl:TrainingSession", "properties": {"modelResourcesId": "${small.id}", "loraConfig": {"rank": 8}}}
            for i in range(6)
        },
    },
}  # fmt: skip


def test_the_policy_pack_judges_the_plugins_resources_too(cli_stack, emulator, tmp_path):
    import yaml
    from harness.faces import PLUGIN

    folder = tmp_path / "yaml-project"
    folder.mkdir()
    (folder / "Pulumi.yaml").write_text(yaml.safe_dump(PLUGIN_PROGRAM))
    stack = cli_stack(folder, face=PLUGIN).init()
    emulator.control.clear_requests()
    pack, settings = policy_pack(tmp_path, {"together-rl-budget": {"max_price_per_hour": 40}})

    result = stack.preview("--policy-pack", str(pack), "--policy-pack-config", str(settings), check=False)

    assert result.returncode != 0, str(result)
    assert "stack total 44.00 USD/h over 2 model resource(s) (big 33.00, small 11.00)" in result.output
    assert "exceeds the budget max_price_per_hour 40.00" in result.output
    assert "model resource small has 6 training sessions declared on it" in result.output
    assert writes(emulator) == []
