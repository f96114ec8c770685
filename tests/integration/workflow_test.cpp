// SPDX-License-Identifier: MIT
// Workflows through real `zkd run` processes and `zkd workflow` against a real ZooKeeper
// (docs/workflows.md, docs/protocol.md §11): values passed down a chain, a fan-in that runs
// once, a dynamic map, failures, cancel, a master SIGKILL while it launches and collects,
// and every refused spec; the engine's redirect of placed tasks to pending, and its restart
// on a master deposed and elected again.
#include "protocol/ids.hpp"
#include "protocol/layout.hpp"
#include "support/processes.hpp"
#include "support/run_co.hpp"
#include "support/zk_fixture.hpp"
#include "zkco/deadline.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>

namespace ZKD_UNITY_ID {

namespace asio = boost::asio;
namespace json = boost::json;
using namespace std::literals;

namespace {

/// A served type that counts: its value is 1 + the sum of every number in its args (inputs
/// included, arrays summed), and each run appends its args' "tag" (or the item) to a log.
/// Served (one warm process per slot, docs/exec.md "Serve mode"): the fan-outs below run
/// a thousand tasks, which a program started per task makes a matter of many seconds.
constexpr const char* count_py = R"(#!/usr/bin/env python3
import json, sys
def total(v):
    if isinstance(v, bool) or v is None:
        return 0
    if isinstance(v, (int, float)):
        return v
    if isinstance(v, list):
        return sum(total(x) for x in v)
    if isinstance(v, dict):
        return sum(total(x) for k, x in v.items() if k != "tag")
    return 0
def send(**frame):
    sys.stdout.write(json.dumps(frame) + "\n")
    sys.stdout.flush()
send(op="ready", protocol=1)
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("op") != "task":
        continue
    args = msg["args"]
    tag = args.get("tag", "-") if isinstance(args, dict) else "item"
    with open(sys.argv[1], "a") as log:
        log.write(str(tag) + "\n")
    send(op="result", id=msg["id"], value=total(args) + 1)
)";  // NOLINTNEXTLINE(readability-identifier-naming): gtest fixtures are CamelCase
class Workflow : public zkd::test::zk_test {
protected:
    void SetUp() override {
        zk_test::SetUp();
        dir_ = zkd::test::make_test_dir(
            "wf", ::testing::UnitTest::GetInstance()->current_test_info()->name()
        );
        ns_ = "wf";
        zk_ = base_ + chroot_;
        script_ = dir_ / "count.py";
        std::ofstream(script_) << count_py;
        std::filesystem::permissions(script_, std::filesystem::perms::owner_all);
        runs_ = dir_ / "runs.log";
    }
    void TearDown() override {
        stop_rewriting();
        nodes_.clear();
        if (HasFailure()) {
            zkd::test::print_logs(dir_, 4000);
        }
        std::filesystem::remove_all(dir_);
        zk_test::TearDown();
    }
    /// A node; `worker`: a worker that does not run for master, else a candidate that
    /// works only when `works`.
    void start(const std::string& host, bool worker, bool works = true) {
        std::vector<std::string> extra{
            "--serve", "count=" + script_.string() + " " + runs_.string()};
        if (worker) {
            extra.insert(extra.end(), {"--role", "worker", "--capacity", "8", "--threads", "8"});
        } else if (!works) {
            extra.insert(extra.end(), {"--capacity", "0"});
        }
        nodes_.emplace(
            host, std::make_unique<zkd::test::zkd_process>(
                      ZKD_BINARY, zk_, ns_, host, dir_ / (host + ".log"), std::move(extra)
                  )
        );
    }
    zkd::test::command_result zkd(
        std::vector<std::string> args, const std::string& stdin_text = {}
    ) {
        std::vector<std::string> argv{ZKD_BINARY};
        argv.insert(argv.end(), args.begin(), args.end());
        argv.insert(argv.end(), {"--zk", zk_, "--namespace", ns_});
        std::filesystem::path in;
        if (!stdin_text.empty()) {
            in = dir_ / "stdin.json";
            std::ofstream(in) << stdin_text;
        }
        return zkd::test::run_command(argv, {}, 240s, in);
    }
    /// Runs SPEC with --wait --json: the status document.
    json::object run_wait(const std::string& spec, int expect_exit = 0) {
        auto r = zkd({"workflow", "run", "-", "--wait", "--json", "--timeout", "200s"}, spec);
        EXPECT_EQ(r.exit_code, expect_exit) << r.out << r.err;
        boost::system::error_code ec;
        auto v = json::parse(r.out, ec);
        if (ec || !v.is_object()) {
            ADD_FAILURE() << "not JSON: " << r.out << r.err;
            return {};
        }
        return v.get_object();
    }
    /// `zkd workflow status ID --json` once it says anything but "running" (up to 120 s;
    /// an answer that is no JSON object is asked again): its last document.
    json::object ended_status(const std::string& id) {
        json::object s;
        for (int i = 0; i < 1200; ++i) {
            boost::system::error_code ec;
            auto v = json::parse(zkd({"workflow", "status", id, "--json"}).out, ec);
            if (!ec && v.is_object()) {
                s = std::move(v.get_object());
                if (s.at("status") != "running") {
                    break;
                }
            }
            ::usleep(100'000);
        }
        return s;
    }
    /// How many times the count type ran with each tag.
    std::map<std::string, int> runs() const {
        std::map<std::string, int> out;
        std::ifstream in(runs_);
        for (std::string line; std::getline(in, line);) {
            ++out[line];
        }
        return out;
    }
    /// Until `zkd cluster --json` shows an epoch (the namespace exists, a master was elected)
    /// and `workers` workers that serve "count".
    void wait_for_cluster(std::size_t workers = 1) {
        for (int i = 0; i < 600; ++i) {
            auto r = zkd({"cluster", "--json"});
            if (r.exit_code == 0 && serving_count(r.out) >= workers) {
                return;
            }
            ::usleep(100'000);
        }
        FAIL() << "the cluster never came up with " << workers << " worker(s) serving count";
    }
    static std::size_t serving_count(const std::string& cluster_json) {
        boost::system::error_code ec;
        const auto v = json::parse(cluster_json, ec);
        if (ec || !v.is_object() || !v.as_object().contains("epoch")) {
            return 0;
        }
        std::size_t n = 0;
        if (const auto* ws = v.as_object().if_contains("workers"); ws && ws->is_array()) {
            for (const auto& w : ws->as_array()) {
                const auto* types = w.is_object() ? w.as_object().if_contains("types") : nullptr;
                if (types && types->is_array() &&
                    std::ranges::find(types->as_array(), json::value("count")) !=
                        types->as_array().end()) {
                    ++n;
                }
            }
        }
        return n;
    }

    /// Writes each of `paths` (under the namespace) again with its own data, every 50 ms,
    /// from a thread of its own until stop_rewriting(): each write moves the node's version.
    /// "*" at the end of a path: each of that directory's children.
    void start_rewriting(std::vector<std::string> paths) {
        rewriting_ = true;
        rewriter_ = std::thread([this, paths = std::move(paths)] {
            asio::io_context ioc;
            zkd::test::run_co(
                ioc,
                [&]() -> asio::awaitable<void> {
                    zkd::zkco::client zk(ioc.get_executor(), make_config());
                    co_await zk.connect();
                    asio::steady_timer timer(ioc);
                    while (rewriting_) {
                        std::vector<std::string> each;
                        for (const auto& p : paths) {
                            std::string full = "/zkd/";
                            full.append(ns_).append(p);
                            if (!p.ends_with("/*")) {
                                each.push_back(full);
                                continue;
                            }
                            const auto dir = full.substr(0, full.size() - 2);
                            if (auto kids = co_await zk.get_children(dir)) {
                                for (const auto& k : kids->names) {
                                    each.push_back(dir + "/" + k);
                                }
                            }
                        }
                        for (const auto& p : each) {
                            if (auto n = co_await zk.get(p)) {
                                co_await zk.set(p, n->data);
                                ++rewrites_;
                            }
                        }
                        timer.expires_after(10ms);
                        co_await timer.async_wait(asio::use_awaitable);
                    }
                    co_await zk.close();
                }(),
                300s
            );
        });
    }
    void stop_rewriting() {
        rewriting_ = false;
        if (rewriter_.joinable()) {
            rewriter_.join();
        }
    }
    /// How many lines of node `host`'s log hold `text`.
    int log_lines(const std::string& host, const std::string& text) const {
        std::ifstream in(dir_ / (host + ".log"));
        int n = 0;
        for (std::string line; std::getline(in, line);) {
            n += line.find(text) != std::string::npos ? 1 : 0;
        }
        return n;
    }
    /// A chord of `width` count steps after "<p>a", and "<p>j" after all of them.
    static std::string chord_spec(const std::string& p, int width) {
        const auto count_step = [](std::string& out, const std::string& name) {
            out.append("\"").append(name).append(R"(":{"type":"count","args":{"tag":")");
            out.append(name).append("\"}");
        };
        std::string spec = R"({"steps":{)";
        count_step(spec, p + "a");
        spec += "}";
        std::string after;
        for (int k = 0; k < width; ++k) {
            const auto b = p + "b" + std::to_string(k);
            spec += ",";
            count_step(spec, b);
            spec.append(R"(,"after":[")").append(p).append(R"(a"]})");
            after.append(k ? ",\"" : "\"").append(b).append("\"");
        }
        spec += ",";
        count_step(spec, p + "j");
        spec.append(R"(,"after":[)").append(after).append("]}}}");
        return spec;
    }

    std::filesystem::path dir_;
    std::filesystem::path script_;
    std::filesystem::path runs_;
    std::string ns_;
    std::string zk_;
    std::map<std::string, std::unique_ptr<zkd::test::zkd_process>> nodes_;
    std::atomic<bool> rewriting_{false};
    std::atomic<int> rewrites_{0};
    std::thread rewriter_;
};

std::string step(const std::string& name, const std::string& body) {
    return "\"" + name + "\":{" + body + "}";
}

TEST_F(Workflow, AChainOfFiftyPassesItsValues) {
    start("m", false);
    start("w", true);
    wait_for_cluster(2);  // the master's own worker among them (its steps go there)
    std::string spec = R"({"name":"chain","steps":{)";
    for (int i = 0; i < 50; ++i) {
        spec += (i ? "," : "") +
                step(
                    "s" + std::to_string(100 + i),
                    R"("type":"count","args":{"tag":"s)" + std::to_string(100 + i) + "\"}" +
                        (i ? R"(,"after":["s)" + std::to_string(99 + i) + "\"]" : "")
                );
    }
    spec += "}}";
    const auto s = run_wait(spec);
    EXPECT_EQ(s.at("status"), "succeeded");
    EXPECT_EQ(s.at("result").at("s149"), 50);
    EXPECT_EQ(s.at("steps").at("s120").at("value"), 21);
    for (const auto& [tag, n] : runs()) {
        EXPECT_EQ(n, 1) << tag;
    }
    EXPECT_EQ(runs().size(), 50U);
    // Each W2 launched one task: the master placed it on its own worker (node "m"), which
    // learns of it, as the master learns of its result, from its own transaction's answer.
    const std::string id(s.at("id").as_string());
    const auto dir = "/zkd/" + ns_ + "/results/" + id.substr(id.rfind('-') + 1);
    std::map<std::string, int> by_worker;
    asio::io_context ioc;
    zkd::test::run_co(
        ioc,
        [&]() -> asio::awaitable<void> {
            zkd::zkco::client zk(ioc.get_executor(), make_config());
            co_await zk.connect();
            if (auto kids = co_await zk.get_children(dir)) {
                for (const auto& k : kids->names) {
                    std::string path = dir;
                    path.append("/").append(k);
                    if (auto n = co_await zk.get(path)) {
                        const auto r = json::parse(n->data).as_object();
                        ++by_worker[std::string(r.at("worker").as_string())];
                    }
                }
            }
            co_await zk.close();
        }(),
        60s
    );
    ASSERT_EQ(by_worker.size(), 1U);
    EXPECT_TRUE(by_worker.begin()->first.starts_with("m-")) << by_worker.begin()->first;
    EXPECT_EQ(by_worker.begin()->second, 50);
}

TEST_F(Workflow, AThousandToOneFanInRunsOnce) {
    start("m", false);
    start("w1", true);
    start("w2", true);
    wait_for_cluster();
    std::string spec = R"({"steps":{)" + step("src", R"("type":"echo","args":1)");
    std::string after;
    for (int i = 0; i < 1000; ++i) {
        const auto name = "f" + std::to_string(i);
        spec += "," + step(name, R"("type":"count","args":{"tag":"f","i":0},"after":["src"])");
        after += (i ? ",\"" : "\"") + name + "\"";
    }
    spec += "," + step("join", R"("type":"count","args":{"tag":"join"},"after":[)" + after + "]");
    spec += "}}";
    const auto s = run_wait(spec);
    EXPECT_EQ(s.at("status"), "succeeded");
    // Each of the 1,000 gets {"inputs":{"src":1}}: 2; the join sums them, plus one.
    EXPECT_EQ(s.at("result").at("join"), 2001);
    auto r = runs();
    EXPECT_EQ(r["join"], 1);
    EXPECT_EQ(r["f"], 1000);
}

TEST_F(Workflow, AMapFansOutOverWhatItsSourceReturned) {
    start("m", false);
    start("w", true);
    wait_for_cluster();
    const auto s = run_wait(R"({"steps":{
        "list":{"type":"echo","args":[1,2,3,4,5,6,7,8,9,10]},
        "each":{"type":"count","map":"list"},
        "again":{"type":"count","map":"list","args":{"tag":"again"}},
        "total":{"type":"count","args":{"tag":"total"},"after":["each"]},
        "empty":{"type":"echo","args":[]},
        "none":{"type":"count","map":"empty"}}})");
    EXPECT_EQ(s.at("status"), "succeeded");
    EXPECT_EQ(s.at("steps").at("each").at("value"), json::parse("[2,3,4,5,6,7,8,9,10,11]"));
    EXPECT_EQ(s.at("steps").at("each").at("tasks"), 10);
    // again: {"tag","item","index"}: item + index + 1.
    EXPECT_EQ(s.at("steps").at("again").at("value"), json::parse("[2,4,6,8,10,12,14,16,18,20]"));
    EXPECT_EQ(s.at("result").at("total"), 66);
    EXPECT_EQ(s.at("steps").at("none").at("value"), json::array{});
}

TEST_F(Workflow, AFailureSkipsItsDependantsUnlessItContinues) {
    start("m", false);
    wait_for_cluster();
    const auto s = run_wait(
        R"({"steps":{
        "bad":{"type":"fail","args":"boom"},
        "after_bad":{"type":"count","args":{"tag":"x"},"after":["bad"]},
        "soft":{"type":"fail","continue_on_failure":true},
        "after_soft":{"type":"echo","args":{},"after":["soft"]},
        "other":{"type":"count","args":{"tag":"other"}}}})",
        1
    );
    EXPECT_EQ(s.at("status"), "failed");
    EXPECT_EQ(s.at("steps").at("bad").at("status"), "failed");
    EXPECT_EQ(s.at("steps").at("bad").at("error").at("code"), "handler_error");
    EXPECT_EQ(s.at("steps").at("after_bad").at("status"), "skipped");
    EXPECT_EQ(s.at("steps").at("after_soft").at("status"), "succeeded");
    EXPECT_EQ(
        s.at("steps").at("after_soft").at("value"), json::parse(R"({"inputs":{"soft":null}})")
    );
    EXPECT_EQ(s.at("steps").at("other").at("status"), "succeeded");
    EXPECT_EQ(runs().count("x"), 0U);
}

TEST_F(Workflow, CancelStopsWhatWaitsAndWhatRuns) {
    start("m", false);
    wait_for_cluster();
    auto r = zkd({"workflow", "run", "-"}, R"({"steps":{
        "long":{"type":"sleep","args":{"ms":60000}},
        "next":{"type":"echo","after":["long"]}}})");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto id = r.out.substr(0, r.out.find('\n'));
    // Wait until the long step runs, then cancel.
    for (int i = 0; i < 200; ++i) {
        auto st = zkd({"workflow", "status", id, "--json"});
        if (st.out.find("\"tasks\":1") != std::string::npos) {
            break;
        }
        ::usleep(50'000);
    }
    auto c = zkd({"workflow", "cancel", id});
    EXPECT_EQ(c.exit_code, 0) << c.err;
    json::object s;
    for (int i = 0; i < 200; ++i) {
        auto st = zkd({"workflow", "status", id, "--json"});
        s = json::parse(st.out).get_object();
        if (s.at("status") == "cancelled" && s.at("steps").at("long").at("done") == 1) {
            break;
        }
        ::usleep(100'000);
    }
    EXPECT_EQ(s.at("status"), "cancelled");
    EXPECT_EQ(s.at("steps").at("next").at("status"), "cancelled");
    EXPECT_EQ(s.at("steps").at("long").at("done"), 1);  // its task ended, cancelled, in seconds
    EXPECT_EQ(s.at("steps").at("long").at("error").at("code"), "cancelled");
    auto again = zkd({"workflow", "cancel", id});
    EXPECT_EQ(again.exit_code, 1);  // it has ended
    auto list = zkd({"workflow", "list"});
    EXPECT_NE(list.out.find(id + "  cancelled"), std::string::npos) << list.out;
    EXPECT_EQ(zkd({"workflow", "status", "wf-0000000000001-00000000"}).exit_code, 5);
}

TEST_F(Workflow, AMasterKilledWhileLaunchingAndCollectingLaunchesNothingTwice) {
    // Two candidates that do not work, two workers that do not run for master: killing the
    // master stops no task, so each step runs exactly once.
    start("m1", false, false);
    start("m2", false, false);
    start("w1", true);
    start("w2", true);
    wait_for_cluster();
    std::string spec = R"({"steps":{)";
    // A chain of 30, each fanning out 20 that a fan-in collects.
    for (int i = 0; i < 30; ++i) {
        const auto c = "c" + std::to_string(100 + i);
        spec += (i ? "," : "") +
                step(
                    c, R"("type":"count","args":{"tag":")" + c + "\"}" +
                           (i ? R"(,"after":["j)" + std::to_string(99 + i) + "\"]" : "")
                );
        std::string after;
        for (int k = 0; k < 20; ++k) {
            const auto f = c + "f" + std::to_string(k);
            std::string body = R"("type":"count","args":{"tag":")";
            body.append(f).append(R"("},"after":[")").append(c).append("\"]");
            spec += "," + step(f, body);
            after += (k ? ",\"" : "\"") + f + "\"";
        }
        spec += "," + step(
                          "j" + std::to_string(100 + i), R"("type":"count","args":{"tag":"j)" +
                                                             std::to_string(100 + i) +
                                                             R"("},"after":[)" + after + "]"
                      );
    }
    spec += "}}";
    auto submitted = zkd({"workflow", "run", "-"}, spec);
    ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
    const auto id = submitted.out.substr(0, submitted.out.find('\n'));
    // Kill whichever candidate is master, twice, while the workflow runs (each time once a
    // live candidate acts: the last one's session takes 2 s to end).
    for (int kill = 0; kill < 2; ++kill) {
        ::usleep(500'000);
        std::string host;
        for (int i = 0; i < 400 && host.empty(); ++i) {
            auto cl = zkd({"cluster", "--json"});
            boost::system::error_code ec;
            auto doc = json::parse(cl.out, ec);
            const auto* m =
                !ec && doc.is_object() ? doc.get_object().if_contains("master") : nullptr;
            if (m != nullptr && m->is_object() && m->get_object().contains("host")) {
                const std::string h(m->at("host").as_string().c_str());
                if (nodes_.contains(h)) {
                    host = h;
                }
            }
            if (host.empty()) {
                ::usleep(50'000);
            }
        }
        ASSERT_FALSE(host.empty()) << "no live master";
        nodes_.at(host)->kill(SIGKILL);
        nodes_.erase(host);
        if (kill == 0) {
            // The first kill landed while steps were still to launch and collect (the second
            // may come after the last step on a fast machine).
            auto st = zkd({"workflow", "status", id, "--json"});
            EXPECT_NE(st.out.find(R"("status":"running")"), std::string::npos) << st.out;
        }
        start("m" + std::to_string(3 + kill), false, false);  // a candidate for what follows
    }
    const auto s = ended_status(id);
    EXPECT_EQ(s.at("status"), "succeeded");
    const auto r = runs();
    EXPECT_EQ(r.size(), 30U * 22U);
    for (const auto& [tag, n] : r) {
        EXPECT_EQ(n, 1) << tag << " ran " << n << " times";
    }
    // Each level multiplies by about 20 (past int64: a double), so only its kind is checked.
    EXPECT_TRUE(s.at("result").at("j129").is_number()) << s.at("result");
}

TEST_F(Workflow, TasksPlacedOnAWorkerThatChangedGoToPendingAndRunOnce) {
    // The master places launched tasks on workers itself, with the view of the workers it
    // read up to 1 s before. Every worker's node is written again every 10 ms here (as a
    // worker that starts draining writes it; one that leaves deletes it): a W2 that placed
    // tasks finds a worker's check failing at the version it read, and sends the same W2
    // again with every task to pending, whence the master assigns them.
    start("m", false, false);
    start("w1", true);
    start("w2", true);
    wait_for_cluster();
    start_rewriting({"/workers/*"});
    const auto s = run_wait(chord_spec("r", 30));
    stop_rewriting();
    EXPECT_GT(rewrites_.load(), 0);
    EXPECT_EQ(s.at("status"), "succeeded") << json::serialize(s);
    const auto r = runs();
    EXPECT_EQ(r.size(), 32U);
    for (const auto& [tag, n] : r) {
        EXPECT_EQ(n, 1) << tag << " ran " << n << " times";
    }
    EXPECT_GT(log_lines("m", "a worker it placed on left or changed"), 0)
        << "no W2 was redirected: the test did not test it";
    // Its value: a = 1; each b = 1 + a = 2; j = 1 + 30 * 2.
    EXPECT_EQ(s.at("result").at("rj"), 61);
}

TEST_F(Workflow, AMasterDeposedAndElectedAgainRunsItsWorkflowsOnce) {
    // The only candidate is deposed (its epoch's version moves under it: every fenced write
    // of it fails) while a workflow runs, and is elected again: its workflow engine stops
    // with it and starts again under the new epoch, reads the workflow back and finishes
    // it, launching nothing twice; a workflow submitted afterwards runs too.
    start("m", false, false);
    start("w1", true);
    start("w2", true);
    wait_for_cluster();
    auto submitted = zkd({"workflow", "run", "-"}, chord_spec("d", 40));
    ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
    const auto id = submitted.out.substr(0, submitted.out.find('\n'));
    start_rewriting({"/epoch"});
    for (int i = 0; i < 300 && log_lines("m", "no longer master") == 0; ++i) {
        ::usleep(50'000);
    }
    stop_rewriting();
    ASSERT_GT(log_lines("m", "no longer master"), 0) << "never deposed";
    const auto s = ended_status(id);
    EXPECT_EQ(s.at("status"), "succeeded") << json::serialize(s);
    EXPECT_GE(log_lines("m", "elected master"), 2) << "not elected again";
    const auto after = run_wait(chord_spec("e", 5));
    EXPECT_EQ(after.at("status"), "succeeded") << json::serialize(after);
    const auto r = runs();
    EXPECT_EQ(r.size(), 42U + 7U);
    for (const auto& [tag, n] : r) {
        EXPECT_EQ(n, 1) << tag << " ran " << n << " times";
    }
}

TEST_F(Workflow, RefusedSpecsCreateNothing) {
    start("m", false);
    wait_for_cluster();
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"{", "the spec is not JSON"},
        {R"({"steps":{"a":{"type":"echo","after":["b"]},"b":{"type":"echo","after":["a"]}}})",
         "the steps form a cycle: a -> b -> a"},
        {R"({"steps":{"a":{"type":"echo","after":["zz"]}}})", "names \"zz\", which is no step"},
        {R"({"steps":{"a":{"type":"no_such_type"}}})", "no worker serves task type 'no_such_type'"},
        {R"({"steps":{"a":{"type":"echo","bogus":1}}})", "unknown field \"bogus\""},
        {R"({"steps":{"a":{"type":"echo","map":"a"}}})", "cannot map over its own result"},
        {R"({"steps":{}})", "\"steps\" must be an object of at least one step"},
    };
    for (const auto& [spec, message] : cases) {
        auto r = zkd({"workflow", "run", "-"}, spec);
        EXPECT_EQ(r.exit_code, 1) << spec << "\n" << r.out << r.err;
        EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
    }
    std::string big =
        R"({"steps":{"a":{"type":"echo","args":")" + std::string(17 << 20, 'x') + "\"}}}";
    auto r = zkd({"workflow", "run", "-"}, big);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("over the limit of 16777216 bytes"), std::string::npos) << r.err;
    auto list = zkd({"workflow", "list"});
    EXPECT_EQ(list.exit_code, 0);
    EXPECT_EQ(list.out, "");
}

}  // namespace

}  // namespace ZKD_UNITY_ID
