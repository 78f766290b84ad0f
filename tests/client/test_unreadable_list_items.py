"""A list answer is read item by item: one object the client cannot read is skipped with one warning line,
never the whole page (lists serve every wait at once), while a broken envelope or a GET of one unreadable
object still raises. Refresh's shared list and the create reconciliation's snapshots inherit it."""

from __future__ import annotations

import uuid

import pytest

from pulumi_together_rl.client import ApiError, ModelResourceList, TrainingSessionList

from .scripted import Script, make_client, page, reply, resource_json, session_json

SECRET = "do-not-print-this-value"


def fresh(prefix: str) -> str:
    """An id no other test used: the warning is once per id per process."""
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def warnings(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning: skipped")]


def test_an_unreadable_model_resource_is_skipped_and_the_rest_of_the_page_is_returned(capsys):
    bad_status, no_created_at = fresh("mr"), fresh("mr")
    missing = resource_json(no_created_at, note=SECRET)
    del missing["created_at"]
    script = Script(
        page(
            [
                resource_json("mr_3"),
                resource_json(bad_status, status=7, note=SECRET),
                missing,
                resource_json("mr_1"),
            ]
        )
    )

    listed = make_client(script).list_model_resources(created_by="me")

    assert isinstance(listed, ModelResourceList)
    assert [r.id for r in listed.data] == ["mr_3", "mr_1"]
    lines = warnings(capsys)
    assert len(lines) == 2, lines
    status_line, created_line = sorted(lines, key=lambda line: bad_status not in line)
    assert status_line.startswith(
        f"warning: skipped model resource {bad_status} in a list of /v1/rl/model-resources: status: Input should be"
    )
    assert status_line.endswith("(the API may have changed; upgrade pulumi-together-rl)")
    assert (
        f"model resource {no_created_at} " in created_line and ": created_at: Field required" in created_line
    )
    assert all(SECRET not in line and "base_model" not in line for line in lines)  # never the raw item


def test_an_unreadable_training_session_is_skipped(capsys):
    bad = fresh("ts")
    script = Script(page([session_json("ts_2"), session_json(bad, created_by={"not": "a string"})]))

    listed = make_client(script).list_training_sessions(model_resources_id="mr_1")

    assert isinstance(listed, TrainingSessionList)
    assert [s.id for s in listed.data] == ["ts_2"]
    assert warnings(capsys) == [
        f"warning: skipped training session {bad} in a list of /v1/rl/training-sessions: created_by: "
        "Input should be a valid string (the API may have changed; upgrade pulumi-together-rl)"
    ]


def test_the_warning_is_once_per_item_id_per_process(capsys):
    one, two = fresh("mr"), fresh("mr")
    late = {**resource_json(two), "created_at": "yesterday"}
    script = Script(
        page([resource_json(one, status=7)]),
        page([resource_json(one, status=7), late]),
        page([resource_json(one, status=7), late]),
    )
    client = make_client(script)
    for _ in range(3):
        client.list_model_resources()

    lines = warnings(capsys)
    assert [line for line in lines if one in line] == [lines[0]] and len(lines) == 2
    assert f"model resource {two} " in lines[1] and ": created_at: " in lines[1]


def test_an_item_with_no_usable_id_is_named_by_its_kind_and_warned_about_once(capsys):
    script = Script(*[page([{"id": 12345, "mystery": SECRET}, ["not", "an", "object"]])] * 2)
    client = make_client(script)
    for _ in range(2):
        assert client.list_model_resources().data == []

    lines = warnings(capsys)
    assert len(lines) == 2, lines  # two different broken shapes, each once
    assert all(
        line.startswith("warning: skipped a model resource with no id in a list of ") for line in lines
    )
    assert all(SECRET not in line for line in lines)


def test_a_strange_id_is_printed_on_one_short_line(capsys):
    long_id = "mr_" + "x" * 500 + "\n\x1b[31mred"
    script = Script(page([resource_json(long_id, status=None)]))
    make_client(script).list_model_resources()

    [line] = warnings(capsys)
    assert "\x1b" not in line and "red" not in line and len(line) < 400


@pytest.mark.parametrize(
    "body, where",
    [
        ({"data": {"id": "mr_1"}, "meta": {}}, "data: Input should be a valid list"),
        ({"data": None}, "data: Input should be a valid list"),
        ({"data": [], "meta": "page 1"}, "meta: Input should be"),
        (["a", "list"], "body: Input should be a valid dictionary"),
    ],
)
def test_a_broken_envelope_still_raises_as_an_unexpected_body(body, where):
    script = Script(reply(200, body), reply(200, body))
    client = make_client(script)
    with pytest.raises(ApiError) as resources:
        client.list_model_resources()
    with pytest.raises(ApiError) as sessions:
        client.list_training_sessions()
    for caught in (resources, sessions):
        assert "unexpected response body" in str(caught.value) and where in str(caught.value)


def test_the_get_of_one_unreadable_object_still_raises():
    script = Script(
        reply(200, resource_json("mr_1", status=7)),
        reply(200, {**session_json("ts_1"), "created_at": "noon"}),
    )
    client = make_client(script)
    with pytest.raises(ApiError, match="unexpected response body: status"):
        client.get_model_resource("mr_1")
    with pytest.raises(ApiError, match="unexpected response body: created_at"):
        client.get_training_session("ts_1")


def test_paging_goes_on_past_a_page_whose_every_item_was_skipped(capsys):
    bad = fresh("mr")
    script = Script(
        reply(200, {"data": [resource_json(bad, status=7)], "meta": {"has_more": True}}),
        page([resource_json("mr_1")]),
    )
    ids = [r.id for r in make_client(script).iter_model_resources(page_size=1)]

    assert ids == ["mr_1"]
    assert script.requests[1].url.params["after"] == bad  # after what the API sent, not what we could read
    assert len(warnings(capsys)) == 1


def test_the_cursor_after_a_skipped_last_item_is_that_item(capsys):
    bad = fresh("ts")
    script = Script(
        reply(
            200, {"data": [session_json("ts_3"), session_json(bad, status=[])], "meta": {"has_more": True}}
        ),
        page([session_json("ts_1")]),
    )
    ids = [s.id for s in make_client(script).iter_training_sessions(page_size=2)]

    assert ids == ["ts_3", "ts_1"]
    assert script.requests[1].url.params["after"] == bad


def test_the_reconciliation_snapshots_skip_what_they_cannot_read(capsys):
    bad_resource, bad_session = fresh("mr"), fresh("ts")
    script = Script(
        page(
            [resource_json("mr_2"), resource_json(bad_resource, lora_enabled="maybe"), resource_json("mr_1")]
        ),
        page([session_json(bad_session, step={"no": 1}), session_json("ts_1")]),
    )
    client = make_client(script)

    assert client.active_model_resource_ids() == frozenset({"mr_2", "mr_1"})
    assert client.active_training_session_ids("mr_1") == frozenset({"ts_1"})
    lines = warnings(capsys)
    assert len(lines) == 2 and bad_resource in lines[0] and bad_session in lines[1]


def test_refreshs_shared_list_skips_what_it_cannot_read(capsys, monkeypatch):
    from pulumi_together_rl import config
    from pulumi_together_rl.resources import process
    from pulumi_together_rl.resources.model_resource_schema import MODEL_RESOURCE

    monkeypatch.setenv("TOGETHER_BASE_URL", "https://api.test")
    config.reset()
    process.clear_lookups()
    bad = fresh("mr")
    script = Script(
        page([resource_json("mr_1", status="MODEL_RESOURCES_STATUS_READY"), resource_json(bad, status=7)])
    )
    try:
        listed = process.listed(make_client(script), MODEL_RESOURCE)
    finally:
        process.clear_lookups()
        config.reset()

    assert list(listed) == ["mr_1"]
    assert [f"model resource {bad} " in line for line in warnings(capsys)] == [True]
