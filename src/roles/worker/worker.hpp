// SPDX-License-Identifier: MIT
#pragma once

#include "handlers/registry.hpp"
#include "protocol/delay.hpp"
#include "protocol/layout.hpp"
#include "protocol/task.hpp"
#include "reactor/compute_pool.hpp"
#include "reactor/event.hpp"
#include "roles/worker/worker_stats.hpp"
#include "zkco/client.hpp"

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>

namespace zkd::roles {

struct worker_options {
    /// A task still running this long gets its running mark (T3); shorter ones never pay
    /// that write.
    std::chrono::milliseconds running_mark_after{50};
    /// Once set, the worker drains: it marks its /workers node `draining` (the master sends
    /// it nothing more), finishes and publishes what it holds, then completes. May be null.
    reactor::event* drain = nullptr;
    /// Called on the executor for each result this worker published (T4 committed): final
    /// results only, not a try that ended with a retry (worker_stats::retried counts those).
    std::function<void(const protocol::task_result&)> on_published;
    /// Per task type, the retries and backoff a task that names none gets (docs/protocol.md
    /// §4.3; `zkd run --retry TYPE=N:BASE[:MAX]`); a type not here: no retries.
    std::map<std::string, protocol::backoff_policy> retry_defaults;
};

/// Runs `me` as a worker for as long as the session lasts (docs/protocol.md §7 "Worker"):
/// registers (/workers/<id> and /assign/<id>), watches only its assignment directory, runs
/// each task's handler from `reg` on `pool` (never on the event loop; an asynchronous type,
/// such as an exec type, on the loop without a pool thread) with the task's timeout (as the
/// type's limits shape it) and cancellation, and publishes results through T4 in batched
/// multis.
///
/// Completes when the session is gone (its error is logged), once drained (`opts.drain`), or
/// on cancellation (terminal:
/// running handlers are asked to stop and awaited; their results are not published, so the
/// master requeues those tasks once this session ends). `me.capacity`, `me.threads` and
/// `me.types` are advertised; `me.threads` unset means `pool`'s size, `me.types` empty means
/// every type in `reg`. `reg`, `pool` and `zk` must
/// outlive the call; `stats`, if given, is updated as work happens.
boost::asio::awaitable<void> run_worker(
    zkco::client& zk,
    protocol::layout l,
    protocol::member_info me,
    const handlers::registry& reg,
    reactor::compute_pool& pool,
    worker_options opts = {},
    worker_stats* stats = nullptr
);

}  // namespace zkd::roles
