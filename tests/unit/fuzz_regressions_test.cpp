// SPDX-License-Identifier: MIT
// What the fuzz targets (tests/fuzz, tools/fuzz.sh) found, one test per finding, each with
// the input that showed it (also kept in tests/fuzz/corpus/<target>/regression-*).
#include "apps/crack/job.hpp"
#include "cli/options.hpp"
#include "http/api.hpp"
#include "protocol/syntax.hpp"
#include "protocol/task.hpp"
#include "zkco/config.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>

namespace ZKD_UNITY_ID {

namespace json = boost::json;

// fuzz_config, regression-duration-overflow: 999999999999999h overflowed the milliseconds
// (signed overflow, UBSan) and came out as some negative or wrapped duration.
TEST(FuzzRegressions, DurationThatOverflowsIsNoDuration) {
    EXPECT_FALSE(zkd::protocol::parse_duration("999999999999999h"));
    EXPECT_FALSE(zkd::protocol::parse_duration("999999999999999m"));
    EXPECT_FALSE(zkd::protocol::parse_duration("9999999999999999s").has_value());
    EXPECT_EQ(
        zkd::protocol::parse_duration("999999999999999s"),
        std::chrono::milliseconds(999'999'999'999'999'000)
    );
    EXPECT_EQ(
        zkd::protocol::parse_duration("2562047788015h"), std::chrono::hours(2'562'047'788'015)
    );
    EXPECT_FALSE(zkd::protocol::parse_duration("2562047788016h"));  // past 2^63 ms

    const auto keys = zkd::cli::parse_config("grace = 999999999999999h\n", "zkd.conf");
    EXPECT_FALSE(zkd::protocol::parse_duration(keys.at("--grace").value));
    EXPECT_EQ(keys.at("--grace").where, "zkd.conf:1");
}

// fuzz_config, regression-bracket-no-colon: "[host%zone]:2181" was accepted, but written
// back (format_connect_string) without brackets, which it refuses: brackets are for IPv6.
TEST(FuzzRegressions, BracketsHoldOnlyIpv6) {
    using zkd::zkco::parse_connect_string;
    EXPECT_FALSE(parse_connect_string("[--limi7777777777777777777%7777777777777777777%1]:2181"));
    EXPECT_FALSE(parse_connect_string("[abc%1]:2181"));
    EXPECT_FALSE(parse_connect_string("[localhost]:2181"));
    const auto v6 = parse_connect_string("[fe80::1%eth0]:2181,[::1]");
    ASSERT_TRUE(v6);
    const auto again = parse_connect_string(zkd::zkco::format_connect_string(*v6));
    ASSERT_TRUE(again);
    EXPECT_EQ(again->servers.size(), 2U);
    EXPECT_EQ(again->servers[0].host, "fe80::1%eth0");
}

// fuzz_http_request, regression-error-not-utf8: GET ...?wait=100\xD0 got a 400 whose JSON
// body quoted the byte as is: not UTF-8, so not JSON for a strict client.
TEST(FuzzRegressions, ErrorBodyIsUtf8) {
    const auto t = zkd::http::parse_target("/v1/tasks?wait=100\xD0&bundle=10");
    ASSERT_TRUE(t);
    const auto wait = zkd::http::query_int(*t, "wait", 0, 300'000);
    ASSERT_FALSE(wait);
    const auto body =
        json::serialize(zkd::http::error_json(wait.error().code, wait.error().message));
    boost::system::error_code ec;
    const auto doc = json::parse(body, ec);
    ASSERT_FALSE(ec) << body;
    const std::string message(doc.at("error").at("message").as_string());
    EXPECT_NE(message.find("100\xEF\xBF\xBD'"), std::string::npos) << message;

    // Valid UTF-8 is kept as is; a cut multibyte character and stray bytes are replaced.
    const auto kept = json::serialize(zkd::http::error_json("bad", "caf\xC3\xA9 \xF0\x9F\x98\x80"));
    EXPECT_NE(kept.find("caf\xC3\xA9 \xF0\x9F\x98\x80"), std::string::npos);
    for (const auto& [code, text] :
         {std::pair<std::string, std::string>{"bad", "x\xF0\x9F\x98"},
          {"\xFF", "\xED\xA0\x80"},
          {"bad", "\xC0\xAF overlong"}}) {
        const auto replaced = json::serialize(zkd::http::error_json(code, text));
        const auto parsed = json::parse(replaced, ec);
        EXPECT_FALSE(ec) << replaced;
        EXPECT_TRUE(parsed.is_object());
    }
}

// fuzz_task, regression-double-drift: Boost.JSON 1.81 does not round long numbers correctly,
// so a double in args moves by an ulp or two when a task is decoded, encoded and decoded
// again (as the master does when it assigns it). Not fixable with Boost 1.81 (no precise
// parsing before 1.83); this pins that it stays within a few ulp.
TEST(FuzzRegressions, DoublesInArgsMoveAtMostAFewUlp) {
    const std::string task =
        R"({"v":1.0,"type":"a.b:c-d_e","args":[-5,1e308,-1.5e-300,1844674407370184467440737095516159551615,-92232372036854775808,"\u00e9\ud83d\ude00",null,true,false,{}],"priority":9,"timeout_ms":9223372036854775807,"max_atteopts":2147928700})";
    const auto first = zkd::protocol::decode_task_node(task);
    ASSERT_TRUE(first) << first.error().message;
    const auto second = zkd::protocol::decode_task_node(zkd::protocol::encode(*first));
    ASSERT_TRUE(second);
    const auto& a = first->task.args.as_array();
    const auto& b = second->task.args.as_array();
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (!a[i].is_double()) {
            EXPECT_EQ(a[i], b[i]);
            continue;
        }
        const double x = a[i].get_double();
        const double y = b[i].get_double();
        EXPECT_LE(std::fabs(x - y), 1e-15 * std::max(std::fabs(x), std::fabs(y))) << i;
    }
}

// fuzz_crack_job, regression-infinite-in-spec: a job node whose spec held 11e999 (read as an
// infinite double) was accepted, and written back as something its decoder refuses.
TEST(FuzzRegressions, CrackJobWithAnInfiniteNumberIsGarbage) {
    const std::string job = R"({"v":1, "hash":"02926b8c2fe8e26a3bc6e810554a2120",
 "spec":{"charset":"abcdefghijklmnopqrstuvwxyz","min_len":11e999,"max_le:":4},
 "size":475254, "tasks":["t4-1763733600123-3fa9c2d1000000","t4-1763733600123-3fa9c2d1000001","t4-1763733600123-3fa9c2d1000002","t4-1763733600123-3fa9c2d1000003","t4-1763733600123-3fa9c2d1000004","t4-1763733600123-3fa9c2d1000005","t4-1763733600123-3fa9c2d1000006","t4-1763733600123-3fa9c2d1000007"], "partitions":"nnf-c---",
 "state":"found", "size":5, "tried":1234567, "preimage":"zkd", "foundtptira_ion":2,
 "failed_partitions":[], "createdled_partitions":[], "crnished_ms":1763733601456,
 "client":"3fa9c2d1", "retries":0})";
    const auto j = zkd::crack::decode_crack_job(job);
    ASSERT_FALSE(j);
    EXPECT_NE(j.error().message.find("out of range"), std::string::npos) << j.error().message;

    std::string finite = job;
    finite.replace(finite.find("11e999"), 6, "1");
    const auto ok = zkd::crack::decode_crack_job(finite);
    ASSERT_TRUE(ok) << ok.error().message;
    const auto again = zkd::crack::decode_crack_job(zkd::crack::encode(*ok));
    ASSERT_TRUE(again) << again.error().message;
    EXPECT_EQ(*again, *ok);
}

// fuzz_worker, regression-huge-throughput: a /master or /workers node with a throughput of
// 1.2e22 decoded, but encode + decode gave another double (Boost.JSON 1.81 reads some
// 17-digit numbers back one ulp off). Throughput is kept to 3 decimals within 0..1e12.
TEST(FuzzRegressions, AHugeThroughputSurvivesEncodeAndDecode) {
    const auto w = zkd::protocol::decode_worker(
        R"({"v":1,"id":"hosta3b","st":"hsp","pid":1234,"capacity":8,"types":["648d5-:rack"],)"
        R"("throughput":12147483648637733600079})"
    );
    ASSERT_TRUE(w) << w.error().message;
    EXPECT_EQ(w->throughput, 1e12);
    const auto again = zkd::protocol::decode_worker(zkd::protocol::encode(*w));
    ASSERT_TRUE(again);
    EXPECT_EQ(*again, *w);
    const auto m =
        zkd::protocol::decode_master(R"({"v":1,"id":"a","epoch":2,"throughput":0.1234567891})");
    ASSERT_TRUE(m);
    EXPECT_EQ(m->throughput, 0.123);
    EXPECT_EQ(zkd::protocol::decode_master(zkd::protocol::encode(*m)).value(), *m);
}

}  // namespace ZKD_UNITY_ID
