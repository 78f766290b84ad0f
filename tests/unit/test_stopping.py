"""stopping.stop through an API outage, with a fake clock: no real time passes."""

from __future__ import annotations

import itertools
import re

from pulumi_together_rl import stopping
from pulumi_together_rl.client import errors
from pulumi_together_rl.messages import lines_to


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class DownThenUp:
    """A collection whose stop fails (refused connection, then 503, in turn) until ``down_for`` seconds have
    passed; each failed try costs ``per_try`` seconds (the transport's own retries)."""

    name = "model resource"

    def __init__(self, fake: FakeTime, down_for: float, per_try: float = 3.0) -> None:
        self.fake, self.down_for, self.per_try, self.tries = fake, down_for, per_try, 0

    def stop(self, client, ident, force=False):
        self.tries += 1
        if self.fake.now < self.down_for:
            self.fake.now += self.per_try
            if self.tries % 2:
                raise errors.ApiConnectionError("connection refused")
            raise errors.ServerError(503, "the API is down")
        return {"id": ident, "status": "STOPPING"}


def test_a_stop_through_a_ten_minute_outage_says_until_when_once_then_a_line_a_minute_at_most():
    fake = FakeTime()
    collection = DownThenUp(fake, down_for=570.0)
    lines: list[tuple[float, str]] = []
    with lines_to(lambda text, status: lines.append((fake.now, text))):
        outcome = stopping.stop(
            collection,
            None,
            "r-1",
            window=598.0,
            limit="delete_timeout 10 min",
            sleep=fake.sleep,
            clock=fake.clock,
        )

    assert outcome.outcome == stopping.STOPPING and collection.tries > 30
    first = lines[0][1]
    assert re.search(r"trying again until \d\d:\d\d:\d\d UTC \(delete_timeout 10 min\)$", first), first
    assert len(lines) <= 11, [text for _, text in lines]
    gaps = [b - a for (a, _), (b, _) in itertools.pairwise(lines)]
    assert all(gap >= 60.0 for gap in gaps), gaps
    assert all("still trying" in text and "so far, until" in text for _, text in lines[1:]), lines


def test_a_stop_that_fails_for_good_raises_at_once_with_no_line():
    fake = FakeTime()

    class Refusing:
        name = "model resource"

        def stop(self, client, ident, force=False):
            raise errors.Unauthorized(401, "bad key")

    lines: list[str] = []
    with lines_to(lambda text, status: lines.append(text)):
        try:
            stopping.stop(
                Refusing(), None, "r-1", window=598.0, limit="x", sleep=fake.sleep, clock=fake.clock
            )
        except errors.Unauthorized:
            pass
        else:
            raise AssertionError("a 401 must not be tried again")
    assert lines == [] and fake.now == 0.0
