#include <gtest/gtest.h>

#include "server/stop_strings.h"

namespace imp::server {
namespace {

// Feeds the text one byte at a time, the hardest split.
std::string run(std::vector<std::string> stops, const std::string& text, bool* matched) {
  StopStringMatcher matcher(std::move(stops));
  std::string out;
  for (char c : text) out += matcher.feed(std::string(1, c));
  out += matcher.finish();
  *matched = matcher.matched();
  return out;
}

TEST(StopStrings, CutsAtTheFirstStopWhateverTheSplit) {
  bool matched = false;
  EXPECT_EQ(run({"END", "ST"}, "abc STOP END", &matched), "abc ");
  EXPECT_TRUE(matched);
  EXPECT_EQ(run({"END"}, "abc EN", &matched), "abc EN");  // a partial stop at the end is text
  EXPECT_FALSE(matched);
  EXPECT_EQ(run({}, "anything", &matched), "anything");
  EXPECT_EQ(run({"aab"}, "aaab", &matched), "a");
  EXPECT_TRUE(matched);
}

TEST(StopStrings, HoldsBackOnlyWhatCouldBecomeAStop) {
  StopStringMatcher matcher({"STOP"});
  EXPECT_EQ(matcher.feed("hello S"), "hello ");
  EXPECT_EQ(matcher.feed("x"), "Sx");
  EXPECT_EQ(matcher.feed("ST"), "");
  EXPECT_EQ(matcher.feed("OP tail"), "");
  EXPECT_TRUE(matcher.matched());
  EXPECT_EQ(matcher.feed("more"), "");
}

}  // namespace
}  // namespace imp::server
