// SPDX-License-Identifier: MIT
// Exec types, private: one program's cgroup v2 (docs/exec.md "Limits"): made before its
// program starts, with the type's limits written into it, read and removed once the program's
// tree is gone.
#pragma once

#include "handlers/exec.hpp"

#include <cstdint>
#include <memory>
#include <string>

namespace zkd::handlers::exec::detail {

/// A cgroup of its own for one program process (one-shot run or served process) and
/// everything it starts, below program::cgroup_parent.
class program_cgroup {
public:
    /// Makes the cgroup and writes `p`'s limits (those its plan puts in a cgroup). Nullptr,
    /// with `error` set, if that fails: the program then cannot start.
    static std::unique_ptr<program_cgroup> make(const program& p, std::string& error);

    program_cgroup(const program_cgroup&) = delete;
    program_cgroup& operator=(const program_cgroup&) = delete;
    /// Kills what is left in it (cgroup.kill) and removes it.
    ~program_cgroup();

    /// cgroup.procs, open for writing (the program moves itself in before it execs).
    [[nodiscard]] int procs_fd() const { return procs_; }
    /// cgroup.kill, open for writing (-1 on kernels before 5.14).
    [[nodiscard]] int kill_fd() const { return kill_; }
    /// memory.events' oom_kill (0 when there is no memory controller).
    [[nodiscard]] std::uint64_t oom_kills() const;
    /// pids.events' max: forks refused at pids.max.
    [[nodiscard]] std::uint64_t pids_refused() const;

private:
    explicit program_cgroup(std::string dir) : dir_(std::move(dir)) {}
    std::string dir_;
    int procs_ = -1;
    int kill_ = -1;
};

}  // namespace zkd::handlers::exec::detail
