// Pitlane from Node.js: a controller that drives a car through the Drive stream.
//
// It loads proto/pitlane/v1/simulator.proto at run time (@grpc/proto-loader), creates a
// BARRIER session (each tick waits for the controllers' answers; or joins --session), spawns a
// kinematic bicycle, attaches with Drive, and answers every observation with a control: hold
// TARGET_SPEED_MPS with a proportional gain, steer a circle. Prints one JSON line: the ticks
// driven, the final speed and the distance covered.
//
//   cd client/node && npm ci
//   node controller.mjs --address 127.0.0.1:50051 [--seconds 10] [--token-file admin.token]
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

import grpc from "@grpc/grpc-js";
import protoLoader from "@grpc/proto-loader";

const TARGET_SPEED_MPS = 5.0;
const K_SPEED = 0.5; // Acceleration per m/s of speed error (2.5 m/s² at rest: below the limit).
const STEER_RAD = 0.15;
const TICK_RATE_HZ = 50.0;

const { values: args } = parseArgs({
  options: {
    address: { type: "string", default: "127.0.0.1:50051" },
    seconds: { type: "string", default: "10" },
    session: { type: "string" },
    "token-file": { type: "string" },
  },
});

const here = dirname(fileURLToPath(import.meta.url));
const protoRoot = join(here, "..", "..", "proto");
const definition = protoLoader.loadSync(join(protoRoot, "pitlane/v1/simulator.proto"), {
  includeDirs: [protoRoot],
  keepCase: true, // Field names as in the proto: session_id, acceleration_mps2.
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
});
const { Simulator } = grpc.loadPackageDefinition(definition).pitlane.v1;
const sim = new Simulator(args.address, grpc.credentials.createInsecure());

// Every call carries the token (if any) and, for a deployment behind a proxy, the session it
// is about (docs/deployment.md).
const token = args["token-file"] ? readFileSync(args["token-file"], "utf8").trim() : null;
function metadata(sessionId) {
  const md = new grpc.Metadata();
  if (token) md.set("authorization", `Bearer ${token}`);
  if (sessionId && /^s-[a-z2-7]{26}(\.[a-z0-9-]{1,32})?$/.test(sessionId)) {
    md.set("pitlane-session", sessionId);
  }
  return md;
}

function unary(method, request) {
  return new Promise((resolve, reject) => {
    sim[method](request, metadata(request.session_id), { deadline: Date.now() + 10_000 },
      (error, response) => (error ? reject(error) : resolve(response)));
  });
}

async function main() {
  const seconds = Number(args.seconds);
  if (!(seconds > 0 && seconds <= 86400)) throw new Error("--seconds: a number in (0, 86400]");
  let sessionId = args.session;
  const own = !sessionId;
  if (own) {
    const created = await unary("CreateSession", {
      config: { name: "node-controller", tick_rate_hz: TICK_RATE_HZ, clock_mode: "CLOCK_MODE_BARRIER" },
    });
    sessionId = created.session.session_id;
  }
  const spawned = await unary("SpawnVehicle", {
    session_id: sessionId,
    vehicles: [{ name: "node", kinematic_bicycle: {} }],
  });
  const vehicleId = spawned.vehicle_ids[0];

  const drive = sim.Drive(metadata(sessionId));
  drive.write({ attach: { session_id: sessionId, vehicle_id: vehicleId,
                          on_disconnect: "DISCONNECT_ACTION_BRAKE_TO_STOP" } });
  const ticks = Math.round(seconds * TICK_RATE_HZ);
  let first = null;
  let last = null;
  let driven = 0;
  for await (const observation of drive) {
    last = observation;
    first ??= observation;
    if (driven === ticks) break;
    const speed = observation.vehicle.speed_mps;
    // The answer to this tick's observation: the session steps once every controller answered.
    drive.write({ control: { tick: observation.time.tick, control: {
      acceleration_mps2: K_SPEED * (TARGET_SPEED_MPS - speed), steering_angle_rad: STEER_RAD } } });
    driven += 1;
  }
  drive.cancel();
  if (first === null) throw new Error("the Drive stream ended before its first observation");
  const distance = Math.hypot(last.vehicle.x_m - first.vehicle.x_m, last.vehicle.y_m - first.vehicle.y_m);
  console.log(JSON.stringify({ session_id: sessionId, vehicle_id: Number(vehicleId), ticks: driven,
                               final_tick: Number(last.time.tick), speed_mps: last.vehicle.speed_mps,
                               distance_m: distance }));
  if (own) {
    await unary("DeleteSession", { session_id: sessionId });
  } else {
    await unary("RemoveVehicle", { session_id: sessionId, vehicle_id: vehicleId });
  }
  sim.close();
}

main().catch((error) => {
  console.error(`controller: ${error.message}`);
  process.exit(1);
});
