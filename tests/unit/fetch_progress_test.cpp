// DownloadProgress with a fake clock and writer: a terminal's line redrawn in place at most 4 times
// a second (bytes, size, rate, ETA); otherwise the same as a line every 20 s and one line per
// completed file.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fetch/progress.h"

using kiln::fetch::DownloadProgress;

namespace {

struct Fake {
  double now = 100;
  std::vector<std::string> writes;
  DownloadProgress make(bool terminal) {
    return DownloadProgress(
        terminal, [this] { return now; },
        [this](std::string_view text) { writes.emplace_back(text); });
  }
};

}  // namespace

TEST(DownloadProgress, FormatsBytesAndSeconds) {
  EXPECT_EQ(DownloadProgress::format_bytes(17), "17 B");
  EXPECT_EQ(DownloadProgress::format_bytes(1200), "1.2 kB");
  EXPECT_EQ(DownloadProgress::format_bytes(912300000), "912.3 MB");
  EXPECT_EQ(DownloadProgress::format_bytes(999990000), "1.0 GB");
  EXPECT_EQ(kiln::format_seconds(41.2), "41 s");
  EXPECT_EQ(kiln::format_seconds(185), "3 min 05 s");
  EXPECT_EQ(kiln::format_seconds(3720), "1 h 02 min");
  EXPECT_EQ(kiln::format_seconds(-1), "?");
}

TEST(DownloadProgress, TerminalRedrawsInPlaceAtMostFourTimesASecond) {
  Fake f;
  auto p = f.make(true);
  p.start("torch.whl", 1000000000, 0);
  for (int i = 1; i <= 100; ++i) {  // 100 updates in one second
    f.now += 0.01;
    p.update(static_cast<std::uint64_t>(i) * 1000000, 0);
  }
  ASSERT_GE(f.writes.size(), 3u);
  ASSERT_LE(f.writes.size(), 5u);
  for (const auto& w : f.writes) {
    EXPECT_EQ(w.rfind("\r\x1b[K", 0), 0u) << w;
    EXPECT_EQ(w.find('\n'), std::string::npos) << w;
  }
  // After 0.25 s: 25 MB of 1 GB at 100 MB/s, about 10 s left.
  EXPECT_NE(f.writes[1].find(" MB / 1.0 GB  100.0 MB/s  ETA 10 s"), std::string::npos)
      << f.writes[1];
  f.writes.clear();
  f.now += 1;
  p.done(1000000000);
  ASSERT_EQ(f.writes.size(), 2u);
  EXPECT_EQ(f.writes[0], "\r\x1b[K");
  EXPECT_EQ(f.writes[1], "kiln: fetched torch.whl 1.0 GB in 2 s\n");
}

// A log: a line of its own after 20 s without one (never silent for minutes on a slow link),
// and one per completed file.
TEST(DownloadProgress, ElsewhereALineEvery20SecondsAndOnePerCompletedFile) {
  Fake f;
  auto p = f.make(false);
  p.start("torch-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl", 0, 0);
  for (int i = 1; i <= 41; ++i) {
    f.now += 1;
    p.update(static_cast<std::uint64_t>(i) * 22251000, 912300000);
  }
  p.clear();
  ASSERT_EQ(f.writes.size(), 2u);
  EXPECT_EQ(f.writes[0],
            "kiln: fetching torch-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl  445.0 MB / "
            "912.3 MB  22.3 MB/s  ETA 21 s\n");
  EXPECT_EQ(f.writes[1].rfind("kiln: fetching torch-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl  "
                              "890.0 MB / 912.3 MB",
                              0),
            0u)
      << f.writes[1];
  f.writes.clear();
  p.done(912300000);
  ASSERT_EQ(f.writes.size(), 1u);
  EXPECT_EQ(f.writes[0],
            "kiln: fetched torch-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl 912.3 MB in 41 s\n");
}

TEST(DownloadProgress, AResumedTransferCountsWhatItHad) {
  Fake f;
  auto p = f.make(true);
  // A control character or a byte of no UTF-8 character in a name is not sent to the terminal.
  p.start("a\x1b[2Jb\x9b.whl", 0, 500);
  f.now += 1;
  p.update(500, 500);  // the answer announces the rest
  ASSERT_EQ(f.writes.size(), 1u);
  EXPECT_NE(f.writes[0].find("a\\x1b[2Jb\\x9b.whl  1.0 kB / 1.0 kB  500 B/s"), std::string::npos)
      << f.writes[0];
}
