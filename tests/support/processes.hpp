// SPDX-License-Identifier: MIT
// Child processes for tests: a long-running `zkd run` (zkd_process) and a command run to
// completion with its output captured (run_command).
#pragma once

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string>
#include <string_view>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace zkd::test {

/// argv or envp as execve wants them (pointers into `args`, then a null). Made before fork():
/// the child of a process with threads may call only async-signal-safe functions, and malloc
/// is not one (a child that forked while another thread held its lock hangs before exec).
inline std::vector<char*> null_terminated(std::vector<std::string>& args) {
    std::vector<char*> raw;
    raw.reserve(args.size() + 1);
    for (auto& a : args) {
        raw.push_back(a.data());
    }
    raw.push_back(nullptr);
    return raw;
}

/// A `zkd run` child process; killed (SIGKILL) when the test is done with it. Given
/// `netns` (a network namespace's file, support/netns.hpp), it runs inside that namespace.
/// It runs with a 2 s session timeout unless `short_session` is false (then zkd's default).
class zkd_process {
public:
    zkd_process(
        const std::string& binary,
        const std::string& connect,
        const std::string& ns,
        const std::string& host,
        const std::filesystem::path& log,
        std::vector<std::string> extra = {},
        const std::string& netns = {},
        bool short_session = true
    ) {
        std::vector<std::string> argv{binary,   "run", "--zk",       connect, "--namespace", ns,
                                      "--host", host,  "--capacity", "2",     "--threads",   "2"};
        if (short_session) {
            argv.insert(argv.end(), {"--session-timeout", "2000"});
        }
        argv.insert(argv.end(), extra.begin(), extra.end());
        const auto raw = null_terminated(argv);
        const std::string netns_failed = "cannot enter the network namespace " + netns + "\n";
        pid_ = ::fork();
        if (pid_ == 0) {
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);
            const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
            ::dup2(fd, 1);
            ::dup2(fd, 2);
            if (!netns.empty()) {
                const int in = ::open(netns.c_str(), O_RDONLY | O_CLOEXEC);
                if (in < 0 || ::setns(in, CLONE_NEWNET) != 0) {
                    (void)!::write(2, netns_failed.data(), netns_failed.size());
                    ::_exit(126);
                }
            }
            ::execv(raw[0], raw.data());
            ::_exit(127);
        }
    }
    zkd_process(const zkd_process&) = delete;
    zkd_process& operator=(const zkd_process&) = delete;
    ~zkd_process() { kill(SIGKILL); }

    /// Waits up to `limit` for the process to exit: its exit code, 128 + signal when killed
    /// by one, or -1 if it still runs.
    int wait_exit(std::chrono::milliseconds limit) {
        const auto until = std::chrono::steady_clock::now() + limit;
        while (pid_ > 0) {
            int status = 0;
            const pid_t r = ::waitpid(pid_, &status, WNOHANG);
            if (r == pid_) {
                pid_ = 0;
                return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            }
            if (std::chrono::steady_clock::now() >= until) {
                return -1;
            }
            ::usleep(20'000);
        }
        return -1;
    }

    /// Its pid (0 once it was reaped).
    [[nodiscard]] pid_t pid() const { return pid_; }

    void kill(int sig) {
        if (pid_ > 0) {
            ::kill(pid_, sig);
            if (sig == SIGKILL) {
                ::waitpid(pid_, nullptr, 0);
                pid_ = 0;
            }
        }
    }

private:
    pid_t pid_ = 0;
};

/// What a finished command printed and how it ended.
struct command_result {
    int exit_code = -1;  ///< 128 + signal if killed; -1 if it had to be killed for the timeout
    std::string out;
    std::string err;
    std::chrono::milliseconds took{0};
};

/// Runs argv[0] with `argv` and extra environment variables (empty value: unset), capturing
/// stdout and stderr; kills it after `limit`. Its stdin is `stdin_file` when given.
inline command_result run_command(
    const std::vector<std::string>& argv,
    const std::map<std::string, std::string>& env = {},
    std::chrono::milliseconds limit = std::chrono::seconds(60),
    const std::filesystem::path& stdin_file = {}
) {
    int out_pipe[2];
    int err_pipe[2];
    if (::pipe(out_pipe) != 0 || ::pipe(err_pipe) != 0) {
        return {};
    }
    // The child's argv and environment (ours, with `env` applied), made before fork().
    auto args = argv;
    const auto raw = null_terminated(args);
    std::vector<std::string> vars;
    for (char** e = environ; *e != nullptr; ++e) {
        const std::string_view var(*e);
        if (!env.contains(std::string(var.substr(0, var.find('='))))) {
            vars.emplace_back(var);
        }
    }
    for (const auto& [k, v] : env) {
        if (!v.empty()) {
            vars.push_back(k + "=" + v);
        }
    }
    const auto envp = null_terminated(vars);
    const std::string stdin_path = stdin_file.string();
    const auto start = std::chrono::steady_clock::now();
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        ::dup2(out_pipe[1], 1);
        ::dup2(err_pipe[1], 2);
        if (!stdin_path.empty()) {
            const int in = ::open(stdin_path.c_str(), O_RDONLY);
            ::dup2(in, 0);
        }
        ::close(out_pipe[0]);
        ::close(err_pipe[0]);
        ::execve(raw[0], raw.data(), envp.data());
        ::_exit(127);
    }
    ::close(out_pipe[1]);
    ::close(err_pipe[1]);
    command_result r;
    pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
    int open_fds = 2;
    bool killed = false;
    while (open_fds > 0) {
        const auto left = limit - (std::chrono::steady_clock::now() - start);
        if (left <= std::chrono::milliseconds(0) && !killed) {
            ::kill(pid, SIGKILL);
            killed = true;
        }
        if (::poll(fds, 2, 100) < 0) {
            break;
        }
        for (int i = 0; i < 2; ++i) {
            if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP)) == 0) {
                continue;
            }
            char buf[4096];
            const auto n = ::read(fds[i].fd, buf, sizeof buf);
            if (n <= 0) {
                ::close(fds[i].fd);
                fds[i].fd = -1;
                --open_fds;
            } else {
                (i == 0 ? r.out : r.err).append(buf, static_cast<std::size_t>(n));
            }
        }
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    r.took = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - start
    );
    r.exit_code = killed ? -1 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return r;
}

/// A command running in the background, its stdout and stderr going to files; killed
/// (SIGKILL) when the test is done with it.
class background_command {
public:
    background_command(
        const std::vector<std::string>& argv, std::filesystem::path out, std::filesystem::path err
    )
        : out_(std::move(out)), err_(std::move(err)) {
        auto args = argv;
        const auto raw = null_terminated(args);
        pid_ = ::fork();
        if (pid_ == 0) {
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);
            const int o = ::open(out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
            const int e = ::open(err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
            ::dup2(o, 1);
            ::dup2(e, 2);
            ::execv(raw[0], raw.data());
            ::_exit(127);
        }
    }
    background_command(const background_command&) = delete;
    background_command& operator=(const background_command&) = delete;
    ~background_command() {
        if (pid_ > 0) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
    }

    void signal(int sig) const {
        if (pid_ > 0) {
            ::kill(pid_, sig);
        }
    }

    /// Waits up to `limit` for the exit: its exit code, 128 + signal, or -1 if it still runs.
    int wait_exit(std::chrono::milliseconds limit) {
        const auto until = std::chrono::steady_clock::now() + limit;
        while (pid_ > 0) {
            int status = 0;
            if (::waitpid(pid_, &status, WNOHANG) == pid_) {
                pid_ = 0;
                return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            }
            if (std::chrono::steady_clock::now() >= until) {
                return -1;
            }
            ::usleep(20'000);
        }
        return -1;
    }

    [[nodiscard]] std::string out() const { return read(out_); }
    [[nodiscard]] std::string err() const { return read(err_); }

private:
    static std::string read(const std::filesystem::path& p) {
        std::ifstream in(p);
        return {std::istreambuf_iterator<char>(in), {}};
    }

    pid_t pid_ = 0;
    std::filesystem::path out_;
    std::filesystem::path err_;
};

/// A directory of its own for the current test's child-process logs:
/// <tmp>/zkd-<what>-<pid>-<test name>, created empty.
inline std::filesystem::path make_test_dir(const std::string& what, const std::string& test_name) {
    auto dir = std::filesystem::temp_directory_path() /
               ("zkd-" + what + "-" + std::to_string(::getpid()) + "-" + test_name);
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    return dir;
}

/// Prints the last `tail` bytes of every file in `dir` to stderr (after a failure).
inline void print_logs(const std::filesystem::path& dir, std::size_t tail) {
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        std::ifstream in(entry.path());
        const std::string all((std::istreambuf_iterator<char>(in)), {});
        std::cerr << "===== " << entry.path() << " (last " << tail << " bytes) =====\n"
                  << all.substr(all.size() > tail ? all.size() - tail : 0) << "\n";
    }
}

}  // namespace zkd::test
