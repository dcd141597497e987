#include "server/api/rpc_counts.h"

#include <array>
#include <string>

namespace pitlane::api {
namespace {

// gRPC's code names, as grpc::StatusCode numbers them (0 to 16).
constexpr std::array<const char*, 17> kCodeNames = {
    "OK",           "CANCELLED",          "UNKNOWN",      "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED", "NOT_FOUND",     "ALREADY_EXISTS", "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
    "UNIMPLEMENTED", "INTERNAL",          "UNAVAILABLE",  "DATA_LOSS",
    "UNAUTHENTICATED"};

}  // namespace

void RpcCounts::Count(absl::string_view method, grpc::StatusCode code) {
  if (registry_ == nullptr) return;
  const int number = static_cast<int>(code);
  if (number < 0 || number >= static_cast<int>(kCodeNames.size())) return;
  metrics::Counter* counter;
  {
    absl::MutexLock lock(&mu_);
    metrics::Counter*& slot = counters_[{method, number}];
    if (slot == nullptr) {
      slot = registry_->AddCounter("pitlane_rpcs_total",
                                   "Calls of the Simulator service answered, by method and code.",
                                   {{"method", std::string(method)}, {"code", kCodeNames[number]}});
    }
    counter = slot;
  }
  counter->Add();
}

}  // namespace pitlane::api
