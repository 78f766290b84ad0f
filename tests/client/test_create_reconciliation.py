"""One logical create never yields two objects: ambiguous failures are reconciled, never resent blindly, and
a lookup takes only what it can attribute to the create.

Every create first lists the caller's active objects of its kind (the snapshot); after an ambiguous failure
only objects *not* in that snapshot can be the one it made, and only a unique, uncontested, strict match is
taken. "Answered" failures (the API's own 5xx, with its error envelope) are looked up once: a look-alike is
named, never taken (the API said "failed"), and the create is resent only when nothing was made; "unanswered" ones
(read timeout, dropped connection, 502/504, a 5xx without the envelope, unreadable 2xx) are looked up over a
settle window inside the POST's own window on the API's clock, taken when unique, and never resent.
"""

from __future__ import annotations

import email.utils
import functools
import threading
from datetime import timedelta

import httpx
import pytest

from pulumi_together_rl.client import (
    ApiConnectionError,
    ApiError,
    ApiTimeout,
    BadRequest,
    ComputeConfigParams,
    GpuType,
    LoraConfig,
    ModelResourceCreateRequest,
    MuonScalingStrategy,
    OptimizerConfig,
    RateLimited,
    ServerError,
    SessionMetadata,
    TogetherError,
    TrainingSessionCreateRequest,
    WandbMetadata,
)
from pulumi_together_rl.client.matching import (
    resource_defaults,
    resource_differences,
    resource_matches,
    session_matches,
)
from pulumi_together_rl.client.models import (
    AdamConfig,
    ModelResource,
    MuonConfig,
    SupportedModelList,
    TrainingSession,
)
from pulumi_together_rl.client.reconcile import (
    CLOCK_SKEW,
    LIVE_RESOURCE_STATUSES,
    AmbiguousCreate,
    Attribution,
)

from . import scripted
from .scripted import CATALOG, Sleeps, ago, error, make_client, now, page, reply, resource_json, session_json

# The strict lookup asks the server's catalog for its defaults: these scripts answer it.
Script = functools.partial(scripted.Script, catalog=True)


def anywhere(existing=(), **kw) -> Attribution:
    """An attribution with no time window (the process that sent the POST)."""
    return Attribution(frozenset(existing), None, **kw)


def proves(verdict: str, ids) -> object:
    """A record's judgement (:meth:`CreateRecord.judge`) that says ``verdict`` of each id ``ids()`` gives."""
    return lambda candidates: {i: verdict for i in candidates if i in ids()}


REQ = ModelResourceCreateRequest(base_model="Qwen/Qwen3.5-4B")
SESSION_REQ = TrainingSessionCreateRequest(model_resources_id="mr_1", display_name="exp-1")
RESOURCES = "/v1/rl/model-resources"
SESSIONS = "/v1/rl/training-sessions"

ANSWERED = [
    pytest.param(lambda: error(503, "unavailable"), ServerError, id="503"),
    pytest.param(lambda: error(500, "internal"), ServerError, id="500"),
]
UNANSWERED = [
    pytest.param(lambda: httpx.ReadTimeout, ApiTimeout, id="read-timeout"),
    pytest.param(lambda: httpx.RemoteProtocolError, ApiConnectionError, id="dropped-connection"),
    pytest.param(lambda: httpx.ReadError, ApiConnectionError, id="read-error"),
    pytest.param(lambda: error(502, "bad gateway"), ServerError, id="502"),
    pytest.param(lambda: error(504, "gateway timeout"), ServerError, id="504"),
    pytest.param(lambda: httpx.Response(200, text="<html>ok</html>"), ApiError, id="2xx-not-json"),
    pytest.param(
        lambda: (
            lambda request: httpx.Response(200, headers={"content-encoding": "gzip"}, content=b"not gzip")
        ),
        ApiConnectionError,
        id="2xx-bad-content-encoding",
    ),
]

# The settle window's lookups with the default 60 s read timeout: 0.5 s doubling to 8 s, then the rest.
DEFAULT_SETTLE_SLEEPS = [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0, 4.5]


# ------------------------------------------------------------------------------------------- snapshot


def test_a_create_first_lists_the_callers_active_objects_of_its_kind():
    script = Script(
        page([resource_json("mr_old")]),
        reply(200, resource_json("mr_new")),
        page([session_json("ts_old")]),
        reply(200, session_json("ts_new")),
    )
    client = make_client(script)
    assert client.create_model_resource(REQ).id == "mr_new"
    assert client.create_training_session(SESSION_REQ).id == "ts_new"
    assert script.calls() == [f"GET {RESOURCES}", f"POST {RESOURCES}", f"GET {SESSIONS}", f"POST {SESSIONS}"]
    resources, sessions = script.requests[0].url.params, script.requests[2].url.params
    assert dict(resources) == {
        "created_by": "me",
        "limit": "100",
        "status": "MODEL_RESOURCES_STATUS_PENDING,MODEL_RESOURCES_STATUS_CREATING,MODEL_RESOURCES_STATUS_READY",
    }
    assert dict(sessions) == {
        "created_by": "me",
        "model_resources_id": "mr_1",
        "limit": "100",
        "status": "TRAINING_SESSION_STATUS_CREATING,TRAINING_SESSION_STATUS_RUNNING",
    }


def test_snapshot_follows_every_page():
    script = Script(
        page([resource_json("mr_a")], next_cursor="mr_a"),
        page([resource_json("mr_b")]),
        error(503, "acted, then failed"),
        page([resource_json("mr_b"), resource_json("mr_a")]),  # nothing new: the server did not act
        reply(200, resource_json("mr_c")),
    )
    assert make_client(script).create_model_resource(REQ).id == "mr_c"
    assert script.requests[1].url.params["after"] == "mr_a"


def test_a_failed_snapshot_fails_the_create_before_anything_is_sent():
    script = Script(error(500, "list broken"), error(500, "list broken"))
    with pytest.raises(ServerError) as caught:
        make_client(script, max_attempts=2).create_model_resource(REQ)
    assert script.calls("POST") == []
    text = str(caught.value)
    assert "nothing was sent" in text
    assert "listing your active model resources" in text
    assert caught.value.maybe_created is False
    assert "list broken" in text
    assert caught.value.status == 500


def test_a_snapshot_whose_paging_loops_fails_the_create_before_sending():
    script = Script(
        page([resource_json("mr_a")], next_cursor="x"),
        page([resource_json("mr_b")], next_cursor="x"),
    )
    with pytest.raises(TogetherError, match="twice") as caught:
        make_client(script).create_model_resource(REQ)
    assert "nothing was sent" in str(caught.value)
    assert script.calls("POST") == []


# ------------------------------------------------------------------------------------------- answered


@pytest.mark.parametrize(("failure", "kind"), ANSWERED)
def test_an_answered_failure_names_a_look_alike_and_neither_takes_it_nor_resends(failure, kind, capsys):
    """The API answered "failed" while a colleague's identical POST landed: the look-alike is the colleague's
    as likely as this create's. It is named (the user decides with adopt_id), never taken, nothing resent."""
    script = Script(page([]), failure(), page([resource_json("mr_9")]))
    sleeps = Sleeps()
    with pytest.raises(kind) as caught:
        make_client(script, sleeps=sleeps).create_model_resource(REQ)
    assert script.calls() == [f"GET {RESOURCES}", f"POST {RESOURCES}", f"GET {RESOURCES}"]
    lookup = script.requests[2].url.params
    assert (lookup["created_by"], lookup["status"]) == ("me", script.requests[0].url.params["status"])
    assert sleeps == [0.5]  # one short pause before the one lookup
    assert caught.value.maybe_created is True
    assert isinstance(caught.value.lookup_error, AmbiguousCreate)
    assert "mr_9 (PENDING" in str(caught.value) and "the API itself answered that the create failed" in str(
        caught.value
    )
    assert "taken" not in capsys.readouterr().err


@pytest.mark.parametrize(("failure", "kind"), ANSWERED)
def test_answered_failure_is_resent_once_the_lookup_finds_nothing(failure, kind):
    script = Script(page([]), failure(), page([]), reply(200, resource_json("mr_2")))
    got = make_client(script).create_model_resource(REQ)
    assert got.id == "mr_2"
    assert script.calls() == [
        f"GET {RESOURCES}",
        f"POST {RESOURCES}",
        f"GET {RESOURCES}",
        f"POST {RESOURCES}",
    ]


def test_answered_create_gives_up_within_the_budget_and_says_how_to_find_a_stray_object():
    script = Script(page([]))
    for _ in range(3):
        script.add(error(503, "still down"), page([]))
    sleeps = Sleeps()
    with pytest.raises(ServerError) as caught:
        make_client(script, sleeps=sleeps, max_attempts=3).create_model_resource(REQ)
    assert script.calls("POST") == [f"POST {RESOURCES}"] * 3
    assert script.calls("GET") == [f"GET {RESOURCES}"] * 4  # the snapshot, then one lookup per failure
    assert len(sleeps) == 3  # one backoff before each lookup, none wasted after the last
    text = str(caught.value)
    assert "still down" in text
    assert "may have succeeded anyway" in text
    assert "created_by=me" in text
    assert 'base_model="Qwen/Qwen3.5-4B"' in text
    assert caught.value.status == 503
    assert caught.value.maybe_created is True


def test_a_lookup_failing_for_the_whole_settle_window_raises_the_create_error_with_the_hint():
    # The first lookup fails; the looking goes on over the settle window (0 here: one more lookup), fails
    # again, and the create is not resent: nothing proved that nothing was made.
    broken = [error(500, "list broken")] * 4
    script = Script(page([]), error(500, "boom"), *broken)
    with pytest.raises(ServerError) as caught:
        make_client(script, max_attempts=2, settle_window=0).create_training_session(SESSION_REQ)
    text = str(caught.value)
    assert caught.value.status == 500
    assert "created_by=me&model_resources_id=mr_1" in text
    assert "looking for it failed" in text
    assert "list broken" in text
    assert script.calls("POST") == [f"POST {SESSIONS}"]


def test_a_lookup_that_fails_for_now_is_not_found_yet_and_the_looking_goes_on():
    """An outage takes the list down with the create: the object is found once the list answers again (after the
    API's own 500, a session's one look-alike on its GPU is taken, by the per-kind rule; nothing is resent)."""
    script = Script(
        page([]),
        error(500, "boom"),
        error(503, "list down"),
        error(503, "list down"),
        *[page([session_json("ts_mine", display_name="exp-1")])] * 40,
    )
    assert make_client(script, max_attempts=2).create_training_session(SESSION_REQ).id == "ts_mine"
    assert script.calls("POST") == [f"POST {SESSIONS}"]

    lost = Script(
        page([]),
        httpx.ReadTimeout,
        error(503, "list down"),
        error(503, "list down"),
        page([session_json("ts_lost", display_name="exp-1")]),
    )
    assert make_client(lost, max_attempts=2).create_training_session(SESSION_REQ).id == "ts_lost"
    assert lost.calls("POST") == [f"POST {SESSIONS}"]


def test_an_answered_failure_keeps_looking_while_the_list_lags_and_never_resends(capsys):
    """The server made the session and answered 500; the list shows it only at the third look: no second
    object. Once seen, it must stay the only candidate for the list lag before it is taken (the confirmation
    looks), and the line says it was taken by a match."""
    mine = page([session_json("ts_mine", display_name="exp-1")])
    script = Script(page([]), error(500, "boom"), page([]), page([]), *[mine] * 40)
    sleeps = Sleeps()
    got = make_client(script, sleeps=sleeps, list_lag=5.0).create_training_session(SESSION_REQ)
    assert got.id == "ts_mine"
    assert script.calls("POST") == [f"POST {SESSIONS}"]
    assert 5.0 <= sum(sleeps) <= 2 * 5.0 + 2.0  # the pause, the lookups within the lag, the confirmation
    assert "ts_mine: taken as this create's by a match, not by an answer" in capsys.readouterr().err


def test_a_look_alike_seen_alone_while_the_list_lags_is_not_taken_once_the_own_object_shows():
    """The create's POST acted and answered 500; a colleague's identical object (made meanwhile) is listed
    first while the list still hides the create's own. A candidate must stay unique for the list lag: when the
    own object shows up within it, there are two, and none is taken (nor is anything resent). The two are
    named once the lag is over (the lookups go on until then)."""
    colleagues = session_json("ts_colleague", display_name="exp-1", created_at=ago(2))
    mine = session_json("ts_mine", display_name="exp-1")
    both = [page([colleagues, mine])] * 12
    script = Script(page([]), error(500, "boom"), page([colleagues]), page([colleagues]), *both)
    with pytest.raises(ServerError) as caught:
        make_client(script, list_lag=5.0).create_training_session(SESSION_REQ)
    assert caught.value.maybe_created is True
    assert "ts_colleague" in str(caught.value) and "ts_mine" in str(caught.value)
    assert script.calls("POST") == [f"POST {SESSIONS}"]


def test_the_journal_is_read_after_the_list_so_a_create_that_records_its_id_meanwhile_is_never_taken():
    """Another process's create of the same request is unanswered while this lookup starts, and records its id
    while the list is being answered. Read before the list, its entry would be neither a claim (no id yet) nor a
    rival (an id by then): its object would be taken."""
    journal = {"id": None}

    def listing(request):
        journal["id"] = "mr_theirs"  # their POST answered and their journal recorded it, meanwhile
        return page([resource_json("mr_theirs")])

    def rivals():
        return [] if journal["id"] else [((now() - timedelta(seconds=5), now()), None)]

    client = make_client(Script(listing))
    judge = proves("theirs", lambda: {journal["id"]} - {None})
    found = client.find_created_model_resource(REQ, attribution=anywhere(judge=judge, rivals=rivals))
    assert found is None


def test_a_503_without_acting_never_adopts_an_identical_object_that_existed_before_the_send():
    """Another stack's identical resource, made a minute earlier, is in the snapshot: never ours."""
    foreign = resource_json("mr_foreign", created_at=ago(60))
    script = Script(
        page([foreign]), error(503, "refused"), page([foreign]), reply(200, resource_json("mr_mine"))
    )
    assert make_client(script).create_model_resource(REQ).id == "mr_mine"
    assert script.calls("POST") == [f"POST {RESOURCES}"] * 2


def test_a_503_without_acting_never_adopts_a_just_stopped_object_even_if_the_server_lists_it():
    """`pulumi destroy` then `up` in a new process: the stopped resource is no candidate (not active)."""
    stopped = resource_json("mr_stopped", status="MODEL_RESOURCES_STATUS_STOPPED", created_at=ago(30))
    # A server that ignores the status filter still cannot make a stopped object a candidate.
    script = Script(page([]), error(503, "refused"), page([stopped]), reply(200, resource_json("mr_new")))
    assert make_client(script).create_model_resource(REQ).id == "mr_new"


def dated(response: httpx.Response, offset: float) -> httpx.Response:
    """``response`` with the ``Date`` header of an API whose clock is ``offset`` seconds ahead of this one."""
    response.headers["Date"] = email.utils.format_datetime(now() + timedelta(seconds=offset), usegmt=True)
    return response


@pytest.mark.parametrize(
    "offset", [-3600, -180, 180, 3600], ids=["1h-behind", "3min-behind", "3min-ahead", "1h-ahead"]
)
def test_an_api_clock_far_from_this_one_is_measured_and_hides_nothing_the_create_made(offset):
    """The window is mapped onto the API's clock by its Date header: an API hours off changes nothing."""
    made = resource_json("mr_made", created_at=ago(-offset))
    script = Script(dated(page([]), offset), httpx.ReadTimeout, dated(page([made]), offset))
    assert make_client(script).create_model_resource(REQ).id == "mr_made"


def test_a_look_alike_made_outside_the_posts_own_window_is_never_taken():
    """The API's clock measured (no skew): an identical object stamped 30 s before this POST's send, after the
    snapshot, is someone else's; the create says what may exist and resends nothing."""
    theirs = resource_json("mr_theirs", created_at=ago(30))
    script = Script(dated(page([]), 0), httpx.ReadTimeout, *[dated(page([theirs]), 0)] * 20)
    with pytest.raises(ApiTimeout) as caught:
        make_client(script).create_model_resource(REQ)
    assert caught.value.maybe_created is True and script.calls("POST") == [f"POST {RESOURCES}"]


# ----------------------------------------------------------------------------------------- unanswered


@pytest.mark.parametrize(("failure", "kind"), UNANSWERED)
def test_unanswered_failure_is_not_resent_when_the_lookup_finds_what_it_made(failure, kind, capsys):
    script = Script(page([]), failure(), page([resource_json("mr_9")]))
    got = make_client(script).create_model_resource(REQ)
    assert got.id == "mr_9"
    assert script.calls() == [f"GET {RESOURCES}", f"POST {RESOURCES}", f"GET {RESOURCES}"]
    line = capsys.readouterr().err.strip()
    assert line.startswith("model resource mr_9: taken as this create's by a match, not by an answer")
    assert "made 0" in line and "after the POST was sent" in line


@pytest.mark.parametrize(("failure", "kind"), UNANSWERED)
def test_unanswered_failure_is_never_resent_and_says_the_object_may_exist(failure, kind, capsys):
    script = Script(page([]), failure(), *[page([])] * len(DEFAULT_SETTLE_SLEEPS))
    sleeps = Sleeps()
    req = ModelResourceCreateRequest(
        base_model="Qwen/Qwen3.5-4B", compute_config=ComputeConfigParams(gpu_type=GpuType.H100_80GB)
    )
    with pytest.raises(kind) as caught:
        make_client(script, sleeps=sleeps).create_model_resource(req)
    assert type(caught.value) is kind
    assert script.calls("POST") == [f"POST {RESOURCES}"]  # never resent
    # Looked repeatedly, with backoff, for the whole settle window (the 60 s read timeout), all fake sleeps.
    assert sleeps == DEFAULT_SETTLE_SLEEPS
    assert sum(sleeps) == 60.0
    assert script.calls("GET") == [f"GET {RESOURCES}"] * (1 + len(DEFAULT_SETTLE_SLEEPS))
    text = str(caught.value)
    assert "may have succeeded anyway" in text
    assert "not resent" in text
    assert f"GET {RESOURCES}?created_by=me" in text
    assert 'base_model="Qwen/Qwen3.5-4B"' in text and 'compute_config.gpu_type="H100-80GB"' in text
    assert "looking for the model resource it may have made for up to 60 s" in capsys.readouterr().err
    assert caught.value.maybe_created is True


def test_unanswered_create_finds_an_object_that_shows_up_late():
    script = Script(page([]), httpx.ReadTimeout, page([]), page([]), page([resource_json("mr_late")]))
    sleeps = Sleeps()
    assert make_client(script, sleeps=sleeps).create_model_resource(REQ).id == "mr_late"
    assert sleeps == [0.5, 1.0, 2.0]
    assert script.calls("POST") == [f"POST {RESOURCES}"]


def test_settle_window_follows_the_read_timeout_or_the_argument():
    script = Script(page([]), httpx.ReadTimeout, *[page([])] * 4)
    sleeps = Sleeps()
    with pytest.raises(ApiTimeout):
        make_client(script, sleeps=sleeps, timeout=5).create_model_resource(REQ)
    assert sleeps == [0.5, 1.0, 2.0, 1.5]

    script = Script(page([]), httpx.RemoteProtocolError, page([]))
    sleeps = Sleeps()
    with pytest.raises(ApiConnectionError):
        make_client(script, sleeps=sleeps, settle_window=0.2).create_model_resource(REQ)
    assert sleeps == [0.2]


def test_unanswered_session_create_error_names_its_inputs():
    req = TrainingSessionCreateRequest(
        model_resources_id="mr_1",
        display_name="exp-7",
        metadata=SessionMetadata(wandb=WandbMetadata(run_name="r7")),
    )
    script = Script(page([]), httpx.ReadTimeout, page([]))
    with pytest.raises(ApiTimeout) as caught:
        make_client(script, settle_window=0).create_training_session(req)
    text = str(caught.value)
    assert f"GET {SESSIONS}?created_by=me&model_resources_id=mr_1" in text
    assert 'display_name="exp-7"' in text and 'metadata.wandb.run_name="r7"' in text
    assert caught.value.maybe_sent is True


def test_lookups_failing_until_the_settle_window_ends_give_the_hint_and_no_resend():
    script = Script(page([]), httpx.ReadTimeout, error(500, "list broken"), error(500, "list broken"))
    sleeps = Sleeps()
    with pytest.raises(ApiTimeout) as caught:
        make_client(script, sleeps=sleeps, max_attempts=2, settle_window=0.5).create_training_session(
            SESSION_REQ
        )
    assert "looking for it failed" in str(caught.value) and "list broken" in str(caught.value)
    assert script.calls("POST") == [f"POST {SESSIONS}"]


# ---------------------------------------------------------------------------------- not ambiguous


@pytest.mark.parametrize("failure", [httpx.ConnectError, httpx.ConnectTimeout])
def test_connect_failure_on_create_is_retried_without_a_lookup(failure):
    script = Script(page([]), failure, reply(200, resource_json("mr_1")))
    sleeps = Sleeps()
    assert make_client(script, sleeps=sleeps).create_model_resource(REQ).id == "mr_1"
    assert script.calls() == [f"GET {RESOURCES}"] + [f"POST {RESOURCES}"] * 2
    assert sleeps == [0.5]


def test_429_on_model_resource_create_is_a_throttle_retried_honouring_retry_after():
    script = Script(
        page([]), error(429, "slow", headers={"Retry-After": "2"}), reply(200, resource_json("mr_1"))
    )
    sleeps = Sleeps()
    assert make_client(script, sleeps=sleeps).create_model_resource(REQ).id == "mr_1"
    assert script.calls("POST") == [f"POST {RESOURCES}"] * 2
    assert sleeps == [2.0]


def test_429_on_model_resource_create_gives_up_after_the_attempt_budget():
    script = Script(page([]), *[error(429, "slow", headers={"Retry-After": "1"})] * 3)
    with pytest.raises(RateLimited):
        make_client(script, max_attempts=3).create_model_resource(REQ)
    assert script.calls("POST") == [f"POST {RESOURCES}"] * 3


def test_429_on_session_create_is_the_session_cap_and_is_raised_at_once():
    script = Script(
        page([]),
        error(429, "session limit reached", code="session_limit_reached", headers={"Retry-After": "30"}),
    )
    sleeps = Sleeps()
    with pytest.raises(RateLimited) as caught:
        make_client(script, sleeps=sleeps).create_training_session(SESSION_REQ)
    assert script.calls("POST") == [f"POST {SESSIONS}"]
    assert sleeps == []
    assert caught.value.retry_after == 30.0


@pytest.mark.parametrize("marks", [{"code": "SESSION_LIMIT_EXCEEDED"}, {"param": "model_resources_id"}])
def test_a_429_that_names_the_session_cap_is_the_cap(marks):
    script = Script(page([]), error(429, "no", **marks))
    with pytest.raises(RateLimited):
        make_client(script, sleeps=Sleeps()).create_training_session(SESSION_REQ)
    assert script.calls("POST") == [f"POST {SESSIONS}"]


def test_a_429_without_a_cap_code_on_session_create_is_throttling_and_is_retried():
    script = Script(
        page([]),
        error(429, "slow down", code="rate_limit_exceeded", headers={"Retry-After": "1"}),
        reply(200, session_json("ts_1", display_name="exp-1")),
    )
    sleeps = Sleeps()
    assert make_client(script, sleeps=sleeps).create_training_session(SESSION_REQ).id == "ts_1"
    assert script.calls("POST") == [f"POST {SESSIONS}"] * 2
    assert sleeps == [1.0]


def test_validation_error_on_create_is_raised_at_once():
    script = Script(page([]), error(400, "bad", param="base_model"))
    with pytest.raises(BadRequest) as caught:
        make_client(script).create_model_resource(REQ)
    assert caught.value.param == "base_model"
    assert script.calls("POST") == [f"POST {RESOURCES}"]


# ------------------------------------------------------------------------------------------- lookups


def test_session_create_reconciles_by_resource_and_display_name(capsys):
    script = Script(
        page([]),
        httpx.ReadTimeout,
        page(
            [
                session_json("ts_other", display_name="exp-2"),
                session_json("ts_mine", display_name="exp-1"),
            ]
        ),
    )
    got = make_client(script).create_training_session(SESSION_REQ)
    assert got.id == "ts_mine"
    params = script.requests[2].url.params
    assert (params["created_by"], params["model_resources_id"]) == ("me", "mr_1")
    assert "training session ts_mine: taken as this create's by a match" in capsys.readouterr().err


def test_two_new_matches_are_ambiguous_and_none_is_taken():
    """Which of two identical new objects is this create's cannot be told: neither is taken, both are named."""
    pre, older, newer = (
        resource_json("mr_pre", created_at=ago(9)),
        resource_json("mr_old", created_at=ago(5)),
        resource_json("mr_new", created_at=ago(1)),
    )
    script = Script(page([newer, older, pre]), page([newer, older, pre]))
    client = make_client(script)
    with pytest.raises(AmbiguousCreate) as caught:
        client.find_created_model_resource(REQ, attribution=anywhere({"mr_pre"}))
    assert [c.id for c in caught.value.candidates] == ["mr_old", "mr_new"]
    text = str(caught.value)
    assert "mr_old" in text and "mr_new" in text and "none was taken" in text
    assert caught.value.maybe_created is True
    # Once another declaration is known to hold one of them, the other is unique.
    got = client.find_created_model_resource(
        REQ, attribution=anywhere({"mr_pre"}, judge=proves("theirs", lambda: {"mr_new"}))
    )
    assert got.id == "mr_old"


def test_a_match_never_goes_to_two_creates():
    listing = page([resource_json("mr_a")])
    client = make_client(Script(listing, listing))
    assert client.find_created_model_resource(REQ, attribution=anywhere()).id == "mr_a"
    assert client.find_created_model_resource(REQ, attribution=anywhere()) is None


def test_a_match_that_another_unanswered_create_may_have_made_is_contested_and_not_taken():
    made = resource_json("mr_a", created_at=ago(30))
    rival = ((now() - timedelta(seconds=40), now() - timedelta(seconds=20)), None)
    client = make_client(Script(page([made])))
    with pytest.raises(AmbiguousCreate, match="another create of the same request"):
        client.find_created_model_resource(REQ, attribution=anywhere(rivals=lambda: [rival]))


def test_a_rival_whose_window_is_far_from_the_object_does_not_contest_it():
    made = resource_json("mr_a", created_at=ago(30))
    rival = ((now() - timedelta(hours=3), now() - timedelta(hours=2)), None)
    client = make_client(Script(page([made])))
    assert client.find_created_model_resource(REQ, attribution=anywhere(rivals=lambda: [rival])).id == "mr_a"


@pytest.mark.parametrize(
    ("offset", "found"),
    [
        (0, True),
        (CLOCK_SKEW.total_seconds() - 5, True),
        (CLOCK_SKEW.total_seconds() + 60, False),
        (3600, False),
    ],
)
def test_with_a_window_only_objects_made_inside_it_are_candidates(offset, found):
    """A journal take-over: an identical object made long after the interrupted POST is someone else's."""
    sent = now() - timedelta(hours=2)
    made = resource_json("mr_a", created_at=sent + timedelta(seconds=offset))
    client = make_client(Script(page([made])))
    got = client.find_created_model_resource(
        REQ, attribution=Attribution(frozenset(), (sent, sent + timedelta(seconds=1)))
    )
    assert (got is not None) is found


def test_a_lookup_for_a_request_with_defaults_left_out_asks_the_catalog_once():
    script = Script(page([resource_json("mr_a")]), page([resource_json("mr_b")]))
    client = make_client(script)
    client.find_created_model_resource(REQ, attribution=anywhere())
    client.find_created_model_resource(REQ, attribution=anywhere())
    assert script.catalog_requests == 1


def test_strict_lookup_never_takes_a_resource_whose_unset_inputs_differ_from_the_defaults():
    """Each of these differs from a bare request only where the request said nothing: not the create's."""
    others = [
        resource_json(
            "mr_muon", optimizer_config={"muon": {"scaling_strategy": "MUON_SCALING_STRATEGY_ORIGINAL"}}
        ),
        resource_json("mr_two", compute_config={"num_generator_replicas": 2, "gpu_type": "B200-SXM"}),
        resource_json("mr_h100", compute_config={"num_generator_replicas": 1, "gpu_type": "H100-80GB"}),
        resource_json("mr_idle", inactive_timeout=600),
        resource_json("mr_nogpu", compute_config={"num_generator_replicas": 1}),
    ]
    client = make_client(Script(page(others)))
    assert client.find_created_model_resource(REQ, attribution=anywhere()) is None


def test_strict_lookup_of_a_session_holds_every_unset_field_against_the_candidate():
    others = [
        session_json("ts_name", display_name="someone-else"),
        session_json("ts_rank", display_name="exp-1", lora_config={"rank": 8, "alpha": 64, "dropout": 0}),
        session_json("ts_ckpt", display_name="exp-1", resume_from_checkpoint_id="ck_1"),
        session_json("ts_wandb", display_name="exp-1", metadata={"wandb": {"run_name": "theirs"}}),
    ]
    client = make_client(Script(page(others)))
    assert client.find_created_training_session(SESSION_REQ, attribution=anywhere()) is None


def test_lookup_skips_ids_others_hold_and_ids_a_create_already_returned():
    script = Script(
        page([]),
        reply(200, resource_json("mr_returned")),
        page([resource_json("mr_held"), resource_json("mr_returned")]),
    )
    client = make_client(script)
    assert client.create_model_resource(REQ).id == "mr_returned"
    held = proves("theirs", lambda: {"mr_held"})
    assert client.find_created_model_resource(REQ, attribution=anywhere(judge=held)) is None


def test_an_id_the_record_proves_this_creates_own_is_taken_whatever_else_matches():
    """The create's own entry records it (the answer lost after the id was written): proof, not a match."""
    listing = page([resource_json("mr_mine"), resource_json("mr_colleague")])
    client = make_client(Script(listing, listing))
    judge = proves("ours", lambda: {"mr_mine"})
    assert client.find_created_model_resource(REQ, attribution=anywhere(judge=judge)).id == "mr_mine"


def test_an_id_whose_record_proves_nothing_makes_the_match_ambiguous_never_excluded():
    """A claim that names an entry that is gone (or records another id) neither proves the object another's nor
    this create's: the one match is then contested, and nothing is taken."""
    listing = page([resource_json("mr_doubtful")])
    client = make_client(Script(listing, listing))
    with pytest.raises(AmbiguousCreate) as caught:
        client.find_created_model_resource(
            REQ, attribution=anywhere(judge=proves("doubtful", lambda: {"mr_doubtful"}))
        )
    assert [c.id for c in caught.value.candidates] == ["mr_doubtful"]


def test_lookup_reads_every_page_of_active_objects():
    script = Script(
        page([resource_json("mr_a", base_model="other")], next_cursor="mr_a"),
        page([resource_json("mr_b", created_at=ago(7200))], next_cursor="mr_b"),
        page([resource_json("mr_c", base_model="other")]),
    )
    assert make_client(script).find_created_model_resource(REQ, attribution=anywhere()).id == "mr_b"
    assert [r.url.params.get("after") for r in script.requests] == [None, "mr_a", "mr_b"]


def test_lookup_only_takes_active_objects():
    made = [
        resource_json(f"mr_{status.lower()}", status=f"MODEL_RESOURCES_STATUS_{status}")
        for status in ("STOPPING", "STOPPED", "ERROR", "SOMETHING_NEW")
    ]
    assert make_client(Script(page(made))).find_created_model_resource(REQ, attribution=anywhere()) is None
    assert {s.short for s in LIVE_RESOURCE_STATUSES} == {"PENDING", "CREATING", "READY"}


def test_lookup_whose_paging_loops_raises_instead_of_guessing():
    script = Script(
        page([resource_json("mr_a", base_model="other")], next_cursor="c"),
        page([resource_json("mr_b", base_model="other")], next_cursor="c"),
    )
    with pytest.raises(TogetherError, match="twice"):
        make_client(script).find_created_model_resource(REQ, attribution=anywhere())


# ------------------------------------------------------------------------------------------ matching


def _resource(**overrides) -> ModelResource:
    return ModelResource.model_validate(resource_json("mr_x", **overrides))


def _muon(strategy: MuonScalingStrategy | None) -> ModelResourceCreateRequest:
    return ModelResourceCreateRequest(
        base_model="Qwen/Qwen3.5-4B",
        optimizer_config=OptimizerConfig(muon=MuonConfig(scaling_strategy=strategy)),
    )


@pytest.mark.parametrize(
    ("req", "overrides", "matches"),
    [
        (REQ, {}, True),
        (REQ, {"base_model": "other"}, False),
        (REQ, {"lora_enabled": False}, False),  # lora_enabled defaults to true
        (
            ModelResourceCreateRequest(base_model="Qwen/Qwen3.5-4B", lora_enabled=False),
            {"lora_enabled": False},
            True,
        ),
        (
            ModelResourceCreateRequest(
                base_model="Qwen/Qwen3.5-4B", compute_config=ComputeConfigParams(gpu_type=GpuType.H100_80GB)
            ),
            {},
            False,
        ),
        (
            ModelResourceCreateRequest(
                base_model="Qwen/Qwen3.5-4B", compute_config=ComputeConfigParams(num_generator_replicas=0)
            ),
            {},
            False,
        ),
        (
            ModelResourceCreateRequest(
                base_model="Qwen/Qwen3.5-4B", compute_config=ComputeConfigParams(num_generator_replicas=1)
            ),
            {},
            True,
        ),
        (ModelResourceCreateRequest(base_model="Qwen/Qwen3.5-4B", inactive_timeout=600), {}, False),
        (
            ModelResourceCreateRequest(base_model="Qwen/Qwen3.5-4B", inactive_timeout=600),
            {"inactive_timeout": 600},
            True,
        ),
        (
            ModelResourceCreateRequest(
                base_model="Qwen/Qwen3.5-4B", optimizer_config=OptimizerConfig(muon=MuonConfig())
            ),
            {},
            False,
        ),
        (
            ModelResourceCreateRequest(
                base_model="Qwen/Qwen3.5-4B", optimizer_config=OptimizerConfig(adam=AdamConfig())
            ),
            {"optimizer_config": {"adamw": {}}},
            True,
        ),
        (
            _muon(MuonScalingStrategy.ORIGINAL),
            {"optimizer_config": {"muon": {"scaling_strategy": "MUON_SCALING_STRATEGY_MATCH_ADAM"}}},
            False,
        ),
        (
            _muon(MuonScalingStrategy.ORIGINAL),
            {"optimizer_config": {"muon": {"scaling_strategy": "MUON_SCALING_STRATEGY_ORIGINAL"}}},
            True,
        ),
        (
            _muon(MuonScalingStrategy.MATCH_ADAM),
            {"optimizer_config": {"muon": {"scaling_strategy": "MUON_SCALING_STRATEGY_MATCH_ADAMW"}}},
            True,  # the older spelling of the same strategy
        ),
        (
            _muon(None),
            {"optimizer_config": {"muon": {"scaling_strategy": "MUON_SCALING_STRATEGY_ORIGINAL"}}},
            True,
        ),
        (
            ModelResourceCreateRequest(base_model="Qwen/Qwen3.5-4B", base_weights_ref="together://ml_abc"),
            {"base_weights_ref": "together://ml_abc@rv_123"},
            True,
        ),
        (
            ModelResourceCreateRequest(base_model="Qwen/Qwen3.5-4B", base_weights_ref="together://ml_abc"),
            {"base_weights_ref": "together://ml_abcd@rv_123"},
            False,
        ),
        (
            ModelResourceCreateRequest(
                base_model="Qwen/Qwen3.5-4B", base_weights_ref="together://ml_abc@rv_1"
            ),
            {"base_weights_ref": "together://ml_abc@rv_2"},
            False,
        ),
        (REQ, {"base_weights_ref": "together://ml_abc@rv_123"}, False),
    ],
)
def test_resource_matches_every_input_the_request_set(req, overrides, matches):
    assert resource_matches(req, _resource(**overrides)) is matches


def _session_req(**fields) -> TrainingSessionCreateRequest:
    return TrainingSessionCreateRequest(model_resources_id="mr_1", **fields)


def _wandb(**fields) -> SessionMetadata:
    return SessionMetadata(wandb=WandbMetadata(**fields))


# session_json reports the server's LoRA defaults: rank 32, alpha 64, dropout 0, train_unembed true.
@pytest.mark.parametrize(
    ("req", "overrides", "matches"),
    [
        (SESSION_REQ, {"display_name": "exp-1"}, True),
        (SESSION_REQ, {"display_name": "exp-2"}, False),
        (SESSION_REQ, {}, False),
        (_session_req(), {}, True),
        (_session_req(), {"display_name": "x"}, False),
        (_session_req(display_name=""), {"display_name": ""}, True),  # "" == absent
        (_session_req(display_name=""), {}, True),
        (TrainingSessionCreateRequest(model_resources_id="mr_2"), {}, False),
        # LoRA: every field compared, the server's default standing in for one the request left out.
        (_session_req(lora_config=LoraConfig(rank=8)), {}, False),
        (_session_req(lora_config=LoraConfig(rank=32)), {}, True),
        (_session_req(lora_config=LoraConfig(alpha=128)), {}, False),
        (
            _session_req(lora_config=LoraConfig(alpha=128)),
            {"lora_config": {"rank": 32, "alpha": 128, "dropout": 0, "train_unembed": True}},
            True,
        ),
        # Unreported dropout and train_unembed cannot be shown equal to the defaults.
        (_session_req(lora_config=LoraConfig(alpha=128)), {"lora_config": {"rank": 32, "alpha": 128}}, False),
        (_session_req(lora_config=LoraConfig(dropout=0.5)), {}, False),
        (_session_req(lora_config=LoraConfig(train_unembed=False)), {}, False),
        (
            _session_req(),
            {"lora_config": {"rank": 32, "alpha": 8, "dropout": 0.5, "train_unembed": True}},
            False,
        ),
        (_session_req(lora_config=LoraConfig()), {"lora_config": {"rank": 16}}, False),
        (
            _session_req(lora_config=LoraConfig(rank=8)),
            {"lora_config": None},
            False,
        ),  # none reported: cannot be shown equal
        # seed: compared when set (unreported cannot be shown equal); an unset one is the server's draw.
        (_session_req(lora_config=LoraConfig(seed=7)), {}, False),
        (
            _session_req(lora_config=LoraConfig(seed=7)),
            {"lora_config": {"rank": 32, "alpha": 64, "dropout": 0, "train_unembed": True, "seed": "7"}},
            True,
        ),
        (
            _session_req(lora_config=LoraConfig(seed=7)),
            {"lora_config": {"seed": "7"}},
            False,
        ),  # rank unreported
        (_session_req(lora_config=LoraConfig(seed=7)), {"lora_config": {"seed": "8"}}, False),
        (
            _session_req(),
            {"lora_config": {"rank": 32, "alpha": 64, "dropout": 0, "train_unembed": True, "seed": "8"}},
            True,  # the server drew the seed
        ),
        # load_optimizer is not in the response: ignored.
        (_session_req(load_optimizer=True), {}, True),
        # resume_from_checkpoint_id must match when set.
        (_session_req(resume_from_checkpoint_id="ck_1"), {"resume_from_checkpoint_id": "ck_1"}, True),
        (_session_req(resume_from_checkpoint_id="ck_1"), {"resume_from_checkpoint_id": "ck_2"}, False),
        (_session_req(resume_from_checkpoint_id="ck_1"), {}, False),
        (_session_req(resume_from_checkpoint_id=""), {}, True),
        # metadata.wandb: every key the request set ("" == absent).
        (_session_req(metadata=_wandb(run_name="mine")), {"metadata": {"wandb": {"run_name": "mine"}}}, True),
        (
            _session_req(metadata=_wandb(run_name="mine")),
            {"metadata": {"wandb": {"run_name": "other"}}},
            False,
        ),
        (_session_req(metadata=_wandb(run_name="mine")), {}, False),
        (
            _session_req(metadata=_wandb(project="p", entity="e")),
            {"metadata": {"wandb": {"project": "p", "entity": "x"}}},
            False,
        ),
        (_session_req(metadata=_wandb(project="")), {}, True),
        (
            _session_req(metadata=_wandb(project="p")),
            {"metadata": {"wandb": {"project": "p", "group": "g"}}},
            False,  # a group the request left unset
        ),
    ],
)
def test_a_strict_session_match_holds_every_field_against_the_candidate(req, overrides, matches):
    got = TrainingSession.model_validate(session_json("ts_x", **overrides))
    assert session_matches(req, got, strict=True) is matches


@pytest.mark.parametrize(
    ("req", "overrides", "strict", "declared"),
    [
        (REQ, {}, True, True),
        (REQ, {"optimizer_config": {"muon": {}}}, False, True),  # an unset optimizer is Adam, not Muon
        (
            _muon(None),
            {"optimizer_config": {"muon": {"scaling_strategy": "MUON_SCALING_STRATEGY_ORIGINAL"}}},
            False,
            True,
        ),
        (REQ, {"compute_config": {"num_generator_replicas": 2, "gpu_type": "B200-SXM"}}, False, True),
        (REQ, {"compute_config": {"num_generator_replicas": 1, "gpu_type": "H100-80GB"}}, False, True),
        (REQ, {"compute_config": {"num_generator_replicas": 1}}, False, True),  # GPU type not reported
        (REQ, {"inactive_timeout": 600}, False, True),
        (REQ, {"inactive_timeout": None}, False, True),  # not reported
        (REQ, {"lora_enabled": False}, False, False),
    ],
)
def test_a_strict_resource_match_fills_in_the_server_defaults(req, overrides, strict, declared):
    defaults = resource_defaults(req, SupportedModelList.model_validate(CATALOG))
    got = _resource(**overrides)
    assert (not resource_differences(req, got, defaults=defaults)) is strict
    assert resource_matches(req, got) is declared  # adopt_id: only what is declared counts


# ----------------------------------------------------------------------------------------- concurrency


def test_concurrent_identical_creates_never_share_an_object():
    """Two threads create identical resources; one create fails ambiguously after the server acted.

    The lookup must not hand the failed thread the object the other thread's create made.
    """
    created: list[dict] = []
    lock = threading.Lock()
    first_post_arrived = threading.Event()
    release_first = threading.Event()

    def server(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/supported-models"):
            return reply(200, CATALOG)
        if request.method == "GET":
            with lock:
                items = sorted(created, key=lambda r: r["created_at"], reverse=True)
            return page(items)
        with lock:
            n = len(created) + 1
            created.append(resource_json(f"mr_{n}"))
        if n == 1:
            # The first create acted, but its answer is slow: the second create fails meanwhile.
            first_post_arrived.set()
            release_first.wait(5)
            return reply(200, created[0])
        return error(
            502, "acted, then the gateway failed"
        )  # no answer of the API's own: a match may be taken

    results: dict[str, str] = {}

    def create(name: str) -> None:
        results[name] = make_client(server).create_model_resource(REQ).id

    slow = threading.Thread(target=create, args=("slow",))
    slow.start()
    assert first_post_arrived.wait(5)
    failing = threading.Thread(target=create, args=("failing",))
    failing.start()
    failing.join(0.2)
    assert failing.is_alive()  # its lookup waits for the create still in flight
    release_first.set()
    slow.join(5)
    failing.join(5)
    assert results == {"slow": "mr_1", "failing": "mr_2"}
    assert len(created) == 2


def test_concurrent_creates_that_both_fail_after_acting_never_take_an_object_they_cannot_attribute():
    """Two identical creates both act and their answers are lost (502). The first to POST listed before either
    object existed, so
    it cannot tell which is its own: it fails naming both, and takes neither. The other takes one only if its
    snapshot already held the first one's (then the other new one is necessarily its own). Nothing is resent."""
    created: list[dict] = []
    lock = threading.Lock()
    both_sent = threading.Barrier(2, timeout=5)

    def server(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/supported-models"):
            return reply(200, CATALOG)
        if request.method == "GET":
            with lock:
                return page(list(created))
        with lock:
            created.append(resource_json(f"mr_{len(created) + 1}", created_at=now()))
        both_sent.wait()
        return error(502, "acted, then the gateway failed")

    failures: list[TogetherError] = []
    taken: list[str] = []

    def create() -> None:
        try:
            made = make_client(server).create_model_resource(REQ).id
        except TogetherError as exc:
            with lock:
                failures.append(exc)
        else:
            with lock:
                taken.append(made)

    threads = [threading.Thread(target=create) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(created) == 2  # never resent
    assert len(failures) + len(taken) == 2 and failures
    assert len(set(taken)) == len(taken) and set(taken) <= {"mr_1", "mr_2"}
    for failure in failures:
        assert failure.maybe_created is True
        assert "mr_1" in str(failure) and "mr_2" in str(failure) and "none was taken" in str(failure)


def test_make_client_rejects_zero_attempts():
    with pytest.raises(ValueError):
        make_client(Script(), max_attempts=0)
