"""One object the client cannot read in the API's lists fails nothing: concurrent creates of both kinds, whose
waits share one list per tick (and whose create reconciliation lists too), all succeed, nothing is stopped,
and the unreadable objects are warned about once each.

The emulator's list extras put raw items into every list answer of a collection
(``EmulatorControl.set_list_extras``), here items that no version of the client could read.
"""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

RESOURCES = "/v1/rl/model-resources"
SESSIONS = "/v1/rl/training-sessions"


def _unreadable(prefix: str) -> str:
    return f"{prefix}-unreadable-{uuid.uuid4().hex[:12]}"  # once per id per process: fresh ids per run


def test_concurrent_creates_outlive_unreadable_objects_in_every_list(rig, capsys):
    # Waits then take a few ticks each (so the shared lists, poisoned, are what they watch).
    rig.control.configure(
        timings={"resource_pending": 0.3, "resource_creating": 0.3, "session_creating": 0.4}
    )
    first = rig.create_resource()  # the sessions' resource (before the lists are poisoned)
    bad_status, no_created_at = _unreadable("mr"), _unreadable("mr")
    bad_session = _unreadable("ts")
    readable = next(o for o in rig.control.state()["model_resources"] if o["id"] == first.id)
    missing = {k: v for k, v in readable.items() if k != "created_at"}
    rig.control.set_list_extras(
        "model-resources",
        [{**readable, "id": bad_status, "status": 7}, {**missing, "id": no_created_at}],
    )
    rig.control.set_list_extras(
        "training-sessions",
        [{"id": bad_session, "status": "TRAINING_SESSION_STATUS_RUNNING", "created_at": "not a time"}],
    )
    rig.control.clear_requests()

    with ThreadPoolExecutor(max_workers=6) as pool:
        resources = [pool.submit(rig.create_resource) for _ in range(3)]
        sessions = [pool.submit(rig.create_session, first.id, lora_config={"rank": 8}) for _ in range(3)]
        made_resources = [f.result(timeout=60) for f in resources]
        made_sessions = [f.result(timeout=60) for f in sessions]

    assert [r.outs["status"] for r in made_resources] == ["READY"] * 3
    assert [s.outs["status"] for s in made_sessions] == ["RUNNING"] * 3
    state = rig.control.state()
    statuses = {o["id"]: o["status"] for o in state["model_resources"] + state["training_sessions"]}
    assert {statuses[r.id] for r in [first, *made_resources]} == {"MODEL_RESOURCES_STATUS_READY"}
    assert {statuses[s.id] for s in made_sessions} == {"TRAINING_SESSION_STATUS_RUNNING"}
    log = rig.control.requests()
    assert [r for r in log if r["method"] == "POST" and r["path"].endswith("/stop")] == []
    assert [r["status"] for r in log if r["method"] == "POST"] == [200] * 6  # one send per create
    # The poisoned lists were really what the creates and the waits read, several ticks of them.
    for path in (RESOURCES, SESSIONS):
        assert len([r for r in log if r["method"] == "GET" and r["path"] == path]) >= 3, path
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning: skipped")]
    for ident, kind, field in (
        (bad_status, "model resource", "status"),
        (no_created_at, "model resource", "created_at"),
        (bad_session, "training session", "model_resources_id"),
    ):
        mine = [line for line in lines if ident in line]
        assert len(mine) == 1, (ident, lines)
        assert mine[0].startswith(f"warning: skipped {kind} {ident} in a list of /v1/rl/")
        assert f": {field}: " in mine[0]
    assert len(lines) == 3, lines
