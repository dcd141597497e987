// Calls answered, by method and status code, for the server's metrics:
// pitlane_rpcs_total{method="Step",code="OK"}. A series is made the first time its pair is
// counted; methods are the service's own (fixed by the code) and codes gRPC's 17, so the
// series stay bounded whatever clients send.
#ifndef PITLANE_SERVER_API_RPC_COUNTS_H_
#define PITLANE_SERVER_API_RPC_COUNTS_H_

#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/support/status.h"
#include "server/util/metrics.h"

namespace pitlane::api {

// Thread-safe.
class RpcCounts {
 public:
  // `registry` may be null (nothing is counted); it must outlive this.
  explicit RpcCounts(metrics::Registry* registry) : registry_(registry) {}

  // One call of `method` ended with `code`. `method` is one of the service's method names, in
  // storage that lasts as long as this object (a literal, e.g. "Step").
  void Count(absl::string_view method, grpc::StatusCode code);

 private:
  metrics::Registry* const registry_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::pair<absl::string_view, int>, metrics::Counter*> counters_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace pitlane::api

#endif  // PITLANE_SERVER_API_RPC_COUNTS_H_
