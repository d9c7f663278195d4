#include "framer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ktesio::daemon::shim {
namespace {

struct Record {
  std::string text;
  Piece piece;
  bool operator==(const Record&) const = default;
};
constexpr Piece kWhole = Piece::kWhole;
constexpr Piece kFirst = Piece::kFirst;
constexpr Piece kMore = Piece::kMore;

// Feeds `chunks` in order, then ends the stream; returns what the sink saw.
std::vector<Record> Frame(const std::vector<std::string>& chunks, bool finish = true) {
  LineFramer framer;
  std::vector<Record> out;
  auto sink = [&](std::string_view text, Piece piece) {
    out.push_back({std::string(text), piece});
  };
  for (const std::string& chunk : chunks) {
    framer.Feed(chunk, sink);
  }
  if (finish) {
    framer.Finish(sink);
  }
  return out;
}

TEST(LineFramerTest, SplitsLinesAndDropsNewlines) {
  EXPECT_EQ(Frame({"a\nbb\n\nccc\n"}),
            (std::vector<Record>{{"a", kWhole}, {"bb", kWhole}, {"", kWhole}, {"ccc", kWhole}}));
}

TEST(LineFramerTest, JoinsALineSplitAcrossChunks) {
  EXPECT_EQ(Frame({"hel", "lo wo", "rld\nnext\n"}, false),
            (std::vector<Record>{{"hello world", kWhole}, {"next", kWhole}}));
}

TEST(LineFramerTest, HoldsAPartialLineUntilTheStreamEnds) {
  EXPECT_EQ(Frame({"done\npart"}, false), (std::vector<Record>{{"done", kWhole}}));
  EXPECT_EQ(Frame({"done\npart"}, true), (std::vector<Record>{{"done", kWhole}, {"part", kWhole}}));
  EXPECT_TRUE(Frame({""}).empty());
}

TEST(LineFramerTest, DropsOnlyATrailingCarriageReturn) {
  EXPECT_EQ(Frame({"a\r\nb\rc\r\n\r\n"}),
            (std::vector<Record>{{"a", kWhole}, {"b\rc", kWhole}, {"", kWhole}}));
  // A '\r' that ends one chunk and the '\n' that starts the next.
  EXPECT_EQ(Frame({"x\r", "\n"}), (std::vector<Record>{{"x", kWhole}}));
}

TEST(LineFramerTest, PassesBinaryBytesThrough) {
  std::string binary("\0\x01\xff\xfe\x80 z", 7);
  std::vector<Record> out = Frame({binary + "\n" + binary});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].text, binary);
  EXPECT_EQ(out[1].text, binary);
}

TEST(LineFramerTest, SplitsLongLinesIntoMaxSizedPieces) {
  std::string line(kMaxRecordText * 2 + 10, 'x');
  line[0] = 'A';
  line[kMaxRecordText] = 'B';
  line[kMaxRecordText * 2] = 'C';
  std::vector<Record> out = Frame({line + "\nafter\n"});
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0], (Record{line.substr(0, kMaxRecordText), kFirst}));
  EXPECT_EQ(out[1], (Record{line.substr(kMaxRecordText, kMaxRecordText), kMore}));
  EXPECT_EQ(out[2], (Record{line.substr(2 * kMaxRecordText), kMore}));
  EXPECT_EQ(out[3], (Record{"after", kWhole}));
}

TEST(LineFramerTest, SplitsLongLinesArrivingInSmallChunks) {
  std::string line(kMaxRecordText * 3, 'y');
  std::vector<std::string> chunks;
  for (std::size_t i = 0; i < line.size(); i += 1000) {
    chunks.push_back(line.substr(i, 1000));
  }
  chunks.push_back("\n");
  LineFramer framer;
  std::vector<Record> out;
  auto sink = [&](std::string_view text, Piece piece) {
    out.push_back({std::string(text), piece});
  };
  for (const std::string& c : chunks) {
    framer.Feed(c, sink);
    // Never buffers more than one record's worth (plus the byte held back for a '\r').
    EXPECT_LE(framer.pending_bytes(), kMaxRecordText + 1);
  }
  ASSERT_EQ(out.size(), 3u);
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i].text.size(), kMaxRecordText);
    EXPECT_EQ(out[i].piece, i == 0 ? kFirst : kMore) << i;
  }
}

TEST(LineFramerTest, EachOverLongLineStartsWithAFirstPiece) {
  const std::string a(kMaxRecordText + 5, 'a');
  const std::string b(kMaxRecordText + 7, 'b');
  EXPECT_EQ(Frame({a + "\n" + b + "\n"}),
            (std::vector<Record>{{a.substr(0, kMaxRecordText), kFirst},
                                 {"aaaaa", kMore},
                                 {b.substr(0, kMaxRecordText), kFirst},
                                 {"bbbbbbb", kMore}}));
  // The same, arriving in small chunks (the first piece is emitted before the line ends).
  std::vector<std::string> chunks;
  const std::string both = a + "\n" + b + "\n";
  for (size_t i = 0; i < both.size(); i += 999) {
    chunks.push_back(both.substr(i, 999));
  }
  EXPECT_EQ(Frame(chunks), Frame({both}));
}

TEST(LineFramerTest, ALineOfExactlyMaxSizeIsOneRecordEvenWithCrLf) {
  std::string line(kMaxRecordText, 'z');
  EXPECT_EQ(Frame({line + "\n"}), (std::vector<Record>{{line, kWhole}}));
  EXPECT_EQ(Frame({line, "\r", "\n"}), (std::vector<Record>{{line, kWhole}}));
  EXPECT_EQ(Frame({line + "q\n"}), (std::vector<Record>{{line, kFirst}, {"q", kMore}}));
}

TEST(TimestampFormatterTest, FormatsRfc3339UtcWithMilliseconds) {
  TimestampFormatter f;
  EXPECT_EQ(f.Format({0, 0}), "1970-01-01T00:00:00.000Z");
  // 2026-11-30T15:14:26Z.
  EXPECT_EQ(f.Format({1796051666, 123456789}), "2026-11-30T15:14:26.123Z");
  EXPECT_EQ(f.Format({1796051666, 999999999}), "2026-11-30T15:14:26.999Z");
  EXPECT_EQ(f.Format({951782400, 5000000}), "2000-02-29T00:00:00.005Z");  // Leap day.
  EXPECT_EQ(f.Format({4107542399, 0}), "2100-02-28T23:59:59.000Z");       // Not a leap year.
  EXPECT_EQ(f.Format({-1, 0}), "1969-12-31T23:59:59.000Z");
}

TEST(TimestampFormatterTest, NowHasTheFixedShape) {
  TimestampFormatter f;
  std::string now(f.Now());
  ASSERT_EQ(now.size(), 24u);
  EXPECT_EQ(now[4], '-');
  EXPECT_EQ(now[10], 'T');
  EXPECT_EQ(now[19], '.');
  EXPECT_EQ(now[23], 'Z');
  EXPECT_GE(now.substr(0, 4), "2024");
}

TEST(RecordTest, AppendsTimestampStreamAndText) {
  std::string out;
  AppendRecord(&out, "2026-11-30T15:14:26.123Z", "agent-out", "hello world");
  AppendRecord(&out, "2026-11-30T15:14:26.124Z", "agent-err", "");
  EXPECT_EQ(out,
            "2026-11-30T15:14:26.123Z agent-out hello world\n"
            "2026-11-30T15:14:26.124Z agent-err \n");
}

TEST(RecordTest, RecognisesUsageLines) {
  EXPECT_TRUE(IsUsageLine("KTESIO_USAGE {\"sequence\":1}"));
  EXPECT_TRUE(IsUsageLine(" \t KTESIO_USAGE {}"));
  EXPECT_TRUE(IsUsageLine("KTESIO_USAGE"));
  EXPECT_FALSE(IsUsageLine("x KTESIO_USAGE {}"));
  EXPECT_FALSE(IsUsageLine("KTESIO_USAG"));
  EXPECT_FALSE(IsUsageLine("ktesio_usage {}"));
  EXPECT_FALSE(IsUsageLine(""));
}

}  // namespace
}  // namespace ktesio::daemon::shim
