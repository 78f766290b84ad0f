"""The plugin face in-process, against the emulator: each protocol method over the shared core, in the schema's
names, with what only this face has (preview answers, customTimeouts, secrets, lines under the URN)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from typing import Any

import pytest
from pulumi.provider.experimental.property_value import PropertyValue
from pulumi.provider.experimental.provider import (
    CheckRequest,
    ConfigureRequest,
    CreateRequest,
    DeleteRequest,
    DiffRequest,
    InvokeRequest,
    PropertyDiffKind,
    ReadRequest,
    UpdateRequest,
)

from pulumi_together_rl import config
from pulumi_together_rl.messages import UserError
from pulumi_together_rl.plugin.provider import TogetherRLProvider
from pulumi_together_rl.plugin.server import one_sentence
from pulumi_together_rl.resources import process
from pulumi_together_rl.resources.inputs import UNKNOWN_SENTINEL

MODEL = "Qwen/Qwen3.5-4B"
MR = "together-rl:index:ModelResource"
TS = "together-rl:index:TrainingSession"


def urn(token: str, name: str) -> str:
    return f"urn:pulumi:dev::proj::{token}::{name}"


def bag(**values: Any) -> dict[str, PropertyValue]:
    def pv(v: Any) -> PropertyValue:
        if isinstance(v, PropertyValue):
            return v
        if isinstance(v, dict):
            return PropertyValue({k: pv(x) for k, x in v.items()})
        if isinstance(v, list):
            return PropertyValue([pv(x) for x in v])
        if isinstance(v, int) and not isinstance(v, bool):
            return PropertyValue(float(v))
        return PropertyValue(v)

    return {k: pv(v) for k, v in values.items()}


def plain(values: dict[str, PropertyValue]) -> dict[str, Any]:
    def py(v: PropertyValue) -> Any:
        if isinstance(v.value, Mapping):
            return {k: py(x) for k, x in v.value.items()}
        if isinstance(v.value, (list, tuple)):
            return [py(x) for x in v.value]
        return v.value

    return {k: py(v) for k, v in values.items()}


def live(emulator: Any, collection: str, ident: str) -> dict[str, Any]:
    return next(o for o in emulator.control.state()[collection] if o["id"] == ident)


class Plugin:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str, bool]] = []
        self.provider = TogetherRLProvider(
            sink=lambda u: lambda line, status: self.lines.append((u, line, status))
        )

    def run(self, coro: Any) -> Any:
        # A loop of its own, never made the thread's current one (asyncio.run would unset the main thread's
        # loop, which in-process Pulumi SDK tests after this one rely on).
        loop = asyncio.new_event_loop()
        try:
            return loop.run_until_complete(coro)
        finally:
            loop.close()

    def check(self, token: str, name: str, olds: dict | None = None, **news: Any) -> Any:
        return self.run(self.provider.check(CheckRequest(urn(token, name), olds or {}, bag(**news), b"")))

    def create(self, token: str, name: str, props: dict, *, preview: bool = False, timeout: float = 0) -> Any:
        return self.run(self.provider.create(CreateRequest(urn(token, name), props, timeout, preview)))

    def checked_create(self, token: str, name: str, **news: Any) -> Any:
        checked = self.check(token, name, **news)
        assert not checked.failures, [(f.property, f.reason) for f in checked.failures]
        return checked, self.create(token, name, checked.inputs)


@pytest.fixture
def plugin(emulator, monkeypatch) -> Plugin:
    config.reset()
    process.clear_caches()
    monkeypatch.setenv("TOGETHER_RL_POLL_INTERVAL", "0.02")
    monkeypatch.delenv("TOGETHER_API_KEY")
    monkeypatch.delenv("TOGETHER_BASE_URL")
    p = Plugin()
    args = {
        "apiKey": PropertyValue(emulator.api_key, is_secret=True),
        "baseUrl": PropertyValue(emulator.base_url),
    }
    answer = p.run(p.provider.configure(ConfigureRequest({}, args, True, False)))
    assert answer.accept_secrets and answer.supports_preview
    yield p
    config.reset()
    process.clear_caches()


def test_a_model_resource_and_a_session_live_and_end_in_camel_case(plugin, emulator):
    checked, made = plugin.checked_create(
        MR, "gpu", baseModel=MODEL, computeConfig={"numGeneratorReplicas": 1}
    )
    assert plain(checked.inputs)["owner"] == "-/proj/dev/gpu"
    assert plain(checked.inputs)["pricePerHour"] > 0  # the estimate, known at check (preview)
    out = plain(made.properties)
    assert out["status"] == "READY" and out["computeConfig"] == {"numGeneratorReplicas": 1.0}
    assert out["effectiveComputeConfig"]["gpuType"]  # the API's view, in the schema's names too

    s_checked, s_made = plugin.checked_create(
        TS, "trial", modelResourcesId=made.resource_id, loraConfig={"rank": 8}
    )
    assert plain(s_checked.inputs)["displayName"] == "trial"  # the resource name, as the dynamic face does
    assert plain(s_made.properties)["status"] == "RUNNING"
    assert plain(s_made.properties)["effectiveLoraConfig"]["rank"] == 8

    # A rename is an update in place (a PATCH), a rank change a delete-before-replace.
    renamed = bag(**{**plain(s_checked.inputs), "displayName": "trial-2"})
    diff = plugin.run(
        plugin.provider.diff(
            DiffRequest(urn(TS, "trial"), s_made.resource_id, s_made.properties, renamed, [])
        )
    )
    assert diff.changes and diff.replaces == [] and diff.diffs == ["displayName"]
    assert diff.detailed_diff["displayName"].kind == PropertyDiffKind.UPDATE
    reranked = bag(**{**plain(s_checked.inputs), "loraConfig": {"rank": 16}})
    diff = plugin.run(
        plugin.provider.diff(
            DiffRequest(urn(TS, "trial"), s_made.resource_id, s_made.properties, reranked, [])
        )
    )
    assert diff.replaces == ["loraConfig"] and diff.delete_before_replace
    same = plugin.run(
        plugin.provider.diff(
            DiffRequest(urn(TS, "trial"), s_made.resource_id, s_made.properties, s_checked.inputs, [])
        )
    )
    assert not same.changes

    emulator.control.clear_requests()
    planned = plugin.run(  # preview: the planned state is the new inputs over the old state, and no call
        plugin.provider.update(
            UpdateRequest(urn(TS, "trial"), s_made.resource_id, s_made.properties, renamed, 0, [], True)
        )
    )
    assert plain(planned.properties)["displayName"] == "trial-2"
    assert plain(planned.properties)["status"] == "RUNNING"  # what the old state says of the rest
    assert [r for r in emulator.control.requests() if r["method"] != "GET"] == []
    updated = plugin.run(
        plugin.provider.update(
            UpdateRequest(urn(TS, "trial"), s_made.resource_id, s_made.properties, renamed, 0, [], False)
        )
    )
    assert plain(updated.properties)["displayName"] == "trial-2"
    assert live(emulator, "training_sessions", s_made.resource_id)["display_name"] == "trial-2"

    read = plugin.run(
        plugin.provider.read(ReadRequest(urn(TS, "trial"), s_made.resource_id, updated.properties, renamed))
    )
    assert read.resource_id == s_made.resource_id and plain(read.inputs)["displayName"] == "trial-2"

    plugin.run(
        plugin.provider.delete(DeleteRequest(urn(TS, "trial"), s_made.resource_id, updated.properties, 0))
    )
    plugin.run(plugin.provider.delete(DeleteRequest(urn(MR, "gpu"), made.resource_id, made.properties, 0)))
    assert live(emulator, "model_resources", made.resource_id)["status"].endswith(("STOPPING", "STOPPED"))
    # The waits' lines went to the engine under each resource's own URN, progress marked as status.
    assert any(
        u == urn(MR, "gpu") and status and "model resource" in line for u, line, status in plugin.lines
    )
    assert all(u in (urn(MR, "gpu"), urn(TS, "trial")) for u, _, _ in plugin.lines)


def test_a_preview_answers_from_the_checked_inputs_and_calls_nothing(plugin, emulator):
    checked = plugin.check(MR, "gpu", baseModel=MODEL)
    previewed = plugin.create(MR, "gpu", checked.inputs, preview=True)
    assert previewed.resource_id is None and plain(previewed.properties)["pricePerHour"] > 0
    # A session on a resource that does not exist yet: its id is unknown, and nothing crashes or asks for it.
    s_checked = plugin.check(TS, "trial", modelResourcesId=UNKNOWN_SENTINEL)
    assert not s_checked.failures
    s_preview = plugin.create(TS, "trial", s_checked.inputs, preview=True)
    assert plain(s_preview.properties)["modelResourcesId"] == UNKNOWN_SENTINEL  # answered unknown
    assert not [
        r
        for r in emulator.control.requests()
        if r["method"] == "POST" and not r["path"].endswith("estimate-cost")
    ]


def test_check_failures_name_the_field_in_the_schemas_names(plugin):
    checked = plugin.check(MR, "gpu", baseModel=MODEL, computeConfig={"numGeneratorReplicas": 65})
    assert [f.property for f in checked.failures] == ["computeConfig.numGeneratorReplicas"]
    checked = plugin.check(MR, "gpu", baseModel=MODEL, maxPricePerHour=0.01)
    assert [f.property for f in checked.failures] == ["maxPricePerHour"]
    assert (
        "maxPricePerHour" in checked.failures[0].reason
        and "max_price_per_hour" not in checked.failures[0].reason
    )


def test_custom_timeouts_reach_the_wait(plugin, emulator):
    emulator.control.configure(timings={"resource_pending": 30.0})
    checked = plugin.check(MR, "gpu", baseModel=MODEL)
    with pytest.raises(UserError) as failed:
        plugin.create(MR, "gpu", checked.inputs, timeout=0.5)
    assert "customTimeouts.create" in str(failed.value)
    assert one_sentence(failed.value) == str(failed.value)  # answered as its one sentence


def test_a_secret_input_stays_secret_and_the_api_key_is_nowhere(plugin, emulator):
    secret_meta = PropertyValue({"wandb": PropertyValue({"project": PropertyValue("p")})}, is_secret=True)
    news = {**bag(modelResourcesId=UNKNOWN_SENTINEL), "metadata": secret_meta}
    checked = plugin.run(plugin.provider.check(CheckRequest(urn(TS, "t"), {}, news, b"")))
    assert checked.inputs["metadata"].is_secret
    assert emulator.api_key not in repr(checked.inputs)


def test_a_secret_inside_the_metadata_map_is_never_in_a_line_or_a_sentence(plugin, emulator):
    """The program made one value inside ``metadata`` secret (the map itself is not): an API error quoting it is
    answered, and its lines logged under the URN, with ``[secret]``."""
    run = "acme-churn-eval-run-0451"
    _, resource = plugin.checked_create(MR, "gpu", baseModel=MODEL)
    wandb = PropertyValue({"project": PropertyValue("evals"), "runName": PropertyValue(run, is_secret=True)})
    news = {**bag(modelResourcesId=resource.resource_id), "metadata": PropertyValue({"wandb": wandb})}
    checked = plugin.run(plugin.provider.check(CheckRequest(urn(TS, "t"), {}, news, b"")))
    assert not checked.failures and checked.inputs["metadata"].is_secret
    emulator.control.add_fault(
        method="POST",
        path="/v1/rl/training-sessions$",
        status=400,
        times=1,
        message=f"W&B run {run} is taken",
    )

    with pytest.raises(UserError) as failed:
        plugin.create(TS, "t", checked.inputs)

    assert "W&B run [secret] is taken" in one_sentence(failed.value)
    assert run[:8] not in str(failed.value) + repr(plugin.lines)


def test_a_bug_keeps_its_stack(plugin):
    try:
        try:
            raise KeyError("x")
        except KeyError:
            raise Exception("x:\n  File ...") from None
    except Exception as exc:
        assert one_sentence(exc) is None


def test_the_functions_answer_supported_models_and_prices(plugin):
    models = plugin.run(plugin.provider.invoke(InvokeRequest("together-rl:index:getSupportedModels", {})))
    assert MODEL in [m["base_model"] for m in plain(models.return_value)["models"]]
    price = plugin.run(
        plugin.provider.invoke(InvokeRequest("together-rl:index:estimateCost", bag(baseModel=MODEL)))
    )
    assert plain(price.return_value)["pricePerHour"] > 0 and plain(price.return_value)["currency"] == "USD"
    bad = plugin.run(
        plugin.provider.invoke(
            InvokeRequest("together-rl:index:estimateCost", bag(baseModel=MODEL, inactiveTimeout=5))
        )
    )
    assert [f.property for f in bad.failures] == ["inactiveTimeout"]


def test_the_checkpoint_functions_answer_in_the_schemas_names(plugin, emulator):
    _, resource = plugin.checked_create(MR, "gpu", baseModel=MODEL)
    _, session = plugin.checked_create(
        TS, "run", modelResourcesId=resource.resource_id, loraConfig={"rank": 8}
    )
    ident = session.resource_id
    emulator.control.advance_session(ident, 30)
    early = emulator.control.save_checkpoint(ident, "training")
    emulator.control.advance_session(ident, 30)
    late = emulator.control.save_checkpoint(ident, "training")

    def invoke(token: str, **args: Any) -> Any:
        return plugin.run(plugin.provider.invoke(InvokeRequest(f"together-rl:index:{token}", bag(**args))))

    listed = plain(invoke("getCheckpoints", sessionId=ident).return_value)["checkpoints"]
    assert [(c["id"], c["step"], c["loraRank"]) for c in listed] == [
        (late["id"], 60, 8),
        (early["id"], 30, 8),
    ]
    latest = plain(invoke("latestCheckpoint", sessionId=ident, minStep=31).return_value)
    assert latest["id"] == late["id"] and latest["sessionId"] == ident and latest["type"] == "training"
    bad = invoke("latestCheckpoint", sessionId=ident, type="weights")
    assert [f.property for f in bad.failures] == ["type"]
    with pytest.raises(UserError) as caught:
        invoke("latestCheckpoint", sessionId=ident, minStep=61)
    assert "no training checkpoint of session" in str(caught.value)


def test_every_create_of_a_stack_runs_at_once_on_the_plugins_workers(monkeypatch):
    """24 creates that each hold their thread until all 24 are in flight: they finish only if the plugin's loop
    runs them all at once (asyncio's default pool has cpu + 4 threads)."""
    from pulumi_together_rl.plugin import server
    from pulumi_together_rl.resources import lifecycle

    count = 24
    together = threading.Barrier(count, timeout=30)

    def create(schema: Any, props: Any, *, timeout: float | None = None) -> Any:
        together.wait()
        return lifecycle.Made("mr-1", {"status": "READY"})

    monkeypatch.setattr(lifecycle, "create", create)
    provider = TogetherRLProvider()

    async def stack() -> list[Any]:
        server.use_operation_workers(asyncio.get_running_loop())
        requests = [CreateRequest(urn(MR, f"gpu{i}"), bag(baseModel=MODEL), 0, False) for i in range(count)]
        return await asyncio.gather(*(provider.create(r) for r in requests))

    loop = asyncio.new_event_loop()
    try:
        made = loop.run_until_complete(stack())
    finally:
        loop.close()
    assert [m.resource_id for m in made] == ["mr-1"] * count


# ------------------------------------------------------------------------------------------------ log lines


class _BrokenPipe:
    """A stream whose reader has gone: every write raises what a closed pipe raises."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


def _dead_engine() -> str:
    """The address of a port nothing listens on (bound, then closed)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def test_a_log_line_that_cannot_be_written_never_fails_a_create(plugin, emulator, monkeypatch):
    """The plugin's sink is the engine's log; the engine is gone and stderr is a broken pipe: the create's lines
    are lost, the create is not."""
    from pulumi_together_rl.plugin.server import EngineLog

    plugin.provider = TogetherRLProvider(sink=EngineLog(_dead_engine()).sink)
    monkeypatch.setattr("sys.stderr", _BrokenPipe())

    _, made = plugin.checked_create(MR, "gpu", baseModel=MODEL)

    assert plain(made.properties)["status"] == "READY"
    assert live(emulator, "model_resources", made.resource_id)["status"].endswith("READY")


def test_a_sink_that_raises_sends_the_line_to_stderr_and_the_create_goes_on(plugin, emulator, capsys):
    def sink(urn: str) -> Any:
        def write(line: str, status: bool) -> None:
            raise BrokenPipeError(32, "Broken pipe")

        return write

    plugin.provider = TogetherRLProvider(sink=sink)

    _, made = plugin.checked_create(MR, "gpu", baseModel=MODEL)

    assert plain(made.properties)["status"] == "READY"
    assert f"model resource {made.resource_id}: created" in capsys.readouterr().err


def test_the_engine_log_never_raises(monkeypatch, capsys):
    """A dead engine (an RpcError), a line protobuf cannot encode (a lone surrogate, which an API message in JSON
    can hold: UnicodeEncodeError, no RpcError), then the same with stderr a broken pipe too."""
    import json

    from pulumi_together_rl.plugin.server import EngineLog

    engine = EngineLog(_dead_engine())
    surrogate = json.loads('"the API said \\ud800"')
    engine.log("urn:pulumi:dev::proj::x::y", "model resource mr-1: READY", True)
    assert "model resource mr-1: READY" in capsys.readouterr().err  # the engine is gone: stderr instead
    engine.log("urn:pulumi:dev::proj::x::y", surrogate, False)

    monkeypatch.setattr("sys.stderr", _BrokenPipe())
    engine.log("urn:pulumi:dev::proj::x::y", "model resource mr-1: READY", True)
    engine.log("urn:pulumi:dev::proj::x::y", surrogate, False)


# ------------------------------------------------------------------------------------------- provider config


def test_a_plain_api_key_is_answered_secret_with_one_warning(plugin, tmp_path, monkeypatch):
    """The stack's config file holds the key in plain text: it is made secret in the state, and one warning says
    to encrypt it in the file. (The engine sends CheckConfig every value plain, secrets stripped: the file tells.)"""
    (tmp_path / "Pulumi.yaml").write_text("name: proj\nruntime: yaml\n")
    (tmp_path / "Pulumi.dev.yaml").write_text("config:\n  together-rl:apiKey: tk-plain\n")
    monkeypatch.chdir(tmp_path)
    provider_urn = "urn:pulumi:dev::proj::pulumi:providers:together-rl::default"
    plain_key = {"apiKey": PropertyValue("tk-plain"), "baseUrl": PropertyValue("http://x")}

    first = plugin.run(plugin.provider.check_config(CheckRequest(provider_urn, {}, plain_key, b"")))
    again = plugin.run(plugin.provider.check_config(CheckRequest(provider_urn, {}, plain_key, b"")))

    for answer in (first, again):
        assert answer.inputs["apiKey"] == PropertyValue("tk-plain", is_secret=True)
        assert answer.inputs["baseUrl"] == PropertyValue("http://x")
    warnings = [(u, line) for u, line, _ in plugin.lines if "apiKey is not a secret" in line]
    assert len(warnings) == 1 and warnings[0][0] == provider_urn
    assert (
        "pulumi config set --secret together-rl:apiKey" in warnings[0][1] and "tk-plain" not in warnings[0][1]
    )

    secret = {"apiKey": PropertyValue("tk-secret", is_secret=True)}
    answer = plugin.run(plugin.provider.check_config(CheckRequest(provider_urn, {}, secret, b"")))
    assert answer.inputs == secret


@pytest.mark.parametrize(
    "file",
    [
        "config:\n  together-rl:apiKey:\n    secure: AAABAGJpZ2NpcGhlcnRleHQ=\n",  # pulumi config set --secret
        "config:\n  together-rl:baseUrl: http://x\n",  # the key is not in the file (the environment, ESC)
        None,  # no config file at all
    ],
    ids=["secure", "elsewhere", "no-file"],
)
def test_a_key_the_config_file_keeps_secret_or_does_not_hold_gets_no_warning(
    plugin, tmp_path, monkeypatch, file
):
    """What the engine sends CheckConfig is the same plain value however the key was set: a `--secret` key
    (the file says `secure:`) must not be told it is not a secret."""
    (tmp_path / "Pulumi.yaml").write_text("name: proj\nruntime: yaml\nstackConfigDir: stacks\n")
    if file is not None:
        (tmp_path / "stacks").mkdir()
        (tmp_path / "stacks" / "Pulumi.dev.yaml").write_text(file)
    (tmp_path / "program").mkdir()
    monkeypatch.chdir(tmp_path / "program")  # the program's folder, below the project's
    provider_urn = "urn:pulumi:organization/proj/dev::proj::pulumi:providers:together-rl::default"
    answer = plugin.run(
        plugin.provider.check_config(CheckRequest(provider_urn, {}, {"apiKey": PropertyValue("tk-1")}, b""))
    )
    assert answer.inputs["apiKey"] == PropertyValue(
        "tk-1", is_secret=True
    )  # secret in the state all the same
    assert not [line for _, line, _ in plugin.lines if "apiKey is not a secret" in line]
