#include "server/util/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace pitlane::metrics {
namespace {

// A sample value as Prometheus reads it (Go's ParseFloat): integers exactly, others in the
// fewest significant digits that read back as the same double, and NaN, +Inf, -Inf spelled as
// it expects.
std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == std::floor(value) && std::abs(value) < 1e15) {
    return absl::StrCat(static_cast<std::int64_t>(value));
  }
  char text[32];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(text, sizeof(text), "%.*g", digits, value);
    if (std::strtod(text, nullptr) == value) break;
  }
  return text;
}

// A label value or HELP text with its backslashes, newlines (and, in labels, double quotes)
// escaped.
std::string Escape(const std::string& text, bool quotes) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quotes) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

// `{a="1",b="2"}` (nothing for no labels), with `extra` appended (a histogram's `le`).
std::string FormatLabels(const Labels& labels, const std::pair<std::string, std::string>* extra) {
  if (labels.empty() && extra == nullptr) return "";
  std::string out = "{";
  const auto add = [&](const std::pair<std::string, std::string>& label) {
    if (out.size() > 1) out += ",";
    absl::StrAppend(&out, label.first, "=\"", Escape(label.second, /*quotes=*/true), "\"");
  };
  for (const auto& label : labels) add(label);
  if (extra != nullptr) add(*extra);
  out += "}";
  return out;
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds_s)
    : upper_bounds_s_(std::move(upper_bounds_s)),
      buckets_(new std::atomic<std::uint64_t>[upper_bounds_s_.size() + 1]) {
  upper_bounds_ns_.reserve(upper_bounds_s_.size());
  for (const double bound_s : upper_bounds_s_) {
    upper_bounds_ns_.push_back(static_cast<std::int64_t>(std::llround(bound_s * 1e9)));
  }
  for (std::size_t i = 0; i <= upper_bounds_s_.size(); ++i) buckets_[i].store(0);
}

void Histogram::ObserveNanos(std::int64_t duration_ns) {
  // The first bucket whose bound holds the value (le: less than or equal), else +Inf.
  const std::size_t bucket =
      std::lower_bound(upper_bounds_ns_.begin(), upper_bounds_ns_.end(), duration_ns) -
      upper_bounds_ns_.begin();
  buckets_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_ns_.fetch_add(duration_ns, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::Read() const {
  Snapshot snapshot;
  snapshot.upper_bounds_s = upper_bounds_s_;
  std::uint64_t total = 0;
  for (std::size_t i = 0; i <= upper_bounds_s_.size(); ++i) {
    total += buckets_[i].load(std::memory_order_relaxed);
    snapshot.cumulative.push_back(total);
  }
  snapshot.sum_s = static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) * 1e-9;
  return snapshot;
}

Registry::Family& Registry::FamilyLocked(const std::string& name, const std::string& help,
                                         Type type) {
  for (Family& family : families_) {
    if (family.name != name) continue;
    if (family.type != type) {
      // Two kinds under one name would be a page Prometheus rejects: a bug in the caller.
      std::fprintf(stderr, "metrics: %s registered as two types\n", name.c_str());
      std::abort();
    }
    return family;
  }
  families_.push_back(Family{.name = name, .help = help, .type = type});
  return families_.back();
}

Counter* Registry::AddCounter(const std::string& name, const std::string& help, Labels labels) {
  absl::MutexLock lock(&mu_);
  Family& family = FamilyLocked(name, help, Type::kCounter);
  for (const auto& [existing, counter] : family.counters) {
    if (existing == labels) return counter;  // The same series: one counter.
  }
  Counter* counter = &counters_.emplace_back();
  family.counters.emplace_back(std::move(labels), counter);
  return counter;
}

Histogram* Registry::AddHistogram(const std::string& name, const std::string& help,
                                  std::vector<double> upper_bounds_s, Labels labels) {
  absl::MutexLock lock(&mu_);
  Family& family = FamilyLocked(name, help, Type::kHistogram);
  for (const auto& [existing, histogram] : family.histograms) {
    if (existing == labels) return histogram;
  }
  Histogram* histogram = &histograms_.emplace_back(std::move(upper_bounds_s));
  family.histograms.emplace_back(std::move(labels), histogram);
  return histogram;
}

void Registry::AddGauge(const std::string& name, const std::string& help,
                        std::function<std::vector<Sample>()> read) {
  AddGauges({{name, help}}, [read = std::move(read)] {
    return std::vector<std::vector<Sample>>{read()};
  });
}

void Registry::AddGauges(const std::vector<std::pair<std::string, std::string>>& families,
                         std::function<std::vector<std::vector<Sample>>()> read) {
  auto group = std::make_shared<const GaugeGroup>(GaugeGroup{std::move(read)});
  absl::MutexLock lock(&mu_);
  for (std::size_t i = 0; i < families.size(); ++i) {
    Family& family = FamilyLocked(families[i].first, families[i].second, Type::kGauge);
    family.gauges = group;
    family.gauge_index = i;
  }
}

std::string Registry::Render() const {
  std::vector<Family> families;
  {
    absl::MutexLock lock(&mu_);
    families.assign(families_.begin(), families_.end());
  }
  // Each gauge group read once for this page.
  std::vector<std::pair<const GaugeGroup*, std::vector<std::vector<Sample>>>> read;
  const auto samples_of = [&read](const Family& family) -> const std::vector<Sample>& {
    static const std::vector<Sample> kNone;
    auto it = std::find_if(read.begin(), read.end(),
                           [&](const auto& entry) { return entry.first == family.gauges.get(); });
    if (it == read.end()) {
      read.emplace_back(family.gauges.get(), family.gauges->read());
      it = read.end() - 1;
    }
    return family.gauge_index < it->second.size() ? it->second[family.gauge_index] : kNone;
  };
  std::string out;
  for (const Family& family : families) {
    const char* type = family.type == Type::kCounter   ? "counter"
                       : family.type == Type::kGauge   ? "gauge"
                                                       : "histogram";
    absl::StrAppend(&out, "# HELP ", family.name, " ", Escape(family.help, /*quotes=*/false),
                    "\n# TYPE ", family.name, " ", type, "\n");
    for (const auto& [labels, counter] : family.counters) {
      absl::StrAppend(&out, family.name, FormatLabels(labels, nullptr), " ", counter->value(),
                      "\n");
    }
    for (const auto& [labels, histogram] : family.histograms) {
      const Histogram::Snapshot snapshot = histogram->Read();
      for (std::size_t i = 0; i <= snapshot.upper_bounds_s.size(); ++i) {
        const std::pair<std::string, std::string> le{
            "le", i < snapshot.upper_bounds_s.size() ? FormatValue(snapshot.upper_bounds_s[i])
                                                     : "+Inf"};
        absl::StrAppend(&out, family.name, "_bucket", FormatLabels(labels, &le), " ",
                        snapshot.cumulative[i], "\n");
      }
      absl::StrAppend(&out, family.name, "_sum", FormatLabels(labels, nullptr), " ",
                      FormatValue(snapshot.sum_s), "\n", family.name, "_count",
                      FormatLabels(labels, nullptr), " ", snapshot.cumulative.back(), "\n");
    }
    if (family.gauges != nullptr) {
      for (const Sample& sample : samples_of(family)) {
        absl::StrAppend(&out, family.name, FormatLabels(sample.labels, nullptr), " ",
                        FormatValue(sample.value), "\n");
      }
    }
  }
  return out;
}

std::vector<double> DurationBuckets() {
  return {1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2,
          5e-2, 0.1,    0.25, 0.5,  1.0,    2.5,  5.0,  10.0};
}

}  // namespace pitlane::metrics
