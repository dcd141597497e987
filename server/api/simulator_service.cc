#include "server/api/simulator_service.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cerrno>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "google/protobuf/arena.h"
#include "server/api/audit.h"
#include "server/api/convert.h"
#include "server/api/recording_frames.h"
#include "server/api/recording_replay.h"
#include "server/api/grpc_status.h"
#include "server/api/rpc_counts.h"
#include "server/api/scenarios.h"
#include "server/api/wire.h"
#include "server/util/echo.h"
#include "server/util/field_checks.h"
#include "server/util/status_macros.h"

namespace pitlane::api {
namespace {

// The world's grid errors ("grid: 9 cars, but only 8 grid slots", "grid[2]: ... grid[0]
// ..."), in the request's terms: grid_from_spawn_points, and each slot by its spawn point's
// name.
std::string SpawnPointError(absl::string_view message,
                            absl::Span<const session::SpawnPoint> spawn_points) {
  std::string out = "grid_from_spawn_points: ";
  if (absl::ConsumePrefix(&message, "grid: ")) {
    absl::StrAppend(&out, message, " (the session's spawn points)");
    return out;
  }
  // Every "grid[i]" becomes spawn point "name".
  while (!message.empty()) {
    const std::size_t at = message.find("grid[");
    const std::size_t close = at == absl::string_view::npos ? at : message.find(']', at);
    std::size_t index = 0;
    if (close == absl::string_view::npos ||
        !absl::SimpleAtoi(message.substr(at + 5, close - at - 5), &index) ||
        index >= spawn_points.size()) {
      absl::StrAppend(&out, message);
      break;
    }
    absl::StrAppend(&out, message.substr(0, at), "spawn point \"",
                    Echo(spawn_points[index].name), "\"");
    message.remove_prefix(close + 1);
  }
  return out;
}

// Puts the request field that holds the offending entry in front of a lower layer's error
// ("vehicles" + "[2].length_m"). Limit errors describe the whole request and stay as they are.
absl::Status InField(absl::string_view field, const absl::Status& status) {
  if (status.code() == absl::StatusCode::kResourceExhausted) return status;
  return PrefixField(field, status);
}

// Who made a change, for its audit line: "<role> <token id>", or "anyone" with --auth=none.
std::string By(const Caller& caller) {
  if (caller.grant == nullptr) return "anyone";
  return absl::StrCat(auth::RoleName(caller.grant->role), " ", caller.token_id());
}

// Ends a unary call of `method` through gRPC's default reactor, and counts it.
grpc::ServerUnaryReactor* FinishUnary(grpc::CallbackServerContext* context,
                                      const absl::Status& status, RpcCounts& rpcs,
                                      absl::string_view method) {
  grpc::Status finished = ToGrpcStatus(status);
  rpcs.Count(method, finished.error_code());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(std::move(finished));
  return reactor;
}

// "Step" for StepRequest: the method a request type belongs to, in storage that lasts.
template <typename Request>
absl::string_view MethodOf() {
  static const std::string* const method = new std::string(
      absl::StripSuffix(Request::descriptor()->name(), "Request"));
  return *method;
}

// A unary call: parses the request, runs `handler(request, response)` (an exception ends this
// call alone, see Guarded) and encodes the response.
// The caller is authenticated first: a stranger's request is not even parsed.
template <typename Request, typename Response, typename Handler>
grpc::ServerUnaryReactor* Unary(grpc::CallbackServerContext* context, const grpc::ByteBuffer& raw,
                                grpc::ByteBuffer* raw_response, const Access& access,
                                RpcCounts& rpcs, Handler&& handler,
                                std::optional<HeavyReads::Slot>* held = nullptr) {
  const absl::Status status = Guarded([&]() -> absl::Status {
    ASSIGN_OR_RETURN(const Caller caller, access.Authenticate(*context));
    Request request;
    RETURN_IF_ERROR(ParseRequest(raw, request));
    Response response;
    RETURN_IF_ERROR(handler(caller, &request, &response));
    RETURN_IF_ERROR(CheckResponseSize(
        response.ByteSizeLong(),
        "ask for less: ListSessions describes sessions without their vehicle and obstacle "
        "lists, StreamStates with vehicle_ids sends a part of the state"));
    // A heavy read's slot goes with its encoding, freed when gRPC has sent it.
    *raw_response = held != nullptr && held->has_value()
                        ? SerializeMessage(response, *std::exchange(*held, std::nullopt))
                        : SerializeMessage(response);
    return absl::OkStatus();
  });
  return FinishUnary(context, status, rpcs, MethodOf<Request>());
}

// The wire encoding of one StreamStatesResponse without copying the state: `state_bytes`
// (an encoded WorldState, kept alive by `owner`) as field 1, then `tail`'s fields (2 and up).
// Protobuf parses a concatenation of encoded fields as one message, so streams share one
// encoding of a frame and add only their own counters and events.
grpc::ByteBuffer EncodeResponse(std::shared_ptr<const void> owner, const std::string& state_bytes,
                                const v1::StreamStatesResponse& tail) {
  std::string head;
  head.push_back(static_cast<char>((1 << 3) | 2));  // Field 1, length-delimited.
  for (std::uint64_t n = state_bytes.size();; n >>= 7) {  // Its length, as a varint.
    if (n < 0x80) {
      head.push_back(static_cast<char>(n));
      break;
    }
    head.push_back(static_cast<char>((n & 0x7F) | 0x80));
  }
  auto* keep_alive = new std::shared_ptr<const void>(std::move(owner));
  grpc::Slice slices[3] = {
      grpc::Slice(head),
      grpc::Slice(const_cast<char*>(state_bytes.data()), state_bytes.size(),
                  [](void* p) { delete static_cast<std::shared_ptr<const void>*>(p); },
                  keep_alive),
      grpc::Slice(tail.SerializeAsString()),
  };
  return grpc::ByteBuffer(slices, 3);
}

// One StreamStates call: a session subscriber (session/subscriber.h: newest frame wins,
// skips counted, events merged) on one side, a gRPC stream on the other, one write in flight.
// The subscriber tells it a frame waits (OnReady, outside the session's lock); it takes the
// frame when no write is in flight, and from OnWriteDone otherwise.
//
// Without a vehicle filter the state is encoded once per frame for every stream of the
// session (FrameEncoder) and sent as the same bytes (EncodeResponse); with one, each stream
// encodes its own selection.
//
// Ownership: the reactor owns itself through `self_` until gRPC calls OnDone; its subscriber
// holds another reference while the session may still tell it something.
class StateStreamReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer>,
                                 public session::SubscriberTransport,
                                 public SimulatorService::RevocableStream {
 public:
  // `caller`: who opened it; the stream ends when its token is revoked.
  static grpc::ServerWriteReactor<grpc::ByteBuffer>* Start(
      SimulatorService& service, Caller caller, std::shared_ptr<session::Session> session,
      session::SubscriberOptions options, std::shared_ptr<FrameEncoder> encoder) {
    auto reactor = std::shared_ptr<StateStreamReactor>(new StateStreamReactor(
        service, std::move(caller), session, options.vehicle_ids, std::move(encoder)));
    reactor->self_ = reactor;
    if (absl::Status registered = service.RegisterStream(reactor->caller_, reactor);
        !registered.ok()) {
      absl::MutexLock lock(&reactor->mu_);
      reactor->FinishLocked(ToGrpcStatus(registered));
      return reactor.get();
    }
    auto subscriber =
        std::make_shared<session::Subscriber>(std::move(options), reactor, &session->clock());
    {
      absl::MutexLock lock(&reactor->mu_);
      reactor->subscriber_ = subscriber;
    }
    if (absl::Status status = session->Subscribe(subscriber); !status.ok()) {
      absl::MutexLock lock(&reactor->mu_);
      reactor->FinishLocked(ToGrpcStatus(status));
    }
    return reactor.get();
  }

  void OnReady() override {
    absl::MutexLock lock(&mu_);
    if (!write_in_flight_) WriteNextLocked();
  }

  // The frame still waiting, if any, goes out before the stream ends: the latest frame is
  // never dropped.
  void OnClosed(const absl::Status& reason) override {
    absl::MutexLock lock(&mu_);
    close_status_ = ToGrpcStatus(reason);
    if (!write_in_flight_) WriteNextLocked();
    if (!write_in_flight_) FinishLocked(*close_status_);
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    write_in_flight_ = false;
    if (!ok) {
      FinishLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the stream broke"));
      return;
    }
    WriteNextLocked();
    if (!write_in_flight_ && close_status_.has_value()) FinishLocked(*close_status_);
  }

  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    FinishLocked(grpc::Status::CANCELLED);
  }

  // The token was revoked: the stream ends after the write in flight, if any, and sends
  // nothing newer (unlike a session that closed, whose last frame its readers may have).
  void Revoked(const absl::Status& status) override {
    absl::MutexLock lock(&mu_);
    revoked_ = true;
    close_status_ = ToGrpcStatus(status);
    if (!write_in_flight_) FinishLocked(*close_status_);
  }

  void OnDone() override {
    std::shared_ptr<session::Subscriber> subscriber;
    {
      absl::MutexLock lock(&mu_);
      subscriber = std::move(subscriber_);
    }
    if (subscriber != nullptr) session_->Unsubscribe(subscriber.get());
    service_.UnregisterStream(caller_, this);  // Nothing if it never registered.
    self_.reset();  // May destroy this object: nothing may follow.
  }

 private:
  StateStreamReactor(SimulatorService& service, Caller caller,
                     std::shared_ptr<session::Session> session,
                     std::vector<sim::VehicleId> vehicle_ids, std::shared_ptr<FrameEncoder> encoder)
      : service_(service),
        caller_(std::move(caller)),
        session_(std::move(session)),
        vehicle_ids_(std::move(vehicle_ids)),
        encoder_(std::move(encoder)) {}

  bool Selected(sim::VehicleId id) const {
    return std::binary_search(vehicle_ids_.begin(), vehicle_ids_.end(), id);
  }

  // Takes and sends the next frame. An exception (memory running out while encoding a big
  // frame) ends this stream alone, with its status.
  void WriteNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const absl::Status status = Guarded([&] {
      WriteNextUnguardedLocked();
      return absl::OkStatus();
    });
    if (!status.ok()) FinishLocked(ToGrpcStatus(status));
  }

  void WriteNextUnguardedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finishing_ || revoked_ || subscriber_ == nullptr) return;
    std::optional<session::Delivery> delivery = subscriber_->Take();
    if (!delivery.has_value()) return;
    const session::Frame& frame = *delivery->frame;
    v1::StreamStatesResponse tail;
    tail.set_skipped_frames(delivery->skipped_frames);
    EventsToProto(delivery->events, tail.mutable_events());
    tail.set_dropped_events(delivery->events.dropped);
    tail.set_ticks_over_contact_budget(delivery->events.ticks_over_contact_budget);
    TrackEventsToProto(delivery->events, frame, tail.mutable_lap_events(),
                       tail.mutable_race_events());
    tail.set_dropped_lap_events(delivery->events.dropped_lap_events);
    tail.set_dropped_race_events(delivery->events.dropped_race_events);
    if (vehicle_ids_.empty()) {
      const std::shared_ptr<const std::string> state = encoder_->Encode(delivery->frame);
      buffer_ = EncodeResponse(state, *state, tail);
    } else {
      v1::WorldState state;
      SimTimeToProto(frame.time, state.mutable_time());
      for (const sim::VehicleSnapshot& vehicle : frame.vehicles) {
        if (Selected(vehicle.id)) VehicleStateToProto(frame, vehicle, state.add_vehicles());
      }
      for (const sim::Contact& contact : frame.contacts) {
        if (sim::InvolvesAnyOf(contact, vehicle_ids_)) ContactToProto(contact, state.add_contacts());
      }
      state.set_dropped_contacts(frame.contacts_dropped);
      if (frame.race != nullptr) {
        RaceStatusToProto(*frame.race, session::RaceTrackName(frame), state.mutable_race());
      }
      auto selected = std::make_shared<std::string>(state.SerializeAsString());
      buffer_ = EncodeResponse(selected, *selected, tail);
    }
    if (const absl::Status size = CheckResponseSize(
            buffer_.Length(), "subscribe with vehicle_ids to receive a part of the world");
        !size.ok()) {
      buffer_.Clear();
      FinishLocked(ToGrpcStatus(size));
      return;
    }
    write_in_flight_ = true;
    StartWrite(&buffer_);
  }

  void FinishLocked(grpc::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finishing_) return;
    finishing_ = true;
    service_.rpcs().Count("StreamStates", status.error_code());
    Finish(std::move(status));
  }

  SimulatorService& service_;
  const Caller caller_;
  const std::shared_ptr<session::Session> session_;
  const std::vector<sim::VehicleId> vehicle_ids_;  // Sorted, unique; empty: all.
  const std::shared_ptr<FrameEncoder> encoder_;
  std::shared_ptr<StateStreamReactor> self_;

  absl::Mutex mu_;
  std::shared_ptr<session::Subscriber> subscriber_ ABSL_GUARDED_BY(mu_);
  grpc::ByteBuffer buffer_ ABSL_GUARDED_BY(mu_);  // The write in flight.
  bool write_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> close_status_ ABSL_GUARDED_BY(mu_);  // Set once the session closed.
  bool revoked_ ABSL_GUARDED_BY(mu_) = false;  // Its token was: no frame is taken any more.
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
};

// One Drive call: a controller for one vehicle. Reads: the attach message, then controls,
// each handed to the session (which applies it between ticks). Writes: an observation per
// frame its subscriber delivers (newest wins, the vehicle's contact events kept), one write
// in flight.
//
// Locking: never calls into the session while holding its own lock.
class DriveReactor final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>,
                           public session::SubscriberTransport,
                           public SimulatorService::RevocableStream {
 public:
  // `peer`: the client's address, for the audit lines of attach and detach. `caller`: who
  // calls (an error ends the stream at once); the stream ends when its token is revoked.
  static grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Start(
      SimulatorService& service, grpc::CallbackServerContext* context,
      absl::StatusOr<Caller> caller) {
    auto reactor = std::shared_ptr<DriveReactor>(new DriveReactor(service, context));
    reactor->self_ = reactor;
    if (!caller.ok()) {
      reactor->FinishSoon(ToGrpcStatus(caller.status()));
      return reactor.get();
    }
    reactor->caller_ = *std::move(caller);
    if (absl::Status registered = service.RegisterStream(reactor->caller_, reactor);
        !registered.ok()) {
      reactor->FinishSoon(ToGrpcStatus(registered));
      return reactor.get();
    }
    reactor->StartRead(&reactor->raw_request_);
    return reactor.get();
  }

  // The token was revoked: the car is let go at once (another controller may attach), no
  // control read from now on is applied, and the stream ends after the write in flight (a
  // client that stalls that write by not reading holds an open stream that does nothing).
  void Revoked(const absl::Status& status) override {
    std::shared_ptr<session::Session> session;
    std::shared_ptr<session::Subscriber> subscriber;
    {
      absl::MutexLock lock(&mu_);
      revoked_ = true;
      session = session_;
      subscriber = subscriber_;  // Kept for OnDone (detaching twice does nothing).
    }
    if (session != nullptr && subscriber != nullptr) session->DetachController(subscriber.get());
    FinishSoon(ToGrpcStatus(status));
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // The controller half-closed (it is done) or the stream broke.
      FinishSoon(grpc::Status::OK);
      return;
    }
    bool attached;
    {
      absl::MutexLock lock(&mu_);
      if (revoked_) return;  // Ending: nothing more is read or applied.
      attached = subscriber_ != nullptr;
    }
    const absl::Status status = Guarded([&]() -> absl::Status {
      request_.Clear();
      RETURN_IF_ERROR(ParseRequest(raw_request_, request_));
      return attached ? Control() : Attach();
    });
    if (!status.ok()) {
      FinishSoon(ToGrpcStatus(status));
      return;
    }
    StartRead(&raw_request_);
  }

  void OnReady() override {
    absl::MutexLock lock(&mu_);
    if (!write_in_flight_) WriteNextLocked();
  }

  void OnClosed(const absl::Status& reason) override { FinishSoon(ToGrpcStatus(reason)); }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    write_in_flight_ = false;
    if (finishing_) return;
    if (!ok) {
      FinishLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the stream broke"));
    } else if (finish_after_write_.has_value()) {
      FinishLocked(*finish_after_write_);
    } else {
      WriteNextLocked();
    }
  }

  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    FinishLocked(grpc::Status::CANCELLED);
  }

  void OnDone() override {
    std::shared_ptr<session::Session> session;
    std::shared_ptr<session::Subscriber> subscriber;
    sim::VehicleId vehicle = 0;
    {
      absl::MutexLock lock(&mu_);
      session = session_;
      subscriber = std::move(subscriber_);
      vehicle = vehicle_;
    }
    service_.UnregisterStream(caller_, this);  // Nothing if it never registered.
    // Attached (a failed attach leaves no subscriber): the controller leaves, and says so
    // unless something else detached it first (the owner, a revocation, a take-over, a reset
    // or removal: their own audit lines tell).
    if (session != nullptr && subscriber != nullptr && session->DetachController(subscriber.get())) {
      Audit(peer_, "controller.detach",
            {{"by", By(caller_)}, {"session", session->id()}, {"vehicle", vehicle}});
    }
    self_.reset();  // May destroy this object: nothing may follow.
  }

 private:
  DriveReactor(SimulatorService& service, grpc::CallbackServerContext* context)
      : service_(service), peer_(context->peer()) {}

  // The first message. On success the session is set and observations flow.
  absl::Status Attach() {
    if (request_.message_case() != v1::DriveRequest::kAttach) {
      return absl::InvalidArgumentError("attach: the first message must be attach");
    }
    const v1::DriveAttach& attach = request_.attach();
    absl::StatusOr<std::shared_ptr<session::Session>> session = service_.Authorized(
        caller_, auth::Need::kDrive, attach.session_id(), attach.vehicle_id());
    if (!session.ok()) return PrefixField("attach", session.status());
    session::DisconnectAction action = session::DisconnectAction::kBrakeToStop;
    switch (attach.on_disconnect()) {
      case v1::DISCONNECT_ACTION_UNSPECIFIED:
      case v1::DISCONNECT_ACTION_BRAKE_TO_STOP:
        break;
      case v1::DISCONNECT_ACTION_HOLD_CONTROLS:
        action = session::DisconnectAction::kHoldControls;
        break;
      default:
        return absl::InvalidArgumentError(absl::StrCat(
            "attach.on_disconnect: unknown value ", attach.on_disconnect()));
    }
    auto subscriber = std::make_shared<session::Subscriber>(
        session::SubscriberOptions{.vehicle_ids = {attach.vehicle_id()}}, self_,
        &(*session)->clock());
    {
      absl::MutexLock lock(&mu_);
      vehicle_ = attach.vehicle_id();
      session_ = *session;
      subscriber_ = subscriber;
    }
    // The session offers the first observation from inside this call.
    // The same token may take its own car back from a stream that died without a word.
    const absl::StatusOr<bool> took_over = (*session)->AttachController(
        attach.vehicle_id(), action, subscriber,
        caller_.grant != nullptr ? caller_.token_id() : std::string());
    if (!took_over.ok()) {
      absl::MutexLock lock(&mu_);
      subscriber_.reset();
      return PrefixField("attach", took_over.status());
    }
    bool revoked;
    {
      absl::MutexLock lock(&mu_);
      revoked = revoked_;
    }
    if (revoked) {  // Revoked while attaching: Revoked() may have found nothing to detach yet.
      (*session)->DetachController(subscriber.get());
      return absl::UnauthenticatedError("authorization: this stream's token was revoked");
    }
    Audit(peer_, "controller.attach",
          {{"by", By(caller_)}, {"session", (*session)->id()},
           {"vehicle", attach.vehicle_id()},
           {"on_disconnect", action == session::DisconnectAction::kBrakeToStop ? "brake_to_stop"
                                                                               : "hold_controls"},
           {"took_over", *took_over ? "true" : "false"}});
    return absl::OkStatus();
  }

  absl::Status Control() {
    if (request_.message_case() != v1::DriveRequest::kControl) {
      return absl::InvalidArgumentError("control: expected a control after attach");
    }
    const v1::DriveControl& control = request_.control();
    std::shared_ptr<session::Session> session;
    const session::Subscriber* subscriber = nullptr;
    {
      absl::MutexLock lock(&mu_);
      if (revoked_) {
        return absl::UnauthenticatedError("authorization: this stream's token was revoked");
      }
      session = session_;
      subscriber = subscriber_.get();
    }
    absl::StatusOr<session::ControlReceipt> receipt =
        session->ApplyControl(subscriber, control.tick(), VehicleInputFromProto(control.control()));
    if (!receipt.ok()) {
      // The vehicle or the controller is gone: the message names vehicle_id already.
      if (receipt.status().code() != absl::StatusCode::kInvalidArgument) return receipt.status();
      // "tick: ..." belongs to DriveControl; the model's field errors to its VehicleControl.
      const bool tick_error = absl::StartsWith(receipt.status().message(), "tick:");
      return PrefixField(tick_error ? "control" : "control.control", receipt.status());
    }
    absl::MutexLock lock(&mu_);
    if (*receipt == session::ControlReceipt::kLate) ++late_;
    if (*receipt == session::ControlReceipt::kStale) ++stale_;
    return absl::OkStatus();
  }

  // Takes and sends the next observation; an exception ends this stream alone.
  void WriteNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const absl::Status status = Guarded([&] {
      WriteNextUnguardedLocked();
      return absl::OkStatus();
    });
    if (!status.ok()) FinishLocked(ToGrpcStatus(status));
  }

  void WriteNextUnguardedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finishing_ || finish_after_write_.has_value() || subscriber_ == nullptr) return;
    std::optional<session::Delivery> delivery = subscriber_->Take();
    if (!delivery.has_value()) return;
    const session::Frame& frame = *delivery->frame;
    const auto it = std::lower_bound(
        frame.vehicles.begin(), frame.vehicles.end(), vehicle_,
        [](const sim::VehicleSnapshot& v, sim::VehicleId id) { return v.id < id; });
    if (it == frame.vehicles.end() || it->id != vehicle_) {
      FinishLocked(grpc::Status(grpc::StatusCode::NOT_FOUND,
                                absl::StrCat("vehicle_id: vehicle ", vehicle_, " was removed")));
      return;
    }
    response_.Clear();
    SimTimeToProto(frame.time, response_.mutable_time());
    VehicleStateToProto(frame, *it, response_.mutable_vehicle());
    EventsToProto(delivery->events, response_.mutable_events());
    response_.set_skipped_observations(delivery->skipped_frames);
    response_.set_late_controls(late_);
    response_.set_stale_controls(stale_);
    response_.set_ticks_over_contact_budget(delivery->events.ticks_over_contact_budget);
    TrackEventsToProto(delivery->events, frame, response_.mutable_lap_events(),
                       response_.mutable_race_events());
    response_.set_dropped_lap_events(delivery->events.dropped_lap_events);
    response_.set_dropped_race_events(delivery->events.dropped_race_events);
    if (frame.race != nullptr) {
      RaceStatusToProto(*frame.race, session::RaceTrackName(frame), response_.mutable_race());
    }
    if (const absl::Status size = CheckResponseSize(
            response_.ByteSizeLong(), "this vehicle's observation and events are too large");
        !size.ok()) {
      FinishLocked(ToGrpcStatus(size));
      return;
    }
    raw_response_ = SerializeMessage(response_);
    write_in_flight_ = true;
    StartWrite(&raw_response_);
  }

  // Finishes now, or after the write in flight (the first status asked for wins).
  void FinishSoon(grpc::Status status) {
    absl::MutexLock lock(&mu_);
    if (write_in_flight_) {
      if (!finish_after_write_.has_value()) finish_after_write_ = std::move(status);
    } else {
      FinishLocked(std::move(status));
    }
  }

  void FinishLocked(grpc::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finishing_) return;
    finishing_ = true;
    service_.rpcs().Count("Drive", status.error_code());
    Finish(std::move(status));
  }

  SimulatorService& service_;
  const std::string peer_;
  Caller caller_;  // Set in Start, before the first read.
  std::shared_ptr<DriveReactor> self_;
  grpc::ByteBuffer raw_request_;  // The read in flight (reads are sequential).
  v1::DriveRequest request_;      // The last one read, parsed.

  absl::Mutex mu_;
  std::shared_ptr<session::Session> session_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<session::Subscriber> subscriber_ ABSL_GUARDED_BY(mu_);  // Once attached.
  sim::VehicleId vehicle_ ABSL_GUARDED_BY(mu_) = 0;
  v1::DriveResponse response_ ABSL_GUARDED_BY(mu_);  // Reused from write to write.
  grpc::ByteBuffer raw_response_ ABSL_GUARDED_BY(mu_);  // The write in flight.
  std::uint64_t late_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t stale_ ABSL_GUARDED_BY(mu_) = 0;
  bool write_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
  bool revoked_ ABSL_GUARDED_BY(mu_) = false;  // Its token was revoked: ending.
  std::optional<grpc::Status> finish_after_write_ ABSL_GUARDED_BY(mu_);
};

// A Step's response from its result (the error, if it failed).
absl::Status EncodeStepResponse(absl::StatusOr<session::StepResult> result,
                                grpc::ByteBuffer* raw_response) {
  return Guarded([&]() -> absl::Status {
    RETURN_IF_ERROR(result.status());
    v1::StepResponse response;
    FrameToProto(*result->frame, response.mutable_state());
    EventsToProto(result->events, response.mutable_events());
    response.set_dropped_events(result->events.dropped);
    response.set_ticks_over_contact_budget(result->events.ticks_over_contact_budget);
    TrackEventsToProto(result->events, *result->frame, response.mutable_lap_events(),
                       response.mutable_race_events());
    response.set_dropped_lap_events(result->events.dropped_lap_events);
    response.set_dropped_race_events(result->events.dropped_race_events);
    RETURN_IF_ERROR(CheckResponseSize(
        response.ByteSizeLong(),
        "the ticks were stepped, but the state and events are too large for a Step response; "
        "read the state with StreamStates and vehicle_ids, or step fewer ticks at a time"));
    *raw_response = SerializeMessage(response);
    return absl::OkStatus();
  });
}

class StepReactor;

// A Step's result on its way from the session (its on_done, called once) to whoever answers
// the call: the handler itself when the Step ran at once on the handler's thread (a small
// Step: answered through gRPC's default reactor, which ends the call without waking another
// thread), else the StepReactor the handler made for a Step that runs on the workers.
class PendingStep {
 public:
  // The session's on_done.
  void Deliver(absl::StatusOr<session::StepResult> result);
  // After StartStep: the result if it came already; else nullopt, and the reactor that
  // `make_reactor` makes answers.
  std::optional<absl::StatusOr<session::StepResult>> TakeOrHandTo(
      absl::FunctionRef<std::shared_ptr<StepReactor>()> make_reactor);

 private:
  absl::Mutex mu_;
  std::optional<absl::StatusOr<session::StepResult>> result_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<StepReactor> reactor_ ABSL_GUARDED_BY(mu_);
};

// A Step that runs on the session's workers (Session::StartStep); the call finishes when they
// are done. A client that cancels (or whose deadline passes) stops it between two ticks.
//
// Ownership: shared by gRPC (until OnDone) and the Step's PendingStep, so neither can outlive
// the other's use of it.
class StepReactor final : public grpc::ServerUnaryReactor {
 public:
  StepReactor(std::shared_ptr<session::StepTicket> ticket, grpc::ByteBuffer* response,
              RpcCounts& rpcs)
      : response_(response), rpcs_(rpcs), ticket_(std::move(ticket)) {}

  // Takes ownership of itself until gRPC calls OnDone.
  void Own(std::shared_ptr<StepReactor> self) { self_ = std::move(self); }

  // gRPC calls OnCancel at most once, before OnDone, and OnDone after every other callback.
  void OnCancel() override { ticket_->Cancel(); }

  void OnDone() override { self_.reset(); }  // May destroy this object: nothing may follow.

  // On a worker: the response is made there, off gRPC's threads.
  void Done(absl::StatusOr<session::StepResult> result) {
    grpc::Status finished = ToGrpcStatus(EncodeStepResponse(std::move(result), response_));
    rpcs_.Count("Step", finished.error_code());
    Finish(std::move(finished));
  }

 private:
  grpc::ByteBuffer* const response_;
  RpcCounts& rpcs_;
  std::shared_ptr<StepReactor> self_;
  const std::shared_ptr<session::StepTicket> ticket_;
};

void PendingStep::Deliver(absl::StatusOr<session::StepResult> result) {
  std::shared_ptr<StepReactor> reactor;
  {
    absl::MutexLock lock(&mu_);
    if (reactor_ == nullptr) {
      result_ = std::move(result);  // The handler takes it.
      return;
    }
    reactor = std::move(reactor_);
  }
  reactor->Done(std::move(result));
}

std::optional<absl::StatusOr<session::StepResult>> PendingStep::TakeOrHandTo(
    absl::FunctionRef<std::shared_ptr<StepReactor>()> make_reactor) {
  absl::MutexLock lock(&mu_);
  if (result_.has_value()) return std::exchange(result_, std::nullopt);
  reactor_ = make_reactor();
  return std::nullopt;
}

// A StepSessions call: the Steps of many sessions, each answered into its own result; the
// call finishes when the last one is in (on whichever thread delivers it). A client that
// cancels stops every Step still running between two ticks.
//
// Ownership: shared by gRPC (until OnDone) and every Step's on_done, so none can outlive the
// others' use of it.
class BatchStepReactor final : public grpc::ServerUnaryReactor {
 public:
  // `table`: STEP_RESULT_LAYOUT_TABLE (the vehicles in the response's vehicle_table).
  BatchStepReactor(v1::StepSessionsResponse response,
                   std::vector<std::vector<std::uint64_t>> filters, bool table,
                   grpc::ByteBuffer* raw_response, RpcCounts& rpcs)
      : response_(std::move(response)),
        filters_(std::move(filters)),
        table_(table),
        raw_response_(raw_response),
        rpcs_(rpcs),
        remaining_(response_.results_size()),
        unlaunched_(response_.results_size()),
        frames_(table ? response_.results_size() : 0) {}

  void Own(std::shared_ptr<BatchStepReactor> self) { self_ = std::move(self); }
  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    for (const std::shared_ptr<session::StepTicket>& ticket : tickets_) ticket->Cancel();
  }
  void OnDone() override { self_.reset(); }  // May destroy this object: nothing may follow.

  // Step `index` started: its result will be delivered.
  void Launched(std::shared_ptr<session::StepTicket> ticket) {
    absl::MutexLock lock(&mu_);
    --unlaunched_;
    tickets_.push_back(std::move(ticket));
  }

  // Step `index`'s result (any thread, once per step); the last answers the call. Encoded
  // outside the lock (results from several workers in parallel).
  void Deliver(int index, absl::StatusOr<session::StepResult> result) {
    if (table_) {
      DeliverRows(index, std::move(result));
      return;
    }
    v1::SessionStepResult out;
    const absl::Status encoded = Guarded([&]() -> absl::Status {
      RETURN_IF_ERROR(result.status());
      FrameToProto(*result->frame, out.mutable_state());
      const std::vector<std::uint64_t>& only = filters_[index];  // Sorted.
      if (!only.empty()) {
        auto* vehicles = out.mutable_state()->mutable_vehicles();
        vehicles->erase(std::remove_if(vehicles->begin(), vehicles->end(),
                                       [&](const v1::VehicleState& v) {
                                         return !std::binary_search(only.begin(), only.end(),
                                                                    v.vehicle_id());
                                       }),
                        vehicles->end());
      }
      return absl::OkStatus();
    });
    {
      absl::MutexLock lock(&mu_);
      if (answered_) return;  // The call ended already (an error in its handler).
      v1::SessionStepResult& slot = *response_.mutable_results(index);
      if (!encoded.ok()) {
        Fail(slot, encoded);
      } else {
        // The response as a whole must fit one message: a state beyond that is this
        // session's RESOURCE_EXHAUSTED, not the call's (the others keep theirs).
        const std::size_t bytes = out.state().ByteSizeLong();
        const absl::Status fits = CheckResponseSize(
            bytes_ + bytes,
            "this session was stepped, but its state does not fit in the response with the "
            "others'; ask for fewer vehicles (vehicle_ids) or fewer sessions at a time");
        if (fits.ok()) {
          bytes_ += bytes;
          slot.mutable_state()->Swap(out.mutable_state());
        } else {
          Fail(slot, fits);
        }
      }
      if (!CompletesLocked()) return;
    }
    Answer();
  }

  // Deliver for the table layout: the frame is kept (the rows are written when all are in)
  // if the table with its rows still fits the response, every row padded to the widest range
  // scan so far (a wide scan widens the rows before it too); else this session's result is
  // RESOURCE_EXHAUSTED, and the others keep theirs.
  void DeliverRows(int index, absl::StatusOr<session::StepResult> result) {
    {
      absl::MutexLock lock(&mu_);
      if (answered_) return;
      v1::SessionStepResult& slot = *response_.mutable_results(index);
      if (!result.ok()) {
        Fail(slot, result.status());
      } else {
        std::size_t rows = 0;
        std::size_t beams = table_beams_;
        ForEachRow(index, *result->frame, [&](const sim::VehicleSnapshot& vehicle) {
          ++rows;
          beams = std::max(beams, BeamsOf(vehicle));
        });
        const std::size_t bytes =
            (table_rows_ + rows) * (kTableColumns + beams) * sizeof(double) +
            static_cast<std::size_t>(response_.results_size()) * kResultOverhead;
        const absl::Status fits = CheckResponseSize(
            bytes,
            "this session was stepped, but its vehicles do not fit in the response's table with "
            "the others' (each row as wide as the widest range scan); ask for fewer vehicles "
            "(vehicle_ids) or fewer sessions at a time");
        if (fits.ok()) {
          table_rows_ += rows;
          table_beams_ = beams;
          frames_[index] = std::move(result->frame);
        } else {
          Fail(slot, fits);
        }
      }
      if (!CompletesLocked()) return;
    }
    Answer();
  }

  // After a result is in: whether it was the last one (the handler done), which then answers.
  bool CompletesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (--remaining_ > 0 || !started_) return false;
    answered_ = true;
    return true;
  }

  // A step that failed before it started: its result says why.
  void Refuse(int index, const absl::Status& status) {
    absl::MutexLock lock(&mu_);
    Fail(*response_.mutable_results(index), status);
    --unlaunched_;
    --remaining_;
  }

  // After the handler has started (or refused) every step without error: if every result is
  // in already (each ran on the handler's thread, or was refused), encodes the response into
  // `raw_response` here and returns its status: the handler answers with gRPC's own reactor
  // (no thread of gRPC's is woken to run an OnDone of ours) and this object is not gRPC's.
  // Else nullopt, and the call is this reactor's, answered when the last result comes in.
  std::optional<absl::Status> FinishedHere() {
    {
      absl::MutexLock lock(&mu_);
      started_ = true;
      remaining_ -= unlaunched_;
      unlaunched_ = 0;
      if (remaining_ > 0 || answered_) return std::nullopt;
      answered_ = true;
    }
    self_.reset();  // The handler's reference is the last that matters now.
    return Guarded([&]() -> absl::Status {
      absl::MutexLock lock(&mu_);
      return EncodeLocked();
    });
  }

  // After the handler has started (or refused) every step: answers if all are in. With an
  // error (an exception in the handler), the call ends with it once the steps started are in,
  // and those not started never run.
  void Started(const absl::Status& error = absl::OkStatus()) {
    {
      absl::MutexLock lock(&mu_);
      started_ = true;
      error_ = error;
      remaining_ -= unlaunched_;
      unlaunched_ = 0;
      if (!error.ok()) {
        // Ended now: a step whose start was interrupted may still deliver; it is dropped.
        for (const std::shared_ptr<session::StepTicket>& ticket : tickets_) ticket->Cancel();
      } else if (remaining_ > 0) {
        return;
      }
      if (answered_) return;
      answered_ = true;
    }
    Answer();
  }

 private:
  static void Fail(v1::SessionStepResult& out, const absl::Status& status) {
    out.clear_state();
    out.set_code(static_cast<int>(status.code()));
    out.set_message(std::string(status.message()));
  }

  // The fixed columns of a VehicleTable row (see the proto), before the range scan's; and a
  // bound on a result's own bytes beside its rows (its session id, code and message).
  static constexpr std::size_t kTableColumns = 12;
  static constexpr std::size_t kResultOverhead = 256;

  static std::size_t BeamsOf(const sim::VehicleSnapshot& vehicle) {
    return vehicle.range_scan.has_value() ? vehicle.range_scan->ranges_m.size() : 0;
  }

  // Calls `f` with each vehicle of `frame` that step `index` returns (its filter, if any).
  template <typename F>
  void ForEachRow(int index, const session::Frame& frame, F&& f) const {
    const std::vector<std::uint64_t>& only = filters_[index];  // Sorted.
    for (const sim::VehicleSnapshot& vehicle : frame.vehicles) {
      if (only.empty() || std::binary_search(only.begin(), only.end(), vehicle.id)) f(vehicle);
    }
  }

  // The response's vehicle_table from the frames kept (their rows and widest scan counted as
  // they came in, within the response's size).
  void WriteTableLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const std::size_t beams = table_beams_;
    const std::size_t columns = kTableColumns + beams;
    std::vector<double> values;
    values.reserve(table_rows_ * columns);
    for (int i = 0; i < static_cast<int>(frames_.size()); ++i) {
      if (frames_[i] == nullptr) continue;
      const session::Frame& frame = *frames_[i];
      ForEachRow(i, frame, [&](const sim::VehicleSnapshot& vehicle) {
        const sim::VehicleReadout& readout = vehicle.readout;
        values.insert(values.end(),
                      {static_cast<double>(i), static_cast<double>(vehicle.id),
                       static_cast<double>(frame.time.tick), vehicle.pose.x_m, vehicle.pose.y_m,
                       vehicle.pose.yaw_rad, vehicle.speed_mps, readout.steering_angle_rad,
                       readout.acceleration_mps2, readout.yaw_rate_radps,
                       readout.lateral_speed_mps, vehicle.crashed ? 1.0 : 0.0});
        const std::size_t own = BeamsOf(vehicle);
        if (own > 0) {
          const std::vector<double>& ranges = vehicle.range_scan->ranges_m;
          values.insert(values.end(), ranges.begin(), ranges.end());
        }
        values.insert(values.end(), beams - own, std::numeric_limits<double>::quiet_NaN());
      });
    }
    static_assert(std::endian::native == std::endian::little,
                  "VehicleTable.rows is little-endian: convert on a big-endian machine");
    v1::VehicleTable* table = response_.mutable_vehicle_table();
    table->set_columns(static_cast<std::uint32_t>(columns));
    table->set_range_beams(static_cast<std::uint32_t>(beams));
    table->set_rows(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(double));
  }

  // The response (the table written first, for that layout) into raw_response_.
  absl::Status EncodeLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    RETURN_IF_ERROR(error_);
    if (table_) {
      WriteTableLocked();
      // Counted as the results came in; checked again as encoded.
      RETURN_IF_ERROR(CheckResponseSize(
          response_.ByteSizeLong(),
          "the vehicles' table (its rows padded to the widest range scan) does not fit in "
          "one response; ask for fewer vehicles (vehicle_ids) or fewer sessions at a time"));
    }
    *raw_response_ = SerializeMessage(response_);
    return absl::OkStatus();
  }

  void Answer() {
    const absl::Status status = Guarded([&]() -> absl::Status {
      absl::MutexLock lock(&mu_);
      return EncodeLocked();
    });
    grpc::Status finished = ToGrpcStatus(status);
    rpcs_.Count("StepSessions", finished.error_code());
    Finish(std::move(finished));
  }

  absl::Mutex mu_;
  v1::StepSessionsResponse response_ ABSL_GUARDED_BY(mu_);
  const std::vector<std::vector<std::uint64_t>> filters_;
  const bool table_;
  grpc::ByteBuffer* const raw_response_;
  RpcCounts& rpcs_;
  int remaining_ ABSL_GUARDED_BY(mu_);   // Results not in yet.
  int unlaunched_ ABSL_GUARDED_BY(mu_);  // Steps neither started nor refused yet.
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool answered_ ABSL_GUARDED_BY(mu_) = false;  // Answer runs once, whatever comes after.
  std::size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;  // Of the states (or rows) kept so far.
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<session::StepTicket>> tickets_ ABSL_GUARDED_BY(mu_);
  // The table layout: each step's frame, null if it failed (or is not in yet); the rows kept
  // and the widest range scan among them.
  std::vector<std::shared_ptr<const session::Frame>> frames_ ABSL_GUARDED_BY(mu_);
  std::size_t table_rows_ ABSL_GUARDED_BY(mu_) = 0;
  std::size_t table_beams_ ABSL_GUARDED_BY(mu_) = 0;
  std::shared_ptr<BatchStepReactor> self_;
};

}  // namespace

grpc::ServerUnaryReactor* SimulatorService::StepSessions(grpc::CallbackServerContext* context,
                                                         const grpc::ByteBuffer* raw_request,
                                                         grpc::ByteBuffer* raw_response) {
  std::shared_ptr<BatchStepReactor> batch;
  const absl::Status status = Guarded([&]() -> absl::Status {
    ASSIGN_OR_RETURN(const Caller caller, access_.Authenticate(*context));
    // On an arena: a call of many sessions parses into one block, not a message each.
    google::protobuf::Arena arena;
    v1::StepSessionsRequest& request =
        *google::protobuf::Arena::CreateMessage<v1::StepSessionsRequest>(&arena);
    RETURN_IF_ERROR(ParseRequest(*raw_request, request));
    const int count = request.steps_size();
    if (count < 1 || count > kMaxSessionsPerStepSessions) {
      return absl::InvalidArgumentError(absl::StrCat("steps: 1 to ",
                                                     kMaxSessionsPerStepSessions,
                                                     " sessions, got ", count));
    }
    if (request.layout() < v1::STEP_RESULT_LAYOUT_UNSPECIFIED ||
        request.layout() > v1::STEP_RESULT_LAYOUT_TABLE) {
      return absl::InvalidArgumentError(absl::StrCat(
          "layout: STEP_RESULT_LAYOUT_STATES (1) or STEP_RESULT_LAYOUT_TABLE (2), got ",
          static_cast<int>(request.layout())));
    }
    // Everything checked before anything changes: each session known, named once, and one
    // the token may step; its controls and vehicle ids within bounds.
    std::vector<std::shared_ptr<session::Session>> sessions;
    sessions.reserve(count);
    absl::flat_hash_set<absl::string_view> seen;
    std::int64_t controls = 0;
    for (int i = 0; i < count; ++i) {
      const v1::SessionStep& step = request.steps(i);
      const std::string field = absl::StrCat("steps[", i, "]");
      if (!seen.insert(step.session_id()).second) {
        return absl::InvalidArgumentError(absl::StrCat(field, ".session_id: session \"",
                                                       Echo(step.session_id()),
                                                       "\" is named twice"));
      }
      controls += step.controls_size() + step.vehicle_ids_size();
      if (controls > kMaxControlsPerCall) {
        return absl::InvalidArgumentError(absl::StrCat(
            field, ": at most ", kMaxControlsPerCall, " controls and vehicle ids per call"));
      }
      absl::StatusOr<std::shared_ptr<session::Session>> session =
          Authorized(caller, auth::Need::kOwn, step.session_id());
      if (!session.ok()) return PrefixField(field, session.status());
      if (step.ticks() < 1 || step.ticks() > (*session)->max_ticks_per_step()) {
        return absl::InvalidArgumentError(absl::StrCat(field, ".ticks: must be in [1, ",
                                                       (*session)->max_ticks_per_step(),
                                                       "], got ", step.ticks()));
      }
      sessions.push_back(*std::move(session));
    }
    v1::StepSessionsResponse response;
    std::vector<std::vector<std::uint64_t>> filters(count);
    for (int i = 0; i < count; ++i) {
      response.add_results()->set_session_id(request.steps(i).session_id());
      filters[i].assign(request.steps(i).vehicle_ids().begin(),
                        request.steps(i).vehicle_ids().end());
      std::sort(filters[i].begin(), filters[i].end());
    }
    batch = std::make_shared<BatchStepReactor>(
        std::move(response), std::move(filters),
        request.layout() == v1::STEP_RESULT_LAYOUT_TABLE, raw_response, rpcs_);
    batch->Own(batch);
    // Cheap Steps run on this thread as they start. In a call of many, the second half goes
    // to the workers first, so that they run it while this thread runs the first half.
    const int here = count < kStepSessionsSplit ? count : (count + 1) / 2;
    const auto launch = [&](int i) {
      const v1::SessionStep& step = request.steps(i);
      // The controls and the Step start together or not at all (one lock): a Step that
      // cannot start (a clock pacing the session, its queue full) sets no controls, and
      // controls the session refuses start no Step.
      std::vector<sim::VehicleInput> inputs;
      inputs.reserve(step.controls_size());
      for (const v1::VehicleControl& control : step.controls()) {
        inputs.push_back(VehicleInputFromProto(control));
      }
      bool controls_refused = false;
      absl::StatusOr<std::shared_ptr<session::StepTicket>> started = sessions[i]->StartStep(
          step.ticks(), std::nullopt,
          [batch, i](absl::StatusOr<session::StepResult> result) {
            batch->Deliver(i, std::move(result));
          },
          {.may_run_here = i < here, .controls = inputs, .controls_refused = &controls_refused});
      if (!started.ok()) {
        batch->Refuse(i, controls_refused ? InField("controls", started.status())
                                          : started.status());
        return;
      }
      batch->Launched(*std::move(started));
    };
    for (int i = here; i < count; ++i) launch(i);
    for (int i = 0; i < here; ++i) launch(i);
    return absl::OkStatus();
  });
  if (batch != nullptr) {
    if (status.ok()) {
      // All ran here (small steps, the common vector of environments): gRPC's own reactor
      // answers, as for a Step that ran at once.
      if (std::optional<absl::Status> here = batch->FinishedHere(); here.has_value()) {
        return FinishUnary(context, *here, rpcs_, "StepSessions");
      }
      return batch.get();
    }
    batch->Started(status);
    return batch.get();
  }
  return FinishUnary(context, status, rpcs_, "StepSessions");
}

grpc::ServerUnaryReactor* SimulatorService::CreateSession(grpc::CallbackServerContext* context,
    const grpc::ByteBuffer* raw_request, grpc::ByteBuffer* raw_response) {
  return Unary<v1::CreateSessionRequest, v1::CreateSessionResponse>(
      context, *raw_request, raw_response, access_, rpcs_,
      [&](const Caller& caller, const v1::CreateSessionRequest* request, v1::CreateSessionResponse* response) -> absl::Status {
    RETURN_IF_ERROR(MayCreateSessions(caller, "creating a session"));
    const Caller creator = access_.WithQuotaIdentity(caller, *context);
    RETURN_IF_ERROR(access_.Reserve(creator));
    Reservation reservation(access_, creator);  // Given back unless the session takes it.
    ASSIGN_OR_RETURN(const std::shared_ptr<session::Session> session,
                     CreateFromConfig(request->config(), &creator, &reservation));
    RETURN_IF_ERROR(GiveOwnerToken(creator, session->id(), *response));
    const session::SessionDescription description = session->Describe(/*with_vehicles=*/false);
    SessionToProto(description, response->mutable_session());
    Audit(context->peer(), "session.create",
          {{"by", By(caller)}, {"session", session->id()},
           {"name", description.config.name},
           {"scenario", request->config().scenario()},
           {"clock_mode", v1::ClockMode_Name(ClockModeToProto(description.config.clock.mode))},
           {"tick_rate_hz", description.config.world.tick_rate_hz},
           {"vehicles", description.vehicle_count},
           {"open", sessions_.size()}});
    return absl::OkStatus();
      });
}

absl::Status SimulatorService::MayCreateSessions(const Caller& caller, absl::string_view what) {
  // A viewer or driver token is handed to others (spectators, a teammate): it may not create
  // sessions, which would count against its owner's quota out of the owner's reach.
  if (caller.grant != nullptr && (caller.grant->role == auth::Role::kViewer ||
                                  caller.grant->role == auth::Role::kDriver)) {
    return absl::PermissionDeniedError(absl::StrCat(
        "authorization: ", what, " needs an owner or admin token; this is a ",
        auth::RoleName(caller.grant->role), " token"));
  }
  return absl::OkStatus();
}

template <typename Response>
absl::Status SimulatorService::GiveOwnerToken(const Caller& creator,
                                              const std::string& session_id,
                                              Response& response) {
  if (access_.mode() != AuthMode::kToken) return absl::OkStatus();
  absl::StatusOr<std::vector<auth::Minted>> owner =
      access_.Mint(creator, {{.role = auth::Role::kOwner, .session_id = session_id}},
                   /*pending=*/false, /*for_new_session=*/true);
  if (!owner.ok()) {
    (void)sessions_.Delete(session_id);
    return owner.status();
  }
  response.set_owner_token(std::move(owner->front().token));
  response.set_owner_token_id(owner->front().id);
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<session::Session>> SimulatorService::CreateFromConfig(
    const v1::SessionConfig& config, const Caller* caller, Reservation* reservation,
    const std::function<void(session::SessionRequest&)>& adjust) {
  v1::SessionConfig merged;
  if (!config.scenario().empty()) {
    absl::StatusOr<v1::SessionConfig> scenario = LoadScenario(config.scenario(), scenario_dir_);
    if (!scenario.ok()) return PrefixField("config", scenario.status());
    merged = *std::move(scenario);
  }
  merged.MergeFrom(config);
  merged.clear_scenario();
  auto session_request = SessionRequestFromProto(merged);
  if (!session_request.ok()) return InField("config", session_request.status());
  if (adjust) adjust(*session_request);
  auto session = sessions_.Create(*session_request);
  if (!session.ok()) return InField("config", session.status());
  access_.Admit(caller, (*session)->id());
  if (reservation != nullptr) reservation->Take();
  // Deleted before it was admitted (by an admin who listed it, or at shutdown)? Then nothing
  // released its slot or closed it for tokens: do it here. Deleted later, SessionGone will.
  if (!sessions_.Find((*session)->id()).ok()) {
    access_.SessionGone((*session)->id());
    return absl::AbortedError("the new session was deleted as it was created; create it again");
  }
  return session;
}

grpc::ServerUnaryReactor* SimulatorService::ResetSession(grpc::CallbackServerContext* context,
    const grpc::ByteBuffer* raw_request, grpc::ByteBuffer* raw_response) {
  return Unary<v1::ResetSessionRequest, v1::ResetSessionResponse>(
      context, *raw_request, raw_response, access_, rpcs_,
      [&](const Caller& caller, const v1::ResetSessionRequest* request, v1::ResetSessionResponse* response) -> absl::Status {
    ASSIGN_OR_RETURN(const auto session,
                     Authorized(caller, auth::Need::kOwn, request->session_id()));
    ASSIGN_OR_RETURN(const auto frame, session->Reset());
    // The vehicles are gone (the config's come back with new ids): so are their drivers.
    EndStreams(access_.tokens().RevokeDrivers(session->id()));
    FrameToProto(*frame, response->mutable_state());
    Audit(context->peer(), "session.reset",
          {{"by", By(caller)},
           {"session", session->id()},
           {"vehicles", frame->vehicles.size()}});
    // Too big to send, the reset still happened: say so, so that the client does not retry it.
    return CheckResponseSize(response->ByteSizeLong(),
                             "the session was reset; read its state with StreamStates and "
                             "vehicle_ids");
      });
}

grpc::ServerUnaryReactor* SimulatorService::GetSession(grpc::CallbackServerContext* context,
    const grpc::ByteBuffer* raw_request, grpc::ByteBuffer* raw_response) {
  std::optional<HeavyReads::Slot> slot;  // Then held by the response's bytes until sent.
  return Unary<v1::GetSessionRequest, v1::GetSessionResponse>(
      context, *raw_request, raw_response, access_, rpcs_,
      [&](const Caller& caller, const v1::GetSessionRequest* request, v1::GetSessionResponse* response) -> absl::Status {
    ASSIGN_OR_RETURN(const auto session,
                     Authorized(caller, auth::Need::kRead, request->session_id()));
    const session::Session::Counts counts = session->counts();
    ASSIGN_OR_RETURN(HeavyReads::Slot admitted,
                     heavy_reads_.Admit(counts.vehicles * kVehicleDescriptionBytes +
                                        counts.obstacles * kObstacleBytes));
    slot.emplace(std::move(admitted));
    SessionToProto(session->Describe(/*with_vehicles=*/true), response->mutable_session());
    return absl::OkStatus();
      },
      &slot);
}

grpc::ServerUnaryReactor* SimulatorService::ListSessions(grpc::CallbackServerContext* context,
    const grpc::ByteBuffer* raw_request, grpc::ByteBuffer* raw_response) {
  return Unary<v1::ListSessionsRequest, v1::ListSessionsResponse>(
      context, *raw_request, raw_response, access_, rpcs_,
      [&](const Caller& caller, const v1::ListSessionsRequest* /*request*/, v1::ListSessionsResponse* response) {
        for (const auto& session : sessions_.List()) {
          if (!access_.MaySee(caller, session->id())) continue;
          SessionToProto(session->Describe(/*with_vehicles=*/false), response->add_sessions());
        }
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* SimulatorService::DeleteSession(grpc::CallbackServerContext* context,
    const grpc::ByteBuffer* raw_request, grpc::ByteBuffer* raw_response) {
  return Unary<v1::DeleteSessionRequest, v1::DeleteSessionResponse>(
      context, *raw_request, raw_response, access_, rpcs_,
      [&](const Caller& caller, const v1::DeleteSessionRequest* request, v1::DeleteSessionResponse* response) -> absl::Status {
    RETURN_IF_ERROR(Authorized(caller, auth::Need::kOwn, request->session_id()).status());
    ASSIGN_OR_RETURN(const session::SimTime time, sessions_.Delete(request->session_id()));
    SimTimeToProto(time, response->mutable_time());
    Audit(context->peer(), "session.delete",
          {{"by", By(caller)},
           {"session", request->session_id()},
           {"tick", time.tick},
           {"open", sessions_.size()}});
    return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* SimulatorService::SpawnVehicle(grpc::CallbackServerContext* context,
    const grpc::ByteBuffer* raw_request, grpc::ByteBuffer* raw_response) {
  return Unary<v1::SpawnVehicleRequest, v1::SpawnVehicleResponse>(
      context, *raw_request, raw_response, access_, rpcs_,
      [&](const Caller& caller, const v1::SpawnVehicleRequest* request, v1::SpawnVehicleResponse* response) -> absl::Status {
    ASSIGN_OR_RETURN(const auto session,
                     Authorized(caller, auth::Need::kOwn, request->session_id()));
    const int count = request->vehicles_size();
    if (count < 1 || count > kMaxSpawnsPerCall) {
      return absl::InvalidArgumentError(absl::StrCat(
          "vehicles: must hold 1 to ", kMaxSpawnsPerCall, " specs, got ", count));
    }
    ASSIGN_OR_RETURN(const std::vector<sim::VehicleSpec> specs,
                     VehicleSpecsFromProto(request->vehicles(), session->config().route_names));
    // The tokens first, pending (they authenticate nothing yet), so that nothing is spawned
    // if they do not fit; they learn their vehicles once these exist.
    std::vector<auth::Minted> tokens;
    if (request->driver_tokens()) {
      if (access_.mode() != AuthMode::kToken) {
        return absl::FailedPreconditionError(
            "driver_tokens: this server does not use tokens (--auth=none); anyone may drive");
      }
      const std::vector<auth::Grant> grants(
          count, {.role = auth::Role::kDriver, .session_id = session->id()});
      absl::StatusOr<std::vector<auth::Minted>> minted =
          access_.Mint(caller, grants, /*pending=*/true);
      if (!minted.ok()) return PrefixField("driver_tokens", minted.status());
      tokens = *std::move(minted);
    }
    auto ids = session->SpawnVehicles(specs);
    if (!ids.ok()) {
      for (const auth::Minted& token : tokens) {
        (void)access_.tokens().RevokeById(session->id(), token.id);
      }
      return InField("vehicles", ids.status());
    }
    response->mutable_vehicle_ids()->Add(ids->begin(), ids->end());
    if (access_.tokens().Activate(tokens, *ids) != tokens.size()) {
      // Revoked before they were activated: the session was reset (the new vehicles with it).
      return absl::AbortedError(
          "driver_tokens: the session was reset while the vehicles were spawned; spawn again");
    }
    for (auth::Minted& token : tokens) {
      response->add_driver_tokens(std::move(token.token));
      response->add_driver_token_ids(token.id);
    }
    SimTimeToProto(session->Now(), response->mutable_time());
    Audit(context->peer(), "vehicles.spawn",
          {{"by", By(caller)}, {"session", session->id()},
           {"count", ids->size()},
           {"first_id", ids->front()},
           {"last_id", ids->back()}});
    return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* SimulatorService::RemoveVehicle(grpc::CallbackServerContext* context,
    const grpc::ByteBuffer* raw_request, grpc::ByteBuffer* raw_response) {
  return Unary<v1::RemoveVehicleRequest, v1::RemoveVehicleResponse>(
      context, *raw_request, raw_response, access_, rpcs_,
      [&](const Caller& caller, const v1::RemoveVehicleRequest* request, v1::RemoveVehicleResponse* response) -> absl::Status {
    ASSIGN_OR_RETURN(const auto session,
                     Authorized(caller, auth::Need::kOwn, request->session_id()));
    RETURN_IF_ERROR(session->RemoveVehicle(request->vehicle_id()));
    EndStreams(access_.tokens().RevokeVehicle(session->id(), request->vehicle_id()));
    SimTimeToProto(session->Now(), response->mutable_time());
    Audit(context->peer(), "vehicles.remove",
          {{"by", By(caller)}, {"session", session->id()}, {"vehicle", request->vehicle_id()}});
    return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* SimulatorService::AddObstacle(grpc::CallbackServerContext* context,
    const grpc::ByteBuffer* raw_request, grpc::ByteBuffer* raw_response) {
  return Unary<v1::AddObstacleRequest, v1::AddObstacleResponse>(
      context, *raw_request, raw_response, access_, rpcs_,
      [&](const Caller& caller, const v1::AddObstacleRequest* request, v1::AddObstacleResponse* response) -> absl::Status {
    ASSIGN_OR_RETURN(const auto session,
                     Authorized(caller, auth::Need::kOwn, request->session_id()));
    const int count = request->obstacles_size();
    if (count < 1 || count > kMaxObstaclesPerCall) {
      return absl::InvalidArgumentError(absl::StrCat(
          "obstacles: must hold 1 to ", kMaxObstaclesPerCall, " specs, got ", count));
    }
    std::vector<sim::ObstacleSpec> specs;
    specs.reserve(count);
    for (const v1::ObstacleSpec& spec : request->obstacles()) {
      specs.push_back(ObstacleSpecFromProto(spec));
    }
    auto ids = session->AddObstacles(specs);
    if (!ids.ok()) return InField("obstacles", ids.status());
    response->mutable_obstacle_ids()->Add(ids->begin(), ids->end());
    SimTimeToProto(session->Now(), response->mutable_time());
    Audit(context->peer(), "obstacles.add",
          {{"by", By(caller)}, {"session", session->id()},
           {"count", ids->size()},
           {"first_id", ids->front()},
           {"last_id", ids->back()}});
    return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* SimulatorService::RemoveObstacle(grpc::CallbackServerContext* context,
    const grpc::ByteBuffer* raw_request, grpc::ByteBuffer* raw_response) {
  return Unary<v1::RemoveObstacleRequest, v1::RemoveObstacleResponse>(
      context, *raw_request, raw_response, access_, rpcs_,
      [&](const Caller& caller, const v1::RemoveObstacleRequest* request, v1::RemoveObstacleResponse* response) -> absl::Status {
    ASSIGN_OR_RETURN(const auto session,
                     Authorized(caller, auth::Need::kOwn, request->session_id()));
    RETURN_IF_ERROR(session->RemoveObstacle(request->obstacle_id()));
    SimTimeToProto(session->Now(), response->mutable_time());
    Audit(context->peer(), "obstacles.remove",
          {{"by", By(caller)}, {"session", session->id()}, {"obstacle", request->obstacle_id()}});
    return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* SimulatorService::SetControls(grpc::CallbackServerContext* context,
    const grpc::ByteBuffer* raw_request, grpc::ByteBuffer* raw_response) {
  return Unary<v1::SetControlsRequest, v1::SetControlsResponse>(
      context, *raw_request, raw_response, access_, rpcs_,
      [&](const Caller& caller, const v1::SetControlsRequest* request, v1::SetControlsResponse* response) -> absl::Status {
    // A driver sets its own vehicle's controls only; an owner any.
    std::optional<std::uint64_t> first_vehicle;
    if (!request->controls().empty()) first_vehicle = request->controls(0).vehicle_id();
    ASSIGN_OR_RETURN(const auto session, Authorized(caller, auth::Need::kDrive,
                                                    request->session_id(), first_vehicle));
    if (request->controls_size() > kMaxControlsPerCall) {
      return absl::InvalidArgumentError(absl::StrCat("controls: at most ", kMaxControlsPerCall,
                                                     " per call, got ",
                                                     request->controls_size()));
    }
    for (int i = 1; i < request->controls_size(); ++i) {
      RETURN_IF_ERROR(PrefixField(
          absl::StrCat("controls[", i, "]"),
          access_.Check(caller, auth::Need::kDrive, session->id(),
                        request->controls(i).vehicle_id(), absl::OkStatus())));
    }
    std::vector<sim::VehicleInput> inputs;
    inputs.reserve(request->controls_size());
    for (const v1::VehicleControl& control : request->controls()) {
      inputs.push_back(VehicleInputFromProto(control));
    }
    auto time = session->SetControls(inputs);
    if (!time.ok()) return InField("controls", time.status());
    SimTimeToProto(*time, response->mutable_time());
    response->set_applies_from_tick(time->tick + 1);
    return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* SimulatorService::Step(grpc::CallbackServerContext* context,
                                                 const grpc::ByteBuffer* raw_request,
                                                 grpc::ByteBuffer* raw_response) {
  // An exception (memory running out) ends this call alone, and a Step it interrupted is
  // cancelled (its ticks stop between two ticks).
  std::shared_ptr<session::StepTicket> started;
  StepReactor* answering = nullptr;
  const absl::Status status = Guarded([&]() -> absl::Status {
    ASSIGN_OR_RETURN(const Caller caller, access_.Authenticate(*context));
    v1::StepRequest request;
    RETURN_IF_ERROR(ParseRequest(*raw_request, request));
    ASSIGN_OR_RETURN(const std::shared_ptr<session::Session> session,
                     Authorized(caller, auth::Need::kOwn, request.session_id()));
    std::optional<std::uint64_t> expected_tick;
    if (request.has_expected_tick()) expected_tick = request.expected_tick();
    auto pending = std::make_shared<PendingStep>();
    ASSIGN_OR_RETURN(started, session->StartStep(request.ticks(), expected_tick,
                                                 [pending](absl::StatusOr<session::StepResult> r) {
                                                   pending->Deliver(std::move(r));
                                                 }));
    std::shared_ptr<StepReactor> reactor;
    std::optional<absl::StatusOr<session::StepResult>> done = pending->TakeOrHandTo([&] {
      reactor = std::make_shared<StepReactor>(started, raw_response, rpcs_);
      return reactor;
    });
    if (done.has_value()) {  // It ran here, at once: no reactor of ours is needed.
      return EncodeStepResponse(*std::move(done), raw_response);
    }
    answering = reactor.get();
    answering->Own(std::move(reactor));
    return absl::OkStatus();
  });
  if (answering != nullptr) return answering;
  if (!status.ok() && started != nullptr) started->Cancel();
  return FinishUnary(context, status, rpcs_, "Step");
}

grpc::ServerUnaryReactor* SimulatorService::SetClock(grpc::CallbackServerContext* context,
    const grpc::ByteBuffer* raw_request, grpc::ByteBuffer* raw_response) {
  return Unary<v1::SetClockRequest, v1::SetClockResponse>(
      context, *raw_request, raw_response, access_, rpcs_,
      [&](const Caller& caller, const v1::SetClockRequest* request, v1::SetClockResponse* response) -> absl::Status {
    ASSIGN_OR_RETURN(const auto session,
                     Authorized(caller, auth::Need::kOwn, request->session_id()));
    session::ClockUpdate update;
    if (request->has_clock_mode()) {
      ASSIGN_OR_RETURN(update.mode, ClockModeFromProto(request->clock_mode()));
    }
    if (request->has_real_time_factor()) update.real_time_factor = request->real_time_factor();
    if (request->has_paused()) update.paused = request->paused();
    if (request->has_barrier_timeout_s()) update.barrier_timeout_s = request->barrier_timeout_s();
    ASSIGN_OR_RETURN(const session::ClockSettings clock, session->SetClock(update));
    SimTimeToProto(session->Now(), response->mutable_time());
    response->set_clock_mode(ClockModeToProto(clock.mode));
    response->set_real_time_factor(clock.real_time_factor);
    response->set_paused(clock.paused);
    response->set_barrier_timeout_s(clock.barrier_timeout_s);
    Audit(context->peer(), "clock.set",
          {{"by", By(caller)}, {"session", session->id()},
           {"clock_mode", v1::ClockMode_Name(response->clock_mode())},
           {"real_time_factor", clock.real_time_factor},
           {"paused", clock.paused ? "true" : "false"},
           {"barrier_timeout_s", clock.barrier_timeout_s}});
    return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* SimulatorService::GetState(grpc::CallbackServerContext* context,
    const grpc::ByteBuffer* raw_request, grpc::ByteBuffer* raw_response) {
  std::optional<HeavyReads::Slot> slot;  // Then held by the response's bytes until sent.
  return Unary<v1::GetStateRequest, v1::GetStateResponse>(
      context, *raw_request, raw_response, access_, rpcs_,
      [&](const Caller& caller, const v1::GetStateRequest* request, v1::GetStateResponse* response) -> absl::Status {
    ASSIGN_OR_RETURN(const auto session,
                     Authorized(caller, auth::Need::kRead, request->session_id()));
    // Admitted before the frame is copied.
    const session::Session::Counts counts = session->counts();
    ASSIGN_OR_RETURN(HeavyReads::Slot admitted,
                     heavy_reads_.Admit(counts.vehicles * kVehicleStateBytes +
                                        counts.contacts * kContactBytes));
    slot.emplace(std::move(admitted));
    const auto [frame, hash] = session->CurrentFrameAndHash();
    FrameToProto(*frame, response->mutable_state());
    response->set_state_hash(hash);
    return absl::OkStatus();
      },
      &slot);
}

grpc::ServerUnaryReactor* SimulatorService::StartRace(grpc::CallbackServerContext* context,
    const grpc::ByteBuffer* raw_request, grpc::ByteBuffer* raw_response) {
  return Unary<v1::StartRaceRequest, v1::StartRaceResponse>(
      context, *raw_request, raw_response, access_, rpcs_,
      [&](const Caller& caller, const v1::StartRaceRequest* request, v1::StartRaceResponse* response) -> absl::Status {
    ASSIGN_OR_RETURN(const auto session,
                     Authorized(caller, auth::Need::kOwn, request->session_id()));
    const session::SessionConfig& config = session->config();
    session::StartRaceCommand command;
    ASSIGN_OR_RETURN(command.route, session->RaceTrack(request->track()));
    ASSIGN_OR_RETURN(command.rules,
                     RaceRulesFromProto(request->rules(), config.race_rules, "rules"));
    command.vehicles.assign(request->vehicle_ids().begin(), request->vehicle_ids().end());
    command.replace = request->replace();
    if (request->grid_from_spawn_points()) {
      // The slots the cars named take (all of them for every car timed on the track).
      for (const session::SpawnPoint& slot : config.spawn_points) {
        if (!command.vehicles.empty() && command.grid.size() == command.vehicles.size()) break;
        command.grid.push_back(slot.pose);
      }
      if (command.grid.empty()) {
        return absl::InvalidArgumentError(
            "grid_from_spawn_points: the session has no spawn points to line the cars up on");
      }
    }
    absl::StatusOr<session::RaceReport> started = session->StartRace(command);
    if (!started.ok() && (absl::StartsWith(started.status().message(), "grid: ") ||
                          absl::StartsWith(started.status().message(), "grid["))) {
      return absl::Status(started.status().code(),
                          SpawnPointError(started.status().message(), config.spawn_points));
    }
    RETURN_IF_ERROR(started.status());
    const session::RaceReport& race = *started;
    RaceStatusToProto(race.status, race.track, response->mutable_race());
    Audit(context->peer(), "race.start",
          {{"by", By(caller)},
           {"session", session->id()},
           {"track", race.track},
           {"laps", race.status.rules.laps},
           {"cars", race.status.standings.size()}});
    return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* SimulatorService::GetRaceResults(grpc::CallbackServerContext* context,
    const grpc::ByteBuffer* raw_request, grpc::ByteBuffer* raw_response) {
  return Unary<v1::GetRaceResultsRequest, v1::GetRaceResultsResponse>(
      context, *raw_request, raw_response, access_, rpcs_,
      [&](const Caller& caller, const v1::GetRaceResultsRequest* request, v1::GetRaceResultsResponse* response) -> absl::Status {
    ASSIGN_OR_RETURN(const auto session,
                     Authorized(caller, auth::Need::kRead, request->session_id()));
    switch (request->format()) {
      case v1::RESULTS_FORMAT_UNSPECIFIED:
      case v1::RESULTS_FORMAT_CSV:
      case v1::RESULTS_FORMAT_JSON:
        break;
      default:
        return absl::InvalidArgumentError(
            absl::StrCat("format: no such value ", static_cast<int>(request->format()),
                         " (RESULTS_FORMAT_CSV or RESULTS_FORMAT_JSON)"));
    }
    ASSIGN_OR_RETURN(const session::RaceReport race, session->Race());
    SimTimeToProto(race.time, response->mutable_time());
    RaceStatusToProto(race.status, race.track, response->mutable_race());
    if (request->format() == v1::RESULTS_FORMAT_CSV) {
      response->set_content(session::RaceResultsCsv(race));
      response->set_content_type("text/csv; charset=utf-8");
    } else if (request->format() == v1::RESULTS_FORMAT_JSON) {
      response->set_content(session::RaceResultsJson(race));
      response->set_content_type("application/json");
    }
    return CheckResponseSize(response->ByteSizeLong(),
                             "read the results as CSV or JSON from the web endpoint");
      });
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* SimulatorService::StreamStates(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request) {
  // A reactor that only reports an error.
  class Failed : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
   public:
    Failed(const absl::Status& status, RpcCounts& rpcs) {
      grpc::Status finished = ToGrpcStatus(status);
      rpcs.Count("StreamStates", finished.error_code());
      Finish(std::move(finished));
    }
    void OnDone() override { delete this; }
  };
  absl::StatusOr<Caller> caller = access_.Authenticate(*context);
  if (!caller.ok()) return new Failed(caller.status(), rpcs_);
  v1::StreamStatesRequest request;
  if (absl::Status parsed = ParseRequest(*raw_request, request); !parsed.ok()) {
    return new Failed(parsed, rpcs_);
  }
  session::SubscriberOptions options;
  if (request.has_every_n_ticks()) {
    if (request.every_n_ticks() < 1) {
      return new Failed(absl::InvalidArgumentError("every_n_ticks: must be >= 1, got 0"), rpcs_);
    }
    options.every_n_ticks = request.every_n_ticks();
  }
  if (request.has_max_rate_hz()) {
    if (absl::Status status = CheckPositive("max_rate_hz", request.max_rate_hz(), 1e9);
        !status.ok()) {
      return new Failed(status, rpcs_);
    }
    options.max_rate_hz = request.max_rate_hz();
  }
  if (request.vehicle_ids_size() > 100000) {
    return new Failed(absl::InvalidArgumentError(absl::StrCat(
        "vehicle_ids: at most 100000, got ", request.vehicle_ids_size())), rpcs_);
  }
  options.vehicle_ids.assign(request.vehicle_ids().begin(), request.vehicle_ids().end());
  std::sort(options.vehicle_ids.begin(), options.vehicle_ids.end());
  options.vehicle_ids.erase(std::unique(options.vehicle_ids.begin(), options.vehicle_ids.end()),
                            options.vehicle_ids.end());
  absl::StatusOr<std::shared_ptr<session::Session>> session =
      Authorized(*caller, auth::Need::kRead, request.session_id());
  if (!session.ok()) return new Failed(session.status(), rpcs_);
  std::shared_ptr<FrameEncoder> encoder = EncoderFor(**session);
  return StateStreamReactor::Start(*this, *std::move(caller), *std::move(session),
                                   std::move(options), std::move(encoder));
}

std::shared_ptr<FrameEncoder> SimulatorService::EncoderFor(const session::Session& session) {
  absl::MutexLock lock(&encoders_mu_);
  std::weak_ptr<FrameEncoder>& slot = encoders_[&session];
  std::shared_ptr<FrameEncoder> encoder = slot.lock();
  if (encoder == nullptr) {
    encoder = std::make_shared<FrameEncoder>();
    slot = encoder;
    // Forget the sessions nobody streams any more.
    absl::erase_if(encoders_, [](const auto& entry) { return entry.second.expired(); });
  }
  return encoder;
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* SimulatorService::Drive(
    grpc::CallbackServerContext* context) {
  return DriveReactor::Start(*this, context, access_.Authenticate(*context));
}

absl::Status SimulatorService::RegisterStream(const Caller& caller,
                                              std::weak_ptr<RevocableStream> stream) {
  if (!caller.digest.has_value()) return absl::OkStatus();
  {
    absl::MutexLock lock(&streams_mu_);
    streams_[caller.token_id()].push_back(std::move(stream));
  }
  // A revocation since Authenticate either sees the registration (and ends the stream) or
  // happened before this check.
  if (!access_.StillValid(caller)) {
    return absl::UnauthenticatedError("authorization: unknown or revoked token");
  }
  return absl::OkStatus();
}

void SimulatorService::UnregisterStream(const Caller& caller, const RevocableStream* stream) {
  if (!caller.digest.has_value()) return;
  const std::string token_id = caller.token_id();
  absl::MutexLock lock(&streams_mu_);
  const auto it = streams_.find(token_id);
  if (it == streams_.end()) return;
  std::erase_if(it->second, [stream](const std::weak_ptr<RevocableStream>& s) {
    const std::shared_ptr<RevocableStream> live = s.lock();
    return live == nullptr || live.get() == stream;
  });
  if (it->second.empty()) streams_.erase(it);
}

void SimulatorService::EndStreams(const std::vector<std::string>& token_ids) {
  std::vector<std::shared_ptr<RevocableStream>> ending;
  {
    absl::MutexLock lock(&streams_mu_);
    for (const std::string& id : token_ids) {
      const auto it = streams_.find(id);
      if (it == streams_.end()) continue;
      for (const std::weak_ptr<RevocableStream>& stream : it->second) {
        if (std::shared_ptr<RevocableStream> live = stream.lock()) ending.push_back(live);
      }
    }
  }
  // Outside the lock: a stream may end (and unregister) right away.
  for (const std::shared_ptr<RevocableStream>& stream : ending) {
    stream->Revoked(absl::UnauthenticatedError("authorization: this stream's token was revoked"));
  }
}

absl::StatusOr<std::shared_ptr<session::Session>> SimulatorService::Authorized(
    const Caller& caller, auth::Need need, absl::string_view id,
    std::optional<std::uint64_t> vehicle_id) {
  if (id.empty()) return absl::InvalidArgumentError("session_id: required");
  // The NotFound is made only for a caller who may not see the session.
  RETURN_IF_ERROR(access_.Check(caller, need, id, vehicle_id,
                                access_.MaySee(caller, id) ? absl::OkStatus()
                                                           : session::NoSuchSession(id)));
  return sessions_.Find(id);
}

namespace {

// The id a RevokeToken names: "tok_" and 16 hexadecimal digits.
absl::Status CheckTokenId(absl::string_view token_id) {
  bool ok = token_id.size() == 20 && absl::StartsWith(token_id, "tok_");
  for (const char c : token_id.substr(std::min<std::size_t>(4, token_id.size()))) {
    ok = ok && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      "token_id: must be \"tok_\" and 16 hexadecimal digits, as MintToken returns");
}

}  // namespace

grpc::ServerUnaryReactor* SimulatorService::MintToken(grpc::CallbackServerContext* context,
    const grpc::ByteBuffer* raw_request, grpc::ByteBuffer* raw_response) {
  return Unary<v1::MintTokenRequest, v1::MintTokenResponse>(
      context, *raw_request, raw_response, access_, rpcs_,
      [&](const Caller& caller, const v1::MintTokenRequest* request, v1::MintTokenResponse* response) -> absl::Status {
    ASSIGN_OR_RETURN(const auto session,
                     Authorized(caller, auth::Need::kOwn, request->session_id()));
    if (access_.mode() != AuthMode::kToken) {
      return absl::FailedPreconditionError(
          "this server does not use tokens (--auth=none): every client may do everything");
    }
    auth::Grant grant{.session_id = session->id()};
    switch (request->role()) {
      case v1::TOKEN_ROLE_OWNER:
        grant.role = auth::Role::kOwner;
        break;
      case v1::TOKEN_ROLE_DRIVER:
        grant.role = auth::Role::kDriver;
        grant.vehicle_id = request->vehicle_id();
        RETURN_IF_ERROR(session->CheckVehicle(request->vehicle_id()));
        break;
      case v1::TOKEN_ROLE_VIEWER:
        grant.role = auth::Role::kViewer;
        break;
      default:
        return absl::InvalidArgumentError(absl::StrCat(
            "role: must be TOKEN_ROLE_OWNER, TOKEN_ROLE_DRIVER or TOKEN_ROLE_VIEWER, got ",
            request->role()));
    }
    if (grant.role != auth::Role::kDriver && request->vehicle_id() != 0) {
      return absl::InvalidArgumentError(
          "vehicle_id: only a driver token names a vehicle; leave it 0 (unset)");
    }
    ASSIGN_OR_RETURN(std::vector<auth::Minted> minted, access_.Mint(caller, {grant}));
    response->set_token(std::move(minted.front().token));
    response->set_token_id(minted.front().id);
    Audit(context->peer(), "token.mint",
          {{"by", By(caller)}, {"session", session->id()},
           {"role", auth::RoleName(grant.role)},
           {"vehicle", grant.vehicle_id},
           {"issued", response->token_id()}});
    return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* SimulatorService::RevokeToken(grpc::CallbackServerContext* context,
    const grpc::ByteBuffer* raw_request, grpc::ByteBuffer* raw_response) {
  return Unary<v1::RevokeTokenRequest, v1::RevokeTokenResponse>(
      context, *raw_request, raw_response, access_, rpcs_,
      [&](const Caller& caller, const v1::RevokeTokenRequest* request, v1::RevokeTokenResponse* /*response*/) -> absl::Status {
    ASSIGN_OR_RETURN(const auto session,
                     Authorized(caller, auth::Need::kOwn, request->session_id()));
    if (access_.mode() != AuthMode::kToken) {
      return absl::FailedPreconditionError(
          "this server does not use tokens (--auth=none): there is nothing to revoke");
    }
    RETURN_IF_ERROR(CheckTokenId(request->token_id()));
    if (!access_.tokens().RevokeById(session->id(), request->token_id())) {
      return absl::NotFoundError(absl::StrCat("token_id: no live token ", request->token_id(),
                                              " in session ", session->id()));
    }
    EndStreams({request->token_id()});  // Its Drive and StreamStates streams end.
    Audit(context->peer(), "token.revoke",
          {{"by", By(caller)}, {"session", session->id()}, {"revoked", request->token_id()}});
    return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* SimulatorService::DetachController(grpc::CallbackServerContext* context,
    const grpc::ByteBuffer* raw_request, grpc::ByteBuffer* raw_response) {
  return Unary<v1::DetachControllerRequest, v1::DetachControllerResponse>(
      context, *raw_request, raw_response, access_, rpcs_,
      [&](const Caller& caller, const v1::DetachControllerRequest* request, v1::DetachControllerResponse* response) -> absl::Status {
    ASSIGN_OR_RETURN(const auto session,
                     Authorized(caller, auth::Need::kOwn, request->session_id()));
    ASSIGN_OR_RETURN(const session::SimTime time,
                     session->DetachVehicleController(
                         request->vehicle_id(),
                         absl::AbortedError("the session's owner detached this controller")));
    SimTimeToProto(time, response->mutable_time());
    Audit(context->peer(), "controller.detach",
          {{"by", By(caller)}, {"session", session->id()}, {"vehicle", request->vehicle_id()}});
    return absl::OkStatus();
      });
}

// ---- Recording ------------------------------------------------------------------------------

namespace {

absl::Status NoSuchRecording() {
  return absl::NotFoundError("recording_id: no such recording on this server");
}

void RecordingToProto(const record::RecordingInfo& info, v1::RecordingInfo* out) {
  out->set_recording_id(info.recording_id);
  out->set_session_id(info.session_id);
  const record::RecordingProgress& progress = info.progress;
  out->set_state(!progress.ended             ? v1::RECORDING_STATE_RECORDING
                 : progress.end_status.ok() ? v1::RECORDING_STATE_COMPLETE
                                            : v1::RECORDING_STATE_FAILED);
  out->set_end_reason(progress.end_reason);
  out->set_bytes(progress.bytes);
  out->set_messages(progress.messages);
  out->set_ticks(progress.ticks);
  out->set_duration_s(
      info.tick_rate_hz > 0.0 ? static_cast<double>(progress.ticks) / info.tick_rate_hz : 0.0);
  SimTimeToProto(info.start_time, out->mutable_start_time());
  out->set_replayable_from_start(info.replayable_from_start);
  out->set_frames_lost(progress.frames_lost);
  out->set_commands_lost(progress.commands_lost);
  v1::RecordingOptions* options = out->mutable_options();
  options->set_telemetry_rate_hz(info.telemetry_rate_hz);
  options->set_foxglove_rate_hz(info.foxglove_rate_hz);
  options->set_max_bytes(info.max_bytes);
  options->set_max_duration_s(info.max_duration_s);
}

}  // namespace

absl::StatusOr<record::Recordings*> SimulatorService::RecordingsOn() const {
  if (recordings_ == nullptr) {
    return absl::FailedPreconditionError(
        "recording is off on this server: start it with --record_dir=<directory>");
  }
  return recordings_;
}

absl::StatusOr<record::RecordingInfo> SimulatorService::RecordingFor(
    const Caller& caller, absl::string_view recording_id, auth::Need need) {
  ASSIGN_OR_RETURN(record::Recordings* const recordings, RecordingsOn());
  if (recording_id.empty()) return absl::InvalidArgumentError("recording_id: required");
  absl::StatusOr<record::RecordingInfo> info = recordings->Get(recording_id);
  if (!info.ok()) return NoSuchRecording();
  RETURN_IF_ERROR(MayAccessRecording(caller, *info, need));
  return info;
}

absl::Status SimulatorService::MayAccessRecording(const Caller& caller,
                                                  const record::RecordingInfo& info,
                                                  auth::Need need) const {
  return access_.CheckRecording(caller, need, info.owner, info.session_id, NoSuchRecording());
}

grpc::ServerUnaryReactor* SimulatorService::StartRecording(grpc::CallbackServerContext* context,
    const grpc::ByteBuffer* raw_request, grpc::ByteBuffer* raw_response) {
  return Unary<v1::StartRecordingRequest, v1::StartRecordingResponse>(
      context, *raw_request, raw_response, access_, rpcs_,
      [&](const Caller& caller, const v1::StartRecordingRequest* request, v1::StartRecordingResponse* response) -> absl::Status {
    ASSIGN_OR_RETURN(record::Recordings* const recordings, RecordingsOn());
    ASSIGN_OR_RETURN(const auto session,
                     Authorized(caller, auth::Need::kOwn, request->session_id()));
    if (session->IsPlayback()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "session_id: session ", session->id(),
          " plays a recording back; it is recorded already"));
    }
    record::RecordingRequest asked;
    const v1::RecordingOptions& options = request->options();
    if (options.has_telemetry_rate_hz()) asked.telemetry_rate_hz = options.telemetry_rate_hz();
    if (options.has_foxglove_rate_hz()) asked.foxglove_rate_hz = options.foxglove_rate_hz();
    if (options.has_max_bytes()) asked.max_bytes = options.max_bytes();
    if (options.has_max_duration_s()) asked.max_duration_s = options.max_duration_s();
    ASSIGN_OR_RETURN(const record::RecordingInfo info,
                     recordings->Start(session, asked,
                                       caller.grant != nullptr ? caller.grant->principal : ""));
    RecordingToProto(info, response->mutable_recording());
    Audit(context->peer(), "recording.start",
          {{"by", By(caller)}, {"session", session->id()}, {"recording", info.recording_id}});
    return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* SimulatorService::StopRecording(grpc::CallbackServerContext* context,
    const grpc::ByteBuffer* raw_request, grpc::ByteBuffer* raw_response) {
  return Unary<v1::StopRecordingRequest, v1::StopRecordingResponse>(
      context, *raw_request, raw_response, access_, rpcs_,
      [&](const Caller& caller, const v1::StopRecordingRequest* request, v1::StopRecordingResponse* response) -> absl::Status {
    ASSIGN_OR_RETURN(record::Recordings* const recordings, RecordingsOn());
    RETURN_IF_ERROR(RecordingFor(caller, request->recording_id(), auth::Need::kOwn).status());
    ASSIGN_OR_RETURN(const record::RecordingInfo info, recordings->Stop(request->recording_id()));
    RecordingToProto(info, response->mutable_recording());
    Audit(context->peer(), "recording.stop",
          {{"by", By(caller)},
           {"recording", info.recording_id},
           {"bytes", info.progress.bytes},
           {"ticks", info.progress.ticks}});
    return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* SimulatorService::ListRecordings(grpc::CallbackServerContext* context,
    const grpc::ByteBuffer* raw_request, grpc::ByteBuffer* raw_response) {
  return Unary<v1::ListRecordingsRequest, v1::ListRecordingsResponse>(
      context, *raw_request, raw_response, access_, rpcs_,
      [&](const Caller& caller, const v1::ListRecordingsRequest* /*request*/, v1::ListRecordingsResponse* response) -> absl::Status {
    ASSIGN_OR_RETURN(record::Recordings* const recordings, RecordingsOn());
    for (const record::RecordingInfo& info : recordings->List()) {
      if (!MayAccessRecording(caller, info, auth::Need::kRead).ok()) continue;
      RecordingToProto(info, response->add_recordings());
    }
    return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* SimulatorService::ReplayRecording(grpc::CallbackServerContext* context,
    const grpc::ByteBuffer* raw_request, grpc::ByteBuffer* raw_response) {
  // Checked and started here; the re-simulation itself runs on a thread that finishes the call.
  struct Started {
    std::shared_ptr<session::Session> session;
    v1::RecordingHeader header;
    std::string path;
    v1::ReplayRecordingResponse response;
  };
  std::optional<Started> started;
  const absl::Status status = Guarded([&]() -> absl::Status {
    ASSIGN_OR_RETURN(const Caller caller, access_.Authenticate(*context));
    v1::ReplayRecordingRequest request;
    RETURN_IF_ERROR(ParseRequest(*raw_request, request));
    ASSIGN_OR_RETURN(const record::RecordingInfo recording,
                     RecordingFor(caller, request.recording_id(), auth::Need::kOwn));
    const record::RecordingInfo* const info = &recording;
    if (!info->progress.ended) {
      return absl::FailedPreconditionError(
          "recording_id: the recording is still running: stop it first");
    }
    if (!info->replayable_from_start) {
      return absl::FailedPreconditionError(
          "recording_id: the recording did not start at tick 0 of a session just created or "
          "reset, so it cannot be re-simulated (it can be played back)");
    }
    ASSIGN_OR_RETURN(v1::RecordingHeader header, ReadRecordingHeader(info->path));
    {
      absl::MutexLock lock(&replays_mu_);
      if (replays_cancelled_) return absl::UnavailableError("the server is shutting down");
      if (replays_running_ >= kMaxReplays) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "this server re-simulates at most ", kMaxReplays, " recordings at once: retry later"));
      }
      ++replays_running_;  // Given back below if nothing starts.
    }
    Started start{.header = std::move(header), .path = info->path};
    const absl::Status created = [&]() -> absl::Status {
      const Caller creator = access_.WithQuotaIdentity(caller, *context);
      RETURN_IF_ERROR(access_.Reserve(creator));
      Reservation reservation(access_, creator);
      v1::SessionConfig config = start.header.config();
      config.set_clock_mode(v1::CLOCK_MODE_LOCKSTEP);
      config.set_paused(false);
      config.set_name(absl::StrCat("replay of ", info->recording_id).substr(0, sim::kMaxNameBytes));
      ASSIGN_OR_RETURN(start.session,
                       CreateFromConfig(config, &creator, &reservation,
                                        [&](session::SessionRequest& request) {
                                          request.first_ids = {
                                              .next_vehicle_id = start.header.first_vehicle_id(),
                                              .next_obstacle_id = start.header.first_obstacle_id()};
                                          if (start.header.max_contacts_per_tick() > 0) {
                                            request.max_contacts =
                                                start.header.max_contacts_per_tick();
                                          }
                                        }));
      RETURN_IF_ERROR(GiveOwnerToken(creator, start.session->id(), start.response));
      Audit(context->peer(), "recording.replay",
            {{"by", By(caller)}, {"recording", info->recording_id},
             {"session", start.session->id()}});
      return absl::OkStatus();
    }();
    if (!created.ok()) {
      absl::MutexLock lock(&replays_mu_);
      --replays_running_;
      return created;
    }
    started = std::move(start);
    return absl::OkStatus();
  });
  if (!status.ok()) return FinishUnary(context, status, rpcs_, "ReplayRecording");
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::MutexLock lock(&replays_mu_);
  // The threads of re-simulations done are joined as new ones start.
  std::erase_if(replays_, [](Replay& replay) {
    if (!replay.done->load()) return false;
    replay.thread.join();
    return true;
  });
  auto done = std::make_shared<std::atomic<bool>>(false);
  Replay& replay = replays_.emplace_back();
  replay.done = done;
  replay.thread = std::thread([this, reactor, raw_response, done,
                               started = std::move(*started)]() mutable {
    const absl::Status finished = Guarded([&]() -> absl::Status {
      ASSIGN_OR_RETURN(const ReplayOutcome outcome,
                       ReplayRecordingFile(started.path, started.header, *started.session,
                                           replays_cancelled_));
      v1::ReplayRecordingResponse& response = started.response;
      SessionToProto(started.session->Describe(/*with_vehicles=*/false),
                     response.mutable_session());
      response.set_matched(outcome.matched());
      response.set_ticks_compared(outcome.ticks_compared);
      response.set_commands_applied(outcome.commands_applied);
      if (outcome.divergence.has_value()) *response.mutable_divergence() = *outcome.divergence;
      response.set_stopped_reason(outcome.stopped_reason);
      *raw_response = SerializeMessage(response);
      return absl::OkStatus();
    });
    grpc::Status result = ToGrpcStatus(finished);
    rpcs_.Count("ReplayRecording", result.error_code());
    reactor->Finish(std::move(result));
    {
      absl::MutexLock running(&replays_mu_);
      --replays_running_;
    }
    done->store(true);
  });
  return reactor;
}

grpc::ServerUnaryReactor* SimulatorService::PlayRecording(grpc::CallbackServerContext* context,
    const grpc::ByteBuffer* raw_request, grpc::ByteBuffer* raw_response) {
  return Unary<v1::PlayRecordingRequest, v1::PlayRecordingResponse>(
      context, *raw_request, raw_response, access_, rpcs_,
      [&](const Caller& caller, const v1::PlayRecordingRequest* request, v1::PlayRecordingResponse* response) -> absl::Status {
    RETURN_IF_ERROR(MayCreateSessions(caller, "a playback is a new session: it"));
    ASSIGN_OR_RETURN(const record::RecordingInfo info,
                     RecordingFor(caller, request->recording_id(), auth::Need::kRead));
    if (!(request->start_time_s() >= 0.0) || !std::isfinite(request->start_time_s())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "start_time_s: must be a number of seconds >= 0, got ", request->start_time_s()));
    }
    session::ClockMode mode = session::ClockMode::kRealtime;
    if (request->clock_mode() != v1::CLOCK_MODE_UNSPECIFIED) {
      ASSIGN_OR_RETURN(mode, ClockModeFromProto(request->clock_mode()));
    }
    if (mode == session::ClockMode::kBarrier) {
      return absl::InvalidArgumentError(
          "clock_mode: a playback has no controllers to wait for; use REALTIME or LOCKSTEP");
    }
    if (request->has_real_time_factor()) {
      RETURN_IF_ERROR(session::CheckClockSettings(
          {.mode = mode, .real_time_factor = request->real_time_factor()}));
    }
    if (request->name().size() > sim::kMaxNameBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "name: at most ", sim::kMaxNameBytes, " bytes, got ", request->name().size()));
    }
    if (!info.progress.ended) {
      return absl::FailedPreconditionError(
          "recording_id: the recording is still running: stop it first");
    }
    const Caller creator = access_.WithQuotaIdentity(caller, *context);
    RETURN_IF_ERROR(access_.Reserve(creator));  // Before the file is read.
    Reservation reservation(access_, creator);
    // Through the file's indexes: its header, its frames' places and its vehicles' specs,
    // without opening the other chunks.
    absl::StatusOr<std::unique_ptr<RecordingFrames>> frames = RecordingFrames::Open(info.path);
    if (!frames.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "recording_id: recording ", info.recording_id, " cannot be played back: ",
          frames.status().message()));
    }
    v1::SessionConfig config = (*frames)->header().config();
    config.clear_vehicles();
    config.clear_scenario();
    config.clear_max_vehicles();
    config.clear_barrier_timeout_s();
    config.set_clock_mode(ClockModeToProto(mode));
    if (request->has_real_time_factor()) {
      config.set_real_time_factor(request->real_time_factor());
    } else {
      config.clear_real_time_factor();
    }
    config.set_paused(request->paused());
    config.set_name(request->name().empty()
                        ? absl::StrCat("playback of ", info.recording_id).substr(0, sim::kMaxNameBytes)
                        : request->name());
    const std::uint64_t start_ns =
        static_cast<std::uint64_t>(std::min(request->start_time_s(), 1e9) * 1e9);
    auto source = std::make_shared<RecordingPlayback>(info.recording_id, *std::move(frames));
    absl::StatusOr<std::shared_ptr<session::Session>> created =
        CreateFromConfig(config, &creator, &reservation, [&](session::SessionRequest& made) {
          made.playback = source;
          made.playback_start_ns = start_ns;
        });
    // What the request asked was checked above: a refusal now is of what the file holds (a
    // config this server does not allow, a first frame it cannot read).
    if (!created.ok() && (absl::IsInvalidArgument(created.status()) ||
                          absl::IsDataLoss(created.status()))) {
      return absl::FailedPreconditionError(
          absl::StrCat("recording_id: recording ", info.recording_id,
                       " cannot be played back here: ", created.status().message()));
    }
    ASSIGN_OR_RETURN(const std::shared_ptr<session::Session> session, std::move(created));
    RETURN_IF_ERROR(GiveOwnerToken(creator, session->id(), *response));
    SessionToProto(session->Describe(/*with_vehicles=*/false), response->mutable_session());
    Audit(context->peer(), "recording.play",
          {{"by", By(caller)}, {"recording", info.recording_id}, {"session", session->id()}});
    return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* SimulatorService::SeekPlayback(grpc::CallbackServerContext* context,
    const grpc::ByteBuffer* raw_request, grpc::ByteBuffer* raw_response) {
  return Unary<v1::SeekPlaybackRequest, v1::SeekPlaybackResponse>(
      context, *raw_request, raw_response, access_, rpcs_,
      [&](const Caller& caller, const v1::SeekPlaybackRequest* request, v1::SeekPlaybackResponse* response) -> absl::Status {
    ASSIGN_OR_RETURN(const auto session,
                     Authorized(caller, auth::Need::kOwn, request->session_id()));
    if (!(request->time_s() >= 0.0) || !std::isfinite(request->time_s())) {
      return absl::InvalidArgumentError(
          absl::StrCat("time_s: must be a number of seconds >= 0, got ", request->time_s()));
    }
    ASSIGN_OR_RETURN(const session::PlaybackPosition position,
                     session->Seek(static_cast<std::uint64_t>(std::min(request->time_s(), 1e9) * 1e9)));
    PlaybackToProto(position, response->mutable_playback());
    SimTimeToProto(position.time, response->mutable_time());
    return absl::OkStatus();
      });
}

void SimulatorService::StopReplays() {
  replays_cancelled_ = true;
  std::vector<Replay> replays;
  {
    absl::MutexLock lock(&replays_mu_);
    replays.swap(replays_);
  }
  for (Replay& replay : replays) replay.thread.join();
}

grpc::ServerUnaryReactor* SimulatorService::DeleteRecording(grpc::CallbackServerContext* context,
    const grpc::ByteBuffer* raw_request, grpc::ByteBuffer* raw_response) {
  return Unary<v1::DeleteRecordingRequest, v1::DeleteRecordingResponse>(
      context, *raw_request, raw_response, access_, rpcs_,
      [&](const Caller& caller, const v1::DeleteRecordingRequest* request, v1::DeleteRecordingResponse* response) -> absl::Status {
    ASSIGN_OR_RETURN(record::Recordings* const recordings, RecordingsOn());
    RETURN_IF_ERROR(RecordingFor(caller, request->recording_id(), auth::Need::kOwn).status());
    ASSIGN_OR_RETURN(const std::uint64_t freed, recordings->Delete(request->recording_id()));
    response->set_bytes_freed(freed);
    Audit(context->peer(), "recording.delete",
          {{"by", By(caller)}, {"recording", request->recording_id()}, {"bytes", freed}});
    return absl::OkStatus();
      });
}

namespace {

// Sends a file in pieces, one write at a time (gRPC's flow control paces it), from a file
// descriptor opened when the call started: a recording deleted meanwhile is still sent whole.
class DownloadReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  // A piece and its message's other fields fit the smallest --max_send_message_mib (1).
  static constexpr std::size_t kPieceBytes = (1 << 20) - 64;

  DownloadReactor(int fd, std::uint64_t offset, std::uint64_t size, RpcCounts& rpcs,
                  std::atomic<int>& open)
      : fd_(fd), offset_(offset), size_(size), rpcs_(rpcs), open_(open) {
    Next();
  }
  ~DownloadReactor() override {
    close(fd_);
    open_.fetch_sub(1);
  }

  void OnWriteDone(bool ok) override {
    if (!ok) return End(absl::CancelledError("the client went away"));
    Next();
  }
  void OnDone() override { delete this; }

 private:
  void Next() {
    if (offset_ >= size_) return End(absl::OkStatus());
    const std::size_t want =
        static_cast<std::size_t>(std::min<std::uint64_t>(kPieceBytes, size_ - offset_));
    std::string data(want, '\0');
    std::size_t got = 0;
    while (got < want) {
      const ssize_t n = pread(fd_, data.data() + got, want - got,
                              static_cast<off_t>(offset_ + got));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return End(absl::InternalError("the recording's file cannot be read"));
      got += static_cast<std::size_t>(n);
    }
    v1::DownloadRecordingResponse response;
    response.set_offset(offset_);
    response.set_size(size_);
    *response.mutable_data() = std::move(data);
    offset_ += want;
    piece_ = SerializeMessage(response);
    StartWrite(&piece_);
  }
  void End(const absl::Status& status) {
    grpc::Status finished = ToGrpcStatus(status);
    rpcs_.Count("DownloadRecording", finished.error_code());
    Finish(std::move(finished));
  }

  const int fd_;
  std::uint64_t offset_;
  const std::uint64_t size_;
  RpcCounts& rpcs_;
  std::atomic<int>& open_;  // Downloads open on the server, this one among them.
  grpc::ByteBuffer piece_;
};

}  // namespace

grpc::ServerWriteReactor<grpc::ByteBuffer>* SimulatorService::DownloadRecording(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request) {
  class Failed : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
   public:
    Failed(const absl::Status& status, RpcCounts& rpcs) {
      grpc::Status finished = ToGrpcStatus(status);
      rpcs.Count("DownloadRecording", finished.error_code());
      Finish(std::move(finished));
    }
    void OnDone() override { delete this; }
  };
  int fd = -1;
  std::uint64_t offset = 0, size = 0;
  const absl::Status status = Guarded([&]() -> absl::Status {
    ASSIGN_OR_RETURN(const Caller caller, access_.Authenticate(*context));
    v1::DownloadRecordingRequest request;
    RETURN_IF_ERROR(ParseRequest(*raw_request, request));
    ASSIGN_OR_RETURN(const record::RecordingInfo recording,
                     RecordingFor(caller, request.recording_id(), auth::Need::kRead));
    const record::RecordingInfo* const info = &recording;
    if (downloads_open_.fetch_add(1) >= kMaxDownloads) {
      downloads_open_.fetch_sub(1);
      return absl::ResourceExhaustedError(absl::StrCat(
          "this server sends at most ", kMaxDownloads, " recordings at once: retry shortly"));
    }
    // Not a link, not a FIFO put in its place (the open would block on it): a regular file.
    fd = open(info->path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    struct stat file {};
    if (fd < 0 || fstat(fd, &file) != 0 || !S_ISREG(file.st_mode)) {
      if (fd >= 0) close(fd);
      fd = -1;
      downloads_open_.fetch_sub(1);
      return absl::NotFoundError("recording_id: the recording's file is gone from --record_dir");
    }
    size = static_cast<std::uint64_t>(file.st_size);
    if (request.offset() > size) {
      close(fd);
      fd = -1;
      downloads_open_.fetch_sub(1);
      return absl::InvalidArgumentError(
          absl::StrCat("offset: past the file's end (", size, " bytes), got ", request.offset()));
    }
    offset = request.offset();
    return absl::OkStatus();
  });
  if (!status.ok()) return new Failed(status, rpcs_);
  return new DownloadReactor(fd, offset, size, rpcs_, downloads_open_);
}

}  // namespace pitlane::api
