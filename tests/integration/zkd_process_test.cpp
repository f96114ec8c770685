// SPDX-License-Identifier: MIT
// zkd as real processes against a real ZooKeeper: tasks flow through a cluster of `zkd run`
// processes while a worker and then the master are killed with SIGKILL; every task still
// ends with exactly its one result.
#include "roles/election.hpp"
#include "roles/task_client.hpp"
#include "support/zk_fixture.hpp"
#include "zkco/deadline.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

namespace asio = boost::asio;
namespace json = boost::json;
using namespace std::literals;
using namespace zkd::roles;

namespace {

/// A `zkd run` child process; killed (SIGKILL) when the test is done with it.
class zkd_process {
public:
    zkd_process(const std::string& connect, const std::string& ns, const std::string& host,
                const std::filesystem::path& log, std::vector<std::string> extra = {}) {
        std::vector<std::string> argv{ZKD_BINARY, "run", "--zk", connect, "--namespace", ns,
                                      "--host", host, "--session-timeout", "2000",
                                      "--capacity", "2", "--threads", "2"};
        argv.insert(argv.end(), extra.begin(), extra.end());
        pid_ = ::fork();
        if (pid_ == 0) {
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);
            const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
            ::dup2(fd, 1);
            ::dup2(fd, 2);
            std::vector<char*> raw;
            for (auto& a : argv) {
                raw.push_back(a.data());
            }
            raw.push_back(nullptr);
            ::execv(raw[0], raw.data());
            ::_exit(127);
        }
    }
    zkd_process(const zkd_process&) = delete;
    zkd_process& operator=(const zkd_process&) = delete;
    ~zkd_process() { kill(SIGKILL); }

    void kill(int sig) {
        if (pid_ > 0) {
            ::kill(pid_, sig);
            if (sig == SIGKILL) {
                ::waitpid(pid_, nullptr, 0);
                pid_ = 0;
            }
        }
    }

private:
    pid_t pid_ = 0;
};

class ZkdProcess : public zkd::test::zk_test {
protected:
    void SetUp() override {
        zk_test::SetUp();
        dir_ = std::filesystem::temp_directory_path() /
               ("zkd-proc-" + std::to_string(::getpid()) + "-" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name());
        std::filesystem::create_directories(dir_);
        // The cluster's namespace lives inside this test's chroot.
        ns_ = "proc";
    }

    void TearDown() override {
        nodes_.clear();
        if (HasFailure()) {
            for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
                std::ifstream in(entry.path());
                std::string all((std::istreambuf_iterator<char>(in)), {});
                std::cerr << "===== " << entry.path() << " (last 4000 bytes) =====\n"
                          << all.substr(all.size() > 4000 ? all.size() - 4000 : 0) << "\n";
            }
        }
        std::filesystem::remove_all(dir_);
        zk_test::TearDown();
    }

    void start(const std::string& host) {
        nodes_.emplace(host, std::make_unique<zkd_process>(base_ + chroot_, ns_, host, dir_ / (host + ".log")));
    }

    asio::awaitable<void> settle(std::chrono::milliseconds d) {
        asio::steady_timer t(ioc_, d);
        co_await t.async_wait(asio::use_awaitable);
    }

    /// The host of the current master (its member id starts with it), once there is one.
    asio::awaitable<std::string> master_host(zkd::zkco::client& zk) {
        for (int i = 0; i < 300; ++i) {
            if (auto m = co_await zk.get("/master"s); m) {
                if (auto info = decode_master(m->data)) {
                    co_return info->host;
                }
            }
            co_await settle(50ms);
        }
        co_return "";
    }

    std::filesystem::path dir_;
    std::string ns_;
    std::map<std::string, std::unique_ptr<zkd_process>> nodes_;
};

TEST_F(ZkdProcess, EveryTaskGetsExactlyOneResultWhileAWorkerAndTheMasterAreKilled) {
    for (const auto* host : {"n1", "n2", "n3", "n4"}) {
        start(host);
    }
    run([&]() -> asio::awaitable<void> {
        zkd::zkco::config cfg = make_config();
        cfg.connect_string = base_ + chroot_ + chroot_path(ns_);
        // The nodes create the namespace; wait for it.
        std::optional<zkd::zkco::client> zk;
        for (int i = 0; i < 300; ++i) {
            zk.emplace(ioc_.get_executor(), cfg);
            auto c = co_await zkd::zkco::with_timeout(zk->connect(), 10s);
            ASSERT_TRUE(c) << c.error().message();
            if ((co_await zk->exists("/meta"s)).value()) {
                break;
            }
            co_await zk->close();
            co_await settle(50ms);
        }
        auto l = co_await ensure_layout(*zk, meta_info{});
        ASSERT_TRUE(l);
        task_client tc(*zk, *l);
        const std::string first_master = co_await master_host(*zk);
        ASSERT_FALSE(first_master.empty());

        constexpr int total = 1000;
        std::vector<task_request> reqs;
        for (int i = 0; i < total; ++i) {
            switch (i % 4) {
            case 0:
                reqs.push_back({"echo", json::value{{"i", i}}});
                break;
            case 1:
                reqs.push_back({"sum", json::array{i, 1}});
                break;
            case 2:
                reqs.push_back({"sleep", json::value{{"ms", 200}}});
                break;
            default:
                reqs.push_back({"fail", json::value{{"message", std::to_string(i)}}});
                break;
            }
        }
        auto ids = co_await tc.submit(std::move(reqs));
        ASSERT_TRUE(ids) << ids.error().message();

        std::map<std::string, int> index;
        for (int i = 0; i < total; ++i) {
            index[(*ids)[static_cast<std::size_t>(i)]] = i;
        }
        int done = 0;
        int retried = 0;  // results from a second attempt: the kills hit running tasks
        auto check = [&](const task_result& r) {
            retried += r.attempt > 1 ? 1 : 0;
            const int i = index.at(r.task);
            if (i % 4 == 3) {
                EXPECT_EQ(r.state, task_state::failed) << r.task;
            } else {
                EXPECT_EQ(r.state, task_state::succeeded) << r.task;
            }
            if (i % 4 == 1 && r.state == task_state::succeeded) {
                EXPECT_EQ(r.value.at("sum").to_number<std::int64_t>(), i + 1);
            }
            ++done;
        };
        // 250 sleeps of 200 ms on 8 slots keep the cluster busy for seconds: kill a worker
        // that is not the master after 1 s, and the master after 2.5 s, while tasks run.
        std::string victim;
        for (const auto& [host, p] : nodes_) {
            if (host != first_master) {
                victim = host;
            }
        }
        auto killer = [&]() -> asio::awaitable<void> {
            co_await settle(1000ms);
            nodes_.at(victim)->kill(SIGKILL);
            co_await settle(1500ms);
            nodes_.at(first_master)->kill(SIGKILL);
        };
        asio::co_spawn(ioc_, killer(), asio::detached);
        for (int i = 0; i < total; ++i) {
            auto r = co_await zkd::zkco::with_timeout(tc.wait((*ids)[static_cast<std::size_t>(i)]), 60s);
            ASSERT_TRUE(r) << "task " << i << ": " << r.error().message();
            check(*r);
        }
        EXPECT_EQ(done, total);
        EXPECT_GT(retried, 0) << "the kills should have caught tasks in flight";
        RecordProperty("retried", retried);
        std::string second_master = co_await master_host(*zk);
        for (int i = 0; i < 200 && second_master == first_master; ++i) {
            co_await settle(50ms);
            second_master = co_await master_host(*zk);
        }
        EXPECT_NE(second_master, first_master);
        EXPECT_NE(second_master, victim);
        // Nothing left behind: no result twice, nothing pending.
        co_await settle(200ms);
        for (const auto& shard : l->result_shard_paths()) {
            EXPECT_TRUE((co_await zk->get_children(shard))->names.empty()) << shard;
        }
        for (const auto& shard : l->pending_shard_paths()) {
            EXPECT_TRUE((co_await zk->get_children(shard))->names.empty()) << shard;
        }
        co_await zk->close();
    }(), 300s);
}

}  // namespace
