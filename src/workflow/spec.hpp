// SPDX-License-Identifier: MIT
// A workflow's spec (docs/workflows.md, docs/protocol.md §11): a DAG of named steps, each an
// ordinary task (a type, args and submit options) that waits for the steps it names in
// "after", or maps over the array another step returned ("map"). Parsing and validation
// with precise messages, and the canonical text stored in ZooKeeper. Pure: no I/O.
#pragma once

#include "protocol/task.hpp"

#include <boost/json/value.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zkd::workflow {

/// Most steps one workflow holds.
inline constexpr std::size_t max_steps = 50'000;
/// Largest spec text accepted, as submitted and as stored (the canonical text, in chunks).
inline constexpr std::size_t max_spec_bytes = std::size_t{16} * 1024 * 1024;
/// Longest step name: 1 to this many characters of [A-Za-z0-9_.-].
inline constexpr std::size_t max_step_name_length = 64;
/// Longest workflow name (information only).
inline constexpr std::size_t max_workflow_name_length = 128;
/// Most elements a map step fans out to; a longer array fails the step (too_many_elements).
inline constexpr std::size_t max_map_elements = 100'000;

/// One step: what it runs, what it waits for, and its task's submit options.
struct step_spec {
    std::string name;
    std::string type;
    boost::json::value args;  ///< null when absent
    /// The steps it waits for, by index into workflow_spec::steps, ascending, no repeats
    /// (a map step's source included).
    std::vector<std::size_t> after;
    /// The step whose array it maps over (an index), one task per element; nullopt: none.
    std::optional<std::size_t> map;
    bool continue_on_failure = false;
    int priority = protocol::default_priority;
    std::chrono::milliseconds timeout{0};
    int max_attempts = 3;

    friend bool operator==(const step_spec&, const step_spec&) = default;
};

/// A validated spec: at least one step, names unique, every reference known, no cycle.
struct workflow_spec {
    std::string name;              ///< optional, for display
    std::vector<step_spec> steps;  ///< sorted by name: a step's index is its number
    /// steps[i]'s dependants (the steps whose `after` holds i), ascending.
    std::vector<std::vector<std::size_t>> dependants;

    /// The index of the step named `name`.
    [[nodiscard]] std::optional<std::size_t> index_of(std::string_view step) const;
    /// The steps no other step waits for: the workflow's result is theirs.
    [[nodiscard]] std::vector<std::size_t> sinks() const;

    friend bool operator==(const workflow_spec&, const workflow_spec&) = default;
};

/// True for 1 to max_step_name_length characters of [A-Za-z0-9_.-].
bool is_valid_step_name(std::string_view name) noexcept;

/// Parses and validates a spec as a user writes it (docs/workflows.md). Never throws on
/// bad input; the error says what is wrong and where (step names, the cycle's path, the
/// nearest known name for a misspelt one).
protocol::codec_result<workflow_spec> parse_spec(std::string_view text);
/// The same for parsed JSON.
protocol::codec_result<workflow_spec> spec_from_json(const boost::json::value& doc);

/// The canonical JSON of a spec: steps by name, "after" as names (a map's source left out
/// of it), defaults left out. parse_spec(encode_spec(s)) == s.
std::string encode_spec(const workflow_spec& s);

}  // namespace zkd::workflow
