// SPDX-License-Identifier: MIT
// zkd-chaos's command line: the settings of one run and their parser. Pure: no I/O.
#pragma once

#include "chaos/schedule.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace zkd::chaos {

/// Exit codes of zkd-chaos.
enum exit_code : int {
    exit_ok = 0,         ///< every invariant held
    exit_violation = 1,  ///< an invariant was violated (the report lists which)
    exit_usage = 2,      ///< bad command line
    exit_setup = 3,      ///< the run could not be carried out (ZooKeeper or zkd did not start)
};

/// What a run drives while the faults run (--workload).
struct workloads {
    bool echo = true;        ///< the open loop of echo tasks (--rate)
    bool delayed = false;    ///< delayed tasks, some failing with retries
    bool schedules = false;  ///< schedules every second (misfire all, once, skip)
    bool workflows = false;  ///< workflows: a chain, a map fan-out/fan-in, a DAG
    [[nodiscard]] bool jobs() const noexcept { return delayed || schedules || workflows; }
};

struct usage_error : std::invalid_argument {
    using std::invalid_argument::invalid_argument;
};

/// --auto-bundle's default: the client's (task_client::default_auto_bundle, checked where
/// both are seen).
inline constexpr std::size_t default_auto_bundle = 64;

/// Everything one zkd-chaos run is told.
struct settings {
    std::optional<std::uint64_t> seed;  ///< none: drawn at random (and printed)
    std::chrono::milliseconds duration{150'000};
    double rate = 200.0;  ///< tasks per second, open loop
    workloads work;
    std::chrono::milliseconds every{6'000};
    std::vector<fault_kind> kinds{std::begin(all_fault_kinds), std::end(all_fault_kinds)};
    int zkd_count = 4;
    int capacity = 2;
    std::chrono::milliseconds session_timeout{4'000};
    std::chrono::milliseconds settle{60'000};
    std::chrono::milliseconds pause_max{8'000};
    int max_attempts = 10;
    /// The chaos client's automatic bundles: at most this many tasks a bundle (1: none).
    std::size_t auto_bundle = default_auto_bundle;
    std::string zkd_binary;  ///< empty: next to zkd-chaos, then in the build tree, then PATH
    std::string zk_dir;      ///< attach to the ensemble `zkd-zk-local start --dir` made there
    std::string dir;         ///< run directory; empty: a fresh one under $TMPDIR
    std::string ns = "chaos";
    bool json = false;
    bool clean_on_pass = false;  ///< remove the run directory when every invariant held
    /// Each zkd in a network namespace of its own (root only); adds zkd-partition faults.
    bool partitions = false;
};

struct parsed_args {
    settings s;
    bool help = false;
};

/// Parses the arguments (without argv[0]); throws usage_error with a message naming the flag.
parsed_args parse_args(const std::vector<std::string>& args);

/// A duration with a unit: "500ms", "6s", "2m", "1h", "2m30s" (protocol::parse_duration,
/// without its bare numbers). nullopt otherwise.
std::optional<std::chrono::milliseconds> parse_duration(const std::string& text);

const char* help_text() noexcept;

}  // namespace zkd::chaos
