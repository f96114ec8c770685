// SPDX-License-Identifier: MIT
// Cron expressions (docs/protocol.md §12.1): the five standard fields of Vixie cron, with
// lists, ranges, steps and month and weekday names, and the exact next and previous
// matching minute. Times are milliseconds since the Unix epoch read in UTC. Pure: no I/O.
#pragma once

#include "protocol/task.hpp"

#include <bitset>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace zkd::schedule {

/// A parsed cron expression: the values each field allows.
struct cron_expr {
    std::bitset<60> minutes;  ///< 0-59
    std::bitset<24> hours;    ///< 0-23
    std::bitset<32> days;     ///< 1-31 (bit 0 unused)
    std::bitset<13> months;   ///< 1-12 (bit 0 unused)
    std::bitset<7> weekdays;  ///< 0-6, Sunday 0 (7 is read as 0)
    /// The day-of-month field (resp. day-of-week) began with `*`: then a day matches when
    /// both fields allow it, else (both restricted) when either does (Vixie cron).
    bool dom_star = false;
    bool dow_star = false;

    friend bool operator==(const cron_expr&, const cron_expr&) = default;
};

/// Parses "m h dom mon dow" (fields separated by spaces or tabs), or one of `@yearly`,
/// `@annually`, `@monthly`, `@weekly`, `@daily`, `@midnight`, `@hourly`. A field is a
/// comma-separated list of `*`, `N`, `N-M`, each with an optional `/STEP`; `N/STEP` means
/// `N-<max>/STEP`. Months and weekdays also take their English three-letter names
/// (case-insensitive). The error names the field and what is wrong in it.
protocol::codec_result<cron_expr> parse_cron(std::string_view text);

/// Whether the minute starting at `ms` (UTC) matches.
bool cron_matches(const cron_expr& c, std::int64_t ms) noexcept;

/// The first matching minute strictly after `after_ms` (its start, in ms); nullopt when none
/// comes within 10 years (an expression such as "0 0 30 2 *" never matches).
std::optional<std::int64_t> cron_next(const cron_expr& c, std::int64_t after_ms) noexcept;

/// The last matching minute starting at or before `at_ms`; nullopt when none within the 10
/// years before it, or before the epoch.
std::optional<std::int64_t> cron_prev(const cron_expr& c, std::int64_t at_ms) noexcept;

}  // namespace zkd::schedule
