"""StepSessions (issue 16): many sessions' controls and Steps in one call, against the real
server; and the vector environment built on it."""

import math

import grpc
import numpy as np
import pytest

import pitlane
from pitlane import envs
from conftest import assert_rpc_error, running_server, running_token_server


def lockstep(client, name, cars=1, seed=0):
    sid = client.create_session(name=name, seed=seed).session_id
    ids = [client.spawn_vehicle(sid, x_m=10.0 * i, speed_mps=1.0) for i in range(cars)]
    return sid, ids


# From 16 sessions on, the server runs half of a call's Steps on its workers while the thread
# that received the call runs the other half: the results must not tell.
@pytest.mark.parametrize("count", [3, 20])
def test_one_call_equals_set_controls_and_step_per_session(client, count):
    batch = [lockstep(client, f"b{i}", cars=2) for i in range(count)]
    alone = [lockstep(client, f"a{i}", cars=2) for i in range(count)]
    controls = [{ids[0]: (1.0 + i, 0.1 * i), ids[1]: (-0.5, 0.0)} for i, (_, ids) in
                enumerate(batch)]
    results = client.step_sessions([
        {"session_id": sid, "ticks": 5 + i, "controls": controls[i]}
        for i, (sid, _) in enumerate(batch)])
    assert [r.session_id for r in results] == [sid for sid, _ in batch]
    for i, ((sid, ids), (twin, twin_ids), result) in enumerate(zip(batch, alone, results)):
        assert result.code == 0 and result.state.time.tick == 5 + i
        client.set_controls(twin, {twin_ids[0]: (1.0 + i, 0.1 * i), twin_ids[1]: (-0.5, 0.0)})
        assert client.step(twin, ticks=5 + i) .time.tick == 5 + i
        assert client.state_hash(sid) == client.state_hash(twin)
    # Only the vehicles asked for.
    sid, ids = batch[0]
    only = client.step_sessions([{"session_id": sid, "vehicle_ids": [ids[1]]}])[0]
    assert [v.vehicle_id for v in only.state.vehicles] == [ids[1]]
    for sid, _ in batch + alone:
        client.delete_session(sid)


def test_one_session_failing_leaves_the_others_stepping(client):
    good, (car,) = lockstep(client, "good")
    paced = client.create_session(name="paced", clock_mode="realtime").session_id
    refused, (other,) = lockstep(client, "refused")
    results = client.step_sessions([
        {"session_id": good, "ticks": 3},
        {"session_id": paced, "ticks": 3},
        # A kinematic bicycle has no pedals: its controls are refused, and it is not stepped.
        {"session_id": refused, "ticks": 3, "controls": [pitlane.control(other, throttle=0.5)]},
    ])
    assert results[0].code == 0 and results[0].state.time.tick == 3
    assert results[1].code == grpc.StatusCode.FAILED_PRECONDITION.value[0], results[1]
    assert results[2].code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert "controls" in results[2].message and not results[2].HasField("state")
    assert client.get_state(refused).time.tick == 0
    for sid in (good, paced, refused):
        client.delete_session(sid)
    assert car


def test_a_bad_call_changes_nothing(client):
    sid, (car,) = lockstep(client, "whole")
    cases = [
        ([], grpc.StatusCode.INVALID_ARGUMENT, "steps: 1 to 1024 sessions, got 0"),
        ([{"session_id": sid}, {"session_id": sid}], grpc.StatusCode.INVALID_ARGUMENT,
         f'steps[1].session_id: session "{sid}" is named twice'),
        ([{"session_id": sid}, {"session_id": "s-" + "a" * 26}], grpc.StatusCode.NOT_FOUND,
         "steps[1].session_id"),
        ([{"session_id": sid}] * 1 + [{"session_id": f"x{i}"} for i in range(1024)],
         grpc.StatusCode.INVALID_ARGUMENT, "steps: 1 to 1024 sessions, got 1025"),
    ]
    for steps, code, message in cases:
        assert_rpc_error(lambda: client.step_sessions(
            [dict(s, controls=[pitlane.control(car, acceleration_mps2=1.0)]) for s in steps]),
            code, message)
    state = client.get_state(sid)
    assert state.time.tick == 0 and state.vehicles[0].acceleration_mps2 == 0.0
    with pytest.raises(ValueError):
        client.step_sessions([{"session_id": sid, "tick": 3}])
    client.delete_session(sid)


def test_a_viewer_may_not_step(tmp_path):
    with running_token_server(tmp_path) as (server, token, _):
        with pitlane.Client(server.address, token=token) as admin:
            sid = admin.create_session(name="owned").session_id
            viewer, _ = admin.mint_token(sid, "viewer")
            with admin.with_token(viewer) as watcher:
                assert_rpc_error(lambda: watcher.step_sessions([{"session_id": sid}]),
                                 grpc.StatusCode.PERMISSION_DENIED, "steps[0]")
            assert admin.step_sessions([{"session_id": sid, "ticks": 2}])[0].state.time.tick == 2


def _speed_reward(previous, vehicle, info):
    """A reward of the caller's: the speed, less a point for a crash (info from the step)."""
    assert info["vehicle_id"] == vehicle.vehicle_id and previous.vehicle_id == vehicle.vehicle_id
    return vehicle.speed_mps - (1.0 if info["crashed"] else 0.0)


@pytest.mark.parametrize("options", [
    {},  # The default reward, nine range beams.
    # The caller's reward, no beams, a goal (2 m around a point 3 m ahead).
    {"reward_fn": _speed_reward, "range_beams": 0, "goal": (3.0, 0.0, 2.0)},
], ids=["default", "reward_fn_goal"])
def test_the_vector_env_equals_its_envs_stepped_one_by_one(address, options):
    k = 4
    actions = np.random.default_rng(9).uniform([-6.0, -0.6], [3.0, 0.6], size=(25, k, 2))
    vector = envs.VectorDrivingEnv(k, address, max_episode_steps=10, **options)
    singles = [envs.DrivingEnv(address, max_episode_steps=10, **options) for _ in range(k)]
    dim = 7 + (0 if "range_beams" in options else 9)
    try:
        observations, infos = vector.reset(seed=100)
        assert observations.shape == (k, dim) and vector.observation_space.shape == (k, dim)
        alone = [env.reset(seed=100 + i) for i, env in enumerate(singles)]
        np.testing.assert_array_equal(observations, np.stack([obs for obs, _ in alone]))
        # The session and car ids are the vector env's own; the rest of an info is the same.
        assert list(infos["session_id"]) == [env.session_id for env in vector.envs]
        same = ("tick", "crashed", "goal_reached")
        ended = 0
        for step in range(25):
            observations, rewards, terminated, truncated, infos = vector.step(actions[step])
            for i, env in enumerate(singles):
                obs, reward, term, trunc, info = env.step(actions[step][i])
                assert (rewards[i], terminated[i], truncated[i]) == (reward, term, trunc)
                if term or trunc:  # The vector env resets at once; so does this loop.
                    ended += 1
                    np.testing.assert_array_equal(infos["final_observation"][i], obs)
                    assert {key: infos["final_info"][i][key] for key in same} == \
                        {key: info[key] for key in same}
                    obs, info = env.reset()
                np.testing.assert_array_equal(observations[i], obs)
                assert {key: infos[key][i] for key in same} == {key: info[key] for key in same}
                assert (infos["session_id"][i], infos["vehicle_id"][i]) == \
                    (vector.envs[i].session_id, vector.envs[i].vehicle_id)
        # Ten steps an episode: steps 10 and 20 truncated every env, if nothing ended sooner.
        assert ended >= 2 * k
        assert infos["_final_observation"].dtype == bool
    finally:
        vector.close()
        for env in singles:
            env.close()


def test_ticks_out_of_range_refuse_the_call_and_a_paced_session_keeps_its_controls(client):
    sid, (car,) = lockstep(client, "ticks")
    for ticks in (0, 1001):
        assert_rpc_error(lambda: client.step_sessions([{"session_id": sid, "ticks": ticks}]),
                         grpc.StatusCode.INVALID_ARGUMENT, "steps[0].ticks: must be in [1, ")
    paced = client.create_session(name="paced", clock_mode="realtime", paused=False).session_id
    pcar = client.spawn_vehicle(paced)
    client.set_controls(paced, {pcar: (0.0, 0.0)})
    result = client.step_sessions([{"session_id": paced, "controls": {pcar: (2.0, 0.3)}}])[0]
    assert result.code == grpc.StatusCode.FAILED_PRECONDITION.value[0]
    # Its controls were never set: the car holds zero acceleration and steering.
    state = client.get_state(paced)
    assert state.vehicles[0].acceleration_mps2 == 0.0
    assert state.vehicles[0].steering_angle_rad == 0.0
    for s in (sid, paced):
        client.delete_session(s)
    assert car


def test_the_vector_env_with_an_admin_token(tmp_path):
    # Its step is sent as bytes made once, with the token's header added by the client.
    with running_token_server(tmp_path) as (server, token, _):
        vector = envs.VectorDrivingEnv(3, server.address, token=token, max_episode_steps=5)
        try:
            vector.reset(seed=1)
            for _ in range(6):
                _, _, _, truncated, infos = vector.step(np.zeros((3, 2)))
            assert list(infos["tick"]) == [5] * 3 and not truncated.any()
        finally:
            vector.close()
        with pitlane.Client(server.address) as anonymous:  # Refused without the token.
            assert_rpc_error(lambda: envs.VectorDrivingEnv(2, client=anonymous).reset(),
                             grpc.StatusCode.UNAUTHENTICATED, "")


def test_many_sessions_with_failures_in_both_halves(client):
    # 18 sessions: the first half runs on the receiving thread, the second on the workers;
    # a paced session in each half is refused in its own result, the others step.
    sessions = [lockstep(client, f"m{i}")[0] for i in range(18)]
    for i in (3, 14):
        client.delete_session(sessions[i])
        sessions[i] = client.create_session(name=f"paced{i}", clock_mode="realtime").session_id
    results = client.step_sessions([{"session_id": sid, "ticks": 2} for sid in sessions])
    for i, (sid, result) in enumerate(zip(sessions, results)):
        assert result.session_id == sid
        if i in (3, 14):
            assert result.code == grpc.StatusCode.FAILED_PRECONDITION.value[0], result
        else:
            assert result.code == 0 and result.state.time.tick == 2
    for sid in sessions:
        client.delete_session(sid)


def test_the_table_layout_has_the_numbers_of_the_states(client):
    # Twin sessions stepped alike: one answers with states, the other with the table.
    def world(name):
        sid = client.create_session(name=name, seed=4).session_id
        plain = client.spawn_vehicle(sid, x_m=0.0, speed_mps=3.0)
        scanned = client.spawn_vehicles(sid, [pitlane.vehicle_spec(
            x_m=20.0, speed_mps=2.0, range_scan={"beam_count": 5, "max_range_m": 15.0})])[0]
        return sid, plain, scanned

    twins = [(world(f"states{i}"), world(f"table{i}")) for i in range(2)]
    paced = client.create_session(name="paced", clock_mode="realtime").session_id
    steps = lambda which: [  # noqa: E731
        {"session_id": pair[which][0], "ticks": 7,
         "controls": {pair[which][1]: (1.5, 0.2), pair[which][2]: (-0.5, -0.1)}}
        for pair in twins]
    states = client.step_sessions(steps(0))
    results, rows = client.step_sessions(
        steps(1)[:1] + [{"session_id": paced}] + steps(1)[1:], table=True)
    assert [r.code for r in results] == [0, grpc.StatusCode.FAILED_PRECONDITION.value[0], 0]
    assert not any(r.HasField("state") for r in results)
    columns = pitlane.VEHICLE_TABLE_COLUMNS
    assert rows.shape == (4, len(columns) + 5)  # Two cars each in sessions 0 and 2.
    assert rows[:, 0].tolist() == [0, 0, 2, 2]
    for k, result in enumerate(states):
        for j, vehicle in enumerate(result.state.vehicles):
            row = rows[2 * k + j]
            table_id = twins[k][1][1 + j]
            assert row[columns.index("vehicle_id")] == table_id
            assert row[columns.index("tick")] == result.state.time.tick == 7
            for name in columns[3:11]:
                assert row[columns.index(name)] == getattr(vehicle, name), name
            assert row[columns.index("crashed")] == float(vehicle.crashed)
            ranges = list(vehicle.range_scan.ranges_m)
            expected = ranges + [math.nan] * (5 - len(ranges))  # NaN past its own beams.
            np.testing.assert_array_equal(row[len(columns):], expected)
    # Only the vehicles asked for; and a layout that does not exist is refused.
    sid, _, scanned = twins[0][1]
    _, only = client.step_sessions([{"session_id": sid, "vehicle_ids": [scanned]}], table=True)
    assert only[:, 1].tolist() == [scanned] and only.shape[1] == len(columns) + 5
    bad = pitlane.pb.StepSessionsRequest(layout=7)
    bad.steps.add(session_id=sid, ticks=1)
    assert_rpc_error(lambda: client.step_sessions(bad), grpc.StatusCode.INVALID_ARGUMENT,
                     "layout: STEP_RESULT_LAYOUT_STATES (1) or STEP_RESULT_LAYOUT_TABLE (2), "
                     "got 7")
    assert client.get_state(sid).time.tick == 8
    for pair in twins:
        for session in pair:
            client.delete_session(session[0])
    client.delete_session(paced)


def test_the_vector_env_reads_the_sessions_tick_and_refuses_a_step_it_cannot_make(address):
    vector = envs.VectorDrivingEnv(3, address, max_episode_steps=100, range_beams=0)
    try:
        vector.reset(seed=5)
        vector.step(np.zeros((3, 2)))
        # A Step from outside (the viewer, another client): the tick says so.
        vector.client.step(vector.envs[1].session_id, ticks=3)
        _, _, _, _, infos = vector.step(np.zeros((3, 2)))
        assert infos["tick"].tolist() == [10, 13, 10]
        # A car removed behind the env's back: the step raises, naming its session (whose
        # controls the server refused); the env keeps its own records as they were.
        gone = vector.envs[2]
        vector.client.remove_vehicle(gone.session_id, gone.vehicle_id)
        with pytest.raises(RuntimeError, match=f"session {gone.session_id}: controls"
                                               r"\[0\].vehicle_id: no vehicle"):
            vector.step(np.zeros((3, 2)))
        vector.reset(seed=5)  # A reset makes it whole again.
        assert vector.step(np.zeros((3, 2)))[4]["tick"].tolist() == [5, 5, 5]
    finally:
        vector.close()
    with pytest.raises(RuntimeError, match="call reset"):
        vector.step(np.zeros((3, 2)))


@pytest.mark.parametrize("case", ["one_env", "serialized_each_step"])
def test_the_vector_env_without_its_bytes_path(address, case, monkeypatch):
    # One env goes through step_sessions (the token rules of one session); markers not found
    # in the bytes make the env serialize its request each step. Both as the single env.
    k = 1 if case == "one_env" else 2
    if case == "serialized_each_step":
        monkeypatch.setattr(envs.VectorDrivingEnv, "_serialize_step",
                            lambda self, i: (b"", None))
    vector = envs.VectorDrivingEnv(k, address, max_episode_steps=4)
    singles = [envs.DrivingEnv(address, max_episode_steps=4) for _ in range(k)]
    try:
        vector.reset(seed=30)
        for i, env in enumerate(singles):
            env.reset(seed=30 + i)
        for step in range(6):
            action = np.full((k, 2), 0.1 * step)
            observations, rewards, _, truncated, _ = vector.step(action)
            for i, env in enumerate(singles):
                obs, reward, _, trunc, _ = env.step(action[i])
                if trunc:
                    obs, _ = env.reset()
                np.testing.assert_array_equal(observations[i], obs)
                assert (rewards[i], truncated[i]) == (reward, trunc)
    finally:
        vector.close()
        for env in singles:
            env.close()


def test_a_table_that_would_not_fit_refuses_a_session_not_the_call():
    # Each row is as wide as the widest range scan in the table: a car with 360 beams would
    # make 3,000 scanless cars' rows 372 doubles wide, 8.9 MB, past a 1 MiB response. The
    # session whose result comes in second (the big one runs on a worker, the small one at
    # once) is refused in its own result; the other keeps its rows; nothing is built to find
    # out (the size is counted as the results come in).
    with running_server("--max_send_message_mib=1") as server, \
            pitlane.Client(server.address) as client:
        many = client.create_session(name="many").session_id
        client.spawn_vehicles(many, [pitlane.vehicle_spec(x_m=10.0 * (i % 60),
                                                          y_m=10.0 * (i // 60))
                                     for i in range(3000)])
        wide = client.create_session(name="wide").session_id
        client.spawn_vehicles(wide, [pitlane.vehicle_spec(
            range_scan={"beam_count": 360, "max_range_m": 50.0})])
        results, rows = client.step_sessions(
            [{"session_id": many}, {"session_id": wide}], table=True)
        codes = [r.code for r in results]
        exhausted = grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]
        assert sorted(codes) == [0, exhausted], results
        refused = results[codes.index(exhausted)]
        assert "widest range scan" in refused.message
        width = len(pitlane.VEHICLE_TABLE_COLUMNS)
        expected = (3000, width) if codes[0] == 0 else (1, width + 360)
        assert rows.shape == expected
        for sid in (many, wide):  # Both stepped all the same.
            assert client.get_state(sid).time.tick == 1
