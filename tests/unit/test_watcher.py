"""The process-wide watcher behind every wait: one list per tick serves all waiters, a GET only where the list
cannot answer, the create's answer as first observation, a failed list delivered to every waiter and a failed
GET only to that id's, deadlines kept, and one watcher per API identity (base URL and key) and kind."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import httpx
import pytest

from pulumi_together_rl.client import ApiError, ModelResourceStatus, TogetherRL
from pulumi_together_rl.resources import watch
from pulumi_together_rl.resources.model_resource_schema import MODEL_RESOURCE
from pulumi_together_rl.resources.training_session_schema import TRAINING_SESSION
from pulumi_together_rl.waiting import NoAnswerYet, Watcher, wait_for


class Api:
    """A fake API: objects by id; ``listed`` are the ids a list shows."""

    def __init__(self) -> None:
        self.objects: dict[str, str] = {}
        self.listed: set[str] = set()
        self.lists = 0
        self.gets: list[str] = []
        self.fail_next: Exception | None = None

    def list_all(self) -> dict[str, str]:
        self.lists += 1
        if self.fail_next is not None:
            exc, self.fail_next = self.fail_next, None
            raise exc
        return {i: self.objects[i] for i in self.listed if i in self.objects}

    def get_one(self, ident: str) -> str | None:
        self.gets.append(ident)
        return self.objects.get(ident)


def _watcher(api: Api, pace: float = 0.01) -> Watcher:
    return Watcher("thing", list_all=api.list_all, get_one=api.get_one, pace=lambda objs: pace)


def test_one_list_per_tick_serves_every_waiter():
    api = Api()
    for i in range(8):
        api.objects[f"o{i}"] = "CREATING"
        api.listed.add(f"o{i}")
    watcher = _watcher(api, pace=0.05)
    results: dict[str, str | None] = {}

    def wait(ident: str) -> None:
        with watcher.watch(ident).until(time.monotonic() + 10) as sub:
            results[ident] = wait_for(
                sub.fetch, done=lambda s: s == "READY", failed=lambda s: s is None, describe=str,
                timeout=10, sleep=lambda s: None, out=open("/dev/null", "w"),
            )  # fmt: skip

    threads = [threading.Thread(target=wait, args=(f"o{i}",)) for i in range(8)]
    for t in threads:
        t.start()
    time.sleep(0.3)
    lists_before_flip = api.lists
    for i in range(8):
        api.objects[f"o{i}"] = "READY"
    for t in threads:
        t.join(5)

    assert results == {f"o{i}": "READY" for i in range(8)}
    assert api.gets == []  # the list answered for all of them
    assert lists_before_flip <= 0.3 / 0.05 + 3  # one list per tick, not one per waiter per tick


def test_a_get_only_for_what_the_list_does_not_show():
    api = Api()
    api.objects.update(shown="CREATING", gone="ERROR")
    api.listed.add("shown")  # "gone" left the filtered list
    watcher = _watcher(api)

    with watcher.watch("shown") as a, watcher.watch("gone") as b:
        a.until(time.monotonic() + 2)
        b.until(time.monotonic() + 2)
        assert (a.fetch(), b.fetch()) == ("CREATING", "ERROR")

    assert set(api.gets) == {"gone"}


def test_the_first_observation_in_hand_costs_no_request():
    api = Api()
    api.objects["x"] = "READY"
    api.listed.add("x")
    watcher = Watcher("thing", list_all=api.list_all, get_one=api.get_one, pace=lambda objs: 60.0)

    with watcher.watch("x", first="CREATING").until(time.monotonic() + 5) as sub:
        assert sub.fetch() == "CREATING"
        assert api.lists == 0


def test_the_look_after_an_answer_in_hand_comes_at_once_not_a_tick_later():
    """The create's answer (PENDING) is rarely final, and what follows is often a moment away: the next look
    comes within the coalescing pause, not after the pace (60 s here)."""
    api = Api()
    api.objects["x"] = "READY"
    api.listed.add("x")
    watcher = Watcher("thing", list_all=api.list_all, get_one=api.get_one, pace=lambda objs: 60.0)

    with watcher.watch("x", first="PENDING").until(time.monotonic() + 5) as sub:
        assert sub.fetch() == "PENDING"
        started = time.monotonic()
        assert sub.fetch() == "READY"
        assert time.monotonic() - started < 1.0
    assert api.lists == 1


def test_a_failed_tick_reaches_every_waiter_and_the_next_tick_answers():
    api = Api()
    api.objects["x"] = "READY"
    api.listed.add("x")
    api.fail_next = ConnectionError("down")
    watcher = _watcher(api, pace=0.3)  # after a failure the next tick waits twice the pace

    with watcher.watch("x").until(time.monotonic() + 5) as sub:
        with pytest.raises(ConnectionError):
            sub.fetch()
        assert sub.fetch() == "READY"


def test_a_deadline_before_any_answer_is_no_answer_yet():
    api = Api()
    gate = threading.Event()
    watcher = Watcher("thing", list_all=lambda: gate.wait(5) and {}, get_one=api.get_one, pace=lambda o: 1.0)

    with watcher.watch("x").until(time.monotonic() + 0.1) as sub, pytest.raises(NoAnswerYet):
        sub.fetch()
    gate.set()


def test_the_thread_ends_with_its_last_waiter():
    api = Api()
    api.objects["x"] = "A"
    api.listed.add("x")
    watcher = _watcher(api)

    with watcher.watch("x").until(time.monotonic() + 2) as sub:
        sub.fetch()
    time.sleep(0.2)

    assert watcher._thread is None
    before = api.lists
    time.sleep(0.1)
    assert api.lists == before


def test_a_broken_pace_ends_the_waits_instead_of_blocking_them():
    api = Api()
    api.objects["x"] = "A"
    api.listed.add("x")

    def pace(objects):
        if objects:
            raise ZeroDivisionError("pace bug")
        return 0.01

    watcher = Watcher("thing", list_all=api.list_all, get_one=api.get_one, pace=pace)
    with watcher.watch("x").until(time.monotonic() + 5) as sub, pytest.raises(ZeroDivisionError):
        sub.fetch()
        sub.fetch()
    assert watcher._thread is None


class Throttled(Exception):
    retry_after = 0.4


def test_a_failed_list_reaches_every_waiter():
    api = Api()
    api.objects.update(a="READY", b="READY")
    api.listed.update({"a", "b"})
    api.fail_next = ConnectionError("list down")
    watcher = _watcher(api, pace=0.3)

    with watcher.watch("a") as a, watcher.watch("b") as b:
        a.until(time.monotonic() + 5)
        b.until(time.monotonic() + 5)
        for sub in (a, b):
            with pytest.raises(ConnectionError, match="list down"):
                sub.fetch()
        assert (a.fetch(), b.fetch()) == ("READY", "READY")


def test_a_failed_get_reaches_only_the_waiters_of_that_id():
    api = Api()
    api.objects.update(shown="CREATING", other="READY")
    api.listed.add("shown")  # "broken" and "other" are asked for by GET; only "broken"'s GET fails

    def get_one(ident: str) -> str | None:
        if ident == "broken":
            raise ValueError("unreadable body of broken")
        return api.get_one(ident)

    watcher = Watcher("thing", list_all=api.list_all, get_one=get_one, pace=lambda objs: 0.01)
    with watcher.watch("shown") as shown, watcher.watch("broken") as broken, watcher.watch("broken") as twin:
        with watcher.watch("other") as other:
            for sub in (shown, broken, twin, other):
                sub.until(time.monotonic() + 5)
            assert shown.fetch() == "CREATING"
            assert other.fetch() == "READY"
            for sub in (broken, twin):  # every waiter of that id, and only them
                with pytest.raises(ValueError, match="unreadable body of broken"):
                    sub.fetch()
            assert shown.fetch() == "CREATING" and other.fetch() == "READY"  # the next ticks go on


def test_a_throttled_get_holds_the_next_tick_back_by_its_retry_after():
    api = Api()
    api.objects["shown"] = "CREATING"
    api.listed.add("shown")
    list_times: list[float] = []
    throttled_at: list[float] = []

    def list_all() -> dict[str, str]:
        list_times.append(time.monotonic())
        return api.list_all()

    def get_one(ident: str) -> str | None:
        throttled_at.append(time.monotonic())
        raise Throttled()

    watcher = Watcher("thing", list_all=list_all, get_one=get_one, pace=lambda objs: 0.01)
    with watcher.watch("shown") as shown, watcher.watch("gone") as gone:
        shown.until(time.monotonic() + 5)
        gone.until(time.monotonic() + 5)
        assert shown.fetch() == "CREATING"
        for _ in range(2):  # the tick it was throttled in, and the next one
            with pytest.raises(Throttled):
                gone.fetch()

    next_list = min(t for t in list_times if t > throttled_at[0])
    assert next_list - throttled_at[0] >= Throttled.retry_after - 0.01


# ------------------------------------------------------------------------- one watcher per API identity


@pytest.fixture
def no_watchers():
    watch.clear()
    yield
    watch.clear()


def test_one_watcher_per_base_url_api_key_and_kind(no_watchers):
    clients = {
        "first": TogetherRL(api_key="tk-key-one", base_url="http://api-a.test"),
        "same": TogetherRL(api_key="tk-key-one", base_url="http://api-a.test/v1"),  # the same API, spelled so
        "other key": TogetherRL(api_key="tk-key-two", base_url="http://api-a.test"),
        "other url": TogetherRL(api_key="tk-key-one", base_url="http://api-b.test"),
    }
    try:
        got = {name: watch.watcher(client, MODEL_RESOURCE) for name, client in clients.items()}
        sessions = watch.watcher(clients["first"], TRAINING_SESSION)
    finally:
        for client in clients.values():
            client.close()

    assert got["same"] is got["first"]  # two client objects of one identity share one list per tick
    assert got["other key"] is not got["first"]  # another account's list never answers for this one
    assert got["other url"] is not got["first"] and got["other url"] is not got["other key"]
    assert sessions is not got["first"]


def test_the_identity_holds_a_digest_of_the_key_never_the_key(no_watchers):
    one = TogetherRL(api_key="tk-key-one-secret", base_url="http://api-a.test")
    again = TogetherRL(api_key="tk-key-one-secret", base_url="http://api-a.test")
    two = TogetherRL(api_key="tk-key-two-secret", base_url="http://api-a.test")
    try:
        watch.watcher(one, MODEL_RESOURCE)
        digests = (one.api_key_digest, again.api_key_digest, two.api_key_digest)
    finally:
        for client in (one, again, two):
            client.close()

    assert digests[0] == digests[1] != digests[2]
    assert len(digests[0]) == 16 and int(digests[0], 16) >= 0
    assert "secret" not in repr(list(watch._watchers)) and "tk-key" not in repr(list(watch._watchers))


class FakeClient:
    """What a watcher asks of a client; a closed one refuses, as httpx does."""

    def __init__(self, digest: str) -> None:
        self.base_url, self.api_key_digest = "http://api-a.test", digest
        self.closed = False
        self.lists = 0

    def iter_model_resources(self, **query):
        if self.closed:
            raise RuntimeError("Cannot send a request, as the client has been closed.")
        self.lists += 1
        return [SimpleNamespace(id="mr_1", status=ModelResourceStatus.READY, status_details=None)]

    def get_model_resource(self, ident):
        raise AssertionError("the list shows mr_1")


def test_a_shared_watcher_asks_through_the_latest_client_of_its_identity(no_watchers):
    first = FakeClient("d1")
    watcher = watch.watcher(first, MODEL_RESOURCE)
    first.closed = True  # e.g. a test's client, or a cache's before a reset
    second = FakeClient("d1")

    assert watch.watcher(second, MODEL_RESOURCE) is watcher
    with watcher.watch("mr_1").until(time.monotonic() + 5) as sub:
        assert sub.fetch().id == "mr_1"
    assert first.lists == 0 and second.lists >= 1


def _resource(ident: str, status: object = "MODEL_RESOURCES_STATUS_CREATING") -> dict:
    return {
        "id": ident,
        "status": status,
        "base_model": "Qwen/Qwen3.5-4B",
        "compute_config": {"num_generator_replicas": 1},
        "lora_enabled": True,
        "created_at": "2026-01-01T00:00:00Z",
        "updated_at": "2026-01-01T00:00:00Z",
        "created_by": "user_1",
    }


def test_a_waited_object_the_list_cannot_read_is_asked_for_by_get_and_fails_alone(no_watchers, capsys):
    """The list shows mr_fixed and mr_broken in a shape this version cannot read (skipped, with a warning):
    each is asked for by GET; mr_fixed's GET reads, mr_broken's does not, and only mr_broken's wait hears."""
    gets: list[str] = []

    def api(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/v1/rl/model-resources":
            unreadable = [_resource("mr_fixed", status=7), _resource("mr_broken", status=7)]
            return httpx.Response(200, json={"data": [_resource("mr_ok"), *unreadable], "meta": {}})
        ident = path.rsplit("/", 1)[-1]
        gets.append(ident)
        return httpx.Response(
            200, json=_resource(ident, status=7 if ident == "mr_broken" else "X_STATUS_NEW")
        )

    client = TogetherRL(api_key="tk-k", base_url="http://api.test", http_transport=httpx.MockTransport(api))
    watcher = watch.watcher(client, MODEL_RESOURCE)
    try:
        with (
            watcher.watch("mr_ok") as ok,
            watcher.watch("mr_fixed") as fixed,
            watcher.watch("mr_broken") as broken,
        ):
            for sub in (ok, fixed, broken):
                sub.until(time.monotonic() + 5)
            assert ok.fetch().status == ModelResourceStatus.CREATING  # from the list
            assert fixed.fetch().status.value == "X_STATUS_NEW"  # from its GET
            with pytest.raises(ApiError, match="unexpected response body: status"):
                broken.fetch()
    finally:
        client.close()

    assert set(gets) == {"mr_fixed", "mr_broken"}  # no GET for what the list could show
    err = capsys.readouterr().err
    assert err.count("warning: skipped model resource mr_fixed in a list of /v1/rl/model-resources") == 1
    assert err.count("warning: skipped model resource mr_broken in a list") == 1
