// SPDX-License-Identifier: MIT
// Time zones for cron expressions: POSIX TZ rules, TZif files (made here, and the machine's
// own tz database), UTC offsets, local times at daylight-saving changes, and cron due times
// in a zone (a skipped local time fires at the jump, a repeated one once).
#include "schedule/zone.hpp"

#include "protocol/delay.hpp"
#include "schedule/firing.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

namespace ZKD_UNITY_ID {

using namespace zkd::schedule;
using zkd::protocol::format_time;
using zkd::protocol::parse_time;

namespace {

std::int64_t at(std::string_view rfc3339) {
    auto t = parse_time(rfc3339);
    EXPECT_TRUE(t) << rfc3339;
    return t.value_or(0);
}

std::int64_t secs(std::string_view rfc3339) {
    return at(rfc3339) / 1000;
}

zone rule_zone(std::string_view tz) {
    zone z;
    z.name = "test";
    z.rule = parse_posix_tz(tz);
    EXPECT_TRUE(z.rule) << tz;
    return z;
}

const char* const paris_rule = "CET-1CEST,M3.5.0,M10.5.0/3";

TEST(Zone, ParsesPosixRules) {
    auto p = parse_posix_tz(paris_rule);
    ASSERT_TRUE(p);
    EXPECT_EQ(p->std_offset, 3600);
    EXPECT_TRUE(p->has_dst);
    EXPECT_EQ(p->dst_offset, 7200);
    EXPECT_EQ(p->start, (posix_tz::date_rule{'M', 3, 5, 0, 7200}));
    EXPECT_EQ(p->end, (posix_tz::date_rule{'M', 10, 5, 0, 10800}));
    auto fixed = parse_posix_tz("<+03>-3");
    ASSERT_TRUE(fixed);
    EXPECT_EQ(fixed->std_offset, 3 * 3600);
    EXPECT_FALSE(fixed->has_dst);
    auto us = parse_posix_tz("EST5EDT");  // POSIX's default rules
    ASSERT_TRUE(us);
    EXPECT_EQ(us->std_offset, -5 * 3600);
    EXPECT_EQ(us->dst_offset, -4 * 3600);
    auto odd = parse_posix_tz("<-02>2<-01>,J60/-1,167/25:30:15");
    ASSERT_TRUE(odd);
    EXPECT_EQ(odd->start, (posix_tz::date_rule{'J', 60, 0, 0, -3600}));
    EXPECT_EQ(odd->end, (posix_tz::date_rule{'n', 167, 0, 0, 25 * 3600 + 30 * 60 + 15}));
    for (const auto* bad :
         {"", "X", "CET", "CET-1CEST,M13.1.0,M1.1.0", "CET-1CEST,M3.5.0",
          "CET-1CEST,M3.6.0,M10.5.0", "CET-1CEST,M3.5.0,M10.5.0x"}) {
        EXPECT_FALSE(parse_posix_tz(bad)) << bad;
    }
}

TEST(Zone, RuleOffsetsMatchTheTzDatabase) {
    const auto paris = rule_zone(paris_rule);
    EXPECT_EQ(paris.offset_at(secs("2026-03-29T00:59:59Z")), 3600);
    EXPECT_EQ(paris.offset_at(secs("2026-03-29T01:00:00Z")), 7200);
    EXPECT_EQ(paris.offset_at(secs("2026-10-25T00:59:59Z")), 7200);
    EXPECT_EQ(paris.offset_at(secs("2026-10-25T01:00:00Z")), 3600);
    EXPECT_EQ(paris.offset_at(secs("2040-03-25T00:59:59Z")), 3600);
    EXPECT_EQ(paris.offset_at(secs("2040-03-25T01:00:00Z")), 7200);
    EXPECT_EQ(paris.offset_at(secs("2040-10-28T01:00:00Z")), 3600);
    // The southern hemisphere: summer time across the new year.
    const auto sydney = rule_zone("AEST-10AEDT,M10.1.0,M4.1.0/3");
    EXPECT_EQ(sydney.offset_at(secs("2026-10-03T15:59:59Z")), 10 * 3600);
    EXPECT_EQ(sydney.offset_at(secs("2026-10-03T16:00:00Z")), 11 * 3600);
    EXPECT_EQ(sydney.offset_at(secs("2027-01-01T00:00:00Z")), 11 * 3600);
    EXPECT_EQ(sydney.offset_at(secs("2045-04-01T15:59:59Z")), 11 * 3600);
    EXPECT_EQ(sydney.offset_at(secs("2045-04-01T16:00:00Z")), 10 * 3600);
    const auto ny = rule_zone("EST5EDT,M3.2.0,M11.1.0");
    EXPECT_EQ(ny.offset_at(secs("2026-03-08T06:59:59Z")), -5 * 3600);
    EXPECT_EQ(ny.offset_at(secs("2026-03-08T07:00:00Z")), -4 * 3600);
    EXPECT_EQ(ny.offset_at(secs("2050-11-06T05:59:59Z")), -4 * 3600);
    EXPECT_EQ(ny.offset_at(secs("2050-11-06T06:00:00Z")), -5 * 3600);
}

TEST(Zone, LocalTimesAtTheChanges) {
    const auto paris = rule_zone(paris_rule);
    EXPECT_EQ(to_local(paris, at("2026-07-01T10:00:00Z")), at("2026-07-01T12:00:00Z"));
    EXPECT_EQ(to_utc(paris, at("2026-07-01T12:00:00Z")), at("2026-07-01T10:00:00Z"));
    EXPECT_EQ(to_utc(paris, at("2026-01-15T12:00:00Z")), at("2026-01-15T11:00:00Z"));
    // 02:30 does not exist on 29 March: the clock jumps from 02:00 to 03:00 at 01:00 UTC.
    EXPECT_EQ(to_utc(paris, at("2026-03-29T02:30:00Z")), at("2026-03-29T01:00:00Z"));
    EXPECT_EQ(to_utc(paris, at("2026-03-29T02:00:00Z")), at("2026-03-29T01:00:00Z"));
    EXPECT_EQ(to_utc(paris, at("2026-03-29T03:00:00Z")), at("2026-03-29T01:00:00Z"));
    EXPECT_EQ(to_utc(paris, at("2026-03-29T01:59:00Z")), at("2026-03-29T00:59:00Z"));
    // 02:30 happens twice on 25 October: the first time.
    EXPECT_EQ(to_utc(paris, at("2026-10-25T02:30:00Z")), at("2026-10-25T00:30:00Z"));
    EXPECT_EQ(to_utc(paris, at("2026-10-25T03:00:00Z")), at("2026-10-25T02:00:00Z"));
}

schedule in_zone(std::string_view expr, std::shared_ptr<const zone> z, std::string_view created) {
    schedule s;
    s.name = "z";
    s.cron = std::string(expr);
    s.cron_parsed = parse_cron(expr).value();
    s.tz = z->name;
    s.zone_rules = std::move(z);
    s.type = "echo";
    s.client = "00000001";
    s.created_ms = at(created);
    s.last_due_ms = s.created_ms;
    return s;
}

std::vector<std::string> dues_after(const schedule& s, std::string_view from, int n) {
    std::vector<std::string> out;
    auto t = at(from);
    for (int i = 0; i < n; ++i) {
        auto d = next_due(s, t);
        if (!d) {
            out.emplace_back("never");
            break;
        }
        out.push_back(format_time(*d));
        // prev_due agrees with next_due: the last due time at or before it is itself.
        EXPECT_EQ(prev_due(s, *d), d) << format_time(*d);
        EXPECT_EQ(prev_due(s, *d - 1).value_or(0) < *d, true);
        t = *d;
    }
    return out;
}

TEST(Zone, CronInAZoneFiresSkippedTimesAtTheJumpAndRepeatedOnesOnce) {
    auto paris = std::make_shared<const zone>(rule_zone(paris_rule));
    const auto daily = in_zone("30 2 * * *", paris, "2026-03-27T12:00:00Z");
    EXPECT_EQ(
        dues_after(daily, "2026-03-27T12:00:00Z", 3),
        (std::vector<std::string>{
            "2026-03-28T01:30:00.000Z",  // 02:30 CET
            "2026-03-29T01:00:00.000Z",  // 02:30 does not exist: at the jump (03:00 CEST)
            "2026-03-30T00:30:00.000Z",  // 02:30 CEST
        })
    );
    EXPECT_EQ(
        dues_after(daily, "2026-10-24T12:00:00Z", 2),
        (std::vector<std::string>{
            "2026-10-25T00:30:00.000Z",  // 02:30 CEST, the first of two
            "2026-10-26T01:30:00.000Z",  // 02:30 CET
        })
    );
    const auto half = in_zone("*/30 * * * *", paris, "2026-03-01T00:00:00Z");
    EXPECT_EQ(
        dues_after(half, "2026-03-29T00:15:00Z", 3),
        (std::vector<std::string>{
            "2026-03-29T00:30:00.000Z",  // 01:30 CET
            "2026-03-29T01:00:00.000Z",  // 02:00 and 02:30 (skipped) and 03:00 CEST: once
            "2026-03-29T01:30:00.000Z",  // 03:30 CEST
        })
    );
    EXPECT_EQ(
        dues_after(half, "2026-10-24T23:45:00Z", 4),
        (std::vector<std::string>{
            "2026-10-25T00:00:00.000Z",  // 02:00 CEST
            "2026-10-25T00:30:00.000Z",  // 02:30 CEST
            "2026-10-25T02:00:00.000Z",  // 03:00 CET: 02:00 and 02:30 CET were seen already
            "2026-10-25T02:30:00.000Z",
        })
    );
}

// --- TZif files -----------------------------------------------------------------------------

void be(std::string& out, std::uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; --i) {
        out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    }
}

/// A version-2 TZif file: two types (+1 h, +2 h), `times` alternating into them, a footer.
std::string tzif(const std::vector<std::int64_t>& times, const std::string& footer) {
    auto block = [&](int time_size) {
        std::string b = "TZif2";
        b.append(15, '\0');
        for (auto n : {0, 0, 0, static_cast<int>(times.size()), 2, 8}) {
            be(b, static_cast<std::uint64_t>(n), 4);
        }
        for (auto t : times) {
            be(b, static_cast<std::uint64_t>(t), time_size);
        }
        for (std::size_t i = 0; i < times.size(); ++i) {
            b.push_back(static_cast<char>(i % 2 == 0 ? 1 : 0));
        }
        be(b, 3600, 4);
        b += std::string("\0\0", 2);
        be(b, 7200, 4);
        b += std::string("\1\4", 2);
        b += std::string("CET\0CEST", 8);
        return b;
    };
    return block(4) + block(8) + "\n" + footer + "\n";
}

TEST(Zone, ReadsTzifFiles) {
    const std::vector<std::int64_t> times = {
        secs("2026-03-29T01:00:00Z"), secs("2026-10-25T01:00:00Z")};
    auto z = parse_tzif("Test/Zone", tzif(times, paris_rule));
    ASSERT_TRUE(z) << z.error().message;
    EXPECT_EQ(z->name, "Test/Zone");
    EXPECT_EQ(z->transitions, times);
    EXPECT_EQ(z->offsets, (std::vector<std::int32_t>{7200, 3600}));
    EXPECT_EQ(z->initial_offset, 3600);
    EXPECT_EQ(z->offset_at(secs("2026-05-01T00:00:00Z")), 7200);
    EXPECT_EQ(z->offset_at(secs("2040-07-01T00:00:00Z")), 7200);  // from the footer's rule
    EXPECT_EQ(z->offset_at(secs("2040-12-01T00:00:00Z")), 3600);
    // Garbage is refused with a reason, never read past its end.
    EXPECT_FALSE(parse_tzif("x", ""));
    EXPECT_FALSE(parse_tzif("x", "TZif2"));
    const auto whole = tzif(times, paris_rule);
    for (std::size_t cut = 0; cut + 30 < whole.size(); cut += 7) {
        EXPECT_FALSE(parse_tzif("x", whole.substr(0, cut))) << cut;
    }
    EXPECT_FALSE(parse_tzif("x", tzif(times, "nonsense,")));
    EXPECT_FALSE(parse_tzif("x", tzif({times[1], times[0]}, paris_rule)));  // not ascending
}

TEST(Zone, NamesAreTzDatabaseNames) {
    for (const auto* ok : {"UTC", "Europe/Paris", "America/Argentina/Buenos_Aires", "Etc/GMT+5"}) {
        EXPECT_TRUE(is_valid_zone_name(ok)) << ok;
    }
    for (const auto* bad :
         {"", "/etc/passwd", "../x", "Europe/../x", "Europe//Paris", "a b", "Europe/"}) {
        EXPECT_FALSE(is_valid_zone_name(bad)) << bad;
    }
}

TEST(Zone, ReadsTheMachinesTzDatabase) {
    // tools/install-deps.sh installs tzdata.
    const char* dir = std::getenv("TZDIR");
    const std::string path =
        std::string(dir != nullptr ? dir : "/usr/share/zoneinfo") + "/Europe/Paris";
    std::ifstream in(path, std::ios::binary);
    ASSERT_TRUE(in) << path << " is missing: install tzdata";
    const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    auto z = parse_tzif("Europe/Paris", bytes);
    ASSERT_TRUE(z) << z.error().message;
    EXPECT_EQ(z->offset_at(secs("2026-03-29T00:59:59Z")), 3600);
    EXPECT_EQ(z->offset_at(secs("2026-03-29T01:00:00Z")), 7200);
    EXPECT_EQ(z->offset_at(secs("2040-10-28T00:59:59Z")), 7200);
    EXPECT_EQ(z->offset_at(secs("2040-10-28T01:00:00Z")), 3600);
    EXPECT_EQ(z->offset_at(secs("1970-01-01T00:00:00Z")), 3600);
}

}  // namespace

}  // namespace ZKD_UNITY_ID
