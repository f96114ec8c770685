// SPDX-License-Identifier: MIT
// zkd-chaos: what a run recorded, and the invariants checked over it. Pure: no I/O, no clock
// (times are milliseconds since the load started, as recorded).
#pragma once

#include "chaos/schedule.hpp"

#include <boost/json/value.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace zkd::chaos {

/// A task the load submitted (the submit succeeded), with the value its result must carry.
struct submitted_task {
    std::string id;
    std::int64_t at_ms = 0;
    boost::json::value expected;
};

/// A result the load read (and then consumed).
struct observed_result {
    std::string id;
    std::int64_t at_ms = 0;
    std::string state;  ///< "succeeded", "failed", "lost", ...
    boost::json::value value;
    std::string worker;
    int attempt = 0;
};

/// What was left in the namespace once the run had settled.
struct leftover_nodes {
    std::vector<std::string> pending;   ///< task ids under /pending/<s>
    std::vector<std::string> delayed;   ///< task ids under /delayed/<s> (all due by then)
    std::vector<std::string> assigned;  ///< "<worker>/<name>" under /assign/<worker>
    std::vector<std::string> results;   ///< task ids under /results/<r>
    /// What a left result node says, by task id ("worker W, attempt A"), where it was read.
    std::map<std::string, std::string> result_info;
};

/// How one `zkd run` process ended.
struct process_end {
    std::string name;       ///< "zkd2#3": slot 2, its third start
    int exit_code = -1;     ///< -1: killed by a signal (or never reaped)
    int signal = 0;         ///< the signal that ended it, 0: none
    bool expected = false;  ///< the end chaos caused (its SIGKILL, or exit 0 after its SIGTERM)
    std::string evidence;   ///< a sanitizer or abort line from its log; empty: none
};

/// A fault as it was carried out.
struct injected_fault {
    fault planned;
    std::int64_t at_ms = 0;  ///< when it was injected
    std::string target;      ///< "zkd3 (pid 1234)", "zk2 (pid 99, leader)"
    bool skipped = false;    ///< not injected (why: note)
    std::string note;
    /// ZooKeeper faults: when the member served again (ms since the load started).
    std::optional<std::int64_t> served_again_ms;
    /// zk-kill: which start of the member's log is the restart (1-based; 0: none) and when
    /// it was started (ms since the Unix epoch), to read its phases from the log at the end.
    std::size_t restart_start = 0;
    std::int64_t restart_epoch_ms = 0;
};

/// Everything one run recorded.
struct recording {
    std::vector<submitted_task> submitted;
    std::vector<observed_result> results;
    std::uint64_t submit_failures = 0;  ///< submit() calls that failed (tasks not counted above)
    /// Of the submitted tasks, those the client placed on a worker itself, not through the
    /// master (docs/protocol.md §6 T1 "Direct placement"): information, not an invariant.
    std::uint64_t placed_directly = 0;
    /// Why waiting for a task's result failed, by task id (such a task has no result).
    std::map<std::string, std::string> wait_errors;
    leftover_nodes leftovers;
    std::vector<process_end> ends;
    std::vector<injected_fault> faults;
    std::int64_t end_ms = 0;  ///< when waiting for results stopped
};

/// A fault with what followed it.
struct fault_outcome {
    injected_fault f;
    /// ms from the fault to the first result of a task submitted at or after it; nullopt: none.
    std::optional<std::int64_t> recovery_ms;
    /// ms from the fault until the member served again (ZooKeeper faults).
    std::optional<std::int64_t> served_after_ms;
};

/// The invariants' outcome.
struct check_report {
    std::uint64_t submitted = 0;
    std::uint64_t results = 0;  ///< results read (a duplicate counts once more)
    std::uint64_t correct = 0;  ///< tasks with exactly one result, succeeded, value as expected
    std::uint64_t lost = 0;     ///< submitted tasks without any result
    std::uint64_t duplicated =
        0;                    ///< tasks with a second result (read twice, or left over after ours)
    std::uint64_t wrong = 0;  ///< tasks whose result is not succeeded or not their value
    std::uint64_t foreign = 0;  ///< results read for ids never submitted
    std::uint64_t submit_failures = 0;
    std::uint64_t placed_directly = 0;  ///< recording::placed_directly
    std::uint64_t leftover_pending = 0;
    std::uint64_t leftover_delayed = 0;
    std::uint64_t leftover_assigned = 0;
    std::uint64_t leftover_results = 0;  ///< left results that are not a duplicate of one read
    std::uint64_t crashes = 0;
    std::int64_t longest_stall_ms = 0;  ///< longest time without a result while tasks were out
    std::int64_t longest_stall_from_ms = 0;
    std::map<std::string, std::uint64_t> faults_by_kind;  ///< injected ones
    std::uint64_t faults_skipped = 0;
    std::vector<fault_outcome> timeline;
    std::vector<std::string> violations;  ///< one line each, the first few of every kind
    [[nodiscard]] bool ok() const noexcept { return violations.empty(); }
};

/// Checks every submitted task got exactly one result, succeeded and with its value; no
/// result for an unknown id; nothing left in /pending, /assign, /results; every process
/// ended as chaos made it; and measures stalls and each fault's recovery.
check_report check(const recording& r);

/// The longest time (and its start) without a result while submitted tasks had none yet.
/// Only the first result of a task counts; an unanswered task stalls until end_ms.
std::pair<std::int64_t, std::int64_t> longest_stall(
    const std::vector<submitted_task>& submitted,
    const std::vector<observed_result>& results,
    std::int64_t end_ms
);

}  // namespace zkd::chaos
