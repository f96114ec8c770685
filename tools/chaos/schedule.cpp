// SPDX-License-Identifier: MIT
#include "chaos/schedule.hpp"

#include <cstdio>
#include <random>
#include <stdexcept>

namespace zkd::chaos {

namespace {

/// A uniform draw in [lo, hi] from the raw generator output: std's distributions are not
/// specified bit for bit, and a seed must give the same schedule with every standard library.
std::int64_t draw(std::mt19937_64& g, std::int64_t lo, std::int64_t hi) {
    if (hi <= lo) {
        return lo;
    }
    const auto span = static_cast<std::uint64_t>(hi - lo) + 1;
    return lo + static_cast<std::int64_t>(g() % span);
}

std::string seconds(std::chrono::milliseconds d) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3fs", static_cast<double>(d.count()) / 1000.0);
    return buf;
}

}  // namespace

std::string_view name(fault_kind k) noexcept {
    switch (k) {
    case fault_kind::zkd_kill:
        return "zkd-kill";
    case fault_kind::zkd_pause:
        return "zkd-pause";
    case fault_kind::master_kill:
        return "master-kill";
    case fault_kind::zk_kill:
        return "zk-kill";
    case fault_kind::zk_pause:
        return "zk-pause";
    case fault_kind::zkd_partition:
        return "zkd-partition";
    }
    return "?";
}

std::optional<fault_kind> parse_fault_kind(std::string_view s) noexcept {
    for (const auto k : all_fault_kinds) {
        if (name(k) == s) {
            return k;
        }
    }
    if (s == name(fault_kind::zkd_partition)) {
        return fault_kind::zkd_partition;
    }
    return std::nullopt;
}

std::vector<fault> make_schedule(const schedule_params& p) {
    if (p.every.count() <= 0) {
        throw std::invalid_argument("the mean gap between faults must be positive");
    }
    std::vector<fault_kind> kinds;
    for (const auto k : p.kinds) {
        const bool has_target = hits_zookeeper(k) ? p.zk_count > 0 : p.zkd_count > 0;
        if (has_target) {
            kinds.push_back(k);
        }
    }
    if (kinds.empty()) {
        throw std::invalid_argument("no fault kind has a target");
    }
    std::mt19937_64 g(p.seed);
    std::vector<fault> out;
    const std::int64_t every = p.every.count();
    std::int64_t at = 0;
    for (;;) {
        at += draw(g, every / 2, every + every / 2);
        if (at >= p.duration.count()) {
            break;
        }
        fault f;
        f.at = std::chrono::milliseconds(at);
        f.kind =
            kinds[static_cast<std::size_t>(draw(g, 0, static_cast<std::int64_t>(kinds.size()) - 1)
            )];
        switch (f.kind) {
        case fault_kind::zkd_kill:
        case fault_kind::zkd_pause:
        case fault_kind::zkd_partition:
            f.target = static_cast<int>(draw(g, 0, p.zkd_count - 1));
            break;
        case fault_kind::zk_kill:
        case fault_kind::zk_pause:
            f.target = static_cast<int>(draw(g, 0, p.zk_count - 1));
            break;
        case fault_kind::master_kill:
            f.target = 0;
            break;
        }
        const bool pause = f.kind == fault_kind::zkd_pause || f.kind == fault_kind::zk_pause ||
                           f.kind == fault_kind::zkd_partition;
        f.hold =
            pause
                ? std::chrono::milliseconds(draw(g, p.pause_min.count(), p.pause_max.count()))
                : std::chrono::milliseconds(draw(g, p.restart_min.count(), p.restart_max.count()));
        out.push_back(f);
    }
    return out;
}

std::string describe(const fault& f) {
    std::string s = seconds(f.at) + " " + std::string(name(f.kind));
    switch (f.kind) {
    case fault_kind::zkd_kill:
        return s + " zkd" + std::to_string(f.target + 1) + ", restart after " + seconds(f.hold);
    case fault_kind::zkd_pause:
        return s + " zkd" + std::to_string(f.target + 1) + " for " + seconds(f.hold);
    case fault_kind::master_kill:
        return s + ", restart after " + seconds(f.hold);
    case fault_kind::zk_kill:
        return s + " zk" + std::to_string(f.target + 1) + ", restart after " + seconds(f.hold);
    case fault_kind::zk_pause:
        return s + " zk" + std::to_string(f.target + 1) + " for " + seconds(f.hold);
    case fault_kind::zkd_partition:
        return s + " zkd" + std::to_string(f.target + 1) + " for " + seconds(f.hold);
    }
    return s;
}

}  // namespace zkd::chaos
