// SPDX-License-Identifier: MIT
// A cluster whose ZooKeeper state others write to (docs/protocol.md §8): foreign nodes where
// only ephemeral ones belong, children below nodes of ours, our nodes deleted or moved. The
// cluster must carry on, lose no task, and never turn a failure into a loop. Each test
// writes the foreign state directly, as a stranger with a ZooKeeper client would.
#include "roles/client/task_client.hpp"
#include "roles/cluster/namespace.hpp"
#include "roles/node.hpp"
#include "roles/txn/zk_ops.hpp"
#include "support/roles_cluster.hpp"

#include <boost/json.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <optional>

namespace ZKD_UNITY_ID {

namespace asio = boost::asio;
namespace json = boost::json;
using namespace std::literals;
using namespace zkd::roles;
using namespace zkd::protocol;
using zkd::zkco::client;

namespace {

class RolesHostile : public zkd::test::roles_cluster {
protected:
    /// Waits until `done()` holds, checking every 20 ms; false after `limit`.
    template <class Pred>
    asio::awaitable<bool> eventually(Pred& done, std::chrono::milliseconds limit = 15s) {
        const auto end = std::chrono::steady_clock::now() + limit;
        while (std::chrono::steady_clock::now() < end) {
            const bool ok = co_await done();
            if (ok) {
                co_return true;
            }
            co_await settle(20ms);
        }
        co_return false;
    }

    /// Requests the session sent in `d`: a loop without backoff shows as thousands.
    asio::awaitable<std::uint64_t> requests_during(client& zk, std::chrono::milliseconds d) {
        const auto before = zk.counters();
        co_await settle(d);
        const auto after = zk.counters();
        co_return (after.reads + after.writes) - (before.reads + before.writes);
    }

    /// Starts a master and a worker `w1` (capacity 2) beside worker nodes a stranger wrote
    /// (their assignment directories `fake_dirs`), runs 20 echo tasks through `zk`, and
    /// checks that `w1` ran every one, none went to a fake, and the master does not loop.
    asio::awaitable<void> only_the_real_worker_works(
        client& zk, const std::vector<std::string>& fake_dirs
    ) {
        co_await start_master();
        master_zk_ = sessions_.back().get();
        worker_ = co_await start_worker("w1"s, 2);
        task_client tc(zk, layout_);
        std::vector<task_spec> batch;
        batch.reserve(20);
        for (int i = 0; i < 20; ++i) {
            batch.push_back(task_spec{"echo"s, json::value(i)});
        }
        auto ids = co_await tc.submit(std::move(batch));
        ASSERT_TRUE(ids);
        for (const auto& id : *ids) {
            auto r = co_await zkd::zkco::with_timeout(tc.wait(id), 15s);
            ASSERT_TRUE(r) << id << ": " << r.error().message();
            EXPECT_EQ(r->state, task_state::succeeded);
            EXPECT_EQ(r->worker, worker_.me.id);
        }
        for (const auto& dir : fake_dirs) {
            auto kids = co_await zk.get_children(dir);
            ASSERT_TRUE(kids);
            EXPECT_TRUE(kids->names.empty()) << "tasks were assigned to " << dir;
        }
        EXPECT_LT(co_await requests_during(*master_zk_, 500ms), 50U) << "the master loops";
        co_await tc.flush();
    }

    /// A master and one worker `w1` (capacity 2), each on a session of its own; the master's
    /// session is the one `master_zk_` points to.
    asio::awaitable<client*> cluster_with_worker(master_options opts = {}) {
        auto* zk = co_await cluster_session();
        co_await start_master(std::move(opts));
        master_zk_ = sessions_.back().get();
        worker_ = co_await start_worker("w1"s, 2);
        co_return zk;
    }

    /// Submits one echo task through `tc` and waits for its result: true when it succeeded.
    /// The hostile tests below first see the cluster work, then break something.
    asio::awaitable<bool> echo_done(task_client& tc, int value) {
        std::vector<task_spec> reqs(1, task_spec{"echo", json::value(value)});
        auto ids = co_await tc.submit(std::move(reqs));
        if (!ids) {
            ADD_FAILURE() << "submit failed: " << ids.error().message();
            co_return false;
        }
        auto r = co_await zkd::zkco::with_timeout(tc.wait(ids->front()), 15s);
        if (!r) {
            ADD_FAILURE() << "no result: " << r.error().message();
            co_return false;
        }
        co_return r->state == task_state::succeeded;
    }

    /// The first assignment in `w`'s directory, once there is one.
    asio::awaitable<std::string> assignment_of(client& zk, const member_info& w) {
        std::string found;
        // Named, not written inside the co_await: GCC 12 destroys such lambdas twice.
        auto assigned = [&]() -> asio::awaitable<bool> {
            auto kids = co_await zk.get_children(layout::assign_dir(w.id));
            if (!kids) {
                co_return false;
            }
            for (const auto& name : kids->names) {
                if (!is_cancel_marker(name)) {
                    found = name;
                }
            }
            co_return !found.empty();
        };
        const bool there = co_await eventually(assigned);
        EXPECT_TRUE(there) << "nothing was assigned to " << w.id;
        co_return found;
    }

    client* master_zk_ = nullptr;
    zkd::test::started_worker worker_;
};

/// The epoch a /master node's data names; 0 for none.
std::int64_t epoch_of(const std::string& data) {
    auto info = decode_master(data);
    return info && info->epoch ? *info->epoch : 0;
}

/// True when /master is there and names epoch 1 (the fixture's master).
asio::awaitable<bool> master_node_of_epoch_1(client* zk) {
    auto m = co_await zk->get(layout::master());
    if (!m) {
        co_return false;
    }
    co_return epoch_of(m->data) == 1;
}

/// A sleep task's args.
json::value sleep_args(int ms) {
    return json::value{{"ms", ms}};
}

/// One task to submit (named, not braced inside a co_await: GCC 12).
std::vector<task_spec> one(std::string type, json::value args) {
    std::vector<task_spec> v;
    v.push_back(task_spec{std::move(type), std::move(args)});
    return v;
}

/// A task written directly into its pending shard, as a stranger's client would.
std::string foreign_task(const std::string& type, json::value args) {
    task_spec t;
    t.type = type;
    t.args = std::move(args);
    t.submitted_ms = now_ms();
    return encode(t);
}

// --- a deposed master rejoins the election --------------------------------------

TEST_F(RolesHostile, AnyoneMovingTheEpochDeposesTheMasterAndANewTermStarts) {
    run(
        [&]() -> asio::awaitable<void> {
            node_options o;
            o.zk = base_ + chroot_;
            o.ns = "epoch"s;
            o.session_timeout = 4s;
            o.capacity = 1;
            o.host = "solo"s;
            roles_.spawn(run_node(o, registry_, pool_), "node"s);
            auto cfg = make_config();
            cfg.connect_string += chroot_path(o.ns);
            sessions_.push_back(std::make_unique<client>(ioc_.get_executor(), cfg));
            auto& zk = *sessions_.back();
            ASSERT_TRUE(co_await zkd::zkco::with_timeout(zk.connect(), 10s));
            auto master_is = [&](std::int64_t epoch) {
                return [&zk, epoch]() -> asio::awaitable<bool> {
                    auto m = co_await zk.get(layout::master());
                    if (!m) {
                        co_return false;
                    }
                    const std::int64_t now = epoch_of(m->data);
                    co_return now == epoch;
                };
            };
            auto epoch1 = master_is(1);
            const bool first = co_await eventually(epoch1);
            ASSERT_TRUE(first);

            // A stranger moves /epoch: the master is deposed (epoch 1 is no longer current).
            ASSERT_TRUE(co_await zk.set(layout::epoch(), R"({"v":1})"s));
            // It leaves the election and, the only candidate, takes over again with epoch 3.
            auto epoch3 = master_is(3);
            const bool again = co_await eventually(epoch3);
            EXPECT_TRUE(again) << "no master acts after /epoch was moved";
            auto l = co_await ensure_layout(zk, meta_info{});
            ASSERT_TRUE(l);
            task_client tc(zk, *l);
            auto ids = co_await tc.submit(one("echo"s, json::value("after")));
            ASSERT_TRUE(ids);
            auto r = co_await zkd::zkco::with_timeout(tc.wait(ids->front()), 15s);
            ASSERT_TRUE(r) << r.error().message();
            EXPECT_EQ(r->state, task_state::succeeded);
            co_await tc.flush();
        }(),
        60s
    );
}

// --- only ephemeral nodes stand for workers and candidates ----------------------

TEST_F(RolesHostile, APersistentWorkerNodeGetsNoTasksAndStallsNothing) {
    run([&]() -> asio::awaitable<void> {
        // Written before the master starts, so that it meets them when it builds its view.
        auto* zk = co_await cluster_session();
        member_info fake = member("squatter"s, 100);
        fake.types = {"echo"s};
        ASSERT_TRUE(co_await zk->create(layout::worker(fake.id), encode(fake)));
        member_info fake2 = member("squatter2"s, 100);
        fake2.types = {"echo"s};
        ASSERT_TRUE(co_await zk->create(layout::worker(fake2.id), encode(fake2)));
        ASSERT_TRUE(co_await zk->create(layout::assign_dir(fake2.id)));
        const std::vector<std::string> fake_dirs{layout::assign_dir(fake2.id)};
        co_await only_the_real_worker_works(*zk, fake_dirs);
    }());
}

// A worker node (ephemeral, as a worker's) whose threads no worker would say (§2: an
// integer of 1 or more) is garbage: ignored like any (§8), and the tasks go to real workers.
TEST_F(RolesHostile, AWorkerNodeWithGarbageThreadsGetsNoTasks) {
    run([&]() -> asio::awaitable<void> {
        auto* zk = co_await cluster_session();
        std::vector<std::string> fakes;
        for (const auto& [name, threads] :
             {std::pair{"zero"s, "0"s}, {"text"s, R"("lots")"s}, {"huge"s, "4294967296"s}}) {
            const auto id = member(name, 100).id;
            fakes.push_back(layout::assign_dir(id));
            std::string data = R"({"v":1,"id":")" + id;
            data += R"(","host":"h","pid":1,"capacity":100,"threads":)";
            data += threads;
            data += R"(,"types":["echo"]})";
            ASSERT_TRUE(
                co_await zk->create(layout::worker(id), data, zkd::zkco::create_mode::ephemeral)
            );
            ASSERT_TRUE(co_await zk->create(layout::assign_dir(id)));
        }
        co_await only_the_real_worker_works(*zk, fakes);
    }());
}

TEST_F(RolesHostile, APersistentElectionNodeDoesNotKeepTheClusterWithoutAMaster) {
    run([&]() -> asio::awaitable<void> {
        auto* zk = co_await cluster_session();
        const std::string squat = "/election/c-squat-1-deadbeef-0000000000"s;
        ASSERT_TRUE(co_await zk->create(squat, R"({"v":1,"id":"squat-1-deadbeef"})"s));
        auto* candidate = co_await session();
        auto won = co_await zkd::zkco::with_timeout(campaign(*candidate, member("real"s, 0)), 10s);
        EXPECT_TRUE(won) << "a persistent candidate node keeps the cluster without a master: "
                         << won.error().message();
    }());
}

// --- tasks that cannot be assigned fail once, with no loop ----------------------

TEST_F(RolesHostile, AnOversizedPendingNodeFailsOnceAsMalformed) {
    run([&]() -> asio::awaitable<void> {
        auto* zk = co_await cluster_with_worker();
        task_id_generator gen;
        const auto tid = gen.next(5, now_ms());
        const std::string big =
            foreign_task("echo"s, json::value(std::string(std::size_t{700} * 1024, 'x')));
        ASSERT_GT(big.size(), max_task_bytes);
        ASSERT_TRUE(co_await zk->create(layout_.pending_task(tid), big));
        task_client tc(*zk, layout_);
        auto r = co_await zkd::zkco::with_timeout(tc.wait(tid), 15s);
        ASSERT_TRUE(r) << r.error().message();
        EXPECT_EQ(r->state, task_state::failed);
        ASSERT_TRUE(r->error);
        EXPECT_EQ(r->error->code, "malformed_task");
        EXPECT_NE(r->error->message.find("bytes"), std::string::npos) << r->error->message;
        EXPECT_LT(co_await requests_during(*master_zk_, 500ms), 50U) << "the master loops";
        EXPECT_EQ(master_stats_.rejected, 1U);
        co_await tc.flush();
    }());
}

TEST_F(RolesHostile, APendingNodeWithAChildIsAssignedOnceTheChildIsGone) {
    run([&]() -> asio::awaitable<void> {
        auto* zk = co_await cluster_with_worker();
        task_id_generator gen;
        const auto tid = gen.next(5, now_ms());
        // The task and a child below it in one transaction: the master never sees it bare.
        std::vector<zkd::zkco::multi_op> ops{
            zkd::zkco::op::create{
                layout_.pending_task(tid),
                foreign_task("echo"s, json::value("hi")),
                zkd::zkco::create_mode::persistent,
                {}},
            zkd::zkco::op::create{
                layout_.pending_task(tid) + "/junk"s, ""s, zkd::zkco::create_mode::persistent, {}},
        };
        ASSERT_TRUE(co_await zk->multi(std::move(ops)));
        task_client tc(*zk, layout_);
        auto r = co_await zkd::zkco::with_timeout(tc.wait(tid), 15s);
        ASSERT_TRUE(r) << r.error().message();
        EXPECT_EQ(r->state, task_state::succeeded);
        EXPECT_EQ(r->value, json::value("hi"));
        EXPECT_LT(co_await requests_during(*master_zk_, 500ms), 50U) << "the master loops";
        co_await tc.flush();
    }());
}

TEST_F(RolesHostile, ACancelOfAPendingNodeWithAChildIsNotDropped) {
    run([&]() -> asio::awaitable<void> {
        auto* zk = co_await cluster_session();
        co_await start_master();
        master_zk_ = sessions_.back().get();
        co_await start_worker("busy"s, 1);
        task_client tc(*zk, layout_);
        // The only slot is taken by a long task, so the next one stays pending.
        auto blocker = co_await tc.submit(one("sleep"s, sleep_args(60000)));
        ASSERT_TRUE(blocker);
        task_id_generator gen;
        const auto tid = gen.next(5, now_ms());
        std::vector<zkd::zkco::multi_op> ops{
            zkd::zkco::op::create{
                layout_.pending_task(tid),
                foreign_task("echo"s, json::value("x")),
                zkd::zkco::create_mode::persistent,
                {}},
            zkd::zkco::op::create{
                layout_.pending_task(tid) + "/junk"s, ""s, zkd::zkco::create_mode::persistent, {}},
        };
        ASSERT_TRUE(co_await zk->multi(std::move(ops)));
        ASSERT_TRUE(co_await tc.cancel(tid));
        auto r = co_await zkd::zkco::with_timeout(tc.wait(tid), 15s);
        ASSERT_TRUE(r) << r.error().message();
        EXPECT_EQ(r->state, task_state::cancelled);
        ASSERT_TRUE(co_await tc.cancel(blocker->front()));
        auto b = co_await zkd::zkco::with_timeout(tc.wait(blocker->front()), 15s);
        ASSERT_TRUE(b) << b.error().message();
        EXPECT_EQ(b->state, task_state::cancelled);
        co_await tc.flush();
    }());
}

// --- children below assignments and results; our nodes deleted ------------------

TEST_F(RolesHostile, AChildBelowARunningAssignmentDoesNotKeepTheTaskRunning) {
    run([&]() -> asio::awaitable<void> {
        auto* zk = co_await cluster_with_worker();
        task_client tc(*zk, layout_);
        auto ids = co_await tc.submit(one("sleep"s, sleep_args(300)));
        ASSERT_TRUE(ids);
        const auto tid = co_await assignment_of(*zk, worker_.me);
        ASSERT_EQ(tid, ids->front());
        ASSERT_TRUE(co_await zk->create(layout::assignment(worker_.me.id, tid) + "/junk"s));
        auto r = co_await zkd::zkco::with_timeout(tc.wait(tid), 15s);
        ASSERT_TRUE(r) << r.error().message();
        EXPECT_EQ(r->state, task_state::succeeded);
        EXPECT_EQ(r->attempt, 1);
        co_await tc.flush();
    }());
}

TEST_F(RolesHostile, AChildBelowAResultDoesNotLetItBeConsumedTwice) {
    run([&]() -> asio::awaitable<void> {
        auto* zk = co_await cluster_with_worker();
        task_client tc(*zk, layout_);
        auto ids = co_await tc.submit(one("echo"s, json::value("once")));
        ASSERT_TRUE(ids);
        const auto path = layout_.result(ids->front());
        auto written = [&]() -> asio::awaitable<bool> {
            auto e = co_await zk->exists(path);
            co_return e && e->has_value();
        };
        const bool there = co_await eventually(written);
        ASSERT_TRUE(there);
        ASSERT_TRUE(co_await zk->create(path + "/junk"s));
        auto r = co_await zkd::zkco::with_timeout(tc.wait(ids->front()), 15s);
        ASSERT_TRUE(r) << r.error().message();
        EXPECT_EQ(r->value, json::value("once"));
        co_await tc.flush();
        auto left = co_await zk->exists(path);
        ASSERT_TRUE(left);
        EXPECT_FALSE(left->has_value()) << "the consumed result is still there";
    }());
}

TEST_F(RolesHostile, ARunningTasksDeletedAssignmentStillEndsInItsResult) {
    run([&]() -> asio::awaitable<void> {
        auto* zk = co_await cluster_with_worker();
        task_client tc(*zk, layout_);
        auto ids = co_await tc.submit(one("sleep"s, sleep_args(300)));
        ASSERT_TRUE(ids);
        const auto tid = co_await assignment_of(*zk, worker_.me);
        ASSERT_TRUE(co_await zk->remove(layout::assignment(worker_.me.id, tid)));
        auto r = co_await zkd::zkco::with_timeout(tc.wait(tid), 15s);
        ASSERT_TRUE(r) << "the task vanished: " << r.error().message();
        EXPECT_EQ(r->state, task_state::succeeded);
        co_await tc.flush();
    }());
}

TEST_F(RolesHostile, AWorkerWhoseDirectoryIsDeletedMakesItAgainAndWorks) {
    run([&]() -> asio::awaitable<void> {
        auto* zk = co_await cluster_with_worker();
        task_client tc(*zk, layout_);
        ASSERT_TRUE(co_await echo_done(tc, 1));
        ASSERT_TRUE(co_await zk->remove(layout::assign_dir(worker_.me.id)));
        auto ids = co_await tc.submit(one("echo"s, json::value(2)));
        ASSERT_TRUE(ids);
        auto r = co_await zkd::zkco::with_timeout(tc.wait(ids->front()), 15s);
        ASSERT_TRUE(r) << "the worker stopped working: " << r.error().message();
        EXPECT_EQ(r->state, task_state::succeeded);
        EXPECT_EQ(r->worker, worker_.me.id);
        co_await tc.flush();
    }());
}

TEST_F(RolesHostile, GarbageInAWorkersDirectoryDataMakesItListAndWorkOn) {
    // The directory's data is its change log (§6): garbage there, or a change nobody
    // logged, is no log the worker can follow: it lists the directory instead.
    run([&]() -> asio::awaitable<void> {
        auto* zk = co_await cluster_with_worker();
        task_client tc(*zk, layout_);
        ASSERT_TRUE(co_await echo_done(tc, 1));
        const auto listed = worker_stats_["w1"].listings;
        ASSERT_TRUE(co_await zk->set(layout::assign_dir(worker_.me.id), "\xff{garbage"s));
        // A forged log that names no real child, written over the garbage.
        change_log forged;
        forged.created.push_back(log_entry{"t5-0000000000000-00000000000001", "{}"s});
        ASSERT_TRUE(co_await zk->set(layout::assign_dir(worker_.me.id), encode(forged)));
        auto ids = co_await tc.submit(one("echo"s, json::value(2)));
        ASSERT_TRUE(ids);
        auto r = co_await zkd::zkco::with_timeout(tc.wait(ids->front()), 15s);
        ASSERT_TRUE(r) << "the worker stopped working: " << r.error().message();
        EXPECT_EQ(r->state, task_state::succeeded);
        EXPECT_GT(worker_stats_["w1"].listings, listed) << "it should have listed again";
        EXPECT_EQ(worker_stats_["w1"].started, 2U)
            << "a forged log after a missed version is not followed";
        co_await tc.flush();
    }());
}

TEST_F(RolesHostile, GarbageInAPendingShardsDataMakesTheMasterListAndPlaceOn) {
    // A pending shard's data is its change log (§6): garbage there is no log the master can
    // follow, so it lists the shard instead; nothing submitted is missed.
    run([&]() -> asio::awaitable<void> {
        auto* zk = co_await cluster_with_worker();
        task_client tc(*zk, layout_);
        ASSERT_TRUE(co_await echo_done(tc, 1));
        const auto listed = master_stats_.shard_listings;
        for (const auto& shard : layout_.pending_shard_paths()) {
            ASSERT_TRUE(co_await zk->set(shard, "\xff{garbage"s));
        }
        std::vector<task_spec> reqs(8, task_spec{"echo", json::value(2)});
        auto ids = co_await tc.submit(std::move(reqs));
        ASSERT_TRUE(ids);
        for (const auto& id : *ids) {
            auto r = co_await zkd::zkco::with_timeout(tc.wait(id), 15s);
            ASSERT_TRUE(r) << "a task was missed: " << r.error().message();
            EXPECT_EQ(r->state, task_state::succeeded);
        }
        EXPECT_GT(master_stats_.shard_listings, listed) << "it should have listed shards again";
        co_await tc.flush();
    }());
}

TEST_F(RolesHostile, ADeletedMasterNodeIsWrittenAgain) {
    run([&]() -> asio::awaitable<void> {
        auto* zk = co_await cluster_with_worker();
        ASSERT_TRUE(co_await zk->remove(layout::master()));
        auto rewritten = [zk] { return master_node_of_epoch_1(zk); };
        const bool back = co_await eventually(rewritten);
        EXPECT_TRUE(back) << "/master was not written again";
    }());
}

// Garbage set into the master's own node (still its ephemeral) is written over: clients read
// the bound on pending tasks from it.
TEST_F(RolesHostile, GarbageInTheMasterNodeIsWrittenOver) {
    run([&]() -> asio::awaitable<void> {
        auto* zk = co_await cluster_with_worker();
        ASSERT_TRUE(co_await zk->set(layout::master(), "\xff{garbage"s));
        auto rewritten = [zk] { return master_node_of_epoch_1(zk); };
        const bool back = co_await eventually(rewritten);
        EXPECT_TRUE(back) << "/master still holds the garbage";
    }());
}

// A stranger's /master that says "direct":false (clients must send every task through the
// master, docs/protocol.md §6 T1 "Direct placement") while the master did not say so, or that
// says it in a form no reader takes: the master writes its own node over it, and tasks run.
TEST_F(RolesHostile, AMasterNodeLyingAboutDirectPlacementIsWrittenOver) {
    run([&]() -> asio::awaitable<void> {
        auto* zk = co_await cluster_with_worker();
        task_client tc(*zk, layout_);
        ASSERT_TRUE(co_await echo_done(tc, 1));
        auto says_direct = [zk]() -> asio::awaitable<bool> {
            auto m = co_await zk->get(layout::master());
            if (!m) {
                co_return false;
            }
            const auto info = decode_master(m->data);
            co_return info && info->epoch == 1 && info->direct;
        };
        auto m = co_await zk->get(layout::master());
        ASSERT_TRUE(m);
        auto lie = decode_master(m->data).value();
        ASSERT_TRUE(lie.direct);
        lie.direct = false;
        ASSERT_TRUE(co_await zk->set(layout::master(), encode(lie)));
        const bool back = co_await eventually(says_direct);
        EXPECT_TRUE(back) << "/master still says direct:false";
        ASSERT_TRUE(co_await echo_done(tc, 2));
        // The master's own words but "direct" not a boolean: no reader takes the node (decode
        // refuses it), and it is written over too.
        lie.direct = true;
        auto garbled = encode(lie);
        garbled.pop_back();
        garbled += R"(,"direct":"no"})";
        ASSERT_FALSE(decode_master(garbled));
        ASSERT_TRUE(co_await zk->set(layout::master(), garbled));
        const bool again = co_await eventually(says_direct);
        EXPECT_TRUE(again) << "/master still holds direct:\"no\"";
        ASSERT_TRUE(co_await echo_done(tc, 3));
        co_await tc.flush();
    }());
}

}  // namespace

// Format 3 (docs/protocol.md §2, §6 T4): a client's results directory deleted by a stranger
// is made again by the next result's writer, and garbage in its change log or a child nobody
// logged makes the waiting client list it: no result is lost either way.
TEST_F(RolesHostile, AClientsResultsDirectoryDeletedOrGarbledLosesNoResult) {
    run([&]() -> asio::awaitable<void> {
        auto* zk = co_await cluster_with_worker();
        task_client tc(*zk, layout_);
        ASSERT_TRUE(co_await echo_done(tc, 1));
        co_await tc.flush();  // its consume is answered: the directory is empty
        const auto dir = layout::client_results(tc.ids().client_hex());
        ASSERT_TRUE(co_await zk->remove(dir)) << "a stranger deletes " << dir;
        EXPECT_TRUE(co_await echo_done(tc, 2)) << "the writer makes the directory again";
        EXPECT_TRUE((co_await zk->exists(dir)).value());
        ASSERT_TRUE(co_await zk->set(dir, "\xff garbage"s));
        ASSERT_TRUE(co_await zk->create(dir + "/not-logged"));
        EXPECT_TRUE(co_await echo_done(tc, 3)) << "garbage and an unlogged child: listed";
        EXPECT_TRUE(co_await zk->remove(dir + "/not-logged"));
        co_await tc.flush();
    }());
}

TEST_F(RolesHostile, AnAssignmentWhoseNameIsNotATaskIdFailsAsMalformedAndNoHandlerSeesIt) {
    // A stranger's assignment named like a shell command: its name would reach a program as
    // ZKD_TASK_ID. The worker fails it as malformed_task without calling the handler.
    std::atomic<int> calls{0};
    registry_.add(
        "probe",
        [&calls](const json::value& args, std::stop_token) -> zkd::handlers::handler_result {
            ++calls;
            return args;
        }
    );
    run([&]() -> asio::awaitable<void> {
        auto* zk = co_await cluster_with_worker();
        task_client tc(*zk, layout_);
        ASSERT_TRUE(co_await echo_done(tc, 1));
        const std::string name = "x;$(id)";
        zkd::zkco::op::create forged;  // (GCC 12 rejects the braced form in a coroutine)
        forged.path = layout::assignment(worker_.me.id, name);
        forged.data = foreign_task("probe", json::value("hello"));
        std::vector<zkd::zkco::multi_op> ops;
        ops.emplace_back(std::move(forged));
        append_change_logs(ops);  // logged, so that the worker sees it at once (§6)
        ASSERT_TRUE(co_await zk->multi(std::move(ops)));
        std::optional<task_result> failed;
        auto published = [&]() -> asio::awaitable<bool> {
            auto r = co_await zk->get(layout_.result(name));
            if (r) {
                failed = decode_result(r->data).value();
            }
            co_return failed.has_value();
        };
        ASSERT_TRUE(co_await eventually(published)) << "no result for the forged assignment";
        EXPECT_EQ(failed->state, task_state::failed);
        ASSERT_TRUE(failed->error);
        EXPECT_EQ(failed->error->code, codes::malformed_task);
        EXPECT_EQ(calls.load(), 0) << "the handler saw the forged assignment";
        // The worker works on.
        EXPECT_TRUE(co_await echo_done(tc, 2));
        co_await tc.flush();
    }());
}

TEST_F(RolesHostile, AWorkerThatLeavesItsAssignmentsUnstartedLosesThemAndIsSuspect) {
    // A stranger's worker node, owned by a live session (this test's): it takes tasks and
    // never runs them, as a worker whose event loop is wedged would. Its tasks move on, and
    // the master names it suspect so that clients stop placing there.
    run([&]() -> asio::awaitable<void> {
        auto* zk = co_await cluster_session();
        auto fake = member("fake", 8);
        fake.types = {"echo"};
        const zkd::zkco::create_options ephemeral(zkd::zkco::create_mode::ephemeral);
        ASSERT_TRUE(co_await zk->create(layout::worker(fake.id), encode(fake), ephemeral));
        ASSERT_TRUE(co_await zk->create(layout::assign_dir(fake.id), ""s));
        master_options opts;
        opts.unstarted_bound = 1s;
        co_await start_master(std::move(opts));
        worker_ = co_await start_worker("w1"s, 2);
        co_await workers_joined(*zk, 2);
        task_client tc(*zk, layout_);
        tc.auto_bundle(1);  // plain tasks: the master takes back nodes, counted per task below
        std::vector<task_spec> batch(20, task_spec{"echo"s, json::value(1)});
        auto ids = co_await tc.submit(std::move(batch));
        ASSERT_TRUE(ids);
        int moved = 0;
        for (const auto& id : *ids) {
            auto r = co_await zkd::zkco::with_timeout(tc.wait(id), 30s);
            ASSERT_TRUE(r) << id << ": " << r.error().message();
            EXPECT_EQ(r->state, task_state::succeeded);
            EXPECT_EQ(r->worker, worker_.me.id);
            moved += r->attempt > 1 ? 1 : 0;
        }
        EXPECT_GT(moved, 0) << "no task went to the stalled worker: the test shows nothing";
        EXPECT_GE(master_stats_.taken_back, static_cast<std::uint64_t>(moved));
        auto named = [&]() -> asio::awaitable<bool> {
            auto view = co_await read_cluster(*zk, layout_);
            if (!view || !view->master) {
                co_return false;
            }
            bool fake_suspect = false;
            bool real_suspect = false;
            for (const auto& w : view->workers) {
                fake_suspect = fake_suspect || (w.id == fake.id && w.suspect);
                real_suspect = real_suspect || (w.id == worker_.me.id && w.suspect);
            }
            co_return fake_suspect && !real_suspect &&
                view->master->suspects == std::vector<std::string>{fake.id};
        };
        EXPECT_TRUE(co_await eventually(named)) << "the master did not name the stalled worker";
        EXPECT_EQ(master_stats_.suspects, 1U);
        // Tasks submitted now go around it: at most a probe waits there.
        std::vector<task_spec> more(10, task_spec{"echo"s, json::value(2)});
        auto later = co_await tc.submit(std::move(more));
        ASSERT_TRUE(later);
        for (const auto& id : *later) {
            auto r = co_await zkd::zkco::with_timeout(tc.wait(id), 30s);
            ASSERT_TRUE(r) << id << ": " << r.error().message();
            EXPECT_EQ(r->worker, worker_.me.id);
        }
        auto held = co_await zk->get_children(layout::assign_dir(fake.id));
        ASSERT_TRUE(held);
        EXPECT_LE(held->names.size(), 1U) << "a suspect gets a probe at most";
        co_await tc.flush();
    }());
}

}  // namespace ZKD_UNITY_ID
