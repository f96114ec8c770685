// SPDX-License-Identifier: MIT
// zkd-loadgen as a real program against real `zkd run` processes and a real ZooKeeper: every
// task accounted for, the namespace left clean, the raw ceiling, and each way a run is
// refused (bad flags, no cluster, no workers, unreachable ZooKeeper, a stalled cluster).
// Speed is never asserted.
#include "protocol/layout.hpp"
#include "support/processes.hpp"
#include "support/zk_fixture.hpp"
#include "zk_local/zk_local.hpp"
#include "zkco/deadline.hpp"

#include <boost/json.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace ZKD_UNITY_ID {

namespace asio = boost::asio;
namespace json = boost::json;
using namespace std::literals;

namespace {

/// What a finished child process left (exit_code -1: killed at its time limit).
using outcome = zkd::test::command_result;

class Loadgen : public zkd::test::zk_test {  // NOLINT(readability-identifier-naming)
protected:
    void SetUp() override {
        zk_test::SetUp();
        dir_ = zkd::test::make_test_dir(
            "loadgen", ::testing::UnitTest::GetInstance()->current_test_info()->name()
        );
    }

    void TearDown() override {
        nodes_.clear();
        if (HasFailure()) {
            zkd::test::print_logs(dir_, 3000);
        }
        std::filesystem::remove_all(dir_);
        zk_test::TearDown();
    }

    /// The connect string processes get: the shared server inside this test's chroot.
    std::string connect() const { return base_ + chroot_; }

    /// Starts `zkd run` in namespace `ns` (2 slots, 2 threads unless `extra` says otherwise).
    void start_node(
        const std::string& ns, const std::string& host, std::vector<std::string> extra = {}
    ) {
        std::vector<std::string> args{"--session-timeout", "4000", "--capacity", "4"};
        args.insert(args.end(), extra.begin(), extra.end());  // later flags win
        nodes_.push_back(std::make_unique<zkd::test::zkd_process>(
            ZKD_BINARY, connect(), ns, host, dir_ / (host + ".log"), std::move(args)
        ));
    }

    /// Runs zkd-loadgen with `args` (after --zk), never for longer than `limit`.
    outcome loadgen(std::vector<std::string> args, std::chrono::milliseconds limit = 120s) {
        std::vector<std::string> argv{ZKD_LOADGEN_BINARY, "--zk", connect(), "--no-progress"};
        argv.insert(argv.end(), args.begin(), args.end());
        auto o = zkd::test::run_command(argv, {}, limit);
        std::ofstream(dir_ / "loadgen.log", std::ios::app)
            << "$ zkd-loadgen ... (exit " << o.exit_code << ")\n--- stdout\n"
            << o.out << "\n--- stderr\n"
            << o.err << "\n";
        return o;
    }

    /// A session's configuration chrooted at the cluster `ns`.
    zkd::zkco::config cluster_config(const std::string& ns) {
        zkd::zkco::config cfg = make_config();
        cfg.connect_string = base_ + chroot_ + zkd::protocol::chroot_path(ns);
        return cfg;
    }

    /// Children under `dir` in the cluster `ns`, summed over its shards (via stat).
    asio::awaitable<std::uint64_t> count_under_shards(std::string ns, std::string dir) {
        zkd::zkco::client zk(ioc_.get_executor(), cluster_config(ns));
        EXPECT_TRUE(co_await zkd::zkco::with_timeout(zk.connect(), 10s));
        std::uint64_t n = 0;
        auto shards = co_await zk.get_children(dir);
        EXPECT_TRUE(shards) << dir;
        if (shards) {
            for (const auto& s : shards->names) {
                auto st = co_await zk.exists(zkd::zkco::join_path(dir, s));
                if (st && st->has_value()) {
                    n += static_cast<std::uint64_t>((*st)->num_children);
                }
            }
        }
        co_await zk.close();
        co_return n;
    }

    /// How many clients' results directories (/results/<c>) cluster `ns` holds.
    asio::awaitable<std::uint64_t> client_dirs(std::string ns) {
        zkd::zkco::client zk(ioc_.get_executor(), cluster_config(ns));
        EXPECT_TRUE(co_await zkd::zkco::with_timeout(zk.connect(), 10s));
        std::uint64_t n = 0;
        auto names = co_await zk.get_children("/results"s);
        EXPECT_TRUE(names);
        if (names) {
            for (const auto& name : names->names) {
                n += zkd::protocol::layout::is_client_results(name) ? 1 : 0;
            }
        }
        co_await zk.close();
        co_return n;
    }

    /// What the master of cluster `ns` publishes in /master (a JSON object), or an empty
    /// object while there is none.
    asio::awaitable<json::object> master_node(std::string ns) {
        zkd::zkco::client zk(ioc_.get_executor(), cluster_config(ns));
        EXPECT_TRUE(co_await zkd::zkco::with_timeout(zk.connect(), 10s));
        json::object said;
        auto m = co_await zk.get(std::string(zkd::protocol::layout::master()));
        if (m) {
            boost::system::error_code ec;
            auto v = json::parse(m->data, ec);
            if (!ec && v.is_object()) {
                said = std::move(v.as_object());
            }
        }
        co_await zk.close();
        co_return said;
    }

    /// Waits up to 30 s for /master of cluster `ns` to hold `key` (a master of this zkd to
    /// be elected): its value, or null.
    json::value wait_master_says(const std::string& ns, const std::string& key) {
        const auto until = std::chrono::steady_clock::now() + 30s;
        for (;;) {
            auto said = run(master_node(ns));
            if (said.contains(key) || std::chrono::steady_clock::now() >= until) {
                return said.contains(key) ? said.at(key) : json::value(nullptr);
            }
            std::this_thread::sleep_for(50ms);
        }
    }

    /// Children of `path` (relative to the test's chroot).
    asio::awaitable<std::vector<std::string>> children_of(std::string path) {
        zkd::zkco::config cfg = make_config();
        zkd::zkco::client zk(ioc_.get_executor(), cfg);
        auto c = co_await zkd::zkco::with_timeout(zk.connect(), 10s);
        EXPECT_TRUE(c);
        auto kids = co_await zk.get_children(path);
        co_await zk.close();
        co_return kids ? kids->names : std::vector<std::string>{};
    }

    std::filesystem::path dir_;
    std::vector<std::unique_ptr<zkd::test::zkd_process>> nodes_;
};

json::object parse_report(const outcome& o) {
    boost::system::error_code ec;
    auto v = json::parse(o.out, ec);
    if (ec || !v.is_object()) {
        ADD_FAILURE() << "stdout is not one JSON object: " << o.out << "\nstderr: " << o.err;
        return {};
    }
    return v.as_object();
}

/// The load part's latency and error figures are consistent.
void expect_sound_load(const json::object& load, std::uint64_t tasks) {
    EXPECT_EQ(load.at("submitted").to_number<std::uint64_t>(), tasks);
    EXPECT_EQ(load.at("results").to_number<std::uint64_t>(), tasks);
    EXPECT_EQ(load.at("succeeded").to_number<std::uint64_t>(), tasks);
    const auto& errors = load.at("errors").as_object();
    EXPECT_EQ(errors.at("total").to_number<std::uint64_t>(), 0U) << json::serialize(errors);
    EXPECT_EQ(errors.at("unfinished").to_number<std::uint64_t>(), 0U);
    const auto& lat = load.at("latency_ms").as_object();
    EXPECT_EQ(lat.at("count").to_number<std::uint64_t>(), tasks);
    const double min = lat.at("min").to_number<double>();
    const double p50 = lat.at("p50").to_number<double>();
    const double p90 = lat.at("p90").to_number<double>();
    const double p99 = lat.at("p99").to_number<double>();
    const double p999 = lat.at("p999").to_number<double>();
    const double max = lat.at("max").to_number<double>();
    EXPECT_GT(min, 0.0);
    EXPECT_LE(min, p50);
    EXPECT_LE(p50, p90);
    EXPECT_LE(p90, p99);
    EXPECT_LE(p99, p999);
    EXPECT_LE(p999, max);
    // Every result was run by a worker, which wrote when it started and finished.
    const auto& stages = load.at("stages_ms").as_object();
    for (const auto* stage : {"to_start", "run", "to_result"}) {
        EXPECT_EQ(stages.at(stage).at("count").to_number<std::uint64_t>(), tasks) << stage;
        // Whole milliseconds: a stage may round up past the measured latency by one.
        EXPECT_LE(stages.at(stage).at("p50").to_number<double>(), max + 1.0) << stage;
    }
    EXPECT_GT(load.at("tasks_per_s").to_number<double>(), 0.0);
    EXPECT_FALSE(load.at("stalled").as_bool());
    EXPECT_FALSE(load.at("session_lost").as_bool());
    const auto& client = load.at("client").as_object();
    // One create (T1) and one delete (T5) per node, a receipt per submit transaction (T1),
    // and a change log's set per pending shard a T1 creates in (at most one per create).
    // A node is a task, or an automatic bundle of several (§4.1: then its tasks' consumes
    // are one write each, but no create). Results come through the client's results
    // directory: a read of its change log delivers every result written since the last
    // (often several), a result over the log's budget or a log missed costs a read of its
    // own (§6 T5).
    const auto write_ops = client.at("write_ops").to_number<std::uint64_t>();
    const auto bundled = client.at("auto_bundled").to_number<std::uint64_t>();
    EXPECT_LE(bundled, tasks);
    EXPECT_GT(write_ops, bundled == 0 ? 2 * tasks : (tasks - bundled) * 2);
    EXPECT_LE(write_ops, 3 * tasks + client.at("multis").to_number<std::uint64_t>());
    EXPECT_GT(client.at("reads").to_number<std::uint64_t>(), 0U);
    // A server the tests start allows every four-letter word: mntr must have worked. One
    // named by ZKD_TEST_ZK may refuse `mntr`; then the reason must be reported.
    if (zkd::test::zk_server_is_external() && load.at("zookeeper").is_null()) {
        EXPECT_FALSE(load.at("mntr_error").as_string().empty());
        return;
    }
    ASSERT_TRUE(load.at("zookeeper").is_object()) << json::serialize(load);
    const auto& zk = load.at("zookeeper").as_object();
    // This client alone writes for every task, and the workers and this client read for
    // them (a read of a change log is shared by the tasks of a transaction).
    EXPECT_GT(zk.at("writes").to_number<std::uint64_t>(), 0U);
    EXPECT_GT(zk.at("reads").to_number<std::uint64_t>(), 0U);
}

}  // namespace

TEST_F(Loadgen, ClosedAndOpenLoopAccountForEveryTaskAndLeaveTheNamespaceClean) {
    ZKD_REQUIRE_ZK_SERVER();
    start_node("lg", "n1");
    start_node("lg", "n2");

    const auto closed = loadgen(
        {"--namespace", "lg", "--tasks", "300", "--concurrency", "16", "--wait-workers", "30000",
         "--workers", "2", "--json"}
    );
    ASSERT_NE(closed.exit_code, -1) << "timed out";
    EXPECT_EQ(closed.exit_code, 0) << closed.err;
    const auto c = parse_report(closed);
    ASSERT_TRUE(c.contains("load")) << closed.out;
    EXPECT_EQ(c.at("config").at("mode").as_string(), "closed");
    EXPECT_FALSE(c.contains("raw"));
    const auto& cload = c.at("load").as_object();
    expect_sound_load(cload, 300);
    EXPECT_EQ(cload.at("workers").to_number<std::uint64_t>(), 2U);
    EXPECT_EQ(cload.at("capacity").to_number<std::uint64_t>(), 8U);
    // 16 in flight on two workers of 4 slots each: the client placed some tasks directly
    // (docs/protocol.md §6 T1 "Direct placement").
    EXPECT_GT(cload.at("client").at("direct").to_number<std::uint64_t>(), 0U)
        << json::serialize(cload.at("client"));

    // Open loop, 200 tasks/s for one second, four per submit call: exactly 200 scheduled,
    // each with its line in the trace.
    const auto trace = dir_ / "trace.txt";
    const auto open = loadgen(
        {"--namespace", "lg", "--rate", "200", "--duration", "1", "--batch", "4", "--payload",
         "100", "--json", "--trace", trace.string()}
    );
    ASSERT_NE(open.exit_code, -1) << "timed out";
    EXPECT_EQ(open.exit_code, 0) << open.err;
    const auto o = parse_report(open);
    ASSERT_TRUE(o.contains("load")) << open.out;
    EXPECT_EQ(o.at("config").at("mode").as_string(), "open");
    expect_sound_load(o.at("load").as_object(), 200);
    std::ifstream rows(trace);
    std::string line;
    ASSERT_TRUE(std::getline(rows, line)) << "no " << trace;
    EXPECT_EQ(line, "# due_ms latency_ms started_ms finished_ms worker");
    std::size_t n = 0;
    double last_due = -1;
    while (std::getline(rows, line)) {
        std::istringstream row(line);
        double due = 0;
        double latency = 0;
        std::int64_t started = 0;
        std::int64_t finished = 0;
        std::string worker;
        ASSERT_TRUE(row >> due >> latency >> started >> finished >> worker) << line;
        EXPECT_GE(due, 0.0) << line;
        EXPECT_LT(due, 1000.0) << line;  // scheduled within the one second
        EXPECT_GT(latency, 0.0) << line;
        EXPECT_GT(started, 0) << line;
        EXPECT_GE(finished, started) << line;
        // A worker's id starts with its host's name.
        EXPECT_TRUE(worker.rfind("n1-", 0) == 0 || worker.rfind("n2-", 0) == 0) << line;
        last_due = std::max(last_due, due);
        ++n;
    }
    EXPECT_EQ(n, 200U);
    EXPECT_GT(last_due, 900.0);  // the schedule spans the second

    // Text mode prints the same kind of figures.
    const auto text = loadgen({"--namespace", "lg", "--tasks", "20", "--task", "spin:1"});
    EXPECT_EQ(text.exit_code, 0) << text.err;
    EXPECT_NE(text.out.find("tasks/s"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("p99.9"), std::string::npos) << text.out;
    // Each of these loadgens had every result consumed: none left its results directory
    // (task_client::close: its automatic bundles' results were consumed by itself).
    EXPECT_EQ(run(client_dirs("lg")), 0U);

    // Bundled: 400 tasks, 100 per submit call, bundles of 20: every task its own result,
    // one create per bundle and one write consuming each bundle's result.
    const auto bundled = loadgen(
        {"--namespace", "lg", "--tasks", "400", "--concurrency", "200", "--batch", "100",
         "--bundle", "20", "--json"}
    );
    ASSERT_NE(bundled.exit_code, -1) << "timed out";
    EXPECT_EQ(bundled.exit_code, 0) << bundled.err;
    const auto b = parse_report(bundled);
    ASSERT_TRUE(b.contains("load")) << bundled.out;
    EXPECT_EQ(b.at("config").at("bundle").to_number<std::uint64_t>(), 20U);
    const auto& bload = b.at("load").as_object();
    EXPECT_EQ(bload.at("results").to_number<std::uint64_t>(), 400U);
    EXPECT_EQ(bload.at("succeeded").to_number<std::uint64_t>(), 400U);
    EXPECT_EQ(bload.at("errors").at("total").to_number<std::uint64_t>(), 0U);
    EXPECT_LE(bload.at("client").at("write_ops").to_number<std::uint64_t>(), 100U)
        << json::serialize(bload.at("client"));

    // Bundled by the client itself: 400 one-task submits at once, every task its own result,
    // most of them in automatic bundles.
    const auto autob = loadgen(
        {"--namespace", "lg", "--tasks", "400", "--concurrency", "400", "--auto-bundle", "32",
         "--json"}
    );
    ASSERT_NE(autob.exit_code, -1) << "timed out";
    EXPECT_EQ(autob.exit_code, 0) << autob.err;
    const auto ab = parse_report(autob);
    ASSERT_TRUE(ab.contains("load")) << autob.out;
    EXPECT_EQ(ab.at("config").at("auto_bundle").to_number<std::uint64_t>(), 32U);
    const auto& abload = ab.at("load").as_object();
    EXPECT_EQ(abload.at("succeeded").to_number<std::uint64_t>(), 400U);
    EXPECT_EQ(abload.at("errors").at("total").to_number<std::uint64_t>(), 0U);
    EXPECT_GT(abload.at("client").at("auto_bundled").to_number<std::uint64_t>(), 0U)
        << json::serialize(abload.at("client"));

    // Every result was consumed, nothing is left pending or assigned.
    const auto results = run(count_under_shards("lg", "/results"));
    const auto pending = run(count_under_shards("lg", "/pending"));
    const auto assigned = run(count_under_shards("lg", "/assign"));
    EXPECT_EQ(results, 0U);
    EXPECT_EQ(pending, 0U);
    EXPECT_EQ(assigned, 0U);
}

TEST_F(Loadgen, RawCeilingAloneAndWithTasks) {
    ZKD_REQUIRE_ZK_SERVER();
    const auto raw = loadgen(
        {"--raw", "--raw-ops", "400", "--raw-rounds", "1", "--raw-warmup", "0", "--raw-batch", "10",
         "--json"}
    );
    ASSERT_NE(raw.exit_code, -1) << "timed out";
    EXPECT_EQ(raw.exit_code, 0) << raw.err;
    const auto r = parse_report(raw);
    ASSERT_TRUE(r.contains("raw")) << raw.out;
    EXPECT_FALSE(r.contains("load"));
    EXPECT_GT(r.at("raw").at("creates_per_s").to_number<double>(), 0.0);
    EXPECT_GT(r.at("raw").at("multis_per_s").to_number<double>(), 0.0);
    EXPECT_EQ(r.at("raw").at("batch").to_number<std::uint64_t>(), 10U);
    EXPECT_EQ(r.at("raw").at("rounds").as_array().size(), 1U);
    // Its scratch nodes are gone: the test's chroot holds nothing of it.
    for (const auto& name : run(children_of("/"))) {
        EXPECT_EQ(name.rfind("zkd-loadgen-raw-", 0), std::string::npos) << name;
    }

    start_node("both", "n1");
    const auto both = loadgen(
        {"--namespace", "both", "--with-raw", "--raw-ops", "400", "--raw-rounds", "1", "--tasks",
         "50", "--wait-workers", "30000", "--json"}
    );
    EXPECT_EQ(both.exit_code, 0) << both.err;
    const auto b = parse_report(both);
    ASSERT_TRUE(b.contains("raw") && b.contains("load")) << both.out;
    expect_sound_load(b.at("load").as_object(), 50);
    EXPECT_GT(b.at("tasks_per_raw_create").to_number<double>(), 0.0);
    for (const auto& name : run(children_of("/"))) {
        EXPECT_EQ(name.rfind("zkd-loadgen-raw-", 0), std::string::npos) << name;
    }
}

TEST_F(Loadgen, BadFlagsExitTwoWithAMessage) {
    // No server needed: the command line is checked first.
    const std::vector<std::vector<std::string>> bad{
        {"--frobnicate"},
        {"--tasks", "0"},
        {"--tasks"},
        {"--rate", "10", "--concurrency", "4"},
        {"--task", "bogus"},
        {"--raw", "--with-raw"},
        {"--zk", "host:99999"},
        {"--namespace", "a/b"},
    };
    for (const auto& args : bad) {
        std::vector<std::string> argv{ZKD_LOADGEN_BINARY};
        argv.insert(argv.end(), args.begin(), args.end());
        const auto o = zkd::test::run_command(argv, {}, 30s);
        EXPECT_EQ(o.exit_code, 2) << args.front() << ": " << o.err;
        EXPECT_NE(o.err.find("zkd-loadgen: "), std::string::npos) << o.err;
        EXPECT_TRUE(o.out.empty()) << o.out;
    }
    const auto help = zkd::test::run_command({ZKD_LOADGEN_BINARY, "--help"}, {}, 30s);
    EXPECT_EQ(help.exit_code, 0);
    EXPECT_NE(help.out.find("--concurrency"), std::string::npos);
    EXPECT_NE(help.out.find("--with-raw"), std::string::npos);
}

TEST_F(Loadgen, UnreachableZooKeeperExitsThreeWithinTheTimeout) {
    // A port nobody listens on (the server's port + nothing: pick a closed loopback port).
    const auto o = zkd::test::run_command(
        {ZKD_LOADGEN_BINARY, "--zk", "127.0.0.1:1", "--connect-timeout", "800", "--tasks", "5",
         "--no-progress"},
        {}, 60s
    );
    ASSERT_NE(o.exit_code, -1) << "timed out";
    EXPECT_EQ(o.exit_code, 3) << o.err;
    EXPECT_NE(o.err.find("cannot reach ZooKeeper"), std::string::npos) << o.err;
    EXPECT_LT(o.took, 30s);
}

TEST_F(Loadgen, NoClusterOrNoWorkersIsReportedNotWaitedOn) {
    ZKD_REQUIRE_ZK_SERVER();
    // No cluster at all in the namespace.
    const auto none =
        loadgen({"--namespace", "nothing-here", "--tasks", "5", "--wait-workers", "500"}, 60s);
    ASSERT_NE(none.exit_code, -1) << "timed out";
    EXPECT_EQ(none.exit_code, 5) << none.err;
    EXPECT_NE(none.err.find("no zkd cluster"), std::string::npos) << none.err;

    // A cluster with a standby master only: no children under /workers.
    start_node("standby-only", "s1", {"--capacity", "0"});
    const auto empty = loadgen(
        {"--namespace", "standby-only", "--tasks", "5", "--wait-workers", "1000", "--json"}, 60s
    );
    ASSERT_NE(empty.exit_code, -1) << "timed out";
    EXPECT_EQ(empty.exit_code, 5) << empty.err;
    EXPECT_NE(empty.err.find("no workers"), std::string::npos) << empty.err;
    EXPECT_LT(empty.took, 45s);
    const auto j = parse_report(empty);
    EXPECT_EQ(j.at("exit").as_int64(), 5);
    EXPECT_FALSE(j.contains("load"));

    // Fewer workers than asked for with --workers.
    start_node("one-worker", "w1");
    const auto few = loadgen(
        {"--namespace", "one-worker", "--tasks", "5", "--workers", "3", "--wait-workers", "3000"},
        60s
    );
    ASSERT_NE(few.exit_code, -1) << "timed out";
    EXPECT_EQ(few.exit_code, 5) << few.err;
    EXPECT_NE(few.err.find("only 1 of the 3 workers"), std::string::npos) << few.err;
}

TEST_F(Loadgen, ACredentialedClusterTakesTheCredentials) {
    ZKD_REQUIRE_ZK_SERVER();
    start_node("secured", "n1", {"--user", "ops", "--password", "s3cret"});
    const auto with = loadgen(
        {"--namespace", "secured", "--user", "ops", "--password", "s3cret", "--tasks", "40",
         "--bundle", "8", "--batch", "20", "--wait-workers", "30000", "--json"}
    );
    ASSERT_NE(with.exit_code, -1) << "timed out";
    EXPECT_EQ(with.exit_code, 0) << with.err;
    const auto j = parse_report(with);
    ASSERT_TRUE(j.contains("load")) << with.out;
    EXPECT_EQ(j.at("load").at("succeeded").to_number<std::uint64_t>(), 40U);

    const auto without =
        loadgen({"--namespace", "secured", "--tasks", "5", "--wait-workers", "2000"}, 60s);
    ASSERT_NE(without.exit_code, -1) << "timed out";
    EXPECT_NE(without.exit_code, 0) << without.out;
    EXPECT_NE(without.err.find("auth"), std::string::npos) << without.err;

    // Only the credentials' holder can clean up (the fixture's session has none).
    nodes_.clear();
    run([&]() -> asio::awaitable<void> {
        zkd::zkco::config cfg = make_config();
        cfg.auth = zkd::zkco::credentials{"ops", "s3cret"};
        zkd::zkco::client owner(ioc_.get_executor(), cfg);
        EXPECT_TRUE(co_await zkd::zkco::with_timeout(owner.connect(), 10s));
        auto removed =
            co_await zkd::test::remove_recursive(owner, zkd::protocol::chroot_path("secured"));
        EXPECT_TRUE(removed) << removed.error().message();
        co_await owner.close();
    }());
}

TEST_F(Loadgen, NoResultForTheStallTimeStopsTheRun) {
    ZKD_REQUIRE_ZK_SERVER();
    start_node("stall", "n1", {"--capacity", "2"});
    // Two tasks that sleep far longer than the stall timeout.
    const auto o = loadgen(
        {"--namespace", "stall", "--tasks", "2", "--task", "sleep:60000", "--stall-timeout", "1500",
         "--wait-workers", "30000", "--json"},
        60s
    );
    ASSERT_NE(o.exit_code, -1) << "timed out";
    EXPECT_EQ(o.exit_code, 4) << o.err;
    const auto j = parse_report(o);
    ASSERT_TRUE(j.contains("load")) << o.out;
    const auto& load = j.at("load").as_object();
    EXPECT_TRUE(load.at("stalled").as_bool());
    EXPECT_EQ(load.at("submitted").to_number<std::uint64_t>(), 2U);
    EXPECT_EQ(load.at("results").to_number<std::uint64_t>(), 0U);
    EXPECT_EQ(load.at("errors").at("unfinished").to_number<std::uint64_t>(), 2U);
    EXPECT_NE(o.err.find("no result for 1500 ms"), std::string::npos) << o.err;
}

// zkd-loadgen's own server dies in the middle of a run (the backlog that killed the embedded
// ZooKeeper): the run ends with exit 3 and says so, once its session is gone (the
// session timeout after the server went), instead of printing 0/s until someone kills it.
TEST_F(Loadgen, AServerThatDiesMidRunEndsItWithExitThree) {
    ZKD_REQUIRE_LOCAL_ZK_SERVER();
    auto own = zkd::zk_local::cluster::start({});
    const auto zk = own.connect_string();
    nodes_.push_back(std::make_unique<zkd::test::zkd_process>(
        ZKD_BINARY, zk, "gone", "m", dir_ / "m.log", std::vector<std::string>{"--capacity", "0"}
    ));
    // Far more tasks than it can submit before the kill, and a stall timeout far beyond the
    // test's patience: only losing the server may end this run.
    zkd::test::background_command lg(
        {ZKD_LOADGEN_BINARY,
         "--zk",
         zk,
         "--namespace",
         "gone",
         "--no-progress",
         "--json",
         "--submit-only",
         "--allow-no-workers",
         "--tasks",
         "100000000",
         "--concurrency",
         "200",
         "--batch",
         "10",
         "--session-timeout",
         "2000",
         "--stall-timeout",
         "3600000",
         "--wait-workers",
         "30000"},
        dir_ / "lg.out", dir_ / "lg.err"
    );
    const auto znodes = [&] {
        const auto mntr = own.four_letter(0, "mntr");
        const auto at = mntr.find("zk_znode_count\t");
        return at == std::string::npos ? 0L : std::stol(mntr.substr(at + 15));
    };
    const auto until = std::chrono::steady_clock::now() + 60s;
    while (znodes() < 1000 && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(50ms);
    }
    ASSERT_GE(znodes(), 1000) << "no tasks submitted within 60 s:\n" << lg.err();
    own.kill_member(0);

    const int code = lg.wait_exit(60s);
    ASSERT_NE(code, -1) << "still running 60 s after its server died:\n" << lg.err();
    EXPECT_EQ(code, 3) << lg.err();
    EXPECT_NE(lg.err().find("lost ZooKeeper at " + zk), std::string::npos) << lg.err();
    outcome o;
    o.out = lg.out();
    o.err = lg.err();
    const auto j = parse_report(o);
    ASSERT_TRUE(j.contains("load")) << o.out;
    EXPECT_TRUE(j.at("load").at("session_lost").as_bool());
    EXPECT_GT(j.at("load").at("submitted").to_number<std::uint64_t>(), 0U);
    EXPECT_EQ(j.at("exit").as_int64(), 3);
    nodes_.clear();
    own.stop();
}

// zkd run --no-direct: the master says in /master that clients place no task on a worker
// themselves; the loadgen's client then sends every task through pending.
TEST_F(Loadgen, AMasterStartedWithNoDirectGetsEveryTask) {
    ZKD_REQUIRE_ZK_SERVER();
    start_node("nd", "n1", {"--no-direct"});
    ASSERT_EQ(wait_master_says("nd", "direct"), false) << "no master said direct:false in 30 s";
    start_node("nd", "n2");  // the second worker (n1 is master, and works too)
    const auto lg = loadgen(
        {"--namespace", "nd", "--tasks", "300", "--concurrency", "16", "--wait-workers", "30000",
         "--workers", "2", "--json"}
    );
    ASSERT_NE(lg.exit_code, -1) << "timed out";
    EXPECT_EQ(lg.exit_code, 0) << lg.err;
    const auto r = parse_report(lg);
    ASSERT_TRUE(r.contains("load")) << lg.out;
    const auto& load = r.at("load").as_object();
    expect_sound_load(load, 300);
    EXPECT_EQ(load.at("client").at("direct").to_number<std::uint64_t>(), 0U)
        << json::serialize(load.at("client"));
}

// A full queue (zkd run --max-pending) makes zkd-loadgen wait and submit again,
// counting the refusals, instead of failing tasks: 30 tasks at once against a bound of 5 are
// all submitted and finish. (The client counts its own submits against the bound between
// its reads of the pending count, so the sixth submit is refused however fast workers are.)
TEST_F(Loadgen, AFullQueueIsWaitedOut) {
    ZKD_REQUIRE_ZK_SERVER();
    start_node("qf", "n1", {"--max-pending", "5"});
    // Until a master publishes the bound, a client sees none (an older master's cluster).
    ASSERT_EQ(wait_master_says("qf", "max_pending"), 5)
        << "no master published the bound within 30 s";
    const auto lg = loadgen(
        {"--namespace", "qf", "--tasks", "30", "--concurrency", "30", "--wait-workers", "30000",
         "--json"}
    );
    ASSERT_NE(lg.exit_code, -1) << "timed out";
    EXPECT_EQ(lg.exit_code, 0) << lg.err;
    const auto r = parse_report(lg);
    ASSERT_TRUE(r.contains("load")) << lg.out;
    const auto& load = r.at("load").as_object();
    expect_sound_load(load, 30);
    EXPECT_GT(load.at("queue_full").to_number<std::uint64_t>(), 0U) << json::serialize(load);
    // Refused submits wrote nothing (expect_sound_load bounds the client's write ops by one
    // create and one delete per task plus a receipt per transaction), and nothing is left.
    EXPECT_EQ(run(count_under_shards("qf", "/pending")), 0U);
    EXPECT_EQ(run(count_under_shards("qf", "/results")), 0U);
}

}  // namespace ZKD_UNITY_ID
