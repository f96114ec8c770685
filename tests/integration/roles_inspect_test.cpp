// SPDX-License-Identifier: MIT
// Read-only views of a cluster (roles/client/inspect) against a real ZooKeeper: a master, a worker
// and a client in one process, each with its own session; the views before, during and after
// tasks; garbage in every kind of node; limits; nothing written by reading.
#include "protocol/ids.hpp"
#include "roles/client/inspect.hpp"
#include "roles/client/task_client.hpp"
#include "roles/cluster/namespace.hpp"
#include "support/roles_cluster.hpp"
#include "zkco/deadline.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include <gtest/gtest.h>

#include <algorithm>

namespace ZKD_UNITY_ID {

namespace asio = boost::asio;
namespace json = boost::json;
using namespace std::literals;
using namespace zkd::roles;
using namespace zkd::protocol;
using zkd::zkco::client;

namespace {

class RolesInspect : public zkd::test::roles_cluster {
protected:
    /// Creates a node (persistent); throws if that fails.
    static asio::awaitable<void> put(client& zk, std::string path, std::string data = {}) {
        auto made = co_await zk.create(path, std::move(data));
        if (!made) {
            throw std::runtime_error("create " + path + ": " + made.error().message());
        }
    }

    /// read_task's state; throws on an error.
    asio::awaitable<task_state> state_of(client& zk, std::string tid) {
        auto info = co_await read_task(zk, layout_, std::move(tid));
        co_return info.value().state;
    }

    /// The zxid of the last change anywhere below the chroot: reading must not move it.
    static asio::awaitable<std::int64_t> last_change(client& zk) {
        // A write anywhere bumps the zxid; a throwaway node's czxid reads it back.
        auto made = co_await zk.create("/probe-", "", zkd::zkco::create_mode::ephemeral_sequential);
        auto st = co_await zk.exists(made.value());
        co_await zk.remove(made.value());
        co_return st.value()->czxid;
    }
};

TEST_F(RolesInspect, NoClusterIsNoNodeAndReadingCreatesNothing) {
    run([&]() -> asio::awaitable<void> {
        auto* zk = co_await session();
        auto l = co_await read_layout(*zk);
        ASSERT_FALSE(l);
        EXPECT_EQ(l.error(), zkd::zkco::errc::no_node);
        const auto meta = co_await zk->exists("/meta"s);
        EXPECT_FALSE(meta.value());
        // Garbage in /meta is refused, not guessed around.
        co_await put(*zk, "/meta"s, R"({"v":1,"pending_shards":"x"})"s);
        auto bad = co_await read_layout(*zk);
        ASSERT_FALSE(bad);
        EXPECT_EQ(bad.error(), zkd::zkco::errc::data_inconsistency);
    }());
}

TEST_F(RolesInspect, AnEmptyCluster) {
    run([&]() -> asio::awaitable<void> {
        auto* zk = co_await session();
        auto made = co_await ensure_layout(*zk, meta_info{8, 4, now_ms()});
        ASSERT_TRUE(made);
        auto l = co_await read_layout(*zk);
        ASSERT_TRUE(l);
        EXPECT_EQ(*l, *made);
        EXPECT_EQ(l->pending_shards, 8U);
        EXPECT_EQ(l->result_shards, 4U);

        const auto before = co_await last_change(*zk);
        auto view = co_await read_cluster(*zk, *l);
        ASSERT_TRUE(view) << view.error().message();
        EXPECT_EQ(view->epoch, 0);
        EXPECT_FALSE(view->master);
        EXPECT_TRUE(view->workers.empty());
        EXPECT_EQ(view->pending, 0U);
        EXPECT_EQ(view->results, 0U);
        EXPECT_EQ(view->cancel_requests, 0U);
        EXPECT_EQ(
            to_json(*view),
            json::parse(
                R"({"epoch":0,"master":null,"workers":[],"pending":0,"delayed":0,"results":0,"uncounted_result_dirs":0,"cancel_requests":0})"
            )
        );
        auto tasks = co_await list_tasks(*zk, *l);
        ASSERT_TRUE(tasks);
        EXPECT_EQ(
            to_json(*tasks),
            json::parse(
                R"({"pending":[],"assigned":[],"delayed":[],"pending_total":0,"assigned_total":0,"delayed_total":0,"limit":1000,"truncated":false})"
            )
        );
        // Reading wrote nothing: the only transactions since are the probes' own (the first
        // one's remove, then the second one's create).
        const auto after = co_await last_change(*zk);
        EXPECT_EQ(after, before + 2);
    }());
}

TEST_F(RolesInspect, ViewsFollowTasksThroughTheirLives) {
    run(
        [&]() -> asio::awaitable<void> {
            auto* zk = co_await session();
            layout_ = (co_await ensure_layout(*zk, meta_info{})).value();
            const auto boss = co_await start_master();
            const auto w1 = (co_await start_worker("w1", 1)).me;
            task_client tc(*zk, layout_);

            // One slot: the first sleeps, the second waits behind it.
            std::vector<task_spec> first{
                {.type = "sleep", .args = json::value{{"ms", 60'000}}, .priority = 6}};
            auto first_id = co_await tc.submit(std::move(first));
            ASSERT_TRUE(first_id);
            const auto running_id = first_id->front();
            task_info running;
            for (int i = 0; i < 300 && running.state != task_state::running; ++i) {
                co_await settle(20ms);
                running = (co_await read_task(*zk, layout_, running_id)).value();
            }
            ASSERT_EQ(running.state, task_state::running);
            std::vector<task_spec> second{
                {.type = "sleep", .args = json::value{{"ms", 60'000}}, .priority = 4}};
            auto second_id = co_await tc.submit(std::move(second));
            ASSERT_TRUE(second_id);
            const auto waiting_id = second_id->front();
            EXPECT_EQ(running.worker, w1.id);
            EXPECT_FALSE(running.result);
            auto waiting = (co_await read_task(*zk, layout_, waiting_id)).value();
            EXPECT_EQ(waiting.state, task_state::pending);
            EXPECT_EQ(waiting.worker, "");

            auto view = co_await read_cluster(*zk, layout_);
            ASSERT_TRUE(view) << view.error().message();
            EXPECT_EQ(view->epoch, 1);
            ASSERT_TRUE(view->master);
            EXPECT_EQ(view->master->id, boss.id);
            EXPECT_EQ(view->master->epoch, 1);
            EXPECT_EQ(view->master->host, "master");
            EXPECT_EQ(view->master->pid, 7);
            EXPECT_GT(view->master->since_ms, 0);
            EXPECT_TRUE(view->master->garbage.empty());
            ASSERT_EQ(view->workers.size(), 1U);
            const auto& w = view->workers.front();
            EXPECT_EQ(w.id, w1.id);
            EXPECT_EQ(w.host, "w1");
            EXPECT_EQ(w.capacity, 1);
            EXPECT_EQ(w.threads, 2);  // its pool's
            EXPECT_FALSE(w.types.empty());
            EXPECT_GT(w.started_ms, 0);
            EXPECT_EQ(w.assigned, 1U);
            EXPECT_EQ(w.running, 1U);
            EXPECT_TRUE(w.garbage.empty());
            EXPECT_EQ(view->pending, 1U);
            EXPECT_EQ(view->results, 0U);
            const auto vj = to_json(*view);
            EXPECT_EQ(vj.at("workers").at(0).at("running"), 1);
            EXPECT_EQ(vj.at("master").at("id"), json::value(boss.id));
            EXPECT_TRUE(vj.at("master").as_object().contains("throughput"));

            auto list = co_await list_tasks(*zk, layout_);
            ASSERT_TRUE(list) << list.error().message();
            EXPECT_FALSE(list->truncated);
            ASSERT_EQ(list->pending.size(), 1U);
            ASSERT_EQ(list->assigned.size(), 1U);
            const auto& p = list->pending.front();
            EXPECT_EQ(p.id, waiting_id);
            EXPECT_EQ(p.state, task_state::pending);
            EXPECT_EQ(p.type, "sleep");
            EXPECT_EQ(p.priority, 4);
            EXPECT_EQ(p.attempt, 1);
            EXPECT_GE(p.age_ms, 0);
            EXPECT_LE(p.age_ms, now_ms() - p.submitted_ms);  // measured before this line
            EXPECT_LT(p.age_ms, 60'000);
            EXPECT_GT(p.submitted_ms, 0);
            const auto& a = list->assigned.front();
            EXPECT_EQ(a.id, running_id);
            EXPECT_EQ(a.state, task_state::running);
            EXPECT_EQ(a.worker, w1.id);
            EXPECT_EQ(a.priority, 6);
            EXPECT_GT(a.assigned_ms, 0);
            EXPECT_GT(a.running_ms, 0);
            const auto lj = to_json(*list);
            EXPECT_EQ(lj.at("assigned").at(0).at("state"), "running");
            EXPECT_EQ(lj.at("assigned").at(0).at("worker"), json::value(w1.id));
            EXPECT_EQ(lj.at("pending").at(0).at("type"), "sleep");
            EXPECT_FALSE(lj.at("pending").at(0).as_object().contains("worker"));

            // A cancel request shows until the master acts on it; then both end cancelled.
            const auto early = co_await peek_result(*zk, layout_, running_id);
            EXPECT_FALSE(early.value());
            const auto c1 = co_await tc.cancel(running_id);
            ASSERT_TRUE(c1);
            const auto c2 = co_await tc.cancel(waiting_id);
            ASSERT_TRUE(c2);
            std::optional<task_result> r;
            for (int i = 0; i < 300 && !r; ++i) {
                co_await settle(20ms);
                r = (co_await peek_result(*zk, layout_, running_id)).value();
            }
            ASSERT_TRUE(r);
            EXPECT_EQ(r->state, task_state::cancelled);
            EXPECT_EQ(r->task, running_id);
            for (int i = 0; i < 300 && view->results < 2; ++i) {
                co_await settle(20ms);
                view = co_await read_cluster(*zk, layout_);
                ASSERT_TRUE(view);
            }
            EXPECT_EQ(view->results, 2U);
            EXPECT_EQ(view->pending, 0U);
            EXPECT_EQ(view->workers.front().assigned, 0U);

            // Peeking consumes nothing: the result is still there to read, and to wait for.
            auto info = (co_await read_task(*zk, layout_, running_id)).value();
            EXPECT_EQ(info.state, task_state::cancelled);
            ASSERT_TRUE(info.result);
            EXPECT_EQ(info.result->state, task_state::cancelled);
            const auto ij = to_json(info);
            EXPECT_EQ(ij.at("state"), "cancelled");
            EXPECT_EQ(ij.at("result").at("state"), "cancelled");
            EXPECT_EQ(ij.at("result").at("task"), json::value(running_id));
            auto consumed = co_await zkd::zkco::with_timeout(tc.wait(running_id), 30s);
            ASSERT_TRUE(consumed);
            EXPECT_EQ(consumed->state, task_state::cancelled);
            auto gone = co_await zkd::zkco::with_timeout(tc.wait(waiting_id), 30s);
            ASSERT_TRUE(gone);

            // Once consumed, a task is unknown.
            for (int i = 0; i < 300; ++i) {
                auto v = co_await read_task(*zk, layout_, running_id);
                if (v && v->state == task_state::unknown) {
                    break;
                }
                co_await settle(10ms);
            }
            const auto st1 = co_await state_of(*zk, running_id);
            EXPECT_EQ(st1, task_state::unknown);
            const auto late = co_await peek_result(*zk, layout_, running_id);
            EXPECT_FALSE(late.value());

            // A finished task with a value.
            std::vector<task_spec> sum{{"sum", json::array{1, 2, 3}}};
            auto sum_id = co_await tc.submit(std::move(sum));
            ASSERT_TRUE(sum_id);
            std::optional<task_result> done;
            for (int i = 0; i < 300 && !done; ++i) {
                co_await settle(10ms);
                done = (co_await peek_result(*zk, layout_, sum_id->front())).value();
            }
            ASSERT_TRUE(done);
            EXPECT_EQ(done->state, task_state::succeeded);
            EXPECT_EQ(to_json(*done).at("value").at("sum"), 6);
            auto sum_info = (co_await read_task(*zk, layout_, sum_id->front())).value();
            EXPECT_EQ(sum_info.state, task_state::succeeded);
            EXPECT_EQ(sum_info.worker, w1.id);
            const auto sum_done = co_await zkd::zkco::with_timeout(tc.wait(sum_id->front()), 30s);
            EXPECT_TRUE(sum_done);
        }(),
        120s
    );
}

TEST_F(RolesInspect, GarbageIsReportedNotFatal) {
    run([&]() -> asio::awaitable<void> {
        auto* zk = co_await session();
        layout_ = (co_await ensure_layout(*zk, meta_info{})).value();
        task_id_generator gen;
        // No master runs: nothing moves, nothing is cleaned up.
        co_await put(*zk, "/master"s, "not json"s);
        // A healthy worker, and one whose node is garbage, each with assignments.
        auto good = member("good", 2);
        good.types = {"echo"};
        co_await put(*zk, layout::worker(good.id), encode(good));
        co_await put(*zk, layout::assign_dir(good.id));
        const std::string bad_worker = "bad-1-00000000";
        co_await put(*zk, layout::worker(bad_worker), R"({"v":1,"id":"x","capacity":-3})"s);
        co_await put(*zk, layout::assign_dir(bad_worker));

        task_node spec;
        spec.task.type = "echo";
        spec.task.submitted_ms = now_ms() - 1000;
        spec.assigned.worker = good.id;
        spec.assigned.assigned_ms = now_ms();
        const auto ok_assigned = gen.next(5, now_ms());
        co_await put(*zk, layout::assignment(good.id, ok_assigned), encode(spec));
        co_await put(*zk, layout::cancel_marker(good.id, ok_assigned));
        const auto junk_assigned = gen.next(5, now_ms());
        co_await put(*zk, layout::assignment(good.id, junk_assigned), "\x01\x02"s);
        const auto on_bad = gen.next(5, now_ms());
        spec.run.running_ms = now_ms();
        co_await put(*zk, layout::assignment(bad_worker, on_bad), encode(spec));

        // Pending: a fine task, one with garbage data, one whose name is no task id.
        const auto fine = gen.next(5, now_ms());
        task_spec pending;
        pending.type = "sum";
        pending.priority = 5;
        pending.submitted_ms = now_ms() - 5000;
        co_await put(*zk, layout_.pending_task(fine), encode(pending));
        // Written by another client without submitted_ms: as old as its id says.
        const auto undated = gen.next(5, now_ms() - 3000);
        pending.submitted_ms = 0;
        co_await put(*zk, layout_.pending_task(undated), encode(pending));
        const auto junk_pending = gen.next(5, now_ms());
        co_await put(*zk, layout_.pending_task(junk_pending), "[]"s);
        co_await put(*zk, "/pending/00/not-a-task"s, encode(pending));

        // Results: one garbage.
        const auto junk_result = gen.next(5, now_ms());
        co_await put(*zk, layout_.result_dir(junk_result));
        co_await put(*zk, layout_.result(junk_result), R"({"v":2})"s);
        co_await put(*zk, layout::cancel_request(fine), encode(cancel_info{now_ms()}));

        auto view = co_await read_cluster(*zk, layout_);
        ASSERT_TRUE(view) << view.error().message();
        ASSERT_TRUE(view->master);
        EXPECT_FALSE(view->master->garbage.empty());
        EXPECT_EQ(to_json(*view->master).as_object().size(), 1U);  // {"garbage": ...}
        ASSERT_EQ(view->workers.size(), 2U);
        const auto& b = view->workers[0].id == bad_worker ? view->workers[0] : view->workers[1];
        const auto& g = view->workers[0].id == bad_worker ? view->workers[1] : view->workers[0];
        EXPECT_FALSE(b.garbage.empty());
        EXPECT_EQ(b.assigned, 1U);
        EXPECT_EQ(b.running, 1U);
        EXPECT_TRUE(g.garbage.empty()) << g.garbage;
        EXPECT_EQ(g.types, std::vector<std::string>{"echo"});
        EXPECT_EQ(g.assigned, 2U);  // the marker is not counted; garbage data still is
        EXPECT_EQ(g.running, 0U);
        EXPECT_EQ(view->pending, 4U);
        EXPECT_EQ(view->results, 1U);
        EXPECT_EQ(view->cancel_requests, 1U);
        const auto bj = to_json(b);
        EXPECT_TRUE(bj.as_object().contains("garbage"));
        EXPECT_FALSE(bj.as_object().contains("capacity"));
        EXPECT_FALSE(bj.as_object().contains("threads"));

        auto list = co_await list_tasks(*zk, layout_);
        ASSERT_TRUE(list) << list.error().message();
        EXPECT_EQ(list->pending_total, 4U);
        EXPECT_EQ(list->assigned_total, 3U);
        int garbage_pending = 0;
        for (const auto& e : list->pending) {
            if (e.id == fine) {
                EXPECT_TRUE(e.garbage.empty());
                EXPECT_EQ(e.type, "sum");
                EXPECT_GE(e.age_ms, 5000);
            } else if (e.id == undated) {
                EXPECT_GE(e.age_ms, 3000);
                EXPECT_LT(e.age_ms, 60'000);
                EXPECT_EQ(e.priority, 5);
            } else {
                EXPECT_FALSE(e.garbage.empty()) << e.id;
                ++garbage_pending;
            }
        }
        EXPECT_EQ(garbage_pending, 2);
        int garbage_assigned = 0;
        for (const auto& e : list->assigned) {
            if (!e.garbage.empty()) {
                EXPECT_EQ(e.id, junk_assigned);
                EXPECT_EQ(e.worker, good.id);
                ++garbage_assigned;
            }
        }
        EXPECT_EQ(garbage_assigned, 1);

        // One task at a time.
        auto junk = (co_await read_task(*zk, layout_, junk_result)).value();
        EXPECT_EQ(junk.state, task_state::unknown);
        EXPECT_FALSE(junk.garbage.empty());
        auto peeked = co_await peek_result(*zk, layout_, junk_result);
        ASSERT_FALSE(peeked);
        EXPECT_EQ(peeked.error(), client_errc::garbage_result);
        auto junk_a = (co_await read_task(*zk, layout_, junk_assigned)).value();
        EXPECT_EQ(junk_a.state, task_state::assigned);
        EXPECT_EQ(junk_a.worker, good.id);
        EXPECT_FALSE(junk_a.garbage.empty());
        const auto st2 = co_await state_of(*zk, on_bad);
        EXPECT_EQ(st2, task_state::running);
        const auto st3 = co_await state_of(*zk, fine);
        EXPECT_EQ(st3, task_state::pending);
        const auto st4 = co_await state_of(*zk, "not-a-task");
        EXPECT_EQ(st4, task_state::unknown);
        const auto st5 = co_await state_of(*zk, gen.next(5, now_ms()));
        EXPECT_EQ(st5, task_state::unknown);
        // Nothing was cleaned up by reading.
        const auto still = co_await zk->exists(layout_.result(junk_result));
        EXPECT_TRUE(still.value());
    }());
}

TEST_F(RolesInspect, ResultsAreCountedInEveryDirectoryBelowResults) {
    run([&]() -> asio::awaitable<void> {
        auto* zk = co_await session();
        layout_ = (co_await ensure_layout(*zk, meta_info{})).value();
        // Two clients' directories (one empty), and a result shard holding the result of a
        // pending node whose name is no task id.
        task_id_generator one(0x0000abcdU);
        task_id_generator two(0x0000fedcU);
        co_await put(*zk, layout::client_results(one.client_hex()));
        co_await put(*zk, layout::client_results(two.client_hex()));
        for (int i = 0; i < 3; ++i) {
            co_await put(*zk, layout_.result(one.next(5, now_ms())), "{}"s);
        }
        co_await put(*zk, zkd::zkco::join_path(layout_.result_shard(1), "not-a-task"), "{}"s);
        auto dirs = co_await list_result_dirs(*zk);
        ASSERT_TRUE(dirs) << dirs.error().message();
        EXPECT_EQ(dirs->size(), layout_.result_shards + 2U);
        EXPECT_TRUE(std::is_sorted(dirs->begin(), dirs->end()));
        EXPECT_NE(
            std::find(dirs->begin(), dirs->end(), layout::client_results(two.client_hex())),
            dirs->end()
        );
        const auto before = co_await last_change(*zk);
        auto view = co_await read_cluster(*zk, layout_);
        ASSERT_TRUE(view) << view.error().message();
        EXPECT_EQ(view->results, 4U);
        EXPECT_EQ(view->uncounted_result_dirs, 0U);
        EXPECT_EQ(co_await last_change(*zk), before + 2);  // only the probes wrote

        // Past most_result_dirs_counted clients' directories, only the shards are counted
        // (a view's cost does not grow with clients that left directories behind).
        std::vector<zkd::zkco::multi_op> ops;
        for (std::uint32_t c = 1; c + 2 <= most_result_dirs_counted; ++c) {
            zkd::zkco::op::create dir;  // (GCC 12 rejects the braced form in a coroutine)
            dir.path = layout::client_results(task_id_generator(0x10000000U + c).client_hex());
            ops.emplace_back(std::move(dir));
        }
        ASSERT_TRUE(co_await zk->multi(std::move(ops)));
        view = co_await read_cluster(*zk, layout_);
        ASSERT_TRUE(view) << view.error().message();
        EXPECT_EQ(view->uncounted_result_dirs, 0U) << "exactly the most counted";
        EXPECT_EQ(view->results, 4U);
        co_await put(*zk, layout::client_results(task_id_generator(0x2000000U).client_hex()));
        view = co_await read_cluster(*zk, layout_);
        ASSERT_TRUE(view) << view.error().message();
        EXPECT_EQ(view->uncounted_result_dirs, most_result_dirs_counted + 1);
        EXPECT_EQ(view->results, 1U) << "the shard's result only";
    }());
}

TEST_F(RolesInspect, MasterThroughputAndDirectPlacementAreReported) {
    run([&]() -> asio::awaitable<void> {
        auto* zk = co_await session();
        layout_ = (co_await ensure_layout(*zk, meta_info{})).value();
        auto m = member("boss", 0);
        m.capacity.reset();
        m.epoch = 3;
        m.since_ms = 1234;
        m.throughput = 12.5;
        co_await put(*zk, "/master"s, encode(m));
        auto view = (co_await read_cluster(*zk, layout_)).value();
        ASSERT_TRUE(view.master);
        EXPECT_EQ(view.master->throughput, 12.5);
        EXPECT_EQ(view.master->epoch, 3);
        EXPECT_EQ(view.master->since_ms, 1234);
        EXPECT_EQ(to_json(*view.master).at("throughput"), 12.5);
        EXPECT_EQ(to_json(*view.master).at("direct"), true);  // not said: clients may
        const auto removed = co_await zk->remove("/master"s);
        ASSERT_TRUE(removed);
        m.throughput.reset();
        m.direct = false;  // zkd run --no-direct
        co_await put(*zk, "/master"s, encode(m));
        view = (co_await read_cluster(*zk, layout_)).value();
        ASSERT_TRUE(view.master);
        EXPECT_FALSE(view.master->throughput);
        EXPECT_TRUE(to_json(*view.master).at("throughput").is_null());
        EXPECT_FALSE(view.master->direct);
        EXPECT_EQ(to_json(*view.master).at("direct"), false);
    }());
}

TEST_F(RolesInspect, ListsAreCutAtTheLimitInTheMastersOrder) {
    run([&]() -> asio::awaitable<void> {
        auto* zk = co_await session();
        layout_ = (co_await ensure_layout(*zk, meta_info{})).value();
        task_client tc(*zk, layout_);  // no master: everything stays pending
        std::vector<task_spec> reqs;
        reqs.reserve(30);
        for (int i = 0; i < 30; ++i) {
            reqs.push_back({.type = "echo", .args = json::value(i), .priority = i % 10 == 0 ? 9 : 2}
            );
        }
        auto ids = co_await tc.submit(std::move(reqs));
        ASSERT_TRUE(ids);
        auto list = co_await list_tasks(*zk, layout_, 10);
        ASSERT_TRUE(list);
        EXPECT_TRUE(list->truncated);
        EXPECT_EQ(list->pending_total, 30U);
        EXPECT_EQ(list->limit, 10U);
        ASSERT_EQ(list->pending.size(), 10U);
        // Highest priority first (ids sort that way), then submission order.
        for (std::size_t i = 0; i < 3; ++i) {
            EXPECT_EQ(list->pending[i].priority, 9) << i;
            EXPECT_EQ(list->pending[i].id, (*ids)[i * 10]);
        }
        for (std::size_t i = 1; i < list->pending.size(); ++i) {
            EXPECT_LT(list->pending[i - 1].id, list->pending[i].id);
        }
        auto all = co_await list_tasks(*zk, layout_, 30);
        ASSERT_TRUE(all);
        EXPECT_FALSE(all->truncated);
        EXPECT_EQ(all->pending.size(), 30U);
        auto view = (co_await read_cluster(*zk, layout_)).value();
        EXPECT_EQ(view.pending, 30U);
    }());
}

TEST_F(RolesInspect, AClosedSessionFailsTheViewWithItsError) {
    run([&]() -> asio::awaitable<void> {
        auto* zk = co_await session();
        layout_ = (co_await ensure_layout(*zk, meta_info{})).value();
        co_await zk->close();
        auto view = co_await read_cluster(*zk, layout_);
        ASSERT_FALSE(view);
        EXPECT_EQ(view.error(), zkd::zkco::condition::session_lost) << view.error().message();
        auto list = co_await list_tasks(*zk, layout_);
        ASSERT_FALSE(list);
        auto info = co_await read_task(*zk, layout_, task_id_generator{}.next(5, now_ms()));
        ASSERT_FALSE(info);
    }());
}

}  // namespace

}  // namespace ZKD_UNITY_ID
