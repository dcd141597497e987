#include "server/session/subscriber.h"

#include <algorithm>
#include <utility>

namespace pitlane::session {

Subscriber::Subscriber(SubscriberOptions options, std::shared_ptr<SubscriberTransport> transport,
                       const Clock* clock)
    : options_(std::move(options)), transport_(std::move(transport)), clock_(clock) {}

void Subscriber::Filter(FrameEvents& events) const {
  if (options_.vehicle_ids.empty()) return;
  std::erase_if(events.events, [this](const sim::ContactEvent& event) {
    return !sim::InvolvesAnyOf(event.contact, options_.vehicle_ids);
  });
}

void Subscriber::Accumulate(absl::Span<const sim::ContactEvent> transitions) {
  if (transitions.empty()) return;
  absl::MutexLock lock(&mu_);
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
  accumulated_ = {};
  pending_.reset();
  pending_events_ = {};
  queue_.clear();
  return OfferLocked(std::move(frame), std::move(events));
}

bool Subscriber::OfferLocked(std::shared_ptr<const Frame> frame, FrameEvents events) {
  if (options_.kind == SubscriberOptions::Kind::kLossless) {
    if (queue_.size() >= options_.queue_capacity) {
      if (lost_ == 0) lost_first_tick_ = frame->time.tick;
      lost_last_tick_ = frame->time.tick;
      ++lost_;
      // Keep the lost frames' transitions for the next frame that is queued.
      lost_events_ = MergeEvents(std::move(lost_events_), std::move(events));
      return false;
    }
    Delivery delivery{.frame = std::move(frame)};
    if (lost_ > 0) {
      delivery.events = MergeEvents(std::exchange(lost_events_, {}), std::move(events));
      delivery.lost_frames = std::exchange(lost_, 0);
      delivery.lost_first_tick = lost_first_tick_;
      delivery.lost_last_tick = lost_last_tick_;
    } else {
      delivery.events = std::move(events);
    }
    queue_.push_back(std::move(delivery));
    return std::exchange(waiting_, false);
  }
  if (pending_ != nullptr) {
    // Replaced unread: skipped if the transport was busy, decimated by the rate limit if not.
    if (busy_) ++skipped_;
    pending_events_ = MergeEvents(std::move(pending_events_), std::move(events));
  } else {
    pending_events_ = std::move(events);
  }
  pending_ = std::move(frame);
  return std::exchange(waiting_, false);
}

std::optional<Delivery> Subscriber::Take() {
  absl::MutexLock lock(&mu_);
  busy_ = false;
  if (options_.kind == SubscriberOptions::Kind::kLossless) {
    if (queue_.empty()) {
      waiting_ = true;
      return std::nullopt;
    }
    Delivery delivery = std::move(queue_.front());
    queue_.pop_front();
    return delivery;
  }
  if (pending_ == nullptr) {
    waiting_ = true;
    return std::nullopt;
  }
  if (options_.max_rate_hz.has_value() && last_delivery_ns_.has_value()) {
    const std::int64_t now_ns = clock_->NowNanos();
    if (static_cast<double>(now_ns - *last_delivery_ns_) < 1e9 / *options_.max_rate_hz) {
      waiting_ = true;  // The next offer asks again.
      return std::nullopt;
    }
  }
  if (options_.max_rate_hz.has_value()) last_delivery_ns_ = clock_->NowNanos();
  busy_ = true;
  return Delivery{.frame = std::exchange(pending_, nullptr),
                  .events = std::exchange(pending_events_, {}),
                  .skipped_frames = std::exchange(skipped_, 0)};
}

}  // namespace pitlane::session
