"""The stand-in engine itself (harness/engine.py, mocks.py), driven against a tiny dummy provider.

One real `python -m pulumi.dynamic` server serves the whole module; the dummy provider keeps its objects in a
JSON file the test can read and change out of band.
"""

from __future__ import annotations

import time
from pathlib import Path

import grpc
import pytest
from harness.dummy_provider import (
    ECHO_TYPE,
    STATE_ENV,
    THING_TYPE,
    DummyProvider,
    EchoProvider,
    load_store,
    mark_gone,
    mutate_store,
    reset_store,
)
from harness.engine import (
    DIFF_UNKNOWN,
    UNKNOWN,
    CheckFailedError,
    EngineError,
    ProviderProcess,
    ProviderRpcError,
    Registration,
    StandInEngine,
    blob_bytes,
    is_secret,
    provider_blob,
    secret,
)
from harness.mocks import run_program
from pulumi.runtime import rpc

PROGRAM = Path(__file__).resolve().parents[2] / "harness" / "dummy_program"
BLOB = provider_blob(DummyProvider())
RESOURCE_RPCS = ("Check", "Diff", "Create", "Read", "Update", "Delete")


@pytest.fixture(scope="module")
def store_path(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("dummy-cloud") / "store.json"


@pytest.fixture(scope="module")
def provider_process(store_path):
    with ProviderProcess(env={STATE_ENV: str(store_path)}) as process:
        yield process


@pytest.fixture
def engine(provider_process, store_path) -> StandInEngine:
    reset_store(store_path)
    return StandInEngine(provider_process)


def thing(name: str, blob: str = BLOB, **inputs) -> tuple[str, str, dict]:
    return (THING_TYPE, name, {"__provider": blob, **inputs})


def objects(store_path) -> dict:
    return load_store(store_path)["objects"]


def log_ops(store_path) -> list[str]:
    return [f"{op} {label}" for op, _id, label in load_store(store_path)["log"]]


# ------------------------------------------------------------------------------------------------- up


def test_first_up_configures_the_plugin_then_checks_and_creates(engine, store_path, provider_process):
    result = engine.up([thing("a", label="a", size=2)])

    assert engine.calls == [
        ("Handshake", "default"),
        ("GetPluginInfo", "default"),
        ("CheckConfig", "default"),
        ("Configure", "default"),
        ("Check", "a"),
        ("Create", "a"),
    ]
    assert result.steps == [("create", "a")]
    entry = engine.state["urn:pulumi:dev::test::pulumi-python:dynamic/dummy:Thing::a"]
    assert entry["type"] == THING_TYPE
    assert entry["id"] in objects(store_path)
    assert entry["inputs"] == {"__provider": BLOB, "label": "a", "size": 2}
    # The server copies __provider into the outputs; numbers come back as floats, like from the real engine.
    assert entry["outputs"] == {"__provider": BLOB, "label": "a", "size": 2.0, "serial": 1.0}
    assert result.resources[engine.urn(THING_TYPE, "a")].id == entry["id"]
    deadline = time.monotonic() + 5
    while f"dummy: created {entry['id']}" not in provider_process.stderr_text():
        assert time.monotonic() < deadline, provider_process.stderr_text()
        time.sleep(0.01)


def test_unchanged_up_is_a_same_step_with_no_create_or_update(engine, store_path):
    engine.up([thing("a", label="a", size=2)])
    before = dict(engine.resource("a"))
    engine.calls.clear()

    result = engine.up([thing("a", label="a", size=2)])

    assert engine.rpcs() == [("Check", "a"), ("Diff", "a")]
    assert result.steps == [("same", "a")]
    assert engine.resource("a") == before
    assert log_ops(store_path) == ["create a"]


def test_same_step_records_new_inputs_but_keeps_the_old_outputs(engine):
    # `extra` is not an input the dummy's diff looks at, so the provider answers DIFF_NONE.
    engine.up([thing("a", label="a", size=2)])
    old_outputs = engine.resource("a")["outputs"]

    engine.calls.clear()
    engine.up([thing("a", label="a", size=2, extra="new")])

    assert engine.rpcs("Create", "Update") == []
    assert engine.resource("a")["inputs"]["extra"] == "new"
    assert engine.resource("a")["outputs"] == old_outputs


def test_changed_mutable_input_is_updated_in_place(engine, store_path):
    engine.up([thing("a", label="a", size=2)])
    old_id = engine.resource("a")["id"]
    engine.calls.clear()

    result = engine.up([thing("a", label="a", size=3)])

    assert engine.rpcs() == [("Check", "a"), ("Diff", "a"), ("Update", "a")]
    assert result.steps == [("update", "a")]
    assert engine.resource("a")["id"] == old_id
    assert engine.resource("a")["outputs"]["size"] == 3
    assert engine.resource("a")["outputs"]["serial"] == 2
    assert log_ops(store_path) == ["create a", "update a"]


def test_changed_immutable_input_replaces_creating_before_deleting(engine, store_path):
    engine.up([thing("a", label="one")])
    old_id = engine.resource("a")["id"]
    engine.calls.clear()

    result = engine.up([thing("a", label="two")])

    assert engine.rpcs() == [("Check", "a"), ("Diff", "a"), ("Create", "a"), ("Delete", "a")]
    assert result.steps == [("replace", "a"), ("delete-replaced", "a")]
    new_id = engine.resource("a")["id"]
    assert new_id != old_id
    assert list(objects(store_path)) == [new_id]
    assert log_ops(store_path) == ["create one", "create two", "delete one"]


@pytest.mark.parametrize(
    ("provider_asks", "option"),
    [(True, None), (False, True)],
    ids=["provider-answers-deleteBeforeReplace", "resource-option"],
)
def test_delete_before_replace_deletes_the_old_resource_first(engine, store_path, provider_asks, option):
    def registration(label):
        return Registration(
            *thing("a", label=label, replace_first=provider_asks), delete_before_replace=option
        )

    engine.up([registration("one")])
    engine.calls.clear()

    engine.up([registration("two")])

    assert engine.rpcs() == [("Check", "a"), ("Diff", "a"), ("Delete", "a"), ("Create", "a")]
    assert log_ops(store_path) == ["create one", "delete one", "create two"]


def test_delete_before_replace_first_deletes_the_dependents_it_would_replace(engine):
    parent_urn = engine.urn(THING_TYPE, "parent")

    def up(parent_label):
        with engine.deployment() as deployment:
            parent = deployment.register(*thing("parent", label=parent_label, replace_first=True))
            # parent_id forces replacement: the child has to go before its parent does.
            deployment.register(
                *thing("child", label="child", parent_id=parent.id),
                property_dependencies={"parent_id": [parent_urn]},
            )
            # note updates in place: replacing the parent leaves the friend alone; its own diff then updates it.
            deployment.register(
                *thing("friend", label="friend", note=parent.id), property_dependencies={"note": [parent_urn]}
            )
        return deployment.result

    up("p1")
    engine.calls.clear()

    result = up("p2")

    assert engine.rpcs() == [
        ("Check", "parent"),
        ("Diff", "parent"),
        ("Diff", "child"),
        ("Diff", "friend"),
        ("Delete", "child"),
        ("Delete", "parent"),
        ("Create", "parent"),
        ("Check", "child"),
        ("Create", "child"),
        ("Check", "friend"),
        ("Diff", "friend"),
        ("Update", "friend"),
    ]
    assert result.steps == [
        ("delete-replaced", "child"),
        ("delete-replaced", "parent"),
        ("replace", "parent"),
        ("replace", "child"),
        ("update", "friend"),
    ]
    assert engine.resource("child")["inputs"]["parent_id"] == engine.resource("parent")["id"]
    assert list(engine.state) == [engine.urn(THING_TYPE, n) for n in ("parent", "child", "friend")]


def test_resources_left_out_of_the_program_are_deleted_in_reverse_order(engine, store_path):
    engine.up([thing("a", label="a"), thing("b", label="b"), thing("c", label="c")])
    engine.calls.clear()

    result = engine.up([thing("a", label="a")])

    assert engine.rpcs("Delete") == [("Delete", "c"), ("Delete", "b")]
    assert result.steps[-2:] == [("delete", "c"), ("delete", "b")]
    assert [e["inputs"]["label"] for e in engine.state.values()] == ["a"]
    assert len(objects(store_path)) == 1


def test_duplicate_registration_is_refused(engine):
    with pytest.raises(EngineError, match="Duplicate resource URN"):
        engine.up([thing("a", label="a"), thing("a", label="b")])


# ------------------------------------------------------------------------------------------------- refresh, destroy


def test_refresh_drops_a_resource_gone_out_of_band_and_the_next_up_recreates_it(engine, store_path):
    engine.up([thing("a", label="a"), thing("b", label="b")])
    gone_id = engine.resource("a")["id"]
    mark_gone(store_path, gone_id)
    engine.calls.clear()

    result = engine.refresh()

    assert engine.rpcs() == [("Read", "a"), ("Read", "b")]
    assert result.steps == [("delete", "a"), ("same", "b")]
    assert [e["inputs"]["label"] for e in engine.state.values()] == ["b"]

    engine.calls.clear()
    engine.up([thing("a", label="a"), thing("b", label="b")])
    assert engine.rpcs() == [("Check", "a"), ("Create", "a"), ("Check", "b"), ("Diff", "b")]
    assert engine.resource("a")["id"] != gone_id


def test_refresh_takes_inputs_and_outputs_from_read_so_the_next_up_corrects_drift(engine, store_path):
    engine.up([thing("a", label="a", note="mine")])
    object_id = engine.resource("a")["id"]
    mutate_store(lambda s: s["objects"][object_id]["inputs"].update(note="drifted"), store_path)

    result = engine.refresh()

    assert result.steps == [("update", "a")]
    assert engine.resource("a")["inputs"]["note"] == "drifted"
    assert engine.resource("a")["inputs"]["__provider"] == BLOB  # the server adds it to returned inputs
    assert engine.resource("a")["outputs"]["note"] == "drifted"
    engine.calls.clear()
    engine.up([thing("a", label="a", note="mine")])
    assert engine.rpcs() == [("Check", "a"), ("Diff", "a"), ("Update", "a")]


def test_destroy_deletes_everything_in_reverse_creation_order(engine, store_path):
    engine.up([thing("a", label="a"), thing("b", label="b"), thing("c", label="c")])
    engine.calls.clear()

    result = engine.destroy()

    assert engine.rpcs() == [("Delete", "c"), ("Delete", "b"), ("Delete", "a")]
    assert result.steps == [("delete", "c"), ("delete", "b"), ("delete", "a")]
    assert engine.state == {}
    assert objects(store_path) == {}


def test_a_failing_delete_leaves_what_it_depends_on_and_independent_deletes_go_ahead(engine, store_path):
    """As the engine walks a destroy (independent deletes run in parallel there): the parent of a child whose
    delete fails stays, and so does the child; a resource that depends on neither is deleted all the same."""
    parent_urn = engine.urn(THING_TYPE, "parent")
    with engine.deployment() as deployment:
        deployment.register(*thing("other", label="other"))  # first made: last in the reverse walk
        parent = deployment.register(*thing("parent", label="parent"))
        deployment.register(
            *thing("child", label="child", parent_id=parent.id, fail="delete"),
            property_dependencies={"parent_id": [parent_urn]},
        )
    engine.calls.clear()

    with pytest.raises(EngineError, match="dummy delete failed on purpose"):
        engine.destroy()

    assert ("Delete", "other") in engine.rpcs() and ("Delete", "parent") not in engine.rpcs()
    assert sorted(urn.rsplit("::", 1)[1] for urn in engine.state) == ["child", "parent"]
    assert len(objects(store_path)) == 2  # the child and its parent: "other" is gone


# ------------------------------------------------------------------------------------------------- preview, unknowns


def test_preview_with_an_unknown_input_checks_but_creates_nothing(engine, store_path):
    result = engine.up([thing("a", label=UNKNOWN, size=1)], preview=True)

    assert engine.rpcs() == [("Check", "a")]
    assert result.steps == [("create", "a")]
    predicted = result.resources[engine.urn(THING_TYPE, "a")]
    assert predicted.id == ""  # unknown to the program
    assert predicted.outputs["label"] == UNKNOWN  # the checked inputs are the predicted outputs
    assert engine.state == {}
    assert objects(store_path) == {}


def test_preview_of_changes_diffs_but_never_updates_or_replaces(engine, store_path):
    engine.up([thing("a", label="a", size=1), thing("b", label="b", size=1)])
    state = {urn: dict(entry) for urn, entry in engine.state.items()}
    engine.calls.clear()

    result = engine.up([thing("a", label=UNKNOWN, size=1), thing("b", label="b", size=5)], preview=True)

    assert engine.rpcs() == [("Check", "a"), ("Diff", "a"), ("Check", "b"), ("Diff", "b")]
    assert result.steps == [("replace", "a"), ("update", "b")]
    assert engine.state == state
    assert log_ops(store_path) == ["create a", "create b"]


def test_unknown_inputs_outside_a_preview_are_refused(engine):
    with pytest.raises(EngineError, match="unknown"):
        engine.up([thing("a", label=UNKNOWN)])
    assert engine.rpcs() == []


def test_provider_default_diff_makes_the_engine_compare_inputs(engine):
    blob = provider_blob(EchoProvider())
    engine.up([(ECHO_TYPE, "e", {"__provider": blob, "value": "1"})])
    engine.calls.clear()

    assert engine.up([(ECHO_TYPE, "e", {"__provider": blob, "value": "1"})]).steps == [("same", "e")]
    assert engine.up([(ECHO_TYPE, "e", {"__provider": blob, "value": "2"})]).steps == [("update", "e")]
    assert engine.rpcs() == [("Check", "e"), ("Diff", "e"), ("Check", "e"), ("Diff", "e"), ("Update", "e")]
    assert engine.diff(ECHO_TYPE, "e", "x", {}, {"__provider": blob}).changes == DIFF_UNKNOWN


# ------------------------------------------------------------------------------------------------- errors, config, secrets


def test_check_failures_raise_with_the_failures_and_create_nothing(engine):
    with pytest.raises(CheckFailedError) as caught:
        engine.up([thing("a", label="a", size=-1)])

    assert caught.value.failures == [("size", "size must be a whole number >= 0, got -1.0")]
    assert engine.rpcs("Create") == []


def test_provider_errors_carry_the_server_traceback(engine):
    with pytest.raises(ProviderRpcError) as caught:
        engine.up([thing("a", label="a", fail="create")])

    assert caught.value.rpc == "Create"
    assert caught.value.code == grpc.StatusCode.UNKNOWN
    assert "Traceback" in caught.value.details
    assert "RuntimeError: dummy create failed on purpose" in caught.value.details
    assert engine.state == {}


def test_configure_sends_namespaced_stack_config_and_the_server_unwraps_secrets(engine):
    # A flavour no earlier test used: the server configures a provider once, when it first unpickles its blob.
    blob = provider_blob(DummyProvider(flavour="configured"))
    engine.configure({"dummy:greeting": "hello", "size": "3"}, secret_keys=["dummy:greeting"])

    engine.up([thing("a", blob, label="a")])

    assert engine.config == {"dummy:greeting": "hello", "test:size": "3"}
    assert engine.resource("a")["outputs"]["greeting"] == "hello"


def test_secret_inputs_reach_the_provider_in_plaintext_and_stay_secret_in_state(engine, store_path):
    engine.up([thing("a", label="a", note=secret("s3cret"))])

    stored = engine.resource("a")
    assert objects(store_path)[stored["id"]]["inputs"]["note"] == "s3cret"
    assert stored["inputs"]["note"] == secret("s3cret")
    assert is_secret(stored["outputs"]["note"])  # annotateSecrets: same-named output re-marked
    assert not is_secret(stored["outputs"]["label"])


# ------------------------------------------------------------------------------------------------- blob


def test_provider_blob_is_pickled_by_reference():
    raw = blob_bytes(BLOB)

    assert b"_create_code" not in raw and b"_create_function" not in raw
    assert b"harness.dummy_provider" in raw and b"DummyProvider" in raw
    assert len(BLOB) < 300


# ------------------------------------------------------------------------------------------------- programs


def test_program_under_engine_backed_mocks_runs_twice_and_exports_real_outputs(engine, store_path):
    first = run_program(PROGRAM, engine, config={"size": "2"})

    assert first.steps == [("create", "base"), ("create", "child")]
    base, child = engine.resource("base"), engine.resource("child")
    assert first.exports == {
        "base_id": base["id"],
        "base_serial": 1,
        "base_size": 2,
        "child_id": child["id"],
        "child_parent": base["id"],
        "child_label": "base-child",
        "greeting": None,
    }
    # The blob the program's Resource.__init__ made is the one provider_blob() makes, wrapped as a secret.
    base_args = next(a for a in first.registrations if a.name == "base")
    assert is_secret(base_args.inputs["__provider"])
    assert rpc.unwrap_rpc_secret(base_args.inputs["__provider"]) == BLOB
    # Dependencies reach the engine under the engine's URNs (no root-stack parent in the type).
    assert engine._meta[engine.urn(THING_TYPE, "child")]["property_dependencies"]["parent_id"] == [
        engine.urn(THING_TYPE, "base")
    ]

    engine.calls.clear()
    second = run_program(PROGRAM, engine, config={"size": "2"})
    assert engine.rpcs("Create", "Update", "Delete") == []
    assert second.steps == [("same", "base"), ("same", "child")]
    assert second.exports == first.exports

    third = run_program(PROGRAM, engine, config={"size": "5"})
    assert third.steps == [("update", "base"), ("same", "child")]
    assert third.exports["base_size"] == 5
    assert third.exports["base_id"] == first.exports["base_id"]

    engine.destroy()
    assert engine.state == {}
    assert objects(store_path) == {}


def test_program_preview_under_engine_backed_mocks_creates_nothing(engine, store_path):
    run = run_program(PROGRAM, engine, preview=True)

    assert engine.rpcs() == [("Check", "base"), ("Check", "child")]
    assert run.steps == [("create", "base"), ("create", "child")]
    assert run.exports["base_id"] == UNKNOWN
    assert run.exports["child_parent"] == UNKNOWN
    assert run.exports["child_label"] == "base-child"  # known inputs flow through in preview
    assert engine.state == {}
    assert objects(store_path) == {}


def test_program_registration_failures_fail_the_run(engine):
    with pytest.raises(CheckFailedError, match="size"):
        run_program(PROGRAM, engine, config={"size": "-4"})
    assert engine.rpcs("Create") == []
