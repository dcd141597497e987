"""Synchronous Python client for the Pitlane simulator (gRPC API pitlane.v1).

The client is a thin layer over the generated stub: every method builds the
request message, calls the RPC with a deadline and returns the protobuf
response (or the interesting part of it). Errors are not caught: a failed call
raises ``grpc.RpcError``; inspect ``err.code()`` and ``err.details()``.

Units are SI throughout (metres, seconds, radians, m/s, m/s^2, Hz).

Example:
    with pitlane.Client("127.0.0.1:50051") as sim:
        session = sim.create_session(name="demo", tick_rate_hz=50.0)
        car = sim.spawn_vehicle(session.session_id, speed_mps=5.0)
        sim.set_controls(session.session_id, {car: (0.0, 0.2)})
        state = sim.step(session.session_id, ticks=50)
"""

from __future__ import annotations

import collections
import contextlib
import os
import queue
import re
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Optional, Union

import grpc

from pitlane.v1 import simulator_pb2 as pb
from pitlane.v1 import simulator_pb2_grpc as pb_grpc

_MAX_MESSAGE_BYTES = 256 * 1024 * 1024

_INTEGRATORS = {
    "semi_implicit_euler": pb.BICYCLE_INTEGRATOR_SEMI_IMPLICIT_EULER,
    "exact_arc": pb.BICYCLE_INTEGRATOR_EXACT_ARC,
}

_CLOCK_MODES = {
    "lockstep": pb.CLOCK_MODE_LOCKSTEP,
    "realtime": pb.CLOCK_MODE_REALTIME,
    "barrier": pb.CLOCK_MODE_BARRIER,
}

_DISCONNECT_ACTIONS = {
    "brake": pb.DISCONNECT_ACTION_BRAKE_TO_STOP,
    "hold": pb.DISCONNECT_ACTION_HOLD_CONTROLS,
}


def _clock_mode(name: str) -> int:
    """The ClockMode value of a mode name; ValueError for an unknown one."""
    if name not in _CLOCK_MODES:
        raise ValueError(f"clock_mode must be one of {sorted(_CLOCK_MODES)}, got {name!r}")
    return _CLOCK_MODES[name]


_COLLISION_POLICIES = {
    "report": pb.COLLISION_POLICY_REPORT,
    "stop": pb.COLLISION_POLICY_STOP,
}

# The vehicle models: the fields of VehicleSpec's `model` oneof, by name.
_MODELS = {
    field.name: field.message_type.name
    for field in pb.VehicleSpec.DESCRIPTOR.oneofs_by_name["model"].fields
}

Controls = Union[
    Mapping[int, Union[tuple[float, float], Mapping[str, float]]],
    Iterable[pb.VehicleControl],
]


def control(vehicle_id: int, **fields: float) -> pb.VehicleControl:
    """Builds a VehicleControl from its fields by name.

    Each model reads its own fields; the server rejects the others
    (INVALID_ARGUMENT), so set only those of the vehicle's model:
    kinematic_bicycle, single_track and four_wheel take
    ``acceleration_mps2`` and ``steering_angle_rad``; front_wheel_drive,
    all_wheel_drive and force_based take ``throttle`` and ``brake`` (each in
    [0, 1]) and ``steering_angle_rad``; physics_body takes
    ``target_speed_mps`` (or ``acceleration_mps2``) and ``yaw_rate_radps``.

    Example:
        sim.set_controls(sid, [control(car, throttle=0.6, steering_angle_rad=0.1)])
    """
    return pb.VehicleControl(vehicle_id=vehicle_id, **fields)


def obstacle_spec(
    *,
    center_x_m: float,
    center_y_m: float,
    length_m: float,
    width_m: float,
    yaw_rad: float = 0.0,
    name: str = "",
) -> pb.ObstacleSpec:
    """Builds a static box obstacle: centre, size (metres) and heading (rad)."""
    return pb.ObstacleSpec(
        name=name,
        center_x_m=center_x_m,
        center_y_m=center_y_m,
        yaw_rad=yaw_rad,
        length_m=length_m,
        width_m=width_m,
    )


def vehicle_spec(
    *,
    x_m: float = 0.0,
    y_m: float = 0.0,
    yaw_rad: float = 0.0,
    speed_mps: float = 0.0,
    length_m: Optional[float] = None,
    width_m: Optional[float] = None,
    model: str = "kinematic_bicycle",
    params: Optional[Mapping[str, Union[int, float, str, bool]]] = None,
    wheelbase_m: Optional[float] = None,
    integrator: Optional[str] = None,
    limits: Optional[Mapping[str, float]] = None,
    name: str = "",
    range_scan: Optional[Mapping[str, Union[int, float]]] = None,
    nearest_objects: Optional[Mapping[str, Union[int, float]]] = None,
    timing_track: Optional[str] = None,
    track_sensor: Optional[Mapping[str, Union[float, Sequence[float]]]] = None,
) -> pb.VehicleSpec:
    """Builds a VehicleSpec for any vehicle model.

    Args:
        x_m: Initial x (east) of the model's reference point, metres (the
            rear-axle centre for kinematic_bicycle; see docs/vehicle-models.md).
        y_m: Initial y (north) of the reference point, metres.
        yaw_rad: Initial heading, radians counter-clockwise from +x.
        speed_mps: Initial speed along the heading, m/s (negative: reverse).
        length_m: Body length, metres; None leaves the server default (4.5).
        width_m: Body width, metres; None leaves the server default (1.8).
        model: The vehicle model: one of the names of VehicleSpec's
            ``model`` oneof ("kinematic_bicycle", "physics_body", ...).
        params: Fields of the model's message by name, e.g.
            {"drag_factor_per_frame": 0.95} for physics_body; enum fields take
            their value names. Missing fields take server defaults.
        wheelbase_m: kinematic_bicycle only: axle distance, metres; None
            leaves the server default (2.7).
        integrator: kinematic_bicycle only: "semi_implicit_euler" (default)
            or "exact_arc".
        limits: VehicleLimits fields by name, e.g.
            {"max_speed_mps": 10.0}; missing fields take the model's
            defaults. Limits the model does not use are rejected.
        name: Human-readable label.
        range_scan: Gives the vehicle a range scanner: RangeScanSpec fields
            by name, e.g. {"beam_count": 181, "field_of_view_rad": 3.14,
            "max_range_m": 30.0}; {} takes the defaults (64 beams all
            around, 50 m). None: no scanner.
        nearest_objects: Reports the nearest objects: NearestObjectsSpec
            fields by name, e.g. {"count": 4, "radius_m": 20.0}; {} takes
            the defaults (8 within 50 m). None: off.
        timing_track: The race track whose laps the vehicle is timed on, by
            name (docs/racing.md); None: its route follower's, else the
            session's first race track.
        track_sensor: Gives the vehicle TORCS-style track sensors:
            TrackSensorSpec fields by name, e.g. {"beam_angles_rad": [-0.5,
            0.0, 0.5], "range_m": 100.0}; {} takes the defaults (TORCS's 19
            beams, 200 m). None: none.

    Returns:
        The VehicleSpec message.

    Raises:
        ValueError: Unknown model or integrator name, or a kinematic_bicycle
            argument given for another model.
    """
    if model not in _MODELS:
        raise ValueError(f"model must be one of {sorted(_MODELS)}, got {model!r}")
    if model != "kinematic_bicycle" and (
        wheelbase_m is not None or integrator is not None
    ):
        raise ValueError(
            "wheelbase_m and integrator are kinematic_bicycle arguments; "
            f"pass {model}'s fields in params"
        )
    spec = pb.VehicleSpec(
        name=name,
        initial_pose=pb.Pose2D(x_m=x_m, y_m=y_m, yaw_rad=yaw_rad),
        initial_speed_mps=speed_mps,
        limits=pb.VehicleLimits(**(limits or {})),
    )
    model_message = getattr(spec, model)
    model_message.SetInParent()
    # The constructor takes enum values by name as well as by number.
    model_message.MergeFrom(type(model_message)(**(params or {})))
    if model == "kinematic_bicycle":
        if integrator is not None:
            if integrator not in _INTEGRATORS:
                raise ValueError(
                    f"integrator must be one of {sorted(_INTEGRATORS)}, "
                    f"got {integrator!r}"
                )
            model_message.integrator = _INTEGRATORS[integrator]
        if wheelbase_m is not None:
            model_message.wheelbase_m = wheelbase_m
    if length_m is not None:
        spec.length_m = length_m
    if width_m is not None:
        spec.width_m = width_m
    if range_scan is not None:
        spec.range_scan.CopyFrom(pb.RangeScanSpec(**range_scan))
    if nearest_objects is not None:
        spec.nearest_objects.CopyFrom(pb.NearestObjectsSpec(**nearest_objects))
    if timing_track is not None:
        spec.timing_track = timing_track
    if track_sensor is not None:
        spec.track_sensor.CopyFrom(pb.TrackSensorSpec(**track_sensor))
    return spec


class Driver:
    """A controller attached to one vehicle through a ``Drive`` stream.

    Observations (``DriveResponse``) arrive after every tick; ``observe`` returns
    the next one, ``latest`` the newest. A background thread receives them into
    a buffer of at most ``max_buffered`` (default 64): a controller that falls
    further behind loses the oldest, counted in ``unseen``, as the server's
    latest-wins rule intends (a real-time controller should call ``latest``).
    ``send`` answers an observation with a control, tagged with that
    observation's tick. Use as a context manager, or call ``close``: the
    vehicle then does what ``on_disconnect`` said (brake to a stop, or hold its
    controls).

    Example (a BARRIER session waits for ``send`` before each tick):
        with sim.drive(sid, car) as driver:
            for _ in range(500):
                obs = driver.observe()
                driver.send(obs.time.tick, acceleration_mps2=1.0,
                            steering_angle_rad=0.1)
    """

    _END = object()

    def __init__(self, stub, session_id: str, vehicle_id: int, on_disconnect: str,
                 max_buffered: int = 64, metadata=None):
        if on_disconnect not in _DISCONNECT_ACTIONS:
            raise ValueError(
                f"on_disconnect must be one of {sorted(_DISCONNECT_ACTIONS)}, "
                f"got {on_disconnect!r}"
            )
        self.vehicle_id = vehicle_id
        self._requests = queue.Queue()
        self._requests.put(
            pb.DriveRequest(
                attach=pb.DriveAttach(
                    session_id=session_id,
                    vehicle_id=vehicle_id,
                    on_disconnect=_DISCONNECT_ACTIONS[on_disconnect],
                )
            )
        )
        self._observations = queue.Queue()
        self._max_buffered = max_buffered
        self.unseen = 0  # Observations dropped here because the buffer was full.
        self._call = stub.Drive(self._request_iterator(), timeout=86400.0, metadata=metadata)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _request_iterator(self):
        while True:
            request = self._requests.get()
            if request is Driver._END:
                return
            yield request

    def _read(self):
        try:
            for response in self._call:
                while self._observations.qsize() >= self._max_buffered:
                    try:
                        self._observations.get_nowait()
                        self.unseen += 1
                    except queue.Empty:
                        break
                self._observations.put(response)
            self._observations.put(Driver._END)
        except grpc.RpcError as err:
            self._observations.put(err)

    def observe(self, timeout_s: Optional[float] = 10.0) -> pb.DriveResponse:
        """Returns the next observation (waiting up to ``timeout_s``).

        Raises:
            grpc.RpcError: The stream ended with an error (its code says why).
            EOFError: The stream ended normally (e.g. the session was deleted).
            queue.Empty: No observation within the timeout.
        """
        item = self._observations.get(timeout=timeout_s)
        if item is Driver._END:
            self._observations.put(item)
            raise EOFError("the Drive stream ended")
        if isinstance(item, grpc.RpcError):
            self._observations.put(item)
            raise item
        return item

    def latest(self, timeout_s: Optional[float] = 10.0) -> pb.DriveResponse:
        """Waits for an observation, then returns the newest one queued (the
        older ones queued are dropped and counted in ``unseen``)."""
        observation = self.observe(timeout_s)
        while True:
            try:
                item = self._observations.get_nowait()
            except queue.Empty:
                return observation
            if item is Driver._END or isinstance(item, grpc.RpcError):
                self._observations.put(item)
                return observation
            self.unseen += 1
            observation = item

    def send(self, tick: int, **control_fields: float) -> None:
        """Sends a control answering the observation of ``tick``.

        ``control_fields`` are VehicleControl fields of the vehicle's model
        (see ``control``); the control applies from the next tick.
        """
        self._requests.put(
            pb.DriveRequest(
                control=pb.DriveControl(
                    tick=tick, control=pb.VehicleControl(**control_fields)
                )
            )
        )

    def close(self) -> None:
        """Ends the stream (the vehicle brakes or holds, as attached)."""
        self._requests.put(Driver._END)
        self._call.cancel()
        self._reader.join(timeout=10.0)

    def __enter__(self) -> "Driver":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


class _CallDetails(
    collections.namedtuple(
        "_CallDetails",
        ("method", "timeout", "metadata", "credentials", "wait_for_ready", "compression"),
    ),
    grpc.ClientCallDetails,
):
    pass


def _with_header(details, key, value):
    """`details` with the header `key: value` added, unless the call already sets `key`."""
    metadata = list(details.metadata or ())
    if not any(k == key for k, _ in metadata):
        metadata.append((key, value))
    return _CallDetails(
        details.method,
        details.timeout,
        metadata,
        details.credentials,
        details.wait_for_ready,
        details.compression,
    )


class _BearerToken(
    grpc.UnaryUnaryClientInterceptor,
    grpc.UnaryStreamClientInterceptor,
    grpc.StreamUnaryClientInterceptor,
    grpc.StreamStreamClientInterceptor,
):
    """Adds ``authorization: Bearer <token>`` to every call (plaintext or TLS alike).

    The client's own token goes first. For a session this client created (whose owner token
    it keeps), a unary call the own token may not make (NOT_FOUND or PERMISSION_DENIED: the
    server did nothing) is made again with the owner token, which is then used first for that
    session; if the owner token turns out revoked (UNAUTHENTICATED), it is forgotten and the own
    token used again. An admin's client thus always acts as the admin.
    """

    _RETRY_AS_OWNER = (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.PERMISSION_DENIED)

    def __init__(self, token: str, owner_tokens: dict):
        self._token = token
        self._owner_tokens = owner_tokens
        self._owner_first = set()  # Sessions where the own token was refused, the owner's not.
        self.own_ok = set()  # Sessions where the own token was accepted.

    @staticmethod
    def _with(details, token):
        return _with_header(details, "authorization", f"Bearer {token}")

    def token_for(self, session_id):
        """The token to try first for calls on `session_id`."""
        return self.first(session_id)[0]

    def first(self, session_id):
        """(token, whether it is the session's owner token) to try first on `session_id`."""
        owned = self._owner_tokens.get(session_id) if session_id else None
        if owned and session_id in self._owner_first:
            return owned[0], True
        return self._token, False

    def after(self, session_id, as_owner, code):
        """After a unary call on `session_id` made with first(session_id) ended with `code`:
        the (token, as_owner) to make it again with, or None to keep its answer."""
        if as_owner:
            if code != grpc.StatusCode.UNAUTHENTICATED:
                return None
            # Revoked (another call may have found out first): the own token, once more.
            self._owner_tokens.pop(session_id, None)
            self._owner_first.discard(session_id)
            return self._token, False
        owned = self._owner_tokens.get(session_id) if session_id else None
        if owned is None:
            return None
        if code == grpc.StatusCode.OK:
            self.own_ok.add(session_id)
        if code not in self._RETRY_AS_OWNER or session_id in self.own_ok:
            return None
        return owned[0], True

    def after_retry(self, session_id, as_owner, code):
        """After the call made again as after() said ended with `code`."""
        if as_owner and code not in self._RETRY_AS_OWNER:  # The owner token made the difference.
            self._owner_first.add(session_id)

    def intercept_unary_unary(self, continuation, details, request):
        session_id = _token_session_of(request)
        token, as_owner = self.first(session_id)
        call = continuation(self._with(details, token), request)
        again = self.after(session_id, as_owner, call.code())
        if again is None:
            return call
        retried = continuation(self._with(details, again[0]), request)
        self.after_retry(session_id, again[1], retried.code())
        return retried

    def intercept_unary_stream(self, continuation, details, request):
        token = self.token_for(getattr(request, "session_id", None))
        return continuation(self._with(details, token), request)

    def intercept_stream_unary(self, continuation, details, request_iterator):
        return continuation(self._with(details, self._token), request_iterator)

    def intercept_stream_stream(self, continuation, details, request_iterator):
        return continuation(self._with(details, self._token), request_iterator)


# The headers a proxy in front of several servers routes calls by (docs/deployment.md): the
# session a call is about (its id ends with the name of the server that holds it), or, for
# calls about no session (CreateSession, ListSessions), a server chosen by name.
SESSION_HEADER = "pitlane-session"
REPLICA_HEADER = "pitlane-replica"
_REPLICA_NAME = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?")
# A session id as servers make them: "s-", 26 characters of base32, and "." and the replica's
# name on a server that is one of several.
_SESSION_ID = re.compile(r"s-[a-z2-7]{26}(?:\.([a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?))?")


def replica_of(session_id: str) -> Optional[str]:
    """The name of the server (its ``--replica``) that holds ``session_id``, or None for a
    server on its own (or a string that is no session id). Pass it as ``Client(...,
    replica=)`` for the calls about no session that a session's token makes behind a proxy:
    tokens other than the admin's are known only to the server that made them."""
    match = _SESSION_ID.fullmatch(session_id or "")
    return match.group(1) if match else None


class _Route(
    grpc.UnaryUnaryClientInterceptor,
    grpc.UnaryStreamClientInterceptor,
    grpc.StreamUnaryClientInterceptor,
    grpc.StreamStreamClientInterceptor,
):
    """Adds ``pitlane-session: <session_id>`` to every call whose request names a session, and
    ``pitlane-replica: <replica>`` (when the client was given one) to the others, so that a
    proxy in front of several servers sends each call to the server that holds its session.
    A server on its own ignores both. (Drive streams carry the session in their first message,
    which an interceptor cannot see: Driver sets the header itself.)"""

    def __init__(self, replica: Optional[str]):
        self._replica = replica

    def _with(self, details, session_id):
        # Only ids the servers make: another string (a typo, a newline from a file) cannot
        # route anywhere, and some could not be sent as a header at all; the server answers it.
        if session_id and _SESSION_ID.fullmatch(session_id):
            return _with_header(details, SESSION_HEADER, session_id)
        if self._replica:
            return _with_header(details, REPLICA_HEADER, self._replica)
        return details

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(self._with(details, _session_of(request)), request)

    def intercept_unary_stream(self, continuation, details, request):
        return continuation(self._with(details, _session_of(request)), request)

    def intercept_stream_unary(self, continuation, details, request_iterator):
        return continuation(self._with(details, None), request_iterator)

    def intercept_stream_stream(self, continuation, details, request_iterator):
        return continuation(self._with(details, None), request_iterator)


_TOKEN_ROLES = {
    "owner": pb.TOKEN_ROLE_OWNER,
    "driver": pb.TOKEN_ROLE_DRIVER,
    "viewer": pb.TOKEN_ROLE_VIEWER,
}


def _control_list(controls):
    """set_controls's forms of controls, as a list of VehicleControl."""
    if isinstance(controls, Mapping):
        return [
            control(vid, **value)
            if isinstance(value, Mapping)
            else control(vid, acceleration_mps2=value[0], steering_angle_rad=value[1])
            for vid, value in controls.items()
        ]
    return list(controls)


def _token_session_of(request):
    """The session whose token rules a unary call follows: the one it names (a StepSessions
    call of one session, a DrivingEnv's step, names it too); None for none or several."""
    session_id = getattr(request, "session_id", None)
    if session_id is None and isinstance(request, pb.StepSessionsRequest) and \
            len(request.steps) == 1:
        session_id = request.steps[0].session_id
    return session_id


def _session_of(request):
    """The session a request is about (the first one of a StepSessions call), or None."""
    session_id = getattr(request, "session_id", None)
    if session_id is None and isinstance(request, pb.StepSessionsRequest) and request.steps:
        session_id = request.steps[0].session_id
    return session_id


# The fixed columns of a StepSessions vehicle table (StepResultLayout TABLE), in order; the
# range scan's beams follow.
VEHICLE_TABLE_COLUMNS = (
    "session", "vehicle_id", "tick", "x_m", "y_m", "yaw_rad", "speed_mps",
    "steering_angle_rad", "acceleration_mps2", "yaw_rate_radps", "lateral_speed_mps", "crashed",
)


def vehicle_table(table: pb.VehicleTable):
    """A StepSessions response's ``vehicle_table`` as a float64 numpy array, one row per
    vehicle: ``VEHICLE_TABLE_COLUMNS`` (``session`` is the index of the vehicle's session in
    the request; ``crashed`` 1 or 0), then ``table.range_beams`` ranges in metres (NaN past a
    vehicle's own beams)."""
    import numpy as np  # pylint: disable=import-outside-toplevel  # Only for tables.
    columns = max(table.columns, len(VEHICLE_TABLE_COLUMNS))
    return np.frombuffer(table.rows, dtype="<f8").reshape(-1, columns)


def _step_sessions_result(response):
    """step_sessions's answer: the results, and the table of a table-layout call."""
    if response.HasField("vehicle_table"):
        return list(response.results), vehicle_table(response.vehicle_table)
    return list(response.results)


def _step_request(session_id, ticks, expected_tick):
    request = pb.StepRequest(session_id=session_id, ticks=ticks)
    if expected_tick is not None:
        request.expected_tick = expected_tick
    return request


def _stream_states_request(session_id, every_n_ticks, max_rate_hz, vehicle_ids):
    request = pb.StreamStatesRequest(session_id=session_id)
    if every_n_ticks is not None:
        request.every_n_ticks = every_n_ticks
    if max_rate_hz is not None:
        request.max_rate_hz = max_rate_hz
    request.vehicle_ids.extend(vehicle_ids)
    return request


class _Download:
    """A DownloadRecording stream's pieces into ``path + ".part"`` (an existing file at
    ``path`` stays until the download is whole), checked to follow each other and to add up
    to the file's size, then renamed to ``path``; on any failure the call is cancelled and
    the part removed."""

    def __init__(self, path, call):
        self.path, self.part, self.call = path, path + ".part", call
        self.written, self.size, self.out = 0, None, None

    def __enter__(self):
        self.out = open(self.part, "wb")  # pylint: disable=consider-using-with
        return self

    def add(self, piece):
        if piece.offset != self.written or (self.size is not None and piece.size != self.size):
            raise RuntimeError(f"download: a piece at {piece.offset} of {piece.size} bytes, "
                               f"expected {self.written} of {self.size}")
        self.size = piece.size
        self.out.write(piece.data)
        self.written += len(piece.data)

    def __exit__(self, kind, value, trace):
        self.out.close()
        short = kind is None and self.size is not None and self.written != self.size
        if kind is None and not short:
            os.replace(self.part, self.path)
            return False
        self.call.cancel()
        with contextlib.suppress(OSError):
            os.remove(self.part)
        if short:
            raise RuntimeError(f"download: got {self.written} of {self.size} bytes")
        return False


def _as_bytes(pem):
    return pem.encode("ascii") if isinstance(pem, str) else pem


_CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", _MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", _MAX_MESSAGE_BYTES),
]


def _connection_settings(*, token, replica, root_certificates, tls, private_key,
                         certificate_chain):
    """The checked token (stripped, or None) and the channel credentials (None: plaintext) of
    a client's arguments (see Client.__init__)."""
    if token is not None:
        token = token.strip()
        if not token:
            raise ValueError("token is empty")
        # A header value gRPC cannot send makes it print the value in its error: a token
        # with a mistyped character would be echoed almost whole. Refused here, unseen.
        if not all("!" <= c <= "~" for c in token):
            raise ValueError(
                "token: holds characters a token never has (Pitlane tokens are plt_ and 32 "
                "characters of a-z and 2-7); copy it again from the file you were given")
    if replica is not None and not _REPLICA_NAME.fullmatch(replica):
        raise ValueError(
            f"replica: must be 1 to 32 characters of a-z, 0-9 and '-', beginning and ending "
            f"with a letter or digit (a server's --replica), got {replica!r}")
    if tls is None:
        tls = any(x is not None for x in (root_certificates, private_key, certificate_chain))
    if not tls:
        return token, None
    return token, grpc.ssl_channel_credentials(
        root_certificates=_as_bytes(root_certificates),
        private_key=_as_bytes(private_key),
        certificate_chain=_as_bytes(certificate_chain),
    )


class _Api:
    """The calls of the API, shared by ``Client`` and ``pitlane.aio.Client``: each method
    builds its request and hands it to ``self._unary``, which returns the result (``Client``)
    or an awaitable of it (``pitlane.aio.Client``)."""

    # Sessions ---------------------------------------------------------------

    def create_session(
        self,
        *,
        name: str = "",
        tick_rate_hz: Optional[float] = None,
        seed: int = 0,
        max_vehicles: Optional[int] = None,
        collision_policy: Optional[str] = None,
        bounds: Optional[tuple[float, float, float, float]] = None,
        obstacles: Sequence[pb.ObstacleSpec] = (),
        clock_mode: Optional[str] = None,
        real_time_factor: Optional[float] = None,
        paused: bool = False,
        barrier_timeout_s: Optional[float] = None,
        scenario: str = "",
    ) -> pb.SessionInfo:
        """Creates a session.

        Args:
            name: Human-readable label.
            tick_rate_hz: Ticks per simulated second, Hz; None: server
                default (50).
            seed: Seed for the session's random choices.
            max_vehicles: Vehicle cap; None: the server's limit.
            collision_policy: "report" (vehicles drive through each other;
                contacts are reported) or "stop" (a vehicle in contact
                halts and is marked crashed); None: the scenario's, or
                "report".
            bounds: (min_x_m, min_y_m, max_x_m, max_y_m): walls around the
                world; None: no walls.
            obstacles: Static obstacles placed at tick 0 (see
                ``obstacle_spec``).
            clock_mode: "lockstep" (time moves only in ``step``),
                "realtime" (the server steps the session at tick_rate_hz x
                real_time_factor) or "barrier" (each tick waits for every
                attached controller, see ``drive``); None: the scenario's,
                or "lockstep".
            real_time_factor: realtime: simulated seconds per wall-clock
                second, 0 (as fast as possible) or in [1e-6, 1000]; None: 1.
            paused: realtime and barrier: create it paused (see
                ``set_clock``).
            barrier_timeout_s: barrier: the longest a tick waits for the
                controllers, seconds, within the server's range (at most
                [0.001, 60]); None: 0.5, or the nearest end of that range.
            scenario: Start from a scenario ("demo", "oval-race", ...; see
                docs/scenarios.md): its tracks, obstacles and AI cars, with the
                other arguments applied over it (those left at their defaults
                keep the scenario's values).

        Returns:
            The new SessionInfo (tick 0, no vehicles, defaults filled in).

        Raises:
            ValueError: Unknown collision policy or clock mode name.
        """
        if collision_policy is not None and collision_policy not in _COLLISION_POLICIES:
            raise ValueError(
                f"collision_policy must be one of {sorted(_COLLISION_POLICIES)}, "
                f"got {collision_policy!r}"
            )
        config = pb.SessionConfig(
            name=name,
            seed=seed,
            obstacles=obstacles,
            paused=paused,
            scenario=scenario,
        )
        # Unset (None), they keep the scenario's values, or the server's defaults.
        if collision_policy is not None:
            config.collision_policy = _COLLISION_POLICIES[collision_policy]
        if clock_mode is not None:
            config.clock_mode = _clock_mode(clock_mode)
        if real_time_factor is not None:
            config.real_time_factor = real_time_factor
        if barrier_timeout_s is not None:
            config.barrier_timeout_s = barrier_timeout_s
        if bounds is not None:
            min_x, min_y, max_x, max_y = bounds
            config.bounds.CopyFrom(
                pb.WorldBounds(min_x_m=min_x, min_y_m=min_y, max_x_m=max_x, max_y_m=max_y)
            )
        if tick_rate_hz is not None:
            config.tick_rate_hz = tick_rate_hz
        if max_vehicles is not None:
            config.max_vehicles = max_vehicles
        return self._unary("CreateSession", pb.CreateSessionRequest(config=config),
                           self._owned_session)

    def _owned_session(self, response) -> pb.SessionInfo:
        """The session of a response that made one; its owner token (if any) kept for it."""
        if response.owner_token:
            self.owner_tokens[response.session.session_id] = (
                response.owner_token,
                response.owner_token_id,
            )
        return response.session

    def set_clock(
        self,
        session_id: str,
        *,
        clock_mode: Optional[str] = None,
        real_time_factor: Optional[float] = None,
        paused: Optional[bool] = None,
        barrier_timeout_s: Optional[float] = None,
    ) -> pb.SetClockResponse:
        """Changes a session's clock; unset arguments stay as they are.

        Args:
            session_id: The session.
            clock_mode: "lockstep", "realtime" or "barrier".
            real_time_factor: Simulated seconds per wall-clock second, 0
                (as fast as possible) or in [1e-6, 1000].
            paused: True pauses a realtime or barrier session (``step`` then
                works); False resumes it, pacing from now.
            barrier_timeout_s: barrier: the longest a tick waits for the
                controllers, seconds, within the server's range.

        Returns:
            The response: the time of the change and the clock in effect.
        """
        request = pb.SetClockRequest(session_id=session_id)
        if clock_mode is not None:
            request.clock_mode = _clock_mode(clock_mode)
        if real_time_factor is not None:
            request.real_time_factor = real_time_factor
        if paused is not None:
            request.paused = paused
        if barrier_timeout_s is not None:
            request.barrier_timeout_s = barrier_timeout_s
        return self._unary("SetClock", request)

    def get_session(self, session_id: str) -> pb.SessionInfo:
        """Returns one session's config, clock and vehicles."""
        return self._unary("GetSession", pb.GetSessionRequest(session_id=session_id),
                           lambda r: r.session)

    def list_sessions(self) -> list[pb.SessionInfo]:
        """Returns every session in creation order (without vehicles)."""
        return self._unary("ListSessions", pb.ListSessionsRequest(), lambda r: list(r.sessions))

    def reset_session(self, session_id: str) -> pb.WorldState:
        """Puts a session back to tick 0 as created (its scenario's cars and
        obstacles, the same seed); returns the state at tick 0."""
        return self._unary("ResetSession", pb.ResetSessionRequest(session_id=session_id),
                           lambda r: r.state)

    def state_hash(self, session_id: str) -> int:
        """A hash of every bit of the session's state (equal states, equal
        hashes): for checking that a run reproduces."""
        return self._unary("GetState", pb.GetStateRequest(session_id=session_id),
                           lambda r: r.state_hash)

    def delete_session(self, session_id: str) -> pb.SimTime:
        """Deletes a session; returns its clock at deletion."""
        return self._unary("DeleteSession", pb.DeleteSessionRequest(session_id=session_id),
                           lambda r: r.time)

    # Races ------------------------------------------------------------------

    def start_race(self, session_id: str, *, track: str = "",
                   vehicle_ids: Sequence[int] = (), grid_from_spawn_points: bool = False,
                   replace: bool = False, **rules: float) -> pb.RaceStatus:
        """Calls a race (docs/racing.md) on ``track`` (default: the session's first race
        track) with every car timed on the track, or ``vehicle_ids`` (in grid order). Their
        grid: where they stand, or with ``grid_from_spawn_points`` the session's spawn points
        in order (each car put there at rest). ``rules``: ``pb.RaceRules`` fields (``laps``,
        ``countdown_s``, ``jump_start_m``, ``penalty_contact_s``, ...); unset ones are the
        session's. ``replace`` abandons a race still running. Returns the race as called."""
        request = pb.StartRaceRequest(session_id=session_id, track=track,
                                      vehicle_ids=list(vehicle_ids), replace=replace,
                                      grid_from_spawn_points=grid_from_spawn_points,
                                      rules=pb.RaceRules(**rules))
        return self._unary("StartRace", request, lambda r: r.race)

    def race_results(self, session_id: str, format: Optional[str] = None):
        """The results of the race called last: a ``pb.RaceStatus`` (final once its phase is
        ``RACE_PHASE_FINISHED``), or with ``format="csv"`` or ``"json"`` the results as that
        text (for grading: docs/racing.md has the columns)."""
        formats = {None: pb.RESULTS_FORMAT_UNSPECIFIED, "csv": pb.RESULTS_FORMAT_CSV,
                   "json": pb.RESULTS_FORMAT_JSON}
        if format not in formats:
            raise ValueError(f"format must be 'csv', 'json' or None, not {format!r}")
        request = pb.GetRaceResultsRequest(session_id=session_id, format=formats[format])
        return self._unary("GetRaceResults", request,
                           lambda r: r.race if format is None else r.content)

    # Vehicles ---------------------------------------------------------------

    def spawn_vehicle(self, session_id: str, **spec_fields) -> int:
        """Spawns one vehicle of any model at the current tick.

        Args:
            session_id: The session.
            **spec_fields: Keyword arguments of ``vehicle_spec`` (model,
                params, x_m, y_m, yaw_rad, speed_mps, length_m, width_m,
                limits, name, range_scan, nearest_objects, timing_track,
                track_sensor; wheelbase_m and
                integrator for kinematic_bicycle); unset ones take the
                server's defaults. Default model: kinematic_bicycle.

        Returns:
            The new vehicle's id.
        """
        return self._unary(
            "SpawnVehicle",
            pb.SpawnVehicleRequest(session_id=session_id, vehicles=[vehicle_spec(**spec_fields)]),
            lambda r: r.vehicle_ids[0])

    def spawn_vehicles(
        self, session_id: str, specs: Sequence[pb.VehicleSpec]
    ) -> list[int]:
        """Spawns many vehicles, all or none; returns their ids in order."""
        return self._unary("SpawnVehicle",
                           pb.SpawnVehicleRequest(session_id=session_id, vehicles=specs),
                           lambda r: list(r.vehicle_ids))

    def spawn_vehicles_with_tokens(
        self, session_id: str, specs: Sequence[pb.VehicleSpec]
    ) -> list[tuple[int, str, str]]:
        """Spawns many vehicles with a driver token each (``--auth=token`` servers).

        Returns ``(vehicle_id, token, token_id)`` per vehicle, in order. The tokens are shown
        only here.
        """
        return self._unary(
            "SpawnVehicle",
            pb.SpawnVehicleRequest(session_id=session_id, vehicles=specs, driver_tokens=True),
            lambda r: list(zip(r.vehicle_ids, r.driver_tokens, r.driver_token_ids)))

    # Access -------------------------------------------------------------------

    def mint_token(
        self, session_id: str, role: str, vehicle_id: int = 0
    ) -> tuple[str, str]:
        """Mints a token for a session: role "owner", "viewer", or "driver" (of
        ``vehicle_id``). Returns ``(token, token_id)``; the token is shown only here."""
        if role not in _TOKEN_ROLES:
            raise ValueError(f"role must be one of {sorted(_TOKEN_ROLES)}, got {role!r}")
        return self._unary(
            "MintToken",
            pb.MintTokenRequest(
                session_id=session_id, role=_TOKEN_ROLES[role], vehicle_id=vehicle_id
            ),
            lambda r: (r.token, r.token_id))

    def revoke_token(self, session_id: str, token_id: str) -> None:
        """Revokes a token of the session by its id; its Drive and StreamStates streams end."""
        def revoked(_):
            owned = self.owner_tokens.get(session_id)
            if owned and owned[1] == token_id:
                del self.owner_tokens[session_id]

        return self._unary(
            "RevokeToken", pb.RevokeTokenRequest(session_id=session_id, token_id=token_id),
            revoked)

    def detach_controller(self, session_id: str, vehicle_id: int) -> pb.SimTime:
        """Ends the Drive stream attached to a vehicle (it ends with ABORTED)."""
        return self._unary(
            "DetachController",
            pb.DetachControllerRequest(session_id=session_id, vehicle_id=vehicle_id),
            lambda r: r.time)

    # Recordings (docs/recording.md) ------------------------------------------

    def start_recording(
        self,
        session_id: str,
        *,
        telemetry_rate_hz: Optional[float] = None,
        max_bytes: Optional[int] = None,
        max_duration_s: Optional[float] = None,
        foxglove_rate_hz: Optional[float] = None,
    ) -> pb.RecordingInfo:
        """Starts recording a session into an MCAP file on the server (its --record_dir).

        Unset options take the server's defaults (telemetry at 10 Hz of simulated time, the
        Foxglove channels at 2 Hz, 0 for none; the server's --max_recording_mib and
        --max_recording_s)."""
        options = pb.RecordingOptions()
        if telemetry_rate_hz is not None:
            options.telemetry_rate_hz = telemetry_rate_hz
        if foxglove_rate_hz is not None:
            options.foxglove_rate_hz = foxglove_rate_hz
        if max_bytes is not None:
            options.max_bytes = max_bytes
        if max_duration_s is not None:
            options.max_duration_s = max_duration_s
        return self._unary(
            "StartRecording",
            pb.StartRecordingRequest(session_id=session_id, options=options),
            lambda r: r.recording)

    def stop_recording(self, recording_id: str) -> pb.RecordingInfo:
        """Stops a recording and completes its file; returns it as it ended."""
        return self._unary(
            "StopRecording", pb.StopRecordingRequest(recording_id=recording_id),
            lambda r: r.recording)

    def replay_recording(self, recording_id: str) -> pb.ReplayRecordingResponse:
        """Re-simulates a recording in a new LOCKSTEP session (yours) and compares every tick's
        state hash with the recording's: ``matched``, or the first ``divergence``."""
        return self._unary(
            "ReplayRecording", pb.ReplayRecordingRequest(recording_id=recording_id))

    def play_recording(
        self,
        recording_id: str,
        *,
        start_time_s: float = 0.0,
        clock_mode: str = "realtime",
        real_time_factor: Optional[float] = None,
        paused: bool = False,
        name: str = "",
    ) -> pb.SessionInfo:
        """Plays a recording back into a new read-only session (yours): the viewer, Foxglove and
        ``stream_states`` watch it like a live one. Returns the session; its ``playback`` says
        which recording and where it is.

        Args:
            recording_id: The recording (a stopped one).
            start_time_s: Where to start, seconds since the recording's start.
            clock_mode: "realtime" (plays on its own, at ``real_time_factor``) or "lockstep"
                (moves only by ``step``, ticks of the recorded rate).
            real_time_factor: Recorded seconds per wall-clock second; None: 1.
            paused: Start paused (``set_clock(sid, paused=False)`` plays).
            name: The session's label; default "playback of <recording_id>".
        """
        request = pb.PlayRecordingRequest(recording_id=recording_id, start_time_s=start_time_s,
                                          clock_mode=_clock_mode(clock_mode), paused=paused,
                                          name=name)
        if real_time_factor is not None:
            request.real_time_factor = real_time_factor

        return self._unary("PlayRecording", request, self._owned_session)

    def seek_playback(self, session_id: str, time_s: float) -> pb.SeekPlaybackResponse:
        """Moves a playback to ``time_s`` seconds since its recording's start (beyond its end:
        its last frame); every watcher gets that frame. Its clock keeps its mode and pause."""
        return self._unary("SeekPlayback",
                           pb.SeekPlaybackRequest(session_id=session_id, time_s=time_s))

    def delete_recording(self, recording_id: str) -> int:
        """Deletes a stopped recording's file; returns the bytes freed."""
        return self._unary(
            "DeleteRecording", pb.DeleteRecordingRequest(recording_id=recording_id),
            lambda r: r.bytes_freed)

    def list_recordings(self) -> list[pb.RecordingInfo]:
        """The recordings the caller may see, newest first: this server's, and those an earlier
        run left in its --record_dir (admins only)."""
        return self._unary(
            "ListRecordings", pb.ListRecordingsRequest(), lambda r: list(r.recordings))

    def remove_vehicle(self, session_id: str, vehicle_id: int) -> pb.SimTime:
        """Removes a vehicle; returns the session clock."""
        return self._unary(
            "RemoveVehicle", pb.RemoveVehicleRequest(session_id=session_id, vehicle_id=vehicle_id),
            lambda r: r.time)

    # Obstacles --------------------------------------------------------------

    def add_obstacle(self, session_id: str, **spec_fields) -> int:
        """Adds one static box (keyword arguments of ``obstacle_spec``); returns its id."""
        return self._unary(
            "AddObstacle",
            pb.AddObstacleRequest(session_id=session_id, obstacles=[obstacle_spec(**spec_fields)]),
            lambda r: r.obstacle_ids[0])

    def add_obstacles(
        self, session_id: str, specs: Sequence[pb.ObstacleSpec]
    ) -> list[int]:
        """Adds many static boxes, all or none; returns their ids in order."""
        return self._unary("AddObstacle",
                           pb.AddObstacleRequest(session_id=session_id, obstacles=specs),
                           lambda r: list(r.obstacle_ids))

    def remove_obstacle(self, session_id: str, obstacle_id: int) -> pb.SimTime:
        """Removes an obstacle; returns the session clock."""
        return self._unary(
            "RemoveObstacle",
            pb.RemoveObstacleRequest(session_id=session_id, obstacle_id=obstacle_id),
            lambda r: r.time)

    # Controls and stepping --------------------------------------------------

    def set_controls(
        self, session_id: str, controls: Controls
    ) -> pb.SetControlsResponse:
        """Sets controls, all or none; they apply from the next tick and hold.

        Args:
            session_id: The session.
            controls: {vehicle_id: (acceleration_mps2, steering_angle_rad)},
                {vehicle_id: {field: value}} (any VehicleControl fields,
                e.g. {"throttle": 0.5, "steering_angle_rad": 0.1}), or an
                iterable of VehicleControl (see ``control``). Out-of-range
                values are clamped by the server (pedals outside [0, 1] and
                fields the vehicle's model does not use are rejected).

        Returns:
            The response, with ``time`` and ``applies_from_tick``.
        """
        return self._unary("SetControls", pb.SetControlsRequest(
            session_id=session_id, controls=_control_list(controls)))

    def step_sessions(self, steps: Sequence[Mapping], *, table: bool = False):
        """Sets controls and steps many sessions in one call (a vector of environments).

        Args:
            steps: One mapping per session: ``session_id``, ``ticks`` (default 1),
                ``controls`` (as ``set_controls``; default none) and ``vehicle_ids`` (only
                these vehicles in the state returned; default all); or a
                ``pb.StepSessionsRequest`` made already.

            table: Return the vehicles as one table of numbers (numpy required) instead of a
                state per session: for many environments at once.

        Returns:
            One ``SessionStepResult`` per step, in order: ``state`` after its ticks, or
            ``code`` (a grpc.StatusCode value) and ``message`` if that session's controls or
            Step failed; the others are stepped regardless. The call itself raises (and changes
            nothing) for a malformed request, a session named twice or unknown, or one the
            token may not step. Behind a proxy, all the sessions must be on one server.
            With ``table`` (or a request whose ``layout`` is STEP_RESULT_LAYOUT_TABLE):
            ``(results, rows)``, the results without states and ``rows`` the vehicles as a
            float64 array, one row per vehicle, columns ``VEHICLE_TABLE_COLUMNS`` then the
            range scan's beams (see ``vehicle_table``).
        """
        if isinstance(steps, pb.StepSessionsRequest):  # Made already (a vector env's).
            return self._unary("StepSessions", steps, _step_sessions_result)
        request = pb.StepSessionsRequest()
        if table:
            request.layout = pb.STEP_RESULT_LAYOUT_TABLE
        for step in steps:
            unknown = set(step) - {"session_id", "ticks", "controls", "vehicle_ids"}
            if unknown:
                raise ValueError(f"step_sessions: unknown keys {sorted(unknown)}")
            request.steps.add(session_id=step["session_id"], ticks=step.get("ticks", 1),
                              controls=_control_list(step.get("controls", ())),
                              vehicle_ids=step.get("vehicle_ids", ()))
        return self._unary("StepSessions", request, _step_sessions_result)

    def step(
        self,
        session_id: str,
        ticks: int = 1,
        *,
        expected_tick: Optional[int] = None,
    ) -> pb.WorldState:
        """Advances the session by ``ticks`` ticks; returns the final state.

        The state's ``contacts`` lists the contacts in effect; for the
        contact events of every tick stepped, use ``step_with_events``.

        Args:
            session_id: The session.
            ticks: Ticks to advance (each 1 / tick_rate_hz seconds).
            expected_tick: If given, the server steps only if the session is
                at this tick now, else fails with ABORTED.
        """
        return self._unary("Step", _step_request(session_id, ticks, expected_tick),
                           lambda r: r.state)

    def step_with_events(
        self,
        session_id: str,
        ticks: int = 1,
        *,
        expected_tick: Optional[int] = None,
    ) -> pb.StepResponse:
        """Like ``step``, but returns the whole response: ``state``, and
        ``events``: the BEGAN and ENDED contact events of every tick stepped,
        then ONGOING for the contacts still in effect (see the proto)."""
        return self._unary("Step", _step_request(session_id, ticks, expected_tick))

    def get_state(self, session_id: str) -> pb.WorldState:
        """Returns the current world state without advancing time."""
        return self._unary("GetState", pb.GetStateRequest(session_id=session_id),
                           lambda r: r.state)


class Client(_Api):
    """A connection to one Pitlane server.

    Attributes:
        stub: The raw generated ``SimulatorStub`` for calls not wrapped here (it sends the
            token too).
        timeout_s: Deadline applied to every unary call, seconds.
        owner_tokens: ``{session_id: (token, token_id)}`` of the sessions this client created
            on a server that checks tokens (``--auth=token``): the owner token is shown once,
            in the CreateSession response, and kept here; calls on those sessions that
            ``token`` may not make use it instead.
    """

    def __init__(
        self,
        address: str = "127.0.0.1:50051",
        *,
        timeout_s: float = 30.0,
        token: Optional[str] = None,
        root_certificates: Optional[Union[str, bytes]] = None,
        tls: Optional[bool] = None,
        private_key: Optional[Union[str, bytes]] = None,
        certificate_chain: Optional[Union[str, bytes]] = None,
        replica: Optional[str] = None,
    ):
        """Opens a channel to ``address`` ("host:port").

        Args:
            token: A Pitlane token (admin, owner, driver or viewer), sent on every call and
                stream as ``authorization: Bearer <token>``. Surrounding whitespace (a token
                file's newline) is ignored.
            root_certificates: PEM certificates of the CA that signed the server's
                certificate; connects over TLS. Without it, ``tls=True`` trusts the system's
                CAs.
            tls: TLS or plaintext; default: TLS when any certificate is given.
            private_key, certificate_chain: This client's PEM key and certificate, for a
                server that asks for one (mutual TLS, ``--tls_client_ca_file``).
            replica: Behind a proxy in front of several servers (docs/deployment.md), the
                server (its ``--replica`` name) that calls about no session go to: where
                ``create_session`` creates and whose sessions ``list_sessions`` lists. None:
                the proxy chooses. Calls about a session always go to the server that holds
                it, whatever this is.
        """
        self.timeout_s = timeout_s
        self.owner_tokens: dict[str, tuple[str, str]] = {}
        self._address = address
        self._tls_args = dict(
            root_certificates=root_certificates,
            tls=tls,
            private_key=private_key,
            certificate_chain=certificate_chain,
            replica=replica,
        )
        token, credentials = _connection_settings(**self._tls_args, token=token)
        if credentials is not None:
            self._channel = grpc.secure_channel(address, credentials, options=_CHANNEL_OPTIONS)
        else:
            self._channel = grpc.insecure_channel(address, options=_CHANNEL_OPTIONS)
        # The headers a proxy in front of several servers routes by; a lone server ignores them.
        channel = grpc.intercept_channel(self._channel, _Route(replica))
        self._bearer = None
        if token is not None:
            self._bearer = _BearerToken(token, self.owner_tokens)
            channel = grpc.intercept_channel(channel, self._bearer)
        self.stub = pb_grpc.SimulatorStub(channel)
        # StepSessions with a request serialized already (a vector env's): on the channel
        # itself, with the headers the interceptors would add to a call of several sessions.
        self._step_sessions_serialized = self._channel.unary_unary(
            "/pitlane.v1.Simulator/StepSessions", request_serializer=None,
            response_deserializer=pb.StepSessionsResponse.FromString)
        self._replica = replica
        self._token_header = [] if token is None else [("authorization", f"Bearer {token}")]

    def _learn_token_for(self, session_id: str) -> None:
        """Before a stream on a session this client created: one GetSession tells whether the
        client's own token may act on it or the owner token must (streams cannot retry)."""
        if session_id in self.owner_tokens and session_id not in self._bearer.own_ok:
            try:
                self.get_session(session_id)
            except grpc.RpcError:
                pass  # The stream will say why.

    def _unary(self, method: str, request, then=lambda response: response):
        """Calls unary `method` with `request`; returns `then` of the response: the one place
        this client makes a unary call."""
        return then(getattr(self.stub, method)(request, timeout=self.timeout_s))

    def _step_sessions_from_bytes(self, request: bytes,
                                  first_session_id: str) -> pb.StepSessionsResponse:
        """StepSessions of a request serialized already, of several sessions (the first is
        `first_session_id`): a vector env writes the actions into the bytes of its request,
        which costs far less than serializing it. The headers are those the interceptors add
        to such a call (the interceptors cost a third of it): the routing header of its first
        session, else the client's replica, and the client's own token."""
        metadata = [*self._token_header, *self._route_headers(first_session_id)]
        return self._step_sessions_serialized(request, timeout=self.timeout_s, metadata=metadata)

    def _route_headers(self, session_id: str) -> list:
        """The routing header _Route adds to a call about `session_id`."""
        if _SESSION_ID.fullmatch(session_id):
            return [(SESSION_HEADER, session_id)]
        return [(REPLICA_HEADER, self._replica)] if self._replica else []

    def _step_session_from_bytes(self, request: bytes,
                                 session_id: str) -> pb.StepSessionsResponse:
        """StepSessions of one session, `session_id`, from a request serialized already (a
        DrivingEnv's step, its action written into the bytes), with what the interceptors
        would add to it: the session's routing header, and the token their rules choose for the
        session, made again with the other token where they would (a refused call changed
        nothing on the server)."""
        metadata = self._route_headers(session_id)

        def send(token):
            headers = metadata if token is None else [*metadata, ("authorization",
                                                                  f"Bearer {token}")]
            return self._step_sessions_serialized(request, timeout=self.timeout_s,
                                                  metadata=headers)

        if self._bearer is None:
            return send(None)
        token, as_owner = self._bearer.first(session_id)
        try:
            response = send(token)
        except grpc.RpcError as error:
            again = self._bearer.after(session_id, as_owner, error.code())
            if again is None:
                raise
        else:
            self._bearer.after(session_id, as_owner, grpc.StatusCode.OK)
            return response
        try:
            response = send(again[0])
        except grpc.RpcError as error:
            self._bearer.after_retry(session_id, again[1], error.code())
            raise
        self._bearer.after_retry(session_id, again[1], grpc.StatusCode.OK)
        return response

    def with_token(self, token: str) -> "Client":
        """A new connection to the same server, with the same TLS settings, as ``token``."""
        return Client(self._address, timeout_s=self.timeout_s, token=token, **self._tls_args)

    def close(self) -> None:
        """Closes the channel; ongoing streams are cancelled."""
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def drive(
        self, session_id: str, vehicle_id: int, *, on_disconnect: str = "brake"
    ) -> Driver:
        """Attaches a controller to a vehicle (a ``Drive`` stream).

        Args:
            session_id: The session.
            vehicle_id: The vehicle to drive; one controller per vehicle.
            on_disconnect: "brake" (brake to a stop when the stream ends) or
                "hold" (keep the last controls).

        Returns:
            A ``Driver``; its first observation is the current tick.
        """
        metadata = [(SESSION_HEADER, session_id)] if _SESSION_ID.fullmatch(session_id) else []
        if self._bearer is not None:  # The owner token, for a session this client created.
            self._learn_token_for(session_id)
            metadata.append(("authorization", f"Bearer {self._bearer.token_for(session_id)}"))
        return Driver(self.stub, session_id, vehicle_id, on_disconnect, metadata=metadata)

    def download_recording(self, recording_id: str, path: str, *,
                           timeout_s: Optional[float] = None) -> int:
        """Writes a recording's file (what it holds so far, if it is running) to ``path``
        (through ``path + ".part"``: a failed download leaves ``path`` as it was); returns its
        size in bytes. Read it with ``pitlane.read_recording(path)``."""
        call = self.stub.DownloadRecording(
            pb.DownloadRecordingRequest(recording_id=recording_id),
            timeout=86400.0 if timeout_s is None else timeout_s)
        with _Download(path, call) as download:
            for piece in call:
                download.add(piece)
        return download.written

    def stream_states(
        self,
        session_id: str,
        every_n_ticks: Optional[int] = None,
        *,
        max_rate_hz: Optional[float] = None,
        vehicle_ids: Sequence[int] = (),
        timeout_s: Optional[float] = None,
    ) -> Iterator[pb.StreamStatesResponse]:
        """Subscribes to a session's states.

        Yields the current state first, then the state after every tick that
        is a multiple of ``every_n_ticks`` (server default 1). A slow reader
        skips frames (see ``skipped_frames``). Each message's ``events`` holds
        the contact events since the previous message, including those of
        decimated or skipped ticks (``dropped_events`` counts any beyond
        100,000). The stream ends normally when the session is deleted.

        The returned object is the gRPC call itself: an iterator that is also
        a ``grpc.Future``. Stop it early with ``.cancel()`` (from any thread);
        iterating a cancelled stream raises ``grpc.RpcError`` with code
        CANCELLED. Closing the client cancels it too.

        Args:
            session_id: The session.
            every_n_ticks: Decimation, >= 1; None: every tick.
            max_rate_hz: At most this many messages per wall-clock second
                (for dashboards); None: no limit.
            vehicle_ids: Only these vehicles and their contacts; empty: all.
            timeout_s: Deadline for the whole stream, seconds; None: one day
                (streams are long-lived, but every call has a deadline).
        """
        request = _stream_states_request(session_id, every_n_ticks, max_rate_hz, vehicle_ids)
        if self._bearer is not None:
            self._learn_token_for(session_id)  # The interceptor then picks the token.
        return self.stub.StreamStates(
            request, timeout=86400.0 if timeout_s is None else timeout_s
        )
