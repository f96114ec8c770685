// SPDX-License-Identifier: MIT
#pragma once

#include "protocol/delay.hpp"
#include "protocol/ids.hpp"
#include "protocol/layout.hpp"
#include "protocol/queue_bound.hpp"
#include "protocol/task.hpp"
#include "roles/client/error.hpp"
#include "zkco/client.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/json/value.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace zkd::roles {

class multi_batcher;  // roles/txn/batcher.hpp: the client's transactions
class direct_placer;  // roles/client/submit_fsm.hpp: where a task goes directly
struct packed_node;   // roles/client/submit_fsm.hpp: a node a submit writes

/// How submit() stores tasks.
struct submit_options {
    /// Most tasks per bundle (docs/protocol.md §4.1): consecutive tasks of one call with the
    /// same type, priority, timeout and max_attempts share one node, up to this many (at most
    /// max_bundle_tasks) and what fits a node (max_task_bytes). A bundle moves as a unit: one
    /// worker runs its tasks, their results come back together; but a cancel of one task
    /// (its id `<bundle>.<k>`) cancels that task alone, and a retry reruns only the tasks
    /// that failed (docs/protocol.md §4.3 "Bundles", §6 T7). Fewer ZooKeeper requests per
    /// task, so far more tasks per second.
    /// 1 (the default): every task its own node.
    std::size_t bundle = 1;
    /// Not before this time (ms since the epoch; docs/protocol.md §4.3): the tasks wait in the
    /// delayed tree, their ids carrying the time, until the master moves them to pending. A
    /// time not after now: submitted as any task.
    std::optional<std::int64_t> due_ms{};
    /// Retries after a failed or timed-out try, and their backoff (§4.3); nullopt: the
    /// worker's default for the type.
    std::optional<int> retries{};
    std::optional<protocol::backoff_policy> backoff{};
};

/// Tasks and the caller's own ZooKeeper ops in one transaction (docs/protocol.md §6 T1), for
/// an application whose tasks must appear together with nodes of its own, or not at all
/// (zkd-crack creates a job node and its partitions' tasks so). The caller draws the tasks'
/// ids (protocol::task_id_generator::next) and sends ops() with zkco::client::multi,
/// retrying as it sees fit: the caller's ops in the order added, then one pending create per
/// task in the order added, then the change logs of the shards they go in (§6 "Change
/// logs": what the master follows them by). Unlike task_client::submit(): no bundles, no
/// direct placement, no check of the bound on pending tasks, no receipt.
class task_transaction {
public:
    /// Each task gets `client` (the submitting client's id, 8 hex digits) and `now_ms` as
    /// its `client` and `submitted_ms`.
    task_transaction(protocol::layout l, std::string client, std::int64_t now_ms);

    /// One of the caller's ops.
    void add(zkco::multi_op op) { own_.push_back(std::move(op)); }
    /// The caller's op `i` (in the order added), to fill in once the tasks are known.
    [[nodiscard]] zkco::multi_op& own(std::size_t i) { return own_.at(i); }
    /// The task `task` under the id `tid`, checked as submit() checks one: an error
    /// (client_errc, task_too_large included) adds nothing.
    zkco::result<void> add_task(const std::string& tid, protocol::task_spec task);

    [[nodiscard]] std::size_t own_count() const noexcept { return own_.size(); }
    [[nodiscard]] std::size_t task_count() const noexcept { return tasks_.size(); }
    /// The transaction: the caller's ops, the tasks' creates, the change logs.
    [[nodiscard]] std::vector<zkco::multi_op> ops() const;

private:
    protocol::layout l_;
    std::string client_;
    std::int64_t now_ms_;
    std::vector<zkco::multi_op> own_;
    std::vector<zkco::multi_op> tasks_;
};

/// A task's state as a client sees it (docs/protocol.md §6), with the worker holding it.
struct task_status {
    protocol::task_state state = protocol::task_state::unknown;
    std::string worker;  ///< assigned or running (or who published the result)
    std::optional<protocol::task_result> result;  ///< once finished, until consumed
};

/// The client role (docs/protocol.md §7 "Client") over one session: submits tasks (T1, many
/// per multi), waits for results by watch and consumes them (T5), answers status queries
/// and cancels (T7). Use on the session's executor; `zk` must outlive it.
class task_client {
public:
    task_client(zkco::client& zk, protocol::layout l);
    ~task_client();
    task_client(const task_client&) = delete;
    task_client& operator=(const task_client&) = delete;

    /// Submits the tasks and yields their ids, in order (a bundled task's id is
    /// `<bundle id>.<index>`). Each task is as its submitter means it (type, args, priority,
    /// timeout, max_attempts; its `bundle` empty: bundles are submit_options::bundle's to
    /// make); the client fills `submitted_ms` and `client`. Validated first: nothing is sent
    /// if one is invalid (client_errc), nor when its nodes would take the pending count past
    /// the master's bound (queue_full; the count and bound are read at most a second before,
    /// docs/protocol.md §7). A retry after a lost connection is idempotent. Cancelled
    /// (terminal) before every node was answered: operation_aborted, the outcome unknown (the
    /// creates already sent may still apply), never success.
    boost::asio::awaitable<zkco::result<std::vector<std::string>>> submit(
        std::vector<protocol::task_spec> tasks, submit_options opts = {}
    );

    /// Waits (by watch, never polling) until the task's result exists, reads it and consumes
    /// it: exactly one caller gets it. For a bundled task, the waits of one client on tasks of
    /// one bundle share one read, and the bundle's node goes once every task's result was
    /// consumed (by whichever clients); a wait on a bundle's own id consumes the whole bundle.
    /// A wait cancelled before its result was read consumes nothing. Errors: garbage_result,
    /// no_node (someone else consumed it), the session's errors.
    boost::asio::awaitable<zkco::result<protocol::task_result>> wait(std::string tid);

    /// Waits like wait() until the task's result exists and reads it, but consumes nothing:
    /// call consume() once the result was delivered (so that a caller who could not deliver
    /// it leaves it for a later reader). The calls on tasks of one bundle at a time share one
    /// read of the bundle's result. Errors: garbage_result, no_node (already consumed), the
    /// session's errors.
    boost::asio::awaitable<zkco::result<protocol::task_result>> await_result(std::string tid);

    /// Consumes the task's result (T5): deletes its node; a task of a bundle is marked
    /// consumed in the bundle's node, which goes once all its tasks are. The calls on tasks
    /// of one bundle at a time share one read of its result and one write. A result already
    /// gone is no error. Cancelled, a call on a task of a bundle stops waiting, but its
    /// consume goes on (flush() waits for it). Errors: the session's, operation_aborted
    /// (cancelled).
    boost::asio::awaitable<zkco::result<void>> consume(std::string tid);

    /// Where the task is now: pending, assigned or running (with the worker), or finished
    /// with its result (read, not consumed); unknown when none of these exists (never
    /// submitted, or the result was consumed or collected). Errors: garbage_result, the
    /// session's errors.
    boost::asio::awaitable<zkco::result<task_status>> status(std::string tid);

    /// Completes once every write this client queued has been answered (the deletes that
    /// consume results after wait() are sent without waiting, with the client's next
    /// transaction or within 20 ms, and retried after a connection loss): call
    /// it before closing the session, or they may never reach the server. Completes at once
    /// when the session is gone.
    boost::asio::awaitable<void> flush();

    /// For a client that is done (no wait of it still out): flush(), then, when every node
    /// this client submitted had its result consumed by it, deletes its results directory,
    /// so that a short-lived client (`zkd submit --wait`) leaves no empty directory for the
    /// master to collect a day later (T8). A result that comes after all makes the
    /// directory again (§2). A bundle counts as consumed once this client deleted its result
    /// (its last unconsumed task consumed here; one whose last task another client consumed
    /// keeps the directory), and a directory still holding a task's own node (§6 T4e)
    /// stays. Gives up on the delete after 2 s.
    boost::asio::awaitable<void> close();

    /// Asks the master to cancel the task (T7); the result says how it ended. For one task of
    /// a bundle (`<bundle>.<k>`), that task alone (§6 T7 "One task of a bundle"); for a
    /// bundle's own id, all of it.
    boost::asio::awaitable<zkco::result<void>> cancel(std::string tid);

    [[nodiscard]] const protocol::task_id_generator& ids() const noexcept { return ids_; }

    /// Listings of this client's results directory so far: the first when its waits begin
    /// to follow it, then one per change log read that did not account for every change
    /// (docs/protocol.md §6). A cost figure (zkd-loadgen reports it per task).
    [[nodiscard]] std::uint64_t results_listings() const noexcept;

    /// Whether plain tasks may go to a worker directly, without the master (docs/protocol.md
    /// §6 T1 "Direct placement"; on by default): while the last read of the workers (at most
    /// a second old) leaves one with a free slot that serves the type. Off: every task goes
    /// to pending and the master places it. The master's word wins: a `/master` that says
    /// `"direct":false` (`zkd run --no-direct`) turns it off for every client, from their
    /// next read of it (at most a second later).
    void place_directly(bool on) noexcept { direct_on_ = on; }
    /// Automatic bundles (docs/protocol.md §4.1 "Automatic bundles"; on by default, bundles of
    /// up to default_auto_bundle, the size measured in docs/performance.md): with `most` of 2
    /// or more, submit() calls that come while this client's transaction is in flight are
    /// held until it is answered, and their tasks go out together in the next one, compatible
    /// ones packed into bundles of at most `most` (at most max_bundle_tasks) and spread over
    /// at least as many nodes as the workers last read have threads. A submit that finds no
    /// transaction in flight goes on the next turn of the event loop, as ever: a lone task is
    /// never held. Each task keeps an id of its own (`<bundle id>.<index>` when bundled) and
    /// its own result, wait, status and cancel (one task of a bundle is cancelled alone); a
    /// task that ends while its neighbours run has its result at once (early results, §6
    /// T4e), but a bundle is requeued as a whole when its worker dies. Only while /master
    /// says that every member follows early results (its "features" name entry_results, as
    /// last read: a cluster with an older worker or master gets no automatic bundle). Tasks
    /// that ask for retries (a worker older than per-task retries retries a bundle whole),
    /// delayed tasks and calls with submit_options::bundle above 1 are never packed. 0 or 1:
    /// off.
    void auto_bundle(std::size_t most) noexcept { auto_most_ = most; }
    /// The size of automatic bundles a client packs unless told otherwise (auto_bundle()).
    static constexpr std::size_t default_auto_bundle = 64;
    /// Tasks this client put in automatic bundles so far (a cost figure for zkd-loadgen).
    [[nodiscard]] std::uint64_t auto_bundled() const noexcept { return auto_bundled_; }

    /// Tasks this client placed on workers directly so far (a cost figure for zkd-loadgen).
    [[nodiscard]] std::uint64_t direct_placed() const noexcept { return direct_placed_; }

    /// What the last submit that got as far as the bound was decided on (its pending count,
    /// nodes and bound): the figures of a queue_full.
    [[nodiscard]] const protocol::queue_check& last_queue_check() const noexcept {
        return last_check_;
    }

private:
    /// submit(), run with throw_if_cancelled(false) (a cancel answered, not thrown).
    boost::asio::awaitable<zkco::result<std::vector<std::string>>> submit_answered(
        std::vector<protocol::task_spec> tasks, submit_options opts
    );

    struct sending;
    struct pooled;
    struct bundle_wait;
    struct bundle_peek;
    struct bundle_consume_group;
    struct inbox;
    struct inbox_wait;

    /// Admits a submit of `adding` nodes against the bound (gauge_), reading /master and the
    /// pending shards' stats first when the figures are over a second old (one read at a time:
    /// concurrent submits wait for it). Errors: the session's, operation_aborted.
    boost::asio::awaitable<zkco::result<protocol::queue_check>> check_queue(std::uint64_t adding);
    /// One read of the figures into gauge_ (and of the workers into direct_, when placing
    /// directly), again after a connection loss the session survives.
    boost::asio::awaitable<zkco::error_code> read_queue();
    /// The second half of read_queue when placing directly: each worker's node and the count
    /// of its assignments, into direct_ (a failed read places nothing directly till the next).
    boost::asio::awaitable<void> read_workers(std::vector<std::string> names);

    /// Waits until `path` exists and reads it.
    boost::asio::awaitable<zkco::result<zkco::node>> await_node(std::string path);
    /// Waits until the result of the task node `tid` exists and reads it: through this
    /// client's results directory and its change log (await_own) for a task of its own,
    /// else by an `exists` watch on the result (await_node).
    boost::asio::awaitable<zkco::result<zkco::node>> await_result_node(std::string tid);
    /// Waits for the result `name` in this client's own results directory: the inbox's
    /// follower (follow_inbox) delivers it, mostly with its data.
    boost::asio::awaitable<zkco::result<zkco::node>> await_own(std::string name);
    /// Starts follow_inbox for the waits parked in `box`, unless it runs already.
    void follow_inbox_once(const std::shared_ptr<inbox>& box);
    /// Follows this client's results directory `dir` by its change log while waits are
    /// parked in `box`: ends once none are after a change, or with the session (failing
    /// the waits).
    static boost::asio::awaitable<void> follow_inbox(
        zkco::client& zk, std::string dir, std::shared_ptr<inbox> box, std::shared_ptr<bool> alive
    );
    /// Names the nodes (draw_id, or a worker's when placed directly) and queues their
    /// creates in the batcher at once (submit_fsm: one group per node, sent again as it
    /// says); `on_over` runs once every node is answered. The caller keeps `send` of the
    /// result alive while it wants nodes sent again.
    std::shared_ptr<sending> send_nodes(
        std::vector<packed_node> packed, bool delayed, std::function<void(sending&)> on_over
    );
    /// The batcher may send (multi_batcher::on_send): the submits held back meanwhile go out,
    /// packed into automatic bundles (plan_auto_bundles).
    void flush_pool();
    /// A new id for a node of `bundle` tasks (0: a plain task), in the pending shard of the
    /// transaction the batcher sends next: the node's id (a bundle's id for a bundle).
    std::string draw_id(int priority, std::int64_t submitted_ms, std::size_t bundle);
    /// Reads `path`, again after a connection loss the session survives.
    boost::asio::awaitable<zkco::result<zkco::node>> read_node(std::string path);
    /// T5 for a task's own result node: deletes it in the background (batched), again after
    /// a connection loss the session survives, after deleting what others wrote below it;
    /// what cannot be deleted is logged (it stays until the master's retention, T8).
    void consume_result(std::string path);
    /// The delete of consume_result, awaited: no error once the node is gone. `deferred`:
    /// its first try waits for a transaction to ride with (multi_batcher's deferred groups).
    boost::asio::awaitable<zkco::error_code> consume_until_done(
        std::string path, bool deferred = false
    );
    /// Waits for the result of task `index` of `bundle` in either place it may come
    /// (docs/protocol.md §6 T4e): its own node `<bundle>.<index>` (then yields it, read),
    /// or the bundle's result (then yields nullopt: read that). Through the inbox for a
    /// bundle of this client's, else by `exists` watches on both. Errors: no_node when its
    /// own node was there but gone before it was read (consumed), the session's.
    boost::asio::awaitable<zkco::result<std::optional<zkco::node>>> await_entry(
        std::string bundle, std::size_t index
    );
    /// await_own for the result `own` in this client's results directory, or until the name
    /// `other` comes there first: `own`'s node as read, or nullopt when `other` came (its
    /// name only: nothing of it is read or copied, results_inbox::wait's `name_only`).
    boost::asio::awaitable<zkco::result<std::optional<zkco::node>>> await_own_or(
        std::string own, std::string other
    );
    /// The result of task `tid` from its own node `node` (read at `path`): consumed (the node
    /// deleted in the background) when `consume`.
    zkco::result<protocol::task_result> own_entry(
        const std::string& path, const zkco::node& node, const std::string& tid, bool consume
    );
    boost::asio::awaitable<zkco::result<protocol::task_result>> wait_bundled(
        std::string bundle, std::size_t index, std::string tid
    );
    /// The result of the bundle `bundle` as read and decoded (nullopt: no node), for
    /// await_result: the calls at a time share one read (a bundle's result may hold 512 KiB,
    /// its 1,000 tasks each a call). Errors: garbage_result, the session's.
    boost::asio::awaitable<
        zkco::result<std::shared_ptr<const std::optional<protocol::task_result>>>>
    peek_bundle(std::string bundle);
    /// consume() of task `index` of `bundle`: joins the group of consumes of that bundle that
    /// has not read yet, or starts one (in the background: consume_group), and yields it.
    std::shared_ptr<bundle_consume_group> join_consume(
        const std::string& bundle, std::size_t index
    );
    /// The consumes of group `g` and of the groups that join after it, one group at a time:
    /// one read of the bundle's result and one write for each group.
    static boost::asio::awaitable<void> consume_groups(
        task_client* self,
        std::shared_ptr<bool> alive,
        std::string bundle,
        std::shared_ptr<bundle_consume_group> g
    );
    /// One group's consumes (consume_groups): each index's outcome in `g`.
    boost::asio::awaitable<void> consume_group(
        const std::string& bundle, std::shared_ptr<bundle_consume_group> g
    );
    /// consume_until_done of the own result node `path` of task `index` (§6 T4e) for `g`.
    boost::asio::awaitable<void> consume_entry(
        std::string path, std::size_t index, std::shared_ptr<bundle_consume_group> g
    );
    /// Marks `indices` consumed in the bundle's result `node` (deletes it once all are):
    /// yields the result as read, and which of `indices` someone else had consumed first.
    boost::asio::awaitable<zkco::result<std::pair<protocol::task_result, std::vector<std::size_t>>>>
    consume_bundled(std::string bundle, zkco::node node, std::vector<std::size_t> indices);

    zkco::client& zk_;
    protocol::layout l_;
    protocol::task_id_generator ids_;
    std::unique_ptr<multi_batcher> batcher_;
    /// draw_id: the batcher's transaction count the last id was drawn for, and how many
    /// nodes were drawn for it; every shard_run of them go in the next shard.
    std::uint64_t drawn_for_txn_ = 0;
    std::uint64_t drawn_ = 0;
    static constexpr std::uint64_t shard_run = 250;
    std::map<std::string, std::shared_ptr<bundle_wait>> bundle_waits_;  ///< by bundle id
    std::map<std::string, std::shared_ptr<bundle_peek>> bundle_peeks_;  ///< by bundle id
    /// By bundle id: the group of consume() calls that is consuming (join_consume).
    std::map<std::string, std::shared_ptr<bundle_consume_group>> bundle_consumes_;
    /// consume_result calls and consume groups not finished (flush waits)
    std::size_t consuming_ = 0;
    /// Cancelled when consuming_ drops to 0: flush's wake-up (a timer used as a condvar).
    boost::asio::steady_timer consumed_;
    bool receipts_ = false;          ///< the batcher writes receipts (from the first submit on)
    bool results_dir_made_ = false;  ///< our results directory was made (first submit)
    /// Nodes this client submitted (sent, whatever came of them) less its consumes of
    /// results in its own directory: close() keeps the directory unless it is 0.
    std::size_t own_unconsumed_ = 0;
    protocol::pending_gauge gauge_;             ///< the bound and the pending count, as last read
    bool direct_on_ = true;                     ///< place_directly()
    bool master_says_direct_ = true;            ///< /master's "direct", as last read
    std::vector<std::string> master_suspects_;  ///< /master's "suspects", as last read
    /// /master's "features" name entry_results, as last read (automatic bundles may go)
    bool master_says_bundle_ = false;
    std::unique_ptr<direct_placer> direct_;  ///< the workers as last read, for direct placement
    std::uint64_t direct_placed_ = 0;        ///< direct_placed()
    std::size_t auto_most_ = default_auto_bundle;  ///< auto_bundle()
    std::uint64_t auto_bundled_ = 0;               ///< auto_bundled()
    /// Submits held back for the next transaction (auto_bundle), in the order they came.
    std::vector<std::shared_ptr<pooled>> pool_;
    /// Most workers read for direct placement at a time (read_workers, worker_window), and
    /// where the next read's window starts.
    static constexpr std::size_t direct_sample = 16;
    std::size_t sample_at_ = 0;
    protocol::queue_check last_check_;
    bool reading_queue_ = false;  ///< a read_queue is out: others wait for queue_read_
    /// Cancelled when a read_queue ends (a timer used as a condvar).
    boost::asio::steady_timer queue_read_;
    std::shared_ptr<inbox> inbox_;  ///< the waits on our own results (await_own)
    /// False once this client is destroyed: background work of it checks before touching it.
    std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace zkd::roles
