"""Serving the plugin: the SDK's experimental gRPC servicer around :class:`~.provider.TogetherRLProvider`, with
two things of ours where the SDK gives no hook.

* **One sentence.** The servicer answers every exception with its message and the Python stack appended
  (``_raise_with_traceback``). A gRPC interceptor (:class:`_OneSentence`) answers a
  :class:`~..messages.UserError` with its sentence alone, in the schema's names; a bug (anything else, or a
  UserError caused by one) keeps the servicer's message and stack, and so does everything under
  ``TOGETHER_RL_DEBUG=1``. It reads the UserError from the exception the servicer chained (its ``__context__``),
  which is how Python records "raised while handling".
* **The engine's log.** Each operation's lines go to the engine's ``Log`` under the resource's URN
  (:class:`EngineLog`): a wait's progress as an ephemeral line on the resource's row, what happened (a stop after
  a failure, a warning) as a diagnostic of that resource.

The serving loop is the SDK's ``main`` with the interceptor added (it takes none): read the engine's address,
listen on a loopback port, print it, serve until the engine goes. Pinned to the SDK the lock holds (3.272):
the experimental namespace may change, and this module is the one place that knows it.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import grpc.aio

from ..messages import Sink, UserError, is_bug


class EngineLog:
    """Lines for the engine's log, each under a URN; stderr where the engine cannot take one, and nowhere when
    stderr cannot either: :meth:`log` never raises (a line is a courtesy, never a failed operation)."""

    def __init__(self, address: str) -> None:
        self._address = address
        self._lock = threading.Lock()
        self._stub: Any = None

    def sink(self, urn: str) -> Sink:
        def write(line: str, status: bool) -> None:
            self.log(urn, line, status)

        return write

    def log(self, urn: str, line: str, status: bool) -> None:
        from pulumi.runtime.proto import engine_pb2

        warning = line.startswith("warning:")
        severity = engine_pb2.WARNING if warning else engine_pb2.INFO
        try:
            self._engine().Log(
                engine_pb2.LogRequest(
                    severity=severity, message=line, urn=urn, ephemeral=status and not warning
                )
            )
        except Exception:  # the engine gone or unreachable, a line protobuf cannot carry: stderr instead
            try:
                print(line, file=sys.stderr, flush=True)
            except Exception:  # stderr gone too (a broken pipe): a line never fails an operation
                pass

    def _engine(self) -> Any:
        with self._lock:
            if self._stub is None:
                from pulumi.runtime.proto import engine_pb2_grpc

                self._stub = engine_pb2_grpc.EngineStub(grpc.insecure_channel(self._address))
            return self._stub


class _OneSentence(grpc.aio.ServerInterceptor):
    """A UserError answered as its sentence (see the module docstring)."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = await continuation(handler_call_details)
        if handler is None or handler.unary_unary is None:
            return handler
        inner = handler.unary_unary

        async def answer(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            try:
                # The stubs type a handler's behaviour as grpc's synchronous one; under grpc.aio it is a
                # coroutine function of an aio context.
                return await inner(request, context)  # type: ignore[arg-type]
            except Exception as exc:
                sentence = one_sentence(exc)
                if sentence is None:
                    raise
                await context.abort(grpc.StatusCode.UNKNOWN, sentence)

        return grpc.unary_unary_rpc_method_handler(
            answer,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )


def one_sentence(exc: BaseException) -> str | None:
    """The sentence a failure is answered with; None: a bug, which keeps its stack."""
    from .properties import in_words

    found = exc if isinstance(exc, UserError) else exc.__context__
    if (
        not isinstance(found, UserError)
        or is_bug(found.__cause__)
        or os.environ.get("TOGETHER_RL_DEBUG") == "1"
    ):
        return None
    return in_words(str(found))


OPERATION_WORKERS = 128
"""Threads for the operations in flight: more than any stack runs at once (the dynamic face widens its server's
pool to the same)."""


def use_operation_workers(loop: asyncio.AbstractEventLoop) -> None:
    """Each operation holds a worker thread while it waits (READY, RUNNING, a stop): asyncio's default pool (at
    most cpu + 4 threads) would run a stack's creates a few at a time."""
    loop.set_default_executor(
        concurrent.futures.ThreadPoolExecutor(max_workers=OPERATION_WORKERS, thread_name_prefix="operation")
    )


def _warm_up() -> None:
    from . import functions, properties
    from .provider import core

    core()
    properties.names()
    del functions


def _ended(signal_name: str) -> None:
    from .. import lifeline

    why = f"this plugin was ended ({signal_name}) before the engine got its answers"
    threading.Thread(
        target=lifeline.engine_gone, args=(why,), kwargs={"quiet_if_idle": True}, name="ended", daemon=True
    ).start()


def main(argv: list[str] | None = None) -> None:
    """Serve the plugin (the engine starts it with its address as the first argument)."""
    from pulumi.provider.experimental.server import ProviderServicer
    from pulumi.runtime._grpc_settings import _GRPC_CHANNEL_OPTIONS
    from pulumi.runtime.proto import provider_pb2_grpc

    from .. import __version__, lifeline
    from .provider import TogetherRLProvider

    args = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="pulumi-resource-together-rl")
    parser.add_argument("engine")
    known, _ = parser.parse_known_args(args)
    engine = EngineLog(known.engine)

    async def serve() -> None:
        use_operation_workers(asyncio.get_running_loop())
        server = grpc.aio.server(interceptors=[_OneSentence()], options=_GRPC_CHANNEL_OPTIONS)
        provider = TogetherRLProvider(sink=engine.sink)
        servicer = ProviderServicer(args, __version__, provider, engine_address=known.engine)
        provider_pb2_grpc.add_ResourceProviderServicer_to_server(servicer, server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        sys.stdout.write(f"{port}\n")
        sys.stdout.flush()
        # The engine waits for the port before anything else: the core is imported after it, while the engine
        # configures the plugin.
        threading.Thread(target=_warm_up, name="warm-up", daemon=True).start()
        lifeline.watch()  # a killed CLI: stop waiting, keep the journal's entries, exit
        # The engine ends its plugins with SIGINT (then SIGKILL), and this repository's Python language host a
        # plugin whose engine went away with SIGTERM (upstream hosts kill it outright, and the journal's entries
        # then keep their ids without the note). Either way, nobody reads the answers any more.
        for number in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().add_signal_handler(number, _ended, signal.Signals(number).name)
        await server.wait_for_termination()

    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        pass
