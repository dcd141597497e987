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
import struct
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
        self._observation_low = np.asarray(self.observation_space.low, dtype=np.float32)
        self._observation_high = np.asarray(self.observation_space.high, dtype=np.float32)
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

    def clip(self, action) -> tuple:
        """(acceleration_mps2, steering_angle_rad) of `action`, within the action space."""
        if (type(action) in (list, tuple) and len(action) == 2
                and all(type(v) in (float, int) for v in action)):
            accel, steer = float(action[0]), float(action[1])  # The common case, no numpy.
        else:
            try:
                array = np.asarray(action, dtype=np.float64).reshape(-1)
            except (TypeError, ValueError):
                array = np.array([math.nan])
            accel, steer = (array[0], array[1]) if array.shape == (2,) else (math.nan,) * 2
            accel, steer = float(accel), float(steer)
        if not (math.isfinite(accel) and math.isfinite(steer)):
            raise ValueError("action: two finite numbers, [acceleration_mps2, "
                             "steering_angle_rad]")
        low, high = self._action_low, self._action_high
        return min(max(accel, low[0]), high[0]), min(max(steer, low[1]), high[1])

    def control(self, vehicle_id, action) -> pb.VehicleControl:
        accel, steer = self.clip(action)
        return pb.VehicleControl(vehicle_id=vehicle_id, acceleration_mps2=accel,
                                 steering_angle_rad=steer)

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
        # np.minimum and np.maximum: np.clip's own argument checks cost more than both.
        return np.minimum(np.maximum(np.asarray(values, dtype=np.float32), self._observation_low),
                          self._observation_high)

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
        # The StepSessions request of a step, made at reset: a step sets its control's values.
        self._request: Optional[pb.StepSessionsRequest] = None
        self._control: Optional[pb.VehicleControl] = None
        # The request's bytes and where the action's two doubles lie in them (_marked_bytes),
        # made at the episode's first step: a step writes its action there. _slots None: the
        # request is serialized each step.
        self._buffer: Optional[bytearray] = None
        self._slots: Optional[list] = None

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        """A new episode: the session from scratch (a new one for a new seed), the car at the
        seeded start. ``options``: ``{"start": (x, y, yaw)}`` to start elsewhere."""
        # Until this reset is done: a failure below leaves no request to step.
        self._request = self._buffer = self._slots = None
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
        self._viewer = f"/?session={self.session_id}"
        self._request = pb.StepSessionsRequest()
        step = self._request.steps.add(session_id=self.session_id, ticks=self._ticks_per_step)
        self._control = step.controls.add(vehicle_id=self.vehicle_id)
        vehicle = _vehicle(self._state, self.vehicle_id)
        return self._car.observe(vehicle), self._info(vehicle)

    def step(self, action):
        if self._request is None or self.session_id is None:
            raise RuntimeError("call reset() before step()")
        # One call: the controls and the ticks together (StepSessions with this session).
        accel, steer = self._car.clip(action)
        if self._buffer is None:  # The episode's first step.
            data, self._slots = _marked_bytes(self._control, self._request.SerializeToString)
            self._buffer = bytearray(data)
            if not _takes_bytes(self.client):
                self._slots = None
        if self._slots is not None:
            # The action written into the request's bytes.
            buffer = self._buffer
            struct.pack_into("<d", buffer, self._slots[0], accel)
            struct.pack_into("<d", buffer, self._slots[1], steer)
            result = self.client._step_session_from_bytes(  # pylint: disable=protected-access
                bytes(buffer), self.session_id).results[0]
        else:
            control = self._control
            control.acceleration_mps2, control.steering_angle_rad = accel, steer
            result = self.client.step_sessions(self._request)[0]
        if result.code != 0:
            raise RuntimeError(f"session {result.session_id}: {result.message} (gRPC code "
                               f"{result.code})")
        previous = _vehicle(self._state, self.vehicle_id)
        self._state = result.state
        self._steps += 1
        vehicle = _vehicle(self._state, self.vehicle_id)
        crashed = vehicle.crashed
        goal = self._car.reached_goal(vehicle)
        info = {"tick": self._state.time.tick, "crashed": crashed, "goal_reached": goal,
                "session_id": self.session_id, "vehicle_id": self.vehicle_id,
                "viewer": self._viewer}
        terminated = bool(crashed or goal)
        truncated = self._steps >= self.max_episode_steps and not terminated
        reward = self._car.reward(previous, vehicle, info)
        return self._car.observe(vehicle), reward, terminated, truncated, info

    def _info(self, vehicle):
        return {"tick": self._state.time.tick, "crashed": vehicle.crashed,
                "goal_reached": self._car.reached_goal(vehicle), "session_id": self.session_id,
                "vehicle_id": self.vehicle_id, "viewer": self._viewer}

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
    client a ``replica`` so that all the sessions are on one server. ``reset(seed=s)`` seeds
    env i with ``s + i``; ``step(actions)`` takes an array of shape (num_envs, 2) and returns
    arrays (observations (num_envs, obs_dim), rewards, terminated, truncated) and ``infos`` (a
    dict of arrays). An env that terminates or truncates is reset at once: the next episode's
    first observation and info are returned, the last ones are in
    ``infos["final_observation"][i]`` and ``infos["final_info"][i]`` (masks
    ``infos["_final_observation"]``, ``infos["_final_info"]``). The other arguments are
    DrivingEnv's; the observations, rewards and flags equal those of the DrivingEnvs stepped
    one by one."""

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
        self._car = self.envs[0]._car  # pylint: disable=protected-access  # All envs' car.
        self._action_low = np.asarray(self._car._action_low)  # pylint: disable=protected-access
        self._action_high = np.asarray(self._car._action_high)  # pylint: disable=protected-access
        # The StepSessions request of a step (made at reset; a step sets its control values)
        # and each env's control in it.
        self._request: Optional[pb.StepSessionsRequest] = None
        self._controls: list = []
        # The request serialized, and where each env's two action values lie in it (the bytes
        # of [a0, s0, a1, s1, ...] as doubles): a step writes the actions there. None: to be
        # made again (an env's car changed), or the request is serialized each step.
        self._buffer: Optional[bytearray] = None
        self._offsets: Optional[np.ndarray] = None
        self._parts: list = []  # Per env: (its bytes, its offsets), None to be made again.
        # Per env: steps this episode; the car's x, y, cos(yaw) and sin(yaw) after the last
        # step (the default reward's forward distance is measured along that heading).
        self._steps = np.zeros(num_envs, dtype=np.int64)
        # What a table's rows must say, env by env: its session's index, its car's id.
        self._expected = np.zeros((num_envs, 2), dtype=np.float64)
        self._expected[:, 0] = np.arange(num_envs)
        self._previous = np.zeros((num_envs, 4), dtype=np.float64)
        self._static_infos: dict = {}

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        self._request = None  # Until every env is reset: a failure here leaves none to step.
        observations, infos = [], []
        for i, env in enumerate(self.envs):
            obs, info = env.reset(seed=None if seed is None else seed + i, options=options)
            observations.append(obs)
            infos.append(info)
        request = pb.StepSessionsRequest()
        self._controls = []
        self._parts = [None] * self.num_envs
        for env in self.envs:
            step = request.steps.add(ticks=env._ticks_per_step)  # pylint: disable=protected-access
            self._controls.append(step.controls.add())
        self._request = request
        self._static_infos = {key: np.array([info[key] for info in infos], dtype=object)
                              for key in ("session_id", "viewer")}
        self._static_infos["vehicle_id"] = np.array([info["vehicle_id"] for info in infos])
        for i in range(self.num_envs):
            self._after_reset(i)
        stacked = _stack_infos(infos)
        stacked.update((key, value.copy()) for key, value in self._static_infos.items())
        return np.stack(observations), stacked

    def _serialize_step(self, i):
        """Env i's part of the request's bytes (its step as a StepSessionsRequest of one: the
        field's tag and length, then the step), and where its two action values lie in it
        (_marked_bytes)."""
        return _marked_bytes(self._controls[i], lambda: pb.StepSessionsRequest(
            steps=[self._request.steps[i]]).SerializeToString())

    def _serialize(self):
        """The request's bytes, and the offsets of every env's action values in them (None:
        the request is serialized each step). Without a reward_fn, the request asks for the
        vehicles as a table (STEP_RESULT_LAYOUT_TABLE): no message per vehicle to read."""
        for i in range(self.num_envs):
            if self._parts[i] is None:
                self._parts[i] = self._serialize_step(i)
        layout = pb.StepSessionsRequest(
            layout=pb.STEP_RESULT_LAYOUT_TABLE if self._car.reward_fn is None
            else pb.STEP_RESULT_LAYOUT_STATES).SerializeToString()
        self._buffer = bytearray(b"".join(data for data, _ in self._parts) + layout)
        self._view = np.frombuffer(self._buffer, dtype=np.uint8)
        if any(offsets is None for _, offsets in self._parts):
            self._offsets = None
            return
        sizes = np.array([len(data) for data, _ in self._parts], dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        local = np.array([offsets for _, offsets in self._parts], dtype=np.int64)
        self._offsets = ((starts[:, None] + local)[:, :, None]
                         + np.arange(8, dtype=np.int64)).reshape(-1)

    def _after_reset(self, i):
        """After env i's reset: its part of the request, its step count and last pose."""
        env = self.envs[i]
        step = self._request.steps[i]
        step.session_id = env.session_id
        step.vehicle_ids[:] = [env.vehicle_id]
        self._controls[i].vehicle_id = env.vehicle_id
        self._expected[i, 1] = env.vehicle_id
        self._static_infos["session_id"][i] = env.session_id
        self._static_infos["vehicle_id"][i] = env.vehicle_id
        self._static_infos["viewer"][i] = f"/?session={env.session_id}"
        self._steps[i] = 0
        self._parts[i] = None
        self._buffer = None
        vehicle = _vehicle(env._state, env.vehicle_id)  # pylint: disable=protected-access
        self._previous[i] = (vehicle.x_m, vehicle.y_m, math.cos(vehicle.yaw_rad),
                             math.sin(vehicle.yaw_rad))

    def step(self, actions):
        if self._request is None:
            raise RuntimeError("call reset() before step()")
        actions = np.asarray(actions, dtype=np.float64)
        if actions.shape != (self.num_envs, 2) or not np.all(np.isfinite(actions)):
            raise ValueError(f"actions: shape ({self.num_envs}, 2), finite; got "
                             f"{actions.shape}")
        # Within the action space (np.clip's own checks cost more than the two ufuncs).
        actions = np.minimum(np.maximum(actions, self._action_low), self._action_high)
        car = self._car
        if self._buffer is None:
            self._serialize()
        # The bytes of the request with the actions written in (a call of one session follows
        # that session's token rules, as DrivingEnv's).
        if self._offsets is not None and _takes_bytes(self.client):
            self._view[self._offsets] = actions.astype("<f8").view(np.uint8).reshape(-1)
            # pylint: disable=protected-access
            send = (self.client._step_session_from_bytes if self.num_envs == 1
                    else self.client._step_sessions_from_bytes)
            response = send(bytes(self._buffer), self._request.steps[0].session_id)
            if response.HasField("vehicle_table"):
                read = self._read_table(response)
            else:
                read = self._read_states(list(response.results))
        else:
            for control, (accel, steer) in zip(self._controls, actions.tolist()):
                control.acceleration_mps2 = accel
                control.steering_angle_rad = steer
            read = self._read_states(self.client.step_sessions(self._request))
        # values: the observations' numbers before their bounds, one row per env (cos and sin
        # of the yaw from math, as the single env computes them).
        values, x, y, crashed, ticks, states = read
        observations = car.bound(values)
        if car.goal is None:
            goal = np.zeros(self.num_envs, dtype=bool)
        else:
            gx, gy, radius = car.goal
            goal = np.array([math.hypot(px - gx, py - gy) <= radius
                             for px, py in zip(x.tolist(), y.tolist())])
        steps = self._steps + 1
        terminated = crashed | goal
        truncated = (steps >= self.envs[0].max_episode_steps) & ~terminated
        infos = {"tick": ticks, "crashed": crashed, "goal_reached": goal}
        infos.update((key, value.copy()) for key, value in self._static_infos.items())
        if car.reward_fn is None:
            previous = self._previous
            rewards = ((x - previous[:, 0]) * previous[:, 2]
                       + (y - previous[:, 1]) * previous[:, 3]
                       - np.where(crashed, car.crash_penalty, 0.0))
        else:
            # pylint: disable=protected-access
            rewards = np.array([
                car.reward(_vehicle(env._state, env.vehicle_id),
                           _vehicle(state, env.vehicle_id), _info_of(infos, i))
                for i, (env, state) in enumerate(zip(self.envs, states))], dtype=np.float64)
        # Nothing of the envs changed before this point: an error above leaves them as they were.
        if states is not None:
            for env, state in zip(self.envs, states):
                env._state = state  # pylint: disable=protected-access
        self._steps = steps
        previous = np.empty((self.num_envs, 4))
        previous[:, 0], previous[:, 1] = x, y
        previous[:, 2:] = values[:, 3:5]
        self._previous = previous
        done = np.flatnonzero(terminated | truncated)
        final_observation = np.empty(self.num_envs, dtype=object)  # None each.
        final_info = np.empty(self.num_envs, dtype=object)
        try:
            for i in done:  # Same-step autoreset: the next episode's start in place of the end.
                final_observation[i] = observations[i].copy()
                final_info[i] = _info_of(infos, i)
                observations[i], info = self.envs[i].reset()
                for key, value in info.items():
                    if key in infos:
                        infos[key][i] = value
                self._after_reset(i)
                for key in self._static_infos:
                    infos[key][i] = self._static_infos[key][i]
        except BaseException:
            self._request = None  # Some envs reset, some not: the next step needs a reset().
            raise
        infos["final_observation"] = final_observation
        infos["_final_observation"] = terminated | truncated
        infos["final_info"] = final_info
        infos["_final_info"] = terminated | truncated
        return observations, rewards, terminated, truncated, infos

    def _values(self, rows, yaw, x, y, beams_of):
        """The unbounded observation numbers of every env: `rows` (one per env) holds speed,
        yaw rate and steering in its columns 0 to 2; `beams_of(values)` fills the range
        columns."""
        car = self._car
        values = np.empty((self.num_envs, 7 + car.range_beams))
        values[:, :3] = rows
        values[:, 3] = list(map(math.cos, yaw))
        values[:, 4] = list(map(math.sin, yaw))
        np.divide(x, car.world_scale, out=values[:, 5])
        np.divide(y, car.world_scale, out=values[:, 6])
        if car.range_beams > 0:
            beams_of(values[:, 7:])
        return values

    def _read_table(self, response):
        """(values, x, y, crashed, ticks, None) from a response with the vehicles' table;
        raises (naming the sessions) unless every env's car has its row."""
        table = response.vehicle_table
        rows = np.frombuffer(table.rows, dtype="<f8").reshape(-1, max(table.columns, 1))
        if rows.shape[0] != self.num_envs or not np.array_equal(rows[:, :2], self._expected):
            _raise_failed(list(response.results), set(rows[:, 0].astype(int).tolist()))
        car = self._car

        def ranges(out):
            # A car without its scan reads the maximum range on every beam, as in DrivingEnv.
            out[:] = car.range_max_m
            have = min(car.range_beams, table.range_beams)
            if have > 0:
                scanned = rows[:, 12:12 + have]
                out[:, :have] = np.where(np.isnan(scanned), car.range_max_m,
                                         np.minimum(scanned, car.range_max_m))

        x, y = rows[:, 3], rows[:, 4]
        # Columns: speed 6, yaw rate 9, steering 7 (VEHICLE_TABLE_COLUMNS).
        values = self._values(rows[:, (6, 9, 7)], rows[:, 5].tolist(), x, y, ranges)
        return values, x, y, rows[:, 11] != 0.0, rows[:, 2].astype(np.int64), None

    def _read_states(self, results):
        """(values, x, y, crashed, ticks, states) from the results' states (each result is
        read once: its protobuf objects cost more than anything else here); raises (naming
        the sessions) unless every env's car is in its result."""
        rows, vehicles, states, ticks = [], [], [], []
        for result in results:
            state = result.state
            cars = state.vehicles
            if result.code != 0 or len(cars) != 1:
                _raise_failed(results, set())
            vehicle = cars[0]
            vehicles.append(vehicle)
            states.append(state)
            ticks.append(state.time.tick)
            rows += (vehicle.speed_mps, vehicle.yaw_rate_radps, vehicle.steering_angle_rad,
                     vehicle.yaw_rad, vehicle.x_m, vehicle.y_m, 1.0 if vehicle.crashed else 0.0)
        columns = np.fromiter(rows, dtype=np.float64, count=len(rows)).reshape(self.num_envs, 7)
        car = self._car

        def ranges(out):
            full = [car.range_max_m] * car.range_beams
            out[:] = np.minimum(np.array([list(v.range_scan.ranges_m) or full for v in vehicles],
                                         dtype=np.float64), car.range_max_m)

        x, y = columns[:, 4], columns[:, 5]
        values = self._values(columns[:, :3], columns[:, 3].tolist(), x, y, ranges)
        return values, x, y, columns[:, 6] != 0.0, np.array(ticks, dtype=np.int64), states

    def close(self):
        self._request = None
        self._buffer = None
        self._parts = []
        for env in self.envs:
            env.close()
        if self._own_client:
            self.client.close()


# Two marker values a control is given while its request is serialized, to find where its
# action values lie in the bytes.
_MARKERS = (1234567.890625, -7654321.109375)


def _takes_bytes(client):
    """Whether envs may send `client` a StepSessions request's bytes (its private methods for
    that): a pitlane.Client whose step_sessions is the package's own, so that a subclass that
    changes how steps are made sees every step."""
    return (isinstance(client, pitlane.Client)
            and type(client).step_sessions is pitlane.Client.step_sessions)


def _marked_bytes(control, serialize):
    """(bytes, offsets): `serialize()` with `control`'s acceleration and steering set to the
    markers, and where those two doubles lie in the bytes, so that a step writes its action
    there instead of serializing the request (which costs more than the rest of a step);
    offsets None if a marker is not found exactly once."""
    control.acceleration_mps2, control.steering_angle_rad = _MARKERS
    data = serialize()
    offsets = []
    for value in _MARKERS:
        pattern = struct.pack("<d", value)
        start = data.find(pattern)
        if start < 0 or data.find(pattern, start + 1) >= 0:
            return data, None
        offsets.append(start)
    return data, offsets


def _raise_failed(results, with_rows):
    """Raises RuntimeError naming each session whose step failed (its code and message) or
    whose car is gone (no row in `with_rows`, the indices of the sessions with a row, when the
    response was a table; else no car in its state)."""
    problems = []
    for i, result in enumerate(results):
        if result.code != 0:
            problems.append(f"session {result.session_id}: {result.message} (gRPC code "
                            f"{result.code})")
        elif (i not in with_rows) if not result.HasField("state") else \
                len(result.state.vehicles) != 1:
            problems.append(f"session {result.session_id}: its car is not in the session any "
                            "more")
    raise RuntimeError("; ".join(problems) or "the step's results do not match the envs")


def _stack_infos(infos):
    """A list of per-env info dicts as one dict of arrays (Gymnasium's vector form)."""
    return {key: np.array([info[key] for info in infos]) for key in infos[0]}


def _info_of(infos, i):
    """Env i's info dict (Python values) from a dict of arrays."""
    return {key: value[i].item() if isinstance(value[i], np.generic) else value[i]
            for key, value in infos.items()}


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

