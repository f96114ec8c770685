// SPDX-License-Identifier: MIT
#pragma once

#include <boost/asio/steady_timer.hpp>

#include <utility>
#include <vector>

namespace zkd::roles::detail {

/// Where answers wait for a loop that runs on one executor (zkco's core keeps its replies the
/// same way): a completion handler push()es its answer and touches nothing else, and the loop
/// take()s everything queued at once. Shared (std::shared_ptr) by the loop's owner and the
/// handlers it gave out, on that executor only. The owner closes the box when it ends: what
/// comes later, such as the answer to a transaction still in flight, lands in a closed box
/// and is dropped.
template <class Event>
class inbox {
public:
    /// Each first push after a take() cancels `wake`, the timer the loop waits on; `wake`
    /// must live until close().
    explicit inbox(boost::asio::steady_timer& wake) noexcept : wake_(&wake) {}

    /// Queues `e` (one of Event's alternatives, made in place: no Event is moved).
    template <class E>
    void push(E&& e) {
        if (wake_ == nullptr) {
            return;  // closed
        }
        events_.emplace_back(std::forward<E>(e));
        if (!std::exchange(woken_, true)) {
            wake_->cancel();
        }
    }

    [[nodiscard]] bool empty() const noexcept { return events_.empty(); }

    /// Everything pushed since the last take, in the order it came.
    [[nodiscard]] std::vector<Event> take() {
        woken_ = false;
        return std::exchange(events_, {});
    }

    /// From now on pushes are dropped; what is queued is dropped too.
    void close() noexcept {
        wake_ = nullptr;
        events_.clear();
    }

private:
    boost::asio::steady_timer* wake_;
    std::vector<Event> events_;
    bool woken_ = false;  // the wake timer was cancelled since the last take
};

}  // namespace zkd::roles::detail
