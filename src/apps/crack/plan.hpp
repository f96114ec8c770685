// SPDX-License-Identifier: MIT
// A crack search as the user asks for it (crack_spec) and what follows from it, checked
// (crack_plan): the job id, the canonical spec the job node holds, the keyspace size, and
// each partition's md5-crack task. Pure: no I/O, unit-tested without a server.
#pragma once

#include "apps/crack/error.hpp"
#include "protocol/layout.hpp"
#include "protocol/task.hpp"
#include "zkco/types.hpp"

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace zkd::crack {

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

/// A validated spec and what follows from it.
struct crack_plan {
    std::string hash;  ///< lowercase
    bool words_mode = false;
    std::string charset;
    int min_len = 1;
    int max_len = 0;
    std::vector<std::string> words;
    std::uint64_t size = 0;         ///< candidates in the whole search
    boost::json::object canonical;  ///< the job node's "spec"
    std::string job_id;             ///< crack-<hash>-<8 hex>
};

/// Checks `spec` and plans the job, or says why it is invalid (crack_errc).
zkco::result<crack_plan> make_plan(const crack_spec& spec);

/// The job id ("crack-<hash lowercase>-<8 hex>") `spec` maps to, or why `spec` is invalid
/// (crack_errc). The 8 hex digits are fnv1a32 of the canonical search spec.
zkco::result<std::string> crack_job_id(const crack_spec& spec);

/// How many partitions a new job gets (crack_spec::partitions, docs/crack.md): `requested`
/// if positive, else max(default_crack_partitions, 4 x `live_capacity`) at most
/// max_crack_partitions and one per min_auto_partition_candidates (or _words); never fewer
/// than a keyspace needs (2^40 candidates each) nor more than one per candidate.
std::uint64_t partition_count(const crack_plan& p, int requested, int live_capacity);

/// The md5-crack args of the partition covering candidates (start, count) of the plan.
boost::json::value partition_args(
    const crack_plan& p, std::pair<std::uint64_t, std::uint64_t> range
);

/// The task of one partition (its md5-crack args, the spec's priority, timeout and attempts),
/// as roles::task_transaction::add_task takes it.
protocol::task_spec partition_task(
    const crack_plan& p, const crack_spec& s, std::pair<std::uint64_t, std::uint64_t> range
);

/// True when `ops` fit one multi (at most 1,000 ops and max_crack_multi_bytes).
bool fits_one_multi(const std::vector<zkco::multi_op>& ops);

}  // namespace zkd::crack
