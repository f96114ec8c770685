// SPDX-License-Identifier: MIT
// zkd-chaos: where a ZooKeeper member's restart spent its time, read from its own log
// (the server.log zkd-zk-local writes). Pure: no I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace zkd::chaos {

/// The phases of a member's last start, in ms; a phase whose end is not logged is nullopt.
struct restart_phases {
    std::optional<std::int64_t> jvm_ms;   ///< process started -> its first log line
    std::optional<std::int64_t> load_ms;  ///< first line -> LOOKING (config, snapshot + txn log)
    std::optional<std::int64_t> snapshot_ms;  ///< "Snapshot loaded in N ms" (part of load)
    std::optional<std::int64_t> election_ms;  ///< LOOKING -> following/leading
    std::optional<std::int64_t> sync_ms;      ///< following/leading -> broadcast (serving)
    std::string sync_kind;                    ///< "diff", "snap", "trunc" or "" (not logged)

    friend bool operator==(const restart_phases&, const restart_phases&) = default;
};

/// Parses the part of `log` after its `start`-th "===== zk_local: starting ZooKeeper server"
/// line (counted from 1; 0: the last), up to the next one. `started_ms` is when that process
/// was started, in ms since the Unix epoch; log times ("2026-11-23 21:28:49,656") are local
/// time, as log4j writes them.
restart_phases parse_restart(std::string_view log, std::int64_t started_ms, std::size_t start = 0);

/// How many starts `log` records (its "===== zk_local: starting" lines).
std::size_t count_starts(std::string_view log);

/// "jvm 0.91s, load 0.76s (snapshot 0.27s), election 0.08s, sync 0.27s (diff)".
std::string describe(const restart_phases& p);

}  // namespace zkd::chaos
