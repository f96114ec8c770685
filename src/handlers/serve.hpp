// SPDX-License-Identifier: MIT
// Served exec types (docs/exec.md "Serve mode"), the pure parts: the JSON-lines frames zkd
// and a served program exchange, and the decisions of a type's process pool (which process
// takes a task, when one is started, recycled or replaced, the backoff and the crash-loop
// rule), without processes or timers, so that they are unit-tested as they are.
#pragma once

#include <boost/json/value.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace zkd::handlers::exec::serve {

/// The framing's version, in the program's "ready" frame.
inline constexpr int protocol_version = 1;

// --- frames ----------------------------------------------------------------------------------

/// What zkd hands a program: one task.
struct task_frame {
    std::string id;  ///< a task id; in a bundle "<bundle id>.<index>"
    int attempt = 1;
    std::int64_t epoch = 0;
    std::string type;
    boost::json::value args;
    std::int64_t deadline_ms = 0;  ///< epoch ms when zkd times it out; 0: none
};

/// The line (with its "\n") of a task frame.
[[nodiscard]] std::string encode(const task_frame& t);
/// The line (with its "\n") of a cancel frame for the task `id`.
[[nodiscard]] std::string encode_cancel(std::string_view id);

/// {"op":"ready","protocol":N}
struct ready_frame {
    std::int64_t protocol = 0;
};
/// {"op":"progress","id":...,"fraction":F,"message":...}: fraction clamped to [0,1], message
/// cut to 200 bytes.
struct progress_frame {
    std::string id;
    double fraction = 0;
    std::string message;
};
/// {"op":"log","level":...,"message":...}: level one of debug, info, warn, error (anything
/// else: info).
struct log_frame {
    std::string level;
    std::string message;
};
/// {"op":"result","id":...,"value":V}
struct result_frame {
    std::string id;
    boost::json::value value;
};
/// {"op":"error","id":...,"message":...,"code":...}: code handler_error when absent.
struct error_frame {
    std::string id;
    std::string code;
    std::string message;
};
/// A frame whose op zkd does not know (ignored: room to grow).
struct unknown_frame {
    std::string op;
};

using frame =
    std::variant<ready_frame, progress_frame, log_frame, result_frame, error_frame, unknown_frame>;

/// A log frame's level, in order; `off` is above them all.
enum class log_level { debug, info, warn, error, off };

/// Parses one line (without its "\n"). An error (the message says why) when it is not a JSON
/// object with a string "op", or a known op misses a member it needs or has one of the wrong
/// kind (an "id" that is no string, a progress without a number, an error code that is no
/// code word [a-z0-9_]{1,64}). Unknown members are ignored.
/// A log frame's message is cut to 4096 bytes and made printable when its level is at least
/// `logged`, else left empty: the caller logs only from that level on, and a frame below it
/// costs no copy. Parsing allocates nothing beyond what the frame keeps.
[[nodiscard]] std::variant<frame, std::string> parse_frame(
    std::string_view line, log_level logged = log_level::debug
);

/// Drops from `frames` (in the order one program wrote them) every progress frame that a later
/// progress frame of the same task supersedes: one that is followed, with nothing but log and
/// unknown frames between, by another progress frame with the same id. Only the latest
/// progress between two publications matters (docs/exec.md "Progress"); a result, an error or
/// a ready frame between two progress frames keeps both, and so does another task's id.
void coalesce_progress(std::vector<frame>& frames);

/// Splits a byte stream into lines of at most `max_line` bytes (without the "\n").
class line_splitter {
public:
    explicit line_splitter(std::size_t max_line) : max_(max_line) {}

    /// Appends `data`; complete lines go to `lines`, as views into `data` or into the
    /// splitter (a line begun by an earlier feed), valid until the next feed. False once a
    /// line is longer than max_line (the stream is then useless: the caller replaces the
    /// program).
    bool feed(std::string_view data, std::vector<std::string_view>& lines);

private:
    std::size_t max_;
    std::string partial_;  // the start of a line whose end has not come yet
    std::string joined_;   // the line that an earlier feed began and the latest one ended
};

// --- the pool's decisions --------------------------------------------------------------------

/// Whether a process that exited with a task in flight had read none of the task's frame, so
/// that the task goes to another process instead of failing (the process died of something
/// else, e.g. killed while idle just as the task was handed to it). The frame starts at byte
/// `frame_at` of the process's stdin; `sent` bytes reached the pipe, `unread` of them were
/// still in it when the process was gone. A program that read any of the frame has seen its
/// task: its death fails the task.
[[nodiscard]] constexpr bool frame_unread(
    std::uint64_t frame_at, std::uint64_t sent, std::uint64_t unread
) {
    return sent - (unread < sent ? unread : sent) <= frame_at;
}

/// How many times one task goes to another process because the one it was handed to died
/// before it read the task (frame_unread); the next such death fails it.
inline constexpr int max_handbacks = 3;

/// A served type's pool settings (program_config's serve settings).
struct pool_settings {
    int concurrency = 1;         ///< most processes at once (each runs one task at a time)
    int warm = 0;                ///< processes started at once and kept
    int max_tasks = 0;           ///< a process is recycled after this many tasks; 0: never
    std::size_t max_memory = 0;  ///< a process over this RSS (bytes) is recycled; 0: never
    int crash_loop = 5;          ///< this many failed starts in a row: unhealthy
    std::chrono::milliseconds backoff_min{100};
    std::chrono::milliseconds backoff_max{10'000};
};

/// What the pool does next with its processes, decided from counts alone. Processes are
/// numbered by the shell (`proc` ids); the pool keeps their state.
class pool_fsm {
public:
    explicit pool_fsm(pool_settings s) : s_(s) {}

    enum class state { starting, idle, busy, retiring };

    /// How many processes to start now: enough for the waiting tasks and `warm`, within
    /// concurrency, none while backing off (see backoff()).
    [[nodiscard]] int to_start() const;
    /// The delay before the next start may happen (zero: none), after failures in a row.
    [[nodiscard]] std::chrono::milliseconds backoff() const;
    /// True while the backoff holds starts back (the shell arms a timer and calls
    /// backoff_over()).
    [[nodiscard]] bool backing_off() const { return backing_off_; }
    void backoff_over() { backing_off_ = false; }

    /// A process `proc` was started (spawned; not ready yet).
    void started(int proc);
    /// `proc` said "ready": it may take tasks; a crash loop is over.
    void ready(int proc);
    /// `proc` ended before it was ready (exited, or its start timed out).
    void start_failed(int proc);

    /// A task waits for a process.
    void task_waiting() { ++waiting_; }
    /// A waiting task gave up (stopped before it got a process).
    void task_gave_up() { --waiting_; }
    /// The idle process the next waiting task goes to (the longest-lived idle one, so that
    /// warm ones stay hot), or nullopt. Marks it busy.
    std::optional<int> assign();

    /// `proc` answered its task (result or error). True if it must now be recycled (max-tasks,
    /// or `rss` over max-memory): it is then retiring, else idle.
    bool task_done(int proc, std::size_t rss);
    /// `proc` is being replaced (a bad frame, a cancel not answered in time, recycling): it
    /// takes no more tasks.
    void retire(int proc);
    /// `proc` exited. `expected`: it was retiring; else it crashed (while idle or busy), which
    /// counts for the backoff.
    void exited(int proc, bool expected);

    /// Failed starts in a row reached crash_loop: the type takes no tasks until a start
    /// succeeds again (the shell keeps retrying with backoff).
    [[nodiscard]] bool unhealthy() const { return unhealthy_; }
    [[nodiscard]] int failed_starts() const { return failed_starts_; }
    [[nodiscard]] int waiting() const { return waiting_; }
    /// Processes alive and counted against concurrency (starting, idle, busy).
    [[nodiscard]] int live() const;
    [[nodiscard]] std::optional<state> state_of(int proc) const;

private:
    struct entry {
        int proc;
        state st;
        int tasks = 0;
    };
    entry* find(int proc);
    [[nodiscard]] const entry* find(int proc) const;
    void failure();

    pool_settings s_;
    std::vector<entry> procs_;  // in the order they were started
    int waiting_ = 0;
    int failures_ = 0;       // failed starts and crashes in a row (the backoff)
    int failed_starts_ = 0;  // failed starts in a row (the crash-loop rule)
    bool unhealthy_ = false;
    bool backing_off_ = false;
};

}  // namespace zkd::handlers::exec::serve
