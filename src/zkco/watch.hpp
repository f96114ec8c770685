// SPDX-License-Identifier: MIT
#pragma once

#include "zkco/error.hpp"
#include "zkco/types.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <memory>

namespace zkd::zkco {

namespace detail {
class core;
}

/// A one-shot ZooKeeper watch, armed by one of the client's watch_* reads.
///
/// The event is kept until awaited, so nothing is lost between the read and the wait.
/// Session events never complete it: it survives reconnects (the server replays what
/// happened meanwhile). Session expiry or closing the client completes it with
/// session_expired or closing. Destroying it only stops listening; the server-side watch
/// stays until it fires. Use it only on its client's executor.
class watch {
public:
    watch() noexcept = default;
    watch(watch&& other) noexcept;
    watch& operator=(watch&& other) noexcept;
    watch(const watch&) = delete;
    watch& operator=(const watch&) = delete;
    ~watch();

    /// False for a default-constructed or moved-from watch.
    bool valid() const noexcept { return core_ != nullptr; }

    /// Waits for the event. Signature: void(error_code, watch_event).
    /// Errors: session_expired, closing; no_watcher once the event was already taken;
    /// already_started if another wait is pending.
    /// Cancellation: terminal and partial abandon the wait; the watch stays armed.
    template <class CompletionToken>
    auto async_wait(CompletionToken&& token) {
        return boost::asio::async_initiate<CompletionToken, void(error_code, watch_event)>(
            [this](auto handler) { start_wait(std::move(handler)); }, token
        );
    }

    /// async_wait as a coroutine; the watch must outlive the call. A coroutine cancelled
    /// before the call gets operation_aborted at once (a cancellation emitted before a wait
    /// begins would never reach it).
    boost::asio::awaitable<result<watch_event>> changed();

private:
    friend class detail::core;
    watch(std::shared_ptr<detail::core> core, std::uint64_t id) noexcept;
    void start_wait(boost::asio::any_completion_handler<void(error_code, watch_event)> handler);
    void release() noexcept;

    std::shared_ptr<detail::core> core_;
    std::uint64_t id_ = 0;
};

/// The result of a watching read: the value read and the watch armed by it.
template <class T>
struct watched {
    T value;
    zkco::watch watch;
};

}  // namespace zkd::zkco
