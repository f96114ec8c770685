// SPDX-License-Identifier: MIT
#include "schedule/firing.hpp"

#include "protocol/delay.hpp"
#include "protocol/ids.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>

namespace zkd::schedule {

namespace {

/// Most due times a cron decision counts back over (a minute's cron over 190 days): a longer
/// gap counts this many as missed.
constexpr std::uint64_t max_cron_count = 1u << 18;
constexpr int max_zone_steps = 1 << 16;

/// How far from the local time of `t` a zone's next or previous due time starts walking the
/// matching local minutes: an hour more than the offset changes by within two days of `t`.
std::int64_t zone_slack_ms(const zone& z, std::int64_t t) {
    constexpr std::int64_t two_days_s = std::int64_t{2} * 86'400;
    const auto s = t / 1000;
    const auto here = z.offset_at(s);
    const auto spread = std::max(
        std::abs(z.offset_at(s - two_days_s) - here), std::abs(z.offset_at(s + two_days_s) - here)
    );
    return (std::int64_t{spread} + 3600) * 1000;
}

}  // namespace

std::optional<std::int64_t> next_due(const schedule& s, std::int64_t after_ms) noexcept {
    after_ms = std::max(after_ms, s.created_ms);
    if (s.every_ms > 0) {
        const auto k = (after_ms - s.created_ms) / s.every_ms + 1;
        const auto due = s.created_ms + k * s.every_ms;
        return due <= protocol::max_due_ms ? std::optional(due) : std::nullopt;
    }
    if (!s.zone_rules) {
        auto due = cron_next(s.cron_parsed, after_ms);
        if (!due || *due > protocol::max_due_ms) {
            return std::nullopt;
        }
        return due;
    }
    // In a zone: the local minutes that match, in order, each at its instant (to_utc: a
    // repeated local time once, a skipped one at the jump); the first instant after_ms.
    auto cursor = to_local(*s.zone_rules, after_ms) - zone_slack_ms(*s.zone_rules, after_ms);
    for (int i = 0; i < max_zone_steps; ++i) {
        auto m = cron_next(s.cron_parsed, cursor);
        if (!m) {
            return std::nullopt;
        }
        const auto due = to_utc(*s.zone_rules, *m);
        if (due > after_ms) {
            return due <= protocol::max_due_ms ? std::optional(due) : std::nullopt;
        }
        cursor = *m;
    }
    return std::nullopt;
}

std::optional<std::int64_t> prev_due(const schedule& s, std::int64_t at_ms) noexcept {
    if (at_ms <= s.created_ms) {
        return std::nullopt;
    }
    if (s.every_ms > 0) {
        const auto k = (at_ms - s.created_ms) / s.every_ms;
        if (k == 0) {
            return std::nullopt;
        }
        return s.created_ms + k * s.every_ms;
    }
    if (!s.zone_rules) {
        auto due = cron_prev(s.cron_parsed, at_ms);
        if (!due || *due <= s.created_ms) {
            return std::nullopt;
        }
        return due;
    }
    auto cursor = to_local(*s.zone_rules, at_ms) + zone_slack_ms(*s.zone_rules, at_ms);
    for (int i = 0; i < max_zone_steps; ++i) {
        auto m = cron_prev(s.cron_parsed, cursor);
        if (!m) {
            return std::nullopt;
        }
        const auto due = to_utc(*s.zone_rules, *m);
        if (due <= at_ms) {
            return due > s.created_ms ? std::optional(due) : std::nullopt;
        }
        cursor = *m - 1;
    }
    return std::nullopt;
}

std::string firing_task_id(std::string_view client, int priority, std::int64_t due_ms) {
    char buf[48];
    std::snprintf(
        buf, sizeof buf, "t%d-%013lld-%.8s000000", 9 - std::clamp(priority, 0, 9),
        static_cast<long long>(std::clamp<std::int64_t>(due_ms, 0, protocol::max_due_ms)),
        std::string(client).c_str()
    );
    return buf;
}

std::optional<std::int64_t> firing_due(std::string_view client, std::string_view tid) noexcept {
    if (tid.size() != protocol::task_id_length || !protocol::is_valid_task_id(tid) ||
        protocol::task_id_client(tid) != client || tid.substr(25, 6) != "000000") {
        return std::nullopt;
    }
    return protocol::task_id_ms(tid);
}

firing_plan plan(const schedule& s, std::int64_t now_ms, previous_firing previous) {
    firing_plan p;
    p.last_due_ms = s.last_due_ms;
    if (s.paused) {
        return p;
    }
    const auto latest = prev_due(s, now_ms);
    if (!latest || *latest <= s.last_due_ms) {
        p.wake_ms = next_due(s, s.last_due_ms);
        return p;
    }
    // The due times in (last_due_ms, now_ms]: how many, and the latest max_catch_up of them.
    std::uint64_t count = 0;
    std::vector<std::int64_t> tail;  // latest first
    if (s.every_ms > 0) {
        const auto first = *next_due(s, s.last_due_ms);
        count = static_cast<std::uint64_t>((*latest - first) / s.every_ms) + 1;
        for (std::uint64_t i = 0; i < std::min<std::uint64_t>(count, max_catch_up); ++i) {
            tail.push_back(*latest - static_cast<std::int64_t>(i) * s.every_ms);
        }
    } else {
        std::optional<std::int64_t> d = latest;
        while (d && *d > s.last_due_ms && count < max_cron_count) {
            ++count;
            if (tail.size() < max_catch_up) {
                tail.push_back(*d);
            }
            d = prev_due(s, *d - 1);
        }
    }
    const bool late = count > 1 || now_ms - *latest > late_after_ms;
    std::size_t n = 1;
    if (late) {
        switch (s.misfire) {
        case misfire_policy::once:
            n = 1;
            break;
        case misfire_policy::skip:
            n = 0;
            break;
        case misfire_policy::all:
            n = tail.size();
            break;
        }
    }
    if (s.no_overlap && n > 0) {
        if (previous == previous_firing::busy) {
            p.skipped = n;
            n = 0;
        } else if (n > 1) {
            p.skipped = n - 1;
            n = 1;
        }
    }
    p.fire.assign(tail.begin(), tail.begin() + static_cast<std::ptrdiff_t>(n));
    std::reverse(p.fire.begin(), p.fire.end());
    p.missed = count - n - p.skipped;
    p.last_due_ms = *latest;
    p.wake_ms = next_due(s, *latest);
    return p;
}

schedule applied(schedule s, const firing_plan& p) {
    s.last_due_ms = p.last_due_ms;
    if (!p.fire.empty()) {
        s.last_fired_ms = p.fire.back();
    }
    s.fired += p.fire.size();
    s.skipped += p.skipped;
    s.missed += p.missed;
    return s;
}

}  // namespace zkd::schedule
