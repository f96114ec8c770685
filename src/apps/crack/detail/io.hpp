// SPDX-License-Identifier: MIT
// Internal to run_crack: what opening and following a job share.
#pragma once

#include "apps/crack/job.hpp"
#include "zkco/client.hpp"

#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace zkd::crack::detail {

/// The job as this participant holds it: the node's data at `version`.
struct held_job {
    crack_job job;
    std::int32_t version = -1;

    /// Takes `doc` if it is newer than what is held; true if it did.
    bool adopt(crack_job doc, std::int32_t v);
};

/// True once the calling coroutine got a cancellation it lets through. Code that turned
/// throw_if_cancelled off checks it before starting what a cancellation emitted earlier
/// would not interrupt.
boost::asio::awaitable<bool> cancelled();

/// After an error: true when retrying makes sense (the outcome was unknown, the session is
/// back) and the calling coroutine was not cancelled.
boost::asio::awaitable<bool> retry_after(zkco::client& zk, zkco::error_code ec);

/// The job node at `path`, or nullopt if it does not exist; read again after a connection
/// loss the session survives.
boost::asio::awaitable<zkco::result<std::optional<zkco::node>>> read_job(
    zkco::client& zk, std::string path
);

/// The job node at `path`, decoded: job_vanished if it is gone, garbage_job if it does not
/// hold a job.
boost::asio::awaitable<zkco::result<held_job>> reread_job(zkco::client& zk, std::string path);

}  // namespace zkd::crack::detail
