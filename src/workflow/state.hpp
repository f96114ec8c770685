// SPDX-License-Identifier: MIT
// The documents a workflow keeps in ZooKeeper (docs/protocol.md §11): its header
// (/workflows/<id>), its spec in chunks (/workflows/<id>/spec-<i>) and its state
// (/workflows/<id>/state, written by the master). Codecs in the style of protocol/task.hpp:
// decoders accept any bytes, never throw, and say why they refuse. Pure: no I/O.
#pragma once

#include "protocol/task.hpp"

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zkd::workflow {

/// Largest chunk of spec text one /workflows/<id>/spec-<i> node holds.
inline constexpr std::size_t spec_chunk_bytes = std::size_t{256} * 1024;
/// Most chunks a spec is stored in (max_spec_bytes / spec_chunk_bytes).
inline constexpr std::size_t max_spec_chunks = 64;

/// The data of /workflows/<id>.
struct workflow_header {
    std::string name;             ///< the spec's "name", for display; may be empty
    std::size_t steps = 0;        ///< how many steps the spec holds
    std::size_t chunks = 0;       ///< how many spec-<i> nodes hold its text (1..64)
    std::size_t spec_bytes = 0;   ///< the spec text's length, all chunks together
    std::int64_t created_ms = 0;  ///< the submitting client's clock
    std::string submitted_by;     ///< the submitting client's own client id, information

    friend bool operator==(const workflow_header&, const workflow_header&) = default;
};
std::string encode_header(const workflow_header& h);
protocol::codec_result<workflow_header> decode_header(std::string_view data);

/// The name of chunk `i`: "spec-0000" .. "spec-0063".
std::string chunk_name(std::size_t i);
/// `text` cut into pieces of at most spec_chunk_bytes (one empty piece for empty text).
std::vector<std::string_view> split_chunks(std::string_view text);

/// A step as the state records it (one character each, in the state's "steps").
enum class step_status : char {
    waiting = '-',  ///< not launched
    running = 'r',  ///< launched (a map step: its elements allocated), outcome not known
    succeeded = 's',
    failed = 'f',
    skipped = 'k',    ///< a step it waits for failed (or was skipped), without continue_on_failure
    cancelled = 'c',  ///< the workflow was cancelled before the step ended
};
/// "waiting", "running", ...
std::string_view to_string(step_status s) noexcept;
/// True for succeeded, failed, skipped and cancelled.
bool is_decided(step_status s) noexcept;

enum class workflow_status { running, succeeded, failed, cancelled };
std::string_view to_string(workflow_status s) noexcept;
std::optional<workflow_status> parse_workflow_status(std::string_view s) noexcept;

/// The task numbers a map step was given when its source's array was known.
struct map_alloc {
    std::size_t step = 0;        ///< its index in the spec
    std::uint64_t base = 0;      ///< element i is task number base + i
    std::uint64_t count = 0;     ///< elements (tasks) in all
    std::uint64_t launched = 0;  ///< elements launched so far (0..count)

    friend bool operator==(const map_alloc&, const map_alloc&) = default;
};

/// The data of /workflows/<id>/state.
struct workflow_state {
    workflow_status status = workflow_status::running;
    /// One step_status character per step, in the spec's order. What counts for a launched
    /// step is its result; the character is its outcome when the state was written.
    std::string steps;
    /// The next task number free for a map step's elements (plain step i is number i).
    std::uint64_t next = 0;
    std::vector<map_alloc> maps;  ///< by step index, ascending
    /// Failures the engine decided itself (no result holds them), by step name: a map
    /// step whose source is no array, a task whose args cannot be built.
    std::map<std::string, protocol::task_error> errors;
    std::int64_t started_ms = 0;   ///< when the master first wrote it
    std::int64_t finished_ms = 0;  ///< when it ended (status not running); 0 while running

    friend bool operator==(const workflow_state&, const workflow_state&) = default;
};
std::string encode_state(const workflow_state& s);
/// Also refuses a state that does not fit a spec of `steps` steps.
protocol::codec_result<workflow_state> decode_state(std::string_view data, std::size_t steps);

}  // namespace zkd::workflow
