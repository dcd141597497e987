"""The circle example against the real server, checked against the physics.

Kinematic bicycle, rear-axle reference point, constant speed v and steering d:
the exact path is a circle of radius R = L / tan(d), yaw rate v tan(d) / L.
"""

import math

import circle
import pytest

V, STEER, L, RATE, TICKS = 5.0, 0.2, 2.7, 50.0, 1000
DT = 1.0 / RATE
R = L / math.tan(STEER)
YAW_PER_TICK = V * DT * math.tan(STEER) / L


def wrap(angle):
    """Wraps an angle to (-pi, pi]."""
    wrapped = math.remainder(angle, 2.0 * math.pi)
    return math.pi if wrapped == -math.pi else wrapped


@pytest.fixture(scope="module")
def circle_poses(address):
    """Returns poses(integrator): circle.run's poses, run once per integrator."""
    cache = {}

    def poses(integrator):
        if integrator not in cache:
            cache[integrator] = circle.run(
                address, ticks=TICKS, integrator=integrator, speed_mps=V,
                steering_angle_rad=STEER, wheelbase_m=L, tick_rate_hz=RATE)
        return cache[integrator]

    return poses


@pytest.mark.parametrize("integrator", ["semi_implicit_euler", "exact_arc"])
def test_yaw_advances_at_the_yaw_rate(circle_poses, integrator):
    """Both integrators turn by exactly v dt tan(d) / L per tick."""
    poses = circle_poses(integrator)
    assert len(poses) == TICKS + 1
    assert poses[0] == (0.0, 0.0, 0.0)
    for k, (_, _, yaw) in enumerate(poses):
        assert -math.pi < yaw <= math.pi
        assert abs(wrap(yaw - k * YAW_PER_TICK)) < 1e-9, f"tick {k}"


def test_semi_implicit_euler_circle(circle_poses):
    poses = circle_poses("semi_implicit_euler")
    cx, cy, r = circle.fit_circle(poses)
    assert abs(r - R) / R < 0.01
    # Its points are the vertices of a regular polygon with side v dt and
    # turning angle YAW_PER_TICK, so they lie on the circumscribed circle.
    r_polygon = (V * DT / 2.0) / math.sin(YAW_PER_TICK / 2.0)
    assert abs(r - r_polygon) / r_polygon < 1e-6
    for k, (x, y, _) in enumerate(poses):
        assert abs(math.hypot(x - cx, y - cy) - r_polygon) < 1e-6, f"tick {k}"


def test_exact_arc_circle(circle_poses):
    poses = circle_poses("exact_arc")
    x0, y0, yaw0 = poses[0]
    cx, cy = x0 - R * math.sin(yaw0), y0 + R * math.cos(yaw0)
    for k, (x, y, _) in enumerate(poses):
        assert abs(math.hypot(x - cx, y - cy) - R) < 1e-6, f"tick {k}"
    yaw = yaw0 + V * (TICKS * DT) * math.tan(STEER) / L
    x_end, y_end, yaw_end = poses[-1]
    assert abs(x_end - (cx + R * math.sin(yaw))) < 1e-6
    assert abs(y_end - (cy - R * math.cos(yaw))) < 1e-6
    assert abs(wrap(yaw_end - wrap(yaw))) < 1e-6
    assert abs(circle.fit_circle(poses)[2] - R) < 1e-6
