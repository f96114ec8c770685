// SPDX-License-Identifier: MIT
#pragma once

// The worker's transactions (docs/protocol.md §6: T3 mark running, T4 complete, T9 drain),
// each as a builder of its ops and a reader of its per-op results into a named outcome, in
// the terms of protocol/master_txn.hpp (txn_op, op_code, txn_answer). Nothing here performs
// I/O; roles/txn/zk_ops.hpp turns the ops into ZooKeeper multi ops.

#include "protocol/layout.hpp"
#include "protocol/master_txn.hpp"
#include "protocol/task.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zkd::protocol {

// --- T3 mark running ---------------------------------------------------------------------------

/// set(/assign/<w>/<tid>, `assigned` stamped with `run`, version): the running mark, or a
/// later progress report, at the version the worker last wrote. `assigned` is the node as
/// the worker read it (stamped with its decoded assignment, so that a direct placement's
/// first rewrite carries `"attempt":1`, §4): its task goes as read, never encoded again. An
/// error when `assigned` is not a JSON object (stamp()).
codec_result<txn_op> running_mark_op(
    std::string_view worker,
    std::string_view tid,
    std::string_view assigned,
    const progress& run,
    std::int32_t version
);

enum class mark_outcome {
    written,  ///< the node holds it now (at a new version)
    gave_up,  ///< any failure: the node is gone (requeued, cancelled) or someone rewrote it;
              ///< the worker writes nothing more to it
};
mark_outcome read_mark(bool failed) noexcept;

// --- T4 complete -------------------------------------------------------------------------------

/// How a try of T4 is fenced and what it carries.
struct publish_form {
    /// false: the assignment is gone while this worker is a member; the try checks
    /// /workers/<w> instead of deleting the assignment.
    bool fenced_by_assignment = true;
    bool with_marker = false;  ///< delete the cancel marker too (fenced form only)
    bool with_result = true;   ///< false: a result exists already; only the deletes go
    friend bool operator==(const publish_form&, const publish_form&) = default;
};

/// delete(/assign/<w>/<tid>) [delete(<tid>.cancel)] [create(result)], or, unfenced,
/// check(/workers/<w>) [create(result)]. `target`: where the create goes, the result's path
/// when empty; a retry's delayed node (§6 T4 "Retry") otherwise.
std::vector<txn_op> publish_ops(
    const layout& l,
    std::string_view worker,
    std::string_view tid,
    const std::string& result_data,
    const publish_form& form,
    std::string_view target = {}
);

enum class publish_outcome {
    committed,
    assignment_gone,  ///< fenced: the assignment's delete found no node
    foreign_below,    ///< fenced: someone wrote children below the assignment
    marker_gone,      ///< fenced: the cancel marker's delete found no node
    worker_gone,      ///< unfenced: /workers/<w> is gone (the master took the task back)
    result_exists,    ///< the result's create found one (ours from a lost answer, or another)
    unknown,          ///< no per-op results: the outcome is unknown
    failed,           ///< any other failure
};
publish_outcome read_publish(const txn_answer& a, const publish_form& form) noexcept;

// --- T4e early results -------------------------------------------------------------------------

/// One task of a bundle published early (§6 T4e): its id (`<bundle>.<k>`) and its result.
struct early_result {
    std::string tid;
    std::string data;
    friend bool operator==(const early_result&, const early_result&) = default;
};

/// The result of the task `id` of a bundle published on its own (§6 T4e), a plain result
/// (§5): `entry`'s state and value or error, the bundle's `attempt`, `worker` and
/// `started_ms`, the task's own `finished_ms`, and the `try` and `errors` of the bundle's
/// node `assignment_json` when it is a retry (§4.3).
std::string early_result_data(
    const task_result& entry,
    std::string_view id,
    int attempt,
    std::string_view worker,
    std::int64_t started_ms,
    std::int64_t finished_ms,
    std::string_view assignment_json
);

/// T4e: set(/assign/<w>/<bundle>, `data`, `version`), then create(/results/<c>/<b>.<k>,
/// result) per task, in order (the change log of /results/<c> is the batcher's). `data` is
/// the assignment with the tasks added to `finished` and `published` (with_published()),
/// stamped with the worker's progress members as it writes them (T3).
std::vector<txn_op> early_results_ops(
    const layout& l,
    std::string_view worker,
    std::string_view bundle,
    std::string data,
    std::int32_t version,
    const std::vector<early_result>& results
);

enum class early_outcome {
    committed,
    assignment_gone,     ///< the set found no node: T6 (or a stall) took the bundle back
    assignment_changed,  ///< bad_version: someone else rewrote the assignment
    result_exists,       ///< a task's create found its result (a try whose answer was lost)
    unknown,             ///< no per-op results: the outcome is unknown
    failed,              ///< any other failure
};
/// Reads the answer to early_results_ops() holding `results` creates.
early_outcome read_early(const txn_answer& a, std::size_t results) noexcept;

// --- T9 drain ----------------------------------------------------------------------------------

/// The cancel marker of one task of a bundle, `entry` (`<bundle>.<k>`), on worker `worker`
/// whose bundle left it unrun by this worker (§6 T7 "One task of a bundle"): delete(the
/// marker), create(/cancel/<entry>, a request made at `now_ms`), one multi, so that the task
/// is cancelled again wherever its bundle is next. Should the create find the request there
/// (node_exists), the delete goes alone.
std::vector<txn_op> return_entry_cancel_ops(
    std::string_view worker, std::string_view entry, std::int64_t now_ms
);

/// set(/workers/<w>, `me` with draining set).
txn_op drain_op(member_info me);

}  // namespace zkd::protocol
