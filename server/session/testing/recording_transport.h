// A test transport that takes every delivery at once and keeps it.
#ifndef PITLANE_SERVER_SESSION_TESTING_RECORDING_TRANSPORT_H_
#define PITLANE_SERVER_SESSION_TESTING_RECORDING_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/session/subscriber.h"

namespace pitlane::session::testutil {

class RecordingTransport final : public SubscriberTransport {
 public:
  // A subscriber for `session` whose deliveries this transport records, every frame the
  // decimation takes (a lossless subscriber with room for all of them) unless `options` says
  // otherwise.
  static std::pair<std::shared_ptr<RecordingTransport>, std::shared_ptr<Subscriber>> Make(
      const Clock& clock, SubscriberOptions options = {.kind = SubscriberOptions::Kind::kLossless,
                                                       .queue_capacity = 1 << 20}) {
    auto transport = std::make_shared<RecordingTransport>();
    auto subscriber = std::make_shared<Subscriber>(std::move(options), transport, &clock);
    absl::MutexLock lock(&transport->mu_);
    transport->subscriber_ = subscriber;
    return {transport, subscriber};
  }

  void OnReady() override {
    absl::MutexLock lock(&mu_);
    if (hold_) return;
    DrainLocked();
  }
  void OnClosed(const absl::Status& reason) override {
    absl::MutexLock lock(&mu_);
    closed_ = reason;
  }

  // Holds deliveries back (a slow reader) until Release.
  void Hold() {
    absl::MutexLock lock(&mu_);
    hold_ = true;
  }
  void Release() {
    absl::MutexLock lock(&mu_);
    hold_ = false;
    DrainLocked();
  }

  std::vector<Delivery> deliveries() const {
    absl::MutexLock lock(&mu_);
    return deliveries_;
  }
  std::vector<std::uint64_t> ticks() const {
    absl::MutexLock lock(&mu_);
    std::vector<std::uint64_t> ticks;
    for (const Delivery& delivery : deliveries_) ticks.push_back(delivery.frame->time.tick);
    return ticks;
  }
  std::shared_ptr<const Frame> frame(std::size_t i) const {
    absl::MutexLock lock(&mu_);
    return deliveries_.at(i).frame;
  }
  FrameEvents events(std::size_t i) const {
    absl::MutexLock lock(&mu_);
    return deliveries_.at(i).events;
  }
  std::uint64_t last_tick() const {
    absl::MutexLock lock(&mu_);
    return deliveries_.empty() ? 0 : deliveries_.back().frame->time.tick;
  }
  std::optional<absl::Status> closed() const {
    absl::MutexLock lock(&mu_);
    return closed_;
  }

 private:
  void DrainLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const std::shared_ptr<Subscriber> subscriber = subscriber_.lock();
    if (subscriber == nullptr) return;
    while (std::optional<Delivery> delivery = subscriber->Take()) {
      deliveries_.push_back(*std::move(delivery));
    }
  }

  mutable absl::Mutex mu_;
  // Weak: the subscriber owns its transport, and a strong pointer back would make a cycle
  // that LeakSanitizer reports.
  std::weak_ptr<Subscriber> subscriber_ ABSL_GUARDED_BY(mu_);
  std::vector<Delivery> deliveries_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::Status> closed_ ABSL_GUARDED_BY(mu_);
  bool hold_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace pitlane::session::testutil

#endif  // PITLANE_SERVER_SESSION_TESTING_RECORDING_TRANSPORT_H_
