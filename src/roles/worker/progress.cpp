// SPDX-License-Identifier: MIT
#include "roles/worker/detail/progress.hpp"

#include "protocol/ids.hpp"
#include "protocol/worker_txn.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

namespace asio = boost::asio;

namespace zkd::roles::detail {

void write_assignment(const std::shared_ptr<running_task>& t) {
    if (t->done || t->writing || t->gave_up) {
        return;
    }
    if (t->run.running_ms == 0) {
        t->run.running_ms = protocol::now_ms();
    }
    double sum = 0;
    bool any = false;
    for (const double p : t->progress) {
        any = any || p >= 0;
        sum += std::max(p, 0.0);
    }
    if (any) {
        t->run.fraction = sum / static_cast<double>(t->progress.size());
        t->run.message = t->progress_message;
        t->run.at_ms = protocol::now_ms();
    }
    auto mark = protocol::running_mark_op(t->worker, t->tid, t->assigned, t->run, t->version);
    if (!mark) {
        // Not an object: the worker decoded it before running it, so never; write nothing.
        t->gave_up = true;
        return;
    }
    auto& op = *mark;
    t->writing = true;
    t->dirty = false;
    t->last_write = asio::steady_timer::clock_type::now();
    t->zk->async_set(
        std::move(op.path), std::move(op.data), op.version,
        [t](zkco::error_code ec, zkco::stat st) {
            t->writing = false;
            if (ec == zkco::condition::retryable && !t->done) {
                // Outcome unknown (the connection dropped): the mark is what tells the master
                // that this worker runs the task (an unmarked one it takes back), so try
                // again in a second; a try that applied makes the next fail (version), done.
                t->dirty = true;
                t->progress_timer.expires_after(std::chrono::seconds(1));
                t->progress_timer.async_wait([t](zkco::error_code wec) {
                    if (!wec) {
                        write_assignment(t);
                    }
                });
                return;
            }
            if (protocol::read_mark(static_cast<bool>(ec)) == protocol::mark_outcome::gave_up) {
                t->gave_up = true;  // gone (requeued, cancelled) or rewritten by someone else
                return;
            }
            t->version = st.version;
            t->marked = true;
            if (t->dirty && !t->done) {
                t->progress_timer.expires_at(t->last_write + std::chrono::seconds(1));
                t->progress_timer.async_wait([t](zkco::error_code wec) {
                    if (!wec) {
                        write_assignment(t);
                    }
                });
            }
        }
    );
}

void progress_reported(const std::shared_ptr<running_task>& t) {
    t->dirty = true;
    if (t->run.running_ms == 0 || t->writing || t->done || t->gave_up) {
        return;  // the mark carries it, or the write in flight schedules the next
    }
    t->progress_timer.expires_at(
        std::max(asio::steady_timer::clock_type::now(), t->last_write + std::chrono::seconds(1))
    );
    t->progress_timer.async_wait([t](zkco::error_code ec) {
        if (!ec) {
            write_assignment(t);
        }
    });
}

void record_progress(
    const std::shared_ptr<running_task>& t, std::size_t part, double fraction, std::string message
) {
    if (part < t->progress.size() && std::isfinite(fraction)) {
        t->progress[part] = std::clamp(fraction, 0.0, 1.0);
        t->progress_message = std::move(message);
        progress_reported(t);
    }
}

}  // namespace zkd::roles::detail
