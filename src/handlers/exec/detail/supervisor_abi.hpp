// SPDX-License-Identifier: MIT
// Exec types, private: what zkd and its supervisor program (zkd-supervise, supervisor/main.cpp)
// agree on: the descriptors it starts with, its arguments, the failure stages it reports on the
// error pipe and the records it sends on the control socket. docs/exec.md "How it runs".
#pragma once

#include <cstdint>

namespace zkd::handlers::exec::detail::supervisor_abi {

/// argv[1] of every supervisor: "--abi=" and a digest of this header and the supervisor's
/// source, made when the build is configured (src/handlers/CMakeLists.txt). A supervisor
/// whose own differs (another build of zkd: a package upgraded under a running zkd) refuses.
inline constexpr const char* version_arg = "--abi=" ZKD_SUPERVISOR_ABI;

// The supervisor's fds as zkd starts it: the program's 0..3 (3: the progress pipe, with -p),
// then its own. It marks 4, 5, 7 and 8 close-on-exec itself.
inline constexpr int error_fd = 4;     ///< the error pipe: a failed stage, or EOF at execve
inline constexpr int control_fd = 5;   ///< the control socket
inline constexpr int signal_fd = 6;    ///< its SIGCHLD signalfd (it opens it)
inline constexpr int cg_kill_fd = 7;   ///< its program's cgroup.kill (with -k)
inline constexpr int cg_procs_fd = 8;  ///< its program's cgroup.procs (with -P)

/// Where a child failed, sent as {stage, errno} (two ints) on the error pipe.
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
    nice,
    arguments,  ///< its arguments are not this build's (another zkd's supervisor)
};

/// Records the supervisor writes on the control socket: {kind, value} as two int32; cpu (the
/// program's CPU time in ms, its reaped children's included) comes before exited or killed.
enum class record : std::int32_t { started = 0, exited = 1, killed = 2, cpu = 3 };

/// Requests zkd writes on the control socket, one byte each.
inline constexpr char terminate_request = 'T';  ///< SIGTERM to the program's tree
inline constexpr char kill_request = 'K';       ///< SIGKILL to the program's tree

}  // namespace zkd::handlers::exec::detail::supervisor_abi
