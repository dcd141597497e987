"""Gymnasium-style environments on a Pitlane server (numpy required; Gymnasium optional).

``DrivingEnv``: one car in a session of its own, the Gymnasium API:
``reset(seed=, options=) -> (obs, info)``, ``step(action) -> (obs, reward, terminated,
truncated, info)``, ``action_space``, ``observation_space``, ``render()``.

``MultiAgentDrivingEnv``: several cars in one shared session, PettingZoo's ParallelEnv names:
``agents``, ``possible_agents``, ``reset() -> (observations, infos)``,
``step(actions) -> (observations, rewards, terminations, truncations, infos)``, each a dict
by agent; ``observation_space(agent)``, ``action_space(agent)``.

The car is a kinematic bicycle (or any acceleration-and-steering model: ``model=``) with
fixed limits, so the spaces are exact:

- action: ``[acceleration_mps2, steering_angle_rad]`` in
  ``[-max_braking, max_acceleration] x [-max_steering, max_steering]``; applied (clamped by
  the server) for ``ticks_per_step`` ticks.
- observation (float32): ``[speed_mps, yaw_rate_radps, steering_angle_rad, cos(yaw),
  sin(yaw), x_m / world_scale, y_m / world_scale]`` then ``range_beams`` range-scan distances
  in metres (a beam that meets nothing reads ``range_max_m``); bounds in ``observation_space``.
- reward (default): metres driven forward this step, minus ``crash_penalty`` on a crash; any
  ``reward_fn(previous_state, state, info) -> float`` instead (states are pitlane.pb
  VehicleState).
- terminated: the car crashed (collision policy STOP: into a wall, an obstacle or a car), or
  reached ``goal`` = ``(x_m, y_m, radius_m)``; truncated: ``max_episode_steps`` steps.

The session is LOCKSTEP, so episodes are deterministic: the same seed gives the same start
(a pose drawn from ``start_noise`` around ``start``) and, for the same actions, the same
episode. Spaces are ``gymnasium.spaces.Box`` when gymnasium is importable, else ``pitlane.envs.Box``
(the same ``low``, ``high``, ``shape``, ``dtype``, ``sample()``, ``contains()``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Optional

import numpy as np

import pitlane
from pitlane.v1 import simulator_pb2 as pb

try:  # Gymnasium's spaces and base class when installed; the env works without them.
    import gymnasium as _gym
except ImportError:  # pragma: no cover - depends on the machine
    _gym = None

__all__ = ["Box", "DrivingEnv", "MultiAgentDrivingEnv", "VectorDrivingEnv"]


class Box:
    """A box in R^n (Gymnasium's ``spaces.Box`` when gymnasium is missing)."""

    def __init__(self, low, high, dtype=np.float32, seed: Optional[int] = None):
        self.low = np.asarray(low, dtype=dtype)
        self.high = np.asarray(high, dtype=dtype)
        self.shape = self.low.shape
        self.dtype = np.dtype(dtype)
        self._rng = np.random.default_rng(seed)

    def seed(self, seed: Optional[int] = None) -> None:
        self._rng = np.random.default_rng(seed)

    def sample(self) -> np.ndarray:
        low = np.where(np.isfinite(self.low), self.low, -1e3)
        high = np.where(np.isfinite(self.high), self.high, 1e3)
        return self._rng.uniform(low, high).astype(self.dtype)

    def contains(self, x) -> bool:
        x = np.asarray(x)
        return x.shape == self.shape and bool(np.all(x >= self.low) and np.all(x <= self.high))

    def __repr__(self) -> str:
        return f"Box({self.low}, {self.high}, {self.shape}, {self.dtype})"


def _box(low, high):
    low = np.asarray(low, dtype=np.float32)
    high = np.asarray(high, dtype=np.float32)
    if _gym is not None:
        return _gym.spaces.Box(low, high, dtype=np.float32)
    return Box(low, high)


_BASE = _gym.Env if _gym is not None else object


class _Car:
    """What the environments share: one car's spec, spaces, observation and reward."""

    def __init__(self, *, model, params, max_acceleration, max_braking, max_steering,
                 max_speed, range_beams, range_max_m, world_scale, reward_fn, crash_penalty,
                 goal):
        self.model = model
        self.params = dict(params or {})
        # Where the body's centre is ahead of the reference point the state reports: half the
        # wheelbase for a kinematic bicycle (its rear axle); the centre for the other models.
        self.body_offset_m = (0.5 * float(self.params.get("wheelbase_m", 2.7))
                              if model == "kinematic_bicycle" else 0.0)
        self.limits = {"max_acceleration_mps2": max_acceleration,
                       "max_braking_mps2": max_braking,
                       "max_steering_angle_rad": max_steering,
                       "max_speed_mps": max_speed}
        self.range_beams = range_beams
        self.range_max_m = range_max_m
        self.world_scale = world_scale
        self.reward_fn = reward_fn
        self.crash_penalty = crash_penalty
        self.goal = goal
        self.action_space = _box([-max_braking, -max_steering], [max_acceleration, max_steering])
        big = np.float32(np.finfo(np.float32).max)
        low = [-max_speed, -big, -max_steering, -1.0, -1.0, -big, -big]
        high = [max_speed, big, max_steering, 1.0, 1.0, big, big]
        low += [0.0] * range_beams
        high += [range_max_m] * range_beams
        self.observation_space = _box(low, high)
        self._action_low = [float(v) for v in self.action_space.low]
        self._action_high = [float(v) for v in self.action_space.high]

    def spec(self, x_m, y_m, yaw_rad, name=""):
        range_scan = None
        if self.range_beams > 0:
            range_scan = {"beam_count": self.range_beams, "field_of_view_rad": math.pi,
                          "max_range_m": self.range_max_m}
        return pitlane.vehicle_spec(x_m=x_m, y_m=y_m, yaw_rad=yaw_rad, model=self.model,
                                    params=self.params or None, limits=self.limits,
                                    range_scan=range_scan, name=name)

    def control(self, vehicle_id, action) -> pb.VehicleControl:
        try:
            action = np.asarray(action, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            action = np.array([math.nan])
        if action.shape != (2,) or not np.all(np.isfinite(action)):
            raise ValueError("action: two finite numbers, [acceleration_mps2, "
                             "steering_angle_rad]")
        low, high = self._action_low, self._action_high
        return pb.VehicleControl(
            vehicle_id=vehicle_id,
            acceleration_mps2=min(max(float(action[0]), low[0]), high[0]),
            steering_angle_rad=min(max(float(action[1]), low[1]), high[1]))

    def values(self, vehicle: pb.VehicleState) -> list:
        """The observation's numbers, before the float32 array and its bounds."""
        values = [vehicle.speed_mps, vehicle.yaw_rate_radps, vehicle.steering_angle_rad,
                  math.cos(vehicle.yaw_rad), math.sin(vehicle.yaw_rad),
                  vehicle.x_m / self.world_scale, vehicle.y_m / self.world_scale]
        if self.range_beams > 0:
            ranges = list(vehicle.range_scan.ranges_m) or [self.range_max_m] * self.range_beams
            values += [min(r, self.range_max_m) for r in ranges]
        return values

    def bound(self, values) -> np.ndarray:
        """The observation (or, for rows of values, observations) within its bounds."""
        return np.clip(np.asarray(values, dtype=np.float32), self.observation_space.low,
                       self.observation_space.high)

    def observe(self, vehicle: pb.VehicleState) -> np.ndarray:
        return self.bound(self.values(vehicle))

    def reached_goal(self, vehicle: pb.VehicleState) -> bool:
        if self.goal is None:
            return False
        x, y, radius = self.goal
        return math.hypot(vehicle.x_m - x, vehicle.y_m - y) <= radius

    def reward(self, previous: pb.VehicleState, vehicle: pb.VehicleState, info) -> float:
        if self.reward_fn is not None:
            return float(self.reward_fn(previous, vehicle, info))
        forward = ((vehicle.x_m - previous.x_m) * math.cos(previous.yaw_rad)
                   + (vehicle.y_m - previous.y_m) * math.sin(previous.yaw_rad))
        return forward - (self.crash_penalty if vehicle.crashed else 0.0)


def _vehicle(state: pb.WorldState, vehicle_id: int) -> pb.VehicleState:
    for vehicle in state.vehicles:
        if vehicle.vehicle_id == vehicle_id:
            return vehicle
    raise RuntimeError(f"vehicle {vehicle_id} is not in the session any more")


def _render(state: pb.WorldState, ego_id: Optional[int], bounds, body_offset_m,
            size=(256, 256)):
    """An RGB top-down picture (height x width x 3, uint8) of the state: cars as 4.5 m x 1.8 m
    rectangles centred `body_offset_m` ahead of their reference point (the rear axle of a
    kinematic bicycle), the ego car red, others blue, crashed ones grey, on a light ground."""
    height, width = size
    image = np.full((height, width, 3), 235, dtype=np.uint8)
    min_x, min_y, max_x, max_y = bounds
    scale = min(width / (max_x - min_x), height / (max_y - min_y))
    ys, xs = np.mgrid[0:height, 0:width]
    world_x = min_x + (xs + 0.5) / scale
    world_y = max_y - (ys + 0.5) / scale
    for vehicle in state.vehicles:
        c, s = math.cos(vehicle.yaw_rad), math.sin(vehicle.yaw_rad)
        dx = world_x - (vehicle.x_m + body_offset_m * c)
        dy = world_y - (vehicle.y_m + body_offset_m * s)
        along, across = dx * c + dy * s, -dx * s + dy * c
        inside = (np.abs(along) <= 2.25) & (np.abs(across) <= 0.9)
        color = ((128, 128, 128) if vehicle.crashed
                 else (220, 40, 40) if vehicle.vehicle_id == ego_id else (40, 90, 220))
        image[inside] = color
    return image


class _SessionOwner:
    """The session an environment drives: its client, a new session for a new seed (else the
    same one reset to tick 0), and closing."""

    def _open(self, address, client, token):
        self._own_client = client is None
        self.client = client if client is not None else pitlane.Client(address, token=token)
        self.session_id: Optional[str] = None
        self._seed: Optional[int] = None
        self._rng = np.random.default_rng()

    def _begin_episode(self, seed, **session):
        """Before an episode: the seeded random source, and the session at tick 0."""
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self.np_random = self._rng  # Gymnasium's name for the env's random source.
        if self.session_id is None or (seed is not None and seed != self._seed):
            self._close_session()
            self.session_id = self.client.create_session(
                clock_mode="lockstep", collision_policy="stop",
                seed=0 if seed is None else int(seed) & 0xFFFFFFFFFFFFFFFF,
                **session).session_id
            self._seed = seed
        else:
            self.client.reset_session(self.session_id)

    def _close_session(self):
        if self.session_id is not None:
            try:
                self.client.delete_session(self.session_id)
            except Exception:  # pylint: disable=broad-except  # Gone already: nothing to do.
                pass
            self.session_id = None

    def close(self):
        self._close_session()
        if self._own_client:
            self.client.close()

    def __del__(self):
        # An environment dropped without close() deletes its session, so that it does not
        # count against the client's sessions until the server's idle timeout.
        try:
            self.close()
        except Exception:  # pylint: disable=broad-except  # Interpreter shutdown, a dead server.
            pass


class DrivingEnv(_SessionOwner, _BASE):
    """One car in a LOCKSTEP session of its own (see the module's documentation).

    Args:
        address: The server ("host:port"); or ``client``: a ``pitlane.Client`` to use.
        token: A token for a server that checks them.
        scenario: A scenario to start from ("" for an empty world with walls at ``bounds``).
        start: ``(x_m, y_m, yaw_rad)`` of the car at reset; ``start_noise``: the spread of
            the seeded noise added to it, ``(metres, metres, radians)``.
        ticks_per_step: Ticks each action holds for (the session's tick rate is 50 Hz).
        max_episode_steps: Steps before ``truncated``.
        render_mode: None or "rgb_array".
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, address: str = "127.0.0.1:50051", *, client=None,
                 token: Optional[str] = None, scenario: str = "",
                 bounds: Sequence[float] = (-50.0, -50.0, 50.0, 50.0),
                 start: Sequence[float] = (0.0, 0.0, 0.0),
                 start_noise: Sequence[float] = (1.0, 1.0, 0.2),
                 model: str = "kinematic_bicycle", params: Optional[Mapping[str, Any]] = None,
                 max_acceleration: float = 3.0, max_braking: float = 6.0,
                 max_steering: float = 0.6, max_speed: float = 20.0,
                 range_beams: int = 9, range_max_m: float = 30.0,
                 ticks_per_step: int = 5, max_episode_steps: int = 500,
                 reward_fn: Optional[Callable] = None, crash_penalty: float = 10.0,
                 goal: Optional[Sequence[float]] = None,
                 render_mode: Optional[str] = None):
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode: None or 'rgb_array', got {render_mode!r}")
        if ticks_per_step < 1 or max_episode_steps < 1:
            raise ValueError("ticks_per_step and max_episode_steps must be at least 1")
        self._open(address, client, token)
        self.render_mode = render_mode
        self._car = _Car(model=model, params=params, max_acceleration=max_acceleration,
                         max_braking=max_braking, max_steering=max_steering,
                         max_speed=max_speed, range_beams=range_beams,
                         range_max_m=range_max_m, world_scale=max(map(abs, bounds)),
                         reward_fn=reward_fn, crash_penalty=crash_penalty, goal=goal)
        self.action_space = self._car.action_space
        self.observation_space = self._car.observation_space
        self._scenario = scenario
        self._bounds = tuple(float(b) for b in bounds)
        self._start = tuple(float(v) for v in start)
        self._start_noise = tuple(float(v) for v in start_noise)
        self._ticks_per_step = ticks_per_step
        self.max_episode_steps = max_episode_steps
        self.vehicle_id: Optional[int] = None
        self._state: Optional[pb.WorldState] = None
        self._steps = 0

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        """A new episode: the session from scratch (a new one for a new seed), the car at the
        seeded start. ``options``: ``{"start": (x, y, yaw)}`` to start elsewhere."""
        if _gym is not None:
            # Gymnasium's own seeding (np_random), which its checker expects; the start noise
            # draws from it.
            super().reset(seed=seed)
            if seed is not None:
                self._rng = self.np_random
        self._begin_episode(seed, name="gym", scenario=self._scenario,
                            bounds=None if self._scenario else self._bounds)
        x, y, yaw = (options or {}).get("start", self._start)
        noise = self._rng.uniform(-1.0, 1.0, size=3) * np.asarray(self._start_noise)
        self.vehicle_id = self.client.spawn_vehicles(
            self.session_id, [self._car.spec(x + noise[0], y + noise[1], yaw + noise[2], "ego")])[0]
        self._state = self.client.get_state(self.session_id)
        self._steps = 0
        vehicle = _vehicle(self._state, self.vehicle_id)
        return self._car.observe(vehicle), self._info(vehicle)

    def step(self, action):
        # One call: the controls and the ticks together (StepSessions with this session).
        result = self.client.step_sessions([self._session_step(action, only_ego=False)])[0]
        return self._after_step(result)

    def _session_step(self, action, only_ego):
        """This env's part of a StepSessions call for `action`."""
        if self.session_id is None:
            raise RuntimeError("call reset() before step()")
        step = {"session_id": self.session_id, "ticks": self._ticks_per_step,
                "controls": [self._car.control(self.vehicle_id, action)]}
        if only_ego:
            step["vehicle_ids"] = [self.vehicle_id]
        return step

    def _after_step(self, result: pb.SessionStepResult, raw: bool = False):
        """(obs, reward, terminated, truncated, info) from this env's StepSessions result (the
        observation's unbounded values instead of its array with `raw`)."""
        if result.code != 0:
            raise RuntimeError(f"session {result.session_id}: {result.message} (gRPC code "
                               f"{result.code})")
        previous = _vehicle(self._state, self.vehicle_id)
        self._state = result.state
        self._steps += 1
        vehicle = _vehicle(self._state, self.vehicle_id)
        info = self._info(vehicle)
        terminated = bool(vehicle.crashed or self._car.reached_goal(vehicle))
        truncated = self._steps >= self.max_episode_steps and not terminated
        reward = self._car.reward(previous, vehicle, info)
        observation = self._car.values(vehicle) if raw else self._car.observe(vehicle)
        return observation, reward, terminated, truncated, info

    def _info(self, vehicle):
        return {"tick": self._state.time.tick, "crashed": vehicle.crashed,
                "goal_reached": self._car.reached_goal(vehicle), "session_id": self.session_id,
                "vehicle_id": self.vehicle_id, "viewer": f"/?session={self.session_id}"}

    def render(self):
        """An RGB top-down array of the world (render_mode "rgb_array"); the live view is the
        server's viewer at ``info["viewer"]``."""
        if self.render_mode != "rgb_array" or self._state is None:
            return None
        return _render(self._state, self.vehicle_id, self._bounds, self._car.body_offset_m)


class VectorDrivingEnv:
    """``num_envs`` DrivingEnvs (sessions of their own, on one client) stepped together by one
    StepSessions call a step: Gymnasium's vector API (0.29's same-step autoreset). The token,
    if any, must step every session (an admin's, or --auth=none); behind a proxy, give the
    client a ``replica`` so that all the sessions are on one server. ``reset(seed=s)`` seeds env i with
    ``s + i``; ``step(actions)`` takes an array of shape (num_envs, 2) and returns arrays
    (observations (num_envs, obs_dim), rewards, terminated, truncated) and ``infos`` (a dict of
    arrays). An env that terminates or truncates is reset at once (the next episode's first
    observation is returned; the last one is in ``infos["final_observation"][i]``, with
    ``infos["_final_observation"]`` the mask). The other arguments are DrivingEnv's."""

    metadata = {"autoreset_mode": "same-step"}

    def __init__(self, num_envs: int, address: str = "127.0.0.1:50051", *, client=None,
                 token: Optional[str] = None, **env):
        if num_envs < 1:
            raise ValueError("num_envs must be at least 1")
        self._own_client = client is None
        self.client = client if client is not None else pitlane.Client(address, token=token)
        self.envs = [DrivingEnv(client=self.client, **env) for _ in range(num_envs)]
        self.num_envs = num_envs
        self.single_action_space = self.envs[0].action_space
        self.single_observation_space = self.envs[0].observation_space
        low = self.single_observation_space.low
        high = self.single_observation_space.high
        self.observation_space = _box(np.broadcast_to(low, (num_envs, *low.shape)),
                                      np.broadcast_to(high, (num_envs, *high.shape)))
        a_low, a_high = self.single_action_space.low, self.single_action_space.high
        self.action_space = _box(np.broadcast_to(a_low, (num_envs, *a_low.shape)),
                                 np.broadcast_to(a_high, (num_envs, *a_high.shape)))

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        observations, infos = [], []
        for i, env in enumerate(self.envs):
            obs, info = env.reset(seed=None if seed is None else seed + i, options=options)
            observations.append(obs)
            infos.append(info)
        return np.stack(observations), _stack_infos(infos)

    def step(self, actions):
        actions = np.asarray(actions, dtype=np.float64)
        if actions.shape != (self.num_envs, 2) or not np.all(np.isfinite(actions)):
            raise ValueError(f"actions: shape ({self.num_envs}, 2), finite; got "
                             f"{actions.shape}")
        low, high = self.single_action_space.low, self.single_action_space.high
        clipped = np.clip(actions, low, high).tolist()
        request = pb.StepSessionsRequest()
        for env, (accel, steer) in zip(self.envs, clipped):
            # pylint: disable=protected-access
            if env.session_id is None:
                raise RuntimeError("call reset() before step()")
            step = request.steps.add(session_id=env.session_id, ticks=env._ticks_per_step)
            step.controls.add(vehicle_id=env.vehicle_id, acceleration_mps2=accel,
                              steering_angle_rad=steer)
            step.vehicle_ids.append(env.vehicle_id)
        results = self.client.step_sessions(request)
        failed = [r for r in results if r.code != 0]
        if failed:  # Before any env changes: the step is all or nothing here.
            raise RuntimeError("; ".join(f"session {r.session_id}: {r.message} (gRPC code "
                                         f"{r.code})" for r in failed))
        rows = []
        rewards = np.empty(self.num_envs, dtype=np.float64)
        terminated = np.zeros(self.num_envs, dtype=bool)
        truncated = np.zeros(self.num_envs, dtype=bool)
        infos = []
        final = np.empty(self.num_envs, dtype=object)
        for i, (env, result) in enumerate(zip(self.envs, results)):
            values, rewards[i], terminated[i], truncated[i], info = env._after_step(  # pylint: disable=protected-access
                result, raw=True)
            if terminated[i] or truncated[i]:
                final[i] = env._car.bound(values)  # pylint: disable=protected-access
                obs, _ = env.reset()
                values = obs.tolist()
            rows.append(values)
            infos.append(info)
        observations = self.envs[0]._car.bound(rows)  # pylint: disable=protected-access
        stacked = _stack_infos(infos)
        stacked["final_observation"] = final
        stacked["_final_observation"] = terminated | truncated
        return observations, rewards, terminated, truncated, stacked

    def close(self):
        for env in self.envs:
            env.close()
        if self._own_client:
            self.client.close()


def _stack_infos(infos):
    """A list of per-env info dicts as one dict of arrays (Gymnasium's vector form)."""
    return {key: np.array([info[key] for info in infos]) for key in infos[0]}


class MultiAgentDrivingEnv(_SessionOwner):
    """Several cars in one shared LOCKSTEP session, PettingZoo's ParallelEnv API (see the
    module's documentation). ``starts``: one ``(x_m, y_m, yaw_rad)`` per agent, named
    ``car_0``, ``car_1``, ...; the other arguments are ``DrivingEnv``'s. Agents that crash or
    reach the goal leave ``agents``; an episode ends when none is left or at
    ``max_episode_steps``."""

    metadata = {"render_modes": ["rgb_array"], "name": "pitlane_multi_agent_v0"}

    def __init__(self, address: str = "127.0.0.1:50051", *, client=None,
                 token: Optional[str] = None,
                 starts: Sequence[Sequence[float]] = ((-10.0, 0.0, 0.0), (10.0, 0.0, math.pi)),
                 bounds: Sequence[float] = (-50.0, -50.0, 50.0, 50.0),
                 start_noise: Sequence[float] = (0.5, 0.5, 0.1),
                 ticks_per_step: int = 5, max_episode_steps: int = 500,
                 render_mode: Optional[str] = None, **car):
        self._open(address, client, token)
        self.render_mode = render_mode
        car.setdefault("model", "kinematic_bicycle")
        defaults = dict(params=None, max_acceleration=3.0, max_braking=6.0, max_steering=0.6,
                        max_speed=20.0, range_beams=9, range_max_m=30.0, reward_fn=None,
                        crash_penalty=10.0, goal=None)
        defaults.update(car)
        self._car = _Car(world_scale=max(map(abs, bounds)), **defaults)
        self.possible_agents = [f"car_{i}" for i in range(len(starts))]
        self.agents: list[str] = []
        self._starts = [tuple(map(float, s)) for s in starts]
        self._bounds = tuple(float(b) for b in bounds)
        self._start_noise = tuple(float(v) for v in start_noise)
        self._ticks_per_step = ticks_per_step
        self.max_episode_steps = max_episode_steps
        self._ids: dict[str, int] = {}
        self._state: Optional[pb.WorldState] = None
        self._steps = 0

    def observation_space(self, agent):
        return self._car.observation_space

    def action_space(self, agent):
        return self._car.action_space

    def reset(self, seed: Optional[int] = None, options: Optional[dict] = None):
        self._begin_episode(seed, name="gym-multi", bounds=self._bounds)
        specs = []
        for agent, (x, y, yaw) in zip(self.possible_agents, self._starts):
            noise = self._rng.uniform(-1.0, 1.0, size=3) * np.asarray(self._start_noise)
            specs.append(self._car.spec(x + noise[0], y + noise[1], yaw + noise[2], agent))
        ids = self.client.spawn_vehicles(self.session_id, specs)
        self._ids = dict(zip(self.possible_agents, ids))
        self.agents = list(self.possible_agents)
        self._state = self.client.get_state(self.session_id)
        self._steps = 0
        observations = {a: self._car.observe(_vehicle(self._state, self._ids[a]))
                        for a in self.agents}
        return observations, {a: self._info(a) for a in self.agents}

    def step(self, actions: Mapping[str, Any]):
        if not self.agents:
            raise RuntimeError("no agents left: call reset()")
        if set(actions) != set(self.agents):
            raise ValueError(f"actions: one for each agent in the episode, {sorted(self.agents)};"
                             f" got {sorted(actions)}")
        previous = {a: _vehicle(self._state, self._ids[a]) for a in self.agents}
        controls = [self._car.control(self._ids[a], action) for a, action in actions.items()]
        if controls:
            self.client.set_controls(self.session_id, controls)
        self._state = self.client.step(self.session_id, ticks=self._ticks_per_step)
        self._steps += 1
        observations, rewards, terminations, truncations, infos = {}, {}, {}, {}, {}
        for agent in self.agents:
            vehicle = _vehicle(self._state, self._ids[agent])
            infos[agent] = self._info(agent)
            observations[agent] = self._car.observe(vehicle)
            rewards[agent] = self._car.reward(previous[agent], vehicle, infos[agent])
            terminations[agent] = bool(vehicle.crashed or self._car.reached_goal(vehicle))
            truncations[agent] = (self._steps >= self.max_episode_steps
                                  and not terminations[agent])
        leaving = [a for a in self.agents if terminations[a] or truncations[a]]
        if leaving:
            # Out of the episode, out of the way: full brakes, wheels straight (a crashed car
            # stands still anyway).
            brake = float(self._car.action_space.low[0])
            self.client.set_controls(self.session_id, [
                pitlane.control(self._ids[a], acceleration_mps2=brake, steering_angle_rad=0.0)
                for a in leaving])
        self.agents = [a for a in self.agents if a not in leaving]
        return observations, rewards, terminations, truncations, infos

    @property
    def num_agents(self) -> int:
        return len(self.agents)

    @property
    def max_num_agents(self) -> int:
        return len(self.possible_agents)

    def _info(self, agent):
        vehicle = _vehicle(self._state, self._ids[agent])
        return {"tick": self._state.time.tick, "crashed": vehicle.crashed,
                "vehicle_id": self._ids[agent], "session_id": self.session_id}

    def render(self):
        if self.render_mode != "rgb_array" or self._state is None:
            return None
        return _render(self._state, None, self._bounds, self._car.body_offset_m)

