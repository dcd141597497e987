"""A race shown everywhere (docs/racing.md): its results over HTTP (CSV and JSON, by the
visitor's rights), its standings and events on the Foxglove channel /<session>/race (read by
Foxglove's own client, validated against the advertised JSON Schema, equal to GetState), the
browser viewer's standings table (headless chromium), and a recording that carries the race
(read by @mcap/core) and replays to the same results."""

import csv
import io
import json
import urllib.error
import urllib.request

import pytest

import pitlane
from pitlane import pb
from browser import Browser
from conftest import running_server
from foxglove_node import FoxgloveNode
from test_access import new_token
from test_recording import decode, record_dir_flags

HTTP = "--http_listen=127.0.0.1:0"


def run_race(client, sid, laps=1):
    """The oval-race AI cars race `laps` laps from the grid (LOCKSTEP); returns the results."""
    client.start_race(sid, grid_from_spawn_points=True, laps=laps, countdown_s=1.0)
    for _ in range(12):
        client.step(sid, 500)
        results = client.race_results(sid)
        if results.phase == pb.RACE_PHASE_FINISHED:
            return results
    pytest.fail(f"the race did not finish: {results}")


def get(url, token=None, method="GET"):
    request = urllib.request.Request(url, method=method)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read().decode()


def test_results_over_http_as_csv_and_json_by_the_visitors_rights(tmp_path):
    admin = new_token()
    (tmp_path / "admin.token").write_text(admin)
    with running_server(HTTP, "--auth=token", f"--admin_token_file={tmp_path / 'admin.token'}") as server, \
            pitlane.Client(server.address, token=admin) as client:
        sid = client.create_session(scenario="oval-race", clock_mode="lockstep").session_id
        other = client.create_session(name="other").session_id
        viewer, _ = client.mint_token(sid, role="viewer")
        stranger, _ = client.mint_token(other, role="owner")
        base = f"http://{server.http_address()}/api/sessions/{sid}"
        status, _, body = get(f"{base}/race.csv", viewer)
        assert status == 409 and "no race was called" in json.loads(body)["error"]
        results = run_race(client, sid)

        status, headers, body = get(f"{base}/race.csv", viewer)
        assert status == 200
        assert headers["Content-Type"].startswith("text/csv")
        assert f'filename="race-{sid}.csv"' in headers["Content-Disposition"]
        assert body == client.race_results(sid, "csv")
        rows = list(csv.DictReader(io.StringIO(body, newline="")))
        assert [int(r["vehicle_id"]) for r in rows] == [s.vehicle_id for s in results.standings]
        status, headers, body = get(f"{base}/race.json", viewer)
        assert status == 200 and headers["Content-Type"] == "application/json"
        assert json.loads(body) == json.loads(client.race_results(sid, "json"))

        # Who may read: no token 401, another session's token 404 (it may not see this one),
        # a wrong method 405.
        assert get(f"{base}/race.csv")[0] == 401
        assert get(f"{base}/race.csv", stranger)[0] == 404
        assert get(f"{base}/race.json", viewer, method="POST")[0] == 405
        assert get(f"http://{server.http_address()}/api/sessions/s-nope/race.csv", admin)[0] == 404


def test_foxglove_race_channel_carries_the_standings_and_events():
    with running_server(HTTP) as server, pitlane.Client(server.address) as client:
        sid = client.create_session(scenario="oval-race", clock_mode="lockstep").session_id
        topic = f"/{sid}/race"
        with FoxgloveNode(f"ws://{server.http_address()}/foxglove", "foxglove.websocket.v1") as fox:
            while topic not in fox.topics():
                fox.drain(0.1)
            fox.subscribe(topic)
            results = run_race(client, sid)
            messages = []
            while not messages or messages[-1]["value"]["phase"] != "finished":
                messages += [e for e in fox.drain(0.2)
                             if e["event"] == "message" and e["topic"] == topic]
        for message in messages:
            assert message["schemaErrors"] == [], message["schemaErrors"]
        last = messages[-1]["value"]
        assert last["track"] == "oval" and last["laps"] == 1
        assert [s["vehicle_id"] for s in last["standings"]] == [
            s.vehicle_id for s in results.standings]
        for shown, standing in zip(last["standings"], results.standings):
            assert shown["position"] == standing.position
            assert shown["total_time_s"] == pytest.approx(standing.total_time_s, abs=5e-4)
            assert shown["state"] == "finished"
        # The race's events came with the messages (the stream's frames at 20 Hz).
        kinds = [e["kind"] for m in messages for e in m["value"]["events"]]
        assert kinds.count("start") == 1 and kinds.count("finish") == 2
        assert kinds[-1] == "race_finished"


def test_the_viewer_shows_the_standings_and_downloads_the_results():
    with running_server(HTTP) as server, pitlane.Client(server.address) as client, Browser() as browser:
        sid = client.create_session(scenario="oval-race", clock_mode="lockstep").session_id
        page = browser.open(f"http://{server.http_address()}/?session={sid}")
        assert page["status"] == 200
        browser.wait_for("window.pitlane && pitlane.state.frame")
        assert browser.eval("document.getElementById('race').classList.contains('hidden')")
        client.start_race(sid, grid_from_spawn_points=True, laps=1, countdown_s=1.0)
        client.step(sid, 10)
        browser.wait_for("pitlane.state.race && pitlane.state.race.tick === 10")
        assert browser.eval("pitlane.state.race.phase") == "countdown"
        assert "green in 0.8 s" in browser.eval("document.getElementById('race-clock').innerText")
        for _ in range(12):
            client.step(sid, 500)
            results = client.race_results(sid)
            if results.phase == pb.RACE_PHASE_FINISHED:
                break
        browser.wait_for("pitlane.state.race && pitlane.state.race.phase === 'finished'")
        assert not browser.eval("document.getElementById('race').classList.contains('hidden')")
        rows = browser.eval("""Array.from(document.querySelectorAll('#standings-body tr'))
                               .map(tr => Array.from(tr.cells).map(td => td.innerText))""")
        assert [row[0] for row in rows] == ["1", "2"]
        for row, standing in zip(rows, results.standings):
            assert row[1] == f"{standing.vehicle_name} (#{standing.vehicle_id})"
            assert row[2] == "1"
        leader_time = browser.eval(f"pitlane.lapTime({results.standings[0].total_time_s!r})")
        assert rows[0][3].startswith(leader_time)
        assert rows[1][3].startswith(f"+{results.standings[1].gap_s:.3f} s")
        assert "final results" in browser.eval("document.getElementById('race-clock').innerText")
        # Clicking a row selects its car.
        browser.eval("document.querySelector('#standings-body tr').click()")
        assert browser.eval("pitlane.state.selected") == results.standings[0].vehicle_id
        # The results the page downloads are the server's CSV.
        csv_text = browser.eval(f"fetch('/api/sessions/{sid}/race.csv').then(r => r.text())")
        assert csv_text == client.race_results(sid, "csv")
        browser.screenshot("viewer-race-standings.png")
        # A reset ends the race: the standings go.
        client.reset_session(sid)
        client.step(sid, 1)
        browser.wait_for("pitlane.state.race && pitlane.state.race.phase === 'none'")
        assert browser.eval("document.getElementById('race').classList.contains('hidden')")


def test_a_recorded_race_carries_its_events_and_replays_to_the_same_results(tmp_path):
    with running_server(*record_dir_flags(tmp_path)) as server, \
            pitlane.Client(server.address) as client:
        sid = client.create_session(scenario="oval-race", clock_mode="lockstep").session_id
        recording = client.start_recording(sid)
        results = run_race(client, sid)
        stopped = client.stop_recording(recording.recording_id)
        replay = client.replay_recording(recording.recording_id)
        assert replay.matched, (replay.divergence, replay.stopped_reason)
        replayed = client.race_results(replay.session.session_id)
        assert replayed.phase == pb.RACE_PHASE_FINISHED
        assert replayed.standings == results.standings
    read = decode(tmp_path / f"{recording.recording_id}.mcap", "/pitlane/commands", f"/{sid}/race")
    topics = read["topics"]
    commands = [m["value"] for m in topics["/pitlane/commands"]["messages"]]
    started = [c["start_race"] for c in commands if "start_race" in c]
    assert len(started) == 1 and started[0]["rules"]["laps"] == 1
    assert len(started[0]["grid"]) == 8  # Every car timed on the track: every spawn point.
    race = topics[f"/{sid}/race"]
    assert race["schema"] == "pitlane.Race" and race["schema_errors"] == 0
    kinds = [e["kind"] for m in race["messages"] for e in m["value"]["events"]]
    assert kinds.count("start") == 1 and kinds.count("finish") == 2
    assert race["last"]["value"]["phase"] == "finished"
    assert stopped.frames_lost == 0
