// SPDX-License-Identifier: MIT
// Retrying after "outcome unknown" (condition::retryable): wait for the connection, then try
// again. Used by every role and by applications over the client API.
#pragma once

#include "zkco/client.hpp"

#include <boost/asio/awaitable.hpp>

namespace zkd::zkco {

/// Waits until `zk` is connected. False once its session is gone for good.
boost::asio::awaitable<bool> wait_connected(client& zk);

/// After an error: true when it left the outcome unknown (condition::retryable) and the
/// session is connected again, i.e. when retrying makes sense. Use it as the whole condition
/// (GCC 12 miscompiles a co_await in the right operand of && or ||).
boost::asio::awaitable<bool> reconnected_after(client& zk, error_code ec);

}  // namespace zkd::zkco
