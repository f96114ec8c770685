// SPDX-License-Identifier: MIT
#include "protocol/queue_bound.hpp"

#include <algorithm>
#include <limits>

namespace zkd::protocol {

std::int64_t published_bound(std::uint64_t max_pending) noexcept {
    constexpr auto most = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    return static_cast<std::int64_t>(std::min(max_pending, most));
}

bool fits(std::uint64_t pending, std::uint64_t adding, std::uint64_t bound) noexcept {
    // (Written so that no sum can wrap.)
    return bound == 0 || (adding <= bound && pending <= bound - adding);
}

bool pending_gauge::stale(clock::time_point now) const noexcept {
    return !read_at_ || now - *read_at_ >= max_age_;
}

bool pending_gauge::wants_counts() const noexcept {
    return !known_ || bound_ != 0;
}

void pending_gauge::read(
    std::optional<std::uint64_t> bound, std::optional<std::uint64_t> pending, clock::time_point now
) noexcept {
    if (bound) {
        known_ = true;
        bound_ = *bound;
    }
    if (pending) {
        pending_ = *pending;
        read_at_ = now;
    } else if (known_ && bound_ == 0) {
        read_at_ = now;  // no bound: nothing to count
    } else {
        read_at_.reset();  // a bound, but no count to hold against it yet
    }
}

queue_check pending_gauge::admit(std::uint64_t adding) noexcept {
    queue_check c{fits(pending_, adding, bound_), pending_, adding, bound_};
    if (c.admitted) {
        pending_ += adding;
    }
    return c;
}

}  // namespace zkd::protocol
