// SPDX-License-Identifier: MIT
// md5-crack: the digest, the keyspace arithmetic the job splitter relies on, and the search
// of one partition (found, not found, word lists, bad args, cancellation).
#include "apps/crack/md5_crack.hpp"
#include "handlers/registry.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <future>
#include <latch>
#include <limits>
#include <set>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

namespace ZKD_UNITY_ID {

namespace {

namespace json = boost::json;
using namespace std::chrono_literals;
using zkd::crack::candidate_at;
using zkd::crack::keyspace_size;
using zkd::crack::md5_hex;
using zkd::crack::split_keyspace;
using zkd::handlers::handler_result;

constexpr std::string_view lower = "abcdefghijklmnopqrstuvwxyz";
const std::string e_acute = "\xc3\xa9";  // U+00E9, two bytes in UTF-8

handler_result crack(const json::value& args, std::stop_token stop = {}) {
    return zkd::crack::md5_crack(args, std::move(stop));
}

json::object range_args(
    std::string_view hash,
    std::string_view charset,
    int min_len,
    int max_len,
    std::uint64_t start,
    std::uint64_t count
) {
    return json::object{{"hash", hash},       {"charset", charset}, {"min_len", min_len},
                        {"max_len", max_len}, {"start", start},     {"count", count}};
}

// Expects a successful search and returns {found, preimage or "", tried}.
struct outcome {
    bool found = false;
    std::string preimage;
    std::int64_t tried = -1;
};

outcome expect_search(const json::value& args) {
    const auto r = crack(args);
    if (r.has_error()) {
        ADD_FAILURE() << json::serialize(args) << ": " << r.error().code << ": "
                      << r.error().message;
        return {};
    }
    outcome o;
    o.found = r->at("found").as_bool();
    if (o.found)
        o.preimage = std::string(r->at("preimage").as_string());
    else
        EXPECT_FALSE(r->as_object().contains("preimage"));
    o.tried = r->at("tried").as_int64();
    return o;
}

TEST(CrackMd5, KnownVectors) {
    // RFC 1321 appendix A.5, plus one that spans two blocks.
    EXPECT_EQ(md5_hex(""), "d41d8cd98f00b204e9800998ecf8427e");
    EXPECT_EQ(md5_hex("a"), "0cc175b9c0f1b6a831c399e269772661");
    EXPECT_EQ(md5_hex("abc"), "900150983cd24fb0d6963f7d28e17f72");
    EXPECT_EQ(md5_hex("message digest"), "f96b697d7cb7938d525a2f31aaf161d0");
    EXPECT_EQ(md5_hex(lower), "c3fcd3d76192e4007dfb496cca67e13b");
    EXPECT_EQ(
        md5_hex("12345678901234567890123456789012345678901234567890123456789012345678901234567890"),
        "57edf4a22be3c955ac49da2e2107b67a"
    );
    EXPECT_EQ(md5_hex(std::string_view("\0", 1)), "93b885adfe0da089cdf634904fd59f71");
}

TEST(CrackMd5Keyspace, CharsetSymbolsAreUtf8Characters) {
    using zkd::crack::charset_symbols;
    EXPECT_EQ(charset_symbols("abc"), (std::vector<std::string>{"a", "b", "c"}));
    EXPECT_EQ(
        charset_symbols("a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"),
        (std::vector<std::string>{"a", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80"})
    );
    EXPECT_EQ(charset_symbols(std::string_view("\0a", 2)).size(), 2U);
    EXPECT_THROW((void)charset_symbols(""), std::invalid_argument);
    EXPECT_THROW((void)charset_symbols("aba"), std::invalid_argument);
    EXPECT_THROW((void)charset_symbols("\xc3\xa9\xc3\xa9"), std::invalid_argument);
    EXPECT_THROW((void)charset_symbols("\xff"), std::invalid_argument);
    EXPECT_THROW((void)charset_symbols("a\xc3"), std::invalid_argument);
    EXPECT_THROW((void)charset_symbols("\x80"), std::invalid_argument);

    // 256 distinct symbols are allowed, 257 are not: U+0100.. are two bytes each.
    std::string big;
    for (unsigned cp = 0x100; cp < 0x100 + 257; ++cp) {
        big += static_cast<char>(0xC0 | (cp >> 6));
        big += static_cast<char>(0x80 | (cp & 0x3F));
    }
    EXPECT_THROW((void)charset_symbols(big), std::invalid_argument);
    big.resize(big.size() - 2);
    EXPECT_EQ(charset_symbols(big).size(), 256U);
}

TEST(CrackMd5Keyspace, SizeCountsEveryLengthAndSaturates) {
    constexpr auto limit = zkd::crack::keyspace_limit;
    EXPECT_EQ(keyspace_size(26, 1, 1), 26U);
    EXPECT_EQ(keyspace_size(26, 1, 2), 26U + 676U);
    EXPECT_EQ(keyspace_size(26, 2, 2), 676U);
    EXPECT_EQ(keyspace_size(10, 3, 3), 1000U);
    EXPECT_EQ(keyspace_size(1, 1, 16), 16U);
    EXPECT_EQ(keyspace_size(2, 1, 16), (std::uint64_t{1} << 17) - 2);
    EXPECT_EQ(keyspace_size(256, 7, 7), std::uint64_t{1} << 56);
    EXPECT_EQ(keyspace_size(128, 9, 9), limit);                 // exactly 2^63
    EXPECT_EQ(keyspace_size(95, 1, 9), 636954190679126495ULL);  // sum of 95^1..95^9
    // Past 2^63: saturated, whether one length or the sum overflows.
    EXPECT_EQ(keyspace_size(256, 8, 8), limit);
    EXPECT_EQ(keyspace_size(128, 1, 9), limit);
    EXPECT_EQ(keyspace_size(95, 1, 10), limit);
    EXPECT_EQ(keyspace_size(256, 1, 16), limit);

    EXPECT_THROW((void)keyspace_size(0, 1, 1), std::invalid_argument);
    EXPECT_THROW((void)keyspace_size(257, 1, 1), std::invalid_argument);
    EXPECT_THROW((void)keyspace_size(26, 0, 1), std::invalid_argument);
    EXPECT_THROW((void)keyspace_size(26, 2, 1), std::invalid_argument);
    EXPECT_THROW((void)keyspace_size(26, 1, 17), std::invalid_argument);
    EXPECT_THROW((void)keyspace_size(26, -1, 3), std::invalid_argument);
}

TEST(CrackMd5Keyspace, CandidatesGoByLengthThenCharsetOrder) {
    const std::vector<std::string> expected = {"b",  "a",   "bb",  "ba", "ab",
                                               "aa", "bbb", "bba", "bab"};
    for (std::size_t i = 0; i < expected.size(); ++i)
        EXPECT_EQ(candidate_at("ba", 1, i), expected[i]) << i;
    EXPECT_EQ(candidate_at("abc", 2, 0), "aa");
    EXPECT_EQ(candidate_at("abc", 2, 8), "cc");
    EXPECT_EQ(candidate_at("abc", 2, 9), "aaa");
    EXPECT_EQ(candidate_at(lower, 1, 701), "zz");
    EXPECT_EQ(candidate_at("a" + e_acute, 1, 1), e_acute);
    EXPECT_EQ(candidate_at("a" + e_acute, 1, 4), e_acute + "a");

    // Every candidate of a small space: right count per length, strictly increasing in
    // (length, charset order) and so all distinct.
    const std::string charset = "xyz";
    const auto size = keyspace_size(charset.size(), 1, 4);
    ASSERT_EQ(size, 3U + 9U + 27U + 81U);
    auto rank = [&](const std::string& s) {
        std::vector<std::size_t> r{s.size()};
        for (const char c : s)
            r.push_back(charset.find(c));
        return r;
    };
    std::string previous;
    for (std::uint64_t i = 0; i < size; ++i) {
        const auto c = candidate_at(charset, 1, i);
        ASSERT_GE(c.size(), 1U);
        ASSERT_LE(c.size(), 4U);
        ASSERT_EQ(c.find_first_not_of(charset), std::string::npos) << c;
        if (i > 0) {
            ASSERT_LT(rank(previous), rank(c)) << previous << " then " << c;
        }
        previous = c;
    }
    EXPECT_EQ(previous, "zzzz");
}

TEST(CrackMd5Keyspace, CandidateAtStopsAtLength16) {
    EXPECT_EQ(candidate_at("a", 1, 15), std::string(16, 'a'));
    EXPECT_THROW((void)candidate_at("a", 1, 16), std::out_of_range);
    const auto last = (std::uint64_t{1} << 17) - 3;
    EXPECT_EQ(candidate_at("01", 1, last), std::string(16, '1'));
    EXPECT_THROW((void)candidate_at("01", 1, last + 1), std::out_of_range);
    // The largest index still lands within 16 symbols for a real charset.
    const auto c = candidate_at(lower, 1, std::numeric_limits<std::uint64_t>::max());
    EXPECT_EQ(c.size(), 14U);
    EXPECT_THROW((void)candidate_at("", 1, 0), std::invalid_argument);
    EXPECT_THROW((void)candidate_at("aa", 1, 0), std::invalid_argument);
    EXPECT_THROW((void)candidate_at("ab", 0, 0), std::invalid_argument);
    EXPECT_THROW((void)candidate_at("ab", 17, 0), std::invalid_argument);
}

TEST(CrackMd5Keyspace, SplitIsContiguousCoveringAndBalanced) {
    const std::vector<std::uint64_t> sizes = {
        0, 1, 2, 7, 100, 702, 1000003, std::uint64_t{1} << 40, zkd::crack::keyspace_limit};
    const std::vector<std::uint64_t> counts = {1, 2, 3, 7, 64, 1000};
    for (const auto size : sizes) {
        for (const auto partitions : counts) {
            const auto parts = split_keyspace(size, partitions);
            ASSERT_EQ(parts.size(), std::min(size, partitions)) << size << "/" << partitions;
            std::uint64_t next = 0;
            for (std::size_t i = 0; i < parts.size(); ++i) {
                const auto [start, count] = parts[i];
                ASSERT_EQ(start, next) << size << "/" << partitions << " #" << i;
                ASSERT_GE(count, 1U);
                if (i > 0) {
                    // Larger partitions first, all within one of each other.
                    ASSERT_LE(count, parts[i - 1].second);
                    ASSERT_LE(parts.front().second - count, 1U);
                }
                next = start + count;
            }
            EXPECT_EQ(next, size) << size << "/" << partitions;
        }
    }
    EXPECT_EQ(
        split_keyspace(10, 3),
        (std::vector<std::pair<std::uint64_t, std::uint64_t>>{{0, 4}, {4, 3}, {7, 3}})
    );
    EXPECT_THROW((void)split_keyspace(10, 0), std::invalid_argument);
}

TEST(CrackMd5Crack, FindsAKnownPreimage) {
    const auto hash = md5_hex("zz");
    const auto o = expect_search(range_args(hash, lower, 1, 2, 0, 702));
    EXPECT_TRUE(o.found);
    EXPECT_EQ(o.preimage, "zz");
    EXPECT_EQ(o.tried, 702);

    // The hash is case-insensitive.
    std::string upper_hash = hash;
    std::transform(upper_hash.begin(), upper_hash.end(), upper_hash.begin(), [](char c) {
        return static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    });
    const auto u = expect_search(range_args(upper_hash, lower, 1, 2, 0, 702));
    EXPECT_TRUE(u.found);
    EXPECT_EQ(u.preimage, "zz");

    const auto abc = expect_search(range_args(md5_hex("abc"), lower, 3, 3, 0, 26 * 26 * 26));
    EXPECT_TRUE(abc.found);
    EXPECT_EQ(abc.preimage, "abc");
    EXPECT_EQ(abc.tried, 26 + 2 + 1);  // "abc" is candidate 0*26^2 + 1*26 + 2

    const auto utf8 = expect_search(range_args(md5_hex(e_acute + "a"), "a" + e_acute, 1, 3, 0, 14));
    EXPECT_TRUE(utf8.found);
    EXPECT_EQ(utf8.preimage, e_acute + "a");
}

TEST(CrackMd5Crack, OnlyThePartitionHoldingThePreimageFindsIt) {
    const auto size = keyspace_size(lower.size(), 1, 3);
    const std::uint64_t secret_index = 5000;
    const auto secret = candidate_at(lower, 1, secret_index);
    int hits = 0;
    for (const auto& [start, count] : split_keyspace(size, 7)) {
        const auto o = expect_search(range_args(md5_hex(secret), lower, 1, 3, start, count));
        if (o.found) {
            ++hits;
            EXPECT_EQ(o.preimage, secret);
            EXPECT_EQ(o.tried, static_cast<std::int64_t>(secret_index - start + 1));
        } else {
            EXPECT_EQ(o.tried, static_cast<std::int64_t>(count));
        }
    }
    EXPECT_EQ(hits, 1);
}

TEST(CrackMd5Crack, SearchAgreesWithCandidateAtAcrossLengths) {
    // Partitions that start mid-length and cross into the next lengths: the last candidate
    // of each, computed by candidate_at, is found after exactly `count` tries.
    const std::string charset = "0123456789";
    for (const auto& [start, count] : std::vector<std::pair<std::uint64_t, std::uint64_t>>{
             {0, 1}, {5, 6}, {9, 1}, {9, 2}, {95, 20}, {105, 1006}, {0, 11110}, {11109, 1}}) {
        const auto last = candidate_at(charset, 1, start + count - 1);
        const auto o = expect_search(range_args(md5_hex(last), charset, 1, 4, start, count));
        EXPECT_TRUE(o.found) << start << "+" << count;
        EXPECT_EQ(o.preimage, last);
        EXPECT_EQ(o.tried, static_cast<std::int64_t>(count));
    }
}

TEST(CrackMd5Crack, ReportsNotFound) {
    const auto o = expect_search(range_args(md5_hex("zzz"), lower, 1, 2, 0, 702));
    EXPECT_FALSE(o.found);
    EXPECT_EQ(o.tried, 702);
    // Just outside the partition.
    const auto edge = expect_search(range_args(md5_hex("zz"), lower, 1, 2, 0, 701));
    EXPECT_FALSE(edge.found);
    EXPECT_EQ(edge.tried, 701);
    const auto empty = expect_search(range_args(md5_hex("a"), lower, 1, 2, 702, 0));
    EXPECT_FALSE(empty.found);
    EXPECT_EQ(empty.tried, 0);
    // The end of a keyspace that reaches length 16.
    const auto end = expect_search(range_args(md5_hex("a"), "a", 1, 16, 16, 0));
    EXPECT_FALSE(end.found);
    EXPECT_EQ(end.tried, 0);
    const auto last = expect_search(range_args(md5_hex(std::string(16, 'a')), "a", 1, 16, 15, 1));
    EXPECT_TRUE(last.found);
    EXPECT_EQ(last.tried, 1);
}

TEST(CrackMd5Crack, SearchesAWordList) {
    const json::array words = {"letmein", "password", "", "hunter2"};
    const auto o = expect_search(json::object{{"hash", md5_hex("password")}, {"words", words}});
    EXPECT_TRUE(o.found);
    EXPECT_EQ(o.preimage, "password");
    EXPECT_EQ(o.tried, 2);

    const auto e = expect_search(json::object{{"hash", md5_hex("")}, {"words", words}});
    EXPECT_TRUE(e.found);
    EXPECT_EQ(e.preimage, "");
    EXPECT_EQ(e.tried, 3);

    const auto n = expect_search(json::object{{"hash", md5_hex("secret")}, {"words", words}});
    EXPECT_FALSE(n.found);
    EXPECT_EQ(n.tried, 4);

    const auto none = expect_search(json::object{{"hash", md5_hex("x")}, {"words", json::array{}}});
    EXPECT_FALSE(none.found);
    EXPECT_EQ(none.tried, 0);
}

TEST(CrackMd5Crack, RejectsBadArgs) {
    const auto hash = md5_hex("zz");
    auto with = [&](std::string_view key, json::value v) {
        auto args = range_args(hash, lower, 1, 2, 0, 702);
        args[key] = std::move(v);
        return json::value(std::move(args));
    };
    auto str = [](const std::string& v) { return json::value(std::string_view(v)); };
    auto without = [&](std::string_view key) {
        auto args = range_args(hash, lower, 1, 2, 0, 702);
        args.erase(key);
        return json::value(std::move(args));
    };
    const std::vector<json::value> bad = {
        nullptr,
        json::value("hash"),
        json::array{1, 2},
        json::object{},
        without("hash"),
        with("hash", 5),
        with("hash", str(hash.substr(0, 31))),
        with("hash", str(hash + "0")),
        with("hash", str("g" + hash.substr(1))),
        with("hash", str(" " + hash.substr(1))),
        with("words", json::array{"a"}),  // both modes
        json::object{{"hash", hash}},     // neither
        json::object{{"hash", hash}, {"words", "abc"}},
        json::object{{"hash", hash}, {"words", json::array{"a", 1}}},
        json::object{{"hash", hash}, {"words", nullptr}},
        without("charset"),
        without("min_len"),
        without("max_len"),
        without("start"),
        without("count"),
        with("charset", ""),
        with("charset", "abca"),
        with("charset", 5),
        with("charset", json::array{"a", "b"}),
        with("min_len", 0),
        with("min_len", 3),  // > max_len
        with("min_len", "1"),
        with("min_len", 1.5),
        with("max_len", 17),
        with("max_len", -2),
        with("max_len", 1e300),
        with("start", -1),
        with("count", -1),
        with("count", (std::uint64_t{1} << 40) + 1),
        with("count", 703),  // start + count past the keyspace
        with("start", 1),    // likewise
        with("start", 703),
        with("start", std::numeric_limits<std::uint64_t>::max()),
    };
    for (const auto& args : bad) {
        const auto r = crack(args);
        ASSERT_TRUE(r.has_error()) << json::serialize(args) << " -> " << json::serialize(*r);
        EXPECT_EQ(r.error().code, "bad_args") << json::serialize(args);
        EXPECT_FALSE(r.error().message.empty());
    }
}

TEST(CrackMd5Crack, AcceptsTheLargestPartitionAndHonoursAnEarlyStop) {
    std::stop_source source;
    source.request_stop();
    const auto r = crack(
        range_args(md5_hex(""), lower, 1, 16, 0, zkd::crack::max_partition_count),
        source.get_token()
    );
    ASSERT_TRUE(r.has_error());
    EXPECT_EQ(r.error().code, "cancelled");
}

TEST(CrackMd5Crack, StopFromAnotherThreadEndsAPartition) {
    // 2^40 candidates and an unreachable hash (min_len 1 excludes ""): only the stop ends it.
    const json::value args =
        range_args(md5_hex(""), lower, 1, 16, 12345, zkd::crack::max_partition_count);
    std::latch started{1};
    std::stop_source source;
    auto fut = std::async(std::launch::async, [&] {
        started.count_down();
        return crack(args, source.get_token());
    });
    started.wait();
    source.request_stop();
    ASSERT_EQ(fut.wait_for(60s), std::future_status::ready) << "md5-crack ignored the stop";
    const auto r = fut.get();
    ASSERT_TRUE(r.has_error());
    EXPECT_EQ(r.error().code, "cancelled") << r.error().message;
}

}  // namespace

}  // namespace ZKD_UNITY_ID
