// SPDX-License-Identifier: MIT
// The load itself: submits tasks through roles::task_client (closed or open loop), awaits and
// consumes every result, and measures what happened.
#pragma once

#include "loadgen/options.hpp"
#include "loadgen/report.hpp"
#include "protocol/layout.hpp"
#include "reactor/task_group.hpp"
#include "roles/client/task_client.hpp"
#include "zkco/client.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/json/value.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace zkd::loadgen {

/// One load run over a connected session chrooted at the cluster's namespace.
///
/// Closed loop: keeps `concurrency` tasks in flight, submitting `batch` at a time whenever
/// that many slots are free. Open loop: task k is due at start + k / rate; a batch goes
/// when its last task is due (latency counts from each task's own due time, so time spent
/// behind schedule is counted, not hidden). Each submit() call runs as its own coroutine and
/// each submitted task gets a waiter (task_client::wait, which consumes the result), so
/// submits and waits overlap and the client's batcher folds them into multis.
///
/// Thread rules: everything runs on the client's executor, which must be single-threaded;
/// finish() and abort() must be called there too. `zk` must outlive the runner.
class load_runner {
public:
    load_runner(zkco::client& zk, protocol::layout l, settings s);
    load_runner(const load_runner&) = delete;
    load_runner& operator=(const load_runner&) = delete;
    ~load_runner();

    /// Runs the load once and yields what it measured (mntr and worker fields are the
    /// caller's to fill). Ends when every submitted task has its result, or on abort(), a
    /// stall (no result for stall_timeout while tasks are in flight) or a lost session. The
    /// result of the last consumed task is checked gone before it returns, so the deletes
    /// the client queued have been applied when the caller closes the session.
    boost::asio::awaitable<load_report> run();

    /// Stops submitting; tasks already submitted are still awaited. Idempotent.
    void finish();
    /// Stops submitting and stops waiting: the remaining tasks count as unfinished.
    void abort();

    /// Tasks submitted or being submitted whose result has not arrived.
    [[nodiscard]] std::uint64_t in_flight() const noexcept { return in_flight_; }

private:
    using clock_type = std::chrono::steady_clock;

    boost::asio::awaitable<void> closed_loop();
    boost::asio::awaitable<void> open_loop();
    void issue(std::vector<clock_type::time_point> due);
    boost::asio::awaitable<void> submit_batch(std::vector<clock_type::time_point> due);
    boost::asio::awaitable<void> await_one(std::string id, clock_type::time_point due);
    /// Adds a result's stages (submit -> started -> finished -> seen) to the report.
    void record_stages(const protocol::task_result& r, clock_type::duration latency);
    boost::asio::awaitable<void> watchdog();
    boost::asio::awaitable<void> show_progress(bool tty);
    boost::asio::awaitable<void> flush_consumed();
    /// Sleeps until `until` or until wake() is called, whichever comes first.
    boost::asio::awaitable<void> sleep(clock_type::time_point until);
    void wake();
    [[nodiscard]] bool stopping() const noexcept;

    zkco::client& zk_;
    protocol::layout layout_;
    settings s_;
    roles::task_client client_;
    boost::json::value args_;
    reactor::task_group tasks_;
    reactor::task_group aux_;
    boost::asio::steady_timer wake_;
    load_report rep_;

    clock_type::time_point start_{};
    clock_type::time_point last_progress_{};
    clock_type::time_point last_result_{};
    clock_type::time_point last_submit_{};
    std::uint64_t issued_ = 0;
    std::uint64_t in_flight_ = 0;
    bool finish_ = false;
    bool abort_ = false;
    std::string last_consumed_;
};

}  // namespace zkd::loadgen
