// SPDX-License-Identifier: MIT
// Delayed tasks and retries with backoff (docs/protocol.md §4.3, §6 T10, T4 "Retry"): when a
// task is due, how long a retry waits, which outcomes are retried. Pure: no I/O, no clock
// (callers pass the time and the random bits).
#pragma once

#include "protocol/task.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zkd::protocol {

/// Most retries a task may ask for (`retries`, §4.3).
inline constexpr int max_retries_limit = 100;
/// Most bytes of one earlier error's message kept in a retried task (`errors`, §4.3): longer
/// ones are cut at a UTF-8 boundary.
inline constexpr std::size_t max_retry_message_bytes = 1024;
/// Latest due time accepted: 9999999999999 ms (the 13 digits of a task id, §3), in 2286.
inline constexpr std::int64_t max_due_ms = 9'999'999'999'999;

/// A time as an operator writes it for `--at`: RFC 3339 (`2026-11-27T08:30:00Z`,
/// `2026-11-27T09:30:00.250+01:00`; `t`, `z` and a space for `T` accepted) or a bare number
/// of milliseconds since the Unix epoch. nullopt when it is neither, or outside 1970..2286.
[[nodiscard]] std::optional<std::int64_t> parse_time(std::string_view text);

/// `t` (ms since the epoch) in RFC 3339 UTC with milliseconds: `2026-11-27T08:30:00.000Z`.
[[nodiscard]] std::string format_time(std::int64_t ms);

/// How a task's failed tries are retried (§4.3): `retries` more tries at most, the k-th retry
/// waiting a uniformly random time in [0, min(max, base * 2^(k-1))] (full jitter).
struct backoff_policy {
    int retries = 0;
    std::chrono::milliseconds base{1000};
    std::chrono::milliseconds max{60'000};

    friend bool operator==(const backoff_policy&, const backoff_policy&) = default;
};

/// `BASE` or `BASE:MAX`, each a duration (parse_duration); MAX defaults to 60 x BASE
/// (capped at 24 h) and must not be below BASE; BASE must be positive and at most 24 h.
[[nodiscard]] std::optional<backoff_policy> parse_backoff(std::string_view text);

/// The cap of the `retry`-th retry's wait (retry ≥ 1): min(max, base * 2^(retry-1)), without
/// overflow.
[[nodiscard]] std::chrono::milliseconds backoff_cap(const backoff_policy& p, int retry) noexcept;

/// The `retry`-th retry's wait, full jitter: `random` (uniform 64-bit) mapped onto
/// [0, backoff_cap(p, retry)].
[[nodiscard]] std::chrono::milliseconds backoff_delay(
    const backoff_policy& p, int retry, std::uint64_t random
) noexcept;

/// Whether a try that ended in `state` with error `code` is retried (when retries are left):
/// `failed` and `timed_out` are; never `succeeded`, `cancelled` or `lost`, nor the failures
/// no second try can mend: `malformed_task`, `unknown_type`, `bad_args`.
[[nodiscard]] bool retryable(task_state state, std::string_view code) noexcept;

/// `text` cut to at most `most` bytes at a UTF-8 boundary.
[[nodiscard]] std::string cut_utf8(std::string_view text, std::size_t most);

// --- the fields of §4.3 in a task node's JSON -------------------------------------------------

/// What a task node says of delays and retries (§4.3); absent fields as their defaults.
struct delay_fields {
    std::optional<std::int64_t> due_ms;
    std::optional<int> retries;             ///< nullopt: the worker's default for the type
    std::optional<backoff_policy> backoff;  ///< nullopt: the worker's default (or 1 s : 60 s)
    int try_number = 1;
    boost::json::array errors;  ///< the earlier tries' errors, oldest first

    friend bool operator==(const delay_fields&, const delay_fields&) = default;
};

/// Reads the fields of §4.3 of a task node (fields of another shape or out of range are taken
/// as absent: they are advisory to the protocol's other readers); nullopt when `task_json`
/// is no JSON object.
[[nodiscard]] std::optional<delay_fields> read_delay_fields(std::string_view task_json);
/// Just `due_ms`, for change logs (nullopt: none, or no JSON object).
[[nodiscard]] std::optional<std::int64_t> read_due_ms(std::string_view task_json);

/// The task document `task` with the fields a submit sets (§4.3): `due_ms` when given,
/// `retries` and the backoff when given.
void set_submit_fields(
    boost::json::object& task,
    std::optional<std::int64_t> due_ms,
    std::optional<int> retries,
    const std::optional<backoff_policy>& backoff
);

/// A worker's retry of a failed try (§6 T4 "Retry"): the delayed node's data and its due time.
struct retry_plan {
    std::string data;
    std::int64_t due_ms = 0;
    int next_try = 2;
};

/// Decides whether the try of the task assigned as `assignment_json` that ended in `state`
/// with `error` at `finished_ms` is retried: with `defaults` for a task that names no
/// retries or backoff, and `random` for the jitter. nullopt: publish the result (no retries
/// left, an outcome that never retries, or an assignment that is no JSON object).
[[nodiscard]] std::optional<retry_plan> plan_retry(
    std::string_view assignment_json,
    task_state state,
    const task_error& error,
    std::int64_t finished_ms,
    const backoff_policy& defaults,
    std::uint64_t random
);

// --- a bundle's tasks, retried one by one (§4.3 "Bundles") -------------------------------------

/// What earlier tries of the bundle assigned as `task_json` (`n` tasks) finished for good:
/// its `finished` field, entry k the final outcome (state, value or error) of task k, nullopt
/// for a task to run on this try. All nullopt (run every task) when the field is absent, or
/// is not an array of `n` elements each null or a result entry (§5.1): an advisory field, like
/// the other fields of §4.3, so a node someone else wrote runs whole rather than fail.
[[nodiscard]] std::vector<std::optional<task_result>> read_finished(
    std::string_view task_json, std::size_t n
);

/// The entries of a result the master writes for the bundle whose node holds `task_json`
/// (`n` tasks), ending it `state` with `error` (lost, cancelled, malformed: §5.1): each task
/// an earlier try finished for good keeps its `finished` entry (read_finished()), each other
/// gets `state` and `error`. Empty when no task was finished (a retry-less node, or a
/// `finished` read_finished() ignores): the result is then every task's, without entries.
[[nodiscard]] std::vector<task_result> close_bundle(
    std::string_view task_json, std::size_t n, task_state state, const task_error& error
);

// --- a bundle's tasks published early (§6 T4e) -------------------------------------------------

/// Whether the client that submitted the bundle `task_json` reads a task's result from a node
/// of its own (`"entry_results":true`, §4.1): only then may its worker publish tasks early.
/// False for a plain task, an absent member, or one that is not a bool.
[[nodiscard]] bool read_entry_results(std::string_view task_json);

/// The tasks of the bundle `task_json` (`n` tasks) published early so far (`published`,
/// §4.3), given its `finished` as read_finished() read it: an index counts only when its
/// `finished` entry is there (a published task never runs again, and its entry is what it
/// was published with). Ascending, no repeats; empty when the member is absent or not an
/// array of integers (advisory, like the other fields of §4.3).
[[nodiscard]] std::vector<std::size_t> read_published(
    std::string_view task_json, const std::vector<std::optional<task_result>>& finished
);

/// Whether a try of the task `task_json` that ends retryable() would be retried: a retry is
/// left (`try <= retries`, with `defaults` for a task that names none). A task of a bundle
/// is published early only when its entry is final: not retryable(), or no retry left.
[[nodiscard]] bool retry_left(std::string_view task_json, const backoff_policy& defaults);

/// The bundle's node `task_json` (`n` tasks) with the tasks `entries` (index, entry) added
/// to its `finished` (absent, or not read_finished()'s: made of `null`s first) and to its
/// `published` (ascending union): what T4e writes (§6 T4e). nullopt when `task_json` is no
/// JSON object or an index is not below `n`.
[[nodiscard]] std::optional<std::string> with_published(
    std::string_view task_json,
    std::size_t n,
    const std::vector<std::pair<std::size_t, task_result>>& entries
);

/// The tasks of a bundle whose own cancel came (`cancelled`: their indexes, §6 T7 "One task of
/// a bundle") after their try had ended retryable(): they end `cancelled` instead, so that no
/// retry runs them again (a cancel is final). Entries that ended otherwise keep their end.
void cancel_retryable_entries(
    std::vector<task_result>& entries, const std::set<std::size_t>& cancelled
);

/// Decides whether the try of the bundle assigned as `assignment_json`, whose tasks ended as
/// `entries` (one per task, in order) and summed up as `error` (§5.1), is retried: when one
/// entry or more ended retryable() and a retry is left (as plan_retry() decides for a plain
/// task, with `error` as the try's error in `errors`). The retry node is plan_retry()'s plus
/// `finished`: each task that ended otherwise (succeeded, cancelled, a failure no retry
/// mends), and each task the node's own `finished` already held (an earlier try's or a
/// published one: final then, whatever `defaults` say now), keeps its entry there and is not
/// run again; the other retryable ones are null. nullopt:
/// publish the result as it is (nothing to retry, no retries left, or a node that would not
/// fit max_task_bytes).
[[nodiscard]] std::optional<retry_plan> plan_bundle_retry(
    std::string_view assignment_json,
    const std::vector<task_result>& entries,
    const task_error& error,
    std::int64_t finished_ms,
    const backoff_policy& defaults,
    std::uint64_t random
);

/// The result document `result_json` of the final try of a task assigned as
/// `assignment_json` with its `try` and earlier `errors` (§4.3); unchanged for a first try.
[[nodiscard]] std::string with_earlier_tries(
    std::string result_json, std::string_view assignment_json
);

}  // namespace zkd::protocol
