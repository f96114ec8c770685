// SPDX-License-Identifier: MIT
// The zkd command line through the real binary, against a real ZooKeeper and a real
// `zkd run`: every command's help and happy path, bad flags, config file and environment,
// an unreachable ZooKeeper, unknown task ids. Over 700 lines: one cluster fixture for every
// command, started once.
#include "protocol/layout.hpp"
#include "protocol/route.hpp"
#include "protocol/task.hpp"
#include "roles/cluster/election.hpp"
#include "roles/cluster/namespace.hpp"
#include "support/processes.hpp"
#include "support/zk_fixture.hpp"
#include "zkco/client.hpp"

#include <boost/json.hpp>

#include <gtest/gtest.h>

#include <csignal>
#include <fstream>
#include <map>
#include <thread>

namespace ZKD_UNITY_ID {

namespace json = boost::json;
using namespace std::literals;
using zkd::test::command_result;
using zkd::test::run_command;

namespace {

class Cli : public zkd::test::zk_test {
protected:
    void SetUp() override {
        zk_test::SetUp();
        dir_ = zkd::test::make_test_dir(
            "cli", ::testing::UnitTest::GetInstance()->current_test_info()->name()
        );
    }

    void TearDown() override {
        node_.reset();
        if (HasFailure()) {
            zkd::test::print_logs(dir_, 8000);
        }
        std::filesystem::remove_all(dir_);
        zk_test::TearDown();
    }

    [[nodiscard]] std::string zk() const { return base_ + chroot_; }

    void start_node(std::vector<std::string> extra = {}) {
        node_ = std::make_unique<zkd::test::zkd_process>(
            ZKD_BINARY, zk(), "cli", "node", dir_ / "node.log", std::move(extra)
        );
    }

    /// `zkd ARGS... --zk <ours> --namespace cli`.
    command_result zkd(
        std::vector<std::string> args,
        bool with_cluster = true,
        const std::map<std::string, std::string>& env = {},
        std::chrono::milliseconds limit = std::chrono::seconds(60)
    ) {
        args.insert(args.begin(), ZKD_BINARY);
        if (with_cluster) {
            args.insert(args.end(), {"--zk", zk(), "--namespace", "cli"});
        }
        return run_command(args, env, limit);
    }

    /// The clients' results directories in the "cli" namespace (/results/<c>).
    std::size_t client_dirs() {
        std::size_t n = 0;
        run([&]() -> boost::asio::awaitable<void> {
            zkd::zkco::client zk(ioc_.get_executor(), make_config());
            co_await zk.connect();
            auto names = co_await zk.get_children("/zkd/cli/results"s);
            EXPECT_TRUE(names) << names.error().message();
            if (names) {
                for (const auto& name : names->names) {
                    n += zkd::protocol::layout::is_client_results(name) ? 1 : 0;
                }
            }
            co_await zk.close();
        }());
        return n;
    }

    /// Waits until the node is master and works; the last `zkd cluster --json`.
    command_result wait_for_cluster() {
        command_result c;
        for (int i = 0; i < 200; ++i) {
            c = zkd({"cluster", "--json"});
            if (c.exit_code == 0 && json::parse(c.out).at("workers").as_array().size() == 1 &&
                json::parse(c.out).at("master").is_object()) {
                break;
            }
            std::this_thread::sleep_for(50ms);
        }
        return c;
    }

    std::filesystem::path dir_;
    std::unique_ptr<zkd::test::zkd_process> node_;
};

std::string first_line(const std::string& s) {
    return s.substr(0, s.find('\n'));
}

TEST_F(Cli, EveryCommandHasHelp) {
    auto top = zkd({"--help"}, false);
    EXPECT_EQ(top.exit_code, 0);
    EXPECT_NE(top.out.find("usage: zkd <command>"), std::string::npos);
    for (const auto* cmd :
         {"run", "submit", "wait", "status", "cancel", "tasks", "cluster", "crack", "purge",
          "drop-namespace", "route"}) {
        EXPECT_NE(top.out.find(std::string("  ") + cmd + " "), std::string::npos) << cmd;
        auto r = zkd({cmd, "--help"}, false);
        EXPECT_EQ(r.exit_code, 0) << cmd << ": " << r.err;
        EXPECT_NE(r.out.find(std::string("usage: zkd ") + cmd), std::string::npos) << cmd;
    }
}

TEST_F(Cli, BadCommandLinesExitTwoWithAMessage) {
    struct bad {
        std::vector<std::string> args;
        std::string says;
    };
    const std::vector<bad> cases{
        {{}, "a command is needed"},
        {{"frobnicate"}, "unknown command 'frobnicate'"},
        {{"run", "--capacity", "many"}, "--capacity wants a whole number"},
        {{"run", "--role", "boss"}, "--role wants auto, worker or standby"},
        {{"run", "--session-timeout", "10 parsecs"}, "--session-timeout wants a duration"},
        {{"run", "--log-format", "xml"}, "--log-format wants text or json"},
        {{"run", "--bogus"}, "unknown option --bogus"},
        {{"run", "--capacity"}, "--capacity needs a value"},
        {{"run", "--password", "x"}, "a password needs --user"},
        {{"run", "--zk", "no port here!"}, "--zk wants host:port"},
        {{"submit", "echo", "--zk", "h:99999"}, "--zk wants host:port"},
        {{"submit"}, "submit wants TYPE"},
        {{"submit", "bad type!"}, "not a valid task type name"},
        {{"submit", "echo", "{not json"}, "ARGS-JSON is not JSON"},
        {{"submit", "echo", "--priority", "12"}, "--priority wants a whole number from 0 to 9"},
        {{"submit", "echo", "--timeout", "5s"}, "--timeout bounds --wait"},
        {{"wait"}, "wait wants exactly one task ID"},
        {{"status", "not-an-id"}, "is not a task id"},
        {{"cancel", "a", "b"}, "cancel wants exactly one task ID"},
        {{"status", "t5-0000000000000-0000000000000a", "--namespace", "a/b"},
         "--namespace wants a name"},
        {{"route"}, "route wants a KEY and at least one CELL"},
        {{"route", "key"}, "route wants at least one CELL after the KEY"},
        {{"route", "key", "a@x", "b@x", "a@x"}, "cell 'a@x' is given twice"},
        {{"route", "--cells", "a"}, "unknown option '--cells'"},
    };
    for (const auto& c : cases) {
        auto r = zkd(c.args, false);
        EXPECT_EQ(r.exit_code, 2) << testing::PrintToString(c.args) << ": " << r.err;
        EXPECT_NE(r.err.find(c.says), std::string::npos)
            << testing::PrintToString(c.args) << " said: " << r.err;
        EXPECT_NE(r.err.find("--help"), std::string::npos) << r.err;
    }
}

TEST_F(Cli, RoutePrintsTheCellAKeyGoesToWhateverTheOrderOfTheCells) {
    const std::vector<std::string> cells{
        "zk-a:2181@orders", "zk-b:2181@orders", "zk-c:2181@orders"};
    // A key for each cell, by the library's choice; the command agrees, in either order.
    std::map<std::string, std::string> key_of_cell;
    for (int i = 0; i < 1000 && key_of_cell.size() < cells.size(); ++i) {
        const std::string key = "customer-" + std::to_string(i);
        key_of_cell.emplace(cells[zkd::protocol::pick_cell(key, cells)], key);
    }
    ASSERT_EQ(key_of_cell.size(), cells.size());
    for (const auto& [cell, key] : key_of_cell) {
        std::vector<std::string> forward{"route", key};
        forward.insert(forward.end(), cells.begin(), cells.end());
        std::vector<std::string> backward{"route", key};
        backward.insert(backward.end(), cells.rbegin(), cells.rend());
        auto a = zkd(forward, false);
        auto b = zkd(backward, false);
        ASSERT_EQ(a.exit_code, 0) << a.err;
        EXPECT_EQ(a.out, cell + "\n") << key;
        EXPECT_EQ(b.out, a.out) << key;
    }
    // A key starting with '-' goes after "--".
    auto dashed = zkd({"route", "--", "-42", "a@x", "b@x"}, false);
    ASSERT_EQ(dashed.exit_code, 0) << dashed.err;
    const std::vector<std::string> two{"a@x", "b@x"};
    EXPECT_EQ(dashed.out, two[zkd::protocol::pick_cell("-42", two)] + "\n");
}

TEST_F(Cli, ConfigFileAndEnvironment) {
    start_node();
    ASSERT_EQ(wait_for_cluster().exit_code, 0);  // the namespace exists once a node runs
    // A config file supplies the cluster; the command line still wins over it.
    const auto conf = dir_ / "zkd.conf";
    std::ofstream(conf) << "# the test cluster\nzk = " << zk()
                        << "\nnamespace = \"cli\"\npriority = 7\n";
    auto r =
        run_command({ZKD_BINARY, "submit", "sum", "[20,22]", "--wait", "--config", conf.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(json::parse(r.out).at("value").at("sum").to_number<int>(), 42);
    EXPECT_EQ(
        std::string(json::parse(r.out).at("task").as_string()).substr(0, 3), "t2-"
    );  // priority 7
    // The environment wins over the file: this task lands in another namespace.
    r = run_command(
        {ZKD_BINARY, "submit", "echo", "1", "--create-namespace", "--config", conf.string()},
        {{"ZKD_NAMESPACE", "elsewhere"}}
    );
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string id = first_line(r.out);
    EXPECT_EQ(zkd({"status", id}).exit_code, 5);
    auto there = run_command(
        {ZKD_BINARY, "status", id, "--config", conf.string(), "--namespace", "elsewhere"}
    );
    EXPECT_EQ(there.exit_code, 0) << there.err;
    EXPECT_NE(there.out.find(" pending"), std::string::npos) << there.out;

    // Mistakes in the file or the environment are usage errors too.
    std::ofstream(dir_ / "bad.conf") << "zk = " << zk() << "\ncapasity = 3\n";
    r = run_command({ZKD_BINARY, "run", "--config", (dir_ / "bad.conf").string()});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("bad.conf:2: unknown key 'capasity'"), std::string::npos) << r.err;
    r = run_command({ZKD_BINARY, "run", "--config", (dir_ / "missing.conf").string()});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("cannot read the config file"), std::string::npos) << r.err;
    r = run_command({ZKD_BINARY, "run"}, {{"ZKD_CAPACITY", "lots"}});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("ZKD_CAPACITY wants a whole number"), std::string::npos) << r.err;
}

// Every bad value says where it came from: the flag, the variable, or the file and line.
TEST_F(Cli, ABadValueNamesItsSource) {
    const std::string id = "t5-0000000000000-0000000000000a";
    auto r = zkd({"tasks", "--limit", "abc"}, false);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("zkd: --limit wants a whole number"), std::string::npos) << r.err;
    r = zkd({"tasks"}, false, {{"ZKD_LIMIT", "abc"}});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(
        r.err.find("zkd: ZKD_LIMIT wants a whole number from 1 to 1000000, not 'abc'"),
        std::string::npos
    ) << r.err;
    r = zkd({"status", id}, false, {{"ZKD_CONNECT_TIMEOUT", "soon"}});
    EXPECT_NE(r.err.find("ZKD_CONNECT_TIMEOUT wants a duration"), std::string::npos) << r.err;
    r = zkd({"run"}, false, {{"ZKD_ROLE", "boss"}});
    EXPECT_NE(r.err.find("ZKD_ROLE wants auto, worker or standby"), std::string::npos) << r.err;

    const auto conf = dir_ / "values.conf";
    std::ofstream(conf) << "zk = 127.0.0.1:1\n# a comment\nconnect-timeout = 100ms\nlimit = lots\n";
    r = zkd({"tasks", "--config", conf.string()}, false);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find(conf.string() + ":4: limit wants a whole number"), std::string::npos)
        << r.err;
    std::ofstream(conf) << "zk = not a host\n";
    r = zkd({"status", id, "--config", conf.string()}, false);
    EXPECT_NE(r.err.find(conf.string() + ":1: zk wants host:port"), std::string::npos) << r.err;
    // The command line still wins, and names itself.
    r = zkd({"tasks", "--config", conf.string(), "--zk", "h:99999"}, false);
    EXPECT_NE(r.err.find("zkd: --zk wants host:port"), std::string::npos) << r.err;

    // partition-timeout is a key like any other option of zkd crack: this run gets as far as
    // ZooKeeper (exit 3), not refused as an unknown key (exit 2).
    std::ofstream(conf) << "zk = 127.0.0.1:1\nconnect-timeout = 100ms\npartition-timeout = 5s\n";
    r =
        zkd({"crack", "--status", "0cc175b9c0f1b6a831c399e269772661", "--config", conf.string()},
            false);
    EXPECT_EQ(r.exit_code, 3) << r.err;
}

// A ZKD_ variable that is no option is a typo: warned about once, with the nearest name.
TEST_F(Cli, AMistypedVariableIsWarnedAbout) {
    auto r =
        zkd({"status", "t5-0000000000000-0000000000000a", "--zk", "127.0.0.1:1",
             "--connect-timeout", "100ms"},
            false, {{"ZKD_NAMESPAC", "x"}, {"ZKD_FROBNICATE_EVERYTHING", "1"}});
    EXPECT_EQ(r.exit_code, 3) << r.err;
    EXPECT_NE(
        r.err.find("zkd: warning: ignoring ZKD_NAMESPAC: no zkd option has this variable (did "
                   "you mean ZKD_NAMESPACE?)"),
        std::string::npos
    ) << r.err;
    EXPECT_NE(
        r.err.find("ignoring ZKD_FROBNICATE_EVERYTHING: no zkd option has this variable\n"),
        std::string::npos
    ) << r.err;
    // Known ones, and the test harness's own, are not.
    r =
        zkd({"status", "t5-0000000000000-0000000000000a", "--zk", "127.0.0.1:1",
             "--connect-timeout", "100ms"},
            false, {{"ZKD_CAPACITY", "3"}, {"ZKD_ZK_CLIENT_LOG", "error"}, {"ZKD_TEST_ZK", "x"}});
    EXPECT_EQ(r.err.find("warning"), std::string::npos) << r.err;
}

TEST_F(Cli, VersionIsTheProjectVersion) {
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"--version"}, {"run", "--version"}, {"submit", "echo", "--version"}}) {
        auto r = zkd(args, false);
        EXPECT_EQ(r.exit_code, 0) << r.err;
        EXPECT_EQ(r.out, "zkd " ZKD_VERSION "\n") << testing::PrintToString(args);
    }
    auto help = zkd({"--help"}, false);
    EXPECT_NE(help.out.find("--version"), std::string::npos);
}

TEST_F(Cli, AnUnreachableZooKeeperFailsInBoundedTime) {
    // A port nothing listens on.
    auto r =
        zkd({"status", "t5-0000000000000-0000000000000a", "--zk", "127.0.0.1:1",
             "--connect-timeout", "1500ms"},
            false);
    EXPECT_EQ(r.exit_code, 3) << r.err;
    EXPECT_NE(r.err.find("cannot reach ZooKeeper at 127.0.0.1:1 within 1500 ms"), std::string::npos)
        << r.err;
    // Why: the C client only times out; a plain TCP connect tells.
    EXPECT_NE(r.err.find("connection refused by 127.0.0.1:1"), std::string::npos) << r.err;
    EXPECT_LT(r.took, 10s);
    // And through the environment, for submit.
    r = zkd({"submit", "echo"}, false, {{"ZKD_ZK", "127.0.0.1:1"}, {"ZKD_CONNECT_TIMEOUT", "1s"}});
    EXPECT_EQ(r.exit_code, 3) << r.err;
    EXPECT_NE(r.err.find("connection refused by 127.0.0.1:1"), std::string::npos) << r.err;
    EXPECT_LT(r.took, 10s);
    // A name that does not resolve (.invalid never does, RFC 6761).
    r = zkd({"cluster", "--zk", "zk.invalid:2181", "--connect-timeout", "1s"}, false);
    EXPECT_EQ(r.exit_code, 3) << r.err;
    EXPECT_NE(r.err.find("host not found: zk.invalid"), std::string::npos) << r.err;
}

TEST_F(Cli, ZkdRunSaysAtOnceThatZooKeeperRefusesConnections) {
    // A 10 s attempt: the refusal shows long before it would time out.
    const auto log = dir_ / "refused.log";
    zkd::test::zkd_process node(
        ZKD_BINARY, "127.0.0.1:1", "cli", "node", log, {"--session-timeout", "10s"}, {}, false
    );
    const auto start = std::chrono::steady_clock::now();
    std::string text;
    while (std::chrono::steady_clock::now() - start < 8s &&
           text.find("connection refused by 127.0.0.1:1") == std::string::npos) {
        std::this_thread::sleep_for(50ms);
        std::ifstream in(log);
        text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    const auto took = std::chrono::steady_clock::now() - start;
    EXPECT_NE(text.find("cannot reach ZooKeeper at 127.0.0.1:1"), std::string::npos) << text;
    EXPECT_NE(text.find("connection refused by 127.0.0.1:1"), std::string::npos) << text;
    EXPECT_LT(took, 5s) << text;
}

TEST_F(Cli, SubmitWaitStatusCancel) {
    start_node();
    ASSERT_EQ(wait_for_cluster().exit_code, 0);
    // submit --wait: the result as JSON, exit 0 on success and 1 otherwise.
    auto r = zkd({"submit", "sum", "[1,2,3]", "--wait"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(json::parse(r.out).at("value").at("sum").to_number<int>(), 6);
    r = zkd({"submit", "fail", R"({"message":"on purpose"})", "--wait"});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(json::parse(r.out).at("state").as_string(), "failed");
    // Args nested 40 deep are valid (the protocol allows 64 for the whole task): accepted,
    // and the value comes back whole (Boost.JSON's default of 32 refused or nulled them).
    const std::string deep = std::string(40, '[') + "1" + std::string(40, ']');
    r = zkd({"submit", "echo", deep, "--wait"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    json::parse_options deep_ok;
    deep_ok.max_depth = 64;
    EXPECT_EQ(json::serialize(json::parse(r.out, {}, deep_ok).at("value")), deep);
    // Each of those clients had its results consumed: none left its directory behind.
    EXPECT_EQ(client_dirs(), 0U);

    // submit prints the id; status shows the result without consuming it; wait consumes it.
    r = zkd({"submit", "echo", R"("hello")"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(client_dirs(), 1U);  // where its result goes: kept
    const std::string id = first_line(r.out);
    command_result st;
    for (int i = 0; i < 100; ++i) {
        st = zkd({"status", id, "--json"});
        if (st.exit_code == 0 && json::parse(st.out).as_object().contains("result")) {
            break;
        }
        std::this_thread::sleep_for(50ms);
    }
    ASSERT_EQ(st.exit_code, 0) << st.err;
    EXPECT_EQ(json::parse(st.out).at("state").as_string(), "succeeded");
    st = zkd({"status", id});  // the text form shows the result too (not consumed)
    ASSERT_EQ(st.exit_code, 0) << st.err;
    EXPECT_EQ(first_line(st.out), id + " succeeded");
    EXPECT_EQ(json::parse(st.out.substr(st.out.find('\n') + 1)).at("value").as_string(), "hello")
        << st.out;
    r = zkd({"wait", id, "--timeout", "30s"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(json::parse(r.out).at("value").as_string(), "hello");
    EXPECT_EQ(client_dirs(), 0U);  // the submitting client's, emptied by the wait: gone
    r = zkd({"status", id});
    EXPECT_EQ(r.exit_code, 5);
    EXPECT_NE(r.err.find("no task " + id), std::string::npos) << r.err;
    r = zkd({"wait", id});
    EXPECT_EQ(r.exit_code, 5);

    // A running task, cancelled; then its cancel again: already finished (the result waits).
    r = zkd({"submit", "sleep", R"({"ms":60000})"});
    const std::string slow = first_line(r.out);
    for (int i = 0; i < 100; ++i) {
        st = zkd({"status", slow});
        if (st.out.find(" running on ") != std::string::npos) {
            break;
        }
        std::this_thread::sleep_for(50ms);
    }
    EXPECT_NE(st.out.find(" running on node-"), std::string::npos) << st.out << st.err;
    r = zkd({"cancel", slow});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("cancel requested"), std::string::npos);
    for (int i = 0; i < 100; ++i) {
        st = zkd({"status", slow});
        if (st.out.find("cancelled") != std::string::npos) {
            break;
        }
        std::this_thread::sleep_for(50ms);
    }
    r = zkd({"cancel", slow});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("already finished (cancelled)"), std::string::npos) << r.err;
    r = zkd({"wait", slow});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(json::parse(r.out).at("state").as_string(), "cancelled");

    // Unknown ids, and a wait that times out.
    r = zkd({"cancel", "t5-0000000000000-0000000000000a"});
    EXPECT_EQ(r.exit_code, 5) << r.err;
    r = zkd({"submit", "sleep", R"({"ms":60000})", "--wait", "--timeout", "300ms"});
    EXPECT_EQ(r.exit_code, 4) << r.err;
    EXPECT_NE(r.err.find("no result within 300 ms"), std::string::npos) << r.err;
}

// A result node that holds no zkd result (written by a stranger, protocol §8): status says so,
// and wait returns it as an error and deletes it, so that it cannot stand for the task.
TEST_F(Cli, AGarbageResultIsReportedAndDeletedByWait) {
    start_node();
    ASSERT_EQ(wait_for_cluster().exit_code, 0);
    auto r = zkd({"submit", "echo", R"("real")"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string id = first_line(r.out);
    command_result st;
    for (int i = 0; i < 100; ++i) {
        st = zkd({"status", id});
        if (st.out.find(" succeeded") != std::string::npos) {
            break;
        }
        std::this_thread::sleep_for(50ms);
    }
    ASSERT_EQ(first_line(st.out), id + " succeeded") << st.err;
    const auto path = "/zkd/cli" + zkd::protocol::layout{}.result(id);
    bool gone = false;
    run([&]() -> boost::asio::awaitable<void> {
        zkd::zkco::client zk(ioc_.get_executor(), make_config());
        co_await zk.connect();
        EXPECT_TRUE(co_await zk.set(path, "\xff{forged"s));
        co_await zk.close();
    }());
    st = zkd({"status", id});
    EXPECT_EQ(st.exit_code, 1) << st.out;
    r = zkd({"wait", id, "--timeout", "10s"});
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.err.find("task " + id + ": "), std::string::npos) << r.err;
    run([&]() -> boost::asio::awaitable<void> {
        zkd::zkco::client zk(ioc_.get_executor(), make_config());
        co_await zk.connect();
        auto there = co_await zk.exists(path);
        EXPECT_TRUE(there);
        gone = there && !there->has_value();
        co_await zk.close();
    }());
    EXPECT_TRUE(gone) << "zkd wait left the garbage result at " << path;
    r = zkd({"wait", id});
    EXPECT_EQ(r.exit_code, 5) << r.err;
}

TEST_F(Cli, ANamespaceWithoutAClusterIsSaidSo) {
    auto r =
        zkd({"status", "t5-0000000000000-0000000000000a", "--namespace", "nothing-here"}, false,
            {{"ZKD_ZK", zk()}});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(
        r.err.find(
            "no zkd cluster in namespace 'nothing-here' at " + zk() +
            " (nothing at /zkd/nothing-here/meta; is --namespace right?): start one with "
            "'zkd run --namespace nothing-here'"
        ),
        std::string::npos
    ) << r.err;
}

// A mistyped --namespace must not make a new empty cluster that a task then waits in forever.
TEST_F(Cli, ClientCommandsNeverCreateANamespace) {
    start_node();
    ASSERT_EQ(wait_for_cluster().exit_code, 0);
    for (const auto& cmd : std::vector<std::vector<std::string>>{
             {"submit", "echo", "1"},
             {"submit", "echo", "1", "--wait"},
             {"tasks"},
             {"cluster"},
             {"wait", "t5-0000000000000-0000000000000a"},
             {"purge", "--results"},
             {"crack", "0cc175b9c0f1b6a831c399e269772661", "--charset", "lower", "--max-length",
              "1"}}) {
        auto args = cmd;
        args.insert(args.end(), {"--zk", zk(), "--namespace", "cli-typo"});
        auto r = zkd(args, false);
        EXPECT_EQ(r.exit_code, 1) << testing::PrintToString(cmd) << r.err;
        EXPECT_NE(r.err.find("no zkd cluster in namespace 'cli-typo'"), std::string::npos) << r.err;
        if (cmd[0] == "submit") {
            EXPECT_NE(r.err.find("or pass --create-namespace"), std::string::npos) << r.err;
        }
    }
    run([&]() -> boost::asio::awaitable<void> {
        zkd::zkco::client zk(ioc_.get_executor(), make_config());
        co_await zk.connect();
        auto there = co_await zk.exists("/zkd/cli-typo"s);
        EXPECT_TRUE(there && !*there) << "the namespace was created";
        co_await zk.close();
    }());
    // Asked to, submit creates it, and the task waits there for a cluster.
    auto r =
        zkd({"submit", "echo", "1", "--create-namespace", "--zk", zk(), "--namespace", "cli-typo"},
            false);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto st = zkd({"status", first_line(r.out), "--zk", zk(), "--namespace", "cli-typo"}, false);
    EXPECT_EQ(st.exit_code, 0) << st.err;
    EXPECT_NE(st.out.find(" pending"), std::string::npos) << st.out;
}

// ARGS-JSON from a file (past the 128 KiB a single argv string may hold) or stdin.
TEST_F(Cli, ArgsFromAFileOrStdin) {
    start_node();
    ASSERT_EQ(wait_for_cluster().exit_code, 0);
    const std::string big(200'000, 'x');
    std::ofstream(dir_ / "args.json") << json::serialize(json::value(big));
    auto r = zkd({"submit", "echo", "@" + (dir_ / "args.json").string(), "--wait"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(json::parse(r.out).at("value").as_string(), big);

    std::ofstream(dir_ / "stdin.json") << R"([4, 5, 6])";
    r = run_command(
        {ZKD_BINARY, "submit", "sum", "-", "--wait", "--zk", zk(), "--namespace", "cli"}, {}, 60s,
        dir_ / "stdin.json"
    );
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(json::parse(r.out).at("value").at("sum").to_number<int>(), 15);

    // Bad files are usage errors, before anything is sent.
    r = zkd({"submit", "echo", "@" + (dir_ / "missing.json").string()});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("cannot read ARGS-JSON from '"), std::string::npos) << r.err;
    std::ofstream(dir_ / "huge.json") << json::serialize(json::value(std::string(1'100'000, 'y')));
    r = zkd({"submit", "echo", "@" + (dir_ / "huge.json").string()});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("is over 1 MiB"), std::string::npos) << r.err;
    std::ofstream(dir_ / "bad.json") << "{nope";
    r = zkd({"submit", "echo", "@" + (dir_ / "bad.json").string()});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("ARGS-JSON is not JSON"), std::string::npos) << r.err;
}

// Ctrl-C on `submit --wait` keeps the task and says how to get its result.
TEST_F(Cli, AnInterruptedWaitSaysHowToWait) {
    start_node();
    ASSERT_EQ(wait_for_cluster().exit_code, 0);
    zkd::test::background_command sub(
        {ZKD_BINARY, "submit", "sleep", R"({"ms":60000})", "--wait", "--zk", zk(), "--namespace",
         "cli"},
        dir_ / "submit.out", dir_ / "submit.err"
    );
    command_result t;
    for (int i = 0; i < 200; ++i) {
        t = zkd({"tasks", "--json"});
        if (t.exit_code == 0 && json::parse(t.out).at("assigned").as_array().size() == 1) {
            break;
        }
        std::this_thread::sleep_for(50ms);
    }
    ASSERT_EQ(json::parse(t.out).at("assigned").as_array().size(), 1U) << t.out;
    const std::string id(json::parse(t.out).at("assigned").at(0).at("id").as_string());
    sub.signal(SIGINT);
    EXPECT_EQ(sub.wait_exit(20s), 130) << sub.err();
    EXPECT_NE(
        sub.err().find(
            "interrupted: task " + id + " goes on; wait for its result with 'zkd wait " + id + "'"
        ),
        std::string::npos
    ) << sub.err();
    auto st = zkd({"status", id});
    EXPECT_EQ(st.exit_code, 0) << st.err;
    // It goes on: assigned, or running once its running mark is written (after 50 ms).
    EXPECT_TRUE(
        st.out.find(" running on ") != std::string::npos ||
        st.out.find(" assigned on ") != std::string::npos
    ) << st.out;
}

// A type no worker serves is refused at once when there are workers to ask.
TEST_F(Cli, ATypeNoWorkerServesIsRefused) {
    start_node();
    ASSERT_EQ(wait_for_cluster().exit_code, 0);
    auto r = zkd({"submit", "no-such-type", "1"});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(
        r.err.find("no worker serves task type 'no-such-type' (the 1 workers serve: echo, fail, "),
        std::string::npos
    ) << r.err;
    EXPECT_NE(r.err.find("--allow-unserved"), std::string::npos) << r.err;
    auto t = zkd({"tasks", "--json"});
    EXPECT_EQ(json::parse(t.out).at("pending_total").to_number<int>(), 0) << t.out;
    r = zkd({"submit", "no-such-type", "1", "--allow-unserved"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(first_line(r.out).substr(0, 3), "t4-");
}

// purge deletes unconsumed results; drop-namespace deletes everything, not under live members.
TEST_F(Cli, PurgeAndDropNamespace) {
    start_node();
    ASSERT_EQ(wait_for_cluster().exit_code, 0);
    std::vector<std::string> ids;
    for (int i = 0; i < 3; ++i) {
        auto r = zkd({"submit", "echo", std::to_string(i)});
        ASSERT_EQ(r.exit_code, 0) << r.err;
        ids.push_back(first_line(r.out));
    }
    command_result c;
    for (int i = 0; i < 200; ++i) {
        c = zkd({"cluster", "--json"});
        if (c.exit_code == 0 && json::parse(c.out).at("results").to_number<int>() == 3) {
            break;
        }
        std::this_thread::sleep_for(50ms);
    }
    ASSERT_EQ(json::parse(c.out).at("results").to_number<int>(), 3) << c.out;
    auto r = zkd({"purge"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("purge wants --results"), std::string::npos) << r.err;
    r = zkd({"purge", "--results", "--older-than", "1h"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("purged 0 result(s) from /zkd/cli (kept 3 newer than"), std::string::npos)
        << r.out;
    r = zkd({"purge", "--results"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("purged 3 result(s)"), std::string::npos) << r.out;
    // Each submit was a client of its own: their emptied directories went too.
    EXPECT_NE(r.out.find("and 3 empty client directories"), std::string::npos) << r.out;
    EXPECT_EQ(client_dirs(), 0U);
    EXPECT_EQ(zkd({"wait", ids[0]}).exit_code, 5);

    r = zkd({"drop-namespace"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("pass --yes"), std::string::npos) << r.err;
    r = zkd({"drop-namespace", "--yes"});
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(
        r.err.find(
            "refusing to drop " + chroot_ + "/zkd/cli: 1 worker, 1 candidate, a master alive"
        ),
        std::string::npos
    ) << r.err;
    EXPECT_EQ(zkd({"cluster"}).exit_code, 0);  // untouched
    r = zkd({"drop-namespace", "--yes", "--force"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("dropped " + chroot_ + "/zkd/cli ("), std::string::npos) << r.out;
    node_.reset();
    r = zkd({"drop-namespace", "--yes"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("no namespace"), std::string::npos) << r.out;
}

// Strings read from ZooKeeper reach the terminal escaped: a worker's host, garbage.
TEST_F(Cli, HostileStringsAreEscaped) {
    start_node();
    ASSERT_EQ(wait_for_cluster().exit_code, 0);
    run([&]() -> boost::asio::awaitable<void> {
        zkd::zkco::client zk(ioc_.get_executor(), make_config());
        co_await zk.connect();
        zkd::protocol::member_info fake;
        fake.id = "evil-1-0000000000001";
        fake.host =
            "h\x1b[2J\x1b]0;owned\x07\xc2\x9b"
            "31m";
        fake.pid = 1;
        fake.capacity = 1;
        fake.types = {"echo"};
        co_await zk.create(
            "/zkd/cli/workers/" + fake.id, zkd::protocol::encode(fake),
            {zkd::zkco::create_mode::ephemeral}
        );
        // Garbage whose reason quotes the data.
        co_await zk.create(
            "/zkd/cli/workers/evil-2-0000000000002"s, "\x1b[31m{\"v\":"s,
            {zkd::zkco::create_mode::ephemeral}
        );
        auto c = zkd({"cluster"});
        EXPECT_EQ(c.exit_code, 0) << c.err;
        EXPECT_EQ(c.out.find('\x1b'), std::string::npos) << c.out;
        EXPECT_EQ(c.out.find('\x07'), std::string::npos) << c.out;
        EXPECT_NE(c.out.find(R"(h\e[2J\e]0;owned\x07\xc2\x9b31m)"), std::string::npos) << c.out;
        EXPECT_NE(c.out.find("(garbage: not JSON"), std::string::npos) << c.out;
        // JSON output stays JSON (its escapes are JSON's).
        c = zkd({"cluster", "--json"});
        EXPECT_EQ(c.out.find('\x1b'), std::string::npos) << c.out;
        co_await zk.close();
    }());
    // What was typed, quoted back in a usage error: escaped too.
    auto r = zkd({"submit", "e\x1b[2Jvil", "1"});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(R"('e\e[2Jvil' is not a valid task type name)"), std::string::npos)
        << r.err;
}

// A session timeout the server clamps is said so in zkd run's log (the test server's tick of
// 200 ms allows 400 ms to 4 s).
TEST_F(Cli, RunSaysWhatSessionTimeoutItGot) {
    start_node({"--session-timeout", "10s"});
    ASSERT_EQ(wait_for_cluster().exit_code, 0);
    std::ifstream in(dir_ / "node.log");
    const std::string log((std::istreambuf_iterator<char>(in)), {});
    EXPECT_NE(
        log.find("connected (timeout 4000 ms: the server's limit; 10000 ms asked)"),
        std::string::npos
    ) << log;
}

// Without --session-timeout zkd run asks for the default, 6 s (a SIGKILLed master is
// replaced within about 7 s): its log says what it asked for once it is connected.
TEST_F(Cli, RunAsksForASixSecondSessionByDefault) {
    const auto log_path = dir_ / "bare.log";
    zkd::test::zkd_process bare(ZKD_BINARY, zk(), "cli", "bare", log_path, {}, {}, false);
    const std::string wanted = "connected (timeout 4000 ms: the server's limit; 6000 ms asked)";
    std::string log;
    for (int i = 0; i < 600 && log.find(wanted) == std::string::npos; ++i) {
        std::this_thread::sleep_for(50ms);
        std::ifstream in(log_path);
        log.assign(std::istreambuf_iterator<char>(in), {});
    }
    EXPECT_NE(log.find(wanted), std::string::npos) << log;
}

// zkd run waits for ZooKeeper as long as it takes unless --connect-timeout says otherwise;
// meanwhile the C client's retry chatter stays out of the log at the default level.
TEST_F(Cli, RunHonoursConnectTimeoutQuietly) {
    auto r = zkd(
        {"run", "--zk", "127.0.0.1:1", "--connect-timeout", "2500ms", "--session-timeout", "1s"},
        false, {}, 30s
    );
    EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
    const auto log = r.out + r.err;
    EXPECT_NE(
        log.find(
            "no session with ZooKeeper at 127.0.0.1:1 within 2500 ms (--connect-timeout): giving up"
        ),
        std::string::npos
    ) << log;
    EXPECT_NE(log.find("cannot reach ZooKeeper at 127.0.0.1:1"), std::string::npos)
        << log;  // the node's own
    EXPECT_EQ(log.find("zk-client:"), std::string::npos) << log;
    // Loopback only: no warning that the cluster is open.
    EXPECT_EQ(log.find("no --user"), std::string::npos) << log;
    // Asked for, the C client's messages are there.
    r =
        zkd({"run", "--zk", "127.0.0.1:1", "--connect-timeout", "1s"}, false,
            {{"ZKD_ZK_CLIENT_LOG", "error"}}, 30s);
    EXPECT_EQ(r.exit_code, 3);
    EXPECT_NE((r.out + r.err).find("zk-client:"), std::string::npos) << r.out << r.err;
}

// Exec types' programs run under the supervisor program (zkd-supervise): without one, zkd run
// refuses to start, naming what it looked for, rather than failing every task later.
TEST_F(Cli, AnExecTypeWithoutItsSupervisorProgramIsRefusedAtStart) {
    for (const std::string bad : {"/nonexistent/zkd-supervise", "/"}) {
        const auto r =
            zkd({"run", "--zk", "127.0.0.1:1", "--connect-timeout", "1s", "--exec", "x=/bin/cat"},
                false, {{"ZKD_SUPERVISE", bad}}, 30s);
        EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
        EXPECT_NE(
            r.err.find(
                "exec type x: the supervisor program " + bad +
                " (ZKD_SUPERVISE) is not an executable file"
            ),
            std::string::npos
        ) << r.err;
        EXPECT_EQ(r.err.find("ignoring ZKD_SUPERVISE"), std::string::npos) << r.err;
    }
}

// A supervisor of another build (a package upgraded under a running zkd) refuses what this zkd
// asks of it: the task fails saying so, and the worker carries on.
TEST_F(Cli, ASupervisorOfAnotherBuildFailsTheTaskSayingSo) {
    const auto wrapper = dir_ / "other-build-supervise";
    {
        std::ofstream f(wrapper);
        f << "#!/bin/sh\nshift\nexec "
          << (std::filesystem::path(ZKD_BINARY).parent_path() / "zkd-supervise").string()
          << " --abi=another-build \"$@\"\n";
    }
    std::filesystem::permissions(wrapper, std::filesystem::perms::owner_all);
    ::setenv("ZKD_SUPERVISE", wrapper.c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
    start_node({"--exec", "copy=/bin/cat"});
    ::unsetenv("ZKD_SUPERVISE");  // NOLINT(concurrency-mt-unsafe)
    ASSERT_EQ(wait_for_cluster().exit_code, 0);
    auto r = zkd({"submit", "copy", R"({"x":1})", "--wait"});
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_NE(r.out.find("the supervisor program refused its arguments"), std::string::npos)
        << r.out;
    r = zkd({"submit", "sum", "[1,2]", "--wait"});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

// Without credentials, a ZooKeeper beyond loopback lets every one of its clients use the
// cluster: zkd run says so at start (192.0.2.1 is TEST-NET-1: nothing answers there).
TEST_F(Cli, RunWarnsThatAClusterWithoutUserIsOpenBeyondLoopback) {
    auto r =
        zkd({"run", "--zk", "192.0.2.1:2181", "--namespace", "open", "--connect-timeout", "1s"},
            false, {}, 30s);
    EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
    auto log = r.out + r.err;
    EXPECT_NE(
        log.find("no --user: the cluster in /zkd/open is open to every client of the ZooKeeper "
                 "ensemble (192.0.2.1 is not loopback)"),
        std::string::npos
    ) << log;
    EXPECT_NE(log.find("--user NAME with --password-file FILE"), std::string::npos) << log;
    // With credentials: nothing to warn of.
    r =
        zkd({"run", "--zk", "192.0.2.1:2181", "--user", "u", "--connect-timeout", "1s"}, false,
            {{"ZKD_PASSWORD", "secret"}}, 30s);
    EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
    log = r.out + r.err;
    EXPECT_EQ(log.find("no --user"), std::string::npos) << log;
}

TEST_F(Cli, TasksAndCluster) {
    start_node();
    command_result c = wait_for_cluster();
    ASSERT_EQ(c.exit_code, 0) << c.err;
    const auto view = json::parse(c.out);
    EXPECT_EQ(view.at("workers").at(0).at("capacity").to_number<int>(), 2);
    EXPECT_EQ(view.at("workers").at(0).at("threads").to_number<int>(), 2);  // --threads 2
    EXPECT_EQ(std::string(view.at("master").at("host").as_string()), "node");
    c = zkd({"cluster"});
    ASSERT_EQ(c.exit_code, 0) << c.err;
    EXPECT_NE(c.out.find("master    node-"), std::string::npos) << c.out;
    EXPECT_NE(c.out.find("workers   1, 0 of 2 slots in use"), std::string::npos) << c.out;
    EXPECT_NE(c.out.find("RUNNING THREADS  TYPES"), std::string::npos) << c.out;
    EXPECT_NE(c.out.find("0/2       0       2  "), std::string::npos) << c.out;

    for (int i = 0; i < 3; ++i) {
        ASSERT_EQ(zkd({"submit", "sleep", R"({"ms":60000})"}).exit_code, 0);
    }
    command_result t;
    for (int i = 0; i < 100; ++i) {
        t = zkd({"tasks", "--json"});
        if (t.exit_code == 0 && json::parse(t.out).at("assigned_total").to_number<int>() == 2) {
            break;
        }
        std::this_thread::sleep_for(50ms);
    }
    ASSERT_EQ(t.exit_code, 0) << t.err;
    const auto list = json::parse(t.out);
    EXPECT_EQ(list.at("assigned_total").to_number<int>(), 2);
    EXPECT_EQ(list.at("pending_total").to_number<int>(), 1);
    EXPECT_EQ(std::string(list.at("pending").at(0).at("type").as_string()), "sleep");
    t = zkd({"tasks"});
    EXPECT_EQ(t.exit_code, 0);
    EXPECT_NE(t.out.find("2 held by workers, 1 pending"), std::string::npos) << t.out;
    EXPECT_NE(t.out.find(" pending   sleep"), std::string::npos) << t.out;
    t = zkd({"tasks", "--limit", "1"});
    EXPECT_NE(t.out.find("lists cut at 1 each"), std::string::npos) << t.out;
    c = zkd({"cluster"});
    EXPECT_NE(c.out.find("1 pending"), std::string::npos) << c.out;
    EXPECT_NE(c.out.find("2 of 2 slots in use"), std::string::npos) << c.out;
}

TEST_F(Cli, CrackFindsReportsAndSharesJobs) {
    start_node();
    ASSERT_EQ(wait_for_cluster().exit_code, 0);
    const std::string hash = "0cc175b9c0f1b6a831c399e269772661";  // md5("a")
    auto status = zkd({"crack", "--status", hash});
    EXPECT_EQ(status.exit_code, 5);
    EXPECT_NE(status.out.find("no job for " + hash), std::string::npos) << status.out;

    auto r =
        zkd({"crack", "0cc175b9c0f1b6a831c399e269772661", "--charset", "lower", "--max-length", "2"}
        );
    ASSERT_EQ(r.exit_code, 0) << r.err;  // md5("a")
    EXPECT_EQ(r.out, "a\n");
    EXPECT_NE(r.err.find("started job crack-0cc175b9c0f1b6a831c399e269772661-"), std::string::npos)
        << r.err;
    // The same search again joins the finished job: no new work.
    r = zkd({"crack", "0cc175b9c0f1b6a831c399e269772661", "--charset", "lower", "--max-length", "2"}
    );
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("joined job"), std::string::npos) << r.err;
    status = zkd({"crack", "--status", "0CC175B9C0F1B6A831C399E269772661"});
    EXPECT_EQ(status.exit_code, 0) << status.err;
    EXPECT_NE(status.out.find("found"), std::string::npos) << status.out;
    EXPECT_NE(status.out.find("preimage: a"), std::string::npos) << status.out;

    // Not found: md5("zzzz") is outside lengths 1-3 of "xyz".
    r = zkd(
        {"crack", "02c425157ecd32f259548b33402ff6d3", "--charset", "xyz", "--max-length", "3",
         "--partitions", "4"}
    );
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("not found: all 39 candidates tried"), std::string::npos) << r.err;

    // A word list.
    std::ofstream(dir_ / "words.txt") << "alpha\nbeta\ngamma\n";
    r = zkd(
        {"crack", "987bcab01b929eb2c07877b224215c92", "--wordlist", (dir_ / "words.txt").string()}
    );
    EXPECT_EQ(r.exit_code, 0) << r.err;  // md5("beta")
    EXPECT_EQ(r.out, "beta\n");

    // Bad input: usage errors before anything is sent.
    r = zkd({"crack", "xyz", "--charset", "lower", "--max-length", "2"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("32 hex digits"), std::string::npos) << r.err;
    r = zkd({"crack", "0cc175b9c0f1b6a831c399e269772661"});
    EXPECT_EQ(r.exit_code, 2);
    r = zkd(
        {"crack", "0cc175b9c0f1b6a831c399e269772661", "--charset", "lower", "--max-length", "40"}
    );
    EXPECT_EQ(r.exit_code, 2);
    r = zkd({"crack", "--forget", "--status", hash});
    EXPECT_EQ(r.exit_code, 2);
    r = zkd({"crack", "--forget", hash, "--charset", "lower"});
    EXPECT_EQ(r.exit_code, 2);

    // Forgetting: the finished job goes, then there is nothing to forget or report.
    r = zkd({"crack", "--forget", hash});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("forgot crack-" + hash + "-"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("(found)"), std::string::npos) << r.out;
    r = zkd({"crack", "--forget", hash});
    EXPECT_EQ(r.exit_code, 5) << r.out;
    status = zkd({"crack", "--status", hash});
    EXPECT_EQ(status.exit_code, 5) << status.out;
}

// A namespace an older zkd (protocol format 2) made is refused by run and by the clients,
// saying so: the two formats cannot share a namespace (docs/protocol.md §1 "Formats").
TEST_F(Cli, ANamespaceOfAnOlderProtocolFormatIsRefusedSayingWhatToDo) {
    using namespace zkd::zkco;
    run([&]() -> boost::asio::awaitable<void> {
        client anon(ioc_.get_executor(), make_config());
        co_await anon.connect();
        EXPECT_TRUE(co_await anon.create("/zkd"s));
        EXPECT_TRUE(co_await anon.create("/zkd/old"s));
        EXPECT_TRUE(co_await anon.create(
            "/zkd/old/meta"s, R"({"v":2,"pending_shards":16,"result_shards":16})"s
        ));
        co_await anon.close();
    }());
    auto r = zkd({"run", "--namespace", "old", "--zk", zk()}, false, {}, 30s);
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_NE((r.out + r.err).find("zkd protocol format 2"), std::string::npos) << r.out << r.err;
    r =
        zkd({"status", "t5-0000000000000-0000000000000a", "--namespace", "old", "--zk", zk()},
            false);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("protocol format 3"), std::string::npos) << r.err;  // this zkd's
    EXPECT_NE(r.err.find("zkd drop-namespace --yes"), std::string::npos) << r.err;
    r = zkd({"drop-namespace", "--yes", "--namespace", "old", "--zk", zk()}, false);
    EXPECT_EQ(r.exit_code, 0) << r.err;
}

// A namespace set up by someone without the cluster's credentials (open ACL) is refused by a
// cluster started with them, naming the node and its ACL, instead of being adopted.
TEST_F(Cli, ASquattedNamespaceIsRefused) {
    using namespace zkd::zkco;
    const std::map<std::string, std::string> alice{
        {"ZKD_USER", "alice"}, {"ZKD_PASSWORD", "secret"}};
    run([&]() -> boost::asio::awaitable<void> {
        client anon(ioc_.get_executor(), make_config());
        co_await anon.connect();
        // The squatter's namespace: the node itself and a directory, open to anyone.
        EXPECT_TRUE(co_await anon.create("/zkd"s));
        EXPECT_TRUE(co_await anon.create("/zkd/sq"s));
        EXPECT_TRUE(co_await anon.create("/zkd/sq/pending"s));
        co_await anon.close();
        // A subtler one: the namespace node is alice's, its /meta open to anyone.
        auto cfg = make_config();
        cfg.auth = credentials{"alice", "secret"};
        client alice_zk(ioc_.get_executor(), cfg);
        co_await alice_zk.connect();
        EXPECT_TRUE(co_await alice_zk.create("/zkd/sq2"s));
        EXPECT_TRUE(co_await alice_zk.create(
            "/zkd/sq2/meta"s, zkd::protocol::encode(zkd::protocol::meta_info{}),
            {create_mode::persistent, {}, open_acl()}
        ));
        co_await alice_zk.close();
    }());

    // zkd run with credentials stops at once, saying which node, what ACL and what to do.
    auto r = zkd({"run", "--namespace", "sq", "--zk", zk()}, false, alice, 30s);
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    const auto log = r.out + r.err;
    EXPECT_NE(
        log.find(
            "namespace node " + chroot_ +
            "/zkd/sq is not protected by this cluster's "
            "credentials (user 'alice'): its ACL is world:anyone:cdrwa"
        ),
        std::string::npos
    ) << log;
    EXPECT_NE(log.find("zkd drop-namespace --yes"), std::string::npos) << log;

    // A client with credentials refuses it too (its tasks would be the squatter's to read).
    r =
        zkd({"status", "t5-0000000000000-0000000000000a", "--namespace", "sq2", "--zk", zk()},
            false, alice);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(
        r.err.find(
            "refusing the namespace /zkd/sq2: namespace node " + chroot_ +
            "/zkd/sq2/meta is not protected by this cluster's credentials (user 'alice'): "
            "its ACL is world:anyone:cdrwa"
        ),
        std::string::npos
    ) << r.err;
    // And so does the layout a cluster member sets up.
    run([&]() -> boost::asio::awaitable<void> {
        auto cfg = make_config();
        cfg.connect_string += "/zkd/sq2";
        cfg.auth = credentials{"alice", "secret"};
        client zk(ioc_.get_executor(), cfg);
        co_await zk.connect();
        auto l = co_await zkd::roles::ensure_layout(zk, zkd::protocol::meta_info{});
        EXPECT_EQ(l.error(), errc::invalid_acl);
        co_await zk.close();
    }());
    // And zkd run on it stops (exit 1) rather than retrying for ever.
    r = zkd({"run", "--namespace", "sq2", "--zk", zk()}, false, alice, 30s);
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;

    // A namespace made by a cluster with the credentials passes: run, submit, wait.
    start_node({"--user", "alice", "--password", "secret"});
    command_result c;
    for (int i = 0; i < 200; ++i) {
        c = zkd({"cluster", "--json", "--user", "alice", "--password", "secret"});
        if (c.exit_code == 0 && json::parse(c.out).at("workers").as_array().size() == 1) {
            break;
        }
        std::this_thread::sleep_for(50ms);
    }
    ASSERT_EQ(c.exit_code, 0) << c.err;
    r = zkd({"submit", "echo", "7", "--wait", "--user", "alice", "--password", "secret"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    // Without credentials, or with a wrong password: each said as it is.
    r = zkd({"cluster"});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("it needs credentials (--user)"), std::string::npos) << r.err;
    r = zkd({"cluster", "--user", "alice", "--password", "guessed"});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("as user 'alice': wrong password"), std::string::npos) << r.err;

    // What alice made, only alice can delete.
    node_.reset();
    for (const auto* ns : {"cli", "sq2"}) {
        r =
            zkd({"drop-namespace", "--yes", "--force", "--zk", zk(), "--namespace", ns}, false,
                alice);
        EXPECT_EQ(r.exit_code, 0) << ns << ": " << r.err;
    }
}

}  // namespace

}  // namespace ZKD_UNITY_ID
