// SPDX-License-Identifier: MIT
// zk_local against the real ZooKeeper from the Debian package, checked with four-letter words.
#include "zk_local/zk_local.hpp"

#include "support/processes.hpp"
#include "support/zk_server.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <netinet/in.h>
#include <set>
#include <stdexcept>
#include <string>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

namespace ZKD_UNITY_ID {

namespace {

namespace fs = std::filesystem;
namespace zl = zkd::zk_local;
using namespace std::chrono_literals;

// Polls `condition` every 50 ms until it holds or `timeout` passes.
template <class Condition>
bool eventually(Condition condition, std::chrono::milliseconds timeout = 15s) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        if (condition()) {
            return true;
        }
        if (std::chrono::steady_clock::now() >= deadline) {
            return false;
        }
        std::this_thread::sleep_for(50ms);
    }
}

bool process_gone(int pid) {
    return ::kill(pid, 0) != 0 && errno == ESRCH;
}

bool serving_in_quorum(const zl::cluster& cluster, int member) {
    auto mode = cluster.mode(member);
    return mode == "leader" || mode == "follower";
}

int count_mode(const zl::cluster& cluster, const std::string& mode) {
    int count = 0;
    for (int i = 0; i < cluster.size(); ++i) {
        count += cluster.mode(i) == mode ? 1 : 0;
    }
    return count;
}

// Starts a cluster that prints its logs if it stops during a failed test.
zl::cluster start_cluster(zl::options opts) {
    auto cluster = zl::cluster::start(std::move(opts));
    cluster.on_stop([](const zl::cluster& stopping) {
        if (::testing::Test::HasFailure()) {
            zkd::test::print_zk_logs(stopping);
        }
    });
    return cluster;
}

zl::options servers(int n) {
    zl::options opts;
    opts.servers = n;
    return opts;
}

TEST(ZkLocalStandalone, StartsServesAndStopsCleanly) {
    ZKD_REQUIRE_LOCAL_ZK_SERVER();
    auto cluster = start_cluster(servers(1));
    ASSERT_EQ(cluster.size(), 1);

    EXPECT_NE(cluster.four_letter(0, "srvr").find("Mode: standalone"), std::string::npos);
    EXPECT_EQ(cluster.mode(0), "standalone");
    EXPECT_EQ(cluster.four_letter(0, "ruok"), "imok");
    auto port = cluster.client_port(0);
    EXPECT_NE(port, 0);
    EXPECT_EQ(cluster.connect_string(), "127.0.0.1:" + std::to_string(port));
    EXPECT_EQ(cluster.connect_string(0), cluster.connect_string());

    auto dir = cluster.dir();
    EXPECT_TRUE(fs::exists(dir / "zk-local.state"));
    // The server's own log reaches server.log (it stays empty without an slf4j binding).
    EXPECT_NE(cluster.log_tail(0, 1000).find("binding to port"), std::string::npos)
        << cluster.log_tail(0, 20);

    int pid = cluster.pid(0);
    ASSERT_GT(pid, 0);
    EXPECT_TRUE(cluster.running(0));

    cluster.stop();
    EXPECT_FALSE(cluster.running(0));
    EXPECT_EQ(cluster.pid(0), 0);
    EXPECT_TRUE(process_gone(pid)) << "pid " << pid;
    EXPECT_FALSE(fs::exists(dir)) << dir;
    EXPECT_EQ(cluster.four_letter(0, "srvr", 500ms), "");
    cluster.stop();  // idempotent
}

// The zkd-zk-local program: sessions up to 60 s (ZooKeeper's own cap, 20 ticks, is 4 s at
// our tick), and `stop` says why it keeps a dir it did not make.
TEST(ZkLocalTool, GrantsLongSessionsAndSaysWhyItKeepsTheDir) {
    ZKD_REQUIRE_LOCAL_ZK_SERVER();
    const auto dir =
        fs::temp_directory_path() / ("zkd-zk-local-tool-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    auto started = zkd::test::run_command({ZKD_ZK_LOCAL_BINARY, "start", "--dir", dir.string()});
    ASSERT_EQ(started.exit_code, 0) << started.err;
    struct stop_guard {
        fs::path dir;
        ~stop_guard() {
            zkd::test::run_command({ZKD_ZK_LOCAL_BINARY, "stop", "--dir", dir.string()});
            fs::remove_all(dir);
        }
    } guard{dir};
    auto cluster = zl::cluster::attach(dir);
    EXPECT_NE(cluster.four_letter(0, "conf").find("maxSessionTimeout=60000"), std::string::npos)
        << cluster.four_letter(0, "conf");

    auto stopped = zkd::test::run_command({ZKD_ZK_LOCAL_BINARY, "stop", "--dir", dir.string()});
    EXPECT_EQ(stopped.exit_code, 0) << stopped.err;
    EXPECT_NE(
        stopped.err.find("kept " + dir.string() + " (given to start with --dir"), std::string::npos
    ) << stopped.err;
    EXPECT_TRUE(fs::exists(dir));
    auto bad = zkd::test::run_command({ZKD_ZK_LOCAL_BINARY, "start", "--max-session-ms", "10"});
    EXPECT_EQ(bad.exit_code, 2) << bad.err;
}

TEST(ZkLocalStandalone, RestartKeepsPortAndServes) {
    ZKD_REQUIRE_LOCAL_ZK_SERVER();
    auto cluster = start_cluster(servers(1));
    auto port = cluster.client_port(0);
    cluster.kill_member(0);
    EXPECT_FALSE(cluster.running(0));
    EXPECT_EQ(cluster.mode(0), "");
    cluster.start_member(0);
    EXPECT_EQ(cluster.client_port(0), port);
    EXPECT_EQ(cluster.mode(0), "standalone");
    EXPECT_THROW(cluster.start_member(0), std::logic_error);
}

TEST(ZkLocalEnsemble, FollowerStopLeavesQuorumAndRestartRejoins) {
    ZKD_REQUIRE_LOCAL_ZK_SERVER();
    auto cluster = start_cluster(servers(3));
    ASSERT_EQ(cluster.size(), 3);

    std::set<std::uint16_t> ports;
    std::string expected;
    for (int i = 0; i < 3; ++i) {
        EXPECT_TRUE(serving_in_quorum(cluster, i)) << "server " << i + 1 << ": " << cluster.mode(i);
        ports.insert(cluster.client_port(i));
        expected += (i == 0 ? "" : ",") + ("127.0.0.1:" + std::to_string(cluster.client_port(i)));
    }
    EXPECT_EQ(ports.size(), 3U);
    EXPECT_EQ(cluster.connect_string(), expected);
    EXPECT_EQ(count_mode(cluster, "leader"), 1);
    EXPECT_EQ(count_mode(cluster, "follower"), 2);

    int follower = -1;
    for (int i = 0; i < 3 && follower < 0; ++i) {
        follower = cluster.mode(i) == "follower" ? i : -1;
    }
    ASSERT_GE(follower, 0);
    int pid = cluster.pid(follower);

    cluster.stop_member(follower);
    EXPECT_FALSE(cluster.running(follower));
    EXPECT_TRUE(process_gone(pid));
    EXPECT_EQ(cluster.four_letter(follower, "srvr", 500ms), "");
    // Two of three keep the quorum, so the others serve without an election.
    for (int i = 0; i < 3; ++i) {
        if (i != follower) {
            EXPECT_TRUE(serving_in_quorum(cluster, i))
                << "server " << i + 1 << ": " << cluster.mode(i);
        }
    }

    cluster.start_member(follower);
    EXPECT_TRUE(cluster.running(follower));
    EXPECT_NO_THROW(cluster.wait_serving(follower, 1s));  // start_member already waited
    for (int i = 0; i < 3; ++i) {
        EXPECT_TRUE(serving_in_quorum(cluster, i)) << "server " << i + 1 << ": " << cluster.mode(i);
    }
    EXPECT_EQ(count_mode(cluster, "leader"), 1);
}

TEST(ZkLocalEnsemble, LeaderKillElectsNewLeader) {
    ZKD_REQUIRE_LOCAL_ZK_SERVER();
    auto cluster = start_cluster(servers(3));
    int leader = -1;
    for (int i = 0; i < 3 && leader < 0; ++i) {
        leader = cluster.mode(i) == "leader" ? i : -1;
    }
    ASSERT_GE(leader, 0);

    cluster.kill_member(leader);
    EXPECT_TRUE(eventually([&] {
        return count_mode(cluster, "leader") == 1 && count_mode(cluster, "follower") == 1;
    })) << "after killing server "
        << leader + 1;

    cluster.start_member(leader);
    EXPECT_EQ(cluster.mode(leader), "follower");  // the new leader keeps its role
    EXPECT_EQ(count_mode(cluster, "leader"), 1);
}

TEST(ZkLocalPorts, TwoClustersStartedAtOnceGetDistinctPorts) {
    ZKD_REQUIRE_LOCAL_ZK_SERVER();
    std::unique_ptr<zl::cluster> first;
    std::unique_ptr<zl::cluster> second;
    std::string first_error;
    std::string second_error;
    auto start_into = [](std::unique_ptr<zl::cluster>& out, std::string& error) {
        try {
            out = std::make_unique<zl::cluster>(start_cluster(servers(1)));
        } catch (const std::exception& e) {
            error = e.what();
        }
    };
    // Started from threads that end right away: the servers must outlive them
    // (PR_SET_PDEATHSIG follows the forking thread, not the process).
    std::thread a(start_into, std::ref(first), std::ref(first_error));
    std::thread b(start_into, std::ref(second), std::ref(second_error));
    a.join();
    b.join();
    ASSERT_TRUE(first) << first_error;
    ASSERT_TRUE(second) << second_error;

    EXPECT_NE(first->client_port(0), second->client_port(0));
    EXPECT_NE(first->dir(), second->dir());
    for (int round = 0; round < 3; ++round) {
        EXPECT_EQ(first->mode(0), "standalone");
        EXPECT_EQ(second->mode(0), "standalone");
    }
    EXPECT_TRUE(first->running(0));
    EXPECT_TRUE(second->running(0));
}

TEST(ZkLocalDetached, AttachControlsADetachedCluster) {
    ZKD_REQUIRE_LOCAL_ZK_SERVER();
    auto opts = servers(1);
    opts.detach = true;
    auto started = zl::cluster::start(opts);
    auto dir = started.dir();
    started.release();
    // Detached servers outlive us, so make sure this test stops them whatever happens.
    struct stop_guard {
        fs::path dir;
        ~stop_guard() {
            try {
                if (fs::exists(dir)) {
                    zl::cluster::attach(dir).stop();
                }
            } catch (...) {
            }
        }
    } guard{dir};

    auto attached = zl::cluster::attach(dir);
    EXPECT_EQ(attached.connect_string(), started.connect_string());
    EXPECT_TRUE(attached.running(0));
    EXPECT_EQ(attached.mode(0), "standalone");

    int pid = attached.pid(0);
    attached.stop_member(0);
    EXPECT_FALSE(attached.running(0));
    EXPECT_FALSE(zl::cluster::attach(dir).running(0));
    attached.start_member(0);
    EXPECT_NE(attached.pid(0), pid);
    EXPECT_TRUE(zl::cluster::attach(dir).running(0));

    attached.stop();
    EXPECT_FALSE(fs::exists(dir));
}

TEST(ZkLocalErrors, MissingJavaIsExplained) {
    auto opts = servers(1);
    opts.java = "/nonexistent/bin/java";
    try {
        zl::cluster::start(opts);
        FAIL() << "start() succeeded without java";
    } catch (const std::runtime_error& e) {
        std::string msg = e.what();
        EXPECT_NE(msg.find("/nonexistent/bin/java"), std::string::npos) << msg;
        EXPECT_NE(msg.find("default-jre-headless"), std::string::npos) << msg;
        EXPECT_NE(msg.find("zookeeper"), std::string::npos) << msg;
    }
}

TEST(ZkLocalErrors, FixedPortInUseIsReported) {
    ZKD_REQUIRE_LOCAL_ZK_SERVER();
    // Hold a listening socket on a free port, then ask for exactly that port.
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
    ASSERT_EQ(::listen(fd, 1), 0);
    ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);

    auto opts = servers(1);
    opts.base_port = ntohs(addr.sin_port);
    try {
        zl::cluster::start(opts);
        ADD_FAILURE() << "start() succeeded on a port in use";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("Address already in use"), std::string::npos)
            << e.what();
    }
    ::close(fd);
}

TEST(ZkLocalSharedServer, ConnectStringIsStableAndServes) {
    ZKD_REQUIRE_ZK_SERVER();
    const auto& connect = zkd::test::shared_zk_connect_string();
    EXPECT_FALSE(connect.empty());
    EXPECT_EQ(&connect, &zkd::test::shared_zk_connect_string());
    if (!zkd::test::zk_server_is_external()) {
        auto& cluster = zkd::test::shared_zk_cluster();
        EXPECT_EQ(connect, cluster.connect_string());
        EXPECT_EQ(cluster.mode(0), "standalone");
    }
}

TEST(ZkLocalSharedServer, SharedServerSurvivesRestart) {
    ZKD_REQUIRE_SHARED_ZK_CLUSTER();
    auto& cluster = zkd::test::shared_zk_cluster();
    auto port = cluster.client_port(0);
    cluster.stop_member(0);
    EXPECT_EQ(cluster.mode(0), "");
    cluster.start_member(0);
    EXPECT_EQ(cluster.mode(0), "standalone");
    EXPECT_EQ(zkd::test::shared_zk_connect_string(), "127.0.0.1:" + std::to_string(port));
}

}  // namespace

// The JVM heap: sized from the machine unless given, and given sizes are checked (a
// fixed -Xmx256m died of OutOfMemoryError at ~191,000 pending tasks).
TEST(ZkLocalHeap, SizesAreParsedAndTheDefaultFollowsTheMachine) {
    EXPECT_EQ(zl::parse_heap("300m"), "300m");
    EXPECT_EQ(zl::parse_heap("2g"), "2048m");
    EXPECT_EQ(zl::parse_heap("2G"), "2048m");
    EXPECT_EQ(zl::parse_heap("1048576k"), "1024m");
    EXPECT_EQ(zl::parse_heap("134217728"), "128m");
    for (const char* bad : {"", "m", "12", "63m", "1.5g", "2gb", "-1g", "2000g", "1t", "g2"}) {
        EXPECT_THROW(static_cast<void>(zl::parse_heap(bad)), std::invalid_argument) << bad;
    }
    constexpr std::uint64_t gib = 1024ULL * 1024 * 1024;
    EXPECT_EQ(zl::auto_heap(0), "256m");          // unknown memory: the old fixed size
    EXPECT_EQ(zl::auto_heap(gib / 2), "256m");    // a quarter, but never under 256m
    EXPECT_EQ(zl::auto_heap(8 * gib), "2048m");   // a quarter
    EXPECT_EQ(zl::auto_heap(64 * gib), "4096m");  // capped
    EXPECT_GT(zl::machine_memory_bytes(), 0U);
    EXPECT_EQ(zl::auto_heap(), zl::auto_heap(zl::machine_memory_bytes()));
}

TEST(ZkLocalHeap, TheServerGetsTheHeapAskedForOrTheMachinesShare) {
    ZKD_REQUIRE_LOCAL_ZK_SERVER();
    const auto cmdline = [](const zl::cluster& c) {
        std::ifstream in("/proc/" + std::to_string(c.pid(0)) + "/cmdline");
        std::string text{std::istreambuf_iterator<char>(in), {}};
        std::replace(text.begin(), text.end(), '\0', ' ');
        return text;
    };
    {
        auto cluster = start_cluster(servers(1));
        EXPECT_NE(cmdline(cluster).find(" -Xmx" + zl::auto_heap() + " "), std::string::npos)
            << cmdline(cluster);
    }
    const auto dir =
        fs::temp_directory_path() / ("zkd-zk-local-heap-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    auto started = zkd::test::run_command(
        {ZKD_ZK_LOCAL_BINARY, "start", "--dir", dir.string(), "--heap", "300m"}
    );
    ASSERT_EQ(started.exit_code, 0) << started.err;
    {
        auto cluster = zl::cluster::attach(dir);
        EXPECT_NE(cmdline(cluster).find(" -Xmx300m "), std::string::npos) << cmdline(cluster);
        // A restarted member keeps it.
        cluster.stop_member(0);
        cluster.start_member(0);
        EXPECT_NE(cmdline(cluster).find(" -Xmx300m "), std::string::npos) << cmdline(cluster);
    }
    EXPECT_EQ(
        zkd::test::run_command({ZKD_ZK_LOCAL_BINARY, "stop", "--dir", dir.string()}).exit_code, 0
    );
    fs::remove_all(dir);
    auto bad = zkd::test::run_command({ZKD_ZK_LOCAL_BINARY, "start", "--heap", "lots"});
    EXPECT_EQ(bad.exit_code, 2) << bad.err;
    EXPECT_NE(bad.err.find("--heap"), std::string::npos) << bad.err;
    auto help = zkd::test::run_command({ZKD_ZK_LOCAL_BINARY, "start", "--help"});
    EXPECT_NE(help.out.find("--heap SIZE"), std::string::npos) << help.out;
}

}  // namespace ZKD_UNITY_ID
