#!/usr/bin/env bash
# Writes the request_fuzzer seeds of fuzz/corpus/request_fuzzer/: the requests of
# server/api/simulator_service_test.cc (good ones and the bad ones it checks), in protobuf
# text below, encoded with protoc and prefixed with the byte that picks their type in
# request_fuzzer.cc (RequestType). Rerun after changing a seed here.
set -euo pipefail
cd "$(dirname "$0")/.."
out=fuzz/corpus/request_fuzzer
mkdir -p "$out"

# seed NAME TYPE_BYTE MESSAGE TEXT
seed() {
  local name=$1 type=$2 message=$3 text=$4
  {
    printf "\\x$(printf %02x "$type")"
    printf '%s\n' "$text" | protoc -Iproto --encode="pitlane.v1.$message" \
      proto/pitlane/v1/simulator.proto
  } >"$out/$name"
}

seed create-default 0 CreateSessionRequest 'config {}'
seed create-demo 0 CreateSessionRequest 'config { scenario: "demo" max_vehicles: 16 }'
seed create-nan-rate 0 CreateSessionRequest 'config { tick_rate_hz: nan }'
seed create-bad-clock 0 CreateSessionRequest 'config { clock_mode: CLOCK_MODE_REALTIME real_time_factor: -1 }'
seed create-bounds 0 CreateSessionRequest 'config { bounds { min_x_m: 10 max_x_m: -10 max_y_m: 1 } }'
seed create-full 0 CreateSessionRequest '
config {
  name: "full" tick_rate_hz: 100 seed: 7 max_vehicles: 8
  collision_policy: COLLISION_POLICY_STOP
  bounds { min_x_m: -100 min_y_m: -100 max_x_m: 100 max_y_m: 100 }
  obstacles { center_x_m: 20 length_m: 2 width_m: 1 yaw_rad: 0.3 }
  tracks { name: "t" closed: true points { x_m: 0 y_m: 0 } points { x_m: 40 y_m: 0 }
           points { x_m: 40 y_m: 40 } }
  spawn_points { name: "grid" pose { x_m: 1 y_m: 2 yaw_rad: 0.5 } }
  vehicles { single_track {} initial_speed_mps: 3 range_scan { beam_count: 8 } }
  vehicles { force_based {} initial_pose { x_m: 10 } nearest_objects { count: 2 } }
  vehicles { front_wheel_drive {} initial_pose { x_m: -10 } }
  vehicles { all_wheel_drive {} initial_pose { y_m: -10 } }
  vehicles { kinematic_bicycle { integrator: BICYCLE_INTEGRATOR_EXACT_ARC }
             driver { route_follower { track: "t" target_speed_mps: 8 } } }
  vehicles { physics_body {} initial_pose { y_m: 30 } driver { cruise { target_speed_mps: 4 } } }
}'
seed spawn-bicycle 1 SpawnVehicleRequest 'session_id: "s" vehicles { kinematic_bicycle {} initial_pose { x_m: 5 } initial_speed_mps: 2 }'
seed spawn-four-wheel 1 SpawnVehicleRequest 'vehicles { four_wheel {} limits { max_speed_mps: 20 } }'
seed spawn-bad-length 1 SpawnVehicleRequest 'vehicles { kinematic_bicycle {} length_m: -1 }'
seed spawn-no-model 1 SpawnVehicleRequest 'vehicles { length_m: 3 }'
seed spawn-route 1 SpawnVehicleRequest 'vehicles { single_track {} driver { route_follower { track: "loop" } } }'
seed controls-clamped 2 SetControlsRequest 'controls { vehicle_id: 1 steering_angle_rad: 0.2 acceleration_mps2: 100 }'
seed controls-pedals 2 SetControlsRequest 'controls { vehicle_id: 3 throttle: 0.5 brake: 0.1 steering_angle_rad: -0.3 }'
seed controls-physics 2 SetControlsRequest 'controls { vehicle_id: 2 target_speed_mps: 5 yaw_rate_radps: 0.5 }'
seed controls-nan 2 SetControlsRequest 'controls { vehicle_id: 1 acceleration_mps2: nan }'
seed obstacles 3 AddObstacleRequest 'obstacles { length_m: 1 width_m: 1 } obstacles { center_x_m: 5 center_y_m: 1 length_m: 3 width_m: 0.5 yaw_rad: 1 }'
seed obstacles-nan 3 AddObstacleRequest 'obstacles { length_m: 1 width_m: 1 } obstacles { center_x_m: nan }'
seed step 4 StepRequest 'ticks: 10'
seed step-expected 4 StepRequest 'ticks: 2 expected_tick: 0'
seed step-too-many 4 StepRequest 'ticks: 4000000000'
seed clock-bad-mode 5 SetClockRequest 'clock_mode: 42'
seed clock-factor 5 SetClockRequest 'real_time_factor: -0.5 paused: true'
seed clock-barrier 5 SetClockRequest 'clock_mode: CLOCK_MODE_BARRIER barrier_timeout_s: 0'
seed stream 6 StreamStatesRequest 'every_n_ticks: 2 max_rate_hz: 10 vehicle_ids: 1 vehicle_ids: 3 vehicle_ids: 1'
seed stream-zero 6 StreamStatesRequest 'every_n_ticks: 0'
seed drive-attach 7 DriveRequest 'attach { vehicle_id: 1 on_disconnect: DISCONNECT_ACTION_HOLD_CONTROLS }'
seed drive-control 7 DriveRequest 'control { tick: 1 control { acceleration_mps2: 1 steering_angle_rad: 0.1 } }'
seed remove-vehicle 8 RemoveVehicleRequest 'vehicle_id: 2'
seed remove-obstacle 9 RemoveObstacleRequest 'obstacle_id: 1'
seed reset 10 ResetSessionRequest 'session_id: "s"'
