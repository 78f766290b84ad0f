"""Ownership: which objects this declaration made, and the proof of it.

**The ownership rule.** The provider takes over, PATCHes or stops an existing object only when it holds proof
that the object is the one this declaration made. Proof is an id from the stack's state, an id from the API's
answer to this declaration's own POST (recorded in the create journal), or a match that is unique under strict
conditions (:mod:`..client.reconcile`). Where the proof is missing or ambiguous it touches nothing, says what it
found and what the user can do. A team shares one Together account: look-alike objects made by other stacks,
colleagues and CI runs are the normal case, not the exception.

* :mod:`.journal`: the create journal, one entry per create (its declaration, request, snapshot, POST window and
  id), over a store (:mod:`.stores`) where the stack's state lives (:mod:`.location`);
* :mod:`.transaction`: one create as a transaction that owns its entry: open, obtain (take over, or POST),
  close (done, or stop what it made, or leave it for the next run).
"""
