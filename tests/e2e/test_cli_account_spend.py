"""Through the real Pulumi CLI, on both faces: the account's spend a preview says, split into this stack, other
stacks (named by the shared create journal) and what nothing names, with another user's objects left out; and
the account cap, as the provider's setting and as the policy pack's rule, failing a preview that would pass it.

One stack setup per face: an `up` of the sweep (this stack's model resource), then the account's other objects,
then previews of a change that replaces the model resource: the split; the provider's cap; and, on the dynamic
face, the policy pack's rule.
On the dynamic face the other stacks are two real stacks, team-a and team-b, each its own `pulumi up` sharing the
create journal: what names their objects is what their `up`s recorded. On the plugin face the same two stacks'
objects are made by the provider in this process and recorded in that journal as an `up` records them (the
naming is the same code's, shown through the CLI once; a second pair of `up`s would add a minute).
"""

from __future__ import annotations

import uuid
from pathlib import Path

from harness.cli import policy_pack, writes
from harness.faces import DYNAMIC
from pulumi.dynamic import Config, ConfigureRequest

from pulumi_together_rl import config
from pulumi_together_rl.client import TogetherRL
from pulumi_together_rl.client.models import ComputeConfigParams, ModelResourceCreateRequest
from pulumi_together_rl.resources import process
from pulumi_together_rl.resources.model_resource import _ModelResourceProvider

ROOT = Path(__file__).resolve().parents[2]
SMALL = "Qwen/Qwen3.5-4B"  # emulator: 1 LoRA trainer GPU + 1 per generator replica, B200 at 5.50 USD/h
BIG = "Qwen/Qwen3.5-35B-A3B"  # 4 LoRA trainer GPUs + 2 per generator replica: 33.00 USD/h with one replica


def _other_stacks(emulator, project: str, names: tuple[str, str], cli_stack=None, env=None) -> list:
    """Stacks ``names`` of ``project`` (11.00 USD/h each, their journal entries name them): real stacks through
    the CLI when ``cli_stack`` is given (returned, for the test to destroy), else created through the provider in
    this process; then one object of this user's that nothing names (11.00) and one of another user's."""
    stacks = []
    if cli_stack is not None:
        for name in names:
            stacks.append(cli_stack("sweep", name=name, **env).init({"sessions": 1, "loraRanks": [8]}))
            stacks[-1].up()
    else:
        provider = _ModelResourceProvider()
        provider.configure(ConfigureRequest(Config({"together:apiKey": emulator.api_key,
                                                    "together:baseUrl": emulator.base_url}, "test")))  # fmt: skip
        try:
            for stack in names:
                inputs = {"base_model": SMALL, "lora_enabled": True,
                          "compute_config": {"num_generator_replicas": 1},
                          "owner": f"organization/{project}/{stack}/sweep-gpu"}  # fmt: skip
                checked = provider.check({}, inputs)
                assert checked.failures == [], checked.failures
                provider.create(checked.inputs)
        finally:
            config.reset()
            process.clear_caches()
    with TogetherRL(api_key=emulator.api_key, base_url=emulator.base_url) as client:
        body = ModelResourceCreateRequest(base_model=SMALL, compute_config=ComputeConfigParams())
        client.create_model_resource(body)
        emulator.control.configure(user_id="user_colleague")
        try:
            client.create_model_resource(body)  # another user's: not this key's account
        finally:
            emulator.control.configure(user_id="user_emulator")
    return stacks


def test_a_preview_says_the_accounts_spend_and_the_cap_fails_it(
    cli_stack, emulator, face, tmp_path, monkeypatch
):
    journal = f"file://{tmp_path / 'team-journal'}"
    monkeypatch.setenv("TOGETHER_RL_JOURNAL_URL", journal)
    env = {
        "TOGETHER_RL_JOURNAL_URL": journal,
        "TOGETHER_API_KEY": emulator.api_key,
        "TOGETHER_BASE_URL": emulator.base_url,
    }  # fmt: skip  (the policy pack reads the account with these)
    stack = cli_stack("sweep", face=face, **env).init({"sessions": 1, "loraRanks": [8]})
    stack.up()
    # Names of their own: a stack's config file is written into the example's folder, shared by parallel tests.
    names = (f"team-a-{uuid.uuid4().hex[:6]}", f"team-b-{uuid.uuid4().hex[:6]}")
    others = _other_stacks(
        emulator, "together-rl-sweep", names, *((cli_stack, env) if face is DYNAMIC else ())
    )
    stack.set("baseModel", BIG)  # replaces the model resource: a new one bills beside the old until it goes
    writes(emulator)

    preview = stack.preview()

    line = (
        "account spend: 44.00 USD/h over 4 active model resources of this API key's user: this stack 11.00 (1), "
        f"other stacks 22.00 (2) (together-rl-sweep/{names[0]} 11.00 (1), together-rl-sweep/{names[1]} 11.00 (1)), "
        "nothing names 11.00 (1)"
    )
    diagnostics = preview.stdout.split("Diagnostics:", 1)[1]  # (the progress display shows it on a row too)
    assert diagnostics.count("account spend:") == 1 and line in diagnostics, preview.stdout
    assert writes(emulator) == []

    # The provider's cap: 44.00 now + 33.00 for the replacement = 77.00, over 55.
    stack.run("config", "set", f"{face.config}:maxAccountPricePerHour", "55")  # as docs/cost.md gives it
    refused = stack.preview(check=False)

    assert refused.returncode != 0, str(refused)
    output = " ".join(refused.output.split())
    assert (
        "checking model resource (sweep-gpu): the account's spend after this change, 77.00 USD/h (now 44.00: this "
        "stack 11.00 (1), other stacks 22.00 (2)" in output
    ), output
    assert (
        f"this change adds 33.00: sweep-gpu 33.00), exceeds {face.config}:maxAccountPricePerHour 55.00 by 22.00; "
        "the largest spenders: sweep-gpu (this change) 33.00, " in output
    ), output
    assert f"or raise {face.config}:maxAccountPricePerHour." in output
    assert emulator.api_key not in refused.output and "Traceback" not in refused.output
    assert writes(emulator) == []

    # The policy pack's rule, with the provider's cap out of the way. The pack reads either face's resources the
    # same way (tests/unit/test_policy_rules.py): one face through the CLI is enough, and spares a pack's start.
    stack.set(f"{face.config}:maxAccountPricePerHour", 1000)
    if face is not DYNAMIC:
        stack.destroy()
        return
    folder, settings = policy_pack(
        tmp_path, {"together-rl-account-budget": {"max_account_price_per_hour": 55}}
    )
    judged = stack.preview("--policy-pack", str(folder), "--policy-pack-config", str(settings), check=False)

    assert judged.returncode != 0, str(judged)
    output = " ".join(judged.output.split())
    assert "together-rl-account-budget" in output
    assert "exceeds max_account_price_per_hour 55.00 by 22.00" in output, output
    assert f"together-rl: {line}" in output
    assert emulator.api_key not in judged.output
    assert writes(emulator) == []
    for other in (stack, *others):
        other.destroy()
