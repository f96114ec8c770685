// SPDX-License-Identifier: MIT
// Exec task types: one child program's whole life (spawn with its fds, environment, user and
// process group; stdin/stdout/stderr/fd 3 and the pidfd as Asio operations; the kill
// escalation; reaping), in one file because those parts share the child's state and its
// invariants (every child reaped, no fd leaked, no signal to a pid that may be reused);
// docs/exec.md is the contract.
#include "handlers/exec.hpp"
#include "protocol/syntax.hpp"

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

// --- running a program -----------------------------------------------------------------------

namespace {

class unique_fd {
public:
    unique_fd() = default;
    explicit unique_fd(int fd) : fd_(fd) {}
    unique_fd(const unique_fd&) = delete;
    unique_fd& operator=(const unique_fd&) = delete;
    unique_fd(unique_fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
    unique_fd& operator=(unique_fd&& o) noexcept {
        reset(std::exchange(o.fd_, -1));
        return *this;
    }
    ~unique_fd() { reset(); }
    [[nodiscard]] int get() const noexcept { return fd_; }
    int release() noexcept { return std::exchange(fd_, -1); }
    void reset(int fd = -1) noexcept {
        if (fd_ >= 0) {
            ::close(fd_);
        }
        fd_ = fd;
    }

private:
    int fd_ = -1;
};

struct pipe_ends {
    unique_fd read;
    unique_fd write;
};

bool make_pipe(pipe_ends& p) {
    std::array<int, 2> fds{-1, -1};
    if (::pipe2(fds.data(), O_CLOEXEC) != 0) {
        return false;
    }
    p.read.reset(fds[0]);
    p.write.reset(fds[1]);
    return true;
}

/// Where the child failed, sent to the parent with errno on the error pipe.
enum class stage : int { pgid = 1, pdeathsig, fds, dir, groups, gid, uid, exec };

const char* stage_text(stage s) {
    switch (s) {
    case stage::pgid:
        return "setpgid";
    case stage::pdeathsig:
        return "prctl(PR_SET_PDEATHSIG)";
    case stage::fds:
        return "setting up its file descriptors";
    case stage::dir:
        return "chdir to its working directory";
    case stage::groups:
        return "setgroups";
    case stage::gid:
        return "setgid";
    case stage::uid:
        return "setuid";
    case stage::exec:
        return "execve";
    }
    return "?";
}

/// Everything the child needs, prepared before fork(): the child may call only
/// async-signal-safe functions (the worker has other threads).
struct child_plan {
    const char* path = nullptr;
    char* const* argv = nullptr;
    char* const* envp = nullptr;
    const char* dir = nullptr;
    const identity* user = nullptr;
    pid_t parent = 0;
    std::array<int, 4> fds{};  // becomes 0 (stdin), 1, 2, 3 (progress)
    int error = -1;            // the error pipe's write end (close-on-exec)
};

[[noreturn]] void child_fail(int fd, stage s) {
    const std::array<int, 2> msg{static_cast<int>(s), errno};
    [[maybe_unused]] const auto n = ::write(fd, msg.data(), sizeof msg);
    ::_exit(127);
}

[[noreturn]] void run_child(const child_plan& p) {
    int err = p.error;
    // Its own process group, so that a stop reaches whatever it started; and it dies with
    // the thread that forked it (the loop thread). If the worker is already gone, so are we.
    if (::setpgid(0, 0) != 0) {
        child_fail(err, stage::pgid);
    }
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) {
        child_fail(err, stage::pdeathsig);
    }
    if (::getppid() != p.parent) {
        ::_exit(127);
    }
    // Ignored signals (SIGPIPE in the worker) would stay ignored across execve.
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;  // NOLINT(cppcoreguidelines-pro-type-union-access)
    for (int sig = 1; sig < NSIG; ++sig) {
        ::sigaction(sig, &dfl, nullptr);
    }
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    // Move every end out of 0..4 first: one of them may have such a number already.
    std::array<int, 5> high{};
    for (std::size_t i = 0; i < 4; ++i) {
        high[i] = ::fcntl(p.fds[i], F_DUPFD_CLOEXEC, 10);
        if (high[i] < 0) {
            child_fail(err, stage::fds);
        }
    }
    high[4] = ::fcntl(err, F_DUPFD_CLOEXEC, 10);
    if (high[4] < 0) {
        child_fail(err, stage::fds);
    }
    err = high[4];
    for (int i = 0; i < 4; ++i) {
        if (::dup2(high[static_cast<std::size_t>(i)], i) != i) {  // dup2 clears close-on-exec
            child_fail(err, stage::fds);
        }
    }
    if (::dup3(high[4], 4, O_CLOEXEC) != 4) {
        child_fail(err, stage::fds);
    }
    err = 4;
    // Nothing else of the worker's reaches the program, close-on-exec or not.
    if (::syscall(SYS_close_range, 5U, ~0U, 0U) != 0) {
        for (int fd = 5; fd < 65536; ++fd) {
            ::close(fd);
        }
    }
    if (p.dir != nullptr && ::chdir(p.dir) != 0) {
        child_fail(err, stage::dir);
    }
    if (p.user != nullptr) {
        if (::setgroups(p.user->groups.size(), p.user->groups.data()) != 0) {
            child_fail(err, stage::groups);
        }
        if (::setgid(p.user->gid) != 0) {
            child_fail(err, stage::gid);
        }
        if (::setuid(p.user->uid) != 0) {
            child_fail(err, stage::uid);
        }
    }
    ::execve(p.path, p.argv, p.envp);
    child_fail(err, stage::exec);
}

/// A started child and its pipes (the parent's ends), on the loop's executor.
struct child : std::enable_shared_from_this<child> {
    explicit child(const asio::any_io_executor& ex)
        : in(ex),
          out(ex),
          err(ex),
          progress(ex),
          error(ex),
          pidfd(ex),
          kill_timer(ex),
          drain_timer(ex) {}

    pid_t pid = 0;
    asio::posix::stream_descriptor in, out, err, progress, error, pidfd;
    asio::steady_timer kill_timer;   // SIGTERM → SIGKILL
    asio::steady_timer drain_timer;  // after exit: pipes held by escaped processes
    std::chrono::milliseconds grace{0};
    bool reaped = false;  // never signal its group after: the pid may be reused
    bool term_sent = false;
    int readers = 3;  // stdout, stderr, progress: until EOF
    run_outcome outcome;

    void signal_group(int sig) const {
        if (!reaped) {
            ::kill(-pid, sig);
        }
    }

    void terminate() {
        if (reaped || term_sent) {
            return;
        }
        term_sent = true;
        signal_group(SIGTERM);
        kill_timer.expires_after(grace);
        kill_timer.async_wait([self = shared_from_this()](boost::system::error_code ec) {
            if (!ec) {
                self->signal_group(SIGKILL);
            }
        });
    }

    void reader_done() {
        if (--readers == 0) {
            drain_timer.cancel();
        }
    }
};

std::vector<char*> c_strings(const std::vector<std::string>& v) {
    std::vector<char*> out;
    out.reserve(v.size() + 1);
    for (const auto& s : v) {
        out.push_back(const_cast<char*>(s.c_str())
        );  // NOLINT(cppcoreguidelines-pro-type-const-cast)
    }
    out.push_back(nullptr);
    return out;
}

/// Forks and execs `p`; the child's outcome gets start_error if a step before exec failed
/// (reported asynchronously on the error pipe).
std::shared_ptr<child> spawn(
    const asio::any_io_executor& ex,
    const program& p,
    const std::vector<std::string>& env,
    std::string& error
) {
    std::array<pipe_ends, 5> pipes;  // stdin, stdout, stderr, progress, exec error
    for (auto& pe : pipes) {
        if (!make_pipe(pe)) {
            error = std::string("pipe2: ") + std::strerror(errno);  // NOLINT(concurrency-mt-unsafe)
            return nullptr;
        }
    }
    auto argv = c_strings(p.config.argv);
    auto envp = c_strings(env);
    child_plan plan;
    plan.path = p.path.c_str();
    plan.argv = argv.data();
    plan.envp = envp.data();
    plan.dir = p.config.dir.empty() ? nullptr : p.config.dir.c_str();
    plan.user = p.user ? &*p.user : nullptr;
    plan.parent = ::getpid();
    plan.fds = {
        pipes[0].read.get(), pipes[1].write.get(), pipes[2].write.get(), pipes[3].write.get()};
    plan.error = pipes[4].write.get();

    const pid_t pid = ::fork();
    if (pid < 0) {
        error = std::string("fork: ") + std::strerror(errno);  // NOLINT(concurrency-mt-unsafe)
        return nullptr;
    }
    if (pid == 0) {
        run_child(plan);
    }
    // Also here, so that the group exists before we may signal it.
    ::setpgid(pid, pid);
    auto c = std::make_shared<child>(ex);
    c->pid = pid;
    c->grace = p.config.kill_grace;
    c->in.assign(pipes[0].write.release());
    c->out.assign(pipes[1].read.release());
    c->err.assign(pipes[2].read.release());
    c->progress.assign(pipes[3].read.release());
    c->error.assign(pipes[4].read.release());
    const auto pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));  // close-on-exec
    if (pidfd >= 0) {
        c->pidfd.assign(pidfd);
    }
    return c;  // the child's ends close here
}

asio::awaitable<void> feed(std::shared_ptr<child> c, std::string input) {
    // A program that exits (or closes stdin) before reading everything: EPIPE, ignored.
    co_await asio::async_write(c->in, asio::buffer(input), asio::as_tuple(asio::use_awaitable));
    boost::system::error_code ignored;
    c->in.close(ignored);
}

asio::awaitable<void> read_stdout(std::shared_ptr<child> c, std::size_t limit) {
    std::array<char, 65536> buf{};
    for (;;) {
        auto [ec, n] =
            co_await c->out.async_read_some(asio::buffer(buf), asio::as_tuple(asio::use_awaitable));
        if (!c->outcome.output_too_large) {
            if (c->outcome.output.size() + n > limit) {
                c->outcome.output_too_large = true;
                c->outcome.output.clear();
                c->signal_group(SIGKILL);
            } else {
                c->outcome.output.append(buf.data(), n);
            }
        }
        if (ec) {
            break;
        }
    }
    c->reader_done();
}

asio::awaitable<void> read_stderr(std::shared_ptr<child> c) {
    std::array<char, 16384> buf{};
    std::string& tail = c->outcome.stderr_tail;
    for (;;) {
        auto [ec, n] =
            co_await c->err.async_read_some(asio::buffer(buf), asio::as_tuple(asio::use_awaitable));
        tail.append(buf.data(), n);
        if (tail.size() > 2 * stderr_tail_bytes) {
            tail.erase(0, tail.size() - stderr_tail_bytes);
        }
        if (ec) {
            break;
        }
    }
    if (tail.size() > stderr_tail_bytes) {
        tail.erase(0, tail.size() - stderr_tail_bytes);
    }
    c->reader_done();
}

asio::awaitable<void> read_progress(std::shared_ptr<child> c, progress_fn progress) {
    constexpr std::size_t max_line = 4096;
    std::array<char, 4096> buf{};
    std::string line;
    bool skipping = false;  // inside a line too long to be one
    for (;;) {
        auto [ec, n] = co_await c->progress.async_read_some(
            asio::buffer(buf), asio::as_tuple(asio::use_awaitable)
        );
        for (std::size_t i = 0; i < n; ++i) {
            if (buf[i] != '\n') {
                if (!skipping && line.size() < max_line) {
                    line += buf[i];
                } else {
                    skipping = true;
                    line.clear();
                }
                continue;
            }
            if (!skipping && progress) {
                if (auto p = parse_progress_line(line)) {
                    progress(p->first, std::move(p->second));
                }
            }
            skipping = false;
            line.clear();
        }
        if (ec) {
            break;
        }
    }
    c->reader_done();
}

asio::awaitable<void> wait_exit(std::shared_ptr<child> c) {
    // EOF on the error pipe: execve succeeded (the pipe is close-on-exec).
    std::array<int, 2> msg{};
    auto [eec, got] =
        co_await asio::async_read(c->error, asio::buffer(msg), asio::as_tuple(asio::use_awaitable));
    if (got == sizeof msg) {
        c->outcome.start_error = std::string(stage_text(static_cast<stage>(msg[0]))) + ": " +
                                 std::strerror(msg[1]);  // NOLINT(concurrency-mt-unsafe)
    }
    boost::system::error_code ignored;
    c->error.close(ignored);

    // Readiness may be spurious (a stale event for a reused descriptor number): whatever
    // wakes us, the child must have exited, checked without reaping, before we signal its
    // group. Without a pidfd (an old kernel), poll.
    asio::steady_timer poll(c->pidfd.get_executor());
    siginfo_t info{};
    for (;;) {
        if (c->pidfd.is_open()) {
            auto [wec] = co_await c->pidfd.async_wait(
                asio::posix::descriptor_base::wait_read, asio::as_tuple(asio::use_awaitable)
            );
            if (wec) {
                boost::system::error_code ignored_close;
                c->pidfd.close(ignored_close);  // poll instead of spinning on a failing wait
            }
        } else {
            poll.expires_after(std::chrono::milliseconds(10));
            co_await poll.async_wait(asio::as_tuple(asio::use_awaitable));
        }
        info = {};
        const int rc =
            ::waitid(P_PID, static_cast<id_t>(c->pid), &info, WEXITED | WNOHANG | WNOWAIT);
        if ((rc != 0 && errno != EINTR) || (rc == 0 && info.si_pid == c->pid)) {
            break;
        }
    }
    // What it left behind in its group dies with it (still a zombie: the pid is not reused).
    c->signal_group(SIGKILL);
    info = {};
    while (::waitid(P_PID, static_cast<id_t>(c->pid), &info, WEXITED) != 0 && errno == EINTR) {
    }
    c->reaped = true;
    c->kill_timer.cancel();
    c->pidfd.close(ignored);
    if (info.si_code == CLD_EXITED) {
        c->outcome.exit_code = info.si_status;
    } else if (info.si_code == CLD_KILLED || info.si_code == CLD_DUMPED) {
        c->outcome.signal = info.si_status;
    }
    // A process that left the group may hold the pipes: give it a moment, then stop reading.
    if (c->readers > 0) {
        c->drain_timer.expires_after(std::chrono::seconds(1));
        auto [dec] = co_await c->drain_timer.async_wait(asio::as_tuple(asio::use_awaitable));
        if (!dec) {
            c->out.close(ignored);
            c->err.close(ignored);
            c->progress.close(ignored);
        }
    }
    c->in.close(ignored);  // a write into a pipe nobody reads
}

}  // namespace

asio::awaitable<run_outcome> run_program(
    const program& p,
    std::string input,
    std::stop_token stop,
    progress_fn progress,
    std::vector<std::string> extra_env
) {
    // Only `stop` stops a program: an abandoned wait would leave it running unreaped.
    co_await asio::this_coro::reset_cancellation_state([](asio::cancellation_type) {
        return asio::cancellation_type::none;
    });
    const auto ex = co_await asio::this_coro::executor;
    run_outcome o;
    if (stop.stop_requested()) {
        o.stopped = true;
        o.start_error = "stopped before it started";
        co_return o;
    }
    std::vector<std::string> env = p.env;
    env.insert(env.end(), extra_env.begin(), extra_env.end());
    auto c = spawn(ex, p, env, o.start_error);
    if (!c) {
        co_return o;
    }
    {
        const std::stop_callback on_stop(stop, [c] {
            asio::post(c->pidfd.get_executor(), [c] {
                c->outcome.stopped = true;
                c->terminate();
            });
        });
        using namespace asio::experimental::awaitable_operators;
        co_await (
            feed(c, std::move(input)) && read_stdout(c, p.config.max_output) && read_stderr(c) &&
            read_progress(c, std::move(progress)) && wait_exit(c)
        );
    }
    o = std::move(c->outcome);
    o.stopped = o.stopped || stop.stop_requested();
    co_return o;
}

}  // namespace zkd::handlers::exec
