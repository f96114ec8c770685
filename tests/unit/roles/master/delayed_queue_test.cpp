// SPDX-License-Identifier: MIT
// The master's delayed tasks (docs/protocol.md §6 T10): due times from logs and ids, one
// earliest time to wait for, what is due handed out once.
#include "roles/master/detail/delayed_queue.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ZKD_UNITY_ID {

using zkd::roles::delayed_queue;

namespace {

// A task id whose time (its due time, as a delayed submit makes it) is `ms`.
std::string tid(std::int64_t ms, int n = 0) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "t4-%013lld-3fa9c2d1%06x", static_cast<long long>(ms), n);
    return buf;
}

std::vector<std::string> names(const std::vector<delayed_queue::due_task>& d) {
    std::vector<std::string> out;
    for (const auto& t : d) {
        out.push_back(t.name);
    }
    return out;
}

TEST(DelayedQueue, NothingWaitsWhenEmpty) {
    delayed_queue q;
    EXPECT_FALSE(q.next_due().has_value());
    EXPECT_TRUE(q.take_due(1'000'000, 10).empty());
}

TEST(DelayedQueue, HandsOutInDueOrderAndOnlyOnceDue) {
    delayed_queue q;
    q.logged(1, tid(3000), 3000);
    q.logged(2, tid(1000), 1000);
    q.logged(1, tid(2000), 2000);
    EXPECT_EQ(q.next_due(), 1000);
    EXPECT_TRUE(q.take_due(999, 10).empty());  // never before its time
    EXPECT_EQ(names(q.take_due(2000, 10)), (std::vector{tid(1000), tid(2000)}));
    EXPECT_EQ(q.next_due(), 3000);  // the ones in flight do not count
    EXPECT_TRUE(q.in_flight(tid(1000)));
    EXPECT_TRUE(q.take_due(2500, 10).empty());  // not again
    EXPECT_EQ(q.size(), 3U);
}

TEST(DelayedQueue, TakesAtMostAsAsked) {
    delayed_queue q;
    for (int i = 0; i < 5; ++i) {
        q.logged(0, tid(100 + i), 100 + i);
    }
    EXPECT_EQ(q.take_due(1000, 2).size(), 2U);
    EXPECT_EQ(q.take_due(1000, 10).size(), 3U);
}

TEST(DelayedQueue, ListedNamesAreDueNoEarlierThanTheirIdsTime) {
    delayed_queue q;
    q.listed(3, {tid(5000), tid(4000, 1)});
    EXPECT_EQ(q.next_due(), 4000);
    EXPECT_EQ(q.shard_of(tid(5000)), 3U);
    // A name that is no task id says nothing: it is read at once.
    q.listed(4, {"garbage"});
    EXPECT_EQ(q.next_due(), 0);
}

TEST(DelayedQueue, ALaterDueFoundInTheDataWaitsTillThen) {
    delayed_queue q;
    q.listed(0, {tid(1000)});  // a retry: its id is older than its due time
    const auto due = q.take_due(1500, 10);
    ASSERT_EQ(names(due), std::vector{tid(1000)});
    q.set_due(tid(1000), 9000);  // its data said 9000
    EXPECT_FALSE(q.in_flight(tid(1000)));
    EXPECT_EQ(q.next_due(), 9000);
    EXPECT_TRUE(q.take_due(8999, 10).empty());
    EXPECT_EQ(q.take_due(9000, 10).size(), 1U);
}

TEST(DelayedQueue, ALoggedDueBeatsTheIdsTime) {
    delayed_queue q;
    q.logged(0, tid(1000), 7000);
    EXPECT_EQ(q.next_due(), 7000);
    q.logged(0, tid(1000), 1000);  // known: left as it is
    EXPECT_EQ(q.next_due(), 7000);
}

TEST(DelayedQueue, ForgottenAndUnlistedTasksAreNeverHandedOut) {
    delayed_queue q;
    q.logged(0, tid(100), 100);
    q.logged(0, tid(200), 200);
    q.logged(1, tid(300), 300);
    q.forget(tid(100));  // cancelled
    q.listed(0, {});     // tid(200) deleted by someone; shard 1 untouched
    EXPECT_FALSE(q.contains(tid(200)));
    EXPECT_EQ(names(q.take_due(1000, 10)), std::vector{tid(300)});
}

TEST(DelayedQueue, AListingKeepsWhatIsInFlight) {
    delayed_queue q;
    q.logged(0, tid(100), 100);
    ASSERT_EQ(q.take_due(100, 10).size(), 1U);
    q.listed(0, {});  // its release may be out: its answer decides
    EXPECT_TRUE(q.contains(tid(100)));
}

TEST(DelayedQueue, PutBackWaitsForTheRetryTime) {
    delayed_queue q;
    q.logged(0, tid(100), 100);
    ASSERT_EQ(q.take_due(100, 10).size(), 1U);
    q.put_back(tid(100), 600);
    EXPECT_EQ(q.next_due(), 600);
}

TEST(DelayedQueue, StaleSlotsDoNotPileUp) {
    delayed_queue q;
    for (int i = 0; i < 1000; ++i) {
        q.logged(0, tid(1000 + i, i), 1000 + i);
    }
    for (int i = 0; i < 990; ++i) {
        q.forget(tid(1000 + i, i));
    }
    EXPECT_EQ(q.size(), 10U);
    EXPECT_LE(q.heap_size(), 64U);
    EXPECT_EQ(q.next_due(), 1990);
}

}  // namespace

}  // namespace ZKD_UNITY_ID
