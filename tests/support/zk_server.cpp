// SPDX-License-Identifier: MIT
#include "support/zk_server.hpp"

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <vector>

namespace zkd::test {
namespace {

constexpr std::size_t failure_log_lines = 60;

bool env_equals(const char* name, std::string_view expected) {
    const char* value = std::getenv(name);
    return value != nullptr && std::string_view{value} == expected;
}

const char* external_server() {
    const char* value = std::getenv("ZKD_TEST_ZK");
    return value != nullptr && *value != '\0' ? value : nullptr;
}

zk_local::options test_options(int servers) {
    zk_local::options opts;
    opts.servers = servers;
    opts.tick_ms = 200;
    opts.start_timeout = std::chrono::seconds{60};
    opts.keep_dir = env_equals("ZKD_TEST_KEEP_ZK_DIR", "1");
    return opts;
}

struct shared_server {
    std::mutex mutex;
    std::optional<zk_local::cluster> cluster;
    std::string connect_string;
    // A failed start is not retried: every later test would wait out the start timeout again.
    std::string start_error;
};

// Function-local, so it is constructed after GoogleTest's singleton and destroyed before it;
// its destructor is the last line of defence that stops the server at exit.
shared_server& shared() {
    static shared_server server;
    return server;
}

zk_local::cluster& shared_cluster_locked(shared_server& server) {
    if (!server.start_error.empty()) {
        throw std::runtime_error(
            "the shared ZooKeeper failed to start earlier: " + server.start_error
        );
    }
    if (!server.cluster) {
        try {
            server.cluster.emplace(zk_local::cluster::start(test_options(1)));
        } catch (const std::exception& e) {
            server.start_error = e.what();
            throw;
        }
        server.connect_string = server.cluster->connect_string();
    }
    return *server.cluster;
}

// Private clusters, for printing their logs after a failed test. The entry is owned by the
// cluster's on_stop hook, so it dies with the cluster and the weak_ptr here expires.
struct private_entry {
    const zk_local::cluster* cluster = nullptr;
};

struct private_registry {
    std::mutex mutex;
    std::vector<std::weak_ptr<private_entry>> entries;
};

private_registry& registry() {
    static private_registry instance;
    return instance;
}

void print_live_logs() {
    {
        auto& server = shared();
        std::lock_guard lock(server.mutex);
        if (server.cluster) {
            print_zk_logs(*server.cluster, failure_log_lines);
        }
    }
    auto& reg = registry();
    std::lock_guard lock(reg.mutex);
    std::erase_if(reg.entries, [](const auto& weak) { return weak.expired(); });
    for (const auto& weak : reg.entries) {
        if (auto entry = weak.lock()) {
            print_zk_logs(*entry->cluster, failure_log_lines);
        }
    }
}

class log_on_failure : public ::testing::EmptyTestEventListener {
public:
    void OnTestEnd(const ::testing::TestInfo& info) override {
        if (info.result() != nullptr && info.result()->Failed()) {
            print_live_logs();
        }
    }
};

class shared_server_environment : public ::testing::Environment {
public:
    // After the last test (of each --gtest_repeat iteration with
    // --gtest_recreate_environments_when_repeating; the next one starts a new server).
    void TearDown() override {
        auto& server = shared();
        std::lock_guard lock(server.mutex);
        server.cluster.reset();
    }
};

[[maybe_unused]] const bool auto_installed = [] {
    install_zk_log_on_failure();
    return true;
}();

}  // namespace

bool zk_required() {
    return env_equals("CI", "true") || env_equals("ZKD_REQUIRE_ZK", "1");
}

bool zk_server_is_external() {
    return external_server() != nullptr;
}

bool zk_server_available(std::string* why) {
    return zk_server_is_external() || local_zk_available(why);
}

bool local_zk_available(std::string* why) {
    std::string reason;
    if (zk_local::java_and_server_available(&reason)) {
        return true;
    }
    if (why != nullptr) {
        *why = "no local ZooKeeper: " + reason + " (or set ZKD_TEST_ZK=host:port)";
    }
    return false;
}

const std::string& shared_zk_connect_string() {
    if (const char* external = external_server()) {
        static const std::string connect_string{external};
        return connect_string;
    }
    auto& server = shared();
    std::lock_guard lock(server.mutex);
    shared_cluster_locked(server);
    return server.connect_string;
}

zk_local::cluster& shared_zk_cluster() {
    if (zk_server_is_external()) {
        throw std::logic_error(
            "shared_zk_cluster(): ZKD_TEST_ZK is set, so there is no local server to control"
        );
    }
    auto& server = shared();
    std::lock_guard lock(server.mutex);
    return shared_cluster_locked(server);
}

std::unique_ptr<zk_local::cluster> start_private_cluster(
    int servers, std::vector<std::string> extra_config
) {
    auto opts = test_options(servers);
    opts.extra_config.insert(opts.extra_config.end(), extra_config.begin(), extra_config.end());
    auto cluster = std::make_unique<zk_local::cluster>(zk_local::cluster::start(std::move(opts)));
    auto entry = std::make_shared<private_entry>(private_entry{cluster.get()});
    {
        auto& reg = registry();
        std::lock_guard lock(reg.mutex);
        reg.entries.push_back(entry);
    }
    cluster->on_stop([entry](const zk_local::cluster& stopping) {
        static_cast<void>(entry);  // held here so that the registry entry dies with the cluster
        if (::testing::Test::HasFailure()) {
            print_zk_logs(stopping, failure_log_lines);
        }
    });
    return cluster;
}

void print_zk_logs(const zk_local::cluster& cluster, std::size_t lines) {
    for (int i = 0; i < cluster.size(); ++i) {
        auto tail = cluster.log_tail(i, lines);
        if (tail.empty()) {
            continue;  // stopped and its dir removed
        }
        std::cerr << "===== last " << lines << " lines of ZooKeeper server " << i + 1 << " log "
                  << cluster.log_path(i).string() << " =====\n"
                  << tail << "===== end of ZooKeeper server " << i + 1 << " log =====\n";
    }
    std::cerr.flush();
}

void install_zk_log_on_failure() {
    static std::once_flag once;
    std::call_once(once, [] {
        // GoogleTest owns and deletes both.
        ::testing::UnitTest::GetInstance()->listeners().Append(new log_on_failure);
        ::testing::AddGlobalTestEnvironment(new shared_server_environment);
    });
}

}  // namespace zkd::test
