// SPDX-License-Identifier: MIT
// What a zkd-loadgen run measured, and its two renderings: the text report and the JSON
// object of --json (one shape, documented at to_json). Pure: no I/O.
#pragma once

#include "loadgen/histogram.hpp"
#include "loadgen/mntr.hpp"
#include "loadgen/options.hpp"
#include "loadgen/raw.hpp"
#include "zkco/types.hpp"

#include <boost/json/object.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace zkd::loadgen {

/// Tasks that did not end well, by kind.
struct error_counts {
    std::uint64_t failed = 0;          ///< result state failed (handler error, unknown type...)
    std::uint64_t timed_out = 0;       ///< result state timed_out
    std::uint64_t cancelled = 0;       ///< result state cancelled
    std::uint64_t lost = 0;            ///< result state lost (attempts exhausted)
    std::uint64_t wrong_result = 0;    ///< succeeded, but echo gave back other data
    std::uint64_t garbage_result = 0;  ///< the result node held no zkd result
    std::uint64_t submit = 0;          ///< tasks whose submit() failed
    std::uint64_t session = 0;         ///< waits ended by the session (expired, closed)
    std::uint64_t wait = 0;            ///< waits ended by another error
    std::uint64_t unfinished = 0;      ///< submitted, no result when the run stopped

    [[nodiscard]] std::uint64_t total() const noexcept {
        return failed + timed_out + cancelled + lost + wrong_result + garbage_result + submit +
               session + wait + unfinished;
    }
};

/// One result, for --trace.
struct task_trace {
    double due_ms = 0;             ///< submit (open loop: scheduled time), from the run's start
    double latency_ms = 0;         ///< due -> result consumed
    std::int64_t started_ms = 0;   ///< the handler started (worker's clock); 0: not run
    std::int64_t finished_ms = 0;  ///< and finished
    std::string worker;            ///< who ran it; empty: nobody
};

/// The load part of a run.
struct load_report {
    std::uint64_t submitted = 0;  ///< tasks whose submit() succeeded
    std::uint64_t results = 0;    ///< results consumed (any state)
    std::uint64_t succeeded = 0;
    double elapsed_s = 0;      ///< first submit to last result (submit-only: last submit)
    double submit_s = 0;       ///< first submit to the last submit's completion
    log_histogram latency_us;  ///< submit (open loop: scheduled time) -> result consumed
    log_histogram submit_us;   ///< duration of each submit() call
    /// Where the latency goes, from the times the worker writes into each result (whole
    /// milliseconds, the worker's wall clock against this machine's: meaningful when both
    /// run on one machine or with synchronised clocks): submit (open loop: scheduled time)
    /// -> the handler started; started -> finished; finished -> the result consumed here.
    log_histogram to_start_us;
    log_histogram run_us;
    log_histogram to_result_us;
    std::vector<task_trace> trace;  ///< a row per result, with --trace only
    error_counts errors;
    double schedule_lag_max_ms = 0;  ///< open loop: how far behind schedule a submit went
    bool stalled = false;            ///< stopped by --stall-timeout
    bool interrupted = false;        ///< stopped by a signal
    bool session_lost = false;       ///< the loadgen's session ended
    std::optional<zk_counts> zk;     ///< server counters, after - before
    std::string mntr_error;          ///< why zk is empty (unless --no-mntr)
    zkco::client_counters client;    ///< this session's requests during the run
    /// Listings of this client's results directory (task_client::results_listings): one to
    /// start following it, then one per change log read that missed a change
    std::uint64_t results_listings = 0;
    /// Tasks this client placed on workers itself, without the master
    /// (task_client::direct_placed, docs/protocol.md §6 T1 "Direct placement")
    std::uint64_t direct = 0;
    /// Tasks the client packed into bundles by itself (task_client::auto_bundled,
    /// docs/protocol.md §4.1 "Automatic bundles")
    std::uint64_t auto_bundled = 0;
    std::uint64_t workers = 0;   ///< workers serving the type at the start
    std::uint64_t capacity = 0;  ///< their slots
    /// submit() calls refused because the cluster's queue was full (zkd run --max-pending):
    /// each was tried again after a pause, so its tasks are not errors
    std::uint64_t queue_full = 0;

    /// results / elapsed_s (submitted / elapsed_s with --submit-only).
    [[nodiscard]] double tasks_per_s(bool submit_only) const noexcept {
        const auto n = submit_only ? submitted : results;
        return elapsed_s > 0 ? static_cast<double>(n) / elapsed_s : 0;
    }
};

/// What this process used (getrusage), to see whether the load generator itself saturates.
struct process_usage {
    double user_s = 0;
    double sys_s = 0;
    std::int64_t max_rss_kb = 0;
};

/// A --trace line (without its newline): "due_ms latency_ms started_ms finished_ms worker".
/// The worker's id comes from a result anyone could have written: blanks and control
/// characters in it become '_' (so a line stays five fields), an empty one "-".
std::string trace_line(const task_trace& t);

/// Everything a run reports.
struct run_report {
    settings s;
    process_usage usage;
    std::optional<raw_report> raw;
    std::string raw_error;
    std::optional<load_report> load;
    int exit = exit_ok;
    std::string message;  ///< why the run failed, if it did
};

/// The --json object:
/// ```
/// {"v":1, "zk":"...", "namespace":"...", "exit":0, "message":"" (when set),
///  "config":{"mode":"closed"|"open", "tasks":N|null, "duration_s":x|null,
///            "concurrency":C|null, "rate":R|null, "task":"echo", "payload":16, "batch":1,
///            "submit_only":false},
///  "raw":{"creates_per_s":x, "multis_per_s":x, "creates_in_multis_per_s":x, "batch":B,
///         "window":W, "ops":N, "payload":P, "rounds":[{"creates_per_s":x,"multis_per_s":x}]}
///        (with --raw/--with-raw; "raw_error":"..." instead when it failed),
///  "load":{"workers":n, "capacity":n, "submitted":n, "results":n, "succeeded":n,
///          "elapsed_s":x, "submit_s":x, "tasks_per_s":x,
///          "latency_ms":{"count":n,"min":x,"mean":x,"p50":x,"p90":x,"p99":x,"p999":x,"max":x},
///          "submit_ms":{same keys}, "schedule_lag_max_ms":x, "queue_full":n,
///          "errors":{"total":n,"failed":n,"timed_out":n,"cancelled":n,"lost":n,
///                    "wrong_result":n,"garbage_result":n,"submit":n,"session":n,"wait":n,
///                    "unfinished":n},
///          "stalled":b, "interrupted":b, "session_lost":b,
///          "zookeeper":{"source":"mntr","writes":n,"reads":n,"packets_received":n,
///                       "writes_per_task":x,"reads_per_task":x} | null,
///          "mntr_error":"..." (when null and mntr was asked),
///          "client":{"reads":n,"writes":n,"write_ops":n,"multis":n,"watches":n,
///                    "results_listings":n, "direct":n,
///                    "reads_per_task":x,"writes_per_task":x,"write_ops_per_task":x,
///                    "results_listings_per_task":x, "direct_per_task":x}},
///  "tasks_per_raw_create":x (when both ran),
///  "process":{"cpu_user_s":x, "cpu_sys_s":x, "max_rss_kb":n}}
/// ```
/// Per-task figures divide by results (submitted with --submit-only); latencies are in
/// milliseconds with microsecond resolution.
boost::json::object to_json(const run_report& r);

/// The human report (several lines, ends with a newline).
std::string to_text(const run_report& r);

/// {"count","min","mean","p50","p90","p99","p999","max"} of a histogram of microseconds, in ms.
boost::json::object latency_json(const log_histogram& h);

}  // namespace zkd::loadgen
