// SPDX-License-Identifier: MIT
// zkd-supervise: the supervisor of one exec-type program (docs/exec.md "How it runs"). zkd
// starts it with posix_spawn (no copy of zkd's memory, whatever its size), with the program's
// descriptors and its own at the numbers of detail/supervisor_abi.hpp and the program's
// environment as its own. It is a subreaper; it forks the program, and kills every process of
// the program's tree when the program exits, when zkd asks, or when zkd is gone (its control
// socket closes); then it reports how the program ended and exits.
//
//   zkd-supervise --abi=DIGEST [-p] [-k] [-P] [-d DIR] [-u UID -g GID -G GIDS] [-n NICE]
//                      [-l RESOURCE:SOFT:HARD]... -- PATH ARGV0 [ARGS...]
//
// -p: fd 3 is the program's progress pipe; -k, -P: fds 7 and 8 are its cgroup's cgroup.kill
// and cgroup.procs; -G: comma-separated supplementary groups (may be empty). Not for people:
// zkd writes these arguments, and a supervisor of another build refuses them (--abi).
#include "handlers/exec/detail/supervisor_abi.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <grp.h>
#include <limits>
#include <poll.h>
#include <string_view>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

extern char** environ;  // NOLINT(readability-redundant-declaration): the program's environment

namespace {

using namespace zkd::handlers::exec::detail::supervisor_abi;

/// One resource limit the program gets before it execs.
struct rlimit_entry {
    __rlimit_resource_t resource{};
    rlim_t soft = 0;
    rlim_t hard = 0;
};

/// What the arguments say.
struct plan {
    const char* path = nullptr;
    char** argv = nullptr;
    const char* dir = nullptr;
    bool user = false;
    uid_t uid = 0;
    gid_t gid = 0;
    std::vector<gid_t> groups;
    bool progress = false;
    bool cg_kill = false;
    bool cg_procs = false;
    std::vector<rlimit_entry> limits;
    int nice = 0;
};

[[noreturn]] void child_fail(stage s) {
    const std::array<int, 2> msg{static_cast<int>(s), errno};
    [[maybe_unused]] const auto n = ::write(error_fd, msg.data(), sizeof msg);
    ::_exit(127);
}

bool parse_number(const char* text, unsigned long long max, unsigned long long& out) {
    if (text == nullptr || *text < '0' || *text > '9') {
        return false;
    }
    errno = 0;
    char* end = nullptr;
    out = std::strtoull(text, &end, 10);
    return errno == 0 && end != nullptr && *end == '\0' && out <= max;
}

/// Parses argv into `p`; false if they are not this build's arguments.
bool parse(int argc, char** argv, plan& p) {
    if (argc < 2 || std::strcmp(argv[1], version_arg) != 0) {
        return false;
    }
    constexpr auto max_id = static_cast<unsigned long long>(std::numeric_limits<uid_t>::max());
    int i = 2;
    for (; i < argc && std::strcmp(argv[i], "--") != 0; ++i) {
        const char* opt = argv[i];
        const char* val = i + 1 < argc ? argv[i + 1] : nullptr;
        unsigned long long n = 0;
        if (std::strcmp(opt, "-p") == 0) {
            p.progress = true;
        } else if (std::strcmp(opt, "-k") == 0) {
            p.cg_kill = true;
        } else if (std::strcmp(opt, "-P") == 0) {
            p.cg_procs = true;
        } else if (std::strcmp(opt, "-d") == 0 && val != nullptr) {
            p.dir = val;
            ++i;
        } else if (std::strcmp(opt, "-u") == 0 && parse_number(val, max_id, n)) {
            p.user = true;
            p.uid = static_cast<uid_t>(n);
            ++i;
        } else if (std::strcmp(opt, "-g") == 0 && parse_number(val, max_id, n)) {
            p.gid = static_cast<gid_t>(n);
            ++i;
        } else if (std::strcmp(opt, "-G") == 0 && val != nullptr) {
            for (const char* at = val; *at != '\0';) {
                const char* comma = std::strchr(at, ',');
                const std::string_view one(at, comma != nullptr ? comma - at : std::strlen(at));
                std::array<char, 24> digits{};
                if (one.empty() || one.size() >= digits.size()) {
                    return false;
                }
                std::copy(one.begin(), one.end(), digits.begin());
                if (!parse_number(digits.data(), max_id, n)) {
                    return false;
                }
                p.groups.push_back(static_cast<gid_t>(n));
                at = comma != nullptr ? comma + 1 : at + one.size();
            }
            ++i;
        } else if (std::strcmp(opt, "-n") == 0 && parse_number(val, 40, n)) {
            p.nice = static_cast<int>(n);
            ++i;
        } else if (std::strcmp(opt, "-l") == 0 && val != nullptr) {
            // RESOURCE:SOFT:HARD, each a number.
            std::array<unsigned long long, 3> v{};
            const char* at = val;
            for (std::size_t k = 0; k < v.size(); ++k) {
                char* end = nullptr;
                if (*at < '0' || *at > '9') {
                    return false;
                }
                errno = 0;
                v[k] = std::strtoull(at, &end, 10);
                if (errno != 0 || (k < 2 ? *end != ':' : *end != '\0')) {
                    return false;
                }
                at = end + 1;
            }
            if (v[0] >= RLIM_NLIMITS) {
                return false;
            }
            p.limits.push_back(rlimit_entry{
                static_cast<__rlimit_resource_t>(v[0]), static_cast<rlim_t>(v[1]),
                static_cast<rlim_t>(v[2])});
            ++i;
        } else {
            return false;
        }
    }
    if (i + 2 >= argc) {
        return false;  // no "--", or no PATH and ARGV0 after it
    }
    p.path = argv[i + 1];
    p.argv = argv + i + 2;
    return p.argv[0] != nullptr;
}

void set_all_signals(void (*handler)(int)) {
    struct sigaction sa {};
    sa.sa_handler = handler;  // NOLINT(cppcoreguidelines-pro-type-union-access)
    for (int sig = 1; sig < NSIG; ++sig) {
        ::sigaction(sig, &sa, nullptr);
    }
}

// --- the program, forked by its supervisor ---------------------------------------------------

[[noreturn]] void run_program(const plan& p, pid_t supervisor) {
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
        child_fail(stage::pgid);
    }
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) {
        child_fail(stage::pdeathsig);
    }
    if (::getppid() != supervisor) {
        ::_exit(127);
    }
    // Its cgroup (before it may lose the right to move), then its limits.
    if (p.cg_procs && ::write(cg_procs_fd, "0", 1) != 1) {
        child_fail(stage::cgroup);
    }
    ::close(cg_procs_fd);
    for (const auto& l : p.limits) {
        const rlimit lim{l.soft, l.hard};
        if (::setrlimit(l.resource, &lim) != 0) {
            child_fail(stage::rlimit);
        }
    }
    // Lower priority (never higher: no privilege needed), for it and what it starts.
    if (p.nice > 0 &&
        ::setpriority(PRIO_PROCESS, 0, ::getpriority(PRIO_PROCESS, 0) + p.nice) != 0) {
        child_fail(stage::nice);
    }
    if (p.dir != nullptr && ::chdir(p.dir) != 0) {
        child_fail(stage::dir);
    }
    if (p.user) {
        if (::setgroups(p.groups.size(), p.groups.data()) != 0) {
            child_fail(stage::groups);
        }
        if (::setgid(p.gid) != 0) {
            child_fail(stage::gid);
        }
        if (::setuid(p.uid) != 0) {
            child_fail(stage::uid);
        }
    }
    ::execve(p.path, p.argv, environ);
    child_fail(stage::exec);
}

// --- the program's tree ----------------------------------------------------------------------

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

/// True once the supervisor has no child left, live or not yet reaped: every process of the
/// program's tree is below it (a subreaper), so none is left anywhere.
bool no_children() {
    siginfo_t info{};
    return ::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 && errno == ECHILD;
}

/// SIGKILL to the whole tree until none of it is left (each round reaps what it can; a
/// process in uninterruptible sleep may take a moment to die), at most about 10 s.
void kill_everything(pid_t self, pid_t program, int& status, bool& program_done) {
    for (int round = 0; round < 2000; ++round) {
        if (no_children()) {
            // Nothing of the tree is left, and no walk of /proc is needed to know it (the
            // common end: a program that started nothing that outlived it). Its cgroup gets
            // cgroup.kill all the same: a process a debugger reparented away is still in it.
            if (supervisor_has_cg_kill) {
                [[maybe_unused]] const auto n = ::write(cg_kill_fd, "1", 1);
            }
            return;
        }
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
}  // namespace

int main(int argc, char** argv) {
    // A process group of its own (posix_spawn made it): a terminal's ^C to zkd's group does not
    // reach it (zkd decides).
    set_all_signals(SIG_DFL);
    for (const int sig :
         {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU, SIGUSR1, SIGUSR2}) {
        ::signal(sig, SIG_IGN);
    }
    sigset_t chld;
    ::sigemptyset(&chld);
    ::sigaddset(&chld, SIGCHLD);
    ::sigprocmask(SIG_SETMASK, &chld, nullptr);
    plan p;
    if (!parse(argc, argv, p)) {
        errno = EINVAL;
        child_fail(stage::arguments);
    }
    // Its own descriptors are not the program's; what the program has no use for is closed.
    for (const int fd : {error_fd, control_fd, cg_kill_fd, cg_procs_fd}) {
        ::fcntl(fd, F_SETFD, FD_CLOEXEC);
    }
    if (!p.progress) {
        ::close(3);
    }
    if (!p.cg_kill) {
        ::close(cg_kill_fd);
    }
    if (!p.cg_procs) {
        ::close(cg_procs_fd);
    }
    supervisor_has_cg_kill = p.cg_kill;
    ::close(signal_fd);
    const int sfd = ::signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0) {
        child_fail(stage::signals);
    }
    if (sfd != signal_fd) {
        if (::dup3(sfd, signal_fd, O_CLOEXEC) != signal_fd) {
            child_fail(stage::signals);
        }
        ::close(sfd);
    }
    // Orphans of the program's tree (a daemonizing grandchild, a setsid one) become ours.
    if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
        child_fail(stage::subreaper);
    }
    const pid_t self = ::getpid();
    const pid_t program = ::fork();
    if (program < 0) {
        child_fail(stage::fork);
    }
    if (program == 0) {
        run_program(p, self);
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
                if (req[static_cast<std::size_t>(i)] == terminate_request) {
                    signal_tree(self, SIGTERM);
                } else if (req[static_cast<std::size_t>(i)] == kill_request) {
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
    return 0;
}
