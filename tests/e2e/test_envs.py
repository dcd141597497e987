"""The Gymnasium-style environments' contract against the real server (issue 16): spaces,
reset and step, rewards from the physics, termination and truncation, determinism by seed,
rendering, and the multi-agent env. Gymnasium is not in Debian: its own checker runs only
where gymnasium is importable."""

import math

import grpc
import numpy as np
import pytest

import pitlane
from conftest import running_token_server
from pitlane import envs

TICK_S = 1.0 / 50.0


@pytest.fixture
def env(address):
    e = envs.DrivingEnv(address, start_noise=(0.0, 0.0, 0.0), ticks_per_step=5,
                        render_mode="rgb_array")
    yield e
    e.close()


def test_spaces_and_the_shape_of_every_answer(env):
    assert env.action_space.shape == (2,)
    np.testing.assert_allclose(env.action_space.low, [-6.0, -0.6])
    np.testing.assert_allclose(env.action_space.high, [3.0, 0.6])
    assert env.observation_space.shape == (7 + 9,)
    with pytest.raises(RuntimeError):
        env.step([0.0, 0.0])  # Before reset.
    obs, info = env.reset(seed=1)
    assert obs.dtype == np.float32 and env.observation_space.contains(obs)
    assert info["tick"] == 0 and info["viewer"].endswith(info["session_id"])
    rng = np.random.default_rng(7)
    for _ in range(30):
        action = rng.uniform(env.action_space.low, env.action_space.high)
        obs, reward, terminated, truncated, info = env.step(action)
        assert env.observation_space.contains(obs), obs
        assert isinstance(reward, float)
        assert isinstance(terminated, bool) and isinstance(truncated, bool)
        assert isinstance(info, dict)
        if terminated:
            break
    for bad in ([1.0], [math.nan, 0.0], "fast"):
        with pytest.raises(ValueError, match="action"):
            env.step(bad)


def test_constant_acceleration_matches_the_closed_form(env):
    """A kinematic bicycle, semi-implicit Euler: after N ticks at a, v = a N dt and
    x = a dt^2 N (N + 1) / 2; the default reward is the distance driven forward."""
    env.reset(seed=0)
    a = 2.0
    distance = 0.0
    for step in range(1, 11):
        obs, reward, *_ = env.step([a, 0.0])
        distance += reward
        n = 5 * step
        assert obs[0] == pytest.approx(a * n * TICK_S, rel=1e-6)  # speed_mps (float32)
        assert distance == pytest.approx(a * TICK_S**2 * n * (n + 1) / 2, rel=1e-9)
    # Heading +x without steering: cos(yaw) = 1, sin(yaw) = 0, no yaw rate.
    assert obs[1] == 0.0 and obs[3] == 1.0 and obs[4] == 0.0


def drive_until_terminated(e, action, steps):
    """Steps `action` until terminated (at most `steps`); the last step's answer."""
    for _ in range(steps):
        answer = e.step(action)
        if answer[2]:
            break
    return answer


def test_a_crash_terminates_with_the_penalty(address):
    e = envs.DrivingEnv(address, bounds=(-10.0, -10.0, 10.0, 10.0), start=(0.0, 0.0, 0.0),
                        start_noise=(0.0, 0.0, 0.0), crash_penalty=10.0)
    try:
        e.reset(seed=0)
        _, reward, terminated, truncated, info = drive_until_terminated(e, [3.0, 0.0], 100)
        assert terminated and info["crashed"] and not truncated
        assert reward < -9.0  # The penalty, less the metres of the last step.
    finally:
        e.close()


def test_the_goal_terminates_and_the_step_limit_truncates(address):
    e = envs.DrivingEnv(address, start_noise=(0.0, 0.0, 0.0), goal=(3.0, 0.0, 1.0),
                        max_episode_steps=50)
    try:
        e.reset(seed=0)
        _, _, terminated, truncated, info = drive_until_terminated(e, [3.0, 0.0], 50)
        assert terminated and info["goal_reached"] and not truncated
    finally:
        e.close()
    e = envs.DrivingEnv(address, max_episode_steps=3)
    try:
        e.reset(seed=0)
        outcomes = [e.step([0.0, 0.0])[2:4] for _ in range(3)]
        assert outcomes == [(False, False), (False, False), (False, True)]
    finally:
        e.close()


def test_the_same_seed_gives_the_same_episode(address):
    actions = np.random.default_rng(3).uniform([-6.0, -0.6], [3.0, 0.6], size=(40, 2))

    def episode(e, seed):
        observations = [e.reset(seed=seed)[0]]
        for action in actions:
            obs, _, terminated, _, _ = e.step(action)
            observations.append(obs)
            if terminated:
                break
        return np.stack(observations)

    a = envs.DrivingEnv(address)
    b = envs.DrivingEnv(address)
    try:
        first = episode(a, 11)
        np.testing.assert_array_equal(first, episode(b, 11))   # Another env, the same seed.
        np.testing.assert_array_equal(first, episode(a, 11))   # Again in the same env.
        assert not np.array_equal(first[0], episode(b, 12)[0])  # Another seed: another start.
    finally:
        a.close()
        b.close()


def test_an_env_steps_with_its_clients_tokens(tmp_path):
    # A team's client (the owner token of another session) makes an env: its steps (the action
    # written into the request's bytes) carry the token the client would use for the env's
    # session, and equal an admin's env step for step. When the token tried first is refused
    # (here the session's own owner token, revoked), the step is made again with the other
    # token, as the client's interceptors would: two calls, and the refused one changed nothing.
    with running_token_server(tmp_path) as (server, admin_token, _):
        with pitlane.Client(server.address, token=admin_token, timeout_s=10.0) as admin:
            team_token, _ = admin.owner_tokens[admin.create_session(name="team").session_id]
            with pitlane.Client(server.address, token=team_token, timeout_s=10.0) as team:
                # pylint: disable=protected-access
                sent = []  # The authorization header of each StepSessions call from bytes.
                send = team._step_sessions_serialized

                def counted(request, **kwargs):
                    sent.append(dict(kwargs["metadata"])["authorization"])
                    return send(request, **kwargs)

                team._step_sessions_serialized = counted
                e = envs.DrivingEnv(client=team, start_noise=(0.0, 0.0, 0.0))
                reference = envs.DrivingEnv(server.address, token=admin_token,
                                            start_noise=(0.0, 0.0, 0.0))
                try:
                    e.reset(seed=5)
                    reference.reset(seed=5)
                    owner_token, token_id = team.owner_tokens[e.session_id]
                    for i, action in enumerate(([3.0, 0.2], [1.0, -0.4], [-2.0, 0.0])):
                        if i == 2:  # The owner token first, then revoked.
                            team._bearer._owner_first.add(e.session_id)
                            assert team._bearer.token_for(e.session_id) == owner_token
                            admin.revoke_token(e.session_id, token_id)
                        obs, reward, _, _, info = e.step(action)
                        assert e._slots is not None  # The steps were sent as bytes.
                        expected, expected_reward, _, _, _ = reference.step(action)
                        np.testing.assert_array_equal(obs, expected)
                        assert reward == expected_reward
                    assert sent == [f"Bearer {team_token}"] * 2 + [f"Bearer {owner_token}",
                                                                   f"Bearer {team_token}"]
                    assert info["tick"] == 3 * e._ticks_per_step
                    assert admin.get_state(e.session_id).time.tick == info["tick"]
                    assert team._bearer.token_for(e.session_id) == team_token
                finally:
                    e.close()
                    reference.close()


def test_a_client_subclass_sees_every_step(address):
    # A Client subclass that changes how steps are made is not bypassed by the bytes path.
    class Counting(pitlane.Client):
        calls = 0

        def step_sessions(self, steps, *, table=False):
            Counting.calls += 1
            return super().step_sessions(steps, table=table)

    with Counting(address) as client:
        e = envs.DrivingEnv(client=client)
        vector = envs.VectorDrivingEnv(2, client=client)
        try:
            e.reset(seed=1)
            vector.reset(seed=1)
            for _ in range(3):
                e.step([1.0, 0.1])
                vector.step([[1.0, 0.1], [0.5, -0.1]])
            assert Counting.calls == 6
        finally:
            e.close()
            vector.close()


def test_a_failed_reset_leaves_nothing_to_step(env):
    env.reset(seed=2)
    env.step([1.0, 0.0])
    with pytest.raises(Exception):
        env.reset(options={"start": (math.nan, 0.0, 0.0)})
    with pytest.raises(RuntimeError, match="reset"):
        env.step([1.0, 0.0])


def test_render_draws_the_car(env):
    env.reset(seed=0)
    image = env.render()
    assert image.shape == (256, 256, 3) and image.dtype == np.uint8
    red = np.all(image == (220, 40, 40), axis=-1)
    # A 4.5 m x 1.8 m car at 2.56 pixels a metre: about 53 pixels, its centre 1.35 m (half
    # the wheelbase) ahead of the rear axle at the origin: 3.5 pixels right of the middle.
    assert 30 <= red.sum() <= 80
    ys, xs = np.nonzero(red)
    assert abs(xs.mean() - (128 + 1.35 * 2.56)) < 1.0 and abs(ys.mean() - 128) < 1.0


def test_box_without_gymnasium_samples_inside_itself():
    box = envs.Box([-1.0, 0.0], [1.0, 5.0], seed=4)
    assert all(box.contains(box.sample()) for _ in range(100))
    assert not box.contains(np.array([2.0, 0.0], dtype=np.float32))


def test_gymnasiums_own_checker(address):
    gymnasium = pytest.importorskip("gymnasium", reason="gymnasium is not installed here")
    from gymnasium.utils.env_checker import check_env  # pylint: disable=import-outside-toplevel
    e = envs.DrivingEnv(address)
    try:
        check_env(e, skip_render_check=True)
    finally:
        e.close()
    assert gymnasium


def test_multi_agent_env_on_one_shared_session(address):
    m = envs.MultiAgentDrivingEnv(address, starts=((-15.0, 0.0, 0.0), (15.0, 0.0, math.pi)),
                                  start_noise=(0.0, 0.0, 0.0), max_episode_steps=200)
    try:
        observations, infos = m.reset(seed=5)
        assert m.agents == m.possible_agents == ["car_0", "car_1"]
        assert set(observations) == set(infos) == set(m.agents)
        assert infos["car_0"]["session_id"] == infos["car_1"]["session_id"]
        assert all(m.observation_space(a).contains(o) for a, o in observations.items())
        # Head-on at full throttle: both crash into each other, then leave the episode.
        while m.agents:
            observations, rewards, terminations, truncations, infos = m.step(
                {agent: [3.0, 0.0] for agent in m.agents})
            assert set(rewards) == set(terminations) == set(truncations) == set(observations)
        assert terminations == {"car_0": True, "car_1": True}
        assert infos["car_0"]["crashed"] and infos["car_1"]["crashed"]
        with pytest.raises(RuntimeError):
            m.step({})
    finally:
        m.close()


def test_a_dropped_env_deletes_its_session(address, client):
    e = envs.DrivingEnv(address)
    e.reset(seed=0)
    sid = e.session_id
    assert sid in {s.session_id for s in client.list_sessions()}
    del e
    import gc  # pylint: disable=import-outside-toplevel
    gc.collect()
    assert sid not in {s.session_id for s in client.list_sessions()}
