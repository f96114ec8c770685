// SPDX-License-Identifier: MIT
// Durations and near-miss names, as operators write them on the command line, in the config
// file and in exec settings.
#include "protocol/syntax.hpp"

#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

namespace ZKD_UNITY_ID {

using namespace zkd::protocol;
using namespace std::chrono_literals;

namespace {

TEST(ProtocolSyntax, ParsesEverySimpleDuration) {
    EXPECT_EQ(parse_duration("250"), 250ms);  // a bare number is milliseconds
    EXPECT_EQ(parse_duration("0"), 0ms);
    EXPECT_EQ(parse_duration("500ms"), 500ms);
    EXPECT_EQ(parse_duration("30s"), 30s);
    EXPECT_EQ(parse_duration("5m"), 5min);
    EXPECT_EQ(parse_duration("2h"), 2h);
    EXPECT_EQ(parse_duration("0s"), 0ms);
}

TEST(ProtocolSyntax, ParsesCompoundDurations) {
    EXPECT_EQ(parse_duration("4m30s"), 270s);
    EXPECT_EQ(parse_duration("1h15m"), 75min);
    EXPECT_EQ(parse_duration("2s500ms"), 2500ms);
    EXPECT_EQ(parse_duration("1h2m3s4ms"), 1h + 2min + 3s + 4ms);
    EXPECT_EQ(parse_duration("1h0m"), 1h);
    EXPECT_EQ(parse_duration("1m90s"), 150s);
}

TEST(ProtocolSyntax, RefusesWhatIsNoDuration) {
    for (const char* text :
         {"",    "s",   "ms",   "soon", "4m30", "30s4m", "1s1s", "1ms1s", "5 m",   " 5s", "5s ",
          "-5s", "+5s", "1.5s", "5sec", "5S",   "5d",    "m5",   "5mm",   "1h-1m", "0x10"}) {
        EXPECT_FALSE(parse_duration(text)) << "'" << text << "'";
    }
}

TEST(ProtocolSyntax, RefusesADurationThatDoesNotFit) {
    EXPECT_EQ(parse_duration("2562047788015h"), std::chrono::hours(2'562'047'788'015));
    EXPECT_FALSE(parse_duration("2562047788016h"));
    EXPECT_FALSE(parse_duration("2562047788015h1h"));
    EXPECT_EQ(parse_duration("9223372036854775807"), std::chrono::milliseconds::max());
    EXPECT_FALSE(parse_duration("9223372036854775808"));
    EXPECT_FALSE(parse_duration("2562047788015h775808ms"));
    EXPECT_EQ(parse_duration("2562047788015h775807ms"), std::chrono::milliseconds::max());
}

TEST(ProtocolSyntax, FindsTheNearestName) {
    EXPECT_EQ(edit_distance("timout", "timeout"), 1U);
    EXPECT_EQ(edit_distance("", "abc"), 3U);
    EXPECT_EQ(edit_distance("kitten", "sitting"), 3U);
    const std::array<std::string_view, 3> names{"timeout", "max-timeout", "output"};
    EXPECT_EQ(nearest("timout", names, 3), "timeout");
    EXPECT_EQ(nearest("max-timout", names, 3), "max-timeout");
    EXPECT_EQ(nearest("colour", names, 3), "");
    const std::vector<std::string> vars{"ZKD_CAPACITY", "ZKD_ZK"};
    EXPECT_EQ(nearest("ZKD_CAPASITY", vars, 3), "ZKD_CAPACITY");
}

}  // namespace

}  // namespace ZKD_UNITY_ID
