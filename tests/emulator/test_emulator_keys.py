"""A team's keys: several API keys of one user. Every key sees every object as ``created_by=me``; only the
control API tells them apart, by a digest of the key (the key that made each object in ``GET /_emulator/state``,
the key that sent each request in the request log), and no API answer carries either."""

from __future__ import annotations

import httpx
import pytest
from emulator_helpers import SMALL_MODEL

from pulumi_together_rl.emulator.control import EmulatorControl, EmulatorControlError
from pulumi_together_rl.emulator.server import EmulatorServer
from pulumi_together_rl.emulator.settings import key_digest

RESOURCES = "/v1/rl/model-resources"
SESSIONS = "/v1/rl/training-sessions"
ALICE, BOB, CI = "tk-team-alice-0001", "tk-team-bob-0002", "tk-team-ci-0003"


def _client(emulator, key: str) -> httpx.Client:
    return httpx.Client(base_url=emulator.base_url, headers={"Authorization": f"Bearer {key}"})


def test_key_digest_is_short_stable_and_never_the_key():
    assert key_digest(ALICE) == key_digest(ALICE)
    assert key_digest(ALICE) != key_digest(BOB)
    assert key_digest(ALICE).startswith("key-") and len(key_digest(ALICE)) == 20
    assert ALICE not in key_digest(ALICE)
    assert EmulatorControl.key_digest(ALICE) == key_digest(ALICE)


def test_every_key_of_the_team_is_accepted_and_no_other(emulator):
    emulator.control.configure(api_key=ALICE, api_keys=[BOB, CI])
    for key in (ALICE, BOB, CI):
        with _client(emulator, key) as http:
            assert http.get(RESOURCES).status_code == 200, key
    with _client(emulator, "tk-stranger") as http:
        wrong = http.get(RESOURCES)
    assert wrong.status_code == 401
    assert wrong.json()["error"]["code"] == "invalid_api_key"


def test_api_keys_alone_restrict_the_keys_accepted(emulator):
    emulator.control.configure(api_keys=[BOB])
    with _client(emulator, BOB) as http:
        assert http.get(RESOURCES).status_code == 200
    with _client(emulator, ALICE) as http:
        assert http.get(RESOURCES).status_code == 401
    emulator.control.configure(api_keys=[])
    with _client(emulator, "anything") as http:
        assert http.get(RESOURCES).status_code == 200  # no key set: any key, as before


def test_objects_of_every_key_are_the_same_users_and_the_state_alone_says_whose_key_made_them(emulator):
    emulator.control.configure(api_keys=[ALICE, BOB])
    with _client(emulator, ALICE) as alice, _client(emulator, BOB) as bob:
        made_by_alice = alice.post(RESOURCES, json={"base_model": SMALL_MODEL}).json()
        made_by_bob = bob.post(RESOURCES, json={"base_model": SMALL_MODEL}).json()
        # READY at once (FAST_TIMINGS): a session of Bob's on Alice's resource.
        session = bob.post(SESSIONS, json={"model_resources_id": made_by_alice["id"]}).json()
        answers = [
            made_by_alice,
            made_by_bob,
            session,
            alice.get(f"{RESOURCES}/{made_by_bob['id']}").json(),
            alice.get(f"{SESSIONS}/{session['id']}").json(),
            *alice.get(RESOURCES, params={"created_by": "me"}).json()["data"],
            *bob.get(SESSIONS, params={"created_by": "me"}).json()["data"],
        ]
        mine = {o["id"] for o in alice.get(RESOURCES, params={"created_by": "me"}).json()["data"]}
    assert mine == {made_by_alice["id"], made_by_bob["id"]}  # every key sees every object as its user's
    assert {a["created_by"] for a in answers} == {"user_emulator"}
    for answer in answers:
        assert "created_with" not in answer and not any(
            text in str(answer) for text in (key_digest(ALICE), key_digest(BOB))
        )
    state = emulator.control.state()
    assert state["created_with"] == {
        made_by_alice["id"]: key_digest(ALICE),
        made_by_bob["id"]: key_digest(BOB),
        session["id"]: key_digest(BOB),
    }
    assert all("created_with" not in o for o in state["model_resources"] + state["training_sessions"])


def test_the_request_log_names_the_key_of_each_request_a_stop_included_never_the_key(emulator):
    emulator.control.configure(api_keys=[ALICE, BOB])
    with _client(emulator, ALICE) as alice, _client(emulator, BOB) as bob:
        made = alice.post(RESOURCES, json={"base_model": SMALL_MODEL}).json()
        assert bob.post(f"{RESOURCES}/{made['id']}/stop").status_code == 200
    with httpx.Client(base_url=emulator.base_url) as bare:
        assert bare.get(RESOURCES).status_code == 401
    log = emulator.control.requests()
    assert [(e["method"], e["path"], e["key"]) for e in log] == [
        ("POST", RESOURCES, key_digest(ALICE)),
        ("POST", f"{RESOURCES}/{made['id']}/stop", key_digest(BOB)),
        ("GET", RESOURCES, None),
    ]
    assert ALICE not in repr(log) and BOB not in repr(log)


def test_a_faulted_request_names_its_key_too(emulator):
    emulator.control.configure(api_keys=[ALICE])
    emulator.control.add_fault(method="POST", path="/stop$", status=503, times=1)
    with _client(emulator, ALICE) as alice:
        made = alice.post(RESOURCES, json={"base_model": SMALL_MODEL}).json()
        assert alice.post(f"{RESOURCES}/{made['id']}/stop").status_code == 503
    stop = emulator.control.requests()[-1]
    assert (stop["fault"] is not None, stop["handled"], stop["key"]) == (True, False, key_digest(ALICE))


def test_api_keys_setting_is_validated_and_reset_restores_the_start_keys(emulator):
    for bad in ("tk-one", [""], [1], None):
        with pytest.raises(EmulatorControlError) as err:
            emulator.control.configure(api_keys=bad)
        assert err.value.status == 400
        assert err.value.param == "api_keys"
    assert emulator.control.configure(api_keys=[BOB, BOB, CI])["api_keys"] == [
        key_digest(BOB),
        key_digest(CI),
    ]
    emulator.control.reset()
    assert emulator.control.settings()["api_keys"] == []
    with EmulatorServer(api_keys=[ALICE, BOB]) as server, server.control() as control:
        control.configure(api_keys=[CI])
        control.reset()
        assert control.settings()["api_keys"] == [key_digest(ALICE), key_digest(BOB)]
        for key, status in ((CI, 401), (ALICE, 200), (BOB, 200)):
            with httpx.Client(base_url=server.base_url, headers={"Authorization": f"Bearer {key}"}) as http:
                assert http.get(RESOURCES).status_code == status


def _every_control_answer(control: EmulatorControl, patched: dict) -> str:
    """The text of every answer of the control API that reads something back (and of the PATCH that set the
    keys), after requests were sent with them."""
    http = control._http
    answers = [http.patch("/settings", json=patched)]
    answers += [
        http.get(path) for path in ("/settings", "/state", "/requests", "/faults", "/list-extras", "/clock")
    ]
    assert all(a.status_code == 200 for a in answers), [a.text for a in answers]
    return "\n".join(a.text for a in answers)


def test_the_control_api_shows_a_key_as_its_digest_and_never_any_part_of_it(emulator):
    # The control API has no authentication: whoever reaches it must not learn a key, whole or in part.
    keys = {"api_key": "tk-OWNER-qrstuvwxyz-SECRET", "api_keys": ["tk-MEMBER-mnopqrsuvw-SECRET"]}
    emulator.control.add_fault(
        method="GET", path=f"^{RESOURCES}$", status=503, times=1, keys=[key_digest(ALICE)]
    )
    text = _every_control_answer(emulator.control, keys)
    for key in (keys["api_key"], *keys["api_keys"]):
        with _client(emulator, key) as http:
            assert http.post(RESOURCES, json={"base_model": SMALL_MODEL}).status_code == 200
    text += _every_control_answer(emulator.control, keys)

    settings = emulator.control.settings()
    assert (settings["api_key"], settings["api_keys"]) == (
        key_digest(keys["api_key"]),
        [key_digest(k) for k in keys["api_keys"]],
    )
    assert sorted(emulator.control.state()["created_with"].values()) == sorted(
        key_digest(k) for k in (keys["api_key"], *keys["api_keys"])
    )
    for key in (keys["api_key"], *keys["api_keys"]):
        parts = {key[i : i + 6] for i in range(len(key) - 5)}
        assert [p for p in parts if p in text] == [], key


def test_a_fault_rule_takes_key_digests_only_so_its_listing_shows_no_key(emulator):
    with pytest.raises(EmulatorControlError) as err:
        emulator.control.add_fault(status=503, keys=[ALICE])
    assert (err.value.status, err.value.param) == (400, "keys")
    assert ALICE not in str(err.value)
    assert emulator.control.faults() == []


def test_a_fault_rule_can_be_aimed_at_some_of_the_keys(emulator):
    emulator.control.configure(api_keys=[ALICE, BOB])
    rule = emulator.control.add_fault(
        method="POST", path=f"^{RESOURCES}$", status=503, times=None, keys=[key_digest(BOB)]
    )
    with _client(emulator, ALICE) as alice, _client(emulator, BOB) as bob:
        assert alice.post(RESOURCES, json={"base_model": SMALL_MODEL}).status_code == 200
        assert bob.post(RESOURCES, json={"base_model": SMALL_MODEL}).status_code == 503
        assert alice.post(RESOURCES, json={"base_model": SMALL_MODEL}).status_code == 200
    assert [r["fired"] for r in emulator.control.faults() if r["id"] == rule] == [1]
    assert len(emulator.control.state()["model_resources"]) == 2
    for bad in ("key-x", [""], [3]):
        with pytest.raises(EmulatorControlError) as err:
            emulator.control.add_fault(status=503, keys=bad)
        assert err.value.param == "keys"
