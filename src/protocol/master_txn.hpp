// SPDX-License-Identifier: MIT
#pragma once

// The master's transactions (docs/protocol.md §6: T2, T6, T7, T8 and the failed results of
// §8), each as a builder of its ops and a reader of its per-op results into a named outcome.
// Ops are described here in protocol's own terms; the I/O layer turns them into ZooKeeper
// multi ops and puts the fencing check(/epoch, E) in front of every one (so the results read
// here are the group's own, without the prefix). Nothing here performs I/O.

#include "protocol/layout.hpp"
#include "protocol/task.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace zkd::protocol {

/// One op of a transaction, as ZooKeeper's multi knows them. Version -1: any version.
struct txn_op {
    enum class kind { create, remove, set, check };
    kind what = kind::check;
    std::string path;
    std::string data;           ///< create, set
    std::int32_t version = -1;  ///< remove, set, check
    bool ephemeral = false;     ///< create: ephemeral, else persistent

    static txn_op create(std::string path, std::string data, bool ephemeral = false);
    static txn_op remove(std::string path, std::int32_t version = -1);
    static txn_op set(std::string path, std::string data, std::int32_t version = -1);
    static txn_op check(std::string path, std::int32_t version = -1);
    friend bool operator==(const txn_op&, const txn_op&) = default;
};

/// What one op of an answered transaction came to, as far as the readers care.
enum class op_code {
    ok,
    no_node,
    node_exists,
    not_empty,
    bad_version,
    not_run,  ///< another op of the transaction failed
    other,
};

/// The answer to a transaction: its per-op codes (empty when the server's answer was lost:
/// the outcome is unknown) and whether it failed as a whole.
struct txn_answer {
    bool failed = false;
    std::vector<op_code> per_op;
};

/// A failed result the master writes (state failed, cancelled or lost), with the attempt the
/// task was on. With `task_json`, the task's node as read (empty: not read), the result
/// also carries what the node says of earlier tries (§4.3): their `try` and `errors`, and for
/// a bundle, its tasks that an earlier try finished for good (`finished`): those keep their
/// entries, the others get this state and error, and the top level sums them up (§5.1); the
/// tasks of it published early (`published`, §6 T4e) are listed in the result's `published`.
std::string master_result(
    std::string_view tid,
    std::string_view code,
    std::string message,
    int attempt,
    task_state state,
    std::int64_t finished_ms,
    std::string_view task_json = {}
);

// --- T2 assign -------------------------------------------------------------------------------

/// check(/workers/<w>), delete(/pending/<shard>/<tid>), create(/assign/<w>/<tid>, the
/// pending node's `data` as read, stamped with the assignment: its `attempt`, `epoch`,
/// `assigned_ms` and `worker`; the task's members, args included, go as they were read). An
/// error when `data` is not a JSON object (stamp()); data that decoded never is.
codec_result<std::vector<txn_op>> assign_ops(
    std::uint32_t shard,
    std::string_view tid,
    std::string_view worker,
    std::string_view data,
    int attempt,
    std::int64_t epoch,
    std::int64_t now_ms
);

enum class assign_outcome {
    committed,
    task_gone,        ///< delete no_node or create node_exists: cancelled, taken, or ours already
    worker_dir_gone,  ///< create no_node: the worker's directory was deleted
    worker_left,      ///< the worker check failed
    foreign_below,    ///< delete not_empty: someone wrote below the pending node
    unknown,          ///< no per-op results (connection lost)
    failed,           ///< any other failure
};
assign_outcome read_assign(const txn_answer& a) noexcept;

// --- failing a pending task (§8 malformed, unknown type, cannot be assigned) ----------------

/// delete(/pending/<shard>/<tid>), create(result, failed with `code`). `data`, the pending
/// node as read (empty: not read, or not the task's), makes the result master_result()'s with
/// it: a requeued or released bundle's finished tasks keep their entries and `published`.
std::vector<txn_op> reject_ops(
    const layout& l,
    std::uint32_t shard,
    std::string_view tid,
    std::string_view code,
    std::string why,
    int attempt,
    std::int64_t now_ms,
    std::string_view data = {}
);

/// Outcomes of the transactions that delete a pending node first (reject, T7 on pending).
enum class pending_outcome {
    committed,
    task_gone,      ///< the pending node is gone (cancelled or taken)
    foreign_below,  ///< someone wrote below the pending node
    failed,         ///< anything else, the outcome unknown included
};
pending_outcome read_reject(const txn_answer& a) noexcept;

// --- T7 cancel ---------------------------------------------------------------------------------

/// Pending: delete(/pending/<shard>/<tid>), create(result, cancelled), delete(/cancel/<tid>).
/// `data`, the pending node as read (empty: not read), makes the result master_result()'s
/// with it, as for reject_ops().
std::vector<txn_op> cancel_pending_ops(
    const layout& l,
    std::uint32_t shard,
    std::string_view tid,
    int attempt,
    std::int64_t now_ms,
    std::string_view data = {}
);
/// Assigned to `worker`: check(assignment), create(marker), delete(/cancel/<tid>).
std::vector<txn_op> cancel_assigned_ops(std::string_view worker, std::string_view tid);
/// One task of a bundle, `<bundle>.<k>` (§6 T7 "One task of a bundle"), whose bundle is
/// assigned to `worker`: check(the bundle's assignment), create(the task's marker,
/// /assign/<worker>/<bundle>.<k>.cancel), delete(/cancel/<bundle>.<k>).
std::vector<txn_op> cancel_entry_ops(
    std::string_view worker, std::string_view bundle, std::string_view entry
);
/// Delayed (§6 "Delayed tasks and retries"): delete(/delayed/<s>/<tid>), create(result,
/// cancelled, with the task's `attempt` when known: 0 leaves it out), delete(/cancel/<tid>).
/// `data`, the delayed node as read (empty: not read), makes the result master_result()'s
/// with it: the retry's `try` and `errors`, and a bundle's finished tasks' own entries.
std::vector<txn_op> cancel_delayed_ops(
    const layout& l,
    std::string_view tid,
    int attempt,
    std::int64_t now_ms,
    std::string_view data = {}
);
/// Finished or unknown: delete(/cancel/<tid>).
std::vector<txn_op> drop_cancel_ops(std::string_view tid);
/// For any of the three: task_gone when the first op found no node (the pending node or the
/// assignment moved on: assigned, finished, requeued; or the request is gone), foreign_below
/// when the pending node has children.
pending_outcome read_cancel(const txn_answer& a) noexcept;

// --- T10 release a delayed task ----------------------------------------------------------------

/// delete(/delayed/<s>/<tid>), create(/pending/<s>/<tid>, `data`: the delayed node's bytes).
std::vector<txn_op> release_ops(const layout& l, std::string_view tid, std::string data);
/// delete(/delayed/<s>/<tid>) alone: its pending node exists already.
std::vector<txn_op> drop_delayed_ops(const layout& l, std::string_view tid);

enum class release_outcome {
    committed,
    task_gone,       ///< the delayed node is gone (cancelled, or released by an earlier try)
    foreign_below,   ///< someone wrote below the delayed node
    pending_exists,  ///< a pending node of that name exists: drop the delayed one alone
    failed,          ///< anything else, the outcome unknown included
};
release_outcome read_release(const txn_answer& a) noexcept;

// --- T6 a departed worker's assignment --------------------------------------------------------

enum class departed_kind {
    requeue,    ///< back to pending with attempt + 1
    lost,       ///< attempts exhausted: a "lost" result
    cancel,     ///< a cancel marker was there: a "cancelled" result
    malformed,  ///< its data is not a task: a failed result
};

struct departed_plan {
    departed_kind kind = departed_kind::requeue;
    int attempt = 0;  ///< the attempt it was on (0 when malformed)
    std::vector<txn_op> ops;
};

/// What becomes of /assign/<worker>/<tid>, holding `data`, now that its worker is gone (or
/// stalled: then at the `version` read, so that a running mark written meanwhile keeps it
/// there): delete it (and its marker when `marked`), then pending again, lost, cancelled or
/// failed (a result as master_result() writes it with `data`: a bundle's tasks finished by
/// earlier tries keep their entries). Pending again, the node is `data` stamped with `attempt` + 1
/// and nothing else of the assignment or the progress.
departed_plan departed_ops(
    const layout& l,
    std::string_view worker,
    std::string_view tid,
    std::string_view data,
    bool marked,
    std::int64_t now_ms,
    std::int32_t version = -1
);

/// A bundle requeued by T6 whose tasks `entries` (`<bundle>.<k>`) had their own cancel
/// markers on `worker` (§6 T6): per task, delete(its marker) and create(/cancel/<bundle>.<k>,
/// a request made at `now_ms`), so that each is cancelled again on the bundle's next worker.
/// Appended to departed_ops()'s requeue; a task whose request exists already (`asked`) gets
/// only the delete.
std::vector<txn_op> requeue_entry_cancels_ops(
    std::string_view worker,
    const std::vector<std::string>& entries,
    const std::vector<bool>& asked,
    std::int64_t now_ms
);

enum class departed_outcome {
    committed,
    foreign_below,  ///< someone wrote below the assignment
    failed,
};
departed_outcome read_departed(const txn_answer& a) noexcept;

/// The end of T6: delete(/assign/<worker>) once it is empty.
std::vector<txn_op> remove_departed_dir_ops(std::string_view worker);
/// A departed worker's cancel marker whose assignment is gone: delete it.
std::vector<txn_op> remove_marker_ops(std::string_view worker, std::string_view tid);

// --- T8 and /master ----------------------------------------------------------------------------

/// delete(<result path>).
std::vector<txn_op> collect_ops(std::string path);
/// delete(/results/<c>, version): a client's results directory found empty and old, at the
/// version its stat showed, so a directory whose change log moved since is kept (bad_version).
std::vector<txn_op> collect_dir_ops(std::string path, std::int32_t version);
/// Writes /master again: delete the foreign node (when `replaced`, at `version`), create ours.
std::vector<txn_op> master_node_ops(const member_info& node, bool replaced, std::int32_t version);
/// set(/master, node): the throughput figure.
std::vector<txn_op> master_report_ops(const member_info& node);
/// True when /master's `data` still says what clients and operators rely on of `node`: its
/// id, epoch, bound on pending tasks, whether clients place directly, the suspect workers
/// and the features (the throughput, a report, may lag). False for garbage or another's words,
/// which the master then writes over.
bool master_node_says(const member_info& node, std::string_view data);

}  // namespace zkd::protocol
