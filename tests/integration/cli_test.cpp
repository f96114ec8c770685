// SPDX-License-Identifier: MIT
// The zkd command line through the real binary, against a real ZooKeeper and a real
// `zkd run`: every command's help and happy path, bad flags, config file and environment,
// an unreachable ZooKeeper, unknown task ids.
#include "support/processes.hpp"
#include "support/zk_fixture.hpp"

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include <fstream>
#include <thread>

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
            "cli", ::testing::UnitTest::GetInstance()->current_test_info()->name());
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
        node_ = std::make_unique<zkd::test::zkd_process>(ZKD_BINARY, zk(), "cli", "node",
                                                         dir_ / "node.log", std::move(extra));
    }

    /// `zkd ARGS... --zk <ours> --namespace cli`.
    command_result zkd(std::vector<std::string> args, bool with_cluster = true,
                       const std::map<std::string, std::string>& env = {}) {
        args.insert(args.begin(), ZKD_BINARY);
        if (with_cluster) {
            args.insert(args.end(), {"--zk", zk(), "--namespace", "cli"});
        }
        return run_command(args, env);
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
    for (const auto* cmd : {"run", "submit", "wait", "status", "cancel", "tasks", "cluster", "crack"}) {
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
        {{"wait"}, "wait wants exactly one task ID"},
        {{"status", "not-an-id"}, "is not a task id"},
        {{"cancel", "a", "b"}, "cancel wants exactly one task ID"},
        {{"status", "t5-0000000000000-0000000000000a", "--namespace", "a/b"}, "--namespace wants a name"},
    };
    for (const auto& c : cases) {
        auto r = zkd(c.args, false);
        EXPECT_EQ(r.exit_code, 2) << testing::PrintToString(c.args) << ": " << r.err;
        EXPECT_NE(r.err.find(c.says), std::string::npos)
            << testing::PrintToString(c.args) << " said: " << r.err;
        EXPECT_NE(r.err.find("--help"), std::string::npos) << r.err;
    }
}

TEST_F(Cli, ConfigFileAndEnvironment) {
    start_node();
    // A config file supplies the cluster; the command line still wins over it.
    const auto conf = dir_ / "zkd.conf";
    std::ofstream(conf) << "# the test cluster\nzk = " << zk() << "\nnamespace = \"cli\"\npriority = 7\n";
    auto r = run_command({ZKD_BINARY, "submit", "sum", "[20,22]", "--wait", "--config", conf.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(json::parse(r.out).at("value").at("sum").to_number<int>(), 42);
    EXPECT_EQ(std::string(json::parse(r.out).at("task").as_string()).substr(0, 3), "t2-");  // priority 7
    // The environment wins over the file: this task lands in another namespace.
    r = run_command({ZKD_BINARY, "submit", "echo", "1", "--config", conf.string()},
                    {{"ZKD_NAMESPACE", "elsewhere"}});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string id = first_line(r.out);
    EXPECT_EQ(zkd({"status", id}).exit_code, 5);
    auto there = run_command({ZKD_BINARY, "status", id, "--config", conf.string(), "--namespace", "elsewhere"});
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
    EXPECT_NE(r.err.find("--capacity wants a whole number"), std::string::npos) << r.err;
}

TEST_F(Cli, AnUnreachableZooKeeperFailsInBoundedTime) {
    // A port nothing listens on.
    auto r = zkd({"status", "t5-0000000000000-0000000000000a", "--zk", "127.0.0.1:1",
                  "--connect-timeout", "1500ms"},
                 false);
    EXPECT_EQ(r.exit_code, 3) << r.err;
    EXPECT_NE(r.err.find("cannot reach ZooKeeper at 127.0.0.1:1 within 1500 ms"), std::string::npos) << r.err;
    EXPECT_LT(r.took, 10s);
    // And through the environment, for submit.
    r = zkd({"submit", "echo"}, false, {{"ZKD_ZK", "127.0.0.1:1"}, {"ZKD_CONNECT_TIMEOUT", "1s"}});
    EXPECT_EQ(r.exit_code, 3) << r.err;
    EXPECT_LT(r.took, 10s);
}

TEST_F(Cli, SubmitWaitStatusCancel) {
    start_node();
    // submit --wait: the result as JSON, exit 0 on success and 1 otherwise.
    auto r = zkd({"submit", "sum", "[1,2,3]", "--wait"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(json::parse(r.out).at("value").at("sum").to_number<int>(), 6);
    r = zkd({"submit", "fail", R"({"message":"on purpose"})", "--wait"});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(json::parse(r.out).at("state").as_string(), "failed");

    // submit prints the id; status shows the result without consuming it; wait consumes it.
    r = zkd({"submit", "echo", R"("hello")"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
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
    r = zkd({"wait", id, "--timeout", "30s"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(json::parse(r.out).at("value").as_string(), "hello");
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

TEST_F(Cli, ANamespaceWithoutAClusterIsSaidSo) {
    auto r = zkd({"status", "t5-0000000000000-0000000000000a", "--namespace", "nothing-here"}, false,
                 {{"ZKD_ZK", zk()}});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("no zkd cluster in /zkd/nothing-here"), std::string::npos) << r.err;
}

TEST_F(Cli, TasksAndCluster) {
    start_node();
    command_result c = wait_for_cluster();
    ASSERT_EQ(c.exit_code, 0) << c.err;
    const auto view = json::parse(c.out);
    EXPECT_EQ(view.at("workers").at(0).at("capacity").to_number<int>(), 2);
    EXPECT_EQ(std::string(view.at("master").at("host").as_string()), "node");
    c = zkd({"cluster"});
    ASSERT_EQ(c.exit_code, 0) << c.err;
    EXPECT_NE(c.out.find("master    node-"), std::string::npos) << c.out;
    EXPECT_NE(c.out.find("workers   1, 0 of 2 slots in use"), std::string::npos) << c.out;

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

    auto r = zkd({"crack", "0cc175b9c0f1b6a831c399e269772661", "--charset", "lower", "--max-length", "2"});
    ASSERT_EQ(r.exit_code, 0) << r.err;  // md5("a")
    EXPECT_EQ(r.out, "a\n");
    EXPECT_NE(r.err.find("started job crack-0cc175b9c0f1b6a831c399e269772661-"), std::string::npos) << r.err;
    // The same search again joins the finished job: no new work.
    r = zkd({"crack", "0cc175b9c0f1b6a831c399e269772661", "--charset", "lower", "--max-length", "2"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("joined job"), std::string::npos) << r.err;
    status = zkd({"crack", "--status", "0CC175B9C0F1B6A831C399E269772661"});
    EXPECT_EQ(status.exit_code, 0) << status.err;
    EXPECT_NE(status.out.find("found"), std::string::npos) << status.out;
    EXPECT_NE(status.out.find("preimage: a"), std::string::npos) << status.out;

    // Not found: md5("zzzz") is outside lengths 1-3 of "xyz".
    r = zkd({"crack", "02c425157ecd32f259548b33402ff6d3", "--charset", "xyz", "--max-length", "3",
             "--partitions", "4"});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("not found: all 39 candidates tried"), std::string::npos) << r.err;

    // A word list.
    std::ofstream(dir_ / "words.txt") << "alpha\nbeta\ngamma\n";
    r = zkd({"crack", "987bcab01b929eb2c07877b224215c92", "--wordlist", (dir_ / "words.txt").string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;  // md5("beta")
    EXPECT_EQ(r.out, "beta\n");

    // Bad input: usage errors before anything is sent.
    r = zkd({"crack", "xyz", "--charset", "lower", "--max-length", "2"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("32 hex digits"), std::string::npos) << r.err;
    r = zkd({"crack", "0cc175b9c0f1b6a831c399e269772661"});
    EXPECT_EQ(r.exit_code, 2);
    r = zkd({"crack", "0cc175b9c0f1b6a831c399e269772661", "--charset", "lower", "--max-length", "40"});
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

}  // namespace
