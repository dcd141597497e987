// Metrics for Prometheus (the web endpoint's /metrics): counters and histograms that any thread
// updates with one relaxed atomic add, and gauges read when scraped, rendered in Prometheus's
// text exposition format (version 0.0.4). Label sets are fixed when a series is made, so their
// number is bounded by the code, never by what clients send.
//
//   metrics::Registry registry;
//   metrics::Counter* ticks = registry.AddCounter("pitlane_ticks_total", "Ticks stepped.");
//   ticks->Add();
//   registry.AddGauge("pitlane_sessions", "Open sessions.",
//                     [&] { return std::vector<metrics::Sample>{{{}, double(n)}}; });
//   std::string page = registry.Render();
#ifndef PITLANE_SERVER_UTIL_METRICS_H_
#define PITLANE_SERVER_UTIL_METRICS_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace pitlane::metrics {

// A series' labels, name and value, in the order rendered. Names match [a-zA-Z_][a-zA-Z0-9_]*;
// values are any text (escaped when rendered).
using Labels = std::vector<std::pair<std::string, std::string>>;

// A monotonic count. Thread-safe.
class Counter {
 public:
  void Add(std::uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  std::uint64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> value_{0};
};

// Durations in buckets with fixed upper bounds (seconds, increasing); the sum is kept in
// nanoseconds, exactly. Thread-safe.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds_s);

  void ObserveNanos(std::int64_t duration_ns);

  struct Snapshot {
    std::vector<double> upper_bounds_s;
    std::vector<std::uint64_t> cumulative;  // Per bound, then +Inf (= count).
    double sum_s = 0.0;
  };
  // Not atomic: a scrape during updates may see an observation in its bucket (and the count,
  // their sum) before it is in the sum, which Prometheus tolerates.
  Snapshot Read() const;

 private:
  const std::vector<double> upper_bounds_s_;
  std::vector<std::int64_t> upper_bounds_ns_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> buckets_;  // Per bound, then +Inf.
  std::atomic<std::int64_t> sum_ns_{0};
};

// One value of a gauge.
struct Sample {
  Labels labels;
  double value = 0.0;
};

// The metrics of a process, rendered for a scrape. Adding is done at set-up (it takes a lock);
// the pointers returned stay valid as long as the registry. Thread-safe.
class Registry {
 public:
  // A counter of the family `name` (which ends in _total) with these labels.
  Counter* AddCounter(const std::string& name, const std::string& help, Labels labels = {});
  // A histogram of the family `name` (in seconds).
  Histogram* AddHistogram(const std::string& name, const std::string& help,
                          std::vector<double> upper_bounds_s, Labels labels = {});
  // A gauge whose samples `read` returns at each scrape (called with no lock of the registry
  // held; it must be thread-safe). One `read` per family.
  void AddGauge(const std::string& name, const std::string& help,
                std::function<std::vector<Sample>()> read);
  // Gauges read together, once per scrape, so that they agree with each other: `read` returns
  // the samples of each family of `families` ({name, help}), in that order.
  void AddGauges(const std::vector<std::pair<std::string, std::string>>& families,
                 std::function<std::vector<std::vector<Sample>>()> read);

  // Every family, in the order first added: # HELP, # TYPE, then its series.
  std::string Render() const;

 private:
  enum class Type { kCounter, kGauge, kHistogram };
  // Gauge families read by one call.
  struct GaugeGroup {
    std::function<std::vector<std::vector<Sample>>()> read;
  };
  struct Family {
    std::string name;
    std::string help;
    Type type;
    std::vector<std::pair<Labels, Counter*>> counters;
    std::vector<std::pair<Labels, Histogram*>> histograms;
    std::shared_ptr<const GaugeGroup> gauges;  // Its samples are gauges->read()[gauge_index].
    std::size_t gauge_index = 0;
  };
  Family& FamilyLocked(const std::string& name, const std::string& help, Type type)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::deque<Family> families_ ABSL_GUARDED_BY(mu_);
  std::deque<Counter> counters_ ABSL_GUARDED_BY(mu_);      // Stable addresses.
  std::deque<Histogram> histograms_ ABSL_GUARDED_BY(mu_);  // Stable addresses.
};

// The buckets the server's duration histograms use: 10 µs to 10 s.
std::vector<double> DurationBuckets();

}  // namespace pitlane::metrics

#endif  // PITLANE_SERVER_UTIL_METRICS_H_
