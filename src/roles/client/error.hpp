// SPDX-License-Identifier: MIT
#pragma once

// Why a client could not submit a task or read a result: client_errc, one code per rule a
// task breaks (the message says the rule), and client_condition::invalid_task, which every
// broken rule matches (`ec == client_condition::invalid_task`).

#include "protocol/task.hpp"

#include <boost/system/error_category.hpp>
#include <boost/system/error_code.hpp>
#include <boost/system/error_condition.hpp>

#include <type_traits>

namespace zkd::roles {

enum class client_errc {
    invalid_type = 1,      ///< the type name is not 1 to 128 characters of [A-Za-z0-9_.:-]
    invalid_priority,      ///< the priority is not from 0 to 9
    invalid_timeout,       ///< the timeout is negative
    invalid_max_attempts,  ///< max_attempts is not from 1 to protocol::max_attempts_limit
    invalid_args,          ///< args nested too deep, or holding a number JSON cannot carry
    task_too_large,        ///< the encoded task is over max_task_bytes
    garbage_result,        ///< the result node does not hold a zkd result
    /// the cluster's bound on pending tasks (the master's max_pending) would be passed:
    /// nothing was submitted; task_client::last_queue_check() has the figures
    queue_full,
    bad_due_time,  ///< a due time before 1970 or after protocol::max_due_ms
    bad_retries,   ///< retries not from 0 to protocol::max_retries_limit
};

/// What several client_errc mean together.
enum class client_condition {
    invalid_task = 1,  ///< any of the invalid_* codes: the task breaks a rule of §3
};

const boost::system::error_category& client_category() noexcept;
const boost::system::error_category& client_condition_category() noexcept;
boost::system::error_code make_error_code(client_errc e) noexcept;
boost::system::error_condition make_error_condition(client_condition c) noexcept;

/// The code of the rule a task spec breaks, as protocol::validate() reported it.
client_errc broken_rule(const protocol::decode_error& e) noexcept;

}  // namespace zkd::roles

template <>
struct boost::system::is_error_code_enum<zkd::roles::client_errc> : std::true_type {};
template <>
struct boost::system::is_error_condition_enum<zkd::roles::client_condition> : std::true_type {};
