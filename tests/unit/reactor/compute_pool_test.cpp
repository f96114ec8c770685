// SPDX-License-Identifier: MIT
#include "reactor/compute_pool.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <latch>
#include <stdexcept>
#include <thread>

namespace ZKD_UNITY_ID {

namespace {

using namespace std::chrono_literals;
using zkd::reactor::compute_pool;

// Waits (from a non-pool thread) until `cond` holds or a generous deadline passes.
bool eventually(const std::function<bool()>& cond) {
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (!cond()) {
        if (std::chrono::steady_clock::now() >= deadline)
            return false;
        std::this_thread::sleep_for(1ms);  // polling, not synchronizing
    }
    return true;
}

TEST(ReactorComputePool, DefaultSizeIsAtLeastOne) {
    compute_pool pool;
    EXPECT_GE(pool.size(), 1u);
    compute_pool three{3};
    EXPECT_EQ(three.size(), 3u);
}

TEST(ReactorComputePool, CountsQueuedRunningAndCompletedJobs) {
    compute_pool pool{2};
    std::latch release{1};
    std::atomic<int> started{0};
    for (int i = 0; i < 3; ++i) {
        pool.post([&] {
            ++started;
            release.wait();
        });
    }
    ASSERT_TRUE(eventually([&] { return pool.running() == 2 && pool.queued() == 1; }));
    EXPECT_EQ(pool.completed(), 0u);

    release.count_down();
    pool.join();
    EXPECT_EQ(started, 3);
    EXPECT_EQ(pool.running(), 0u);
    EXPECT_EQ(pool.queued(), 0u);
    EXPECT_EQ(pool.completed(), 3u);
}

TEST(ReactorComputePool, AThrowingJobDoesNotKillItsThread) {
    compute_pool pool{1};
    std::atomic<bool> after{false};
    pool.post([] { throw std::runtime_error("job failure (expected by the test)"); });
    pool.post([&] { after = true; });
    pool.join();
    EXPECT_TRUE(after);
    EXPECT_EQ(pool.completed(), 2u);
}

TEST(ReactorComputePool, StopDropsJobsThatHaveNotStarted) {
    std::atomic<bool> second_ran{false};
    std::latch release{1};
    {
        compute_pool pool{1};
        pool.post([&] { release.wait(); });
        pool.post([&] { second_ran = true; });
        ASSERT_TRUE(eventually([&] { return pool.running() == 1; }));
        pool.stop();
        EXPECT_TRUE(pool.stopped());
        release.count_down();
        pool.join();
        EXPECT_EQ(pool.running(), 0u);
    }  // the dropped job is destroyed here
    EXPECT_FALSE(second_ran);
}

}  // namespace

}  // namespace ZKD_UNITY_ID
