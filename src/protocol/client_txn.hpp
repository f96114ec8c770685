// SPDX-License-Identifier: MIT
#pragma once

// The client's transactions (docs/protocol.md §6: T1 submit with its receipt, T5 consume,
// for a task's own result and for a bundle's), each as a builder of its ops and a reader of
// its per-op results into a named outcome, in the terms of protocol/master_txn.hpp. Nothing
// here performs I/O.

#include "protocol/layout.hpp"
#include "protocol/master_txn.hpp"
#include "protocol/task.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zkd::protocol {

// --- T1 submit -------------------------------------------------------------------------------

/// create(/pending/<s>/<tid>, task, persistent): one task's (or bundle's) node.
txn_op submit_op(const layout& l, std::string_view tid, std::string data);

enum class submit_outcome {
    submitted,
    exists,   ///< node_exists: a create sent again found the node (the first got there)
    unknown,  ///< no per-op results: the outcome is unknown
    failed,   ///< any other failure
};
submit_outcome read_submit(const txn_answer& a) noexcept;

// --- T1 direct (a client places the task on a worker itself, §6 T1 "Direct placement") -------

/// check(/workers/<worker>, version) and create(/assign/<worker>/<tid>, data): the task goes
/// to the worker only while its node is as the client read it (alive, not draining since).
std::vector<txn_op> direct_submit_ops(
    std::string_view worker, std::int32_t worker_version, std::string_view tid, std::string data
);

/// The answer to direct_submit_ops' group (its two ops' results), as read_submit() reads a
/// pending create's (exists: a try sent again found the assignment there); nullopt when the
/// task was not placed and goes to pending instead (redirect): the worker's node changed or
/// went, or its directory is gone.
std::optional<submit_outcome> read_direct_submit(const txn_answer& a) noexcept;

/// A client's receipt name (T1): "<session, 16 hex digits>-<client's 8 hex digits>". One per
/// session and client, so receipts of different clients never collide.
std::string receipt_name(std::uint64_t session, std::string_view client_hex);

/// The receipt op a T1 transaction ends with: the sequence number `sequence` into the
/// receipt node `path`, created (ephemeral) unless the slot's node exists already.
txn_op receipt_op(std::string path, std::uint64_t sequence, bool slot_created);

enum class receipt_outcome {
    written,
    slot_exists,   ///< the create found a node: the slot's node exists after all
    slot_missing,  ///< the set found no node: someone deleted it (or the directory is gone)
    broken,        ///< any other failure: receipts cannot be written here
};
/// What the receipt op's own code says (when it is the op that failed the transaction).
receipt_outcome read_receipt(op_code c) noexcept;

/// Whether the receipt's data, read after the answer to transaction `sequence` was lost,
/// shows that transaction applied (a multi applies whole or not at all).
bool receipt_shows(std::string_view data, std::uint64_t sequence);

// --- T5 consume --------------------------------------------------------------------------------

/// delete(<result path>, any version).
txn_op consume_op(std::string path);

enum class consume_outcome {
    consumed,       ///< deleted, or no node (consumed by an earlier try, or by someone else)
    foreign_below,  ///< someone wrote children below the result
    unknown,        ///< no per-op results: the outcome is unknown
    failed,
};
consume_outcome read_consume(const txn_answer& a) noexcept;

/// Whether a bundle's result is wholly consumed (T5 deletes it): every one of its `size`
/// tasks not in `published` (their results are in nodes of their own, §6 T4e) is in
/// `consumed`. Both ascending.
bool bundle_wholly_consumed(
    const std::vector<std::size_t>& consumed,
    const std::vector<std::size_t>& published,
    std::size_t size
);

/// T5 for tasks of a bundle: mark `indices` consumed in the bundle's result `read` (at
/// `version`), or delete it once all `size` tasks are consumed (bundle_wholly_consumed()).
/// Indices in `read.published` are left alone (their own nodes are consumed instead): no
/// ops when the write would change nothing (every index taken or published) and the node
/// is not wholly consumed.
struct bundle_consume_plan {
    std::vector<txn_op> ops;             ///< set(path, marked, version) or delete(path, version)
    std::vector<std::size_t> marked;     ///< `consumed` as the write leaves it, ascending
    std::vector<std::size_t> taken;      ///< of `indices`, consumed by someone else first
    std::vector<std::size_t> published;  ///< of `indices`, published in their own nodes
    bool all = false;                    ///< the write deletes the node
};
bundle_consume_plan bundle_consume_ops(
    std::string path,
    const task_result& read,
    std::int32_t version,
    std::size_t size,
    const std::vector<std::size_t>& indices
);

enum class bundle_consume_outcome {
    committed,
    conflict,  ///< bad_version or no_node: someone else wrote (or deleted) it meanwhile
    unknown,   ///< no per-op results: the outcome is unknown
    failed,
};
bundle_consume_outcome read_bundle_consume(const txn_answer& a) noexcept;

// --- early results of a bundle's tasks (§6 T4e), as a reader takes them ---------------------

/// The path of task `index`'s own result node of the bundle `bundle` (§6 T4e): the task's id
/// `<bundle>.<index>` in the bundle's results directory.
std::string entry_result_path(const layout& l, std::string_view bundle, std::size_t index);

/// Whether task `index` of the bundle whose result is `whole` was published early: then its
/// result is its own node's, never `whole`'s entry.
bool is_published(const task_result& whole, std::size_t index) noexcept;

/// The tasks of the bundle's result `whole` that it delivers itself: neither published in
/// their own nodes nor consumed, ascending (all `size` of them when it holds no entries).
std::vector<std::size_t> deliverable_entries(const task_result& whole, std::size_t size);

/// Where the result of task `index` of a bundle is, from what a reader found: its own node
/// (`own`, decoded), the bundle's result (`whole`, decoded).
enum class entry_source {
    own,       ///< its own node: that is its result
    bundle,    ///< its entry of the bundle's result
    consumed,  ///< finished, and its result consumed (or published and its own node gone)
    none,      ///< no result yet: the bundle still runs (or never was)
};
entry_source locate_entry(bool own, const task_result* whole, std::size_t index) noexcept;

/// The result of task `index` (named `id`) of a bundle as a reader reports it, from its own
/// node `own` (decoded, when found) and the bundle's result `whole` (decoded, when found), by
/// locate_entry(): nullopt when it has none (consumed, or not finished yet); an error when
/// its entry cannot be read out of `whole`.
codec_result<std::optional<task_result>> entry_result(
    const std::optional<task_result>& own,
    const std::optional<task_result>& whole,
    std::size_t index,
    std::string id
);

}  // namespace zkd::protocol
