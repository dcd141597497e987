// TSan builds only (tests/CMakeLists.txt links it into session_test and record_test when
// PITLANE_SANITIZE has "thread"): tells ThreadSanitizer about the locks of Debian's Abseil.
//
// Debian's libabsl_synchronization is not built with -fsanitize=thread, so TSan cannot see
// absl::Mutex lock and unlock, and reports every access guarded by one as a race (the first
// run of session_test under TSan: Scheduler::PushLocked against TakeDueLocked, both under the
// scheduler's mutex). These definitions interpose the library's (its own calls go through the
// PLT too), call the real function (dlsym RTLD_NEXT), and mark the happens-before edges:
// release on the mutex before it is given up (unlock, wait), acquire after it is taken (lock,
// try-lock that succeeded, end of a wait). What TSan then reports is a race our code has
// outside the locks. (What it no longer checks: lock-order inversions of absl::Mutex.)
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace {

// The library's definition of the symbol `mangled` (Abseil 20220623 in Debian's inline
// namespace debian3).
template <typename Function>
Function Real(const char* mangled) {
  void* const function = dlsym(RTLD_NEXT, mangled);
  if (function == nullptr) {
    std::fprintf(stderr, "tsan_absl_sync: %s not found in Abseil\n", mangled);
    std::abort();
  }
  return reinterpret_cast<Function>(function);
}

#define PITLANE_REAL(type, mangled) static const auto real = Real<type>(mangled)

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

void Mutex::Lock() {
  PITLANE_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex4LockEv");
  real(this);
  __tsan_acquire(this);
}

void Mutex::ReaderLock() {
  PITLANE_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex10ReaderLockEv");
  real(this);
  __tsan_acquire(this);
}

bool Mutex::TryLock() {
  PITLANE_REAL(bool (*)(Mutex*), "_ZN4absl7debian35Mutex7TryLockEv");
  const bool locked = real(this);
  if (locked) __tsan_acquire(this);
  return locked;
}

bool Mutex::ReaderTryLock() {
  PITLANE_REAL(bool (*)(Mutex*), "_ZN4absl7debian35Mutex13ReaderTryLockEv");
  const bool locked = real(this);
  if (locked) __tsan_acquire(this);
  return locked;
}

void Mutex::Unlock() {
  PITLANE_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex6UnlockEv");
  __tsan_release(this);
  real(this);
}

void Mutex::ReaderUnlock() {
  PITLANE_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex12ReaderUnlockEv");
  __tsan_release(this);
  real(this);
}

void Mutex::LockWhen(const Condition& condition) {
  PITLANE_REAL(void (*)(Mutex*, const Condition&),
               "_ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE");
  real(this, condition);
  __tsan_acquire(this);
}

bool Mutex::LockWhenWithTimeout(const Condition& condition, absl::Duration timeout) {
  PITLANE_REAL(bool (*)(Mutex*, const Condition&, absl::Duration),
               "_ZN4absl7debian35Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  const bool result = real(this, condition, timeout);
  __tsan_acquire(this);  // Held on return either way.
  return result;
}

void Mutex::Await(const Condition& condition) {
  PITLANE_REAL(void (*)(Mutex*, const Condition&), "_ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE");
  __tsan_release(this);
  real(this, condition);
  __tsan_acquire(this);
}

bool Mutex::AwaitWithTimeout(const Condition& condition, absl::Duration timeout) {
  PITLANE_REAL(bool (*)(Mutex*, const Condition&, absl::Duration),
               "_ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  __tsan_release(this);
  const bool result = real(this, condition, timeout);
  __tsan_acquire(this);
  return result;
}

void CondVar::Wait(Mutex* mu) {
  PITLANE_REAL(void (*)(CondVar*, Mutex*), "_ZN4absl7debian37CondVar4WaitEPNS0_5MutexE");
  __tsan_release(mu);
  real(this, mu);
  __tsan_acquire(mu);
}

bool CondVar::WaitWithTimeout(Mutex* mu, absl::Duration timeout) {
  PITLANE_REAL(bool (*)(CondVar*, Mutex*, absl::Duration),
               "_ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  __tsan_release(mu);
  const bool result = real(this, mu, timeout);
  __tsan_acquire(mu);
  return result;
}

ABSL_NAMESPACE_END
}  // namespace absl
