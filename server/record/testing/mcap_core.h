// Foxglove's own MCAP reader (@mcap/core) on a file, for tests: tests/web/mcap_read.mjs run by
// node, its JSON parsed (see that script for what it holds).
#ifndef PITLANE_SERVER_RECORD_TESTING_MCAP_CORE_H_
#define PITLANE_SERVER_RECORD_TESTING_MCAP_CORE_H_

#include <cstdio>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pitlane::record::testutil {

// `stream_only`: only the streaming reader, up to the first error (a file cut short).
inline nlohmann::json ReadWithMcapCore(const std::string& path, bool stream_only = false) {
  const std::string command =
      absl::StrCat("node ", PITLANE_SOURCE_DIR, "/tests/web/mcap_read.mjs ",
                   stream_only ? "--stream " : "", path, " 2>&1");
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  std::string out;
  char buffer[65536];
  for (std::size_t n; (n = fread(buffer, 1, sizeof(buffer), pipe.get())) > 0;) out.append(buffer, n);
  const nlohmann::json json = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(json.is_discarded()) << "the reader said: " << out.substr(0, 2000);
  return json;
}

}  // namespace pitlane::record::testutil

#endif  // PITLANE_SERVER_RECORD_TESTING_MCAP_CORE_H_
