// SPDX-License-Identifier: MIT
// Exec types, private: one supervised child (its supervisor, its program, their pipes) on the
// loop's executor, shared by one-shot runs (process.cpp) and served programs (serve.cpp).
#pragma once

#include "handlers/exec.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <sys/types.h>
#include <vector>

namespace zkd::handlers::exec::detail {

/// How a supervised program ended.
struct exit_status {
    int exit_code = -1;       ///< its exit status when it exited
    int signal = 0;           ///< the signal that killed it, if one did
    std::string start_error;  ///< non-empty: it never ran (a step before execve failed)
    std::chrono::milliseconds cpu_used{-1};  ///< the program's CPU time; -1: unknown
    std::uint64_t oom_kills = 0;             ///< its cgroup's OOM kills (no cgroup: 0)
    std::uint64_t pids_max = 0;              ///< forks its cgroup refused at pids.max
};

class program_cgroup;

/// A started program under its supervisor (docs/exec.md "No orphans"): zkd starts a
/// supervisor (the zkd-supervise program), a subreaper that forks the program and, when the program
/// exits, when asked, or when zkd goes away (its control socket closes), kills every process of the
/// program's tree, then reports and exits. `in`, `out`, `err` and `progress` are zkd's ends of the
/// program's fds 0, 1, 2 and 3 (`progress` is closed when the program has no fd 3).
struct child : std::enable_shared_from_this<child> {
    explicit child(const boost::asio::any_io_executor& ex);
    child(const child&) = delete;
    child& operator=(const child&) = delete;
    ~child();

    pid_t supervisor = 0;
    pid_t program = 0;  ///< once the supervisor has said (0 before)
    boost::asio::posix::stream_descriptor in, out, err, progress;
    boost::asio::posix::stream_descriptor error;    // execve's failure, or EOF on success
    boost::asio::posix::stream_descriptor control;  // to and from the supervisor
    boost::asio::posix::stream_descriptor pidfd;    // the supervisor's
    boost::asio::steady_timer kill_timer;           // SIGTERM → SIGKILL
    std::chrono::milliseconds grace{0};
    bool reaped = false;  // the supervisor is gone: nothing more is sent to it
    bool term_sent = false;
    bool kill_sent = false;
    std::unique_ptr<program_cgroup> cgroup;  // its own, when its limits need one

    /// SIGTERM to every process of the program's tree, then SIGKILL after `grace`.
    void terminate();
    /// SIGKILL to every process of the program's tree, at once.
    void kill_tree();
    /// Sends one request byte ('T' or 'K') to the supervisor.
    void send(char request) const;
};

/// The supervisor program (zkd-supervise) this process starts, found once: $ZKD_SUPERVISE if
/// set; else the first executable of: beside the running program, ../libexec/zkd/ from it,
/// this build's tree, the install prefix it was configured with. Empty if none is.
const std::string& supervisor_program();

/// Why no supervisor can be started (empty: one can): checked when an exec type is added.
std::string check_supervisor_program();

/// Starts the supervisor (posix_spawn: nothing of zkd's memory is copied), which forks the
/// program: `p` with `env`; fd 3 is a progress pipe when `with_progress_fd`. Nullptr with
/// `error` set if the supervisor could not be started; a failure of a later step shows in the
/// exit_status of wait_exit.
std::shared_ptr<child> spawn(
    const boost::asio::any_io_executor& ex,
    const program& p,
    const std::vector<std::string>& env,
    bool with_progress_fd,
    std::string& error
);

/// Awaits the end of `c`: its supervisor reaped (which it is, every time), the program's
/// status as the supervisor reported it. Sets c->program as soon as the supervisor says it.
/// Never cancelled by the awaiting coroutine's cancellation.
boost::asio::awaitable<exit_status> wait_exit(std::shared_ptr<child> c);

}  // namespace zkd::handlers::exec::detail
