"""The asyncio client: ``pitlane.aio.Client``, the calls of ``pitlane.Client`` awaited.

Every method of ``pitlane.Client`` is here with the same arguments and results, as a
coroutine (``await client.step(sid, ticks=50)``); ``stream_states`` is an async iterator and
``drive`` an async context manager. Tokens, TLS and the routing headers of a deployment behind
a proxy (``replica=``) work as in the synchronous client. Built on ``grpc.aio``.

    import asyncio, pitlane.aio

    async def main():
        async with pitlane.aio.Client("127.0.0.1:50051") as sim:
            sid = (await sim.create_session(name="async")).session_id
            car = await sim.spawn_vehicle(sid, speed_mps=5.0)
            async with sim.drive(sid, car) as driver:
                for _ in range(100):
                    obs = await driver.observe()
                    await driver.send(obs.time.tick, acceleration_mps2=0.5)
                    await sim.step(sid)

    asyncio.run(main())
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Optional

import grpc

from pitlane import client as _client
from pitlane.v1 import simulator_pb2 as pb
from pitlane.v1 import simulator_pb2_grpc as pb_grpc

__all__ = ["Client", "Driver"]


class Driver:
    """A controller attached to one vehicle through a ``Drive`` stream, for asyncio: the
    asynchronous twin of ``pitlane.Driver`` (the same buffer of at most ``max_buffered``
    observations, ``unseen``, ``observe``, ``latest``, ``send``, ``close``), used as
    ``async with client.drive(sid, car) as driver:`` (or ``await driver.start()``)."""

    _END = object()

    def __init__(self, client: "Client", session_id: str, vehicle_id: int, on_disconnect: str,
                 max_buffered: int = 64):
        if on_disconnect not in _client._DISCONNECT_ACTIONS:
            raise ValueError(
                f"on_disconnect must be one of {sorted(_client._DISCONNECT_ACTIONS)}, "
                f"got {on_disconnect!r}")
        self.vehicle_id = vehicle_id
        self.unseen = 0  # Observations dropped here because the buffer was full.
        self._client = client
        self._session_id = session_id
        self._attach = pb.DriveRequest(attach=pb.DriveAttach(
            session_id=session_id, vehicle_id=vehicle_id,
            on_disconnect=_client._DISCONNECT_ACTIONS[on_disconnect]))
        self._max_buffered = max_buffered
        self._observations: Optional[asyncio.Queue] = None
        self._call = None
        self._reader: Optional[asyncio.Task] = None

    async def start(self) -> "Driver":
        """Opens the stream and attaches (``async with`` does it)."""
        if self._call is not None:
            return self
        metadata = await self._client._stream_metadata(self._session_id)
        self._observations = asyncio.Queue()
        self._call = self._client.stub.Drive(timeout=86400.0, metadata=metadata)
        await self._call.write(self._attach)
        self._reader = asyncio.get_running_loop().create_task(self._read())
        return self

    async def _read(self):
        try:
            while True:
                response = await self._call.read()
                if response is grpc.aio.EOF:
                    self._observations.put_nowait(Driver._END)
                    return
                while self._observations.qsize() >= self._max_buffered:
                    self._observations.get_nowait()
                    self.unseen += 1
                self._observations.put_nowait(response)
        except grpc.aio.AioRpcError as err:
            self._observations.put_nowait(err)
        except asyncio.CancelledError:
            self._observations.put_nowait(Driver._END)

    def _check(self, item):
        if item is Driver._END:
            self._observations.put_nowait(item)
            raise EOFError("the Drive stream ended")
        if isinstance(item, grpc.aio.AioRpcError):
            self._observations.put_nowait(item)
            raise item
        return item

    async def observe(self, timeout_s: Optional[float] = 10.0) -> pb.DriveResponse:
        """The next observation, waiting up to ``timeout_s`` (asyncio.TimeoutError after).

        Raises:
            grpc.aio.AioRpcError: The stream ended with an error (its code says why).
            EOFError: The stream ended normally (e.g. the session was deleted).
        """
        if self._observations is None:
            raise RuntimeError("the Driver is not started: use async with, or await start()")
        return self._check(await asyncio.wait_for(self._observations.get(), timeout_s))

    async def latest(self, timeout_s: Optional[float] = 10.0) -> pb.DriveResponse:
        """Waits for an observation, then returns the newest one queued (the older ones are
        dropped and counted in ``unseen``)."""
        observation = await self.observe(timeout_s)
        while not self._observations.empty():
            item = self._observations.get_nowait()
            if item is Driver._END or isinstance(item, grpc.aio.AioRpcError):
                self._observations.put_nowait(item)
                break
            self.unseen += 1
            observation = item
        return observation

    async def send(self, tick: int, **control_fields: float) -> None:
        """Sends a control answering the observation of ``tick`` (VehicleControl fields of the
        vehicle's model; it applies from the next tick). After the stream ended, nothing is
        sent (``observe`` says how it ended)."""
        if self._call is None:
            raise RuntimeError("the Driver is not started: use async with, or await start()")
        request = pb.DriveRequest(control=pb.DriveControl(
            tick=tick, control=pb.VehicleControl(**control_fields)))
        if self._call.done():
            return
        try:
            await self._call.write(request)
        except (asyncio.InvalidStateError, grpc.aio.AioRpcError):
            pass  # Ended meanwhile: observe() raises its reason.
        except asyncio.CancelledError:
            if not self._call.done():
                raise  # This task itself was cancelled.

    async def close(self) -> None:
        """Ends the stream (the vehicle brakes or holds, as attached)."""
        if self._call is None:
            return
        self._call.cancel()
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader

    async def __aenter__(self) -> "Driver":
        return await self.start()

    async def __aexit__(self, *exc_info) -> None:
        await self.close()


class Client(_client._Api):
    """A connection to one Pitlane server for asyncio: the methods of ``pitlane.Client``, as
    coroutines. Open it inside a running event loop; ``async with`` closes it.

    Attributes:
        stub: The raw generated ``SimulatorStub`` on a ``grpc.aio`` channel (calls made with
            it carry no token or routing header: pass ``metadata``).
        timeout_s: Deadline applied to every unary call, seconds.
        owner_tokens: As ``pitlane.Client.owner_tokens``.
    """

    def __init__(self, address: str = "127.0.0.1:50051", *, timeout_s: float = 30.0,
                 token: Optional[str] = None, **settings):
        """Opens a channel to ``address``. ``token`` and ``settings`` (``root_certificates``,
        ``tls``, ``private_key``, ``certificate_chain``, ``replica``) are ``pitlane.Client``'s
        arguments."""
        self.timeout_s = timeout_s
        self.owner_tokens: dict[str, tuple[str, str]] = {}
        self._address = address
        self._settings = dict(root_certificates=None, tls=None, private_key=None,
                              certificate_chain=None, replica=None)
        unknown = set(settings) - set(self._settings)
        if unknown:
            raise TypeError(f"pitlane.aio.Client got unexpected arguments {sorted(unknown)}")
        self._settings.update(settings)
        self._replica = self._settings["replica"]
        token, credentials = _client._connection_settings(**self._settings, token=token)
        if credentials is not None:
            self._channel = grpc.aio.secure_channel(address, credentials,
                                                    options=_client._CHANNEL_OPTIONS)
        else:
            self._channel = grpc.aio.insecure_channel(address, options=_client._CHANNEL_OPTIONS)
        self.stub = pb_grpc.SimulatorStub(self._channel)
        # The token rules of the synchronous client's interceptor, used here call by call.
        self._tokens = (None if token is None
                        else _client._BearerToken(token, self.owner_tokens))

    def _metadata(self, session_id, token):
        """The routing header (pitlane-session, or pitlane-replica) and the token's."""
        metadata = []
        if session_id and _client._SESSION_ID.fullmatch(session_id):
            metadata.append((_client.SESSION_HEADER, session_id))
        elif self._replica:
            metadata.append((_client.REPLICA_HEADER, self._replica))
        if token is not None:
            metadata.append(("authorization", f"Bearer {token}"))
        return metadata

    async def _unary(self, method: str, request, then=lambda response: response):
        call = getattr(self.stub, method)
        # The session the token rules apply to (none for a StepSessions call of several: the
        # own token), and the one a proxy routes by (its first session's).
        session_id = _client._token_session_of(request) or None
        route = _client._session_of(request) or None

        async def attempt(token):
            try:
                response = await call(request, timeout=self.timeout_s,
                                      metadata=self._metadata(route, token))
                return response, grpc.StatusCode.OK, None
            except grpc.aio.AioRpcError as error:
                return None, error.code(), error

        if self._tokens is None:
            response, _, error = await attempt(None)
        else:
            token, as_owner = self._tokens.first(session_id)
            response, code, error = await attempt(token)
            again = self._tokens.after(session_id, as_owner, code)
            if again is not None:
                response, code, error = await attempt(again[0])
                self._tokens.after_retry(session_id, again[1], code)
        if error is not None:
            raise error
        return then(response)

    async def _stream_metadata(self, session_id):
        """The headers of a stream on `session_id`: as for its unary calls, with the token
        learned first for a session this client created (streams cannot retry)."""
        if self._tokens is None:
            return self._metadata(session_id, None)
        if session_id in self.owner_tokens and session_id not in self._tokens.own_ok:
            with contextlib.suppress(grpc.aio.AioRpcError):
                await self.get_session(session_id)  # The stream will say why, if it fails.
        return self._metadata(session_id, self._tokens.token_for(session_id))

    def drive(self, session_id: str, vehicle_id: int, *,
              on_disconnect: str = "brake") -> Driver:
        """A controller for a vehicle (a ``Drive`` stream): ``async with client.drive(sid, car)
        as driver:``. The arguments are ``pitlane.Client.drive``'s."""
        return Driver(self, session_id, vehicle_id, on_disconnect)

    async def download_recording(self, recording_id: str, path: str, *,
                                 timeout_s: Optional[float] = None) -> int:
        """As ``pitlane.Client.download_recording``."""
        call = self.stub.DownloadRecording(
            pb.DownloadRecordingRequest(recording_id=recording_id),
            timeout=86400.0 if timeout_s is None else timeout_s,
            metadata=await self._stream_metadata(None))
        with _client._Download(path, call) as download:
            async for piece in call:
                download.add(piece)
        return download.written

    async def stream_states(
        self,
        session_id: str,
        every_n_ticks: Optional[int] = None,
        *,
        max_rate_hz: Optional[float] = None,
        vehicle_ids: Sequence[int] = (),
        timeout_s: Optional[float] = None,
    ) -> AsyncIterator[pb.StreamStatesResponse]:
        """The session's states, as ``pitlane.Client.stream_states``: ``async for message in
        client.stream_states(sid):``. ``aclose()`` on the iterator (or
        ``contextlib.aclosing``) cancels the stream at once; leaving the loop does when the
        iterator is collected."""
        request = _client._stream_states_request(session_id, every_n_ticks, max_rate_hz,
                                                 vehicle_ids)
        call = self.stub.StreamStates(request,
                                      timeout=86400.0 if timeout_s is None else timeout_s,
                                      metadata=await self._stream_metadata(session_id))
        try:
            async for response in call:
                yield response
        except asyncio.CancelledError:
            if not call.cancelled():
                raise  # This task itself was cancelled.
            # The call was cancelled here (close() of the client): the stream ends.
        finally:
            call.cancel()

    def with_token(self, token: str) -> "Client":
        """A new connection to the same server, with the same settings, as ``token``."""
        return Client(self._address, timeout_s=self.timeout_s, token=token, **self._settings)

    async def close(self) -> None:
        """Closes the channel; open streams end (CANCELLED)."""
        await self._channel.close()

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.close()
