"""waiting.wait_for with a fake clock: no real time passes."""

from __future__ import annotations

import io
import itertools
import re
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import pytest

from pulumi_together_rl.waiting import WaitFailed, WaitTimeout, until, wait_for


class FakeTime:
    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def states(*sequence):
    """A fetch that returns the given states in turn (the last one forever)."""
    items = list(sequence)

    def fetch():
        return items.pop(0) if len(items) > 1 else items[0]

    return fetch


def obj(status, error=None):
    return SimpleNamespace(status=status, error=error)


def run(fetch, fake, *, timeout=1000.0, poll_interval=10.0, out=None, **extra):
    return wait_for(
        fetch,
        done=lambda o: o is not None and o.status == "READY",
        failed=lambda o: o is not None and o.status == "ERROR",
        describe=lambda o: f"thing: {o.status if o else 'not found'}",
        timeout=timeout,
        poll_interval=poll_interval,
        clock=fake.clock,
        sleep=fake.sleep,
        out=out if out is not None else io.StringIO(),
        **extra,
    )


def test_first_poll_is_immediate():
    fake = FakeTime()
    result = run(states(obj("READY")), fake)
    assert result.status == "READY" and fake.sleeps == []


def test_interval_grows_and_is_capped_at_the_poll_interval():
    fake = FakeTime()
    run(states(*[obj("PENDING")] * 8, obj("READY")), fake, poll_interval=10.0)
    assert fake.sleeps == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0, 10.0, 10.0]


def test_small_poll_interval_is_used_from_the_start():
    fake = FakeTime()
    run(states(obj("PENDING"), obj("PENDING"), obj("READY")), fake, poll_interval=0.05)
    assert fake.sleeps == [0.05, 0.05]


def test_progress_on_state_change_and_at_most_every_30_seconds_otherwise():
    fake = FakeTime()
    out = io.StringIO()
    run(states(*[obj("PENDING")] * 12, obj("CREATING"), obj("READY")), fake, out=out)
    lines = out.getvalue().splitlines()
    # PENDING polls at t=0,1,3,7,15,25,35,45,55,65,75,85; CREATING at 95; READY at 105
    assert lines == [
        "thing: PENDING, 0 s",
        "thing: PENDING, 35 s",
        "thing: PENDING, 65 s",
        "thing: CREATING, 95 s",
        "thing: READY, 105 s",
    ]


def test_timeout_names_the_last_state_after_a_final_poll_at_the_deadline():
    fake = FakeTime()
    with pytest.raises(WaitTimeout) as caught:
        run(states(obj("PENDING")), fake, timeout=5.0)
    assert fake.sleeps == [1.0, 2.0, 2.0]  # the last sleep is cut to land on the deadline
    assert "timed out after 5 s" in str(caught.value) and "thing: PENDING" in str(caught.value)
    assert caught.value.last.status == "PENDING"


def test_failed_state_raises_with_the_api_error_code_and_message():
    fake = FakeTime()
    error = SimpleNamespace(code="CODE_PROVISIONING_FAILED", message="pods failed")
    with pytest.raises(WaitFailed) as caught:
        run(states(obj("PENDING"), obj("ERROR", error)), fake)
    assert caught.value.code == "CODE_PROVISIONING_FAILED" and caught.value.api_message == "pods failed"
    assert "thing: ERROR with CODE_PROVISIONING_FAILED: pods failed" in str(caught.value)


def test_not_found_is_a_state_the_predicates_decide_on():
    fake = FakeTime()
    result = wait_for(
        states(obj("STOPPING"), None),
        done=lambda o: o is None,
        failed=lambda o: False,
        describe=lambda o: "gone" if o is None else o.status,
        timeout=100,
        clock=fake.clock,
        sleep=fake.sleep,
        out=io.StringIO(),
    )
    assert result is None and fake.sleeps == [1.0]


def test_fetch_errors_propagate():
    fake = FakeTime()

    def fetch():
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        run(fetch, fake)


def _create_wait(fetch, fake, *, grace, timeout=1000.0):
    return wait_for(
        fetch,
        done=lambda o: o is not None and o.status == "READY",
        failed=lambda o: o is None or o.status == "ERROR",  # as a create wait: not found = failed
        describe=lambda o: f"thing: {o.status if o else 'not found'}",
        timeout=timeout,
        poll_interval=10.0,
        not_found_grace=grace,
        clock=fake.clock,
        sleep=fake.sleep,
        out=io.StringIO(),
    )


def test_not_found_within_the_grace_period_is_not_visible_yet():
    fake = FakeTime()
    result = _create_wait(states(None, None, obj("READY")), fake, grace=60.0)
    assert result.status == "READY"


def test_not_found_after_the_grace_period_is_failed():
    fake = FakeTime()
    with pytest.raises(WaitFailed) as caught:
        _create_wait(states(None), fake, grace=60.0)
    assert caught.value.elapsed >= 60.0 and caught.value.last is None


def test_the_timeout_still_applies_within_the_grace_period():
    fake = FakeTime()
    with pytest.raises(WaitTimeout):
        _create_wait(states(None), fake, grace=60.0, timeout=5.0)


class Outage(Exception):
    status = 503


def flaky(*sequence):
    """Like states(), but an exception class in the sequence is raised instead of returned."""
    items = list(sequence)

    def fetch():
        item = items.pop(0) if len(items) > 1 else items[0]
        if isinstance(item, type) and issubclass(item, BaseException):
            raise item()
        return item

    return fetch


def run_transient(fetch, fake, *, timeout=1000.0, out=None):
    return run(
        fetch,
        fake,
        timeout=timeout,
        poll_interval=2.0,
        out=out,
        transient=lambda exc: isinstance(exc, Outage),
    )


def test_a_transient_outage_during_the_wait_is_no_news_and_the_wait_goes_on():
    fake, out = FakeTime(), io.StringIO()
    fetch = flaky(obj("PENDING"), *[Outage] * 8, obj("CREATING"), obj("READY"))
    result = run_transient(fetch, fake, out=out)
    assert result.status == "READY"
    lines = out.getvalue().splitlines()
    assert any("thing: PENDING; the API is failing (HTTP 503), still waiting" in line for line in lines), (
        lines
    )
    assert fake.now - 1000.0 > 8  # the outage lasted several polls and the wait outlived it


def test_an_outage_before_any_answer_keeps_waiting_too():
    fake, out = FakeTime(), io.StringIO()
    result = run_transient(flaky(Outage, Outage, obj("READY")), fake, out=out)
    assert result.status == "READY"
    assert "thing: unknown; the API is failing (HTTP 503)" in out.getvalue()


def test_an_outage_that_outlasts_the_timeout_times_out_naming_the_failure():
    fake = FakeTime()
    with pytest.raises(WaitTimeout) as info:
        run_transient(flaky(obj("PENDING"), Outage), fake, timeout=30.0)
    assert "PENDING" in str(info.value) and "the API was failing: HTTP 503" in str(info.value)
    assert fake.now - 1000.0 == pytest.approx(30.0)


def test_an_outage_line_says_until_when_the_wait_keeps_trying_and_which_setting_says_so():
    fake, out = FakeTime(), io.StringIO()
    wall = datetime(2026, 12, 1, 13, 3, 12, tzinfo=timezone.utc)
    fetch = flaky(obj("PENDING"), Outage, Outage, obj("READY"))
    run(fetch, fake, out=out, timeout=3600.0, transient=lambda e: isinstance(e, Outage), limit="create_timeout",
        now=lambda: wall)  # fmt: skip
    assert out.getvalue().splitlines() == [
        "thing: PENDING, 0 s",
        "thing: PENDING; the API is failing (HTTP 503), still waiting until 14:03:12 UTC (create_timeout 3600 s), 1 s",
        "thing: READY, 7 s",
    ]


def test_an_outage_line_without_a_limit_names_the_timeout_and_the_date_when_not_today():
    fake, out = FakeTime(), io.StringIO()
    wall = datetime(2026, 11, 30, 23, 50, 0, tzinfo=timezone.utc)
    run(flaky(Outage, obj("READY")), fake, out=out, timeout=1800.0, transient=lambda e: isinstance(e, Outage),
        now=lambda: wall)  # fmt: skip
    assert out.getvalue().splitlines()[0] == (
        "thing: unknown; the API is failing (HTTP 503), still waiting until 2026-12-01 00:20:00 UTC "
        "(timeout 1800 s), 0 s"
    )


def test_the_deadline_of_an_outage_line_is_read_once_at_the_start():
    fake, out = FakeTime(), io.StringIO()
    reads: list[datetime] = []

    def wall() -> datetime:  # a wall clock that moves a minute per read
        reads.append(datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc) + timedelta(minutes=len(reads)))
        return reads[-1]

    fetch = flaky(*[Outage] * 40, obj("READY"))
    run(fetch, fake, out=out, timeout=600.0, transient=lambda e: isinstance(e, Outage), now=wall)
    lines = [line for line in out.getvalue().splitlines() if "failing" in line]
    assert len(lines) > 1 and len(reads) == 1
    assert all("still waiting until 12:10:00 UTC (timeout 600 s)" in line for line in lines), lines


def test_until_names_a_utc_time_with_the_date_only_when_it_is_not_today():
    noon = datetime(2026, 12, 1, 12, 0, 0, tzinfo=timezone.utc)
    assert until(3792, lambda: noon) == "13:03:12 UTC"
    assert until(12 * 3600, lambda: noon) == "2026-12-02 00:00:00 UTC"
    assert until(0, lambda: noon.replace(tzinfo=None)) == "12:00:00 UTC"  # a naive time is UTC
    tokyo = timezone(timedelta(hours=9))
    # "today" is the UTC day: 08:30 in Tokyo on 2 December is still 1 December in UTC
    assert until(60, lambda: datetime(2026, 12, 2, 8, 30, tzinfo=tokyo)) == "23:31:00 UTC"
    assert until(60, lambda: datetime(2026, 12, 2, 8, 59, 30, tzinfo=tokyo)) == "2026-12-02 00:00:30 UTC"
    assert re.fullmatch(r"(\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d UTC", until(5))


def test_an_infinite_timeout_says_there_is_no_deadline():
    fake, out = FakeTime(), io.StringIO()
    run(flaky(Outage, obj("READY")), fake, out=out, timeout=float("inf"), limit="delete_timeout",
        transient=lambda e: isinstance(e, Outage))  # fmt: skip
    assert "still waiting with no deadline (delete_timeout inf s), 0 s" in out.getvalue()
    with pytest.raises(OverflowError):
        until(float("inf"))


def test_a_non_transient_fetch_error_still_ends_the_wait_at_once():
    fake = FakeTime()
    with pytest.raises(KeyError):
        run_transient(flaky(obj("PENDING"), KeyError), fake)


def test_progress_lines_from_parallel_threads_are_whole_lines():
    import threading
    import time

    from pulumi_together_rl.waiting import progress_line

    class SlowStream(io.StringIO):
        """Gives other threads a chance in the middle of every write, as a real pipe can."""

        def write(self, text):
            for char in text:
                super().write(char)
                time.sleep(0)
            return len(text)

    stream = SlowStream()
    expected = {f"model resource {n}: PENDING, queue position {i}" for n in range(6) for i in range(40)}

    def writer(n):
        for i in range(40):
            progress_line(f"model resource {n}: PENDING, queue position {i}", stream)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    lines = stream.getvalue().splitlines()
    assert len(lines) == len(expected) and set(lines) == expected


class Refused(Exception):
    """A connection failure: no status."""


def test_a_ten_minute_outage_prints_about_ten_lines_whatever_its_failures_say():
    # A flapping gateway: 503s and refused connections in turn, for 598 s of 2 s polls, then an answer.
    fake, out = FakeTime(), io.StringIO()
    seen: list[tuple[float, str]] = []

    class Recording(io.StringIO):
        def write(self, text: str) -> int:
            seen.extend((fake.now - 1000.0, line) for line in text.splitlines())
            return super().write(text)

    out = Recording()
    failures = [Outage, Refused] * 150
    fetch = flaky(obj("PENDING"), *failures, obj("READY"))
    run(fetch, fake, out=out, timeout=3600.0, poll_interval=2.0, limit="create_timeout",
        transient=lambda e: isinstance(e, (Outage, Refused)))  # fmt: skip
    failing = [(at, line) for at, line in seen if "failing" in line]
    assert "still waiting until" in failing[0][1] and "(create_timeout 3600 s)" in failing[0][1]
    assert len(failing) <= 11, failing
    gaps = [b - a for (a, _), (b, _) in itertools.pairwise(failing)]
    assert all(gap >= 60.0 for gap in gaps), gaps
    assert seen[-1][1].startswith("thing: READY")  # the answer after the outage is news at once


def test_an_answer_ends_an_outage_so_the_next_failure_is_news_again():
    fake, out = FakeTime(), io.StringIO()
    fetch = flaky(obj("PENDING"), Outage, obj("PENDING"), Outage, obj("READY"))
    run(fetch, fake, out=out, poll_interval=2.0, transient=lambda e: isinstance(e, Outage))
    assert len([line for line in out.getvalue().splitlines() if "failing" in line]) == 2
