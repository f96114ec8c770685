// SPDX-License-Identifier: MIT
// zkd as real processes against a real ZooKeeper: tasks flow through a cluster of `zkd run`
// processes while a worker and then the master are killed with SIGKILL; every task still
// ends with exactly its one result.
#include "roles/client/inspect.hpp"
#include "roles/client/task_client.hpp"
#include "roles/cluster/election.hpp"
#include "roles/cluster/namespace.hpp"
#include "support/processes.hpp"
#include "support/workers_joined.hpp"
#include "support/zk_fixture.hpp"
#include "zkco/deadline.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include <gtest/gtest.h>

#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <map>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace ZKD_UNITY_ID {

namespace asio = boost::asio;
namespace json = boost::json;
using namespace std::literals;
using namespace zkd::roles;
using namespace zkd::protocol;

namespace {

// Waits for `pred` (a plain condition) for up to `limit`, polling every 50 ms.
#define ZKD_AWAIT_CONDITION(pred, limit)                               \
    for (auto zkd_until_ = std::chrono::steady_clock::now() + (limit); \
         !(pred) && std::chrono::steady_clock::now() < zkd_until_;) {  \
        co_await settle(50ms);                                         \
    }

class ZkdProcess : public zkd::test::zk_test {
protected:
    void SetUp() override {
        zk_test::SetUp();
        dir_ = zkd::test::make_test_dir(
            "proc", ::testing::UnitTest::GetInstance()->current_test_info()->name()
        );
        // The cluster's namespace lives inside this test's chroot.
        ns_ = "proc";
        zk_ = base_ + chroot_;
    }

    void TearDown() override {
        nodes_.clear();
        if (HasFailure()) {
            zkd::test::print_logs(dir_, 4000);
        }
        std::filesystem::remove_all(dir_);
        zk_test::TearDown();
    }

    void start(const std::string& host, std::vector<std::string> extra = {}) {
        nodes_.emplace(
            host, std::make_unique<zkd::test::zkd_process>(
                      ZKD_BINARY, zk_, ns_, host, dir_ / (host + ".log"), std::move(extra)
                  )
        );
    }

    std::string log_of(const std::string& host) const {
        std::ifstream in(dir_ / (host + ".log"));
        return std::string((std::istreambuf_iterator<char>(in)), {});
    }

    /// A client on the cluster's namespace, once a node has created it.
    asio::awaitable<std::unique_ptr<zkd::zkco::client>> cluster_client(
        std::optional<zkd::zkco::credentials> auth = std::nullopt,
        std::chrono::milliseconds session_timeout = 10s
    ) {
        zkd::zkco::config cfg = make_config();
        cfg.connect_string = zk_ + chroot_path(ns_);
        cfg.auth = std::move(auth);
        cfg.session_timeout = session_timeout;
        for (int i = 0; i < 300; ++i) {
            auto zk = std::make_unique<zkd::zkco::client>(ioc_.get_executor(), cfg);
            auto c = co_await zkd::zkco::with_timeout(zk->connect(), 10s);
            bool ready = false;
            if (c) {
                const auto meta = co_await zk->exists("/meta"s);
                ready = meta && meta->has_value();
            }
            if (ready) {
                co_return zk;
            }
            co_await zk->close();
            co_await settle(50ms);
        }
        throw std::runtime_error("the cluster's namespace never appeared");
    }

    asio::awaitable<void> settle(std::chrono::milliseconds d) {
        asio::steady_timer t(ioc_, d);
        co_await t.async_wait(asio::use_awaitable);
    }

    /// The host of the current master (its member id starts with it), once there is one.
    asio::awaitable<std::string> master_host(zkd::zkco::client& zk) {
        for (int i = 0; i < 300; ++i) {
            if (auto m = co_await zk.get("/master"s); m) {
                if (auto info = decode_master(m->data)) {
                    co_return info->host;
                }
            }
            co_await settle(50ms);
        }
        co_return "";
    }

    std::filesystem::path dir_;
    std::string ns_;
    std::string zk_;  ///< what the nodes and clients connect to: hosts and chroot
    std::map<std::string, std::unique_ptr<zkd::test::zkd_process>> nodes_;
};

TEST_F(ZkdProcess, EveryTaskGetsExactlyOneResultWhileAWorkerAndTheMasterAreKilled) {
    for (const auto* host : {"n1", "n2", "n3", "n4"}) {
        start(host);
    }
    run(
        [&]() -> asio::awaitable<void> {
            zkd::zkco::config cfg = make_config();
            cfg.connect_string = zk_ + chroot_path(ns_);
            // The nodes create the namespace; wait for it.
            std::optional<zkd::zkco::client> zk;
            for (int i = 0; i < 300; ++i) {
                zk.emplace(ioc_.get_executor(), cfg);
                auto c = co_await zkd::zkco::with_timeout(zk->connect(), 10s);
                ASSERT_TRUE(c) << c.error().message();
                if ((co_await zk->exists("/meta"s)).value()) {
                    break;
                }
                co_await zk->close();
                co_await settle(50ms);
            }
            auto l = co_await ensure_layout(*zk, meta_info{});
            ASSERT_TRUE(l);
            task_client tc(*zk, *l);
            const std::string first_master = co_await master_host(*zk);
            ASSERT_FALSE(first_master.empty());

            constexpr int total = 1000;
            std::vector<task_spec> reqs;
            for (int i = 0; i < total; ++i) {
                switch (i % 4) {
                case 0:
                    reqs.push_back({"echo", json::value{{"i", i}}});
                    break;
                case 1:
                    reqs.push_back({"sum", json::array{i, 1}});
                    break;
                case 2:
                    reqs.push_back({"sleep", json::value{{"ms", 200}}});
                    break;
                default:
                    reqs.push_back({"fail", json::value{{"message", std::to_string(i)}}});
                    break;
                }
            }
            auto ids = co_await tc.submit(std::move(reqs));
            ASSERT_TRUE(ids) << ids.error().message();

            std::map<std::string, int> index;
            for (int i = 0; i < total; ++i) {
                index[(*ids)[static_cast<std::size_t>(i)]] = i;
            }
            int done = 0;
            int retried = 0;  // results from a second attempt: the kills hit running tasks
            auto check = [&](const task_result& r) {
                retried += r.attempt > 1 ? 1 : 0;
                const int i = index.at(r.task);
                if (i % 4 == 3) {
                    EXPECT_EQ(r.state, task_state::failed) << r.task;
                } else {
                    EXPECT_EQ(r.state, task_state::succeeded) << r.task;
                }
                if (i % 4 == 1 && r.state == task_state::succeeded) {
                    EXPECT_EQ(r.value.at("sum").to_number<std::int64_t>(), i + 1);
                }
                ++done;
            };
            // 250 sleeps of 200 ms on 8 slots keep the cluster busy for seconds: kill a worker
            // that is not the master after 1 s, and the master after 2.5 s, while tasks run.
            std::string victim;
            for (const auto& [host, p] : nodes_) {
                if (host != first_master) {
                    victim = host;
                }
            }
            auto killer = [&]() -> asio::awaitable<void> {
                co_await settle(1000ms);
                nodes_.at(victim)->kill(SIGKILL);
                co_await settle(1500ms);
                nodes_.at(first_master)->kill(SIGKILL);
            };
            asio::co_spawn(ioc_, killer(), asio::detached);
            for (int i = 0; i < total; ++i) {
                auto r = co_await zkd::zkco::with_timeout(
                    tc.wait((*ids)[static_cast<std::size_t>(i)]), 60s
                );
                ASSERT_TRUE(r) << "task " << i << ": " << r.error().message();
                check(*r);
            }
            EXPECT_EQ(done, total);
            EXPECT_GT(retried, 0) << "the kills should have caught tasks in flight";
            RecordProperty("retried", retried);
            std::string second_master = co_await master_host(*zk);
            for (int i = 0; i < 200 && second_master == first_master; ++i) {
                co_await settle(50ms);
                second_master = co_await master_host(*zk);
            }
            EXPECT_NE(second_master, first_master);
            EXPECT_NE(second_master, victim);
            // Nothing left behind: no result twice, nothing pending.
            co_await settle(200ms);
            for (const auto& dir : (co_await list_result_dirs(*zk)).value()) {
                EXPECT_TRUE((co_await zk->get_children(dir))->names.empty()) << dir;
            }
            for (const auto& shard : l->pending_shard_paths()) {
                EXPECT_TRUE((co_await zk->get_children(shard))->names.empty()) << shard;
            }
            co_await zk->close();
        }(),
        300s
    );
}

TEST_F(ZkdProcess, AFrozenWorkersTasksMoveOnAndItsLateResultsAreDiscarded) {
    start("n1");  // the master, and a worker
    run(
        [&]() -> asio::awaitable<void> {
            auto zk = co_await cluster_client();
            auto l = co_await ensure_layout(*zk, meta_info{});
            ASSERT_TRUE(l);
            task_client tc(*zk, *l);
            start("frozen", {"--role", "worker"});
            // Both joined before the submit, so that the client's read of the workers sees
            // them both and places two tasks on each itself (docs/protocol.md §6 T1 "Direct
            // placement"). Without this wait, a client that read before the frozen node
            // joined placed two on n1, and once (under ASan) the frozen node got none.
            const bool joined = co_await zkd::test::workers_joined(*zk, 2);
            ASSERT_TRUE(joined) << "not both joined in 30 s";
            // Fill both nodes' slots with 2 s sleeps (2 slots each).
            std::vector<task_spec> reqs(4, task_spec{"sleep", json::value{{"ms", 2000}}});
            auto ids = co_await tc.submit(std::move(reqs));
            ASSERT_TRUE(ids);
            bool frozen_has_one = false;
            for (int i = 0; i < 200 && !frozen_has_one; ++i) {
                for (const auto& id : *ids) {
                    auto st = co_await tc.status(id);
                    frozen_has_one = frozen_has_one || (st && st->worker.rfind("frozen-", 0) == 0);
                }
                co_await settle(50ms);
            }
            ASSERT_TRUE(frozen_has_one) << "the frozen node never got a task";
            // Frozen well past its 2 s session timeout: the master requeues its tasks.
            nodes_.at("frozen")->kill(SIGSTOP);
            co_await settle(5000ms);
            nodes_.at("frozen")->kill(SIGCONT);
            int retried = 0;
            for (const auto& id : *ids) {
                auto r = co_await zkd::zkco::with_timeout(tc.wait(id), 60s);
                ASSERT_TRUE(r) << r.error().message();
                EXPECT_EQ(r->state, task_state::succeeded);
                retried += r->attempt > 1 ? 1 : 0;
            }
            EXPECT_GT(retried, 0);
            // The thawed node saw its session gone, dropped its late results and came back as a
            // new member that takes work again.
            ZKD_AWAIT_CONDITION(
                log_of("frozen").find("rejoining as a new member") != std::string::npos, 20s
            )
            EXPECT_NE(log_of("frozen").find("rejoining as a new member"), std::string::npos);
            // Registered again, and in the client's view of the workers (read again by a
            // submit once a second old): the client spreads the 8 tasks, in automatic
            // bundles, over both nodes. A view without it put all 8 on n1.
            const bool back = co_await zkd::test::workers_joined(*zk, 2);
            ASSERT_TRUE(back) << "the thawed node did not register again in 30 s";
            co_await settle(1100ms);
            std::vector<task_spec> more(8, task_spec{"sleep", json::value{{"ms", 300}}});
            auto more_ids = co_await tc.submit(std::move(more));
            ASSERT_TRUE(more_ids);
            bool frozen_worked = false;
            for (const auto& id : *more_ids) {
                auto r = co_await zkd::zkco::with_timeout(tc.wait(id), 60s);
                ASSERT_TRUE(r);
                frozen_worked = frozen_worked || r->worker.rfind("frozen-", 0) == 0;
            }
            EXPECT_TRUE(frozen_worked);
            co_await tc.flush();  // the consumes (T5) went
            for (const auto& dir : (co_await list_result_dirs(*zk)).value()) {
                EXPECT_TRUE((co_await zk->get_children(dir))->names.empty()) << dir;
            }
            co_await zk->close();
        }(),
        300s
    );
}

TEST_F(ZkdProcess, AFrozenMasterIsDeposedAndWritesNothingAsMaster) {
    start("old");
    run(
        [&]() -> asio::awaitable<void> {
            auto zk = co_await cluster_client();
            auto l = co_await ensure_layout(*zk, meta_info{});
            ASSERT_TRUE(l);
            task_client tc(*zk, *l);
            const std::string first = co_await master_host(*zk);
            ASSERT_EQ(first, "old");
            start("new");
            co_await settle(500ms);
            const auto epoch_before = (co_await zk->exists("/epoch"s)).value()->version;

            nodes_.at("old")->kill(SIGSTOP);
            std::string now_master = first;
            for (int i = 0; i < 600 && now_master != "new"; ++i) {
                co_await settle(50ms);
                if (auto m = co_await zk->get("/master"s); m) {
                    if (auto info = decode_master(m->data)) {
                        now_master = info->host;
                    }
                }
            }
            ASSERT_EQ(now_master, "new");
            const auto epoch_new = (co_await zk->exists("/epoch"s)).value()->version;
            EXPECT_GT(epoch_new, epoch_before);

            // The old master wakes up: it must not act as master again (its epoch is stale).
            nodes_.at("old")->kill(SIGCONT);
            std::vector<task_spec> reqs(6, task_spec{"echo", json::value("after")});
            auto ids = co_await tc.submit(std::move(reqs));
            ASSERT_TRUE(ids);
            for (const auto& id : *ids) {
                auto r = co_await zkd::zkco::with_timeout(tc.wait(id), 60s);
                ASSERT_TRUE(r) << r.error().message();
                EXPECT_EQ(r->state, task_state::succeeded);
            }
            ZKD_AWAIT_CONDITION(
                log_of("old").find("rejoining as a new member") != std::string::npos, 20s
            )
            EXPECT_NE(log_of("old").find("rejoining as a new member"), std::string::npos);
            // Still the new master, same epoch: nothing the old one did took over.
            EXPECT_EQ(decode_master((co_await zk->get("/master"s))->data)->host, "new");
            EXPECT_EQ((co_await zk->exists("/epoch"s)).value()->version, epoch_new);
            co_await zk->close();
        }(),
        300s
    );
}

// Deposed while its session lives (anyone moved /epoch), a master leaves the election and runs
// again behind the others. One SIGTERM must still drain it and end the process within --grace.
TEST_F(ZkdProcess, ADeposedMasterStillDrainsAndExitsOnOneSigterm) {
    start("first", {"--grace", "5s"});
    run(
        [&]() -> asio::awaitable<void> {
            auto zk = co_await cluster_client();
            ASSERT_EQ(co_await master_host(*zk), "first");
            start("second", {"--grace", "5s"});
            ASSERT_TRUE(co_await zkd::test::workers_joined(*zk, 2));
            const auto epoch = (co_await zk->exists("/epoch"s)).value()->version;
            ASSERT_TRUE(co_await zk->set("/epoch"s, "moved by hand"s));
            std::string now_master;
            for (int i = 0; i < 400 && now_master != "second"; ++i) {
                co_await settle(50ms);
                if (auto m = co_await zk->get("/master"s); m) {
                    if (auto info = decode_master(m->data); info && info->epoch > epoch + 1) {
                        now_master = info->host;
                    }
                }
            }
            ASSERT_EQ(now_master, "second") << "the other candidate should lead after first";
            ZKD_AWAIT_CONDITION(log_of("first").find("no longer master") != std::string::npos, 20s)
            ASSERT_NE(log_of("first").find("no longer master"), std::string::npos);
            // Back in the election, behind "second": its candidate node is the later one.
            bool behind = false;
            for (int i = 0; i < 400 && !behind; ++i) {
                auto kids = co_await zk->get_children("/election"s);
                std::string first_seq;
                std::string second_seq;
                for (const auto& name : kids ? kids->names : std::vector<std::string>{}) {
                    const auto seq = name.substr(name.size() > 10 ? name.size() - 10 : 0);
                    (name.starts_with("c-first-") ? first_seq : second_seq) = seq;
                }
                behind = !first_seq.empty() && !second_seq.empty() && first_seq > second_seq;
                if (!behind) {
                    co_await settle(25ms);
                }
            }
            ASSERT_TRUE(behind) << "the deposed master did not run again";
            nodes_.at("first")->kill(SIGTERM);
            EXPECT_EQ(nodes_.at("first")->wait_exit(15s), 0) << "one SIGTERM did not end it";
            // The leader goes as well on one signal, and hands over to nobody.
            nodes_.at("second")->kill(SIGTERM);
            EXPECT_EQ(nodes_.at("second")->wait_exit(15s), 0);
            co_await zk->close();
        }(),
        300s
    );
}

TEST_F(ZkdProcess, SigtermDrainsAWorkerItsTasksFinishThereAndItLeaves) {
    start("boss", {"--role", "standby"});
    run(
        [&]() -> asio::awaitable<void> {
            auto zk = co_await cluster_client();
            auto l = co_await ensure_layout(*zk, meta_info{});
            ASSERT_TRUE(l);
            task_client tc(*zk, *l);
            ASSERT_EQ(co_await master_host(*zk), "boss");
            start("leaver", {"--role", "worker", "--grace", "20000"});
            std::vector<task_spec> slow(2, task_spec{"sleep", json::value{{"ms", 1500}}});
            auto slow_ids = co_await tc.submit(std::move(slow));
            ASSERT_TRUE(slow_ids);
            int running = 0;
            for (int i = 0; i < 400 && running < 2; ++i) {
                co_await settle(25ms);
                running = 0;
                for (const auto& id : *slow_ids) {
                    auto st = co_await tc.status(id);
                    running += st && st->state == task_state::running ? 1 : 0;
                }
            }
            ASSERT_EQ(running, 2);
            nodes_.at("leaver")->kill(SIGTERM);
            co_await settle(300ms);
            start("heir", {"--role", "worker"});
            std::vector<task_spec> fresh(4, task_spec{"echo", json::value("after")});
            auto fresh_ids = co_await tc.submit(std::move(fresh));
            ASSERT_TRUE(fresh_ids);
            for (const auto& id : *slow_ids) {
                auto r = co_await zkd::zkco::with_timeout(tc.wait(id), 30s);
                ASSERT_TRUE(r) << r.error().message();
                EXPECT_EQ(r->state, task_state::succeeded);
                EXPECT_EQ(r->attempt, 1);
                EXPECT_EQ(r->worker.rfind("leaver-", 0), 0U) << r->worker;
            }
            for (const auto& id : *fresh_ids) {
                auto r = co_await zkd::zkco::with_timeout(tc.wait(id), 30s);
                ASSERT_TRUE(r) << r.error().message();
                EXPECT_EQ(r->worker.rfind("heir-", 0), 0U) << r->worker;
            }
            EXPECT_EQ(nodes_.at("leaver")->wait_exit(20s), 0);
            EXPECT_NE(log_of("leaver").find("drained"), std::string::npos);
            co_await zk->close();
        }(),
        300s
    );
}

TEST_F(ZkdProcess, AZooKeeperRestartWithinTheSessionTimeoutLosesNothing) {
    ZKD_REQUIRE_LOCAL_ZK_SERVER();
    // A server of its own that grants 30 s sessions (the shared one caps them at 20 ticks,
    // 4 s, less than a JVM restart may take on a busy machine): sessions outlive the restart.
    auto server = zkd::test::start_private_cluster(1, {"maxSessionTimeout=60000"});
    zk_ = server->connect_string();
    start("n1", {"--session-timeout", "30000"});
    start("n2", {"--session-timeout", "30000"});
    run(
        [&]() -> asio::awaitable<void> {
            auto zk = co_await cluster_client(std::nullopt, 30s);
            auto l = co_await ensure_layout(*zk, meta_info{});
            ASSERT_TRUE(l);
            task_client tc(*zk, *l);
            ASSERT_FALSE((co_await master_host(*zk)).empty());
            constexpr int total = 200;
            std::vector<task_spec> reqs;
            for (int i = 0; i < total; ++i) {
                reqs.push_back({"sum", json::array{i, 1}});
                if (i % 2 == 0) {
                    reqs.back() = {"sleep", json::value{{"ms", 50}}};
                }
            }
            auto ids = co_await tc.submit(std::move(reqs));
            ASSERT_TRUE(ids) << ids.error().message();
            // Stop ZooKeeper once work flows: the first results exist.
            std::size_t results = 0;
            for (int i = 0; i < 500 && results == 0; ++i) {
                co_await settle(10ms);
                auto dirs = co_await list_result_dirs(*zk);
                for (const auto& dir : dirs ? *dirs : std::vector<std::string>{}) {
                    auto kids = co_await zk->get_children(dir);
                    results += kids ? kids->names.size() : 0;
                }
            }
            ASSERT_GT(results, 0U);
            server->stop_member(0);
            co_await settle(500ms);
            server->start_member(0);
            int done = 0;
            for (int i = 0; i < total; ++i) {
                auto r = co_await zkd::zkco::with_timeout(
                    tc.wait((*ids)[static_cast<std::size_t>(i)]), 90s
                );
                ASSERT_TRUE(r) << "task " << i << ": " << r.error().message();
                EXPECT_EQ(r->state, task_state::succeeded);
                if (i % 2 == 1) {
                    EXPECT_EQ(r->value.at("sum").to_number<std::int64_t>(), i + 1);
                }
                EXPECT_EQ(r->attempt, 1) << "a session was lost: its tasks were requeued";
                ++done;
            }
            EXPECT_EQ(done, total);
            for (const auto* host : {"n1", "n2"}) {
                EXPECT_EQ(log_of(host).find("rejoining as a new member"), std::string::npos)
                    << host;
            }
            co_await zk->close();
        }(),
        300s
    );
}

TEST_F(ZkdProcess, ATaskThatCrashesItsWorkerEveryTimeEndsLost) {
    // Three workers that serve `crash`; it may take two of them down (two attempts).
    for (const auto* host : {"c1", "c2", "c3"}) {
        start(host, {"--enable-crash-task", "--capacity", "1"});
    }
    run(
        [&]() -> asio::awaitable<void> {
            auto zk = co_await cluster_client();
            auto l = co_await ensure_layout(*zk, meta_info{});
            ASSERT_TRUE(l);
            task_client tc(*zk, *l);
            ASSERT_FALSE((co_await master_host(*zk)).empty());
            for (int i = 0; i < 200; ++i) {
                auto kids = co_await zk->get_children("/workers"s);
                if (kids && kids->names.size() == 3) {
                    break;
                }
                co_await settle(50ms);
            }
            task_spec poison{"crash", json::value{}};
            poison.max_attempts = 2;
            std::vector<task_spec> reqs{poison};
            auto ids = co_await tc.submit(std::move(reqs));
            ASSERT_TRUE(ids);
            auto r = co_await zkd::zkco::with_timeout(tc.wait(ids->front()), 90s);
            ASSERT_TRUE(r) << r.error().message();
            EXPECT_EQ(r->state, task_state::lost);
            ASSERT_TRUE(r->error);
            EXPECT_EQ(r->error->code, "attempts_exhausted");
            EXPECT_EQ(r->attempt, 2);
            int dead = 0;
            for (const auto* host : {"c1", "c2", "c3"}) {
                dead += nodes_.at(host)->wait_exit(0ms) != -1 ? 1 : 0;
            }
            EXPECT_EQ(dead, 2);
            // The cluster stays up: the survivor (master again if need be) still runs tasks.
            std::vector<task_spec> after{{"echo", json::value("still here")}};
            auto after_ids = co_await tc.submit(std::move(after));
            ASSERT_TRUE(after_ids);
            auto ok = co_await zkd::zkco::with_timeout(tc.wait(after_ids->front()), 60s);
            ASSERT_TRUE(ok) << ok.error().message();
            EXPECT_EQ(ok->state, task_state::succeeded);
            co_await zk->close();
        }(),
        300s
    );
}

TEST_F(ZkdProcess, WithCredentialsEverythingIsClosedToOthers) {
    start("locked", {"--user", "zkd", "--password", "s3cret"});
    run(
        [&]() -> asio::awaitable<void> {
            std::optional<zkd::zkco::credentials> creds = zkd::zkco::credentials{"zkd", "s3cret"};
            auto zk = co_await cluster_client(creds);  // named: no braces inside a co_await
            auto l = co_await ensure_layout(*zk, meta_info{});
            ASSERT_TRUE(l);
            task_client tc(*zk, *l);
            std::vector<task_spec> reqs{{"sum", json::array{2, 3}}};
            auto ids = co_await tc.submit(std::move(reqs));
            ASSERT_TRUE(ids) << ids.error().message();
            auto r = co_await zkd::zkco::with_timeout(tc.wait(ids->front()), 30s);
            ASSERT_TRUE(r) << r.error().message();
            EXPECT_EQ(r->value.at("sum").to_number<std::int64_t>(), 5);

            // Without the credentials: nothing to read, nothing to write.
            zkd::zkco::config cfg = make_config();
            cfg.connect_string = zk_ + chroot_path(ns_);
            zkd::zkco::client stranger(ioc_.get_executor(), cfg);
            ASSERT_TRUE(co_await zkd::zkco::with_timeout(stranger.connect(), 10s));
            auto peek = co_await stranger.get_children("/pending"s);
            ASSERT_FALSE(peek);
            EXPECT_EQ(peek.error(), zkd::zkco::errc::no_auth);
            auto write =
                co_await stranger.create("/pending/00/t5-0000000000000-0000000000000a"s, "{}"s);
            ASSERT_FALSE(write);
            EXPECT_EQ(write.error(), zkd::zkco::errc::no_auth);
            co_await stranger.close();
            co_await zk->close();

            // Only the credentials' holder can clean up (the fixture's session has none).
            nodes_.clear();
            zkd::zkco::config owner_cfg = make_config();
            owner_cfg.auth = creds;
            zkd::zkco::client owner(ioc_.get_executor(), owner_cfg);
            ASSERT_TRUE(co_await zkd::zkco::with_timeout(owner.connect(), 10s));
            auto removed = co_await zkd::test::remove_recursive(owner, chroot_path(ns_));
            EXPECT_TRUE(removed) << removed.error().message();
            co_await owner.close();
        }(),
        300s
    );
}

// Not a speed assertion: measures (and prints, and records as test properties) how long a
// cluster with 2 s sessions takes to run a killed worker's tasks again, and to assign again
// after its master is killed. Run alone for the figures:
//   build/asan/tests/zkd_integration_tests --gtest_filter='ZkdProcess.FailoverTimesAreMeasured'
TEST_F(ZkdProcess, FailoverTimesAreMeasured) {
    for (const auto* host : {"f1", "f2", "f3"}) {
        start(host);
    }
    run(
        [&]() -> asio::awaitable<void> {
            auto zk = co_await cluster_client();
            auto l = co_await ensure_layout(*zk, meta_info{});
            ASSERT_TRUE(l);
            task_client tc(*zk, *l);
            const std::string master = co_await master_host(*zk);
            ASSERT_FALSE(master.empty());
            for (int i = 0; i < 200; ++i) {
                auto kids = co_await zk->get_children("/workers"s);
                if (kids && kids->names.size() == 3) {
                    break;
                }
                co_await settle(50ms);
            }
            // 6 slots, 4 long tasks: whatever the victim holds fits on the others at once.
            std::vector<task_spec> reqs(4, task_spec{"sleep", json::value{{"ms", 4000}}});
            auto ids = co_await tc.submit(std::move(reqs));
            ASSERT_TRUE(ids);
            std::string victim;
            std::vector<std::string> victims_tasks;
            for (int i = 0; i < 400 && victims_tasks.empty(); ++i) {
                co_await settle(25ms);
                for (const auto& id : *ids) {
                    auto st = co_await tc.status(id);
                    if (st && st->state == task_state::running &&
                        st->worker.rfind(master + "-", 0) != 0) {
                        victim = st->worker.substr(0, st->worker.find('-'));
                        victims_tasks.push_back(id);
                        break;
                    }
                }
            }
            ASSERT_FALSE(victims_tasks.empty());
            const auto killed = std::chrono::steady_clock::now();
            nodes_.at(victim)->kill(SIGKILL);
            // Its task runs again once a live worker holds it.
            bool moved = false;
            while (!moved && std::chrono::steady_clock::now() - killed < 30s) {
                co_await settle(10ms);
                auto st = co_await tc.status(victims_tasks.front());
                moved = st &&
                        (st->state == task_state::assigned || st->state == task_state::running) &&
                        st->worker.rfind(victim + "-", 0) != 0;
            }
            ASSERT_TRUE(moved);
            const auto worker_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                std::chrono::steady_clock::now() - killed
            );
            for (const auto& id : *ids) {
                auto r = co_await zkd::zkco::with_timeout(tc.wait(id), 60s);
                ASSERT_TRUE(r) << r.error().message();
                EXPECT_EQ(r->state, task_state::succeeded);
            }

            // Kill the master and submit at once: the task is assigned when a new master is up.
            const auto master_killed = std::chrono::steady_clock::now();
            nodes_.at(master)->kill(SIGKILL);
            std::vector<task_spec> probe{{"echo", json::value("probe")}};
            auto probe_ids = co_await tc.submit(std::move(probe));
            ASSERT_TRUE(probe_ids);
            auto r = co_await zkd::zkco::with_timeout(tc.wait(probe_ids->front()), 60s);
            ASSERT_TRUE(r) << r.error().message();
            EXPECT_EQ(r->state, task_state::succeeded);
            const auto master_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                std::chrono::steady_clock::now() - master_killed
            );
            std::printf(
                "failover (session timeout 2000 ms): worker SIGKILL -> its task running "
                "elsewhere: %lld ms; master SIGKILL -> a new task's result: %lld ms\n",
                static_cast<long long>(worker_ms.count()), static_cast<long long>(master_ms.count())
            );
            RecordProperty("worker_failover_ms", static_cast<int>(worker_ms.count()));
            RecordProperty("master_failover_ms", static_cast<int>(master_ms.count()));
            co_await zk->close();
        }(),
        300s
    );
}

}  // namespace

}  // namespace ZKD_UNITY_ID
