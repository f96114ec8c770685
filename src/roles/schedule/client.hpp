// SPDX-License-Identifier: MIT
// The client side of schedules (docs/schedules.md, docs/protocol.md §12): add (S1), read,
// list, pause and resume (S2), remove (S3).
#pragma once

#include "schedule/spec.hpp"
#include "zkco/client.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/json/value.hpp>
#include <boost/system/result.hpp>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zkd::roles {

/// Why a schedule call failed, with a message for people.
struct schedule_error {
    enum class kind {
        invalid,    ///< refused at add: nothing was created
        exists,     ///< a schedule of that name exists
        not_found,  ///< no such schedule
        garbage,    ///< its node is not what §12 says
        zookeeper,  ///< ZooKeeper failed (the session ended, no access, ...)
    };
    kind what = kind::zookeeper;
    std::string message;
};

template <class T>
using schedule_result = boost::system::result<T, schedule_error>;

/// Found by ADL from boost::system::result::value(): throws std::runtime_error(message).
[[noreturn]] void throw_exception_from_error(
    const schedule_error& e, const boost::source_location& loc
);

/// Validates `request` (schedule::parse_request) and stores the schedule (S1), its first
/// due time after now. Yields it as stored.
boost::asio::awaitable<schedule_result<schedule::schedule>> add_schedule(
    zkco::client& zk, const boost::json::value& request
);

/// One schedule as stored.
boost::asio::awaitable<schedule_result<schedule::schedule>> read_schedule(
    zkco::client& zk, std::string_view name
);

/// Every schedule, by name; the nodes that are garbage in `garbage` (name, why).
struct schedule_listing {
    std::vector<schedule::schedule> schedules;
    std::vector<std::pair<std::string, std::string>> garbage;
};
boost::asio::awaitable<schedule_result<schedule_listing>> list_schedules(zkco::client& zk);

/// S2: pauses (or resumes) it; pausing a paused one changes nothing. Yields it as stored.
boost::asio::awaitable<schedule_result<schedule::schedule>> pause_schedule(
    zkco::client& zk, std::string_view name, bool paused
);

/// S3: removes it. Tasks it fired run on; their results stay until collected.
boost::asio::awaitable<schedule_result<void>> remove_schedule(
    zkco::client& zk, std::string_view name
);

}  // namespace zkd::roles
