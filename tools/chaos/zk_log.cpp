// SPDX-License-Identifier: MIT
#include "chaos/zk_log.hpp"

#include <cstdio>
#include <ctime>

namespace zkd::chaos {

namespace {

constexpr std::string_view marker = "===== zk_local: starting ZooKeeper server";

/// ms since the epoch of a line starting "YYYY-MM-DD HH:MM:SS,mmm" (local time); nullopt otherwise.
std::optional<std::int64_t> stamp(std::string_view line) {
    if (line.size() < 23 || line[4] != '-' || line[10] != ' ' || line[19] != ',') {
        return std::nullopt;
    }
    std::tm tm{};
    int ms = 0;
    const std::string head(line.substr(0, 23));
    if (std::sscanf(
            head.c_str(), "%4d-%2d-%2d %2d:%2d:%2d,%3d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
            &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms
        ) != 7) {
        return std::nullopt;
    }
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    tm.tm_isdst = -1;
    const std::time_t t = std::mktime(&tm);
    if (t == static_cast<std::time_t>(-1)) {
        return std::nullopt;
    }
    return static_cast<std::int64_t>(t) * 1000 + ms;
}

std::string secs(std::int64_t ms) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2fs", static_cast<double>(ms) / 1000.0);
    return buf;
}

}  // namespace

std::size_t count_starts(std::string_view log) {
    std::size_t n = 0;
    for (auto at = log.find(marker); at != std::string_view::npos; at = log.find(marker, at + 1)) {
        ++n;
    }
    return n;
}

restart_phases parse_restart(std::string_view log, std::int64_t started_ms, std::size_t start) {
    restart_phases p;
    auto at = std::string_view::npos;
    if (start == 0) {
        at = log.rfind(marker);
    } else {
        for (std::size_t i = 0; i < start; ++i) {
            at = log.find(marker, at == std::string_view::npos ? 0 : at + 1);
            if (at == std::string_view::npos) {
                break;
            }
        }
    }
    if (at == std::string_view::npos) {
        return p;
    }
    log.remove_prefix(at);
    if (const auto next = log.find(marker, 1); next != std::string_view::npos) {
        log = log.substr(0, next);
    }
    std::optional<std::int64_t> first;
    std::optional<std::int64_t> looking;
    std::optional<std::int64_t> elected;
    while (!log.empty()) {
        const auto nl = log.find('\n');
        const auto line = log.substr(0, nl);
        log.remove_prefix(nl == std::string_view::npos ? log.size() : nl + 1);
        const auto t = stamp(line);
        if (!t) {
            continue;
        }
        if (!first) {
            first = t;
            p.jvm_ms = *t - started_ms;
        }
        if (const auto s = line.find("Snapshot loaded in ");
            s != std::string_view::npos && !p.snapshot_ms) {
            long long ms = 0;
            if (std::sscanf(std::string(line.substr(s + 19)).c_str(), "%lld", &ms) == 1) {
                p.snapshot_ms = ms;
            }
        }
        if (!looking && line.ends_with("- LOOKING")) {
            looking = t;
            p.load_ms = *t - *first;
        }
        if (looking && !elected &&
            (line.ends_with("Peer state changed: following") ||
             line.ends_with("Peer state changed: leading"))) {
            elected = t;
            p.election_ms = *t - *looking;
        }
        if (elected && p.sync_kind.empty()) {
            for (const char* kind : {"diff", "snap", "trunc"}) {
                if (line.ends_with(std::string("synchronization - ") + kind)) {
                    p.sync_kind = kind;
                }
            }
        }
        if (elected && !p.sync_ms && line.ends_with("- broadcast")) {
            p.sync_ms = *t - *elected;
            break;
        }
    }
    return p;
}

std::string describe(const restart_phases& p) {
    std::string s;
    const auto add = [&](const char* what, const std::optional<std::int64_t>& v,
                         const std::string& extra) {
        if (v) {
            s += (s.empty() ? "" : ", ") + std::string(what) + " " + secs(*v) + extra;
        }
    };
    add("jvm", p.jvm_ms, "");
    add("load", p.load_ms, p.snapshot_ms ? " (snapshot " + secs(*p.snapshot_ms) + ")" : "");
    add("election", p.election_ms, "");
    add("sync", p.sync_ms, p.sync_kind.empty() ? "" : " (" + p.sync_kind + ")");
    return s.empty() ? "phases not in the log" : s;
}

}  // namespace zkd::chaos
