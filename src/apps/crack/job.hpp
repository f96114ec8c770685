// SPDX-License-Identifier: MIT
// The crack job node /jobs/crack-<hash>-<spec id> (docs/crack.md §2) and its codec. Pure,
// no I/O: it builds, and is fuzzed (tests/fuzz), on its own.
#pragma once

#include "protocol/task.hpp"

#include <boost/json/object.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zkd::crack {

/// The directory of job nodes (created on first use, persistent).
inline constexpr std::string_view crack_jobs_dir = "/jobs";

/// A job's state (the job node's "state").
enum class crack_state {
    running,    ///< partitions still open and no preimage yet
    found,      ///< a partition found the preimage
    not_found,  ///< every partition searched its part in full: the preimage is not there
    failed,     ///< every partition is accounted for, none found it, some ended without
                ///< searching their part (failed, timed out, lost, cancelled, vanished)
};
/// "running", "found", "not_found", "failed".
std::string_view to_string(crack_state s) noexcept;
std::optional<crack_state> parse_crack_state(std::string_view s) noexcept;
/// True for found, not_found and failed.
bool is_terminal(crack_state s) noexcept;

/// One character per partition in the job node's "partitions" string.
namespace crack_partition {
inline constexpr char open = '-';       ///< not accounted for yet
inline constexpr char searched = 'n';   ///< searched in full, not found
inline constexpr char found = 'f';      ///< found the preimage
inline constexpr char failed = 'x';     ///< ended without searching its part (see "failed")
inline constexpr char cancelled = 'c';  ///< cancelled after the job was found
}  // namespace crack_partition

/// A partition that ended without searching its part.
struct crack_failed_partition {
    int partition = 0;
    std::string task;  ///< its task id then
    protocol::task_state state =
        protocol::task_state::failed;  ///< the result's state; unknown: vanished
    std::string code;                  ///< the result's error code, or "vanished",
                                       ///< "garbage_result", "bad_value"
    std::string message;

    friend bool operator==(const crack_failed_partition&, const crack_failed_partition&) = default;
};

/// The data of a job node /jobs/crack-<hash>-<spec id> (docs/crack.md).
struct crack_job {
    std::string hash;                ///< 32 lowercase hex digits
    boost::json::object spec;        ///< the canonical search spec (what the job id hashes)
    std::uint64_t size = 0;          ///< candidates in the whole search
    std::vector<std::string> tasks;  ///< partition i's current task id
    std::string partitions;          ///< partition i's crack_partition character
    crack_state state = crack_state::running;
    std::uint64_t tried = 0;                     ///< candidates hashed by partitions that completed
    std::optional<std::string> preimage;         ///< found only
    int found_partition = -1;                    ///< found only; -1: none
    std::vector<crack_failed_partition> failed;  ///< failed partitions ('x'), by partition
    std::int64_t created_ms = 0;
    std::int64_t finished_ms = 0;  ///< 0 while running
    std::string client;            ///< the creating client's id (8 hex digits)
    int retries = 0;               ///< times failed partitions were submitted again

    /// Partitions accounted for (not open).
    [[nodiscard]] int done() const noexcept;
    [[nodiscard]] int total() const noexcept { return static_cast<int>(tasks.size()); }

    friend bool operator==(const crack_job&, const crack_job&) = default;
};

/// Compact JSON, "v":1 first; `preimage`, `found_partition` and `finished_ms` only when set.
std::string encode(const crack_job& j);
/// Requires v 1, a valid hash, an object spec, valid task ids, a partitions string of the
/// same length made of crack_partition characters, and a known state. `done` is derived.
protocol::codec_result<crack_job> decode_crack_job(std::string_view data);

}  // namespace zkd::crack
