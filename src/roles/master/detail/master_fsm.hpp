// SPDX-License-Identifier: MIT
#pragma once

// The master's view of the cluster and its decisions (docs/protocol.md §7 "Master loop"),
// with no I/O, behind one door: on(event, now). What the watchers see, the data read and the
// answers to transactions go in as events (master_saw::*); out come actions (master_do::*),
// with when to look again: which workers to read and follow, which pending tasks to read,
// which transactions to run (T2 assign, T7 cancel, failing a task that is malformed or that
// no worker serves), what to read and run for T6 (a departed worker's tasks) and T8 (results
// nobody consumed), which assignments a live worker left unstarted to read and take back,
// which nodes to clear of what others wrote below them, and when to write /master. It
// decides nothing before every pending shard was listed once. master.cpp carries the actions
// out; tests/unit/roles/master/master_fsm_*_test.cpp drive the fsm alone, event by event. The code:
// master_fsm.cpp (the door, what events change), master_fsm_decide.cpp, master_fsm_requeue.cpp
// (T6), master_fsm_stalls.cpp (assignments left unstarted), master_fsm_collect.cpp (T8),
// master_fsm_master_node.cpp (/master).

#include "protocol/master_txn.hpp"
#include "protocol/placement.hpp"
#include "protocol/task.hpp"
#include "roles/master/detail/delayed_queue.hpp"
#include "roles/master/detail/slot_index.hpp"
#include "roles/master/detail/stall_watch.hpp"
#include "roles/master/detail/task_key.hpp"
#include "roles/master/master_stats.hpp"

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>

namespace zkd::roles {

/// How a transaction of an action ended.
struct master_txn_report {
    protocol::txn_answer answer;
    bool retryable = false;  ///< the error may go away by itself (a lost connection)
    std::string error;       ///< the error's message, empty when it committed
};

/// A pending node's data as read for a read_tasks action.
struct task_read {
    enum class status { ok, gone, error };
    std::string tid;
    status st = status::ok;
    std::string data;
    std::int32_t children = 0;
};

// --- what the fsm decides: actions ------------------------------------------------------

namespace master_do {
/// Read the data of `tids` at `paths`; then a tasks_read event.
struct read_tasks {
    std::vector<std::string> tids;
    std::vector<std::string> paths;
};
/// Run `ops`: T2 of `tid` to `worker`; then an answered event.
struct assign {
    std::string tid;
    std::string worker;
    std::vector<protocol::txn_op> ops;
};
/// Run `ops`: fail `tid` with `code` (`why`); then an answered event.
struct reject {
    std::string tid;
    std::string code;
    std::string why;
    std::vector<protocol::txn_op> ops;
};
/// Run `ops`: T7 of `tid`, at `path` if pending, else at `worker` if assigned, else only the
/// request; then an answered event.
struct cancel {
    std::string tid;
    std::string worker;
    std::string path;
    std::vector<protocol::txn_op> ops;
};
/// Delete what others wrote below `path`; then a cleared event.
struct clear_below {
    std::string path;
};
/// Read the nodes of these new workers; then a workers_read event.
struct read_workers {
    std::vector<std::string> ids;
};
/// Follow a worker that joined: its node (worker_changed) and its directory (dir_listed,
/// dir_touched, dir_gone, dir_back), while worker_alive().
struct follow_worker {
    std::string id;
};
/// List a departed worker's directory (T6); then a departed_listed event.
struct list_departed {
    std::string worker;
};
/// Read a departed worker's assignments `tids` at `paths`; then a departed_read event.
struct read_departed {
    std::string worker;
    std::vector<std::string> tids;
    std::vector<std::string> paths;
};
/// Run `ops`: T6 of one task of a departed worker, assigned at `path` (`kind`: back to
/// pending, lost, cancelled or failed; `attempt`: the one it was on); then an answered event.
struct requeue_task {
    std::string worker;
    std::string tid;
    std::string path;
    protocol::departed_kind kind = protocol::departed_kind::requeue;
    int attempt = 0;
    std::vector<protocol::txn_op> ops;
};
/// Run `ops`: delete a departed worker's emptied directory; then an answered event.
struct remove_departed {
    std::string worker;
    std::vector<protocol::txn_op> ops;
};
/// Run `ops`, whatever comes of it: a departed worker's cancel marker deleted.
struct remove_marker {
    std::vector<protocol::txn_op> ops;
};
/// Read the assignments `tids` (at `paths`) of a live worker that left them unmarked (not
/// running) for two listings; then an assignments_read event.
struct read_assignments {
    std::string worker;
    std::vector<std::string> tids;
    std::vector<std::string> paths;
};
/// Run `ops`: T6 for one assignment a live worker left unstarted past the bound (at the
/// version read: a running mark written meanwhile keeps it); then an answered event.
struct take_back {
    std::string worker;
    std::string tid;
    protocol::departed_kind kind = protocol::departed_kind::requeue;
    std::vector<protocol::txn_op> ops;
};
/// Read the stat of these directories below /results (T8); then a result_dirs_stat event.
struct stat_result_dirs {
    std::vector<std::string> dirs;
};
/// List these directories below /results; then a results_listed event.
struct list_results {
    std::vector<std::string> dirs;
};
/// Read the stat (the ctime) of these results; then a results_stat event.
struct stat_results {
    std::vector<std::string> paths;
};
/// Run `ops`: T8 of the result at `path`, or (`dir`) of the empty client directory there;
/// then an answered event.
struct collect {
    std::string path;
    bool dir = false;
    std::vector<protocol::txn_op> ops;
};
/// Read the delayed tasks `tids` at `paths`, whose time may have come (T10); then a
/// delayed_read event.
struct read_delayed {
    std::vector<std::string> tids;
    std::vector<std::string> paths;
};
/// Run `ops`: T10 of the delayed task `tid` of `shard` (moved to pending, the same bytes), or,
/// `drop_only`, the delete of a delayed node whose pending node exists already; then an
/// answered event.
struct release {
    std::string tid;
    std::uint32_t shard = 0;
    bool drop_only = false;
    std::vector<protocol::txn_op> ops;
};
/// Write /master (fenced like every master write): its figures (throughput, suspects), or,
/// `again`, the whole node, someone having deleted or replaced it; then, `again`, a
/// master_node_written event.
struct write_master {
    std::vector<protocol::txn_op> ops;
    bool again = false;
};
}  // namespace master_do

/// A transaction the fsm decided; the same value comes back with its answer.
using master_txn = std::variant<
    master_do::assign,
    master_do::reject,
    master_do::cancel,
    master_do::requeue_task,
    master_do::remove_departed,
    master_do::take_back,
    master_do::collect,
    master_do::release>;

/// One thing the fsm wants done; each alternative carries only its own fields.
using master_action = std::variant<
    master_do::read_tasks,
    master_do::assign,
    master_do::reject,
    master_do::cancel,
    master_do::clear_below,
    master_do::read_workers,
    master_do::follow_worker,
    master_do::list_departed,
    master_do::read_departed,
    master_do::requeue_task,
    master_do::remove_departed,
    master_do::remove_marker,
    master_do::read_assignments,
    master_do::take_back,
    master_do::stat_result_dirs,
    master_do::list_results,
    master_do::stat_results,
    master_do::collect,
    master_do::write_master,
    master_do::read_delayed,
    master_do::release>;

/// What one event led to: the actions, and when to look again at the latest (a decide
/// event then: a task waiting after a failure, an unserved type's grace ending).
struct master_step {
    std::vector<master_action> actions;
    std::optional<std::chrono::steady_clock::time_point> wake_at;
    bool decided = false;  ///< a decide event ran the decisions (the queue may have moved)
};

// --- what happened: events ---------------------------------------------------------------

namespace master_saw {
/// /workers lists `names`.
struct workers_listed {
    std::vector<std::string> names;
};
/// A new worker's node as read (read_workers): `data` nullopt when it is gone again.
struct worker_node {
    std::string id;
    std::optional<std::string> data;
    bool ephemeral = false;
};
struct workers_read {
    std::vector<worker_node> nodes;
};
/// A live worker's node changed.
struct worker_changed {
    std::string id;
    std::string data;
};
/// A live worker's directory lists `names`.
struct dir_listed {
    std::string worker;
    std::vector<std::string> names;
};
/// A live worker's directory changed since it was listed (its watch fired): until it is
/// listed again the worker gets no task, for the change may be tasks clients placed there
/// directly (docs/protocol.md §6 T1 "Direct placement"), which the count does not see.
struct dir_touched {
    std::string worker;
};
/// A live worker's directory is gone, or back.
struct dir_gone {
    std::string worker;
};
struct dir_back {
    std::string worker;
};
/// /assign lists `names` while /workers lists `alive`: directories of departed workers.
struct assign_dirs_listed {
    std::vector<std::string> names;
    std::set<std::string> alive;
};
/// A departed worker's directory lists `names` (nullopt: it is gone, and T6 is over).
struct departed_listed {
    std::string worker;
    std::optional<std::vector<std::string>> names;
};
/// A departed worker's assignment as read: `data` nullopt when it was not read (gone).
struct departed_node {
    std::string tid;
    std::optional<std::string> data;
};
struct departed_read {
    std::string worker;
    std::vector<departed_node> nodes;
};
/// A read of a pending shard went out (its data, or a listing), or its answer is in: until
/// every shard is listed once, and while reads that were out when a decision was due are
/// not all in, decide events decide nothing (shards_ready()).
struct shard_reading {
    std::uint32_t shard = 0;
};
struct shard_read_done {
    std::uint32_t shard = 0;
};
/// A pending shard lists `names`.
struct shard_listed {
    std::uint32_t shard = 0;
    std::vector<std::string> names;
};
/// A pending shard's change log may be applied (protocol::log_follower said so): its
/// transaction created `entries` there. Names new to the fsm are added; one that came
/// with its data is taken as read when it falls in the load window (it would be read
/// next), so that a task arriving while slots are free costs no read. The data of the
/// others is kept aside while options::logged_data_budget lasts, and taken instead of a
/// read when their turn comes; past the budget a backlog costs an id each, and its tasks
/// are read when their turn comes. `listed_since`: the log could not be applied and the
/// shard was listed after it was read; the log then only gives its data to the unread
/// tasks the listing found, so that a missed version costs reads only of the tasks of
/// the transactions missed.
struct shard_logged {
    std::uint32_t shard = 0;
    std::vector<protocol::log_entry> entries;
    bool listed_since = false;
};
/// A pending shard is no longer followed (gone, or the master stops): nothing to wait for.
struct shard_gone {
    std::uint32_t shard = 0;
};
/// The data of a read_tasks action's tasks.
struct tasks_read {
    std::vector<task_read> reads;
};
/// /cancel lists `names`.
struct cancels_listed {
    std::vector<std::string> names;
};
/// Someone wrote below `path`, a node of ours a transaction must delete (T6 found it).
struct foreign_found {
    std::string path;
};
/// What others wrote below `path` is deleted (or could not be).
struct cleared {
    std::string path;
};
/// The transaction of an assign, reject or cancel action ended.
struct answered {
    master_txn txn;
    master_txn_report report;
};
/// A T8 sweep starts: /results holds these directories (the result shards and the clients'
/// directories), at `now_ms` by the wall clock (the results' ctimes are compared to it).
/// Ignored while the last sweep is not over.
struct result_dirs_listed {
    std::vector<std::string> dirs;
    std::int64_t now_ms = 0;
};
/// What T8 reads of a node's stat.
struct node_stat {
    std::int32_t num_children = 0;
    std::int32_t cversion = 0;
    std::int32_t version = 0;
    std::int64_t ctime = 0;  ///< ms since the epoch
    std::int64_t mtime = 0;  ///< ms since the epoch
};
/// The stats of a stat_result_dirs action's directories (nullopt: gone, or not read).
struct result_dirs_stat {
    std::vector<std::string> dirs;
    std::vector<std::optional<node_stat>> stats;
};
/// The children of a list_results action's directories (nullopt: not listed).
struct results_listed {
    std::vector<std::string> dirs;
    std::vector<std::optional<std::vector<std::string>>> names;
};
/// A result's ctime as a stat_results action read it.
struct result_read {
    enum class status { ok, gone, error };
    status st = status::ok;
    std::int64_t ctime = 0;
};
struct results_stat {
    std::vector<std::string> paths;
    std::vector<result_read> reads;
};
/// Time to refresh the throughput figure in /master (every report interval): written when
/// it changed.
struct report_due {};
/// A round of stall_watch (every half unstarted_bound): the live workers' directories as
/// listed (nullopt: not listed). Once the assignments it asks to read are read, /master names
/// the suspects, written when they changed.
struct stall_dirs_listed {
    std::vector<std::string> workers;
    std::vector<std::optional<std::vector<std::string>>> names;
};
/// One assignment a read_assignments action read.
struct assignment_node {
    enum class status { ok, gone, error };
    std::string tid;
    status st = status::ok;
    std::string data;
    std::int64_t ctime = 0;  ///< ms since the epoch
    std::int32_t version = 0;
};
/// A read_assignments action's reads, at `now_ms` by the wall clock.
struct assignments_read {
    std::string worker;
    std::vector<assignment_node> nodes;
    std::int64_t now_ms = 0;
};
/// /master as watched: whether it exists, whether it is this session's node, its data when
/// that was read, and its version. Anything but this master's own node is written again.
struct master_node_read {
    bool exists = false;
    bool owned = false;
    std::optional<std::string> data;
    std::int32_t version = -1;
};
/// The write of /master again ended (whatever its outcome, the watch shows what it holds).
struct master_node_written {};
/// A delayed shard lists `names` (T10: every delayed task's name, due no earlier than its
/// id's time).
struct delayed_listed {
    std::uint32_t shard = 0;
    std::vector<std::string> names;
};
/// A delayed shard's change log may be applied: its transaction created `entries` there,
/// each with its due time when the entry says it.
struct delayed_logged {
    std::uint32_t shard = 0;
    std::vector<protocol::log_entry> entries;
};
/// The data of a read_delayed action's tasks.
struct delayed_read {
    std::vector<task_read> reads;
};
/// Everything that came is in: decide (cancels, rejections, assignments, reads).
struct decide {};
}  // namespace master_saw

/// What the fsm is told, one event at a time.
using master_event = std::variant<
    master_saw::workers_listed,
    master_saw::workers_read,
    master_saw::worker_changed,
    master_saw::dir_listed,
    master_saw::dir_touched,
    master_saw::dir_gone,
    master_saw::dir_back,
    master_saw::assign_dirs_listed,
    master_saw::departed_listed,
    master_saw::departed_read,
    master_saw::shard_reading,
    master_saw::shard_read_done,
    master_saw::shard_listed,
    master_saw::shard_logged,
    master_saw::shard_gone,
    master_saw::tasks_read,
    master_saw::cancels_listed,
    master_saw::foreign_found,
    master_saw::cleared,
    master_saw::answered,
    master_saw::result_dirs_listed,
    master_saw::result_dirs_stat,
    master_saw::results_listed,
    master_saw::results_stat,
    master_saw::report_due,
    master_saw::stall_dirs_listed,
    master_saw::assignments_read,
    master_saw::master_node_read,
    master_saw::master_node_written,
    master_saw::delayed_listed,
    master_saw::delayed_logged,
    master_saw::delayed_read,
    master_saw::decide>;

class master_fsm {
public:
    using clock = std::chrono::steady_clock;

    struct options {
        protocol::placement_policy policy = protocol::placement_policy::least_loaded;
        std::chrono::milliseconds unknown_type_grace{10'000};
        /// A request to cancel a task unknown here this long is dropped (T7, last case).
        std::chrono::milliseconds unknown_cancel_grace{30'000};
        /// Called for each task assigned (T2 committed), with what the master keeps of it.
        std::function<void(const protocol::task_head&)> on_assigned;
        /// The data change logs carried for tasks beyond the load window is kept up to this
        /// many bytes (counting a per-task overhead), so that a burst is not read back task by
        /// task when its turn comes; beyond it, a task costs its id only (and a read later).
        std::size_t logged_data_budget = 8U << 20U;
        /// How long a worker may leave an assignment unmarked before it is taken back and
        /// the worker is suspect (stall_watch); 0: never.
        std::chrono::milliseconds unstarted_bound{10'000};
        /// Results nobody consumed are deleted this long after they were written (T8).
        std::chrono::milliseconds result_retention{24L * 3600 * 1000};
        /// Most directories below /results one T8 sweep reads the stat of; the next sweep
        /// goes on from where it stopped.
        std::size_t gc_dirs_per_sweep = 1'000;
        /// What /master says of this master (docs/protocol.md §2): its id, epoch, bound on
        /// pending tasks and placement, which stay; its throughput and suspects, which the
        /// fsm keeps current.
        protocol::member_info master_node{};
        /// The wall clock, ms since the epoch: delayed tasks are due by it (T10).
        std::function<std::int64_t()> wall_ms;
        /// Most delayed tasks read (and released) at a time.
        std::size_t delayed_batch = 1000;
    };

    /// Tries before a task that cannot be assigned gets a failed result instead.
    static constexpr int max_assign_failures = 4;

    master_fsm(protocol::layout l, std::int64_t epoch, options opts, master_stats& stats);

    /// The one door: what happened goes in; what to do comes out, with when to look again.
    master_step on(const master_event& e, clock::time_point now);

    // --- what the shell may ask (no decisions) -----------------------------------------------

    [[nodiscard]] bool worker_alive(const std::string& id) const;
    /// The live workers' ids (sorted).
    [[nodiscard]] std::vector<std::string> live_workers() const;
    /// A live worker's directory changed since it was listed: must it be listed now? The
    /// fsm counts a worker's assignments from its last listing plus what we assigned since;
    /// a listing can wait until a pending task waits for a slot (the directory's changes
    /// may be slots freed by T4 or tasks placed directly: either way the count must be
    /// right before the worker gets more), or while a cancel request is open (it is
    /// forwarded to the holder). False otherwise: the listing waits, and a task at a time
    /// placed directly costs the master no listing.
    [[nodiscard]] bool worker_dir_listing_wanted(const std::string& id) const;
    /// Whether worker_dir_listing_wanted() may now say yes for a directory that got no
    /// when it last asked: true while its reason for every worker holds (a cancel request
    /// open, a pending task not on its way to a worker), and once after a worker left or its
    /// directory went missing (the reasons of one worker). The session wakes the directories
    /// waiting for a listing only then, not after every step: with a thousand workers each
    /// wake is a thousand coroutines resumed to hear no again.
    [[nodiscard]] bool dir_listings_may_be_wanted();
    /// How often the live workers' directories are listed for assignments left unstarted
    /// (stall_dirs_listed); 0: never.
    [[nodiscard]] std::chrono::milliseconds stall_period() const {
        return stalls_.enabled() ? stalls_.period() : std::chrono::milliseconds(0);
    }
    [[nodiscard]] std::size_t queue_depth() const { return pending_.size(); }
    /// Delayed tasks known (waiting, or being read or released).
    [[nodiscard]] std::size_t delayed_count() const { return delayed_.size(); }
    /// The earliest due time of a delayed task not being read or released; nullopt: none.
    [[nodiscard]] std::optional<std::int64_t> delayed_next_due() { return delayed_.next_due(); }
    /// Bytes of logged data kept aside for tasks beyond the load window (with overhead).
    [[nodiscard]] std::size_t logged_data_bytes() const { return logged_bytes_; }
    [[nodiscard]] std::string pending_path(const std::string& tid) const;

private:
    /// A pending node read and found valid: its bytes as read, which T2 stamps with the
    /// assignment (protocol::stamp: its args are never encoded again), and its decoded head.
    struct loaded_task {
        std::string data;
        protocol::task_head head;
    };

    /// A pending task. Its data is read only when it may be placed soon (near the head of the
    /// queue while slots are free): a backlog costs an id each, not a copy of every task, and
    /// a task cancelled while waiting is never read.
    struct pending_entry {
        std::uint32_t shard = 0;
        bool loading = false;    // its read is out
        bool in_flight = false;  // a transaction about it is out
        // Once loaded, one of the two. Pointers: a pending task not yet read costs no room for
        // either (a million pending tasks are a million entries: docs/performance.md).
        std::unique_ptr<loaded_task> task;
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

    /// A new worker's node: true when it joined (follow its node and directory), false when
    /// it is ignored (not ephemeral, or not a worker's data).
    bool worker_read(const std::string& id, std::string_view data, bool ephemeral);
    // One per event (master_fsm.cpp); the actions they decide go to out_.
    void handle(const master_saw::workers_listed& e, clock::time_point now);
    void handle(const master_saw::workers_read& e, clock::time_point now);
    void handle(const master_saw::worker_changed& e, clock::time_point now);
    void handle(const master_saw::dir_listed& e, clock::time_point now);
    void handle(const master_saw::dir_touched& e, clock::time_point now);
    void handle(const master_saw::dir_gone& e, clock::time_point now);
    void handle(const master_saw::dir_back& e, clock::time_point now);
    void handle(const master_saw::assign_dirs_listed& e, clock::time_point now);
    // T6 (master_fsm_requeue.cpp).
    void handle(const master_saw::departed_listed& e, clock::time_point now);
    void handle(const master_saw::departed_read& e, clock::time_point now);
    void requeue(const std::string& worker);
    void forget_departed(const std::string& worker);
    /// The departed workers whose directory is due to be listed again: listed now; the
    /// earliest time one is due later.
    std::optional<clock::time_point> relist_departed(clock::time_point now);
    void handle(const master_saw::shard_reading& e, clock::time_point now);
    void handle(const master_saw::shard_read_done& e, clock::time_point now);
    void handle(const master_saw::shard_listed& e, clock::time_point now);
    void handle(const master_saw::shard_logged& e, clock::time_point now);
    void handle(const master_saw::shard_gone& e, clock::time_point now);
    void handle(const master_saw::tasks_read& e, clock::time_point now);
    void handle(const master_saw::cancels_listed& e, clock::time_point now);
    void handle(const master_saw::foreign_found& e, clock::time_point now);
    void handle(const master_saw::cleared& e, clock::time_point now);
    void handle(const master_saw::answered& e, clock::time_point now);
    // T8 (master_fsm_collect.cpp).
    void handle(const master_saw::result_dirs_listed& e, clock::time_point now);
    void handle(const master_saw::result_dirs_stat& e, clock::time_point now);
    void handle(const master_saw::results_listed& e, clock::time_point now);
    void handle(const master_saw::results_stat& e, clock::time_point now);
    void done(const master_do::collect& a, const master_txn_report& r, clock::time_point now);
    /// The sweep's reads are in: the results past the retention, and the empty client
    /// directories, are deleted.
    void end_sweep();
    // /master (master_fsm_master_node.cpp).
    void handle(const master_saw::report_due& e, clock::time_point now);
    // Stalled workers (master_fsm_stalls.cpp).
    void handle(const master_saw::stall_dirs_listed& e, clock::time_point now);
    void handle(const master_saw::assignments_read& e, clock::time_point now);
    void done(const master_do::take_back& a, const master_txn_report& r, clock::time_point now);
    /// A stall round's reads are in: /master names the suspects.
    void publish_suspects();
    /// The workers as read changed: /master names the features all members follow, once
    /// every worker listed so far was read (worker_reads_out_).
    void publish_features();
    void handle(const master_saw::master_node_read& e, clock::time_point now);
    void handle(const master_saw::master_node_written& e, clock::time_point now);
    // Delayed tasks (master_fsm_delayed.cpp).
    void handle(const master_saw::delayed_listed& e, clock::time_point now);
    void handle(const master_saw::delayed_logged& e, clock::time_point now);
    void handle(const master_saw::delayed_read& e, clock::time_point now);
    void done(const master_do::release& a, const master_txn_report& r, clock::time_point now);
    /// Reads the delayed tasks whose time has come; when to look again (the earliest due).
    std::optional<clock::time_point> release_due(clock::time_point now);
    /// A cancel request for a task in the delayed view: its node read, then its T7 (true),
    /// or nothing yet.
    bool cancel_delayed(const std::string& tid);
    /// T7 of a delayed task whose node was read as `r` for its cancel.
    void cancel_read_delayed(const task_read& r);
    /// A cancel request for one task of a bundle, `<bundle>.<k>` (master_fsm_entry.cpp): its
    /// T7 when the bundle is assigned, nothing while it is pending or delayed (true: the
    /// request is decided); false for any other request (or one to drop, after a failure).
    bool cancel_entry(const std::string& tid);
    /// T6 of the bundle `bundle` of `worker` back to pending: `ops` also turn the markers of
    /// its tasks among `markers` back into cancel requests (master_fsm_entry.cpp).
    void carry_entry_cancels(
        const std::string& worker,
        const std::string& bundle,
        const std::set<std::string>& markers,
        std::vector<protocol::txn_op>& ops,
        std::int64_t now_ms
    ) const;
    /// The ops that delete a departed worker's cancel marker `tid` whose task is not in its
    /// directory: a marker of one task of a bundle also makes its request again, in the same
    /// multi, unless the view of /cancel holds it (§6 T6); any other is just deleted.
    std::vector<protocol::txn_op> litter_marker_ops(
        const std::string& worker, const std::string& tid, std::int64_t now_ms
    ) const;
    [[nodiscard]] std::int64_t wall_now() const;

    /// The decisions (master_fsm_decide.cpp): cancels, rejections, assignments and reads to
    /// start now, and when to look again.
    std::optional<clock::time_point> decide(clock::time_point now);
    /// The shard readiness a decision waits for (see shard_reading).
    void shard_seen(std::uint32_t shard, clock::time_point now);
    bool shard_reads_in();
    [[nodiscard]] std::vector<std::pair<std::uint32_t, std::uint64_t>> reads_out() const;

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
    /// Tells index_ what workers_ now holds of `id` (after any change of its record that
    /// placement sees: alive, draining, types, capacity, threads, unhealthy, its directory
    /// missing or touched, its assignments).
    void reindex(const std::string& id);
    /// Only the count of `id`'s assignments changed (assigned or in_flight).
    void reindex_used(const std::string& id);
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
    bool load_more(clock::time_point now);
    void keep_logged(const task_key& key, std::string data);
    /// The logged data kept for `key`, removed from logged_; nullopt when none is.
    std::optional<std::string> take_logged(const task_key& key);

    void done(const master_do::assign& a, const master_txn_report& r, clock::time_point now);
    void done(const master_do::reject& a, const master_txn_report& r, clock::time_point now);
    void done(const master_do::cancel& a, const master_txn_report& r, clock::time_point now);
    void done(const master_do::requeue_task& a, const master_txn_report& r, clock::time_point now);
    void done(
        const master_do::remove_departed& a, const master_txn_report& r, clock::time_point now
    );

    protocol::layout l_;
    std::int64_t epoch_;
    options opts_;
    master_stats& stats_;
    // The workers as placement sees them (slot_index): what every decision asks of them
    // costs O(log n), not a walk over all of them.
    slot_index index_;
    stall_watch stalls_;
    std::vector<master_action> out_;  // the actions decided, handed out by on()

    std::map<std::string, worker_entry> workers_;
    /// read_workers actions not answered yet, and whether /workers was listed at all: until
    /// both say every worker was read, /master names no feature it has not named already.
    std::size_t worker_reads_out_ = 0;
    bool workers_listed_ = false;
    // The sum of workers_' in_flight: what worker_dir_listing_wanted, asked once per worker
    // after every step, would otherwise add up over all workers each time.
    std::size_t assigns_in_flight_ = 0;
    /// A worker left or its directory went missing since dir_listings_may_be_wanted().
    bool worker_listing_due_ = false;
    std::set<std::string> ignored_;        // worker nodes with garbage data
    std::set<std::string> orphans_seen_;   // directories of departed workers handed to T6
    pending_map pending_;                  // by task id: FIFO within priority
    std::set<std::string> loaded_;         // pending tasks whose data is read, in the same order
    bool loading_ = false;                 // a batch of reads is out
    clock::time_point load_paused_until_;  // after a batch of reads that failed
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

    // Shard readiness: the queue is ordered across shards (§3). Until every pending shard
    // has been listed once, the head of what was listed may not be the head of the queue.
    std::vector<bool> shard_listed_;
    std::size_t shards_unlisted_;
    std::optional<clock::time_point> started_;  // the first event (for the log)
    std::vector<bool> shard_reading_;           // a read of it is out
    std::vector<std::uint64_t> shard_reads_;    // reads of it answered
    // The shard reads a decision waits for: (shard, its reads done then).
    std::optional<std::vector<std::pair<std::uint32_t, std::uint64_t>>> awaited_reads_;
    bool reads_extended_ = false;  // awaited_reads_ holds the reads out once the first were in

    /// T6 of one departed worker: its directory listed, its assignments read and handed back
    /// (one transaction each), again until it is empty, then deleted.
    struct departure {
        bool counted = false;           // said how many tasks it left (its first listing)
        std::set<std::string> markers;  // tasks with a cancel marker there
        std::size_t out = 0;            // its transactions out
        std::size_t failed = 0;         // of those, the ones that failed
        std::chrono::milliseconds backoff{100};
        std::optional<clock::time_point> relist_at;  // listed again then, after failures
    };
    std::map<std::string, departure> departures_;

    /// What T8 knows of one directory below /results.
    struct result_dir_seen {
        std::int32_t cversion = 0;  // its children's version when last listed in full
        std::map<std::string, std::int64_t> results;  // result path -> ctime (ms)
    };
    /// One T8 sweep while its reads are out.
    struct result_sweep_state {
        std::int64_t cutoff = 0;                      // results created before are deleted
        std::vector<std::string> dirs;                // the directories it looks at (sorted)
        std::map<std::string, result_dir_seen> seen;  // what is known once it is over
        std::vector<std::pair<std::string, std::int32_t>> empty_clients;  // dir, version
        std::vector<std::string> fresh;      // results not known before, being read
        std::vector<std::string> fresh_dir;  // the directory of each
    };
    std::map<std::string, result_dir_seen> results_known_;  // what the last sweeps saw
    std::string swept_to_;  // the last directory the last sweep looked at
    std::optional<result_sweep_state> sweep_;

    // Delayed tasks (T10): every one's name and due time, and the shards listed once.
    delayed_queue delayed_;
    std::vector<bool> delayed_listed_;
    std::size_t delayed_unlisted_;
    std::size_t delayed_reads_out_ = 0;           // delayed tasks being read
    std::set<std::string> delayed_cancel_reads_;  // delayed tasks being read for a cancel
    // A delayed task whose read for a cancel failed (or found foreign children): its cancel
    // is decided again at this wall-clock time, not at the next decision.
    std::map<std::string, std::int64_t> delayed_cancel_retry_;

    // A stall round: per worker, the tasks with a cancel marker in its last listing, and the
    // reads out.
    std::map<std::string, std::set<std::string>> stall_markers_;
    std::size_t stall_reads_out_ = 0;

    // /master: what it says of us, and the tasks finished (time, count) for its throughput.
    protocol::member_info master_node_;
    bool rewriting_master_node_ = false;  // its write again is out
    // The latest read of it that came while that write was out: handled once it is answered
    // (a delete during the write fires no watch after it, and must not be missed).
    std::optional<master_saw::master_node_read> master_read_during_rewrite_;
    std::deque<std::pair<clock::time_point, std::uint64_t>> finishes_;
    double throughput_written_ = 0;
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
