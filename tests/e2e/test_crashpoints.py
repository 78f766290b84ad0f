"""The release tier's slice of the crash-point enumeration (:mod:`harness.crashpoints`; the whole of it is ``make
crashpoints``): a one-resource `pulumi up` through the real CLI, its provider process SIGKILLed (with its CLI, a
machine going down) right before or right after the create journal's write that each case names, on this machine's journal
folder (the one store where a killed run's lease is seen dead at once, by its ``flock``: no lease to wait out).

The points chosen are the create's own, where the order matters (the five writes of the store's first-use probe
before them only ever leave a stray probe):

* **right before write 7**, the id: the POST was answered and the answer is lost. ``recover`` clears the pending
  create, the entry keeping the POST's window, and the next run takes over the one object made inside that window
  that no record accounts for, never the colleague's look-alike made before it;
* **right after write 7**, the id in the entry (before its claim): ``recover`` hands it to the engine
  (``--import-pending-creates``), and the next run takes it over by id. In the old order (the claim first) write 7
  was the claim;
* **right after write 9**, done: the engine never got the answer. ``recover`` reopens the entry and hands its id
  to the engine.

Each case: exactly one object ever made for the declaration, active and held by the state, no pending operation,
the colleague's look-alike active and never written to, the orphan finder naming no object but the colleague's.
"""

from __future__ import annotations

import pytest
from harness.bucket import Bucket
from harness.crashpoints import STORES_BY_NAME, Lab, crash_at

pytestmark = pytest.mark.release

SLICE = [
    (7, True, "entry the id, answered, created"),
    (7, False, "entry the id, answered, created"),
    (9, False, "entry done, released"),
]
"""The crash points of the slice: the write number, right before it (else right after), and what that write is
(a changed write order fails here first)."""


@pytest.mark.parametrize(
    ("k", "before", "write"), SLICE, ids=[f"{'before' if b else 'after'}-{k}" for k, b, _ in SLICE]
)
def test_an_up_killed_at_a_journal_write_converges_with_one_recover_and_one_object(
    emulator, pulumi_bin, tmp_path, k, before, write
):
    # This machine's folder needs no bucket: a runner is only handed one (its AWS_* variables, never used here),
    # so no S3 server is started for the slice.
    lab = Lab(emulator, Bucket("unused", "127.0.0.1:9"), pulumi_bin, tmp_path)
    outcome = crash_at(lab, STORES_BY_NAME["local"], k, write, before=before)
    assert outcome.killed, outcome.failures
    assert outcome.write == write, f"write {k} is now {outcome.write!r}, not {write!r}"
    assert not outcome.failures, "\n".join([*outcome.failures, outcome.transcript])
    print(f"{outcome.point}: {outcome.how} ({outcome.seconds:.1f} s)")
    print(outcome.transcript)
