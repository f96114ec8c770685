// SPDX-License-Identifier: MIT
// Exec task types: one child program's whole life (its supervisor started with the program's
// fds, environment, user and limits as arguments; stdin/stdout/stderr/fd 3, the control socket and
// the supervisor's pidfd as Asio operations; the kill escalation; reaping), in one file because
// those parts share the child's state and its invariants (every child reaped, no fd leaked, no
// process of a program's tree left behind, no signal to a pid that may be reused);
// docs/exec.md is the contract.
#include "handlers/exec.hpp"
#include "handlers/exec/detail/cgroup.hpp"
#include "handlers/exec/detail/child.hpp"
#include "handlers/exec/detail/supervisor_abi.hpp"
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

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <memory>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

namespace asio = boost::asio;

namespace zkd::handlers::exec {

namespace detail {

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

using supervisor_abi::control_fd;
using supervisor_abi::error_fd;
using supervisor_abi::record;
using supervisor_abi::stage;

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
    case stage::subreaper:
        return "prctl(PR_SET_CHILD_SUBREAPER)";
    case stage::signals:
        return "signalfd";
    case stage::fork:
        return "fork (of the program, by its supervisor)";
    case stage::cgroup:
        return "moving into its cgroup";
    case stage::rlimit:
        return "setrlimit";
    case stage::nice:
        return "setpriority (its nice)";
    case stage::arguments:
        return "the supervisor program refused its arguments (is it of another build of zkd?)";
    }
    return "?";
}

bool executable(const std::string& path) {
    struct stat st {};
    return !path.empty() && ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
           ::access(path.c_str(), X_OK) == 0;
}

std::vector<char*> c_strings(const std::vector<std::string>& v) {
    std::vector<char*> out;
    out.reserve(v.size() + 1);
    for (const auto& s : v) {
        out.push_back(const_cast<char*>(s.c_str())  // NOLINT(cppcoreguidelines-pro-type-const-cast)
        );
    }
    out.push_back(nullptr);
    return out;
}

}  // namespace

namespace {

struct found_supervisor {
    std::string path;
    bool from_environment = false;  // ZKD_SUPERVISE named it
};

const found_supervisor& find_supervisor() {
    static const found_supervisor found = [] {
        // NOLINTNEXTLINE(concurrency-mt-unsafe): read once; nothing here sets the environment
        if (const char* env = std::getenv("ZKD_SUPERVISE"); env != nullptr && *env != '\0') {
            return found_supervisor{env, true};  // the operator's word, even if wrong: said so
        }
        std::vector<std::string> candidates;
        std::error_code ec;
        const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
        if (!ec) {
            candidates.push_back((self.parent_path() / "zkd-supervise").string());
            candidates.push_back(
                (self.parent_path() / "../libexec/zkd/zkd-supervise").lexically_normal().string()
            );
            // This build's own, only for a program of this build tree (a test, a zkd not
            // installed): an installed or packaged program never runs a developer's build.
            if (self.string().starts_with(ZKD_BUILD_TREE)) {
                candidates.emplace_back(ZKD_SUPERVISE_BUILD_PATH);
            }
        }
        candidates.emplace_back(ZKD_SUPERVISE_INSTALL_PATH);
        for (auto& c : candidates) {
            if (executable(c)) {
                return found_supervisor{std::move(c), false};
            }
        }
        return found_supervisor{};
    }();
    return found;
}

}  // namespace

const std::string& supervisor_program() {
    return find_supervisor().path;
}

std::string check_supervisor_program() {
    const auto& f = find_supervisor();
    if (f.path.empty()) {
        return std::string(
            "no supervisor program (zkd-supervise) found beside this program, in "
            "../libexec/zkd/ from it or in " ZKD_SUPERVISE_INSTALL_PATH
            "; set ZKD_SUPERVISE to its path"
        );
    }
    if (!executable(f.path)) {
        return "the supervisor program " + f.path + (f.from_environment ? " (ZKD_SUPERVISE)" : "") +
               " is not an executable file";
    }
    return {};
}

child::child(const asio::any_io_executor& ex)
    : in(ex), out(ex), err(ex), progress(ex), error(ex), control(ex), pidfd(ex), kill_timer(ex) {}

child::~child() = default;

void child::send(char request) const {
    if (!reaped && control.is_open()) {
        // One byte into an almost empty socket: never blocks (and never SIGPIPE).
        [[maybe_unused]] const auto n = ::send(
            const_cast<asio::posix::stream_descriptor&>(control)  // NOLINT
                .native_handle(),
            &request, 1, MSG_DONTWAIT | MSG_NOSIGNAL
        );
    }
}

void child::terminate() {
    if (reaped || term_sent || kill_sent) {
        return;
    }
    term_sent = true;
    send(supervisor_abi::terminate_request);
    kill_timer.expires_after(grace);
    kill_timer.async_wait([self = shared_from_this()](boost::system::error_code ec) {
        if (!ec) {
            self->kill_tree();
        }
    });
}

void child::kill_tree() {
    if (reaped || kill_sent) {
        return;
    }
    kill_sent = true;
    send(supervisor_abi::kill_request);
}

std::shared_ptr<child> spawn(
    const asio::any_io_executor& ex,
    const program& p,
    const std::vector<std::string>& env,
    bool with_progress_fd,
    std::string& error
) {
    std::array<pipe_ends, 5> pipes;  // stdin, stdout, stderr, progress, exec error
    for (std::size_t i = 0; i < pipes.size(); ++i) {
        if (i == 3 && !with_progress_fd) {
            continue;
        }
        if (!make_pipe(pipes[i])) {
            error = std::string("pipe2: ") + std::strerror(errno);  // NOLINT(concurrency-mt-unsafe)
            return nullptr;
        }
    }
    std::array<int, 2> sock{-1, -1};
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sock.data()) != 0) {
        error =
            std::string("socketpair: ") + std::strerror(errno);  // NOLINT(concurrency-mt-unsafe)
        return nullptr;
    }
    unique_fd ours(sock[0]);
    unique_fd theirs(sock[1]);
    std::unique_ptr<program_cgroup> cg;
    if (p.plan.uses_cgroup()) {
        cg = program_cgroup::make(p, error);
        if (!cg) {
            return nullptr;
        }
    }
    const std::string& supervisor = supervisor_program();
    if (const auto why = check_supervisor_program(); !why.empty()) {
        error = why;
        return nullptr;
    }

    // The supervisor's arguments (supervisor/main.cpp says what they mean).
    std::vector<std::string> args{supervisor, supervisor_abi::version_arg};
    if (with_progress_fd) {
        args.emplace_back("-p");
    }
    if (cg && cg->kill_fd() >= 0) {
        args.emplace_back("-k");
    }
    if (cg && cg->procs_fd() >= 0) {
        args.emplace_back("-P");
    }
    if (!p.config.dir.empty()) {
        args.insert(args.end(), {"-d", p.config.dir});
    }
    if (p.user) {
        std::string groups;
        for (const gid_t g : p.user->groups) {
            groups += (groups.empty() ? "" : ",") + std::to_string(g);
        }
        args.insert(
            args.end(),
            {"-u", std::to_string(p.user->uid), "-g", std::to_string(p.user->gid), "-G", groups}
        );
    }
    if (p.config.nice > 0) {
        args.insert(args.end(), {"-n", std::to_string(p.config.nice)});
    }
    const auto& l = p.config.limits;
    const auto limit = [&args](__rlimit_resource_t r, rlim_t soft, rlim_t hard) {
        args.insert(
            args.end(), {"-l", std::to_string(static_cast<unsigned>(r)) + ":" +
                                   std::to_string(soft) + ":" + std::to_string(hard)}
        );
    };
    if (p.plan.memory == enforcement::rlimit) {
        limit(RLIMIT_DATA, l.memory, l.memory);
    }
    if (p.plan.cpu_time == enforcement::rlimit) {
        // Whole seconds: SIGXCPU at the limit (rounded up), SIGKILL a second later.
        const auto s = static_cast<rlim_t>((l.cpu_time.count() + 999) / 1000);
        limit(RLIMIT_CPU, s, s + 1);
    }
    if (p.plan.processes == enforcement::rlimit) {
        limit(
            RLIMIT_NPROC, static_cast<rlim_t>(l.max_processes), static_cast<rlim_t>(l.max_processes)
        );
    }
    if (p.plan.open_files == enforcement::rlimit) {
        limit(
            RLIMIT_NOFILE, static_cast<rlim_t>(l.max_open_files),
            static_cast<rlim_t>(l.max_open_files)
        );
    }
    args.emplace_back("--");
    args.push_back(p.path);
    args.insert(args.end(), p.config.argv.begin(), p.config.argv.end());

    // Its descriptors, each at its number (supervisor_abi); an end that has a number of 0..8
    // itself is moved above first, so that no dup2 overwrites an end a later one reads.
    std::vector<std::pair<int, int>> fds{
        {pipes[0].read.get(), 0},
        {pipes[1].write.get(), 1},
        {pipes[2].write.get(), 2},
        {pipes[4].write.get(), supervisor_abi::error_fd},
        {theirs.get(), supervisor_abi::control_fd}};
    if (with_progress_fd) {
        fds.emplace_back(pipes[3].write.get(), 3);
    }
    if (cg && cg->kill_fd() >= 0) {
        fds.emplace_back(cg->kill_fd(), supervisor_abi::cg_kill_fd);
    }
    if (cg && cg->procs_fd() >= 0) {
        fds.emplace_back(cg->procs_fd(), supervisor_abi::cg_procs_fd);
    }
    constexpr int first_free = supervisor_abi::cg_procs_fd + 1;
    std::vector<unique_fd> moved;
    for (auto& [from, to] : fds) {
        if (from < first_free) {
            moved.emplace_back(::fcntl(from, F_DUPFD_CLOEXEC, first_free));
            if (moved.back().get() < 0) {
                error = std::string("fcntl(F_DUPFD_CLOEXEC): ") +
                        std::strerror(errno);  // NOLINT(concurrency-mt-unsafe)
                return nullptr;
            }
            from = moved.back().get();
        }
    }
    // Each call below fails only for want of memory (or a bad argument, which would be a bug):
    // the first failure is the spawn's, and nothing is started.
    int rc = 0;
    const auto step = [&rc](int r) {
        if (rc == 0) {
            rc = r;
        }
    };
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attr;
    if (const int r = ::posix_spawn_file_actions_init(&actions); r != 0) {
        error = std::string("posix_spawn_file_actions_init: ") +
                std::strerror(r);  // NOLINT(concurrency-mt-unsafe)
        return nullptr;
    }
    if (const int r = ::posix_spawnattr_init(&attr); r != 0) {
        ::posix_spawn_file_actions_destroy(&actions);
        error = std::string("posix_spawnattr_init: ") +
                std::strerror(r);  // NOLINT(concurrency-mt-unsafe)
        return nullptr;
    }
    for (const auto& [from, to] : fds) {
        step(::posix_spawn_file_actions_adddup2(&actions, from, to));
    }
    step(::posix_spawn_file_actions_addclosefrom_np(&actions, first_free));
    // A process group of its own from the start (a terminal's ^C to zkd's group is zkd's to
    // handle), and every signal blocked until it has set its own handling up.
    sigset_t all;
    ::sigfillset(&all);
    step(::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK));
    step(::posix_spawnattr_setpgroup(&attr, 0));
    step(::posix_spawnattr_setsigmask(&attr, &all));
    auto argv = c_strings(args);
    auto envp = c_strings(env);
    pid_t pid = 0;
    if (rc == 0) {  // never with an action or attribute missing
        rc = ::posix_spawn(&pid, supervisor.c_str(), &actions, &attr, argv.data(), envp.data());
    }
    ::posix_spawn_file_actions_destroy(&actions);
    ::posix_spawnattr_destroy(&attr);
    if (rc != 0) {
        error = "starting the supervisor " + supervisor + ": " +
                std::strerror(rc);  // NOLINT(concurrency-mt-unsafe)
        return nullptr;
    }
    auto c = std::make_shared<child>(ex);
    c->supervisor = pid;
    c->cgroup = std::move(cg);
    c->in.assign(pipes[0].write.release());
    c->out.assign(pipes[1].read.release());
    c->err.assign(pipes[2].read.release());
    if (with_progress_fd) {
        c->progress.assign(pipes[3].read.release());
    }
    c->error.assign(pipes[4].read.release());
    c->control.assign(ours.release());
    const auto pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));  // close-on-exec
    if (pidfd >= 0) {
        c->pidfd.assign(pidfd);
    }
    return c;  // the children's ends close here
}

namespace {

struct control_state {
    int exit_code = -1;
    int signal = 0;
    bool reported = false;
    std::int64_t cpu_ms = -1;
};

asio::awaitable<void> read_control(std::shared_ptr<child> c, control_state& s) {
    std::array<std::int32_t, 2> rec{};
    for (;;) {
        auto [ec, n] = co_await asio::async_read(
            c->control, asio::buffer(rec), asio::as_tuple(asio::use_awaitable)
        );
        if (ec || n != sizeof rec) {
            co_return;  // EOF: the supervisor is gone
        }
        switch (static_cast<record>(rec[0])) {
        case record::started:
            c->program = rec[1];
            break;
        case record::exited:
            s.exit_code = rec[1];
            s.reported = true;
            break;
        case record::killed:
            s.signal = rec[1];
            s.reported = true;
            break;
        case record::cpu:
            s.cpu_ms = rec[1];
            break;
        }
    }
}

asio::awaitable<void> wait_supervisor(std::shared_ptr<child> c, exit_status& st) {
    // EOF on the error pipe: execve succeeded (the pipe is close-on-exec).
    std::array<int, 2> msg{};
    auto [eec, got] =
        co_await asio::async_read(c->error, asio::buffer(msg), asio::as_tuple(asio::use_awaitable));
    if (got == sizeof msg) {
        st.start_error = std::string(stage_text(static_cast<stage>(msg[0]))) + ": " +
                         std::strerror(msg[1]);  // NOLINT(concurrency-mt-unsafe)
    }
    boost::system::error_code ignored;
    c->error.close(ignored);

    // Readiness may be spurious (a stale event for a reused descriptor number): whatever
    // wakes us, the supervisor must have exited, checked without reaping. Without a pidfd (an
    // old kernel), poll.
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
            ::waitid(P_PID, static_cast<id_t>(c->supervisor), &info, WEXITED | WNOHANG | WNOWAIT);
        if ((rc != 0 && errno != EINTR) || (rc == 0 && info.si_pid == c->supervisor)) {
            break;
        }
    }
    info = {};
    while (::waitid(P_PID, static_cast<id_t>(c->supervisor), &info, WEXITED) != 0 && errno == EINTR
    ) {
    }
    c->reaped = true;
    c->kill_timer.cancel();
    c->pidfd.close(ignored);
    // The supervisor's own end, should it not report (killed from outside): as the program's.
    if (info.si_code == CLD_EXITED) {
        st.exit_code = info.si_status;
    } else if (info.si_code == CLD_KILLED || info.si_code == CLD_DUMPED) {
        st.signal = info.si_status;
    }
}

}  // namespace

asio::awaitable<exit_status> wait_exit(std::shared_ptr<child> c) {
    co_await asio::this_coro::reset_cancellation_state([](asio::cancellation_type) {
        return asio::cancellation_type::none;
    });
    exit_status st;
    control_state cs;
    using namespace asio::experimental::awaitable_operators;
    co_await (read_control(c, cs) && wait_supervisor(c, st));
    st.cpu_used = std::chrono::milliseconds(cs.cpu_ms);
    if (c->cgroup) {
        st.oom_kills = c->cgroup->oom_kills();
        st.pids_max = c->cgroup->pids_refused();
        c->cgroup.reset();  // its tree is gone: what is left is killed, and it is removed
    }
    if (cs.reported) {
        st.exit_code = cs.exit_code;
        st.signal = cs.signal;
    } else if (st.start_error.empty() && st.signal == 0) {
        // A supervisor that exits without a report lost its program (it never forked it).
        st.start_error = "the supervisor exited with code " + std::to_string(st.exit_code);
    }
    co_return st;
}

}  // namespace detail

// --- running a program once ------------------------------------------------------------------

namespace {

using detail::child;

/// One one-shot run: its child and what is read of it.
struct run_state {
    std::shared_ptr<child> c;
    run_outcome outcome;
    int readers = 3;                 // stdout, stderr, progress: until EOF
    asio::steady_timer drain_timer;  // after exit: pipes held by escaped processes

    run_state(std::shared_ptr<child> ch, const asio::any_io_executor& ex)
        : c(std::move(ch)), drain_timer(ex) {}

    void reader_done() {
        if (--readers == 0) {
            drain_timer.cancel();
        }
    }
};

asio::awaitable<void> feed(std::shared_ptr<run_state> s, std::string input) {
    // A program that exits (or closes stdin) before reading everything: EPIPE, ignored.
    co_await asio::async_write(s->c->in, asio::buffer(input), asio::as_tuple(asio::use_awaitable));
    boost::system::error_code ignored;
    s->c->in.close(ignored);
}

asio::awaitable<void> read_stdout(std::shared_ptr<run_state> s, std::size_t limit) {
    std::array<char, 65536> buf{};
    for (;;) {
        auto [ec, n] = co_await s->c->out.async_read_some(
            asio::buffer(buf), asio::as_tuple(asio::use_awaitable)
        );
        if (!s->outcome.output_too_large) {
            if (s->outcome.output.size() + n > limit) {
                s->outcome.output_too_large = true;
                s->outcome.output.clear();
                s->c->kill_tree();
            } else {
                s->outcome.output.append(buf.data(), n);
            }
        }
        if (ec) {
            break;
        }
    }
    s->reader_done();
}

asio::awaitable<void> read_stderr(std::shared_ptr<run_state> s) {
    std::array<char, 16384> buf{};
    std::string& tail = s->outcome.stderr_tail;
    for (;;) {
        auto [ec, n] = co_await s->c->err.async_read_some(
            asio::buffer(buf), asio::as_tuple(asio::use_awaitable)
        );
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
    s->reader_done();
}

asio::awaitable<void> read_progress(std::shared_ptr<run_state> s, progress_fn progress) {
    constexpr std::size_t max_line = 4096;
    std::array<char, 4096> buf{};
    std::string line;
    bool skipping = false;  // inside a line too long to be one
    for (;;) {
        auto [ec, n] = co_await s->c->progress.async_read_some(
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
    s->reader_done();
}

asio::awaitable<void> await_exit(std::shared_ptr<run_state> s) {
    const auto st = co_await detail::wait_exit(s->c);
    if (!st.start_error.empty()) {
        s->outcome.start_error = st.start_error;
    }
    s->outcome.exit_code = st.exit_code;
    s->outcome.signal = st.signal;
    s->outcome.cpu_used = st.cpu_used;
    s->outcome.oom_kills = st.oom_kills;
    s->outcome.pids_max = st.pids_max;
    // Its whole tree is dead by now, so the pipes are closed; should something still hold
    // them (a process the supervisor could not kill), stop reading after a moment.
    boost::system::error_code ignored;
    if (s->readers > 0) {
        s->drain_timer.expires_after(std::chrono::seconds(1));
        auto [dec] = co_await s->drain_timer.async_wait(asio::as_tuple(asio::use_awaitable));
        if (!dec) {
            s->c->out.close(ignored);
            s->c->err.close(ignored);
            s->c->progress.close(ignored);
        }
    }
    s->c->in.close(ignored);  // a write into a pipe nobody reads
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
    auto c = detail::spawn(ex, p, env, true, o.start_error);
    if (!c) {
        co_return o;
    }
    c->grace = p.config.kill_grace;
    auto s = std::make_shared<run_state>(c, ex);
    {
        const std::stop_callback on_stop(stop, [s] {
            asio::post(s->drain_timer.get_executor(), [s] {
                s->outcome.stopped = true;
                s->c->terminate();
            });
        });
        using namespace asio::experimental::awaitable_operators;
        co_await (
            feed(s, std::move(input)) && read_stdout(s, p.config.max_output) && read_stderr(s) &&
            read_progress(s, std::move(progress)) && await_exit(s)
        );
    }
    o = std::move(s->outcome);
    o.stopped = o.stopped || stop.stop_requested();
    co_return o;
}

}  // namespace zkd::handlers::exec
