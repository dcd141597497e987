"""A busy server stays responsive: long Steps run on the session workers, never on gRPC's
threads; a cancelled Step stops between ticks; SIGTERM stops running Steps at once.

Each test starts its own server with room for big sessions.
"""

import math
import signal
import statistics
import time

import grpc
import pytest

import pitlane
from pitlane.v1 import simulator_pb2 as pb
from conftest import StreamEnd, running_server

BIG = 20_000            # Vehicles in a big session.
LONG_STEP_S = 5.0       # Wall time a long Step is calibrated to take; at least 3 s is checked.
LATENCY_LIMIT_S = 0.1   # What another client may wait while the long Steps run.
FLAGS = ("--max_vehicles_per_session=40000", "--max_ticks_per_step=20000",
         "--max_receive_message_mib=64")


def big_session(client, vehicles=BIG):
    """A lockstep session of `vehicles` cars on a 10 m grid, driving east (no contacts)."""
    sid = client.create_session(name="big", max_vehicles=vehicles).session_id
    columns = 200
    specs = [pitlane.vehicle_spec(x_m=10.0 * (i % columns), y_m=10.0 * (i // columns),
                                  speed_mps=5.0) for i in range(vehicles)]
    for start in range(0, vehicles, 5000):
        client.spawn_vehicles(sid, specs[start:start + 5000])
    return sid


def ticks_for(client, sid, seconds):
    """Ticks of `sid` that take about `seconds` of wall time on this machine (it steps 220).

    The cost of a tick is the difference of two Steps, so that of the response is left out.
    """
    def timed(ticks):
        t0 = time.monotonic()
        client.step(sid, ticks)
        return time.monotonic() - t0

    per_tick = max((timed(200) - timed(20)) / 180, 1e-6)
    return min(20_000, max(100, math.ceil(seconds / per_tick)))


def long_step(client, sid, ticks, timeout_s=120.0):
    """Starts Step{ticks} without waiting: a future."""
    return client.stub.Step.future(pb.StepRequest(session_id=sid, ticks=ticks), timeout=timeout_s)


def worst_latency_while(future, probes, min_samples=5):
    """Runs every probe in turn until `future` is done; returns the slowest call, seconds."""
    worst = 0.0
    samples = 0
    while not future.done() or samples < min_samples:
        for probe in probes:
            t0 = time.monotonic()
            probe()
            worst = max(worst, time.monotonic() - t0)
        samples += 1
        time.sleep(0.05)
        if future.done() and samples >= min_samples:
            break
    return worst, samples


@pytest.fixture
def busy_server():
    with running_server(*FLAGS) as server:
        with pitlane.Client(server.address, timeout_s=60.0) as client:
            yield server, client


def probes_for(client, grpc_std, address):
    health = grpc_std.health_pb2_grpc.HealthStub(grpc.insecure_channel(address))
    small = client.create_session(name="small").session_id
    client.spawn_vehicle(small, speed_mps=1.0)
    return [
        lambda: health.Check(grpc_std.health_pb2.HealthCheckRequest(), timeout=5.0),
        lambda: client.get_state(small),
        lambda: client.step(small, 1),
    ]


def test_a_long_step_does_not_delay_other_clients(busy_server, grpc_std):
    server, client = busy_server
    sid = big_session(client)
    ticks = ticks_for(client, sid, LONG_STEP_S)
    probes = probes_for(client, grpc_std, server.address)
    t0 = time.monotonic()
    future = long_step(client, sid, ticks)
    worst, samples = worst_latency_while(future, probes)
    took = time.monotonic() - t0
    assert future.result().state.time.tick == 220 + ticks
    assert took >= 3.0, f"the long Step took only {took:.2f} s"
    assert samples >= 5
    assert worst < LATENCY_LIMIT_S, f"a call took {worst * 1e3:.0f} ms during the long Step"


def test_two_long_steps_and_a_queued_get_state(busy_server, grpc_std):
    server, client = busy_server
    a, b = big_session(client), big_session(client)
    ticks = ticks_for(client, a, LONG_STEP_S)
    probes = probes_for(client, grpc_std, server.address)
    first = long_step(client, a, ticks)
    second = long_step(client, b, ticks)
    # One more call on a stepping session waits for a slice at most, not for the Step.
    queued = client.stub.GetState.future(pb.GetStateRequest(session_id=a), timeout=30.0)
    worst, _ = worst_latency_while(first, probes)
    assert queued.result().state.time.tick < 220 + ticks
    second.result()
    assert worst < LATENCY_LIMIT_S, f"a call took {worst * 1e3:.0f} ms during two long Steps"


@pytest.mark.parametrize("how", ["cancel", "deadline"])
def test_a_cancelled_step_stops_between_ticks_and_leaves_the_session_usable(busy_server, how):
    _, client = busy_server
    sid = big_session(client, 5000)
    per_tick_ticks = ticks_for(client, sid, 1.0)  # Ticks in one second.
    if how == "cancel":
        future = long_step(client, sid, 20_000)
        time.sleep(0.5)
        assert future.cancel()
        assert future.code() == grpc.StatusCode.CANCELLED
    else:
        future = long_step(client, sid, 20_000, timeout_s=0.5)
        with pytest.raises(grpc.RpcError) as info:
            future.result()
        assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    # Within one tick's time (here ~1/per_tick_ticks s; the check allows 50 ms of slack).
    time.sleep(max(1.0 / per_tick_ticks, 0.0) + 0.05)
    stopped_at = client.get_state(sid).time.tick
    time.sleep(0.2)
    assert client.get_state(sid).time.tick == stopped_at
    assert 220 < stopped_at < 220 + 20_000
    # Consistent and usable: every car drove the same distance, and Steps go on.
    state = client.step(sid, 1, expected_tick=stopped_at)
    assert state.time.tick == stopped_at + 1
    xs = {round(v.x_m - 10.0 * ((v.vehicle_id - 1) % 200), 9) for v in state.vehicles}
    assert len(xs) == 1


def test_sigterm_stops_a_running_step_and_exits_within_3_s():
    with running_server(*FLAGS) as server:
        with pitlane.Client(server.address, timeout_s=60.0) as client:
            sid = big_session(client, 30_000)
            watched = client.create_session(clock_mode="realtime").session_id
            client.spawn_vehicle(watched)
            stream = client.stream_states(watched)
            next(stream)
            end = StreamEnd(stream)
            future = long_step(client, sid, 10_000)
            time.sleep(1.0)
            assert not future.done()
            t0 = time.monotonic()
            server.proc.send_signal(signal.SIGTERM)
            assert server.proc.wait(timeout=5.0) == 0
            took = time.monotonic() - t0
            assert took < 3.0, f"exit took {took:.2f} s"
            assert end.wait() == grpc.StatusCode.UNAVAILABLE
            with pytest.raises(grpc.RpcError) as info:
                future.result()
            assert info.value.code() == grpc.StatusCode.UNAVAILABLE
