#!/usr/bin/python3
"""Writes the shipped scenarios (scenarios/*.textproto) from their geometry.

Each scenario is a pitlane.v1.SessionConfig in protobuf text format, the same schema
CreateSession takes. The files are committed; this script is how they were made (re-run it
after changing a layout): /usr/bin/python3 scenarios/generate.py
"""

import math
import os
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "client", "python"))

from google.protobuf import text_format  # pylint: disable=wrong-import-position

from pitlane import pb  # pylint: disable=wrong-import-position


def oval(half_straight, radius, step=2.0, offset=0.0):
    """Centre line of an oval (counter-clockwise): two straights of 2 * half_straight along x
    at y = -(radius + offset) and +(radius + offset), joined by semicircles about
    (+-half_straight, 0). Points about `step` metres apart."""
    r = radius + offset
    points = []
    n = max(2, int(2 * half_straight / step))
    for i in range(n):  # Bottom straight, going +x.
        points.append((-half_straight + 2 * half_straight * i / n, -r))
    m = max(4, int(math.pi * r / step))
    for i in range(m):  # Right semicircle.
        a = -math.pi / 2 + math.pi * i / m
        points.append((half_straight + r * math.cos(a), r * math.sin(a)))
    for i in range(n):  # Top straight, going -x.
        points.append((half_straight - 2 * half_straight * i / n, r))
    for i in range(m):  # Left semicircle.
        a = math.pi / 2 + math.pi * i / m
        points.append((-half_straight + r * math.cos(a), r * math.sin(a)))
    return points


def along(points, s, closed=True):
    """The pose at arc length s along a polyline: (x, y, yaw)."""
    segments = list(zip(points, points[1:] + (points[:1] if closed else [])))
    total = sum(math.dist(a, b) for a, b in segments)
    s %= total
    for a, b in segments:
        length = math.dist(a, b)
        if s <= length:
            t = s / length
            return (a[0] + t * (b[0] - a[0]), a[1] + t * (b[1] - a[1]),
                    math.atan2(b[1] - a[1], b[0] - a[0]))
        s -= length
    a, b = segments[-1]
    return (b[0], b[1], math.atan2(b[1] - a[1], b[0] - a[0]))


def length(points, closed=True):
    segments = list(zip(points, points[1:] + (points[:1] if closed else [])))
    return sum(math.dist(a, b) for a, b in segments)


def track(name, points, closed=True, lane_width=4.0, sectors=()):
    return pb.Track(name=name, closed=closed, lane_width_m=lane_width,
                    points=[pb.Point2D(x_m=round(x, 3), y_m=round(y, 3)) for x, y in points],
                    sector_starts_m=[round(s, 1) for s in sectors])


def follower(track_name, speed, style="DRIVER_STYLE_NORMAL", **extra):
    return pb.Driver(route_follower=pb.RouteFollower(
        track=track_name, target_speed_mps=speed, style=style, **extra))


def car(name, pose, model="kinematic_bicycle", driver=None, **model_fields):
    spec = pb.VehicleSpec(name=name,
                          initial_pose=pb.Pose2D(x_m=round(pose[0], 3), y_m=round(pose[1], 3),
                                                 yaw_rad=round(pose[2], 6)))
    getattr(spec, model).SetInParent()
    for key, value in model_fields.items():
        setattr(getattr(spec, model), key, value)
    if driver is not None:
        spec.driver.CopyFrom(driver)
    return spec


def box(name, x, y, length_m, width_m, yaw=0.0):
    return pb.ObstacleSpec(name=name, center_x_m=x, center_y_m=y, yaw_rad=yaw,
                           length_m=length_m, width_m=width_m)


def demo():
    """A 317 m oval with seven AI cars, one of each model and style, and obstacles in the
    infield and outside: what a newcomer sees at once."""
    line = oval(half_straight=40.0, radius=25.0)
    total = length(line)
    config = pb.SessionConfig(
        name="demo", tick_rate_hz=50.0, clock_mode=pb.CLOCK_MODE_REALTIME,
        collision_policy=pb.COLLISION_POLICY_REPORT,
        bounds=pb.WorldBounds(min_x_m=-90.0, min_y_m=-60.0, max_x_m=90.0, max_y_m=60.0),
        tracks=[track("oval", line, lane_width=5.0)])
    config.obstacles.extend([
        box("infield west", -20.0, 0.0, 3.0, 3.0), box("infield centre", 0.0, 0.0, 6.0, 2.0),
        box("infield east", 20.0, 0.0, 3.0, 3.0),
        box("grandstand", 0.0, -42.0, 40.0, 4.0), box("pit wall", 0.0, 40.0, 40.0, 1.0),
    ])
    lineup = [
        ("bicycle", "kinematic_bicycle", "DRIVER_STYLE_NORMAL", 10.0),
        ("teaching body", "physics_body", "DRIVER_STYLE_NORMAL", 9.0),
        ("front drive", "front_wheel_drive", "DRIVER_STYLE_CAUTIOUS", 10.0),
        ("all-wheel drive", "all_wheel_drive", "DRIVER_STYLE_NORMAL", 11.0),
        ("force car", "force_based", "DRIVER_STYLE_SPEEDER", 12.0),
        ("single track", "single_track", "DRIVER_STYLE_TURTLE", 10.0),
        ("four wheel", "four_wheel", "DRIVER_STYLE_NORMAL", 10.0),
    ]
    for i, (name, model, style, speed) in enumerate(lineup):
        pose = along(line, total * i / len(lineup))
        config.vehicles.append(car(name, pose, model, follower("oval", speed, style)))
    return config


def oval_race():
    """A 651 m oval for a class race: three sectors (the bottom straight, the right turn and
    the top straight, the left turn), eight spawn points on a staggered grid for student cars
    (clients spawn there and drive with Drive), two AI cars, and the race's rules (3 laps, a
    5 s countdown: StartRace with grid_from_spawn_points lines every car up)."""
    line = oval(half_straight=100.0, radius=40.0)
    config = pb.SessionConfig(
        name="oval-race", tick_rate_hz=50.0, clock_mode=pb.CLOCK_MODE_REALTIME,
        collision_policy=pb.COLLISION_POLICY_STOP,
        bounds=pb.WorldBounds(min_x_m=-160.0, min_y_m=-70.0, max_x_m=160.0, max_y_m=70.0),
        tracks=[track("oval", line, lane_width=10.0,
                      sectors=(200.0, 200.0 + math.pi * 40.0 + 200.0))],
        race=pb.RaceRules(laps=3, countdown_s=5.0))
    for i in range(8):
        x = -60.0 + 10.0 * (i // 2) * 1.0
        y = -40.0 + (2.5 if i % 2 else -2.5)
        config.spawn_points.append(pb.SpawnPoint(
            name=f"grid {i + 1}", pose=pb.Pose2D(x_m=-x - 20.0, y_m=y, yaw_rad=0.0)))
    config.vehicles.append(car("pace 1", along(line, 300.0), "kinematic_bicycle",
                               follower("oval", 12.0)))
    config.vehicles.append(car("pace 2", along(line, 450.0), "single_track",
                               follower("oval", 12.0)))
    config.obstacles.append(box("infield", 0.0, 0.0, 160.0, 40.0))
    return config


def parking_lot():
    """A 60 m x 50 m lot: four rows of parked cars (static obstacles) along two aisles, a
    cruising AI car looping the aisles, and spawn points in the free middle strip."""
    config = pb.SessionConfig(
        name="parking-lot", tick_rate_hz=50.0, clock_mode=pb.CLOCK_MODE_LOCKSTEP,
        collision_policy=pb.COLLISION_POLICY_STOP,
        bounds=pb.WorldBounds(min_x_m=-30.0, min_y_m=-25.0, max_x_m=30.0, max_y_m=25.0))
    for row, y in enumerate((-19.0, -7.0, 7.0, 19.0)):
        for k in range(16):
            x = -22.5 + 3.0 * k
            if (row + k) % 5 == 2:
                continue  # A free bay now and then.
            config.obstacles.append(box(f"parked {row}-{k}", x, y, 1.8, 4.5, yaw=0.0))
    loop = [(-26.0, -13.0), (26.0, -13.0), (26.0, 13.0), (-26.0, 13.0)]
    config.tracks.append(track("aisles", loop, lane_width=4.0))
    config.vehicles.append(car("lot patrol", along(loop, 10.0), "kinematic_bicycle",
                               follower("aisles", 4.0, max_lateral_acceleration_mps2=1.5)))
    for i in range(4):  # In the free strip between the middle rows, clear of the aisles.
        config.spawn_points.append(pb.SpawnPoint(
            name=f"bay {i + 1}", pose=pb.Pose2D(x_m=-15.0 + 8.0 * i, y_m=0.0, yaw_rad=0.0)))
    return config


def intersection():
    """Two two-lane roads crossing at the origin; four AI cars on crossing routes, timed to
    pass the junction seconds apart (REPORT: a student car that cuts in sees the contacts)."""
    config = pb.SessionConfig(
        name="intersection", tick_rate_hz=50.0, clock_mode=pb.CLOCK_MODE_REALTIME,
        collision_policy=pb.COLLISION_POLICY_REPORT,
        bounds=pb.WorldBounds(min_x_m=-210.0, min_y_m=-210.0, max_x_m=210.0, max_y_m=210.0))
    lanes = {
        "eastbound": [(-200.0, -1.75), (200.0, -1.75)],
        "westbound": [(200.0, 1.75), (-200.0, 1.75)],
        "northbound": [(1.75, -200.0), (1.75, 200.0)],
        "southbound": [(-1.75, 200.0), (-1.75, -200.0)],
    }
    for name, points in lanes.items():
        config.tracks.append(track(name, points, closed=False, lane_width=3.5))
    # Corner blocks (buildings) leave the roads and a 12 m junction clear.
    for sx in (-1, 1):
        for sy in (-1, 1):
            config.obstacles.append(box(f"block {sx:+d}{sy:+d}", sx * 40.0, sy * 40.0, 60.0, 60.0))
    starts = [("northbound", 30.0), ("eastbound", 60.0), ("southbound", 80.0),
              ("westbound", 100.0)]
    for i, (lane, distance) in enumerate(starts):
        points = lanes[lane]
        pose = along(points, 200.0 - distance, closed=False)
        config.vehicles.append(car(f"{lane} car", pose, "kinematic_bicycle",
                                   follower(lane, 10.0)))
    for i, (name, pose) in enumerate([("west approach", (-60.0, -1.75, 0.0)),
                                      ("south approach", (1.75, -60.0, math.pi / 2))]):
        config.spawn_points.append(pb.SpawnPoint(
            name=name, pose=pb.Pose2D(x_m=pose[0], y_m=pose[1], yaw_rad=pose[2])))
    return config


def highway():
    """A 3.7 km three-lane ring for scale: 300 AI cars (mostly kinematic bicycles, some
    single-track and force-based), 37 m apart per lane, each keeping its lane and its gap."""
    config = pb.SessionConfig(
        name="highway", tick_rate_hz=50.0, clock_mode=pb.CLOCK_MODE_REALTIME,
        collision_policy=pb.COLLISION_POLICY_REPORT, max_vehicles=1000)
    for lane in range(3):
        line = oval(half_straight=700.0, radius=150.0, step=5.0, offset=4.0 * lane)
        name = f"lane {lane + 1}"
        config.tracks.append(track(name, line, lane_width=3.8))
        total = length(line)
        per_lane = 100
        for k in range(per_lane):
            pose = along(line, total * k / per_lane)
            model = ("single_track" if k % 10 == 3 else
                     "force_based" if k % 10 == 7 else "kinematic_bicycle")
            speed = 22.0 + 3.0 * lane
            config.vehicles.append(car(f"{name} car {k + 1}", pose, model,
                                       follower(name, speed, max_lateral_acceleration_mps2=3.0)))
    return config


SCENARIOS = {
    "demo": demo,
    "oval-race": oval_race,
    "parking-lot": parking_lot,
    "intersection": intersection,
    "highway": highway,
}


def main():
    for name, make in SCENARIOS.items():
        config = make()
        doc = " ".join(line.strip() for line in (make.__doc__ or "").strip().splitlines())
        header = (f"# The \"{name}\" scenario: a pitlane.v1.SessionConfig in protobuf text format.\n"
                  + "".join(f"# {line}\n" for line in textwrap.wrap(doc, 94))
                  + "# Generated by scenarios/generate.py; see docs/scenarios.md.\n")
        path = os.path.join(HERE, f"{name}.textproto")
        with open(path, "w", encoding="utf-8") as out:
            out.write(header + text_format.MessageToString(config))
        print(f"{path}: {len(config.vehicles)} vehicles, {len(config.obstacles)} obstacles, "
              f"{len(config.tracks)} tracks")


if __name__ == "__main__":
    main()
