"""The account's spend at a preview, through the providers against the emulator: the split by the create journal's
owners (another user's objects not counted), the cap, and the bound on the requests a preview makes."""

from __future__ import annotations

import threading
from collections import Counter

import pytest

from pulumi_together_rl.client.models import ComputeConfigParams, ModelResourceCreateRequest
from pulumi_together_rl.resources import process

from .conftest import MODEL, OWNER, configure

LIST = ("GET", "/v1/rl/model-resources")
ESTIMATE = ("POST", "/v1/rl/model-resources/estimate-cost")
MODELS = ("GET", "/v1/rl/supported-models")


def _account(rig):
    """This stack (test/dev) 1, stacks test/a and test/b 1 each (made through the provider, so the journal names
    them), 1 made directly (nothing names it), and 1 of another user: each 11.00 USD/h."""
    rig.create_resource()
    rig.create_resource(owner="organization/test/a/one")
    rig.create_resource(owner="organization/test/b/two")
    unnamed = rig.client.create_model_resource(ModelResourceCreateRequest(base_model=MODEL)).id
    rig.control.configure(user_id="user_colleague")
    try:
        rig.client.create_model_resource(ModelResourceCreateRequest(base_model=MODEL))
    finally:
        rig.control.configure(user_id="user_emulator")
    process.clear_caches()  # the preview is a new command: a new provider process
    return unnamed


def _cap(rig, emulator, value):
    configure(rig.resources, {"together:apiKey": emulator.api_key, "together:baseUrl": emulator.base_url,
                              "together:maxAccountPricePerHour": value})  # fmt: skip


def test_a_preview_says_the_accounts_spend_split_by_stack_once(rig, capsys):
    unnamed = _account(rig)
    capsys.readouterr()

    for name in ("new", "newer"):
        assert rig.resources.check({}, {"base_model": MODEL, "owner": OWNER + name}).failures == []

    lines = [line for line in capsys.readouterr().err.splitlines() if "account spend" in line]
    assert lines == [
        "account spend: 44.00 USD/h over 4 active model resources of this API key's user: this stack 11.00 (1), "
        "other stacks 22.00 (2) (test/a 11.00 (1), test/b 11.00 (1)), nothing names 11.00 (1)"
    ]
    assert unnamed  # made by this user, named by nothing


def test_the_cap_fails_the_check_that_takes_the_account_over_it(rig, emulator):
    _account(rig)
    _cap(rig, emulator, "60")
    rig.control.clear_requests()

    first = rig.resources.check({}, {"base_model": MODEL, "owner": OWNER + "new"})
    # The engine's second check of a replacement, or of a retried preview: counted once.
    again = rig.resources.check({}, {"base_model": MODEL, "owner": OWNER + "new"})
    second = rig.resources.check({}, {"base_model": MODEL, "owner": OWNER + "newer"})

    assert first.failures == [] and again.failures == []  # 44 + 11 = 55: within 60, counted once
    ((prop, reason),) = [(f.property, f.reason) for f in second.failures]
    assert prop == ""
    assert reason.startswith(
        "checking model resource (newer): the account's spend after this change, 66.00 USD/h (now 44.00: this "
        "stack 11.00 (1), other stacks 22.00 (2) (test/a 11.00 (1), test/b 11.00 (1)), nothing names 11.00 (1); "
        "this change adds 22.00: new 11.00, newer 11.00), exceeds together:maxAccountPricePerHour 60.00 by 6.00; "
        "the largest spenders: "
    )
    assert reason.endswith("Stop model resources the account no longer needs, or raise "
                           "together:maxAccountPricePerHour.")  # fmt: skip
    assert emulator.api_key not in reason
    # A preview writes nothing: lists, prices and the supported models only.
    assert {(r["method"], r["path"]) for r in rig.control.requests()} <= {LIST, ESTIMATE, MODELS}


def test_a_cap_that_is_not_a_price_fails_the_check(rig, emulator):
    _cap(rig, emulator, "lots")

    (failure,) = rig.resources.check({}, {"base_model": MODEL, "owner": OWNER + "new"}).failures

    assert "together:maxAccountPricePerHour is 'lots', not a price" in failure.reason


def test_an_unchanged_resource_asks_nothing_and_says_nothing(rig, capsys, emulator):
    olds = rig.resources.check({}, {"base_model": MODEL, "owner": OWNER + "gpu"})
    _cap(rig, emulator, "1")
    process.clear_caches()
    capsys.readouterr()
    rig.control.clear_requests()

    assert rig.resources.check(olds.inputs, dict(olds.inputs)).failures == []

    assert rig.control.requests() == [] and "account spend" not in capsys.readouterr().err


def _preview_requests(rig, active: int) -> Counter[tuple[str, str]]:
    """The requests of a preview of 20 new model resources (one engine's concurrent checks) on an account with
    ``active`` model resources of three configurations."""
    with rig.client as client:
        for i in range(active):
            body = ModelResourceCreateRequest(
                base_model=MODEL, compute_config=ComputeConfigParams(num_generator_replicas=i % 3)
            )
            client.create_model_resource(body)
    process.clear_caches()
    rig.control.clear_requests()
    barrier = threading.Barrier(20)
    failures = []

    def check(i: int) -> None:
        barrier.wait()
        failures.extend(rig.resources.check({}, {"base_model": MODEL, "owner": f"{OWNER}gpu{i}"}).failures)

    threads = [threading.Thread(target=check, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    return Counter((r["method"], r["path"]) for r in rig.control.requests())


@pytest.mark.parametrize("active", [20, 60])
def test_a_preview_makes_one_list_and_one_price_per_configuration_whatever_the_number_of_objects(rig, active):
    requests = _preview_requests(rig, active)

    # Before: the supported models and the new resources' one estimate (2). Now: + 1 list (a page holds 100)
    # + 1 estimate per configuration of the account (3), whether it runs 20 objects or 60.
    assert requests == {MODELS: 1, ESTIMATE: 1 + 3, LIST: 1}
    assert sum(requests.values()) == 6


def test_a_configuration_the_api_will_not_price_is_listed_with_no_price(rig, capsys):
    from pulumi_together_rl.emulator.tables import BUILTIN_SUPPORTED_MODELS

    retired = "Qwen/Qwen3.5-35B-A3B"
    kept = rig.client.create_model_resource(ModelResourceCreateRequest(base_model=retired)).id
    # The model is retired: the API still runs the object, but estimate-cost refuses its configuration (400).
    rig.control.configure(
        supported_models=[m for m in BUILTIN_SUPPORTED_MODELS if m["base_model"] != retired]
    )
    process.clear_caches()
    capsys.readouterr()

    assert rig.resources.check({}, {"base_model": MODEL, "owner": OWNER + "new"}).failures == []

    (line,) = [line for line in capsys.readouterr().err.splitlines() if "account spend" in line]
    assert line.endswith(f"nothing names 0.00 (1); price unknown for {kept}"), line
