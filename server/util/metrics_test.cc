#include "server/util/metrics.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pitlane::metrics {
namespace {

TEST(Registry, RendersCountersGaugesAndHistogramsInTheTextFormat) {
  Registry registry;
  Counter* ok = registry.AddCounter("rpcs_total", "Calls answered.", {{"method", "Step"},
                                                                       {"code", "OK"}});
  Counter* denied = registry.AddCounter("rpcs_total", "Calls answered.",
                                        {{"method", "Step"}, {"code", "PERMISSION_DENIED"}});
  Histogram* ticks = registry.AddHistogram("tick_seconds", "Tick duration.", {0.001, 0.01});
  registry.AddGauge("sessions", "Open sessions.\nA second line \\ here.", [] {
    return std::vector<Sample>{{.labels = {{"mode", "a \"quoted\"\nname"}}, .value = 3.0},
                               {.labels = {}, .value = 0.5}};
  });
  ok->Add(2);
  denied->Add();
  ticks->ObserveNanos(1'000'000);   // Exactly the first bound: in it (le).
  ticks->ObserveNanos(1'000'001);   // Just above: in the second.
  ticks->ObserveNanos(20'000'000);  // Above every bound: +Inf only.
  EXPECT_EQ(registry.Render(),
            "# HELP rpcs_total Calls answered.\n"
            "# TYPE rpcs_total counter\n"
            "rpcs_total{method=\"Step\",code=\"OK\"} 2\n"
            "rpcs_total{method=\"Step\",code=\"PERMISSION_DENIED\"} 1\n"
            "# HELP tick_seconds Tick duration.\n"
            "# TYPE tick_seconds histogram\n"
            "tick_seconds_bucket{le=\"0.001\"} 1\n"
            "tick_seconds_bucket{le=\"0.01\"} 2\n"
            "tick_seconds_bucket{le=\"+Inf\"} 3\n"
            "tick_seconds_sum 0.022000001\n"
            "tick_seconds_count 3\n"
            "# HELP sessions Open sessions.\\nA second line \\\\ here.\n"
            "# TYPE sessions gauge\n"
            "sessions{mode=\"a \\\"quoted\\\"\\nname\"} 3\n"
            "sessions 0.5\n");
}

TEST(Registry, OneSeriesPerNameAndLabelsAndGroupsReadOncePerPage) {
  Registry registry;
  Counter* first = registry.AddCounter("calls_total", "Calls.", {{"method", "Step"}});
  EXPECT_EQ(registry.AddCounter("calls_total", "Calls.", {{"method", "Step"}}), first);
  EXPECT_NE(registry.AddCounter("calls_total", "Calls.", {{"method", "Drive"}}), first);
  int reads = 0;
  registry.AddGauges({{"a", "A."}, {"b", "B."}}, [&reads] {
    ++reads;
    return std::vector<std::vector<Sample>>{{{.value = 1}}, {{.value = 2}}};
  });
  const std::string page = registry.Render();
  EXPECT_EQ(reads, 1);
  EXPECT_NE(page.find("# TYPE a gauge\na 1\n# HELP b B.\n# TYPE b gauge\nb 2\n"),
            std::string::npos)
      << page;
}

TEST(Registry, DurationBucketsIncrease) {
  const std::vector<double> bounds = DurationBuckets();
  for (std::size_t i = 1; i < bounds.size(); ++i) EXPECT_LT(bounds[i - 1], bounds[i]);
}

}  // namespace
}  // namespace pitlane::metrics
