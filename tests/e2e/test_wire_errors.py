"""Requests that are not what they claim: clear INVALID_ARGUMENT errors, nothing in the log.

Raw bytes go through the real server binary on generic gRPC calls, so the client library's
own checks cannot hide what the server does.
"""

import grpc
import pytest

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
