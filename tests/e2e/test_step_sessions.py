"""StepSessions (issue 16): many sessions' controls and Steps in one call, against the real
server; and the vector environment built on it."""

import grpc
import numpy as np
import pytest

import pitlane
from pitlane import envs
from conftest import assert_rpc_error, running_token_server


def lockstep(client, name, cars=1, seed=0):
    sid = client.create_session(name=name, seed=seed).session_id
    ids = [client.spawn_vehicle(sid, x_m=10.0 * i, speed_mps=1.0) for i in range(cars)]
    return sid, ids


def test_one_call_equals_set_controls_and_step_per_session(client):
    batch = [lockstep(client, f"b{i}", cars=2) for i in range(3)]
    alone = [lockstep(client, f"a{i}", cars=2) for i in range(3)]
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


def test_the_vector_env_equals_its_envs_stepped_one_by_one(address):
    k = 4
    actions = np.random.default_rng(9).uniform([-6.0, -0.6], [3.0, 0.6], size=(25, k, 2))
    vector = envs.VectorDrivingEnv(k, address, max_episode_steps=10)
    singles = [envs.DrivingEnv(address, max_episode_steps=10) for _ in range(k)]
    try:
        observations, _ = vector.reset(seed=100)
        assert observations.shape == (k, 16) and vector.observation_space.shape == (k, 16)
        alone = [env.reset(seed=100 + i)[0] for i, env in enumerate(singles)]
        np.testing.assert_array_equal(observations, np.stack(alone))
        for step in range(25):
            observations, rewards, terminated, truncated, infos = vector.step(actions[step])
            for i, env in enumerate(singles):
                obs, reward, term, trunc, _ = env.step(actions[step][i])
                if term or trunc:  # The vector env resets at once; so does this loop.
                    np.testing.assert_array_equal(infos["final_observation"][i], obs)
                    obs, _ = env.reset()
                np.testing.assert_array_equal(observations[i], obs)
                assert (rewards[i], terminated[i], truncated[i]) == (reward, term, trunc)
        # Ten steps an episode: steps 10 and 20 truncated every env.
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
