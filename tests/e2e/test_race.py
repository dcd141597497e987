"""Race control through the real server (docs/racing.md): a race of the oval-race scenario's
two AI cars and one car driven by a Drive controller (the track-racing example's control
law), from the grid to its results; the results as CSV and JSON; events in Step and
StreamStates; and every bad call refused, naming its field, changing nothing.

The oval-race grid slots lie 140 m past the line of the 651.3 m oval: lap 1 of a race from
the grid is 511 m (partial: no lap time), so a 1-lap race ends at the line.
"""

import csv
import io
import json

import grpc
import pytest

import pitlane
from pitlane import pb

import track_racer

RULES = pb.RaceRules(laps=1, countdown_s=2.0)


def expected_penalties(standing, rules):
    return (standing.jump_starts * rules.penalty_jump_start_s +
            standing.contacts * rules.penalty_contact_s +
            standing.off_tracks * rules.penalty_off_track_s)


@pytest.fixture(scope="module")
def race(client):
    """A 1-lap race of the two AI cars and a student's Drive car, run to its end in BARRIER
    (each tick waits for the student's controller: the same race every run)."""
    sid = client.create_session(scenario="oval-race", clock_mode="barrier",
                                collision_policy="report").session_id
    ai = [v.vehicle_id for v in client.get_state(sid).vehicles]
    spec = pb.VehicleSpec(name="student, \"fast\"")
    spec.kinematic_bicycle.SetInParent()
    spec.track_sensor.SetInParent()
    (me,) = client.spawn_vehicles(sid, [spec])
    # The student's car on the first grid slot, the AI cars behind it.
    called = client.start_race(sid, vehicle_ids=[me] + ai, grid_from_spawn_points=True,
                               laps=RULES.laps, countdown_s=RULES.countdown_s)
    observations, events = [], []
    with client.drive(sid, me) as driver:
        obs = driver.observe()
        start_tick = obs.time.tick
        while obs.race.phase != pb.RACE_PHASE_FINISHED:
            assert obs.time.tick < start_tick + 50 * 200, "the race lasts 200 s at most"
            observations.append(obs)
            events.extend(obs.race_events)
            control = (track_racer.control_law(obs.vehicle)
                       if obs.race.phase == pb.RACE_PHASE_RACING
                       else {"acceleration_mps2": 0.0, "steering_angle_rad": 0.0})
            driver.send(obs.time.tick, **control)
            obs = driver.observe()
        observations.append(obs)
        events.extend(obs.race_events)
    return dict(sid=sid, me=me, ai=ai, called=called, observations=observations, events=events,
                results=client.race_results(sid), csv=client.race_results(sid, "csv"),
                json=client.race_results(sid, "json"), state=client.get_state(sid))


def test_the_race_is_called_with_its_grid_and_the_scenarios_rules(race, client):
    called = race["called"]
    assert called.track == "oval"
    assert called.phase == pb.RACE_PHASE_COUNTDOWN
    assert called.race_time_s == pytest.approx(-RULES.countdown_s)
    # Rules unset in the call are the scenario's (laps 3, countdown 5) or the defaults.
    assert called.rules.laps == 1 and called.rules.countdown_s == 2.0
    assert called.rules.penalty_contact_s == 2.0 and called.rules.finish_timeout_s == 120.0
    assert client.get_session(race["sid"]).config.race.laps == 3
    # Placed on the session's spawn points in the order named, at rest.
    first = race["observations"][0]
    slots = {p.name: p.pose for p in client.get_session(race["sid"]).config.spawn_points}
    assert first.vehicle.x_m == pytest.approx(slots["grid 1"].x_m, abs=1e-9)
    assert first.vehicle.y_m == pytest.approx(slots["grid 1"].y_m, abs=1e-9)
    assert first.vehicle.speed_mps == 0.0
    assert [s.vehicle_id for s in called.standings] == sorted(
        [race["me"]] + race["ai"], key=lambda v: -1 if v == race["me"] else v)


def test_the_drive_car_sees_the_countdown_then_races(race):
    observations = race["observations"]
    countdown = [o for o in observations if o.race.phase == pb.RACE_PHASE_COUNTDOWN]
    racing = [o for o in observations if o.race.phase == pb.RACE_PHASE_RACING]
    assert countdown and racing
    # 2 s of countdown at 50 Hz: the start is at the 100th tick after the call.
    assert racing[0].time.tick - countdown[0].time.tick == 100
    assert all(o.vehicle.speed_mps == 0.0 for o in countdown)
    # The standings are in every observation, with this car in them.
    assert all(race["me"] in [s.vehicle_id for s in o.race.standings] for o in observations)


def test_the_results_classify_every_car_by_the_rules(race):
    results = race["results"]
    assert results.phase == pb.RACE_PHASE_FINISHED
    standings = list(results.standings)
    assert [s.position for s in standings] == [1, 2, 3]
    assert {s.vehicle_id for s in standings} == {race["me"]} | set(race["ai"])
    assert all(s.finished and not s.retired and s.laps == 1 for s in standings)
    # The AI cars waited on the grid: no jump start.
    assert all(s.jump_starts == 0 for s in standings)
    leader = standings[0]
    for s in standings:
        assert s.penalties_s == pytest.approx(expected_penalties(s, results.rules))
        assert s.total_time_s == pytest.approx(s.race_time_s + s.penalties_s)
        assert s.gap_s == pytest.approx(s.total_time_s - leader.total_time_s)
        # 511 m from the grid at 8 to 22 m/s (the example) or at most 12 m/s (the AI cars).
        assert 511.0 / 22.0 < s.race_time_s < 511.0 / 6.0
        # Lap 1 from a grid past the line is partial: no lap time.
        assert not s.HasField("best_lap_s")
    totals = [s.total_time_s for s in standings]
    assert totals == sorted(totals)
    assert [s.vehicle_name for s in standings if s.vehicle_id == race["me"]] == [
        "student, \"fast\""]
    # GetState carries the same final standings.
    assert race["state"].race == results


def test_race_events_reach_the_drive_car_in_order(race):
    events = race["events"]
    kinds = [e.kind for e in events]
    assert kinds.count(pb.RACE_EVENT_KIND_START) == 1
    start = next(e for e in events if e.kind == pb.RACE_EVENT_KIND_START)
    assert start.vehicle_id == 0 and start.race_time_s == 0.0
    # Only its own events, and the race's (vehicle 0).
    assert {e.vehicle_id for e in events} <= {0, race["me"]}
    mine = {e.kind: e for e in events if e.vehicle_id == race["me"]}
    standing = next(s for s in race["results"].standings if s.vehicle_id == race["me"])
    assert mine[pb.RACE_EVENT_KIND_FINISH].race_time_s == standing.race_time_s
    assert mine[pb.RACE_EVENT_KIND_LAP].lap == 1
    assert mine[pb.RACE_EVENT_KIND_LAP].duration_s == pytest.approx(standing.race_time_s)
    # Sectors: the oval's three end in lap order; the grid is in sector 1, so lap 1 ends
    # sectors 1 (part), 2 and 3.
    sectors = [e.sector for e in events if e.kind == pb.RACE_EVENT_KIND_SECTOR]
    assert sectors == [0, 1, 2]
    penalties = [e for e in events if e.kind == pb.RACE_EVENT_KIND_PENALTY]
    assert len(penalties) == standing.contacts + standing.off_tracks + standing.jump_starts
    assert kinds[-1] == pb.RACE_EVENT_KIND_RACE_FINISHED


def test_the_results_as_csv_and_json_are_the_standings(race):
    results = race["results"]
    rows = list(csv.DictReader(io.StringIO(race["csv"], newline="")))
    assert race["csv"].endswith("\r\n")
    assert len(rows) == len(results.standings)
    document = json.loads(race["json"])
    assert document["session_id"] == race["sid"] and document["track"] == "oval"
    assert document["phase"] == "finished" and document["rules"]["laps"] == 1
    for row, item, s in zip(rows, document["standings"], results.standings):
        assert int(row["position"]) == item["position"] == s.position
        assert int(row["vehicle_id"]) == item["vehicle_id"] == s.vehicle_id
        assert row["vehicle_name"] == item["vehicle_name"] == s.vehicle_name
        assert row["state"] == item["state"] == "finished"
        assert float(row["total_time_s"]) == pytest.approx(s.total_time_s, abs=5e-4)
        assert item["total_time_s"] == pytest.approx(s.total_time_s, abs=5e-4)
        assert float(row["gap_s"]) == pytest.approx(s.gap_s, abs=5e-4)
        assert row["best_lap_s"] == "" and item["best_lap_s"] is None
        assert int(row["contacts"]) == item["contacts"] == s.contacts


def test_step_and_stream_states_carry_lap_and_race_events(client, new_session):
    sid = new_session(scenario="oval-race", clock_mode="lockstep")
    ai = [v.vehicle_id for v in client.get_state(sid).vehicles]
    client.start_race(sid, grid_from_spawn_points=True, laps=1, countdown_s=0.5)
    stream = client.stream_states(sid, vehicle_ids=[ai[0]])
    first = next(stream)
    assert first.state.race.phase == pb.RACE_PHASE_COUNTDOWN
    response = client.stub.Step(pb.StepRequest(session_id=sid, ticks=1000))
    assert [e.kind for e in response.race_events][:1] == [pb.RACE_EVENT_KIND_START]
    assert response.race_events[0].tick == first.state.time.tick + 25
    # Sector events of both cars' lap timers (the grid is 140 m into sector 1 of 3).
    assert {e.vehicle_id for e in response.lap_events} == set(ai)
    assert all(e.track == "oval" and not e.lap_completed for e in response.lap_events[:2])
    seen = []
    for message in stream:
        seen.extend(message.race_events)
        if message.state.time.tick == response.state.time.tick:
            break
    stream.cancel()
    assert seen and {e.vehicle_id for e in seen} <= {0, ai[0]}
    assert pb.RACE_EVENT_KIND_START in [e.kind for e in seen]


def call_error(fn):
    with pytest.raises(grpc.RpcError) as error:
        fn()
    return error.value.code(), error.value.details()


def test_bad_race_calls_name_their_field_and_change_nothing(client, new_session):
    sid = new_session(scenario="oval-race", clock_mode="lockstep")
    code, details = call_error(lambda: client.race_results(sid))
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "no race was called" in details
    before = client.state_hash(sid)
    for kwargs, want_code, want in [
        (dict(track="nowhere"), grpc.StatusCode.INVALID_ARGUMENT, 'track: no track "nowhere"'),
        (dict(laps=0), grpc.StatusCode.INVALID_ARGUMENT, "rules.laps: must be in [1, 1000]"),
        (dict(countdown_s=float("nan")), grpc.StatusCode.INVALID_ARGUMENT, "rules.countdown_s"),
        (dict(penalty_contact_s=-1.0), grpc.StatusCode.INVALID_ARGUMENT,
         "rules.penalty_contact_s"),
        (dict(vehicle_ids=[999]), grpc.StatusCode.NOT_FOUND, "vehicle_ids[0]: no vehicle 999"),
        (dict(vehicle_ids=[1, 1]), grpc.StatusCode.INVALID_ARGUMENT, "vehicle_ids[1]"),
    ]:
        code, details = call_error(lambda: client.start_race(sid, **kwargs))
        assert code == want_code and want in details, (kwargs, details)
    assert client.state_hash(sid) == before
    # More cars than grid slots (8 spawn points): refused, no car moved.
    extra = client.spawn_vehicles(sid, [pb.VehicleSpec(
        kinematic_bicycle={}, initial_pose=pb.Pose2D(x_m=float(x), y_m=40.0))
        for x in range(-60, 50, 15)])
    before = client.state_hash(sid)
    code, details = call_error(lambda: client.start_race(sid, grid_from_spawn_points=True))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "grid_from_spawn_points: 10 cars, but only 8 grid slots" in details
    assert client.state_hash(sid) == before
    # A car not in the race on a grid slot: refused, naming the spawn point.
    (blocker,) = client.spawn_vehicles(sid, [pitlane.vehicle_spec(x_m=40.0, y_m=-42.5)])
    code, details = call_error(lambda: client.start_race(
        sid, vehicle_ids=[1, 2], grid_from_spawn_points=True))
    assert code == grpc.StatusCode.FAILED_PRECONDITION
    assert (f'grid_from_spawn_points: spawn point "grid 1": vehicle {blocker} (not in this '
            "race) stands on the grid slot of vehicle 1") in details
    client.remove_vehicle(sid, blocker)
    # One race at a time, unless replaced.
    client.start_race(sid, vehicle_ids=extra[:2])
    code, details = call_error(lambda: client.start_race(sid))
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "replace" in details
    assert len(client.start_race(sid, replace=True).standings) == 10
    code, details = call_error(lambda: client.stub.GetRaceResults(
        pb.GetRaceResultsRequest(session_id=sid, format=7)))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and details.startswith("format:")
    # A reset forgets the race.
    client.reset_session(sid)
    assert not client.get_state(sid).HasField("race")


def test_spawn_points_are_checked_as_the_grid_slots_they_may_become(client):
    config = pb.SessionConfig(name="bad grid")
    config.spawn_points.add(name="grid 1", pose=pb.Pose2D(x_m=float("nan")))
    code, details = call_error(lambda: client.stub.CreateSession(
        pb.CreateSessionRequest(config=config)))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "spawn_points[0].pose.x_m: must be finite" in details
    # A track but no spawn points: no grid to put the cars on.
    config = pb.SessionConfig(name="no grid")
    config.tracks.add(name="square", closed=True, lane_width_m=8.0, points=[
        pb.Point2D(x_m=0, y_m=0), pb.Point2D(x_m=100, y_m=0), pb.Point2D(x_m=100, y_m=100),
        pb.Point2D(x_m=0, y_m=100)])
    sid = client.stub.CreateSession(pb.CreateSessionRequest(config=config)).session.session_id
    client.spawn_vehicles(sid, [pitlane.vehicle_spec(x_m=10.0, y_m=0.0)])
    code, details = call_error(lambda: client.start_race(sid, grid_from_spawn_points=True))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "grid_from_spawn_points: the session has no spawn points" in details
    assert client.start_race(sid).track == "square"  # Where it stands: fine.
    client.delete_session(sid)
