"""Ownership: which objects this declaration made, and the proof of it.

**The ownership rule.** The provider takes over, PATCHes or stops an existing object only when it holds proof
that the object is the one this declaration made. Proof is an id from the stack's state, an id from the API's
answer to this declaration's own POST (recorded in the create journal), or a match that is unique under strict
conditions (:mod:`..client.reconcile`). Where the proof is missing or ambiguous it touches nothing, says what it
found and what the user can do. A team shares one Together account: look-alike objects made by other stacks,
colleagues and CI runs are the normal case, not the exception.

The rooms, each importing only those before it:

* :mod:`.stores`: one small interface (create-if-absent, compare-and-swap, bounded read, list, remove, the store's
  clock) and its peers: a folder (this machine's, or ``file://``) and a bucket (S3, GCS, Azure Blob);
* :mod:`.records`: entries, leases and claims as plain data with one validated parse;
* :mod:`.location`: where a stack's journal is; :mod:`.journal`: reading it, and judging leases and claims;
* :mod:`.leases`: holding an entry, the only code that writes the journal;
* :mod:`.transaction`: one create as a transaction over its entry; :mod:`.recovery`: ``recover``.

**The order of the writes, and what holds if the process dies right after each.** "Dies" is anything that ends
the process between two writes: SIGKILL, a runner thrown away, a store error and then a kill. The answer of the
write that landed may never have reached the process. In every case the next run's ``pulumi up`` (after at most
one ``recover``, for what the engine itself left: a lock and a pending create) ends with exactly one object for
the declaration, recorded in the state or taken over by id, and touches nothing of another owner's.

A create (:mod:`.transaction`):

1. *the probe* (once per process and journal, five writes under ``probes/``: a create-if-absent, a second one
   that must be refused, a swap on the current version, a refused swap on the now stale one, a remove). Dies after
   any: a stray probe, no entry, nothing sent. The next run POSTs; ``recover`` finds no entry in the stack's journal
   and clears the pending create (a create writes its entry before its POST) when that journal is shared; when it
   is this machine's folder it leaves the pending create and says why (another machine's run, whose journal it
   cannot read, may have made something): the next ``pulumi up`` creates the one object all the same.
2. *the entry*, created if absent with the snapshot and the first send, before the POST (and the send stamped
   again, a swap, when the store took more than a few seconds to take it: the POST's window must hold what the
   POST makes). Dies after: an entry with a POST window and no id, its lease held by a dead process. The next run
   waits out the lease (or sees the process gone), takes the entry by compare-and-swap, and looks for the one
   object made inside that window that no record accounts for: found, taken; none, the entry is kept (its window
   is past) and a new POST goes out; several, nothing is taken or sent and the error names them.
3. *the id*, written into the entry the moment the POST answers (one swap: the id, the answer's time, state
   created). Dies after: the entry names the object; its claim is missing. ``recover`` hands the id to the
   engine (``--import-pending-creates``); the next run takes it over by id (held to the declaration with the
   server's defaults filled in) and writes the claim. A POST that ends with no id writes *its answer* instead
   (the window closed; ``refused`` when the API itself said it failed): dies after, as 2 with a narrower
   window.
4. *the claim* ``claims/<api>/<id>``, created if absent, naming the entry (or, when a claim there proves nothing,
   swapped to name it). Dies after: as 3, the claim in place.
   The claim comes after the id so that no moment exists where a claim names an entry that does not record its
   id (that moment, in the other order, made the next run exclude its own object and POST a second one); a claim
   that proves nothing (its entry gone or recording another id) makes a match ambiguous, never excluded.
5. *renewals* (compare-and-swap, the lease's beat): nothing else changes; dies after one: as the write before.
6. *done*: the entry marked done and released. Dies after (the engine never got the answer): the state holds a
   pending create and no object; a done entry is never taken over by a create (``pulumi up --replace`` and a
   ``pulumi state delete`` also leave done entries whose objects the state does not hold), so ``recover`` reads
   the state, finds the declaration's newest entry done with an id the state does not hold, and reopens it; the
   next ``pulumi up`` takes it over by id. When the provider sees its engine go first (:mod:`..lifeline`), its
   last write is instead *the release with a note* (the id kept, not done): dies after, as 3. **Not covered**:
   the provider process dying alone right after *done* (the OOM killer; its CLI lives on). The engine then
   records a failed create, not a pending one, so ``recover`` has nothing to reopen, and the next ``pulumi up``
   creates a second object. The first is named by its done entry, and the orphan finder reports it ("its create
   ... finished ... but no given state holds it"). ``make crashpoints CRASHPOINTS_ARGS=--provider-only`` shows
   it. Taking a done entry over is no fix: ``--replace`` and ``state delete`` leave done entries too.

A take-over: *its lease taken* (compare-and-swap of the version read, only once the lease ran out or its process
is provably gone). Dies after: the entry as it was, its lease held by a dead process: taken again. Then 3 (a
match's id), 4, 5 and 6 as above, on that entry.

A failed create: the object stopped first, then *the claim removed* (when it names the entry), then *the entry
removed*. Dies between: the entry names a stopped object (its claim gone or not); the next run finds it ended
and removes the entry. An adopt (``adopt_id``) resolves the declaration's interrupted creates that got no answer:
each *taken* then *removed*; dies between, as a prune.

Lost leases: a holder whose compare-and-swap fails has lost the entry to a run that took it over (paused past
its lease, cut off from the store); it writes nothing to that entry again, marks nothing done and stops nothing;
an id it learns afterwards goes to a new entry of its own (released), so that it is never lost.

``recover`` (:mod:`.recovery`), in this order: *the stack's lock removed* (``pulumi cancel``), then *a note* on
the declaration's newest unfinished entry (or *a reopen* of a done one: each a take and a release, one
compare-and-swap each), then *the one refresh* that imports the ids and clears the pending creates, then *done*
on an entry whose id the state now holds. Dies after any: the pending create is still in the state and the entry
as it was, noted or reopened; the next ``recover`` decides the same way (a note changes no decision, and a
reopened entry's id is imported as the done one's would have been), and the next ``pulumi up`` takes the id over
either way.

``prune`` (:func:`.leases.prune`, at most once a minute per process; ``journal prune NAME``): *a lease taken*
then *the entry removed*, only for entries no lease holds whose last write, on the store's clock, is older than
their age limit. Dies between: a taken entry, read as before by the next pruning. (``journal dismiss NAME`` is
one such take and a release marking it dismissed.)

**Proved at every crash point.** ``make crashpoints`` (:mod:`harness.crashpoints`, docs/development.md's "Crash
points") counts the writes of a one-resource ``pulumi up`` on each store (this machine's folder, ``file://``, S3,
Azure Blob), then for every k kills the real provider process (and its CLI) right after its k-th write and runs
one ``recover`` and the next ``pulumi up``: one object, recorded or taken over by id, a colleague's look-alike
untouched, nothing billed that no state names.
"""
