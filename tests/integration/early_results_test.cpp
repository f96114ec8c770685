// SPDX-License-Identifier: MIT
// A bundle's tasks published early (docs/protocol.md §6 T4e) through real `zkd run` processes
// and a real ZooKeeper: of a bundle that asks for it (`entry_results`), a task that ended
// while its neighbour still runs has a result node of its own at once, and the bundle's
// result lists it in `published`; a worker SIGKILLed after such a publish leaves the task
// published: its next worker never runs it again, and its own result stays as it was.
#include "protocol/ids.hpp"
#include "protocol/layout.hpp"
#include "protocol/task.hpp"
#include "roles/cluster/namespace.hpp"
#include "support/processes.hpp"
#include "support/zkd_cluster.hpp"
#include "zkco/deadline.hpp"

#include <boost/json.hpp>

#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace ZKD_UNITY_ID {

namespace asio = boost::asio;
namespace json = boost::json;
namespace fs = std::filesystem;
using namespace std::literals;
using namespace zkd::protocol;
using zkd::test::read_file;

namespace {

class EarlyResults : public zkd::test::zkd_cluster_test {
protected:
    EarlyResults() : zkd_cluster_test("early", ZKD_BINARY) {}

    void SetUp() override {
        zkd_cluster_test::SetUp();
        runs_ = dir_ / "runs";
        // Each run of a task says so in `runs`; the task "slow" runs while the file `gate`
        // exists (which the test removes once it has seen what it runs for; 120 s at most).
        gate_ = dir_ / "gate";
        std::ofstream(gate_) << "shut\n";
        script_ = (dir_ / "job.sh").string();
        std::ofstream(script_) << "#!/bin/sh\n"
                               << "a=$(cat)\n"
                               << "echo \"$a\" >> " << runs_.string() << "\n"
                               << "case \"$a\" in *slow*) i=0; while [ -e " << gate_.string()
                               << " ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done ;; "
                                  "esac\n"
                               << "echo \"$a\"\n";
        fs::permissions(script_, fs::perms::owner_all);
    }

    /// How many runs of the task whose args are the string `name`.
    [[nodiscard]] int runs_of(const std::string& name) const {
        std::istringstream in(read_file(runs_));
        int n = 0;
        for (std::string line; std::getline(in, line);) {
            n += line == "\"" + name + "\"" ? 1 : 0;
        }
        return n;
    }

    /// Writes a bundle of "fast" and "slow" that asks for early results (unless not
    /// `flagged`) straight into a pending shard (as the client would, §6 T1; the master
    /// finds it by its sweep), with its client's results directory. Its id.
    asio::awaitable<std::string> submit_bundle(
        zkd::zkco::client& zk, const layout& l, bool flagged = true
    ) {
        const std::string client = "e4a11e5d";
        const auto b = bundle_id("t4-" + std::to_string(now_ms()) + "-" + client + "000001", 2);
        json::object task{
            {"v", 1},
            {"type", "job"},
            {"bundle", json::array{"fast", "slow"}},
            {"entry_results", true},
            {"priority", 5},
            {"timeout_ms", 0},
            {"max_attempts", 3},
            {"submitted_ms", now_ms()},
            {"client", client}};
        if (!flagged) {
            task.erase("entry_results");
        }
        // The fixed nodes come just after /meta: a shard not made yet is waited for.
        auto made = co_await zk.create(l.pending_task(b), json::serialize(task));
        for (int i = 0; i < 200 && !made && made.error() == zkd::zkco::errc::no_node; ++i) {
            co_await settle(50ms);
            made = co_await zk.create(l.pending_task(b), json::serialize(task));
        }
        EXPECT_TRUE(made) << made.error().message();
        (void)co_await zk.create(layout::client_results(client), "");
        co_return b;
    }

    /// Where the own result of the bundle `b`'s task 0 lives: in its client's directory,
    /// beside the bundle's (§6 T4e).
    static std::string own_path(const layout& l, const std::string& b) {
        return l.result_dir(b) + "/" + bundled_task_id(b, 0);
    }

    /// The result at `path`, once there (within `limit`); nullopt if it never came.
    asio::awaitable<std::optional<task_result>> result_at(
        zkd::zkco::client& zk, const std::string& path, std::chrono::seconds limit
    ) {
        const auto until = std::chrono::steady_clock::now() + limit;
        while (std::chrono::steady_clock::now() < until) {
            auto got = co_await zk.get(path);
            if (got) {
                auto r = decode_result(got->data);
                EXPECT_TRUE(r) << got->data;
                co_return r ? std::optional<task_result>(*r) : std::nullopt;
            }
            co_await settle(10ms);
        }
        co_return std::nullopt;
    }

    /// Lets every run of "slow" end.
    void open_gate() const { fs::remove(gate_); }

    fs::path runs_;
    fs::path gate_;
    std::string script_;
};

TEST_F(EarlyResults, AFastTaskHasItsOwnResultWhileItsNeighbourRuns) {
    start("a", {"--exec", "job=" + script_});
    run(
        [&]() -> asio::awaitable<void> {
            auto zk = co_await cluster_client();
            auto l = co_await zkd::roles::read_layout(*zk);
            ASSERT_TRUE(l);
            const auto b = co_await submit_bundle(*zk, *l);
            const auto fast = bundled_task_id(b, 0);
            auto own = co_await result_at(*zk, own_path(*l, b), 30s);
            ASSERT_TRUE(own);
            // "slow" still runs: the bundle has no result yet.
            auto whole = co_await zk->exists(l->result(b));
            ASSERT_TRUE(whole);
            EXPECT_FALSE(whole->has_value()) << "the bundle ended before its fast task's own";
            ZKD_AWAIT_CONDITION(runs_of("slow") == 1, 10s);
            EXPECT_EQ(runs_of("slow"), 1);
            EXPECT_EQ(own->task, fast);
            EXPECT_EQ(own->state, task_state::succeeded);
            EXPECT_EQ(own->value, json::value("fast"));
            EXPECT_EQ(own->attempt, 1);
            EXPECT_EQ(own->worker.rfind("a-", 0), 0U) << own->worker;
            EXPECT_TRUE(own->bundle.empty());
            EXPECT_GE(own->finished_ms, own->started_ms);

            open_gate();
            auto r = co_await result_at(*zk, l->result(b), 30s);
            ASSERT_TRUE(r);
            EXPECT_EQ(r->published, (std::vector<std::size_t>{0}));
            ASSERT_EQ(r->bundle.size(), 2U);
            EXPECT_EQ(r->bundle[0].value, json::value("fast")) << "its outcome as published";
            EXPECT_EQ(r->bundle[1].value, json::value("slow"));
            EXPECT_EQ(r->state, task_state::succeeded);
            EXPECT_GE(r->finished_ms, own->finished_ms);
            EXPECT_EQ(runs_of("fast"), 1);
            // The own result stays until its client consumes it.
            auto still = co_await zk->exists(own_path(*l, b));
            ASSERT_TRUE(still);
            EXPECT_TRUE(still->has_value());
            co_await zk->close();
        }(),
        120s
    );
}

TEST_F(EarlyResults, APublishedTaskNeverRunsAgainAfterItsWorkerIsKilled) {
    start("boss", {"--role", "standby"});
    start("w1", {"--role", "worker", "--exec", "job=" + script_});
    run(
        [&]() -> asio::awaitable<void> {
            auto zk = co_await cluster_client();
            auto l = co_await zkd::roles::read_layout(*zk);
            ASSERT_TRUE(l);
            const auto b = co_await submit_bundle(*zk, *l);
            const auto fast = bundled_task_id(b, 0);
            auto own = co_await result_at(*zk, own_path(*l, b), 30s);
            ASSERT_TRUE(own);
            const auto before = co_await zk->get(own_path(*l, b));
            ASSERT_TRUE(before);
            ZKD_AWAIT_CONDITION(runs_of("slow") == 1, 10s);
            nodes_.at("w1")->kill(SIGKILL);
            // The master requeues the bundle (T6) with its published task's entry; the next
            // worker runs only "slow".
            start("w2", {"--role", "worker", "--exec", "job=" + script_});
            open_gate();
            auto r = co_await result_at(*zk, l->result(b), 60s);
            ASSERT_TRUE(r);
            EXPECT_EQ(r->worker.rfind("w2-", 0), 0U) << r->worker;
            EXPECT_EQ(r->attempt, 2);
            EXPECT_EQ(r->published, (std::vector<std::size_t>{0}));
            ASSERT_EQ(r->bundle.size(), 2U);
            EXPECT_EQ(r->bundle[0].value, json::value("fast"));
            EXPECT_EQ(r->bundle[1].value, json::value("slow"));
            EXPECT_EQ(runs_of("fast"), 1) << read_file(runs_);
            EXPECT_EQ(runs_of("slow"), 2) << read_file(runs_);
            // Its own result is the one w1 published, untouched.
            auto after = co_await zk->get(own_path(*l, b));
            ASSERT_TRUE(after);
            EXPECT_EQ(after->data, before->data);
            EXPECT_EQ(after->stat.mzxid, before->stat.mzxid);
            EXPECT_EQ(own->worker.rfind("w1-", 0), 0U) << own->worker;
            co_await zk->close();
        }(),
        120s
    );
}

TEST_F(EarlyResults, ABundleWithoutTheFlagHasItsResultsTogether) {
    start("a", {"--exec", "job=" + script_});
    run(
        [&]() -> asio::awaitable<void> {
            auto zk = co_await cluster_client();
            auto l = co_await zkd::roles::read_layout(*zk);
            ASSERT_TRUE(l);
            open_gate();
            const auto b = co_await submit_bundle(*zk, *l, false);
            auto r = co_await result_at(*zk, l->result(b), 30s);
            ASSERT_TRUE(r);
            EXPECT_TRUE(r->published.empty());
            ASSERT_EQ(r->bundle.size(), 2U);
            EXPECT_EQ(r->bundle[0].value, json::value("fast"));
            auto kids = co_await zk->get_children(layout::client_results("e4a11e5d"));
            ASSERT_TRUE(kids);
            EXPECT_EQ(kids->names, std::vector<std::string>{b}) << "no task's own result";
            co_await zk->close();
        }(),
        120s
    );
}

}  // namespace

}  // namespace ZKD_UNITY_ID
