// SPDX-License-Identifier: MIT
#pragma once

#include "roles/batcher.hpp"
#include "roles/ids.hpp"
#include "roles/layout.hpp"
#include "roles/task.hpp"
#include "zkco/client.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/json/value.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace zkd::roles {

/// Why a task could not be submitted, or its result not read.
enum class client_errc {
    invalid_task = 1,  ///< bad type name, priority, attempts or timeout
    task_too_large,    ///< the encoded task is over max_task_bytes
    garbage_result,    ///< the result node does not hold a zkd result
};
const boost::system::error_category& client_category() noexcept;
zkco::error_code make_error_code(client_errc e) noexcept;

/// One task to submit.
struct task_request {
    std::string type;
    boost::json::value args;
    int priority = 5;
    std::chrono::milliseconds timeout{0};
    int max_attempts = 3;
};

/// A task's state as a client sees it (docs/protocol.md §6), with the worker holding it.
struct task_status {
    task_state state = task_state::unknown;
    std::string worker;  ///< assigned or running (or who published the result)
    std::optional<task_result> result;  ///< once finished, until consumed
};

/// The client role (docs/protocol.md §7 "Client") over one session: submits tasks (T1, many
/// per multi), waits for results by watch and consumes them (T5), answers status queries
/// and cancels (T7). Use on the session's executor; `zk` must outlive it.
class task_client {
public:
    task_client(zkco::client& zk, layout l);

    /// Submits the tasks and yields their ids, in order. Validated first: nothing is sent if
    /// one is invalid (client_errc). A retry after a lost connection is idempotent.
    boost::asio::awaitable<zkco::result<std::vector<std::string>>> submit(
        std::vector<task_request> tasks);

    /// Waits (by watch, never polling) until the task's result exists, reads it and deletes
    /// it: exactly one caller gets it. Errors: garbage_result, the session's errors.
    boost::asio::awaitable<zkco::result<task_result>> wait(std::string tid);

    /// Where the task is now: pending, assigned or running (with the worker), or finished
    /// with its result (read, not consumed); unknown when none of these exists (never
    /// submitted, or the result was consumed or collected). Errors: garbage_result, the
    /// session's errors.
    boost::asio::awaitable<zkco::result<task_status>> status(std::string tid);

    /// Completes once every write this client queued has been answered (the deletes that
    /// consume results are sent without waiting): call it before closing the session, or
    /// they may never reach the server. Completes at once when the session is gone.
    boost::asio::awaitable<void> flush();

    /// Asks the master to cancel the task (T7); the result says how it ended.
    boost::asio::awaitable<zkco::result<void>> cancel(std::string tid);

    [[nodiscard]] const task_id_generator& ids() const noexcept { return ids_; }

private:
    zkco::client& zk_;
    layout l_;
    task_id_generator ids_;
    multi_batcher batcher_;
};

}  // namespace zkd::roles

template <>
struct boost::system::is_error_code_enum<zkd::roles::client_errc> : std::true_type {};
