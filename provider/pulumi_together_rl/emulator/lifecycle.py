"""Lifecycle transitions of the emulator's objects: how time moves them from one status to the next.

Transitions are lazy and deterministic: there is no background thread. Every public verb first advances the
world to "now" (:meth:`EmulatorState.advance_to_now`), processing due transitions in time order, each stamped
with the instant it was due (not the instant it was observed). The clock is real UTC time plus an offset
that tests move forward with :meth:`EmulatorState.advance_clock`.

A state's duration is read from the settings' ``timings`` when the transition is evaluated, so changing a
timing also moves objects already in that state (a huge ``resource_pending`` holds resources in PENDING;
setting it back to 0 releases them).

:class:`Lifecycle` is a base class of :class:`~.state.EmulatorState` (it works on the state's records,
settings, armed failures, clock and lock), kept apart so the verbs in :mod:`.state` read as the API.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from typing import Any

from .records import ArmedFailure, Clock, ModelResourceRecord, TrainingSessionRecord, _oldest_first
from .tables import (
    DEFAULT_ERROR_MESSAGES,
    R_CREATING,
    R_ERROR,
    R_PENDING,
    R_READY,
    R_STOPPED,
    R_STOPPING,
    RESOURCE_KIND,
    S_CREATING,
    S_ERROR,
    S_EXPIRED,
    S_RUNNING,
    S_STOPPED,
    S_STOPPING,
    SESSION_HOLDS_SLOT,
    SESSION_KIND,
    SESSION_RESOURCE_LOST_CODE,
)


class Lifecycle:
    """Due transitions, processed in time order: the part of :class:`~.state.EmulatorState` time drives."""

    clock: Clock
    _lock: threading.RLock
    _settings: dict[str, Any]
    _resources: dict[str, ModelResourceRecord]
    _sessions: dict[str, TrainingSessionRecord]
    _failures: list[ArmedFailure]

    def advance_to_now(self) -> datetime:
        with self._lock:
            now = self.clock.now()
            self._advance(now)
            return now

    def _advance(self, now: datetime) -> None:
        """Process every transition due at or before ``now``, earliest first (ties: creation order)."""
        while True:
            best: tuple[datetime, int, Any] | None = None
            records: list[ModelResourceRecord | TrainingSessionRecord] = [
                *self._resources.values(),
                *self._sessions.values(),
            ]
            for obj in records:
                due = self._due(obj)
                if due is not None and due <= now and (best is None or (due, obj.seq) < best[:2]):
                    best = (due, obj.seq, obj)
            if best is None:
                return
            self._transition(best[2], best[0])

    def _due(self, obj: ModelResourceRecord | TrainingSessionRecord) -> datetime | None:
        t = self._settings["timings"]
        if isinstance(obj, ModelResourceRecord):
            if obj.status == R_PENDING:
                return obj.entered_at + timedelta(seconds=t["resource_pending"])
            if obj.status == R_CREATING:
                return obj.entered_at + timedelta(seconds=t["resource_creating"])
            if obj.status == R_READY:
                return obj.expires_at
            if obj.status == R_STOPPING:
                # A forced stop leaves its sessions STOPPING: the resource is not STOPPED before they are.
                due = obj.entered_at + timedelta(seconds=t["resource_stopping"])
                for s in self._stopping_sessions(obj):
                    due = max(due, s.entered_at + timedelta(seconds=t["session_stopping"]))
                return due
            return None
        if obj.status == S_CREATING:
            return obj.entered_at + timedelta(seconds=t["session_creating"])
        if obj.status == S_STOPPING:
            return obj.entered_at + timedelta(seconds=t["session_stopping"])
        return None

    def _transition(self, obj: ModelResourceRecord | TrainingSessionRecord, at: datetime) -> None:
        provisioning = obj.status in (R_PENDING, R_CREATING, S_CREATING)
        failure = self._take_failure(obj, provisioning)
        if failure is not None:
            self._fail(obj, at, failure.code, failure.message)
            return
        if isinstance(obj, ModelResourceRecord):
            if obj.status == R_PENDING:
                self._set_resource(obj, R_CREATING, at)
            elif obj.status == R_CREATING:
                self._set_resource(obj, R_READY, at)
                obj.expires_at = at + timedelta(seconds=obj.inactive_timeout)
            elif obj.status == R_READY:  # idle past expires_at: stop for inactivity, sessions expire
                self._end_sessions(obj, at, S_EXPIRED)
                self._set_resource(obj, R_STOPPING, at)
            elif obj.status == R_STOPPING:
                # Its STOPPING sessions are due at or before `at` (see _due); on a tie they go first, through
                # _transition so that a failure armed for one of them still fires.
                for s in self._stopping_sessions(obj):
                    self._transition(s, at)
                self._set_resource(obj, R_STOPPED, at)
        elif obj.status == S_CREATING:
            self._set_session(obj, S_RUNNING, at)
        elif obj.status == S_STOPPING:
            self._set_session(obj, S_STOPPED, at)

    def _stopping_sessions(self, res: ModelResourceRecord) -> list[TrainingSessionRecord]:
        return [
            s
            for s in _oldest_first(self._sessions.values())
            if s.model_resources_id == res.id and s.status == S_STOPPING
        ]

    def _take_failure(
        self, obj: ModelResourceRecord | TrainingSessionRecord, provisioning: bool
    ) -> ArmedFailure | None:
        kind = RESOURCE_KIND if isinstance(obj, ModelResourceRecord) else SESSION_KIND
        for i, f in enumerate(self._failures):
            if f.kind == kind and (f.target == obj.id or (f.target is None and provisioning)):
                return self._failures.pop(i)
        return None

    def _fail(
        self, obj: ModelResourceRecord | TrainingSessionRecord, at: datetime, code: str, message: str
    ) -> None:
        obj.error = {"code": code, "message": message, "occurred_at": at}
        if isinstance(obj, ModelResourceRecord):
            self._end_sessions(obj, at, S_ERROR)
            self._set_resource(obj, R_ERROR, at)
        else:
            self._set_session(obj, S_ERROR, at)

    def _end_sessions(self, res: ModelResourceRecord, at: datetime, status: str) -> None:
        """The resource went away: live sessions end in ``status``; those already stopping finish STOPPED."""
        for s in _oldest_first(self._sessions.values()):
            if s.model_resources_id != res.id or s.status not in SESSION_HOLDS_SLOT:
                continue
            if s.status == S_STOPPING:
                self._set_session(s, S_STOPPED, at)
                continue
            if status == S_ERROR:
                s.error = {
                    "code": SESSION_RESOURCE_LOST_CODE,
                    "message": DEFAULT_ERROR_MESSAGES[SESSION_RESOURCE_LOST_CODE],
                    "occurred_at": at,
                }
            self._set_session(s, status, at)

    @staticmethod
    def _set_resource(rec: ModelResourceRecord, status: str, at: datetime) -> None:
        rec.status = status
        rec.entered_at = at
        rec.updated_at = at
        if status != R_READY:
            rec.expires_at = None

    @staticmethod
    def _set_session(rec: TrainingSessionRecord, status: str, at: datetime) -> None:
        rec.status = status
        rec.entered_at = at
        rec.updated_at = at
