// SPDX-License-Identifier: MIT
#pragma once

// A running task's writes to its assignment node: the running mark (docs/protocol.md §6 T3),
// then its progress at most once a second (§9), one write at a time. Private to the worker.

#include "protocol/task.hpp"
#include "zkco/client.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stop_token>
#include <string>
#include <vector>

namespace zkd::roles::detail {

/// One assignment in this worker's hands: a task, or a bundle of tasks (§4.1).
struct running_task {
    explicit running_task(const boost::asio::any_io_executor& ex) : mark(ex), progress_timer(ex) {}

    std::stop_source stop;       // stops every handler of it: cancel marker, shutdown
    bool cancel_marker = false;  // stopped for its <tid>.cancel marker (worker_fsm says)
    // A bundle's: one per task, stopped for the task's own <tid>.<k>.cancel marker.
    std::vector<std::stop_source> entry_stop;
    bool done = false;
    boost::asio::steady_timer mark;  // when to write the running mark
    std::vector<double> progress;    // what each handler call reported last (-1: nothing)
    std::string progress_message;    // the last message reported

    // Writes to the assignment node (the running mark, then progress): one at a time.
    zkco::client* zk = nullptr;
    std::string worker;
    std::string tid;
    std::string assigned;      // the node as read, stamped with its assignment (the task as is)
    protocol::progress run;    // what the node holds of our run, as we last wrote it
    std::int32_t version = 0;  // the node's version we expect
    bool writing = false;      // a write is in flight
    bool dirty = false;        // progress newer than what was written
    bool gave_up = false;      // a write failed: the node is not ours to write any more
    bool marked = false;       // a write carrying running_ms applied (the mark, or a T4e)
    bool rewritten = false;    // a T4e rewrote `assigned` (docs/protocol.md §6 T4e)
    boost::asio::steady_timer progress_timer;  // at most one progress write a second
    boost::asio::steady_timer::time_point last_write{};
};

/// The running mark (T3), with the latest progress; later progress reports at most once a
/// second (docs/protocol.md §9). Only touches `t` and its session, never the worker, whose
/// session may complete these after it has gone.
void write_assignment(const std::shared_ptr<running_task>& t);

/// A handler reported progress: published with the running mark, or within a second.
void progress_reported(const std::shared_ptr<running_task>& t);

/// Keeps what a handler call (`part` of the assignment) reported, on the loop.
void record_progress(
    const std::shared_ptr<running_task>& t, std::size_t part, double fraction, std::string message
);

}  // namespace zkd::roles::detail
