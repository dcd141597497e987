"""The browser viewer in a real browser (Debian's chromium, headless, through puppeteer-core):
the cars drawn where the server says they are (the page's model against GetState, and pixels
of a screenshot at their positions), a click showing a car's details, the buttons changing the
session (GetState confirms), and tokens limiting what a visitor sees and may do. Screenshots
are kept in build/test-artifacts/."""

import json
import math
import time
import urllib.error
import urllib.request

import pytest

import pitlane
import png
from browser import Browser
from conftest import running_server
from test_access import new_token

HTTP = "--http_listen=127.0.0.1:0"
MODEL_COLORS = {"kinematic_bicycle": (0x42, 0x85, 0xF5), "physics_body": (0x33, 0xBA, 0x73),
                "single_track": (0xF5, 0x9E, 0x1F)}
BACKGROUND = (0x1B, 0x1C, 0x21)


def close(color, expected, tolerance=40):
    return all(abs(a - b) <= tolerance for a, b in zip(color, expected))


def test_cars_are_drawn_where_the_server_says_and_a_click_shows_their_details():
    with running_server(HTTP) as server, pitlane.Client(server.address) as client, Browser() as browser:
        sid = client.create_session(name="drawn", bounds=(-40, -30, 40, 30)).session_id
        client.spawn_vehicles(sid, [
            pitlane.vehicle_spec(name="blue", x_m=-20, y_m=0, yaw_rad=0.0, speed_mps=2),
            pitlane.vehicle_spec(name="orange", model="single_track", x_m=10, y_m=12, yaw_rad=1.2,
                                 speed_mps=3),
            pitlane.vehicle_spec(name="green", model="physics_body", x_m=18, y_m=-15,
                                 yaw_rad=-2.0, length_m=6, width_m=2.5),
        ])
        client.set_controls(sid, {2: {"acceleration_mps2": 1.0, "steering_angle_rad": 0.05}})
        client.step(sid, 5)
        state = client.get_state(sid)
        page = browser.open(f"http://{server.http_address()}/?session={sid}")
        assert page["status"] == 200
        assert "default-src 'self'" in page["headers"]["content-security-policy"]
        browser.wait_for("window.pitlane && pitlane.state.frame && pitlane.state.frame.tick === 5"
                         " && pitlane.state.map.walls.length === 1")
        drawn = {v["id"]: v for v in browser.eval("pitlane.vehicles()")}
        assert sorted(drawn) == sorted(v.vehicle_id for v in state.vehicles)
        for vehicle in state.vehicles:
            shown = drawn[vehicle.vehicle_id]
            # The viewer's channel carries float32 positions, yaw in steps of pi/32767 rad and
            # speed in cm/s: the page's numbers are the server's within those steps.
            assert abs(shown["x"] - vehicle.x_m) <= 1e-5 * max(1.0, abs(vehicle.x_m))
            assert abs(shown["y"] - vehicle.y_m) <= 1e-5 * max(1.0, abs(vehicle.y_m))
            assert abs(shown["yaw"] - vehicle.yaw_rad) <= math.pi / 32767
            assert abs(shown["speed"] - vehicle.speed_mps) <= 0.005 + 1e-6
        assert drawn[3]["length"] == 6 and drawn[3]["width"] == 2.5

        # Pixels: each car's colour a quarter of its length behind its body centre (the white
        # heading line runs forward from the centre); the empty floor is background.
        browser.wait_for("pitlane.state.draws > 2")
        points = browser.eval("""(() => {
            const rect = document.getElementById('world').getBoundingClientRect();
            const out = {};
            for (const v of pitlane.vehicles()) {
              const c = Math.cos(v.yaw), s = Math.sin(v.yaw);
              const back = v.offset - v.length / 4;
              const [x, y] = pitlane.worldToScreen(v.x + back * c, v.y + back * s);
              out[v.id] = [Math.round(rect.left + x), Math.round(rect.top + y), v.model];
            }
            const [ex, ey] = pitlane.worldToScreen(-30, 20);
            out.empty = [Math.round(rect.left + ex), Math.round(rect.top + ey), 'floor'];
            return out;
        })()""")
        image = png.read(browser.screenshot("viewer-drawn.png"))
        for key, (x, y, model) in points.items():
            color = image.pixel(x, y)
            expected = BACKGROUND if model == "floor" else MODEL_COLORS[model]
            assert close(color, expected), (key, model, (x, y), color, expected)

        # A click on the orange car opens its details, with the server's telemetry.
        x, y, _ = points["2"]
        browser.call(op="click", x=x, y=y)
        browser.wait_for("pitlane.state.selected === 2 && pitlane.state.telemetry"
                         " && pitlane.state.telemetry.vehicle_id === 2")
        details = browser.eval("document.getElementById('details').innerText")
        assert "orange (#2)" in details and "single_track" in details
        assert "acceleration 1.00 m/s² · steering angle 0.05 rad" in details
        assert f"{state.vehicles[1].speed_mps:.2f} m/s" in details
        assert not browser.eval("document.getElementById('details').classList.contains('hidden')")
        browser.screenshot("viewer-details.png")
        # Clicking the empty floor closes them.
        x, y, _ = points["empty"]
        browser.call(op="click", x=x, y=y)
        browser.wait_for("pitlane.state.selected === null")


def test_buttons_pause_step_and_resume_the_session():
    with running_server(HTTP, "--scenario=demo") as server, \
            pitlane.Client(server.address) as client, Browser() as browser:
        sid = server.startup_session_id()
        browser.open(f"http://{server.http_address()}/?session={sid}")
        browser.wait_for("window.pitlane && pitlane.state.frame && pitlane.state.session")
        assert not browser.eval("document.getElementById('controls').classList.contains('hidden')")
        browser.call(op="clickSelector", selector="#pause")
        browser.wait_for("pitlane.state.session.paused === true")
        assert client.get_session(sid).config.paused
        tick = client.get_state(sid).time.tick
        time.sleep(0.3)
        assert client.get_state(sid).time.tick == tick  # Stopped.
        browser.eval("document.getElementById('ticks').value = '5'")
        browser.call(op="clickSelector", selector="#step")
        browser.wait_for(f"pitlane.state.session.tick === {tick + 5}")
        assert client.get_state(sid).time.tick == tick + 5
        browser.wait_for(f"pitlane.state.frame.tick === {tick + 5}")
        browser.screenshot("viewer-paused.png")
        browser.call(op="clickSelector", selector="#resume")
        browser.wait_for("pitlane.state.session.paused === false")
        assert not client.get_session(sid).config.paused
        time.sleep(0.3)
        assert client.get_state(sid).time.tick > tick + 5
        browser.call(op="clickSelector", selector="#reset")
        browser.wait_for("pitlane.state.session.tick < 20")
    output = "\n".join(server.output)
    assert 'action=clock.set by="anyone"' in output and 'action=session.step' in output
    assert 'action=session.reset' in output


def test_a_recording_played_back_in_the_viewer(tmp_path):
    with running_server(HTTP, f"--record_dir={tmp_path}") as server, \
            pitlane.Client(server.address) as client, Browser() as browser:
        sid = client.create_session(scenario="demo", clock_mode="lockstep").session_id
        recording = client.start_recording(sid)
        live = {0: client.get_state(sid)}
        for _ in range(100):  # 10 s.
            client.step(sid, 5)
            state = client.get_state(sid)
            live[state.time.tick] = state
        client.stop_recording(recording.recording_id)
        played = client.play_recording(recording.recording_id, start_time_s=4.0, paused=True)
        pid = played.session_id
        browser.open(f"http://{server.http_address()}/?session={pid}")
        browser.wait_for("window.pitlane && pitlane.state.frame && pitlane.state.frame.tick === 200"
                         " && pitlane.state.session && pitlane.state.session.playback")
        assert not browser.eval("document.getElementById('playback').classList.contains('hidden')")
        assert browser.eval("document.getElementById('seek').max") == "10"
        assert "4.0 / 10.0 s" in browser.eval("document.getElementById('position').innerText")
        assert "playback (paused)" in browser.eval("document.getElementById('clock').innerText")

        def assert_drawn_as_recorded(tick):
            drawn = {v["id"]: v for v in browser.eval("pitlane.vehicles()")}
            recorded = {v.vehicle_id: v for v in live[tick].vehicles}
            assert sorted(drawn) == sorted(recorded)
            for vehicle_id, vehicle in recorded.items():
                # Recorded to the millimetre, sent as float32.
                assert abs(drawn[vehicle_id]["x"] - vehicle.x_m) <= 0.0006 + 1e-5 * abs(vehicle.x_m)
                assert abs(drawn[vehicle_id]["y"] - vehicle.y_m) <= 0.0006 + 1e-5 * abs(vehicle.y_m)

        assert_drawn_as_recorded(200)
        browser.screenshot("viewer-playback.png")
        # The slider seeks: the session and the picture jump to 7.5 s (the frame of 7.5 s, tick 375).
        browser.eval("""(() => { const seek = document.getElementById('seek');
            seek.value = '7.5'; seek.dispatchEvent(new Event('input'));
            seek.dispatchEvent(new Event('change')); })()""")
        browser.wait_for("pitlane.state.frame.tick === 375")
        assert client.get_session(pid).playback.frame == 75
        assert_drawn_as_recorded(375)
        # Speed and play: to the end at 4x, where it pauses by itself.
        browser.eval("""(() => { const speed = document.getElementById('speed');
            speed.value = '4'; speed.dispatchEvent(new Event('change')); })()""")
        browser.wait_for("pitlane.state.session.real_time_factor === 4")
        browser.call(op="clickSelector", selector="#resume")
        browser.wait_for("pitlane.state.frame.tick === 500", timeout_ms=20000)
        assert_drawn_as_recorded(500)
        for _ in range(100):
            info = client.get_session(pid)
            if info.config.paused:
                break
            time.sleep(0.05)
        assert info.config.paused and info.config.real_time_factor == 4.0
        browser.wait_for("pitlane.state.session.paused === true", timeout_ms=5000)
        assert "10.0 / 10.0 s" in browser.eval("document.getElementById('position').innerText")
    output = "\n".join(server.output)
    assert "action=playback.seek" in output


def test_a_viewer_token_sees_only_its_session_and_may_not_change_it(tmp_path):
    admin = new_token()
    (tmp_path / "admin.token").write_text(admin)
    with running_server(HTTP, "--auth=token", f"--admin_token_file={tmp_path / 'admin.token'}") as server, \
            Browser() as browser:
        with pitlane.Client(server.address, token=admin) as client:
            mine = client.create_session(name="mine").session_id
            other = client.create_session(name="other").session_id
            client.spawn_vehicle(mine)
            viewer, _ = client.mint_token(mine, role="viewer")
        base = f"http://{server.http_address()}"
        browser.open(f"{base}/?token={viewer}")
        browser.wait_for(f"pitlane.state.sessions.length === 1 && pitlane.state.frame")
        assert browser.eval("pitlane.state.sessions.map(s => s.id)") == [mine]
        assert browser.eval("document.getElementById('controls').classList.contains('hidden')")
        statuses = browser.eval(f"""Promise.all([
            ['{mine}', 'pause'], ['{other}', 'pause'], ['{mine}', 'reset']].map(([id, action]) =>
              fetch(`/api/sessions/${{id}}/${{action}}`, {{method: 'POST',
                    headers: {{Authorization: 'Bearer {viewer}'}}}}).then(r => r.status)))""")
        assert statuses == [403, 404, 403]
        # The admin sees both and may change them.
        browser.open(f"{base}/?token={admin}")
        browser.wait_for("pitlane.state.sessions.length === 2")
        assert not browser.eval("document.getElementById('controls').classList.contains('hidden')")
        # The token left the address (kept for the tab only).
        assert "token" not in browser.eval("location.href")
        # No token: nothing to see, and the page says why.
        browser.eval("sessionStorage.clear()")
        browser.open(f"{base}/")
        browser.wait_for("!document.getElementById('message').classList.contains('hidden')")
        assert "token" in browser.eval("document.getElementById('message').innerText")
        assert browser.eval("pitlane.state.sessions.length") == 0
    assert viewer not in "\n".join(server.output) and admin not in "\n".join(server.output)


def api(base, path, method="GET", token=None):
    request = urllib.request.Request(base + path, method=method)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_the_api_names_what_is_wrong():
    with running_server(HTTP, "--scenario=demo") as server, pitlane.Client(server.address) as client:
        base = f"http://{server.http_address()}"
        demo = server.startup_session_id()
        lockstep = client.create_session(name="l").session_id
        status, body = api(base, "/api/sessions")
        assert status == 200 and {s["id"] for s in body["sessions"]} == {demo, lockstep}
        for path, method, code, message in [
            (f"/api/sessions/{demo}/pause", "GET", 405, "method: POST"),
            ("/api/sessions", "POST", 405, "method: GET"),
            (f"/api/sessions/{demo}/jump", "POST", 404, "action: one of pause, resume, step, reset"),
            ("/api/sessions/s-nope/pause", "POST", 404, 'session_id: no session "s-nope"'),
            ("/api/other", "GET", 404, "path: no such API"),
            (f"/api/sessions/{demo}/step", "POST", 409, "Step needs LOCKSTEP or a paused clock"),
            (f"/api/sessions/{lockstep}/step?ticks=0", "POST", 400, "ticks: must be an integer in [1, 10000]"),
            (f"/api/sessions/{lockstep}/step?ticks=x", "POST", 400, "ticks: must be an integer"),
            (f"/api/sessions/{demo}/jump", "POST", 404, "speed, seek"),
            (f"/api/sessions/{demo}/speed", "POST", 400, "real_time_factor: must be a number"),
            (f"/api/sessions/{demo}/speed?real_time_factor=-1", "POST", 400, "real_time_factor"),
            (f"/api/sessions/{demo}/speed?real_time_factor=1e-9", "POST", 400, "real_time_factor"),
            (f"/api/sessions/{demo}/seek?time_s=nan", "POST", 400, "time_s: must be a number"),
            (f"/api/sessions/{demo}/seek?time_s=-2", "POST", 400, "time_s: must be a number"),
            (f"/api/sessions/{demo}/seek?time_s=2", "POST", 409, "plays no recording back"),
        ]:
            got, body = api(base, path, method)
            assert (got, message in body.get("error", "")) == (code, True), (path, got, body)
        # Without tokens the endpoint answers only to loopback names: a page whose own name
        # was pointed at 127.0.0.1 (DNS rebinding) gets nothing, whatever the path.
        for path in ("/api/sessions", "/", "/metrics", "/foxglove"):
            request = urllib.request.Request(base + path,
                                             headers={"Host": "attacker.example:8080"})
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(request, timeout=10)
            assert refused.value.code == 421, path
        request = urllib.request.Request(f"{base}/api/sessions",
                                         headers={"Host": "localhost:8080"})
        assert urllib.request.urlopen(request, timeout=10).status == 200
        # Another site's page may not change a session (no CSRF on a server without tokens).
        request = urllib.request.Request(f"{base}/api/sessions/{lockstep}/reset", method="POST",
                                         headers={"Origin": "http://evil.example"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 403
        assert "Origin: changes come from this server's own pages" in refused.value.read().decode()
        status, body = api(base, f"/api/sessions/{lockstep}/step?ticks=7", "POST")
        assert status == 200 and body["tick"] == 7
        assert client.get_state(lockstep).time.tick == 7


def test_a_selected_car_shows_its_lap_timers():
    """On a race track the details show the car's lap, lap time, last and best lap: the
    server's numbers (docs/racing.md)."""
    with running_server(HTTP) as server, pitlane.Client(server.address) as client, Browser() as browser:
        sid = client.create_session(scenario="oval-race", clock_mode="lockstep").session_id
        for _ in range(10):
            client.step(sid, 500)  # 100 s: a pace car has driven a lap from the line.
        state = client.get_state(sid)
        # A pace car that has driven a lap from the line (the other started past it: its
        # first lap is partial, not a lap time).
        lapped = next(v for v in state.vehicles if v.track_progress.HasField("last_lap_s"))
        page = browser.open(f"http://{server.http_address()}/?session={sid}")
        assert page["status"] == 200
        browser.wait_for("window.pitlane && pitlane.state.frame && pitlane.state.frame.tick === 5000")
        browser.eval(f"pitlane.select({lapped.vehicle_id})")
        browser.wait_for(f"pitlane.state.telemetry && pitlane.state.telemetry.vehicle_id === {lapped.vehicle_id}"
                         " && pitlane.state.telemetry.track_progress")
        browser.wait_for("document.getElementById('details-list').innerText.includes('best lap')")
        details = browser.eval("document.getElementById('details').innerText")
        progress = lapped.track_progress
        lap = browser.eval(f"pitlane.lapTime({progress.last_lap_s!r})")
        assert f"{progress.last_lap_s:.3f}" in lap or ":" in lap
        assert f"oval · on the track · {progress.distance_m:.1f} m" in details
        now = browser.eval(f"pitlane.lapTime({progress.lap_time_s!r})")
        assert f"{progress.laps_completed + 1} · {now} · sector {progress.sector + 1}" in details
        best = browser.eval(f"pitlane.lapTime({progress.best_lap_s!r})")
        assert f"last lap\n{lap}" in details and f"best lap\n{best}" in details
        assert browser.eval("pitlane.lapTime(62.3456)") == "1:02.346"
        assert browser.eval("pitlane.lapTime(58.12)") == "58.120 s"
        browser.screenshot("viewer-lap-timers.png")
