// SPDX-License-Identifier: MIT
// zkd-loadgen's command line, `mntr` parsing and the JSON report's shape.
#include "loadgen/options.hpp"

#include "loadgen/mntr.hpp"
#include "loadgen/report.hpp"

#include <boost/json.hpp>

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace ZKD_UNITY_ID {

using namespace zkd::loadgen;

namespace {

std::map<std::string, std::string> no_env;

env_lookup env_of(const std::map<std::string, std::string>& vars) {
    return [vars](const char* name) -> std::optional<std::string> {
        if (auto it = vars.find(name); it != vars.end()) {
            return it->second;
        }
        return std::nullopt;
    };
}

settings parse(
    const std::vector<std::string>& args, const std::map<std::string, std::string>& env = no_env
) {
    return parse_args(args, env_of(env)).s;
}

}  // namespace

TEST(LoadgenOptions, Defaults) {
    const auto s = parse({});
    EXPECT_EQ(s.zk, "127.0.0.1:2181");
    EXPECT_EQ(s.ns, "default");
    ASSERT_TRUE(s.tasks);
    EXPECT_EQ(*s.tasks, 1000U);
    EXPECT_FALSE(s.duration);
    EXPECT_FALSE(s.rate);
    EXPECT_EQ(s.concurrency, 64U);
    EXPECT_EQ(s.kind, (task_kind{"echo", 0, std::nullopt}));
    EXPECT_EQ(s.batch, 1U);
    EXPECT_TRUE(s.load);
    EXPECT_FALSE(s.raw);
    EXPECT_TRUE(s.require_workers);
    EXPECT_TRUE(s.mntr);
    EXPECT_EQ(s.min_workers, 1U);
    EXPECT_FALSE(s.json);
    EXPECT_FALSE(s.progress);
}

TEST(LoadgenOptions, EnvironmentAndFlags) {
    auto s = parse({}, {{"ZKD_ZK", "h1:1,h2:2/base"}, {"ZKD_NAMESPACE", "prod"}});
    EXPECT_EQ(s.zk, "h1:1,h2:2/base");
    EXPECT_EQ(s.ns, "prod");
    s = parse({"--zk", "a:3", "--namespace=ns2"}, {{"ZKD_ZK", "h1:1"}, {"ZKD_NAMESPACE", "x"}});
    EXPECT_EQ(s.zk, "a:3");
    EXPECT_EQ(s.ns, "ns2");

    s = parse({"--rate",     "250.5",
               "--duration", "1.5",
               "--task",     "spin:3",
               "--payload",  "0",
               "--batch",    "8",
               "--json",     "--progress",
               "--no-mntr",  "--no-direct",
               "--with-raw", "--raw-batch",
               "50",         "--cdf",
               "/tmp/x",     "--trace",
               "/tmp/t",     "--connect-timeout",
               "700",        "--stall-timeout",
               "2000",       "--allow-no-workers",
               "--workers",  "3"});
    ASSERT_TRUE(s.rate);
    EXPECT_DOUBLE_EQ(*s.rate, 250.5);
    ASSERT_TRUE(s.duration);
    EXPECT_EQ(s.duration->count(), 1500);
    EXPECT_FALSE(s.tasks);  // a duration alone: no task limit
    EXPECT_EQ(s.kind, (task_kind{"spin", 3, std::nullopt}));
    EXPECT_EQ(s.payload, 0U);
    EXPECT_EQ(s.batch, 8U);
    EXPECT_TRUE(s.json);
    EXPECT_EQ(s.progress, true);
    EXPECT_FALSE(s.mntr);
    EXPECT_FALSE(s.direct);
    EXPECT_TRUE(parse({}).direct);
    EXPECT_TRUE(s.raw);
    EXPECT_TRUE(s.load);
    EXPECT_EQ(s.raw_batch, 50U);
    EXPECT_EQ(s.cdf_file, "/tmp/x");
    EXPECT_EQ(s.trace_file, "/tmp/t");
    EXPECT_EQ(s.connect_timeout.count(), 700);
    EXPECT_EQ(s.stall_timeout.count(), 2000);
    EXPECT_FALSE(s.require_workers);
    EXPECT_EQ(s.min_workers, 3U);
    EXPECT_FALSE(s.submit_only);
    EXPECT_TRUE(parse({"--submit-only", "--allow-no-workers"}).submit_only);

    s = parse({"--raw"});
    EXPECT_TRUE(s.raw);
    EXPECT_FALSE(s.load);
}

TEST(LoadgenOptions, CredentialsAndBundles) {
    EXPECT_FALSE(parse({}).auth);
    auto s = parse({"--user", "ops", "--password", "pw", "--bundle", "64"});
    ASSERT_TRUE(s.auth);
    EXPECT_EQ(s.auth->user, "ops");
    EXPECT_EQ(s.auth->password, "pw");
    EXPECT_EQ(s.bundle, 64U);
    EXPECT_EQ(s.auto_bundle, 64U);                             // the client's default
    EXPECT_EQ(parse({"--auto-bundle", "1"}).auto_bundle, 1U);  // off
    EXPECT_EQ(parse({"--auto-bundle", "32"}).auto_bundle, 32U);
    s = parse({}, {{"ZKD_USER", "env-user"}, {"ZKD_PASSWORD", "env-pw"}});
    ASSERT_TRUE(s.auth);
    EXPECT_EQ(s.auth->user, "env-user");
    EXPECT_EQ(s.auth->password, "env-pw");
    for (const auto& bad : std::vector<std::vector<std::string>>{
             {"--user", "ops"},
             {"--password", "pw"},
             {"--user", "a:b", "--password", "pw"},
             {"--user", "ops", "--password-file", "/nonexistent/zkd-password"},
             {"--bundle", "0"},
             {"--bundle", "1001"},
             {"--raw", "--bundle", "4"},
             {"--auto-bundle", "0"},
             {"--auto-bundle", "1001"},
             {"--raw", "--auto-bundle", "64"},
         }) {
        EXPECT_THROW(parse(bad), usage_error) << bad.front();
    }
}

TEST(LoadgenOptions, Help) {
    EXPECT_TRUE(parse_args({"--help"}, env_of(no_env)).help);
    const std::string help = help_text();
    for (const auto* opt :
         {"--zk",
          "--namespace",
          "--connect-timeout",
          "--session-timeout",
          "--wait-workers",
          "--workers ",
          "--allow-no-workers",
          "--tasks",
          "--duration",
          "--concurrency",
          "--rate",
          "--max-in-flight",
          "--task ",
          "--payload",
          "--batch",
          "--auto-bundle",
          "--priority",
          "--task-timeout",
          "--max-attempts",
          "--stall-timeout",
          "--submit-only",
          "--raw ",
          "--with-raw",
          "--raw-ops",
          "--raw-window",
          "--raw-batch",
          "--raw-rounds",
          "--raw-warmup",
          "--raw-payload",
          "--json",
          "--progress",
          "--no-progress",
          "--no-mntr",
          "--no-direct",
          "--cdf",
          "--trace",
          "--help"}) {
        EXPECT_NE(help.find(opt), std::string::npos) << opt;
    }
}

TEST(LoadgenOptions, BadArgumentsAreUsageErrors) {
    const std::vector<std::vector<std::string>> bad{
        {"--frobnicate"},
        {"positional"},
        {"--tasks"},
        {"--tasks", "0"},
        {"--tasks", "-5"},
        {"--tasks", "12x"},
        {"--tasks", "1", "--tasks", "2"},
        {"--rate", "0"},
        {"--rate", "nan"},
        {"--rate", "10", "--concurrency", "4"},
        {"--duration", "-1"},
        {"--task", "bogus"},
        {"--task", "spin"},
        {"--task", "spin:"},
        {"--task", "sleep:-1"},
        {"--task", "echo:5"},
        {"--priority", "10"},
        {"--zk", "host:99999"},
        {"--zk", ""},
        {"--namespace", "a/b"},
        {"--namespace", ""},
        {"--raw", "--with-raw"},
        {"--raw", "--tasks", "5"},
        {"--raw-ops", "100"},
        {"--json=yes"},
        {"--progress", "--no-progress"},
        {"--submit-only", "--cdf", "f"},
        {"--submit-only", "--trace", "f"},
        {"--raw", "--trace", "f"},
        {"--trace", ""},
        {"--session-timeout", "10"},
        {"--workers", "0"},
    };
    for (const auto& args : bad) {
        std::string joined;
        for (const auto& a : args) {
            joined += a + " ";
        }
        EXPECT_THROW(parse_args(args, env_of(no_env)), usage_error) << joined;
    }
    try {
        parse_args({"--tasks", "abc"}, env_of(no_env));
        FAIL() << "no usage_error";
    } catch (const usage_error& e) {
        EXPECT_NE(std::string(e.what()).find("--tasks"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("abc"), std::string::npos) << e.what();
    }
}

// Durations take units as zkd's do; bare numbers keep their old meaning (ms; --duration: s).
TEST(LoadgenOptions, DurationsTakeUnits) {
    auto s = parse(
        {"--connect-timeout", "2s", "--session-timeout", "1m", "--wait-workers", "250ms",
         "--stall-timeout", "1h", "--task-timeout", "1500", "--duration", "2m"}
    );
    EXPECT_EQ(s.connect_timeout.count(), 2000);
    EXPECT_EQ(s.session_timeout.count(), 60'000);
    EXPECT_EQ(s.wait_workers.count(), 250);
    EXPECT_EQ(s.stall_timeout.count(), 3'600'000);
    EXPECT_EQ(s.task_timeout.count(), 1500);
    ASSERT_TRUE(s.duration);
    EXPECT_EQ(s.duration->count(), 120'000);
    s = parse({"--duration", "30s"});
    EXPECT_EQ(s.duration->count(), 30'000);
    s = parse({"--duration", "2"});
    EXPECT_EQ(s.duration->count(), 2000);  // seconds, as before
    s = parse({"--duration", "4m30s", "--stall-timeout", "1m500ms"});
    EXPECT_EQ(s.duration->count(), 270'000);
    EXPECT_EQ(s.stall_timeout.count(), 60'500);
    for (const auto& bad : std::vector<std::vector<std::string>>{
             {"--connect-timeout", "2 s"},
             {"--connect-timeout", "5d"},
             {"--session-timeout", "100ms"},
             {"--duration", "1.5s"},
             {"--duration", "0s"},
             {"--stall-timeout", "s"},
             {"--stall-timeout", "30s1m"}}) {
        try {
            parse_args(bad, env_of(no_env));
            ADD_FAILURE() << bad[0] << " " << bad[1] << ": no usage_error";
        } catch (const usage_error& e) {
            EXPECT_NE(std::string(e.what()).find(bad[0] + " wants a duration"), std::string::npos)
                << e.what();
        }
    }
}

TEST(LoadgenOptions, TaskKindsAndArgs) {
    EXPECT_EQ(parse_task_kind("sleep:0"), (task_kind{"sleep", 0, std::nullopt}));
    EXPECT_EQ(parse_task_kind("spin:86400000"), (task_kind{"spin", 86'400'000, std::nullopt}));
    EXPECT_FALSE(parse_task_kind("spin:86400001"));
    EXPECT_FALSE(parse_task_kind("sum"));
    EXPECT_EQ(task_args({"echo", 0, std::nullopt}, 5), boost::json::value("xxxxx"));
    EXPECT_EQ(task_args({"spin", 2, std::nullopt}, 0), boost::json::parse(R"({"ms":2})"));
    EXPECT_EQ(
        task_args({"sleep", 4, std::nullopt}, 3), boost::json::parse(R"({"ms":4,"pad":"xxx"})")
    );
}

TEST(LoadgenOptions, AnyTypeWithItsArgs) {
    const auto s = parse({"--type", "resize", "--args", R"({"w":10})"});
    EXPECT_EQ(s.kind.type, "resize");
    EXPECT_EQ(task_args(s.kind, 16), boost::json::parse(R"({"w":10})"));
    EXPECT_EQ(task_args(parse({"--type", "noop"}).kind, 16), boost::json::object{});
    EXPECT_THROW(parse({"--type", "bad name"}), usage_error);
    EXPECT_THROW(parse({"--type", "x", "--args", "{nope"}), usage_error);
    EXPECT_THROW(parse({"--args", "{}"}), usage_error);
    EXPECT_THROW(parse({"--type", "x", "--task", "echo"}), usage_error);
}

TEST(LoadgenMntr, ParsesCountersAndDifferences) {
    const std::string text =
        "zk_version\t3.8.0-x, built on 2024\n"
        "zk_packets_received\t151\n"
        "zk_cnt_updatelatency\t96\r\n"
        "garbage line\n"
        "zk_cnt_readlatency\t45\n";
    const auto m = parse_mntr(text);
    EXPECT_EQ(m.at("zk_version"), "3.8.0-x, built on 2024");
    EXPECT_FALSE(m.contains("garbage line"));
    const auto c = counts_from(m);
    ASSERT_TRUE(c);
    EXPECT_EQ(*c, (zk_counts{96, 45, 151}));
    EXPECT_EQ(zk_counts({100, 50, 200}) - *c, (zk_counts{4, 5, 49}));
    EXPECT_EQ(zk_counts({1, 1, 1}) - *c, (zk_counts{0, 0, 0}));  // a restarted server

    EXPECT_FALSE(counts_from(parse_mntr("zk_cnt_updatelatency\t1\nzk_cnt_readlatency\t2\n")));
    EXPECT_FALSE(counts_from(
        parse_mntr("zk_cnt_updatelatency\tx\nzk_cnt_readlatency\t2\nzk_packets_received\t3\n")
    ));
    EXPECT_FALSE(counts_from(parse_mntr("mntr is not executed because it is not in the whitelist."))
    );
}

TEST(LoadgenReport, JsonShape) {
    run_report r;
    r.s = parse({"--tasks", "10", "--with-raw"});
    raw_report raw;
    raw.settings.batch = 20;
    raw.creates_per_s = 1000;
    raw.multis_per_s = 100;
    raw.create_rounds = {1000};
    raw.multi_rounds = {100};
    r.raw = raw;
    load_report l;
    l.submitted = 10;
    l.results = 10;
    l.succeeded = 9;
    l.errors.failed = 1;
    l.elapsed_s = 2;
    for (std::uint64_t v = 1000; v <= 10000; v += 1000) {
        l.latency_us.record(v);
    }
    l.to_start_us.record(3000);
    l.run_us.record(1000);
    l.to_result_us.record(2000);
    l.zk = zk_counts{40, 60, 100};
    l.client.reads = 30;
    l.results_listings = 2;
    l.direct = 8;
    r.load = l;
    r.exit = exit_errors;

    const auto j = to_json(r);
    EXPECT_EQ(j.at("v").as_int64(), 1);
    EXPECT_EQ(j.at("exit").as_int64(), exit_errors);
    EXPECT_EQ(j.at("config").at("mode").as_string(), "closed");
    EXPECT_EQ(j.at("raw").at("creates_per_s").to_number<double>(), 1000.0);
    EXPECT_EQ(j.at("raw").at("creates_in_multis_per_s").to_number<double>(), 2000.0);
    const auto& load = j.at("load").as_object();
    EXPECT_EQ(load.at("results").as_uint64(), 10U);
    EXPECT_EQ(load.at("tasks_per_s").as_double(), 5.0);
    EXPECT_EQ(load.at("errors").at("total").as_uint64(), 1U);
    EXPECT_EQ(load.at("errors").at("failed").as_uint64(), 1U);
    const auto& lat = load.at("latency_ms").as_object();
    EXPECT_EQ(lat.at("count").as_uint64(), 10U);
    EXPECT_EQ(lat.at("min").as_double(), 1.0);
    EXPECT_EQ(lat.at("max").as_double(), 10.0);
    EXPECT_LE(lat.at("p50").as_double(), lat.at("p90").as_double());
    EXPECT_LE(lat.at("p90").as_double(), lat.at("p99").as_double());
    EXPECT_LE(lat.at("p99").as_double(), lat.at("p999").as_double());
    EXPECT_LE(lat.at("p999").as_double(), lat.at("max").as_double());
    EXPECT_EQ(load.at("zookeeper").at("writes_per_task").as_double(), 4.0);
    EXPECT_EQ(load.at("zookeeper").at("reads_per_task").as_double(), 6.0);
    EXPECT_EQ(load.at("client").at("reads_per_task").as_double(), 3.0);
    EXPECT_EQ(load.at("client").at("results_listings").as_uint64(), 2U);
    EXPECT_EQ(load.at("client").at("results_listings_per_task").as_double(), 0.2);
    EXPECT_EQ(load.at("client").at("direct").as_uint64(), 8U);
    EXPECT_EQ(load.at("client").at("direct_per_task").as_double(), 0.8);
    EXPECT_EQ(j.at("tasks_per_raw_create").as_double(), 0.005);
    const auto& stages = load.at("stages_ms").as_object();
    EXPECT_EQ(stages.at("to_start").at("max").as_double(), 3.0);
    EXPECT_EQ(stages.at("run").at("count").as_uint64(), 1U);
    EXPECT_EQ(stages.at("to_result").at("min").as_double(), 2.0);
    // The text report carries the same figures.
    const auto text = to_text(r);
    EXPECT_NE(text.find("tasks/s"), std::string::npos);
    EXPECT_NE(text.find("4.00 writes/task"), std::string::npos) << text;
    EXPECT_NE(text.find("(0.200 listings of its results directory)"), std::string::npos) << text;
    EXPECT_NE(text.find("0.80 of the tasks placed on workers directly"), std::string::npos) << text;
    EXPECT_NE(text.find("to start p50 3  p99 3  max 3 | run p50 1"), std::string::npos) << text;
}

TEST(LoadgenReport, TraceLinesStayFiveFieldsWhateverTheWorkerIdSays) {
    task_trace t;
    t.due_ms = 12.5;
    t.latency_ms = 2.25;
    t.started_ms = 1700000000001;
    t.finished_ms = 1700000000002;
    t.worker = "w1-7-ab";
    EXPECT_EQ(trace_line(t), "12.500 2.250 1700000000001 1700000000002 w1-7-ab");
    t.worker = "evil id\nwith\tbreaks";  // a result anyone could have written
    EXPECT_EQ(trace_line(t), "12.500 2.250 1700000000001 1700000000002 evil_id_with_breaks");
    t.worker.clear();
    EXPECT_EQ(trace_line(t), "12.500 2.250 1700000000001 1700000000002 -");
}

}  // namespace ZKD_UNITY_ID
