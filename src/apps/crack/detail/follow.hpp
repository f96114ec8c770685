// SPDX-License-Identifier: MIT
// Internal to run_crack: following a job until it is terminal.
#pragma once

#include "apps/crack/detail/io.hpp"
#include "apps/crack/detail/open.hpp"
#include "apps/crack/fold.hpp"
#include "apps/crack/run.hpp"
#include "reactor/task_group.hpp"
#include "roles/client/task_client.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

namespace zkd::crack::detail {

/// The job node as its watcher read it.
struct job_read {
    crack_job job;
    std::int32_t version = -1;
};

/// What the watchers tell the follow loop: a partition's result (or that it is gone), the job
/// node as it changed, or an error that ends the follow.
using follow_event = std::variant<partition_report, job_read, zkco::error_code>;

/// The watchers' events, in arrival order, for the one loop that takes them. All on one
/// executor: push() never waits, and wakes the loop.
class event_queue {
public:
    using clock = std::chrono::steady_clock;

    explicit event_queue(const boost::asio::any_io_executor& ex);
    void push(follow_event ev);
    /// The oldest event, if any.
    std::optional<follow_event> try_pop();
    /// The oldest event, waiting for one until `deadline`; nullopt once it passed, or when
    /// the caller was cancelled (before or during the wait).
    boost::asio::awaitable<std::optional<follow_event>> pop(clock::time_point deadline);

private:
    std::deque<follow_event> events_;
    boost::asio::steady_timer wake_;  // a condition variable: push() cancels the wait
};

/// Follows one opened job: a watcher per open partition's task and one on the job node, all
/// children of one task group, push what they see to an event queue; the loop folds results
/// into the job node, looks for vanished partitions now and then, and once the job is found
/// cancels the open partitions and waits (up to cleanup_grace) for their results.
/// Use on `zk`'s executor; `zk`, `spec` and `plan` must outlive it.
class follower {
public:
    using clock = std::chrono::steady_clock;

    follower(
        zkco::client& zk,
        protocol::layout l,
        const crack_spec& spec,
        const crack_plan& plan,
        opened_job opened,
        std::function<void(const crack_progress&)> on_progress,
        clock::time_point start
    );

    /// Follows the job until it is terminal (at once if it is: a found one gets its open
    /// partitions cancelled), and yields how it ended. The cancels it started complete
    /// before it returns, also after an error. Errors: job_vanished, garbage_job, the
    /// session's; operation_aborted when cancelled.
    boost::asio::awaitable<zkco::result<crack_outcome>> run();

private:
    boost::asio::awaitable<zkco::result<void>> follow();
    /// Folds and reconciles while the job runs.
    boost::asio::awaitable<zkco::result<void>> follow_running();
    /// Found: cancels the open partitions and folds their results until all are in or
    /// cleanup_grace passed.
    boost::asio::awaitable<zkco::result<void>> reap_cancelled();
    /// What drain() took from the queue.
    struct drained {
        std::vector<partition_report> reports;
        zkco::error_code failure;  ///< the first error sent
    };
    /// Takes `ev` and the events queued behind it: job reads are taken at once, partition
    /// reports collected, the first error kept. Not a coroutine: it never waits.
    drained drain(follow_event ev);
    /// Acts on one event and those queued behind it (results come in bursts, as a find
    /// cancels the rest): the partition reports are folded in one write.
    boost::asio::awaitable<zkco::result<void>> handle(follow_event ev);
    /// Folds `reports` into the job node (versioned set, retried on bad_version against the
    /// node as it is then), then deletes the results it read (T5).
    boost::asio::awaitable<zkco::result<void>> fold(std::vector<partition_report> reports);
    /// Looks for open partitions whose task is nowhere; yields those missing twice in a row.
    boost::asio::awaitable<std::vector<partition_report>> reconcile();
    /// The open partitions' tasks seen pending, assigned or with a result; nullopt when a
    /// listing failed (the scan proves nothing then).
    boost::asio::awaitable<std::optional<std::set<std::string>>> scan_seen(
        const std::map<std::string, std::size_t>& open
    );

    boost::asio::awaitable<void> watch_result(std::size_t partition, std::string tid);
    boost::asio::awaitable<void> watch_job();
    /// A watcher's error ends the follow with it, unless the watcher was cancelled (the
    /// follow is ending then anyway).
    boost::asio::awaitable<void> fail_unless_cancelled(zkco::error_code ec);

    /// Takes `doc` if newer than the job held; then watches, reports, postpones the scan.
    void take(crack_job doc, std::int32_t version);
    /// Starts a watcher for each open partition's current task that has none.
    void sync_watchers();
    /// Asks the master to cancel every open partition (T7).
    void start_cancels();
    boost::asio::awaitable<void> cancel_one(std::string tid);
    void report();
    [[nodiscard]] crack_outcome outcome() const;

    zkco::client& zk_;
    protocol::layout l_;
    const crack_spec& spec_;
    const crack_plan& plan_;
    std::string path_;
    std::function<void(const crack_progress&)> on_progress_;
    clock::time_point start_;
    held_job held_;
    bool joined_ = false;
    int resubmitted_ = 0;
    roles::task_client tc_;  // for the cancels

    clock::time_point follow_start_;
    std::uint64_t tried_at_start_ = 0;
    event_queue events_;
    std::set<std::string> watched_;
    std::set<std::string> suspects_;  // missing in the last scan
    clock::time_point next_scan_;
    reactor::task_group watchers_;
    reactor::task_group cancels_;
};

}  // namespace zkd::crack::detail
