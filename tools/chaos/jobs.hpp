// SPDX-License-Identifier: MIT
// zkd-chaos's jobs workloads (--workload delayed,schedules,workflows): what a run recorded of
// delayed tasks, schedules and workflows, and their invariants (docs/chaos.md "Jobs"). Pure:
// no I/O, no clock; times are ms since the Unix epoch (the machine's wall clock, which the
// master, the workers and the tool share on one machine).
#pragma once

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zkd::chaos {

/// The exec type every zkd of a jobs run serves: a shell script in the run directory that
/// appends "<task id> <attempt> <ms>" to the run's start log, then returns its args as `echo`
/// does (or fails, args {"fail": true, ...}).
inline constexpr std::string_view step_type = "chaos-step";

/// One start of a task's program, as the start log says.
struct task_start {
    std::string id;
    int attempt = 0;
    std::int64_t at_ms = 0;
};

/// Parses the start log: one "<id> <attempt> <ms>" per line; lines of another form (a line
/// cut by a kill) are counted in `bad`.
std::vector<task_start> parse_start_log(std::string_view text, std::size_t* bad = nullptr);

/// A result as read from ZooKeeper (its fields that the checks use).
struct job_result {
    std::string id;
    std::string state;  ///< "succeeded", "failed", ...
    boost::json::value value;
    std::string error_code;
    std::string worker;
    int attempt = 0;
    int try_number = 0;  ///< 0: absent (never retried)
    std::int64_t started_ms = 0;
    std::int64_t finished_ms = 0;
    /// The earlier tries' errors' finished_ms, oldest first (§4.3 "errors").
    std::vector<std::int64_t> error_finished_ms;
};

/// A delayed task the run submitted (the submit succeeded).
struct delayed_task {
    std::string id;
    std::int64_t due_ms = 0;
    boost::json::value args;
    /// > 0: args say {"fail": true}: every try fails and the task must end `failed` after
    /// exactly retries + 1 tries; 0: it must succeed with its args as value.
    int retries = 0;
};

/// A schedule the run added, and what it found of it at the end.
struct schedule_record {
    std::string name;
    std::string misfire;  ///< "all", "once", "skip"
    std::int64_t every_ms = 0;
    int priority = 5;
    std::string client;
    boost::json::value args;
    /// The document once paused at the end of the load (so final): nullopt when unread.
    bool final_read = false;
    std::int64_t created_ms = 0;
    std::int64_t last_due_ms = 0;
    std::uint64_t fired = 0;
    std::uint64_t missed = 0;
    std::uint64_t skipped = 0;
    /// Every distinct result read under /results/<client> (a task id read again with another
    /// worker, attempt or start is a second result of it).
    std::vector<job_result> results;
};

/// A workflow the run submitted, with what it must end with.
struct workflow_record {
    std::string id;
    std::string shape;  ///< "chain", "map", "dag": for the report
    boost::json::value expected_result;
    std::size_t expected_tasks = 0;
    std::string fan_in_task;  ///< the task id of its fan-in step; empty: none
    /// How it ended: empty when it was never read (why in `error`).
    std::string status;
    boost::json::value result;
    std::string error;
    /// Every result under /results/<its client> at the end.
    std::vector<job_result> results;
};

struct jobs_recording {
    std::vector<delayed_task> delayed;
    std::uint64_t delayed_submit_failures = 0;
    /// Results read for delayed tasks (a task read twice: twice).
    std::vector<job_result> delayed_results;
    /// Why waiting for a delayed task's result failed, by id.
    std::map<std::string, std::string> delayed_wait_errors;
    /// Task ids left in /results after the run whose results were consumed (duplicates).
    std::vector<std::string> leftover_results;
    std::vector<schedule_record> schedules;
    std::vector<workflow_record> workflows;
    std::uint64_t workflow_submit_failures = 0;
    std::vector<task_start> starts;
    std::size_t bad_start_lines = 0;
};

struct jobs_report {
    // delayed tasks
    std::uint64_t delayed = 0;
    std::uint64_t delayed_retried = 0;  ///< of them, failing ones with retries
    std::uint64_t delayed_correct = 0;
    std::uint64_t early_starts = 0;   ///< starts (of any try) before the due time
    std::uint64_t started_twice = 0;  ///< tasks with more starts of one attempt than tries
    /// First start minus due time, of the tasks that never failed: percentiles (ms).
    std::int64_t lateness_p50_ms = 0;
    std::int64_t lateness_p99_ms = 0;
    std::int64_t lateness_max_ms = 0;
    // schedules
    std::uint64_t due_times = 0;  ///< decided, over all schedules
    std::uint64_t firings = 0;    ///< results of firings
    std::uint64_t missed = 0;
    // workflows
    std::uint64_t workflows = 0;
    std::uint64_t workflows_succeeded = 0;
    std::uint64_t workflow_tasks = 0;     ///< results of workflow tasks
    std::vector<std::string> lines;       ///< a summary per schedule, for the report
    std::vector<std::string> violations;  ///< as check_report's
    [[nodiscard]] bool ok() const noexcept { return violations.empty(); }
};

/// Checks the jobs invariants:
/// - delayed: exactly one result each; succeeded with its args, or (retries) failed after
///   retries + 1 tries; no start before the due time, a retry's try not before the failed
///   try ended; no attempt started more often than the task has tries;
/// - schedules: every due time in (created, last decided] decided once (fired + missed +
///   skipped = their count), each firing's result once, for a due time of the schedule,
///   succeeded with its args, started no earlier than due, its task started once per
///   attempt; `all` missed none and fired every one; `once`: every missed due time is
///   followed by a fired one and the last one fired; skipped none (no no_overlap);
/// - workflows: each succeeded with its expected result, one result per task it launches
///   (no more, no fewer), every task started once per attempt, the fan-in once.
jobs_report check_jobs(const jobs_recording& r);

/// What a workflow of `echo`-like steps (each returns its args) ends with: the object of
/// its sink steps' values (docs/protocol.md §11.4 "What runs"), and how many tasks it
/// launches. `spec` is a spec as submitted ({"steps": {...}}), without failing steps.
struct echo_outcome {
    boost::json::object result;
    std::size_t tasks = 0;
};
echo_outcome echo_workflow_outcome(const boost::json::object& spec);

}  // namespace zkd::chaos
