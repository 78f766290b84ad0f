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

1. *the probe* (once per process and journal: create-if-absent, a swap on the current version, a refused swap on
   a stale one, a remove, under ``probes/``). Dies after any: a stray probe, no entry, nothing sent. The next run
   POSTs; ``recover`` finds no entry in the stack's journal and clears the pending create (a create writes its
   entry before its POST).
2. *the entry*, created if absent with the snapshot and the first send, before the POST (and the send stamped
   again, a swap, when the store took more than a few seconds to take it: the POST's window must hold what the
   POST makes). Dies after: an entry with a POST window and no id, its lease held by a dead process. The next run
   waits out the lease (or sees the process gone), takes the entry by compare-and-swap, and looks for the one
   object made inside that window that no record accounts for: found, taken; none, the entry is kept (its window
   is past) and a new POST goes out; several, nothing is taken or sent and the error names them.
3. *the id*, written into the entry the moment the POST answers. Dies after: the entry names the object; its
   claim is missing. The next run takes it over by id (held to the declaration with the server's defaults
   filled in) and writes the claim.
4. *the claim* ``claims/<api>/<id>``, created if absent, naming the entry. Dies after: as 3, the claim in place.
   The claim comes after the id so that no moment exists where a claim names an entry that does not record its
   id (that moment, in the other order, made the next run exclude its own object and POST a second one); a claim
   that proves nothing (its entry gone or recording another id) makes a match ambiguous, never excluded.
5. *renewals* (compare-and-swap, the lease's beat): nothing else changes; dies after one: as the write before.
6. *done*: the entry marked done and released. Dies after (the engine never got the answer): the state holds a
   pending create and no object; a done entry is never taken over by a create (``pulumi up --replace`` and a
   ``pulumi state delete`` also leave done entries whose objects the state does not hold), so ``recover`` reads
   the state, finds the declaration's newest entry done with an id the state does not hold, and reopens it; the
   next ``pulumi up`` takes it over by id.

A take-over: *its lease taken* (compare-and-swap of the version read, only once the lease ran out or its process
is provably gone). Dies after: the entry as it was, its lease held by a dead process: taken again. Then 3 (a
match's id), 4, 5 and 6 as above, on that entry.

A failed create: the object stopped first, then *the entry removed* (its claim first, when the claim names it).
Dies between: the entry names a stopped object; the next run finds it ended and removes the entry.

Lost leases: a holder whose compare-and-swap fails has lost the entry to a run that took it over (paused past
its lease, cut off from the store); it writes nothing to that entry again, marks nothing done and stops nothing;
an id it learns afterwards goes to a new entry of its own (released), so that it is never lost.

``recover`` (:mod:`.recovery`): *a note* on the declaration's newest unfinished entry (and *a reopen* of a done
one): each one compare-and-swap that takes and releases the entry. Dies after: the entry as it was, or
reopened: the next ``recover`` or ``pulumi up`` reads it the same way.

``prune`` (:func:`.leases.prune`, at most once a minute per process; ``journal prune NAME``): *a lease taken*
then *the entry removed*, only for entries no lease holds whose last write, on the store's clock, is older than
their age limit. Dies between: a taken entry, read as before by the next pruning.
"""
