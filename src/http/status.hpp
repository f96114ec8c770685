// SPDX-License-Identifier: MIT
// The status page's data (GET /v1/status), its pure parts: the in-process history of the
// node's counters behind the page's charts, the recent failures seen in the results, the
// queue's depth by priority from pending task names, and the JSON of each. No I/O.
#pragma once

#include "protocol/task.hpp"
#include "roles/stats.hpp"

#include <boost/json/value.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

namespace zkd::http {

/// One sample of a node's cumulative counters (roles::node_stats), at `t_ms` (Unix ms).
struct history_sample {
    std::int64_t t_ms = 0;
    bool master = false;
    std::int64_t queue_depth = -1;  ///< -1: not master
    std::uint64_t assigned = 0;     ///< as master
    std::uint64_t requeued = 0;
    std::uint64_t lost = 0;
    std::uint64_t rejected = 0;
    std::uint64_t finished = 0;   ///< as master: assignments live workers completed
    std::uint64_t succeeded = 0;  ///< this node's worker, by state
    std::uint64_t failed = 0;
    std::uint64_t timed_out = 0;
    std::uint64_t cancelled = 0;
    roles::latency_histogram assign_latency;  ///< as master
};

/// The samples behind the page's charts: a ring of the last `capacity` samples of a node's
/// counters, taken every period by the server (a copy of a few counters: cheap, and no
/// ZooKeeper read). Not thread-safe: use on the server's executor.
class status_history {
public:
    explicit status_history(std::size_t capacity = 120);

    /// Adds a sample, dropping the oldest past capacity.
    void record(std::int64_t t_ms, const roles::node_stats& s);

    [[nodiscard]] std::size_t size() const noexcept { return ring_.size(); }

    /// The intervals between consecutive samples: `{"capacity":N,"intervals":[{"t":ms (its
    /// end),"seconds":S,"master":B,"queue_depth":N|null,"assigned","finished","requeued",
    /// "lost","rejected","succeeded","failed","timed_out","cancelled" (per second over the
    /// interval),"assign_p50_ms","assign_p99_ms" (null without assignments in it)}]}`.
    [[nodiscard]] boost::json::value to_json() const;

private:
    std::size_t capacity_;
    std::deque<history_sample> ring_;
};

/// The `q`-quantile (0..1) of the observations a histogram holds, in ms, interpolated
/// linearly within its bucket as Prometheus's histogram_quantile does (the +Inf bucket
/// yields the largest finite bound); nullopt when it holds none.
std::optional<double> histogram_quantile(double q, const roles::latency_histogram& h);

/// The observations `later` holds that `earlier` did not (bucket by bucket; never negative).
roles::latency_histogram histogram_delta(
    const roles::latency_histogram& later, const roles::latency_histogram& earlier
);

/// Pending tasks by priority (index 0..9) from the names of pending task nodes: a bundle
/// counts its tasks; a name that is not a task id is skipped.
std::array<std::uint64_t, 10> count_by_priority(const std::vector<std::string>& names);

/// The earliest time a task id among `names` holds (names that are no task id skipped);
/// nullopt when none is one. Of delayed tasks' names: a delayed submit's due time, a retry's
/// first submit (so a lower bound of the earliest due time).
std::optional<std::int64_t> earliest_id_time(const std::vector<std::string>& names);

/// One finished task that did not succeed.
struct failure_entry {
    std::string id;
    protocol::task_result result;
};

/// The most recent failures (failed, timed_out, cancelled, lost) the server saw among the
/// results, newest first, at most `capacity`; each id once.
class failure_log {
public:
    explicit failure_log(std::size_t capacity = 50);

    /// Adds `r` (of task `id`) if it is not a success and not known yet. Entries are kept
    /// ordered by finished_ms (newest first), so a late-read older result goes below.
    void add(std::string id, protocol::task_result r);

    [[nodiscard]] const std::deque<failure_entry>& entries() const noexcept { return entries_; }

    /// `[{"id":..,"state":..,"worker":..,"attempt":N,"finished_ms":T,"error":{"code":..,
    /// "message":..}}...]` (worker, attempt, finished_ms and error when known).
    [[nodiscard]] boost::json::value to_json() const;

private:
    std::size_t capacity_;
    std::deque<failure_entry> entries_;
};

/// Which result names to read for failures: those in `now` not in `before` (both sorted),
/// newest first by the time their id holds, at most `limit`.
std::vector<std::string> new_results(
    const std::vector<std::string>& before, const std::vector<std::string>& now, std::size_t limit
);

/// The node's figures for delayed tasks, retries, schedules and workflows (from memory: its
/// worker's and, while master, its master's and engines' counters): `{"retried":N,
/// "delayed":N|null,"delayed_next_due_ms":T|null,"released":N,"schedules":{"fired","late",
/// "lateness_ms_sum","skipped","missed","count":N|null,"paused":N|null,
/// "last_lateness_ms":N|null},"workflows":{"launched","finished","by_state":{"running":N,
/// "succeeded","failed","cancelled"}|null,"steps":{"waiting":N,"running","succeeded",
/// "failed","skipped","cancelled"}|null}}`; the nulls: not master (or none yet).
boost::json::value jobs_json(const roles::node_stats& s);

/// The node's own figures for the page: `{"member":..,"session":..,"sessions":N,
/// "master":B,"epoch":E,"elected":N,"queue_depth":N|null,"worker":{"started","published",
/// "discarded","succeeded","failed","timed_out","cancelled"},"master_totals":{"assigned",
/// "requeued","lost","rejected","cancelled","finished"},"jobs":<jobs_json>}`. The worker's
/// counts are final results: a try that ends with a retry is in jobs.retried instead.
boost::json::value node_json(const roles::node_stats& s);

}  // namespace zkd::http
