// SPDX-License-Identifier: MIT
// When the workflow engine reads the workers' view again (roles/workflow/detail/read_gate.hpp).
#include "roles/workflow/detail/read_gate.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

namespace ZKD_UNITY_ID {

namespace {

using zkd::roles::detail::read_gate;
using namespace std::chrono_literals;

TEST(WorkflowReadGate, OneReadAtATimeAndNoneWhileTheLastIsRecent) {
    read_gate g(1000ms);
    const auto t0 = read_gate::clock::time_point{} + 1h;
    {
        auto first = g.begin(t0);
        ASSERT_TRUE(first);
        EXPECT_TRUE(g.reading());
        EXPECT_FALSE(g.begin(t0 + 5s)) << "a second read while the first is out";
        first->done();
    }
    EXPECT_FALSE(g.reading());
    EXPECT_FALSE(g.begin(t0 + 999ms)) << "the last read is recent";
    EXPECT_TRUE(g.begin(t0 + 1000ms));
}

TEST(WorkflowReadGate, AReadThatEndsWithoutDoneLeavesTheGateOpen) {
    read_gate g(1000ms);
    const auto t0 = read_gate::clock::time_point{} + 1h;
    {
        // Its coroutine cancelled, or destroyed while the read is out: the ticket dies
        // without done().
        auto t = g.begin(t0);
        ASSERT_TRUE(t);
    }
    EXPECT_FALSE(g.reading());
    EXPECT_TRUE(g.begin(t0 + 1ms)) << "a read that did not end counts as not made";
}

TEST(WorkflowReadGate, AReadThrownThroughLeavesTheGateOpen) {
    read_gate g(1000ms);
    const auto t0 = read_gate::clock::time_point{} + 1h;
    EXPECT_THROW(
        {
            auto t = g.begin(t0);
            ASSERT_TRUE(t);
            throw std::runtime_error("the read threw");
        },
        std::runtime_error
    );
    EXPECT_FALSE(g.reading());
    EXPECT_TRUE(g.begin(t0));
}

TEST(WorkflowReadGate, StaleAsksForAReadAtOnceAndAMovedTicketEndsOnce) {
    read_gate g(1000ms);
    const auto t0 = read_gate::clock::time_point{} + 1h;
    {
        auto t = g.begin(t0);
        ASSERT_TRUE(t);
        auto moved = std::move(*t);
        t.reset();  // the moved-from ticket ends nothing
        EXPECT_TRUE(g.reading());
        moved.done();
    }
    EXPECT_FALSE(g.begin(t0 + 1ms));
    g.stale();
    EXPECT_TRUE(g.begin(t0 + 1ms));
}

}  // namespace

}  // namespace ZKD_UNITY_ID
