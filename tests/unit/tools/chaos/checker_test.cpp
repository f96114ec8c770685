// SPDX-License-Identifier: MIT
// zkd-chaos: the invariant checker over recorded runs (no server).
#include "chaos/checker.hpp"

#include "chaos/zk_log.hpp"

#include <boost/json.hpp>

#include <gtest/gtest.h>

#include <ctime>

namespace ZKD_UNITY_ID {

using namespace zkd::chaos;
using namespace std::chrono_literals;

namespace {

boost::json::value args_of(int k) {
    return boost::json::object{{"k", k}};
}

/// n tasks submitted every 10 ms from 0, each answered correctly 5 ms later.
recording clean_run(int n) {
    recording r;
    for (int k = 0; k < n; ++k) {
        const auto id = "t" + std::to_string(k);
        r.submitted.push_back({id, k * 10, args_of(k)});
        r.results.push_back({id, k * 10 + 5, "succeeded", args_of(k), "w1", 1});
    }
    r.end_ms = n * 10;
    return r;
}

}  // namespace

TEST(ChaosChecker, CleanRunPasses) {
    const auto rep = check(clean_run(100));
    EXPECT_TRUE(rep.ok()) << (rep.violations.empty() ? "" : rep.violations.front());
    EXPECT_EQ(rep.submitted, 100U);
    EXPECT_EQ(rep.correct, 100U);
    EXPECT_EQ(rep.lost + rep.duplicated + rep.wrong + rep.foreign, 0U);
    EXPECT_EQ(rep.longest_stall_ms, 5);
}

TEST(ChaosChecker, MissingResultIsLost) {
    auto r = clean_run(10);
    r.results.erase(r.results.begin() + 3);
    r.wait_errors["t3"] = "session expired";
    const auto rep = check(r);
    EXPECT_FALSE(rep.ok());
    EXPECT_EQ(rep.lost, 1U);
    EXPECT_EQ(rep.correct, 9U);
    ASSERT_FALSE(rep.violations.empty());
    EXPECT_NE(rep.violations.front().find("lost: t3"), std::string::npos);
    EXPECT_NE(rep.violations.front().find("session expired"), std::string::npos);
}

TEST(ChaosChecker, SecondResultOrLeftoverOfAnAnsweredTaskIsDuplicated) {
    auto r = clean_run(10);
    r.results.push_back({"t2", 200, "succeeded", args_of(2), "w2", 2});
    r.leftovers.results.push_back("t5");  // a second run of t5 wrote again after we consumed
    r.leftovers.result_info["t5"] = "succeeded, worker w1, attempt 1";
    const auto rep = check(r);
    bool shown = false;
    for (const auto& v : rep.violations) {
        shown = shown ||
                v == "duplicated: t5: 1 results read (worker w1, attempt 1), and another left in "
                     "/results after ours was consumed (succeeded, worker w1, attempt 1)";
    }
    EXPECT_TRUE(shown);
    EXPECT_FALSE(rep.ok());
    EXPECT_EQ(rep.duplicated, 2U);
    EXPECT_EQ(rep.leftover_results, 0U);  // counted as duplicates, not twice
    EXPECT_EQ(rep.correct, 8U);
}

TEST(ChaosChecker, SwappedWrongAndFailedResultsAreWrong) {
    auto r = clean_run(10);
    std::swap(r.results[1].value, r.results[2].value);  // results delivered to the wrong ids
    r.results[4].state = "lost";
    r.results.push_back({"t-unknown", 50, "succeeded", args_of(99), "w1", 1});
    const auto rep = check(r);
    EXPECT_EQ(rep.wrong, 3U);
    EXPECT_EQ(rep.foreign, 1U);
    EXPECT_EQ(rep.correct, 7U);
    EXPECT_FALSE(rep.ok());
}

TEST(ChaosChecker, LeftoversAndSubmitFailuresAreViolations) {
    auto r = clean_run(3);
    r.leftovers.pending.push_back("t1");
    r.leftovers.assigned.push_back("w1/t9");
    r.leftovers.results.push_back("t-other");
    r.submit_failures = 1;
    const auto rep = check(r);
    EXPECT_EQ(rep.leftover_pending, 1U);
    EXPECT_EQ(rep.leftover_assigned, 1U);
    EXPECT_EQ(rep.leftover_results, 1U);
    EXPECT_EQ(rep.violations.size(), 4U);
}

TEST(ChaosChecker, OnlyEndsChaosCausedAreClean) {
    auto r = clean_run(3);
    r.ends.push_back({"zkd1#1", -1, 9, true, ""});  // our SIGKILL
    r.ends.push_back({"zkd2#1", 0, 0, true, ""});   // exit 0 after our SIGTERM
    EXPECT_TRUE(check(r).ok());
    r.ends.push_back({"zkd3#1", -1, 6, false, ""});  // SIGABRT by itself
    r.ends.push_back({"zkd4#2", 0, 0, true, "==1==ERROR: AddressSanitizer: heap-use-after-free"});
    const auto rep = check(r);
    EXPECT_EQ(rep.crashes, 2U);
    EXPECT_FALSE(rep.ok());
}

TEST(ChaosChecker, LongestStallCountsOnlyTimeWithTasksOut) {
    std::vector<submitted_task> sub{{"a", 0, {}}, {"b", 100, {}}, {"c", 1000, {}}, {"d", 1010, {}}};
    std::vector<observed_result> res{
        {"a", 50, "succeeded", {}, "", 1},
        {"b", 400, "succeeded", {}, "", 1},
        {"b", 900, "succeeded", {}, "", 1},  // a duplicate: no progress
        {"c", 1100, "succeeded", {}, "", 1}};
    // Idle from 400 to 1000 is no stall; b waits 100..400 (300 after a's result at 50: 350);
    // d is never answered: from c's result at 1100 until the end at 3000.
    const auto [len, from] = longest_stall(sub, res, 3000);
    EXPECT_EQ(len, 1900);
    EXPECT_EQ(from, 1100);
    res.push_back({"d", 1500, "succeeded", {}, "", 1});
    const auto [len2, from2] = longest_stall(sub, res, 3000);
    EXPECT_EQ(len2, 400);  // 1100 .. 1500
    EXPECT_EQ(from2, 1100);
}

TEST(ChaosChecker, RecoveryIsTheFirstResultOfATaskSubmittedAfterTheFault) {
    auto r = clean_run(10);    // submits at 0..90, results 5 ms later
    r.results[6].at_ms = 300;  // t6 (submitted at 60) waits until 300
    injected_fault f;
    f.planned.kind = fault_kind::zk_kill;
    f.at_ms = 55;
    f.served_again_ms = 255;
    r.faults.push_back(f);
    injected_fault skipped;
    skipped.planned.kind = fault_kind::master_kill;
    skipped.skipped = true;
    r.faults.push_back(skipped);
    const auto rep = check(r);
    ASSERT_EQ(rep.timeline.size(), 2U);
    ASSERT_TRUE(rep.timeline[0].recovery_ms);
    EXPECT_EQ(*rep.timeline[0].recovery_ms, 75 - 55);  // t7 at 70+5, before t6's 300
    EXPECT_EQ(rep.timeline[0].served_after_ms, 200);
    EXPECT_EQ(rep.faults_by_kind.at("zk-kill"), 1U);
    EXPECT_EQ(rep.faults_skipped, 1U);
}

TEST(ChaosZkLog, PhasesOfTheLastStart) {
    const std::string log =
        "===== zk_local: starting ZooKeeper server 2 =====\n"
        "2026-11-23 21:28:40,000 INFO  [myid:] - Reading configuration from: zoo.cfg\n"
        "2026-11-23 21:28:41,605 INFO  [myid:2] - Peer state changed: following - broadcast\n"
        "===== zk_local: starting ZooKeeper server 2 =====\n"
        "2026-11-23 21:28:49,332 INFO  [myid:] [main:QuorumPeerConfig@177] - Reading configuration "
        "from: zoo.cfg\n"
        "2026-11-23 21:28:50,091 INFO  [myid:2] [main:ZKDatabase@289] - Snapshot loaded in 274 ms, "
        "highest zxid is 0x1\n"
        "2026-11-23 21:28:50,137 INFO  [myid:2] [QuorumPeer[myid=2]:QuorumPeer@1455] - LOOKING\n"
        "2026-11-23 21:28:50,177 INFO  [myid:2] [QuorumPeer[myid=2]:QuorumPeer@903] - Peer state "
        "changed: following\n"
        "2026-11-23 21:28:50,268 INFO  [myid:2] [QuorumPeer@922] - Peer state changed: following - "
        "synchronization - diff\n"
        "2026-11-23 21:28:50,486 INFO  [myid:2] [QuorumPeer@917] - Peer state changed: following - "
        "broadcast\n";
    // The process started 900 ms before its first line (whatever the local time zone).
    std::tm tm{};
    tm.tm_year = 2026 - 1900;
    tm.tm_mon = 10;
    tm.tm_mday = 23;
    tm.tm_hour = 21;
    tm.tm_min = 28;
    tm.tm_sec = 49;
    tm.tm_isdst = -1;
    const std::int64_t first = static_cast<std::int64_t>(std::mktime(&tm)) * 1000 + 332;
    const auto p = parse_restart(log, first - 900);
    EXPECT_EQ(p.jvm_ms, 900);
    EXPECT_EQ(p.load_ms, 805);
    EXPECT_EQ(p.snapshot_ms, 274);
    EXPECT_EQ(p.election_ms, 40);
    EXPECT_EQ(p.sync_ms, 309);
    EXPECT_EQ(p.sync_kind, "diff");
    EXPECT_EQ(
        describe(p), "jvm 0.90s, load 0.81s (snapshot 0.27s), election 0.04s, sync 0.31s (diff)"
    );
    EXPECT_EQ(describe(parse_restart("no marker here\n", 0)), "phases not in the log");
    // The first of two starts: its lines only, up to the second marker.
    EXPECT_EQ(count_starts(log), 2U);
    const auto first_start = parse_restart(log, first - 9'332 - 500, 1);  // its line: 21:28:40,000
    EXPECT_EQ(first_start.jvm_ms, 500);
    EXPECT_EQ(first_start.load_ms, std::nullopt);  // no LOOKING before the second marker
    EXPECT_EQ(parse_restart(log, first - 900, 2), p);
}

}  // namespace ZKD_UNITY_ID
