// SPDX-License-Identifier: MIT
// One workflow's decisions (docs/protocol.md §11.4), with no I/O, behind one door:
// on(event, now). What the engine read (the state node at takeover or after a failed write,
// the results of its tasks as they land, a cancel request, the answer to its last write)
// goes in as events (wf_saw::*); out come actions (wf_do::*): write the state together with
// the step tasks to create (one fenced multi), create cancel requests for tasks that run,
// read everything again, reap the finished workflow; plus when to look again.
//
// Exactly once: a task is created only in the multi that records its launch in the state
// (at the state's version), and its id derives from (workflow, task number), so a launch
// done again after a failover (the write did not apply) creates the same nodes, and one that
// applied is never done again (the state read back says so). One write is in flight at a
// time; anything but its commit makes the fsm ask for everything to be read again.
#pragma once

#include "protocol/task.hpp"
#include "workflow/ids.hpp"
#include "workflow/spec.hpp"
#include "workflow/state.hpp"

#include <boost/json/value.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace zkd::workflow {

/// One step task to create: /pending/<shard of tid>/<tid> with `data` (an encoded task).
struct task_create {
    std::string tid;
    std::string data;

    friend bool operator==(const task_create&, const task_create&) = default;
};

/// A result, or why its node could not be read as one.
using read_result = protocol::codec_result<protocol::task_result>;

/// What the engine saw.
namespace wf_saw {
/// Everything read: at takeover, at a new workflow, and after a reload action.
struct loaded {
    std::optional<workflow_state> state;  ///< nullopt: no state node yet
    std::int32_t version = -1;            ///< the state node's data version (-1: none)
    bool cancel_requested = false;        ///< /workflows/<id>/cancel exists
    /// Result nodes of the workflow's results directory: their names and what they hold
    /// (results seen before, as wf_saw::result or in an earlier load, are kept: a result
    /// never changes).
    std::vector<std::pair<std::string, read_result>> results;
};
/// A result node of the workflow's directory was read (named by its change log or found).
struct result {
    std::string tid;
    read_result result;
};
/// /workflows/<id>/cancel appeared.
struct cancel {};
/// The time asked for (workflow_step::wake_at_ms) came.
struct tick {};
/// The answer to the last write action: committed, or anything else (not applied, or its
/// outcome unknown).
struct written {
    bool committed = false;
};
}  // namespace wf_saw

using workflow_event =
    std::variant<wf_saw::loaded, wf_saw::result, wf_saw::cancel, wf_saw::tick, wf_saw::written>;

/// What the engine is to do.
namespace wf_do {
/// One multi: check(/epoch, E), the state (create it when `version` is nullopt, else set
/// it at `version`), the creates, the pending shards' change logs.
struct write {
    std::optional<std::int32_t> version;
    std::string state;
    std::vector<task_create> creates;
};
/// Ask these tasks to stop: create /cancel/<tid> for each (node_exists is fine).
struct cancel_tasks {
    std::vector<std::string> tids;
};
/// Read the state, the results and the cancel request again, then send wf_saw::loaded.
struct reload {};
/// The workflow ended (its state says so): stop following its results.
struct finished {
    workflow_status status = workflow_status::succeeded;
};
/// The workflow ended longer than the retention period ago: delete its nodes and results.
struct reap {};
}  // namespace wf_do

using workflow_action =
    std::variant<wf_do::write, wf_do::cancel_tasks, wf_do::reload, wf_do::finished, wf_do::reap>;

struct workflow_step {
    std::vector<workflow_action> actions;
    std::optional<std::int64_t> wake_at_ms;  ///< call on() again then (with any event)
};

/// A step's outcome as the workflow sees it now.
struct step_view {
    step_status status = step_status::waiting;
    /// succeeded: its value (a map step: the array of its elements' values); failed with
    /// continue_on_failure: what its dependants get (null; a map step: the array, null for
    /// each element that failed).
    boost::json::value value;
    std::optional<protocol::task_error> error;  ///< failed: why (the first element's, for a map)
    std::uint64_t tasks = 0;                    ///< tasks launched
    std::uint64_t done = 0;                     ///< of them, with a result
};

/// When a workflow that ended in `s` is reaped (W4): `retention_ms` after its `finished_ms`;
/// nullopt while it runs, however long that is.
std::optional<std::int64_t> reap_at_ms(const workflow_state& s, std::int64_t retention_ms);

/// Whether a master taking over a workflow in state `s` needs its spec, its results and a
/// workflow_fsm: while it runs, and when it was cancelled with steps that ran then (their
/// tasks are asked again to stop). A workflow that succeeded or failed, or was cancelled
/// with no step running, needs only to be reaped at reap_at_ms.
bool needs_following(const workflow_state& s);

class workflow_fsm {
public:
    struct options {
        /// Most task creates one write holds (a multi holds at most 1,000 ops, with the
        /// epoch check, the state and a change log per pending shard).
        std::size_t max_creates_per_write = 900;
        /// Most bytes one write's multi may take on the wire, wherever its tasks go (to
        /// pending, or placed on workers): its launch_bound() (workflow/txn.hpp), which counts
        /// every path, every task's data with its placement stamp, the state, the checks and
        /// change logs, and each op's overhead. A write always holds at least one task.
        std::size_t max_write_bytes = 1'000'000;
        /// A finished workflow is reaped this long after it ended.
        std::int64_t retention_ms = 24LL * 3600 * 1000;
    };

    workflow_fsm(workflow_ref ref, std::shared_ptr<const workflow_spec> spec, options opts);
    workflow_fsm(workflow_ref ref, std::shared_ptr<const workflow_spec> spec)
        : workflow_fsm(ref, std::move(spec), options{}) {}

    /// The door: one event in, actions out.
    workflow_step on(const workflow_event& e, std::int64_t now_ms);

    /// True once a wf_saw::loaded came (and no reload is awaited).
    [[nodiscard]] bool loaded() const noexcept { return loaded_; }
    /// The state as last written (or read).
    [[nodiscard]] const workflow_state& state() const noexcept { return state_; }
    /// Each step as it stands, launches not yet written counting as waiting.
    [[nodiscard]] std::vector<step_view> view() const;
    /// The workflow's result: an object of its sink steps' values, by name.
    [[nodiscard]] boost::json::object result() const;
    /// The task id of step `step` (element `element` of a map step).
    [[nodiscard]] std::string task_id(std::size_t step, std::uint64_t element = 0) const;
    [[nodiscard]] const workflow_spec& spec() const noexcept { return *spec_; }

private:
    struct outcome {
        bool succeeded = false;
        boost::json::value value;
        protocol::task_error error;
    };
    struct plan {
        workflow_state next;
        std::vector<task_create> creates;
        std::vector<std::string> cancels;
    };

    workflow_step on_loaded(const wf_saw::loaded& e, std::int64_t now);
    void record(std::string_view tid, const read_result& r);
    workflow_step advance(std::int64_t now);
    /// What to write next from the state written, with at most `max_creates` creates
    /// (and max_creates_per_write); `launch` false: only the outcomes.
    plan compute(std::int64_t now, bool launch, std::size_t max_creates = SIZE_MAX) const;
    [[nodiscard]] const map_alloc* alloc_of(const workflow_state& s, std::size_t step) const;
    [[nodiscard]] boost::json::value value_of(const workflow_state& s, std::size_t step) const;
    /// The task of step `step` (element `element` of a map step, `item` its element), or
    /// why it cannot be built.
    [[nodiscard]] protocol::codec_result<std::string> build_task(
        const workflow_state& s,
        std::size_t step,
        std::uint64_t element,
        const boost::json::value* item,
        std::int64_t now
    ) const;
    [[nodiscard]] const outcome* outcome_of(std::uint64_t k) const;

    workflow_ref ref_;
    std::string id_;  ///< workflow_id(ref_)
    std::string client_hex_;
    std::shared_ptr<const workflow_spec> spec_;
    options opts_;
    std::vector<std::size_t> topo_;  ///< the steps in an order where each comes after its own

    bool loaded_ = false;
    workflow_state state_;
    std::int32_t version_ = -1;
    bool cancel_requested_ = false;
    bool finished_sent_ = false;
    /// The write in flight: the state it writes and the cancel requests to send once it
    /// committed.
    std::optional<plan> in_flight_;
    std::unordered_map<std::uint64_t, outcome> outcomes_;  ///< by task number
};

}  // namespace zkd::workflow
