// SPDX-License-Identifier: MIT
// The status page (`zkd run --http` at /) in a real headless Chromium (Debian's `chromium`),
// driven over the DevTools protocol by tests/support/cdp_driver.py, against real zkd
// processes and the harness's real ZooKeeper: the page renders, follows a worker joining and
// leaving, a task running with its progress and a task failing, live (no reload), sends the
// token only as a header, and logs no console error, exception or failed load.
//
// ZKD_STATUS_SCREENSHOT=PATH also writes the page's screenshot there (docs/status-page.png
// is made so).
#include "support/processes.hpp"
#include "support/zk_fixture.hpp"

#include <boost/json.hpp>

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <netinet/in.h>
#include <optional>
#include <sstream>
#include <string>
#include <sys/socket.h>
#include <vector>

namespace ZKD_UNITY_ID {

namespace json = boost::json;
namespace fs = std::filesystem;
using namespace std::literals;

namespace {

std::string slurp(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

/// cdp_driver.py as a child process: one JSON command a line in, one answer a line out.
class browser {
public:
    explicit browser(const fs::path& workdir) : workdir_(workdir) {
        int in[2];
        int out[2];
        if (::pipe(in) != 0 || ::pipe(out) != 0) {
            return;
        }
        // Made before fork(): the child calls only async-signal-safe functions.
        const std::string err_path = (workdir / "driver.err").string();
        const std::string script = ZKD_CDP_DRIVER;
        const std::string chromium = "/usr/bin/chromium";
        const std::string dir = workdir.string();
        pid_ = ::fork();
        if (pid_ == 0) {
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);
            ::dup2(in[0], 0);
            ::dup2(out[1], 1);
            const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
            ::dup2(err, 2);
            ::close(in[1]);
            ::close(out[0]);
            ::execl(
                "/usr/bin/python3", "python3", script.c_str(), chromium.c_str(), dir.c_str(),
                static_cast<char*>(nullptr)
            );
            ::_exit(127);
        }
        ::close(in[0]);
        ::close(out[1]);
        to_ = in[1];
        from_ = out[0];
        ready_ = read_answer(90s);  // Chromium's first start can be slow
    }
    browser(const browser&) = delete;
    browser& operator=(const browser&) = delete;
    ~browser() {
        if (pid_ > 0) {
            if (to_ >= 0) {
                call(json::object{{"cmd", "quit"}}, 15s);
            }
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
        if (to_ >= 0) {
            ::close(to_);
        }
        if (from_ >= 0) {
            ::close(from_);
        }
    }

    /// The driver's first answer (Chromium started), or what went wrong.
    [[nodiscard]] const json::object& ready() const { return ready_; }

    /// Sends one command; its answer (`{"ok":false,"error":..}` if none came in `limit`).
    json::object call(const json::object& cmd, std::chrono::milliseconds limit = 30s) {
        const auto line = json::serialize(cmd) + "\n";
        if (::write(to_, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
            return {{"ok", false}, {"error", "cannot write to the driver"}};
        }
        return read_answer(limit);
    }

    /// Evaluates `expr` in the page until it is truthy: true if it became so within `limit`.
    bool wait_for(const std::string& expr, std::chrono::milliseconds limit = 20s) {
        auto r =
            call({{"cmd", "wait"}, {"expr", expr}, {"timeout_ms", limit.count()}}, limit + 30s);
        last_ = r;
        return r["ok"].is_bool() && r["ok"].as_bool();
    }

    [[nodiscard]] const json::object& last() const { return last_; }

    [[nodiscard]] std::string stderr_text() const { return slurp(workdir_ / "driver.err"); }

private:
    json::object read_answer(std::chrono::milliseconds limit) {
        const auto until = std::chrono::steady_clock::now() + limit;
        for (;;) {
            if (const auto nl = buffer_.find('\n'); nl != std::string::npos) {
                const auto line = buffer_.substr(0, nl);
                buffer_.erase(0, nl + 1);
                boost::system::error_code ec;
                auto v = json::parse(line, ec);
                if (ec || !v.is_object()) {
                    return {{"ok", false}, {"error", "not JSON from the driver: " + line}};
                }
                return v.as_object();
            }
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                until - std::chrono::steady_clock::now()
            );
            if (left.count() <= 0) {
                return {{"ok", false}, {"error", "no answer from the driver in time"}};
            }
            pollfd p{from_, POLLIN, 0};
            if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) {
                continue;
            }
            char buf[65536];
            const auto n = ::read(from_, buf, sizeof buf);
            if (n <= 0) {
                return {{"ok", false}, {"error", "the driver exited: " + stderr_text()}};
            }
            buffer_.append(buf, static_cast<std::size_t>(n));
        }
    }

    fs::path workdir_;
    pid_t pid_ = -1;
    int to_ = -1;
    int from_ = -1;
    std::string buffer_;
    json::object ready_;
    json::object last_;
};

/// A JavaScript expression: whether a row of the workers table has host `host`.
std::string worker_row(const std::string& host) {
    return "[...document.querySelectorAll('#workers tbody tr')].some(r => r.children.length > 1 && "
           "r.children[1].textContent === '" +
           host + "')";
}

class StatusPage : public zkd::test::zk_test {
protected:
    void SetUp() override {
        zk_test::SetUp();
        if (!ready_) {
            return;
        }
        dir_ = fs::temp_directory_path() / ("zkd-status-page-" + std::to_string(::getpid()));
        fs::remove_all(dir_);
        fs::create_directories(dir_);
        std::string missing;
        if (!fs::exists("/usr/bin/chromium")) {
            missing = "/usr/bin/chromium (Debian package chromium)";
        } else if (!fs::exists("/usr/bin/python3")) {
            missing = "/usr/bin/python3";
        } else if (zkd::test::run_command({"/usr/bin/curl", "--version"}, {}, 10s).exit_code != 0) {
            missing = "/usr/bin/curl (Debian package curl)";
        }
        if (!missing.empty()) {
            if (zkd::test::zk_required()) {
                FAIL() << "needed for this test (CI=true or ZKD_REQUIRE_ZK=1): " << missing;
            }
            GTEST_SKIP() << "needs " << missing;
        }
    }

    void TearDown() override {
        std::error_code ignored;
        if (!dir_.empty() && !HasFailure()) {
            fs::remove_all(dir_, ignored);
        } else if (!dir_.empty()) {
            std::cerr << "kept " << dir_ << " (logs, chromium.log)\n";
        }
        zk_test::TearDown();
    }

    static std::uint16_t free_port() {
        const int s = ::socket(AF_INET, SOCK_STREAM, 0);
        if (s < 0) {
            return 0;
        }
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t n = sizeof a;
        auto* any =
            reinterpret_cast<sockaddr*>(&a);  // NOLINT(cppcoreguidelines-pro-type-reinterpret-cast)
        const bool ok = ::bind(s, any, sizeof a) == 0 && ::getsockname(s, any, &n) == 0;
        ::close(s);
        return ok ? ntohs(a.sin_port) : 0;
    }

    /// curl against the node's API with the token; the body.
    zkd::test::command_result api(const std::vector<std::string>& args) {
        std::vector<std::string> argv{
            "/usr/bin/curl", "-sS", "--max-time", "30", "-H", "Authorization: Bearer " + token_};
        argv.insert(argv.end(), args.begin(), args.end());
        return zkd::test::run_command(argv, {}, 40s);
    }

    std::string submit(const std::string& task) {
        auto r = api(
            {"-X", "POST", "-H", "Content-Type: application/json", "--data", task,
             base_url_ + "/v1/tasks"}
        );
        boost::system::error_code ec;
        auto v = json::parse(r.out, ec);
        if (ec || !v.is_object() || !v.as_object().contains("id")) {
            ADD_FAILURE() << "submit " << task << ": " << r.out << r.err;
            return {};
        }
        return std::string(v.at("id").as_string());
    }

    fs::path dir_;
    std::string token_ = "status-page-token-0123456789";
    std::string base_url_;
};

// The page renders, follows the cluster live, and is quiet in the console.
TEST_F(StatusPage, ShowsWorkersJoiningAndLeavingAndTasksLiveWithoutConsoleErrors) {
    const auto started = std::chrono::steady_clock::now();
    const auto token_file = dir_ / "token";
    std::ofstream(token_file) << token_ << "\n";
    // A task type that reports progress, then runs until stopped (docs/exec.md).
    const auto slow = dir_ / "slow.sh";
    std::ofstream(slow) << "#!/bin/sh\n"
                           "echo '{\"progress\":0.4,\"message\":\"step 2 of 5\"}' >&3\n"
                           "sleep 60\necho '{}'\n";
    fs::permissions(slow, fs::perms::owner_all);
    const auto port = free_port();
    ASSERT_NE(port, 0) << "no free port";
    base_url_ = "http://127.0.0.1:" + std::to_string(port);
    const std::string zk = base_ + chroot_;
    zkd::test::zkd_process alpha(
        ZKD_BINARY, zk, "sp", "alpha", dir_ / "alpha.log",
        {"--http", "127.0.0.1:" + std::to_string(port), "--http-token-file", token_file.string(),
         "--exec", "slow=/bin/sh " + slow.string()}
    );
    browser b(dir_);
    ASSERT_TRUE(b.ready().at("ok").as_bool()) << json::serialize(b.ready()) << b.stderr_text();

    // A token goes in the fragment (never sent); the page polls every 250 ms. A wrong one
    // gets the form, where the right one is typed.
    const std::string wrong = "wrong-token-0123456789";
    auto opened = b.call({{"cmd", "open"}, {"url", base_url_ + "/#token=" + wrong + "&poll=250"}});
    ASSERT_TRUE(opened["ok"].as_bool()) << json::serialize(opened);
    ASSERT_TRUE(
        b.wait_for("!document.getElementById('login').hidden && "
                   "document.getElementById('login-why').textContent.includes('refused')")
    ) << "no token form after a 401: "
      << json::serialize(b.last());
    auto refused = b.call({{"cmd", "errors"}, {"clear", true}});
    for (const auto& e : refused["errors"].as_array()) {  // the 401 itself, nothing else
        EXPECT_NE(std::string(e.as_string()).find("401"), std::string::npos) << e;
    }
    ASSERT_TRUE(b.wait_for(
        "(() => { document.getElementById('token').value = '" + token_ +
        "'; "
        "document.getElementById('login').requestSubmit(); return true; })()"
    ));
    EXPECT_TRUE(b.wait_for("document.getElementById('login').hidden"));
    ASSERT_TRUE(b.wait_for(worker_row("alpha"), 30s))
        << "the page never showed worker alpha: " << json::serialize(b.last())
        << slurp(dir_ / "alpha.log");
    EXPECT_TRUE(b.wait_for("document.getElementById('master').textContent.includes('epoch')"))
        << json::serialize(b.last());
    EXPECT_TRUE(b.wait_for("!location.hash.includes('token') && location.hash.includes('poll')"))
        << "the token stayed in the URL";

    // A worker joins (only built-in types: the slow task stays on alpha) ...
    zkd::test::zkd_process beta(
        ZKD_BINARY, zk, "sp", "beta", dir_ / "beta.log", {"--role", "worker"}
    );
    EXPECT_TRUE(b.wait_for(worker_row("beta"))) << "the page never showed worker beta joining";

    // ... a task runs, with its progress ...
    const auto running = submit(R"({"type":"slow"})");
    EXPECT_TRUE(b.wait_for(
        "[...document.querySelectorAll('#running tbody tr')].some(r => r.dataset.task === '" +
        running +
        "' && r.textContent.includes('running') && r.textContent.includes('40%') && "
        "r.textContent.includes('step 2 of 5'))"
    )) << "the page never showed task "
       << running << " running with its progress: " << json::serialize(b.last());

    // ... one fails ...
    const auto failed = submit(R"({"type":"fail","args":"on purpose","max_attempts":1})");
    EXPECT_TRUE(b.wait_for(
        "[...document.querySelectorAll('#failures tbody tr')].some(r => r.dataset.task === '" +
        failed + "' && r.textContent.includes('on purpose'))"
    )) << "the page never listed the failed task "
       << failed;

    // ... and the worker leaves (SIGTERM: it drains, holding nothing, and goes).
    beta.kill(SIGTERM);
    EXPECT_EQ(beta.wait_exit(30s), 0) << slurp(dir_ / "beta.log");
    EXPECT_TRUE(b.wait_for("!(" + worker_row("beta") + ") && " + worker_row("alpha")))
        << "the page still shows worker beta after it left";

    // The charts are drawn by the page itself (inline SVG).
    EXPECT_TRUE(b.wait_for("document.querySelectorAll('#chart-throughput line').length >= 2"));

    if (const char* shot = std::getenv("ZKD_STATUS_SCREENSHOT")) {
        auto r = b.call({{"cmd", "screenshot"}, {"path", shot}, {"width", 1280}});
        EXPECT_TRUE(r["ok"].as_bool()) << json::serialize(r);
    }

    // Nothing went wrong in the page, and the token never went into a URL.
    auto errors = b.call({{"cmd", "errors"}});
    ASSERT_TRUE(errors["ok"].as_bool()) << json::serialize(errors);
    EXPECT_TRUE(errors["errors"].as_array().empty())
        << "console errors: " << json::serialize(errors["errors"]);
    auto requests = b.call({{"cmd", "requests"}});
    std::size_t status_polls = 0;
    for (const auto& r : requests["requests"].as_array()) {
        const auto url = std::string(r.at("url").as_string());
        // (A fragment is never part of a request, the page's own included.)
        EXPECT_EQ(url.find(token_), std::string::npos) << "the token in a URL: " << url;
        EXPECT_EQ(url.find(wrong), std::string::npos) << "a token in a URL: " << url;
        if (url.ends_with("/v1/status")) {
            const auto& h = r.at("headers").as_object();
            ASSERT_TRUE(h.contains("Authorization")) << json::serialize(r);
            const auto auth = std::string(h.at("Authorization").as_string());
            EXPECT_TRUE(auth == "Bearer " + token_ || auth == "Bearer " + wrong) << auth;
            status_polls += auth == "Bearer " + token_ ? 1 : 0;
        }
    }
    EXPECT_GE(status_polls, 3U) << "the page did not poll";
    // The server logged no request target holding the token either.
    EXPECT_EQ(slurp(dir_ / "alpha.log").find(token_), std::string::npos);
    std::cerr << "[ status page test took "
              << std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::steady_clock::now() - started
                 )
                     .count()
              << " ms ]\n";
}

}  // namespace

}  // namespace ZKD_UNITY_ID
