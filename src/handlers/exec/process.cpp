// SPDX-License-Identifier: MIT
// Exec task types: one child program's whole life (its supervisor, spawn with its fds,
// environment, user and process group; stdin/stdout/stderr/fd 3, the control socket and the
// supervisor's pidfd as Asio operations; the kill escalation; reaping), in one file because
// those parts share the child's state and its invariants (every child reaped, no fd leaked, no
// process of a program's tree left behind, no signal to a pid that may be reused);
// docs/exec.md is the contract.
#include "handlers/exec.hpp"
#include "handlers/exec/detail/cgroup.hpp"
#include "handlers/exec/detail/child.hpp"
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
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <grp.h>
#include <limits>
#include <memory>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
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

/// Where the child failed, sent to the parent with errno on the error pipe.
enum class stage : int {
    pgid = 1,
    pdeathsig,
    fds,
    dir,
    groups,
    gid,
    uid,
    exec,
    subreaper,
    signals,
    fork,
    cgroup,
    rlimit,
    nice
};

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
        return "fork (its supervisor)";
    case stage::cgroup:
        return "moving into its cgroup";
    case stage::rlimit:
        return "setrlimit";
    case stage::nice:
        return "setpriority (its nice)";
    }
    return "?";
}

// The supervisor's fds: the program's 0..3 until it has forked it, then its own.
constexpr int error_fd = 4;     // execve's failure (close-on-exec)
constexpr int control_fd = 5;   // the control socket (close-on-exec)
constexpr int signal_fd = 6;    // SIGCHLD (close-on-exec)
constexpr int cg_kill_fd = 7;   // its cgroup's cgroup.kill (close-on-exec; -1: none)
constexpr int cg_procs_fd = 8;  // its cgroup's cgroup.procs, for the program (close-on-exec)

/// Records the supervisor writes on the control socket: {kind, value}; cpu (the program's
/// CPU time in ms, its reaped children's included) comes before exited or killed.
enum class record : std::int32_t { started = 0, exited = 1, killed = 2, cpu = 3 };

/// One resource limit the program gets before it execs.
struct rlimit_entry {
    __rlimit_resource_t resource{};
    rlim_t soft = 0;
    rlim_t hard = 0;
};

/// Everything the children need, prepared before fork(): the supervisor and the program may
/// call only async-signal-safe functions (the worker has other threads, whose locks a fork
/// copies held).
struct child_plan {
    const char* path = nullptr;
    char* const* argv = nullptr;
    char* const* envp = nullptr;
    const char* dir = nullptr;
    const identity* user = nullptr;
    std::array<int, 4> fds{};  // becomes 0 (stdin), 1, 2, 3 (progress; -1: none)
    int error = -1;            // the error pipe's write end (close-on-exec)
    int control = -1;          // the supervisor's end of the control socket
    int cg_procs = -1;         // its cgroup's cgroup.procs (-1: no cgroup)
    int cg_kill = -1;          // its cgroup's cgroup.kill (-1: none)
    std::array<rlimit_entry, 4> limits{};
    std::size_t limit_count = 0;
    int nice = 0;  // added to its niceness (0: zkd's own)
};

[[noreturn]] void child_fail(int fd, stage s) {
    const std::array<int, 2> msg{static_cast<int>(s), errno};
    [[maybe_unused]] const auto n = ::write(fd, msg.data(), sizeof msg);
    ::_exit(127);
}

void close_from(unsigned first) {
    if (::syscall(SYS_close_range, first, ~0U, 0U) != 0) {
        for (int fd = static_cast<int>(first); fd < 65536; ++fd) {
            ::close(fd);
        }
    }
}

void set_all_signals(void (*handler)(int)) {
    struct sigaction sa {};
    sa.sa_handler = handler;  // NOLINT(cppcoreguidelines-pro-type-union-access)
    for (int sig = 1; sig < NSIG; ++sig) {
        ::sigaction(sig, &sa, nullptr);
    }
}

// --- the program, forked by its supervisor ---------------------------------------------------

[[noreturn]] void run_program_child(const child_plan& p, pid_t supervisor) {
    const int err = error_fd;
    // Ignored signals and the supervisor's mask would stay across execve.
    set_all_signals(SIG_DFL);
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::close(control_fd);
    ::close(signal_fd);
    ::close(cg_kill_fd);
    // Its own process group (what a terminal's signals and job control see as one job), and
    // it dies with its supervisor.
    if (::setpgid(0, 0) != 0) {
        child_fail(err, stage::pgid);
    }
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) {
        child_fail(err, stage::pdeathsig);
    }
    if (::getppid() != supervisor) {
        ::_exit(127);
    }
    // Its cgroup (before it may lose the right to move), then its limits.
    if (p.cg_procs >= 0 && ::write(cg_procs_fd, "0", 1) != 1) {
        child_fail(err, stage::cgroup);
    }
    ::close(cg_procs_fd);
    for (std::size_t i = 0; i < p.limit_count; ++i) {
        const rlimit lim{p.limits[i].soft, p.limits[i].hard};
        if (::setrlimit(p.limits[i].resource, &lim) != 0) {
            child_fail(err, stage::rlimit);
        }
    }
    // Lower priority (never higher: no privilege needed), for it and what it starts.
    if (p.nice > 0 &&
        ::setpriority(PRIO_PROCESS, 0, ::getpriority(PRIO_PROCESS, 0) + p.nice) != 0) {
        child_fail(err, stage::nice);
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

// --- the supervisor's view of its tree (async-signal-safe: raw syscalls, no allocation) ------

struct proc_entry {
    pid_t pid;
    pid_t ppid;
    char state;
    bool ours;
};

constexpr std::size_t max_procs = 8192;
/// The largest pid_t, bounding the digits read from /proc.
constexpr pid_t max_pid = std::numeric_limits<pid_t>::max();

/// Reads the parent and state of `pid` from /proc/PID/stat; false if it is gone.
bool read_stat(pid_t pid, pid_t& ppid, char& state) {
    std::array<char, 64> path{};
    // "/proc/" + digits + "/stat", by hand (snprintf is not async-signal-safe).
    std::array<char, 16> digits{};
    std::size_t n = 0;
    for (auto v = static_cast<unsigned>(pid); n == 0 || v != 0; v /= 10) {
        digits[n++] = static_cast<char>('0' + v % 10);
    }
    std::size_t at = 0;
    for (const char ch : {'/', 'p', 'r', 'o', 'c', '/'}) {
        path[at++] = ch;
    }
    while (n > 0) {
        path[at++] = digits[--n];
    }
    for (const char ch : {'/', 's', 't', 'a', 't'}) {
        path[at++] = ch;
    }
    path[at] = '\0';
    const int fd = ::open(path.data(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return false;
    }
    std::array<char, 512> buf{};
    const auto got = ::read(fd, buf.data(), buf.size() - 1);
    ::close(fd);
    if (got <= 0) {
        return false;
    }
    // "pid (comm) S ppid ...": comm may hold anything, so from the last ')'.
    auto rp = static_cast<std::size_t>(got);
    while (rp > 0 && buf[rp - 1] != ')') {
        --rp;
    }
    if (rp == 0 || rp + 3 >= static_cast<std::size_t>(got)) {
        return false;
    }
    state = buf[rp + 1];
    pid_t v = 0;
    for (std::size_t i = rp + 3;
         i < static_cast<std::size_t>(got) && buf[i] >= '0' && buf[i] <= '9'; ++i) {
        v = v * 10 + (buf[i] - '0');
    }
    ppid = v;
    return true;
}

struct linux_dirent64 {
    std::uint64_t d_ino;
    std::int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[1];  // NOLINT(cppcoreguidelines-avoid-c-arrays)
};

/// Lists every process into `procs` (sorted by pid); their count.
std::size_t list_procs(std::array<proc_entry, max_procs>& procs) {
    const int dir = ::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) {
        return 0;
    }
    std::size_t count = 0;
    alignas(8) std::array<char, 8192> buf{};
    for (;;) {
        const auto got = ::syscall(SYS_getdents64, dir, buf.data(), buf.size());
        if (got <= 0) {
            break;
        }
        for (long off = 0; off < got;) {
            const auto* d = reinterpret_cast<const linux_dirent64*>(  // NOLINT
                buf.data() + off
            );
            off += d->d_reclen;
            pid_t pid = 0;
            const char* name = &d->d_name[0];
            // A pid's digits; anything else (self, sys, a number past pid_t) is no process.
            bool numeric = name[0] != '\0';
            for (const char* c = name; numeric && *c != '\0'; ++c) {  // NOLINT
                numeric = *c >= '0' && *c <= '9' && pid <= (max_pid - 9) / 10;
                if (numeric) {
                    pid = pid * 10 + (*c - '0');
                }
            }
            if (!numeric || count == max_procs) {
                continue;
            }
            pid_t ppid = 0;
            char state = '?';
            if (read_stat(pid, ppid, state)) {
                procs[count++] = proc_entry{pid, ppid, state, false};
            }
        }
    }
    ::close(dir);
    // Insertion sort: /proc lists in pid order already, so this is one pass.
    for (std::size_t i = 1; i < count; ++i) {
        for (std::size_t j = i; j > 0 && procs[j - 1].pid > procs[j].pid; --j) {
            std::swap(procs[j - 1], procs[j]);
        }
    }
    return count;
}

const proc_entry* find_proc(
    const std::array<proc_entry, max_procs>& procs, std::size_t n, pid_t pid
) {
    std::size_t lo = 0;
    std::size_t hi = n;
    while (lo < hi) {
        const std::size_t mid = (lo + hi) / 2;
        if (procs[mid].pid < pid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo < n && procs[lo].pid == pid ? &procs[lo] : nullptr;
}

/// The supervisor's cg_kill_fd is its cgroup's cgroup.kill.
bool supervisor_has_cg_kill = false;  // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)
/// The program's CPU time in ms, from its reaping (-1 until then).
std::int64_t program_cpu_ms = -1;  // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)

/// Sends `sig` to every live process below `self` (the supervisor, a subreaper: its
/// descendants' parent chains all lead to it); how many it signalled. Each is signalled
/// through a pidfd opened after its parent was read and checked again after, so a pid reused
/// meanwhile is not hit.
std::size_t signal_tree(pid_t self, int sig) {
    if (sig == SIGKILL && supervisor_has_cg_kill) {
        // Its cgroup too: a process reparented away from the tree (ptrace) is still in it.
        [[maybe_unused]] const auto n = ::write(cg_kill_fd, "1", 1);
    }
    std::array<proc_entry, max_procs> procs;  // NOLINT(cppcoreguidelines-pro-type-member-init)
    const std::size_t n = list_procs(procs);
    for (bool changed = true; changed;) {
        changed = false;
        for (std::size_t i = 0; i < n; ++i) {
            if (procs[i].ours) {
                continue;
            }
            const proc_entry* parent = find_proc(procs, n, procs[i].ppid);
            if (procs[i].ppid == self || (parent != nullptr && parent->ours)) {
                procs[i].ours = true;
                changed = true;
            }
        }
    }
    std::size_t signalled = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const auto& e = procs[i];
        if (!e.ours || e.state == 'Z' || e.state == 'X') {
            continue;
        }
        const auto fd = static_cast<int>(::syscall(SYS_pidfd_open, e.pid, 0));
        if (fd < 0) {
            continue;  // gone
        }
        pid_t ppid = 0;
        char state = '?';
        if (read_stat(e.pid, ppid, state) && state != 'Z' && state != 'X' &&
            (ppid == e.ppid || ppid == self)) {
            ::syscall(SYS_pidfd_send_signal, fd, sig, nullptr, 0U);
            ++signalled;
        }
        ::close(fd);
    }
    return signalled;
}

void reap_all(pid_t program, int& status, bool& program_done) {
    for (;;) {
        int st = 0;
        rusage ru{};
        const pid_t w = ::wait4(-1, &st, WNOHANG, &ru);
        if (w <= 0) {
            return;
        }
        if (w == program) {
            status = st;
            program_done = true;
            program_cpu_ms = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
                             (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
        }
    }
}

/// SIGKILL to the whole tree until none of it is left (each round reaps what it can; a
/// process in uninterruptible sleep may take a moment to die), at most about 10 s.
void kill_everything(pid_t self, pid_t program, int& status, bool& program_done) {
    for (int round = 0; round < 2000; ++round) {
        const std::size_t left = signal_tree(self, SIGKILL);
        reap_all(program, status, program_done);
        if (left == 0) {
            return;
        }
        const timespec pause{0, 5'000'000};
        ::nanosleep(&pause, nullptr);
    }
}

void send_record(record kind, std::int32_t value) {
    const std::array<std::int32_t, 2> msg{static_cast<std::int32_t>(kind), value};
    [[maybe_unused]] const auto n = ::send(control_fd, msg.data(), sizeof msg, MSG_NOSIGNAL);
}

// --- the supervisor, forked by zkd -----------------------------------------------------------

[[noreturn]] void run_supervisor(const child_plan& p) {
    int err = p.error;
    // Its own process group: a terminal's ^C to zkd's group does not reach it (zkd decides).
    if (::setpgid(0, 0) != 0) {
        child_fail(err, stage::pgid);
    }
    set_all_signals(SIG_DFL);
    for (const int sig :
         {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU, SIGUSR1, SIGUSR2}) {
        ::signal(sig, SIG_IGN);
    }
    sigset_t chld;
    ::sigemptyset(&chld);
    ::sigaddset(&chld, SIGCHLD);
    ::sigprocmask(SIG_SETMASK, &chld, nullptr);
    // Move every end out of 0..6 first: one of them may have such a number already.
    std::array<int, 6> high{-1, -1, -1, -1, -1, -1};
    for (std::size_t i = 0; i < 4; ++i) {
        if (p.fds[i] >= 0 && (high[i] = ::fcntl(p.fds[i], F_DUPFD_CLOEXEC, 10)) < 0) {
            child_fail(err, stage::fds);
        }
    }
    high[4] = ::fcntl(err, F_DUPFD_CLOEXEC, 10);
    if (high[4] < 0) {
        child_fail(err, stage::fds);
    }
    err = high[4];
    high[5] = ::fcntl(p.control, F_DUPFD_CLOEXEC, 10);
    if (high[5] < 0) {
        child_fail(err, stage::fds);
    }
    std::array<int, 2> cg{-1, -1};  // cgroup.kill, cgroup.procs
    for (std::size_t i = 0; i < cg.size(); ++i) {
        const int from = i == 0 ? p.cg_kill : p.cg_procs;
        if (from >= 0 && (cg[i] = ::fcntl(from, F_DUPFD_CLOEXEC, 10)) < 0) {
            child_fail(err, stage::fds);
        }
    }
    for (int i = 0; i < 4; ++i) {
        const int from = high[static_cast<std::size_t>(i)];
        if (from < 0) {
            ::close(i);
        } else if (::dup2(from, i) != i) {  // dup2 clears close-on-exec
            child_fail(err, stage::fds);
        }
    }
    if (::dup3(high[4], error_fd, O_CLOEXEC) != error_fd) {
        child_fail(err, stage::fds);
    }
    err = error_fd;
    if (::dup3(high[5], control_fd, O_CLOEXEC) != control_fd) {
        child_fail(err, stage::fds);
    }
    for (std::size_t i = 0; i < cg.size(); ++i) {
        const int to = i == 0 ? cg_kill_fd : cg_procs_fd;
        if (cg[i] < 0) {
            ::close(to);
        } else if (::dup3(cg[i], to, O_CLOEXEC) != to) {
            child_fail(err, stage::fds);
        }
    }
    supervisor_has_cg_kill = cg[0] >= 0;
    // Nothing else of the worker's stays open here or reaches the program.
    ::close(signal_fd);
    close_from(static_cast<unsigned>(cg_procs_fd) + 1);
    // The lowest free number may be 3 (a program without fd 3): moved to its place.
    const int sfd = ::signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0) {
        child_fail(err, stage::signals);
    }
    if (sfd != signal_fd) {
        if (::dup3(sfd, signal_fd, O_CLOEXEC) != signal_fd) {
            child_fail(err, stage::signals);
        }
        ::close(sfd);
    }
    // Orphans of the program's tree (a daemonizing grandchild, a setsid one) become ours.
    if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
        child_fail(err, stage::subreaper);
    }
    const pid_t self = ::getpid();
    const pid_t program = ::fork();
    if (program < 0) {
        child_fail(err, stage::fork);
    }
    if (program == 0) {
        run_program_child(p, self);
    }
    for (int fd = 0; fd <= error_fd; ++fd) {
        ::close(fd);  // the program's ends: EOF for zkd must not wait for us
    }
    send_record(record::started, program);

    int status = 0;
    bool program_done = false;
    bool zkd_gone = false;
    while (!program_done && !zkd_gone) {
        std::array<pollfd, 2> fds{pollfd{control_fd, POLLIN, 0}, pollfd{signal_fd, POLLIN, 0}};
        if (::poll(fds.data(), fds.size(), -1) < 0) {
            continue;  // EINTR
        }
        if ((fds[1].revents & POLLIN) != 0) {
            signalfd_siginfo info{};
            while (::read(signal_fd, &info, sizeof info) > 0) {
            }
            reap_all(program, status, program_done);
        }
        if ((fds[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
            std::array<char, 16> req{};
            const auto got = ::read(control_fd, req.data(), req.size());
            if (got <= 0) {
                zkd_gone = true;  // zkd exited or was killed: nothing of the program stays
            }
            for (ssize_t i = 0; i < got; ++i) {
                if (req[static_cast<std::size_t>(i)] == 'T') {
                    signal_tree(self, SIGTERM);
                } else if (req[static_cast<std::size_t>(i)] == 'K') {
                    signal_tree(self, SIGKILL);
                }
            }
        }
    }
    // The program's work ends with it: whatever of its tree is left dies now.
    kill_everything(self, program, status, program_done);
    if (!program_done) {
        // Killed by kill_everything, but not reaped yet (it was not in the last round's list).
        rusage ru{};
        while (::wait4(program, &status, 0, &ru) < 0 && errno == EINTR) {
        }
        program_cpu_ms = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
                         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
    }
    if (program_cpu_ms >= 0) {
        send_record(
            record::cpu,
            static_cast<std::int32_t>(std::min<std::int64_t>(program_cpu_ms, INT32_MAX))
        );
    }
    if (WIFEXITED(status)) {
        send_record(record::exited, WEXITSTATUS(status));
    } else if (WIFSIGNALED(status)) {
        send_record(record::killed, WTERMSIG(status));
    }
    ::_exit(0);
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
    send('T');
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
    send('K');
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
    auto argv = c_strings(p.config.argv);
    auto envp = c_strings(env);
    child_plan plan;
    plan.path = p.path.c_str();
    plan.argv = argv.data();
    plan.envp = envp.data();
    plan.dir = p.config.dir.empty() ? nullptr : p.config.dir.c_str();
    plan.user = p.user ? &*p.user : nullptr;
    plan.nice = p.config.nice;
    plan.fds = {
        pipes[0].read.get(), pipes[1].write.get(), pipes[2].write.get(), pipes[3].write.get()};
    plan.error = pipes[4].write.get();
    plan.control = theirs.get();
    std::unique_ptr<program_cgroup> cg;
    if (p.plan.uses_cgroup()) {
        cg = program_cgroup::make(p, error);
        if (!cg) {
            return nullptr;
        }
        plan.cg_procs = cg->procs_fd();
        plan.cg_kill = cg->kill_fd();
    }
    const auto& l = p.config.limits;
    const auto limit = [&plan](__rlimit_resource_t r, rlim_t soft, rlim_t hard) {
        plan.limits[plan.limit_count++] = rlimit_entry{r, soft, hard};
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

    const pid_t pid = ::fork();
    if (pid < 0) {
        error = std::string("fork: ") + std::strerror(errno);  // NOLINT(concurrency-mt-unsafe)
        return nullptr;
    }
    if (pid == 0) {
        run_supervisor(plan);
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
