// SPDX-License-Identifier: MIT
// Cracking a hash with a cluster (docs/crack.md): one job node per (hash, search space) in
// /jobs, created in the same multi() as its partitions (md5-crack tasks, docs/protocol.md
// T1), and followed by every client cracking that hash: whoever reads a partition's result
// folds it into the job node (a versioned set), the first preimage ends the job and cancels
// the partitions still open (T7), and a client that comes later joins the job instead of
// starting another. Built on the public client API only (zkco, task_client, protocol).
#pragma once

#include "apps/crack/error.hpp"
#include "apps/crack/job.hpp"
#include "apps/crack/plan.hpp"
#include "protocol/layout.hpp"
#include "zkco/client.hpp"

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace zkd::crack {

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
    std::int32_t version = -1;  ///< the node's data version when read
};

/// The crack jobs of `hash` (any case): every /jobs child named crack-<hash>-*, oldest
/// first; empty when there is none. A running job is first brought up to date with the
/// results of its open partitions (folded and written back, as a follower does: a job whose
/// client stopped following still shows found, not_found or failed once its partitions
/// end). Errors: bad_hash, the session's errors. Cancellation: terminal abandons the reads.
boost::asio::awaitable<zkco::result<std::vector<crack_job_info>>> crack_status(
    zkco::client& zk, protocol::layout l, std::string hash
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
boost::asio::awaitable<zkco::result<crack_forgotten>> crack_forget(
    zkco::client& zk, protocol::layout l, std::string hash
);

}  // namespace zkd::crack
