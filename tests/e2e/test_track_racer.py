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

import track_racer

TRACK_M = 651.3


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
    # Laps are counted from the spawn, 140 m past the line.
    assert s["distance_m"] >= 140.0 + (s["laps"] - 1) * TRACK_M + (TRACK_M - 140.0) - 1e-6


def test_the_same_controller_gives_the_same_laps(summaries):
    # BARRIER: each tick waits for the answer to its observation, so a run is determined by
    # the controller; two runs are equal to the last bit.
    assert summaries[0] == summaries[1]
