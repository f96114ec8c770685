// SPDX-License-Identifier: MIT
// Exec task types, the type itself (docs/exec.md): the start-up checks (resolve), what a
// run's outcome means (classify, progress lines) and the handler with its concurrency limit.
#include "handlers/exec.hpp"
#include "handlers/exec/detail/child.hpp"
#include "handlers/exec/detail/errors.hpp"
#include "protocol/syntax.hpp"
#include "protocol/text.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <grp.h>
#include <list>
#include <memory>
#include <mutex>
#include <pwd.h>
#include <set>
#include <stdexcept>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

namespace asio = boost::asio;
namespace json = boost::json;

namespace zkd::handlers::exec {

using detail::bad;
using detail::fail;
using detail::signal_name;

// --- start-up checks -------------------------------------------------------------------------

namespace {

bool is_executable_file(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
           ::access(path.c_str(), X_OK) == 0;
}

identity look_up_user(const std::string& type, const std::string& user) {
    std::array<char, 16384> buf{};
    passwd pw{};
    passwd* found = nullptr;
    const int rc = ::getpwnam_r(user.c_str(), &pw, buf.data(), buf.size(), &found);
    if (rc != 0 || found == nullptr) {
        bad("exec type '" + type + "': no such user '" + user + "'");
    }
    identity id;
    id.uid = pw.pw_uid;
    id.gid = pw.pw_gid;
    int n = 64;
    for (int tries = 0; tries < 4; ++tries) {
        id.groups.resize(static_cast<std::size_t>(n));
        int got = n;
        if (::getgrouplist(user.c_str(), pw.pw_gid, id.groups.data(), &got) >= 0) {
            id.groups.resize(static_cast<std::size_t>(got));
            break;
        }
        n = got > n ? got : n * 4;
    }
    return id;
}

}  // namespace

program resolve(program_config c, const env_lookup& lookup, const cgroup_support& cg) {
    const std::string& t = c.name;
    if (!is_valid_type_name(t)) {
        bad("exec type '" + t + "': not a task type name (1 to 128 of A-Z a-z 0-9 _ . : -)");
    }
    if (c.argv.empty()) {
        bad("exec type '" + t + "': no program given (exec." + t + " = PROGRAM [ARG...])");
    }
    program p;
    const std::string& prog = c.argv.front();
    if (prog.find('/') != std::string::npos) {
        p.path = prog;
    } else {
        const auto path = lookup("PATH").value_or("/usr/local/bin:/usr/bin:/bin");
        std::size_t start = 0;
        while (p.path.empty() && start <= path.size()) {
            auto colon = path.find(':', start);
            if (colon == std::string::npos) {
                colon = path.size();
            }
            std::string candidate = path.substr(start, colon - start);
            if (candidate.empty()) {
                candidate = ".";  // an empty entry is the current directory
            }
            candidate += '/';
            candidate += prog;
            if (is_executable_file(candidate)) {
                p.path = std::move(candidate);
            }
            start = colon + 1;
        }
        if (p.path.empty()) {
            bad("exec type '" + t + "': program '" + prog + "' is not in PATH");
        }
    }
    // Absolute, so that a working directory (`dir`) does not change which program runs.
    if (p.path.front() != '/') {
        std::array<char, PATH_MAX> cwd{};
        if (::getcwd(cwd.data(), cwd.size()) != nullptr) {
            p.path.insert(0, std::string(cwd.data()) + "/");
        }
    }
    if (!is_executable_file(p.path)) {
        struct stat st {};
        const bool exists = ::stat(p.path.c_str(), &st) == 0;
        bad("exec type '" + t + "': program '" + p.path + "' " +
            (!exists               ? "does not exist"
             : S_ISDIR(st.st_mode) ? "is a directory"
                                   : "is not executable"));
    }
    if (!c.dir.empty()) {
        struct stat st {};
        if (::stat(c.dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
            bad("exec type '" + t + "': working directory '" + c.dir + "' is not a directory");
        }
    }
    if (!c.user.empty()) {
        auto id = look_up_user(t, c.user);
        if (::geteuid() != 0 && id.uid != ::geteuid()) {
            bad("exec type '" + t + "': running as user '" + c.user + "' needs zkd to run as root");
        }
        if (::geteuid() == 0) {
            p.user = std::move(id);
        }
    }
    if (c.mode == run_mode::serve && c.concurrency > 0 && c.warm > c.concurrency) {
        bad("exec type '" + t + "': warm (" + std::to_string(c.warm) +
            ") cannot be more than concurrency (" + std::to_string(c.concurrency) + ")");
    }
    if (c.max_output == 0 || c.max_output > max_max_output) {
        bad("exec type '" + t + "': max-output must be from 1 byte to 512KiB");
    }
    for (const auto& e : c.env) {
        if (e.find('=') != std::string::npos) {
            p.env.push_back(e);
        } else if (auto v = lookup(e)) {
            p.env.push_back(e + "=" + *v);
        }
    }
    p.plan = plan_limits(c.limits, cg, p.user.has_value());
    if (p.plan.uses_cgroup()) {
        p.cgroup_parent = cg.path;
    }
    p.config = std::move(c);
    return p;
}

// --- results (pure) --------------------------------------------------------------------------

namespace {

using protocol::is_utf8;
using protocol::printable_utf8;

std::string with_stderr(std::string message, const std::string& tail) {
    if (!tail.empty()) {
        std::string t = printable_utf8(tail);
        while (!t.empty() && (t.back() == '\n' || t.back() == '\r')) {
            t.pop_back();
        }
        message += "; stderr: " + t;
    }
    return message;
}

}  // namespace

handler_result classify(const program_config& c, const run_outcome& o, const limit_plan& plan) {
    if (!o.start_error.empty()) {
        return fail(codes::handler_error, "cannot start the program: " + o.start_error);
    }
    if (!o.output_too_large) {
        limit_evidence e;
        e.exit_code = o.exit_code;
        e.signal = o.signal;
        e.stopped = o.stopped;
        e.cpu_used = o.cpu_used;
        e.oom_kills = o.oom_kills;
        e.pids_max = o.pids_max;
        const std::string tail = printable_utf8(o.stderr_tail);
        e.stderr_tail = tail;
        if (auto over = limit_exceeded(c.limits, plan, e)) {
            return *over;
        }
    }
    if (o.output_too_large) {
        return fail(
            codes::output_too_large, "the program wrote more than " + std::to_string(c.max_output) +
                                         " bytes on stdout (max-output); it was killed"
        );
    }
    if (o.signal != 0) {
        return fail(
            codes::handler_error,
            with_stderr(
                "the program was killed by signal " + std::to_string(o.signal) + " (" +
                    signal_name(o.signal) + ")",
                o.stderr_tail
            )
        );
    }
    if (o.exit_code != 0) {
        return fail(
            codes::handler_error,
            with_stderr(
                "the program exited with code " + std::to_string(o.exit_code), o.stderr_tail
            )
        );
    }
    if (c.output == output_mode::text) {
        if (!is_utf8(o.output)) {
            return fail(codes::handler_error, "the program's output is not UTF-8 text");
        }
        return json::value(json::string(o.output));
    }
    boost::system::error_code ec;
    json::value v = json::parse(o.output, ec);
    if (ec) {
        std::string head = printable_utf8(o.output.substr(0, 200));
        return fail(
            codes::handler_error,
            o.output.find_first_not_of(" \t\r\n") == std::string::npos
                ? std::string("the program printed no JSON on stdout")
                : "the program's output is not JSON (" + ec.message() + "): " + head
        );
    }
    return v;
}

std::optional<std::pair<double, std::string>> parse_progress_line(std::string_view line) {
    boost::system::error_code ec;
    const json::value v = json::parse(line, ec);
    if (ec || !v.is_object()) {
        return std::nullopt;
    }
    const json::value* p = v.get_object().if_contains("progress");
    if (p == nullptr || !p->is_number()) {
        return std::nullopt;
    }
    double f = p->to_number<double>();
    if (!std::isfinite(f)) {
        return std::nullopt;
    }
    f = std::clamp(f, 0.0, 1.0);
    std::string message;
    if (const json::value* m = v.get_object().if_contains("message");
        m != nullptr && m->is_string()) {
        message = printable_utf8(std::string_view(m->get_string()).substr(0, 200));
    }
    return std::pair{f, std::move(message)};
}

// --- the handler -----------------------------------------------------------------------------

namespace {

/// At most `max` runs at once (0: no limit); waiters go in order. Shared by every worker
/// that uses the registry, whatever thread runs it.
class limiter {
public:
    explicit limiter(int max) : max_(max) {}

    /// True with a place taken, false if `stop` came first.
    asio::awaitable<bool> acquire(std::stop_token stop) {
        const auto ex = co_await asio::this_coro::executor;
        auto w = std::make_shared<waiter>(ex);
        {
            const std::lock_guard lock(mutex_);
            if (max_ <= 0 || (running_ < max_ && queue_.empty())) {
                ++running_;
                co_return true;
            }
            queue_.push_back(w);
        }
        {
            const std::stop_callback on_stop(stop, [w] {
                asio::post(w->timer.get_executor(), [w] { w->timer.cancel(); });
            });
            for (;;) {
                {
                    const std::lock_guard lock(mutex_);
                    if (w->granted) {
                        co_return true;
                    }
                    if (stop.stop_requested()) {
                        queue_.remove(w);
                        co_return false;
                    }
                }
                co_await w->timer.async_wait(asio::as_tuple(asio::use_awaitable));
            }
        }
    }

    void release() {
        const std::lock_guard lock(mutex_);
        if (queue_.empty()) {
            --running_;
            return;
        }
        auto w = queue_.front();
        queue_.pop_front();
        w->granted = true;  // the place passes on: running_ stays
        asio::post(w->timer.get_executor(), [w] { w->timer.cancel(); });
    }

private:
    struct waiter {
        explicit waiter(const asio::any_io_executor& ex)
            : timer(ex, asio::steady_timer::time_point::max()) {}
        asio::steady_timer timer;
        bool granted = false;
    };

    std::mutex mutex_;
    int max_;
    int running_ = 0;
    std::list<std::shared_ptr<waiter>> queue_;
};

void ignore_sigpipe() {
    static std::once_flag once;
    std::call_once(once, [] {
        struct sigaction old {};
        if (::sigaction(SIGPIPE, nullptr, &old) == 0 &&
            old.sa_handler == SIG_DFL) {  // NOLINT(cppcoreguidelines-pro-type-union-access)
            ::signal(SIGPIPE, SIG_IGN);
        }
    });
}

}  // namespace

void add_exec_type(registry& reg, program p) {
    if (auto why = detail::check_supervisor_program(); !why.empty()) {
        throw std::invalid_argument("exec type " + p.config.name + ": " + why);
    }
    ignore_sigpipe();
    if (p.config.mode == run_mode::serve) {
        add_served_type(reg, std::move(p));
        return;
    }
    auto prog = std::make_shared<const program>(std::move(p));
    auto limit = std::make_shared<limiter>(prog->config.concurrency);
    const type_limits limits{prog->config.timeout, prog->config.max_timeout};
    auto handler = [prog, limit](async_call call) -> asio::awaitable<handler_result> {
        const bool placed = co_await limit->acquire(call.stop);  // not in the condition: GCC 12
        if (!placed) {
            co_return fail(codes::cancelled, "stopped while waiting for a place (concurrency)");
        }
        struct place {  // released however the run ends
            limiter* l;
            ~place() { l->release(); }
        } const held{limit.get()};
        call.started();
        std::vector<std::string> extra{
            "ZKD_TASK_ID=" + call.task, "ZKD_TASK_ATTEMPT=" + std::to_string(call.attempt),
            "ZKD_TASK_EPOCH=" + std::to_string(call.epoch), "ZKD_TASK_TYPE=" + prog->config.name,
            "ZKD_PROGRESS_FD=" + std::to_string(progress_fd)};
        const auto o = co_await run_program(
            *prog, protocol::to_text(call.args), call.stop, std::move(call.progress),
            std::move(extra)
        );
        if (!o.start_error.empty()) {
            spdlog::warn(
                "exec type {}: cannot start {}: {}", prog->config.name, prog->path, o.start_error
            );
        }
        co_return classify(prog->config, o, prog->plan);
    };
    reg.add_async(prog->config.name, std::move(handler), limits);
}

}  // namespace zkd::handlers::exec
