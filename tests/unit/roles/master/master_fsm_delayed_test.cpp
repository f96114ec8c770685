// SPDX-License-Identifier: MIT
// The master's delayed tasks, event by event (docs/protocol.md §6 "Delayed tasks and retries",
// T10): one wake-up for the earliest due, never a release before its time, the same bytes
// moved to pending, cancels of delayed tasks, and the failures of a release.
#include "master_fsm_fixture.hpp"
#include "protocol/delay.hpp"

#include <cstdio>

namespace zkd::roles::fsm_test {
namespace ZKD_UNITY_ID {

constexpr std::int64_t wall0 = 1'800'000'000'000;  // the fake wall clock's start

// A delayed task's id: its time is its due time (§4.3).
std::string delayed_tid(std::int64_t due, int n) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "t4-%013lld-3fa9c2d1%06d", static_cast<long long>(due), n);
    return buf;
}

std::string delayed_data(std::int64_t due) {
    return R"({"v":1,"type":"echo","args":"x","due_ms":)" + std::to_string(due) + "}";
}

// NOLINTNEXTLINE(readability-identifier-naming): gtest fixtures are CamelCase
struct MasterFsmDelayed : ::testing::Test {
    master_stats stats;
    clock_type::time_point t0 = clock_type::time_point{} + std::chrono::hours(1);
    std::int64_t wall = wall0;
    master_fsm view{protocol::layout{}, 7, make_options(), stats};

    master_fsm::options make_options() {
        master_fsm::options o;
        o.wall_ms = [this] { return wall; };
        return o;
    }

    MasterFsmDelayed() { list_all_shards(view, t0); }

    void list_all_delayed(std::uint32_t shard_with = 99, std::vector<std::string> names = {}) {
        for (std::uint32_t s = 0; s < protocol::layout{}.pending_shards; ++s) {
            view.on(delayed_listed{s, s == shard_with ? names : std::vector<std::string>{}}, t0);
        }
    }

    /// Decides at wall time `at` (the steady clock moved as much).
    master_step decide_at(std::int64_t at) {
        wall = at;
        return view.on(decide{}, t0 + milliseconds(at - wall0));
    }

    std::vector<std::string> read_now(const master_step& s) {
        std::vector<std::string> out;
        for (const auto& r : of_kind(s, std::type_identity<master_do::read_delayed>{})) {
            out.insert(out.end(), r.tids.begin(), r.tids.end());
        }
        return out;
    }
};

constexpr std::type_identity<master_do::release> release_kind{};

TEST_F(MasterFsmDelayed, WaitsForEveryDelayedShardBeforeReleasing) {
    const auto t = delayed_tid(wall0 - 10, 1);  // already due
    view.on(delayed_logged{3, {protocol::log_entry{t, std::nullopt, wall0 - 10}}}, t0);
    EXPECT_TRUE(read_now(decide_at(wall0)).empty());
    list_all_delayed(3, {t});  // the listing finds what the log named
    EXPECT_EQ(read_now(decide_at(wall0)), std::vector{t});
}

TEST_F(MasterFsmDelayed, OneWakeUpForTheEarliestAndNothingBefore) {
    list_all_delayed();
    const auto early = delayed_tid(wall0 + 5000, 1);
    const auto late = delayed_tid(wall0 + 9000, 2);
    view.on(
        delayed_logged{
            2,
            {protocol::log_entry{late, std::nullopt, wall0 + 9000},
             protocol::log_entry{early, std::nullopt, wall0 + 5000}}},
        t0
    );
    auto s = decide_at(wall0);
    EXPECT_TRUE(read_now(s).empty());
    ASSERT_TRUE(s.wake_at.has_value());
    EXPECT_EQ(*s.wake_at, t0 + milliseconds(5000));
    s = decide_at(wall0 + 4999);
    EXPECT_TRUE(read_now(s).empty());  // never early
    s = decide_at(wall0 + 5000);
    EXPECT_EQ(read_now(s), std::vector{early});
    EXPECT_EQ(*s.wake_at, t0 + milliseconds(9000));
}

TEST_F(MasterFsmDelayed, MovesTheSameBytesToPendingAndForgetsThem) {
    list_all_delayed();
    const auto t = delayed_tid(wall0, 1);
    view.on(delayed_logged{0, {protocol::log_entry{t, std::nullopt, wall0}}}, t0);
    ASSERT_EQ(read_now(decide_at(wall0)), std::vector{t});
    const auto data = delayed_data(wall0);
    const auto step = view.on(delayed_read{{task_read{t, task_read::status::ok, data, 0}}}, t0);
    const auto rel = of_kind(step, release_kind);
    ASSERT_EQ(rel.size(), 1U);
    ASSERT_EQ(rel[0].ops.size(), 2U);
    EXPECT_EQ(rel[0].ops[0].what, protocol::txn_op::kind::remove);
    EXPECT_EQ(rel[0].ops[0].path, protocol::layout{}.delayed_task(t));
    EXPECT_EQ(rel[0].ops[1].what, protocol::txn_op::kind::create);
    EXPECT_EQ(rel[0].ops[1].path, protocol::layout{}.pending_task(t));
    EXPECT_EQ(rel[0].ops[1].data, data);
    view.on(answered{rel[0], committed(2)}, t0);
    EXPECT_EQ(stats.released, 1U);
    EXPECT_EQ(view.delayed_count(), 0U);
    EXPECT_FALSE(decide_at(wall0 + 100'000).wake_at.has_value());
}

TEST_F(MasterFsmDelayed, AListedRetryIsReadAndWaitsForItsDataSaysWhen) {
    // A retry keeps its older id: the listing says only "no earlier than the id's time".
    const auto t = delayed_tid(wall0 - 60'000, 1);
    list_all_delayed(5, {t});
    ASSERT_EQ(read_now(decide_at(wall0)), std::vector{t});
    auto step = view.on(
        delayed_read{{task_read{t, task_read::status::ok, delayed_data(wall0 + 2000), 0}}}, t0
    );
    EXPECT_TRUE(of_kind(step, release_kind).empty());  // not before its time
    auto s = decide_at(wall0 + 1);
    EXPECT_TRUE(read_now(s).empty());
    EXPECT_EQ(*s.wake_at, t0 + milliseconds(2000));
    EXPECT_EQ(read_now(decide_at(wall0 + 2000)), std::vector{t});
}

TEST_F(MasterFsmDelayed, ReleasesInDueOrderInBatches) {
    list_all_delayed();
    std::vector<protocol::log_entry> entries;
    for (int i = 5; i >= 1; --i) {
        entries.push_back({delayed_tid(wall0 + i, i), std::nullopt, wall0 + i});
    }
    view.on(delayed_logged{1, entries}, t0);
    const auto read = read_now(decide_at(wall0 + 10));
    ASSERT_EQ(read.size(), 5U);
    for (int i = 0; i < 5; ++i) {
        EXPECT_EQ(read[i], delayed_tid(wall0 + i + 1, i + 1));
    }
}

TEST_F(MasterFsmDelayed, CancelsADelayedTask) {
    list_all_delayed();
    const auto t = delayed_tid(wall0 + 60'000, 1);
    view.on(delayed_logged{4, {protocol::log_entry{t, std::nullopt, wall0 + 60'000}}}, t0);
    view.on(cancels_listed{{t}}, t0);
    // Its node is read first (the result carries what it says of earlier tries).
    auto step = decide_at(wall0);
    EXPECT_TRUE(of_kind(step, kind::cancel).empty());
    ASSERT_EQ(read_now(step), std::vector{t});
    EXPECT_TRUE(read_now(decide_at(wall0 + 1)).empty()) << "read once";
    const auto data = R"({"v":1,"type":"echo","args":"x","attempt":1,"due_ms":)" +
                      std::to_string(wall0 + 60'000) +
                      R"(,"try":2,"errors":[{"try":1,"code":"handler_error","message":"m"}]})";
    step = view.on(delayed_read{{task_read{t, task_read::status::ok, data, 0}}}, t0);
    EXPECT_TRUE(of_kind(step, release_kind).empty()) << "not released: cancelled";
    const auto cancels = of_kind(step, kind::cancel);
    ASSERT_EQ(cancels.size(), 1U);
    EXPECT_EQ(cancels[0].path, protocol::layout{}.delayed_task(t));
    ASSERT_EQ(cancels[0].ops.size(), 3U);
    EXPECT_EQ(cancels[0].ops[0].path, protocol::layout{}.delayed_task(t));
    EXPECT_EQ(cancels[0].ops[1].path, protocol::layout{}.result(t));
    const auto result = protocol::decode_result(cancels[0].ops[1].data);
    ASSERT_TRUE(result);
    EXPECT_EQ(result->state, protocol::task_state::cancelled);
    EXPECT_EQ(result->attempt, 1);
    EXPECT_EQ(result->try_number, 2);
    EXPECT_EQ(result->errors.size(), 1U);
    view.on(answered{cancels[0], committed(3)}, t0);
    EXPECT_EQ(view.delayed_count(), 0U);
    EXPECT_EQ(stats.cancelled, 1U);
    // Its time comes and goes: nothing is read, nothing released.
    EXPECT_TRUE(read_now(decide_at(wall0 + 61'000)).empty());
}

TEST_F(MasterFsmDelayed, ADelayedBundleCancelledWholeKeepsItsFinishedTasks) {
    list_all_delayed();
    const auto t = delayed_tid(wall0 + 60'000, 1) + "_3";
    view.on(delayed_logged{4, {protocol::log_entry{t, std::nullopt, wall0 + 60'000}}}, t0);
    view.on(cancels_listed{{t}}, t0);
    ASSERT_EQ(read_now(decide_at(wall0)), std::vector{t});
    const std::string data =
        R"({"v":1,"type":"sum","bundle":[[1],[2],[3]],"attempt":1,"try":2,"due_ms":1,)"
        R"("finished":[{"state":"succeeded","value":{"sum":1}},null,)"
        R"({"state":"failed","error":{"code":"bad_args","message":"no"}}]})";
    const auto step = view.on(delayed_read{{task_read{t, task_read::status::ok, data, 0}}}, t0);
    const auto cancels = of_kind(step, kind::cancel);
    ASSERT_EQ(cancels.size(), 1U);
    const auto result = protocol::decode_result(cancels[0].ops[1].data);
    ASSERT_TRUE(result);
    ASSERT_EQ(result->bundle.size(), 3U);
    EXPECT_EQ(result->bundle[0].state, protocol::task_state::succeeded);
    EXPECT_EQ(result->bundle[1].state, protocol::task_state::cancelled);
    EXPECT_EQ(result->bundle[2].state, protocol::task_state::failed);
}

TEST_F(MasterFsmDelayed, ACancelReadThatFindsTheRequestGoneReleasesAsAnyRead) {
    list_all_delayed();
    const auto t = delayed_tid(wall0, 1);
    view.on(delayed_logged{4, {protocol::log_entry{t, std::nullopt, wall0 + 60'000}}}, t0);
    view.on(cancels_listed{{t}}, t0);
    ASSERT_EQ(read_now(decide_at(wall0)), std::vector{t});
    view.on(cancels_listed{{}}, t0);  // the request went (its client deleted it)
    const auto step =
        view.on(delayed_read{{task_read{t, task_read::status::ok, delayed_data(wall0), 0}}}, t0);
    EXPECT_TRUE(of_kind(step, kind::cancel).empty());
    EXPECT_EQ(of_kind(step, release_kind).size(), 1U) << "due: released";
}

TEST_F(MasterFsmDelayed, AFailedCancelReadIsTriedAgain) {
    list_all_delayed();
    const auto t = delayed_tid(wall0 + 60'000, 1);
    view.on(delayed_logged{4, {protocol::log_entry{t, std::nullopt, wall0 + 60'000}}}, t0);
    view.on(cancels_listed{{t}}, t0);
    ASSERT_EQ(read_now(decide_at(wall0)), std::vector{t});
    // Not read again at once, nor before a second has passed: no loop of failing reads.
    EXPECT_TRUE(
        read_now(view.on(delayed_read{{task_read{t, task_read::status::error, {}, 0}}}, t0)).empty()
    );
    EXPECT_TRUE(read_now(decide_at(wall0 + 500)).empty());
    EXPECT_EQ(read_now(decide_at(wall0 + 5000)), std::vector{t});
}

TEST_F(MasterFsmDelayed, ACancelWaitsForAReleaseInFlight) {
    list_all_delayed();
    const auto t = delayed_tid(wall0, 1);
    view.on(delayed_logged{4, {protocol::log_entry{t, std::nullopt, wall0}}}, t0);
    ASSERT_EQ(read_now(decide_at(wall0)), std::vector{t});  // its read is out
    view.on(cancels_listed{{t}}, t0);
    EXPECT_TRUE(of_kind(decide_at(wall0 + 1), kind::cancel).empty());
}

TEST_F(MasterFsmDelayed, AReleaseThatFindsThePendingNodeDeletesTheDelayedOneAlone) {
    list_all_delayed();
    const auto t = delayed_tid(wall0, 1);
    view.on(delayed_logged{0, {protocol::log_entry{t, std::nullopt, wall0}}}, t0);
    decide_at(wall0);
    const auto rel = of_kind(
        view.on(delayed_read{{task_read{t, task_read::status::ok, delayed_data(wall0), 0}}}, t0),
        release_kind
    );
    ASSERT_EQ(rel.size(), 1U);
    const auto step = view.on(answered{rel[0], failed(2, 1, protocol::op_code::node_exists)}, t0);
    const auto drop = of_kind(step, release_kind);
    ASSERT_EQ(drop.size(), 1U);
    EXPECT_TRUE(drop[0].drop_only);
    ASSERT_EQ(drop[0].ops.size(), 1U);
    EXPECT_EQ(drop[0].ops[0].path, protocol::layout{}.delayed_task(t));
    view.on(answered{drop[0], committed(1)}, t0);
    EXPECT_EQ(view.delayed_count(), 0U);
    EXPECT_EQ(stats.released, 0U);
}

TEST_F(MasterFsmDelayed, AFailedReleaseIsTriedAgainLater) {
    list_all_delayed();
    const auto t = delayed_tid(wall0, 1);
    view.on(delayed_logged{0, {protocol::log_entry{t, std::nullopt, wall0}}}, t0);
    decide_at(wall0);
    const auto rel = of_kind(
        view.on(delayed_read{{task_read{t, task_read::status::ok, delayed_data(wall0), 0}}}, t0),
        release_kind
    );
    ASSERT_EQ(rel.size(), 1U);
    view.on(answered{rel[0], unknown()}, t0);
    EXPECT_TRUE(read_now(decide_at(wall0 + 10)).empty());
    EXPECT_EQ(read_now(decide_at(wall0 + 1000)), std::vector{t});
}

TEST_F(MasterFsmDelayed, AGoneNodeIsForgotten) {
    list_all_delayed();
    const auto t = delayed_tid(wall0, 1);
    view.on(delayed_logged{0, {protocol::log_entry{t, std::nullopt, wall0}}}, t0);
    decide_at(wall0);
    const auto step = view.on(delayed_read{{task_read{t, task_read::status::gone, {}, 0}}}, t0);
    EXPECT_TRUE(of_kind(step, release_kind).empty());
    EXPECT_EQ(view.delayed_count(), 0U);
}

}  // namespace ZKD_UNITY_ID
}  // namespace zkd::roles::fsm_test
