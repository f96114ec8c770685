// SPDX-License-Identifier: MIT
// The bound on pending tasks (docs/protocol.md §7 "Client"): what a client knows of it and
// whether a submit fits under it. Pure, no I/O: task_client reads /master and the pending
// shards' stats and feeds them in.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

namespace zkd::protocol {

/// The default of `zkd run --max-pending`: the backlog the embedded ZooKeeper holds
/// (bench/backlog.sh).
inline constexpr std::uint64_t default_max_pending = 1'000'000;

/// The bound as /master's "max_pending" holds it (a JSON int64): `max_pending`, at most
/// INT64_MAX (which bounds nothing real either).
std::int64_t published_bound(std::uint64_t max_pending) noexcept;

/// What a submit was decided on.
struct queue_check {
    bool admitted = true;
    std::uint64_t pending = 0;  ///< pending task nodes as the client knew them
    std::uint64_t adding = 0;   ///< the nodes the submit would create
    std::uint64_t bound = 0;    ///< the master's max_pending; 0: no bound
};

/// True when `adding` more nodes keep `pending` within `bound` (0: no bound).
bool fits(std::uint64_t pending, std::uint64_t adding, std::uint64_t bound) noexcept;

/// A client's knowledge of the bound and of the pending count: the last read (at most
/// `max_age` old when a submit relies on it), plus the nodes this client submitted since,
/// so that one busy client does not overshoot by a read's worth of its own submits. Other
/// clients' submits since the read are not seen: the bound is approximate.
class pending_gauge {
public:
    using clock = std::chrono::steady_clock;

    explicit pending_gauge(clock::duration max_age = std::chrono::seconds(1)) noexcept
        : max_age_(max_age) {}

    /// True when a submit at `now` must read first: never read, or read `max_age` ago.
    [[nodiscard]] bool stale(clock::time_point now) const noexcept;
    /// True when the next read needs the pending shards' stats, not only /master: unless the
    /// bound is known to be 0 (none), when counting would be wasted.
    [[nodiscard]] bool wants_counts() const noexcept;
    /// Takes a read made at `now`: /master's bound (nullopt: no /master, no acting master:
    /// the last bound known stays; a master that says none, or an older one, gives 0) and
    /// the sum of the shards' child counts (nullopt: not read). A bound above 0 read without
    /// the counts leaves the gauge stale: the counts are read next.
    void read(
        std::optional<std::uint64_t> bound,
        std::optional<std::uint64_t> pending,
        clock::time_point now
    ) noexcept;
    /// Decides a submit of `adding` nodes; once admitted they count as pending.
    queue_check admit(std::uint64_t adding) noexcept;

private:
    clock::duration max_age_;
    std::optional<clock::time_point> read_at_;  ///< when the figures were last complete
    bool known_ = false;                        ///< a bound was read (0 included)
    std::uint64_t bound_ = 0;
    std::uint64_t pending_ = 0;
};

}  // namespace zkd::protocol
