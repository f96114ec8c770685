// SPDX-License-Identifier: MIT
// A schedule's firings (docs/protocol.md §12.2, §12.4): their due times, the task id each
// derives from its schedule and due time, and what the master decides at a given moment
// (which due times to fire, which pass as misfires or overlaps). Pure: no I/O.
#pragma once

#include "schedule/spec.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zkd::schedule {

/// The first due time of `s` strictly after `after_ms`; nullopt when none comes (a cron
/// expression that matches no date within 10 years).
std::optional<std::int64_t> next_due(const schedule& s, std::int64_t after_ms) noexcept;
/// The last due time of `s` at or before `at_ms` and after its creation; nullopt when none.
std::optional<std::int64_t> prev_due(const schedule& s, std::int64_t at_ms) noexcept;

/// The task id of the firing of the schedule with client part `client` (8 hex digits) and
/// `priority`, due at `due_ms`: `t<9-priority>-<due_ms, 13 digits>-<client>000000`. A valid
/// task id (protocol/ids.hpp), the same for the same schedule and due time.
std::string firing_task_id(std::string_view client, int priority, std::int64_t due_ms);
/// The due time a firing id of `client` says; nullopt when `tid` is none.
std::optional<std::int64_t> firing_due(std::string_view client, std::string_view tid) noexcept;

/// What the previous firing's task is doing, for --no-overlap.
enum class previous_firing {
    idle,  ///< none yet, or it has a result (or overlap does not matter)
    busy,  ///< it has no result yet
};

/// The master's decision for one schedule at `now_ms`.
struct firing_plan {
    std::vector<std::int64_t> fire;  ///< due times to fire now, ascending
    std::uint64_t missed = 0;        ///< due times passed over by the misfire policy
    std::uint64_t skipped = 0;       ///< due times passed over by --no-overlap
    /// The schedule's last_due_ms after it (its old one when nothing is due).
    std::int64_t last_due_ms = 0;
    /// When to decide again: the first due time after last_due_ms (nullopt: paused, never).
    std::optional<std::int64_t> wake_ms;

    [[nodiscard]] bool changes() const noexcept {
        return !fire.empty() || missed > 0 || skipped > 0;
    }
};

/// Which of the due times of `s` in (last_due_ms, now_ms] to fire. With one due time at
/// most late_after_ms late: fire it. Otherwise (several due, or the one late) the misfire
/// policy decides: `once` fires the latest, `skip` none, `all` the latest max_catch_up. With
/// no_overlap and the previous firing `busy`, nothing fires (all skipped); with no_overlap, at most
/// the latest fires. A paused schedule: nothing, no wake.
firing_plan plan(const schedule& s, std::int64_t now_ms, previous_firing previous);

/// `s` with `p` applied: last_due_ms and the counts advanced.
schedule applied(schedule s, const firing_plan& p);

}  // namespace zkd::schedule
