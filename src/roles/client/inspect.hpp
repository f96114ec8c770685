// SPDX-License-Identifier: MIT
// Read-only views of a cluster (docs/protocol.md §2): who is master, the workers and their
// load, what is pending, assigned and running, and one task's state and result. Used by the
// HTTP facade and the CLI (`zkd cluster --json`, `zkd tasks --json`), which print the same
// JSON shapes (documented at each to_json below).
//
// Every function here only reads: it creates, changes and deletes nothing (a result is peeked,
// never consumed). Reads are issued together and awaited together (one round trip per step,
// not one per node). Garbage in a node never fails a view: the node is reported as garbage,
// with the reason. A node that vanishes between listing and reading (a task moving on) is
// skipped. Errors are the session's (condition::retryable, condition::session_lost) and
// operation_aborted when the caller is cancelled; bound the calls with zkco::with_timeout.
//
// Threads: use from the client's executor, like the client itself. Cancellation: terminal
// and partial abandon the reads (the late replies are dropped) and yield operation_aborted.
#pragma once

#include "protocol/delay.hpp"
#include "protocol/layout.hpp"
#include "protocol/task.hpp"
#include "zkco/client.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/json/value.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zkd::roles {

// --- the cluster ---------------------------------------------------------------------------

/// The acting master, from /master.
struct master_snapshot {
    std::string id;
    std::int64_t epoch = 0;
    std::string host;
    std::int64_t pid = 0;
    std::int64_t since_ms = 0;
    /// Tasks finished per second over the last minute: /master's "throughput", if written.
    std::optional<double> throughput;
    /// The bound on pending tasks clients keep to: /master's "max_pending" (0: none), if
    /// written (a master before the bound writes none).
    std::optional<std::int64_t> max_pending;
    /// Whether clients may place tasks on workers themselves: /master's "direct" (docs/
    /// protocol.md §6 T1 "Direct placement"; not written: they may).
    bool direct = true;
    /// Workers the master found leaving assignments unstarted: /master's "suspects".
    std::vector<std::string> suspects;
    /// Non-empty: /master does not hold a zkd master node (why); the fields above are empty.
    std::string garbage;
};

/// One /workers/<id> node and its assignment directory.
struct worker_snapshot {
    std::string id;  ///< the node's name
    std::string host;
    std::int64_t pid = 0;
    int capacity = 0;
    std::optional<int> threads;  ///< tasks it runs side by side; nullopt: it does not say
    std::vector<std::string> types;
    std::int64_t started_ms = 0;
    bool draining = false;  ///< shutting down (T9): gets no new tasks
    /// Types it serves but cannot run now (a served type's crash loop): it gets none of them.
    std::vector<std::string> unhealthy;
    std::size_t assigned = 0;  ///< /assign/<id> children, cancel markers not counted
    std::size_t running = 0;   ///< of those, assignments with running_ms
    /// Non-empty: the node's data is not a zkd worker (why); host..started_ms are empty, and
    /// its assignments are still counted.
    std::string garbage;
    /// Non-empty: the master gives it nothing, and why (a node no session owns: written by
    /// someone else, not by a worker).
    std::string ignored;
    /// The master named it a suspect: it left assignments unstarted (docs/protocol.md §7
    /// "Stalled workers"); it gets no task but a probe now and then.
    bool suspect = false;
};

/// A snapshot of a cluster (each figure read at a slightly different moment).
struct cluster_snapshot {
    std::int64_t epoch = 0;                 ///< /epoch's data version: 0 until a first master
    std::optional<master_snapshot> master;  ///< nullopt: no acting master
    std::vector<worker_snapshot> workers;   ///< sorted by id
    std::uint64_t pending = 0;              ///< pending tasks, from each shard's child count
    std::uint64_t results = 0;              ///< results not yet consumed, likewise (every
                                            ///< result directory: shards and client dirs)
    /// Clients' result directories whose results `results` leaves out: past
    /// most_result_dirs_counted of them, only the result shards are counted.
    std::uint64_t uncounted_result_dirs = 0;
    std::uint64_t cancel_requests = 0;  ///< open /cancel/<tid> requests
    /// Delayed tasks and retries waiting for their time (§4.3), from each /delayed shard's
    /// child count (0 for a cluster without a delayed tree).
    std::uint64_t delayed = 0;
};

/// Most clients' result directories read_cluster reads the stat of, to count their results.
inline constexpr std::size_t most_result_dirs_counted = 1'000;

/// Reads the cluster: /epoch, /master, every worker and its assignments (counts from child
/// lists; running from the assignments' data), and the counts of pending tasks, results and
/// cancel requests (from the directories' stats, without listing them; /results is listed
/// for its directories, list_result_dirs; past most_result_dirs_counted clients'
/// directories, by /results' child count, it is not listed and only the result shards are
/// counted). Errors: see the top of this file.
boost::asio::awaitable<zkco::result<cluster_snapshot>> read_cluster(
    zkco::client& zk, protocol::layout l
);

/// Reads only the workers (their nodes, not their assignments: `assigned` and `running` stay
/// 0; nor /master: `suspect` stays false), sorted by id: one listing of /workers and one read
/// per worker, whatever the number of tasks and results. What "is this type served" needs.
/// Errors: see the top of this file.
boost::asio::awaitable<zkco::result<std::vector<worker_snapshot>>> read_workers(zkco::client& zk);

/// When workers are there (with readable nodes) and none serves `type`: why, for people ("no
/// worker serves task type 'x' (the 2 workers serve: echo, sum)"); nullopt when one serves it
/// or no worker is there at all (a cluster still starting: the task waits for one). What
/// `zkd submit` and `POST /v1/tasks` refuse a task for, unless told it may be served later.
std::optional<std::string> unserved(
    const std::vector<worker_snapshot>& workers, std::string_view type
);

// --- tasks ---------------------------------------------------------------------------------

/// A delayed, pending, assigned or running task, from its node.
struct task_entry {
    std::string id;
    /// delayed, pending, assigned or running
    protocol::task_state state = protocol::task_state::pending;
    std::string worker;  ///< assigned and running: the directory's owner
    std::string type;
    std::size_t tasks = 1;  ///< a bundle's size (docs/protocol.md §4.1); 1 for a task
    int priority = 5;
    int attempt = 1;
    std::int64_t submitted_ms = 0;
    std::int64_t age_ms = 0;  ///< now - submitted_ms (0 when submitted_ms is absent)
    std::int64_t assigned_ms = 0;
    std::int64_t running_ms = 0;
    double progress = -1;  ///< running: the worker's last report (0..1), -1: none
    std::string progress_message;
    /// Delayed: when it is due (its node's `due_ms`; else its id's time), and its try (§4.3:
    /// 1 for a delayed submit, k + 1 for the retry of try k).
    std::int64_t due_ms = 0;
    int try_number = 1;
    /// Non-empty: the node is not a zkd task (why); only id, state and worker are set.
    std::string garbage;
};

/// Pending tasks (in the order the master takes them: by id), assigned/running tasks (by
/// worker, then id) and delayed tasks (by due time), each list cut at the limit.
struct task_list {
    std::vector<task_entry> delayed;  ///< delayed tasks and retries (§4.3), soonest due first
    std::uint64_t delayed_total = 0;  ///< all delayed tasks, listed or not
    std::vector<task_entry> pending;
    std::vector<task_entry> assigned;  ///< assigned and running
    std::uint64_t pending_total = 0;   ///< all pending tasks, listed or not
    std::uint64_t assigned_total = 0;  ///< all assigned and running tasks, listed or not
    std::size_t limit = 0;             ///< the limit each list was cut at
    bool truncated = false;            ///< a list was cut
};

/// The default limit of list_tasks.
inline constexpr std::size_t default_task_list_limit = 1000;

/// Lists every pending shard and assignment directory (and, `with_delayed`, every delayed
/// shard), then reads at most `limit` pending, at most `limit` assigned and at most `limit`
/// delayed tasks (all reads of a step at once). The delayed tasks read are the `limit` with
/// the earliest times in their ids (a delayed submit's id holds its due time; a retry keeps
/// its first try's id, so it may be due later than listed tasks left out). Errors: see the
/// top.
boost::asio::awaitable<zkco::result<task_list>> list_tasks(
    zkco::client& zk,
    protocol::layout l,
    std::size_t limit = default_task_list_limit,
    bool with_delayed = true
);

/// Reads a task's result without consuming it: nullopt when none exists (or `tid` is not a
/// valid task id). Errors:
/// client_errc::garbage_result (the node holds no zkd result), the session's.
boost::asio::awaitable<zkco::result<std::optional<protocol::task_result>>> peek_result(
    zkco::client& zk, protocol::layout l, std::string tid
);

/// One task as a client sees it (docs/protocol.md §6).
struct task_info {
    std::string id;
    protocol::task_state state = protocol::task_state::unknown;
    std::string worker;                           ///< assigned or running; else the result's worker
    std::optional<protocol::task_result> result;  ///< when finished and not yet consumed
    double progress = -1;  ///< running: the worker's last report (0..1), -1: none
    std::string progress_message;
    /// Non-empty: the node found is garbage (why); a garbage result leaves state unknown.
    std::string garbage;
    /// Delayed (§4.3): when it is due, and, for a retry, its try and the earlier errors.
    std::optional<protocol::delay_fields> delay;
};

/// Where a task is now, with its result if finished (peeked, never consumed). Reads, in two
/// round trips and in lifecycle order, its pending node and the assignment directories, then
/// its assignments and its result: a task moving on while it is read is seen in its later
/// state, never lost. `unknown` when none exists (never submitted, or consumed), and for an
/// id that is not a valid task id (nothing is read then). Errors: see the top of this file.
boost::asio::awaitable<zkco::result<task_info>> read_task(
    zkco::client& zk, protocol::layout l, std::string tid
);

// --- JSON ----------------------------------------------------------------------------------

/// `{"id":..,"epoch":E,"host":..,"pid":P,"since_ms":T,"throughput":F|null,
/// "max_pending":N|null,"direct":B}`, or `{"garbage":"why"}`.
boost::json::value to_json(const master_snapshot& m);

/// `{"id":..,"host":..,"pid":P,"capacity":N,"threads":K|null,"types":[..],"started_ms":T,
/// "draining":B,"unhealthy":[..],"assigned":A,"running":R}`, or
/// `{"id":..,"garbage":"why","assigned":A, "running":R}`.
boost::json::value to_json(const worker_snapshot& w);

/// `{"epoch":E,"master":<master_snapshot>|null,"workers":[<worker_snapshot>...],"pending":N,
/// "results":N,"cancel_requests":N,"delayed":N}`.
boost::json::value to_json(const cluster_snapshot& c);

/// Pending: `{"id":..,"state":"pending","type":..,"priority":P,"attempt":A,"age_ms":M,
/// "submitted_ms":T}`, plus `"tasks":N` for a bundle. Assigned or running:
/// `{"id":..,"state":"assigned"|"running",
/// "worker":..,"type":..,"priority":P,"attempt":A,"age_ms":M,"submitted_ms":T,
/// "assigned_ms":T}` plus `"running_ms":T` when running. Garbage: `{"id":..,"state":..,
/// ["worker":..,]"garbage":"why"}`. Delayed: `{"id":..,"state":"delayed","type":..,
/// "priority":P,"due_ms":T,"try":K,"age_ms":M,"submitted_ms":T}` (plus `"tasks":N`).
boost::json::value to_json(const task_entry& t);

/// `{"pending":[<task_entry>...],"assigned":[<task_entry>...],"delayed":[<task_entry>...],
/// "pending_total":N,"assigned_total":N,"delayed_total":N,"limit":L,"truncated":B}`.
boost::json::value to_json(const task_list& t);

/// The result as stored (docs/protocol.md §5): `{"v":1,"task":..,"state":..,"value":..|
/// "error":{"code":..,"message":..},"attempt":..,"worker":..,"started_ms":..,
/// "finished_ms":..}`, absent fields left out.
boost::json::value to_json(const protocol::task_result& r);

/// `{"id":..,"state":..}` plus `"worker":..` when known, `"result":<task_result>` when
/// finished, `"garbage":"why"` when the node found is garbage.
boost::json::value to_json(const task_info& t);

}  // namespace zkd::roles
