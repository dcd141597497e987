"""StreamStates: decimation, skipping accounting, cancellation, end on delete."""

import threading

import grpc
import pitlane
import pytest


def _step_in_background(address, session_id, steps, ticks_per_step=1):
    """Steps the session from another thread and channel; returns (thread, errors)."""
    errors = []

    def run():
        try:
            with pitlane.Client(address, timeout_s=10.0) as stepper:
                for _ in range(steps):
                    stepper.step(session_id, ticks_per_step)
        except Exception as err:  # pylint: disable=broad-except
            errors.append(err)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, errors


def _assert_accounts_for_every_frame(messages, every_n, last_tick):
    """Ticks are increasing multiples of every_n; received + skipped == published."""
    ticks = [m.state.time.tick for m in messages]
    assert ticks[0] == 0 and messages[0].skipped_frames == 0
    assert ticks[-1] == last_tick
    assert all(t % every_n == 0 for t in ticks), ticks
    assert all(a < b for a, b in zip(ticks, ticks[1:])), ticks
    for prev, msg in zip(messages, messages[1:]):
        gap = (msg.state.time.tick - prev.state.time.tick) // every_n
        assert msg.skipped_frames == gap - 1, (prev.state.time, msg.state.time)
    published = last_tick // every_n
    assert sum(1 + m.skipped_frames for m in messages[1:]) == published


def test_stream_every_5_ticks_then_end_on_delete(client, address, session_id):
    car = client.spawn_vehicle(session_id, speed_mps=2.0)
    client.set_controls(session_id, {car: (0.5, 0.2)})
    stream = client.stream_states(session_id, every_n_ticks=5, timeout_s=20.0)
    messages = [next(stream)]  # The current state: the subscription is live.
    assert messages[0].state == client.get_state(session_id)

    thread, errors = _step_in_background(address, session_id, steps=20)
    for msg in stream:
        messages.append(msg)
        if msg.state.time.tick == 20:
            break
    thread.join()
    assert not errors

    _assert_accounts_for_every_frame(messages, every_n=5, last_tick=20)
    if not any(m.skipped_frames for m in messages):  # The usual case: a fast reader.
        assert [m.state.time.tick for m in messages] == [0, 5, 10, 15, 20]
    assert messages[-1].state == client.get_state(session_id)

    client.delete_session(session_id)
    assert list(stream) == []  # Ends normally: status OK.
    assert stream.code() == grpc.StatusCode.OK


def test_slow_reader_skips_but_gets_the_latest(client, session_id):
    client.spawn_vehicles(session_id, [pitlane.vehicle_spec(speed_mps=1.0)] * 20)
    stream = client.stream_states(session_id, timeout_s=20.0)  # Every tick.
    messages = [next(stream)]
    # The session runs 1000 ticks while nobody reads: it must not wait for us.
    assert client.step(session_id, 1000).time.tick == 1000
    for msg in stream:
        messages.append(msg)
        if msg.state.time.tick == 1000:
            break
    _assert_accounts_for_every_frame(messages, every_n=1, last_tick=1000)
    assert messages[-1].state == client.get_state(session_id)
    client.delete_session(session_id)
    assert list(stream) == []


def test_two_subscribers_and_cancel(client, address, session_id):
    first = client.stream_states(session_id, every_n_ticks=2, timeout_s=20.0)
    second = client.stream_states(session_id, every_n_ticks=3, timeout_s=20.0)
    assert next(first).state.time.tick == next(second).state.time.tick == 0
    client.step(session_id, 6)
    assert next(second).state.time.tick in (3, 6)
    second.cancel()
    with pytest.raises(grpc.RpcError) as info:
        next(second)
    assert info.value.code() == grpc.StatusCode.CANCELLED

    ticks = []
    thread, errors = _step_in_background(address, session_id, steps=3, ticks_per_step=2)
    for msg in first:
        ticks.append(msg.state.time.tick)
        if msg.state.time.tick == 12:
            break
    thread.join()
    assert not errors
    assert ticks[-1] == 12 and all(t % 2 == 0 for t in ticks)
    client.delete_session(session_id)
    assert list(first) == []


def test_stream_ends_when_session_deleted_while_waiting(client, address):
    sid = client.create_session().session_id
    stream = client.stream_states(sid, timeout_s=20.0)
    assert next(stream).state.time.tick == 0
    with pitlane.Client(address) as other:
        other.delete_session(sid)
    assert list(stream) == []
    assert stream.code() == grpc.StatusCode.OK
