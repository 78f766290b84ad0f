"""The plugin's package schema against the tables it is read from: where the two faces disagree, a test here
fails (a new input on one face only, a replace flag that is not the core's, a nested key check does not take)."""

from __future__ import annotations

from typing import Any

import pytest

from pulumi_together_rl.plugin.package_schema import BY_TOKEN, KINDS, package_schema
from pulumi_together_rl.resources.inputs import _inner_model
from pulumi_together_rl.resources.keys import OWNER_KEY, SPEC_KEY, camel, snake

SCHEMA = package_schema()


def _described(spec: dict[str, Any], where: str) -> list[str]:
    missing = [] if spec.get("description", "").strip() else [where]
    for name, prop in spec.get("properties", {}).items():
        missing += _described(prop, f"{where}.{name}")
    return missing


def test_every_resource_type_function_and_property_is_described():
    missing: list[str] = []
    for token, res in SCHEMA["resources"].items():
        missing += _described(
            {"description": res["description"], "properties": res["inputProperties"]}, token
        )
        missing += _described({"description": res["description"], "properties": res["properties"]}, token)
    for token, obj in SCHEMA["types"].items():
        missing += _described(obj, token)
    for token, fn in SCHEMA["functions"].items():
        missing += _described({"description": fn["description"], **fn.get("inputs", {})}, token)
        missing += _described({"description": fn["description"], **fn["outputs"]}, token)
    assert missing == []
    assert sorted(SCHEMA["resources"]) == [
        "together-rl:index:ModelResource",
        "together-rl:index:TrainingSession",
    ]
    assert sorted(SCHEMA["functions"]) == [
        "together-rl:index:estimateCost",
        "together-rl:index:getCheckpoints",
        "together-rl:index:getSupportedModels",
        "together-rl:index:latestCheckpoint",
    ]


def test_the_checkpoint_functions_answer_in_the_cores_shape():
    from pulumi_together_rl.resources import checkpoints
    from pulumi_together_rl.resources.functions import Checkpoint, CheckpointQuery

    answer = SCHEMA["types"]["together-rl:index:Checkpoint"]["properties"]
    assert sorted(answer) == sorted(camel(k) for k in Checkpoint.__annotations__)
    from pulumi_together_rl.client.models import CheckpointInfo

    assert set(checkpoints.as_data(CheckpointInfo(id="c", step="3"))) == set(Checkpoint.__annotations__)
    for token in ("together-rl:index:getCheckpoints", "together-rl:index:latestCheckpoint"):
        query = SCHEMA["functions"][token]["inputs"]["properties"]
        assert sorted(query) == sorted(camel(k) for k in CheckpointQuery.__annotations__)
        assert set(CheckpointQuery.__annotations__) == set(checkpoints.Query.model_fields)


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_the_inputs_are_the_cores_and_exactly_its_replacements_replace(kind):
    res = SCHEMA["resources"][kind.token]
    core = kind.schema
    assert sorted(res["inputProperties"]) == sorted(
        camel(k) for k in (*core.replace_on_changes, *core.update_in_place)
    )
    replacing = sorted(k for k, v in res["inputProperties"].items() if v.get("replaceOnChanges"))
    assert replacing == sorted(camel(k) for k in core.replace_on_changes)
    assert res["requiredInputs"] == [camel(core.required)]
    # The state holds every input, what check adds (but the dynamic face's spec) and what the API reports.
    added = [k for k in core.check_added if k != SPEC_KEY]
    expected = {*core.replace_on_changes, *core.update_in_place, *added, *core.output_keys, OWNER_KEY}
    assert sorted(res["properties"]) == sorted(camel(k) for k in expected)


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_every_object_type_takes_exactly_the_keys_check_takes(kind):
    """Each nested input's type lists the keys of the pydantic model check validates it with, at every depth."""
    checks_module = __import__(kind.check.__module__, fromlist=["Inputs"])
    res = SCHEMA["resources"][kind.token]

    def compare(spec: dict[str, Any], model: Any, where: str) -> None:
        obj = SCHEMA["types"][spec["$ref"].removeprefix("#/types/")]
        assert sorted(obj["properties"]) == sorted(camel(f) for f in model.model_fields), where
        for name, prop in obj["properties"].items():
            inner = _inner_model(model.model_fields[snake(name)].annotation)
            if "$ref" in prop:
                compare(prop, inner, f"{where}.{name}")

    for name, prop in res["inputProperties"].items():
        if "$ref" in prop:
            compare(prop, _inner_model(checks_module.Inputs.model_fields[snake(name)].annotation), name)


def test_every_name_round_trips_between_the_faces():
    names = set()
    for res in SCHEMA["resources"].values():
        names |= {*res["inputProperties"], *res["properties"]}
    for obj in SCHEMA["types"].values():
        names |= set(obj["properties"])
    assert [n for n in names if camel(snake(n)) != n] == []


def test_the_api_key_is_a_secret_and_the_python_sdk_stays_clear_of_this_package():
    assert SCHEMA["config"]["variables"]["apiKey"]["secret"] is True
    assert SCHEMA["provider"]["inputProperties"]["apiKey"]["secret"] is True
    assert SCHEMA["language"]["python"]["packageName"] != "pulumi_together_rl"
    assert set(BY_TOKEN) == set(SCHEMA["resources"])


def test_the_registry_metadata_and_every_languages_names():
    """What the Pulumi Registry lists (its publishing guide's fields), the logo the .NET generator packs (a file of
    this repository, docs/logo.png, which logoUrl names on the main branch), and a section per SDK language."""
    from pathlib import Path

    from pulumi_together_rl.plugin.package_schema import repository

    for field in ("displayName", "description", "publisher", "logoUrl", "pluginDownloadURL", "repository"):
        assert SCHEMA[field], field
    assert {"category/cloud", "kind/native"} <= set(SCHEMA["keywords"])
    prefix = f"https://raw.githubusercontent.com/{repository()}/main/"
    assert SCHEMA["logoUrl"].startswith(prefix)
    logo = Path(__file__).resolve().parents[2] / SCHEMA["logoUrl"].removeprefix(prefix)
    assert logo.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert set(SCHEMA["language"]) == {"python", "nodejs", "go", "java", "csharp"}
    assert SCHEMA["language"]["go"]["importBasePath"] == (f"github.com/{repository()}/sdk/go/togetherrl")
    # Neither Pulumi's own Java package nor its NuGet prefix (the default root namespace gives Pulumi.TogetherRl).
    assert not SCHEMA["language"]["java"]["basePackage"].startswith("com.pulumi")
    assert not SCHEMA["language"]["csharp"]["rootNamespace"].startswith("Pulumi.")
    assert SCHEMA["language"]["csharp"]["rootNamespace"] != "Pulumi"
