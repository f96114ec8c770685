// SPDX-License-Identifier: MIT
// The distributed MD5 crack job (docs/crack.md): one job node per (hash, search space) in
// /jobs, created in the same multi() as its partitions (md5-crack tasks, docs/protocol.md T1),
// and followed by every client cracking that hash: whoever reads a partition's result folds
// it into the job node (a versioned set), the first preimage ends the job and cancels the
// partitions still open (T7), and a client that comes later joins the job instead of
// starting another.
#pragma once

#include "protocol/layout.hpp"
#include "protocol/task.hpp"
#include "zkco/client.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace zkd::crack {

/// Why a crack job could not be started or followed. Each message says what to fix.
enum class crack_errc {
    bad_hash = 1,        ///< the hash is not 32 hex digits
    bad_search,          ///< neither or both of a charset and a word list
    bad_charset,         ///< empty, not UTF-8, repeated characters, more than 256 characters
    bad_lengths,         ///< not 1 <= min_len <= max_len <= 16
    empty_word_list,     ///< a word list without words
    bad_word,            ///< a word that is not valid UTF-8 (JSON cannot carry it)
    bad_partitions,      ///< partitions outside 0..max_crack_partitions
    bad_task_options,    ///< priority outside 0..9, a negative timeout, max_attempts < 1
    keyspace_too_large,  ///< more than max_crack_partitions partitions of 2^40 candidates
    job_too_large,       ///< the partitions do not fit one ZooKeeper transaction
    garbage_job,         ///< the job node does not hold a crack job (format 1)
    spec_conflict,       ///< the job node of this id describes another search
    job_vanished,        ///< the job node was deleted while it was being followed
};
/// The category of crack_errc ("zkd.crack"); its messages say what to fix.
const boost::system::error_category& crack_category() noexcept;
/// Makes crack_errc values error_codes (found by ADL).
zkco::error_code make_error_code(crack_errc e) noexcept;

/// The directory of job nodes (created on first use, persistent).
inline constexpr std::string_view crack_jobs_dir = "/jobs";
/// Most partitions a job may have: its job node and pending nodes go in one multi (at most
/// 1,000 ops).
inline constexpr int max_crack_partitions = 900;
/// Automatic partitioning makes max(default_crack_partitions, 4 x the capacity of the live
/// workers) partitions, at most max_crack_partitions, and no more than one per
/// min_auto_partition_candidates (or _words).
inline constexpr int default_crack_partitions = 64;
/// Smallest partition automatic partitioning makes of a keyspace (when it is larger).
inline constexpr std::uint64_t min_auto_partition_candidates = 65'536;
/// Smallest partition automatic partitioning makes of a word list (when it is larger).
inline constexpr std::size_t min_auto_partition_words = 1'000;
/// Estimated bytes (zkco::estimated_size) the creating multi may take: the job node plus
/// every partition's task. A word list beyond it is refused (job_too_large).
inline constexpr std::size_t max_crack_multi_bytes = 900'000;

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
    std::string task;                       ///< its task id then
    protocol::task_state state = protocol::task_state::failed;  ///< the result's state; unknown: vanished
    std::string code;                       ///< the result's error code, or "vanished",
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

/// A charset by name: lower, upper, digits, alpha, alnum, hex, printable (ASCII 0x20-0x7e),
/// or several joined by '+' ("lower+digits"); nullopt for anything else.
std::optional<std::string> named_charset(std::string_view name);

/// Splits a word list file's text into words: one per line ('\n', a trailing '\r' removed),
/// empty lines skipped; lines that are not valid UTF-8 are skipped and counted in `skipped`
/// (if not null), since a task's JSON cannot carry them.
std::vector<std::string> parse_word_list(std::string_view text, std::size_t* skipped = nullptr);

/// What to crack and how.
struct crack_spec {
    std::string hash;  ///< MD5 digest, 32 hex digits, any case
    /// Brute force: every string of min_len..max_len characters of `charset` (UTF-8).
    std::optional<std::string> charset;
    int min_len = 1;
    int max_len = 0;
    /// Dictionary: these words (valid UTF-8), in this order.
    std::optional<std::vector<std::string>> words;
    /// 0: automatic (see default_crack_partitions). At most max_crack_partitions, and at
    /// most one per candidate. Used only by the client that creates the job.
    int partitions = 0;
    /// Of each partition task (docs/protocol.md §4); used when creating or resubmitting.
    int priority = 5;
    std::chrono::milliseconds partition_timeout{0};  ///< 0: none
    int max_attempts = 3;
    /// Joining a `failed` job submits its failed partitions again (new tasks) and follows.
    bool retry_failed = true;
    /// After a find, how long to wait for the cancelled partitions' results, to fold and
    /// delete them, before returning (they are reaped by the master otherwise).
    std::chrono::milliseconds cleanup_grace{3000};
    /// With nothing happening for this long, look for open partitions whose task exists
    /// nowhere (its result consumed by someone else, or reaped): they are marked failed.
    std::chrono::milliseconds reconcile_interval{60'000};
};

/// The job id ("crack-<hash lowercase>-<8 hex>") `spec` maps to, or why `spec` is invalid
/// (crack_errc). Pure: no I/O. The 8 hex digits are fnv1a32 of the canonical search spec.
zkco::result<std::string> crack_job_id(const crack_spec& spec);

/// For a progress bar: called on the client's executor whenever the job changes.
struct crack_progress {
    std::string job;  ///< the job id
    crack_state state = crack_state::running;
    int total = 0;            ///< partitions
    int done = 0;             ///< partitions accounted for
    std::uint64_t size = 0;   ///< candidates in the whole search
    std::uint64_t tried = 0;  ///< candidates hashed by completed partitions
    /// Candidates per second, from the partitions completed while this call followed the
    /// job (0 until one does). Coarse: a partition counts when it completes.
    double rate = 0;
    std::optional<std::string> preimage;   ///< set as soon as the job is found
    bool joined = false;                   ///< the job existed already
    std::chrono::milliseconds elapsed{0};  ///< since run_crack started
};

/// How run_crack ended.
struct crack_outcome {
    std::string job;
    crack_state state = crack_state::running;  ///< always terminal
    std::optional<std::string> preimage;
    bool joined = false;  ///< another client had created the job
    int resubmitted = 0;  ///< failed partitions this call submitted again
    int total = 0;
    int done = 0;
    std::uint64_t size = 0;
    std::uint64_t tried = 0;
    std::vector<crack_failed_partition> failed;
    std::chrono::milliseconds elapsed{0};
};

/// Cracks `spec.hash` with the cluster behind `zk` (chrooted at the namespace, layout `l`):
/// validates the spec (crack_errc), creates /jobs if missing, then either creates the job
/// node and all its partition tasks in one multi, or joins the job of the same id if it
/// exists (after checking it describes the same search; a `failed` one gets its failed
/// partitions resubmitted when spec.retry_failed). Then follows the job until it is
/// terminal: folds partition results into the job node, cancels the open partitions once
/// found (waiting up to cleanup_grace for their results), and yields the outcome. A job that
/// is terminal already is reported at once (a found one gets its open partitions cancelled).
///
/// Errors: crack_errc (invalid spec, job_too_large, garbage_job, spec_conflict,
/// job_vanished), the session's errors (condition::session_lost); the job stays as it was.
/// Cancellation: terminal stops following and yields operation_aborted; the job keeps
/// running (a later run_crack joins it); cancelled while creating, the job may or may not
/// exist. Use on `zk`'s executor; `zk` must outlive the call; `on_progress` runs there too
/// and must not throw.
boost::asio::awaitable<zkco::result<crack_outcome>> run_crack(
    zkco::client& zk,
    protocol::layout l,
    crack_spec spec,
    std::function<void(const crack_progress&)> on_progress = {}
);

/// A job node found by crack_status.
struct crack_job_info {
    std::string id;
    std::optional<crack_job> job;  ///< nullopt: the node is garbage (see `problem`)
    std::string problem;
    std::int32_t version = -1;     ///< the node's data version when read
};

/// The crack jobs of `hash` (any case): every /jobs child named crack-<hash>-*, oldest
/// first; empty when there is none. Errors: bad_hash, the session's errors. Cancellation:
/// terminal abandons the reads.
boost::asio::awaitable<zkco::result<std::vector<crack_job_info>>> crack_status(
    zkco::client& zk, std::string hash
);

/// What crack_forget did with each job of a hash.
struct crack_forgotten {
    std::vector<crack_job_info> removed;  ///< finished (or garbage) jobs, now deleted
    std::vector<crack_job_info> kept;     ///< running, or changed while we looked
};

/// Deletes the finished jobs of `hash` (found, not_found, failed) and its garbage job nodes,
/// each only if unchanged since it was read (a failed job being retried is kept); running
/// jobs stay. Their partitions' unconsumed results, if any, go with the results' retention
/// (docs/protocol.md T8). Errors: bad_hash, the session's errors.
boost::asio::awaitable<zkco::result<crack_forgotten>> crack_forget(zkco::client& zk,
                                                                   std::string hash);

}  // namespace zkd::crack

template <>
struct boost::system::is_error_code_enum<zkd::crack::crack_errc> : std::true_type {};
