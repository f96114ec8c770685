// SPDX-License-Identifier: MIT
// Exec task types: operator-registered programs run as child processes whose pipes and exit
// are Asio operations on the worker's event loop (docs/exec.md).
#pragma once

#include "handlers/registry.hpp"

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <utility>
#include <vector>

namespace zkd::handlers::exec {

/// What a program's stdout is: one JSON value, or text (the result is a JSON string).
enum class output_mode { json, text };

/// How a type runs its program: once per task, or served (started once, given tasks one at
/// a time over JSON-lines frames, docs/exec.md "Serve mode").
enum class run_mode { once, serve };

inline constexpr std::size_t default_max_output = std::size_t{256} * 1024;
/// A result holds at most 512 KiB (docs/protocol.md §5): more output could not be stored.
inline constexpr std::size_t max_max_output = std::size_t{512} * 1024;
/// The fd a program writes progress lines on (docs/exec.md "Progress").
inline constexpr int progress_fd = 3;
/// How much of stderr's end a failure's message quotes.
inline constexpr std::size_t stderr_tail_bytes = 2048;

/// One exec type as the operator configured it (`--exec`, `exec.NAME.*` in the config file).
struct program_config {
    std::string name;               ///< the task type
    std::vector<std::string> argv;  ///< argv[0] is the program: a path, or a name in $PATH
    output_mode output = output_mode::json;
    std::chrono::milliseconds timeout{0};         ///< for tasks that set none; 0: none
    std::chrono::milliseconds max_timeout{0};     ///< caps a task's own timeout; 0: no cap
    std::size_t max_output = default_max_output;  ///< stdout bytes; more: output_too_large
    int concurrency = 0;           ///< at most this many at once on a worker; 0: its slots
    std::vector<std::string> env;  ///< NAME (passed from zkd's environment) or NAME=VALUE
    std::string dir;               ///< working directory; empty: zkd's own
    std::string user;              ///< run as this user (zkd must be root); empty: zkd's
    std::chrono::milliseconds kill_grace{5000};  ///< SIGTERM to SIGKILL on stop
    run_mode mode = run_mode::once;
    // Served types only:
    int warm = 0;                ///< processes started at once (the rest on demand)
    int max_tasks = 0;           ///< a process is replaced after this many tasks; 0: never
    std::size_t max_memory = 0;  ///< a process over this RSS is replaced between tasks; 0: never
    std::chrono::milliseconds start_timeout{30'000};  ///< from start to its "ready" frame

    friend bool operator==(const program_config&, const program_config&) = default;
};

/// Splits `text` on spaces (and tabs) into words; runs of them count as one. No quoting:
/// `sh -c '...'` is how an operator asks for a shell.
[[nodiscard]] std::vector<std::string> split_argv(std::string_view text);

/// Parses the value of `--exec NAME=PROGRAM [ARG...]` (or of `--serve`, when `flag` says so:
/// the type is then served). Throws std::invalid_argument.
[[nodiscard]] program_config parse_exec_flag(
    std::string_view value, std::string_view flag = "--exec"
);

/// Applies one config file line `exec.NAME = PROGRAM [ARG...]` or `exec.NAME.SETTING =
/// VALUE` (`key` without the "exec." prefix: "NAME" or "NAME.SETTING"; a known SETTING
/// suffix wins over a dot in NAME). Throws std::invalid_argument naming the key.
void apply_setting(
    std::map<std::string, program_config>& types, std::string_view key, std::string_view value
);

/// One `exec.*` line of a config file: its key without "exec.", its value, and where it is
/// ("FILE:LINE").
struct file_setting {
    std::string key;
    std::string value;
    std::string where;
};

/// The exec types of a configuration: the config file's `exec.*` lines, then the `--exec`
/// and `--serve` flags, whose program (and mode) replaces the file's for the same type (the
/// file's settings still apply). Refused: a type given twice by `--exec` or `--serve`, a flag's
/// type name ending in a setting
/// (`x.timeout`), and a file key `exec.A.B` defining a type where A is a type of the same
/// configuration (`exec.A`, `exec.A.SETTING` or `--exec A=`): B is then an unknown setting
/// of A, and the message names the nearest one.
/// Throws std::invalid_argument; a message about a file line begins with its "FILE:LINE: ".
[[nodiscard]] std::map<std::string, program_config> configure(
    const std::vector<file_setting>& file,
    const std::vector<std::string>& flags,
    const std::vector<std::string>& serve_flags = {}
);

/// "512", "64KiB", "1MiB", "2k", "3M", "1GiB", "2G" (binary units): bytes, or nullopt.
[[nodiscard]] std::optional<std::size_t> parse_size(std::string_view text);

/// Who a program runs as.
struct identity {
    uid_t uid = 0;
    gid_t gid = 0;
    std::vector<gid_t> groups;
};

/// A program checked and resolved at start-up, ready to run.
struct program {
    program_config config;
    std::string path;              ///< absolute path of argv[0]
    std::vector<std::string> env;  ///< NAME=VALUE, as the program gets them
    std::optional<identity> user;
};

/// Looks a variable up in zkd's environment.
using env_lookup = std::function<std::optional<std::string>(const std::string&)>;

/// Checks `c` (a program, an executable regular file; a valid type name; the user exists and
/// zkd may switch to it; the directory exists) and resolves it. `lookup` reads zkd's
/// environment (PATH for a bare program name, the variables `env` passes through). Throws
/// std::invalid_argument with a message naming the type.
[[nodiscard]] program resolve(program_config c, const env_lookup& lookup);

/// How one run ended, as run_program saw it.
struct run_outcome {
    std::string start_error;        ///< non-empty: the program could not be started
    int exit_code = -1;             ///< its exit status when it exited
    int signal = 0;                 ///< the signal that killed it, if one did
    bool output_too_large = false;  ///< stdout went over max_output (it was killed)
    bool stopped = false;           ///< stop was requested while it ran
    std::string output;             ///< stdout (empty when too large)
    std::string stderr_tail;        ///< the last stderr_tail_bytes of stderr
};

/// The task's result from how its program ended (docs/exec.md "The contract").
[[nodiscard]] handler_result classify(const program_config& c, const run_outcome& o);

/// One progress line (`{"progress":0.4,"message":"..."}`): the fraction (clamped to [0,1])
/// and message (cut to 200 bytes), or nullopt if the line is not one.
[[nodiscard]] std::optional<std::pair<double, std::string>> parse_progress_line(
    std::string_view line
);

/// Runs `p` once on the calling coroutine's executor, which must be the loop thread that
/// stays alive while children run (PR_SET_PDEATHSIG follows the forking thread): `input` on
/// stdin, stdout and stderr read, progress lines passed to `progress` (may be empty), every
/// child reaped before it completes. `stop` sends SIGTERM to the program's process group,
/// then SIGKILL after kill_grace. The coroutine's own cancellation is ignored. `p` must
/// outlive the call. `extra_env` entries (NAME=VALUE) are added to the program's environment.
[[nodiscard]] boost::asio::awaitable<run_outcome> run_program(
    const program& p,
    std::string input,
    std::stop_token stop,
    progress_fn progress,
    std::vector<std::string> extra_env = {}
);

/// Registers `p` in `reg` as an asynchronous type (at most `concurrency` at once, its
/// timeouts as type_limits); a served type (mode serve) through add_served_type. Also sets SIGPIPE
/// to be ignored if it was at its default (a program closing stdin early must not kill the worker).
/// Throws as registry::add does.
void add_exec_type(registry& reg, program p);

/// Registers the served type `p` (docs/exec.md "Serve mode"): its handler, and a service
/// (registry::add_service) that starts its warm processes and, once stopped, closes every
/// process's stdin (after the tasks in flight) and awaits their exit. Its processes live on
/// the executor of whichever starts first, the service or a task.
void add_served_type(registry& reg, program p);

}  // namespace zkd::handlers::exec
