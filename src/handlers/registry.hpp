// SPDX-License-Identifier: MIT
#pragma once

#include "protocol/task.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/assert/source_location.hpp>
#include <boost/json/value.hpp>
#include <boost/system/result.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

namespace zkd::handlers {

/// The error codes of docs/protocol.md §5 (protocol::codes). A handler fails with one of
/// handler_error, bad_args, timeout, cancelled, output_too_large or a limit's code
/// (memory_limit, cpu_limit, process_limit, open_files_limit); run_handler adds
/// unknown_type when nothing is registered for the type.
namespace codes = protocol::codes;

/// Why a task failed: becomes the result's `error` object (`{"code":c,"message":m}`).
using handler_error = protocol::task_error;

/// What a handler yields: its JSON value (the result's `value`), or why it failed.
using handler_result = boost::system::result<boost::json::value, handler_error>;

/// What handler_result::value() throws when the result holds an error; error() is the
/// handler_error, what() "<code>: <message>".
using handler_exception = protocol::task_error_exception;

/// What a running task reports of its progress: `fraction` in [0, 1] and a short message.
/// Cheap to call often: the worker keeps the latest and publishes it throttled
/// (docs/protocol.md §4, T3).
using progress_fn = std::function<void(double fraction, std::string message)>;

/// Runs one task: `args` is the task's `args` as is. Called on a compute-pool thread, never on
/// the event loop; several calls may run at once, so a handler must be thread-safe. A
/// long-running handler polls `stop` (or hooks it with std::stop_callback) and then returns
/// a `cancelled` error; the worker requests stop on cancellation and on the task's timeout.
/// Throwing is allowed: run_handler turns any exception into a `handler_error` result.
using task_handler =
    std::function<handler_result(const boost::json::value& args, std::stop_token stop)>;

/// A task_handler that also reports progress: `progress` may be called from the handler's
/// thread as often as it likes (the worker hands the reports to its loop). Never empty.
using progress_task_handler = std::function<handler_result(
    const boost::json::value& args, std::stop_token stop, const progress_fn& progress
)>;

/// What an asynchronous handler gets for one task.
struct async_call {
    boost::json::value args;  ///< the task's `args` as is
    std::string task;         ///< its id; a bundle's task: "<bundle id>.<index>"
    int attempt = 1;          ///< the assignment's attempt (docs/protocol.md §4)
    /// The assignment's epoch (0: placed directly by a client): with the id and attempt, the
    /// fencing token a program can hand to what it writes to.
    std::int64_t epoch = 0;
    /// The timeout the worker applies to this call, counted from started(); zero: none.
    std::chrono::milliseconds timeout{0};
    /// Requested on cancellation, on the task's timeout and on shutdown: the handler then
    /// ends its work promptly and returns (any result; the worker reports why it stopped).
    /// The awaitable's own cancellation is not used: stop is the one way to stop it.
    std::stop_token stop;
    /// Call once the work really starts (say after waiting for a concurrency limit): the
    /// task's timeout counts from then. Never empty.
    std::function<void()> started;
    /// Progress reports (see progress_fn). Never empty.
    progress_fn progress;
};

/// Runs one task on the worker's event loop (no compute-pool thread): for work that waits
/// rather than computes, such as a child process (exec types, docs/exec.md). It must never
/// block the loop. Throwing is allowed: run_async_handler turns it into handler_error.
using async_task_handler = std::function<boost::asio::awaitable<handler_result>(async_call)>;

/// Something that runs on the event loop beside the handlers while a node runs (a served
/// exec type's processes, docs/exec.md "Serve mode"): started before the node joins, asked to
/// stop through its stop_token once the node has finished (its tasks drained or stopped), and
/// awaited before the loop ends. It must end promptly once asked.
using service = std::function<boost::asio::awaitable<void>(std::stop_token)>;

/// Per-type timeouts the worker applies to a task (both kinds of handler).
struct type_limits {
    /// The timeout of a task that sets none; zero: none.
    std::chrono::milliseconds default_timeout{0};
    /// The most a task may ask for (its own timeout is capped to this); zero: no cap.
    std::chrono::milliseconds max_timeout{0};

    /// The timeout a task asking for `requested` (zero: none) runs with; zero: none.
    [[nodiscard]] std::chrono::milliseconds effective(std::chrono::milliseconds requested) const;
};

/// True if `type` can name a task type: 1 to 128 characters of [A-Za-z0-9_.:-].
[[nodiscard]] bool is_valid_type_name(std::string_view type) noexcept;

/// Which types cannot run now (a served type whose program keeps failing to start,
/// docs/exec.md "Crashes, crash loops and health"): the types say so, the worker publishes it
/// (the `unhealthy` of its /workers node) so that placement skips it for them. Thread-safe.
class type_health {
public:
    /// Marks `type` unhealthy, or healthy again; on a change, calls the listener (on the
    /// calling thread, without the lock).
    void set(const std::string& type, bool unhealthy);
    /// The unhealthy types, sorted.
    [[nodiscard]] std::vector<std::string> unhealthy() const;
    /// Who to tell of a change (replaces the previous one; empty: nobody).
    void on_change(std::function<void()> f);

private:
    mutable std::mutex mutex_;
    std::vector<std::string> unhealthy_;  // sorted
    std::function<void()> listener_;
};

/// The task types a worker serves (the `types` of its /workers node) and their handlers.
///
/// Thread safety: fill it before the worker starts; afterwards, concurrent const calls are
/// safe. add() must not run concurrently with anything else.
class registry {
public:
    /// Registers `h` for `type`. Throws std::invalid_argument if `type` is not a valid type
    /// name (is_valid_type_name), is already registered, or `h` is empty.
    void add(std::string type, task_handler h);

    /// Registers a synchronous handler the worker may run on its event loop instead of the
    /// compute pool: one whose work is bounded by its args' size (which the loop has parsed
    /// already) and that never waits, such as `echo`. A task of it saves the pool's round
    /// trip. Otherwise as add(), and find() returns it. Throws as add() does.
    void add_inline(std::string type, task_handler h);

    /// Registers a synchronous handler that reports progress. Throws as add() does.
    void add(std::string type, progress_task_handler h);

    /// Registers an asynchronous handler (run on the event loop) for `type`, with its
    /// timeouts. Throws as add() does.
    void add_async(std::string type, async_task_handler h, type_limits limits = {});

    /// The synchronous handler for `type` (added as a task_handler), or nullptr (also for
    /// the other kinds). The pointer stays valid as long as the registry (later add() calls
    /// do not invalidate it).
    [[nodiscard]] const task_handler* find(std::string_view type) const;

    /// True if `type` has a synchronous handler of either kind (run_handler runs it).
    [[nodiscard]] bool has_sync(std::string_view type) const;

    /// True if `type` was registered with add_inline (runs on the worker's event loop).
    [[nodiscard]] bool runs_inline(std::string_view type) const;

    /// The synchronous handler with progress for `type`, or nullptr.
    [[nodiscard]] const progress_task_handler* find_with_progress(std::string_view type) const;

    /// The asynchronous handler for `type`, or nullptr (also for a synchronous type).
    [[nodiscard]] const async_task_handler* find_async(std::string_view type) const;

    /// The timeouts registered with `type` (none for synchronous types and unknown ones).
    [[nodiscard]] type_limits limits(std::string_view type) const;

    /// The registered types, sorted.
    [[nodiscard]] std::vector<std::string> types() const;

    /// Adds a service (see `service`): whoever runs a node with this registry runs it.
    void add_service(service s);
    /// The services, in the order they were added.
    [[nodiscard]] const std::vector<service>& services() const { return services_; }
    /// Its types' health (shared by the types and whoever runs them).
    [[nodiscard]] std::shared_ptr<type_health> health() const { return health_; }

private:
    struct entry {
        task_handler sync;
        progress_task_handler sync_progress;
        async_task_handler async;
        type_limits limits;
        bool on_loop = false;  // add_inline
    };
    void add_entry(std::string type, entry e);

    std::map<std::string, entry, std::less<>> handlers_;
    std::vector<service> services_;
    std::shared_ptr<type_health> health_ = std::make_shared<type_health>();
};

/// Runs the handler registered for `type` on the calling thread; never throws what the
/// handler throws. Errors: `unknown_type` (nothing registered), `handler_error` (the handler
/// threw, returned a code outside the five above, or `type` is asynchronous: those run
/// through run_async_handler), or the handler's own error. If `stop`
/// was requested by the time the handler returns, any error becomes `cancelled` (a value is
/// kept: the work was done); the caller, which knows why it requested stop, may report
/// `timeout` instead. `progress` (may be empty) receives the handler's progress reports.
[[nodiscard]] handler_result run_handler(
    const registry& reg,
    std::string_view type,
    const boost::json::value& args,
    std::stop_token stop,
    const progress_fn& progress = {}
);

/// run_handler for an asynchronous type: awaits its handler on the caller's executor, with
/// the same error rules. `unknown_type` if `type` has no asynchronous handler.
[[nodiscard]] boost::asio::awaitable<handler_result> run_async_handler(
    const registry& reg, std::string type, async_call call
);

/// For argument checks in handlers (the codec's own, protocol/task.hpp).
using protocol::as_int64;

}  // namespace zkd::handlers
