// SPDX-License-Identifier: MIT
// Served exec types (docs/exec.md "Serve mode") with real `zkd run` processes, a real
// ZooKeeper and a real served program: tests/programs/served.py, a Python script that speaks
// the framing with the standard library alone.
#include "roles/client/inspect.hpp"
#include "roles/client/task_client.hpp"
#include "roles/cluster/namespace.hpp"
#include "support/zkd_cluster.hpp"
#include "zkco/deadline.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <signal.h>
#include <sstream>
#include <unistd.h>

namespace ZKD_UNITY_ID {

namespace asio = boost::asio;
namespace json = boost::json;
namespace fs = std::filesystem;
using namespace std::literals;
using namespace zkd::roles;
using namespace zkd::protocol;
using zkd::test::alive;
using zkd::test::descendants;
using zkd::test::tree_fds;
using zkd::test::zombies_below;

namespace {

const std::string served = (fs::path(ZKD_SOURCE_DIR) / "tests" / "programs" / "served.py").string();

class Serve : public zkd::test::zkd_cluster_test {
protected:
    Serve() : zkd_cluster_test("serve", ZKD_BINARY) {}

    /// The `unhealthy` types of the /workers node of the worker started as `host` (empty if
    /// none, or no such node).
    static asio::awaitable<std::vector<std::string>> unhealthy_on(
        zkd::zkco::client& zk, const std::string& host
    ) {
        auto names = co_await zk.get_children("/workers"s);
        if (!names) {
            co_return std::vector<std::string>{};
        }
        for (const auto& name : names->names) {
            auto node = co_await zk.get("/workers/" + name);
            if (!node) {
                continue;
            }
            auto info = decode_worker(node->data);
            if (info && info->host == host) {
                co_return info->unhealthy;
            }
        }
        co_return std::vector<std::string>{};
    }

    static pid_t pid_of(const task_result& r) {
        return r.state == task_state::succeeded ? static_cast<pid_t>(r.value.at("pid").as_int64())
                                                : 0;
    }
};

TEST_F(Serve, TwoThousandTasksThroughOneWorkerKeepDescriptorsAndZombiesStable) {
    start("a", "exec.noop.concurrency = 2\nexec.noop.warm = 2\n", {"--serve", "noop=" + served});
    run(
        [&]() -> asio::awaitable<void> {
            auto zk = co_await cluster_client();
            auto l = co_await ensure_layout(*zk, meta_info{});
            ASSERT_TRUE(l);
            task_client tc(*zk, *l);
            const pid_t zkd = nodes_.at("a")->pid();
            std::size_t fds_early = 0;
            std::set<pid_t> programs;
            for (int round = 0; round < 20; ++round) {
                std::vector<task_spec> reqs;
                for (int i = 0; i < 100; ++i) {
                    reqs.push_back({"noop", json::value{{"echo", round * 100 + i}}});
                }
                auto ids = co_await tc.submit(std::move(reqs));
                ASSERT_TRUE(ids) << ids.error().message();
                for (std::size_t i = 0; i < ids->size(); ++i) {
                    auto r = co_await zkd::zkco::with_timeout(tc.wait((*ids)[i]), 60s);
                    ASSERT_TRUE(r) << r.error().message();
                    ASSERT_EQ(r->state, task_state::succeeded)
                        << (r->error ? r->error->message : "");
                    ASSERT_EQ(r->value, json::value(round * 100 + static_cast<int>(i)));
                }
                if (round == 1) {
                    fds_early = tree_fds(zkd);
                    for (const auto& [p, state] : descendants(zkd)) {
                        programs.insert(p);
                    }
                }
            }
            EXPECT_EQ(tree_fds(zkd), fds_early);
            EXPECT_EQ(zombies_below(zkd), 0U);
            std::set<pid_t> now;
            for (const auto& [p, state] : descendants(zkd)) {
                now.insert(p);
            }
            EXPECT_EQ(now, programs) << "the same processes served every task";
            EXPECT_EQ(programs.size(), 4U) << "two programs, each under its supervisor";
            co_await tc.flush();
            co_await zk->close();
        }(),
        300s
    );
}

TEST_F(Serve, CrashesHangsCancelsAndRecyclingReplaceProcessesAsTheyShould) {
    start(
        "a",
        "exec.s.concurrency = 1\nexec.s.kill-grace = 300ms\n"
        "exec.r = " +
            served + "\nexec.r.mode = serve\nexec.r.max-tasks = 3\n",
        {"--serve", "s=" + served}
    );
    run(
        [&]() -> asio::awaitable<void> {
            auto zk = co_await cluster_client();
            auto l = co_await ensure_layout(*zk, meta_info{});
            ASSERT_TRUE(l);
            task_client tc(*zk, *l);
            json::object pid_args;
            pid_args["pid"] = 1;

            // Recycling after max-tasks: three tasks per process.
            std::vector<pid_t> pids;
            for (int i = 0; i < 7; ++i) {
                const std::string type1 = "r";
                auto r = co_await one(tc, type1, pid_args);
                ASSERT_EQ(r.state, task_state::succeeded) << r.error->message;
                EXPECT_EQ(r.value.at("env"), json::value("1"));
                pids.push_back(pid_of(r));
            }
            EXPECT_EQ(pids[0], pids[2]);
            EXPECT_NE(pids[2], pids[3]);
            EXPECT_EQ(pids[3], pids[5]);
            EXPECT_NE(pids[5], pids[6]);
            ZKD_AWAIT_CONDITION(!alive(pids[0]), 10s);
            EXPECT_FALSE(alive(pids[0])) << "a recycled process lives on";

            // A crash mid-task fails the task; the next task gets a new process.
            const std::string type2 = "s";
            const pid_t first = pid_of(co_await one(tc, type2, pid_args));
            ASSERT_GT(first, 0);
            const std::string type3 = "s";
            json::object args3;
            args3["crash"] = 3;
            auto crashed = co_await one(tc, type3, args3);
            EXPECT_EQ(crashed.state, task_state::failed);
            ASSERT_TRUE(crashed.error);
            EXPECT_EQ(crashed.error->code, "handler_error");
            EXPECT_NE(
                crashed.error->message.find("exited with code 3 while running the task"),
                std::string::npos
            ) << crashed.error->message;
            EXPECT_FALSE(alive(first));
            const std::string type4 = "s";
            const pid_t second = pid_of(co_await one(tc, type4, pid_args));
            EXPECT_GT(second, 0);
            EXPECT_NE(second, first);

            // A hung process: the timeout sends a cancel, then kills and replaces it.
            const std::string type5 = "s";
            json::object args5;
            args5["hang"] = 1;
            auto hung = co_await one(tc, type5, args5, 1000ms);
            EXPECT_EQ(hung.state, task_state::timed_out);
            ZKD_AWAIT_CONDITION(!alive(second), 10s);
            EXPECT_FALSE(alive(second)) << "the hung process lives on";
            const std::string type6 = "s";
            const pid_t third = pid_of(co_await one(tc, type6, pid_args));
            EXPECT_GT(third, 0);
            EXPECT_NE(third, second);

            // A cancel the program answers: the process stays.
            std::vector<task_spec> reqs{{"s", json::value{{"wait_cancel", 1}}}};
            auto ids = co_await tc.submit(std::move(reqs));
            ASSERT_TRUE(ids);
            co_await settle(500ms);
            ASSERT_TRUE(co_await tc.cancel(ids->front()));
            auto cancelled = co_await zkd::zkco::with_timeout(tc.wait(ids->front()), 30s);
            ASSERT_TRUE(cancelled);
            EXPECT_EQ(cancelled->state, task_state::cancelled);
            const std::string type7 = "s";
            EXPECT_EQ(pid_of(co_await one(tc, type7, pid_args)), third);

            // A program's own error code and message.
            const std::string type8 = "s";
            json::object args8;
            args8["fail"] = "no such thing";
            auto refused = co_await one(tc, type8, args8);
            EXPECT_EQ(refused.state, task_state::failed);
            ASSERT_TRUE(refused.error);
            EXPECT_EQ(refused.error->code, "bad_args");
            EXPECT_EQ(refused.error->message, "no such thing");
            co_await tc.flush();
            co_await zk->close();
        }(),
        300s
    );
}

TEST_F(Serve, ACrashLoopMarksTheTypeUnhealthyItsTasksWaitAndAStartThatSucceedsHealsIt) {
    const auto broken = dir_ / "broken";
    std::ofstream(broken) << "";
    start("a", "exec.b.warm = 1\n", {"--serve", "b=" + served + " " + broken.string()});
    run(
        [&]() -> asio::awaitable<void> {
            auto zk = co_await cluster_client();
            auto l = co_await ensure_layout(*zk, meta_info{});
            ASSERT_TRUE(l);
            task_client tc(*zk, *l);
            ZKD_AWAIT_CONDITION(log_of("a").find("unhealthy") != std::string::npos, 30s);
            ASSERT_NE(log_of("a").find("unhealthy on this worker"), std::string::npos);
            std::vector<std::string> sick;
            for (int i = 0; i < 500 && sick.empty(); ++i) {
                sick = co_await unhealthy_on(*zk, "a");
                co_await settle(20ms);
            }
            ASSERT_EQ(sick, (std::vector<std::string>{"b"})) << "its /workers node says so";
            // Placed nowhere while the only worker serving it cannot run it: it waits.
            std::vector<task_spec> reqs{{"b", json::value{{"echo", 1}}}};
            reqs.front().max_attempts = 1;
            auto ids = co_await tc.submit(std::move(reqs));
            ASSERT_TRUE(ids);
            // (Had it reached the worker, it would have failed at once: see the state below.)
            co_await settle(1500ms);
            fs::remove(broken);
            ZKD_AWAIT_CONDITION(log_of("a").find("healthy again") != std::string::npos, 30s);
            ASSERT_NE(log_of("a").find("healthy again"), std::string::npos);
            auto r = co_await zkd::zkco::with_timeout(tc.wait(ids->front()), 60s);
            ASSERT_TRUE(r) << r.error().message();
            EXPECT_EQ(r->state, task_state::succeeded) << (r->error ? r->error->message : "");
            EXPECT_EQ(r->value, json::value(1));
            EXPECT_TRUE((co_await unhealthy_on(*zk, "a")).empty()) << "healed: said so";
            co_await tc.flush();
            co_await zk->close();
        }(),
        120s
    );
}

TEST_F(Serve, AProcessThatDiesBeforeItReadsItsTaskHandsTheTaskToAnotherProcess) {
    // The first process of `d` says ready, then exits a second later without reading its
    // stdin: the task handed to it in that second goes to the next process and succeeds.
    const auto died = dir_ / "died";
    start(
        "a", "exec.d.concurrency = 1\n",
        {"--serve", "d=" + served + " " + (dir_ / "never").string() + " " + died.string()}
    );
    run(
        [&]() -> asio::awaitable<void> {
            auto zk = co_await cluster_client();
            auto l = co_await ensure_layout(*zk, meta_info{});
            ASSERT_TRUE(l);
            task_client tc(*zk, *l);
            const std::string type = "d";
            json::object args;
            args["echo"] = "kept";
            auto r = co_await one(tc, type, std::move(args));
            EXPECT_EQ(r.state, task_state::succeeded) << (r.error ? r.error->message : "");
            EXPECT_EQ(r.value, json::value("kept"));
            EXPECT_EQ(r.attempt, 1) << "handed to another process, not requeued";
            EXPECT_TRUE(fs::exists(died)) << "the first process ran";
            EXPECT_NE(log_of("a").find("before it read task"), std::string::npos);
            co_await tc.flush();
            co_await zk->close();
        }(),
        120s
    );
}

TEST_F(Serve, ATypeUnhealthyOnOneWorkerIsPlacedOnlyOnTheOtherAndZkdClusterSaysSo) {
    const auto broken = dir_ / "broken";
    std::ofstream(broken) << "";
    start("a", "exec.b.warm = 1\n", {"--serve", "b=" + served + " " + broken.string()});
    start("b", "", {"--serve", "b=" + served});
    run(
        [&]() -> asio::awaitable<void> {
            auto zk = co_await cluster_client();
            auto l = co_await ensure_layout(*zk, meta_info{});
            ASSERT_TRUE(l);
            task_client tc(*zk, *l);
            std::vector<std::string> sick;
            for (int i = 0; i < 1500 && sick.empty(); ++i) {
                sick = co_await unhealthy_on(*zk, "a");
                co_await settle(20ms);
            }
            ASSERT_EQ(sick, (std::vector<std::string>{"b"}));
            std::vector<task_spec> reqs;
            for (int i = 0; i < 20; ++i) {
                reqs.push_back({"b", json::value{{"echo", i}}});
                reqs.back().max_attempts = 1;
            }
            auto ids = co_await tc.submit(std::move(reqs));
            ASSERT_TRUE(ids);
            std::set<std::string> workers;
            for (std::size_t i = 0; i < ids->size(); ++i) {
                auto r = co_await zkd::zkco::with_timeout(tc.wait((*ids)[i]), 60s);
                ASSERT_TRUE(r) << r.error().message();
                EXPECT_EQ(r->state, task_state::succeeded) << (r->error ? r->error->message : "");
                EXPECT_EQ(r->value, json::value(static_cast<int>(i)));
                workers.insert(r->worker);
            }
            ASSERT_EQ(workers.size(), 1U) << "every task on the one healthy worker";
            EXPECT_EQ(workers.begin()->rfind("b-", 0), 0U) << *workers.begin();
            const auto shown =
                zkd::test::run_command({ZKD_BINARY, "cluster", "--zk", zk_, "--namespace", "serve"}
                );
            EXPECT_EQ(shown.exit_code, 0) << shown.err;
            EXPECT_NE(shown.out.find("(unhealthy: b)"), std::string::npos) << shown.out;
            const auto json_out = zkd::test::run_command(
                {ZKD_BINARY, "cluster", "--zk", zk_, "--namespace", "serve", "--json"}
            );
            EXPECT_NE(json_out.out.find(R"("unhealthy":["b"])"), std::string::npos) << json_out.out;
            co_await tc.flush();
            co_await zk->close();
        }(),
        180s
    );
}

TEST_F(Serve, KillingTheWorkerKillsEveryProcessOfItsServedPrograms) {
    start("a", "", {"--serve", "s=" + served});
    run(
        [&]() -> asio::awaitable<void> {
            auto zk = co_await cluster_client();
            auto l = co_await ensure_layout(*zk, meta_info{});
            ASSERT_TRUE(l);
            task_client tc(*zk, *l);
            const std::string type11 = "s";
            json::object args11;
            args11["spawn"] = 1;
            auto r = co_await one(tc, type11, args11);
            ASSERT_EQ(r.state, task_state::succeeded) << r.error->message;
            std::vector<pid_t> tree;
            for (const auto& p : r.value.as_array()) {
                tree.push_back(static_cast<pid_t>(p.as_int64()));
            }
            ASSERT_EQ(tree.size(), 3U);
            for (const pid_t p : tree) {
                EXPECT_TRUE(alive(p)) << p;
            }
            nodes_.at("a")->kill(SIGKILL);
            const auto any = [&] { return std::any_of(tree.begin(), tree.end(), alive); };
            ZKD_AWAIT_CONDITION(!any(), 5s);
            for (const pid_t p : tree) {
                EXPECT_FALSE(alive(p)) << "pid " << p << " outlived its worker";
            }
            co_await zk->close();
        }(),
        120s
    );
}

TEST_F(Serve, DrainLetsTheTaskInFlightFinishThenTheProgramExits) {
    const auto gate = dir_ / "gate";
    start("a", "exec.s.kill-grace = 10s\n", {"--serve", "s=" + served, "--grace", "20000"});
    run(
        [&]() -> asio::awaitable<void> {
            auto zk = co_await cluster_client();
            auto l = co_await ensure_layout(*zk, meta_info{});
            ASSERT_TRUE(l);
            task_client tc(*zk, *l);
            const std::string type12 = "s";
            json::object args12;
            args12["pid"] = 1;
            const pid_t program = pid_of(co_await one(tc, type12, args12));
            ASSERT_GT(program, 0);
            std::vector<task_spec> reqs{{"s", json::value{{"gate", gate.string()}}}};
            auto ids = co_await tc.submit(std::move(reqs));
            ASSERT_TRUE(ids);
            co_await settle(500ms);
            nodes_.at("a")->kill(SIGTERM);
            co_await settle(300ms);
            EXPECT_TRUE(alive(program)) << "drained before its task finished";
            std::ofstream(gate) << "";
            auto r = co_await zkd::zkco::with_timeout(tc.wait(ids->front()), 30s);
            ASSERT_TRUE(r) << r.error().message();
            EXPECT_EQ(r->state, task_state::succeeded);
            // Its stdin closed, the program exits by itself, well before kill-grace.
            EXPECT_EQ(nodes_.at("a")->wait_exit(8s), 0);
            EXPECT_FALSE(alive(program));
            co_await tc.flush();
            co_await zk->close();
        }(),
        120s
    );
}

TEST_F(Serve, ProgressAndLogFramesReachTheTasksNodeAndTheWorkersLogAtTheirLevel) {
    const auto gate = dir_ / "gate";
    start("a", "exec.s.warm = 1\n", {"--serve", "s=" + served, "--log-level", "info"});
    run(
        [&]() -> asio::awaitable<void> {
            auto zk = co_await cluster_client();
            auto l = co_await ensure_layout(*zk, meta_info{});
            ASSERT_TRUE(l);
            task_client tc(*zk, *l);
            // 400 progress and 400 log frames as fast as the program writes them, then it
            // waits: the latest progress is what the task's node shows.
            std::vector<task_spec> reqs{
                {"s", json::value{{"chatter", 400}, {"gate", gate.string()}, {"echo", 7}}}};
            auto ids = co_await tc.submit(std::move(reqs));
            ASSERT_TRUE(ids);
            task_info info;
            for (int i = 0; i < 500 && info.progress_message != "step 400"; ++i) {
                co_await settle(20ms);
                auto got = co_await read_task(*zk, *l, ids->front());
                ASSERT_TRUE(got);
                info = *got;
            }
            EXPECT_EQ(info.state, task_state::running);
            EXPECT_DOUBLE_EQ(info.progress, 0.5);
            EXPECT_EQ(info.progress_message, "step 400");
            std::ofstream(gate) << "";
            auto r = co_await zkd::zkco::with_timeout(tc.wait(ids->front()), 30s);
            ASSERT_TRUE(r) << r.error().message();
            EXPECT_EQ(r->state, task_state::succeeded);
            EXPECT_EQ(r->value, json::value(7));
            const std::string log = log_of("a");
            EXPECT_NE(log.find("loud \u00e9"), std::string::npos) << "a warn frame is logged";
            EXPECT_EQ(log.find("quiet "), std::string::npos) << "a debug frame is not, at info";
            co_await tc.flush();
            co_await zk->close();
        }(),
        120s
    );
}

}  // namespace

}  // namespace ZKD_UNITY_ID
