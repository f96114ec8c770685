// SPDX-License-Identifier: MIT
// zkd-swarm as a real program: a hundred workers on one process's sessions against a real
// `zkd run --role standby` master and zkd-loadgen clients, through the master (pending) and
// placed directly: every task's result arrives, the tasks spread over the workers, the
// swarm drains on SIGTERM with nothing lost; and the ways a run is refused. Speed is never
// asserted.
#include "protocol/layout.hpp"
#include "support/processes.hpp"
#include "support/zk_fixture.hpp"
#include "zkco/deadline.hpp"

#include <boost/json.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace ZKD_UNITY_ID {

namespace json = boost::json;
using namespace std::literals;

namespace {

class Swarm : public zkd::test::zk_test {  // NOLINT(readability-identifier-naming)
protected:
    void SetUp() override {
        zk_test::SetUp();
        dir_ = zkd::test::make_test_dir(
            "swarm", ::testing::UnitTest::GetInstance()->current_test_info()->name()
        );
    }

    void TearDown() override {
        swarm_.reset();
        nodes_.clear();
        if (HasFailure()) {
            zkd::test::print_logs(dir_, 3000);
        }
        std::filesystem::remove_all(dir_);
        zk_test::TearDown();
    }

    std::string connect() const { return base_ + chroot_; }

    /// `zkd run --role standby` in `ns`: the master, running no tasks itself.
    void start_master(const std::string& ns, const std::string& host) {
        nodes_.push_back(std::make_unique<zkd::test::zkd_process>(
            ZKD_BINARY, connect(), ns, host, dir_ / (host + ".log"),
            std::vector<std::string>{"--role", "standby", "--session-timeout", "4000"}
        ));
    }

    /// zkd-swarm in `ns` with `args` after --zk and --namespace, in the background.
    void start_swarm(const std::string& ns, std::vector<std::string> args) {
        std::vector<std::string> argv{ZKD_SWARM_BINARY, "--zk", connect(), "--namespace", ns};
        argv.insert(argv.end(), args.begin(), args.end());
        swarm_ = std::make_unique<zkd::test::background_command>(
            argv, dir_ / "swarm.out", dir_ / "swarm.log"
        );
    }

    /// Waits (up to `limit`) for the swarm's "workers joined" line.
    bool swarm_joined(std::chrono::milliseconds limit) {
        const auto until = std::chrono::steady_clock::now() + limit;
        while (std::chrono::steady_clock::now() < until) {
            if (swarm_->out().find("workers joined in") != std::string::npos) {
                return true;
            }
            std::this_thread::sleep_for(50ms);
        }
        return false;
    }

    zkd::test::command_result loadgen(std::vector<std::string> args) {
        std::vector<std::string> argv{ZKD_LOADGEN_BINARY, "--zk",      connect(),
                                      "--no-progress",    "--no-mntr", "--json"};
        argv.insert(argv.end(), args.begin(), args.end());
        auto o = zkd::test::run_command(argv, {}, 120s);
        std::ofstream(dir_ / "loadgen.log", std::ios::app)
            << "$ zkd-loadgen ... (exit " << o.exit_code << ")\n--- stdout\n"
            << o.out << "\n--- stderr\n"
            << o.err << "\n";
        return o;
    }

    /// The last line of `text` that parses as a JSON object.
    static json::object last_object(const std::string& text) {
        json::object found;
        std::istringstream in(text);
        for (std::string line; std::getline(in, line);) {
            boost::system::error_code ec;
            auto v = json::parse(line, ec);
            if (!ec && v.is_object()) {
                found = v.as_object();
            }
        }
        return found;
    }

    std::filesystem::path dir_;
    std::vector<std::unique_ptr<zkd::test::zkd_process>> nodes_;
    std::unique_ptr<zkd::test::background_command> swarm_;
};

TEST_F(Swarm, HundredWorkersRunEveryTaskThroughTheMasterAndDirectly) {
    if (!ready_) {
        GTEST_SKIP() << "no ZooKeeper";
    }
    start_master("s", "boss");
    start_swarm(
        "s", {"--workers", "100", "--capacity", "2", "--connect-rate", "500", "--session-timeout",
              "4000", "--task-ms", "2", "--json"}
    );
    ASSERT_TRUE(swarm_joined(60s)) << swarm_->out() << swarm_->err();

    // Plain tasks (no automatic bundles, §4.1), so that each is one placement and one
    // publish of a swarm worker. Through the master: every task goes to pending, the master
    // places it.
    auto pending = loadgen(
        {"--namespace", "s", "--tasks", "300", "--concurrency", "60", "--no-direct", "--workers",
         "100", "--auto-bundle", "1"}
    );
    ASSERT_EQ(pending.exit_code, 0) << pending.err;
    auto rep = last_object(pending.out);
    ASSERT_TRUE(rep.contains("load")) << pending.out;
    EXPECT_EQ(rep["load"].at("results").to_number<std::uint64_t>(), 300U);
    EXPECT_EQ(rep["load"].at("succeeded").to_number<std::uint64_t>(), 300U);
    EXPECT_EQ(rep["load"].at("workers").to_number<std::uint64_t>(), 100U);

    // Placed directly by the client on the swarm's workers.
    auto direct =
        loadgen({"--namespace", "s", "--tasks", "200", "--concurrency", "40", "--auto-bundle", "1"}
        );
    ASSERT_EQ(direct.exit_code, 0) << direct.err;
    rep = last_object(direct.out);
    ASSERT_TRUE(rep.contains("load")) << direct.out;
    EXPECT_EQ(rep["load"].at("succeeded").to_number<std::uint64_t>(), 200U);

    // A drain on SIGTERM: every worker leaves, having published all it took.
    swarm_->signal(SIGTERM);
    ASSERT_EQ(swarm_->wait_exit(60s), 0) << swarm_->err();
    auto sum = last_object(swarm_->out());
    ASSERT_TRUE(sum.contains("tasks_published")) << swarm_->out();
    EXPECT_EQ(sum["joined"].to_number<std::uint64_t>(), 100U);
    EXPECT_EQ(sum["tasks_published"].to_number<std::uint64_t>(), 500U);
    EXPECT_EQ(sum["sessions_lost"].to_number<std::uint64_t>(), 0U);
    // Spread: least-loaded placement (ties round-robin) and the clients' choice both reach
    // far more than a handful of the hundred workers.
    EXPECT_GE(sum["workers_used"].to_number<std::uint64_t>(), 50U) << swarm_->out();
    EXPECT_GT(sum["rss_per_worker_bytes"].to_number<std::uint64_t>(), 0U);
}

TEST_F(Swarm, RefusesBadFlagsAndAMissingCluster) {
    if (!ready_) {
        GTEST_SKIP() << "no ZooKeeper";
    }
    auto bad = zkd::test::run_command({ZKD_SWARM_BINARY, "--workers", "0"}, {}, 30s);
    EXPECT_EQ(bad.exit_code, 2);
    EXPECT_NE(bad.err.find("--workers"), std::string::npos) << bad.err;
    bad = zkd::test::run_command({ZKD_SWARM_BINARY, "--bogus"}, {}, 30s);
    EXPECT_EQ(bad.exit_code, 2);
    auto help = zkd::test::run_command({ZKD_SWARM_BINARY, "--help"}, {}, 30s);
    EXPECT_EQ(help.exit_code, 0);
    EXPECT_NE(help.out.find("--connect-rate"), std::string::npos);

    auto none = zkd::test::run_command(
        {ZKD_SWARM_BINARY, "--zk", connect(), "--namespace", "nothing", "--connect-timeout", "1s"},
        {}, 30s
    );
    EXPECT_EQ(none.exit_code, 5) << none.err;
    EXPECT_NE(none.err.find("no set-up zkd cluster"), std::string::npos) << none.err;

    auto away = zkd::test::run_command(
        {ZKD_SWARM_BINARY, "--zk", "127.0.0.1:1", "--connect-timeout", "1s"}, {}, 30s
    );
    EXPECT_EQ(away.exit_code, 3) << away.err;
}

}  // namespace

}  // namespace ZKD_UNITY_ID
