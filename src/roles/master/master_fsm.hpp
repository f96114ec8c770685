// SPDX-License-Identifier: MIT
#pragma once

// The master's view of the cluster and its decisions (docs/protocol.md §7 "Master loop"),
// with no I/O: what the watchers see goes in as events, and next() says what to do — which
// pending tasks to read, which transactions to run (T2 assign, T7 cancel, failing a task
// that is malformed or that no worker serves), which nodes to clear of what others wrote
// below them — and when to look again. The answers to those transactions come back through
// done(). master.cpp carries the actions out; tests/unit/roles/master/master_fsm_test.cpp drives
// the view alone.

#include "protocol/master_txn.hpp"
#include "protocol/placement.hpp"
#include "protocol/task.hpp"
#include "roles/master/stall_watch.hpp"
#include "roles/master/task_key.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

namespace zkd::roles {

/// What a master has done, for logs and tests.
struct master_stats {
    std::uint64_t assigned = 0;   ///< T2 committed
    std::uint64_t requeued = 0;   ///< T6 back to pending
    std::uint64_t lost = 0;       ///< T6 with attempts exhausted
    std::uint64_t cancelled = 0;  ///< T7 on pending tasks, or markers forwarded
    std::uint64_t rejected = 0;   ///< malformed or unknown-type tasks failed
    std::uint64_t finished = 0;   ///< assignments live workers completed
    std::uint64_t collected = 0;  ///< expired results deleted (T8)
    bool deposed = false;         ///< stopped because a newer epoch exists (reset per term)
    /// Old empty client results directories deleted (T8; the results themselves: collected).
    std::uint64_t collected_dirs = 0;
    /// Assignments taken back from live workers that did not start them (stall_watch).
    std::uint64_t taken_back = 0;
    /// Workers suspect now: they held assignments they did not start (stall_watch).
    std::size_t suspects = 0;

    // How the master learns of pending tasks (§7 "Master loop"), for tests and benches.
    std::uint64_t shard_listings = 0;   ///< pending shards listed (the first listing of each,
                                        ///< then only when a change log cannot be applied)
    std::uint64_t shard_log_reads = 0;  ///< change logs of pending shards read and applied
    std::uint64_t task_reads = 0;       ///< pending tasks read (load), not taken from a log
    std::uint64_t tasks_from_logs = 0;  ///< pending tasks taken with the data their log held
};

/// One thing the view wants done.
struct master_action {
    enum class kind {
        load,           ///< read the data of `tids` at `paths`, then tasks_loaded()
        assign,         ///< run `ops` (T2 of `tid` to `worker`), then done()
        reject,         ///< run `ops` (fail `tid` with `code`: `why`), then done()
        cancel,         ///< run `ops` (T7 of `tid`: at `path` if pending, else at `worker`
                        ///< if assigned, else only the request), then done()
        clear_foreign,  ///< delete what others wrote below `path`, then foreign_cleared()
    };
    kind what = kind::load;
    std::string tid;
    std::string worker;
    std::vector<protocol::txn_op> ops;
    std::vector<std::string> tids;
    std::vector<std::string> paths;
    std::string path;
    std::string code;
    std::string why;
};

/// What next() decided: the actions, and when to call next() again at the latest (a task
/// waiting after a failure, an unserved type's grace ending).
struct master_step {
    std::vector<master_action> actions;
    std::optional<std::chrono::steady_clock::time_point> wake_at;
};

/// How a transaction of an action ended.
struct master_txn_report {
    protocol::txn_answer answer;
    bool retryable = false;  ///< the error may go away by itself (a lost connection)
    std::string error;       ///< the error's message, empty when it committed
};

/// A pending node's data as read for tasks_loaded().
struct task_read {
    enum class status { ok, gone, error };
    std::string tid;
    status st = status::ok;
    std::string data;
    std::int32_t children = 0;
};

class master_fsm {
public:
    using clock = std::chrono::steady_clock;

    struct options {
        protocol::placement_policy policy = protocol::placement_policy::least_loaded;
        std::chrono::milliseconds unknown_type_grace{10'000};
        /// A request to cancel a task unknown here this long is dropped (T7, last case).
        std::chrono::milliseconds unknown_cancel_grace{30'000};
        /// Called for each task assigned (T2 committed), with its data.
        std::function<void(const protocol::task_spec&)> on_assigned;
        /// The data change logs carried for tasks beyond the load window is kept up to this
        /// many bytes (counting a per-task overhead), so that a burst is not read back task by
        /// task when its turn comes; beyond it, a task costs its id only (and a read later).
        std::size_t logged_data_budget = 8U << 20U;
        /// How long a worker may leave an assignment unmarked before it is taken back and
        /// the worker is suspect (stall_watch); 0: never.
        std::chrono::milliseconds unstarted_bound{10'000};
    };

    /// Tries before a task that cannot be assigned gets a failed result instead.
    static constexpr int max_assign_failures = 4;

    master_fsm(protocol::layout l, std::int64_t epoch, options opts, master_stats& stats);

    // --- workers (/workers, /workers/<w>, /assign/<w>) -------------------------------------

    struct workers_change {
        /// Left: requeue their tasks (T6), then departed_done().
        std::vector<std::string> departed;
        /// New: read their nodes, then worker_read().
        std::vector<std::string> to_read;
    };
    /// /workers lists `names`.
    workers_change workers_listed(const std::vector<std::string>& names);
    /// A new worker's node: true when it joined (follow its node and directory), false when
    /// it is ignored (not ephemeral, or not a worker's data).
    bool worker_read(const std::string& id, std::string_view data, bool ephemeral);
    /// A live worker's node changed; false once it is no worker of ours any more.
    bool worker_updated(const std::string& id, std::string_view data);
    /// A live worker's directory lists `names`. The number of tasks finished since the last
    /// listing (for the throughput figure), or nullopt once the worker has departed.
    std::optional<std::uint64_t> worker_dir_listed(
        const std::string& id, const std::vector<std::string>& names
    );
    /// A live worker's directory changed since it was listed (its watch fired): until it is
    /// listed again, the worker gets no task, for the change may be tasks clients placed
    /// there directly (docs/protocol.md §6 T1 "Direct placement"), which the count does not
    /// see.
    void worker_dir_touched(const std::string& id);
    /// A live worker's directory changed since it was listed: must it be listed now? The
    /// view counts a worker's assignments from its last listing plus what we assigned since;
    /// a listing can wait until a pending task waits for a slot (the directory's changes
    /// may be slots freed by T4 or tasks placed directly: either way the count must be
    /// right before the worker gets more), or while a cancel request is open (it is
    /// forwarded to the holder). False otherwise: the listing waits, and a task at a time
    /// placed directly costs the master no listing.
    [[nodiscard]] bool worker_dir_listing_wanted(const std::string& id) const;
    /// A live worker's directory is gone (false: the worker is gone too), or back.
    bool worker_dir_missing(const std::string& id);
    void worker_dir_back(const std::string& id);
    [[nodiscard]] bool worker_alive(const std::string& id) const;
    /// The live workers' ids (sorted).
    [[nodiscard]] std::vector<std::string> live_workers() const;
    /// Which workers leave their assignments unstarted: the shell feeds it what it reads of
    /// the live workers' directories; assign() gives suspects a probe at most.
    stall_watch& stalls() { return stalls_; }
    /// T6 for a departed worker is over: it is forgotten.
    void departed_done(const std::string& id);
    /// /assign lists `names` while /workers lists `alive`: the directories of departed
    /// workers not handed to T6 yet (each is returned once).
    std::vector<std::string> assign_dirs_listed(
        const std::vector<std::string>& names, const std::set<std::string>& alive
    );

    // --- pending tasks and cancels ----------------------------------------------------------

    void shard_listed(std::uint32_t shard, std::vector<std::string> names);
    /// A read of the shard's change log may be applied (protocol::log_follower said so): its
    /// transaction created `entries` there. Names new to the view are added; one that came
    /// with its data is taken as read when it falls in the load window (it would be read
    /// next), so that a task arriving while slots are free costs no read. The data of the
    /// others is kept aside while options::logged_data_budget lasts, and taken instead of a
    /// read when their turn comes; past the budget a backlog costs an id each, and its tasks
    /// are read when their turn comes. `listed_since`: the log could not be applied and the
    /// shard was listed after it was read; the log then only gives its data to the unread
    /// tasks the listing found, so that a missed version costs reads only of the tasks of
    /// the transactions missed.
    void shard_logged(
        std::uint32_t shard, std::vector<protocol::log_entry> entries, bool listed_since = false
    );
    /// The data of a load action's tasks; true when a read failed (pause before the next).
    bool tasks_loaded(const std::vector<task_read>& reads);
    /// The load action is over (after the pause, if any).
    void load_finished();
    void cancels_listed(const std::vector<std::string>& names);
    /// True when `path` is not being cleared yet: the caller clears it, then foreign_cleared().
    bool begin_clearing(const std::string& path);
    void foreign_cleared(const std::string& path);

    // --- decisions and their answers ----------------------------------------------------------

    /// Cancels, rejections, assignments and reads to start now.
    master_step next(clock::time_point now);
    /// The transaction of an assign, reject or cancel action ended. Actions it calls for
    /// (a rejection, clearing) come with the next next().
    void done(const master_action& a, const master_txn_report& r, clock::time_point now);

    [[nodiscard]] std::size_t queue_depth() const { return pending_.size(); }
    /// Bytes of logged data kept aside for tasks beyond the load window (with overhead).
    [[nodiscard]] std::size_t logged_data_bytes() const { return logged_bytes_; }
    [[nodiscard]] std::string pending_path(const std::string& tid) const;

private:
    /// A pending task. Its data is read only when it may be placed soon (near the head of the
    /// queue while slots are free): a backlog costs an id each, not a copy of every task, and
    /// a task cancelled while waiting is never read.
    struct pending_entry {
        std::uint32_t shard = 0;
        bool loading = false;    // its read is out
        bool in_flight = false;  // a transaction about it is out
        // Once loaded, one of the two. Pointers: a pending task not yet read costs no room for
        // either (a million pending tasks are a million entries: docs/performance.md).
        std::unique_ptr<protocol::task_spec> spec;
        std::unique_ptr<std::string> malformed;  // why
    };

    struct worker_entry {
        protocol::member_info info;
        bool alive = true;
        std::set<std::string> assigned;  // from its directory, plus our commits
        int in_flight = 0;               // assignments sent, not yet answered
        bool dir_missing = false;        // its /assign/<id> was deleted: nothing can go there
        bool touched = false;  // changed since listed (worker_dir_touched()), or never listed
    };

    /// A pending task whose transactions failed for reasons of its own: it waits before the
    /// next try, longer each time, so no failure turns into a loop.
    struct trouble {
        int failures = 0;
        clock::time_point not_before;
    };

    // Keyed by the compact form of the id: one node per task, no string on the heap.
    using pending_map = std::map<task_key, pending_entry>;

    [[nodiscard]] std::string path_of(const std::string& tid, const pending_entry& p) const;
    void forget(pending_map::iterator p);
    void clear_foreign(const std::string& path);
    int note_trouble(
        const std::string& tid,
        std::string_view what,
        const std::string& error,
        clock::time_point now
    );
    [[nodiscard]] bool may_try(const std::string& tid, clock::time_point now) const;
    [[nodiscard]] std::vector<protocol::worker_slot> slots() const;
    /// How many more tasks to read: the free slots plus a margin, less the loaded tasks that
    /// wait for a slot (0 or less: none; nullopt: no live worker, nothing is read).
    [[nodiscard]] std::optional<long> load_window() const;
    /// Adds a name listed or logged in `shard`: the new entry, or end() when it is known.
    pending_map::iterator add_pending(std::uint32_t shard, task_key key);
    /// The data of a pending task, read or taken from a log: decoded, the task loaded.
    void take_data(pending_entry& p, const std::string& tid, std::string_view data);
    void reject(const std::string& tid, pending_entry& p, std::string_view code, std::string why);

    void handle_cancels(clock::time_point now);
    std::optional<clock::time_point> reject_unplaceable(clock::time_point now);
    void assign(clock::time_point now);
    /// Reads the next tasks of the load window, or takes them from logged_ as far as it
    /// has them in order: true when some were taken (decide again on them).
    bool load_more();
    void keep_logged(const task_key& key, std::string data);
    /// The logged data kept for `key`, removed from logged_; nullopt when none is.
    std::optional<std::string> take_logged(const task_key& key);

    void assign_done(const master_action& a, const master_txn_report& r, clock::time_point now);
    void reject_done(const master_action& a, const master_txn_report& r, clock::time_point now);
    void cancel_done(const master_action& a, const master_txn_report& r);

    protocol::layout l_;
    std::int64_t epoch_;
    options opts_;
    master_stats& stats_;
    protocol::placer placer_;
    stall_watch stalls_;
    std::vector<master_action> out_;  // actions decided outside next(), handed out by it

    std::map<std::string, worker_entry> workers_;
    // The sum of workers_' in_flight: what worker_dir_listing_wanted, asked once per worker
    // after every step, would otherwise add up over all workers each time.
    std::size_t assigns_in_flight_ = 0;
    std::set<std::string> ignored_;       // worker nodes with garbage data
    std::set<std::string> orphans_seen_;  // directories of departed workers handed to T6
    pending_map pending_;                 // by task id: FIFO within priority
    std::set<std::string> loaded_;        // pending tasks whose data is read, in the same order
    bool loading_ = false;                // a batch of reads is out
    // Data logs carried for tasks beyond the load window, up to opts_.logged_data_budget.
    std::map<task_key, std::string> logged_;
    std::size_t logged_bytes_ = 0;
    // Per shard, the names pending_ holds from it (kept so by shard_listed and forget).
    std::map<std::uint32_t, std::unordered_set<task_key, task_key_hash>> shard_tasks_;
    std::set<std::string> cancels_;
    std::set<std::string> cancels_in_flight_;
    std::set<std::string> cancel_failures_;
    std::map<std::string, clock::time_point> unknown_cancels_;
    std::map<std::string, clock::time_point> unserved_since_;
    std::map<std::string, trouble> troubled_;  // pending tasks whose transactions failed
    std::set<std::string> clearing_;           // nodes whose foreign children are being deleted
};

/// The directories below /results one T8 sweep looks at, and where the next one starts.
struct result_sweep {
    std::vector<std::string> dirs;  ///< sorted
    std::string next_after;         ///< pass to the next sweep ("": from the start)
};

/// The next `most` directories after `after` in `sorted` (from the start when none is after
/// it): successive sweeps cover every directory, `most` at a time.
result_sweep sweep_window(
    const std::vector<std::string>& sorted, const std::string& after, std::size_t most
);

}  // namespace zkd::roles
