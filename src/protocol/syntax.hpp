// SPDX-License-Identifier: MIT
// What operators write, shared by the command line, the config file and exec settings:
// durations, and the known name nearest to a mistyped one. Pure.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace zkd::protocol {

/// How a duration is written, for messages: "wants a duration (" + duration_forms + ")".
inline constexpr std::string_view duration_forms =
    "e.g. 250ms, 30s, 4m30s, 2h; a bare number is milliseconds";

/// A duration: a number and a unit (h, m, s, ms), or several with units from largest to
/// smallest, each at most once ("4m30s", "1h15m", "2s500ms"); a bare number is
/// milliseconds. nullopt if `text` is none or does not fit in std::chrono::milliseconds.
[[nodiscard]] std::optional<std::chrono::milliseconds> parse_duration(std::string_view text);

/// How many insertions, deletions and substitutions turn `a` into `b`.
[[nodiscard]] std::size_t edit_distance(std::string_view a, std::string_view b);

/// The name in `known` nearest to `name`, within `max_distance` edits (the first of equally
/// near ones), or empty.
template <class Names>
[[nodiscard]] std::string nearest(
    std::string_view name, const Names& known, std::size_t max_distance
) {
    std::string best;
    std::size_t best_distance = max_distance + 1;
    for (const auto& candidate : known) {
        if (const auto d = edit_distance(name, candidate); d < best_distance) {
            best_distance = d;
            best = candidate;
        }
    }
    return best;
}

}  // namespace zkd::protocol
