"""The process-wide watcher behind every wait: one list per tick serves all waiters, a GET only where the list
cannot answer, the create's answer as first observation, errors delivered to every waiter, deadlines kept."""

from __future__ import annotations

import threading
import time

import pytest

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
