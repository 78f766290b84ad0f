"""The policy pack's rules over plain stack items (the real-CLI runs are in tests/e2e/test_cli_preview_truth.py),
its conversion of the policy SDK's proxies, its stack-name seam, and the folder it writes."""

from __future__ import annotations

import json

import pytest
from pulumi_policy.proxy import unknown_checking_proxy

from pulumi_together_rl.policy import folder, pack, rules
from pulumi_together_rl.policy.rules import MODEL_RESOURCE as MR
from pulumi_together_rl.policy.rules import TRAINING_SESSION as TS
from pulumi_together_rl.policy.rules import UNKNOWN, Item


def resource(name, **props):
    return Item(urn=f"urn:mr:{name}", name=name, type=MR, props={"base_model": "Qwen/Qwen3.5-4B", **props})


def session(name, on=None, **props):
    depends = {"model_resources_id": [f"urn:mr:{on}"]} if on else {}
    props.setdefault("model_resources_id", UNKNOWN if on else None)
    return Item(urn=f"urn:ts:{name}", name=name, type=TS, props=props, depends_on=depends)


def test_the_budget_sums_the_prices_and_fails_over_it():
    items = [resource("a", price_per_hour=11.0, currency="USD"), resource("b", price_per_hour=33.0)]

    assert rules.price_summary(items) == "stack total 44.00 USD/h over 2 model resource(s) (a 11.00, b 33.00)"
    (violation,) = rules.budget(items, {"max_price_per_hour": 40})
    assert "exceeds the budget max_price_per_hour 40.00" in violation[0] and violation[1] is None
    assert rules.budget(items, {"max_price_per_hour": 44}) == []
    assert rules.budget(items, {}) == []  # no budget: reported, never enforced


def test_the_budget_fails_closed_when_a_price_is_unknown():
    items = [resource("a", price_per_hour=11.0), resource("b")]

    (violation,) = rules.budget(items, {"max_price_per_hour": 100})
    assert "price unknown for b" in violation[0] and "cannot be verified" in violation[0]


def test_session_caps_group_by_the_resource_each_session_depends_on():
    items = [
        resource("lora"),
        resource("full", lora_enabled=False),
        resource("big", base_model="Qwen/Qwen3.5-35B-A3B"),
        *[session(f"l{i}", on="lora") for i in range(5)],
        *[session(f"f{i}", on="full") for i in range(2)],
        *[session(f"b{i}", on="big") for i in range(3)],
    ]

    violations = rules.session_caps(items, {"lora_sessions_by_model": {"Qwen/Qwen3.5-35B-A3B": 2}})

    assert sorted(urn for _, urn in violations) == ["urn:mr:big", "urn:mr:full"]
    text = " ".join(m for m, _ in violations)
    assert (
        "full has 2 training sessions declared on it (f0, f1); a full-weight resource takes at most 1" in text
    )
    assert "big has 3" in text and "takes at most 2" in text
    sixth = rules.session_caps([resource("lora"), *[session(f"l{i}", on="lora") for i in range(6)]], {})
    assert [urn for _, urn in sixth] == ["urn:mr:lora"]


def test_sessions_on_an_outside_resource_are_grouped_by_its_id():
    items = [session(f"s{i}", model_resources_id="mr-outside") for i in range(6)]

    (violation,) = rules.session_caps(items, {})
    assert violation[0].startswith("model resource mr-outside has 6") and violation[1] is None


def test_the_idle_ceiling_counts_the_api_default():
    items = [resource("a"), resource("b", inactive_timeout=7200), resource("c", inactive_timeout=UNKNOWN)]

    assert [urn for _, urn in rules.idle_ceiling(items, {})] == ["urn:mr:b"]
    assert [urn for _, urn in rules.idle_ceiling(items, {"max_inactive_timeout": 1800})] == [
        "urn:mr:a",
        "urn:mr:b",
    ]


def test_force_stop_is_refused_on_listed_stacks_only_and_fails_closed_without_a_stack_name():
    items = [resource("a", force_stop=True), resource("b")]

    assert [urn for _, urn in rules.no_force_stop(items, {}, "prod")] == ["urn:mr:a"]
    assert rules.no_force_stop(items, {}, "dev") == []
    assert rules.no_force_stop(items, {"stacks": ["dev"]}, "dev") != []
    assert "cannot tell which stack" in rules.no_force_stop(items, {}, None)[0][0]
    assert rules.no_force_stop([resource("b")], {}, None) == []


def test_wandb_metadata_is_required_only_where_configured():
    items = [
        session("ok", metadata={"wandb": {"project": "p", "entity": "e"}}),
        session("none"),
        session("partial", metadata={"wandb": {"project": "p"}}),
        session("later", metadata=UNKNOWN),
    ]

    assert rules.wandb_metadata(items, {}, "prod") == []
    violations = rules.wandb_metadata(items, {"required": ["project", "entity"]}, "prod")
    assert [urn for _, urn in violations] == ["urn:ts:none", "urn:ts:partial"]
    assert "no W&B entity" in violations[1][0]
    assert rules.wandb_metadata(items, {"required": ["project"], "stacks": ["prod"]}, "dev") == []


def test_the_sdks_proxy_becomes_plain_values_with_unknowns_marked():
    unknown_string = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
    proxied = unknown_checking_proxy({"a": 1, "b": unknown_string, "c": {"d": [unknown_string, 2]}})

    assert pack._plain(proxied) == {"a": 1, "b": UNKNOWN, "c": {"d": [UNKNOWN, 2]}}


def test_the_stack_name_is_recorded_from_configure_stack(monkeypatch):
    from pulumi_policy import policy as sdk

    calls = []
    monkeypatch.setattr(
        sdk._PolicyAnalyzerServicer, "ConfigureStack", lambda self, req, ctx: calls.append(req)
    )
    monkeypatch.setattr(pack, "_stack", [])
    monkeypatch.delenv("PULUMI_STACK", raising=False)
    pack._record_the_stack()

    assert pack._stack_name() is None

    class Request:
        stack = "prod"
        tags = {}

    sdk._PolicyAnalyzerServicer.ConfigureStack(object(), Request(), None)
    assert pack._stack_name() == "prod" and len(calls) == 1  # the SDK's own method still ran


def test_the_executable_pack_reports_the_packages_version_as_the_folder_does(tmp_path):
    """The engine asks a pack started as an executable for its version (GetAnalyzerInfo); a folder's
    ``PulumiPolicy.yaml`` says it instead. Both are this package's version."""
    import subprocess
    import sys
    from pathlib import Path

    import grpc
    from google.protobuf import empty_pb2
    from pulumi.runtime.proto import analyzer_pb2_grpc

    from pulumi_together_rl import __version__

    executable = Path(sys.executable).parent / "together-rl-policy-pack"
    served = subprocess.Popen([str(executable)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        port = int(served.stdout.readline())
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            info = analyzer_pb2_grpc.AnalyzerStub(channel).GetAnalyzerInfo(empty_pb2.Empty(), timeout=30)
    finally:
        served.terminate()
        served.wait(timeout=30)
    folder.write(tmp_path / "policy", tmp_path / ".venv")

    assert info.name == pack.PACK_NAME and info.version == __version__
    assert f"version: {__version__}\n" in (tmp_path / "policy" / "PulumiPolicy.yaml").read_text()


def test_every_policy_has_a_config_schema_the_default_config_matches():
    names = {p.name for p in pack.policies()}

    assert names == set(folder.DEFAULT_CONFIG)
    for policy in pack.policies():
        allowed = set(policy.config_schema.properties) | {"enforcementLevel"}
        assert set(folder.DEFAULT_CONFIG[policy.name]) <= allowed, policy.name


def test_the_folder_names_the_venv_relative_to_itself(tmp_path):
    venv = tmp_path / "repo" / ".venv"
    venv.mkdir(parents=True)
    written = folder.write(tmp_path / "repo" / "infra" / "policy", venv)

    text = (tmp_path / "repo" / "infra" / "policy" / "PulumiPolicy.yaml").read_text()
    assert 'virtualenv: "../../.venv"' in text and "name: python" in text
    assert {p.name for p in written} == {"PulumiPolicy.yaml", "__main__.py", "policy-config.json"}
    config = tmp_path / "repo" / "infra" / "policy" / "policy-config.json"
    config.write_text(json.dumps({"mine": 1}))
    folder.write(config.parent, venv)
    assert json.loads(config.read_text()) == {"mine": 1}  # an existing config is kept


@pytest.mark.parametrize("bad", [{"max_price_per_hour": "x"}])
def test_a_non_number_budget_is_not_enforced_by_the_rule(bad):
    # The engine validates the config against the schema first; the rule itself never crashes on it.
    assert rules.budget([resource("a", price_per_hour=1.0)], bad) == []


def test_the_keep_ceiling_holds_keep_ready_until_to_the_configured_hours_ahead():
    from datetime import datetime, timezone

    now = datetime(2026, 12, 2, 12, 0, tzinfo=timezone.utc)
    items = [
        resource("demo", keep_ready_until="2026-12-04T18:00:00Z"),  # 54 h ahead
        resource("eval", keep_ready_until="2026-12-02T20:00:00+00:00"),  # 8 h ahead
        resource("later", keep_ready_until=UNKNOWN),  # computed at preview: checked at `up`
        resource("plain"),
    ]

    (violation,) = rules.keep_ceiling(items, {}, now)
    assert violation[1] == "urn:mr:demo"
    assert (
        "54.0 h from now, over the ceiling of 24 h" in violation[0] and "max_keep_ready_hours" in violation[0]
    )
    assert [u for _, u in rules.keep_ceiling(items, {"max_keep_ready_hours": 6}, now)] == [
        "urn:mr:demo",
        "urn:mr:eval",
    ]
    assert rules.keep_ceiling(items, {"max_keep_ready_hours": 72}, now) == []
    assert rules.keep_ceiling([resource("old", keep_ready_until="2020-01-01T00:00:00Z")], {}, now) == []


def test_the_executable_pack_tells_the_engine_its_port_without_pythonunbuffered():
    """The engine starts ``together-rl-policy-pack`` with its stdout a pipe and waits for the port on it; a user's
    environment has no PYTHONUNBUFFERED (this machine's does), and the port must not wait in a buffer."""
    import os
    import select
    import subprocess
    import sys
    from pathlib import Path

    executable = Path(sys.executable).parent / "together-rl-policy-pack"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    served = subprocess.Popen([str(executable)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    try:
        ready, _, _ = select.select([served.stdout], [], [], 30)
        assert ready, "the pack printed no port in 30 s: it is stuck in stdout's buffer"
        assert int(served.stdout.readline()) > 0
    finally:
        served.terminate()
        served.wait(timeout=30)
