// Process statistics: the /proc/self/stat parser on a crafted line (a command
// name with spaces and parentheses), and a live read that must be plausible
// and must see a descriptor this test opens.
#include "metrics/process_stats.h"

#include <fcntl.h>
#include <unistd.h>

#include <ctime>

#include <gtest/gtest.h>

namespace furrballs::metrics {
namespace {

TEST(ParseProcStatTest, CountsFieldsFromTheLastParenthesis) {
  // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt
  // cmajflt utime stime cutime cstime priority nice threads itrealvalue
  // starttime vsize rss ...
  const std::string stat =
      "4242 (furr) (balls) 1) S 1 4242 4242 0 -1 4194560 100 0 0 0 "
      "250 50 0 0 20 0 7 0 1000 123456789 300 18446744073709551615 1 1 0";
  ProcessStats s;
  ASSERT_TRUE(ParseProcStat(stat, /*boot_time_seconds=*/1'700'000'000,
                            /*clock_ticks_per_second=*/100,
                            /*page_bytes=*/4096, &s)
                  .ok());
  EXPECT_DOUBLE_EQ(s.cpu_seconds, 3.0);  // (250 + 50) / 100
  EXPECT_DOUBLE_EQ(s.start_time_seconds, 1'700'000'010.0);  // + 1000 / 100
  EXPECT_EQ(s.virtual_bytes, 123456789u);
  EXPECT_EQ(s.resident_bytes, 300u * 4096);
}

TEST(ParseProcStatTest, RejectsTruncatedInput) {
  ProcessStats s;
  EXPECT_FALSE(ParseProcStat("4242 (x) S 1 2 3", 0, 100, 4096, &s).ok());
  EXPECT_FALSE(ParseProcStat("no parenthesis", 0, 100, 4096, &s).ok());
}

TEST(ReadProcessStatsTest, LiveValuesArePlausible) {
  absl::StatusOr<ProcessStats> before = ReadProcessStats();
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_GT(before->resident_bytes, 0u);
  EXPECT_GE(before->virtual_bytes, before->resident_bytes);
  EXPECT_GE(before->open_fds, 3u);  // stdin, stdout, stderr at least
  EXPECT_GE(before->max_fds, before->open_fds);
  EXPECT_GE(before->cpu_seconds, 0.0);
  EXPECT_GT(before->start_time_seconds, 0.0);
  EXPECT_LE(before->start_time_seconds, static_cast<double>(std::time(nullptr)) + 1);

  const int fd = open("/proc/self/stat", O_RDONLY);
  ASSERT_GE(fd, 0);
  absl::StatusOr<ProcessStats> after = ReadProcessStats();
  close(fd);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->open_fds, before->open_fds + 1);
  EXPECT_DOUBLE_EQ(after->start_time_seconds, before->start_time_seconds);
}

}  // namespace
}  // namespace furrballs::metrics
