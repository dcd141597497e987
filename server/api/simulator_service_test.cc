// The Simulator service through an in-process channel to a fully wired server.
#include "server/api/simulator_service.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/api/testing/grpc_status_matchers.h"
#include "server/app/server.h"

namespace pitlane::api {
namespace {

using ::pitlane::app::Server;
using ::pitlane::app::ServerOptions;

using ::testing::HasSubstr;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

class SimulatorServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions options;
    options.listen_address = "127.0.0.1:0";
    options.limits = {.max_sessions = max_sessions_,
                      .max_vehicles_per_session = 5,
                      .max_ticks_per_step = 100};
    auto server = Server::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = v1::Simulator::NewStub(server_->grpc_server().InProcessChannel({}));
  }

  std::uint32_t max_sessions_ = 4;

  std::unique_ptr<grpc::ClientContext> Context() {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return context;
  }

  std::string CreateSession() {
    v1::CreateSessionRequest request;
    v1::CreateSessionResponse response;
    EXPECT_TRUE(stub_->CreateSession(Context().get(), request, &response).ok());
    return response.session().session_id();
  }

  std::uint64_t Spawn(const std::string& session_id, double x_m = 0, double speed_mps = 0) {
    v1::SpawnVehicleRequest request;
    request.set_session_id(session_id);
    v1::VehicleSpec* spec = request.add_vehicles();
    spec->mutable_initial_pose()->set_x_m(x_m);
    spec->set_initial_speed_mps(speed_mps);
    spec->mutable_kinematic_bicycle();
    v1::SpawnVehicleResponse response;
    const grpc::Status status = stub_->SpawnVehicle(Context().get(), request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.vehicle_ids(0);
  }

  // A Drive stream attached to `vehicle`, its first observation read.
  std::unique_ptr<grpc::ClientReaderWriter<v1::DriveRequest, v1::DriveResponse>> Drive(
      grpc::ClientContext* context, const std::string& session_id, std::uint64_t vehicle) {
    auto stream = stub_->Drive(context);
    v1::DriveRequest attach;
    attach.mutable_attach()->set_session_id(session_id);
    attach.mutable_attach()->set_vehicle_id(vehicle);
    EXPECT_TRUE(stream->Write(attach));
    v1::DriveResponse observation;
    EXPECT_TRUE(stream->Read(&observation));
    return stream;
  }

  // A control answering the observation of tick 0.
  static v1::DriveRequest Control() {
    v1::DriveRequest control;
    control.mutable_control()->set_tick(0);
    control.mutable_control()->mutable_control()->set_acceleration_mps2(1.0);
    return control;
  }

  grpc::Status Step(const std::string& session_id, std::uint32_t ticks,
                    v1::StepResponse* response) {
    v1::StepRequest request;
    request.set_session_id(session_id);
    request.set_ticks(ticks);
    return stub_->Step(Context().get(), request, response);
  }

  std::unique_ptr<Server> server_;
  std::unique_ptr<v1::Simulator::Stub> stub_;
};

TEST_F(SimulatorServiceTest, LockstepRoundTrip) {
  const std::string id = CreateSession();
  EXPECT_THAT(id, testing::MatchesRegex("s-[a-z2-7]{26}"));  // Unguessable: NewSessionId.
  const std::uint64_t vehicle = Spawn(id, 0, 5.0);
  EXPECT_EQ(vehicle, 1u);

  v1::SetControlsRequest controls;
  controls.set_session_id(id);
  v1::VehicleControl* control = controls.add_controls();
  control->set_vehicle_id(vehicle);
  control->set_steering_angle_rad(0.2);
  control->set_acceleration_mps2(100);  // Clamped to the default 3 m/s^2.
  v1::SetControlsResponse set;
  ASSERT_TRUE(stub_->SetControls(Context().get(), controls, &set).ok());
  EXPECT_EQ(set.time().tick(), 0u);
  EXPECT_EQ(set.applies_from_tick(), 1u);

  v1::StepResponse step;
  ASSERT_TRUE(Step(id, 10, &step).ok());
  EXPECT_EQ(step.state().time().tick(), 10u);
  EXPECT_DOUBLE_EQ(step.state().time().sim_time_s(), 0.2);
  ASSERT_EQ(step.state().vehicles_size(), 1);
  const v1::VehicleState& v = step.state().vehicles(0);
  EXPECT_EQ(v.steering_angle_rad(), 0.2);
  EXPECT_NEAR(v.acceleration_mps2(), 3.0, 1e-9);
  EXPECT_NEAR(v.speed_mps(), 5.0 + 3.0 * 0.2, 1e-12);

  v1::GetStateRequest get;
  get.set_session_id(id);
  v1::GetStateResponse state;
  ASSERT_TRUE(stub_->GetState(Context().get(), get, &state).ok());
  EXPECT_EQ(state.state().SerializeAsString(), step.state().SerializeAsString());

  v1::GetSessionRequest describe;
  describe.set_session_id(id);
  v1::GetSessionResponse session;
  ASSERT_TRUE(stub_->GetSession(Context().get(), describe, &session).ok());
  EXPECT_EQ(session.session().time().tick(), 10u);
  ASSERT_EQ(session.session().vehicles_size(), 1);
  // The resolved spec carries every default.
  EXPECT_NEAR(session.session().vehicles(0).spec().kinematic_bicycle().rear_overhang_m(), 0.9,
              1e-15);
  EXPECT_EQ(session.session().config().max_vehicles(), 5u);
}

// One bad request and what it must answer.
struct BadRequest {
  std::string name;
  grpc::StatusCode code;
  std::string field;  // Must appear in the message.
  std::function<grpc::Status(SimulatorServiceTest&, v1::Simulator::Stub&, const std::string&)>
      call;
};

std::vector<BadRequest> BadRequests() {
  using Code = grpc::StatusCode;
  using Stub = v1::Simulator::Stub;
  using T = SimulatorServiceTest;
  const auto context = [] {
    auto c = std::make_unique<grpc::ClientContext>();
    c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return c;
  };
  const auto create = [context](std::function<void(v1::SessionConfig&)> edit) {
    return [context, edit](T&, Stub& stub, const std::string&) {
      v1::CreateSessionRequest request;
      edit(*request.mutable_config());
      v1::CreateSessionResponse response;
      return stub.CreateSession(context().get(), request, &response);
    };
  };
  const auto spawn = [context](std::function<void(v1::VehicleSpec&)> edit) {
    return [context, edit](T&, Stub& stub, const std::string& id) {
      v1::SpawnVehicleRequest request;
      request.set_session_id(id);
      v1::VehicleSpec* spec = request.add_vehicles();
      spec->mutable_kinematic_bicycle();
      edit(*spec);
      v1::SpawnVehicleResponse response;
      return stub.SpawnVehicle(context().get(), request, &response);
    };
  };
  const auto control = [context](std::uint64_t vehicle, double accel, double steer) {
    return [context, vehicle, accel, steer](T&, Stub& stub, const std::string& id) {
      v1::SetControlsRequest request;
      request.set_session_id(id);
      v1::VehicleControl* c = request.add_controls();
      c->set_vehicle_id(vehicle);
      c->set_acceleration_mps2(accel);
      c->set_steering_angle_rad(steer);
      v1::SetControlsResponse response;
      return stub.SetControls(context().get(), request, &response);
    };
  };
  const auto add_obstacles = [context](auto edit) {
    return [context, edit](T&, Stub& stub, const std::string& id) {
      v1::AddObstacleRequest request;
      request.set_session_id(id);
      v1::ObstacleSpec* good = request.add_obstacles();
      good->set_length_m(1.0);
      good->set_width_m(1.0);
      v1::ObstacleSpec* edited = request.add_obstacles();
      *edited = *good;
      edit(*edited);
      v1::AddObstacleResponse response;
      return stub.AddObstacle(context().get(), request, &response);
    };
  };
  const auto step = [context](std::uint32_t ticks) {
    return [context, ticks](T&, Stub& stub, const std::string& id) {
      v1::StepRequest request;
      request.set_session_id(id);
      request.set_ticks(ticks);
      v1::StepResponse response;
      return stub.Step(context().get(), request, &response);
    };
  };
  const auto unknown_session = [context]<typename Request, typename Response>(
                                   grpc::Status (Stub::*rpc)(grpc::ClientContext*,
                                                             const Request&, Response*)) {
    return [context, rpc](T&, Stub& stub, const std::string&) {
      Request request;
      request.set_session_id("s-404");
      Response response;
      return (stub.*rpc)(context().get(), request, &response);
    };
  };
  return {
      {"CreateTickRateZero", Code::INVALID_ARGUMENT, "config.tick_rate_hz",
       create([](auto& c) { c.set_tick_rate_hz(0); })},
      {"CreateTickRateNegative", Code::INVALID_ARGUMENT, "config.tick_rate_hz",
       create([](auto& c) { c.set_tick_rate_hz(-50); })},
      {"CreateTickRateNaN", Code::INVALID_ARGUMENT, "config.tick_rate_hz",
       create([](auto& c) { c.set_tick_rate_hz(kNaN); })},
      {"CreateTickRateInf", Code::INVALID_ARGUMENT, "config.tick_rate_hz",
       create([](auto& c) { c.set_tick_rate_hz(kInf); })},
      {"CreateMaxVehiclesZero", Code::INVALID_ARGUMENT, "config.max_vehicles",
       create([](auto& c) { c.set_max_vehicles(0); })},
      {"CreateMaxVehiclesAboveServerLimit", Code::INVALID_ARGUMENT, "config.max_vehicles",
       create([](auto& c) { c.set_max_vehicles(6); })},
      {"CreateUnknownClockMode", Code::INVALID_ARGUMENT, "config.clock_mode",
       create([](auto& c) { c.set_clock_mode(static_cast<v1::ClockMode>(99)); })},
      {"CreateRealTimeFactorNaN", Code::INVALID_ARGUMENT, "config.real_time_factor",
       create([](auto& c) {
         c.set_clock_mode(v1::CLOCK_MODE_REALTIME);
         c.set_real_time_factor(kNaN);
       })},
      {"CreateBarrierTimeoutTooLong", Code::INVALID_ARGUMENT, "config.barrier_timeout_s",
       create([](auto& c) {
         c.set_clock_mode(v1::CLOCK_MODE_BARRIER);
         c.set_barrier_timeout_s(61.0);
       })},
      {"SetClockUnknownMode", Code::INVALID_ARGUMENT, "clock_mode",
       [context](T&, Stub& stub, const std::string& id) {
         v1::SetClockRequest request;
         request.set_session_id(id);
         request.set_clock_mode(static_cast<v1::ClockMode>(42));
         v1::SetClockResponse response;
         return stub.SetClock(context().get(), request, &response);
       }},
      {"SetClockNegativeFactor", Code::INVALID_ARGUMENT, "real_time_factor",
       [context](T&, Stub& stub, const std::string& id) {
         v1::SetClockRequest request;
         request.set_session_id(id);
         request.set_real_time_factor(-0.5);
         v1::SetClockResponse response;
         return stub.SetClock(context().get(), request, &response);
       }},
      {"SetClockZeroBarrierTimeout", Code::INVALID_ARGUMENT, "barrier_timeout_s",
       [context](T&, Stub& stub, const std::string& id) {
         v1::SetClockRequest request;
         request.set_session_id(id);
         request.set_barrier_timeout_s(0.0);
         v1::SetClockResponse response;
         return stub.SetClock(context().get(), request, &response);
       }},
      {"CreateLongName", Code::INVALID_ARGUMENT, "config.name",
       create([](auto& c) { c.set_name(std::string(129, 'x')); })},
      {"CreateUnknownCollisionPolicy", Code::INVALID_ARGUMENT, "config.collision_policy",
       create([](auto& c) { c.set_collision_policy(static_cast<v1::CollisionPolicy>(9)); })},
      {"CreateBoundsInverted", Code::INVALID_ARGUMENT, "config.bounds.max_x_m",
       create([](auto& c) {
         c.mutable_bounds()->set_min_x_m(10);
         c.mutable_bounds()->set_max_x_m(-10);
         c.mutable_bounds()->set_max_y_m(1);
       })},
      {"CreateBoundsNaN", Code::INVALID_ARGUMENT, "config.bounds.min_y_m",
       create([](auto& c) { c.mutable_bounds()->set_min_y_m(kNaN); })},
      {"CreateObstacleZeroLength", Code::INVALID_ARGUMENT, "config.obstacles[0].length_m",
       create([](auto& c) { c.add_obstacles()->set_width_m(1); })},
      {"AddObstacleEmpty", Code::INVALID_ARGUMENT, "obstacles",
       [context](T&, Stub& stub, const std::string& id) {
         v1::AddObstacleRequest request;
         request.set_session_id(id);
         v1::AddObstacleResponse response;
         return stub.AddObstacle(context().get(), request, &response);
       }},
      {"AddObstacleNaNCenter", Code::INVALID_ARGUMENT, "obstacles[1].center_x_m",
       add_obstacles([](auto& o) { o.set_center_x_m(kNaN); })},
      {"AddObstacleFarAway", Code::INVALID_ARGUMENT, "obstacles[1].center_y_m",
       add_obstacles([](auto& o) { o.set_center_y_m(2e7); })},
      {"AddObstacleInfYaw", Code::INVALID_ARGUMENT, "obstacles[1].yaw_rad",
       add_obstacles([](auto& o) { o.set_yaw_rad(kInf); })},
      {"AddObstacleTooWide", Code::INVALID_ARGUMENT, "obstacles[1].width_m",
       add_obstacles([](auto& o) { o.set_width_m(1e6); })},
      {"AddObstacleNegativeLength", Code::INVALID_ARGUMENT, "obstacles[1].length_m",
       add_obstacles([](auto& o) { o.set_length_m(-1); })},
      {"AddObstacleLongName", Code::INVALID_ARGUMENT, "obstacles[1].name",
       add_obstacles([](auto& o) { o.set_name(std::string(200, 'o')); })},
      {"RemoveUnknownObstacle", Code::NOT_FOUND, "obstacle_id",
       [context](T&, Stub& stub, const std::string& id) {
         v1::RemoveObstacleRequest request;
         request.set_session_id(id);
         request.set_obstacle_id(3);
         v1::RemoveObstacleResponse response;
         return stub.RemoveObstacle(context().get(), request, &response);
       }},
      {"SpawnSteeringRateNaN", Code::INVALID_ARGUMENT,
       "vehicles[0].limits.max_steering_rate_radps",
       spawn([](auto& s) { s.mutable_limits()->set_max_steering_rate_radps(kNaN); })},
      {"SpawnSteeringRateInf", Code::INVALID_ARGUMENT,
       "vehicles[0].limits.max_steering_rate_radps",
       spawn([](auto& s) { s.mutable_limits()->set_max_steering_rate_radps(kInf); })},
      {"SpawnScanZeroBeams", Code::INVALID_ARGUMENT, "vehicles[0].range_scan.beam_count",
       spawn([](auto& s) { s.mutable_range_scan()->set_beam_count(0); })},
      {"SpawnScanTooManyBeams", Code::INVALID_ARGUMENT, "vehicles[0].range_scan.beam_count",
       spawn([](auto& s) { s.mutable_range_scan()->set_beam_count(5000); })},
      {"SpawnScanFovTooWide", Code::INVALID_ARGUMENT, "vehicles[0].range_scan.field_of_view_rad",
       spawn([](auto& s) { s.mutable_range_scan()->set_field_of_view_rad(7.0); })},
      {"SpawnScanRangeNaN", Code::INVALID_ARGUMENT, "vehicles[0].range_scan.max_range_m",
       spawn([](auto& s) { s.mutable_range_scan()->set_max_range_m(kNaN); })},
      {"SpawnNearestCountZero", Code::INVALID_ARGUMENT, "vehicles[0].nearest_objects.count",
       spawn([](auto& s) { s.mutable_nearest_objects()->set_count(0); })},
      {"SpawnNearestRadiusNegative", Code::INVALID_ARGUMENT,
       "vehicles[0].nearest_objects.radius_m",
       spawn([](auto& s) { s.mutable_nearest_objects()->set_radius_m(-5); })},
      {"SpawnNoModel", Code::INVALID_ARGUMENT, "vehicles[0].model",
       spawn([](auto& s) { s.clear_kinematic_bicycle(); })},
      {"SpawnLengthZero", Code::INVALID_ARGUMENT, "vehicles[0].length_m",
       spawn([](auto& s) { s.set_length_m(0); })},
      {"SpawnLengthNaN", Code::INVALID_ARGUMENT, "vehicles[0].length_m",
       spawn([](auto& s) { s.set_length_m(kNaN); })},
      {"SpawnWidthInf", Code::INVALID_ARGUMENT, "vehicles[0].width_m",
       spawn([](auto& s) { s.set_width_m(kInf); })},
      {"SpawnWheelbaseLongerThanBody", Code::INVALID_ARGUMENT,
       "vehicles[0].kinematic_bicycle.wheelbase_m",
       spawn([](auto& s) { s.mutable_kinematic_bicycle()->set_wheelbase_m(5); })},
      {"SpawnNegativeOverhang", Code::INVALID_ARGUMENT,
       "vehicles[0].kinematic_bicycle.rear_overhang_m",
       spawn([](auto& s) { s.mutable_kinematic_bicycle()->set_rear_overhang_m(-1); })},
      {"SpawnUnknownIntegrator", Code::INVALID_ARGUMENT,
       "vehicles[0].kinematic_bicycle.integrator",
       spawn([](auto& s) {
         s.mutable_kinematic_bicycle()->set_integrator(static_cast<v1::BicycleIntegrator>(7));
       })},
      {"SpawnPoseNaN", Code::INVALID_ARGUMENT, "vehicles[0].initial_pose.y_m",
       spawn([](auto& s) { s.mutable_initial_pose()->set_y_m(kNaN); })},
      {"SpawnSpeedAboveLimit", Code::INVALID_ARGUMENT, "vehicles[0].initial_speed_mps",
       spawn([](auto& s) { s.set_initial_speed_mps(31); })},
      {"SpawnSteeringLimitTooLarge", Code::INVALID_ARGUMENT,
       "vehicles[0].limits.max_steering_angle_rad",
       spawn([](auto& s) { s.mutable_limits()->set_max_steering_angle_rad(2.0); })},
      {"SpawnEmpty", Code::INVALID_ARGUMENT, "vehicles",
       [context](T&, Stub& stub, const std::string& id) {
         v1::SpawnVehicleRequest request;
         request.set_session_id(id);
         v1::SpawnVehicleResponse response;
         return stub.SpawnVehicle(context().get(), request, &response);
       }},
      {"SpawnBeyondMaxVehicles", Code::RESOURCE_EXHAUSTED, "vehicles",
       [context](T&, Stub& stub, const std::string& id) {
         v1::SpawnVehicleRequest request;
         request.set_session_id(id);
         for (int i = 0; i < 6; ++i) request.add_vehicles()->mutable_kinematic_bicycle();
         v1::SpawnVehicleResponse response;
         return stub.SpawnVehicle(context().get(), request, &response);
       }},
      {"ControlNaNAcceleration", Code::INVALID_ARGUMENT, "controls[0].acceleration_mps2",
       control(1, kNaN, 0)},
      {"ControlInfSteering", Code::INVALID_ARGUMENT, "controls[0].steering_angle_rad",
       control(1, 0, -kInf)},
      {"ControlUnknownVehicle", Code::NOT_FOUND, "controls[0].vehicle_id", control(77, 0, 0)},
      {"ControlThrottleForABicycle", Code::INVALID_ARGUMENT, "controls[0].throttle",
       [context](T&, Stub& stub, const std::string& id) {
         v1::SetControlsRequest request;
         request.set_session_id(id);
         v1::VehicleControl* c = request.add_controls();
         c->set_vehicle_id(1);
         c->set_throttle(0.5);
         v1::SetControlsResponse response;
         return stub.SetControls(context().get(), request, &response);
       }},
      {"ControlBrakeAboveOne", Code::INVALID_ARGUMENT, "controls[0].brake",
       [context](T&, Stub& stub, const std::string& id) {
         v1::SetControlsRequest request;
         request.set_session_id(id);
         v1::VehicleControl* c = request.add_controls();
         c->set_vehicle_id(1);
         c->set_brake(2.0);
         v1::SetControlsResponse response;
         return stub.SetControls(context().get(), request, &response);
       }},
      {"SpawnPhysicsBodyWithSteeringLimit", Code::INVALID_ARGUMENT,
       "vehicles[0].limits.max_steering_angle_rad",
       spawn([](auto& s) {
         s.mutable_physics_body();
         s.mutable_limits()->set_max_steering_angle_rad(0.5);
       })},
      {"SpawnSingleTrackUnknownPreset", Code::INVALID_ARGUMENT,
       "vehicles[0].single_track.preset",
       spawn([](auto& s) {
         s.mutable_single_track()->set_preset(static_cast<v1::SingleTrackPreset>(9));
       })},
      {"SpawnFrontWheelDriveLongWheelbase", Code::INVALID_ARGUMENT,
       "vehicles[0].front_wheel_drive.wheelbase_m",
       spawn([](auto& s) { s.mutable_front_wheel_drive()->set_wheelbase_m(9.0); })},
      {"SpawnAllWheelDriveNoGrip", Code::INVALID_ARGUMENT,
       "vehicles[0].all_wheel_drive.friction_coefficient",
       spawn([](auto& s) { s.mutable_all_wheel_drive()->set_friction_coefficient(-1.0); })},
      {"SpawnForceBasedNaNMass", Code::INVALID_ARGUMENT, "vehicles[0].force_based.mass_kg",
       spawn([](auto& s) { s.mutable_force_based()->set_mass_kg(kNaN); })},
      {"SpawnFourWheelNoDrivenAxle", Code::INVALID_ARGUMENT, "vehicles[0].four_wheel.",
       spawn([](auto& s) {
         s.mutable_four_wheel()->set_front_wheel_drive(false);
         s.mutable_four_wheel()->set_rear_wheel_drive(false);
       })},
      {"SpawnFourWheelStiffnessInf", Code::INVALID_ARGUMENT,
       "vehicles[0].four_wheel.suspension_stiffness_npm",
       spawn([](auto& s) { s.mutable_four_wheel()->set_suspension_stiffness_npm(kInf); })},
      {"SpawnReverseForAFrontWheelDrive", Code::INVALID_ARGUMENT,
       "vehicles[0].initial_speed_mps",
       spawn([](auto& s) {
         s.mutable_front_wheel_drive();
         s.set_initial_speed_mps(-1.0);
       })},
      {"ControlDuplicateVehicle", Code::INVALID_ARGUMENT, "controls[1].vehicle_id",
       [context](T&, Stub& stub, const std::string& id) {
         v1::SetControlsRequest request;
         request.set_session_id(id);
         request.add_controls()->set_vehicle_id(1);
         request.add_controls()->set_vehicle_id(1);
         v1::SetControlsResponse response;
         return stub.SetControls(context().get(), request, &response);
       }},
      {"StepZero", Code::INVALID_ARGUMENT, "ticks", step(0)},
      {"StepAboveLimit", Code::INVALID_ARGUMENT, "ticks", step(101)},
      {"StepExpectedTickMismatch", Code::ABORTED, "expected_tick",
       [context](T&, Stub& stub, const std::string& id) {
         v1::StepRequest request;
         request.set_session_id(id);
         request.set_ticks(1);
         request.set_expected_tick(5);
         v1::StepResponse response;
         return stub.Step(context().get(), request, &response);
       }},
      {"RemoveUnknownVehicle", Code::NOT_FOUND, "vehicle_id",
       [context](T&, Stub& stub, const std::string& id) {
         v1::RemoveVehicleRequest request;
         request.set_session_id(id);
         request.set_vehicle_id(42);
         v1::RemoveVehicleResponse response;
         return stub.RemoveVehicle(context().get(), request, &response);
       }},
      {"EmptySessionId", Code::INVALID_ARGUMENT, "session_id",
       [context](T&, Stub& stub, const std::string&) {
         v1::StepRequest request;
         request.set_ticks(1);
         v1::StepResponse response;
         return stub.Step(context().get(), request, &response);
       }},
      {"GetSessionUnknown", Code::NOT_FOUND, "session_id",
       unknown_session(&Stub::GetSession)},
      {"DeleteSessionUnknown", Code::NOT_FOUND, "session_id",
       unknown_session(&Stub::DeleteSession)},
      {"SpawnUnknownSession", Code::NOT_FOUND, "session_id",
       unknown_session(&Stub::SpawnVehicle)},
      {"RemoveUnknownSession", Code::NOT_FOUND, "session_id",
       unknown_session(&Stub::RemoveVehicle)},
      {"SetControlsUnknownSession", Code::NOT_FOUND, "session_id",
       unknown_session(&Stub::SetControls)},
      {"StepUnknownSession", Code::NOT_FOUND, "session_id",
       unknown_session(&Stub::Step)},
      {"AddObstacleUnknownSession", Code::NOT_FOUND, "session_id",
       unknown_session(&Stub::AddObstacle)},
      {"RemoveObstacleUnknownSession", Code::NOT_FOUND, "session_id",
       unknown_session(&Stub::RemoveObstacle)},
      {"GetStateUnknownSession", Code::NOT_FOUND, "session_id",
       unknown_session(&Stub::GetState)},
  };
}

class BadRequestTest : public SimulatorServiceTest,
                       public ::testing::WithParamInterface<BadRequest> {};

INSTANTIATE_TEST_SUITE_P(SimulatorService, BadRequestTest, ::testing::ValuesIn(BadRequests()),
                         [](const auto& info) { return info.param.name; });

// Each bad request gets its status code and a message naming the field, changes nothing in
// its session, and leaves other sessions and the server working.
TEST_P(BadRequestTest, IsRejectedWithoutSideEffects) {
  const std::string id = CreateSession();
  Spawn(id, 0, 2.0);
  const std::string other = CreateSession();
  Spawn(other, 5, 1.0);
  v1::StepResponse before;
  ASSERT_TRUE(Step(other, 1, &before).ok());

  const grpc::Status status = GetParam().call(*this, *stub_, id);
  EXPECT_THAT(status, StatusIs(GetParam().code, HasSubstr(GetParam().field)));

  v1::GetStateRequest get;
  get.set_session_id(id);
  v1::GetStateResponse state;
  ASSERT_TRUE(stub_->GetState(Context().get(), get, &state).ok());
  EXPECT_EQ(state.state().time().tick(), 0u);
  ASSERT_EQ(state.state().vehicles_size(), 1);
  EXPECT_EQ(state.state().vehicles(0).acceleration_mps2(), 0.0);
  v1::GetSessionRequest describe;
  describe.set_session_id(id);
  v1::GetSessionResponse description;
  ASSERT_TRUE(stub_->GetSession(Context().get(), describe, &description).ok());
  EXPECT_EQ(description.session().obstacle_count(), 0u);  // All or none.
  v1::StepResponse after;
  ASSERT_TRUE(Step(id, 1, &after).ok());
  EXPECT_EQ(after.state().vehicles(0).speed_mps(), 2.0);  // No control leaked in.
  ASSERT_TRUE(Step(other, 1, &after).ok());
  EXPECT_EQ(after.state().time().tick(), 2u);
}

TEST_F(SimulatorServiceTest, SessionLimitIsResourceExhausted) {
  std::vector<std::string> created;
  for (int i = 0; i < 4; ++i) created.push_back(CreateSession());
  v1::CreateSessionRequest request;
  v1::CreateSessionResponse response;
  const grpc::Status status = stub_->CreateSession(Context().get(), request, &response);
  EXPECT_THAT(status, StatusIs(grpc::StatusCode::RESOURCE_EXHAUSTED));
  v1::ListSessionsResponse list;
  ASSERT_TRUE(stub_->ListSessions(Context().get(), {}, &list).ok());
  EXPECT_EQ(list.sessions_size(), 4);
  EXPECT_EQ(list.sessions(0).session_id(), created[0]);  // Creation order.
  EXPECT_EQ(list.sessions(3).session_id(), created[3]);
}

TEST_F(SimulatorServiceTest, RemovedVehicleIsNotFound) {
  const std::string id = CreateSession();
  const std::uint64_t vehicle = Spawn(id);
  v1::RemoveVehicleRequest remove;
  remove.set_session_id(id);
  remove.set_vehicle_id(vehicle);
  v1::RemoveVehicleResponse removed;
  ASSERT_TRUE(stub_->RemoveVehicle(Context().get(), remove, &removed).ok());
  EXPECT_THAT(stub_->RemoveVehicle(Context().get(), remove, &removed),
              StatusIs(grpc::StatusCode::NOT_FOUND));
  v1::SetControlsRequest controls;
  controls.set_session_id(id);
  controls.add_controls()->set_vehicle_id(vehicle);
  v1::SetControlsResponse set;
  EXPECT_THAT(stub_->SetControls(Context().get(), controls, &set),
              StatusIs(grpc::StatusCode::NOT_FOUND));
}

// Streams: the first message is the current state; then every k-th tick; a reader that
// falls behind skips frames, and what it receives plus what it skipped accounts for every
// published frame. Deleting the session ends the stream with OK.
TEST_F(SimulatorServiceTest, StreamStatesDecimatesAndEndsWithTheSession) {
  const std::string id = CreateSession();
  Spawn(id, 0, 1.0);
  v1::StreamStatesRequest request;
  request.set_session_id(id);
  request.set_every_n_ticks(4);
  grpc::ClientContext context;
  auto reader = stub_->StreamStates(&context, request);
  v1::StreamStatesResponse message;
  ASSERT_TRUE(reader->Read(&message));
  EXPECT_EQ(message.state().time().tick(), 0u);
  EXPECT_EQ(message.skipped_frames(), 0u);

  v1::StepResponse step;
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(Step(id, 1, &step).ok());
  v1::DeleteSessionRequest remove;
  remove.set_session_id(id);
  v1::DeleteSessionResponse removed;
  ASSERT_TRUE(stub_->DeleteSession(Context().get(), remove, &removed).ok());
  EXPECT_EQ(removed.time().tick(), 40u);

  std::uint64_t last_tick = 0;
  std::uint64_t received = 0;
  std::uint64_t skipped = 0;
  while (reader->Read(&message)) {
    const std::uint64_t tick = message.state().time().tick();
    EXPECT_EQ(tick % 4, 0u);
    EXPECT_GT(tick, last_tick);
    EXPECT_NEAR(message.state().vehicles(0).x_m(), tick * 0.02, 1e-9);
    last_tick = tick;
    ++received;
    skipped += message.skipped_frames();
  }
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_EQ(last_tick, 40u);  // The latest frame is never dropped.
  EXPECT_EQ(received + skipped, 10u);
}

TEST_F(SimulatorServiceTest, StreamStatesErrors) {
  const std::string id = CreateSession();
  struct Case {
    std::string session_id;
    std::uint32_t every_n_ticks;
    grpc::StatusCode code;
  };
  for (const Case& c : {Case{"s-404", 1, grpc::StatusCode::NOT_FOUND},
                        Case{"", 1, grpc::StatusCode::INVALID_ARGUMENT},
                        Case{id, 0, grpc::StatusCode::INVALID_ARGUMENT}}) {
    v1::StreamStatesRequest request;
    request.set_session_id(c.session_id);
    request.set_every_n_ticks(c.every_n_ticks);
    grpc::ClientContext context;
    auto reader = stub_->StreamStates(&context, request);
    v1::StreamStatesResponse message;
    EXPECT_FALSE(reader->Read(&message));
    EXPECT_THAT(reader->Finish(), StatusIs(c.code)) << c.session_id;
  }
}

TEST_F(SimulatorServiceTest, CancelledStreamUnsubscribes) {
  const std::string id = CreateSession();
  auto session = *server_->sessions().Find(id);
  {
    v1::StreamStatesRequest request;
    request.set_session_id(id);
    grpc::ClientContext context;
    auto reader = stub_->StreamStates(&context, request);
    v1::StreamStatesResponse message;
    ASSERT_TRUE(reader->Read(&message));
    EXPECT_EQ(session->subscriber_count(), 1u);
    context.TryCancel();
    while (reader->Read(&message)) {
    }
    EXPECT_THAT(reader->Finish(), StatusIs(grpc::StatusCode::CANCELLED));
  }
  // OnDone runs on a gRPC thread shortly after the cancellation.
  for (int i = 0; i < 500 && session->subscriber_count() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(session->subscriber_count(), 0u);
}

// A Drive control racing ResetSession: whichever comes first, the reset ending the stream or
// the control finding its controller gone, the stream ends with NOT_FOUND naming vehicle_id,
// a field path and a reason (it once ended "control.control.the controller was detached").
// A control for a vehicle removed since the last observation: the session's NOT_FOUND
// reaches the client as it is, not under the control's field path.
TEST_F(SimulatorServiceTest, AControlForARemovedVehicleEndsTheStreamNamingVehicleId) {
  const std::string id = CreateSession();
  const std::uint64_t car = Spawn(id);
  auto context = Context();
  auto stream = Drive(context.get(), id, car);
  v1::RemoveVehicleRequest remove;
  remove.set_session_id(id);
  remove.set_vehicle_id(car);
  v1::RemoveVehicleResponse removed;
  ASSERT_TRUE(stub_->RemoveVehicle(Context().get(), remove, &removed).ok());
  // No tick since: the stream is still open, and the control finds the vehicle gone.
  ASSERT_TRUE(stream->Write(Control()));
  v1::DriveResponse observation;
  while (stream->Read(&observation)) {
  }
  EXPECT_THAT(stream->Finish(),
              StatusIs(grpc::StatusCode::NOT_FOUND,
                       absl::StrCat("vehicle_id: vehicle ", car, " was removed")));
}

TEST_F(SimulatorServiceTest, AControlRacingAResetEndsTheStreamNamingVehicleId) {
  const std::string id = CreateSession();
  for (int round = 0; round < 20; ++round) {
    auto context = Context();
    auto stream = Drive(context.get(), id, Spawn(id));  // At tick 0: reset never steps.
    std::atomic<bool> stop = false;
    std::thread controls([&] {
      // Until the stream ends (a write fails) or the reset is long done.
      while (!stop && stream->Write(Control())) {
      }
    });
    v1::ResetSessionRequest reset;
    reset.set_session_id(id);
    v1::ResetSessionResponse reset_response;
    ASSERT_TRUE(stub_->ResetSession(Context().get(), reset, &reset_response).ok());
    v1::DriveResponse observation;
    while (stream->Read(&observation)) {
    }
    stop = true;
    controls.join();
    const grpc::Status status = stream->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND) << status.error_message();
    EXPECT_THAT(status.error_message(), testing::StartsWith("vehicle_id: ")) << round;
  }
}

}  // namespace
}  // namespace pitlane::api

namespace pitlane::api {
namespace {

using ::pitlane::app::Server;
using ::pitlane::app::ServerOptions;

TEST(ServerStart, AnAddressThatCannotBeBoundIsUnavailable) {
  ServerOptions options;
  // A Unix socket in a directory that does not exist: fails locally, no name lookup.
  options.listen_address = "unix:/nonexistent-pitlane-dir/server.sock";
  const auto server = Server::Start(options);
  EXPECT_THAT(server, StatusIs(absl::StatusCode::kUnavailable, HasSubstr("listen")));
}

}  // namespace
}  // namespace pitlane::api

namespace pitlane::api {
namespace {

// StepSessions: sessions stepped on the workers (a session's first Step, whose tick cost is
// not known yet) and on the receiving thread (later small Steps), a session refused in its
// own result, and the call refused as a whole; under the sanitizers, the reactor's paths.
TEST_F(SimulatorServiceTest, StepSessionsStepsEachSessionOnItsOwn) {
  const std::string a = CreateSession();
  const std::string b = CreateSession();
  const std::uint64_t a_car = Spawn(a, 0, 1.0);
  const std::uint64_t b_car = Spawn(b, 0, 0.0);
  Spawn(b, 10, 0.0);
  v1::CreateSessionRequest paced_request;
  paced_request.mutable_config()->set_clock_mode(v1::CLOCK_MODE_REALTIME);
  v1::CreateSessionResponse paced;
  ASSERT_TRUE(stub_->CreateSession(Context().get(), paced_request, &paced).ok());

  for (int round = 0; round < 3; ++round) {
    v1::StepSessionsRequest request;
    v1::SessionStep* on_a = request.add_steps();
    on_a->set_session_id(a);
    on_a->set_ticks(100);
    v1::SessionStep* on_b = request.add_steps();
    on_b->set_session_id(b);
    on_b->set_ticks(5);
    v1::VehicleControl* control = on_b->add_controls();
    control->set_vehicle_id(b_car);
    control->set_acceleration_mps2(2.0);
    on_b->add_vehicle_ids(b_car);
    v1::SessionStep* on_paced = request.add_steps();
    on_paced->set_session_id(paced.session().session_id());
    on_paced->set_ticks(1);
    v1::StepSessionsResponse response;
    const grpc::Status status = stub_->StepSessions(Context().get(), request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(response.results_size(), 3);
    EXPECT_EQ(response.results(0).code(), 0);
    EXPECT_EQ(response.results(0).state().time().tick(), 100u * (round + 1));
    // 1 m/s for 2 s a round, from x = 0.
    EXPECT_NEAR(response.results(0).state().vehicles(0).x_m(), 2.0 * (round + 1), 1e-9);
    EXPECT_EQ(response.results(0).state().vehicles(0).vehicle_id(), a_car);
    EXPECT_EQ(response.results(1).state().time().tick(), 5u * (round + 1));
    ASSERT_EQ(response.results(1).state().vehicles_size(), 1);  // Only b_car, as asked.
    // 2 m/s² from the first tick: v = 2 · 5 (round + 1) · 0.02.
    EXPECT_NEAR(response.results(1).state().vehicles(0).speed_mps(), 0.2 * (round + 1), 1e-9);
    EXPECT_EQ(response.results(2).code(), static_cast<int>(grpc::StatusCode::FAILED_PRECONDITION));
    EXPECT_THAT(response.results(2).message(), HasSubstr("Step needs LOCKSTEP"));
    EXPECT_FALSE(response.results(2).has_state());
  }

  // The whole call refused: a session twice; nothing stepped.
  v1::StepSessionsRequest twice;
  for (int i = 0; i < 2; ++i) {
    v1::SessionStep* step = twice.add_steps();
    step->set_session_id(a);
    step->set_ticks(1);
  }
  v1::StepSessionsResponse refused;
  const grpc::Status status = stub_->StepSessions(Context().get(), twice, &refused);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("steps[1].session_id"));
  v1::StepResponse after;
  ASSERT_TRUE(Step(a, 1, &after).ok());
  EXPECT_EQ(after.state().time().tick(), 301u);
}

// From kStepSessionsSplit sessions on, half of the cheap Steps run on the workers while the
// receiving thread runs the others: each result is still its own session's, in order.
class ManySessionsTest : public SimulatorServiceTest {
 protected:
  ManySessionsTest() { max_sessions_ = 64; }
};

TEST_F(ManySessionsTest, StepSessionsOfManySessionsRunOnTwoSides) {
  const int count = kStepSessionsSplit + 5;
  std::vector<std::string> ids;
  std::vector<std::uint64_t> cars;
  for (int i = 0; i < count; ++i) {
    ids.push_back(CreateSession());
    cars.push_back(Spawn(ids.back(), 0, 0.0));
  }
  for (int round = 1; round <= 3; ++round) {
    v1::StepSessionsRequest request;
    for (int i = 0; i < count; ++i) {
      v1::SessionStep* step = request.add_steps();
      step->set_session_id(ids[i]);
      step->set_ticks(10);
      v1::VehicleControl* control = step->add_controls();
      control->set_vehicle_id(cars[i]);
      control->set_acceleration_mps2(0.1 * (i + 1));
    }
    v1::StepSessionsResponse response;
    const grpc::Status status = stub_->StepSessions(Context().get(), request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(response.results_size(), count);
    for (int i = 0; i < count; ++i) {
      const v1::SessionStepResult& result = response.results(i);
      EXPECT_EQ(result.session_id(), ids[i]);
      ASSERT_EQ(result.code(), 0) << result.message();
      EXPECT_EQ(result.state().time().tick(), 10u * round);
      // a = 0.1 (i + 1) m/s² since tick 0: v = a · 10 round · 0.02 s.
      EXPECT_NEAR(result.state().vehicles(0).speed_mps(), 0.1 * (i + 1) * 0.2 * round, 1e-9);
    }
  }

  // The same as a table: one row per session's car, in the request's order.
  v1::StepSessionsRequest request;
  request.set_layout(v1::STEP_RESULT_LAYOUT_TABLE);
  for (int i = 0; i < count; ++i) {
    v1::SessionStep* step = request.add_steps();
    step->set_session_id(ids[i]);
    step->set_ticks(1);
  }
  v1::StepSessionsResponse response;
  const grpc::Status status = stub_->StepSessions(Context().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  const v1::VehicleTable& table = response.vehicle_table();
  ASSERT_EQ(table.columns(), 12u);
  EXPECT_EQ(table.range_beams(), 0u);
  ASSERT_EQ(table.rows().size(), count * 12 * sizeof(double));
  std::vector<double> rows(count * 12);
  std::memcpy(rows.data(), table.rows().data(), table.rows().size());
  for (int i = 0; i < count; ++i) {
    EXPECT_FALSE(response.results(i).has_state());
    const double* row = &rows[12 * i];
    EXPECT_EQ(row[0], i);                                       // session
    EXPECT_EQ(row[1], static_cast<double>(cars[i]));            // vehicle_id
    EXPECT_EQ(row[2], 31.0);                                    // tick
    EXPECT_NEAR(row[6], 0.1 * (i + 1) * 0.02 * 31, 1e-9);       // speed_mps
    EXPECT_NEAR(row[8], 0.1 * (i + 1), 1e-9);                   // acceleration_mps2
    EXPECT_EQ(row[11], 0.0);                                    // crashed
  }
}

}  // namespace
}  // namespace pitlane::api
