// SPDX-License-Identifier: MIT
// The crack job's spec (job id, refusals), named charsets and word lists, and the job node's
// codec: pure, no server.
#include "apps/crack/job.hpp"

#include "apps/crack/md5_crack.hpp"
#include "apps/crack/plan.hpp"
#include "apps/crack/words.hpp"
#include "protocol/ids.hpp"

#include <boost/json.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>
#include <vector>

namespace ZKD_UNITY_ID {

namespace {

namespace json = boost::json;
using namespace zkd::crack;
using namespace zkd::protocol;

crack_spec brute(std::string_view word, std::string charset, int max_len, int partitions) {
    crack_spec s;
    s.hash = md5_hex(word);
    s.charset = std::move(charset);
    s.max_len = max_len;
    s.partitions = partitions;
    return s;
}

constexpr std::string_view lower = "abcdefghijklmnopqrstuvwxyz";

TEST(CrackSpec, TheJobIdNamesTheHashAndTheSearch) {
    auto a = crack_job_id(brute("abc", "abc", 3, 0));
    ASSERT_TRUE(a) << a.error().message();
    EXPECT_EQ(a->rfind("crack-" + md5_hex("abc") + "-", 0), 0U) << *a;
    EXPECT_EQ(a->size(), 6 + 32 + 1 + 8);
    // Case of the hash, partitions and task options do not change the job; the space does.
    auto upper = brute("abc", "abc", 3, 7);
    std::transform(upper.hash.begin(), upper.hash.end(), upper.hash.begin(), [](char c) {
        return static_cast<char>(std::toupper(c));
    });
    upper.priority = 2;
    EXPECT_EQ(crack_job_id(upper).value(), *a);
    EXPECT_NE(crack_job_id(brute("abc", "abc", 4, 0)).value(), *a);
    EXPECT_NE(crack_job_id(brute("abc", "cba", 3, 0)).value(), *a);
    crack_spec words;
    words.hash = md5_hex("abc");
    words.words = std::vector<std::string>{"ab", "c"};
    auto w1 = crack_job_id(words).value();
    words.words = std::vector<std::string>{"a", "bc"};  // same bytes, other words
    EXPECT_NE(crack_job_id(words).value(), w1);
}

TEST(CrackSpec, BadSpecsAreRefusedWithTheirReason) {
    auto check = [](crack_spec s, crack_errc want) {
        auto id = crack_job_id(s);
        ASSERT_FALSE(id) << *id;
        EXPECT_EQ(id.error(), want) << id.error().message();
        EXPECT_FALSE(id.error().message().empty());
    };
    auto ok = brute("abc", "abc", 3, 0);
    ASSERT_TRUE(crack_job_id(ok));
    auto s = ok;
    s.hash = "xyz";
    check(s, crack_errc::bad_hash);
    s.hash = ok.hash.substr(1);
    check(s, crack_errc::bad_hash);
    s.hash = "g" + ok.hash.substr(1);
    check(s, crack_errc::bad_hash);
    s = ok;
    s.words = std::vector<std::string>{"a"};
    check(s, crack_errc::bad_search);
    s = ok;
    s.charset.reset();
    check(s, crack_errc::bad_search);
    s = ok;
    s.charset = "";
    check(s, crack_errc::bad_charset);
    s.charset = "abca";
    check(s, crack_errc::bad_charset);
    s.charset = "ab\xff";
    check(s, crack_errc::bad_charset);
    s = ok;
    s.max_len = 0;
    check(s, crack_errc::bad_lengths);
    s.max_len = 17;
    check(s, crack_errc::bad_lengths);
    s.min_len = 4;
    s.max_len = 3;
    check(s, crack_errc::bad_lengths);
    s = ok;
    s.partitions = max_crack_partitions + 1;
    check(s, crack_errc::bad_partitions);
    s.partitions = -1;
    check(s, crack_errc::bad_partitions);
    s = ok;
    s.priority = 10;
    check(s, crack_errc::bad_task_options);
    s = ok;
    s.max_attempts = 0;
    check(s, crack_errc::bad_task_options);
    s = ok;
    s.charset = named_charset("printable").value();
    s.max_len = 16;
    check(s, crack_errc::keyspace_too_large);
    s.max_len = 9;  // 95^9 is 6.3e17: over 900 x 2^40 (9.9e14)
    check(s, crack_errc::keyspace_too_large);
    s.max_len = 7;  // 7.0e13: fits
    EXPECT_TRUE(crack_job_id(s));
    crack_spec w;
    w.hash = ok.hash;
    w.words = std::vector<std::string>{};
    check(w, crack_errc::empty_word_list);
    w.words = std::vector<std::string>{"fine", "not\xc0\xafutf8"};
    check(w, crack_errc::bad_word);
}

TEST(CrackSpec, NamedCharsetsAndWordLists) {
    EXPECT_EQ(named_charset("lower").value(), lower);
    EXPECT_EQ(named_charset("digits").value(), "0123456789");
    EXPECT_EQ(named_charset("hex+digits").value(), "0123456789abcdef");
    EXPECT_EQ(named_charset("alnum").value().size(), 62U);
    EXPECT_EQ(named_charset("printable").value().size(), 95U);
    EXPECT_EQ(named_charset("lower+upper").value(), named_charset("alpha").value());
    EXPECT_FALSE(named_charset("abc"));
    EXPECT_FALSE(named_charset("lower+"));
    EXPECT_FALSE(named_charset(""));
    std::size_t skipped = 99;
    const auto words = parse_word_list("one\r\ntwo\n\n\xff\xfe\nthree words\nlast", &skipped);
    EXPECT_EQ(words, (std::vector<std::string>{"one", "two", "three words", "last"}));
    EXPECT_EQ(skipped, 1U);
}

TEST(CrackJobCodec, RoundTripsAndRefusesGarbage) {
    crack_job j;
    j.hash = md5_hex("x");
    j.spec = json::object{{"charset", "ab"}, {"min_len", 1}, {"max_len", 2}};
    j.size = 6;
    task_id_generator gen;
    j.tasks = {gen.next(5, 1), gen.next(5, 1), gen.next(5, 1)};
    j.partitions = "fxc";
    j.state = crack_state::found;
    j.tried = 4;
    j.preimage = "x";
    j.found_partition = 0;
    j.failed = {crack_failed_partition{1, j.tasks[1], task_state::lost, "attempts_exhausted", "m"}};
    j.created_ms = 5;
    j.finished_ms = 9;
    j.client = "0badf00d";
    j.retries = 2;
    const auto text = encode(j);
    EXPECT_EQ(text.rfind("{\"v\":1,", 0), 0U) << text;
    auto back = decode_crack_job(text);
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(*back, j);
    EXPECT_EQ(back->done(), 3);
    json::value v = json::parse(text);
    EXPECT_EQ(v.at("done").as_int64(), 3);
    EXPECT_EQ(v.at("state").as_string(), "found");

    auto broken = [&](auto change) {
        json::value copy = v;
        change(copy.as_object());
        return decode_crack_job(json::serialize(copy));
    };
    EXPECT_FALSE(decode_crack_job("\xff{"));
    EXPECT_FALSE(decode_crack_job("[]"));
    EXPECT_FALSE(broken([](json::object& o) { o["v"] = 2; }));
    EXPECT_FALSE(broken([](json::object& o) { o["partitions"] = "fx"; }));
    EXPECT_FALSE(broken([](json::object& o) { o["partitions"] = "fx?"; }));
    EXPECT_FALSE(broken([](json::object& o) { o["state"] = "done"; }));
    EXPECT_FALSE(broken([](json::object& o) { o["tasks"].as_array()[0] = "t1"; }));
    EXPECT_FALSE(broken([](json::object& o) { o.erase("preimage"); }));  // found needs it
    EXPECT_FALSE(broken([](json::object& o) { o["hash"] = "ABC"; }));
    EXPECT_TRUE(broken([](json::object& o) { o["unknown"] = 1; }));
}

}  // namespace

}  // namespace ZKD_UNITY_ID
