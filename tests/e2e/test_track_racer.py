"""The track-racing example (client/python/examples/track_racer.py) against the real server:
a controller that sees only its track sensors laps the oval-race scenario's 651 m oval in a
BARRIER session (each tick waits for its answer), stays on the track, and its laps are timed
by the server (docs/racing.md).

What bounds the lap times: the controller's target speed is between 8 and 22 m/s, so a full
lap takes between 651.3 / 22 = 29.6 s and 651.3 / 8 = 81.4 s. The grid slot is 140 m past the
line, so the first lap (from the spawn) is 511 m; 180 s leaves room for at least two laps at
the slowest.
"""

import pytest

import pitlane

import track_racer

TRACK_M = 651.2986  # The oval's centre line, 320 points.


@pytest.fixture(scope="module")
def summaries(address):
    return [track_racer.run(address, 180.0, out=lambda line: None) for _ in range(2)]


def test_the_racer_laps_the_oval_on_its_track_sensors(summaries):
    s = summaries[0]
    assert not s["crashed"]
    assert s["laps"] >= 2, s
    assert s["off_track_count"] == 0 and s["off_track_s"] == 0.0, s
    assert TRACK_M / track_racer.MAX_SPEED_MPS <= s["best_lap_s"] <= s["last_lap_s"]
    assert s["last_lap_s"] <= TRACK_M / track_racer.MIN_SPEED_MPS
    # Lap k is completed when the distance from the line first reaches k x the length.
    assert s["laps"] * TRACK_M <= s["distance_m"] < (s["laps"] + 1) * TRACK_M


def test_the_same_controller_gives_the_same_laps(summaries):
    # BARRIER: each tick waits for the answer to its observation, so a run is determined by
    # the controller; two runs are equal to the last bit.
    assert summaries[0] == summaries[1]


def test_joining_a_session_races_in_it_and_leaves_it_as_it_was(address, client, new_session):
    sid = new_session(scenario="oval-race", clock_mode="lockstep")
    with pytest.raises(ValueError, match='no spawn point "grid 9"'):
        track_racer.run(address, 5.0, session_id=sid, grid_slot=9, out=lambda line: None)
    s = track_racer.run(address, 12.0, session_id=sid, grid_slot=2, out=lambda line: None)
    assert not s["crashed"] and s["off_track_count"] == 0
    assert s["distance_m"] > 140.0 + 80.0  # 12 s from a standing start: 95 m.
    info = client.get_session(sid)
    assert len(info.vehicles) == 2  # The pace cars: the racer's car is gone.
    assert info.config.clock_mode == pitlane.pb.CLOCK_MODE_BARRIER
