// SPDX-License-Identifier: MIT
// A workflow's nodes and its transactions (docs/protocol.md §11): W1 submit, W2 launch (the
// master's, fenced by its epoch), W3 cancel request, W4 reap; each as a builder of its ops,
// in the terms of protocol/master_txn.hpp. No I/O.
#pragma once

#include "protocol/layout.hpp"
#include "protocol/master_txn.hpp"
#include "workflow/ids.hpp"
#include "workflow/state.hpp"
#include "workflow/workflow_fsm.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zkd::workflow {

/// Most spec chunks one W1 transaction creates (3 x 256 KiB, under the 900,000 bytes a
/// transaction may hold).
inline constexpr std::size_t chunks_per_submit_txn = 3;

/// "/workflows/<id>": the header.
std::string workflow_node(std::string_view id);
/// "/workflows/<id>/spec-<iiii>"
std::string spec_chunk_node(std::string_view id, std::size_t i);
/// "/workflows/<id>/state"
std::string state_node(std::string_view id);
/// "/workflows/<id>/cancel"
std::string cancel_node(std::string_view id);
/// "/results/<client>": where the workflow's tasks' results land.
std::string results_node(workflow_ref w);

/// W1: the transactions that store a workflow, in order. The first creates the workflow's
/// results directory (node_exists there: its client part is taken, draw another id), the
/// workflow node and its first chunks; when the spec needs more than one transaction, the
/// workflow node is created empty and the last transaction sets its header (version 0).
/// `canonical` is encode_spec()'s text; `h` its header (chunks and spec_bytes are filled in).
std::vector<std::vector<protocol::txn_op>> submit_txns(
    workflow_ref w, workflow_header h, std::string_view canonical
);

/// A task W2 places on a worker itself (docs/protocol.md §11.4 "Direct placement"): the
/// worker, its node's version as read, and the task's data stamped with the assignment
/// (`worker`, `assigned_ms`; protocol::stamp).
struct direct_target {
    std::string worker;
    std::int32_t worker_version = 0;
    std::string data;

    friend bool operator==(const direct_target&, const direct_target&) = default;
};

/// The type of a launched task W2 may place on a worker itself: a plain task (not a bundle,
/// not delayed: no `due_ms`) whose data decodes; nullopt otherwise (it goes to pending).
std::optional<std::string> direct_type(std::string_view tid, std::string_view data);

/// W2: check(/epoch, epoch), the state (create, or set at the write's version), then per
/// task either its create in its pending shard or, when `placed[i]` holds a target,
/// check(/workers/<w>, version) (once per worker, before its first task) and
/// create(/assign/<w>/<tid>, stamped data); last one change log per pending shard and per
/// worker directory created in (§6), pending shards first, each group in order of first
/// use. `placed` is empty (every task to pending) or as long as the write's creates.
std::vector<protocol::txn_op> launch_ops(
    const protocol::layout& l,
    std::string_view id,
    std::int64_t epoch,
    const wf_do::write& w,
    const std::vector<std::optional<direct_target>>& placed = {}
);

/// What a W2 may take on the wire at most, as launch_bytes() counts it: under ZooKeeper's
/// jute.maxbuffer (1 MiB by default, 1,048,576 bytes), which a request must not exceed, with
/// room left for the request's own header and the namespace's chroot, which the client
/// library puts before every path.
inline constexpr std::size_t max_launch_bytes = 1'000'000;

/// Most workers one W2 places tasks on (the engine's view of the workers holds at most as
/// many: docs/protocol.md §11.4 "Direct placement").
inline constexpr std::size_t max_placement_workers = 16;

/// The bytes `ops` take on the wire, rounded up as zkco::estimated_size counts them: per op
/// its header and length prefixes (32), its path, its data, and a create's ACL (32).
std::size_t launch_bytes(const std::vector<protocol::txn_op>& ops);

/// The most one task create adds to a W2 (launch_ops), wherever it goes: its create at the
/// longer of its pending path and its path under a worker with the longest valid member id, its
/// data stamped with an assignment naming that worker, a change log of a pending shard of
/// its own and its entry in it by name (the data that change logs carry inline is counted
/// once per W2, in launch_fixed_bytes).
std::size_t launch_create_bytes(std::string_view tid, std::size_t data_bytes);

/// What a W2 of workflow `id` carries besides its creates, at most: the epoch's check, the
/// state of `state_bytes` (created or set), a worker's check and its directory's change log
/// for each of max_placement_workers workers, and the children's data the change logs
/// carry inline (protocol::max_log_inline_bytes).
std::size_t launch_fixed_bytes(std::string_view id, std::size_t state_bytes);

/// An upper bound of launch_bytes(launch_ops(l, id, epoch, w, placed)) for a write `w` of
/// `state` and `creates`, for any `l`, `epoch` and `placed` (each worker's id at most
/// as long as a valid member id, protocol::is_valid_member_id, at most max_placement_workers of
/// them): what workflow_fsm keeps under its options' max_write_bytes.
std::size_t launch_bound(
    std::string_view id, std::string_view state, const std::vector<task_create>& creates
);

/// Why a W2 failed, from the op that failed and its code.
enum class launch_failure {
    deposed,      ///< the epoch's check: another master acts
    worker_gone,  ///< a worker's check (it left, or changed: draining), or its directory is
                  ///< gone: send the write again with every task to pending
    other,        ///< anything else (a lost answer included): read the workflow again
};
launch_failure read_launch_failure(
    const std::vector<protocol::txn_op>& ops,
    std::optional<std::size_t> failed_op,
    protocol::op_code code
);

/// W3: create(/workflows/<id>/cancel, "").
protocol::txn_op cancel_request_op(std::string_view id);

/// T7 for each task of wf_do::cancel_tasks: create(/cancel/<tid>, request) (node_exists:
/// asked already).
protocol::txn_op cancel_task_op(std::string_view tid, std::int64_t now_ms);

}  // namespace zkd::workflow
