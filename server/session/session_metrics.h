// What the sessions count for the server's metrics (/metrics): ticks, their duration, missed
// deadlines and barrier timeouts, added to by every session of a SessionManager.
#ifndef PITLANE_SERVER_SESSION_SESSION_METRICS_H_
#define PITLANE_SERVER_SESSION_SESSION_METRICS_H_

#include "server/util/metrics.h"

namespace pitlane::session {

struct SessionMetrics {
  metrics::Counter* ticks = nullptr;              // Every tick of every session.
  metrics::Histogram* tick_duration = nullptr;    // What World::Step took, per tick.
  metrics::Counter* missed_deadlines = nullptr;   // REALTIME ticks late by over a period.
  metrics::Histogram* lateness = nullptr;         // How late each REALTIME tick started.
  metrics::Counter* barrier_timeouts = nullptr;   // BARRIER ticks that waited their timeout.

  // The counters above, made in `registry` (pitlane_ticks_total, ...).
  static SessionMetrics Register(metrics::Registry& registry);
};

}  // namespace pitlane::session

#endif  // PITLANE_SERVER_SESSION_SESSION_METRICS_H_
