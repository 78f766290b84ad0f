"""The account's spend (resources/spend.py), as pure data: the split by whose the journal says an object is, the
line a preview says, and the sentence of the cap."""

from __future__ import annotations

import pytest

from pulumi_together_rl import config, ours
from pulumi_together_rl.plugin import package_schema
from pulumi_together_rl.plugin.properties import in_words
from pulumi_together_rl.plugin.provider import CONFIG_KEYS
from pulumi_together_rl.resources import spend
from pulumi_together_rl.resources.spend import Active

STACK = ours.Owner("organization", "proj", "dev", "gpu")
OBJECTS = [
    Active("mr-1", 5.5, "organization/proj/dev/gpu"),  # this stack
    Active("mr-2", 11.0, "-/proj/dev/other"),  # this stack, written by the plugin face (no organization)
    Active("mr-3", 44.0, "organization/proj/a/big"),
    Active("mr-4", 5.5, "organization/proj/b/small"),
    Active("mr-5", 5.5, "organization/other-proj/dev/gpu"),  # same stack name, another project: another stack
    Active("mr-6", 3.25, None),  # nothing names it
    Active("mr-7", None, "organization/proj/b/old"),  # a configuration the API would not price
    Active("mr-8", 5.5, "not an owner"),  # nothing names it either: not a declaration
]


def test_the_split_goes_by_the_declarations_project_and_stack():
    found = spend.split(OBJECTS, STACK)

    assert [a.id for a in found.this] == ["mr-1", "mr-2"]
    assert {k: [a.id for a in v] for k, v in found.others.items()} == {
        "proj/a": ["mr-3"],
        "proj/b": ["mr-4", "mr-7"],
        "other-proj/dev": ["mr-5"],
    }
    assert list(found.others) == ["proj/a", "other-proj/dev", "proj/b"]  # largest first, then by name
    assert [a.id for a in found.unnamed] == ["mr-6", "mr-8"]
    assert found.total == 80.25
    assert [a.id for a in found.unpriced] == ["mr-7"]


def test_an_organization_known_on_both_sides_must_match():
    found = spend.split([Active("mr-1", 1.0, "acme/proj/dev/gpu")], STACK)

    assert found.this == () and list(found.others) == ["proj/dev"]


def test_the_line_gives_the_total_and_each_part():
    line = spend.line(spend.split(OBJECTS, STACK))

    assert line == (
        "account spend: 80.25 USD/h over 8 active model resources of this API key's user: this stack 16.50 (2), "
        "other stacks 55.00 (4) (proj/a 44.00 (1), other-proj/dev 5.50 (1), proj/b 5.50 (2)), nothing names 8.75 "
        "(2); price unknown for mr-7"
    )


def test_an_empty_account_is_a_line_too():
    assert spend.line(spend.split([], STACK)) == (
        "account spend: 0.00 USD/h over 0 active model resources of this API key's user: this stack 0.00 (0), "
        "other stacks 0.00 (0), nothing names 0.00 (0)"
    )


def test_the_cap_fails_naming_the_figures_and_the_largest_spenders():
    found = spend.split(OBJECTS, STACK)

    sentence = spend.cap_failure(found, STACK, {"gpu": 11.0, "extra": 5.5}, 90.0, "gpu")

    assert sentence == (
        "checking model resource (gpu): the account's spend after this change, 96.75 USD/h (now 80.25: this stack "
        "16.50 (2), other stacks 55.00 (4) (proj/a 44.00 (1), other-proj/dev 5.50 (1), proj/b 5.50 (2)), nothing "
        "names 8.75 (2); this change adds 16.50: extra 5.50, gpu 11.00), exceeds together:maxAccountPricePerHour 90.00 "
        "by 6.75; the largest spenders: proj/a/big (mr-3) 44.00, gpu (this change) 11.00, other (mr-2, this "
        "stack) 11.00. Stop model resources the account no longer needs, or raise together:maxAccountPricePerHour."
    )


def test_within_the_cap_nothing_fails_and_the_cap_itself_is_allowed():
    found = spend.split(OBJECTS, STACK)

    assert spend.cap_failure(found, STACK, {"gpu": 11.0}, 91.25, "gpu") is None
    assert spend.cap_failure(found, STACK, {"gpu": 11.0}, 91.24, "gpu") is not None


def test_the_plugin_reads_the_cap_in_its_own_namespace():
    sentence = spend.cap_failure(spend.split([], STACK), STACK, {"gpu": 11.0}, 5.0, "gpu")

    assert "together-rl:maxAccountPricePerHour 5.00" in in_words(sentence or "")


@pytest.mark.parametrize("raw", ["x", "0", "-3", "nan", "inf"])
def test_a_cap_that_is_not_a_price_is_refused(monkeypatch, raw):
    monkeypatch.setattr(config, "_configured", {config.CONFIG_MAX_ACCOUNT_PRICE: raw})

    cap, bad = spend.cap_setting()

    assert cap is None and bad is not None and "greater than 0" in bad


def test_a_cap_from_the_stack_config_is_a_number(monkeypatch):
    monkeypatch.setattr(config, "_configured", {config.CONFIG_MAX_ACCOUNT_PRICE: "42.5"})

    assert spend.cap_setting() == (42.5, None)


def test_the_settings_are_one_table_on_both_faces():
    assert config.SETTINGS == tuple(ours.DYNAMIC.config_key(name) for name in ours.SETTINGS)
    assert tuple(package_schema.CONFIG) == ours.SETTINGS
    assert CONFIG_KEYS == {name: f"together:{name}" for name in ours.SETTINGS}


# ------------------------------------------------------------------------------- the policy pack's rule


def _item(name, **props):
    from pulumi_together_rl.policy.rules import MODEL_RESOURCE, Item

    return Item(
        urn=f"urn:mr:{name}",
        name=name,
        type=MODEL_RESOURCE,
        props={"owner": f"organization/proj/dev/{name}", **props},
    )


def _read(*objects, unread=None):
    asked = []

    def account():
        asked.append(1)
        return spend.Account(tuple(objects), unread=unread)

    return account, asked


def test_the_policy_adds_the_changes_new_resources_to_the_account():
    from pulumi_together_rl.policy import rules

    items = [_item("kept", price_per_hour=5.5, status="READY"), _item("new", price_per_hour=11.0)]
    account, _ = _read(*OBJECTS)

    ((message, urn),) = rules.account_budget(items, {"max_account_price_per_hour": 90}, account)

    assert urn is None
    assert message.startswith(
        "the account's spend after this change, 91.25 USD/h (now 80.25: this stack 16.50 (2)"
    )
    assert "this change adds 11.00: new 11.00), exceeds max_account_price_per_hour 90.00 by 1.25" in message
    assert message.endswith("or raise max_account_price_per_hour in the policy config")
    assert rules.account_budget(items, {"max_account_price_per_hour": 91.25}, account) == []


def test_the_policy_asks_nothing_without_a_cap_or_a_new_resource():
    from pulumi_together_rl.policy import rules

    account, asked = _read(*OBJECTS)

    assert rules.account_budget([_item("new", price_per_hour=11.0)], {}, account) == []
    assert rules.account_budget([_item("kept", price_per_hour=5.5, status="READY")],
                                {"max_account_price_per_hour": 1}, account) == []  # fmt: skip
    assert asked == []


def test_the_policy_fails_closed_when_the_account_or_a_price_is_unknown():
    from pulumi_together_rl.policy import rules

    account, _ = _read(unread="no Together API key is configured")
    ((message, _),) = rules.account_budget(
        [_item("new", price_per_hour=1.0)], {"max_account_price_per_hour": 90}, account
    )
    assert (
        "cannot be verified against max_account_price_per_hour 90.00 (no Together API key is configured)"
        in message
    )
    assert "TOGETHER_API_KEY" in message

    account, _ = _read()
    ((message, _),) = rules.account_budget([_item("new")], {"max_account_price_per_hour": 90}, account)
    assert "(no estimate for new)" in message
