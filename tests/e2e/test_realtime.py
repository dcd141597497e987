"""The REALTIME clock through the real server: pacing, pause and resume, the
real-time factor, Step's rule, and subscribers that read at different speeds.

Wall-clock waits here are the point of the test (the server's pacing is what is
measured); the unit tests in server/session/scheduler_test.cc cover the same
rules on a fake clock without sleeping.
"""

import threading
import time

import grpc
import pytest

import pitlane
from conftest import assert_rpc_error, running_server


def tick(client, sid):
    return client.get_state(sid).time.tick


def timed_tick(client, sid):
    """(wall time before the call, the session's tick, wall time after the call)."""
    before = time.monotonic()
    k = tick(client, sid)
    return before, k, time.monotonic()


def assert_paced(start, end, rate_hz, slack_ticks):
    """The ticks between two timed_tick readings match rate_hz x the wall time between them:
    the call durations bracket the window, plus `slack_ticks` for pacing jitter."""
    before0, k0, after0 = start
    before1, k1, after1 = end
    shortest, longest = (before1 - after0) * rate_hz, (after1 - before0) * rate_hz
    assert shortest - slack_ticks <= k1 - k0 <= longest + slack_ticks, (
        f"{k1 - k0} ticks in {before1 - after0:.3f}..{after1 - before0:.3f} s at {rate_hz} Hz")


def test_a_50hz_session_makes_250_ticks_in_5_seconds(client, new_session):
    sid = new_session(clock_mode="realtime", tick_rate_hz=50.0)
    client.spawn_vehicles(sid, [pitlane.vehicle_spec(y_m=4.0 * i, speed_mps=5.0)
                                for i in range(10)])
    start = timed_tick(client, sid)
    time.sleep(5.0)
    end = timed_tick(client, sid)
    k1 = end[1]
    # 250 +- 3 ticks in 5 s (the window bracketed by the two GetState calls).
    assert_paced(start, end, 50.0, 3)
    stats = client.get_session(sid).clock_stats
    assert stats.paced_ticks >= k1
    assert stats.missed_deadlines <= stats.paced_ticks // 100  # < 1 %.


def test_pause_stops_time_step_single_steps_and_resume_paces_again(client, new_session):
    sid = new_session(clock_mode="realtime", tick_rate_hz=100.0)
    assert_rpc_error(lambda: client.step(sid, 1), grpc.StatusCode.FAILED_PRECONDITION,
                     "clock_mode", "REALTIME")
    response = client.set_clock(sid, paused=True)
    assert response.paused and response.clock_mode == pitlane.pb.CLOCK_MODE_REALTIME
    k0 = tick(client, sid)
    time.sleep(0.3)
    assert tick(client, sid) == k0
    assert client.step(sid, 3).time.tick == k0 + 3
    client.set_clock(sid, paused=False)
    time.sleep(0.3)
    assert tick(client, sid) >= k0 + 3 + 20  # 30 at 100 Hz; generous for a busy machine.
    config = client.get_session(sid).config
    assert config.clock_mode == pitlane.pb.CLOCK_MODE_REALTIME and not config.paused


def test_real_time_factor_scales_the_rate_and_zero_runs_flat_out(client, new_session):
    sid = new_session(clock_mode="realtime", tick_rate_hz=50.0, real_time_factor=4.0)
    start = timed_tick(client, sid)
    time.sleep(1.0)
    end = timed_tick(client, sid)
    k1 = end[1]
    assert_paced(start, end, 200.0, 6)
    client.set_clock(sid, real_time_factor=0.0)
    time.sleep(0.5)
    assert tick(client, sid) - k1 > 1000  # Far faster than real time (one car: ~µs a tick).


def test_switching_to_lockstep_stops_the_clock(client, new_session):
    sid = new_session(clock_mode="realtime", tick_rate_hz=100.0)
    time.sleep(0.1)
    client.set_clock(sid, clock_mode="lockstep")
    k0 = tick(client, sid)
    time.sleep(0.2)
    assert tick(client, sid) == k0
    assert client.step(sid, 1).time.tick == k0 + 1


def test_bad_clock_changes_are_rejected(client, new_session):
    sid = new_session()
    assert_rpc_error(lambda: client.set_clock(sid, real_time_factor=-1.0),
                     grpc.StatusCode.INVALID_ARGUMENT, "real_time_factor")
    assert_rpc_error(lambda: client.set_clock(sid, real_time_factor=2000.0),
                     grpc.StatusCode.INVALID_ARGUMENT, "real_time_factor")
    assert_rpc_error(lambda: client.set_clock("s-404", paused=True),
                     grpc.StatusCode.NOT_FOUND, "session_id")
    assert_rpc_error(lambda: client.create_session(clock_mode="realtime", real_time_factor=-2.0),
                     grpc.StatusCode.INVALID_ARGUMENT, "real_time_factor")
    assert client.get_session(sid).config.clock_mode == pitlane.pb.CLOCK_MODE_LOCKSTEP


# The real-time factor is 0 (flat out) or in [1e-6, 1000]. 1e-12 used to be accepted: its
# tick period, dt / factor, overflowed the deadline arithmetic and the clock ran flat out
# (millions of ticks a second) instead of standing still.
TOO_SMALL_FACTORS = [1e-12, 5e-7, 5e-324]


@pytest.mark.parametrize("factor", TOO_SMALL_FACTORS)
def test_factors_below_the_floor_are_refused_naming_the_rule(client, new_session, factor):
    rule = "real_time_factor: must be 0 (as fast as possible) or in [1e-06, 1000], got "
    assert_rpc_error(lambda: client.create_session(clock_mode="realtime",
                                                   real_time_factor=factor),
                     grpc.StatusCode.INVALID_ARGUMENT, "config." + rule)
    sid = new_session(clock_mode="realtime", tick_rate_hz=50.0)
    assert_rpc_error(lambda: client.set_clock(sid, real_time_factor=factor),
                     grpc.StatusCode.INVALID_ARGUMENT, rule)
    assert client.get_session(sid).config.real_time_factor == 1.0  # Unchanged.


def test_the_smallest_factor_stands_practically_still(client, new_session):
    # 50 Hz x 1e-6: one tick every 20,000 s.
    sid = new_session(clock_mode="realtime", tick_rate_hz=50.0, real_time_factor=1e-6)
    running = new_session(clock_mode="realtime", tick_rate_hz=50.0)
    time.sleep(0.2)
    client.set_clock(running, real_time_factor=1e-6)  # Slowed down live, from a running clock.
    k0 = tick(client, running)
    time.sleep(1.0)
    assert tick(client, sid) == 0
    assert tick(client, running) - k0 <= 1  # A tick due as the change came may still run.
    info = client.get_session(sid)
    assert info.config.real_time_factor == 1e-6
    assert info.clock_stats.paced_ticks == 0


@pytest.fixture(scope="module")
def big_client():
    """A client of a server of its own, whose sessions may hold 1,000 vehicles."""
    with running_server("--max_vehicles_per_session=1000") as server, \
            pitlane.Client(server.address, timeout_s=10.0) as c:
        yield c


def test_a_stalled_subscriber_neither_slows_the_clock_nor_starves_another(big_client):
    """One subscriber stops reading for 3 s; the other still gets every frame, in
    order, and the clock keeps its rate. The stalled one then sees what it missed.
    1,000 cars make a frame of about 45 kB, so 3 s of frames (7 MB) overflow what gRPC's
    flow-control windows buffer for the stalled reader."""
    client = big_client
    sid = client.create_session(clock_mode="realtime", tick_rate_hz=50.0).session_id
    client.spawn_vehicles(sid, [pitlane.vehicle_spec(x_m=10.0 * (i % 50), y_m=4.0 * (i // 50),
                                                     speed_mps=5.0)
                                for i in range(1000)])
    reader = client.stream_states(sid)
    stalled = client.stream_states(sid)
    first_stalled = next(stalled)  # Then never read again for a while.
    ticks, skipped = [], []

    def read():
        for message in reader:
            ticks.append(message.state.time.tick)
            skipped.append(message.skipped_frames)
            if len(ticks) >= 160:
                return

    thread = threading.Thread(target=read)
    start = timed_tick(client, sid)
    thread.start()
    thread.join(timeout=10.0)
    end = timed_tick(client, sid)
    k1 = end[1]
    reader.cancel()
    assert len(ticks) >= 160
    assert ticks == list(range(ticks[0], ticks[0] + len(ticks)))  # Every frame, in order.
    assert sum(skipped) == 0
    assert_paced(start, end, 50.0, 3)
    # The stalled stream: after what flow control had let through, it jumps to the latest
    # frames, and says how many it skipped.
    total_skipped, last = 0, first_stalled.state.time.tick
    for message in stalled:
        assert message.state.time.tick > last
        last = message.state.time.tick
        total_skipped += message.skipped_frames
        if last >= k1:
            break
    assert total_skipped > 0
    stalled.cancel()
    client.delete_session(sid)


def test_a_vehicle_filter_sends_only_those_vehicles_and_their_contacts(client, new_session):
    sid = new_session(collision_policy="report")
    # Cars 1 and 2 overlap (a contact); car 3 stands alone far away.
    a, b, c = client.spawn_vehicles(sid, [pitlane.vehicle_spec(),
                                          pitlane.vehicle_spec(x_m=1.0),
                                          pitlane.vehicle_spec(x_m=100.0)])
    only_c = client.stream_states(sid, vehicle_ids=[c])
    only_b = client.stream_states(sid, vehicle_ids=[b, b, 999])
    client.step(sid, 2)
    # Read until the last tick (frames written while another is in flight are skipped).
    tick = -1
    while tick < 2:
        message = next(only_c)
        tick = message.state.time.tick
        assert [v.vehicle_id for v in message.state.vehicles] == [c]
        assert list(message.state.contacts) == [] and list(message.events) == []
    saw_contact, tick = False, -1
    while tick < 2:
        message = next(only_b)
        tick = message.state.time.tick
        assert [v.vehicle_id for v in message.state.vehicles] == [b]
        for contact in message.state.contacts:
            assert b in (contact.pair.vehicle_id, contact.pair.other_id)
            saw_contact = True
        for event in message.events:
            assert b in (event.contact.pair.vehicle_id, event.contact.pair.other_id)
    assert saw_contact
    only_c.cancel()
    only_b.cancel()


def test_max_rate_thins_a_stream_without_counting_skips(client, new_session):
    sid = new_session(clock_mode="realtime", tick_rate_hz=100.0)
    stream = client.stream_states(sid, max_rate_hz=10.0)
    next(stream)
    t0, count, skipped = time.monotonic(), 0, 0
    while time.monotonic() - t0 < 1.0:
        skipped += next(stream).skipped_frames
        count += 1
    stream.cancel()
    assert 8 <= count <= 12  # 10 per second of 100 frames per second.
    assert skipped == 0


@pytest.mark.parametrize("kwargs,field", [
    ({"every_n_ticks": 0}, "every_n_ticks"),
    ({"max_rate_hz": 0.0}, "max_rate_hz"),
    ({"max_rate_hz": float("nan")}, "max_rate_hz"),
])
def test_bad_stream_options_are_rejected(client, session_id, kwargs, field):
    stream = client.stream_states(session_id, **kwargs)
    with pytest.raises(grpc.RpcError) as info:
        next(stream)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field in info.value.details()
