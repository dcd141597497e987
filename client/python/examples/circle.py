"""Drives one car around a circle at constant speed and steering angle.

A kinematic bicycle with wheelbase L and steering angle d turns on a circle of
radius R = L / tan(d). Run a server, then: python3 circle.py --ticks 1000
"""

import argparse
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import pitlane  # pylint: disable=wrong-import-position


def run(address, *, ticks=1000, integrator="semi_implicit_euler", speed_mps=5.0,
        steering_angle_rad=0.2, wheelbase_m=2.7, tick_rate_hz=50.0):
    """Returns the car's poses (x_m, y_m, yaw_rad) for ticks 0..ticks."""
    with pitlane.Client(address) as sim:
        sid = sim.create_session(name="circle", tick_rate_hz=tick_rate_hz).session_id
        try:
            car = sim.spawn_vehicle(sid, speed_mps=speed_mps, wheelbase_m=wheelbase_m,
                                    integrator=integrator)
            sim.set_controls(sid, {car: (0.0, steering_angle_rad)})  # (accel, steer)
            poses = []
            for tick in range(ticks + 1):
                state = sim.step(sid, ticks=1) if tick else sim.get_state(sid)
                v = state.vehicles[0]
                poses.append((v.x_m, v.y_m, v.yaw_rad))
            return poses
        finally:
            sim.delete_session(sid)


def fit_circle(points):
    """Least-squares (Kasa) circle through the (x, y, ...) points: (cx, cy, r)."""
    mx = sum(p[0] for p in points) / len(points)  # Work relative to the mean.
    my = sum(p[1] for p in points) / len(points)
    xs, ys = [p[0] - mx for p in points], [p[1] - my for p in points]
    zs = [x * x + y * y for x, y in zip(xs, ys)]
    # Fit x^2 + y^2 = a x + b y + c; with centred data the normal equations split
    # into c = mean(z) and a 2x2 system for (a, b), solved by Cramer's rule.
    sxx, syy = sum(x * x for x in xs), sum(y * y for y in ys)
    sxy = sum(x * y for x, y in zip(xs, ys))
    sxz, syz = sum(x * z for x, z in zip(xs, zs)), sum(y * z for y, z in zip(ys, zs))
    det = sxx * syy - sxy * sxy
    a, b = (sxz * syy - syz * sxy) / det, (syz * sxx - sxz * sxy) / det
    c = sum(zs) / len(zs)
    return mx + a / 2, my + b / 2, math.sqrt(c + (a / 2) ** 2 + (b / 2) ** 2)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--address", default="127.0.0.1:50051")
    parser.add_argument("--ticks", type=int, default=1000)
    parser.add_argument("--integrator", default="semi_implicit_euler",
                        choices=["semi_implicit_euler", "exact_arc"])
    args = parser.parse_args()
    poses = run(args.address, ticks=args.ticks, integrator=args.integrator)
    for tick, (x, y, yaw) in enumerate(poses):
        if tick % 50 == 0:  # Once per simulated second at 50 Hz.
            print(f"tick {tick:5d}: x={x:8.3f} m  y={y:8.3f} m  yaw={yaw:+.3f} rad")
    radius = fit_circle(poses)[2]
    print(f"fitted radius {radius:.6f} m, L / tan(steer) = {2.7 / math.tan(0.2):.6f} m")


if __name__ == "__main__":
    main()
