// SPDX-License-Identifier: MIT
// When the reference worker publishes a running bundle's finished tasks early
// (roles/worker/detail/early_results.hpp, docs/protocol.md §6 T4e "When").
#include "roles/worker/detail/early_results.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace ZKD_UNITY_ID {

using namespace zkd::roles;
using namespace std::chrono_literals;

namespace {

const early_task::time_point t0 = early_task::time_point{} + 1h;

early_task open() {
    return early_task{};
}
early_task ended(early_task::time_point at, bool final = true) {
    early_task t;
    t.open = false;
    t.final = final;
    t.ended = at;
    return t;
}

}  // namespace

TEST(EarlyResultsPolicy, NothingWhileEveryTaskRunsOrOnceNoneRuns) {
    EXPECT_TRUE(decide_early({open(), open()}, t0).publish.empty());
    EXPECT_FALSE(decide_early({open(), open()}, t0).wake);
    // All ended: the bundle's result carries them, however long ago they ended.
    const auto d = decide_early({ended(t0), ended(t0 + 5ms)}, t0 + 1s);
    EXPECT_TRUE(d.publish.empty());
    EXPECT_FALSE(d.wake);
}

TEST(EarlyResultsPolicy, AFinishedTaskWaitsTenMillisecondsForItsNeighbours) {
    EXPECT_EQ(early_publish_after, 10ms);
    const std::vector<early_task> tasks{ended(t0), open()};
    auto d = decide_early(tasks, t0 + 3ms);
    EXPECT_TRUE(d.publish.empty());
    ASSERT_TRUE(d.wake);
    EXPECT_EQ(*d.wake, t0 + 10ms);
    d = decide_early(tasks, t0 + 10ms);
    EXPECT_EQ(d.publish, (std::vector<std::size_t>{0}));
    EXPECT_FALSE(d.wake);
}

TEST(EarlyResultsPolicy, OneT4eTakesEveryFinishedUnpublishedTask) {
    std::vector<early_task> tasks{ended(t0), ended(t0 + 8ms), open(), ended(t0 + 2ms)};
    tasks[3].published = true;  // published by an earlier T4e
    auto d = decide_early(tasks, t0 + 9ms);
    ASSERT_TRUE(d.wake);
    EXPECT_EQ(*d.wake, t0 + 10ms) << "the earliest end counts";
    d = decide_early(tasks, t0 + 10ms);
    EXPECT_EQ(d.publish, (std::vector<std::size_t>{0, 1})) << "1 goes too, ended 2 ms ago";
}

TEST(EarlyResultsPolicy, AnEndARetryWouldRunAgainIsNeverPublished) {
    const std::vector<early_task> tasks{ended(t0, false), open(), ended(t0 + 20ms)};
    auto d = decide_early(tasks, t0 + 25ms);
    EXPECT_TRUE(d.publish.empty());
    ASSERT_TRUE(d.wake);
    EXPECT_EQ(*d.wake, t0 + 30ms);
    d = decide_early(tasks, t0 + 30ms);
    EXPECT_EQ(d.publish, (std::vector<std::size_t>{2}));
}

TEST(EarlyResultsPolicy, AtMostOneT4eInTenMilliseconds) {
    const std::vector<early_task> tasks{ended(t0), open(), ended(t0 + 1ms)};
    // A T4e went at t0 + 5 ms (for tasks since published): the next waits until t0 + 15 ms.
    auto d = decide_early(tasks, t0 + 12ms, t0 + 5ms);
    EXPECT_TRUE(d.publish.empty());
    ASSERT_TRUE(d.wake);
    EXPECT_EQ(*d.wake, t0 + 15ms);
    d = decide_early(tasks, t0 + 15ms, t0 + 5ms);
    EXPECT_EQ(d.publish, (std::vector<std::size_t>{0, 2}));
    // Long ago: only the tasks' own wait counts.
    EXPECT_EQ(decide_early(tasks, t0 + 10ms, t0 - 1s).publish, (std::vector<std::size_t>{0, 2}));
}

TEST(EarlyResultsPolicy, TheWaitIsAParameter) {
    const std::vector<early_task> tasks{ended(t0), open()};
    EXPECT_EQ(decide_early(tasks, t0, std::nullopt, 0ms).publish, (std::vector<std::size_t>{0}));
    EXPECT_TRUE(decide_early(tasks, t0 + 50ms, std::nullopt, 100ms).publish.empty());
}

TEST(EarlyResultsPolicy, ATaskTooLargeToPublishIsSkippedAndTheOthersStillGo) {
    // Sizes of each task's result, a T4e holding at most 100 of them.
    const std::vector<std::size_t> size{500, 30, 40, 50};
    const auto fits = [&](const std::vector<std::size_t>& ks) {
        std::size_t bytes = 0;
        for (const auto k : ks) {
            bytes += size[k];
        }
        return bytes <= 100;
    };
    const auto alone = [&](std::size_t k) { return size[k] <= 100; };
    EXPECT_EQ(fitting_tasks({0, 1, 2, 3}, alone, fits), (std::vector<std::size_t>{1, 2}))
        << "the first one is too large alone; the last one would go over with the others";
    EXPECT_EQ(fitting_tasks({1, 3}, alone, fits), (std::vector<std::size_t>{1, 3}));
    EXPECT_TRUE(fitting_tasks({0}, alone, fits).empty());
    EXPECT_TRUE(fitting_tasks({}, alone, fits).empty());
}

TEST(EarlyResultsPolicy, ABigBundlesFitIsFoundInFewEncodings) {
    // Each call of `fits` encodes a whole assignment (up to 512 KiB): with 1,000 finished
    // tasks, trying them one by one took the worker's event loop for seconds.
    std::vector<std::size_t> candidates(1000);
    for (std::size_t k = 0; k < candidates.size(); ++k) {
        candidates[k] = k;
    }
    int calls = 0;
    const auto fits = [&](const std::vector<std::size_t>& ks) {
        ++calls;
        return ks.size() <= 617;
    };
    const auto kept = fitting_tasks(
        candidates, [](std::size_t) { return true; }, fits
    );
    ASSERT_EQ(kept.size(), 617U);
    EXPECT_EQ(kept.front(), 0U);
    EXPECT_EQ(kept.back(), 616U);
    EXPECT_LE(calls, 12);
    calls = 0;
    EXPECT_EQ(
        fitting_tasks(
            {0, 1, 2}, [](std::size_t) { return true; }, fits
        )
            .size(),
        3U
    );
    EXPECT_EQ(calls, 1) << "all of them fit: one encoding";
}

TEST(EarlyResultsPolicy, ABigAssignmentIsRewrittenLessOften) {
    EXPECT_EQ(early_wait_for(0), early_publish_after);
    EXPECT_EQ(early_wait_for(16 * 1024 - 1), early_publish_after);
    EXPECT_EQ(early_wait_for(16 * 1024), early_publish_after + 10ms);
    EXPECT_EQ(early_wait_for(512 * 1024), early_publish_after + 320ms);
}

}  // namespace ZKD_UNITY_ID
