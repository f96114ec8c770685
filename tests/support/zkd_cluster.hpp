// SPDX-License-Identifier: MIT
// A fixture for tests of real `zkd run` processes: a log directory of the test's own, the
// nodes it starts (killed when it ends), their logs printed after a failure, and a client on
// the cluster's namespace once a node has created it.
#pragma once

#include "protocol/layout.hpp"
#include "roles/client/task_client.hpp"
#include "support/proc_tree.hpp"
#include "support/processes.hpp"
#include "support/zk_fixture.hpp"
#include "zkco/deadline.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace zkd::test {

/// Waits inside a zkd_cluster_test coroutine for `pred` (a plain condition) for up to `limit`,
/// polling every 20 ms; the caller then asserts `pred`.
#define ZKD_AWAIT_CONDITION(pred, limit)                               \
    for (auto zkd_until_ = std::chrono::steady_clock::now() + (limit); \
         !(pred) && std::chrono::steady_clock::now() < zkd_until_;) {  \
        co_await settle(std::chrono::milliseconds(20));                \
    }

class zkd_cluster_test : public zk_test {
protected:
    /// Nodes run `binary` (a test's ZKD_BINARY) in the namespace `ns`.
    zkd_cluster_test(std::string ns, std::string binary)
        : ns_(std::move(ns)), binary_(std::move(binary)) {}

    void SetUp() override {
        zk_test::SetUp();
        dir_ = make_test_dir(ns_, ::testing::UnitTest::GetInstance()->current_test_info()->name());
        zk_ = base_ + chroot_;
    }

    void TearDown() override {
        nodes_.clear();
        if (HasFailure()) {
            print_logs(dir_, 6000);
        }
        std::filesystem::remove_all(dir_);
        zk_test::TearDown();
    }

    /// Starts `zkd run` as `host` with `extra` flags (after zkd_process's own), its output in
    /// log_of(host).
    void start(const std::string& host, std::vector<std::string> extra) {
        start(host, {}, std::move(extra));
    }
    /// The same with `config`, when not empty, as its config file's text (--config).
    void start(const std::string& host, const std::string& config, std::vector<std::string> extra) {
        if (!config.empty()) {
            const auto file = dir_ / (host + ".conf");
            std::ofstream(file) << config;
            extra.insert(extra.begin(), {"--config", file.string()});
        }
        nodes_.insert_or_assign(
            host, std::make_unique<zkd_process>(
                      binary_, zk_, ns_, host, dir_ / (host + ".log"), std::move(extra)
                  )
        );
    }

    /// What the node `host` has logged so far.
    std::string log_of(const std::string& host) const { return read_file(dir_ / (host + ".log")); }

    /// A client on the cluster's namespace, once a node has created it (its /meta exists).
    boost::asio::awaitable<std::unique_ptr<zkco::client>> cluster_client() {
        using namespace std::chrono_literals;
        zkco::config cfg = make_config();
        cfg.connect_string = zk_ + protocol::chroot_path(ns_);
        for (int i = 0; i < 300; ++i) {
            auto zk = std::make_unique<zkco::client>(ioc_.get_executor(), cfg);
            auto c = co_await zkco::with_timeout(zk->connect(), 10s);
            if (c) {
                const auto meta = co_await zk->exists(std::string("/meta"));
                if (meta && meta->has_value()) {
                    co_return zk;
                }
            }
            co_await zk->close();
            co_await settle(50ms);
        }
        throw std::runtime_error("the cluster's namespace never appeared");
    }

    /// Submits one task of `type` with `args` (one attempt, `timeout`: 0 none) and waits for
    /// its result; throws when the submit or the wait fails.
    static boost::asio::awaitable<protocol::task_result> one(
        roles::task_client& tc,
        std::string type,
        boost::json::value args,
        std::chrono::milliseconds timeout = std::chrono::milliseconds(0)
    ) {
        std::vector<protocol::task_spec> reqs{{std::move(type), std::move(args)}};
        reqs.front().timeout = timeout;
        reqs.front().max_attempts = 1;
        auto ids = co_await tc.submit(std::move(reqs));
        if (!ids) {
            throw std::runtime_error("submit: " + ids.error().message());
        }
        auto r = co_await zkco::with_timeout(tc.wait(ids->front()), std::chrono::seconds(90));
        if (!r) {
            throw std::runtime_error("wait: " + r.error().message());
        }
        co_return *r;
    }

    boost::asio::awaitable<void> settle(std::chrono::milliseconds d) {
        boost::asio::steady_timer t(ioc_, d);
        co_await t.async_wait(boost::asio::use_awaitable);
    }

    std::string ns_;
    std::string binary_;
    std::filesystem::path dir_;  ///< the test's own: logs, config files, scripts
    std::string zk_;             ///< the test's chroot on the server
    std::map<std::string, std::unique_ptr<zkd_process>> nodes_;
};

}  // namespace zkd::test
