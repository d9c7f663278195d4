#include "segments.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace ktesio::daemon::shim {
namespace {

namespace fs = std::filesystem;
using Seqs = std::vector<std::uint64_t>;

class TempDir {
 public:
  TempDir() {
    std::string templ = (fs::temp_directory_path() / "shim-seg-XXXXXX").string();
    path_ = mkdtemp(templ.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// `count` records of exactly `size` bytes each ("rNNNN xxx...\n").
std::string Records(int count, std::size_t size, int first = 0) {
  std::string out;
  for (int i = first; i < first + count; ++i) {
    // Appends rather than operator+ chains, which trip GCC 12's -Wrestrict false positive at -O3.
    std::string r = "r";
    r += std::to_string(i);
    r += ' ';
    r.resize(size - 1, 'x');
    r += '\n';
    out += r;
  }
  return out;
}

TEST(SegmentNameTest, IsZeroPaddedToEightDigits) {
  EXPECT_EQ(SegmentFileName(1), "output-00000001.log");
  EXPECT_EQ(SegmentFileName(12345678), "output-12345678.log");
  EXPECT_EQ(SegmentFileName(123456789), "output-123456789.log");
}

TEST(SegmentNameTest, ParsesOnlySegmentNames) {
  EXPECT_EQ(ParseSegmentFileName("output-00000001.log"), 1u);
  EXPECT_EQ(ParseSegmentFileName("output-00000042.log"), 42u);
  EXPECT_EQ(ParseSegmentFileName("output-123456789.log"), 123456789u);
  EXPECT_EQ(ParseSegmentFileName(SegmentFileName(77)), 77u);
  for (const char* bad :
       {"output-1.log", "output-0000000x.log", "output-00000001.log.tmp", "output-00000000.log",
        "xoutput-00000001.log", "output-.log", "exit", "output-+0000001.log"}) {
    EXPECT_EQ(ParseSegmentFileName(bad), std::nullopt) << bad;
  }
}

TEST(RetentionTest, KeepsTheNewestRotatedSegments) {
  EXPECT_EQ(SegmentsToDelete({1, 2, 3, 4, 5, 6}, 6, 3), (Seqs{1, 2}));
  EXPECT_EQ(SegmentsToDelete({6, 1, 5, 2, 4, 3}, 6, 3), (Seqs{1, 2}));
  EXPECT_EQ(SegmentsToDelete({4, 5, 6}, 6, 3), Seqs{});
  EXPECT_EQ(SegmentsToDelete({6}, 6, 1), Seqs{});
  EXPECT_EQ(SegmentsToDelete({2, 9, 10}, 10, 1), (Seqs{2}));
  // Never touches the current segment, nor anything numbered above it.
  EXPECT_EQ(SegmentsToDelete({1, 2, 3, 7, 8}, 3, 1), (Seqs{1}));
}

TEST(SplitPointTest, CutsAfterTheRecordThatReachesTheLimit) {
  std::string recs = Records(4, 10);  // 40 bytes.
  EXPECT_EQ(SplitPoint(recs, 0, 100), 40u);
  EXPECT_EQ(SplitPoint(recs, 60, 100), 40u);
  EXPECT_EQ(SplitPoint(recs, 61, 100), 40u);  // The last record reaches 101.
  EXPECT_EQ(SplitPoint(recs, 70, 100), 30u);  // Exactly 100 after three records.
  EXPECT_EQ(SplitPoint(recs, 71, 100), 30u);
  EXPECT_EQ(SplitPoint(recs, 99, 100), 10u);
  EXPECT_EQ(SplitPoint(recs, 100, 100), 0u);
  EXPECT_EQ(SplitPoint(recs, 150, 100), 0u);
}

TEST(SegmentLogTest, CreatesTheFirstSegmentWithMode0600) {
  TempDir dir;
  SegmentLog log(dir.path(), 4096, 3);
  std::string error;
  ASSERT_TRUE(log.Open(&error)) << error;
  EXPECT_EQ(log.sequence(), 1u);
  ASSERT_TRUE(log.Append("a\n", Never()));
  std::string path = dir.path() + "/output-00000001.log";
  EXPECT_EQ(Slurp(path), "a\n");
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(SegmentLogTest, ContinuesTheHighestExistingSegment) {
  TempDir dir;
  std::ofstream(dir.path() + "/output-00000003.log") << "old3\n";
  std::ofstream(dir.path() + "/output-00000007.log") << "old7\n";
  std::ofstream(dir.path() + "/unrelated.txt") << "x";
  SegmentLog log(dir.path(), 4096, 3);
  std::string error;
  ASSERT_TRUE(log.Open(&error)) << error;
  EXPECT_EQ(log.sequence(), 7u);
  EXPECT_EQ(log.size(), 5u);
  ASSERT_TRUE(log.Append("new\n", Never()));
  EXPECT_EQ(Slurp(dir.path() + "/output-00000007.log"), "old7\nnew\n");
  EXPECT_EQ(Slurp(dir.path() + "/output-00000003.log"), "old3\n");
}

TEST(SegmentLogTest, RotatesAtMaxBytesAndKeepsOnlyKeepRotatedSegments) {
  TempDir dir;
  SegmentLog log(dir.path(), 4096, 2);
  std::string error;
  ASSERT_TRUE(log.Open(&error)) << error;
  std::string all = Records(1000, 64);  // 64,000 bytes: 16 segments of 4096 (64 records each).
  for (std::size_t i = 0; i < all.size(); i += 6400) {
    ASSERT_TRUE(log.Append(std::string_view(all).substr(i, 6400), Never()));
  }
  EXPECT_EQ(log.sequence(), 16u);
  EXPECT_EQ(ListSegments(dir.path()), (Seqs{14, 15, 16}));
  std::string tail;
  for (std::uint64_t seq : {14, 15, 16}) {
    std::string text = Slurp(dir.path() + "/" + SegmentFileName(seq));
    if (seq != 16) {
      EXPECT_EQ(text.size(), 4096u) << seq;
    }
    tail += text;
  }
  // Nothing lost or reordered in what is retained: it is exactly the end of the stream.
  EXPECT_EQ(tail, all.substr(all.size() - tail.size()));
  EXPECT_EQ(tail.substr(0, 5), "r832 ");
}

TEST(SegmentLogTest, OvershootsByLessThanOneRecordAndNeverSplitsOne) {
  TempDir dir;
  SegmentLog log(dir.path(), 4096, 5);
  std::string error;
  ASSERT_TRUE(log.Open(&error)) << error;
  ASSERT_TRUE(log.Append(Records(10, 1000), Never()));
  EXPECT_EQ(Slurp(dir.path() + "/output-00000001.log"), Records(5, 1000));
  EXPECT_EQ(Slurp(dir.path() + "/output-00000002.log"), Records(5, 1000, 5));
}

TEST(SegmentLogTest, OpenPrunesBeyondKeep) {
  TempDir dir;
  for (int i = 1; i <= 6; ++i) {
    std::ofstream(dir.path() + "/" + SegmentFileName(i)) << i << "\n";
  }
  SegmentLog log(dir.path(), 4096, 2);
  std::string error;
  ASSERT_TRUE(log.Open(&error)) << error;
  EXPECT_EQ(ListSegments(dir.path()), (Seqs{4, 5, 6}));
}

TEST(SegmentLogTest, OpenFailsOnAMissingDirectory) {
  SegmentLog log("/nonexistent/shim-test-dir", 4096, 2);
  std::string error;
  EXPECT_FALSE(log.Open(&error));
  EXPECT_NE(error.find("/nonexistent/shim-test-dir/output-00000001.log"), std::string::npos);
}

}  // namespace
}  // namespace ktesio::daemon::shim
