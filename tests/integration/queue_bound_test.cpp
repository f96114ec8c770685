// SPDX-License-Identifier: MIT
// The bound on pending tasks (docs/protocol.md §7 "Client"), through real `zkd run`
// processes and a real ZooKeeper: a master started with --max-pending publishes it in
// /master; submits up to it succeed, the next fails with "queue full" and creates nothing,
// through the library (client_errc::queue_full), the CLI (exit 6) and HTTP (429 with
// Retry-After); once a worker drains the queue, submits succeed again.
#include "protocol/layout.hpp"
#include "roles/client/inspect.hpp"
#include "roles/client/task_client.hpp"
#include "roles/cluster/namespace.hpp"
#include "support/processes.hpp"
#include "support/zk_fixture.hpp"
#include "zkco/deadline.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/json.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace ZKD_UNITY_ID {

namespace asio = boost::asio;
namespace json = boost::json;
using namespace std::literals;

namespace {

/// One HTTP exchange.
struct http_reply {
    int status = 0;
    std::string head;  ///< the status line and headers
    std::string body;
};

/// POSTs `body` to 127.0.0.1:`port``target` (Connection: close) and reads the whole answer.
http_reply http_post(std::uint16_t port, const std::string& target, const std::string& body) {
    asio::ip::tcp::iostream s("127.0.0.1", std::to_string(port));
    s << "POST " << target << " HTTP/1.1\r\nHost: 127.0.0.1\r\n"
      << "Content-Type: application/json\r\nContent-Length: " << body.size()
      << "\r\nConnection: close\r\n\r\n"
      << body << std::flush;
    std::stringstream all;
    all << s.rdbuf();
    const std::string text = all.str();
    http_reply r;
    const auto split = text.find("\r\n\r\n");
    r.head = text.substr(0, split);
    r.body = split == std::string::npos ? std::string() : text.substr(split + 4);
    if (text.starts_with("HTTP/1.1 ")) {
        r.status = std::stoi(text.substr(9, 3));
    }
    return r;
}

class QueueBound : public zkd::test::zk_test {  // NOLINT(readability-identifier-naming)
protected:
    void SetUp() override {
        zk_test::SetUp();
        dir_ = zkd::test::make_test_dir(
            "queue_bound", ::testing::UnitTest::GetInstance()->current_test_info()->name()
        );
    }

    void TearDown() override {
        nodes_.clear();
        if (HasFailure()) {
            zkd::test::print_logs(dir_, 4000);
        }
        std::filesystem::remove_all(dir_);
        zk_test::TearDown();
    }

    [[nodiscard]] std::string connect() const { return base_ + chroot_; }

    void start_node(const std::string& host, std::vector<std::string> extra) {
        nodes_.push_back(std::make_unique<zkd::test::zkd_process>(
            ZKD_BINARY, connect(), ns_, host, dir_ / (host + ".log"), std::move(extra)
        ));
    }

    /// `zkd ARGS... --zk <ours> --namespace qb`.
    zkd::test::command_result zkd(std::vector<std::string> args) {
        args.insert(args.begin(), ZKD_BINARY);
        args.insert(args.end(), {"--zk", connect(), "--namespace", ns_});
        return zkd::test::run_command(args, {}, 60s);
    }

    /// `zkd cluster --json`, until `done` holds of it (at most 30 s); the last one read.
    json::value wait_cluster(const std::function<bool(const json::value&)>& done) {
        json::value last;
        for (int i = 0; i < 600; ++i) {
            const auto c = zkd({"cluster", "--json"});
            boost::system::error_code ec;
            last = c.exit_code == 0 ? json::parse(c.out, ec) : json::value();
            if (!ec && last.is_object() && done(last)) {
                return last;
            }
            std::this_thread::sleep_for(50ms);
        }
        return last;
    }

    /// The pending count from the shards' stats (`zkd cluster`'s "pending").
    std::int64_t pending() {
        const auto c = wait_cluster([](const json::value&) { return true; });
        return c.is_object() ? c.at("pending").to_number<std::int64_t>() : -1;
    }

    std::string ns_ = "qb";
    std::filesystem::path dir_;
    std::vector<std::unique_ptr<zkd::test::zkd_process>> nodes_;
};

std::uint16_t free_port() {
    asio::io_context probe;
    asio::ip::tcp::acceptor a(probe, {asio::ip::address_v4::loopback(), 0});
    return a.local_endpoint().port();
}

}  // namespace

TEST_F(QueueBound, SubmitsPastTheBoundFailWithQueueFullAndCreateNothing) {
    ZKD_REQUIRE_ZK_SERVER();
    const auto port = free_port();
    // A master that never works: tasks stay pending.
    start_node(
        "master",
        {"--capacity", "0", "--max-pending", "5", "--http", "127.0.0.1:" + std::to_string(port)}
    );
    const auto up = wait_cluster([](const json::value& c) {
        return c.at("master").is_object() && c.at("master").at("max_pending") == 5;
    });
    ASSERT_TRUE(up.is_object() && up.at("master").is_object()) << json::serialize(up);
    ASSERT_EQ(up.at("master").at("max_pending"), 5) << json::serialize(up);

    for (int i = 0; i < 5; ++i) {
        const auto ok = zkd({"submit", "echo", std::to_string(i)});
        EXPECT_EQ(ok.exit_code, 0) << i << ": " << ok.err;
    }
    EXPECT_EQ(pending(), 5);

    // The CLI: exit 6, a message with the figures, nothing created.
    const auto full = zkd({"submit", "echo", "6"});
    EXPECT_EQ(full.exit_code, 6) << full.err;
    EXPECT_NE(
        full.err.find("queue full: 5 pending, bound 5 (zkd run --max-pending)"), std::string::npos
    ) << full.err;
    EXPECT_TRUE(full.out.empty()) << full.out;  // no task id
    EXPECT_EQ(pending(), 5);

    // HTTP: 429 with Retry-After and a JSON error, nothing created.
    const auto refused = http_post(port, "/v1/tasks", R"({"type":"echo","args":7})");
    EXPECT_EQ(refused.status, 429) << refused.head << "\n" << refused.body;
    EXPECT_NE(refused.head.find("\r\nRetry-After: 1"), std::string::npos) << refused.head;
    boost::system::error_code ec;
    const auto err = json::parse(refused.body, ec);
    ASSERT_FALSE(ec) << refused.body;
    EXPECT_EQ(err.at("error").at("code"), "queue_full") << refused.body;
    EXPECT_NE(
        json::value_to<std::string>(err.at("error").at("message")).find("5 pending, bound 5"),
        std::string::npos
    ) << refused.body;
    EXPECT_EQ(pending(), 5);

    // The library: client_errc::queue_full with the figures, for a plain task and for a
    // bundle (one node, however many tasks).
    run([this]() -> asio::awaitable<void> {
        auto cfg = make_config();
        cfg.connect_string = connect() + zkd::protocol::chroot_path(ns_);
        zkd::zkco::client zk(co_await asio::this_coro::executor, cfg);
        ASSERT_TRUE(co_await zkd::zkco::with_timeout(zk.connect(), 10s));
        auto l = co_await zkd::roles::read_layout(zk);
        ASSERT_TRUE(l);
        {
            zkd::roles::task_client tc(zk, *l);
            std::vector<zkd::protocol::task_spec> one(1);
            one[0].type = "echo";
            auto ids = co_await tc.submit(one);
            EXPECT_FALSE(ids);
            if (!ids) {
                EXPECT_EQ(ids.error(), zkd::roles::client_errc::queue_full)
                    << ids.error().message();
            }
            EXPECT_FALSE(tc.last_queue_check().admitted);
            EXPECT_EQ(tc.last_queue_check().pending, 5U);
            EXPECT_EQ(tc.last_queue_check().adding, 1U);
            EXPECT_EQ(tc.last_queue_check().bound, 5U);
            std::vector<zkd::protocol::task_spec> three(3, one[0]);
            zkd::roles::submit_options bundled;
            bundled.bundle = 3;
            ids = co_await tc.submit(three, bundled);
            EXPECT_FALSE(ids);
            EXPECT_EQ(tc.last_queue_check().adding, 1U);
            co_await tc.flush();
        }
        co_await zk.close();
    }());
    EXPECT_EQ(pending(), 5);

    // A worker drains the queue: submits succeed again.
    start_node("worker", {"--role", "worker", "--capacity", "4"});
    const auto drained = wait_cluster([](const json::value& c) {
        return c.at("pending") == 0 && c.at("workers").as_array().size() == 1;
    });
    ASSERT_EQ(drained.at("pending"), 0) << json::serialize(drained);
    const auto again = zkd({"submit", "echo", "8", "--wait", "--timeout", "30s"});
    EXPECT_EQ(again.exit_code, 0) << again.err;
    // The facade's client read the count up to a second ago (hence Retry-After: 1): it
    // accepts once it reads again.
    http_reply accepted;
    for (int i = 0; i < 100; ++i) {
        accepted = http_post(port, "/v1/tasks", R"({"type":"echo","args":9})");
        if (accepted.status != 429) {
            break;
        }
        std::this_thread::sleep_for(100ms);
    }
    EXPECT_EQ(accepted.status, 201) << accepted.head << "\n" << accepted.body;
}

// --max-pending 0: the master publishes "no bound" (0),
// and submits are not limited.
TEST_F(QueueBound, ZeroMeansNoBound) {
    ZKD_REQUIRE_ZK_SERVER();
    start_node("master", {"--capacity", "0", "--max-pending", "0"});
    const auto up = wait_cluster([](const json::value& c) {
        return c.at("master").is_object() && c.at("master").at("max_pending") == 0;
    });
    ASSERT_TRUE(up.is_object() && up.at("master").is_object()) << json::serialize(up);
    ASSERT_EQ(up.at("master").at("max_pending"), 0) << json::serialize(up);
    for (int i = 0; i < 3; ++i) {
        const auto ok = zkd({"submit", "echo", std::to_string(i)});
        EXPECT_EQ(ok.exit_code, 0) << i << ": " << ok.err;
    }
    EXPECT_EQ(pending(), 3);
}

}  // namespace ZKD_UNITY_ID
