// SPDX-License-Identifier: MIT
// When the workflow engine reads the workers' view again (docs/protocol.md §11.4 "Direct
// placement"): one read at a time, none while the last one is recent. Pure: no I/O.
#pragma once

#include <chrono>
#include <optional>
#include <utility>

namespace zkd::roles::detail {

class read_gate {
public:
    using clock = std::chrono::steady_clock;

    /// A read in flight. However it ends (done() called, or its coroutine cancelled, thrown
    /// through or destroyed without), its destructor lets the next read start; a read that
    /// did not call done() counts as not made, so the next placement reads again at once.
    class ticket {
    public:
        explicit ticket(read_gate& g) : gate_(&g) {}
        ~ticket() {
            if (gate_ != nullptr) {
                gate_->reading_ = false;
                if (!done_) {
                    gate_->read_at_.reset();
                }
            }
        }
        ticket(ticket&& o) noexcept : gate_(std::exchange(o.gate_, nullptr)), done_(o.done_) {}
        ticket(const ticket&) = delete;
        ticket& operator=(const ticket&) = delete;
        ticket& operator=(ticket&&) = delete;

        /// The read ended (its outcome, a view or none, is what the placer holds).
        void done() noexcept { done_ = true; }

    private:
        read_gate* gate_;
        bool done_ = false;
    };

    explicit read_gate(std::chrono::milliseconds every) : every_(every) {}

    /// A ticket when a read is to start at `now`: none in flight, and the last one is older
    /// than `every` (or forgotten); nullopt otherwise.
    std::optional<ticket> begin(clock::time_point now) {
        if (reading_ || (read_at_ && now - *read_at_ < every_)) {
            return std::nullopt;
        }
        reading_ = true;
        read_at_ = now;
        return std::optional<ticket>(std::in_place, *this);
    }

    /// Read again before the next placement (a W2 found a worker gone or changed).
    void stale() noexcept { read_at_.reset(); }

    /// True while a read is in flight.
    [[nodiscard]] bool reading() const noexcept { return reading_; }

private:
    std::chrono::milliseconds every_;
    std::optional<clock::time_point> read_at_;
    bool reading_ = false;
};

}  // namespace zkd::roles::detail
