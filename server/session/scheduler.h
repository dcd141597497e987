// Runs paced work on a fixed pool of worker threads: each job says when it next wants to run.
//
// Sessions in REALTIME (and, later, BARRIER) mode are jobs: at each run they take the tick
// that is due and return the time of the next one. Jobs wait in one queue ordered by due
// time, so a pool of a few threads serves hundreds of sessions, earliest deadline first, and a
// job never runs on two threads at once (a job rescheduled while it runs is run again after).
// With zero threads nothing runs on its own: the owner calls RunDue() — how tests drive a
// FakeClock without sleeping.
#ifndef PITLANE_SERVER_SESSION_SCHEDULER_H_
#define PITLANE_SERVER_SESSION_SCHEDULER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <queue>
#include <set>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "server/session/clock.h"

namespace pitlane::session {

// Something the scheduler runs.
class ScheduledJob {
 public:
  virtual ~ScheduledJob() = default;
  // Does the work due at `now_ns`; returns when to run next (may be <= now_ns: as soon as
  // the jobs due earlier have run), or nullopt to leave the queue.
  virtual std::optional<std::int64_t> RunScheduled(std::int64_t now_ns) = 0;
  // Called on the same thread after each RunScheduled, once the job is queued again: it may
  // already be running again on another worker. For the part of a run that must not delay
  // the next one (telling subscribers, finishing calls). Must be thread-safe.
  virtual void AfterRun() {}
};

class Scheduler {
 public:
  // `clock` must outlive the scheduler. `threads` workers; 0 for manual RunDue().
  Scheduler(const Clock* clock, int threads);
  ~Scheduler();  // Stop().
  // Stops the workers after the runs in progress; nothing runs on its own after. Idempotent.
  void Stop();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  const Clock& clock() const { return *clock_; }

  // Runs `job` at `when_ns` (replacing any earlier schedule of it). The scheduler keeps the
  // job alive until it runs or is cancelled.
  void Schedule(std::shared_ptr<ScheduledJob> job, std::int64_t when_ns);
  // Takes `job` out of the queue; a run in progress finishes but is not rescheduled.
  void Cancel(const ScheduledJob* job);
  // Cancel, then waits for a run of `job` in progress on another thread to end: after it
  // returns the scheduler no longer touches the job. Must not be called with a lock that
  // the job's run takes.
  void CancelAndWait(const ScheduledJob* job);
  // Manual mode: runs the jobs due now, earliest first, at most `max_runs` of them (a job
  // that asks to run again at once counts once per run). Returns how many ran.
  int RunDue(int max_runs = 1 << 30);
  // Jobs queued or running.
  std::size_t size() const;

 private:
  struct Entry {
    std::int64_t when_ns;
    std::uint64_t generation;  // Entries of an older generation are stale: skipped.
    const ScheduledJob* job;
    bool operator>(const Entry& other) const {
      if (when_ns != other.when_ns) return when_ns > other.when_ns;
      return generation > other.generation;
    }
  };
  struct Slot {
    std::shared_ptr<ScheduledJob> job;
    std::uint64_t generation = 0;
    bool running = false;
    std::optional<std::int64_t> rerun_at;  // Scheduled while running.
    bool cancelled = false;
    std::thread::id runner;  // The thread running it, while running.
  };

  void WorkerLoop();
  // Pops the earliest live entry due at `now_ns` and marks it running; null if none.
  std::shared_ptr<ScheduledJob> TakeDueLocked(std::int64_t now_ns)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RunOne(std::shared_ptr<ScheduledJob> job);
  // Marks a run of `job` ended and queues it again at `next` (or at an earlier time asked for
  // meanwhile); drops it if it was cancelled or asks for nothing.
  void Requeue(const ScheduledJob* job, std::optional<std::int64_t> next);
  void PushLocked(Slot& slot, const ScheduledJob* job, std::int64_t when_ns)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Clock* const clock_;
  // Wakes one idle worker if the earliest entry is due before every idle worker would wake by
  // itself: so an idle worker always waits for at most the earliest entry, without a wake-up
  // for every entry pushed behind it (a paced session pushes one every tick).
  void WakeIfLateLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  absl::CondVar wake_;
  absl::CondVar run_ended_;  // Signalled whenever a run ends.
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::uint64_t next_generation_ ABSL_GUARDED_BY(mu_) = 1;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue_ ABSL_GUARDED_BY(mu_);
  // When each idle worker wakes by itself (kNever: only when signalled). Kept so that a worker
  // is woken only when the queue needs one sooner than that (WakeIfLateLocked).
  std::multiset<std::int64_t> sleeping_until_ns_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<const ScheduledJob*, Slot> slots_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> workers_;
};

}  // namespace pitlane::session

#endif  // PITLANE_SERVER_SESSION_SCHEDULER_H_
