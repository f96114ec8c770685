// SPDX-License-Identifier: MIT
// Schedules through real `zkd run` processes and `zkd schedule` against a real ZooKeeper
// (docs/schedules.md, docs/protocol.md §12): firings every second with the ids their due
// times give, a master killed and replaced without a firing skipped or repeated, pause and
// resume under the misfire policies once and skip, --no-overlap, and the command line's
// refusals and exit codes.
#include "support/processes.hpp"
#include "support/zk_fixture.hpp"

#include <boost/json.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <unistd.h>

namespace ZKD_UNITY_ID {

namespace json = boost::json;
using namespace std::literals;

namespace {

/// An exec type that logs the id of each task it runs (ZKD_TASK_ID), one line per run.
constexpr const char* tick_py = R"(#!/usr/bin/env python3
import os, sys
sys.stdin.read()
with open(sys.argv[1], "a") as log:
    log.write(os.environ["ZKD_TASK_ID"] + "\n")
print("1")
)";

std::int64_t wall_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch()
    )
        .count();
}

/// The task id of the firing of a schedule with client part `client`, priority 5, due at `due`.
std::string firing_id(const std::string& client, std::int64_t due) {
    char buf[48];
    std::snprintf(
        buf, sizeof buf, "t4-%013lld-%s000000", static_cast<long long>(due), client.c_str()
    );
    return buf;
}

std::int64_t due_of(const std::string& tid) {
    return std::stoll(tid.substr(3, 13));
}

// NOLINTNEXTLINE(readability-identifier-naming): gtest fixtures are CamelCase
class Schedule : public zkd::test::zk_test {
protected:
    void SetUp() override {
        zk_test::SetUp();
        dir_ = zkd::test::make_test_dir(
            "sched", ::testing::UnitTest::GetInstance()->current_test_info()->name()
        );
        zk_ = base_ + chroot_;
        script_ = dir_ / "tick.py";
        std::ofstream(script_) << tick_py;
        std::filesystem::permissions(script_, std::filesystem::perms::owner_all);
        runs_ = dir_ / "runs.log";
    }
    void TearDown() override {
        nodes_.clear();
        if (HasFailure()) {
            zkd::test::print_logs(dir_, 4000);
        }
        std::filesystem::remove_all(dir_);
        zk_test::TearDown();
    }
    /// `worker`: a worker that does not run for master; else a candidate that does not work.
    void start(const std::string& host, bool worker) {
        std::vector<std::string> extra{"--exec", "tick=" + script_.string() + " " + runs_.string()};
        if (worker) {
            extra.insert(extra.end(), {"--role", "worker", "--capacity", "8", "--threads", "8"});
        } else {
            extra.insert(extra.end(), {"--capacity", "0"});
        }
        nodes_.emplace(
            host, std::make_unique<zkd::test::zkd_process>(
                      ZKD_BINARY, zk_, "sched", host, dir_ / (host + ".log"), std::move(extra)
                  )
        );
    }
    zkd::test::command_result zkd(std::vector<std::string> args) {
        std::vector<std::string> argv{ZKD_BINARY};
        argv.insert(argv.end(), args.begin(), args.end());
        argv.insert(argv.end(), {"--zk", zk_, "--namespace", "sched"});
        return zkd::test::run_command(argv, {}, 60s);
    }
    void wait_for_cluster() {
        for (int i = 0; i < 600; ++i) {
            auto r = zkd({"cluster", "--json"});
            if (r.exit_code == 0 && r.out.find("\"tick\"") != std::string::npos &&
                r.out.find("\"epoch\"") != std::string::npos) {
                return;
            }
            ::usleep(100'000);
        }
        FAIL() << "the cluster never came up";
    }
    json::object show(const std::string& name) {
        auto r = zkd({"schedule", "show", name, "--json"});
        EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
        boost::system::error_code ec;
        auto v = json::parse(r.out, ec);
        if (ec || !v.is_object()) {
            ADD_FAILURE() << "not JSON: " << r.out << r.err;
            return {};
        }
        return v.get_object();
    }
    static std::int64_t num(const json::object& o, const char* key) {
        const auto* v = o.if_contains(key);
        return v == nullptr ? 0 : v->to_number<std::int64_t>();
    }
    /// Waits until schedule `name` has fired at least `n` times; its document.
    json::object wait_fired(const std::string& name, std::int64_t n) {
        json::object s;
        for (int i = 0; i < 600; ++i) {
            s = show(name);
            if (num(s, "fired") >= n) {
                return s;
            }
            ::usleep(100'000);
        }
        ADD_FAILURE() << name << " never fired " << n << " times: " << json::serialize(s);
        return s;
    }
    /// The task ids the tick type ran, with how many times each.
    std::map<std::string, int> runs() const {
        std::map<std::string, int> out;
        std::ifstream in(runs_);
        for (std::string line; std::getline(in, line);) {
            ++out[line];
        }
        return out;
    }
    /// Waits until every firing of the client part `client` in `want` ran.
    std::map<std::string, int> wait_runs(const std::string& client, std::size_t want) {
        std::map<std::string, int> mine;
        for (int i = 0; i < 600; ++i) {
            mine.clear();
            for (const auto& [tid, n] : runs()) {
                if (tid.find(client) != std::string::npos) {
                    mine[tid] = n;
                }
            }
            if (mine.size() >= want) {
                break;
            }
            ::usleep(100'000);
        }
        return mine;
    }
    /// The host of the acting master among the nodes started here; empty if none.
    std::string master_host() {
        for (int i = 0; i < 400; ++i) {
            auto cl = zkd({"cluster", "--json"});
            boost::system::error_code ec;
            auto doc = json::parse(cl.out, ec);
            const auto* m =
                !ec && doc.is_object() ? doc.get_object().if_contains("master") : nullptr;
            if (m != nullptr && m->is_object() && m->get_object().contains("host")) {
                std::string h(m->at("host").as_string().c_str());
                if (nodes_.contains(h)) {
                    return h;
                }
            }
            ::usleep(50'000);
        }
        return {};
    }

    std::filesystem::path dir_;
    std::filesystem::path script_;
    std::filesystem::path runs_;
    std::string zk_;
    std::map<std::string, std::unique_ptr<zkd::test::zkd_process>> nodes_;
};

TEST_F(Schedule, EverySecondFiresEachDueTimeOnceAcrossMasterFailovers) {
    // Two candidates that do not work and a worker that does not run for master: killing
    // the master stops no task.
    start("m1", false);
    start("m2", false);
    start("w", true);
    wait_for_cluster();
    auto add = zkd({"schedule", "add", "tick", "--every", "1s", "--misfire", "all", "tick"});
    ASSERT_EQ(add.exit_code, 0) << add.out << add.err;
    wait_fired("tick", 2);
    // Killed (SIGKILL: its session lingers, firings fall due meanwhile), then stopped
    // gracefully: each time another candidate takes over.
    for (int round = 0; round < 2; ++round) {
        const auto host = master_host();
        ASSERT_FALSE(host.empty()) << "no live master";
        const auto before = num(show("tick"), "fired");
        if (round == 0) {
            nodes_.at(host)->kill(SIGKILL);
        } else {
            nodes_.at(host)->kill(SIGTERM);
            nodes_.at(host)->wait_exit(30s);
        }
        nodes_.erase(host);
        start("m" + std::to_string(3 + round), false);
        wait_fired("tick", before + 3);
    }
    auto pause = zkd({"schedule", "pause", "tick"});
    ASSERT_EQ(pause.exit_code, 0) << pause.err;
    const auto s = show("tick");
    const std::string client(s.at("client").as_string().c_str());
    const auto created = num(s, "created_ms");
    const auto fired = num(s, "fired");
    EXPECT_EQ(num(s, "missed"), 0);
    EXPECT_EQ(num(s, "skipped"), 0);
    EXPECT_EQ(num(s, "last_fired_ms"), created + fired * 1000);
    // Every due time from the first to the last fired exactly once, with the id it gives.
    const auto ran = wait_runs(client, static_cast<std::size_t>(fired));
    ASSERT_EQ(ran.size(), static_cast<std::size_t>(fired));
    std::int64_t k = 1;
    for (const auto& [tid, n] : ran) {  // ids sort by due time
        EXPECT_EQ(tid, firing_id(client, created + k * 1000));
        EXPECT_EQ(n, 1) << tid << " ran " << n << " times";
        ++k;
    }
    // Paused: nothing more.
    ::usleep(2'500'000);
    EXPECT_EQ(num(show("tick"), "fired"), fired);
}

TEST_F(Schedule, ResumeAppliesTheMisfirePolicy) {
    start("m1", false);
    start("w", true);
    wait_for_cluster();
    ASSERT_EQ(zkd({"schedule", "add", "once", "--every", "1s", "tick"}).exit_code, 0);
    ASSERT_EQ(
        zkd({"schedule", "add", "skip", "--every", "1s", "--misfire", "skip", "tick"}).exit_code, 0
    );
    wait_fired("once", 2);
    wait_fired("skip", 2);
    ASSERT_EQ(zkd({"schedule", "pause", "once"}).exit_code, 0);
    ASSERT_EQ(zkd({"schedule", "pause", "skip"}).exit_code, 0);
    const auto paused_at = wall_ms();
    const auto once_fired = num(show("once"), "fired");
    const auto skip_fired = num(show("skip"), "fired");
    ::usleep(3'600'000);
    EXPECT_EQ(num(show("once"), "fired"), once_fired);
    const auto resume_from = wall_ms();
    ASSERT_EQ(zkd({"schedule", "resume", "once"}).exit_code, 0);
    ASSERT_EQ(zkd({"schedule", "resume", "skip"}).exit_code, 0);
    const auto resume_to = wall_ms();
    auto once = wait_fired("once", once_fired + 3);
    auto skip = wait_fired("skip", skip_fired + 2);
    // Each due time decided once: fired or missed.
    for (const auto* s : {&once, &skip}) {
        EXPECT_EQ(
            num(*s, "fired") + num(*s, "missed") + num(*s, "skipped"),
            (num(*s, "last_due_ms") - num(*s, "created_ms")) / 1000
        ) << json::serialize(*s);
    }
    EXPECT_GE(num(once, "missed"), 2);
    EXPECT_GE(num(skip, "missed"), 3);
    // `once` fired a due time missed while paused (the latest: unit-tested); `skip` none.
    auto fired_between = [&](const json::object& s, std::int64_t from, std::int64_t to) {
        const std::string client(s.at("client").as_string().c_str());
        int n = 0;
        for (const auto& [tid, count] :
             wait_runs(client, static_cast<std::size_t>(num(s, "fired")))) {
            const auto due = due_of(tid);
            n += due > from && due < to ? 1 : 0;
        }
        return n;
    };
    EXPECT_GE(fired_between(once, paused_at + 1000, resume_to), 1);
    EXPECT_EQ(fired_between(skip, paused_at, resume_from), 0);
}

TEST_F(Schedule, NoOverlapSkipsWhileThePreviousFiringRuns) {
    start("m1", false);
    start("w", true);
    wait_for_cluster();
    auto add =
        zkd({"schedule", "add", "slow", "--every", "1s", "--no-overlap", "sleep", R"({"ms":2500})"}
        );
    ASSERT_EQ(add.exit_code, 0) << add.err;
    json::object s;
    for (int i = 0; i < 300; ++i) {
        s = show("slow");
        if (num(s, "fired") >= 2 && num(s, "skipped") >= 2) {
            break;
        }
        ::usleep(100'000);
    }
    EXPECT_GE(num(s, "fired"), 2) << json::serialize(s);
    EXPECT_GE(num(s, "skipped"), 2) << json::serialize(s);
    EXPECT_EQ(
        num(s, "fired") + num(s, "missed") + num(s, "skipped"),
        (num(s, "last_due_ms") - num(s, "created_ms")) / 1000
    );
}

TEST_F(Schedule, CommandLineRefusalsListShowAndRemove) {
    start("m1", false);
    start("w", true);
    wait_for_cluster();
    struct refusal {
        std::vector<std::string> args;
        int exit_code;
        std::string message;
    };
    const std::vector<refusal> cases = {
        {{"schedule", "add", "a/b", "--every", "1s", "echo"}, 2, "not a valid schedule name"},
        {{"schedule", "add", "a", "echo"}, 2, "exactly one of --every DUR and --cron EXPR"},
        {{"schedule", "add", "a", "--every", "500ms", "echo"}, 2, "--every"},
        {{"schedule", "add", "a", "--cron", "61 * * * *", "echo"},
         1,
         "cron field minute \"61\": 61 is out of 0-59"},
        {{"schedule", "add", "a", "--cron", "0 0 30 2 *", "echo"}, 1, "never matches a date"},
        {{"schedule", "add", "a", "--cron", "@daily", "--tz", "Mars/Olympus", "echo"},
         1,
         "unknown time zone \"Mars/Olympus\""},
        {{"schedule", "add", "a", "--every", "1s", "--misfire", "sometimes", "echo"},
         1,
         "\"misfire\" must be"},
        {{"schedule", "add", "a", "--every", "1s", "echo", "{"}, 2, "ARGS-JSON is not JSON"},
        {{"schedule", "frobnicate"}, 2, "unknown schedule command 'frobnicate'"},
        {{"schedule", "show", "nope"}, 5, "no schedule named \"nope\""},
        {{"schedule", "rm", "nope"}, 5, "no schedule named \"nope\""},
        {{"schedule", "pause", "nope"}, 5, "no schedule named \"nope\""},
    };
    for (const auto& c : cases) {
        auto r = zkd(c.args);
        EXPECT_EQ(r.exit_code, c.exit_code) << c.args[2] << "\n" << r.out << r.err;
        EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
    }
    auto add = zkd(
        {"schedule", "add", "nightly", "--cron", "30 2 * * *", "--tz", "Europe/Paris", "--paused",
         "echo", "[1]"}
    );
    ASSERT_EQ(add.exit_code, 0) << add.err;
    auto again = zkd({"schedule", "add", "nightly", "--every", "1h", "echo"});
    EXPECT_EQ(again.exit_code, 1);
    EXPECT_NE(again.err.find("exists already"), std::string::npos) << again.err;
    ASSERT_EQ(
        zkd({"schedule", "add", "hourly", "--every", "1h", "--priority", "7", "echo"}).exit_code, 0
    );
    auto list = zkd({"schedule", "list", "--json"});
    ASSERT_EQ(list.exit_code, 0) << list.err;
    // The shape of GET /v1/schedules.
    auto all = json::parse(list.out).at("schedules").as_array();
    ASSERT_EQ(all.size(), 2U);
    EXPECT_EQ(all[0].at("name"), "hourly");
    EXPECT_TRUE(all[0].as_object().contains("next_ms"));
    EXPECT_EQ(all[0].at("fired"), 0);
    EXPECT_EQ(all[0].at("priority"), 7);
    EXPECT_EQ(all[1].at("name"), "nightly");
    EXPECT_EQ(all[1].at("cron"), "30 2 * * *");
    EXPECT_EQ(all[1].at("tz"), "Europe/Paris");
    EXPECT_EQ(all[1].at("paused"), true);
    EXPECT_FALSE(all[1].as_object().contains("next_ms"));  // paused
    auto text = zkd({"schedule", "show", "hourly"});
    EXPECT_EQ(text.exit_code, 0);
    EXPECT_NE(text.out.find("every 3600000ms"), std::string::npos) << text.out;
    EXPECT_EQ(zkd({"schedule", "resume", "nightly"}).exit_code, 0);
    EXPECT_EQ(show("nightly").at("paused"), false);
    EXPECT_EQ(zkd({"schedule", "rm", "nightly"}).exit_code, 0);
    EXPECT_EQ(zkd({"schedule", "show", "nightly"}).exit_code, 5);
    auto help = zkd({"schedule", "--help"});
    EXPECT_EQ(help.exit_code, 0);
    EXPECT_NE(help.out.find("--misfire POLICY"), std::string::npos);
}

}  // namespace

}  // namespace ZKD_UNITY_ID
