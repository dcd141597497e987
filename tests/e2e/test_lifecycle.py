"""Session lifecycle through the real server: the idle reaper, and a shutdown with
streams open (they end with UNAVAILABLE and the process exits 0 within a bound)."""

import signal
import time

import grpc
import pytest

import pitlane
from conftest import StreamEnd, assert_rpc_error, running_server


def test_idle_sessions_are_reaped_but_not_those_in_use():
    with running_server("--session_idle_timeout=1", "--scenario=demo") as server, \
            pitlane.Client(server.address, timeout_s=10.0) as client:
        idle = client.create_session(name="idle").session_id
        busy = client.create_session(name="busy").session_id
        watched = client.create_session(name="watched", clock_mode="realtime").session_id
        stream = client.stream_states(watched)
        next(stream)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 2.5:
            client.get_state(busy)  # A call every 0.2 s keeps it alive.
            time.sleep(0.2)
        assert_rpc_error(lambda: client.get_session(idle), grpc.StatusCode.NOT_FOUND,
                         "session_id")
        assert client.get_session(busy).session_id == busy
        demo = server.startup_session_id()
        assert client.get_session(demo).config.name == "demo"  # The startup session is kept.
        assert next(stream).state.time.tick > 0  # Still running, still streaming.
        stream.cancel()
        # One line per sweep names the sessions it reaped.
        assert server.has_line(
            lambda line: "1 session(s) reaped after more than 1 s without a call or a stream: "
            + idle in line), server.output


def test_shutdown_ends_open_streams_with_unavailable_and_exits_zero():
    with running_server() as server:
        with pitlane.Client(server.address, timeout_s=10.0) as client:
            sid = client.create_session(clock_mode="realtime", tick_rate_hz=50.0).session_id
            car, _ = client.spawn_vehicles(
                sid, [pitlane.vehicle_spec(), pitlane.vehicle_spec(y_m=5.0)])
            stream = client.stream_states(sid)
            next(stream)
            driver = client.drive(sid, car)
            driver.observe()
            end = StreamEnd(stream)
            t0 = time.monotonic()
            server.proc.send_signal(signal.SIGTERM)
            with pytest.raises(grpc.RpcError) as info:
                while True:
                    driver.observe(timeout_s=5.0)
            assert info.value.code() == grpc.StatusCode.UNAVAILABLE
            assert end.wait() == grpc.StatusCode.UNAVAILABLE
            assert server.proc.wait(timeout=5.0) == 0
            assert time.monotonic() - t0 < 3.0  # Well within the 2 s grace plus start-up.
            driver.close()
