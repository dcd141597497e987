// Monotonic time for pacing sessions, in nanoseconds. The simulation never reads it: it only
// decides *when* a paced session takes its next tick, never what the tick computes.
#ifndef PITLANE_SERVER_SESSION_CLOCK_H_
#define PITLANE_SERVER_SESSION_CLOCK_H_

#include <atomic>
#include <chrono>
#include <cstdint>

namespace pitlane::session {

class Clock {
 public:
  virtual ~Clock() = default;
  // Nanoseconds since an arbitrary epoch; never decreases.
  virtual std::int64_t NowNanos() const = 0;
};

// std::chrono::steady_clock.
class SteadyClock final : public Clock {
 public:
  std::int64_t NowNanos() const override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};

// A clock that moves only when told to: for tests of pacing without sleeps.
class FakeClock final : public Clock {
 public:
  std::int64_t NowNanos() const override { return now_ns_.load(); }
  void Advance(std::int64_t ns) { now_ns_ += ns; }
  void Set(std::int64_t ns) { now_ns_ = ns; }

 private:
  std::atomic<std::int64_t> now_ns_{0};
};

}  // namespace pitlane::session

#endif  // PITLANE_SERVER_SESSION_CLOCK_H_
