"""Every input's replace-or-update rule, input by input, for both kinds: a change, and a value that becomes
unknown at preview.

The expected rule is written here from the API's contract (a model resource has no update endpoint; a session's
``display_name`` and ``metadata`` PATCH in place; provider options never replace), not read from the
code's tables: marking ``load_optimizer`` as in place, or a diff that misses an input becoming unknown, fails.
"""

from __future__ import annotations

import pytest
from pulumi.output import Unknown

from pulumi_together_rl.resources import model_resource_schema, training_session_schema
from pulumi_together_rl.resources.model_resource import _ModelResourceProvider
from pulumi_together_rl.resources.training_session import _TrainingSessionProvider

REPLACE, UPDATE = "replace", "update"

RESOURCE_RULES = {
    # input: (rule, old value, new value)
    "base_model": (REPLACE, "Qwen/Qwen3.5-4B", "Qwen/Qwen3.5-9B"),
    "base_weights_ref": (REPLACE, "together://ml_a", "together://ml_b"),
    "compute_config": (REPLACE, {"num_generator_replicas": 1}, {"num_generator_replicas": 2}),
    "lora_enabled": (REPLACE, True, False),
    "optimizer_config": (REPLACE, {"adam": {}}, {"muon": {}}),
    "inactive_timeout": (REPLACE, 3600, 600),
    "create_timeout": (UPDATE, 3600.0, 60.0),
    "delete_timeout": (UPDATE, 900.0, 60.0),
    "force_stop": (UPDATE, False, True),
    "adopt_id": (UPDATE, "mr-a", "mr-b"),
    "max_price_per_hour": (UPDATE, 20.0, 30.0),
    "keep_ready_until": (
        UPDATE,
        "2026-12-04T18:00:00Z",
        "2026-12-05T18:00:00Z",
    ),  # extend-expiry, never a replace
    "stop_after": (UPDATE, "8h", "10h"),  # while ahead (the state holds no passed stop_at): test_deadline.py
}
SESSION_RULES = {
    "model_resources_id": (REPLACE, "mr-a", "mr-b"),
    "lora_config": (REPLACE, {"rank": 8}, {"rank": 16}),
    "resume_from_checkpoint_id": (REPLACE, "ck-a", "ck-b"),
    "load_optimizer": (REPLACE, True, False),
    "display_name": (UPDATE, "a", "b"),
    "metadata": (UPDATE, {"wandb": {"project": "a"}}, {"wandb": {"project": "b"}}),
    "create_timeout": (UPDATE, 1800.0, 60.0),
    "delete_timeout": (UPDATE, 600.0, 60.0),
    "adopt_id": (UPDATE, "ts-a", "ts-b"),
    "stop_after": (UPDATE, "8h", "10h"),  # while ahead (the state holds no passed stop_at): test_deadline.py
}
KINDS = [
    pytest.param(
        _ModelResourceProvider(), RESOURCE_RULES, {"base_model": "Qwen/Qwen3.5-4B"}, id="model_resource"
    ),
    pytest.param(
        _TrainingSessionProvider(), SESSION_RULES, {"model_resources_id": "mr-a"}, id="training_session"
    ),
]
CASES = [
    pytest.param(provider, name, *rule, base, id=f"{kind.id}-{name}")
    for kind in KINDS
    for provider, rules, base in [kind.values]
    for name, rule in rules.items()
]


def test_the_rules_cover_every_declared_input_of_each_kind():
    for schema, rules in (
        (model_resource_schema.MODEL_RESOURCE, RESOURCE_RULES),
        (training_session_schema.TRAINING_SESSION, SESSION_RULES),
    ):
        assert set(rules) == {*schema.replace_on_changes, *schema.update_in_place}


@pytest.mark.parametrize(("provider", "name", "rule", "old", "new", "base"), CASES)
def test_a_change_of_each_input_replaces_or_updates_as_its_rule_says(provider, name, rule, old, new, base):
    olds = {**base, name: old, "status": "READY"}
    diff = provider.diff("id-1", olds, {**base, name: new})
    assert diff.changes is True
    assert diff.replaces == ([name] if rule == REPLACE else [])
    assert diff.delete_before_replace is (True if rule == REPLACE else None)


@pytest.mark.parametrize(("provider", "name", "rule", "old", "new", "base"), CASES)
def test_each_input_becoming_unknown_at_preview_is_a_change_of_its_rule(provider, name, rule, old, new, base):
    olds = {**base, name: old}
    diff = provider.diff("id-1", olds, {**base, name: Unknown()})
    assert diff.changes is True
    assert diff.replaces == ([name] if rule == REPLACE else [])


@pytest.mark.parametrize(("provider", "name", "rule", "old", "new", "base"), CASES)
def test_an_unchanged_input_is_no_change(provider, name, rule, old, new, base):
    olds = {**base, name: old, "status": "READY", "price_per_hour": 11.0}
    diff = provider.diff("id-1", olds, {**base, name: old})
    assert diff.changes is False and diff.replaces == []
