// SPDX-License-Identifier: MIT
// zkd-swarm's command line: the settings of one run and their parser. Pure: no I/O.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace zkd::swarm {

/// Exit codes of zkd-swarm, for scripts.
enum exit_code : int {
    exit_ok = 0,           ///< every worker joined; stopped by a signal or --duration
    exit_errors = 1,       ///< some worker never joined, or the run failed
    exit_usage = 2,        ///< bad command line
    exit_unreachable = 3,  ///< ZooKeeper not reached within --connect-timeout
    exit_no_cluster = 5,   ///< no set-up zkd cluster in the namespace within --connect-timeout
};

/// Everything one zkd-swarm run is told.
struct settings {
    std::string zk = "127.0.0.1:2181";  ///< hosts[/path], validated
    std::string ns = "default";         ///< the cluster is <path>/zkd/<ns>
    std::uint64_t workers = 100;
    int capacity = 4;
    int threads = 1;  ///< advertised `threads` (placement keeps that many tasks together)
    /// How long an `echo` task takes (its handler waits on a timer, not a thread).
    std::chrono::milliseconds task_ms{0};
    /// Uniform extra 0..jitter on top of task_ms, per task.
    std::chrono::milliseconds task_jitter{0};
    double connect_rate = 200;  ///< sessions opened per second, at most
    std::chrono::milliseconds connect_timeout{30'000};
    std::chrono::milliseconds session_timeout{10'000};
    std::optional<std::chrono::milliseconds> duration;  ///< drain and stop after this long
    std::string host;                                   ///< member ids' host part; empty: hostname
    bool json = false;
};

/// A bad command line; what() says what is wrong, in one line.
struct usage_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct parsed_args {
    settings s;
    bool help = false;
};

using env_lookup = std::function<std::optional<std::string>(const char*)>;

/// Parses argv[1..] (`--name value` or `--name=value`). `env` gives ZKD_ZK and ZKD_NAMESPACE
/// when --zk or --namespace is absent. Throws usage_error.
parsed_args parse_args(const std::vector<std::string>& args, const env_lookup& env);

/// The --help text.
const char* help_text() noexcept;

}  // namespace zkd::swarm
