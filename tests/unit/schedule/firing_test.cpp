// SPDX-License-Identifier: MIT
// A schedule's firings: due times, firing ids, and the master's decisions (misfire policies,
// --no-overlap, pause) at given moments (docs/protocol.md §12.2, §12.4).
#include "schedule/firing.hpp"

#include "protocol/delay.hpp"
#include "protocol/ids.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ZKD_UNITY_ID {

using namespace zkd::schedule;

namespace {

constexpr std::int64_t t0 = 1'800'000'000'000;  // 2027-01-15T08:00:00Z

schedule every(std::int64_t ms, misfire_policy m = misfire_policy::once) {
    schedule s;
    s.name = "s";
    s.every_ms = ms;
    s.type = "echo";
    s.client = "0a1b2c3d";
    s.created_ms = t0;
    s.last_due_ms = t0;
    s.misfire = m;
    return s;
}

schedule cron_at(std::string_view expr, misfire_policy m = misfire_policy::once) {
    auto s = every(0, m);
    s.every_ms = 0;
    s.cron = std::string(expr);
    s.cron_parsed = parse_cron(expr).value();
    return s;
}

std::vector<std::int64_t> dues(std::initializer_list<std::int64_t> offsets) {
    std::vector<std::int64_t> out;
    for (auto o : offsets) {
        out.push_back(t0 + o);
    }
    return out;
}

TEST(ScheduleFiring, EveryDueTimesFollowCreation) {
    auto s = every(1000);
    EXPECT_EQ(next_due(s, t0), t0 + 1000);
    EXPECT_EQ(next_due(s, t0 - 5000), t0 + 1000);  // never before creation
    EXPECT_EQ(next_due(s, t0 + 1000), t0 + 2000);
    EXPECT_EQ(next_due(s, t0 + 1999), t0 + 2000);
    EXPECT_EQ(prev_due(s, t0 + 999), std::nullopt);
    EXPECT_EQ(prev_due(s, t0 + 1000), t0 + 1000);
    EXPECT_EQ(prev_due(s, t0 + 2999), t0 + 2000);
}

TEST(ScheduleFiring, CronDueTimesAreAfterCreation) {
    auto s = cron_at("0 * * * *");  // t0 is on the hour
    EXPECT_EQ(next_due(s, t0), t0 + 3'600'000);
    EXPECT_EQ(prev_due(s, t0), std::nullopt);  // the creation minute is not due
    EXPECT_EQ(prev_due(s, t0 + 7'200'001), t0 + 7'200'000);
}

TEST(ScheduleFiring, IdsDeriveFromClientPriorityAndDueTime) {
    const auto id = firing_task_id("0a1b2c3d", 7, t0 + 1000);
    EXPECT_EQ(id, "t2-1800000001000-0a1b2c3d000000");
    EXPECT_TRUE(zkd::protocol::is_valid_task_id(id));
    EXPECT_EQ(firing_due("0a1b2c3d", id), t0 + 1000);
    EXPECT_EQ(firing_due("0a1b2c3e", id), std::nullopt);
    EXPECT_EQ(firing_due("0a1b2c3d", "t2-1800000001000-0a1b2c3d000001"), std::nullopt);
    EXPECT_EQ(firing_due("0a1b2c3d", "garbage"), std::nullopt);
    // The same schedule and due time: the same id, so a firing sent again creates the same node.
    EXPECT_EQ(firing_task_id("0a1b2c3d", 7, t0 + 1000), id);
    EXPECT_NE(firing_task_id("0a1b2c3d", 7, t0 + 2000), id);
}

TEST(ScheduleFiring, NothingDueWakesAtTheNextDueTime) {
    auto p = plan(every(1000), t0 + 500, previous_firing::idle);
    EXPECT_TRUE(p.fire.empty());
    EXPECT_FALSE(p.changes());
    EXPECT_EQ(p.last_due_ms, t0);
    EXPECT_EQ(p.wake_ms, t0 + 1000);
}

TEST(ScheduleFiring, OneDueTimeOnTimeFiresUnderEveryPolicy) {
    for (auto m : {misfire_policy::once, misfire_policy::skip, misfire_policy::all}) {
        auto p = plan(every(1000, m), t0 + 1003, previous_firing::idle);
        EXPECT_EQ(p.fire, dues({1000})) << to_string(m);
        EXPECT_EQ(p.missed, 0U);
        EXPECT_EQ(p.last_due_ms, t0 + 1000);
        EXPECT_EQ(p.wake_ms, t0 + 2000);
    }
}

TEST(ScheduleFiring, MisfireOnceFiresTheLatestMissed) {
    auto p = plan(every(1000, misfire_policy::once), t0 + 10'500, previous_firing::idle);
    EXPECT_EQ(p.fire, dues({10'000}));
    EXPECT_EQ(p.missed, 9U);
    EXPECT_EQ(p.last_due_ms, t0 + 10'000);
    EXPECT_EQ(p.wake_ms, t0 + 11'000);
    auto after = applied(every(1000), p);
    EXPECT_EQ(after.fired, 1U);
    EXPECT_EQ(after.missed, 9U);
    EXPECT_EQ(after.last_due_ms, t0 + 10'000);
    EXPECT_EQ(after.last_fired_ms, t0 + 10'000);
    // Decided again at once: nothing more.
    EXPECT_TRUE(plan(after, t0 + 10'500, previous_firing::idle).fire.empty());
}

TEST(ScheduleFiring, MisfireSkipFiresOnlyWhatIsOnTime) {
    // Ten due: none fires; the next due time will.
    auto p = plan(every(1000, misfire_policy::skip), t0 + 10'500, previous_firing::idle);
    EXPECT_TRUE(p.fire.empty());
    EXPECT_EQ(p.missed, 10U);
    EXPECT_EQ(p.last_due_ms, t0 + 10'000);
    EXPECT_EQ(p.wake_ms, t0 + 11'000);
    // Down for an hour with an hourly schedule: the one due is 30 min late: none fires.
    auto h = every(3'600'000, misfire_policy::skip);
    auto q = plan(h, t0 + 3'600'000 + 1'800'000, previous_firing::idle);
    EXPECT_TRUE(q.fire.empty());
    EXPECT_EQ(q.missed, 1U);
    EXPECT_EQ(q.last_due_ms, t0 + 3'600'000);
    EXPECT_EQ(q.wake_ms, t0 + 7'200'000);
    // Under `once` that late one fires.
    h.misfire = misfire_policy::once;
    EXPECT_EQ(plan(h, t0 + 5'400'000, previous_firing::idle).fire, dues({3'600'000}));
}

TEST(ScheduleFiring, MisfireAllFiresEachUpToTheBound) {
    auto p = plan(every(1000, misfire_policy::all), t0 + 3'200, previous_firing::idle);
    EXPECT_EQ(p.fire, dues({1000, 2000, 3000}));
    EXPECT_EQ(p.missed, 0U);
    auto big = plan(every(1000, misfire_policy::all), t0 + 1'000'000, previous_firing::idle);
    ASSERT_EQ(big.fire.size(), max_catch_up);
    EXPECT_EQ(big.fire.front(), t0 + 901'000);  // the latest 100
    EXPECT_EQ(big.fire.back(), t0 + 1'000'000);
    EXPECT_EQ(big.missed, 900U);
}

TEST(ScheduleFiring, CronMisfires) {
    auto s = cron_at("*/10 * * * *", misfire_policy::all);
    auto p = plan(s, t0 + 35LL * 60'000 + 10, previous_firing::idle);
    EXPECT_EQ(p.fire, dues({600'000, 1'200'000, 1'800'000}));
    EXPECT_EQ(p.wake_ms, t0 + 2'400'000);
    s.misfire = misfire_policy::once;
    p = plan(s, t0 + 35LL * 60'000 + 10, previous_firing::idle);
    EXPECT_EQ(p.fire, dues({1'800'000}));
    EXPECT_EQ(p.missed, 2U);
    s.misfire = misfire_policy::skip;
    p = plan(s, t0 + 35LL * 60'000 + 10, previous_firing::idle);
    EXPECT_TRUE(p.fire.empty());  // 5 minutes late
    EXPECT_EQ(p.missed, 3U);
    EXPECT_EQ(p.last_due_ms, t0 + 1'800'000);
}

TEST(ScheduleFiring, NoOverlapSkipsWhileThePreviousRuns) {
    auto s = every(1000);
    s.no_overlap = true;
    s.fired = 1;
    s.last_due_ms = t0 + 1000;
    auto busy = plan(s, t0 + 2001, previous_firing::busy);
    EXPECT_TRUE(busy.fire.empty());
    EXPECT_EQ(busy.skipped, 1U);
    EXPECT_EQ(busy.last_due_ms, t0 + 2000);
    EXPECT_TRUE(busy.changes());
    auto idle = plan(s, t0 + 2001, previous_firing::idle);
    EXPECT_EQ(idle.fire, dues({2000}));
    // Catching up under `all`, firings would overlap one another: only the latest fires.
    s.misfire = misfire_policy::all;
    auto all = plan(s, t0 + 5001, previous_firing::idle);
    EXPECT_EQ(all.fire, dues({5000}));
    EXPECT_EQ(all.skipped, 3U);
    EXPECT_EQ(all.missed, 0U);
}

TEST(ScheduleFiring, PausedDecidesNothing) {
    auto s = every(1000);
    s.paused = true;
    auto p = plan(s, t0 + 10'000, previous_firing::idle);
    EXPECT_FALSE(p.changes());
    EXPECT_EQ(p.wake_ms, std::nullopt);
    EXPECT_EQ(p.last_due_ms, t0);
    // Resumed: what passed meanwhile is a misfire.
    s.paused = false;
    p = plan(s, t0 + 10'000, previous_firing::idle);
    EXPECT_EQ(p.fire, dues({10'000}));
    EXPECT_EQ(p.missed, 9U);
}

TEST(ScheduleFiring, EachDueTimeIsDecidedOnceWhateverTheMomentsOfDecision) {
    // A master deciding at irregular moments (late, early, twice at the same time), under
    // `all`: every due time fires exactly once, in order.
    auto s = every(1000, misfire_policy::all);
    std::vector<std::int64_t> fired;
    for (std::int64_t now :
         {t0 + 10, t0 + 1000, t0 + 1000, t0 + 3500, t0 + 3999, t0 + 4000, t0 + 9001}) {
        auto p = plan(s, now, previous_firing::idle);
        fired.insert(fired.end(), p.fire.begin(), p.fire.end());
        s = applied(s, p);
    }
    std::vector<std::int64_t> want;
    for (int k = 1; k <= 9; ++k) {
        want.push_back(t0 + std::int64_t{k} * 1000);
    }
    EXPECT_EQ(fired, want);
    EXPECT_EQ(s.fired, 9U);
    EXPECT_EQ(s.missed, 0U);
}

}  // namespace

}  // namespace ZKD_UNITY_ID
