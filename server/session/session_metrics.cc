#include "server/session/session_metrics.h"

namespace pitlane::session {

SessionMetrics SessionMetrics::Register(metrics::Registry& registry) {
  return {
      .ticks = registry.AddCounter("pitlane_ticks_total", "Ticks stepped, all sessions."),
      .tick_duration = registry.AddHistogram(
          "pitlane_tick_duration_seconds",
          "Time one tick of a session took to compute (the world's step), seconds.",
          metrics::DurationBuckets()),
      .missed_deadlines = registry.AddCounter(
          "pitlane_missed_deadlines_total",
          "REALTIME ticks that ran more than a tick period late, and those given up when a "
          "session fell too far behind."),
      .lateness = registry.AddHistogram(
          "pitlane_tick_lateness_seconds",
          "How late each REALTIME tick started after its due time, seconds.",
          metrics::DurationBuckets()),
      .barrier_timeouts = registry.AddCounter(
          "pitlane_barrier_timeouts_total",
          "BARRIER ticks that ran on their timeout, a controller not having answered."),
  };
}

}  // namespace pitlane::session
