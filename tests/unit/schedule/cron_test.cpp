// SPDX-License-Identifier: MIT
// Cron expressions: parsing and its refusals, the next and previous matching minute
// (docs/protocol.md §12.1), Vixie cron's day-of-month/day-of-week rule.
#include "schedule/cron.hpp"

#include "protocol/delay.hpp"

#include <gtest/gtest.h>

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

cron_expr cron(std::string_view text) {
    auto c = parse_cron(text);
    EXPECT_TRUE(c) << text << ": " << (c ? "" : c.error().message);
    return c ? *c : cron_expr{};
}

std::string next_after(std::string_view expr, std::string_view t) {
    auto n = cron_next(cron(expr), at(t));
    return n ? format_time(*n) : "never";
}

std::string prev_at(std::string_view expr, std::string_view t) {
    auto n = cron_prev(cron(expr), at(t));
    return n ? format_time(*n) : "never";
}

std::string error_of(std::string_view text) {
    auto c = parse_cron(text);
    EXPECT_FALSE(c) << text;
    return c ? std::string{} : c.error().message;
}

TEST(Cron, ParsesFieldsListsRangesStepsAndNames) {
    auto c = cron("0,30 9-17/4 */10 jan-MAR,dec mon-fri");
    EXPECT_EQ(c.minutes.count(), 2U);
    EXPECT_TRUE(c.minutes.test(0) && c.minutes.test(30));
    EXPECT_EQ(c.hours.count(), 3U);  // 9, 13, 17
    EXPECT_TRUE(c.hours.test(9) && c.hours.test(13) && c.hours.test(17));
    EXPECT_EQ(c.days.count(), 4U);  // 1, 11, 21, 31
    EXPECT_TRUE(c.days.test(1) && c.days.test(31));
    EXPECT_EQ(c.months.count(), 4U);
    EXPECT_TRUE(c.months.test(1) && c.months.test(3) && c.months.test(12));
    EXPECT_EQ(c.weekdays.count(), 5U);
    EXPECT_FALSE(c.weekdays.test(0));
    EXPECT_TRUE(c.dom_star);
    EXPECT_FALSE(c.dow_star);
}

TEST(Cron, SundayIsZeroOrSeven) {
    EXPECT_EQ(cron("0 0 * * 7").weekdays, cron("0 0 * * 0").weekdays);
    EXPECT_EQ(cron("0 0 * * 5-7").weekdays.count(), 3U);
    EXPECT_TRUE(cron("0 0 * * 5-7").weekdays.test(0));
}

TEST(Cron, StartSlashStepRunsToTheFieldsEnd) {
    auto c = cron("5/20 * * * *");
    EXPECT_EQ(c.minutes.count(), 3U);  // 5, 25, 45
    EXPECT_TRUE(c.minutes.test(45));
}

TEST(Cron, Shorthands) {
    EXPECT_EQ(cron("@hourly"), cron("0 * * * *"));
    EXPECT_EQ(cron("@daily"), cron("0 0 * * *"));
    EXPECT_EQ(cron("@midnight"), cron("0 0 * * *"));
    EXPECT_EQ(cron("@weekly"), cron("0 0 * * 0"));
    EXPECT_EQ(cron("@monthly"), cron("0 0 1 * *"));
    EXPECT_EQ(cron("@yearly"), cron("0 0 1 1 *"));
    EXPECT_EQ(cron("@annually"), cron("0 0 1 1 *"));
}

TEST(Cron, RefusesWithTheFieldAndTheReason) {
    EXPECT_EQ(
        error_of("* * * *"),
        "a cron expression has 5 fields (minute hour day-of-month month day-of-week), not 4"
    );
    EXPECT_EQ(error_of("60 * * * *"), "cron field minute \"60\": 60 is out of 0-59");
    EXPECT_EQ(error_of("* 24 * * *"), "cron field hour \"24\": 24 is out of 0-23");
    EXPECT_EQ(error_of("* * 0 * *"), "cron field day of month \"0\": 0 is out of 1-31");
    EXPECT_EQ(error_of("* * * 13 *"), "cron field month \"13\": 13 is out of 1-12");
    EXPECT_EQ(error_of("* * * * 8"), "cron field day of week \"8\": 8 is out of 0-7");
    EXPECT_EQ(error_of("* * * foo *"), "cron field month \"foo\": \"foo\" is no number or name");
    EXPECT_EQ(
        error_of("*/0 * * * *"), "cron field minute \"*/0\": the step \"0\" is no positive number"
    );
    EXPECT_EQ(error_of("5-2 * * * *"), "cron field minute \"5-2\": the range 5-2 runs backwards");
    EXPECT_EQ(error_of("1,,2 * * * *"), "cron field minute \"1,,2\": an empty item in the list");
    EXPECT_EQ(error_of("1, * * * *"), "cron field minute \"1,\": an empty item in the list");
    EXPECT_EQ(error_of("x * * * *"), "cron field minute \"x\": \"x\" is no number");
    EXPECT_NE(error_of("@often").find("unknown cron shorthand"), std::string::npos);
    EXPECT_NE(error_of("").find("not 0"), std::string::npos);
    EXPECT_NE(error_of("* * * * * *").find("not 6"), std::string::npos);
}

TEST(Cron, NextIsStrictlyAfter) {
    EXPECT_EQ(next_after("* * * * *", "2026-11-27T08:30:00Z"), "2026-11-27T08:31:00.000Z");
    EXPECT_EQ(next_after("* * * * *", "2026-11-27T08:30:59.999Z"), "2026-11-27T08:31:00.000Z");
    EXPECT_EQ(next_after("*/15 * * * *", "2026-11-27T08:30:00Z"), "2026-11-27T08:45:00.000Z");
    EXPECT_EQ(next_after("0 9 * * *", "2026-11-27T09:00:00Z"), "2026-11-28T09:00:00.000Z");
}

TEST(Cron, NextCrossesDaysMonthsYearsAndLeapDays) {
    EXPECT_EQ(next_after("30 2 * * *", "2026-11-27T08:30:00Z"), "2026-11-28T02:30:00.000Z");
    EXPECT_EQ(next_after("0 0 1 * *", "2026-12-15T00:00:00Z"), "2027-01-01T00:00:00.000Z");
    EXPECT_EQ(next_after("0 0 31 * *", "2026-11-27T00:00:00Z"), "2026-12-31T00:00:00.000Z");
    EXPECT_EQ(next_after("0 0 31 * *", "2027-01-31T00:00:00Z"), "2027-03-31T00:00:00.000Z");
    EXPECT_EQ(next_after("0 12 29 2 *", "2026-11-27T00:00:00Z"), "2028-02-29T12:00:00.000Z");
    EXPECT_EQ(next_after("0 0 1 jan *", "2026-11-27T00:00:00Z"), "2027-01-01T00:00:00.000Z");
    EXPECT_EQ(next_after("59 23 31 12 *", "2026-12-31T23:59:00Z"), "2027-12-31T23:59:00.000Z");
}

TEST(Cron, NeverMatchingFindsNothing) {
    EXPECT_EQ(next_after("0 0 30 2 *", "2026-11-27T00:00:00Z"), "never");
    EXPECT_EQ(next_after("0 0 31 4 *", "2026-11-27T00:00:00Z"), "never");
    EXPECT_EQ(prev_at("0 0 31 11 *", "2026-11-27T00:00:00Z"), "never");
}

TEST(Cron, DayOfMonthOrDayOfWeekWhenBothAreRestricted) {
    // 2026-11-27 is a Friday. "1st of the month or any Monday": the next Monday comes
    // before the 1st.
    EXPECT_EQ(next_after("0 0 1 * mon", "2026-11-27T00:00:00Z"), "2026-11-30T00:00:00.000Z");
    EXPECT_EQ(next_after("0 0 1 * mon", "2026-11-30T00:00:00Z"), "2026-12-01T00:00:00.000Z");
    EXPECT_EQ(next_after("0 0 1 * mon", "2026-12-01T00:00:00Z"), "2026-12-07T00:00:00.000Z");
    // With either field a star (even stepped), both must match: Fridays only among the odd days.
    EXPECT_EQ(next_after("0 0 */2 * fri", "2026-11-27T00:00:00Z"), "2026-12-11T00:00:00.000Z");
    EXPECT_EQ(next_after("0 0 * * fri", "2026-11-27T00:00:00Z"), "2026-12-04T00:00:00.000Z");
    EXPECT_EQ(next_after("0 0 13 * *", "2026-11-27T00:00:00Z"), "2026-12-13T00:00:00.000Z");
    // Friday the 13th in Vixie cron is "the 13th or any Friday".
    EXPECT_EQ(next_after("0 0 13 * 5", "2026-11-27T00:00:00Z"), "2026-12-04T00:00:00.000Z");
}

TEST(Cron, PrevIsAtOrBefore) {
    EXPECT_EQ(prev_at("* * * * *", "2026-11-27T08:30:00Z"), "2026-11-27T08:30:00.000Z");
    EXPECT_EQ(prev_at("* * * * *", "2026-11-27T08:30:59.999Z"), "2026-11-27T08:30:00.000Z");
    EXPECT_EQ(prev_at("*/15 * * * *", "2026-11-27T08:44:59Z"), "2026-11-27T08:30:00.000Z");
    EXPECT_EQ(prev_at("0 9 * * *", "2026-11-27T08:59:00Z"), "2026-11-26T09:00:00.000Z");
    EXPECT_EQ(prev_at("0 0 31 * *", "2026-12-30T00:00:00Z"), "2026-10-31T00:00:00.000Z");
    EXPECT_EQ(prev_at("0 12 29 2 *", "2026-11-27T00:00:00Z"), "2024-02-29T12:00:00.000Z");
    EXPECT_EQ(prev_at("0 0 1 * mon", "2026-11-29T00:00:00Z"), "2026-11-23T00:00:00.000Z");
}

TEST(Cron, NextAndPrevAgreeWithMatchesMinuteByMinute) {
    // Every minute of a week: next(t) is the first matching minute after t, prev its mirror.
    for (const auto* expr : {"*/7 3-5,22 * * *", "0 0 1,15 * wed", "15 */6 * feb,nov sat,sun"}) {
        const auto c = cron(expr);
        const auto start = at("2026-11-25T00:00:00Z");
        for (std::int64_t t = start; t < start + 7LL * 24 * 3600 * 1000; t += 60'000) {
            auto n = cron_next(c, t - 1);
            ASSERT_TRUE(n) << expr;
            EXPECT_EQ(*n == t, cron_matches(c, t)) << expr << " at " << format_time(t);
            auto p = cron_prev(c, t);
            ASSERT_TRUE(p) << expr;
            EXPECT_EQ(*p == t, cron_matches(c, t)) << expr << " at " << format_time(t);
            EXPECT_TRUE(cron_matches(c, *n));
            EXPECT_TRUE(cron_matches(c, *p));
        }
    }
}

}  // namespace

}  // namespace ZKD_UNITY_ID
