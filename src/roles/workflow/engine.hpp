// SPDX-License-Identifier: MIT
// The workflow engine: the elected master's shell over workflow_fsm (docs/protocol.md §11).
#pragma once

#include "protocol/layout.hpp"
#include "workflow/state.hpp"
#include "zkco/client.hpp"

#include <boost/asio/awaitable.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace zkd::roles {

struct workflow_engine_options {
    /// A finished workflow is deleted this long after it ended (W4); the master's result
    /// retention.
    std::chrono::milliseconds retention{24L * 3600 * 1000};
    /// An empty workflow node (its client died while writing a large spec) older than this
    /// is deleted.
    std::chrono::milliseconds abandoned_after{10L * 60 * 1000};
    /// W2 places a launched task on a worker with room itself, as a client's direct
    /// placement does (docs/protocol.md §11.4); the master's say on direct placement
    /// (`zkd run --no-direct`: every task goes through pending).
    bool direct = true;
    /// The workers' view for direct placement is read again when it is older than this.
    std::chrono::milliseconds workers_read_every{1000};
    /// The member id of the worker that shares this master's ZooKeeper session (a member
    /// that is both), empty when there is none: a W2 that launches one task places it there
    /// first (docs/protocol.md §11.4), and the engine learns of its results from the
    /// answers to that worker's own T4 (zkco::client::observe_sets), without reading them.
    std::string own_worker;
};

/// What the engine has done, for logs and tests.
struct workflow_engine_stats {
    std::uint64_t adopted = 0;     ///< workflows read and followed
    std::uint64_t launched = 0;    ///< tasks created (W2 committed)
    std::uint64_t writes = 0;      ///< W2 transactions committed
    std::uint64_t finished = 0;    ///< workflows that ended under this engine
    std::uint64_t reaped = 0;      ///< workflows deleted (W4)
    std::uint64_t placed = 0;      ///< tasks W2 placed on a worker itself (counted in launched)
    std::uint64_t redirected = 0;  ///< W2s sent again with every task to pending (a worker
                                   ///< left or changed)
    /// Gauges, kept while the engine runs (0 once it stops): the workflows it follows (every
    /// one not yet reaped, finished ones included) by status, indexed as workflow_statuses,
    /// and their steps by status, indexed as step_statuses. A workflow counts once its state
    /// is read.
    std::array<std::size_t, 4> workflows{};
    std::array<std::size_t, 6> steps{};
};

/// The order of workflow_engine_stats::workflows.
inline constexpr std::array<workflow::workflow_status, 4> workflow_statuses{
    workflow::workflow_status::running, workflow::workflow_status::succeeded,
    workflow::workflow_status::failed, workflow::workflow_status::cancelled};
/// The order of workflow_engine_stats::steps.
inline constexpr std::array<workflow::step_status, 6> step_statuses{
    workflow::step_status::waiting,   workflow::step_status::running,
    workflow::step_status::succeeded, workflow::step_status::failed,
    workflow::step_status::skipped,   workflow::step_status::cancelled};

/// Runs every workflow of the namespace as the master of epoch `epoch` (from take_over):
/// lists /workflows (and follows it), reads each workflow's spec and state, follows its
/// results directory, and carries out its workflow_fsm's actions, each write one multi
/// fenced by check(/epoch, epoch). Runs until cancelled (the node cancels it when the
/// master stops acting) or the session ends.
boost::asio::awaitable<void> run_workflows(
    zkco::client& zk,
    protocol::layout l,
    std::int64_t epoch,
    workflow_engine_options opts = {},
    workflow_engine_stats* stats = nullptr
);

}  // namespace zkd::roles
