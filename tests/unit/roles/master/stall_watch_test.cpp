// SPDX-License-Identifier: MIT
// stall_watch: which assignments a master takes back from a live worker that leaves them
// unstarted, and when that worker is suspect, probed and trusted again.
#include "roles/master/detail/stall_watch.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <string>
#include <vector>

namespace ZKD_UNITY_ID {

using namespace zkd::roles;
using std::chrono::milliseconds;
using clock_type = stall_watch::clock;

namespace {

stall_watch::assignment unstarted(const std::string& tid, std::int64_t age_ms) {
    stall_watch::assignment a;
    a.tid = tid;
    a.age_ms = age_ms;
    return a;
}

stall_watch::assignment running(const std::string& tid) {
    stall_watch::assignment a;
    a.tid = tid;
    a.running = true;
    return a;
}

stall_watch::assignment gone(const std::string& tid) {
    stall_watch::assignment a;
    a.tid = tid;
    a.gone = true;
    return a;
}

const clock_type::time_point t0 = clock_type::time_point{} + std::chrono::hours(1);

}  // namespace

TEST(StallWatch, OnlyWhatStaysListedAndIsNotKnownToRunIsRead) {
    stall_watch w(milliseconds(10'000));
    EXPECT_EQ(w.period(), milliseconds(5'000));
    EXPECT_TRUE(w.listed("w1", {"a", "b"}).empty()) << "first seen: too young to judge";
    EXPECT_EQ(w.listed("w1", {"a", "b", "c"}), (std::vector<std::string>{"a", "b"}));
    const auto v = w.read("w1", {running("a"), unstarted("b", 3'000)});
    EXPECT_TRUE(v.take_back.empty()) << "b is younger than the bound";
    EXPECT_EQ(w.listed("w1", {"a", "b", "c"}), (std::vector<std::string>{"b", "c"}))
        << "a runs: not read again while it is listed";
}

TEST(StallWatch, AnAssignmentUnstartedPastTheBoundIsTakenBackAndItsWorkerIsSuspect) {
    stall_watch w(milliseconds(10'000));
    EXPECT_TRUE(w.may_assign("w1", t0));
    w.listed("w1", {"a", "b"});
    w.listed("w1", {"a", "b"});
    const auto v = w.read("w1", {unstarted("a", 10'000), unstarted("b", 9'999)});
    EXPECT_EQ(v.take_back, std::vector<std::string>{"a"});
    EXPECT_TRUE(v.now_suspect);
    EXPECT_TRUE(w.suspect("w1"));
    EXPECT_EQ(w.suspects(), std::vector<std::string>{"w1"});
    // Suspect: once more unstarted is no news.
    EXPECT_FALSE(w.read("w1", {unstarted("b", 20'000)}).now_suspect);
    w.forget("w1");
    EXPECT_FALSE(w.suspect("w1"));
    EXPECT_TRUE(w.suspects().empty());
}

TEST(StallWatch, AWorkerThatRunsATaskIsNotSuspectForOneItNeverSaw) {
    // An assignment written without its change log is one the worker never saw: taken back,
    // but the worker marked another, so it works.
    stall_watch w(milliseconds(10'000));
    w.listed("w1", {"seen", "unlogged"});
    w.listed("w1", {"seen", "unlogged"});
    const auto v = w.read("w1", {running("seen"), unstarted("unlogged", 60'000)});
    EXPECT_EQ(v.take_back, std::vector<std::string>{"unlogged"});
    EXPECT_FALSE(v.now_suspect);
    EXPECT_FALSE(w.suspect("w1"));
}

TEST(StallWatch, ASuspectGetsOneProbeAtATimeAndIsTrustedOnceItRunsOrFinishesIt) {
    stall_watch w(milliseconds(10'000));
    w.listed("w1", {"a"});
    w.listed("w1", {"a"});
    ASSERT_TRUE(w.read("w1", {unstarted("a", 10'000)}).now_suspect);
    EXPECT_TRUE(w.may_assign("w1", t0)) << "no probe out yet";
    w.assigned("w1", "p1", t0);
    EXPECT_FALSE(w.may_assign("w1", t0 + milliseconds(60'000))) << "one probe at a time";
    // The probe's assignment failed: none is out, but the next waits out the bound.
    w.unassigned("w1", "p1");
    EXPECT_FALSE(w.may_assign("w1", t0 + milliseconds(9'999)));
    EXPECT_TRUE(w.may_assign("w1", t0 + milliseconds(10'000)));
    w.assigned("w1", "p2", t0 + milliseconds(10'000));
    // The probe left unstarted too: taken back, still suspect, the next probe later.
    EXPECT_TRUE(w.listed("w1", {"p2"}).empty());
    EXPECT_EQ(w.listed("w1", {"p2"}), std::vector<std::string>{"p2"});
    auto v = w.read("w1", {unstarted("p2", 10'000)});
    EXPECT_EQ(v.take_back, std::vector<std::string>{"p2"});
    EXPECT_FALSE(v.now_suspect);
    EXPECT_TRUE(w.suspect("w1"));
    EXPECT_TRUE(w.may_assign("w1", t0 + milliseconds(20'000)));
    // A probe done (gone from the directory) shows the worker works again.
    w.assigned("w1", "p3", t0 + milliseconds(20'000));
    EXPECT_EQ(w.listed("w1", {}), std::vector<std::string>{"p3"}) << "asks about the probe";
    v = w.read("w1", {gone("p3")});
    EXPECT_TRUE(v.trusted_again);
    EXPECT_FALSE(w.suspect("w1"));
    EXPECT_TRUE(w.may_assign("w1", t0 + milliseconds(20'001)));
}

TEST(StallWatch, ASuspectThatMarksATaskRunningIsTrustedAgain) {
    stall_watch w(milliseconds(10'000));
    w.listed("w1", {"a", "b"});
    w.listed("w1", {"a", "b"});
    ASSERT_TRUE(w.read("w1", {unstarted("a", 10'000), unstarted("b", 1'000)}).now_suspect);
    const auto v = w.read("w1", {running("b")});
    EXPECT_TRUE(v.trusted_again);
    EXPECT_FALSE(w.suspect("w1"));
}

}  // namespace ZKD_UNITY_ID
