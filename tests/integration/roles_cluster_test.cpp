// SPDX-License-Identifier: MIT
// The roles together against a real ZooKeeper, in one process: a master, workers and a
// client, each with a session of its own. Tasks flow pending -> assigned -> result; bad
// input ends in error results; a departed worker's tasks are requeued or end lost.
#include "support/roles_cluster.hpp"

#include "roles/client/inspect.hpp"
#include "roles/client/task_client.hpp"
#include "roles/cluster/namespace.hpp"
#include "roles/txn/zk_ops.hpp"
#include "workflow/ids.hpp"

#include <boost/json.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

namespace ZKD_UNITY_ID {

namespace asio = boost::asio;
namespace json = boost::json;
using namespace std::literals;
using namespace zkd::roles;
using namespace zkd::protocol;
using zkd::zkco::client;

namespace {

class RolesCluster : public zkd::test::roles_cluster {
protected:
    /// Total results not consumed yet.
    asio::awaitable<std::size_t> results_left(client& zk) { return queued(zk, true); }

    /// Creates the results directory of the client that submitted `tid`, unless it exists.
    static asio::awaitable<void> ensure_client_results(client& zk, std::string_view tid) {
        const auto dir = layout::client_results(task_id_client(tid));
        auto made = co_await zk.create(dir);
        ASSERT_TRUE(made || made.error() == zkd::zkco::errc::node_exists)
            << dir << ": " << made.error().message();
    }

    /// Submits `echo` tasks 0 .. n-1 one at a time, each waited for and its result checked.
    static asio::awaitable<void> echo_one_at_a_time(task_client& tc, std::uint64_t n) {
        for (std::uint64_t i = 0; i < n; ++i) {
            std::vector<task_spec> next{{"echo", json::value(i)}};
            auto id = co_await tc.submit(std::move(next));
            ASSERT_TRUE(id) << id.error().message();
            auto r = co_await zkd::zkco::with_timeout(tc.wait(id->front()), 30s);
            ASSERT_TRUE(r) << r.error().message();
            EXPECT_EQ(r->state, task_state::succeeded);
            EXPECT_EQ(r->value, json::value(i));
        }
    }

    /// Whether `path` exists (an error fails the test).
    static asio::awaitable<bool> exists(client& zk, std::string path) {
        auto st = co_await zk.exists(std::move(path));
        EXPECT_TRUE(st) << st.error().message();
        co_return st && st->has_value();
    }
};

TEST_F(RolesCluster, TasksOfMixedTypesGetExactlyTheirResults) {
    run(
        [&]() -> asio::awaitable<void> {
            auto* zk = co_await session();
            auto l = co_await ensure_layout(*zk, meta_info{});
            ASSERT_TRUE(l);
            layout_ = *l;
            co_await start_master();
            co_await start_worker("w1", 3);
            co_await start_worker("w2", 3);
            co_await workers_joined(*zk, 2);  // for the count of tasks placed directly
            task_client tc(*zk, layout_);
            tc.auto_bundle(1);  // plain tasks: the counts below are per node

            std::vector<task_spec> batch;
            for (int i = 0; i < 120; ++i) {
                switch (i % 4) {
                case 0:
                    batch.push_back({"echo", json::value{{"i", i}}});
                    break;
                case 1:
                    batch.push_back({"sum", json::array{i, 1, 2}});
                    break;
                case 2:
                    batch.push_back({"sleep", json::value{{"ms", 1}}});
                    break;
                default:
                    batch.push_back({"fail", json::value{{"message", "no " + std::to_string(i)}}});
                    break;
                }
            }
            auto ids = co_await tc.submit(std::move(batch));
            ASSERT_TRUE(ids) << ids.error().message();
            ASSERT_EQ(ids->size(), 120U);
            for (int i = 0; i < 120; ++i) {
                auto r = co_await zkd::zkco::with_timeout(
                    tc.wait((*ids)[static_cast<std::size_t>(i)]), 60s
                );
                ASSERT_TRUE(r) << "task " << i << ": " << r.error().message();
                EXPECT_EQ(r->task, (*ids)[static_cast<std::size_t>(i)]);
                switch (i % 4) {
                case 0:
                    EXPECT_EQ(r->state, task_state::succeeded);
                    EXPECT_EQ(r->value, (json::value{{"i", i}}));
                    break;
                case 1:
                    EXPECT_EQ(r->state, task_state::succeeded);
                    EXPECT_EQ(r->value.at("sum").to_number<std::int64_t>(), i + 3);
                    break;
                case 2:
                    EXPECT_EQ(r->state, task_state::succeeded);
                    break;
                default:
                    EXPECT_EQ(r->state, task_state::failed);
                    ASSERT_TRUE(r->error);
                    EXPECT_EQ(r->error->code, "handler_error");
                    break;
                }
            }
            // ZooKeeper requests per task, all sessions together (client, master, workers).
            zkd::zkco::client_counters sum;
            for (const auto& s : sessions_) {
                const auto c = s->counters();
                sum.writes += c.writes;
                sum.write_ops += c.write_ops;
                sum.reads += c.reads;
            }
            RecordProperty(
                "write_transactions_per_task_x100", static_cast<int>(sum.writes * 100 / 120)
            );
            RecordProperty("write_ops_per_task_x100", static_cast<int>(sum.write_ops * 100 / 120));
            RecordProperty("reads_per_task_x100", static_cast<int>(sum.reads * 100 / 120));
            // The client's first read of the workers gave it room for 3 + 3 tasks: those went
            // to the workers directly (§6 T1 "Direct placement"), the rest through the master.
            EXPECT_EQ(tc.direct_placed(), 6U);
            EXPECT_EQ(master_stats_.assigned, 114U);
            EXPECT_EQ(worker_stats_["w1"].published + worker_stats_["w2"].published, 120U);
            EXPECT_GT(worker_stats_["w1"].published, 0U);  // least-loaded spreads the work
            EXPECT_GT(worker_stats_["w2"].published, 0U);
            // Each worker says what its pool runs side by side (the placer keeps that many
            // tasks of one transaction together there, §7).
            auto kids = co_await zk->get_children("/workers"s);
            ASSERT_TRUE(kids);
            ASSERT_EQ(kids->names.size(), 2U);
            for (const auto& name : kids->names) {
                auto node = co_await zk->get("/workers/" + name);
                ASSERT_TRUE(node);
                EXPECT_EQ(decode_worker(node->data).value().threads, 2) << name;
            }
            // Consumed results are gone once the client's deferred deletes went (flush sends
            // them at once); nothing is left pending or assigned.
            co_await tc.flush();
            for (const auto& dir : (co_await list_result_dirs(*zk)).value()) {
                EXPECT_TRUE((co_await zk->get_children(dir))->names.empty()) << dir;
            }
            for (const auto& shard : layout_.pending_shard_paths()) {
                EXPECT_TRUE((co_await zk->get_children(shard))->names.empty()) << shard;
            }
        }(),
        120s
    );
}

TEST_F(RolesCluster, BadInputEndsInErrorResultsAndTheMasterCarriesOn) {
    run(
        [&]() -> asio::awaitable<void> {
            auto* zk = co_await session();
            layout_ = (co_await ensure_layout(*zk, meta_info{})).value();
            master_options opts;
            opts.unknown_type_grace = 200ms;
            co_await start_master(opts);
            co_await start_worker("w1", 2);
            task_client tc(*zk, layout_);

            // Garbage written into a pending shard by another client.
            task_id_generator gen;
            const std::string garbage_id = gen.next(5, 1);
            ASSERT_TRUE(co_await zk->create(layout_.pending_task(garbage_id), "\xff{not json"s));
            ASSERT_TRUE(co_await zk->create("/pending/00/not-a-task-id"s, "{}"s));
            auto garbage = co_await zkd::zkco::with_timeout(tc.wait(garbage_id), 30s);
            ASSERT_TRUE(garbage) << garbage.error().message();
            EXPECT_EQ(garbage->state, task_state::failed);
            EXPECT_EQ(garbage->error->code, "malformed_task");
            // Written without a change log: found by a listing of its shard, at the latest
            // by the master's sweep (every 2 s), not at once (docs/protocol.md §8).
            auto no_id = co_await zkd::zkco::with_timeout(tc.wait("not-a-task-id"), 30s);
            ASSERT_TRUE(no_id) << no_id.error().message();
            EXPECT_EQ(no_id->state, task_state::failed);
            EXPECT_EQ(no_id->error->code, "malformed_task");

            // A type no worker serves, and bad arguments for a known one.
            std::vector<task_spec> reqs{{"no-such-type", json::value{}}, {"sum", json::value("x")}};
            auto ids = co_await tc.submit(std::move(reqs));
            ASSERT_TRUE(ids);
            auto unknown = co_await zkd::zkco::with_timeout(tc.wait((*ids)[0]), 30s);
            ASSERT_TRUE(unknown);
            EXPECT_EQ(unknown->error->code, "unknown_type");
            auto bad_args = co_await zkd::zkco::with_timeout(tc.wait((*ids)[1]), 30s);
            ASSERT_TRUE(bad_args);
            EXPECT_EQ(bad_args->error->code, "bad_args");

            // Refused before sending: an invalid type name, a task over the size limit.
            std::vector<task_spec> invalid{{"bad type!", json::value{}}};
            auto refused = co_await tc.submit(std::move(invalid));
            EXPECT_EQ(refused.error(), client_errc::invalid_type);
            EXPECT_EQ(refused.error(), client_condition::invalid_task);
            std::vector<task_spec> huge{{"echo", json::value(std::string(600'000, 'x'))}};
            EXPECT_EQ((co_await tc.submit(std::move(huge))).error(), client_errc::task_too_large);

            // And the cluster still works.
            std::vector<task_spec> fine{{"echo", json::value(1)}};
            auto ok = co_await tc.submit(std::move(fine));
            ASSERT_TRUE(ok);
            auto r = co_await zkd::zkco::with_timeout(tc.wait(ok->front()), 30s);
            ASSERT_TRUE(r);
            EXPECT_EQ(r->state, task_state::succeeded);
            EXPECT_GE(master_stats_.rejected, 3U);
        }(),
        120s
    );
}

TEST_F(RolesCluster, CancellationReachesPendingAndRunningTasks) {
    run(
        [&]() -> asio::awaitable<void> {
            auto* zk = co_await session();
            layout_ = (co_await ensure_layout(*zk, meta_info{})).value();
            co_await start_master();
            co_await start_worker("w1", 1);
            co_await workers_joined(*zk, 1);  // for the count of tasks placed directly
            task_client tc(*zk, layout_);
            std::vector<task_spec> reqs{
                {"sleep", json::value{{"ms", 60'000}}}, {"sleep", json::value{{"ms", 60'000}}}};
            auto ids = co_await tc.submit(std::move(reqs));
            ASSERT_TRUE(ids);
            // One slot: the first runs, the second waits.
            task_status st;
            for (int i = 0; i < 200 && st.state != task_state::running; ++i) {
                co_await settle(20ms);
                st = (co_await tc.status(ids->front())).value();
            }
            EXPECT_EQ(st.state, task_state::running);
            EXPECT_EQ((co_await tc.status((*ids)[1])).value().state, task_state::pending);
            // The running one went to the worker directly (its one slot was free): the master
            // finds it in the worker's directory to forward the cancel.
            EXPECT_EQ(tc.direct_placed(), 1U);

            // Cancelled the moment it is submitted: the master may see the request before it
            // has read the task from its shard, and must not drop the request then.
            std::vector<task_spec> late{{"sleep", json::value{{"ms", 60'000}}}};
            auto late_id = co_await tc.submit(std::move(late));
            ASSERT_TRUE(late_id);
            ASSERT_TRUE(co_await tc.cancel(late_id->front()));
            ids->push_back(late_id->front());

            ASSERT_TRUE(co_await tc.cancel((*ids)[1]));
            ASSERT_TRUE(co_await tc.cancel((*ids)[0]));
            for (const auto& id : *ids) {
                auto r = co_await zkd::zkco::with_timeout(tc.wait(id), 30s);
                ASSERT_TRUE(r) << r.error().message();
                EXPECT_EQ(r->state, task_state::cancelled);
            }
            EXPECT_EQ(worker_stats_["w1"].cancelled, 1U);
            EXPECT_TRUE((co_await zk->get_children("/cancel"s))->names.empty());
            co_await tc.flush();  // the consumes (T5) went
            EXPECT_EQ((co_await tc.status(ids->front())).value().state, task_state::unknown);
        }(),
        120s
    );
}

TEST_F(RolesCluster, ADepartedWorkersTasksAreRequeuedOrLost) {
    run(
        [&]() -> asio::awaitable<void> {
            auto* zk = co_await session();
            layout_ = (co_await ensure_layout(*zk, meta_info{})).value();
            co_await start_master();
            auto doomed = co_await start_worker("doomed", 2);
            task_client tc(*zk, layout_);
            task_spec again{"sleep", json::value{{"ms", 300}}};
            task_spec once{"sleep", json::value{{"ms", 300}}};
            once.max_attempts = 1;
            std::vector<task_spec> reqs{again, once};
            auto ids = co_await tc.submit(std::move(reqs));
            ASSERT_TRUE(ids);
            for (int i = 0; i < 200 && worker_stats_["doomed"].started < 2; ++i) {
                co_await settle(10ms);
            }
            ASSERT_EQ(worker_stats_["doomed"].started, 2U);
            // The worker's session ends while both tasks run; another worker joins.
            co_await doomed.zk->close();
            co_await start_worker("heir", 2);

            auto requeued = co_await zkd::zkco::with_timeout(tc.wait((*ids)[0]), 30s);
            ASSERT_TRUE(requeued) << requeued.error().message();
            EXPECT_EQ(requeued->state, task_state::succeeded);
            EXPECT_EQ(requeued->attempt, 2);
            auto lost = co_await zkd::zkco::with_timeout(tc.wait((*ids)[1]), 30s);
            ASSERT_TRUE(lost);
            EXPECT_EQ(lost->state, task_state::lost);
            EXPECT_EQ(lost->error->code, "attempts_exhausted");
            EXPECT_EQ(master_stats_.requeued, 1U);
            EXPECT_EQ(master_stats_.lost, 1U);
            // The departed worker's directory is cleaned up.
            for (int i = 0; i < 100 && (co_await zk->get_children("/assign"s))->names.size() > 1;
                 ++i) {
                co_await settle(20ms);
            }
            EXPECT_EQ((co_await zk->get_children("/assign"s))->names.size(), 1U);
        }(),
        120s
    );
}

TEST_F(RolesCluster, ResultsNobodyConsumesAreCollectedAfterTheRetention) {
    run(
        [&]() -> asio::awaitable<void> {
            auto* zk = co_await session();
            layout_ = (co_await ensure_layout(*zk, meta_info{})).value();
            master_options opts;
            opts.result_retention = 1500ms;
            opts.gc_interval = 100ms;
            co_await start_master(opts);
            task_client tc(*zk, layout_);
            std::vector<task_spec> reqs(3, task_spec{"echo", json::value("keep")});
            auto ids = co_await tc.submit(std::move(reqs));
            ASSERT_TRUE(ids);
            // The results go into the client's directory (/results/<c>): there before any
            // result is written.
            co_await ensure_client_results(*zk, ids->front());
            co_await start_worker("w1", 4);
            std::size_t left = 0;
            for (int i = 0; i < 200 && left < 3; ++i) {
                co_await settle(10ms);
                left = co_await results_left(*zk);
            }
            ASSERT_EQ(left, 3U);
            // Sweeps run every 100 ms, but nothing is young enough to go yet.
            co_await settle(500ms);
            EXPECT_EQ(co_await results_left(*zk), 3U);
            EXPECT_EQ(master_stats_.collected, 0U);
            // The master counts a delete when its reply comes back, which may be after this
            // session already sees the results gone: wait for both.
            for (int i = 0; i < 100 && (left > 0 || master_stats_.collected < 3); ++i) {
                co_await settle(50ms);
                left = co_await results_left(*zk);
            }
            EXPECT_EQ(left, 0U);
            EXPECT_EQ(master_stats_.collected, 3U);
            EXPECT_EQ((co_await tc.status(ids->front())).value().state, task_state::unknown);
        }(),
        120s
    );
}

TEST_F(RolesCluster, AWorkflowsResultsAreLeftToItsEngineHoweverOld) {
    run(
        [&]() -> asio::awaitable<void> {
            auto* zk = co_await session();
            layout_ = (co_await ensure_layout(*zk, meta_info{})).value();
            // A workflow (its node under /workflows, named by its id) with a result in its
            // client directory, and an ordinary client's result, both old by the time the
            // master sweeps.
            const zkd::workflow::workflow_ref wf{1'700'000'000'000, 0x0000f10e};
            const auto wf_dir = layout::client_results(zkd::workflow::client_hex(wf.client));
            const auto wf_result = zkd::zkco::join_path(wf_dir, "t4-1700000000000-0000f10e000001");
            const auto other_dir = layout::client_results("0000abcd");
            const auto other_result =
                zkd::zkco::join_path(other_dir, "t4-1700000000000-0000abcd000001");
            ASSERT_TRUE(co_await zk->create(zkd::workflow::workflows_dir()));
            const auto wf_node = zkd::zkco::join_path(
                zkd::workflow::workflows_dir(), zkd::workflow::workflow_id(wf)
            );
            ASSERT_TRUE(co_await zk->create(wf_node, "{}"));
            for (const auto& p : {wf_dir, wf_result, other_dir, other_result}) {
                ASSERT_TRUE(co_await zk->create(p, "{}")) << p;
            }
            master_options opts;
            opts.result_retention = 1000ms;
            opts.gc_interval = 100ms;
            co_await start_master(opts);
            const auto exists = [&](const std::string& p) -> asio::awaitable<bool> {
                auto e = co_await zk->exists(p);
                co_return e && e->has_value();
            };
            for (int i = 0; i < 200 && co_await exists(other_result); ++i) {
                co_await settle(50ms);
            }
            EXPECT_FALSE(co_await exists(other_result)) << "an old result is collected";
            // Many sweeps later, the workflow's result is still there: the workflow lives.
            co_await settle(1000ms);
            EXPECT_TRUE(co_await exists(wf_result));
            // Once the workflow is gone, its directory is a client's like any other.
            ASSERT_TRUE(co_await zk->remove(wf_node));
            for (int i = 0; i < 200 && co_await exists(wf_result); ++i) {
                co_await settle(50ms);
            }
            EXPECT_FALSE(co_await exists(wf_result));
        }(),
        120s
    );
}

TEST_F(RolesCluster, OldEmptyClientDirectoriesAreCollectedButNotResultShardsNorNonEmptyOnes) {
    run(
        [&]() -> asio::awaitable<void> {
            auto* zk = co_await session();
            layout_ = (co_await ensure_layout(*zk, meta_info{})).value();
            // In creation order: the result shards (ensure_layout), a client directory
            // holding a result that cannot be deleted (it has a child: T8's delete of it
            // fails each sweep), an empty directory that is no client's, then an empty client
            // directory, the youngest of all: the sweep that finds it old finds the others
            // old too.
            const auto kept = layout::client_results("0000beef");
            const auto held = zkd::zkco::join_path(kept, "t4-0000000000001-0000beef000001");
            ASSERT_TRUE(co_await zk->create(kept));
            ASSERT_TRUE(co_await zk->create(held));
            ASSERT_TRUE(co_await zk->create(zkd::zkco::join_path(held, "child")));
            ASSERT_TRUE(co_await zk->create("/results/other"s));
            const auto empty = layout::client_results("0000dead");
            ASSERT_TRUE(co_await zk->create(empty));
            master_options opts;
            opts.result_retention = 1000ms;
            opts.gc_interval = 100ms;
            co_await start_master(opts);
            bool gone = false;
            for (int i = 0; i < 200 && (!gone || master_stats_.collected_dirs < 1); ++i) {
                co_await settle(20ms);
                gone = !co_await exists(*zk, empty);
            }
            ASSERT_TRUE(gone) << empty << " was never collected";
            EXPECT_EQ(master_stats_.collected_dirs, 1U);
            EXPECT_TRUE(co_await exists(*zk, held));
            EXPECT_TRUE(co_await exists(*zk, "/results/other"s));
            for (const auto& shard : layout_.result_shard_paths()) {
                EXPECT_TRUE(co_await exists(*zk, shard)) << shard;
            }
            // A client directory made again (its client submitting anew) is a new node:
            // young, it stays until it is old in turn.
            ASSERT_TRUE(co_await zk->create(empty));
            const auto dirs = (co_await list_result_dirs(*zk)).value();
            EXPECT_NE(std::find(dirs.begin(), dirs.end(), empty), dirs.end());
            EXPECT_NE(std::find(dirs.begin(), dirs.end(), kept), dirs.end());
            EXPECT_EQ(dirs.size(), layout_.result_shards + 3U);
        }(),
        60s
    );
}

TEST_F(RolesCluster, TasksWaitWhileNoWorkerExistsAndRunWhenOneJoins) {
    run(
        [&]() -> asio::awaitable<void> {
            auto* zk = co_await session();
            layout_ = (co_await ensure_layout(*zk, meta_info{})).value();
            master_options opts;
            opts.unknown_type_grace =
                100ms;  // would reject at once if "no worker" meant "unknown type"
            co_await start_master(opts);
            task_client tc(*zk, layout_);
            std::vector<task_spec> reqs(3, task_spec{"echo", json::value("patience")});
            auto ids = co_await tc.submit(std::move(reqs));
            ASSERT_TRUE(ids);
            co_await settle(800ms);
            for (const auto& id : *ids) {
                EXPECT_EQ((co_await tc.status(id)).value().state, task_state::pending) << id;
            }
            co_await start_worker("late", 2);
            for (const auto& id : *ids) {
                auto r = co_await zkd::zkco::with_timeout(tc.wait(id), 30s);
                ASSERT_TRUE(r) << r.error().message();
                EXPECT_EQ(r->state, task_state::succeeded);
            }
            EXPECT_EQ(master_stats_.rejected, 0U);
        }(),
        120s
    );
}

TEST_F(RolesCluster, AWorkerFollowsItsDirectoryByTheChangeLogNotByListings) {
    // docs/protocol.md §6 "Change logs": the master's T2 names the assignment (and carries
    // its data) in the directory's data, so one task at a time costs the worker no listing
    // of its directory (format 1 listed it twice per task: after T2 and after its own T4).
    run(
        [&]() -> asio::awaitable<void> {
            auto* zk = co_await session();
            layout_ = (co_await ensure_layout(*zk, meta_info{})).value();
            co_await start_master();
            co_await start_worker("w1", 2);
            task_client tc(*zk, layout_);
            // A first task, so that the worker has listed its directory once (a task placed
            // before that listing comes with it, not with a log read).
            std::vector<task_spec> first{task_spec{"echo", json::value(-1)}};
            auto first_id = co_await tc.submit(std::move(first));
            ASSERT_TRUE(first_id);
            ASSERT_TRUE(co_await zkd::zkco::with_timeout(tc.wait(first_id->front()), 15s));
            const auto& w = worker_stats_["w1"];
            const auto logs_before = w.logs_read;
            ASSERT_EQ(w.listings, 1U) << "listed once, when it joined";
            constexpr int tasks = 10;
            for (int i = 0; i < tasks; ++i) {
                std::vector<task_spec> reqs{task_spec{"echo", json::value(i)}};
                auto ids = co_await tc.submit(std::move(reqs));
                ASSERT_TRUE(ids);
                auto r = co_await zkd::zkco::with_timeout(tc.wait(ids->front()), 15s);
                ASSERT_TRUE(r) << r.error().message();
                EXPECT_EQ(r->value, json::value(i));
            }
            EXPECT_EQ(w.started, std::uint64_t{tasks + 1});
            EXPECT_EQ(w.logs_read - logs_before, std::uint64_t{tasks});
            EXPECT_EQ(w.listings, 1U) << "no listing after the first";
            co_await tc.flush();
        }(),
        60s
    );
}

TEST_F(RolesCluster, ADrainingWorkerFinishesWhatItHoldsAndGetsNothingNew) {
    run(
        [&]() -> asio::awaitable<void> {
            auto* zk = co_await session();
            layout_ = (co_await ensure_layout(*zk, meta_info{})).value();
            co_await start_master();
            zkd::reactor::event drain(ioc_.get_executor());
            worker_options wo;
            wo.drain = &drain;
            co_await start_worker("leaver", 2, {}, wo);
            task_client tc(*zk, layout_);
            std::vector<task_spec> slow(2, task_spec{"sleep", json::value{{"ms", 800}}});
            auto slow_ids = co_await tc.submit(std::move(slow));
            ASSERT_TRUE(slow_ids);
            for (int i = 0; i < 200 && worker_stats_["leaver"].started < 2; ++i) {
                co_await settle(10ms);
            }
            ASSERT_EQ(worker_stats_["leaver"].started, 2U);
            drain.set();
            // The master hears of it through the worker's node.
            bool marked = false;
            for (int i = 0; i < 200 && !marked; ++i) {
                co_await settle(10ms);
                auto kids = co_await zk->get_children("/workers"s);
                for (const auto& name : kids ? kids->names : std::vector<std::string>{}) {
                    auto node = co_await zk->get("/workers/" + name);
                    marked = marked || (node && decode_worker(node->data).value().draining);
                }
            }
            ASSERT_TRUE(marked);
            // Its two slots are busy: fresh tasks wait either way now. Whether the master heeds
            // `draining` shows once those end: then they must go to the heir, not to the leaver.
            std::vector<task_spec> fresh(3, task_spec{"echo", json::value("new")});
            auto fresh_ids = co_await tc.submit(std::move(fresh));
            ASSERT_TRUE(fresh_ids);
            co_await settle(300ms);
            for (const auto& id : *fresh_ids) {
                EXPECT_EQ((co_await tc.status(id)).value().state, task_state::pending) << id;
            }
            // What it held ends normally, on its first attempt, by its hand.
            for (const auto& id : *slow_ids) {
                auto r = co_await zkd::zkco::with_timeout(tc.wait(id), 30s);
                ASSERT_TRUE(r) << r.error().message();
                EXPECT_EQ(r->state, task_state::succeeded);
                EXPECT_EQ(r->attempt, 1);
                EXPECT_EQ(r->worker.rfind("leaver-", 0), 0U) << r->worker;
            }
            // The client may see a result before the worker has handled its T4's answer.
            for (int i = 0; i < 200 && worker_stats_["leaver"].published < 2; ++i) {
                co_await settle(10ms);
            }
            EXPECT_EQ(worker_stats_["leaver"].published, 2U);
            co_await start_worker("heir", 2);
            for (const auto& id : *fresh_ids) {
                auto r = co_await zkd::zkco::with_timeout(tc.wait(id), 30s);
                ASSERT_TRUE(r) << r.error().message();
                EXPECT_EQ(r->worker.rfind("heir-", 0), 0U) << r->worker;
            }
            EXPECT_EQ(worker_stats_["leaver"].started, 2U);
        }(),
        120s
    );
}

TEST_F(RolesCluster, TheMasterReadsABacklogOnlyAsSlotsFree) {
    run(
        [&]() -> asio::awaitable<void> {
            auto* zk = co_await session();
            layout_ = (co_await ensure_layout(*zk, meta_info{})).value();
            // Shared: the master outlives this coroutine (it stops at TearDown) and calls back.
            auto depth_seen = std::make_shared<std::size_t>(0);
            auto& depth = *depth_seen;
            master_options opts;
            opts.on_queue_depth = [depth_seen](std::size_t n) { *depth_seen = n; };
            co_await start_master(std::move(opts));
            client* master_zk = sessions_.back().get();
            task_client tc(*zk, layout_);
            tc.auto_bundle(1);  // a backlog of 300 nodes
            std::vector<task_spec> reqs(300, task_spec{"echo", json::value("backlog")});
            auto ids = co_await tc.submit(std::move(reqs));
            ASSERT_TRUE(ids);
            // Once the master knows all 300, give it time to (wrongly) read them.
            std::function<bool()> known = [&depth] { return depth == 300; };
            const bool all_known = co_await zkd::test::wait_for(std::move(known));
            ASSERT_TRUE(all_known) << "the master saw " << depth << " pending tasks";
            co_await settle(300ms);
            // No worker: the master lists its shards but reads none of the 300 tasks.
            const auto idle_reads = master_zk->counters().reads;
            EXPECT_LT(idle_reads, 150U);
            co_await start_worker("w1", 2);
            for (const auto& id : *ids) {
                auto r = co_await zkd::zkco::with_timeout(tc.wait(id), 60s);
                ASSERT_TRUE(r) << r.error().message();
                EXPECT_EQ(r->state, task_state::succeeded);
            }
            EXPECT_EQ(master_stats_.assigned, 300U);
            RecordProperty("master_reads_idle", static_cast<int>(idle_reads));
            RecordProperty("master_reads_total", static_cast<int>(master_zk->counters().reads));
        }(),
        120s
    );
}

}  // namespace

// The master follows each pending shard by its change log (docs/protocol.md §6, §7): a task
// a client submits is read from the log, with its data, and the master's own deletes of
// pending nodes (T2, T7, a rejection) wake nothing and need no listing. Counts, not times: on
// 8326159, which lists the shard after the client's create and again after its own delete
// and then reads the task, the master's session makes 4 reads per task here, not 2.
TEST_F(RolesCluster, OneTaskAtATimeCostsTheMasterOneReadOfTheLogAndNoListing) {
    run(
        [&]() -> asio::awaitable<void> {
            auto* zk = co_await session();
            // One pending shard: every task, and every delete of ours, in the same one.
            layout_ = (co_await ensure_layout(*zk, meta_info{1, 16, 0})).value();
            master_options opts;
            opts.pending_sweep_interval = 1h;  // no sweeps in the counts
            const auto master_session = sessions_.size();
            co_await start_master(opts);
            co_await start_worker("w1", 1);
            task_client tc(*zk, layout_);
            tc.place_directly(false);  // the master's path is what this counts
            // One task first: the master has listed the shard once and the worker has joined.
            std::vector<task_spec> one{{"echo", json::value(0)}};
            auto first = co_await tc.submit(std::move(one));
            ASSERT_TRUE(first);
            ASSERT_TRUE(co_await zkd::zkco::with_timeout(tc.wait(first->front()), 30s));
            co_await master_settled();
            EXPECT_EQ(master_stats_.shard_listings, 1U);  // the first listing, no more
            const auto log_reads = master_stats_.shard_log_reads;
            const auto from_logs = master_stats_.tasks_from_logs;
            const auto task_reads = master_stats_.task_reads;
            const auto reads = sessions_[master_session]->counters().reads;

            constexpr std::uint64_t n = 20;
            for (std::uint64_t i = 1; i <= n; ++i) {
                std::vector<task_spec> next{{"echo", json::value(i)}};
                auto id = co_await tc.submit(std::move(next));
                ASSERT_TRUE(id);
                auto r = co_await zkd::zkco::with_timeout(tc.wait(id->front()), 30s);
                ASSERT_TRUE(r) << r.error().message();
                EXPECT_EQ(r->state, task_state::succeeded);
            }
            EXPECT_EQ(master_stats_.assigned, n + 1);
            EXPECT_EQ(master_stats_.shard_listings, 1U);              // none after our own T2s
            EXPECT_EQ(master_stats_.shard_log_reads - log_reads, n);  // one per T1
            EXPECT_EQ(master_stats_.tasks_from_logs - from_logs, n);  // no get of the task
            EXPECT_EQ(master_stats_.task_reads, task_reads);
            // All the master's reads: a log read per task, and at most a listing of the
            // worker's directory per task (its slot freed by T4 is in the way of the next).
            const auto master_reads = sessions_[master_session]->counters().reads - reads;
            RecordProperty("master_reads_per_task_x100", static_cast<int>(master_reads * 100 / n));
            EXPECT_LE(master_reads, 2 * n + 2);

            // T7 of a pending task (of a type nobody serves: it waits) deletes a pending node.
            std::vector<task_spec> held{{"nobody-serves-this", json::value(1)}};
            auto held_id = co_await tc.submit(std::move(held));
            ASSERT_TRUE(held_id);
            ASSERT_TRUE(co_await tc.cancel(held_id->front()));
            auto cancelled = co_await zkd::zkco::with_timeout(tc.wait(held_id->front()), 30s);
            ASSERT_TRUE(cancelled) << cancelled.error().message();
            EXPECT_EQ(cancelled->state, task_state::cancelled);
            // So does failing a malformed task, here one written with its change log.
            task_id_generator gen;
            const std::string bad = gen.next(5, now_ms());
            zkd::zkco::op::create garbage;  // (GCC 12 rejects the braced form in a coroutine)
            garbage.path = layout_.pending_task(bad);
            garbage.data = "{not json"s;  // UTF-8: a log carrying other bytes does not decode
            std::vector<zkd::zkco::multi_op> ops;
            ops.emplace_back(std::move(garbage));
            append_change_logs(ops);
            ASSERT_TRUE(co_await zk->multi(std::move(ops)));
            auto rejected = co_await zkd::zkco::with_timeout(tc.wait(bad), 30s);
            ASSERT_TRUE(rejected) << rejected.error().message();
            EXPECT_EQ(rejected->state, task_state::failed);
            std::vector<task_spec> last{{"echo", json::value(-1)}};
            auto last_id = co_await tc.submit(std::move(last));
            ASSERT_TRUE(last_id);
            ASSERT_TRUE(co_await zkd::zkco::with_timeout(tc.wait(last_id->front()), 30s));
            EXPECT_EQ(master_stats_.cancelled, 1U);
            EXPECT_EQ(master_stats_.rejected, 1U);
            EXPECT_EQ(master_stats_.shard_listings, 1U);  // still none
        }(),
        120s
    );
}

TEST_F(RolesCluster, TheTasksOfOneSubmitLandInOneShardAndTheNextSubmitInAnother) {
    // docs/protocol.md §3: a client draws the ids of what one transaction creates in one
    // pending shard, so the master reads one change log for it; the next one goes elsewhere.
    run(
        [&]() -> asio::awaitable<void> {
            auto* zk = co_await session();
            layout_ = (co_await ensure_layout(*zk, meta_info{})).value();
            task_client tc(*zk, layout_);
            auto shards_of = [&](const std::vector<std::string>& ids) {
                std::set<std::uint32_t> shards;
                for (const auto& id : ids) {
                    const auto ref = parse_task_ref(id);
                    EXPECT_TRUE(ref) << id;
                    shards.insert(shard_of(ref ? ref->node : id, layout_.pending_shards));
                }
                return shards;
            };
            std::vector<std::set<std::uint32_t>> seen;
            for (const std::size_t bundle : {1U, 1U, 4U}) {
                std::vector<task_spec> batch;
                batch.reserve(20);
                for (int i = 0; i < 20; ++i) {
                    batch.push_back({"echo", json::value(i)});
                }
                auto ids = co_await tc.submit(std::move(batch), submit_options{bundle});
                ASSERT_TRUE(ids) << ids.error().message();
                ASSERT_EQ(ids->size(), 20U);
                seen.push_back(shards_of(*ids));
                EXPECT_EQ(seen.back().size(), 1U) << "submit " << seen.size();
                // And ids still order as submitted (§3).
                EXPECT_TRUE(std::is_sorted(ids->begin(), ids->end()));
            }
            EXPECT_NE(seen[0], seen[1]);
            EXPECT_NE(seen[1], seen[2]);

            // A large submit spreads: no shard takes more than 250 nodes of it.
            std::vector<task_spec> large(600, task_spec{"echo", json::value(0)});
            auto ids = co_await tc.submit(std::move(large));
            ASSERT_TRUE(ids) << ids.error().message();
            std::map<std::uint32_t, std::size_t> per_shard;
            for (const auto& id : *ids) {
                ++per_shard[shard_of(id, layout_.pending_shards)];
            }
            EXPECT_EQ(per_shard.size(), 3U);
            for (const auto& [shard, n] : per_shard) {
                EXPECT_LE(n, 250U) << "shard " << shard;
            }
        }(),
        60s
    );
}

// A pending node created by a writer that leaves no change log (a stranger, a tool) moves
// the shard's children but not its data: no watch fires, the sweep finds it.
TEST_F(RolesCluster, APendingNodeNobodyLoggedIsFoundByTheSweep) {
    run(
        [&]() -> asio::awaitable<void> {
            auto* zk = co_await session();
            layout_ = (co_await ensure_layout(*zk, meta_info{})).value();
            master_options opts;
            opts.pending_sweep_interval = 100ms;
            co_await start_master(opts);
            co_await start_worker("w1", 1);
            task_client tc(*zk, layout_);
            std::vector<task_spec> one{{"echo", json::value(0)}};
            auto first = co_await tc.submit(std::move(one));
            ASSERT_TRUE(first);
            ASSERT_TRUE(co_await zkd::zkco::with_timeout(tc.wait(first->front()), 30s));
            co_await master_listed();
            const auto listings = master_stats_.shard_listings;

            task_id_generator gen;
            const std::string id = gen.next(5, now_ms());
            task_spec t;
            t.type = "echo";
            t.args = json::value("unlogged");
            t.submitted_ms = now_ms();
            ASSERT_TRUE(co_await zk->create(layout_.pending_task(id), encode(t)));
            auto r = co_await zkd::zkco::with_timeout(tc.wait(id), 30s);
            ASSERT_TRUE(r) << r.error().message();
            EXPECT_EQ(r->state, task_state::succeeded);
            EXPECT_EQ(r->value, json::value("unlogged"));
            EXPECT_EQ(master_stats_.shard_listings, listings + 1);  // the sweep's, of its shard
        }(),
        60s
    );
}

// A master started with direct placement off (zkd run --no-direct) says so in /master: its
// clients send every task through pending, and the master places them all.
TEST_F(RolesCluster, AMasterThatSaysNoDirectPlacementPlacesEveryTask) {
    run(
        [&]() -> asio::awaitable<void> {
            auto* zk = co_await session();
            layout_ = (co_await ensure_layout(*zk, meta_info{})).value();
            master_options opts;
            opts.direct_placement = false;
            co_await start_master(opts);
            co_await start_worker("w1", 2);
            co_await workers_joined(*zk, 1);
            task_client tc(*zk, layout_);
            constexpr std::uint64_t n = 5;
            co_await echo_one_at_a_time(tc, n);
            EXPECT_EQ(tc.direct_placed(), 0U);
            EXPECT_EQ(master_stats_.assigned, n);
            auto said = co_await zk->get("/master"s);
            ASSERT_TRUE(said);
            EXPECT_FALSE(decode_master(said->data).value().direct);
        }(),
        60s
    );
}

// docs/protocol.md §6 T1 "Direct placement": a client places plain tasks on workers with room
// itself. The master assigns nothing then, and reads nothing for them; a worker whose node
// changed after the client read it gets nothing (the task goes through pending instead).
TEST_F(RolesCluster, AClientPlacesTasksOnWorkersWithRoomAndTheRestGoesToTheMaster) {
    run(
        [&]() -> asio::awaitable<void> {
            auto* zk = co_await session();
            layout_ = (co_await ensure_layout(*zk, meta_info{})).value();
            master_options opts;
            opts.pending_sweep_interval = 1h;  // no sweeps in the counts
            const auto master_session = sessions_.size();
            co_await start_master(opts);
            co_await start_worker("w1", 2);
            co_await start_worker("w2", 2);
            co_await workers_joined(*zk, 2);
            task_client tc(*zk, layout_);
            tc.auto_bundle(1);  // plain tasks: placed directly or by the master, one by one
            {
                // The first submit reads the workers.
                std::vector<task_spec> one{{"echo", json::value(-1)}};
                auto id = co_await tc.submit(std::move(one));
                ASSERT_TRUE(id);
                ASSERT_TRUE(co_await zkd::zkco::with_timeout(tc.wait(id->front()), 30s));
            }
            ASSERT_EQ(tc.direct_placed(), 1U);
            co_await master_settled();
            const auto assigned = master_stats_.assigned;
            const auto master_reads = sessions_[master_session]->counters().reads;

            // One at a time: each goes directly, and costs the master nothing.
            constexpr std::uint64_t n = 20;
            co_await echo_one_at_a_time(tc, n);
            EXPECT_EQ(tc.direct_placed(), 1 + n);
            EXPECT_EQ(master_stats_.assigned, assigned);
            const auto read_by_master = sessions_[master_session]->counters().reads - master_reads;
            RecordProperty("master_reads", static_cast<int>(read_by_master));
            EXPECT_LE(read_by_master, 2U);  // at most a listing of a worker's directory or two

            // Six at once: room for 2 + 2 (nothing held now), the other two go to pending and
            // the master places them. Every one gets its result.
            std::vector<task_spec> six;
            for (int i = 0; i < 6; ++i) {
                six.push_back({"sleep", json::value{{"ms", 200}}});
            }
            auto ids = co_await tc.submit(std::move(six));
            ASSERT_TRUE(ids);
            for (const auto& id : *ids) {
                auto r = co_await zkd::zkco::with_timeout(tc.wait(id), 30s);
                ASSERT_TRUE(r) << r.error().message();
                EXPECT_EQ(r->state, task_state::succeeded);
            }
            EXPECT_EQ(tc.direct_placed(), 1 + n + 4);
            EXPECT_EQ(master_stats_.assigned, assigned + 2);

            // A worker's node that changed since the client read it (as draining sets it):
            // the check fails, and the task goes through pending. Right after a submit,
            // so that the client's read (at most a second old) is older than the change.
            bool redirected = false;
            for (int round = 0; round < 5 && !redirected; ++round) {
                std::vector<task_spec> probe{{"echo", json::value("probe")}};
                auto first = co_await tc.submit(std::move(probe));
                ASSERT_TRUE(first);
                ASSERT_TRUE(co_await zkd::zkco::with_timeout(tc.wait(first->front()), 30s));
                auto kids = co_await zk->get_children("/workers"s);
                ASSERT_TRUE(kids);
                for (const auto& name : kids->names) {
                    auto node = co_await zk->get("/workers/" + name);
                    ASSERT_TRUE(node);
                    ASSERT_TRUE(co_await zk->set("/workers/" + name, node->data, node->stat.version)
                    );
                }
                const auto direct = tc.direct_placed();
                const auto by_master = master_stats_.assigned;
                std::vector<task_spec> again{{"echo", json::value("again")}};
                auto id = co_await tc.submit(std::move(again));
                ASSERT_TRUE(id);
                auto r = co_await zkd::zkco::with_timeout(tc.wait(id->front()), 30s);
                ASSERT_TRUE(r) << r.error().message();
                EXPECT_EQ(r->value, json::value("again"));
                // Not placed directly unless the client read the workers again in between.
                redirected =
                    tc.direct_placed() == direct && master_stats_.assigned == by_master + 1;
            }
            EXPECT_TRUE(redirected);
            EXPECT_EQ(
                worker_stats_["w1"].published + worker_stats_["w2"].published,
                master_stats_.assigned + tc.direct_placed()
            );
        }(),
        120s
    );
}

}  // namespace ZKD_UNITY_ID
