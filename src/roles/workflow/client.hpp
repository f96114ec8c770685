// SPDX-License-Identifier: MIT
// The client side of workflows (docs/workflows.md, docs/protocol.md §11): submit (W1), read
// a workflow's status and result, wait for its end, cancel (W3), list.
#pragma once

#include "workflow/state.hpp"
#include "zkco/client.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <boost/system/result.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zkd::roles {

/// Why a workflow call failed, with a message for people.
struct workflow_error {
    enum class kind {
        invalid_spec,   ///< refused at submit: nothing was created
        unserved_type,  ///< a step's type no live worker serves: nothing was created
        not_found,      ///< no such workflow (never submitted, or reaped)
        garbage,        ///< its nodes are not what §11 says
        timeout,        ///< wait_workflow's time ran out
        zookeeper,      ///< ZooKeeper failed (the session ended, no access, ...)
    };
    kind what = kind::zookeeper;
    std::string message;
};

template <class T>
using workflow_result = boost::system::result<T, workflow_error>;

/// Found by ADL from boost::system::result::value(): throws std::runtime_error(message).
[[noreturn]] void throw_exception_from_error(
    const workflow_error& e, const boost::source_location& loc
);

struct workflow_submit_options {
    /// Submit even when a step's type is served by no live worker (while workers exist).
    bool allow_unserved = false;
    /// The submitting client's own id, recorded in the header for display.
    std::string submitted_by;
};

/// Validates the spec `text` (parse_spec) and the types of its steps, then stores it (W1).
/// Yields the workflow id.
boost::asio::awaitable<workflow_result<std::string>> submit_workflow(
    zkco::client& zk, std::string_view text, workflow_submit_options opts = {}
);

/// One step as a status reader sees it.
struct workflow_step_snapshot {
    std::string name;
    std::string type;
    workflow::step_status status = workflow::step_status::waiting;
    std::uint64_t tasks = 0;  ///< tasks launched (a map step: its elements so far)
    std::uint64_t done = 0;   ///< of them, with a result
    std::optional<protocol::task_error> error;
    boost::json::value value;           ///< succeeded (and failed map steps: per element)
    std::vector<std::string> task_ids;  ///< its tasks' ids (at most 16 listed)
};

struct workflow_snapshot {
    std::string id;
    std::string name;
    /// running until it ends; also while no master has adopted it yet (adopted false).
    workflow::workflow_status status = workflow::workflow_status::running;
    bool adopted = false;  ///< a master wrote its state
    bool cancel_requested = false;
    std::int64_t created_ms = 0;
    std::int64_t finished_ms = 0;
    std::vector<workflow_step_snapshot> steps;
    boost::json::object result;  ///< its sink steps' values, by name
};

/// Reads the workflow `id` whole: spec, state, results.
boost::asio::awaitable<workflow_result<workflow_snapshot>> read_workflow(
    zkco::client& zk, std::string_view id
);
/// Waits until the workflow's state says it ended (following its state node), then reads
/// it whole. `timeout` 0: no limit.
boost::asio::awaitable<workflow_result<workflow_snapshot>> wait_workflow(
    zkco::client& zk, std::string_view id, std::chrono::milliseconds timeout = {}
);
/// W3: asks the master to cancel it (asking twice is fine).
boost::asio::awaitable<workflow_result<void>> cancel_workflow(
    zkco::client& zk, std::string_view id
);

struct workflow_summary {
    std::string id;
    std::string name;
    std::size_t steps = 0;
    std::string status;  ///< running, succeeded, failed, cancelled; "submitting" while its
                         ///< header is not written; "garbage"
    std::int64_t created_ms = 0;
};
/// Every workflow of the namespace, oldest first.
boost::asio::awaitable<workflow_result<std::vector<workflow_summary>>> list_workflows(
    zkco::client& zk
);

boost::json::object to_json(const workflow_snapshot& s);
boost::json::object to_json(const workflow_summary& s);

}  // namespace zkd::roles
