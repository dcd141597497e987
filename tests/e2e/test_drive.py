"""Drive: remote controllers through the real server, in every clock mode.

Covers the control-tagging rules (late, stale, duplicate, future), one controller
per vehicle, BARRIER with a fast and a slow controller, a controller that
disconnects (brake to a stop, or hold), and the ends of a stream (vehicle removed,
session deleted).
"""

import re
import threading
import time

import grpc
import pytest

import pitlane
from conftest import assert_rpc_error


def test_lockstep_controller_sees_every_tick_and_controls_apply_next_tick(client, new_session):
    sid = new_session()
    car = client.spawn_vehicle(sid)
    with client.drive(sid, car) as driver:
        first = driver.observe()
        assert first.time.tick == 0 and first.vehicle.vehicle_id == car
        driver.send(0, acceleration_mps2=2.0)
        # Controls and Step travel on different calls: give the control time to arrive (a
        # BARRIER session waits for it instead; see the barrier tests).
        time.sleep(0.2)
        client.step(sid, 1)
        obs = driver.observe()
        assert obs.time.tick == 1
        assert obs.vehicle.speed_mps == pytest.approx(2.0 * 0.02)  # Applied at tick 1.
        client.step(sid, 3)
        # Three ticks in one Step come faster than a write: the controller gets the newest
        # observation and a count of those it skipped (latest wins), never a backlog.
        seen, skipped = [], 0
        while not seen or seen[-1] < 4:
            later = driver.observe()
            seen.append(later.time.tick)
            skipped += later.skipped_observations
        assert seen[-1] == 4 and len(seen) + skipped == 3
        assert (obs.late_controls, obs.stale_controls) == (0, 0)


def test_late_stale_duplicate_and_future_controls(client, new_session):
    sid = new_session()
    car = client.spawn_vehicle(sid)
    with client.drive(sid, car) as driver:
        driver.observe()
        client.step(sid, 2)
        # Up to tick 2 (tick 1's observation may be skipped: latest wins).
        while driver.observe().time.tick < 2:
            pass
        driver.send(1, acceleration_mps2=1.0)   # Late: answers tick 1, applied.
        driver.send(0, acceleration_mps2=-3.0)  # Stale: older than tick 1, dropped.
        driver.send(2, acceleration_mps2=2.0)   # On time.
        driver.send(2, acceleration_mps2=0.5)   # Duplicate: replaces the previous.
        time.sleep(0.2)
        client.step(sid, 1)
        obs = driver.observe()
        assert obs.late_controls == 1 and obs.stale_controls == 1
        assert obs.vehicle.acceleration_mps2 == pytest.approx(0.5)
        driver.send(99, acceleration_mps2=1.0)  # A tick not yet observed.
        with pytest.raises(grpc.RpcError) as info:
            while True:
                driver.observe()
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "control.tick" in info.value.details()


def test_a_bad_control_ends_the_stream_naming_the_field(client, new_session):
    sid = new_session()
    car = client.spawn_vehicle(sid)
    with client.drive(sid, car) as driver:
        driver.observe()
        driver.send(0, throttle=0.5)  # A kinematic bicycle takes no throttle.
        with pytest.raises(grpc.RpcError) as info:
            while True:
                driver.observe()
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "control.control.throttle" in info.value.details()


def test_one_controller_per_vehicle_and_setcontrols_is_refused(client, new_session):
    sid = new_session()
    car = client.spawn_vehicle(sid)
    with client.drive(sid, car) as driver:
        driver.observe()
        second = client.drive(sid, car)
        with pytest.raises(grpc.RpcError) as info:
            second.observe()
        assert info.value.code() == grpc.StatusCode.ALREADY_EXISTS
        second.close()
        assert_rpc_error(lambda: client.set_controls(sid, {car: (1.0, 0.0)}),
                         grpc.StatusCode.FAILED_PRECONDITION, "controls[0].vehicle_id",
                         "Drive")
    # Detached: SetControls works again.
    time.sleep(0.1)
    client.set_controls(sid, {car: (1.0, 0.0)})


@pytest.mark.parametrize("attach,code,text", [
    ({"session_id": "s-404", "vehicle_id": 1}, grpc.StatusCode.NOT_FOUND, "attach.session_id"),
    ({"vehicle_id": 77}, grpc.StatusCode.NOT_FOUND, "attach.vehicle_id"),
])
def test_attach_errors(client, new_session, attach, code, text):
    sid = new_session()
    client.spawn_vehicle(sid)
    driver = client.drive(attach.get("session_id", sid), attach["vehicle_id"])
    with pytest.raises(grpc.RpcError) as info:
        driver.observe()
    assert info.value.code() == code and text in info.value.details()
    driver.close()


def test_barrier_waits_for_the_slow_controller_then_times_out_without_it(client, new_session):
    """Two controllers: A answers at once, B after 30 ms. Ticks follow B's pace with no
    timeouts. Then B stops answering (still attached): each tick waits the 0.2 s
    timeout and A still gets every observation."""
    sid = new_session(clock_mode="barrier", barrier_timeout_s=0.2)
    a, b = client.spawn_vehicles(sid, [pitlane.vehicle_spec(), pitlane.vehicle_spec(y_m=5.0)])
    stop_b = threading.Event()
    b_answers = []

    def run_b(driver):
        while True:
            try:
                obs = driver.observe(timeout_s=5.0)
            except Exception:  # pylint: disable=broad-except
                return
            if stop_b.is_set():
                continue  # Reads, but no longer answers.
            time.sleep(0.03)
            driver.send(obs.time.tick)
            b_answers.append(obs.time.tick)

    with client.drive(sid, a) as driver_a, client.drive(sid, b) as driver_b:
        thread = threading.Thread(target=run_b, args=(driver_b,))
        thread.start()
        ticks = []
        t0 = time.monotonic()
        while len(ticks) < 20:
            obs = driver_a.observe()
            ticks.append(obs.time.tick)
            driver_a.send(obs.time.tick)
        elapsed = time.monotonic() - t0
        assert ticks == list(range(ticks[0], ticks[0] + 20))
        assert 19 * 0.03 <= elapsed < 19 * 0.2  # B's pace: slower than A, no timeouts.
        assert client.get_session(sid).clock_stats.barrier_timeouts == 0
        stop_b.set()
        time.sleep(0.1)
        k0 = client.get_state(sid).time.tick
        t0 = time.monotonic()
        for _ in range(5):
            obs = driver_a.observe()
            driver_a.send(obs.time.tick)
        while client.get_state(sid).time.tick < k0 + 5:
            time.sleep(0.01)
        elapsed = time.monotonic() - t0
        assert elapsed >= 4 * 0.2 * 0.9  # Each tick waited for the timeout.
        assert client.get_session(sid).clock_stats.barrier_timeouts >= 4
    thread.join(timeout=10.0)


def test_barrier_without_controllers_stands_still(client, new_session):
    sid = new_session(clock_mode="barrier")
    client.spawn_vehicle(sid)
    time.sleep(0.2)
    assert client.get_state(sid).time.tick == 0
    assert_rpc_error(lambda: client.step(sid, 1), grpc.StatusCode.FAILED_PRECONDITION,
                     "clock_mode")


@pytest.mark.parametrize("on_disconnect", ["brake", "hold"])
def test_a_controller_that_disconnects_brakes_or_holds(client, new_session, on_disconnect):
    sid = new_session(clock_mode="realtime", tick_rate_hz=100.0)
    car = client.spawn_vehicle(sid, speed_mps=10.0)
    driver = client.drive(sid, car, on_disconnect=on_disconnect)
    obs = driver.observe()
    driver.send(obs.time.tick, acceleration_mps2=0.0)
    time.sleep(0.1)
    driver.close()
    # 10 m/s at 8 m/s² stops in 1.25 s of sim time: wait up to 2 s of sim time for it.
    start = client.get_state(sid).time.tick
    state = client.get_state(sid)
    while state.time.tick < start + 200 and state.vehicles[0].speed_mps != 0.0:
        time.sleep(0.05)
        state = client.get_state(sid)
    speed = state.vehicles[0].speed_mps
    if on_disconnect == "brake":
        assert speed == 0.0  # Stopped exactly, not reversing.
        time.sleep(0.2)
        assert client.get_state(sid).vehicles[0].speed_mps == 0.0
    else:
        assert speed == pytest.approx(10.0)
    client.set_clock(sid, paused=True)


def test_removing_the_vehicle_ends_its_stream_with_not_found(client, new_session):
    sid = new_session()
    car = client.spawn_vehicle(sid)
    with client.drive(sid, car) as driver:
        driver.observe()
        client.remove_vehicle(sid, car)
        client.step(sid, 1)
        with pytest.raises(grpc.RpcError) as info:
            driver.observe()
        assert info.value.code() == grpc.StatusCode.NOT_FOUND
        assert "removed" in info.value.details()


# "<field path>: <reason>", e.g. "vehicle_id: vehicle 3 was removed".
_FIELD_PATH_AND_REASON = re.compile(r"^[a-z_]+(\[\d+\])?(\.[a-z_]+(\[\d+\])?)*: \S")


def test_controls_racing_a_reset_end_the_stream_naming_vehicle_id(client, new_session):
    """A controller sending controls as fast as it can while the session is reset: its
    stream ends with NOT_FOUND naming vehicle_id, whether the reset or a control found the
    controller gone first (it once ended "control.control.the controller was detached")."""
    sid = new_session()
    for _ in range(10):
        car = client.spawn_vehicle(sid)
        driver = client.drive(sid, car)
        tick = driver.observe().time.tick
        stop = threading.Event()

        def flood():
            while not stop.is_set():
                driver.send(tick, acceleration_mps2=1.0)
                time.sleep(0.0002)

        sender = threading.Thread(target=flood)
        sender.start()
        time.sleep(0.02)
        client.reset_session(sid)
        with pytest.raises(grpc.RpcError) as info:
            while True:
                driver.observe()
        stop.set()
        sender.join()
        driver.close()
        details = info.value.details()
        assert info.value.code() == grpc.StatusCode.NOT_FOUND, details
        assert _FIELD_PATH_AND_REASON.match(details), details
        assert details.startswith("vehicle_id: "), details


def test_deleting_the_session_ends_its_streams(client):
    sid = client.create_session(clock_mode="realtime").session_id
    car = client.spawn_vehicle(sid)
    driver = client.drive(sid, car)
    driver.observe()
    client.delete_session(sid)
    with pytest.raises(EOFError):
        while True:
            driver.observe(timeout_s=5.0)
    driver.close()
