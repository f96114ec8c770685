// SPDX-License-Identifier: MIT
// zkd-chaos: the faults of a run, drawn from a seed. Pure: no I/O, no clock.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zkd::chaos {

/// What a fault does.
enum class fault_kind {
    zkd_kill,     ///< SIGKILL of a `zkd run`; restarted after `hold`
    zkd_pause,    ///< SIGSTOP of a `zkd run`, SIGCONT after `hold`
    master_kill,  ///< SIGKILL of the acting master (found at injection time); restarted after
                  ///< `hold`
    zk_kill,      ///< SIGKILL of a ZooKeeper member; restarted after `hold`
    zk_pause,     ///< SIGSTOP of a ZooKeeper member, SIGCONT after `hold`
    /// A zkd cut off ZooKeeper (its network namespace's veth down), back after `hold`. Only
    /// with --partitions (as root); not among all_fault_kinds, so seeds keep their schedules.
    zkd_partition,
};

/// The kinds a run draws from by default.
inline constexpr fault_kind all_fault_kinds[] = {
    fault_kind::zkd_kill, fault_kind::zkd_pause, fault_kind::master_kill, fault_kind::zk_kill,
    fault_kind::zk_pause};

/// "zkd-kill", "zkd-pause", "master-kill", "zk-kill", "zk-pause", "zkd-partition".
std::string_view name(fault_kind k) noexcept;
/// The kind a name() names; nullopt otherwise.
std::optional<fault_kind> parse_fault_kind(std::string_view s) noexcept;
/// True for the kinds that hit a ZooKeeper member.
constexpr bool hits_zookeeper(fault_kind k) noexcept {
    return k == fault_kind::zk_kill || k == fault_kind::zk_pause;
}

/// One planned fault.
struct fault {
    std::chrono::milliseconds at{0};  ///< since the load started
    fault_kind kind = fault_kind::zkd_kill;
    int target = 0;                     ///< zkd slot or ZooKeeper member (0-based); master_kill: 0
    std::chrono::milliseconds hold{0};  ///< pause length, or delay before the restart

    friend bool operator==(const fault&, const fault&) = default;
};

/// What to draw a schedule from.
struct schedule_params {
    std::uint64_t seed = 1;
    std::chrono::milliseconds duration{150'000};  ///< no fault at or after this
    std::chrono::milliseconds every{6'000};       ///< mean gap; each gap is 0.5 to 1.5 times it
    std::vector<fault_kind> kinds{std::begin(all_fault_kinds), std::end(all_fault_kinds)};
    int zkd_count = 4;
    int zk_count = 3;
    std::chrono::milliseconds pause_min{1'000};  ///< pauses: uniform in [min, max]
    std::chrono::milliseconds pause_max{8'000};
    std::chrono::milliseconds restart_min{500};  ///< delay before a killed process restarts
    std::chrono::milliseconds restart_max{3'000};
};

/// The faults of a run, in time order: the same params always give the same schedule (the
/// generator is std::mt19937_64, whose output the standard fixes, and the draws are ours).
/// Kinds that need a target that does not exist (zk_count < 1, zkd_count < 1) are never drawn.
/// Throws std::invalid_argument when every is not positive or no kind can be drawn.
std::vector<fault> make_schedule(const schedule_params& p);

/// "12.345s zkd-pause zkd2 for 3.2s" (targets counted from 1, as the tool prints them).
std::string describe(const fault& f);

}  // namespace zkd::chaos
