// SPDX-License-Identifier: MIT
// Time zones for cron expressions (docs/schedules.md "Time zones"): the rules of a zone as a
// TZif file (RFC 8536, the files of /usr/share/zoneinfo) states them, its UTC offset at any
// instant, and the UTC instant of a local time, with the rules zkd applies at daylight-saving
// changes. Pure: the bytes come from the caller (roles/schedule/zones.hpp reads the files).
#pragma once

#include "protocol/task.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zkd::schedule {

/// A POSIX TZ rule (the footer of a TZif file: "CET-1CEST,M3.5.0,M10.5.0/3"), for times
/// after the file's last transition.
struct posix_tz {
    std::int32_t std_offset = 0;  ///< seconds east of UTC (UTC+1: 3600)
    bool has_dst = false;
    std::int32_t dst_offset = 0;
    /// A date rule: Jn (kind 'J': day 1-365, never Feb 29), n (kind 'n': day 0-365), or
    /// Mm.w.d (kind 'M': month, week 1-5 (5: the last), weekday 0-6); `time`: seconds after
    /// local midnight at which it changes (may be negative or past 24 h).
    struct date_rule {
        char kind = 'M';
        int a = 0;  ///< J/n: the day; M: the month
        int week = 0;
        int weekday = 0;
        std::int32_t time = 7200;
        friend bool operator==(const date_rule&, const date_rule&) = default;
    };
    date_rule start{};  ///< into DST (read in standard time)
    date_rule end{};    ///< out of DST (read in DST)

    friend bool operator==(const posix_tz&, const posix_tz&) = default;
};

/// Parses a POSIX TZ string as TZif footers write it; nullopt when it is none.
std::optional<posix_tz> parse_posix_tz(std::string_view text);

/// A zone's rules.
struct zone {
    std::string name;
    std::vector<std::int64_t> transitions;  ///< UTC seconds, ascending
    std::vector<std::int32_t> offsets;      ///< the UTC offset (seconds) from each transition on
    std::int32_t initial_offset = 0;        ///< before the first transition
    std::optional<posix_tz> rule;           ///< after the last transition

    /// The UTC offset (seconds east) in force at the instant `utc_s` (seconds).
    [[nodiscard]] std::int32_t offset_at(std::int64_t utc_s) const noexcept;
};

/// Reads a TZif file (versions 1 to 4; the 64-bit data and the footer of version 2 on).
/// The error says what is wrong.
protocol::codec_result<zone> parse_tzif(std::string_view name, std::string_view bytes);

/// UTC itself.
std::shared_ptr<const zone> utc_zone();

/// Finds a zone by name (its TZif file's bytes, read by the caller); nullptr: unknown.
using zone_loader = std::function<std::shared_ptr<const zone>(std::string_view name)>;

/// True for a zone name as the tz database writes them ("Europe/Paris", "UTC",
/// "America/Argentina/Buenos_Aires", "Etc/GMT+5"): 1 to 64 characters of [A-Za-z0-9_+-/],
/// no empty part, no part starting with '.'.
bool is_valid_zone_name(std::string_view name) noexcept;

/// The local time (ms, as if UTC) of the instant `utc_ms`.
std::int64_t to_local(const zone& z, std::int64_t utc_ms) noexcept;

/// The instant of the local time `local_ms` (a whole minute): the earlier of two when the
/// local time happens twice (a clock set back: it counts once); the instant the clock jumps
/// at when the local time does not exist (a clock set forward: the next minute that exists).
std::int64_t to_utc(const zone& z, std::int64_t local_ms) noexcept;

}  // namespace zkd::schedule
