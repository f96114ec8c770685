// SPDX-License-Identifier: MIT
// Retrying after "outcome unknown" (condition::retryable): wait for the connection, then try
// again. Used by every role and by applications over the client API.
#pragma once

#include "zkco/client.hpp"
#include "zkco/deadline.hpp"

#include <boost/asio/awaitable.hpp>

#include <string>

namespace zkd::zkco {

/// Waits until `zk` is connected. False once its session is gone for good.
boost::asio::awaitable<bool> wait_connected(client& zk);

/// After an error: true when it left the outcome unknown (condition::retryable) and the
/// session is connected again, i.e. when retrying makes sense. Use it as the whole condition
/// (GCC 12 miscompiles a co_await in the right operand of && or ||).
boost::asio::awaitable<bool> reconnected_after(client& zk, error_code ec);

/// After a read found no `path`: waits until it may exist (it exists already, or the watch
/// set on its creation fired), riding out a lost connection. False when the session ended,
/// the watch was dropped or the wait was cancelled (nothing to read again); true: read `path`
/// again.
boost::asio::awaitable<bool> wait_created(client& zk, std::string path);

/// Runs `op` (an awaitable yielding a result) until it gives an answer other than "outcome
/// unknown", waiting for the connection between tries; errc::session_expired once the
/// session is gone. Only for operations that are safe to repeat. Once the calling coroutine
/// is cancelled it tries no more: the unknown outcome (operation_aborted, say) is the answer.
template <class Op>
auto retry_unknown(client& zk, Op op) -> decltype(op()) {
    for (;;) {
        auto r = co_await op();
        if (r || r.error() != condition::retryable) {
            co_return r;
        }
        if (co_await cancelled()) {
            co_return r;
        }
        const bool connected = co_await wait_connected(zk);
        if (!connected) {
            co_return error_code(errc::session_expired);
        }
    }
}

}  // namespace zkd::zkco
