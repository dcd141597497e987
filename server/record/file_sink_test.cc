// FileSink on real files: what it writes, and how it fails (an existing file, no directory, a
// file size limit as a full disk shows itself).
#include "server/record/file_sink.h"

#include <signal.h>
#include <sys/resource.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/util/status_matchers.h"

namespace pitlane::record {
namespace {

using ::testing::HasSubstr;

std::string TempDir() {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "file_sink";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

std::string Contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(FileSinkTest, WritesInOrderAndNeverOverwrites) {
  const std::string path = TempDir() + "/a.mcap";
  auto sink = FileSink::Create(path);
  ASSERT_TRUE(sink.ok()) << sink.status();
  std::string expected;
  for (int i = 0; i < 1000; ++i) {
    const std::string piece = absl::StrCat(i, std::string(i % 97, 'x'), "\n");
    ASSERT_TRUE((*sink)->Write(piece).ok());
    expected += piece;
  }
  ASSERT_TRUE((*sink)->Close().ok());
  EXPECT_EQ(Contents(path), expected);
  EXPECT_THAT((*sink)->Write("more"), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(FileSink::Create(path).status(),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr(path)));
  EXPECT_EQ(Contents(path), expected);  // Untouched.
  EXPECT_THAT(FileSink::Create(TempDir() + "/no/such/dir/b.mcap").status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("no/such/dir/b.mcap")));
}

TEST(FileSinkTest, AFileSizeLimitIsResourceExhaustedAndKeepsWhatWasWritten) {
  // A limit on file size fails writes past it with EFBIG (SIGXFSZ ignored), as a full disk
  // fails them with ENOSPC: both RESOURCE_EXHAUSTED.
  struct sigaction ignore {}, before {};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(sigaction(SIGXFSZ, &ignore, &before), 0);
  rlimit limit{}, saved{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
  limit = saved;
  limit.rlim_cur = 4096;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &limit), 0);
  const std::string path = TempDir() + "/full.mcap";
  auto sink = FileSink::Create(path);
  ASSERT_TRUE(sink.ok()) << sink.status();
  absl::Status status;
  int written = 0;
  for (; written < 100 && status.ok(); ++written) status = (*sink)->Write(std::string(1000, 'x'));
  setrlimit(RLIMIT_FSIZE, &saved);
  sigaction(SIGXFSZ, &before, nullptr);
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr(path)));
  EXPECT_THAT((*sink)->Write("x"), StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT((*sink)->Close(), StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(Contents(path).size(), 4096u);  // Four whole writes, then the part that fit.
  EXPECT_EQ(written, 5);
}

}  // namespace
}  // namespace pitlane::record
