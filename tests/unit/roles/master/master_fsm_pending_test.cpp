// SPDX-License-Identifier: MIT
// master_fsm (roles/master/detail/master_fsm.hpp), event by event: the pending shards, listed and
// followed by their change logs (docs/protocol.md §6, §7), and the reads of pending tasks.
#include "unit/roles/master/master_fsm_fixture.hpp"

namespace ZKD_UNITY_ID {

using namespace zkd;
using namespace zkd::roles;
using namespace zkd::roles::fsm_test;

TEST_F(MasterFsm, APendingNodeThatVanishesBeforeItIsReadIsForgotten) {
    join("w1", 1);
    view.on(shard_listed{0, {tid(5, 1)}}, t0);
    auto loads = of_kind(view.on(decide{}, t0), kind::read_tasks);
    ASSERT_EQ(loads.size(), 1U);
    EXPECT_TRUE(of_kind(view.on(decide{}, t0), kind::read_tasks).empty());  // one batch at a time
    view.on(tasks_read{{task_read{tid(5, 1), task_read::status::error, {}, 0}}}, t0);
    // Not read again in a tight loop (a lost connection): after a moment.
    const auto paused = view.on(decide{}, t0);
    EXPECT_TRUE(of_kind(paused, kind::read_tasks).empty());
    ASSERT_TRUE(paused.wake_at);
    EXPECT_EQ(*paused.wake_at, t0 + milliseconds(100));
    loads = of_kind(view.on(decide{}, t0 + milliseconds(100)), kind::read_tasks);
    ASSERT_EQ(loads.size(), 1U) << "read again after an error";
    view.on(tasks_read{{task_read{tid(5, 1), task_read::status::gone, {}, 0}}}, t0);
    EXPECT_EQ(view.queue_depth(), 0U);
}

TEST_F(MasterFsm, ListingsAreDiffedPerShardAndTheQueueKeepsIdOrderWithBundlesAndGarbage) {
    // The fsm keeps ids in a compact form (roles/master/detail/task_key.hpp): its order is still
    // the ids' string order, bundles ("_10" before "_9") and names that are no task id included.
    join("w1", 1);
    const auto a = tid(5, 1);
    const auto a10 = protocol::bundle_id(a, 10);
    const auto a9 = protocol::bundle_id(a, 9);
    const auto b = tid(5, 2);
    const auto c = tid(9, 3);
    view.on(shard_listed{0, {b, a9, "not-a-task", a, a10}}, t0);
    view.on(shard_listed{1, {c, b}}, t0);  // b is pending in shard 0 already: it stays there
    EXPECT_EQ(view.queue_depth(), 6U);
    EXPECT_EQ(view.pending_path(b), protocol::layout::pending_shard(0) + "/" + b);
    EXPECT_EQ(view.pending_path(c), protocol::layout::pending_shard(1) + "/" + c);
    auto step = view.on(decide{}, t0);
    const auto rejects = of_kind(step, kind::reject);
    ASSERT_EQ(rejects.size(), 1U);
    EXPECT_EQ(rejects[0].tid, "not-a-task");
    const auto loads = of_kind(step, kind::read_tasks);
    ASSERT_EQ(loads.size(), 1U);
    EXPECT_EQ(loads[0].tids, (std::vector<std::string>{c, a, a10, a9, b}));
    std::vector<task_read> reads;
    for (const auto& t : loads[0].tids) {
        reads.push_back(task_read{t, task_read::status::ok, task_data(), 0});
    }
    view.on(tasks_read{reads}, t0);
    step = view.on(decide{}, t0);
    const auto assigns = of_kind(step, kind::assign);
    ASSERT_EQ(assigns.size(), 1U);
    EXPECT_EQ(assigns[0].tid, c);  // the highest priority first, from whichever shard
    // c's node is gone while its assignment is out: kept until the answer says so.
    view.on(shard_listed{1, {}}, t0);
    EXPECT_EQ(view.queue_depth(), 6U);
    // a is gone from shard 0 without us: forgotten; the others stay.
    view.on(shard_listed{0, {b, "not-a-task", a9, a10}}, t0);
    EXPECT_EQ(view.queue_depth(), 5U);
    view.on(answered{assigns[0], committed(assigns[0].ops.size())}, t0);
    EXPECT_EQ(view.queue_depth(), 4U);
    // b came back in shard 1 after shard 0 lost it: a new task there.
    view.on(shard_listed{0, {"not-a-task", a9, a10}}, t0);
    EXPECT_EQ(view.queue_depth(), 3U);
    view.on(shard_listed{1, {b}}, t0);
    EXPECT_EQ(view.queue_depth(), 4U);
    EXPECT_EQ(view.pending_path(b), protocol::layout::pending_shard(1) + "/" + b);
}

// --- pending shards followed by their change logs (§6, §7) ----------------------------------

namespace {

protocol::log_entry logged(std::string name, std::optional<std::string> data = task_data()) {
    return protocol::log_entry{std::move(name), std::move(data)};
}

}  // namespace

TEST_F(MasterFsm, ALoggedTaskWithItsDataIsAssignedWithoutARead) {
    join("w1", 2);
    view.on(shard_logged{0, {logged(tid(5, 1))}}, t0);
    EXPECT_EQ(view.queue_depth(), 1U);
    EXPECT_EQ(stats.tasks_from_logs, 1U);
    const auto step = view.on(decide{}, t0);
    EXPECT_TRUE(of_kind(step, kind::read_tasks).empty());
    const auto assigns = of_kind(step, kind::assign);
    ASSERT_EQ(assigns.size(), 1U);
    EXPECT_EQ(assigns[0].tid, tid(5, 1));
    EXPECT_EQ(assigns[0].worker, "w1");
    view.on(answered{assigns[0], committed(assigns[0].ops.size())}, t0);
    EXPECT_EQ(stats.assigned, 1U);
    EXPECT_EQ(view.queue_depth(), 0U);
}

TEST_F(MasterFsm, ALoggedTaskWithoutDataOrBeyondTheLoadWindowIsReadWhenItsTurnComes) {
    join("w1", 1);  // a window of 32 + 1 tasks
    std::vector<protocol::log_entry> entries;
    for (int i = 1; i <= 40; ++i) {
        entries.push_back(logged(tid(5, i)));
    }
    view.on(shard_logged{0, std::move(entries)}, t0);
    EXPECT_EQ(view.queue_depth(), 40U);
    EXPECT_EQ(stats.tasks_from_logs, 33U);  // the others' data is kept aside
    EXPECT_GT(view.logged_data_bytes(), 7 * task_data().size());
    auto step = view.on(decide{}, t0);
    ASSERT_EQ(of_kind(step, kind::assign).size(), 1U);
    EXPECT_EQ(of_kind(step, kind::assign)[0].tid, tid(5, 1));
    EXPECT_TRUE(of_kind(step, kind::read_tasks).empty());  // 32 loaded wait for the slot
    // A name that came without its data (the transaction's budget ran out) is read.
    view.on(answered{of_kind(step, kind::assign)[0], committed(3)}, t0);
    view.on(shard_listed{0, {}}, t0);  // everything taken or gone
    view.on(shard_logged{0, {logged(tid(5, 50), std::nullopt)}}, t0);
    EXPECT_EQ(stats.tasks_from_logs, 33U);
    step = view.on(decide{}, t0);
    const auto loads = of_kind(step, kind::read_tasks);
    ASSERT_EQ(loads.size(), 1U);
    EXPECT_EQ(loads[0].tids, std::vector<std::string>{tid(5, 50)});
}

TEST_F(MasterFsm, WithoutWorkersALoggedTasksDataIsKeptAsideAndTakenWhenItMayBePlaced) {
    view.on(shard_logged{0, {logged(tid(5, 1))}}, t0);
    EXPECT_EQ(view.queue_depth(), 1U);
    EXPECT_EQ(stats.tasks_from_logs, 0U);
    EXPECT_GT(view.logged_data_bytes(), 0U);
    EXPECT_TRUE(view.on(decide{}, t0).actions.empty());
    join("w1", 1);
    const auto step = view.on(decide{}, t0);
    EXPECT_TRUE(of_kind(step, kind::read_tasks).empty());  // no read: the log had it
    const auto assigns = of_kind(step, kind::assign);
    ASSERT_EQ(assigns.size(), 1U);
    EXPECT_EQ(assigns[0].tid, tid(5, 1));
    EXPECT_EQ(stats.tasks_from_logs, 1U);
    EXPECT_EQ(view.logged_data_bytes(), 0U);
}

TEST(MasterFsmBudget, PastItsBudgetALoggedTasksDataIsNotKeptAndTheTaskIsRead) {
    master_stats stats;
    master_fsm::options opts;
    opts.logged_data_budget = task_data().size() + 150;  // one task, with its overhead
    master_fsm view(protocol::layout{}, 7, opts, stats);
    const auto t0 = clock_type::time_point{} + std::chrono::hours(1);
    list_all_shards(view, t0);
    view.on(shard_logged{0, {logged(tid(5, 1)), logged(tid(5, 2))}}, t0);
    EXPECT_EQ(view.queue_depth(), 2U);
    EXPECT_GT(view.logged_data_bytes(), 0U);
    EXPECT_LE(view.logged_data_bytes(), opts.logged_data_budget);
    ASSERT_TRUE(list_workers(view, {"w1"}, t0).to_read == std::vector<std::string>{"w1"});
    ASSERT_TRUE(read_worker(view, "w1", worker_data(2, {"echo"}), true, t0));
    ASSERT_TRUE(list_dir(view, stats, "w1", {}, t0));
    const auto step = view.on(decide{}, t0);
    const auto loads = of_kind(step, kind::read_tasks);
    ASSERT_EQ(loads.size(), 1U);
    EXPECT_EQ(loads[0].tids, std::vector<std::string>{tid(5, 2)});  // the one not kept
    const auto assigns = of_kind(step, kind::assign);
    ASSERT_EQ(assigns.size(), 1U);
    EXPECT_EQ(assigns[0].tid, tid(5, 1));
}

TEST_F(MasterFsm, ALogReadAfterAMissedVersionGivesItsDataToTheTasksTheListingFound) {
    join("w1", 4);
    const auto a = tid(5, 1);  // created by a transaction whose log was missed
    const auto b = tid(5, 2);  // created by the one whose log was read
    const auto gone = tid(5, 3);
    view.on(shard_listed{0, {a, b}}, t0);
    view.on(shard_logged{0, {logged(b), logged(gone), logged(tid(5, 4), std::nullopt)}, true}, t0);
    EXPECT_EQ(view.queue_depth(), 2U);  // a name the listing lacks is gone, not new
    EXPECT_EQ(stats.tasks_from_logs, 1U);
    const auto step = view.on(decide{}, t0);
    const auto loads = of_kind(step, kind::read_tasks);
    ASSERT_EQ(loads.size(), 1U);
    EXPECT_EQ(loads[0].tids, std::vector<std::string>{a});  // only the missed one is read
    const auto assigns = of_kind(step, kind::assign);
    ASSERT_EQ(assigns.size(), 1U);
    EXPECT_EQ(assigns[0].tid, b);
    // Once read (or placed), a task's data is not taken from a later log again.
    view.on(shard_logged{0, {logged(a, task_data("echo", 2))}, true}, t0);
    EXPECT_EQ(stats.tasks_from_logs, 1U);
}

TEST_F(MasterFsm, ALoggedTaskDoesNotTakeTheLastSlotFromAListedOneAheadOfItBeingRead) {
    // One T1 in two shards landed while the new master listed them: the first task came by
    // a listing (its data to read), the second by its shard's log, with its data. Both are
    // known when the view decides; the one slot is the first one's (§3), not the second's
    // for as long as it runs.
    join("w1", 1);
    const auto first = tid(5, 1);
    const auto second = tid(5, 2);
    view.on(shard_listed{1, {first}}, t0);
    view.on(shard_logged{0, {logged(second)}}, t0);
    auto step = view.on(decide{}, t0);
    EXPECT_TRUE(of_kind(step, kind::assign).empty());
    auto loads = of_kind(step, kind::read_tasks);
    ASSERT_EQ(loads.size(), 1U);
    EXPECT_EQ(loads[0].tids, std::vector<std::string>{first});
    // Still being read: the slot stays free for it.
    EXPECT_TRUE(view.on(decide{}, t0).actions.empty());
    view.on(tasks_read{{task_read{first, task_read::status::ok, task_data(), 0}}}, t0);
    step = view.on(decide{}, t0);
    auto assigns = of_kind(step, kind::assign);
    ASSERT_EQ(assigns.size(), 1U);
    EXPECT_EQ(assigns[0].tid, first);
    view.on(answered{assigns[0], committed(assigns[0].ops.size())}, t0);
    // With more free slots than unread tasks ahead of it, a task with its data goes at once:
    // the slot it takes is nobody's.
    join("w2", 3);
    const auto third = tid(5, 3);
    const auto fourth = tid(5, 4);
    view.on(shard_listed{1, {third}}, t0);
    view.on(shard_logged{0, {logged(second), logged(fourth)}}, t0);
    step = view.on(decide{}, t0);
    loads = of_kind(step, kind::read_tasks);
    ASSERT_EQ(loads.size(), 1U);
    EXPECT_EQ(loads[0].tids, std::vector<std::string>{third});
    assigns = of_kind(step, kind::assign);
    ASSERT_EQ(assigns.size(), 2U);
    EXPECT_EQ(assigns[0].tid, second);
    EXPECT_EQ(assigns[1].tid, fourth);
}

TEST_F(MasterFsm, LoggedNamesJoinTheShardsListingsDiffAndKnownOnesAreNotAddedAgain) {
    join("w1", 1);
    const auto a = tid(5, 1);
    const auto b = tid(5, 2);
    const auto c = tid(5, 3);
    view.on(shard_listed{1, {b}}, t0);
    view.on(shard_logged{0, {logged(a), logged(b), logged(c), logged("not-a-task", "{}")}}, t0);
    EXPECT_EQ(view.queue_depth(), 4U);
    EXPECT_EQ(view.pending_path(b), protocol::layout::pending_shard(1) + "/" + b);  // seen first
    auto step = view.on(decide{}, t0);
    const auto rejects = of_kind(step, kind::reject);
    ASSERT_EQ(rejects.size(), 1U);
    EXPECT_EQ(rejects[0].tid, "not-a-task");
    view.on(answered{rejects[0], committed(rejects[0].ops.size())}, t0);
    const auto assigns = of_kind(step, kind::assign);
    ASSERT_EQ(assigns.size(), 1U);
    EXPECT_EQ(assigns[0].tid, a);
    EXPECT_EQ(view.queue_depth(), 3U);
    // Logged again (a listing raced the log): nothing changes, the assignment stays out.
    view.on(shard_logged{0, {logged(a)}}, t0);
    EXPECT_EQ(view.queue_depth(), 3U);
    // A listing of shard 0 that lacks a logged name forgets it, as it would a listed one.
    view.on(shard_listed{0, {a}}, t0);
    EXPECT_EQ(view.queue_depth(), 2U);  // a (in flight) and b (shard 1)
    view.on(answered{assigns[0], committed(assigns[0].ops.size())}, t0);
    EXPECT_EQ(view.queue_depth(), 1U);
}

TEST_F(MasterFsm, ALoggedTaskWhoseDataIsGarbageEndsInAFailedResult) {
    join("w1", 1);
    view.on(shard_logged{0, {logged(tid(5, 1), "not json")}}, t0);
    const auto rejects = of_kind(view.on(decide{}, t0), kind::reject);
    ASSERT_EQ(rejects.size(), 1U);
    EXPECT_EQ(rejects[0].code, protocol::codes::malformed_task);
}

}  // namespace ZKD_UNITY_ID
