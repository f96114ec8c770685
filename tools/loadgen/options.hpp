// SPDX-License-Identifier: MIT
// zkd-loadgen's command line: the settings of one run and their parser. Pure: no I/O.
#pragma once

#include "zkco/config.hpp"

#include <boost/json/value.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace zkd::loadgen {

/// Exit codes of zkd-loadgen, for scripts.
enum exit_code : int {
    exit_ok = 0,           ///< every task succeeded (or --raw alone measured)
    exit_errors = 1,       ///< some task did not succeed, or the run failed
    exit_usage = 2,        ///< bad command line
    exit_unreachable = 3,  ///< ZooKeeper not reached within --connect-timeout
    exit_stalled = 4,      ///< no result for --stall-timeout while tasks were in flight
    exit_no_workers = 5,   ///< no cluster in the namespace, or no worker for the task type
};

/// What each task runs: `echo` (args: a string of `payload` bytes), `spin:MS` or `sleep:MS`
/// (args: {"ms": MS}, plus a "pad" string of `payload` bytes when payload > 0).
struct task_kind {
    std::string type = "echo";
    std::int64_t ms = 0;
    /// --type NAME --args JSON: any registered type, every task with these args.
    std::optional<boost::json::value> args;

    friend bool operator==(const task_kind&, const task_kind&) = default;
};

/// Parses "echo", "spin:MS" or "sleep:MS" (MS from 0 to 86400000); nullopt otherwise.
std::optional<task_kind> parse_task_kind(const std::string& s);

/// The args a task of `kind` carries with a payload of `payload` bytes.
boost::json::value task_args(const task_kind& kind, std::size_t payload);

/// --auto-bundle's default: the client's (task_client::default_auto_bundle, checked where
/// both are seen).
inline constexpr std::uint64_t default_auto_bundle = 64;

/// Everything one zkd-loadgen run is told.
struct settings {
    std::string zk = "127.0.0.1:2181";      ///< hosts[/path], validated
    std::string ns = "default";             ///< the cluster is <path>/zkd/<ns>
    std::optional<zkco::credentials> auth;  ///< --user and its password
    std::chrono::milliseconds connect_timeout{10'000};
    std::chrono::milliseconds session_timeout{10'000};

    // What to run. Without --tasks and --duration: 1000 tasks.
    std::optional<std::uint64_t> tasks;                 ///< stop submitting after this many
    std::optional<std::chrono::milliseconds> duration;  ///< stop submitting after this long
    std::optional<double> rate;                         ///< open loop: tasks per second
    std::uint64_t concurrency = 64;                     ///< closed loop: tasks in flight
    task_kind kind;
    std::size_t payload = 16;
    std::uint64_t batch = 1;   ///< tasks per task_client::submit call
    std::uint64_t bundle = 1;  ///< most tasks per bundle (submit_options::bundle)
    std::uint64_t auto_bundle = default_auto_bundle;  ///< task_client::auto_bundle (1: off)
    bool direct = true;                               ///< task_client::place_directly
    int priority = 5;
    std::chrono::milliseconds task_timeout{0};
    int max_attempts = 3;
    std::uint64_t max_in_flight = 100'000;  ///< open loop: falls behind beyond this

    // Guards.
    std::chrono::milliseconds stall_timeout{30'000};
    std::chrono::milliseconds wait_workers{10'000};
    std::uint64_t min_workers = 1;  ///< workers serving the type to wait for
    bool require_workers = true;    ///< false: --allow-no-workers
    bool submit_only = false;       ///< do not wait for results

    // The raw ceiling.
    bool raw = false;  ///< measure the ceiling (--raw or --with-raw)
    bool load = true;  ///< drive tasks (false with --raw alone)
    std::uint64_t raw_ops = 20'000;
    std::uint64_t raw_window = 1'000;
    std::uint64_t raw_batch = 20;
    int raw_rounds = 3;
    int raw_warmup = 1;
    std::optional<std::size_t> raw_payload;  ///< default: the size of one encoded task

    // Output.
    bool json = false;
    std::optional<bool> progress;  ///< unset: when stderr is a terminal
    bool mntr = true;
    std::string cdf_file;    ///< empty: none
    std::string trace_file;  ///< empty: none
};

/// A bad command line; what() says what is wrong, in one line.
struct usage_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

/// The outcome of parsing: settings, or a request for --help.
struct parsed_args {
    settings s;
    bool help = false;
};

/// Reads an environment variable; nullopt when unset.
using env_lookup = std::function<std::optional<std::string>(const char*)>;

/// Parses argv[1..] (`--name value` or `--name=value`; switches take no value). `env` gives
/// ZKD_ZK and ZKD_NAMESPACE, used when --zk or --namespace is absent. Throws usage_error for
/// an unknown option, a missing or malformed value, or a contradiction (--rate with
/// --concurrency, --raw with --with-raw, ...).
parsed_args parse_args(const std::vector<std::string>& args, const env_lookup& env);

/// The --help text.
const char* help_text() noexcept;

}  // namespace zkd::loadgen
