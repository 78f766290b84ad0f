"""The secrets provider of the suite's throwaway stacks (:class:`harness.cli.CLIStack`): AWS KMS, served by moto on
a loopback port, one server per process that needs it (a pytest-xdist worker, a script), started at the first
stack and stopped at exit.

Why not passphrase secrets, as a user of a file backend has: Pulumi's passphrase provider derives its key with
PBKDF2 (1,000,000 rounds of SHA-256) in every CLI process that reads or writes a secret, and every ``preview``,
``up``, ``refresh`` and ``destroy`` of a stack reads its API key: about 0.24 s of CPU per command on this suite's
machines (``pulumi config get`` of a secret against a plain value), an eighth of what a command costs, and the
suite runs about a thousand of them. A cloud provider decrypts its data key with one request instead. The stacks'
secrets are still envelope-encrypted by the CLI, in the config and the state (what the secrecy tests read); the
user's own commands with passphrase secrets are run as the pages give them (tests/e2e/test_artifacts.py and the
other tests that init a stack themselves).
"""

from __future__ import annotations

import atexit
import functools
import threading

from .bucket import REGION, S3Server, aws_client

ALIAS = "alias/together-rl-test-stacks"
_lock = threading.Lock()


@functools.cache
def _server() -> S3Server:
    """moto's server (the one :mod:`harness.bucket` runs: moto serves every AWS service it knows on one port),
    with one symmetric key under :data:`ALIAS`."""
    server = S3Server().start()
    atexit.register(server.__exit__, None, None, None)
    kms = aws_client("kms", server.endpoint)
    key = kms.create_key(Description="the suite's test stacks")["KeyMetadata"]["KeyId"]
    kms.create_alias(AliasName=ALIAS, TargetKeyId=key)
    return server


def provider_url() -> str:
    """``--secrets-provider`` of a new test stack: the key of this process's server (started if need be)."""
    with _lock:
        server = _server()
    return f"awskms://{ALIAS}?region={REGION}&endpoint=http://{server.endpoint}"
