// SPDX-License-Identifier: MIT
// The HTTP facade (src/http) against a real ZooKeeper and a real in-process node, driven by
// the real `curl` binary; /metrics is checked with the Python Prometheus parser. The
// io_context runs on a thread of its own while curl (blocking) runs on the test's thread.
// Over 700 lines: one fixture (a node, a server, curl) serves every endpoint's tests, and a
// second process would cost more than the length.
#include "handlers/builtin.hpp"
#include "http/server.hpp"
#include "protocol/client_txn.hpp"
#include "protocol/ids.hpp"
#include "protocol/layout.hpp"
#include "reactor/compute_pool.hpp"
#include "reactor/lag_probe.hpp"
#include "roles/client/inspect.hpp"
#include "roles/client/task_client.hpp"
#include "roles/cluster/namespace.hpp"
#include "roles/node.hpp"
#include "roles/stats.hpp"
#include "roles/txn/zk_ops.hpp"
#include "support/processes.hpp"
#include "support/zk_fixture.hpp"
#include "zkco/deadline.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/asio/write.hpp>
#include <boost/json.hpp>

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <netinet/in.h>
#include <set>
#include <spawn.h>
#include <sstream>
#include <string>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

extern char** environ;  // NOLINT(readability-redundant-declaration): POSIX, for posix_spawn

namespace ZKD_UNITY_ID {

namespace asio = boost::asio;
namespace json = boost::json;
namespace fs = std::filesystem;
using namespace std::literals;

namespace {

/// Runs a program (searched in PATH) with stdin from `in` (or /dev/null) and stdout to
/// `out`, stderr to `err`; yields its exit status (-1 if it could not run or was killed).
int spawn(
    const std::vector<std::string>& argv,
    const fs::path& in,
    const fs::path& out,
    const fs::path& err
) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    const std::string in_path = in.empty() ? "/dev/null" : in.string();
    posix_spawn_file_actions_addopen(&actions, 0, in_path.c_str(), O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::vector<char*> args;
    args.reserve(argv.size() + 1);
    for (const auto& a : argv) {
        args.push_back(const_cast<char*>(a.c_str())
        );  // NOLINT(cppcoreguidelines-pro-type-const-cast)
    }
    args.push_back(nullptr);
    pid_t pid = 0;
    const int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
        return -1;
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            return -1;
        }
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string slurp(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

/// One HTTP exchange as curl saw it.
struct reply {
    int status = 0;
    std::string headers;  ///< the raw header block(s)
    std::string body;
    std::string error;  ///< curl's stderr

    /// The value of the last header `name` (case-insensitive), or "".
    [[nodiscard]] std::string header(std::string_view name) const {
        std::string found;
        std::istringstream in(headers);
        std::string line;
        while (std::getline(in, line)) {
            const auto colon = line.find(':');
            if (colon == std::string::npos || colon != name.size()) {
                continue;
            }
            if (std::equal(name.begin(), name.end(), line.begin(), [](char a, char b) {
                    return std::tolower(static_cast<unsigned char>(a)) ==
                           std::tolower(static_cast<unsigned char>(b));
                })) {
                found = line.substr(colon + 1);
                found.erase(0, found.find_first_not_of(' '));
                while (!found.empty() && (found.back() == '\r' || found.back() == ' ')) {
                    found.pop_back();
                }
            }
        }
        return found;
    }

    [[nodiscard]] json::value json() const {
        boost::system::error_code ec;
        auto v = json::parse(body, ec);
        return ec ? json::value("<not json: " + body + ">") : v;
    }

    /// The code of an error body, or "".
    [[nodiscard]] std::string error_code() const {
        const auto v = json();
        if (!v.is_object() || !v.as_object().contains("error")) {
            return {};
        }
        return json::value_to<std::string>(v.at("error").at("code"));
    }
};

std::ostream& operator<<(std::ostream& os, const reply& r) {
    return os << "HTTP " << r.status << " body=" << r.body << " curl=" << r.error;
}

/// A plain TCP client with blocking calls, for what curl cannot do: send half a request,
/// leave in the middle of one, hold a connection open.
class raw_client {
public:
    explicit raw_client(std::uint16_t port) : socket_(io_) {
        socket_.connect({asio::ip::address_v4::loopback(), port});
        // Reads give up after 30 s rather than hang a broken test.
        timeval tv{30, 0};
        ::setsockopt(socket_.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    }

    void send(std::string_view data) { asio::write(socket_, asio::buffer(data)); }

    /// Everything the server sends until it closes (or resets: `reset` is then true).
    std::string read_all() {
        std::string out;
        std::array<char, 4096> buf{};
        for (;;) {
            boost::system::error_code ec;
            const auto n = socket_.read_some(asio::buffer(buf), ec);
            out.append(buf.data(), n);
            if (ec) {
                reset = ec == asio::error::connection_reset;
                timed_out = ec == asio::error::would_block || ec == asio::error::try_again;
                return out;
            }
        }
    }

    /// Closes the connection at once (FIN).
    void close() {
        boost::system::error_code ignored;
        socket_.close(ignored);
    }

    bool reset = false;
    bool timed_out = false;

private:
    asio::io_context io_;
    asio::ip::tcp::socket socket_;
};

/// A complete request with a JSON body.
std::string raw_post(const std::string& target, const std::string& body) {
    return "POST " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
           "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

class Http : public zkd::test::zk_test {
protected:
    void SetUp() override {
        zk_test::SetUp();
        if (!ready_) {
            return;
        }
        dir_ = fs::temp_directory_path() / ("zkd-http-test-" + std::to_string(::getpid()));
        fs::create_directories(dir_);
        std::string missing;
        if (spawn({"curl", "--version"}, {}, dir_ / "probe.out", dir_ / "probe.err") != 0) {
            missing = "curl (Debian package curl)";
        } else if (spawn({"/usr/bin/python3", "-c", "import prometheus_client.parser"}, {}, dir_ / "probe.out", dir_ / "probe.err") != 0) {
            missing = "/usr/bin/python3 with prometheus_client (package python3-prometheus-client)";
        } else if (spawn({"/usr/bin/promtool", "--version"}, {}, dir_ / "probe.out", dir_ / "probe.err") != 0) {
            missing = "/usr/bin/promtool (package prometheus)";
        }
        if (!missing.empty()) {
            if (zkd::test::zk_required()) {
                FAIL() << "needed for this test (CI=true or ZKD_REQUIRE_ZK=1): " << missing;
            }
            GTEST_SKIP() << "needs " << missing;
        }
        zkd::handlers::add_builtin_handlers(registry_);
    }

    void TearDown() override {
        stop();
        std::error_code ignored;
        if (!dir_.empty()) {
            fs::remove_all(dir_, ignored);
        }
        zk_test::TearDown();
    }

    /// The cluster's connect string, as `zkd run --zk X --namespace ns` would make it.
    [[nodiscard]] std::string cluster_connect() const {
        return base_ + chroot_ + zkd::protocol::chroot_path(ns_);
    }

    /// Starts the node (unless `with_node` is false), the facade on a free port (with
    /// options `tweak` changed), and the io thread.
    void start(
        bool with_node = true,
        std::string zk_connect = {},
        const std::function<void(zkd::http::server_options&)>& tweak = {}
    ) {
        if (with_node) {
            zkd::roles::node_options o;
            o.zk = base_ + chroot_;
            o.ns = ns_;
            o.capacity = capacity_;
            o.session_timeout = 4s;
            o.host = "httptest";
            zkd::roles::node_links links;
            links.stats = &stats_;
            asio::co_spawn(
                ioc_, zkd::roles::run_node(o, registry_, pool_, links),
                asio::bind_cancellation_slot(
                    node_stop_.slot(),
                    [](const std::exception_ptr& e) {
                        if (e) {
                            ADD_FAILURE() << "run_node threw";
                        }
                    }
                )
            );
        }
        zkd::http::server_options ho;
        ho.listen = "127.0.0.1:0";
        ho.zk.connect_string = zk_connect.empty() ? cluster_connect() : zk_connect;
        ho.zk.session_timeout = 4s;
        ho.zk_timeout = 2s;
        ho.request_timeout = 10s;
        if (with_node) {
            ho.stats = [this] { return stats_; };
        }
        ho.lag = &lag_;
        if (tweak) {
            tweak(ho);
        }
        const bool tls = !ho.tls_cert_file.empty();
        server_ = std::make_unique<zkd::http::server>(ioc_.get_executor(), std::move(ho));
        const auto ec = server_->bind();
        ASSERT_FALSE(ec) << ec.message();
        port_ = server_->local_endpoint().port();
        base_url_ = (tls ? "https://127.0.0.1:" : "http://127.0.0.1:") + std::to_string(port_);
        asio::co_spawn(
            ioc_, server_->run(),
            asio::bind_cancellation_slot(
                http_stop_.slot(),
                [](const std::exception_ptr& e) {
                    if (e) {
                        ADD_FAILURE() << "server::run threw";
                    }
                }
            )
        );
        lag_.start();
        io_done_ = std::promise<void>();
        io_finished_ = io_done_.get_future();
        ioc_.restart();  // a run() before may have left it stopped
        io_ = std::thread([this] {
            ioc_.run();
            io_done_.set_value();
        });
        started_ = true;
    }

    void stop() {
        if (!started_) {
            return;
        }
        started_ = false;
        asio::post(ioc_, [this] {
            lag_.stop();
            http_stop_.emit(asio::cancellation_type::terminal);
            node_stop_.emit(asio::cancellation_type::terminal);
        });
        if (io_finished_.wait_for(60s) != std::future_status::ready) {
            ADD_FAILURE() << "the node and the facade did not stop within 60 s";
            ioc_.stop();
        }
        io_.join();
    }

    /// Runs `f` on the io thread and returns its value.
    template <class F>
    auto on_io(F f) -> decltype(f()) {
        std::packaged_task<decltype(f())()> task(std::move(f));
        auto fut = task.get_future();
        asio::post(ioc_, [&task] { task(); });
        return fut.get();
    }

    /// curl with `args` (before the URL) on `path`.
    reply curl(const std::string& path, std::vector<std::string> args = {}) {
        ++calls_;
        const auto stem = dir_ / ("c" + std::to_string(calls_));
        std::vector<std::string> argv{"curl",       "-sS",
                                      "--max-time", "60",
                                      "-o",         stem.string() + ".body",
                                      "-D",         stem.string() + ".headers",
                                      "-w",         "%{http_code}"};
        argv.insert(argv.end(), curl_args_.begin(), curl_args_.end());
        argv.insert(argv.end(), args.begin(), args.end());
        argv.push_back(path.starts_with("http") ? path : base_url_ + path);
        spawn(argv, {}, stem.string() + ".code", stem.string() + ".err");
        reply r;
        r.status = std::atoi(slurp(stem.string() + ".code").c_str());
        r.headers = slurp(stem.string() + ".headers");
        r.body = slurp(stem.string() + ".body");
        r.error = slurp(stem.string() + ".err");
        return r;
    }

    reply post(
        const std::string& path, const std::string& body, std::vector<std::string> extra = {}
    ) {
        const auto file = dir_ / ("post" + std::to_string(calls_ + 1));
        std::ofstream(file, std::ios::binary) << body;
        std::vector<std::string> args{"-X",
                                      "POST",
                                      "-H",
                                      "Content-Type: application/json",
                                      "--data-binary",
                                      "@" + file.string()};
        args.insert(args.end(), extra.begin(), extra.end());
        return curl(path, std::move(args));
    }

    /// Polls GET `path` until `done(reply)` or `timeout`; yields the last reply.
    template <class Done>
    reply poll(const std::string& path, Done done, std::chrono::seconds timeout = 30s) {
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        reply r = curl(path);
        while (!done(r) && std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(50ms);
            r = curl(path);
        }
        return r;
    }

    /// Waits until the cluster has a master and a worker, as the facade sees it.
    void wait_ready() {
        const auto r = poll("/v1/cluster", [](const reply& x) {
            if (x.status != 200) {
                return false;
            }
            const auto v = x.json();
            return !v.at("master").is_null() && !v.at("workers").as_array().empty();
        });
        ASSERT_EQ(r.status, 200) << r;
    }

    /// The metrics as the Python Prometheus parser read them: "name{labels-json}" -> value,
    /// and "family" -> type. Fails the test when the parser refuses the text, or when
    /// `promtool check metrics` (Prometheus's own parser and linter) finds a problem.
    std::map<std::string, std::string> parse_metrics(const std::string& text) {
        const auto in = dir_ / "metrics.txt";
        std::ofstream(in, std::ios::binary) << text;
        const int checked = spawn(
            {"/usr/bin/promtool", "check", "metrics"}, in, dir_ / "promtool.out",
            dir_ / "promtool.err"
        );
        EXPECT_EQ(checked, 0) << "promtool check metrics refused /metrics: "
                              << slurp(dir_ / "promtool.out") << slurp(dir_ / "promtool.err")
                              << "\n"
                              << text;
        const std::string script =
            "import sys, json, prometheus_client.parser as p\n"
            "for f in p.text_string_to_metric_families(sys.stdin.read()):\n"
            "    print('family', f.name, f.type)\n"
            "    for s in f.samples:\n"
            "        print('sample', s.name + json.dumps(s.labels, sort_keys=True, "
            "separators=(',', ':')), repr(s.value))\n";
        const int rc =
            spawn({"/usr/bin/python3", "-c", script}, in, dir_ / "parsed.txt", dir_ / "parsed.err");
        EXPECT_EQ(rc, 0) << "the Prometheus parser refused /metrics: " << slurp(dir_ / "parsed.err")
                         << "\n"
                         << text;
        std::map<std::string, std::string> out;
        std::istringstream lines(slurp(dir_ / "parsed.txt"));
        std::string kind;
        std::string key;
        std::string value;
        while (lines >> kind >> key >> value) {
            out[(kind == "family" ? "family:" : "") + key] = value;
        }
        return out;
    }

    std::string ns_ = "h";
    int capacity_ = 2;  ///< the node's slots
    zkd::handlers::registry registry_;
    zkd::reactor::compute_pool pool_{2};
    zkd::roles::node_stats stats_;
    zkd::reactor::lag_probe lag_{ioc_.get_executor(), 20ms};
    std::unique_ptr<zkd::http::server> server_;
    asio::cancellation_signal node_stop_;
    asio::cancellation_signal http_stop_;
    std::thread io_;
    std::promise<void> io_done_;
    std::future<void> io_finished_;
    bool started_ = false;
    std::string base_url_;
    std::uint16_t port_ = 0;
    std::vector<std::string> curl_args_;  ///< given to every curl (a token, a CA file)
    fs::path dir_;
    int calls_ = 0;
};

TEST_F(Http, SubmitWaitInspectAndMetrics) {
    start();
    wait_ready();

    // Submit and wait: the result as stored.
    auto echo = post("/v1/tasks?wait=30000", R"({"type":"echo","args":{"x":1}})");
    ASSERT_EQ(echo.status, 200) << echo;
    EXPECT_EQ(echo.header("Content-Type"), "application/json");
    auto ej = echo.json();
    EXPECT_EQ(ej.at("state"), "succeeded") << echo;
    EXPECT_EQ(ej.at("value"), json::parse(R"({"x":1})"));
    EXPECT_TRUE(ej.at("task").is_string());
    auto sum = post("/v1/tasks?wait=30000", R"({"type":"sum","args":[1,2,3],"priority":9})");
    ASSERT_EQ(sum.status, 200) << sum;
    EXPECT_EQ(sum.json().at("value").at("sum"), 6);
    // Waited-for results are consumed, like `zkd submit --wait`.
    const auto waited = json::value_to<std::string>(ej.at("task"));
    auto consumed = poll("/v1/tasks/" + waited, [](const reply& r) { return r.status == 404; });
    EXPECT_EQ(consumed.status, 404) << consumed;
    EXPECT_EQ(consumed.error_code(), "unknown_task");

    // Submit, then look: a finished task shows its result, and looking consumes nothing.
    auto later = post("/v1/tasks", R"({"type":"echo","args":"later"})");
    ASSERT_EQ(later.status, 201) << later;
    const auto id = json::value_to<std::string>(later.json().at("id"));
    auto seen = poll("/v1/tasks/" + id, [](const reply& r) {
        return r.status == 200 && r.json().at("state") == "succeeded";
    });
    ASSERT_EQ(seen.status, 200) << seen;
    auto sj = seen.json();
    EXPECT_EQ(sj.at("id"), json::value(id));
    EXPECT_EQ(sj.at("result").at("value"), "later");
    EXPECT_TRUE(sj.at("worker").is_string());
    auto again = curl("/v1/tasks/" + id);
    EXPECT_EQ(again.status, 200) << again;
    EXPECT_EQ(again.json().at("result").at("state"), "succeeded");

    // Many at once.
    auto many = post(
        "/v1/tasks",
        R"([{"type":"echo","args":1},{"type":"echo","args":2},{"type":"sleep","args":{"ms":1}}])"
    );
    ASSERT_EQ(many.status, 201) << many;
    ASSERT_EQ(many.json().at("ids").as_array().size(), 3U);
    // Many in one bundle: the ids name the bundle's tasks, each readable on its own.
    auto bundled =
        post("/v1/tasks?bundle=10", R"([{"type":"echo","args":"a"},{"type":"echo","args":"b"}])");
    ASSERT_EQ(bundled.status, 201) << bundled;
    const auto bundled_ids = bundled.json().at("ids").as_array();
    ASSERT_EQ(bundled_ids.size(), 2U);
    const auto second = json::value_to<std::string>(bundled_ids.at(1));
    EXPECT_EQ(second.substr(second.size() - 4), "_2.1") << second;
    auto second_result = poll("/v1/tasks/" + second, [](const reply& x) {
        return x.status == 200 && x.json().at("state") == "succeeded";
    });
    EXPECT_EQ(second_result.json().at("result").at("value"), "b") << second_result;
    EXPECT_EQ(second_result.json().at("id"), json::value(second));

    // The task list and the cluster.
    auto tasks = curl("/v1/tasks?limit=50");
    ASSERT_EQ(tasks.status, 200) << tasks;
    auto tj = tasks.json();
    EXPECT_TRUE(tj.at("pending").is_array());
    EXPECT_TRUE(tj.at("assigned").is_array());
    EXPECT_EQ(tj.at("limit"), 50);
    EXPECT_EQ(tj.at("truncated"), false);
    auto cluster = curl("/v1/cluster");
    ASSERT_EQ(cluster.status, 200) << cluster;
    auto cj = cluster.json();
    EXPECT_GE(cj.at("epoch").as_int64(), 1);
    EXPECT_EQ(cj.at("workers").as_array().size(), 1U);
    EXPECT_EQ(cj.at("workers").at(0).at("capacity"), 2);
    EXPECT_EQ(cj.at("workers").at(0).at("host"), "httptest");
    EXPECT_EQ(cj.at("master").at("host"), "httptest");

    // Metrics, through the Prometheus parser.
    const auto many_ids = many.json();
    for (const auto& ids : many_ids.at("ids").as_array()) {
        auto r = poll("/v1/tasks/" + json::value_to<std::string>(ids), [](const reply& x) {
            return x.status == 200 && x.json().at("state") == "succeeded";
        });
        EXPECT_EQ(r.status, 200) << r;
    }
    auto metrics = curl("/metrics");
    ASSERT_EQ(metrics.status, 200) << metrics;
    EXPECT_EQ(metrics.header("Content-Type").rfind("text/plain; version=0.0.4", 0), 0U)
        << metrics.header("Content-Type");
    auto m = parse_metrics(metrics.body);
    EXPECT_EQ(m["family:zkd_tasks_submitted"], "counter");
    EXPECT_EQ(m["zkd_tasks_submitted_total{}"], "8.0");  // bundled tasks count one by one
    EXPECT_EQ(m["family:zkd_assign_latency_seconds"], "histogram");
    EXPECT_EQ(m["family:zkd_event_loop_lag_seconds"], "summary");
    EXPECT_TRUE(m.contains("zkd_event_loop_lag_seconds_count{}"));
    EXPECT_EQ(m["zkd_master{}"], "1.0");
    EXPECT_EQ(m["zkd_zk_session_state{\"state\":\"connected\"}"], "1.0");
    EXPECT_GE(std::stod(m["zkd_tasks_completed_total{\"state\":\"succeeded\"}"]), 6.0);
    // Each node (bundles are one each) placed by the master or directly by the facade's
    // client (docs/protocol.md §6 T1 "Direct placement").
    const auto by_master = std::stod(m["zkd_tasks_assigned_total{}"]);
    const auto directly = std::stod(m["zkd_tasks_placed_directly_total{}"]);
    EXPECT_GE(by_master + directly, 6.0);
    EXPECT_GT(directly, 0.0);
    EXPECT_GE(std::stod(m["zkd_assign_latency_seconds_count{}"]), 1.0);  // the bundles
    EXPECT_GE(std::stod(m["zkd_http_requests_total{\"code\":\"201\"}"]), 2.0);
    EXPECT_GE(std::stod(m["zkd_http_requests_total{\"code\":\"200\"}"]), 5.0);
    EXPECT_TRUE(m.contains("zkd_event_loop_lag_seconds{\"quantile\":\"0.99\"}"));
    EXPECT_TRUE(m.contains("zkd_event_loop_lag_last_seconds{}"));
    EXPECT_EQ(m["zkd_zk_sessions_total{}"], "1.0");

    // Keep-alive: curl sends two requests over one connection.
    const auto stem = dir_ / "keepalive";
    spawn(
        {"curl", "-sS", "-o", "/dev/null", "-o", "/dev/null", "-w",
         "%{http_code} %{num_connects}\n", base_url_ + "/metrics", base_url_ + "/v1/cluster"},
        {}, stem.string() + ".out", stem.string() + ".err"
    );
    EXPECT_EQ(slurp(stem.string() + ".out"), "200 1\n200 0\n") << slurp(stem.string() + ".err");
}

TEST_F(Http, Schedules) {
    start();
    wait_ready();
    auto bad = post("/v1/schedules", R"({"name":"t","every_ms":10,"type":"echo"})");
    EXPECT_EQ(bad.status, 400) << bad;
    EXPECT_EQ(bad.error_code(), "invalid_schedule");
    auto added = post("/v1/schedules", R"({"name":"t","every_ms":1000,"type":"echo","args":[1]})");
    ASSERT_EQ(added.status, 201) << added;
    EXPECT_EQ(added.json().at("name"), "t");
    EXPECT_TRUE(added.json().as_object().contains("next_ms"));
    auto again = post("/v1/schedules", R"({"name":"t","every_ms":1000,"type":"echo"})");
    EXPECT_EQ(again.status, 409) << again;
    EXPECT_EQ(again.error_code(), "schedule_exists");
    // The master fires it: its count grows.
    auto fired = poll("/v1/schedules/t", [](const reply& r) {
        return r.status == 200 && r.json().at("fired").to_number<std::int64_t>() >= 2;
    });
    ASSERT_EQ(fired.status, 200) << fired;
    EXPECT_GE(fired.json().at("fired").to_number<std::int64_t>(), 2) << fired;
    auto list = curl("/v1/schedules");
    ASSERT_EQ(list.status, 200) << list;
    ASSERT_EQ(list.json().at("schedules").as_array().size(), 1U) << list;
    EXPECT_EQ(list.json().at("schedules").at(0).at("name"), "t");
    auto paused = post("/v1/schedules/t/pause", "");
    ASSERT_EQ(paused.status, 200) << paused;
    EXPECT_EQ(paused.json().at("paused"), true);
    EXPECT_FALSE(paused.json().as_object().contains("next_ms"));
    auto resumed = post("/v1/schedules/t/resume", "");
    ASSERT_EQ(resumed.status, 200) << resumed;
    EXPECT_EQ(resumed.json().at("paused"), false);
    auto wrong = curl("/v1/schedules/t/pause");
    EXPECT_EQ(wrong.status, 405) << wrong;
    EXPECT_EQ(wrong.header("Allow"), "POST");
    auto removed = curl("/v1/schedules/t", {"-X", "DELETE"});
    EXPECT_EQ(removed.status, 200) << removed;
    auto gone = curl("/v1/schedules/t");
    EXPECT_EQ(gone.status, 404) << gone;
    EXPECT_EQ(gone.error_code(), "unknown_schedule");
    EXPECT_EQ(curl("/v1/schedules/t", {"-X", "DELETE"}).status, 404);
}

TEST_F(Http, CancelARunningTaskAndWaitThatTimesOut) {
    start();
    wait_ready();
    // Not done in time: 202 with where it is.
    auto slow = post("/v1/tasks?wait=200", R"({"type":"sleep","args":{"ms":60000}})");
    ASSERT_EQ(slow.status, 202) << slow;
    const auto id = json::value_to<std::string>(slow.json().at("id"));
    const auto state = json::value_to<std::string>(slow.json().at("state"));
    EXPECT_TRUE(state == "pending" || state == "assigned" || state == "running") << state;

    auto running = poll("/v1/tasks/" + id, [](const reply& r) {
        return r.status == 200 && r.json().at("state") == "running";
    });
    ASSERT_EQ(running.json().at("state"), "running") << running;
    EXPECT_TRUE(running.json().at("worker").is_string());
    EXPECT_FALSE(running.json().as_object().contains("result"));

    auto cancel = curl("/v1/tasks/" + id, {"-X", "DELETE"});
    ASSERT_EQ(cancel.status, 202) << cancel;
    EXPECT_EQ(cancel.json().at("cancel"), "requested");
    EXPECT_EQ(cancel.json().at("state"), "running");
    auto cancelled = poll("/v1/tasks/" + id, [](const reply& r) {
        return r.status == 200 && r.json().at("state") == "cancelled";
    });
    ASSERT_EQ(cancelled.status, 200) << cancelled;
    EXPECT_EQ(cancelled.json().at("state"), "cancelled") << cancelled;
    EXPECT_EQ(cancelled.json().at("result").at("error").at("code"), "cancelled");
    // A finished task cannot be cancelled.
    auto late = curl("/v1/tasks/" + id, {"-X", "DELETE"});
    EXPECT_EQ(late.status, 404) << late;
    EXPECT_EQ(late.error_code(), "finished");
}

// /v1/workflows: a chain submitted and waited for, its status by id, the list, a cancel of a
// running one, and the errors (a bad spec, an unserved type, an unknown or malformed id).
TEST_F(Http, WorkflowsRunAndShowAndCancel) {
    start();
    wait_ready();
    auto done = post(
        "/v1/workflows?wait=30000", R"({"name":"pair","steps":{"a":{"type":"echo","args":2},)"
                                    R"("b":{"type":"sum","args":{"values":[1,2]},"after":["a"]}}})"
    );
    ASSERT_EQ(done.status, 200) << done;
    auto dj = done.json();
    EXPECT_EQ(dj.at("status"), "succeeded") << done;
    EXPECT_EQ(dj.at("name"), "pair");
    EXPECT_EQ(dj.at("steps").at("a").at("value"), 2);
    EXPECT_EQ(dj.at("steps").at("b").at("value").at("sum"), 3);
    const auto id = json::value_to<std::string>(dj.at("id"));
    auto again = curl("/v1/workflows/" + id);
    ASSERT_EQ(again.status, 200) << again;
    EXPECT_EQ(again.json().at("status"), "succeeded");

    // Without ?wait: 201 with the id; with a wait that ends first: 202 with its state.
    auto slow = post("/v1/workflows", R"({"steps":{"z":{"type":"sleep","args":{"ms":60000}}}})");
    ASSERT_EQ(slow.status, 201) << slow;
    const auto sid = json::value_to<std::string>(slow.json().at("id"));
    auto still = curl("/v1/workflows/" + sid + "?wait=200");
    ASSERT_EQ(still.status, 202) << still;
    EXPECT_EQ(still.json().at("status"), "running");
    auto listed = curl("/v1/workflows");
    ASSERT_EQ(listed.status, 200) << listed;
    std::set<std::string> ids;
    const auto lj = listed.json();
    for (const auto& w : lj.at("workflows").as_array()) {
        ids.insert(json::value_to<std::string>(w.at("id")));
    }
    EXPECT_TRUE(ids.contains(id) && ids.contains(sid)) << listed;
    auto cancel = curl("/v1/workflows/" + sid, {"-X", "DELETE"});
    ASSERT_EQ(cancel.status, 202) << cancel;
    EXPECT_EQ(cancel.json().at("cancel"), "requested");
    auto cancelled = curl("/v1/workflows/" + sid + "?wait=30000");
    ASSERT_EQ(cancelled.status, 200) << cancelled;
    EXPECT_EQ(cancelled.json().at("status"), "cancelled") << cancelled;

    auto cycle = post(
        "/v1/workflows", R"({"steps":{"a":{"type":"echo","after":["b"]},)"
                         R"("b":{"type":"echo","after":["a"]}}})"
    );
    EXPECT_EQ(cycle.status, 400) << cycle;
    EXPECT_EQ(cycle.error_code(), "invalid_spec");
    auto unserved = post("/v1/workflows", R"({"steps":{"a":{"type":"nobody-serves-this"}}})");
    EXPECT_EQ(unserved.status, 409) << unserved;
    EXPECT_EQ(unserved.error_code(), "unserved_type");
    auto not_json = post("/v1/workflows", "{");
    EXPECT_EQ(not_json.status, 400) << not_json;
    EXPECT_EQ(curl("/v1/workflows/not-an-id").error_code(), "bad_workflow_id");
    const auto unknown = curl("/v1/workflows/wf-0000000000001-00000001");
    EXPECT_EQ(unknown.status, 404) << unknown;
    EXPECT_EQ(unknown.error_code(), "unknown_workflow");
    EXPECT_EQ(curl("/v1/workflows", {"-X", "DELETE"}).status, 405);
}

// Delayed tasks, retries, schedules and workflows seen moving through every door of the
// facade: GET /v1/tasks and /v1/tasks/{id} (a delayed task, its due time), /v1/status (the
// queue's delayed count and earliest due, the node's jobs), and /metrics (the master's views
// and counters; a try that retries is no result).
TEST_F(Http, DelayedTasksRetriesSchedulesAndWorkflowsShowInMetricsAndStatus) {
    start();
    wait_ready();
    const auto metric = [this](const std::string& key) {
        auto m = parse_metrics(curl("/metrics").body);
        return m.contains(key) ? std::stod(m[key]) : -1.0;
    };
    EXPECT_EQ(metric("zkd_delayed_tasks{}"), 0.0);
    EXPECT_EQ(metric("zkd_schedules{\"state\":\"active\"}"), 0.0);
    EXPECT_EQ(metric("zkd_workflows{\"state\":\"succeeded\"}"), 0.0);
    EXPECT_EQ(metric("zkd_delayed_next_due_timestamp_seconds{}"), -1.0);  // none waits

    // A delayed task: listed delayed with its due time, counted, then run.
    auto delayed = post("/v1/tasks", R"({"type":"echo","args":7,"delay_ms":4000})");
    ASSERT_EQ(delayed.status, 201) << delayed;
    const auto id = json::value_to<std::string>(delayed.json().at("id"));
    auto listed = curl("/v1/tasks");
    ASSERT_EQ(listed.status, 200) << listed;
    ASSERT_EQ(listed.json().at("delayed_total"), 1) << listed;
    const auto entry = listed.json().at("delayed").at(0);
    EXPECT_EQ(entry.at("id"), json::value(id));
    EXPECT_EQ(entry.at("state"), "delayed");
    EXPECT_EQ(entry.at("try"), 1);
    const auto due_ms = entry.at("due_ms").to_number<std::int64_t>();
    EXPECT_EQ(curl("/v1/tasks/" + id).json().at("due_ms").to_number<std::int64_t>(), due_ms);
    const auto counted = poll("/metrics", [&](const reply& r) {
        auto m = parse_metrics(r.body);
        return m["zkd_delayed_tasks{}"] == "1.0";
    });
    auto m = parse_metrics(counted.body);
    EXPECT_EQ(m["zkd_delayed_tasks{}"], "1.0") << counted.body;
    EXPECT_EQ(m["family:zkd_delayed_tasks"], "gauge");
    EXPECT_DOUBLE_EQ(
        std::stod(m["zkd_delayed_next_due_timestamp_seconds{}"]), static_cast<double>(due_ms) / 1000
    );
    auto status = curl("/v1/status");
    ASSERT_EQ(status.status, 200) << status;
    EXPECT_EQ(status.json().at("queue").at("delayed"), 1) << status;
    EXPECT_EQ(
        status.json().at("queue").at("delayed_earliest_ms").to_number<std::int64_t>(), due_ms
    );
    EXPECT_EQ(status.json().at("cluster").at("delayed"), 1);
    EXPECT_EQ(status.json().at("node").at("jobs").at("delayed"), 1);
    auto ran = curl("/v1/tasks/" + id + "/result?wait=30000", {"-X", "DELETE"});
    ASSERT_EQ(ran.status, 200) << ran;
    EXPECT_EQ(ran.json().at("value"), 7);
    auto released = poll("/metrics", [&](const reply& r) {
        return parse_metrics(r.body)["zkd_delayed_tasks{}"] == "0.0";
    });
    m = parse_metrics(released.body);
    EXPECT_EQ(m["zkd_delayed_tasks{}"], "0.0") << released.body;
    EXPECT_EQ(m["zkd_delayed_released_total{}"], "1.0");
    EXPECT_FALSE(m.contains("zkd_delayed_next_due_timestamp_seconds{}"));

    // A task that fails twice: one final failure, one retried try (not a result).
    const auto failed_before = metric("zkd_tasks_completed_total{\"state\":\"failed\"}");
    auto retried =
        post("/v1/tasks?wait=30000", R"({"type":"fail","args":"no","retries":1,"backoff_ms":20})");
    ASSERT_EQ(retried.status, 200) << retried;
    EXPECT_EQ(retried.json().at("state"), "failed");
    EXPECT_EQ(retried.json().at("try"), 2);
    const std::string failed_key = "zkd_tasks_completed_total{\"state\":\"failed\"}";
    auto published = poll("/metrics", [&](const reply& r) {
        auto pm = parse_metrics(r.body);
        return pm.contains(failed_key) && std::stod(pm[failed_key]) > failed_before;
    });
    m = parse_metrics(published.body);
    EXPECT_EQ(std::stod(m[failed_key]), failed_before + 1) << published.body;
    EXPECT_EQ(m["zkd_worker_tries_retried_total{}"], "1.0") << published.body;

    // A schedule: counted active, then paused; its firings counted.
    auto added = post("/v1/schedules", R"({"name":"m","every_ms":1000,"type":"echo"})");
    ASSERT_EQ(added.status, 201) << added;
    auto firing = poll("/metrics", [&](const reply& r) {
        auto pm = parse_metrics(r.body);
        return pm["zkd_schedules{\"state\":\"active\"}"] == "1.0" &&
               pm.contains("zkd_schedule_firings_total{}") &&
               std::stod(pm["zkd_schedule_firings_total{}"]) >= 1;
    });
    m = parse_metrics(firing.body);
    EXPECT_EQ(m["zkd_schedules{\"state\":\"active\"}"], "1.0") << firing.body;
    EXPECT_GE(std::stod(m["zkd_schedule_firings_total{}"]), 1.0) << firing.body;
    EXPECT_GE(std::stod(m["zkd_schedule_last_lateness_seconds{}"]), 0.0) << firing.body;
    ASSERT_EQ(post("/v1/schedules/m/pause", "").status, 200);
    auto paused = poll("/metrics", [&](const reply& r) {
        return parse_metrics(r.body)["zkd_schedules{\"state\":\"paused\"}"] == "1.0";
    });
    EXPECT_EQ(parse_metrics(paused.body)["zkd_schedules{\"state\":\"active\"}"], "0.0");
    EXPECT_EQ(curl("/v1/schedules/m", {"-X", "DELETE"}).status, 200);

    // A workflow: counted succeeded with its steps once it ended.
    auto wf = post(
        "/v1/workflows?wait=30000", R"({"steps":{"a":{"type":"echo","args":1},)"
                                    R"("b":{"type":"echo","args":2,"after":["a"]}}})"
    );
    ASSERT_EQ(wf.status, 200) << wf;
    ASSERT_EQ(wf.json().at("status"), "succeeded") << wf;
    auto counted_wf = poll("/metrics", [&](const reply& r) {
        return parse_metrics(r.body)["zkd_workflows{\"state\":\"succeeded\"}"] == "1.0";
    });
    m = parse_metrics(counted_wf.body);
    EXPECT_EQ(m["zkd_workflows{\"state\":\"succeeded\"}"], "1.0") << counted_wf.body;
    EXPECT_EQ(m["zkd_workflows{\"state\":\"running\"}"], "0.0");
    EXPECT_EQ(m["zkd_workflow_steps{\"state\":\"succeeded\"}"], "2.0");
    EXPECT_EQ(m["zkd_workflow_tasks_launched_total{}"], "2.0");
    const auto jobs = curl("/v1/status").json().at("node").at("jobs");
    EXPECT_EQ(jobs.at("workflows").at("by_state").at("succeeded"), 1) << jobs;
    EXPECT_EQ(jobs.at("retried"), 1) << jobs;
}

// GET /v1/tasks/{id}/result waits for a result and shows it; DELETE waits and consumes it,
// once its answer is written.
TEST_F(Http, WaitForAResultByIdThenConsumeIt) {
    start();
    wait_ready();
    auto slow = post("/v1/tasks", R"({"type":"sleep","args":{"ms":1500}})");
    ASSERT_EQ(slow.status, 201) << slow;
    const auto id = json::value_to<std::string>(slow.json().at("id"));

    // Not finished, no wait: 202 with where it is, at once.
    auto now = curl("/v1/tasks/" + id + "/result");
    ASSERT_EQ(now.status, 202) << now;
    EXPECT_EQ(now.json().at("id"), json::value(id));
    const auto state = json::value_to<std::string>(now.json().at("state"));
    EXPECT_TRUE(state == "pending" || state == "assigned" || state == "running") << state;

    // GET with a wait: the result once it comes, not consumed.
    auto shown = curl("/v1/tasks/" + id + "/result?wait=30000");
    ASSERT_EQ(shown.status, 200) << shown;
    EXPECT_EQ(shown.json().at("task"), json::value(id));
    EXPECT_EQ(shown.json().at("state"), "succeeded");
    auto again = curl("/v1/tasks/" + id + "/result");
    ASSERT_EQ(again.status, 200) << again;  // a finished task answers without a wait
    EXPECT_EQ(again.json().at("state"), "succeeded");

    // DELETE: delivered and consumed.
    auto taken = curl("/v1/tasks/" + id + "/result?wait=30000", {"-X", "DELETE"});
    ASSERT_EQ(taken.status, 200) << taken;
    EXPECT_EQ(taken.json().at("state"), "succeeded");
    auto gone = poll("/v1/tasks/" + id + "/result", [](const reply& r) { return r.status == 404; });
    ASSERT_EQ(gone.status, 404) << gone;
    EXPECT_EQ(gone.error_code(), "unknown_task");
    EXPECT_EQ(gone.json().at("id"), json::value(id));  // errors about a task name it

    // DELETE waiting on a task still running: it delivers the result when it comes.
    auto echo = post("/v1/tasks", R"({"type":"sleep","args":{"ms":300}})");
    ASSERT_EQ(echo.status, 201) << echo;
    const auto eid = json::value_to<std::string>(echo.json().at("id"));
    auto waited = curl("/v1/tasks/" + eid + "/result?wait=30000", {"-X", "DELETE"});
    ASSERT_EQ(waited.status, 200) << waited;
    EXPECT_EQ(waited.json().at("task"), json::value(eid));
    auto consumed = poll("/v1/tasks/" + eid, [](const reply& r) { return r.status == 404; });
    EXPECT_EQ(consumed.status, 404) << consumed;

    // A failed task's result is delivered like any other (its state says how it ended).
    auto fail = post("/v1/tasks", R"({"type":"fail","args":"on purpose"})");
    ASSERT_EQ(fail.status, 201) << fail;
    const auto fid = json::value_to<std::string>(fail.json().at("id"));
    auto failed = curl("/v1/tasks/" + fid + "/result?wait=30000", {"-X", "DELETE"});
    ASSERT_EQ(failed.status, 200) << failed;
    EXPECT_EQ(failed.json().at("state"), "failed");
    EXPECT_TRUE(failed.json().at("error").at("code").is_string()) << failed;

    // Refusals.
    auto unknown = curl("/v1/tasks/t5-1763733600123-00000000000000/result?wait=100");
    EXPECT_EQ(unknown.status, 404) << unknown;
    EXPECT_EQ(unknown.error_code(), "unknown_task");
    auto bad_id = curl("/v1/tasks/nope/result");
    EXPECT_EQ(bad_id.status, 400) << bad_id;
    EXPECT_EQ(bad_id.error_code(), "bad_task_id");
    auto bad_wait = curl("/v1/tasks/" + id + "/result?wait=soon");
    EXPECT_EQ(bad_wait.status, 400) << bad_wait;
    EXPECT_EQ(bad_wait.error_code(), "bad_query");
    auto post_it = post("/v1/tasks/" + id + "/result", "{}");
    EXPECT_EQ(post_it.status, 405) << post_it;
    EXPECT_EQ(post_it.header("Allow"), "GET, DELETE");
}

// A wait that runs out says where the task is and leaves its result; a later wait gets it.
TEST_F(Http, AResultWaitThatTimesOutThenACancelledResult) {
    start();
    wait_ready();
    auto slow = post("/v1/tasks?wait=100", R"({"type":"sleep","args":{"ms":60000}})");
    ASSERT_EQ(slow.status, 202) << slow;  // the submit's own wait ran out: the id is there
    const auto id = json::value_to<std::string>(slow.json().at("id"));
    auto waited = curl("/v1/tasks/" + id + "/result?wait=200", {"-X", "DELETE"});
    ASSERT_EQ(waited.status, 202) << waited;
    EXPECT_EQ(waited.json().at("id"), json::value(id));
    EXPECT_TRUE(waited.json().at("state").is_string()) << waited;
    auto cancel = curl("/v1/tasks/" + id, {"-X", "DELETE"});
    ASSERT_EQ(cancel.status, 202) << cancel;
    auto cancelled = curl("/v1/tasks/" + id + "/result?wait=30000", {"-X", "DELETE"});
    ASSERT_EQ(cancelled.status, 200) << cancelled;
    EXPECT_EQ(cancelled.json().at("state"), "cancelled");
    EXPECT_EQ(cancelled.json().at("error").at("code"), "cancelled");
}

// A type no worker serves is refused, as `zkd submit` refuses it, unless the task says it may
// be served later.
TEST_F(Http, AnUnservedTypeIsRefusedUnlessAllowed) {
    start();
    wait_ready();
    auto refused = post("/v1/tasks", R"({"type":"resize","args":1})");
    ASSERT_EQ(refused.status, 409) << refused;
    EXPECT_EQ(refused.error_code(), "unserved_type");
    const auto message = json::value_to<std::string>(refused.json().at("error").at("message"));
    EXPECT_NE(message.find("'resize'"), std::string::npos) << message;
    EXPECT_NE(message.find("echo"), std::string::npos) << message;  // what is served
    EXPECT_NE(message.find("allow_unserved"), std::string::npos) << message;
    // One unserved task refuses the whole array: nothing is submitted.
    auto mixed = post("/v1/tasks", R"([{"type":"echo"},{"type":"resize"}])");
    ASSERT_EQ(mixed.status, 409) << mixed;
    auto listed = curl("/v1/tasks");
    ASSERT_EQ(listed.status, 200) << listed;
    EXPECT_EQ(listed.json().at("pending_total"), 0) << listed;
    EXPECT_EQ(listed.json().at("assigned_total"), 0) << listed;

    // Allowed: it is submitted and waits for a worker that serves it.
    auto later = post("/v1/tasks", R"({"type":"resize","args":1,"allow_unserved":true})");
    ASSERT_EQ(later.status, 201) << later;
    const auto id = json::value_to<std::string>(later.json().at("id"));
    auto pending = curl("/v1/tasks/" + id);
    ASSERT_EQ(pending.status, 200) << pending;
    EXPECT_EQ(pending.json().at("state"), "pending");
    auto cancel = curl("/v1/tasks/" + id, {"-X", "DELETE"});
    EXPECT_EQ(cancel.status, 202) << cancel;
    // A served type is not held up by the check.
    auto fine = post("/v1/tasks?wait=30000", R"({"type":"echo","args":"served"})");
    EXPECT_EQ(fine.status, 200) << fine;
}

TEST_F(Http, ErrorsAreJsonWithTheRightStatus) {
    start();
    wait_ready();
    auto bad_json = post("/v1/tasks", R"({"type":"echo",)");
    EXPECT_EQ(bad_json.status, 400) << bad_json;
    EXPECT_EQ(bad_json.error_code(), "bad_json");
    EXPECT_EQ(bad_json.header("Content-Type"), "application/json");
    EXPECT_TRUE(bad_json.json().at("error").at("message").is_string());

    auto bad_type = post("/v1/tasks", R"({"type":"no such type!"})");
    EXPECT_EQ(bad_type.status, 400) << bad_type;
    EXPECT_EQ(bad_type.error_code(), "invalid_task");
    auto bad_field = post("/v1/tasks", R"({"type":"echo","prio":3})");
    EXPECT_EQ(bad_field.status, 400) << bad_field;
    EXPECT_EQ(bad_field.error_code(), "invalid_task");
    auto bad_wait = post("/v1/tasks?wait=soon", R"({"type":"echo"})");
    EXPECT_EQ(bad_wait.status, 400) << bad_wait;
    EXPECT_EQ(bad_wait.error_code(), "bad_query");
    auto bad_bundle = post("/v1/tasks?bundle=0", R"([{"type":"echo"}])");
    EXPECT_EQ(bad_bundle.status, 400) << bad_bundle;
    EXPECT_EQ(bad_bundle.error_code(), "bad_query");

    const std::string unknown_id = "t4-1763733600123-3fa9c2d100002a";
    auto unknown = curl("/v1/tasks/" + unknown_id);
    EXPECT_EQ(unknown.status, 404) << unknown;
    EXPECT_EQ(unknown.error_code(), "unknown_task");
    auto cancel_unknown = curl("/v1/tasks/" + unknown_id, {"-X", "DELETE"});
    EXPECT_EQ(cancel_unknown.status, 404) << cancel_unknown;
    auto malformed = curl("/v1/tasks/not-a-task-id");
    EXPECT_EQ(malformed.status, 400) << malformed;
    EXPECT_EQ(malformed.error_code(), "bad_task_id");

    // 2 MiB: refused from its Content-Length (curl waits for 100-continue and stops).
    const std::string big = R"({"type":"echo","args":")" + std::string(2U << 20U, 'x') + R"("})";
    auto too_big = post("/v1/tasks", big);
    EXPECT_EQ(too_big.status, 413) << too_big;
    EXPECT_EQ(too_big.error_code(), "body_too_large");
    // Without 100-continue the client sends it all anyway: still a clean 413, not a reset.
    auto pushed = post("/v1/tasks", big, {"-H", "Expect:"});
    EXPECT_EQ(pushed.status, 413) << pushed;
    EXPECT_EQ(pushed.error_code(), "body_too_large");
    // The same body chunked (no length up front): refused once the limit is crossed.
    auto chunked = post("/v1/tasks", big, {"-H", "Transfer-Encoding: chunked"});
    EXPECT_EQ(chunked.status, 413) << chunked;
    EXPECT_EQ(chunked.error_code(), "body_too_large");
    // A task over 512 KiB inside an acceptable body.
    const std::string large_task =
        R"({"type":"echo","args":")" + std::string(600'000, 'y') + R"("})";
    auto too_large = post("/v1/tasks", large_task);
    EXPECT_EQ(too_large.status, 413) << too_large;
    EXPECT_EQ(too_large.error_code(), "task_too_large");
    // Headers over the limit.
    auto fat = curl("/v1/cluster", {"-H", "X-Fat: " + std::string(20'000, 'h')});
    EXPECT_EQ(fat.status, 431) << fat;
    EXPECT_EQ(fat.error_code(), "headers_too_large");

    auto put = curl("/v1/tasks", {"-X", "PUT"});
    EXPECT_EQ(put.status, 405) << put;
    EXPECT_EQ(put.header("Allow"), "GET, POST");
    EXPECT_EQ(put.error_code(), "method_not_allowed");
    auto delete_cluster = curl("/v1/cluster", {"-X", "DELETE"});
    EXPECT_EQ(delete_cluster.status, 405) << delete_cluster;
    EXPECT_EQ(delete_cluster.header("Allow"), "GET, HEAD");
    auto post_task = curl("/v1/tasks/" + unknown_id, {"-X", "POST", "--data", "{}"});
    EXPECT_EQ(post_task.status, 405) << post_task;
    EXPECT_EQ(post_task.header("Allow"), "GET, DELETE");

    // HEAD gets the header alone (curl would report bytes it did not expect otherwise): where
    // a GET only reads, the GET's header; elsewhere a 405.
    auto head = curl("/metrics", {"-I"});
    EXPECT_EQ(head.status, 200) << head;
    EXPECT_NE(head.header("Content-Length"), "0");
    EXPECT_EQ(head.body, head.headers);  // -I writes the header block to both
    EXPECT_EQ(head.error, "");
    head = curl("/v1/tasks/" + unknown_id, {"-I"});
    EXPECT_EQ(head.status, 405) << head;
    EXPECT_EQ(head.header("Allow"), "GET, DELETE");
    EXPECT_NE(head.header("Content-Length"), "0");
    EXPECT_EQ(head.body, head.headers);  // -I writes the header block to both
    EXPECT_EQ(head.error, "");

    auto nowhere = curl("/v2/nothing");
    EXPECT_EQ(nowhere.status, 404) << nowhere;
    EXPECT_EQ(nowhere.error_code(), "not_found");
    EXPECT_EQ(nowhere.header("Content-Type"), "application/json");

    // Still serving after all that, and it counted every refusal.
    auto m = parse_metrics(curl("/metrics").body);
    EXPECT_GE(std::stod(m["zkd_http_requests_total{\"code\":\"400\"}"]), 5.0);
    EXPECT_EQ(m["zkd_http_requests_total{\"code\":\"413\"}"], "4.0");
    EXPECT_EQ(m["zkd_http_requests_total{\"code\":\"431\"}"], "1.0");
    EXPECT_EQ(m["zkd_http_requests_total{\"code\":\"405\"}"], "4.0");
    EXPECT_EQ(m["zkd_tasks_submitted_total{}"], "0.0");
}

TEST_F(Http, UnreachableZooKeeperIs503InBoundedTime) {
    // A port nobody listens on.
    std::uint16_t dead_port = 0;
    {
        asio::io_context probe;
        asio::ip::tcp::acceptor a(probe, {asio::ip::address_v4::loopback(), 0});
        dead_port = a.local_endpoint().port();
    }
    start(false, "127.0.0.1:" + std::to_string(dead_port) + "/zkd/h");
    const auto t0 = std::chrono::steady_clock::now();
    auto cluster = curl("/v1/cluster");
    auto submit = post("/v1/tasks", R"({"type":"echo"})");
    auto task = curl("/v1/tasks/t4-1763733600123-3fa9c2d100002a");
    const auto took = std::chrono::steady_clock::now() - t0;
    EXPECT_EQ(cluster.status, 503) << cluster;
    EXPECT_EQ(cluster.error_code(), "zookeeper_unavailable");
    EXPECT_EQ(submit.status, 503) << submit;
    EXPECT_EQ(task.status, 503) << task;
    EXPECT_LT(took, 30s);  // bounded by the facade's zk_timeout, not a hang
    // What needs no ZooKeeper still works; the node's metrics are left out (no stats source).
    auto metrics = curl("/metrics");
    EXPECT_EQ(metrics.status, 200);
    auto m = parse_metrics(metrics.body);
    EXPECT_EQ(m["zkd_http_requests_total{\"code\":\"503\"}"], "3.0");
    EXPECT_FALSE(m.contains("family:zkd_master"));
    EXPECT_TRUE(m.contains("family:zkd_event_loop_lag_seconds"));
}

TEST_F(Http, NoClusterYetIs503) {
    // The namespace exists but holds no cluster (no /meta): nothing is created by reading.
    run([&]() -> asio::awaitable<void> {
        zkd::zkco::config cfg = make_config();
        zkd::zkco::client zk(ioc_.get_executor(), cfg);
        auto c = co_await zkd::zkco::with_timeout(zk.connect(), 30s);
        EXPECT_TRUE(c);
        auto made = co_await zkd::test::create_all(zk, zkd::protocol::chroot_path(ns_));
        EXPECT_TRUE(made);
        co_await zk.close();
    }());
    start(false);
    auto r = poll("/v1/cluster", [](const reply& x) { return x.error_code() == "no_cluster"; });
    EXPECT_EQ(r.status, 503) << r;
    EXPECT_EQ(r.error_code(), "no_cluster");
}

TEST_F(Http, ANewSessionAfterExpiry) {
    start();
    wait_ready();
    const auto first = on_io([this] { return server_->zk_session(); });
    ASSERT_TRUE(first);
    EXPECT_EQ(on_io([this] { return server_->zk_sessions(); }), 1U);
    // Expire the facade's session from outside: attach a twin to it and close the twin. The
    // facade's client may win the session back before the twin's close goes out (the twin is
    // then disconnected and its close sends nothing): try again until the session is gone.
    auto expired = asio::co_spawn(
        ioc_,
        [this, handle = *first]() -> asio::awaitable<bool> {
            for (int attempt = 0; attempt < 20; ++attempt) {
                zkd::zkco::config cfg;
                cfg.connect_string = cluster_connect();
                cfg.session_timeout = 4s;
                cfg.resume = handle;
                zkd::zkco::client twin(co_await asio::this_coro::executor, cfg);
                co_await zkd::zkco::with_timeout(twin.connect(), 10s);
                co_await twin.close();
                const bool renewed = co_await zkd::test::wait_for(
                    [this] { return server_->zk_sessions() >= 2; }, 6s
                );
                if (renewed) {
                    co_return true;
                }
            }
            co_return false;
        },
        asio::use_future
    );
    ASSERT_TRUE(expired.get());
    // The facade notices, makes a new session, and serves again.
    auto back = poll(
        "/v1/cluster",
        [this](const reply& r) {
            return r.status == 200 && on_io([this] { return server_->zk_sessions(); }) >= 2;
        },
        60s
    );
    EXPECT_EQ(back.status, 200) << back;
    EXPECT_EQ(on_io([this] { return server_->zk_sessions(); }), 2U);
    const auto second = on_io([this] { return server_->zk_session(); });
    ASSERT_TRUE(second);
    EXPECT_NE(second->id, first->id);
    auto submit = post("/v1/tasks?wait=30000", R"({"type":"echo","args":"after"})");
    EXPECT_EQ(submit.status, 200) << submit;
}

// A client that leaves during POST ?wait loses nothing: the result is consumed
// only once an answer carrying it was written.
TEST_F(Http, AWaitingClientThatLeavesLeavesTheResult) {
    start();
    wait_ready();
    {
        raw_client c(port_);
        c.send(raw_post("/v1/tasks?wait=60000", R"({"type":"sleep","args":{"ms":1500}})"));
        c.close();
    }
    // The task was submitted: find it while it runs.
    std::string id;
    const auto listed = poll("/v1/tasks", [&id](const reply& r) {
        if (r.status != 200) {
            return false;
        }
        const auto v = r.json();
        for (const auto* list : {"pending", "assigned"}) {
            for (const auto& t : v.at(list).as_array()) {
                id = json::value_to<std::string>(t.at("id"));
            }
        }
        return !id.empty();
    });
    ASSERT_FALSE(id.empty()) << listed;
    // The facade noticed the client left, and the result stays once the task is done.
    auto m = poll("/metrics", [this](const reply& r) {
        return parse_metrics(r.body)["zkd_http_waits_abandoned_total{}"] == "1.0";
    });
    EXPECT_EQ(parse_metrics(m.body)["zkd_http_waits_abandoned_total{}"], "1.0") << m.body;
    auto done = poll("/v1/tasks/" + id, [](const reply& r) {
        return r.status != 200 || r.json().at("state") == "succeeded";
    });
    ASSERT_EQ(done.status, 200) << done;
    EXPECT_EQ(done.json().at("result").at("state"), "succeeded") << done;
    auto still = curl("/v1/tasks/" + id);
    EXPECT_EQ(still.status, 200) << still;

    // A client that stays gets the result, and then it is consumed.
    auto echo = post("/v1/tasks?wait=30000", R"({"type":"echo","args":"kept"})");
    ASSERT_EQ(echo.status, 200) << echo;
    const auto waited = json::value_to<std::string>(echo.json().at("task"));
    auto consumed = poll("/v1/tasks/" + waited, [](const reply& r) { return r.status == 404; });
    EXPECT_EQ(consumed.status, 404) << consumed;
}

// Slow clients cannot shut others out. When every slot is taken, the connection that has
// waited longest for its client's header is closed to make room; only when every slot serves
// a request is a connection answered 503 (never reset) and counted.
TEST_F(Http, SlowClientsMakeRoomAndOnlyBusySlotsMeanA503NotAReset) {
    start(true, {}, [](zkd::http::server_options& o) {
        o.max_connections = 3;
        o.header_timeout = 3s;
    });
    wait_ready();
    // curl's connections are over (the server saw them close): the slots are free.
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (on_io([this] { return server_->open_connections(); }) > 0 &&
           std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(10ms);
    }
    ASSERT_EQ(on_io([this] { return server_->open_connections(); }), 0U);
    std::vector<std::unique_ptr<raw_client>> slow;
    for (int i = 0; i < 5; ++i) {
        slow.push_back(std::make_unique<raw_client>(port_));
        slow.back()->send("GET /v1/cluster HTTP/1.1\r\nHost: 127.0.0.1\r\n");  // never ends
    }
    // The fourth and fifth closed the two oldest, without an answer.
    for (int i = 0; i < 2; ++i) {
        const auto got = slow[i]->read_all();
        EXPECT_EQ(got, "");
        EXPECT_FALSE(slow[i]->timed_out) << "slow client " << i << " was not closed";
    }
    // A client that sends its request is served while the other three still wait.
    auto served = curl("/v1/cluster");
    EXPECT_EQ(served.status, 200) << served;
    // The slow ones are dropped once their header is late (or room is made), unanswered.
    for (int i = 2; i < 5; ++i) {
        const auto got = slow[i]->read_all();
        EXPECT_EQ(got, "");
        EXPECT_FALSE(slow[i]->timed_out) << "the server kept a slow connection for 30 s";
    }
    // Every slot serving a request (three waits on sleeping tasks): the next is told 503.
    std::vector<std::unique_ptr<raw_client>> waits;
    for (int i = 0; i < 3; ++i) {
        waits.push_back(std::make_unique<raw_client>(port_));
        waits.back()->send(raw_post("/v1/tasks?wait=20000", R"({"type":"sleep","args":3000})"));
    }
    reply busy;
    for (int i = 0; i < 100 && busy.status != 503; ++i) {
        busy = curl("/v1/cluster");
    }
    EXPECT_EQ(busy.status, 503) << busy;
    EXPECT_EQ(busy.error_code(), "busy") << busy;
    EXPECT_EQ(busy.header("Retry-After"), "1");
    for (auto& w : waits) {
        const auto got = w->read_all();
        EXPECT_EQ(got.rfind("HTTP/1.1 200", 0), 0U) << got;
    }
    auto m = parse_metrics(poll("/metrics", [](const reply& r) { return r.status == 200; }).body);
    EXPECT_GE(std::stod(m["zkd_http_rejected_total{\"reason\":\"busy\"}"]), 1.0);
    EXPECT_GE(std::stod(m["zkd_http_rejected_total{\"reason\":\"waiting\"}"]), 3.0);
}

// 300 slowloris connections (each sends part of a header, then nothing), against the default
// 256 slots, and 40 more as slots are freed: a client with the token is served every time.
TEST_F(Http, SlowlorisConnectionsDoNotLockOutAClientWithTheToken) {
    const std::string token = "Zk8-slowloris_token.0123456789";
    start(true, {}, [&token](zkd::http::server_options& o) { o.token = token; });
    const std::vector<std::string> with_token{"-H", "Authorization: Bearer " + token};
    reply ready;
    for (int i = 0; i < 200; ++i) {
        ready = curl("/v1/cluster", with_token);
        if (ready.status == 200 && !ready.json().at("master").is_null()) {
            break;
        }
        std::this_thread::sleep_for(50ms);
    }
    ASSERT_EQ(ready.status, 200) << ready;
    std::vector<int> slow;
    const auto open_slow = [&] {
        const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in to{};
        to.sin_family = AF_INET;
        to.sin_port = htons(port_);
        to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to), 0);
        constexpr std::string_view part = "GET /v1/cluster HTTP/1.1\r\nHost: 127.0.0.1\r\n";
        ASSERT_EQ(
            ::send(fd, part.data(), part.size(), MSG_NOSIGNAL), static_cast<ssize_t>(part.size())
        );
        slow.push_back(fd);
    };
    for (int i = 0; i < 300; ++i) {
        open_slow();
    }
    int served = 0;
    for (int probe = 0; probe < 20; ++probe) {
        auto r = curl("/v1/cluster", with_token);
        EXPECT_EQ(r.status, 200) << "probe " << probe << ": " << r;
        served += r.status == 200 ? 1 : 0;
        for (int i = 0; i < 2; ++i) {
            open_slow();  // the attacker comes back as slots are freed
        }
    }
    EXPECT_EQ(served, 20);
    for (const int fd : slow) {
        ::close(fd);
    }
}

// With a token, every endpoint wants it (401 with WWW-Authenticate otherwise).
TEST_F(Http, ATokenIsRequiredOnEveryEndpoint) {
    const std::string token = "Zk8-secret_token.0123456789";
    start(true, {}, [&token](zkd::http::server_options& o) { o.token = token; });
    for (const std::string path :
         {"/v1/cluster", "/v1/tasks", "/metrics", "/v1/tasks/t4-1763733600123-3fa9c2d100002a",
          "/nowhere"}) {
        auto r = curl(path);
        EXPECT_EQ(r.status, 401) << path << ": " << r;
        EXPECT_EQ(r.error_code(), "unauthorized") << path;
        EXPECT_EQ(r.header("WWW-Authenticate"), R"(Bearer realm="zkd")") << path;
    }
    auto wrong = curl("/v1/cluster", {"-H", "Authorization: Bearer " + token + "x"});
    EXPECT_EQ(wrong.status, 401) << wrong;
    auto basic = curl("/v1/cluster", {"-u", "zkd:" + token});
    EXPECT_EQ(basic.status, 401) << basic;
    auto submit = post("/v1/tasks", R"({"type":"echo"})");
    EXPECT_EQ(submit.status, 401) << submit;
    auto cancel = curl("/v1/tasks/t4-1763733600123-3fa9c2d100002a", {"-X", "DELETE"});
    EXPECT_EQ(cancel.status, 401) << cancel;

    curl_args_ = {"-H", "Authorization: Bearer " + token};
    wait_ready();
    auto ok = post("/v1/tasks?wait=30000", R"({"type":"echo","args":1})");
    EXPECT_EQ(ok.status, 200) << ok;
    auto m = parse_metrics(curl("/metrics").body);
    EXPECT_EQ(m["zkd_tasks_submitted_total{}"], "1.0");  // the refused POST submitted nothing
    EXPECT_GE(std::stod(m["zkd_http_requests_total{\"code\":\"401\"}"]), 9.0);
}

// A browser on this machine cannot be used against a loopback server: no other
// Host (DNS rebinding), no other Origin, no form or text/plain POST (CSRF).
TEST_F(Http, BrowsersElsewhereAreRefused) {
    start();
    wait_ready();
    const auto port = std::to_string(port_);
    for (const auto& host : std::vector<std::string>{
             "evil.example:" + port, "evil.example", "127.0.0.1:1",
             "localhost.evil.example:" + port, "10.0.0.1:" + port}) {
        auto r = curl("/v1/cluster", {"-H", "Host: " + host});
        EXPECT_EQ(r.status, 403) << host << ": " << r;
        EXPECT_EQ(r.error_code(), "bad_host") << host;
    }
    for (const auto& host : std::vector<std::string>{
             "localhost:" + port, "localhost", "127.0.0.1", "127.0.0.2:" + port, "[::1]:" + port}) {
        auto r = curl("/v1/cluster", {"-H", "Host: " + host});
        EXPECT_EQ(r.status, 200) << host << ": " << r;
    }
    // A web page elsewhere: refused, and nothing is submitted.
    auto cross = post("/v1/tasks", R"({"type":"echo"})", {"-H", "Origin: http://evil.example"});
    EXPECT_EQ(cross.status, 403) << cross;
    EXPECT_EQ(cross.error_code(), "cross_origin");
    auto other_port =
        post("/v1/tasks", R"({"type":"echo"})", {"-H", "Origin: http://127.0.0.1:3000"});
    EXPECT_EQ(other_port.status, 403) << other_port;
    auto fetch = curl("/v1/cluster", {"-H", "Sec-Fetch-Site: cross-site"});
    EXPECT_EQ(fetch.status, 403) << fetch;
    // What a page can send without asking first (a CORS "simple request").
    auto plain = curl(
        "/v1/tasks",
        {"-X", "POST", "-H", "Content-Type: text/plain", "--data", R"({"type":"echo"})"}
    );
    EXPECT_EQ(plain.status, 415) << plain;
    EXPECT_EQ(plain.error_code(), "unsupported_media_type");
    auto form = curl("/v1/tasks", {"-X", "POST", "--data", R"({"type":"echo"})"});
    EXPECT_EQ(form.status, 415) << form;
    auto none = curl("/v1/tasks", {"-X", "POST", "-H", "Content-Type:", "--data", "{}"});
    EXPECT_EQ(none.status, 415) << none;
    // Its own origin, and JSON with a charset, are fine.
    auto same = curl(
        "/v1/tasks",
        {"-X", "POST", "-H", "Origin: http://127.0.0.1:" + port, "-H",
         "Content-Type: application/json; charset=utf-8", "--data", R"({"type":"echo"})"}
    );
    EXPECT_EQ(same.status, 201) << same;
    auto m = parse_metrics(curl("/metrics").body);
    EXPECT_EQ(m["zkd_tasks_submitted_total{}"], "1.0");
}

// HTTPS with a certificate and key (made here with the openssl CLI).
TEST_F(Http, ServesHttpsWithACertificate) {
    const auto cert = dir_ / "cert.pem";
    const auto key = dir_ / "key.pem";
    const int made = spawn(
        {"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "1", "-subj", "/CN=localhost", "-addext",
         "subjectAltName=IP:127.0.0.1,DNS:localhost", "-keyout", key.string(), "-out",
         cert.string()},
        {}, dir_ / "openssl.out", dir_ / "openssl.err"
    );
    ASSERT_EQ(made, 0) << "openssl (Debian package openssl): " << slurp(dir_ / "openssl.err");
    start(true, {}, [&](zkd::http::server_options& o) {
        o.tls_cert_file = cert.string();
        o.tls_key_file = key.string();
        o.token = "tls-token-0123456789";
    });
    curl_args_ = {"--cacert", cert.string(), "-H", "Authorization: Bearer tls-token-0123456789"};
    wait_ready();
    auto echo = post("/v1/tasks?wait=30000", R"({"type":"echo","args":"over tls"})");
    ASSERT_EQ(echo.status, 200) << echo;
    EXPECT_EQ(echo.json().at("value"), "over tls");
    auto by_name = curl("https://localhost:" + std::to_string(port_) + "/v1/cluster");
    EXPECT_EQ(by_name.status, 200) << by_name;
    // Keep-alive over TLS.
    const auto stem = dir_ / "keepalive";
    spawn(
        {"curl", "-sS", "--cacert", cert.string(), "-H",
         "Authorization: Bearer tls-token-0123456789", "-o", "/dev/null", "-o", "/dev/null", "-w",
         "%{http_code} %{num_connects}\n", base_url_ + "/metrics", base_url_ + "/v1/cluster"},
        {}, stem.string() + ".out", stem.string() + ".err"
    );
    EXPECT_EQ(slurp(stem.string() + ".out"), "200 1\n200 0\n") << slurp(stem.string() + ".err");
    // Plain HTTP gets nothing from it, and the server goes on.
    auto plain = curl("http://127.0.0.1:" + std::to_string(port_) + "/v1/cluster");
    EXPECT_NE(plain.status, 200) << plain;
    auto after = curl("/v1/cluster");
    EXPECT_EQ(after.status, 200) << after;
}

// `zkd run` will not expose the API beyond loopback (or a protected cluster's
// API) without a token and TLS, unless told to; bad token or TLS files are usage errors.
TEST_F(Http, RunRefusesToExposeTheApi) {
    const auto token_file = dir_ / "token";
    std::ofstream(token_file) << "run-token-0123456789\n";
    const auto spaced = dir_ / "spaced";
    std::ofstream(spaced) << "two words\n";
    const auto garbage = dir_ / "garbage.pem";
    std::ofstream(garbage) << "not a certificate\n";
    const std::string zk = base_ + chroot_;
    struct refused {
        std::vector<std::string> args;
        std::string says;
    };
    const std::vector<refused> cases{
        {{"--http", "0.0.0.0:0"}, "--http-token-file"},
        {{"--http", "[::]:0", "--http-token-file", token_file.string()}, "--http-tls-cert"},
        {{"--http", "127.0.0.1:0", "--user", "u", "--password", "p"}, "credentials"},
        {{"--http", "127.0.0.1:0", "--http-token-file", (dir_ / "none").string()},
         "--http-token-file"},
        {{"--http", "127.0.0.1:0", "--http-token-file", spaced.string()}, "no spaces"},
        {{"--http", "127.0.0.1:0", "--http-tls-cert", garbage.string()}, "go together"},
        {{"--http", "127.0.0.1:0", "--http-tls-cert", garbage.string(), "--http-tls-key",
          garbage.string()},
         "cannot serve HTTP"},
        {{"--http", "127.0.0.1:0", "--http-max-connections", "0"}, "--http-max-connections"},
        {{"--http", "18395"}, "--http wants HOST:PORT, [IPV6]:PORT or :PORT"},
        {{"--http", "localhost:99999"}, "not 'localhost:99999'"},
    };
    for (const auto& c : cases) {
        std::vector<std::string> argv{ZKD_BINARY, "run", "--zk", zk, "--namespace", ns_};
        argv.insert(argv.end(), c.args.begin(), c.args.end());
        const auto r = zkd::test::run_command(argv, {}, 30s);
        EXPECT_EQ(r.exit_code, 2) << c.args.front() << " " << c.args.at(1) << ": " << r.err;
        EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
    }
    // ZKD_HTTP_TOKEN_FILE is --http-token-file.
    const auto env = zkd::test::run_command(
        {ZKD_BINARY, "run", "--zk", zk, "--namespace", ns_, "--http", "0.0.0.0:0"},
        {{"ZKD_HTTP_TOKEN_FILE", token_file.string()}}, 30s
    );
    EXPECT_EQ(env.exit_code, 2) << env.err;
    EXPECT_NE(env.err.find("--http-tls-cert"), std::string::npos) << env.err;
}

// `zkd run --http-token-file` serves only requests with the token.
TEST_F(Http, RunServesOnlyWithTheToken) {
    const auto token_file = dir_ / "token";
    std::ofstream(token_file) << "run-token-0123456789\n";
    std::uint16_t port = 0;
    {
        asio::io_context probe;
        asio::ip::tcp::acceptor a(probe, {asio::ip::address_v4::loopback(), 0});
        port = a.local_endpoint().port();
    }
    zkd::test::zkd_process node(
        ZKD_BINARY, base_ + chroot_, ns_, "tokened", dir_ / "node.log",
        {"--http", "127.0.0.1:" + std::to_string(port), "--http-token-file", token_file.string()}
    );
    base_url_ = "http://127.0.0.1:" + std::to_string(port);
    curl_args_ = {"-H", "Authorization: Bearer run-token-0123456789"};
    auto ready = poll("/v1/cluster", [](const reply& r) {
        return r.status == 200 && !r.json().at("workers").as_array().empty();
    });
    ASSERT_EQ(ready.status, 200) << ready << slurp(dir_ / "node.log");
    auto echo = post("/v1/tasks?wait=30000", R"({"type":"echo","args":2})");
    EXPECT_EQ(echo.status, 200) << echo;
    curl_args_.clear();
    auto anonymous = curl("/v1/cluster");
    EXPECT_EQ(anonymous.status, 401) << anonymous;
    auto metrics = curl("/metrics");
    EXPECT_EQ(metrics.status, 401) << metrics;
}

// A result node holding garbage is a bad gateway (502), not a 200 with state "unknown".
TEST_F(Http, AGarbageResultIs502) {
    start();
    wait_ready();
    const std::string id = "t4-1763733600123-3fa9c2d100002a";
    auto written = asio::co_spawn(
        ioc_,
        [this, id]() -> asio::awaitable<std::string> {
            zkd::zkco::config cfg;
            cfg.connect_string = cluster_connect();
            cfg.session_timeout = 4s;
            zkd::zkco::client zk(co_await asio::this_coro::executor, cfg);
            const auto connected = co_await zkd::zkco::with_timeout(zk.connect(), 30s);
            if (!connected) {
                co_return "no session";
            }
            auto l = co_await zkd::roles::read_layout(zk);
            std::string problem = "no layout";
            if (l) {
                (void)co_await zk.create(l->result_dir(id));  // made on demand (§2)
                auto made = co_await zk.create(l->result(id), std::string("\xff not json"));
                problem = made ? "" : "cannot write the result";
            }
            co_await zk.close();
            co_return problem;
        },
        asio::use_future
    );
    ASSERT_EQ(written.get(), "");
    auto r = curl("/v1/tasks/" + id);
    EXPECT_EQ(r.status, 502) << r;
    EXPECT_EQ(r.error_code(), "garbage_result");
}

// A task of a bundle published early (docs/protocol.md §6 T4e) is read and consumed from its
// own node, here written by hand, as such a worker writes it, on a bundle of a type no worker
// serves (so that none runs it).
TEST_F(Http, ATaskOfABundlePublishedEarlyIsShownAndConsumedFromItsOwnNode) {
    start();
    wait_ready();
    auto bundled = post(
        "/v1/tasks?bundle=2", R"([{"type":"nobody-serves","args":1,"allow_unserved":true},)"
                              R"({"type":"nobody-serves","args":2,"allow_unserved":true}])"
    );
    ASSERT_EQ(bundled.status, 201) << bundled;
    const auto id = json::value_to<std::string>(bundled.json().at("ids").at(0));
    const auto other = json::value_to<std::string>(bundled.json().at("ids").at(1));
    auto before = curl("/v1/tasks/" + id);
    ASSERT_EQ(before.status, 200) << before;
    EXPECT_EQ(before.json().at("state"), "pending");
    const auto own = [&](bool write) {
        return asio::co_spawn(
                   ioc_,
                   [this, id, write]() -> asio::awaitable<std::string> {
                       zkd::zkco::config cfg;
                       cfg.connect_string = cluster_connect();
                       cfg.session_timeout = 4s;
                       zkd::zkco::client zk(co_await asio::this_coro::executor, cfg);
                       if (!co_await zkd::zkco::with_timeout(zk.connect(), 30s)) {
                           co_return "no session";
                       }
                       auto l = co_await zkd::roles::read_layout(zk);
                       if (!l) {
                           co_return "no layout";
                       }
                       const auto ref = zkd::protocol::parse_task_ref(id);
                       const auto path =
                           zkd::protocol::entry_result_path(*l, ref->node, *ref->index);
                       std::string problem;
                       if (write) {
                           zkd::protocol::task_result r;
                           r.task = id;
                           r.value = 42;
                           r.attempt = 1;
                           r.worker = "by-hand";
                           zkd::zkco::op::create c;
                           c.path = path;
                           c.data = encode(r);
                           std::vector<zkd::zkco::multi_op> ops;
                           ops.emplace_back(std::move(c));
                           zkd::roles::append_change_logs(ops);
                           const auto done = co_await zk.multi(std::move(ops));
                           problem = done ? "" : done.ec.message();
                       } else {
                           auto there = co_await zk.exists(path);
                           problem = !there ? there.error().message() : *there ? "there" : "";
                       }
                       co_await zk.close();
                       co_return problem;
                   },
                   asio::use_future
        )
            .get();
    };
    ASSERT_EQ(own(true), "");
    auto shown = curl("/v1/tasks/" + id);
    ASSERT_EQ(shown.status, 200) << shown;
    EXPECT_EQ(shown.json().at("state"), "succeeded");
    EXPECT_EQ(shown.json().at("worker"), "by-hand");
    EXPECT_EQ(shown.json().at("result").at("value"), json::value(42));
    auto neighbour = curl("/v1/tasks/" + other);
    ASSERT_EQ(neighbour.status, 200) << neighbour;
    EXPECT_EQ(neighbour.json().at("state"), "pending");
    auto taken = curl("/v1/tasks/" + id + "/result?wait=30000", {"-X", "DELETE"});
    ASSERT_EQ(taken.status, 200) << taken;
    EXPECT_EQ(taken.json().at("task"), json::value(id));
    EXPECT_EQ(taken.json().at("value"), json::value(42));
    std::string left = "there";
    for (int i = 0; i < 100 && left == "there"; ++i) {
        left = own(false);  // consumed once the answer is written: soon after
        if (left == "there") {
            std::this_thread::sleep_for(50ms);
        }
    }
    EXPECT_EQ(left, "") << "the task's own result node is still there";
}

// What the facade's ?wait stands on: task_client::await_result reads a result without
// consuming it (a plain task's, or one task's of a bundle), consume() consumes it.
TEST_F(Http, AwaitResultConsumesNothingUntilAsked) {
    start();
    wait_ready();
    auto checked = asio::co_spawn(
        ioc_,
        [this]() -> asio::awaitable<std::string> {
            zkd::zkco::config cfg;
            cfg.connect_string = cluster_connect();
            cfg.session_timeout = 4s;
            zkd::zkco::client zk(co_await asio::this_coro::executor, cfg);
            if (!co_await zkd::zkco::with_timeout(zk.connect(), 30s)) {
                co_return "no session";
            }
            auto l = co_await zkd::roles::read_layout(zk);
            if (!l) {
                co_await zk.close();
                co_return "no layout";
            }
            std::string problems;
            {
                zkd::roles::task_client tc(zk, *l);
                std::vector<zkd::protocol::task_spec> three(3);
                for (std::size_t i = 0; i < three.size(); ++i) {
                    three[i].type = "echo";
                    three[i].args = static_cast<std::int64_t>(i);
                }
                zkd::roles::submit_options bundled;
                bundled.bundle = 3;
                auto ids = co_await tc.submit(three, bundled);
                std::vector<zkd::protocol::task_spec> one(1);
                one[0].type = "echo";
                one[0].args = "plain";
                auto plain = co_await tc.submit(one);
                if (!ids || ids->size() != 3 || !plain) {
                    co_await zk.close();
                    co_return "submit failed";
                }
                const auto& b1 = ids->at(1);
                const auto& p = plain->front();
                for (const auto& id : {b1, b1, p, p}) {  // twice: nothing was consumed
                    auto r = co_await zkd::zkco::with_timeout(tc.await_result(id), 30s);
                    if (!r) {
                        problems += "await_result " + id + ": " + r.error().message() + "; ";
                    }
                }
                auto b1_value = co_await tc.await_result(b1);
                if (!b1_value || b1_value->value != json::value(1)) {
                    problems += "the bundled task's own value; ";
                }
                for (const auto& id : {b1, p}) {
                    if (auto c = co_await tc.consume(id); !c) {
                        problems += "consume " + id + ": " + c.error().message() + "; ";
                    }
                    auto gone = co_await tc.status(id);
                    if (!gone || gone->state != zkd::protocol::task_state::unknown) {
                        problems += id + " still there after consume; ";
                    }
                    if (auto again = co_await tc.consume(id); !again) {
                        problems += "consume twice " + id + "; ";
                    }
                }
                // The bundle's other tasks are still there.
                auto b0 = co_await tc.await_result(ids->at(0));
                if (!b0 || b0->value != json::value(0)) {
                    problems += "task 0 of the bundle went with task 1; ";
                }
                co_await tc.flush();
            }
            co_await zk.close();
            co_return problems;
        },  // co_spawn keeps the lambda (its captures) alive while the coroutine runs
        asio::use_future
    );
    EXPECT_EQ(checked.get(), "");
}

// The status page's files are served without the token (they hold no data) but
// with the Host and Origin checks and a strict CSP; its data, /v1/status, needs the token.
TEST_F(Http, TheStatusPageIsPublicItsDataIsNot) {
    const std::string token = "status-token-0123456789";
    start(true, {}, [&token](zkd::http::server_options& o) { o.token = token; });
    auto page = curl("/");
    ASSERT_EQ(page.status, 200) << page;
    EXPECT_EQ(page.header("Content-Type"), "text/html; charset=utf-8");
    EXPECT_NE(page.body.find("/ui/status.js"), std::string::npos);
    const auto csp = page.header("Content-Security-Policy");
    EXPECT_NE(csp.find("script-src 'self'"), std::string::npos) << csp;
    EXPECT_NE(csp.find("frame-ancestors 'none'"), std::string::npos) << csp;
    EXPECT_EQ(csp.find("unsafe-inline"), std::string::npos) << csp;
    EXPECT_EQ(page.header("X-Frame-Options"), "DENY");
    EXPECT_EQ(page.header("X-Content-Type-Options"), "nosniff");
    auto js = curl("/ui/status.js");
    EXPECT_EQ(js.status, 200) << js;
    EXPECT_EQ(js.header("Content-Type"), "text/javascript; charset=utf-8");
    EXPECT_EQ(curl("/ui/status.css").status, 200);
    EXPECT_EQ(curl("/ui/other.js").status, 404);
    auto posted = curl("/", {"-X", "POST", "-H", "Content-Type: application/json", "--data", "{}"});
    EXPECT_EQ(posted.status, 405) << posted;
    EXPECT_EQ(posted.header("Allow"), "GET, HEAD");
    // The checks that protect the API protect the page too.
    auto foreign = curl("/", {"-H", "Host: evil.example:" + std::to_string(port_)});
    EXPECT_EQ(foreign.status, 403) << foreign;
    EXPECT_EQ(foreign.error_code(), "bad_host");
    auto framed = curl("/ui/status.js", {"-H", "Sec-Fetch-Site: cross-site"});
    EXPECT_EQ(framed.status, 403) << framed;
    // The data needs the token.
    auto anonymous = curl("/v1/status");
    EXPECT_EQ(anonymous.status, 401) << anonymous;
    curl_args_ = {"-H", "Authorization: Bearer " + token};
    wait_ready();
    auto status = poll("/v1/status", [](const reply& r) {
        return r.status == 200 && r.json().as_object().contains("cluster");
    });
    ASSERT_EQ(status.status, 200) << status;
    const auto v = status.json();
    EXPECT_FALSE(v.at("cluster").at("master").is_null()) << status;
    EXPECT_EQ(v.at("queue").at("by_priority").as_array().size(), 10U) << status;
    EXPECT_EQ(v.at("node").at("session"), "connected") << status;
    EXPECT_TRUE(v.at("history").at("intervals").is_array()) << status;
    EXPECT_TRUE(v.at("running").is_array()) << status;
}

// /v1/status shows running tasks with their progress and lists failures found in
// the results.
TEST_F(Http, StatusShowsRunningTasksAndFailures) {
    start(true, {}, [](zkd::http::server_options& o) { o.status_max_age = 200ms; });
    wait_ready();
    auto sleeper = post("/v1/tasks", R"({"type":"sleep","args":20000})");
    ASSERT_EQ(sleeper.status, 201) << sleeper;
    const auto sleeping = json::value_to<std::string>(sleeper.json().at("id"));
    auto failing = post("/v1/tasks", R"({"type":"fail","args":"status test"})");
    ASSERT_EQ(failing.status, 201) << failing;
    const auto failed = json::value_to<std::string>(failing.json().at("id"));
    auto seen = poll("/v1/status", [&](const reply& r) {
        const auto v = r.json();
        if (r.status != 200 || !v.as_object().contains("running")) {
            return false;
        }
        bool running = false;
        for (const auto& t : v.at("running").as_array()) {
            running = running || (t.at("id") == sleeping.c_str() && t.at("state") == "running");
        }
        bool listed = false;
        for (const auto& f : v.at("failures").as_array()) {
            listed = listed || (f.at("id") == failed.c_str() && f.at("state") == "failed" &&
                                f.at("error").at("message") == "status test");
        }
        return running && listed;
    });
    EXPECT_EQ(seen.status, 200) << seen;
    const auto v = seen.json();
    EXPECT_GE(v.at("assigned_total").to_number<std::int64_t>(), 1) << seen;
}

// Beyond the results it scans, /v1/status says that it did not look for failures (and why)
// rather than showing none.
TEST_F(Http, StatusSaysWhenItDidNotScanTheResultsForFailures) {
    start(true, {}, [](zkd::http::server_options& o) {
        o.status_max_age = 200ms;
        o.status_results_scanned = 1;
    });
    wait_ready();
    for (int i = 0; i < 2; ++i) {
        auto failing = post("/v1/tasks", R"({"type":"fail","args":"unscanned"})");
        ASSERT_EQ(failing.status, 201) << failing;
    }
    auto seen = poll("/v1/status", [&](const reply& r) {
        if (r.status != 200) {
            return false;
        }
        const auto v = r.json();
        return v.as_object().contains("failures_scan") &&
               v.at("failures_scan").at("complete") == false;
    });
    ASSERT_EQ(seen.status, 200) << seen;
    const auto scan = seen.json().at("failures_scan");
    EXPECT_NE(
        json::value_to<std::string>(scan.at("reason"))
            .find("unconsumed results: more than the 1 this page scans"),
        std::string::npos
    ) << seen;
}

// The cluster part of /v1/status is read once per status_max_age, whoever asks:
// a change in the cluster meanwhile shows only once it is over.
TEST_F(Http, StatusSnapshotsAreSharedForTheirMaxAge) {
    capacity_ = 0;  // a master without a worker: a submitted task stays pending
    start(true, {}, [](zkd::http::server_options& o) { o.status_max_age = 60s; });
    auto master = poll("/v1/cluster", [](const reply& r) {
        return r.status == 200 && !r.json().at("master").is_null();
    });
    ASSERT_EQ(master.status, 200) << master;
    auto first = curl("/v1/status");
    ASSERT_EQ(first.status, 200) << first;
    ASSERT_EQ(first.json().at("cluster").at("pending"), 0) << first;
    ASSERT_EQ(post("/v1/tasks", R"({"type":"echo"})").status, 201);
    auto pending = poll("/v1/cluster", [](const reply& r) {
        return r.status == 200 && r.json().at("pending") == 1;
    });
    ASSERT_EQ(pending.json().at("pending"), 1) << pending;
    auto second = curl("/v1/status");
    ASSERT_EQ(second.status, 200) << second;
    EXPECT_EQ(second.json().at("cluster"), first.json().at("cluster")) << "read again";
    EXPECT_GT(second.json().at("age_ms").as_int64(), first.json().at("age_ms").as_int64());
}

}  // namespace

}  // namespace ZKD_UNITY_ID
