// SPDX-License-Identifier: MIT
// The bound on pending tasks without ZooKeeper (roles/queue_bound.hpp): whether a submit
// fits, and what a client knows of the bound and the count between its reads.
#include "protocol/queue_bound.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

namespace ZKD_UNITY_ID {

using namespace zkd::protocol;
using namespace std::chrono_literals;

namespace {

constexpr auto u64_max = std::numeric_limits<std::uint64_t>::max();

TEST(QueueBound, FitsUpToTheBoundInclusive) {
    EXPECT_TRUE(fits(0, 5, 5));
    EXPECT_TRUE(fits(4, 1, 5));
    EXPECT_FALSE(fits(5, 1, 5));
    EXPECT_FALSE(fits(3, 3, 5));
    EXPECT_FALSE(fits(0, 6, 5));  // one submit over the bound by itself
    EXPECT_TRUE(fits(5, 0, 5));   // nothing to add
    EXPECT_FALSE(fits(7, 0, 5));  // already past it (other clients): still nothing new fits
    EXPECT_FALSE(fits(7, 1, 5));
}

TEST(QueueBound, ZeroIsNoBound) {
    EXPECT_TRUE(fits(0, 1, 0));
    EXPECT_TRUE(fits(u64_max, u64_max, 0));
}

TEST(QueueBound, NoSumWraps) {
    EXPECT_FALSE(fits(u64_max, 2, 10));
    EXPECT_FALSE(fits(2, u64_max, 10));
    EXPECT_TRUE(fits(u64_max - 1, 1, u64_max));
    EXPECT_FALSE(fits(u64_max, 1, u64_max));
}

TEST(QueueBound, PublishedBoundIsAJsonInt64) {
    EXPECT_EQ(published_bound(0), 0);
    EXPECT_EQ(published_bound(default_max_pending), 1'000'000);
    EXPECT_EQ(published_bound(u64_max), std::numeric_limits<std::int64_t>::max());
}

TEST(PendingGauge, StaleUntilReadThenForMaxAge) {
    pending_gauge g(1s);
    const auto t0 = pending_gauge::clock::time_point() + 100s;
    EXPECT_TRUE(g.stale(t0));
    EXPECT_TRUE(g.wants_counts());  // the bound is not known yet: count with the first read
    g.read(5, 2, t0);
    EXPECT_FALSE(g.stale(t0));
    EXPECT_FALSE(g.stale(t0 + 999ms));
    EXPECT_TRUE(g.stale(t0 + 1s));
}

TEST(PendingGauge, CountsItsOwnSubmitsUntilTheNextRead) {
    pending_gauge g;
    const auto t0 = pending_gauge::clock::time_point() + 100s;
    g.read(5, 2, t0);
    auto c = g.admit(2);
    EXPECT_TRUE(c.admitted);
    EXPECT_EQ(c.pending, 2U);
    EXPECT_EQ(c.adding, 2U);
    EXPECT_EQ(c.bound, 5U);
    c = g.admit(1);  // 4 + 1 = 5: still within
    EXPECT_TRUE(c.admitted);
    EXPECT_EQ(c.pending, 4U);
    c = g.admit(1);  // 5 + 1: full, and nothing counted for a refused submit
    EXPECT_FALSE(c.admitted);
    EXPECT_EQ(c.pending, 5U);
    c = g.admit(1);
    EXPECT_FALSE(c.admitted);
    EXPECT_EQ(c.pending, 5U);
    // Tasks drained: the next read says so, ours included in its count.
    g.read(5, 1, t0 + 2s);
    c = g.admit(4);
    EXPECT_TRUE(c.admitted);
    EXPECT_EQ(c.pending, 1U);
}

TEST(PendingGauge, NoMasterKeepsTheBoundKnown) {
    pending_gauge g;
    const auto t0 = pending_gauge::clock::time_point() + 100s;
    // A fresh client with no acting master knows of no bound.
    g.read(std::nullopt, 10, t0);
    EXPECT_TRUE(g.admit(100).admitted);
    // Then a master says 5; during a failover (no /master) the bound stays.
    g.read(5, 3, t0 + 2s);
    g.read(std::nullopt, 5, t0 + 4s);
    EXPECT_FALSE(g.admit(1).admitted);
    EXPECT_EQ(g.admit(1).bound, 5U);
}

TEST(PendingGauge, WithoutABoundOnlyMasterIsRead) {
    pending_gauge g;
    const auto t0 = pending_gauge::clock::time_point() + 100s;
    g.read(0, 7, t0);  // a master that says none (or an older one)
    EXPECT_FALSE(g.wants_counts());
    EXPECT_TRUE(g.admit(u64_max / 2).admitted);
    // Reads of /master alone keep it fresh while the bound stays 0.
    g.read(0, std::nullopt, t0 + 2s);
    EXPECT_FALSE(g.stale(t0 + 2s));
    // A bound appears: it is not relied on before the counts are read too.
    g.read(4, std::nullopt, t0 + 4s);
    EXPECT_TRUE(g.stale(t0 + 4s));
    EXPECT_TRUE(g.wants_counts());
    g.read(4, 4, t0 + 4s);
    EXPECT_FALSE(g.stale(t0 + 4s));
    EXPECT_FALSE(g.admit(1).admitted);
}

}  // namespace

}  // namespace ZKD_UNITY_ID
