// SPDX-License-Identifier: MIT
#pragma once

// The client's decisions (docs/protocol.md §6 T1 and T5), with no I/O: for a submit, which
// worker a task goes to directly, if any, which node to send again after an answer and
// whether the call succeeded ("did my write apply?");
// for a consume of a bundle's tasks, what to write, and after each answer, a lost one
// included, whether to read again, wait for the connection, or deliver; for the waits on
// its own tasks, what its results directory's change log delivers. task_client.cpp carries
// the steps out; tests/unit/roles/client/submit_fsm_test.cpp drives them alone.

#include "protocol/change_log.hpp"
#include "protocol/client_txn.hpp"
#include "protocol/direct_placement.hpp"
#include "protocol/ids.hpp"
#include "protocol/layout.hpp"
#include "protocol/task.hpp"
#include "roles/client/error.hpp"

#include <boost/system/result.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace zkd::roles {

/// One node a submit writes: a task's, or a bundle's (docs/protocol.md §4.1), encoded.
struct packed_node {
    std::string data;               ///< encode(task_spec): the task as submitted
    std::string type;               ///< its tasks' type (direct placement goes by it)
    int priority = 0;               ///< its id is drawn with it (§3)
    std::int64_t submitted_ms = 0;  ///< and with this time
    std::size_t bundle = 0;         ///< tasks in the bundle; 0: a plain task

    friend bool operator==(const packed_node&, const packed_node&) = default;
};

/// The nodes a submit writes for `tasks`, in order (docs/protocol.md §4, §4.1). Each task
/// gets `submitted_ms` = `now_ms` and `client` = `client` (what the caller put there is
/// replaced) and must pass protocol::validate() and fit max_task_bytes. Consecutive tasks
/// of the same type, priority, timeout, max attempts and timing (§4.3) share a bundle of at most
/// `most` (1: none; at most max_bundle_tasks) while the node stays within max_task_bytes; tasks
/// whose args are nested too deep to sit in a bundle go alone. An error, nothing packed: the
/// first rule a task breaks (a task_spec whose `bundle` is not empty: invalid_args, bundles
/// are the packer's to make). `entry_results`: each bundle's node says so (§4.1: the client
/// takes a task's result from a node of its own, when its worker publishes one early).
boost::system::result<std::vector<packed_node>, client_errc> pack_tasks(
    std::vector<protocol::task_spec> tasks,
    std::size_t most,
    std::string_view client,
    std::int64_t now_ms,
    bool entry_results = false
);

/// Whether `t` may go in an automatic bundle (docs/protocol.md §4.1 "Automatic bundles"):
/// a plain task, not delayed, that asks for no retries (a worker older than per-task
/// retries, §4.3 "Bundles", retries a bundle whole).
bool auto_bundle_eligible(const protocol::task_spec& t);

/// Automatic bundles (docs/protocol.md §4.1): how the tasks a client pooled while its
/// transaction was in flight go out in the next one, with no I/O. Returns groups of indices
/// into `tasks`: a group of one is a plain node, of more a bundle (pack_tasks of the group
/// with `most` = its size). Tasks share a group only when both are auto_bundle_eligible and
/// alike but for their args (type, priority, timeout, max attempts, the §4.3 fields), and
/// each such set of `n` (in the order of its first task, tasks in their order) is cut into
/// groups of `clamp(ceil(n / spread), 1, most)`: a set spreads over at least `spread` nodes
/// (the worker threads the client knows of, which a bundle's one slot cannot use all of)
/// while it has that many tasks, so a lone task, or fewer tasks than `spread`, goes plain.
std::vector<std::vector<std::size_t>> plan_auto_bundles(
    const std::vector<protocol::task_spec>& tasks, std::size_t most, std::size_t spread
);

/// T1 for one submit() call: one create per node (a task's or a bundle's), each a group of
/// its own so that a node that fails does not take the others down with it.
class submit_fsm {
public:
    /// What an answer to a node's group calls for.
    enum class next {
        wait,    ///< wait for the other nodes' answers
        resend,  ///< send this node's ops again
        over,    ///< every node is answered: see outcome()
    };
    enum class outcome {
        pending,    ///< answers are still out
        submitted,  ///< every node is there
        failed,     ///< a node failed (first_failed() says which)
        cancelled,  ///< the caller cancelled before every node was answered: unknown
    };

    /// `receipts`: the batcher decides a lost answer itself (a receipt), and never completes
    /// a group with an unknown outcome while the session lives.
    submit_fsm(
        protocol::layout l,
        std::vector<std::string> tids,
        std::vector<std::string> data,
        bool receipts
    );

    /// Node `i` goes to `worker` directly (§6 T1 "Direct placement"), while its node is at
    /// `worker_version`, with the assignment's data `data`; if the worker changed or left
    /// (an answer says redirect), the node goes to pending as any other.
    void direct(std::size_t i, std::string worker, std::int32_t worker_version, std::string data);
    /// The worker node `i` was placed on directly; empty when it went to pending (or was
    /// redirected there).
    [[nodiscard]] const std::string& direct_worker(std::size_t i) const;
    /// Every node goes to the delayed tree (§6 "Delayed tasks and retries"), not pending.
    void delay_all() noexcept { delayed_ = true; }

    [[nodiscard]] std::size_t size() const noexcept { return tids_.size(); }
    /// Node `i`'s id.
    [[nodiscard]] const std::string& tid(std::size_t i) const { return tids_.at(i); }
    /// The ops of node `i`'s group.
    [[nodiscard]] std::vector<protocol::txn_op> ops(std::size_t i) const;

    /// Node `i`'s group answered. `lost`: the outcome is unknown (the connection dropped,
    /// not the batcher going away); `session_alive`: the session may still reconnect.
    /// Without receipts a lost create is sent again, and node_exists then means it got there
    /// (but a task the master took meanwhile is created twice: why receipts exist).
    next answered(std::size_t i, const protocol::txn_answer& a, bool lost, bool session_alive);
    /// The caller cancelled its wait.
    void cancelled() noexcept { cancelled_ = true; }

    [[nodiscard]] outcome result() const noexcept;
    /// The first node that failed, in the order the answers came.
    [[nodiscard]] std::optional<std::size_t> first_failed() const noexcept { return failed_; }
    /// Whether node `i` was answered with a failure.
    [[nodiscard]] bool failed(std::size_t i) const;

private:
    protocol::layout l_;
    std::vector<std::string> tids_;
    std::vector<std::string> data_;
    bool receipts_;
    std::size_t left_;
    std::optional<std::size_t> failed_;
    std::vector<bool> node_failed_;  // per node, once one failed
    bool cancelled_ = false;
    bool delayed_ = false;
    struct direct_target {
        std::string worker;  // empty: pending
        std::int32_t version = 0;
        std::string data;
    };
    std::vector<direct_target> direct_;  // empty until direct() is called
};

// Direct placement's decisions are the protocol library's (protocol/direct_placement.hpp),
// shared with the workflow engine.
using protocol::worker_seen;
using protocol::worker_window;

/// The client's protocol::direct_placer (a class of its own, which task_client.hpp declares).
class direct_placer : public protocol::direct_placer {};

/// T5 for tasks `indices` of a bundle's result, read and written at versions: marks them
/// consumed (deletes the node once every task is), reads again on a conflict, and after a
/// lost answer finds out whether its write applied.
class bundle_consume {
public:
    struct step {
        enum class kind {
            write,      ///< run `ops`, then answered()
            reconnect,  ///< wait until connected again, then reconnected()
            reread,     ///< read the node again, then reread() or reread_gone()
            done,       ///< over: `end` says how
        };
        enum class end {
            delivered,  ///< result() and taken() hold the outcome
            garbage,    ///< the node is no result: delete it (it is nobody's), say so
            failed,     ///< the write's error, which does not go away by itself
        };
        kind what = kind::done;
        std::vector<protocol::txn_op> ops;
        end how = end::failed;
    };

    /// `size` is the bundle's (its id says it).
    bundle_consume(std::string path, std::size_t size, std::vector<std::size_t> indices);

    /// The node as first read.
    step read(std::string_view data, std::int32_t version);
    /// The answer to `write`. `lost`: the outcome is unknown and the session may reconnect.
    step answered(const protocol::txn_answer& a, bool lost);
    /// After `reconnect`: `ok` when connected again. Otherwise (the session is gone) what was
    /// read is delivered, at least once, as a plain wait would.
    step reconnected(bool ok);
    /// The node as read again.
    step reread(std::string_view data, std::int32_t version);
    /// Read again, the node is gone: others consumed the rest (ours too, unless our own
    /// write, whose answer was lost, deleted it: then ours are delivered).
    step reread_gone();

    /// Once delivered: the bundle's result as read, and which of `indices` someone else had
    /// consumed first.
    [[nodiscard]] const protocol::task_result& result() const noexcept { return read_; }
    [[nodiscard]] const std::vector<std::size_t>& taken() const noexcept { return plan_.taken; }
    /// Our write deleted the node (every task of the bundle consumed), as its answer says:
    /// the client's own change to the directory (a lost answer does not count).
    [[nodiscard]] bool deleted() const noexcept { return deleted_; }

private:
    static step done(step::end e);

    std::string path_;
    std::size_t size_;
    std::vector<std::size_t> indices_;
    protocol::task_result read_;
    std::int32_t version_ = 0;
    protocol::bundle_consume_plan plan_;
    bool unknown_ = false;  // the last write's answer was lost
    bool deleted_ = false;  // a committed write of ours deleted the node
};

/// The waits of one client on tasks of one bundle share one read (T5): the first wait reads
/// the bundle's result and consumes it for every wait that joined before it read; the others
/// wait for it and take their entries from what it read.
class shared_bundle_read {
public:
    enum class phase {
        waiting,    ///< for the node
        consuming,  ///< the node was read: the joined tasks are being consumed
        done,       ///< see outcome()
        abandoned,  ///< the reader ended without an answer: the others read for themselves
    };
    /// What a wait that joined does once woken (by the reader, or by its own cancellation).
    enum class on_wake {
        read_again,  ///< abandoned: read for itself
        cancelled,   ///< woken by its cancellation while waiting: it left the read
        wait_more,   ///< cancelled, but its task is being consumed: wait for that, not lose it
        deliver,     ///< done: outcome()
    };
    /// What the wait on one task gets.
    struct outcome {
        enum class kind {
            result,  ///< `result`
            gone,    ///< no_node: consumed by someone else (or the node was gone)
            /// published early (§6 T4e): its result is its own node's, not the bundle's
            published,
            garbage,  ///< its entry cannot be read out of the bundle's result
            failed,   ///< the reader's error
        };
        kind what = kind::failed;
        protocol::task_result result;
    };

    explicit shared_bundle_read(std::size_t first) : indices_{first} {}

    /// Another wait of the same client joins, for task `index`.
    void join(std::size_t index) { indices_.push_back(index); }
    /// A joined wait on `index` was woken.
    on_wake woke(std::size_t index);

    // The reader's events.
    /// The node was gone before it was read: no_node for all.
    void gone();
    /// Consuming begins: the tasks joined so far are consumed (indices()).
    void consuming() { phase_ = phase::consuming; }
    /// Consumed: the bundle's result as read, and which of indices() others consumed first.
    void consumed(protocol::task_result whole, std::vector<std::size_t> taken);
    /// The consume failed with an error of its own (outcome() says failed).
    void failed() { phase_ = phase::done; }
    /// The reader ended otherwise (an error, a cancellation): true when the joined waits
    /// must be woken to read for themselves.
    bool abandon();

    [[nodiscard]] phase now() const noexcept { return phase_; }
    [[nodiscard]] const std::vector<std::size_t>& indices() const noexcept { return indices_; }
    /// Once done: what the wait on task `index` (named `tid`) gets.
    [[nodiscard]] outcome outcome_for(std::size_t index, std::string tid) const;

private:
    std::vector<std::size_t> indices_;  // the tasks waited for, one entry per wait
    phase phase_ = phase::waiting;
    std::optional<protocol::task_result> whole_;  // once consumed
    bool gone_ = false;
    std::vector<std::size_t> taken_;
};

/// The client's own results directory, /results/<c> (docs/protocol.md §6 T5 "Waiting"),
/// followed by its change log while the client waits for results there: a read of the log
/// names the results written since the last one, mostly with their data, so a wait costs no
/// `exists` and, mostly, no read of its own. The directory is listed when the log does not
/// account for every change (protocol::log_follower). The view knows the names in the
/// directory and the names waited for; it delivers each waited name once.
///
/// A wait may want a result's name only, not its data: a wait on a task of a bundle learns
/// so that the bundle's result is there, and the waits on its tasks then share one read of
/// it (task_client::wait_bundled). A name only such waits wait for is delivered `named`: no
/// copy of its data, nothing to read (a bundle's result may hold 512 KiB, and each of its
/// 1,000 tasks waits for it).
class results_inbox {
public:
    /// Results for the waits: with their data, by name (read them), or there (named only).
    struct delivery {
        std::vector<std::pair<std::string, std::string>> with_data;  ///< name, data
        std::vector<std::string> to_read;
        std::vector<std::string> named;  ///< waited for by name only: there, not to be read
        [[nodiscard]] bool empty() const noexcept {
            return with_data.empty() && to_read.empty() && named.empty();
        }
    };

    /// A wait on the result named `name` begins; `name_only`: it wants to know the result is
    /// there, not its data. True when the view knows it is there already: the caller reads
    /// it itself, if it wants it (it is not delivered).
    bool wait(const std::string& name, bool name_only = false);
    /// A wait ended without a delivery (cancelled, or it read the result itself); `name_only`
    /// as it began.
    void unwait(const std::string& name, bool name_only = false);
    /// Waits not yet delivered.
    [[nodiscard]] std::size_t waiting() const noexcept { return waits_; }

    /// The directory's data was read at `s`: what it delivers, or nullopt when the directory
    /// must be listed (then listed()).
    std::optional<delivery> log_read(protocol::dir_stat s, std::string_view data);
    /// The directory was listed at `s`, right after log_read() asked for it: the waited
    /// names it holds are delivered, with the data of the log that read carried for them.
    delivery listed(const std::vector<std::string>& names, protocol::dir_stat s);
    /// Our delete of `name` was answered: it is gone, and the change log's count knows why.
    void removed(const std::string& name);
    /// The directory is missing (not made yet, or deleted): list it once it is there.
    void gone();
    [[nodiscard]] bool following() const noexcept { return follower_.following(); }
    /// Listings of the directory so far (each listed() call): after the first, each one a
    /// read that did not account for every change.
    [[nodiscard]] std::uint64_t listings() const noexcept { return listings_; }

private:
    /// Takes the waits on `name` into `out` (with `data`, or to read).
    void deliver(const std::string& name, const std::optional<std::string>& data, delivery& out);

    protocol::log_follower follower_;
    std::set<std::string> present_;  // the names in the directory, as far as we know
    struct waits_on {
        int all = 0;   // waits on the name, not yet delivered
        int data = 0;  // of them, those that want its data
    };
    std::map<std::string, waits_on> waited_;  // by name
    std::size_t waits_ = 0;
    std::map<std::string, std::string> last_log_;  // the data of the log read that failed
    std::uint64_t listings_ = 0;
};

}  // namespace zkd::roles
