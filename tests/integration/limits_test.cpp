// SPDX-License-Identifier: MIT
// Exec types' resource limits (docs/exec.md "Limits") with real `zkd run` processes, a real
// ZooKeeper and a real program that goes over them (tests/programs/hog.py), run once per task
// and served: each task over a limit fails with the limit's code, and the next task of the
// same type succeeds on the same worker. rlimits always; cgroup v2 where this machine offers
// a hierarchy with the memory and pids controllers (else the test says so and skips, or fails
// under ZKD_REQUIRE_CGROUP=1).
#include "roles/client/task_client.hpp"
#include "roles/cluster/namespace.hpp"
#include "support/zkd_cluster.hpp"
#include "zkco/deadline.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <unistd.h>

namespace ZKD_UNITY_ID {

namespace asio = boost::asio;
namespace json = boost::json;
namespace fs = std::filesystem;
using namespace std::literals;
using namespace zkd::roles;
using namespace zkd::protocol;
using zkd::test::read_file;

namespace {

const fs::path hog_source = fs::path(ZKD_SOURCE_DIR) / "tests" / "programs" / "hog.py";

/// One task over a limit: the type, the hog's args, the code its result must carry.
struct over {
    std::string type;
    std::string hog;
    std::string code;
};

class Limits : public zkd::test::zkd_cluster_test {
protected:
    Limits() : zkd_cluster_test("limits", ZKD_BINARY) {}

    void SetUp() override {
        zkd_cluster_test::SetUp();
        // A copy any user can run (a type's `user` may not reach the checkout).
        fs::permissions(dir_, fs::perms::all & ~fs::perms::group_write & ~fs::perms::others_write);
        hog_ = (dir_ / "hog.py").string();
        fs::copy_file(hog_source, hog_);
        fs::permissions(
            hog_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                      fs::perms::others_read | fs::perms::others_exec
        );
    }

    /// Each case goes over its limit and fails with its code; then a task of the same type
    /// succeeds on the same worker.
    void expect_limits(const std::vector<over>& cases) {
        run(
            [&]() -> asio::awaitable<void> {
                auto zk = co_await cluster_client();
                auto l = co_await ensure_layout(*zk, meta_info{});
                ASSERT_TRUE(l);
                task_client tc(*zk, *l);
                for (const auto& c : cases) {
                    json::object hog;
                    hog["hog"] = c.hog;
                    const auto r = co_await one(tc, c.type, std::move(hog), 60s);
                    EXPECT_EQ(r.state, task_state::failed) << c.type;
                    ASSERT_TRUE(r.error) << c.type;
                    EXPECT_EQ(r.error->code, c.code) << c.type << ": " << r.error->message;
                    const auto ok = co_await one(tc, c.type, json::object{}, 60s);
                    EXPECT_EQ(ok.state, task_state::succeeded)
                        << c.type << " after its limit: " << (ok.error ? ok.error->message : "");
                }
                co_await tc.flush();
                co_await zk->close();
            }(),
            300s
        );
    }

    /// Config lines defining `name` as hog.py with `settings`, served when `served`.
    std::string type(const std::string& name, bool served, const std::vector<std::string>& settings)
        const {
        std::string out = "exec." + name + " = " + hog_ + "\n";
        if (served) {
            out += "exec." + name + ".mode = serve\n";
        }
        for (const auto& s : settings) {
            out.append("exec.").append(name).append(".").append(s).append("\n");
        }
        return out;
    }

    std::string hog_;
};

TEST_F(Limits, RlimitsFailTasksWithTheLimitsCodeOnceAndServedAndTheWorkerCarriesOn) {
    std::string config;
    for (const bool served : {false, true}) {
        const std::string p = served ? "s" : "";
        config += type(p + "mem", served, {"memory-limit = 64M"});
        config += type(p + "cpu", served, {"cpu-limit = 1s"});
        config += type(p + "files", served, {"max-open-files = 16"});
    }
    start("a", config, {"--exec-limits", "rlimit"});
    expect_limits({
        {"mem", "memory", "memory_limit"},
        {"cpu", "cpu", "cpu_limit"},
        {"files", "files", "open_files_limit"},
        {"smem", "memory", "memory_limit"},
        {"scpu", "cpu", "cpu_limit"},
        {"sfiles", "files", "open_files_limit"},
    });
    const auto log = log_of("a");
    EXPECT_NE(
        log.find("exec type mem: " + hog_ + " (a process per task; memory 64MiB (RLIMIT_DATA"),
        std::string::npos
    ) << log;
    EXPECT_NE(
        log.find("exec type scpu: " + hog_ + " (served; CPU time 1s (RLIMIT_CPU"), std::string::npos
    );
    EXPECT_NE(log.find("open files 16 (RLIMIT_NOFILE"), std::string::npos);
}

TEST_F(Limits, UnderRlimitsMaxProcessesHoldsForATypesUserAndIsSaidNotToForRoot) {
    if (::geteuid() != 0) {
        GTEST_SKIP() << "needs root (a type's `user`); CI runs as root";
    }
    std::string config = type("procs", false, {"max-processes = 4", "user = nobody"}) +
                         type("sprocs", true, {"max-processes = 4", "user = nobody"}) +
                         type("rootprocs", false, {"max-processes = 4"});
    start("a", config, {"--exec-limits", "rlimit"});
    expect_limits({{"procs", "procs", "process_limit"}, {"sprocs", "procs", "process_limit"}});
    const auto log = log_of("a");
    EXPECT_NE(log.find("processes 4 (RLIMIT_NPROC"), std::string::npos) << log;
    EXPECT_NE(
        log.find("exec type rootprocs: " + hog_ + " (a process per task; processes 4 NOT IN FORCE"),
        std::string::npos
    ) << log;
}

/// A cgroup v2 hierarchy with the memory and pids controllers available below its root, or
/// why not.
std::pair<std::string, std::string> cgroup_root() {
    std::istringstream mounts(read_file("/proc/self/mountinfo"));
    for (std::string line; std::getline(mounts, line);) {
        const auto dash = line.find(" - cgroup2 ");
        if (dash == std::string::npos) {
            continue;
        }
        std::istringstream f(line);
        std::string id;
        std::string parent;
        std::string dev;
        std::string root;
        std::string point;
        f >> id >> parent >> dev >> root >> point;
        const std::string enabled = read_file(point + "/cgroup.subtree_control");
        if (enabled.find("memory") == std::string::npos ||
            enabled.find("pids") == std::string::npos) {
            std::string why = "the cgroup v2 hierarchy at ";
            why.append(point).append(" has not the memory and pids controllers enabled (");
            why.append(enabled).append("): they may be bound to cgroup v1");
            return {"", why};
        }
        if (::access((point + "/cgroup.procs").c_str(), W_OK) != 0) {
            return {"", "the cgroup v2 hierarchy at " + point + " is not writable"};
        }
        return {point, ""};
    }
    return {"", "no cgroup v2 hierarchy is mounted"};
}

TEST_F(Limits, CgroupsFailTasksWithTheLimitsCodeOnceAndServedAndTheWorkerCarriesOn) {
    const auto [root, why] = cgroup_root();
    if (root.empty()) {
        const std::string msg = "THE CGROUP PATH IS NOT TESTED HERE: " + why;
        if (const char* req = std::getenv("ZKD_REQUIRE_CGROUP"); req != nullptr && *req == '1') {
            FAIL() << msg;
        }
        std::cerr << "\n*** " << msg << " ***\n\n";
        GTEST_SKIP() << msg;
    }
    // A cgroup of its own for the worker, as systemd's Delegate= gives one.
    const fs::path cg = fs::path(root) / ("zkd-test-" + std::to_string(::getpid()));
    fs::create_directories(cg);
    const auto wrapper = (dir_ / "in-cgroup.sh").string();
    std::ofstream(wrapper) << "#!/bin/sh\necho $$ > " << (cg / "cgroup.procs").string()
                           << " || exit 126\nexec " << ZKD_BINARY << " \"$@\"\n";
    fs::permissions(wrapper, fs::perms::owner_all);
    std::string config;
    for (const bool served : {false, true}) {
        const std::string p = served ? "s" : "";
        config += type(p + "mem", served, {"memory-limit = 64M"});
        config += type(p + "procs", served, {"max-processes = 8"});
    }
    config += type("share", false, {"cpu-limit = 50%"});
    binary_ = wrapper;
    start("a", config, {"--exec-limits", "cgroup"});
    expect_limits({
        {"mem", "memory", "memory_limit"},
        {"procs", "procs", "process_limit"},
        {"smem", "memory", "memory_limit"},
        {"sprocs", "procs", "process_limit"},
    });
    const auto log = log_of("a");
    EXPECT_NE(log.find("exec limits: cgroup v2 below " + cg.string()), std::string::npos) << log;
    EXPECT_NE(log.find("memory 64MiB (cgroup memory.max"), std::string::npos);
    // The cpu controller is there when the hierarchy's root gives it (systemd enables it only
    // when a unit asks for it).
    const bool cpu =
        read_file(root + "/cgroup.subtree_control").find("cpu ") != std::string::npos ||
        read_file(root + "/cgroup.subtree_control").find("cpu\n") != std::string::npos;
    EXPECT_NE(
        log.find(
            cpu ? "CPU share 50% of a core (cgroup cpu.max" : "CPU share 50% of a core NOT IN FORCE"
        ),
        std::string::npos
    );
    // Stopped (SIGTERM: it drains), the worker removes its programs' cgroups.
    nodes_.at("a")->kill(SIGTERM);
    EXPECT_EQ(nodes_.at("a")->wait_exit(60s), 0);
    nodes_.clear();
    std::error_code ec;
    std::size_t left = 0;
    for (const auto& e : fs::directory_iterator(cg, ec)) {
        if (e.is_directory()) {
            if (e.path().filename() != "zkd") {
                ++left;
            }
            fs::remove(e.path(), ec);
        }
    }
    fs::remove(cg, ec);
    EXPECT_EQ(left, 0U) << "program cgroups left behind in " << cg;
}

TEST_F(Limits, StartUpRefusesBadLimitsAndACgroupItCannotUseSayingWhy) {
    const auto file = (dir_ / "bad.conf").string();
    std::ofstream(file) << type("t", false, {"cpu-limit = 30"});
    auto r = zkd::test::run_command({ZKD_BINARY, "run", "--zk", zk_, "--config", file});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(
        r.err.find("bad.conf:2: exec.t.cpu-limit wants a CPU time with its unit"), std::string::npos
    ) << r.err;
    r = zkd::test::run_command({ZKD_BINARY, "run", "--zk", zk_, "--exec-limits", "cgroups"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("--exec-limits wants auto, cgroup or rlimit"), std::string::npos) << r.err;
    if (!cgroup_root().first.empty()) {
        return;  // this machine has a cgroup it could use: nothing to refuse
    }
    std::ofstream(file) << type("t", false, {"memory-limit = 64M"});
    r = zkd::test::run_command(
        {ZKD_BINARY, "run", "--zk", zk_, "--config", file, "--exec-limits", "cgroup"}
    );
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("--exec-limits cgroup: cannot use cgroup v2: "), std::string::npos)
        << r.err;
}

}  // namespace

}  // namespace ZKD_UNITY_ID
