"""Sets up a class on a Pitlane server that checks tokens (--auth=token): one file per team.

From a roster (one team name per line; blank lines and # comments ignored), either

  sessions  a session per team: the team owns it (its file holds the owner token), and
            may spawn, step, reset and mint tokens in it, and create a few sessions of its
            own (--max_sessions_per_client); or
  race      one race session (a scenario, default oval-race) with a car per team at the
            scenario's spawn points: each team's file holds the driver token of its car
            (Drive and SetControls of that car, reads of the race); the instructor keeps the
            race's owner token and runs the clock.

Each team file is JSON: {"address", "session_id", "vehicle_id" (race), "role", "token",
"token_id", "root_certificates" (the CA file, for TLS)}. Hand each team its file (it is a
password); a student runs, for example:

  python3 controller.py --token-file red.json

A viewer token for a projector or dashboard goes to viewer.json, and the instructor's own
tokens to instructor.json. Revoke a team's token with Client.revoke_token(session_id,
token_id) (its Drive stream ends), or detach its controller with Client.detach_controller.

Usage:
  python3 classroom.py --address HOST:50051 --admin-token-file admin.token \\
      [--ca ca.crt] [--mode sessions|race] [--scenario oval-race] --out teams/ roster.txt
"""

import argparse
import json
import os
import pathlib
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import pitlane  # pylint: disable=wrong-import-position

_TEAM_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$")


def read_roster(path):
    """The team names of a roster file, in order; ValueError for a bad or repeated name."""
    teams = []
    for number, line in enumerate(pathlib.Path(path).read_text().splitlines(), 1):
        name = line.split("#", 1)[0].strip()
        if not name:
            continue
        if not _TEAM_NAME.match(name):
            raise ValueError(f"{path}:{number}: team names are letters, digits, - and _ "
                             f"(at most 63), got {name!r}")
        if name in teams:
            raise ValueError(f"{path}:{number}: team {name!r} is listed twice")
        teams.append(name)
    if not teams:
        raise ValueError(f"{path}: no teams")
    return teams


def write_secret(path, content):
    """Writes `content` as JSON readable by the owner alone (it holds a token)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # A file that was there already keeps its mode otherwise.
    with os.fdopen(fd, "w") as f:
        json.dump(content, f, indent=2)
        f.write("\n")


def set_up(address, admin_token, teams, out_dir, *, mode="sessions", scenario="oval-race",
           ca_path=None):
    """Creates the sessions (and cars) and writes a file per team; returns {team: file}."""
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ca = pathlib.Path(ca_path).read_bytes() if ca_path else None
    common = {"address": address,
              "root_certificates": str(pathlib.Path(ca_path).resolve()) if ca_path else None}
    files = {}
    with pitlane.Client(address, token=admin_token, root_certificates=ca) as admin:
        if mode == "sessions":
            for team in teams:
                sid = admin.create_session(name=f"team-{team}").session_id
                token, token_id = admin.owner_tokens[sid]
                files[team] = out / f"{team}.json"
                write_secret(files[team], {**common, "team": team, "session_id": sid,
                                           "role": "owner", "token": token,
                                           "token_id": token_id})
            return files
        race = admin.create_session(name="race", scenario=scenario)
        sid = race.session_id
        points = list(race.config.spawn_points)
        if len(points) < len(teams):
            raise ValueError(f"scenario {scenario!r} has {len(points)} spawn points for "
                             f"{len(teams)} teams")
        specs = [pitlane.vehicle_spec(x_m=p.pose.x_m, y_m=p.pose.y_m, yaw_rad=p.pose.yaw_rad,
                                      name=team) for team, p in zip(teams, points)]
        cars = admin.spawn_vehicles_with_tokens(sid, specs)
        for team, (car, token, token_id) in zip(teams, cars):
            files[team] = out / f"{team}.json"
            write_secret(files[team], {**common, "team": team, "session_id": sid,
                                       "vehicle_id": car, "role": "driver", "token": token,
                                       "token_id": token_id})
        viewer, viewer_id = admin.mint_token(sid, "viewer")
        write_secret(out / "viewer.json", {**common, "session_id": sid, "role": "viewer",
                                           "token": viewer, "token_id": viewer_id})
        owner, owner_id = admin.owner_tokens[sid]
        write_secret(out / "instructor.json", {**common, "session_id": sid, "role": "owner",
                                               "token": owner, "token_id": owner_id})
    return files


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("roster", help="one team name per line")
    parser.add_argument("--address", default="127.0.0.1:50051")
    parser.add_argument("--admin-token-file", required=True,
                        help="the server's admin token (its --admin_token_file)")
    parser.add_argument("--ca", help="the CA certificate of a TLS server (PEM)")
    parser.add_argument("--mode", choices=["sessions", "race"], default="sessions")
    parser.add_argument("--scenario", default="oval-race", help="race mode: the scenario")
    parser.add_argument("--out", default="teams", help="where the team files go")
    args = parser.parse_args()
    admin_token = pathlib.Path(args.admin_token_file).read_text().strip()
    files = set_up(args.address, admin_token, read_roster(args.roster), args.out,
                   mode=args.mode, scenario=args.scenario, ca_path=args.ca)
    for team, path in files.items():
        print(f"{team}: {path}")


if __name__ == "__main__":
    main()
