// SPDX-License-Identifier: MIT
// The one UTF-8 check (protocol/text.hpp): strict as JSON parsers are, and cuts that never
// split a character.
#include "protocol/text.hpp"

#include <gtest/gtest.h>

#include <string>

namespace ZKD_UNITY_ID {

using namespace zkd::protocol;

namespace {

TEST(ProtocolText, CharactersOfEachLengthAndWhatIsNotOne) {
    EXPECT_EQ(utf8_char("a", 0), 1U);
    EXPECT_EQ(utf8_char("\xC3\xA9", 0), 2U);          // é
    EXPECT_EQ(utf8_char("\xE2\x82\xAC", 0), 3U);      // €
    EXPECT_EQ(utf8_char("\xF0\x9F\x98\x80", 0), 4U);  // 😀
    EXPECT_EQ(utf8_char("\xC0\xAF", 0), 0U);          // overlong '/'
    EXPECT_EQ(utf8_char("\xE0\x80\xAF", 0), 0U);      // overlong, three bytes
    EXPECT_EQ(utf8_char("\xED\xA0\x80", 0), 0U);      // a surrogate
    EXPECT_EQ(utf8_char("\xF4\x90\x80\x80", 0), 0U);  // past U+10FFFF
    EXPECT_EQ(utf8_char("\xE2\x82", 0), 0U);          // cut short
    EXPECT_EQ(utf8_char("\x80", 0), 0U);              // a lone continuation byte
    EXPECT_TRUE(is_utf8("h\xC3\xA9llo \xF0\x9F\x98\x80"));
    EXPECT_FALSE(is_utf8("h\xC3llo"));
    EXPECT_TRUE(is_utf8(""));
}

TEST(ProtocolText, PrintableReplacesEachBadByte) {
    EXPECT_EQ(
        printable_utf8("a\xFF"
                       "b\xC3\xA9"),
        "a?b\xC3\xA9"
    );
    EXPECT_EQ(printable_utf8("\xE2\x82", "\xEF\xBF\xBD"), "\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(ProtocolText, ACutNeverSplitsACharacter) {
    std::string s = "ab\xE2\x82\xAC";  // "ab€": 5 bytes
    cut_utf8(s, 4);
    EXPECT_EQ(s, "ab");
    s = "ab\xE2\x82\xAC";
    cut_utf8(s, 5);
    EXPECT_EQ(s, "ab\xE2\x82\xAC");
    s = "\xF0\x9F\x98\x80x";
    cut_utf8(s, 3);
    EXPECT_EQ(s, "");
    s = "\xC3\xA9\xC3\xA9";
    cut_utf8(s, 3);
    EXPECT_EQ(s, "\xC3\xA9");
    s = "abcdef";
    cut_utf8(s, 3);
    EXPECT_EQ(s, "abc");
    s = "a\x80\x80\x80\x80\x80";  // garbage: a plain cut
    cut_utf8(s, 5);
    EXPECT_EQ(s.size(), 5U);
    EXPECT_TRUE(is_utf8(printable_utf8(s)));
}

}  // namespace

}  // namespace ZKD_UNITY_ID
