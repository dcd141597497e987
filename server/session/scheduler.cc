#include "server/session/scheduler.h"

#include <limits>
#include <utility>

#include "absl/time/time.h"

namespace pitlane::session {
namespace {

// An idle worker's wake-up time when the queue is empty.
constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();

}  // namespace

Scheduler::Scheduler(const Clock* clock, int threads) : clock_(clock) {
  workers_.reserve(threads);
  for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

Scheduler::~Scheduler() { Stop(); }

void Scheduler::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    wake_.SignalAll();
  }
  for (std::thread& worker : workers_) {
    if (worker.joinable()) worker.join();
  }
}

void Scheduler::PushLocked(Slot& slot, const ScheduledJob* job, std::int64_t when_ns) {
  slot.generation = next_generation_++;
  queue_.push(Entry{when_ns, slot.generation, job});
  // Rescheduling leaves the old entry behind (skipped when it surfaces); when they outnumber
  // the live ones, rebuild the queue from the live entries so memory stays bounded.
  if (queue_.size() > 2 * slots_.size() + 64) {
    std::vector<Entry> live;
    live.reserve(slots_.size());
    while (!queue_.empty()) {
      const Entry entry = queue_.top();
      queue_.pop();
      const auto it = slots_.find(entry.job);
      if (it != slots_.end() && it->second.generation == entry.generation) live.push_back(entry);
    }
    queue_ = decltype(queue_)(std::greater<Entry>(), std::move(live));
  }
  WakeIfLateLocked();
}

void Scheduler::WakeIfLateLocked() {
  if (!sleeping_until_ns_.empty() && !queue_.empty() &&
      queue_.top().when_ns < *sleeping_until_ns_.begin()) {
    wake_.Signal();
  }
}

void Scheduler::Schedule(std::shared_ptr<ScheduledJob> job, std::int64_t when_ns) {
  absl::MutexLock lock(&mu_);
  const ScheduledJob* key = job.get();
  Slot& slot = slots_[key];
  slot.job = std::move(job);
  slot.cancelled = false;
  if (slot.running) {
    slot.rerun_at = slot.rerun_at.has_value() ? std::min(*slot.rerun_at, when_ns) : when_ns;
    return;
  }
  PushLocked(slot, key, when_ns);
}

void Scheduler::Cancel(const ScheduledJob* job) {
  absl::MutexLock lock(&mu_);
  const auto it = slots_.find(job);
  if (it == slots_.end()) return;
  if (it->second.running) {
    it->second.cancelled = true;
    it->second.rerun_at.reset();
    return;
  }
  slots_.erase(it);  // Its queue entries are stale from now on.
}

void Scheduler::CancelAndWait(const ScheduledJob* job) {
  absl::MutexLock lock(&mu_);
  for (;;) {
    const auto it = slots_.find(job);
    if (it == slots_.end()) return;
    if (!it->second.running) {
      slots_.erase(it);
      return;
    }
    if (it->second.runner == std::this_thread::get_id()) {  // From within its own run.
      it->second.cancelled = true;
      it->second.rerun_at.reset();
      return;
    }
    it->second.cancelled = true;
    it->second.rerun_at.reset();
    run_ended_.Wait(&mu_);
  }
}

std::size_t Scheduler::size() const {
  absl::MutexLock lock(&mu_);
  return slots_.size();
}

std::shared_ptr<ScheduledJob> Scheduler::TakeDueLocked(std::int64_t now_ns) {
  while (!queue_.empty()) {
    const Entry top = queue_.top();
    const auto it = slots_.find(top.job);
    if (it == slots_.end() || it->second.generation != top.generation || it->second.running) {
      queue_.pop();  // Stale.
      continue;
    }
    if (top.when_ns > now_ns) return nullptr;
    queue_.pop();
    it->second.running = true;
    it->second.runner = std::this_thread::get_id();
    return it->second.job;
  }
  return nullptr;
}

void Scheduler::RunOne(std::shared_ptr<ScheduledJob> job) {
  const std::optional<std::int64_t> next = job->RunScheduled(clock_->NowNanos());
  Requeue(job.get(), next);
  // The job may already run again on another worker: what is left of this run does not hold
  // its next one up.
  job->AfterRun();
}

void Scheduler::Requeue(const ScheduledJob* job, std::optional<std::int64_t> next) {
  absl::MutexLock lock(&mu_);
  const auto it = slots_.find(job);
  if (it == slots_.end()) {
    run_ended_.SignalAll();
    return;
  }
  Slot& slot = it->second;
  slot.running = false;
  run_ended_.SignalAll();
  if (slot.cancelled) {
    slots_.erase(it);
    return;
  }
  std::optional<std::int64_t> when = next;
  if (slot.rerun_at.has_value()) {
    when = when.has_value() ? std::min(*when, *slot.rerun_at) : *slot.rerun_at;
    slot.rerun_at.reset();
  }
  if (!when.has_value()) {
    slots_.erase(it);
    return;
  }
  PushLocked(slot, job, *when);
}

int Scheduler::RunDue(int max_runs) {
  int runs = 0;
  while (runs < max_runs) {
    std::shared_ptr<ScheduledJob> job;
    {
      absl::MutexLock lock(&mu_);
      job = TakeDueLocked(clock_->NowNanos());
    }
    if (job == nullptr) break;
    RunOne(std::move(job));
    ++runs;
  }
  return runs;
}

void Scheduler::WorkerLoop() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    const std::int64_t now_ns = clock_->NowNanos();
    std::shared_ptr<ScheduledJob> job = TakeDueLocked(now_ns);
    if (job != nullptr) {
      // Busy from now on: an idle one must wait for what is next, not for what it waited for.
      WakeIfLateLocked();
      mu_.Unlock();
      RunOne(std::move(job));
      mu_.Lock();
      continue;
    }
    const std::int64_t until_ns = queue_.empty() ? kNever : queue_.top().when_ns;
    const auto sleeping = sleeping_until_ns_.insert(until_ns);
    if (queue_.empty()) {
      wake_.Wait(&mu_);
    } else {
      wake_.WaitWithTimeout(&mu_, absl::Nanoseconds(until_ns - now_ns));
    }
    sleeping_until_ns_.erase(sleeping);
  }
}

}  // namespace pitlane::session
