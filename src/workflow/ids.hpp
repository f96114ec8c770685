// SPDX-License-Identifier: MIT
// Workflow ids and the task ids of their steps (docs/protocol.md §11.2). A workflow is a
// client of its own: its id carries a client part (8 hex digits) and its creation time, and
// every task of it is an ordinary task id of that client, derived from the task's number in
// the workflow, so that a launch done again creates the same node. Pure: no I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zkd::workflow {

/// Length of a workflow id: "wf-<13 digits>-<8 hex>".
inline constexpr std::size_t workflow_id_length = 25;

/// What a workflow id says.
struct workflow_ref {
    std::int64_t created_ms = 0;  ///< 0 to 9999999999999
    std::uint32_t client = 0;     ///< the client part of its tasks' ids, /results/<client>

    friend bool operator==(const workflow_ref&, const workflow_ref&) = default;
};

/// "wf-<created_ms, 13 digits>-<client, 8 lowercase hex>"; created_ms is clamped to 13 digits.
std::string workflow_id(workflow_ref w);
/// Parses exactly the form workflow_id() writes; nullopt for anything else.
std::optional<workflow_ref> parse_workflow_id(std::string_view id) noexcept;
/// The client part as 8 lowercase hex digits (a task's "client", /results/<client>).
std::string client_hex(std::uint32_t client);

/// "/workflows": a child per workflow, named by its id.
std::string workflows_dir();

/// `dirs` (directories below /results, as roles::list_result_dirs lists them) without the
/// results directories of the workflows named `workflows` (the children of /workflows; a
/// name that is no workflow id names none). A workflow's results stay until the workflow
/// engine reaps the workflow (W4, the result retention after it ended), however long it
/// runs: the master's collection of old results (T8) looks only at the directories this
/// leaves (docs/protocol.md §11.4 "Results").
std::vector<std::string> without_workflow_results(
    std::vector<std::string> dirs, const std::vector<std::string>& workflows
);

/// Most task numbers a workflow may use: 2^36 (the time part moves by at most 4,096 ms).
inline constexpr std::uint64_t max_task_number = std::uint64_t{1} << 36;

/// The id of the workflow's task number `k` (< max_task_number), of priority 0..9:
/// `t<9-priority>-<created_ms + (k >> 24), 13 digits>-<client><k mod 2^24, 6 hex>`. A valid
/// task id (protocol/ids.hpp), the same for the same (workflow, k, priority): the steps of a
/// workflow sort after one another by number within a priority, a moment after its
/// creation.
std::string step_task_id(workflow_ref w, int priority, std::uint64_t k);
/// The task number `tid` has in workflow `w`; nullopt when it is no task id of it.
std::optional<std::uint64_t> task_number(workflow_ref w, std::string_view tid) noexcept;

}  // namespace zkd::workflow
