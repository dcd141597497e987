// Pitlane's browser viewer: a top-down view of one session, drawn on a canvas from the
// server's own WebSocket (Foxglove's protocol, /foxglove?viewer=1, with the compact
// "/<session>/viewer" channel) and its /api/sessions. Served by the server, nothing else
// loaded. window.pitlane exposes the model for tests and for the curious.
"use strict";

(() => {
  const MODELS = ["kinematic_bicycle", "physics_body", "single_track", "front_wheel_drive",
    "all_wheel_drive", "force_based", "four_wheel"];
  const MODEL_COLORS = ["#4285f5", "#33ba73", "#f59e1f", "#9e66e6", "#1abfcc", "#e659b3", "#bfb333"];
  const CONTACT_COLOR = "#f22626";
  const CRASHED_COLOR = "#737373";
  const FLAG_CRASHED = 1;
  const FLAG_CONTACT = 2;
  const FLAG_DRIVER = 4;
  const YAW_SCALE = Math.PI / 32767;

  const params = new URLSearchParams(location.search);
  // The token, from the address (then taken out of it, so that it is not in the history or in
  // a link someone copies) or kept for this tab.
  const token = params.get("token") || sessionStorage.getItem("pitlane_token") || "";
  if (params.has("token")) {
    sessionStorage.setItem("pitlane_token", token);
    const url = new URL(location.href);
    url.searchParams.delete("token");
    history.replaceState(null, "", url);
  }

  // Behind a proxy in front of several servers (docs/deployment.md), the proxy sends each
  // request to the server that holds the session the address names (or to the replica it
  // names): the page's own requests carry the same.
  const routing = new URLSearchParams();
  for (const key of ["session", "replica"]) {
    if (params.get(key)) routing.set(key, params.get(key));
  }

  const state = {
    sessions: [],
    sessionId: null,
    session: null,          // The entry of /api/sessions for sessionId.
    channels: new Map(),    // topic -> channel id
    subscriptions: new Map(), // subscription id -> {kind, topic}
    nextSubscription: 1,
    roster: null,           // {version, ids, names, length_m, width_m, offset_m}
    frame: null,            // The latest frame, decoded (see decodeFrame).
    map: { routes: [], walls: [], obstacles: [], spawns: [] },
    selected: null,         // Vehicle id.
    telemetry: null,        // Latest telemetry JSON of the selected vehicle.
    race: null,             // Latest pitlane.Race JSON of the session (its standings).
    follow: false,
    view: { cx: 0, cy: 0, scale: 4 }, // World point at the canvas centre; pixels per metre.
    fitted: false,
    framesReceived: 0,
    draws: 0,
    fps: 0,
    lastDrawMs: 0,
    connected: false,
    apiError: "",
    seeking: false,         // The playback slider is held.
  };

  const $ = (id) => document.getElementById(id);
  const canvas = $("world");
  const ctx = canvas.getContext("2d", { alpha: false });
  let dirty = true;
  let ws = null;
  let reconnectDelay = 1000;

  // ---- Coordinates -------------------------------------------------------------------

  function size() {
    return { w: canvas.clientWidth, h: canvas.clientHeight };
  }
  function worldToScreen(x, y) {
    const { w, h } = size();
    const v = state.view;
    return [(x - v.cx) * v.scale + w / 2, h / 2 - (y - v.cy) * v.scale];
  }
  function screenToWorld(sx, sy) {
    const { w, h } = size();
    const v = state.view;
    return [(sx - w / 2) / v.scale + v.cx, (h / 2 - sy) / v.scale + v.cy];
  }

  // ---- Network -----------------------------------------------------------------------

  function authHeaders() {
    return token ? { Authorization: `Bearer ${token}` } : {};
  }

  function showMessage(text) {
    const box = $("message");
    box.textContent = text;
    box.classList.toggle("hidden", !text);
  }

  async function refreshSessions() {
    let body;
    try {
      const response = await fetch(`/api/sessions${routing.toString() ? `?${routing}` : ""}`,
                                   { headers: authHeaders(), cache: "no-store" });
      body = await response.json();
      if (!response.ok) {
        state.apiError = body.error || `HTTP ${response.status}`;
        if (response.status === 401) {
          state.apiError += ". Open this page with ?token=<your token> in its address.";
        }
        showMessage(state.apiError);
        return;
      }
      state.apiError = "";
    } catch (error) {
      showMessage(`Cannot reach the server: ${error}`);
      return;
    }
    state.sessions = body.sessions;
    const select = $("session");
    const known = (id) => id && body.sessions.some((s) => s.id === id);
    // The one shown, else the one the address names, else the first (a session from an old
    // address may be gone).
    const wanted = [state.sessionId, params.get("session"), body.sessions[0] && body.sessions[0].id]
      .find(known);
    const options = body.sessions.map((s) => `${s.id}\u0000${s.name || s.id}`).join("\u0001");
    if (select.dataset.options !== options) {
      select.replaceChildren(...body.sessions.map((s) => {
        const option = document.createElement("option");
        option.value = s.id;
        option.textContent = s.name ? `${s.name} (${s.id})` : s.id;
        return option;
      }));
      select.dataset.options = options;
    }
    if (!body.sessions.length) {
      showMessage("No session to show yet: create one (scripts/run.sh starts the demo).");
    } else if (state.connected) {
      showMessage("");
    }
    if (!state.connected && state.sessions.length) showMessage("Connecting...");
    if (wanted && body.sessions.some((s) => s.id === wanted)) {
      select.value = wanted;
      if (wanted !== state.sessionId) selectSession(wanted);
    } else if (state.sessionId && !body.sessions.some((s) => s.id === state.sessionId)) {
      selectSession(body.sessions[0] ? body.sessions[0].id : null);
    }
    state.session = state.sessions.find((s) => s.id === state.sessionId) || null;
    updateControls();
    updateClock();
  }

  function connect() {
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const query = new URLSearchParams({ viewer: "1", rate_hz: params.get("rate_hz") || "30" });
    for (const [key, value] of routing) query.set(key, value);
    if (token) query.set("token", token);
    ws = new WebSocket(`${scheme}//${location.host}/foxglove?${query}`, ["foxglove.websocket.v1"]);
    ws.binaryType = "arraybuffer";
    ws.onopen = () => { state.connected = true; reconnectDelay = 1000; showMessage(state.apiError); };
    ws.onclose = () => {
      state.connected = false;
      state.channels.clear();
      state.subscriptions.clear();
      showMessage(state.apiError || "Disconnected from the server; reconnecting...");
      setTimeout(connect, reconnectDelay);
      reconnectDelay = Math.min(reconnectDelay * 2, 10000);
    };
    ws.onmessage = (event) => {
      if (typeof event.data === "string") onText(JSON.parse(event.data));
      else onBinary(event.data);
    };
  }

  function send(message) {
    if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(message));
  }

  function onText(message) {
    if (message.op === "advertise") {
      for (const channel of message.channels) state.channels.set(channel.topic, channel.id);
      if (state.sessionId) subscribeSession();
    } else if (message.op === "unadvertise") {
      const gone = new Set(message.channelIds);
      for (const [topic, id] of state.channels) if (gone.has(id)) state.channels.delete(topic);
      for (const [subscription, entry] of state.subscriptions) {
        if (gone.has(entry.channel)) state.subscriptions.delete(subscription);
      }
    } else if (message.op === "status" && message.level >= 2) {
      console.warn("server:", message.message);
    }
  }

  function subscribe(kind, topic) {
    for (const entry of state.subscriptions.values()) if (entry.topic === topic) return;
    const channel = state.channels.get(topic);
    if (channel === undefined) return;
    const id = state.nextSubscription++;
    state.subscriptions.set(id, { kind, topic, channel });
    send({ op: "subscribe", subscriptions: [{ id, channelId: channel }] });
  }

  function unsubscribeWhere(predicate) {
    const ids = [];
    for (const [id, entry] of state.subscriptions) if (predicate(entry)) ids.push(id);
    for (const id of ids) state.subscriptions.delete(id);
    if (ids.length) send({ op: "unsubscribe", subscriptionIds: ids });
  }

  function subscribeSession() {
    const sid = state.sessionId;
    subscribe("viewer", `/${sid}/viewer`);
    subscribe("map", `/${sid}/map`);
    subscribe("race", `/${sid}/race`);
    if (state.selected !== null) subscribe("telemetry", `/${sid}/vehicle/${state.selected}`);
  }

  function selectSession(id) {
    if (id === state.sessionId) return;
    unsubscribeWhere(() => true);
    state.sessionId = id;
    state.session = state.sessions.find((s) => s.id === id) || null;
    state.roster = null;
    state.frame = null;
    state.race = null;
    updateRace();
    state.map = { routes: [], walls: [], obstacles: [], spawns: [] };
    state.fitted = false;
    select(null);
    if (id) {
      const url = new URL(location.href);
      url.searchParams.set("session", id);
      history.replaceState(null, "", url);
      subscribeSession();
    }
    updateControls();
    dirty = true;
  }

  function onBinary(buffer) {
    const view = new DataView(buffer);
    if (view.getUint8(0) !== 1) return;
    const subscription = view.getUint32(1, true);
    const entry = state.subscriptions.get(subscription);
    if (!entry) return;
    const payload = new Uint8Array(buffer, 13);
    if (entry.kind === "viewer") onViewer(payload);
    else if (entry.kind === "map") onMap(JSON.parse(new TextDecoder().decode(payload)));
    else if (entry.kind === "race") {
      state.race = JSON.parse(new TextDecoder().decode(payload));
      updateRace();
    } else if (entry.kind === "telemetry") {
      state.telemetry = JSON.parse(new TextDecoder().decode(payload));
      updateDetails();
      dirty = true;
    }
  }

  function onViewer(payload) {
    if (payload[0] === 0x52) { // 'R': the roster
      state.roster = JSON.parse(new TextDecoder().decode(payload.subarray(1)));
      return;
    }
    if (payload[0] !== 0x46) return; // 'F'
    const frame = decodeFrame(payload);
    if (!state.roster || state.roster.version !== frame.rosterVersion) return;
    state.frame = frame;
    state.framesReceived++;
    if (!state.fitted) fit();
    if (state.follow && state.selected !== null) centreOn(state.selected);
    updateClock();
    if (state.selected !== null) {
      if (indexOf(state.selected) < 0) select(null);
      else updateDetails();
    }
    dirty = true;
  }

  // The compact frame (server/web/frame_json.h): header, then 16 bytes per vehicle.
  function decodeFrame(payload) {
    const view = new DataView(payload.buffer, payload.byteOffset, payload.byteLength);
    const count = view.getUint32(24, true);
    const frame = {
      rosterVersion: view.getUint32(4, true),
      tick: Number(view.getBigUint64(8, true)),
      simTime: view.getFloat64(16, true),
      count,
      contacts: view.getUint32(28, true),
      x: new Float32Array(count), y: new Float32Array(count), yaw: new Float32Array(count),
      speed: new Float32Array(count), steer: new Float32Array(count),
      flags: new Uint8Array(count), model: new Uint8Array(count),
    };
    let at = 32;
    for (let i = 0; i < count; i++, at += 16) {
      frame.x[i] = view.getFloat32(at, true);
      frame.y[i] = view.getFloat32(at + 4, true);
      frame.yaw[i] = view.getInt16(at + 8, true) * YAW_SCALE;
      frame.speed[i] = view.getInt16(at + 10, true) / 100;
      frame.steer[i] = view.getInt16(at + 12, true) / 10000;
      frame.flags[i] = view.getUint8(at + 14);
      frame.model[i] = view.getUint8(at + 15);
    }
    return frame;
  }

  // The map channel's foxglove.SceneUpdate, as lines and boxes to draw.
  function onMap(scene) {
    const map = { routes: [], walls: [], obstacles: [], spawns: [] };
    for (const entity of scene.entities) {
      if (entity.id.startsWith("route/")) {
        for (const line of entity.lines) {
          map.routes.push({ closed: line.type === 1, width: line.thickness,
                            points: line.points.map((p) => [p.x, p.y]) });
        }
      } else if (entity.id === "walls") {
        for (const line of entity.lines) map.walls.push(line.points.map((p) => [p.x, p.y]));
      } else if (entity.id.startsWith("obstacle/")) {
        for (const cube of entity.cubes) {
          const q = cube.pose.orientation;
          map.obstacles.push({ x: cube.pose.position.x, y: cube.pose.position.y,
                               yaw: 2 * Math.atan2(q.z, q.w), length: cube.size.x, width: cube.size.y });
        }
      } else if (entity.id.startsWith("spawn/")) {
        for (const arrow of entity.arrows) {
          const q = arrow.pose.orientation;
          map.spawns.push({ x: arrow.pose.position.x, y: arrow.pose.position.y,
                            yaw: 2 * Math.atan2(q.z, q.w) });
        }
      }
    }
    state.map = map;
    state.fitted = false;
    if (state.frame) fit();
    dirty = true;
  }

  // ---- Model queries -----------------------------------------------------------------

  function indexOf(id) {
    if (!state.roster || !state.frame) return -1;
    const ids = state.roster.ids;
    let lo = 0;
    let hi = ids.length - 1;
    while (lo <= hi) { // Ids are ascending.
      const mid = (lo + hi) >> 1;
      if (ids[mid] === id) return mid;
      if (ids[mid] < id) lo = mid + 1; else hi = mid - 1;
    }
    return -1;
  }

  // The vehicle drawn under world point (x, y), or null.
  function vehicleAt(x, y, slack = 0) {
    const f = state.frame;
    const r = state.roster;
    if (!f || !r) return null;
    let best = null;
    let bestDistance = Infinity;
    for (let i = 0; i < f.count; i++) {
      const c = Math.cos(f.yaw[i]);
      const s = Math.sin(f.yaw[i]);
      const cx = f.x[i] + r.offset_m[i] * c;
      const cy = f.y[i] + r.offset_m[i] * s;
      const dx = x - cx;
      const dy = y - cy;
      const along = dx * c + dy * s;
      const across = -dx * s + dy * c;
      const halfL = r.length_m[i] / 2 + slack;
      const halfW = r.width_m[i] / 2 + slack;
      if (Math.abs(along) <= halfL && Math.abs(across) <= halfW) {
        const distance = dx * dx + dy * dy;
        if (distance < bestDistance) { bestDistance = distance; best = r.ids[i]; }
      }
    }
    return best;
  }

  // Screen position of a vehicle's body centre.
  function vehicleScreen(id) {
    const i = indexOf(id);
    if (i < 0) return null;
    const f = state.frame;
    const o = state.roster.offset_m[i];
    return worldToScreen(f.x[i] + o * Math.cos(f.yaw[i]), f.y[i] + o * Math.sin(f.yaw[i]));
  }

  // ---- View --------------------------------------------------------------------------

  function bounds() {
    let minX = Infinity, minY = Infinity, maxX = -Infinity, maxY = -Infinity;
    const add = (x, y) => {
      minX = Math.min(minX, x); maxX = Math.max(maxX, x);
      minY = Math.min(minY, y); maxY = Math.max(maxY, y);
    };
    for (const wall of state.map.walls) for (const [x, y] of wall) add(x, y);
    if (!state.map.walls.length) {
      for (const route of state.map.routes) for (const [x, y] of route.points) add(x, y);
      for (const o of state.map.obstacles) add(o.x, o.y);
      const f = state.frame;
      if (f) for (let i = 0; i < f.count; i++) add(f.x[i], f.y[i]);
    }
    if (minX === Infinity) return null;
    return { minX, minY, maxX, maxY };
  }

  function fit() {
    const b = bounds();
    const { w, h } = size();
    if (!b || !w || !h) return;
    const spanX = Math.max(b.maxX - b.minX, 10);
    const spanY = Math.max(b.maxY - b.minY, 10);
    state.view.scale = Math.min(w / spanX, h / spanY) * 0.9;
    state.view.cx = (b.minX + b.maxX) / 2;
    state.view.cy = (b.minY + b.maxY) / 2;
    state.fitted = true;
    dirty = true;
  }

  function centreOn(id) {
    const i = indexOf(id);
    if (i < 0) return;
    state.view.cx = state.frame.x[i];
    state.view.cy = state.frame.y[i];
  }

  // ---- Drawing -----------------------------------------------------------------------

  function resize() {
    const ratio = window.devicePixelRatio || 1;
    const { w, h } = size();
    if (canvas.width !== Math.round(w * ratio) || canvas.height !== Math.round(h * ratio)) {
      canvas.width = Math.round(w * ratio);
      canvas.height = Math.round(h * ratio);
      dirty = true;
    }
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  }

  function polyline(points, closed) {
    ctx.beginPath();
    points.forEach(([x, y], i) => {
      const [sx, sy] = worldToScreen(x, y);
      if (i === 0) ctx.moveTo(sx, sy); else ctx.lineTo(sx, sy);
    });
    if (closed) ctx.closePath();
  }

  // Adds a box (centre, yaw, length, width in metres) to `path`; tiny ones as a 2 px square.
  function box(path, x, y, yaw, length, width) {
    const scale = state.view.scale;
    const [sx, sy] = worldToScreen(x, y);
    const hl = (length / 2) * scale;
    const hw = (width / 2) * scale;
    if (hl < 1 && hw < 1) {
      path.rect(sx - 1, sy - 1, 2, 2);
      return;
    }
    const c = Math.cos(yaw);
    const s = -Math.sin(yaw); // Screen y points down.
    path.moveTo(sx + hl * c - hw * s, sy + hl * s + hw * c);
    path.lineTo(sx - hl * c - hw * s, sy - hl * s + hw * c);
    path.lineTo(sx - hl * c + hw * s, sy - hl * s - hw * c);
    path.lineTo(sx + hl * c + hw * s, sy + hl * s - hw * c);
    path.closePath();
  }

  function drawMap() {
    const scale = state.view.scale;
    ctx.lineJoin = "round";
    ctx.lineCap = "round";
    for (const route of state.map.routes) {
      polyline(route.points, route.closed);
      ctx.strokeStyle = "rgba(140, 140, 153, 0.35)";
      ctx.lineWidth = Math.max(route.width * scale, 1);
      ctx.stroke();
      ctx.strokeStyle = "rgba(230, 230, 235, 0.35)";
      ctx.lineWidth = 1;
      ctx.setLineDash([6, 6]);
      ctx.stroke();
      ctx.setLineDash([]);
    }
    ctx.strokeStyle = "#d9d9d9";
    ctx.lineWidth = 2;
    for (const wall of state.map.walls) { polyline(wall, true); ctx.stroke(); }
    const obstacles = new Path2D();
    for (const o of state.map.obstacles) box(obstacles, o.x, o.y, o.yaw, o.length, o.width);
    ctx.fillStyle = "#99734d";
    ctx.fill(obstacles);
    ctx.fillStyle = "#4de64d";
    for (const spawn of state.map.spawns) {
      const [sx, sy] = worldToScreen(spawn.x, spawn.y);
      const c = Math.cos(spawn.yaw);
      const s = -Math.sin(spawn.yaw);
      ctx.beginPath();
      ctx.moveTo(sx + 8 * c, sy + 8 * s);
      ctx.lineTo(sx - 5 * c - 4 * s, sy - 5 * s + 4 * c);
      ctx.lineTo(sx - 5 * c + 4 * s, sy - 5 * s - 4 * c);
      ctx.closePath();
      ctx.fill();
    }
  }

  function colorIndex(f, i) {
    if (f.flags[i] & FLAG_CRASHED) return MODEL_COLORS.length + 1;
    if (f.flags[i] & FLAG_CONTACT) return MODEL_COLORS.length;
    return f.model[i] < MODEL_COLORS.length ? f.model[i] : 0;
  }

  function drawVehicles() {
    const f = state.frame;
    const r = state.roster;
    if (!f || !r) return;
    const scale = state.view.scale;
    const { w, h } = size();
    const paths = [...MODEL_COLORS, CONTACT_COLOR, CRASHED_COLOR].map(() => new Path2D());
    const headings = new Path2D();
    const labels = [];
    const margin = 50;
    let onScreen = 0;
    for (let i = 0; i < f.count; i++) {
      const c = Math.cos(f.yaw[i]);
      const s = Math.sin(f.yaw[i]);
      const cx = f.x[i] + r.offset_m[i] * c;
      const cy = f.y[i] + r.offset_m[i] * s;
      const [sx, sy] = worldToScreen(cx, cy);
      if (sx < -margin || sy < -margin || sx > w + margin || sy > h + margin) continue;
      onScreen++;
      box(paths[colorIndex(f, i)], cx, cy, f.yaw[i], r.length_m[i], r.width_m[i]);
      const half = (r.length_m[i] / 2) * scale;
      if (half > 4) {
        headings.moveTo(sx, sy);
        headings.lineTo(sx + half * c, sy - half * s);
      }
      if (half > 6) labels.push(i);
    }
    paths.forEach((path, k) => {
      ctx.fillStyle = k < MODEL_COLORS.length ? MODEL_COLORS[k]
        : k === MODEL_COLORS.length ? CONTACT_COLOR : CRASHED_COLOR;
      ctx.fill(path);
    });
    ctx.strokeStyle = "#ffffff";
    ctx.lineWidth = 1.5;
    ctx.stroke(headings);
    if (labels.length && onScreen <= 300) {
      ctx.fillStyle = "#e6e6ea";
      ctx.font = "12px system-ui, sans-serif";
      ctx.textAlign = "center";
      for (const i of labels) {
        const [sx, sy] = worldToScreen(f.x[i], f.y[i]);
        const name = r.names[i] || `#${r.ids[i]}`;
        ctx.fillText(`${name} ${f.speed[i].toFixed(1)} m/s`, sx, sy - r.width_m[i] * scale - 6);
      }
    }
    state.onScreen = onScreen;
  }

  function drawSelected() {
    if (state.selected === null) return;
    const i = indexOf(state.selected);
    if (i < 0) return;
    const f = state.frame;
    const r = state.roster;
    const c = Math.cos(f.yaw[i]);
    const s = Math.sin(f.yaw[i]);
    const cx = f.x[i] + r.offset_m[i] * c;
    const cy = f.y[i] + r.offset_m[i] * s;
    const scan = state.telemetry && state.telemetry.vehicle_id === state.selected
      ? state.telemetry.range_scan : null;
    if (scan) {
      const [sx, sy] = worldToScreen(cx, cy);
      const rays = new Path2D();
      scan.ranges_m.forEach((range, k) => {
        if (range === null) return; // Met nothing within its range.
        const angle = f.yaw[i] + scan.angle_min_rad + k * scan.angle_increment_rad;
        const [ex, ey] = worldToScreen(cx + range * Math.cos(angle), cy + range * Math.sin(angle));
        rays.moveTo(sx, sy);
        rays.lineTo(ex, ey);
      });
      ctx.strokeStyle = "rgba(255, 210, 74, 0.55)";
      ctx.lineWidth = 1;
      ctx.stroke(rays);
    }
    const outline = new Path2D();
    box(outline, cx, cy, f.yaw[i], r.length_m[i] + 4 / state.view.scale, r.width_m[i] + 4 / state.view.scale);
    ctx.strokeStyle = "#ffd24a";
    ctx.lineWidth = 2;
    ctx.stroke(outline);
  }

  function draw() {
    const started = performance.now();
    resize();
    const { w, h } = size();
    ctx.fillStyle = "#1b1c21";
    ctx.fillRect(0, 0, w, h);
    drawMap();
    drawVehicles();
    drawSelected();
    state.draws++;
    state.lastDrawMs = performance.now() - started;
  }

  let fpsWindowStart = performance.now();
  let fpsWindowDraws = 0;
  function animate() {
    if (state.follow && state.selected !== null && state.frame) centreOn(state.selected);
    if (dirty) {
      dirty = false;
      draw();
      fpsWindowDraws++;
    }
    const now = performance.now();
    if (now - fpsWindowStart >= 1000) {
      state.fps = (fpsWindowDraws * 1000) / (now - fpsWindowStart);
      fpsWindowStart = now;
      fpsWindowDraws = 0;
      const f = state.frame;
      $("fps").textContent = `${state.fps.toFixed(0)} fps · ${f ? f.count : 0} vehicles · draw ${state.lastDrawMs.toFixed(1)} ms`;
    }
    requestAnimationFrame(animate);
  }

  // ---- Panels and controls -----------------------------------------------------------

  // A playback's position, seconds: where the session said it was, moved on by the recorded
  // time of the frames shown since.
  function playbackPosition() {
    const s = state.session;
    const p = s && s.playback;
    if (!p) return 0;
    const f = state.frame;
    const moved = f ? f.simTime - s.sim_time_s : 0;
    return Math.min(p.duration_s, Math.max(0, p.position_s + moved));
  }

  function updateClock() {
    const s = state.session;
    const f = state.frame;
    if (!s) { $("clock").textContent = "no session"; return; }
    const tick = f ? f.tick : s.tick;
    const time = f ? f.simTime : s.sim_time_s;
    const mode = (s.playback ? "playback" : s.clock_mode) + (s.paused ? " (paused)" : "");
    const rtf = s.clock_mode === "realtime" ? ` · ×${s.real_time_factor || "max"}` : "";
    $("clock").textContent = `tick ${tick} · ${time.toFixed(2)} s · ${mode}${rtf}`;
    const p = s.playback;
    if (p) {
      const position = playbackPosition();
      $("position").textContent = `${position.toFixed(1)} / ${p.duration_s.toFixed(1)} s`;
      if (!state.seeking) $("seek").value = String(position);
    }
  }

  function updateControls() {
    const s = state.session;
    $("controls").classList.toggle("hidden", !s || !s.may_control);
    const p = s && s.playback;
    $("playback").classList.toggle("hidden", !p || !s.may_control);
    if (p) {
      $("seek").max = String(p.duration_s);
      const speed = String(s.real_time_factor);
      if ([...$("speed").options].some((o) => o.value === speed)) $("speed").value = speed;
    }
    if (s) {
      $("pause").disabled = s.clock_mode === "lockstep" || s.paused;
      $("resume").disabled = s.clock_mode === "lockstep" || !s.paused;
      $("step").disabled = s.clock_mode !== "lockstep" && !s.paused;
      $("ticks").max = s.max_ticks_per_step;
      const layout = $("layout");
      layout.dataset.session = s.id;
    }
  }

  function row(list, name, value) {
    const dt = document.createElement("dt");
    dt.textContent = name;
    const dd = document.createElement("dd");
    dd.textContent = value;
    list.append(dt, dd);
  }

  function updateDetails() {
    const panel = $("details");
    const i = state.selected === null ? -1 : indexOf(state.selected);
    panel.classList.toggle("hidden", i < 0);
    if (i < 0) return;
    const f = state.frame;
    const r = state.roster;
    const t = state.telemetry && state.telemetry.vehicle_id === state.selected ? state.telemetry : null;
    $("details-title").textContent = r.names[i] ? `${r.names[i]} (#${r.ids[i]})` : `Vehicle #${r.ids[i]}`;
    const list = $("details-list");
    list.replaceChildren();
    const speed = t ? t.speed_mps : f.speed[i];
    row(list, "model", MODELS[f.model[i]] || String(f.model[i]));
    row(list, "driven by", f.flags[i] & FLAG_DRIVER ? "built-in driver" : "client");
    row(list, "speed", `${speed.toFixed(2)} m/s (${(speed * 3.6).toFixed(1)} km/h)`);
    row(list, "steering", `${(t ? t.steering_angle_rad : f.steer[i]).toFixed(3)} rad`);
    if (t) {
      row(list, "acceleration", `${t.acceleration_mps2.toFixed(2)} m/s²`);
      row(list, "yaw rate", `${t.yaw_rate_radps.toFixed(3)} rad/s`);
      if (t.controls) {
        // The controls it holds, in its model's own terms.
        const units = { throttle: "", brake: "", steering_angle_rad: " rad", acceleration_mps2: " m/s²",
                        target_speed_mps: " m/s", yaw_rate_radps: " rad/s" };
        row(list, "controls", Object.entries(t.controls)
          .map(([name, value]) => `${name.replace(/_(rad|mps2|mps|radps)$/, "").replaceAll("_", " ")} ${value.toFixed(2)}${units[name] || ""}`)
          .join(" · "));
      }
    }
    row(list, "position", `${f.x[i].toFixed(2)}, ${f.y[i].toFixed(2)} m`);
    row(list, "heading", `${f.yaw[i].toFixed(3)} rad`);
    row(list, "state", f.flags[i] & FLAG_CRASHED ? "crashed" : f.flags[i] & FLAG_CONTACT ? "in contact" : "ok");
    if (t && t.track_progress) {
      // Its lap timers on its race track (docs/racing.md).
      const p = t.track_progress;
      row(list, "track", `${p.track} · ${p.on_track ? "on" : "off"} the track · ${p.distance_m.toFixed(1)} m`);
      row(list, "lap", `${p.laps_completed + 1} · ${lapTime(p.lap_time_s)} · sector ${p.sector + 1}`);
      row(list, "last lap", p.last_lap_s === undefined ? "—" : lapTime(p.last_lap_s));
      row(list, "best lap", p.best_lap_s === undefined ? "—" : lapTime(p.best_lap_s));
      if (p.off_track_count > 0) {
        row(list, "off track", `${p.off_track_count}× · ${p.off_track_s.toFixed(2)} s`);
      }
    }
    row(list, "tick", String(t ? t.tick : f.tick));
  }

  // The race's standings (the /race channel: docs/racing.md), beside the world.
  function updateRace() {
    const race = state.race;
    const panel = $("race");
    const none = !race || race.phase === "none" || !race.standings;
    panel.classList.toggle("hidden", none);
    if (none) return;
    const leader = race.standings[0];
    const lap = leader ? Math.min(leader.laps + 1, race.laps) : 1;
    $("race-title").textContent = `Race · ${race.track} · ${race.laps} lap${race.laps === 1 ? "" : "s"}`;
    $("race-clock").textContent =
      race.phase === "countdown" ? `On the grid: green in ${(-race.race_time_s).toFixed(1)} s`
      : race.phase === "racing" ? `Lap ${lap} of ${race.laps} · ${lapTime(race.race_time_s)}`
      : "Finished: final results";
    const body = $("standings-body");
    body.replaceChildren(...race.standings.map((s) => {
      const tr = document.createElement("tr");
      tr.className = (s.vehicle_id === state.selected ? "selected " : "") + (s.state === "retired" ? "retired" : "");
      tr.dataset.vehicle = String(s.vehicle_id);
      const time = s.state === "retired" ? "out"
        : s.position === 1 ? (s.state === "finished" ? lapTime(s.total_time_s) : "leader")
        : s.gap_laps > 0 ? `+${s.gap_laps} lap${s.gap_laps === 1 ? "" : "s"}`
        : s.gap_s !== null ? `+${s.gap_s.toFixed(3)} s`
        : `+${s.gap_m.toFixed(0)} m`;
      const cells = [String(s.position), s.vehicle_name ? `${s.vehicle_name} (#${s.vehicle_id})` : `#${s.vehicle_id}`,
                     String(s.laps), time + (s.state === "finished" ? " ✓" : ""),
                     s.best_lap_s === null ? "—" : lapTime(s.best_lap_s),
                     s.penalties_s > 0 ? `+${s.penalties_s.toFixed(0)} s` : ""];
      tr.replaceChildren(...cells.map((text) => Object.assign(document.createElement("td"), { textContent: text })));
      tr.addEventListener("click", () => select(s.vehicle_id));
      return tr;
    }));
  }

  // The results as the server writes them, downloaded with the visitor's token.
  function resultsLink(format) {
    return (event) => {
      event.preventDefault();
      const id = state.sessionId;
      if (!id) return;
      fetch(`/api/sessions/${encodeURIComponent(id)}/race.${format}`, { headers: authHeaders() })
        .then(async (response) => {
          if (!response.ok) {
            const body = await response.json().catch(() => ({}));
            throw new Error(body.error || `HTTP ${response.status}`);
          }
          return response.blob();
        })
        .then((blob) => {
          const a = document.createElement("a");
          a.href = URL.createObjectURL(blob);
          a.download = `race-${id}.${format}`;
          a.click();
          setTimeout(() => URL.revokeObjectURL(a.href), 10000);
        })
        .catch((error) => { showMessage(error.message); setTimeout(() => showMessage(""), 3000); });
    };
  }

  // A lap's time as a race clock shows it: 1:02.345, or 58.120 s under a minute.
  function lapTime(seconds) {
    if (seconds < 60) return `${seconds.toFixed(3)} s`;
    const minutes = Math.floor(seconds / 60);
    return `${minutes}:${(seconds - 60 * minutes).toFixed(3).padStart(6, "0")}`;
  }

  function select(id) {
    if (state.selected !== null && state.sessionId) {
      const old = `/${state.sessionId}/vehicle/${state.selected}`;
      unsubscribeWhere((entry) => entry.topic === old);
    }
    state.selected = id;
    state.telemetry = null;
    updateRace();
    if (id !== null && state.sessionId) subscribe("telemetry", `/${state.sessionId}/vehicle/${id}`);
    updateDetails();
    dirty = true;
  }

  async function control(action, query = "") {
    if (!state.sessionId) return null;
    const response = await fetch(`/api/sessions/${encodeURIComponent(state.sessionId)}/${action}${query}`,
                                 { method: "POST", headers: authHeaders() });
    const body = await response.json();
    if (!response.ok) {
      showMessage(body.error || `HTTP ${response.status}`);
      setTimeout(() => showMessage(""), 3000);
      return null;
    }
    const index = state.sessions.findIndex((s) => s.id === body.id);
    if (index >= 0) state.sessions[index] = body;
    state.session = body;
    updateControls();
    updateClock();
    return body;
  }

  function layoutLink(event) {
    // The shipped layout, with this session's topics.
    const id = state.sessionId;
    if (!id) return;
    event.preventDefault();
    fetch("/foxglove-layout.json").then((r) => r.text()).then((text) => {
      const blob = new Blob([text.replaceAll("SESSION_ID", id)], { type: "application/json" });
      const a = document.createElement("a");
      a.href = URL.createObjectURL(blob);
      a.download = `pitlane-${id}-layout.json`;
      a.click();
      setTimeout(() => URL.revokeObjectURL(a.href), 10000);
    });
  }

  function legend() {
    const items = MODELS.map((m, k) => [m.replaceAll("_", " "), MODEL_COLORS[k]]);
    items.push(["in contact", CONTACT_COLOR], ["crashed", CRASHED_COLOR]);
    $("legend").replaceChildren(...items.map(([name, color]) => {
      const span = document.createElement("span");
      const swatch = document.createElement("span");
      swatch.className = "swatch";
      swatch.style.background = color;
      span.append(swatch, name);
      return span;
    }), Object.assign(document.createElement("span"), {
      textContent: "drag to pan · wheel to zoom · click a vehicle for its details",
    }));
  }

  // ---- Input -------------------------------------------------------------------------

  let drag = null;
  canvas.addEventListener("mousedown", (event) => {
    drag = { x: event.offsetX, y: event.offsetY, cx: state.view.cx, cy: state.view.cy, moved: false };
    canvas.classList.add("dragging");
  });
  window.addEventListener("mousemove", (event) => {
    if (!drag) return;
    const rect = canvas.getBoundingClientRect();
    const dx = event.clientX - rect.left - drag.x;
    const dy = event.clientY - rect.top - drag.y;
    if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
    if (drag.moved) {
      state.view.cx = drag.cx - dx / state.view.scale;
      state.view.cy = drag.cy + dy / state.view.scale;
      if (state.follow) { state.follow = false; $("follow").checked = false; }
      dirty = true;
    }
  });
  window.addEventListener("mouseup", (event) => {
    if (!drag) return;
    canvas.classList.remove("dragging");
    if (!drag.moved) {
      const rect = canvas.getBoundingClientRect();
      const [x, y] = screenToWorld(event.clientX - rect.left, event.clientY - rect.top);
      select(vehicleAt(x, y, 3 / state.view.scale));
    }
    drag = null;
  });
  canvas.addEventListener("wheel", (event) => {
    event.preventDefault();
    const [wx, wy] = screenToWorld(event.offsetX, event.offsetY);
    const factor = Math.exp(-event.deltaY * 0.0015);
    state.view.scale = Math.min(Math.max(state.view.scale * factor, 0.01), 500);
    // Keep the point under the cursor where it is.
    const [nx, ny] = screenToWorld(event.offsetX, event.offsetY);
    state.view.cx += wx - nx;
    state.view.cy += wy - ny;
    dirty = true;
  }, { passive: false });
  window.addEventListener("resize", () => { dirty = true; });
  window.addEventListener("keydown", (event) => {
    if (event.target instanceof HTMLInputElement) return;
    if (event.key === "f") fit();
    if (event.key === "Escape") select(null);
  });
  $("session").addEventListener("change", (event) => selectSession(event.target.value));
  $("fit").addEventListener("click", fit);
  $("follow").addEventListener("change", (event) => { state.follow = event.target.checked; dirty = true; });
  $("pause").addEventListener("click", () => control("pause"));
  $("resume").addEventListener("click", () => control("resume"));
  $("step").addEventListener("click", () => control("step", `?ticks=${Math.max(1, Number($("ticks").value) || 1)}`));
  $("reset").addEventListener("click", () => control("reset"));
  // Seeking: the slider follows the playback except while it is held.
  $("seek").addEventListener("input", () => { state.seeking = true; });
  $("seek").addEventListener("change", async (event) => {
    await control("seek", `?time_s=${Number(event.target.value)}`);
    state.seeking = false;
  });
  $("speed").addEventListener("change", (event) => control("speed", `?real_time_factor=${event.target.value}`));
  $("layout").addEventListener("click", layoutLink);
  $("results-csv").addEventListener("click", resultsLink("csv"));
  $("results-json").addEventListener("click", resultsLink("json"));

  // ---- For tests and the curious ---------------------------------------------------------

  window.pitlane = {
    state,
    worldToScreen,
    screenToWorld,
    vehicleAt,
    vehicleScreen,
    indexOf,
    fit,
    select,
    control,
    lapTime,
    updateRace,
    // Draws `count` frames back to back; returns the mean milliseconds per draw.
    benchmarkDraw(count) {
      const started = performance.now();
      for (let k = 0; k < count; k++) draw();
      return (performance.now() - started) / count;
    },
    // The model's vehicles, as drawn: [{id, x, y, yaw, speed, flags, model}].
    vehicles() {
      const f = state.frame;
      const r = state.roster;
      if (!f || !r) return [];
      return Array.from({ length: f.count }, (_, i) => ({
        id: r.ids[i], name: r.names[i], x: f.x[i], y: f.y[i], yaw: f.yaw[i], speed: f.speed[i],
        flags: f.flags[i], model: MODELS[f.model[i]], length: r.length_m[i], width: r.width_m[i],
        offset: r.offset_m[i],
      }));
    },
  };

  legend();
  connect();
  refreshSessions();
  setInterval(refreshSessions, 2000);
  requestAnimationFrame(animate);
})();
