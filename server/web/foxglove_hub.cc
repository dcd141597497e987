#include "server/web/foxglove_hub.h"

#include <civetweb.h>

#include <algorithm>
#include <cstring>
#include <system_error>
#include <deque>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "server/auth/tokens.h"
#include "server/session/random_id.h"
#include "server/session/subscriber.h"
#include "server/web/foxglove.h"
#include "server/web/request.h"

namespace pitlane::web {
namespace {

constexpr std::int64_t kLookRefresh_ns = 1'000'000'000;
// How often a connection looks for sessions that came or went (and for a revoked token).
constexpr std::int64_t kSessionRefresh_ns = 500'000'000;
// Longest a writer sleeps without looking again (a rate-limited frame held back while the
// session stopped ticking is taken on this timer).
constexpr absl::Duration kWriterTick = absl::Milliseconds(50);
// The most channels' bytes one advertise message holds (the protocol allows many).
constexpr std::size_t kAdvertiseBytes = 32 * 1024;
// Bytes of client messages waiting for the writer; a client that sends more before it is
// answered is dropped.
constexpr std::size_t kMaxInboxBytes = 1 << 20;

enum class ChannelKind { kScene, kMap, kWorldState, kContacts, kLog, kVehicle, kViewer, kRace };

std::string TopicOf(absl::string_view session_id, ChannelKind kind, sim::VehicleId vehicle) {
  switch (kind) {
    case ChannelKind::kScene:
      return absl::StrCat("/", session_id, "/scene");
    case ChannelKind::kMap:
      return absl::StrCat("/", session_id, "/map");
    case ChannelKind::kWorldState:
      return absl::StrCat("/", session_id, "/world_state");
    case ChannelKind::kContacts:
      return absl::StrCat("/", session_id, "/contacts");
    case ChannelKind::kLog:
      return absl::StrCat("/", session_id, "/log");
    case ChannelKind::kVehicle:
      return absl::StrCat("/", session_id, "/vehicle/", vehicle);
    case ChannelKind::kViewer:
      return absl::StrCat("/", session_id, "/viewer");
    case ChannelKind::kRace:
      return absl::StrCat("/", session_id, "/race");
  }
  return "";
}

}  // namespace

// SessionEncodings ------------------------------------------------------------------------

SessionEncodings::Encoded& SessionEncodings::EncodedLocked(
    const std::shared_ptr<const session::Frame>& frame) {
  for (Encoded& entry : cache_) {
    // While the cached frame is alive no other frame can have its address.
    if (entry.address == frame.get() && !entry.frame.expired()) return entry;
  }
  Encoded& entry = cache_[next_slot_];
  next_slot_ = (next_slot_ + 1) % cache_.size();
  // Monotonic across frames, whatever the clock's resolution.
  const std::int64_t now = clock_->NowNanos() + epoch_offset_ns_;
  last_stamp_ns_ = std::max(last_stamp_ns_ + 1, now < 0 ? 0 : static_cast<std::uint64_t>(now));
  entry = Encoded{.frame = frame, .address = frame.get(), .stamp_ns = last_stamp_ns_};
  return entry;
}

std::uint64_t SessionEncodings::StampOf(const std::shared_ptr<const session::Frame>& frame) {
  absl::MutexLock lock(&mu_);
  return EncodedLocked(frame).stamp_ns;
}

std::shared_ptr<const SessionLook> SessionEncodings::LookLocked(const session::Frame& frame) {
  const std::int64_t now = clock_->NowNanos();
  bool stale = look_ == nullptr || now - look_ns_ >= kLookRefresh_ns;
  if (!stale) {
    for (const sim::VehicleSnapshot& vehicle : frame.vehicles) {
      if (!look_->vehicles.contains(vehicle.id)) {
        stale = true;
        break;
      }
    }
  }
  if (stale) {
    look_ = std::make_shared<const SessionLook>(LookOf(session_->Describe(/*with_vehicles=*/true)));
    look_ns_ = now;
  }
  return look_;
}

std::shared_ptr<const SessionLook> SessionEncodings::Look(const session::Frame& frame) {
  absl::MutexLock lock(&mu_);
  return LookLocked(frame);
}

std::shared_ptr<const std::string> SessionEncodings::Scene(
    const std::shared_ptr<const session::Frame>& frame) {
  absl::MutexLock lock(&mu_);
  Encoded& encoded = EncodedLocked(frame);
  if (encoded.scene == nullptr) {
    encoded.scene = std::make_shared<const std::string>(
        SceneJson(*frame, *LookLocked(*frame), encoded.stamp_ns));
  }
  return encoded.scene;
}

std::shared_ptr<const std::string> SessionEncodings::WorldState(
    const std::shared_ptr<const session::Frame>& frame) {
  absl::MutexLock lock(&mu_);
  Encoded& encoded = EncodedLocked(frame);
  if (encoded.world_state == nullptr && world_state_ != nullptr && *world_state_) {
    encoded.world_state = (*world_state_)(*session_, frame);
  }
  return encoded.world_state;
}

std::shared_ptr<const std::vector<std::string>> SessionEncodings::Telemetry(
    const std::shared_ptr<const session::Frame>& frame) {
  absl::MutexLock lock(&mu_);
  Encoded& encoded = EncodedLocked(frame);
  if (encoded.telemetry == nullptr) {
    const std::shared_ptr<const SessionLook> look = LookLocked(*frame);
    auto telemetry = std::make_shared<std::vector<std::string>>();
    const std::size_t count = std::min(frame->vehicles.size(), kMaxVehicleChannels);
    telemetry->reserve(count);
    // The controls held now (a tick after the frame at most): the frame does not carry them.
    std::vector<sim::VehicleId> ids(count);
    for (std::size_t i = 0; i < count; ++i) ids[i] = frame->vehicles[i].id;
    const std::vector<std::optional<sim::VehicleInput>> held = session_->HeldControls(ids);
    for (std::size_t i = 0; i < count; ++i) {
      const sim::VehicleSnapshot& vehicle = frame->vehicles[i];
      const auto found = look->vehicles.find(vehicle.id);
      telemetry->push_back(
          TelemetryJson(*frame, vehicle, found != look->vehicles.end() ? &found->second : nullptr,
                        held[i].has_value() ? &*held[i] : nullptr, encoded.stamp_ns));
    }
    encoded.telemetry = std::move(telemetry);
  }
  return encoded.telemetry;
}

SessionEncodings::Viewer SessionEncodings::ViewerOf(
    const std::shared_ptr<const session::Frame>& frame) {
  absl::MutexLock lock(&mu_);
  Encoded& encoded = EncodedLocked(frame);
  if (!encoded.viewer.has_value()) {
    const std::shared_ptr<const SessionLook> look = LookLocked(*frame);
    Viewer viewer{.roster_version = RosterVersion(*frame)};
    viewer.frame = std::make_shared<const std::string>(ViewerFrame(*frame, *look, viewer.roster_version));
    if (roster_ == nullptr || roster_version_ != viewer.roster_version) {
      roster_ = std::make_shared<const std::string>(ViewerRoster(*frame, *look, viewer.roster_version));
      roster_version_ = viewer.roster_version;
    }
    viewer.roster = roster_;
    encoded.viewer = std::move(viewer);
  }
  return *encoded.viewer;
}

// FoxgloveConnection ----------------------------------------------------------------------

// One WebSocket client: its channels and subscriptions, and the writer thread that sends to
// it. civetweb's thread for the connection calls Receive and Close; everything else runs on
// the writer.
class FoxgloveConnection {
 public:
  FoxgloveConnection(FoxgloveHub* hub, std::unique_ptr<Visitor> visitor, double rate_hz,
                     bool viewer)
      : hub_(hub), visitor_(std::move(visitor)), rate_hz_(rate_hz), viewer_(viewer) {}

  // Starts the writer. False if no thread could be started (the caller closes the connection).
  bool Start(mg_connection* connection) {
    connection_ = connection;
    try {
      writer_ = std::thread([this] { Run(); });
    } catch (const std::system_error&) {
      return false;
    }
    return true;
  }

  // A text message from the client (civetweb's thread). False: drop the connection (it sends
  // faster than it is answered).
  bool Receive(absl::string_view message) {
    absl::MutexLock lock(&signal_->mu);
    if (signal_->inbox_bytes + message.size() > kMaxInboxBytes) return false;
    signal_->inbox_bytes += message.size();
    signal_->inbox.emplace_back(message);
    signal_->wake = true;
    return true;
  }

  // civetweb's thread, when the connection ends: stops the writer and waits for it.
  void Close() {
    {
      absl::MutexLock lock(&signal_->mu);
      signal_->closed = true;
    }
    if (writer_.joinable()) writer_.join();
  }

  bool viewer() const { return viewer_; }
  const Visitor* visitor() const { return visitor_.get(); }

 private:
  // What the writer waits on. Shared with the transports, which a session may still call
  // (OnReady, OnClosed: they were taken out of its lists before Unsubscribe) after the
  // connection is gone: they then touch only this.
  struct Signal {
    absl::Mutex mu;
    bool wake ABSL_GUARDED_BY(mu) = false;
    bool closed ABSL_GUARDED_BY(mu) = false;
    std::deque<std::string> inbox ABSL_GUARDED_BY(mu);
    std::size_t inbox_bytes ABSL_GUARDED_BY(mu) = 0;

    void Wake() {
      absl::MutexLock lock(&mu);
      wake = true;
    }
  };

  // The transport side of one session's subscriber: wakes the writer.
  class Transport final : public session::SubscriberTransport {
   public:
    explicit Transport(std::shared_ptr<Signal> signal) : signal_(std::move(signal)) {}
    void OnReady() override { signal_->Wake(); }
    void OnClosed(const absl::Status& /*reason*/) override {
      closed_.store(true);
      signal_->Wake();
    }
    bool closed() const { return closed_.load(); }

   private:
    const std::shared_ptr<Signal> signal_;
    std::atomic<bool> closed_{false};
  };

  struct ChannelRef {
    std::string session_id;
    ChannelKind kind;
    sim::VehicleId vehicle = 0;
    std::optional<std::uint32_t> subscription;  // The client's id, when subscribed.
  };

  struct SessionState {
    std::shared_ptr<SessionEncodings> encodings;
    absl::flat_hash_map<ChannelKind, std::uint32_t> channels;  // Not kVehicle.
    std::vector<std::pair<sim::VehicleId, std::uint32_t>> vehicle_channels;  // By id.
    int subscribed = 0;  // Channels of this session subscribed to.
    std::shared_ptr<Transport> transport;
    std::shared_ptr<session::Subscriber> subscriber;
    std::optional<std::uint64_t> map_sent;  // The fingerprint of the map last sent.
    // The frame delivered last (sent at once to a channel subscribed later), and its stamp.
    std::shared_ptr<const session::Frame> last_frame;
    std::uint64_t last_stamp_ns = 0;
    // Subscribed since the last frame was delivered: to be sent it.
    std::vector<std::uint32_t> late;
    // The roster version the viewer channel sent last (0: none yet).
    std::uint32_t roster_sent = 0;
    // The vehicles of the frame the log channel saw last; unset until it has seen one.
    std::optional<std::vector<sim::VehicleId>> log_ids;
    // The race channel's last message had standings (a reset since sends one without).
    bool race_shown = false;
  };

  void Run();
  bool Send(int opcode, absl::string_view data);
  bool SendText(absl::string_view text) { return Send(MG_WEBSOCKET_OPCODE_TEXT, text); }
  bool SendStatus(foxglove::StatusLevel level, absl::string_view message) {
    return SendText(foxglove::Status(level, message));
  }
  // Advertises `channels` in messages of at most about kAdvertiseBytes, so that a client
  // that stops reading holds no more than that of them.
  bool SendAdvertise(absl::Span<const foxglove::Channel> channels);
  bool Handle(absl::string_view text);
  bool Refresh();
  bool AddSession(const std::shared_ptr<session::Session>& session);
  bool RemoveSession(const std::string& id);
  bool SyncVehicleChannels(SessionState& state, const session::Frame& frame);
  bool Deliver(const std::string& id, SessionState& state);
  // Sends `delivery` on the subscribed channels of the session (only on `only`, if set).
  bool Publish(const std::string& id, SessionState& state, const session::Delivery& delivery,
               std::optional<std::uint32_t> only);
  void Subscribed(std::uint32_t channel_id, ChannelRef& channel, std::uint32_t subscription);
  void Unsubscribed(ChannelRef& channel);
  std::uint32_t NewChannel(const std::string& session_id, ChannelKind kind,
                           sim::VehicleId vehicle, std::vector<foxglove::Channel>& advertise);

  FoxgloveHub* const hub_;
  const std::unique_ptr<Visitor> visitor_;
  const double rate_hz_;
  const bool viewer_;  // Offer the browser viewer's channel too.
  mg_connection* connection_ = nullptr;
  std::thread writer_;
  const std::shared_ptr<Signal> signal_ = std::make_shared<Signal>();

  // The writer's own.
  std::uint32_t next_channel_ = 1;
  absl::flat_hash_map<std::uint32_t, ChannelRef> channels_;
  absl::flat_hash_map<std::uint32_t, std::uint32_t> subscriptions_;  // Client id -> channel.
  absl::flat_hash_map<std::string, SessionState> sessions_;
  std::int64_t refreshed_ns_ = 0;
  std::uint64_t last_sent_ns_ = 0;  // The newest message timestamp sent.
  bool failed_ = false;
};

bool FoxgloveConnection::Send(int opcode, absl::string_view data) {
  if (failed_) return false;
  // Blocks while the client's window is full, at most the endpoint's request timeout.
  const int written = mg_websocket_write(connection_, opcode, data.data(), data.size());
  if (written < static_cast<int>(data.size()) || (written <= 0 && !data.empty())) {
    failed_ = true;
    return false;
  }
  hub_->bytes_sent()->Add(data.size());
  return true;
}

bool FoxgloveConnection::SendAdvertise(absl::Span<const foxglove::Channel> channels) {
  std::size_t first = 0;
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < channels.size(); ++i) {
    bytes += channels[i].topic.size() + channels[i].schema.size() + 128;
    if (bytes >= kAdvertiseBytes || i + 1 == channels.size()) {
      if (!SendText(foxglove::Advertise(channels.subspan(first, i + 1 - first)))) return false;
      first = i + 1;
      bytes = 0;
    }
  }
  return true;
}

std::uint32_t FoxgloveConnection::NewChannel(const std::string& session_id, ChannelKind kind,
                                             sim::VehicleId vehicle,
                                             std::vector<foxglove::Channel>& advertise) {
  const std::uint32_t id = next_channel_++;
  channels_[id] = ChannelRef{.session_id = session_id, .kind = kind, .vehicle = vehicle};
  foxglove::Channel channel{.id = id, .topic = TopicOf(session_id, kind, vehicle),
                            .encoding = "json", .schema_encoding = "jsonschema"};
  const auto json_schema = [&channel](const char* name, const std::string& schema) {
    channel.schema_name = name;
    channel.schema = schema;
  };
  switch (kind) {
    case ChannelKind::kScene:
    case ChannelKind::kMap:
      json_schema("foxglove.SceneUpdate", SceneUpdateSchema());
      break;
    case ChannelKind::kWorldState:
      channel.encoding = "protobuf";
      channel.schema_name = "pitlane.v1.WorldState";
      channel.schema = hub_->world_state_schema();
      channel.schema_encoding = "protobuf";
      break;
    case ChannelKind::kContacts:
      json_schema("pitlane.Contacts", ContactsSchema());
      break;
    case ChannelKind::kLog:
      json_schema("foxglove.Log", LogSchema());
      break;
    case ChannelKind::kRace:
      json_schema("pitlane.Race", RaceSchema());
      break;
    case ChannelKind::kVehicle:
      json_schema("pitlane.VehicleTelemetry", VehicleTelemetrySchema());
      break;
    case ChannelKind::kViewer:
      // Only the browser viewer asks for it (?viewer=1); no Foxglove panel reads it.
      channel.encoding = "pitlane.viewer.v1";
      channel.schema_name = "pitlane.ViewerFrame";
      channel.schema = "";
      channel.schema_encoding = "";
      break;
  }
  advertise.push_back(std::move(channel));
  return id;
}

bool FoxgloveConnection::AddSession(const std::shared_ptr<session::Session>& session) {
  SessionState state;
  state.encodings = hub_->EncodingsFor(session);
  std::vector<foxglove::Channel> advertise;
  const std::string& id = session->id();
  for (const ChannelKind kind : {ChannelKind::kScene, ChannelKind::kMap, ChannelKind::kContacts,
                                 ChannelKind::kLog, ChannelKind::kRace}) {
    state.channels[kind] = NewChannel(id, kind, 0, advertise);
  }
  if (hub_->options().encode_world_state) {
    state.channels[ChannelKind::kWorldState] = NewChannel(id, ChannelKind::kWorldState, 0, advertise);
  }
  if (viewer_) state.channels[ChannelKind::kViewer] = NewChannel(id, ChannelKind::kViewer, 0, advertise);
  SessionState& stored = sessions_[id] = std::move(state);
  if (!SendAdvertise(advertise)) return false;
  return SyncVehicleChannels(stored, *session->CurrentFrame());
}

bool FoxgloveConnection::RemoveSession(const std::string& id) {
  const auto it = sessions_.find(id);
  if (it == sessions_.end()) return true;
  SessionState& state = it->second;
  if (state.subscriber != nullptr) state.encodings->session()->Unsubscribe(state.subscriber.get());
  std::vector<std::uint32_t> gone;
  for (const auto& [kind, channel] : state.channels) gone.push_back(channel);
  for (const auto& [vehicle, channel] : state.vehicle_channels) gone.push_back(channel);
  for (const std::uint32_t channel : gone) {
    const auto found = channels_.find(channel);
    if (found != channels_.end() && found->second.subscription.has_value()) {
      subscriptions_.erase(*found->second.subscription);
    }
    channels_.erase(channel);
  }
  sessions_.erase(it);
  std::sort(gone.begin(), gone.end());
  return SendText(foxglove::Unadvertise(gone));
}

bool FoxgloveConnection::SyncVehicleChannels(SessionState& state, const session::Frame& frame) {
  // Both lists are by ascending id: merge them.
  const std::size_t wanted = std::min(frame.vehicles.size(), kMaxVehicleChannels);
  std::vector<std::pair<sim::VehicleId, std::uint32_t>> kept;
  std::vector<foxglove::Channel> advertise;
  std::vector<std::uint32_t> gone;
  std::size_t old = 0;
  const std::string& id = state.encodings->session()->id();
  for (std::size_t i = 0; i < wanted; ++i) {
    const sim::VehicleId vehicle = frame.vehicles[i].id;
    while (old < state.vehicle_channels.size() && state.vehicle_channels[old].first < vehicle) {
      gone.push_back(state.vehicle_channels[old++].second);
    }
    if (old < state.vehicle_channels.size() && state.vehicle_channels[old].first == vehicle) {
      kept.push_back(state.vehicle_channels[old++]);
    } else {
      kept.emplace_back(vehicle, NewChannel(id, ChannelKind::kVehicle, vehicle, advertise));
    }
  }
  while (old < state.vehicle_channels.size()) gone.push_back(state.vehicle_channels[old++].second);
  if (advertise.empty() && gone.empty()) return true;
  for (const std::uint32_t channel : gone) {
    const auto found = channels_.find(channel);
    if (found != channels_.end()) {
      if (found->second.subscription.has_value()) {
        subscriptions_.erase(*found->second.subscription);
        Unsubscribed(found->second);
      }
      channels_.erase(found);
    }
  }
  state.vehicle_channels = std::move(kept);
  if (!gone.empty() && !SendText(foxglove::Unadvertise(gone))) return false;
  return SendAdvertise(advertise);
}

void FoxgloveConnection::Subscribed(std::uint32_t channel_id, ChannelRef& channel,
                                    std::uint32_t subscription) {
  channel.subscription = subscription;
  SessionState& state = sessions_.at(channel.session_id);
  if (channel.kind == ChannelKind::kMap) state.map_sent.reset();  // Send it to the new one.
  if (channel.kind == ChannelKind::kLog) state.log_ids.reset();
  if (channel.kind == ChannelKind::kViewer) state.roster_sent = 0;
  if (state.subscribed++ > 0) {
    // The session's subscriber is there already: send the frame it delivered last.
    if (state.last_frame != nullptr) state.late.push_back(channel_id);
    return;
  }
  state.transport = std::make_shared<Transport>(signal_);
  state.subscriber = std::make_shared<session::Subscriber>(
      session::SubscriberOptions{.max_rate_hz = rate_hz_}, state.transport,
      &state.encodings->session()->clock());
  // The session may be gone meanwhile: the next refresh removes it.
  if (const absl::Status subscribed = state.encodings->session()->Subscribe(state.subscriber);
      !subscribed.ok()) {
    SendStatus(foxglove::StatusLevel::kWarning,
               absl::StrCat("session ", channel.session_id, ": ", subscribed.message()));
  }
}

void FoxgloveConnection::Unsubscribed(ChannelRef& channel) {
  channel.subscription.reset();
  const auto it = sessions_.find(channel.session_id);
  if (it == sessions_.end()) return;
  SessionState& state = it->second;
  if (--state.subscribed > 0) return;
  if (state.subscriber != nullptr) state.encodings->session()->Unsubscribe(state.subscriber.get());
  state.subscriber.reset();
  state.transport.reset();
  state.last_frame.reset();
  state.late.clear();
}

bool FoxgloveConnection::Handle(absl::string_view text) {
  const absl::StatusOr<foxglove::ClientMessage> message = foxglove::ParseClientMessage(text);
  if (!message.ok()) {
    return SendStatus(foxglove::StatusLevel::kError, message.status().message());
  }
  if (message->op == foxglove::ClientMessage::Op::kSubscribe) {
    for (const foxglove::Subscription& subscription : message->subscriptions) {
      const auto channel = channels_.find(subscription.channel_id);
      if (channel == channels_.end()) {
        if (!SendStatus(foxglove::StatusLevel::kWarning,
                        absl::StrCat("channelId: no channel ", subscription.channel_id,
                                     " (it may have been unadvertised)"))) {
          return false;
        }
        continue;
      }
      if (subscriptions_.contains(subscription.id) || channel->second.subscription.has_value()) {
        if (!SendStatus(foxglove::StatusLevel::kError,
                        absl::StrCat("subscriptions: id ", subscription.id, " or channel ",
                                     subscription.channel_id, " is already subscribed"))) {
          return false;
        }
        continue;
      }
      Subscribed(channel->first, channel->second, subscription.id);
      subscriptions_[subscription.id] = subscription.channel_id;
    }
    signal_->Wake();  // Deliver to the new subscriptions without waiting for the next frame.
    return true;
  }
  for (const std::uint32_t id : message->subscription_ids) {
    const auto subscription = subscriptions_.find(id);
    if (subscription == subscriptions_.end()) continue;  // Already gone with its channel.
    const auto channel = channels_.find(subscription->second);
    subscriptions_.erase(subscription);
    if (channel != channels_.end()) Unsubscribed(channel->second);
  }
  return true;
}

bool FoxgloveConnection::Refresh() {
  if (visitor_ != nullptr && !visitor_->StillValid()) {
    SendStatus(foxglove::StatusLevel::kError, "token: revoked; this connection ends");
    return false;
  }
  std::vector<std::shared_ptr<session::Session>> visible;
  for (std::shared_ptr<session::Session>& session : hub_->sessions().List()) {
    if (visitor_ == nullptr || visitor_->MaySee(session->id())) visible.push_back(std::move(session));
  }
  std::vector<std::string> gone;
  for (const auto& [id, state] : sessions_) {
    const std::shared_ptr<session::Session>& mine = state.encodings->session();
    const bool still = std::any_of(visible.begin(), visible.end(),
                                   [&mine](const auto& session) { return session == mine; });
    if (!still || (state.transport != nullptr && state.transport->closed())) gone.push_back(id);
  }
  for (const std::string& id : gone) {
    if (!RemoveSession(id)) return false;
  }
  for (const std::shared_ptr<session::Session>& session : visible) {
    if (!sessions_.contains(session->id()) && !AddSession(session)) return false;
  }
  // Vehicles come and go in sessions nobody here subscribes to as well: their channels too.
  for (auto& entry : sessions_) {
    SessionState& state = entry.second;
    if (state.subscriber == nullptr &&
        !SyncVehicleChannels(state, *state.encodings->session()->CurrentFrame())) {
      return false;
    }
  }
  return true;
}

bool FoxgloveConnection::Deliver(const std::string& id, SessionState& state) {
  std::optional<session::Delivery> delivery = state.subscriber->Take();
  if (!delivery.has_value()) return true;
  if (delivery->skipped_frames > 0) hub_->frames_skipped()->Add(delivery->skipped_frames);
  hub_->frames_sent()->Add();
  if (!SyncVehicleChannels(state, *delivery->frame)) return false;
  state.last_frame = delivery->frame;
  state.last_stamp_ns = state.encodings->StampOf(delivery->frame);
  state.late.clear();  // They get this newer frame with the others.
  return Publish(id, state, *delivery, std::nullopt);
}

bool FoxgloveConnection::Publish(const std::string& id, SessionState& state,
                                 const session::Delivery& delivery,
                                 std::optional<std::uint32_t> only) {
  const std::shared_ptr<const session::Frame>& frame = delivery.frame;
  // The frame's stamp, as delivered; never older than one this connection sent before (a
  // client's timeline only runs forward).
  const std::uint64_t ns = std::max(state.last_stamp_ns, last_sent_ns_ + 1);
  last_sent_ns_ = ns;
  SessionEncodings& encodings = *state.encodings;
  const auto channel_of = [&](ChannelKind kind) -> ChannelRef* {
    const auto it = state.channels.find(kind);
    if (it == state.channels.end() || (only.has_value() && *only != it->second)) return nullptr;
    ChannelRef& channel = channels_[it->second];
    return channel.subscription.has_value() ? &channel : nullptr;
  };
  const auto publish = [&](const ChannelRef* channel, absl::string_view payload) {
    return Send(MG_WEBSOCKET_OPCODE_BINARY,
                foxglove::MessageData(*channel->subscription, ns, payload));
  };
  if (const ChannelRef* channel = channel_of(ChannelKind::kScene)) {
    if (!publish(channel, *encodings.Scene(frame))) return false;
  }
  if (const ChannelRef* channel = channel_of(ChannelKind::kMap)) {
    const std::shared_ptr<const SessionLook> look = encodings.Look(*frame);
    if (state.map_sent != look->map_fingerprint) {
      if (!publish(channel, MapJson(*look, ns))) return false;
      state.map_sent = look->map_fingerprint;
    }
  }
  if (const ChannelRef* channel = channel_of(ChannelKind::kViewer)) {
    const SessionEncodings::Viewer viewer = encodings.ViewerOf(frame);
    if (state.roster_sent != viewer.roster_version) {
      if (!publish(channel, *viewer.roster)) return false;
      state.roster_sent = viewer.roster_version;
    }
    if (!publish(channel, *viewer.frame)) return false;
  }
  if (const ChannelRef* channel = channel_of(ChannelKind::kWorldState)) {
    const std::shared_ptr<const std::string> bytes = encodings.WorldState(frame);
    if (bytes != nullptr && !publish(channel, *bytes)) return false;
  }
  if (const ChannelRef* channel = channel_of(ChannelKind::kContacts)) {
    if (!publish(channel, ContactsJson(*frame, delivery.events, ns))) return false;
  }
  if (const ChannelRef* channel = channel_of(ChannelKind::kRace)) {
    // Once a race is called: its standings every frame, its events since the last one; and
    // one message without standings when it is gone (a reset), so that none stay shown.
    if (frame->race != nullptr || state.race_shown) {
      if (!publish(channel, RaceJson(*frame, delivery.events, ns))) return false;
      state.race_shown = frame->race != nullptr;
    }
  }
  if (const ChannelRef* channel = channel_of(ChannelKind::kLog)) {
    std::vector<sim::VehicleId> ids;
    const std::vector<std::string> lines =
        LogLines(id, delivery, state.log_ids,
                 [&] { return encodings.session()->Describe(false); }, ns, ids);
    for (const std::string& line : lines) {
      if (!publish(channel, line)) return false;
    }
    state.log_ids = std::move(ids);
  }
  // Vehicle telemetry, for the subscribed vehicles only.
  std::shared_ptr<const std::vector<std::string>> telemetry;
  for (std::size_t i = 0; i < state.vehicle_channels.size(); ++i) {
    if (only.has_value() && *only != state.vehicle_channels[i].second) continue;
    const ChannelRef& channel = channels_[state.vehicle_channels[i].second];
    if (!channel.subscription.has_value()) continue;
    if (telemetry == nullptr) telemetry = encodings.Telemetry(frame);
    // vehicle_channels follows frame->vehicles (SyncVehicleChannels above): same index.
    if (i < telemetry->size() && !publish(&channel, (*telemetry)[i])) return false;
  }
  return true;
}

void FoxgloveConnection::Run() {
  const session::Clock& clock = hub_->clock();
  bool ok = SendText(foxglove::ServerInfo(hub_->options().server_name, hub_->instance_id())) &&
            Refresh();
  refreshed_ns_ = clock.NowNanos();
  while (ok) {
    std::deque<std::string> inbox;
    {
      Signal& signal = *signal_;
      absl::MutexLock lock(&signal.mu);
      const auto ready = [&signal]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(signal.mu) {
        return signal.wake || signal.closed;
      };
      signal.mu.AwaitWithTimeout(absl::Condition(&ready), kWriterTick);
      if (signal.closed) break;
      signal.wake = false;
      inbox.swap(signal.inbox);
      signal.inbox_bytes = 0;
    }
    for (const std::string& text : inbox) {
      if (!(ok = Handle(text))) break;
    }
    if (!ok) break;
    if (clock.NowNanos() - refreshed_ns_ >= kSessionRefresh_ns) {
      refreshed_ns_ = clock.NowNanos();
      if (!(ok = Refresh())) break;
    }
    for (auto& [id, state] : sessions_) {
      if (state.subscriber != nullptr && !(ok = Deliver(id, state))) break;
      // Channels subscribed after the frame they have not had yet was delivered.
      std::vector<std::uint32_t> late;
      late.swap(state.late);
      for (const std::uint32_t channel : late) {
        if (state.last_frame == nullptr) break;
        const session::Delivery delivery{.frame = state.last_frame};
        if (!(ok = Publish(id, state, delivery, channel))) break;
      }
      if (!ok) break;
    }
  }
  for (auto& [id, state] : sessions_) {
    if (state.subscriber != nullptr) state.encodings->session()->Unsubscribe(state.subscriber.get());
  }
  sessions_.clear();
  bool closing = false;  // civetweb ends the connection itself.
  {
    absl::MutexLock lock(&signal_->mu);
    closing = signal_->closed;
  }
  if (!closing) {
    // Ended here: a revoked token (say goodbye first), or a client that stopped reading (a
    // write waited the request timeout). The socket is shut down after the goodbye, so that
    // the connection does not keep its civetweb thread until the client chooses to close.
    if (!failed_) mg_websocket_write(connection_, MG_WEBSOCKET_OPCODE_CONNECTION_CLOSE, "\x03\xe8", 2);
    ShutdownSocket(connection_);
  }
}

// FoxgloveHub ------------------------------------------------------------------------------

FoxgloveHub::FoxgloveHub(FoxgloveOptions options, session::SessionManager* sessions,
                         const session::Clock* clock, metrics::Registry* metrics)
    : options_(std::move(options)),
      sessions_(sessions),
      clock_(clock),
      connections_(std::make_shared<std::array<std::atomic<std::int64_t>, 2>>()) {
  // Tells a client that reconnects whether it reached the same server (or must forget what
  // it knew): random for each start.
  world_state_schema_ = absl::Base64Escape(options_.world_state_descriptor_set);
  const absl::StatusOr<std::string> id = session::NewSessionId();
  instance_id_ = id.ok() ? *id : absl::StrCat("pitlane-", clock->NowNanos());
  bytes_sent_ = metrics->AddCounter("pitlane_web_bytes_sent_total",
                                    "Bytes sent to WebSocket clients (Foxglove and the viewer).");
  frames_sent_ = metrics->AddCounter("pitlane_web_frames_sent_total",
                                     "Frames delivered to WebSocket clients.");
  frames_skipped_ = metrics->AddCounter(
      "pitlane_web_frames_skipped_total",
      "Frames a WebSocket client was too slow to take (a newer one replaced them).");
  std::weak_ptr<std::array<std::atomic<std::int64_t>, 2>> count = connections_;
  metrics->AddGauge(
      "pitlane_web_connections",
      "Open WebSocket connections: Foxglove and Lichtblick (foxglove), the viewer's pages (viewer).",
      [count] {
        const auto live = count.lock();
        const auto value = [&live](int i) { return live == nullptr ? 0.0 : double((*live)[i].load()); };
        return std::vector<metrics::Sample>{{{{"protocol", "foxglove"}}, value(0)},
                                            {{{"protocol", "viewer"}}, value(1)}};
      });
}

FoxgloveHub::~FoxgloveHub() = default;

std::shared_ptr<SessionEncodings> FoxgloveHub::EncodingsFor(
    const std::shared_ptr<session::Session>& session) {
  absl::MutexLock lock(&mu_);
  std::weak_ptr<SessionEncodings>& slot = encodings_[session->id()];
  std::shared_ptr<SessionEncodings> encodings = slot.lock();
  if (encodings == nullptr || encodings->session() != session) {
    encodings = std::make_shared<SessionEncodings>(session, &options_.encode_world_state, clock_,
                                                   options_.epoch_offset_ns);
    slot = encodings;
  }
  // Forget the sessions nobody watches any more.
  absl::erase_if(encodings_, [](const auto& entry) { return entry.second.expired(); });
  encodings_[session->id()] = encodings;
  return encodings;
}

int FoxgloveHub::OnConnect(const mg_connection* connection, void* hub_data) {
  auto* hub = static_cast<FoxgloveHub*>(hub_data);
  auto* mutable_connection = const_cast<mg_connection*>(connection);
  const mg_request_info* request = mg_get_request_info(connection);
  const RequestQuery query(request != nullptr ? request->query_string : nullptr);
  // Foxglove's clients offer the subprotocol; a client that does not would not understand.
  const char* offered = mg_get_header(connection, "Sec-WebSocket-Protocol");
  bool speaks = false;
  if (offered != nullptr) {
    for (absl::string_view protocol : absl::StrSplit(offered, ',')) {
      speaks = speaks || absl::StripAsciiWhitespace(protocol) == foxglove::kSubprotocol;
    }
  }
  if (!speaks) {
    RespondText(mutable_connection, 400, "Bad Request",
                absl::StrCat("Sec-WebSocket-Protocol: offer ", foxglove::kSubprotocol, "\n"));
    return 1;
  }
  // RFC 6455: 16 random bytes in base64. civetweb fails the handshake on other keys without
  // telling us, so they are refused here, before anything is made for the connection.
  const char* key = mg_get_header(connection, "Sec-WebSocket-Key");
  std::string decoded;
  if (key == nullptr || std::strlen(key) != 24 || !absl::Base64Unescape(key, &decoded) ||
      decoded.size() != 16) {
    RespondText(mutable_connection, 400, "Bad Request",
                "Sec-WebSocket-Key: must be 16 bytes in base64 (RFC 6455)\n");
    return 1;
  }
  double rate_hz = hub->options_.default_rate_hz;
  if (const std::optional<absl::string_view> rate = query.Get("rate_hz")) {
    if (!absl::SimpleAtod(*rate, &rate_hz) || !(rate_hz >= kMinRateHz && rate_hz <= kMaxRateHz)) {
      RespondText(mutable_connection, 400, "Bad Request",
                  absl::StrCat("rate_hz: must be a number in [", kMinRateHz, ", ", kMaxRateHz,
                               "] (frames a second), got \"", absl::CHexEscape(rate->substr(0, 40)),
                               "\"\n"));
      return 1;
    }
  }
  std::unique_ptr<Visitor> visitor;
  if (hub->options_.authenticate) {
    // The cookie only from the server's own pages: another site's page could otherwise open
    // a WebSocket with it (cross-site WebSocket hijacking).
    const char* origin = mg_get_header(connection, "Origin");
    const char* host = mg_get_header(connection, "Host");
    const bool same_origin = origin == nullptr ||
                             (host != nullptr && (absl::string_view(origin) == absl::StrCat("http://", host) ||
                                                  absl::string_view(origin) == absl::StrCat("https://", host)));
    absl::StatusOr<std::unique_ptr<Visitor>> authenticated =
        hub->options_.authenticate(TokenOf(mutable_connection, query, same_origin));
    if (!authenticated.ok()) {
      RespondText(mutable_connection, 401, "Unauthorized",
                  absl::StrCat(authenticated.status().message(), "\n"),
                  "WWW-Authenticate: Bearer realm=\"pitlane\"\r\n");
      return 1;
    }
    visitor = *std::move(authenticated);
  }
  const std::optional<absl::string_view> viewer = query.Get("viewer");
  auto state = std::make_unique<FoxgloveConnection>(hub, std::move(visitor), rate_hz,
                                                    viewer.has_value() && *viewer == "1");
  enum class Admission { kAdmitted, kServerFull, kTokenFull } admission = Admission::kAdmitted;
  {
    absl::MutexLock lock(&hub->mu_);
    // civetweb reuses its connection structures: an entry left by a handshake that failed
    // after this callback (it calls neither OnReady nor OnClose then) is dropped first.
    if (auto stale = hub->pending_.find(connection); stale != hub->pending_.end()) {
      hub->ForgetLocked(*stale->second);
      hub->pending_.erase(stale);
    }
    // WebSockets hold a thread each: some are kept for the probes and the pages; and one
    // token may not take them all.
    const std::string who = state->visitor() != nullptr ? state->visitor()->Who() : "";
    if (hub->open_ >= hub->options_.max_connections) {
      admission = Admission::kServerFull;
    } else if (!who.empty() &&
               hub->per_visitor_[who] >= hub->options_.max_connections_per_token) {
      admission = Admission::kTokenFull;
    } else {
      if (!who.empty()) ++hub->per_visitor_[who];
      ++hub->open_;
      hub->pending_[connection] = std::move(state);
    }
  }
  switch (admission) {
    case Admission::kServerFull:
      RespondText(mutable_connection, 503, "Service Unavailable",
                  absl::StrCat("connections: this server takes ", hub->options_.max_connections,
                               " WebSocket connections at once\n"));
      return 1;
    case Admission::kTokenFull:
      RespondText(mutable_connection, 429, "Too Many Requests",
                  absl::StrCat("connections: one token may hold ",
                               hub->options_.max_connections_per_token,
                               " WebSocket connections at once\n"));
      return 1;
    case Admission::kAdmitted:
      break;
  }
  return 0;
}

void FoxgloveHub::ForgetLocked(const FoxgloveConnection& state) {
  --open_;
  if (state.visitor() != nullptr) {
    const auto it = per_visitor_.find(state.visitor()->Who());
    if (it != per_visitor_.end() && --it->second == 0) per_visitor_.erase(it);
  }
}

void FoxgloveHub::OnReady(mg_connection* connection, void* hub_data) {
  auto* hub = static_cast<FoxgloveHub*>(hub_data);
  std::unique_ptr<FoxgloveConnection> state;
  {
    absl::MutexLock lock(&hub->mu_);
    const auto it = hub->pending_.find(connection);
    if (it == hub->pending_.end()) return;
    state = std::move(it->second);
    hub->pending_.erase(it);
  }
  (*hub->connections_)[state->viewer() ? 1 : 0].fetch_add(1);
  FoxgloveConnection* started = state.release();
  mg_set_user_connection_data(connection, started);
  if (!started->Start(connection)) {
    // No thread for its writer (the process is out of them): say so and close.
    mg_websocket_write(connection, MG_WEBSOCKET_OPCODE_CONNECTION_CLOSE, "\x03\xf3", 2);
  }
}

int FoxgloveHub::OnData(mg_connection* connection, int bits, char* data, std::size_t size,
                        void* /*hub*/) {
  auto* state = static_cast<FoxgloveConnection*>(mg_get_user_connection_data(connection));
  if (state == nullptr) return 0;
  // Only whole text messages, up to the size the protocol's messages need; a client that
  // sends more, or fragments, is closed (civetweb has read the frame whole by now).
  const bool final_frame = (bits & 0x80) != 0;
  switch (bits & 0x0F) {
    case MG_WEBSOCKET_OPCODE_TEXT:
      if (!final_frame || size > foxglove::kMaxClientMessageBytes) return 0;
      return state->Receive(absl::string_view(data, size)) ? 1 : 0;
    case MG_WEBSOCKET_OPCODE_CONTINUATION:
    case MG_WEBSOCKET_OPCODE_CONNECTION_CLOSE:
      return 0;
    default:
      return 1;  // Binary messages (publishing, services), pings, pongs: not offered, ignored.
  }
}

void FoxgloveHub::OnClose(const mg_connection* connection, void* hub_data) {
  auto* hub = static_cast<FoxgloveHub*>(hub_data);
  auto* state = static_cast<FoxgloveConnection*>(mg_get_user_connection_data(connection));
  if (state == nullptr) {
    absl::MutexLock lock(&hub->mu_);
    if (auto pending = hub->pending_.find(connection); pending != hub->pending_.end()) {
      hub->ForgetLocked(*pending->second);
      hub->pending_.erase(pending);
    }
    return;
  }
  state->Close();
  (*hub->connections_)[state->viewer() ? 1 : 0].fetch_sub(1);
  {
    absl::MutexLock lock(&hub->mu_);
    hub->ForgetLocked(*state);
  }
  delete state;
  mg_set_user_connection_data(connection, nullptr);
}

}  // namespace pitlane::web
