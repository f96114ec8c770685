// SPDX-License-Identifier: MIT
// Exec task types: operator-registered programs run as child processes whose pipes and exit
// are Asio operations on the worker's event loop (docs/exec.md).
#pragma once

#include "handlers/registry.hpp"

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
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

/// A type's resource limits per program process (docs/exec.md "Limits"); 0: none.
struct resource_limits {
    std::size_t memory = 0;                 ///< memory-limit, bytes
    std::chrono::milliseconds cpu_time{0};  ///< cpu-limit as CPU time (`30s`): per process
    int cpu_percent = 0;                    ///< cpu-limit as a share of one core (`50%`)
    int max_processes = 0;                  ///< max-processes
    int max_open_files = 0;                 ///< max-open-files

    [[nodiscard]] bool any() const {
        return memory > 0 || cpu_time.count() > 0 || cpu_percent > 0 || max_processes > 0 ||
               max_open_files > 0;
    }
    friend bool operator==(const resource_limits&, const resource_limits&) = default;
};

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
    int nice = 0;  ///< added to zkd's niceness for the program (`nice -n`), 0 to 19
    run_mode mode = run_mode::once;
    resource_limits limits;
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

/// Parses `cpu-limit`: a CPU time with its unit (`30s`, `1m30s`, `500ms`), a share of one
/// core (`50%`, `150%`: 1 to 100000), or both separated by a comma (`30s,50%`), into `l`.
/// Throws std::invalid_argument naming `key`.
void parse_cpu_limit(std::string_view key, std::string_view value, resource_limits& l);

// --- limits: how they are enforced and what a run's end says about them ----------------------

/// How a worker enforces the limits of its exec types (`zkd run --exec-limits`).
enum class limits_mode { automatic, cgroup, rlimit };

/// What the worker found of cgroup v2 at start-up (detect_cgroup).
struct cgroup_support {
    bool usable = false;  ///< a writable cgroup v2 subtree with at least one controller below
    std::string reason;   ///< why not, when not usable
    std::string path;     ///< the directory of the worker's cgroup (its programs' parent)
    bool memory = false;  ///< the controllers available there
    bool cpu = false;
    bool pids = false;
};

/// How one limit is enforced.
enum class enforcement { none, rlimit, cgroup };

/// How each of a type's limits is enforced on this worker (plan_limits).
struct limit_plan {
    enforcement memory = enforcement::none;      ///< cgroup memory.max, or RLIMIT_DATA
    enforcement cpu_time = enforcement::none;    ///< RLIMIT_CPU (per process) in both
    enforcement cpu_share = enforcement::none;   ///< cgroup cpu.max; not with rlimits
    enforcement processes = enforcement::none;   ///< cgroup pids.max, or RLIMIT_NPROC (user)
    enforcement open_files = enforcement::none;  ///< RLIMIT_NOFILE in both

    [[nodiscard]] bool uses_cgroup() const {
        return memory == enforcement::cgroup || cpu_share == enforcement::cgroup ||
               processes == enforcement::cgroup;
    }
    friend bool operator==(const limit_plan&, const limit_plan&) = default;
};

/// How `l` is enforced given `cg` (its controllers; nothing of it unless usable) and whether
/// the program runs as a `user` of its own (RLIMIT_NPROC counts a user's processes and does not
/// hold for root). Pure.
[[nodiscard]] limit_plan plan_limits(
    const resource_limits& l, const cgroup_support& cg, bool has_user
);

/// One line for the start-up log: each limit set and how it is enforced (or why it is not).
[[nodiscard]] std::string describe_limits(const resource_limits& l, const limit_plan& plan);

/// What the end of a run tells about limits.
struct limit_evidence {
    int exit_code = -1;
    int signal = 0;
    bool stopped = false;                    ///< zkd stopped or killed it (cancel, timeout, ...)
    std::chrono::milliseconds cpu_used{-1};  ///< the program's CPU time; -1: unknown
    std::uint64_t oom_kills = 0;             ///< its cgroup's memory.events oom_kill
    std::uint64_t pids_max = 0;              ///< its cgroup's pids.events max
    std::string_view stderr_tail;
};

/// The limit a failed run went over, as a task error naming it (memory_limit, cpu_limit,
/// process_limit, open_files_limit), or nullopt (a run that exited 0, or no sign of a limit).
/// Certain: an OOM kill or a failed fork counted by the cgroup, death by SIGXCPU, or SIGKILL
/// with the CPU time used up. Inferred from stderr (said so in the message): an allocation
/// failure under RLIMIT_DATA, "Too many open files" under RLIMIT_NOFILE, "Resource
/// temporarily unavailable" under RLIMIT_NPROC. Pure.
[[nodiscard]] std::optional<protocol::task_error> limit_exceeded(
    const resource_limits& l, const limit_plan& plan, const limit_evidence& e
);

/// Looks for a cgroup v2 subtree the worker may use for its programs and prepares it: the
/// worker moves itself into a leaf `zkd` of its own cgroup and enables the memory, cpu and
/// pids controllers for the programs' cgroups beside it. `mode` rlimit: nothing is tried;
/// automatic: only a delegated cgroup (systemd's `Delegate=`, marked by the
/// trusted.delegate or user.delegate attribute) is used; cgroup: any writable one. Never
/// throws; `reason` says why it is not usable.
[[nodiscard]] cgroup_support detect_cgroup(limits_mode mode);

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
    limit_plan plan;            ///< how config.limits is enforced (plan_limits)
    std::string cgroup_parent;  ///< where its programs' cgroups go, when plan uses one
};

/// Looks a variable up in zkd's environment.
using env_lookup = std::function<std::optional<std::string>(const std::string&)>;

/// Checks `c` (a program, an executable regular file; a valid type name; the user exists and
/// zkd may switch to it; the directory exists) and resolves it. `lookup` reads zkd's
/// environment (PATH for a bare program name, the variables `env` passes through). Throws
/// std::invalid_argument with a message naming the type.
/// `cg` decides how its limits are enforced (plan_limits).
[[nodiscard]] program resolve(
    program_config c, const env_lookup& lookup, const cgroup_support& cg = {}
);

/// How one run ended, as run_program saw it.
struct run_outcome {
    std::string start_error;                 ///< non-empty: the program could not be started
    int exit_code = -1;                      ///< its exit status when it exited
    int signal = 0;                          ///< the signal that killed it, if one did
    bool output_too_large = false;           ///< stdout went over max_output (it was killed)
    bool stopped = false;                    ///< stop was requested while it ran
    std::string output;                      ///< stdout (empty when too large)
    std::string stderr_tail;                 ///< the last stderr_tail_bytes of stderr
    std::chrono::milliseconds cpu_used{-1};  ///< the program's CPU time (its tree's reaped)
    std::uint64_t oom_kills = 0;             ///< its cgroup's OOM kills
    std::uint64_t pids_max = 0;              ///< forks its cgroup refused at pids.max
};

/// The task's result from how its program ended (docs/exec.md "The contract"); a limit's
/// code when limit_exceeded finds one under `plan`.
[[nodiscard]] handler_result classify(
    const program_config& c, const run_outcome& o, const limit_plan& plan = {}
);

/// One progress line (`{"progress":0.4,"message":"..."}`): the fraction (clamped to [0,1])
/// and message (cut to 200 bytes), or nullopt if the line is not one.
[[nodiscard]] std::optional<std::pair<double, std::string>> parse_progress_line(
    std::string_view line
);

/// Runs `p` once on the calling coroutine's executor, under its supervisor (docs/exec.md "How
/// it runs"): `input` on stdin, stdout and stderr read, progress lines passed to `progress`
/// (may be empty), every child reaped before it completes. `stop` sends SIGTERM to every
/// process of the program's tree, then SIGKILL after kill_grace. The coroutine's own cancellation
/// is ignored. `p` must outlive the call. `extra_env` entries (NAME=VALUE) are added to the
/// program's environment.
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
/// Throws std::invalid_argument when no supervisor program (zkd-supervise) can be found, and as
/// registry::add does.
void add_exec_type(registry& reg, program p);

/// Registers the served type `p` (docs/exec.md "Serve mode"): its handler, and a service
/// (registry::add_service) that starts its warm processes and, once stopped, closes every
/// process's stdin (after the tasks in flight) and awaits their exit. Its processes live on
/// the executor of whichever starts first, the service or a task.
void add_served_type(registry& reg, program p);

}  // namespace zkd::handlers::exec
