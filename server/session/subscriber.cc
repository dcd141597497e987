#include "server/session/subscriber.h"

#include <algorithm>
#include <utility>

namespace pitlane::session {
namespace {

constexpr double kMaxRatePeriod_ns = 365.0 * 24 * 3600 * 1e9;

}  // namespace

Subscriber::Subscriber(SubscriberOptions options, std::shared_ptr<SubscriberTransport> transport,
                       const Clock* clock)
    : options_(std::move(options)), transport_(std::move(transport)), clock_(clock) {}

void Subscriber::Filter(FrameEvents& events) const {
  if (options_.vehicle_ids.empty()) return;
  std::erase_if(events.events, [this](const sim::ContactEvent& event) {
    return !sim::InvolvesAnyOf(event.contact, options_.vehicle_ids);
  });
}

bool Subscriber::Follows(const TrackEvent& event) const {
  const sim::VehicleId vehicle = event.vehicle();
  return vehicle == 0 || options_.vehicle_ids.empty() ||
         std::binary_search(options_.vehicle_ids.begin(), options_.vehicle_ids.end(), vehicle);
}

void Subscriber::Accumulate(absl::Span<const sim::ContactEvent> transitions,
                            absl::Span<const TrackEvent> track_events, bool over_contact_budget) {
  if (transitions.empty() && track_events.empty() && !over_contact_budget) return;
  absl::MutexLock lock(&mu_);
  if (over_contact_budget) ++accumulated_.ticks_over_contact_budget;
  for (const TrackEvent& event : track_events) {
    if (Follows(event)) AppendTrackEvents({&event, 1}, accumulated_);
  }
  if (options_.vehicle_ids.empty()) {
    AppendEvents(transitions, accumulated_);
    return;
  }
  for (const sim::ContactEvent& event : transitions) {
    if (sim::InvolvesAnyOf(event.contact, options_.vehicle_ids)) {
      AppendEvents({&event, 1}, accumulated_);
    }
  }
}

bool Subscriber::Offer(std::shared_ptr<const Frame> frame) {
  absl::MutexLock lock(&mu_);
  FrameEvents events = std::exchange(accumulated_, {});
  FinishEvents(frame->contacts, frame->time.tick, events);
  Filter(events);
  return OfferLocked(std::move(frame), std::move(events));
}

bool Subscriber::OfferFirst(std::shared_ptr<const Frame> frame) {
  FrameEvents events;
  const std::uint64_t tick = frame->time.tick;
  for (const sim::Contact& contact : frame->contacts) {
    if (contact.began_tick == tick) {
      events.events.push_back({.tick = tick, .phase = sim::ContactPhase::kBegan, .contact = contact});
    }
  }
  FinishEvents(frame->contacts, tick, events);
  Filter(events);
  absl::MutexLock lock(&mu_);
  accumulated_ = {};  // Transitions of a world that is gone.
  if (options_.kind == SubscriberOptions::Kind::kLatest) {
    // Nothing of the old world is worth sending, not even as a count.
    pending_.reset();
    pending_events_ = {};
    skipped_ = 0;
  }
  // A lossless queue keeps what it holds: the first frame follows it.
  first_pending_ = true;
  return OfferLocked(std::move(frame), std::move(events));
}

bool Subscriber::OfferLocked(std::shared_ptr<const Frame> frame, FrameEvents events) {
  if (options_.kind == SubscriberOptions::Kind::kLossless) {
    // The frame and the events that go with it. A reset's first frame is queued whatever its
    // size (if the count allows): the frames after it are of another world.
    const std::size_t bytes =
        options_.queue_bytes > 0
            ? FrameBytes(*frame) +
                  (events.events.size() + lost_events_.events.size()) * sizeof(sim::ContactEvent) +
                  (events.lap_events.size() + events.race_events.size() +
                   lost_events_.lap_events.size() + lost_events_.race_events.size()) *
                      sizeof(TrackEvent)
            : 0;
    if (queue_.size() >= options_.queue_capacity ||
        (options_.queue_bytes > 0 && !queue_.empty() && !first_pending_ &&
         queued_bytes_ + bytes > options_.queue_bytes)) {
      if (lost_ == 0) lost_first_tick_ = frame->time.tick;
      lost_last_tick_ = frame->time.tick;
      ++lost_;
      // Keep the lost frames' transitions for the next frame that is queued.
      lost_events_ = MergeEvents(std::move(lost_events_), std::move(events));
      return false;
    }
    Delivery delivery{.frame = std::move(frame), .first_frame = std::exchange(first_pending_, false)};
    if (lost_ > 0) {
      delivery.events = MergeEvents(std::exchange(lost_events_, {}), std::move(events));
      delivery.lost_frames = std::exchange(lost_, 0);
      delivery.lost_first_tick = lost_first_tick_;
      delivery.lost_last_tick = lost_last_tick_;
    } else {
      delivery.events = std::move(events);
    }
    queue_.push_back(std::move(delivery));
    queue_frame_bytes_.push_back(bytes);
    queued_bytes_ += bytes;
    return std::exchange(waiting_, false);
  }
  // A frame the rate limit holds back when it arrives is decimated if a newer one replaces
  // it; one that could have been taken is skipped (the transport was busy, or had yet to
  // come for it).
  const bool deliverable = !max_rate_hz_set() || clock_->NowNanos() >= not_before_ns_;
  if (pending_ != nullptr) {
    if (pending_deliverable_) ++skipped_;
    pending_events_ = MergeEvents(std::move(pending_events_), std::move(events));
  } else {
    pending_events_ = std::move(events);
  }
  pending_ = std::move(frame);
  pending_deliverable_ = deliverable;
  // Told only when it can take the frame now; a rate-limited transport is told by the first
  // offer after its next slot (so a Step is not cut into one-tick slices for it).
  if (!waiting_ || !deliverable) return false;
  waiting_ = false;
  return true;
}

std::optional<Delivery> Subscriber::TakeLost() {
  absl::MutexLock lock(&mu_);
  if (lost_ == 0) return std::nullopt;
  return Delivery{.events = std::exchange(lost_events_, {}),
                  .lost_frames = std::exchange(lost_, 0),
                  .lost_first_tick = lost_first_tick_,
                  .lost_last_tick = lost_last_tick_};
}

std::optional<Delivery> Subscriber::Take() {
  absl::MutexLock lock(&mu_);
  if (options_.kind == SubscriberOptions::Kind::kLossless) {
    if (queue_.empty()) {
      waiting_ = true;
      return std::nullopt;
    }
    Delivery delivery = std::move(queue_.front());
    queue_.pop_front();
    queued_bytes_ -= queue_frame_bytes_.front();
    queue_frame_bytes_.pop_front();
    return delivery;
  }
  if (pending_ == nullptr) {
    waiting_ = true;
    return std::nullopt;
  }
  if (max_rate_hz_set()) {
    const std::int64_t now_ns = clock_->NowNanos();
    if (now_ns < not_before_ns_) {
      waiting_ = true;  // The first offer after not_before_ns_ tells it again.
      return std::nullopt;
    }
    // At most a year between deliveries, whatever tiny rate was asked: no overflow.
    const double period_ns = std::min(1e9 / *options_.max_rate_hz, kMaxRatePeriod_ns);
    not_before_ns_ = now_ns + static_cast<std::int64_t>(period_ns);
  }
  return Delivery{.frame = std::exchange(pending_, nullptr),
                  .events = std::exchange(pending_events_, {}),
                  .skipped_frames = std::exchange(skipped_, 0),
                  .first_frame = std::exchange(first_pending_, false)};
}

}  // namespace pitlane::session
