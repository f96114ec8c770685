// SPDX-License-Identifier: MIT
// A schedule (docs/protocol.md §12): when it fires (every N ms, or a cron expression), the
// task each firing submits, its misfire policy and overlap rule, and its durable progress,
// all in one JSON document kept in /schedules/<name>. Parsing and validation with precise
// messages, and the codec. Pure: no I/O.
#pragma once

#include "protocol/task.hpp"
#include "schedule/cron.hpp"
#include "schedule/zone.hpp"

#include <boost/json/value.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace zkd::schedule {

/// Longest schedule name: 1 to this many characters of [A-Za-z0-9_.-], not starting with '.'.
inline constexpr std::size_t max_name_length = 64;
/// Shortest and longest period of an `every` schedule.
inline constexpr std::int64_t min_every_ms = 1000;
inline constexpr std::int64_t max_every_ms = std::int64_t{366} * 24 * 3600 * 1000;
/// Most firings one decision makes under the `all` misfire policy; older missed ones count
/// as missed.
inline constexpr std::size_t max_catch_up = 100;
/// A lone due time more than this late when it is decided is a misfire.
inline constexpr std::int64_t late_after_ms = 60'000;

/// What happens to due times passed while no master fired them (the cluster was down, the
/// schedule paused, or the master late by more than one period).
enum class misfire_policy {
    once,  ///< fire the latest of them, once
    skip,  ///< fire none of them: the next due time fires
    all,   ///< fire each, up to max_catch_up (the latest ones)
};

std::string_view to_string(misfire_policy p) noexcept;
std::optional<misfire_policy> parse_misfire(std::string_view s) noexcept;

/// A schedule as stored: what a user asked for, and what the master has done with it.
struct schedule {
    std::string name;  ///< not in the document: the node's name
    // --- when
    std::int64_t every_ms = 0;  ///< > 0: every this many ms after `created_ms`
    std::string cron;           ///< else: a cron expression (parse_cron), read in `tz`
    cron_expr cron_parsed{};
    std::string tz = "UTC";
    /// The rules of `tz`; nullptr: UTC.
    std::shared_ptr<const zone> zone_rules;
    // --- what
    std::string type;
    boost::json::value args;  ///< null when absent
    int priority = protocol::default_priority;
    std::int64_t timeout_ms = 0;
    int max_attempts = 3;
    std::optional<int> retries;  ///< nullopt: the worker's default for the type
    // --- how
    misfire_policy misfire = misfire_policy::once;
    bool no_overlap = false;
    bool paused = false;
    // --- identity and progress
    std::string client;           ///< 8 lowercase hex digits: its firings' client part
    std::int64_t created_ms = 0;  ///< the first due time comes after it
    /// The latest due time decided (fired, skipped or missed); created_ms before the first.
    std::int64_t last_due_ms = 0;
    /// The due time of the latest firing whose task was created; 0: none yet.
    std::int64_t last_fired_ms = 0;
    std::uint64_t fired = 0;    ///< firings whose task was created
    std::uint64_t skipped = 0;  ///< due times passed over by --no-overlap
    std::uint64_t missed = 0;   ///< due times passed over by the misfire policy

    friend bool operator==(const schedule&, const schedule&) = default;
};

/// True for 1 to max_name_length characters of [A-Za-z0-9_.-] not starting with '.'.
bool is_valid_name(std::string_view name) noexcept;

/// Reads a schedule document (the node's data); refuses garbage with a reason. Checks
/// everything add_request checks, and the progress fields.
/// `zones` finds a `tz` other than UTC (without it, only UTC is known).
protocol::codec_result<schedule> decode(
    std::string_view name, std::string_view data, const zone_loader& zones = {}
);
/// The document of `s` (without its name).
std::string encode(const schedule& s);

/// Validates what a user asks for (from `zkd schedule add` or POST /v1/schedules):
/// `{"name":N, "every_ms":n | "cron":"..." [,"tz":ZONE], "type":T [,"args":A]
/// [,"priority":p] [,"timeout_ms":t] [,"max_attempts":a] [,"retries":r]
/// [,"misfire":"once|skip|all"] [,"no_overlap":b] [,"paused":b]}`. The progress fields
/// (client, created_ms, last_due_ms, counts) are the caller's to fill; unknown fields are
/// refused, with the nearest known name. `zones` finds a `tz` other than UTC.
protocol::codec_result<schedule> parse_request(
    const boost::json::value& request, const zone_loader& zones = {}
);

/// The task a firing of `s` due at `due_ms` submits (§4), encoded, with `submitted_ms` =
/// `now_ms`; an error when it is no valid task or too large.
protocol::codec_result<std::string> firing_task(const schedule& s, std::int64_t now_ms);

/// The schedule as JSON for display (`zkd schedule list --json`, GET /v1/schedules): the
/// document plus `name` and `next_ms` (the next due time; absent while paused or never).
boost::json::object to_json(const schedule& s);

}  // namespace zkd::schedule
