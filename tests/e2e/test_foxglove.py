"""Foxglove's WebSocket protocol on the HTTP endpoint, checked with Foxglove's own client
(npm @foxglove/ws-protocol, under Node): subprotocol negotiation, serverInfo, advertise,
subscribe and unsubscribe, every channel kind decoded (JSON validated against
@foxglove/schemas, protobuf decoded with the advertised descriptors) and equal to GetState of
the same tick; channels that follow sessions and vehicles; tokens; bad client messages."""

import json
import math
import pathlib
import time
import urllib.request

import pytest
from google.protobuf import json_format

import pitlane
from conftest import running_server
from foxglove_node import FoxgloveNode
from test_access import new_token
from websocket_client import HandshakeError, WebSocket

HTTP = "--http_listen=127.0.0.1:0"
KINDS = ("scene", "map", "world_state", "contacts", "log")


def fox_url(server, query=""):
    return f"ws://{server.http_address()}/foxglove{query}"


def session_topics(sid, vehicle_ids=()):
    return [f"/{sid}/{kind}" for kind in KINDS] + [f"/{sid}/vehicle/{v}" for v in vehicle_ids]


def wait_for_topics(fox, topics, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not set(topics) <= set(fox.topics()):
        if time.monotonic() > deadline:
            pytest.fail(f"topics not advertised: {sorted(set(topics) - set(fox.topics()))}")
        fox.drain(0.1)


def first_messages(fox, topics, timeout=10.0):
    """The first message of each topic, after now."""
    found = {}
    deadline = time.monotonic() + timeout
    while set(found) != set(topics):
        if time.monotonic() > deadline:
            pytest.fail(f"no message on {sorted(set(topics) - set(found))}")
        for event in fox.drain(0.1):
            if event["event"] == "message" and event["topic"] in topics:
                found.setdefault(event["topic"], event)
    return found


def make_lockstep_session(client):
    sid = client.create_session(name="fox", bounds=(-60, -60, 60, 60)).session_id
    ids = client.spawn_vehicles(sid, [
        pitlane.vehicle_spec(name="alpha", x_m=0, y_m=0, speed_mps=3),
        pitlane.vehicle_spec(model="single_track", x_m=15, y_m=0, yaw_rad=1.0, speed_mps=5),
        # In contact with the obstacle below from the start.
        pitlane.vehicle_spec(model="force_based", x_m=30, y_m=30, speed_mps=0),
    ])
    client.add_obstacle(sid, center_x_m=31, center_y_m=30, length_m=2, width_m=2, name="box")
    client.set_controls(sid, {ids[1]: {"acceleration_mps2": 1.25, "steering_angle_rad": -0.125}})
    client.step(sid, 10)
    return sid, ids


def test_every_channel_decodes_and_equals_get_state_of_the_same_tick():
    with running_server(HTTP) as server, pitlane.Client(server.address) as client:
        sid, ids = make_lockstep_session(client)
        with FoxgloveNode(fox_url(server), "foxglove.sdk.v1", "foxglove.websocket.v1") as fox:
            assert fox.next()["protocol"] == "foxglove.websocket.v1"
            info = fox.wait_for(lambda e: e["event"] == "serverInfo")["info"]
            assert info["name"] == "Pitlane" and info["sessionId"]
            topics = session_topics(sid, ids)
            wait_for_topics(fox, topics)
            advertised = fox.topics()
            assert advertised[f"/{sid}/scene"]["schemaName"] == "foxglove.SceneUpdate"
            assert advertised[f"/{sid}/world_state"]["encoding"] == "protobuf"
            assert advertised[f"/{sid}/log"]["schemaName"] == "foxglove.Log"
            fox.subscribe(*topics)
            messages = first_messages(fox, topics)
            state = client.get_state(sid)
            assert state.time.tick == 10
            for topic, message in messages.items():
                assert message["schemaErrors"] == [], (topic, message["schemaErrors"])
            # Timestamps: when the server published the frame (ns since the epoch, within a
            # minute of this machine's clock), the same on every channel sent it together,
            # never going back on a connection.
            stamps = [int(e["timestamp"]) for e in fox.seen if e["event"] == "message"]
            assert stamps == sorted(stamps)
            assert abs(stamps[-1] - time.time_ns()) < 60e9
            assert messages[f"/{sid}/contacts"]["value"]["sim_time_s"] == state.time.sim_time_s

            # The protobuf channel is GetState's WorldState, field for field.
            expected = json_format.MessageToDict(state, preserving_proto_field_name=True)
            assert messages[f"/{sid}/world_state"]["value"] == expected

            # The scene: one entity per vehicle, its box within a body length of the state's
            # reference point, turned by its yaw; the one touching the obstacle red.
            scene = messages[f"/{sid}/scene"]["value"]
            assert messages[f"/{sid}/scene"]["validatedWith"] == "@foxglove/schemas"
            entities = {e["id"]: e for e in scene["entities"]}
            assert set(entities) == {f"vehicle/{v.vehicle_id}" for v in state.vehicles}
            for vehicle in state.vehicles:
                cube = entities[f"vehicle/{vehicle.vehicle_id}"]["cubes"][0]
                position, orientation = cube["pose"]["position"], cube["pose"]["orientation"]
                assert math.hypot(position["x"] - vehicle.x_m,
                                  position["y"] - vehicle.y_m) <= cube["size"]["x"] / 2
                assert math.isclose(2 * math.atan2(orientation["z"], orientation["w"]),
                                    vehicle.yaw_rad, abs_tol=1e-9)
            touching = entities[f"vehicle/{ids[2]}"]["cubes"][0]["color"]
            assert touching["r"] > 0.9 and touching["g"] < 0.2

            # Telemetry: the state's own numbers.
            for vehicle in state.vehicles:
                telemetry = messages[f"/{sid}/vehicle/{vehicle.vehicle_id}"]["value"]
                assert telemetry["tick"] == 10
                for field in ("x_m", "y_m", "yaw_rad", "speed_mps", "steering_angle_rad",
                              "acceleration_mps2", "yaw_rate_radps"):
                    assert telemetry[field] == getattr(vehicle, field), field
            assert messages[f"/{sid}/vehicle/{ids[0]}"]["value"]["name"] == "alpha"
            # The controls in effect, in the model's own terms.
            assert messages[f"/{sid}/vehicle/{ids[1]}"]["value"]["controls"] == {
                "acceleration_mps2": 1.25, "steering_angle_rad": -0.125}

            # Contacts as GetState has them; the map holds the walls and the obstacle.
            contacts = messages[f"/{sid}/contacts"]["value"]["contacts"]
            assert [(c["vehicle_id"], c["other_kind"]) for c in contacts] == [
                (c.pair.vehicle_id, "obstacle") for c in state.contacts]
            assert len(contacts) == 1
            map_ids = {e["id"] for e in messages[f"/{sid}/map"]["value"]["entities"]}
            assert {"walls", "obstacle/1"} <= map_ids
            log = messages[f"/{sid}/log"]["value"]
            assert log["name"] == sid and log["level"] in (2, 3)

            # A Step's frames follow on every subscribed channel, at most 20 a second: the
            # newest wins, and the last one comes even though the clock then stops. After
            # unsubscribing, nothing more comes on that channel.
            client.step(sid, 5)
            fox.wait_for(lambda e: e["event"] == "message" and e["topic"] == f"/{sid}/world_state"
                         and e["value"]["time"]["tick"] == "15", what="the frame of tick 15")
            fox.unsubscribe(f"/{sid}/scene")
            fox.drain(0.2)
            client.step(sid, 5)
            events = fox.drain(1.0)
            ticks = [int(e["value"]["time"]["tick"]) for e in events
                     if e["event"] == "message" and e["topic"] == f"/{sid}/world_state"]
            assert ticks and ticks[-1] == 20 and ticks == sorted(ticks), ticks
            stamps = [int(e["timestamp"]) for e in events if e["event"] == "message"]
            assert stamps == sorted(stamps)  # One clock for every channel and session.
            assert not [e for e in events if e["event"] == "message" and e["topic"] == f"/{sid}/scene"]


def test_channels_follow_sessions_and_vehicles():
    with running_server(HTTP) as server, pitlane.Client(server.address) as client:
        with FoxgloveNode(fox_url(server)) as fox:
            fox.wait_for(lambda e: e["event"] == "serverInfo")
            sid = client.create_session(name="later").session_id
            wait_for_topics(fox, session_topics(sid))
            fox.subscribe(f"/{sid}/log")
            intro = fox.wait_for(lambda e: e["event"] == "message")
            assert intro["value"]["message"] == (
                'watching session "later": 0 vehicles, 0 obstacles, tick 0, lockstep clock')

            def log_line(text):
                return lambda e: e["event"] == "message" and e["value"]["message"] == text

            mark = fox.mark()
            vehicle = client.spawn_vehicle(sid, x_m=1.0)
            client.step(sid, 1)
            wait_for_topics(fox, [f"/{sid}/vehicle/{vehicle}"])
            fox.wait_for(log_line(f"vehicles added: {vehicle}"), since=mark)
            mark = fox.mark()
            client.remove_vehicle(sid, vehicle)
            client.step(sid, 1)
            fox.wait_for(log_line(f"vehicles removed: {vehicle}"), since=mark)
            fox.drain(0.3)
            assert f"/{sid}/vehicle/{vehicle}" not in fox.topics()
            mark = fox.mark()
            client.reset_session(sid)
            fox.wait_for(log_line("the session was reset"), since=mark)
            client.delete_session(sid)
            deadline = time.monotonic() + 5
            while any(t.startswith(f"/{sid}/") for t in fox.topics()):
                assert time.monotonic() < deadline, "the deleted session's channels stay"
                fox.drain(0.1)


def test_subprotocol_rate_and_bad_client_messages():
    with running_server(HTTP) as server, pitlane.Client(server.address) as client:
        address = server.http_address()
        # Foxglove's app offers two; Lichtblick only the one we speak.
        ws = WebSocket(address, protocols=("foxglove.sdk.v1", "foxglove.websocket.v1"))
        assert ws.protocol == "foxglove.websocket.v1"
        ws.close()
        for protocols, query, message in [
            ((), "", "Sec-WebSocket-Protocol: offer foxglove.websocket.v1"),
            (("foxglove.sdk.v1",), "", "Sec-WebSocket-Protocol: offer foxglove.websocket.v1"),
            (("foxglove.websocket.v1",), "?rate_hz=0", "rate_hz: must be a number in [1, 60]"),
            (("foxglove.websocket.v1",), "?rate_hz=1e400", "rate_hz: must be a number in [1, 60]"),
        ]:
            with pytest.raises(HandshakeError) as refused:
                WebSocket(address, path="/foxglove" + query, protocols=protocols)
            assert refused.value.status == 400 and message in refused.value.body
        for key in ("A" * 64, "not base64 at all!!!!!!!", "AAAA"):
            with pytest.raises(HandshakeError) as refused:
                WebSocket(address, key=key)
            assert refused.value.status == 400
            assert "Sec-WebSocket-Key: must be 16 bytes in base64" in refused.value.body

        sid = client.create_session(name="bad").session_id
        ws = WebSocket(address)
        channels = {}
        while f"/{sid}/contacts" not in channels:
            message = ws.receive_json()
            if message["op"] == "advertise":
                channels.update({c["topic"]: c["id"] for c in message["channels"]})

        def status_after(send):
            send()
            while True:
                message = ws.receive_json()
                if message["op"] == "status":
                    return message

        for text, level, expected in [
            ("garbage", 2, 'message: must be a JSON object, got "garbage"'),
            ('{"op":"publish"}', 2, 'op: "publish" is not offered'),
            ('{"op":"subscribe","subscriptions":[{"id":-1,"channelId":1}]}', 2,
             "subscriptions[0].id: must be an integer in [0, 4294967295]"),
            ('{"op":"subscribe","subscriptions":[{"id":1,"channelId":99999}]}', 1,
             "channelId: no channel 99999"),
            ("[" * 100000, 2, "message: must be a JSON object"),
        ]:
            status = status_after(lambda: ws.send_text(text))
            assert (status["level"], expected in status["message"]) == (level, True), status
        ws.send_frame(0x2, b"\x01binary")  # Client publishing is not offered: ignored.
        # A message beyond 256 KiB, or a fragmented one, ends the connection.
        for frames in ([(0x1, b" " * (300 << 10), True)], [(0x1, b'{"op":', False)]):
            big = WebSocket(address)
            big.receive_json()
            for opcode, payload, fin in frames:
                big.send_frame(opcode, payload, fin=fin)
            with pytest.raises(ConnectionError):
                while True:
                    big.receive()
            big.sock.close()
        # Still serving: a good subscription gets its message.
        ws.send_json({"op": "subscribe",
                      "subscriptions": [{"id": 5, "channelId": channels[f"/{sid}/contacts"]}]})
        ws.send_json({"op": "subscribe",
                      "subscriptions": [{"id": 5, "channelId": channels[f"/{sid}/log"]}]})
        got_data = got_duplicate = False
        while not (got_data and got_duplicate):
            opcode, payload = ws.receive()
            if opcode == 0x2:
                assert payload[:5] == b"\x01\x05\x00\x00\x00"
                got_data = True
            elif opcode == 0x1 and b"already subscribed" in payload:
                got_duplicate = True
        ws.close()


def test_tokens_decide_which_sessions_a_client_sees(tmp_path):
    admin = new_token()
    (tmp_path / "admin.token").write_text(admin)
    with running_server(HTTP, "--auth=token", f"--admin_token_file={tmp_path / 'admin.token'}") as server:
        with pitlane.Client(server.address, token=admin) as client:
            mine = client.create_session(name="mine").session_id
            other = client.create_session(name="other").session_id
            viewer, viewer_id = client.mint_token(mine, role="viewer")
        address = server.http_address()
        for headers, query in [((), ""), ((), "?token=plt_nope"),
                               ((f"Authorization: Bearer {new_token()}",), "")]:
            with pytest.raises(HandshakeError) as refused:
                WebSocket(address, path="/foxglove" + query, headers=headers)
            assert refused.value.status == 401
            assert admin not in refused.value.body and viewer not in refused.value.body
        # A viewer token (query, header or cookie) sees its session only; the admin sees all.
        for headers, query in [((), f"?token={viewer}"),
                               ((f"Authorization: Bearer {viewer}",), ""),
                               ((f"Cookie: theme=dark; pitlane_token={viewer}",), "")]:
            ws = WebSocket(address, path="/foxglove" + query, headers=headers)
            assert ws.receive_json()["op"] == "serverInfo"
            topics = [c["topic"] for c in ws.receive_json()["channels"]]
            assert topics and all(t.startswith(f"/{mine}/") for t in topics), topics
            ws.close()
        with FoxgloveNode(fox_url(server, f"?token={admin}")) as fox:
            fox.wait_for(lambda e: e["event"] == "serverInfo")
            wait_for_topics(fox, session_topics(mine) + session_topics(other))
        # The cookie counts only from the server's own pages (no cross-site WebSocket).
        with pytest.raises(HandshakeError) as refused:
            WebSocket(address, headers=(f"Cookie: pitlane_token={viewer}",
                                        "Origin: http://evil.example"))
        assert refused.value.status == 401
        # One token holds at most 32 WebSocket connections.
        held = [WebSocket(address, path=f"/foxglove?token={viewer}") for _ in range(32)]
        with pytest.raises(HandshakeError) as refused:
            WebSocket(address, path=f"/foxglove?token={viewer}")
        assert refused.value.status == 429 and "one token may hold 32" in refused.value.body
        for ws in held:
            ws.close()
        # Revoking the token ends its connections.
        with FoxgloveNode(fox_url(server, f"?token={viewer}")) as fox:
            wait_for_topics(fox, session_topics(mine))
            with pitlane.Client(server.address, token=admin) as client:
                client.revoke_token(mine, viewer_id)
            fox.wait_for(lambda e: e["event"] == "close", timeout=5)
        assert admin not in "\n".join(server.output) and viewer not in "\n".join(server.output)


def test_web_metrics_move():
    with running_server(HTTP) as server, pitlane.Client(server.address) as client:
        sid = client.create_session(name="m").session_id
        client.spawn_vehicle(sid)
        with FoxgloveNode(fox_url(server)) as fox:
            wait_for_topics(fox, session_topics(sid))
            fox.subscribe(f"/{sid}/scene")
            first_messages(fox, [f"/{sid}/scene"])
            page = urllib.request.urlopen(f"http://{server.http_address()}/metrics", timeout=10).read().decode()
            assert 'pitlane_web_connections{protocol="foxglove"} 1' in page
            sent = [l for l in page.splitlines() if l.startswith("pitlane_web_bytes_sent_total ")]
            assert sent and float(sent[0].split()[1]) > 1000


def test_shipped_layout_names_topics_and_fields_the_server_has():
    layout_text = (pathlib.Path(__file__).resolve().parents[2] / "dashboards"
                   / "foxglove-layout.json").read_text()
    with running_server(HTTP, "--scenario=demo") as server:
        sid = server.startup_session_id()
        layout = json.loads(layout_text.replace("SESSION_ID", sid))
        config = layout["configById"]
        topics = set(config["3D!pitlane"]["topics"])
        paths = [p["value"] for key, panel in config.items() if key.startswith("Plot!")
                 for p in panel["paths"]]
        topics |= {path.split(".")[0] for path in paths}
        topics |= {config["RosOut!log"]["topicToRender"], config["RawMessages!state"]["topicPath"],
                   config["Table!race"]["topicPath"].split(".")[0]}
        with FoxgloveNode(fox_url(server)) as fox:
            wait_for_topics(fox, topics)
            vehicle_topics = sorted({path.split(".")[0] for path in paths})
            fox.subscribe(*vehicle_topics)
            messages = first_messages(fox, vehicle_topics)
            for path in paths:
                topic, field = path.split(".")
                assert isinstance(messages[topic]["value"][field], (int, float)), path


def test_lap_timers_on_the_telemetry_channels_equal_get_state():
    """A car timed on a race track: its telemetry carries the lap timers (validated against
    the advertised JSON Schema) and the protobuf channel the whole track_progress, as
    GetState has them (docs/racing.md)."""
    with running_server(HTTP) as server, pitlane.Client(server.address) as client:
        sid = client.create_session(scenario="oval-race", clock_mode="lockstep").session_id
        for _ in range(5):
            client.step(sid, 500)
        state = client.get_state(sid)
        ids = [v.vehicle_id for v in state.vehicles]
        with FoxgloveNode(fox_url(server), "foxglove.websocket.v1") as fox:
            topics = session_topics(sid, ids)
            wait_for_topics(fox, topics)
            fox.subscribe(*topics)
            messages = first_messages(fox, topics)
            for topic, message in messages.items():
                assert message["schemaErrors"] == [], (topic, message["schemaErrors"])
            expected = json_format.MessageToDict(state, preserving_proto_field_name=True)
            assert messages[f"/{sid}/world_state"]["value"] == expected
            for vehicle in state.vehicles:
                progress = vehicle.track_progress
                assert progress.track == "oval"
                timers = messages[f"/{sid}/vehicle/{vehicle.vehicle_id}"]["value"]["track_progress"]
                assert timers["track"] == "oval"
                assert timers["distance_m"] == progress.distance_m
                assert timers["laps_completed"] == progress.laps_completed
                assert timers["lap_time_s"] == progress.lap_time_s
                assert timers["on_track"] == progress.on_track
                assert timers.get("last_lap_s") == (
                    progress.last_lap_s if progress.HasField("last_lap_s") else None)
            # 50 s in: a pace car has crossed the line (its first lap counted from its spawn).
            assert any(v.track_progress.laps_completed == 1 for v in state.vehicles)
