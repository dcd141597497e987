"""Requests that are not what they claim: clear INVALID_ARGUMENT errors, nothing in the log.

Raw bytes go through the real server binary on generic gRPC calls, so the client library's
own checks cannot hide what the server does.
"""

import grpc
import pytest
from pitlane.v1 import simulator_pb2 as pb
from pitlane.v1 import simulator_pb2_grpc as pb_grpc

from conftest import running_server

UNARY = ["CreateSession", "GetSession", "ListSessions", "DeleteSession", "ResetSession",
         "SpawnVehicle", "RemoveVehicle", "AddObstacle", "RemoveObstacle", "SetControls",
         "Step", "SetClock", "GetState"]
# Not a protobuf message: a field 1 of wire type 2 whose length runs past the end.
GARBAGE = b"\x0a\xff\xff\xff\x0f\x01"
# GetStateRequest{session_id: <invalid UTF-8>}.
BAD_UTF8_SESSION_ID = b"\x0a\x02\xff\xfe"
# SpawnVehicleRequest{session_id: "x", vehicles: [{name: <invalid UTF-8>}]}.
BAD_UTF8_NESTED = b"\x0a\x01x\x12\x04\x0a\x02\xff\xfe"


def raw_unary(channel, method):
    return channel.unary_unary(f"/pitlane.v1.Simulator/{method}")


@pytest.fixture(scope="module")
def quiet_server():
    with running_server() as server:
        with grpc.insecure_channel(server.address) as channel:
            yield server, channel


@pytest.mark.parametrize("method", UNARY)
def test_a_request_that_does_not_parse_is_invalid_argument(quiet_server, method):
    _, channel = quiet_server
    with pytest.raises(grpc.RpcError) as info:
        raw_unary(channel, method)(GARBAGE, timeout=5.0)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert info.value.details() == f"request: not a valid pitlane.v1.{method}Request"


def test_streams_whose_request_does_not_parse_are_invalid_argument(quiet_server):
    _, channel = quiet_server
    stream = channel.unary_stream("/pitlane.v1.Simulator/StreamStates")(GARBAGE, timeout=5.0)
    with pytest.raises(grpc.RpcError) as info:
        next(stream)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "not a valid pitlane.v1.StreamStatesRequest" in info.value.details()
    drive = channel.stream_stream("/pitlane.v1.Simulator/Drive")(iter([GARBAGE]), timeout=5.0)
    with pytest.raises(grpc.RpcError) as info:
        next(drive)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "not a valid pitlane.v1.DriveRequest" in info.value.details()


def test_invalid_utf8_names_the_field_and_writes_no_log_line(quiet_server):
    server, channel = quiet_server
    lines_before = len(server.output)
    for _ in range(200):
        with pytest.raises(grpc.RpcError) as info:
            raw_unary(channel, "GetState")(BAD_UTF8_SESSION_ID, timeout=5.0)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert info.value.details() == "request.session_id: not valid UTF-8"
    with pytest.raises(grpc.RpcError) as info:
        raw_unary(channel, "SpawnVehicle")(BAD_UTF8_NESTED, timeout=5.0)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert info.value.details() == "request: pitlane.v1.VehicleSpec.name is not valid UTF-8"
    assert server.output[lines_before:] == []


# A 1 MiB session_id once came back whole in the NOT_FOUND message: a 1 MiB status that a
# client with default metadata limits sees as RESOURCE_EXHAUSTED instead.
HUGE_ID = "x" * (1 << 20)


def _huge_id_calls(stub):
    """Each method that looks a session up, called with HUGE_ID."""
    return {
        "GetSession": lambda: stub.GetSession(pb.GetSessionRequest(session_id=HUGE_ID),
                                              timeout=5.0),
        "DeleteSession": lambda: stub.DeleteSession(pb.DeleteSessionRequest(session_id=HUGE_ID),
                                                    timeout=5.0),
        "Step": lambda: stub.Step(pb.StepRequest(session_id=HUGE_ID, ticks=1), timeout=5.0),
        "StreamStates": lambda: next(
            stub.StreamStates(pb.StreamStatesRequest(session_id=HUGE_ID), timeout=5.0)),
        "Drive": lambda: next(stub.Drive(
            iter([pb.DriveRequest(attach=pb.DriveAttach(session_id=HUGE_ID, vehicle_id=1))]),
            timeout=5.0)),
    }


@pytest.mark.parametrize("method, field", [
    ("GetSession", "session_id"), ("DeleteSession", "session_id"), ("Step", "session_id"),
    ("StreamStates", "session_id"), ("Drive", "attach.session_id"),
])
def test_a_huge_session_id_is_not_found_with_a_short_message(quiet_server, method, field):
    server, channel = quiet_server
    lines_before = len(server.output)
    with pytest.raises(grpc.RpcError) as info:
        _huge_id_calls(pb_grpc.SimulatorStub(channel))[method]()
    assert info.value.code() == grpc.StatusCode.NOT_FOUND, info.value.details()[:200]
    # The id cut to 64 bytes, and said so.
    assert info.value.details() == f'{field}: no session "{"x" * 64}..."'
    assert server.output[lines_before:] == []


def test_an_echoed_id_is_escaped(quiet_server):
    _, channel = quiet_server
    stub = pb_grpc.SimulatorStub(channel)
    with pytest.raises(grpc.RpcError) as info:
        stub.GetSession(pb.GetSessionRequest(session_id='s-"1"\n\\\x07\u00e9'), timeout=5.0)
    assert info.value.code() == grpc.StatusCode.NOT_FOUND
    assert info.value.details() == 'session_id: no session "s-\\"1\\"\\n\\\\\\x07\\xc3\\xa9"'
