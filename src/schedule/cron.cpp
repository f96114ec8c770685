// SPDX-License-Identifier: MIT
#include "schedule/cron.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <chrono>
#include <vector>

namespace zkd::schedule {

using protocol::codec_result;
using protocol::decode_error;

namespace {

namespace chr = std::chrono;

constexpr std::int64_t minute_ms = 60'000;
constexpr std::int64_t day_minutes = 1440;
/// How far next and prev look: 10 years of minutes (a 29 February on a given weekday
/// comes within 28 years, but one on any day within 8).
constexpr std::int64_t horizon_minutes = std::int64_t{3653} * day_minutes;

struct field_def {
    std::string_view label;
    int lo;
    int hi;
    const std::array<std::string_view, 12>* names;  ///< names[i] is lo + i
};

constexpr std::array<std::string_view, 12> month_names = {"jan", "feb", "mar", "apr", "may", "jun",
                                                          "jul", "aug", "sep", "oct", "nov", "dec"};
constexpr std::array<std::string_view, 12> day_names = {"sun", "mon", "tue", "wed", "thu", "fri",
                                                        "sat", "",    "",    "",    "",    ""};

constexpr std::array<field_def, 5> fields = {{
    {"minute", 0, 59, nullptr},
    {"hour", 0, 23, nullptr},
    {"day of month", 1, 31, nullptr},
    {"month", 1, 12, &month_names},
    {"day of week", 0, 7, &day_names},
}};

std::string lower(std::string_view s) {
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) {
        return static_cast<char>(std::tolower(c));
    });
    return out;
}

decode_error field_error(const field_def& f, std::string_view text, const std::string& what) {
    return decode_error{
        "cron field " + std::string(f.label) + " \"" + std::string(text) + "\": " + what,
        std::string(f.label)};
}

/// A number or (for months and weekdays) a name; nullopt when neither.
std::optional<int> value_of(const field_def& f, std::string_view s) {
    if (s.empty()) {
        return std::nullopt;
    }
    if (f.names != nullptr) {
        const auto l = lower(s);
        for (std::size_t i = 0; i < f.names->size(); ++i) {
            if (!(*f.names)[i].empty() && (*f.names)[i] == l) {
                return f.lo + static_cast<int>(i);
            }
        }
    }
    int v = 0;
    const auto* end = s.data() + s.size();
    auto [p, ec] = std::from_chars(s.data(), end, v);
    if (ec != std::errc{} || p != end) {
        return std::nullopt;
    }
    return v;
}

/// Sets the bits `f` allows in `text`; an error says what is wrong.
codec_result<std::vector<int>> parse_field(const field_def& f, std::string_view text) {
    std::vector<int> out;
    if (text.empty()) {
        return field_error(f, text, "empty");
    }
    std::size_t at = 0;
    while (at <= text.size()) {
        auto comma = text.find(',', at);
        if (comma == std::string_view::npos) {
            comma = text.size();
        }
        const auto item = text.substr(at, comma - at);
        if (item.empty()) {
            return field_error(f, text, "an empty item in the list");
        }
        auto range = item;
        int step = 1;
        bool stepped = false;
        if (auto slash = item.find('/'); slash != std::string_view::npos) {
            range = item.substr(0, slash);
            const auto s = item.substr(slash + 1);
            int v = 0;
            auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
            if (s.empty() || ec != std::errc{} || p != s.data() + s.size() || v < 1) {
                return field_error(
                    f, text, "the step \"" + std::string(s) + "\" is no positive number"
                );
            }
            step = v;
            stepped = true;
        }
        int lo = f.lo;
        int hi = f.hi == 7 ? 6 : f.hi;
        if (range != "*") {
            const auto dash = range.find('-');
            const auto first = range.substr(0, dash);
            auto a = value_of(f, first);
            if (!a) {
                return field_error(
                    f, text,
                    "\"" + std::string(first) + "\" is no number" +
                        (f.names != nullptr ? " or name" : "")
                );
            }
            if (*a < f.lo || *a > f.hi) {
                return field_error(
                    f, text,
                    std::to_string(*a) + " is out of " + std::to_string(f.lo) + "-" +
                        std::to_string(f.hi)
                );
            }
            lo = *a;
            if (dash != std::string_view::npos) {
                const auto second = range.substr(dash + 1);
                auto b = value_of(f, second);
                if (!b) {
                    return field_error(
                        f, text,
                        "\"" + std::string(second) + "\" is no number" +
                            (f.names != nullptr ? " or name" : "")
                    );
                }
                if (*b < f.lo || *b > f.hi) {
                    return field_error(
                        f, text,
                        std::to_string(*b) + " is out of " + std::to_string(f.lo) + "-" +
                            std::to_string(f.hi)
                    );
                }
                if (*b < lo) {
                    return field_error(
                        f, text, "the range " + std::string(range) + " runs backwards"
                    );
                }
                hi = *b;
            } else if (!stepped) {
                hi = lo;
            } else {
                hi = f.hi == 7 ? 6 : f.hi;
                hi = std::max(hi, lo);
            }
        }
        for (int v = lo; v <= hi; v += step) {
            out.push_back(f.hi == 7 && v == 7 ? 0 : v);
        }
        at = comma + 1;
        if (comma == text.size()) {
            break;
        }
    }
    return out;
}

std::vector<std::string_view> split_fields(std::string_view text) {
    std::vector<std::string_view> out;
    std::size_t i = 0;
    while (i < text.size()) {
        while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) {
            ++i;
        }
        const auto start = i;
        while (i < text.size() && text[i] != ' ' && text[i] != '\t') {
            ++i;
        }
        if (i > start) {
            out.push_back(text.substr(start, i - start));
        }
    }
    return out;
}

struct civil {
    int year;
    int month;               // 1-12
    int day;                 // 1-31
    int weekday;             // 0-6, Sunday 0
    std::int64_t day_index;  // days since the epoch
};

civil civil_of(std::int64_t minute) {
    const auto days =
        minute >= 0 ? minute / day_minutes : -((-minute + day_minutes - 1) / day_minutes);
    const chr::sys_days sd{chr::days{days}};
    const chr::year_month_day ymd{sd};
    const chr::weekday wd{sd};
    return civil{
        static_cast<int>(ymd.year()), static_cast<int>(static_cast<unsigned>(ymd.month())),
        static_cast<int>(static_cast<unsigned>(ymd.day())), static_cast<int>(wd.c_encoding()),
        days};
}

/// The day index of the first day of the month after (y, m).
std::int64_t next_month_start(int y, int m) {
    const auto ym =
        chr::year_month{chr::year{y}, chr::month{static_cast<unsigned>(m)}} + chr::months{1};
    return chr::sys_days{ym / 1}.time_since_epoch().count();
}

/// The day index of the first day of month (y, m).
std::int64_t month_start(int y, int m) {
    const auto ym = chr::year_month{chr::year{y}, chr::month{static_cast<unsigned>(m)}};
    return chr::sys_days{ym / 1}.time_since_epoch().count();
}

bool day_ok(const cron_expr& c, const civil& d) {
    const bool dom = c.days.test(static_cast<std::size_t>(d.day));
    const bool dow = c.weekdays.test(static_cast<std::size_t>(d.weekday));
    if (c.dom_star || c.dow_star) {
        return dom && dow;
    }
    return dom || dow;
}

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
    return a >= 0 ? a / b : -((-a + b - 1) / b);
}

}  // namespace

codec_result<cron_expr> parse_cron(std::string_view text) {
    std::string expanded;
    auto t = text;
    while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) {
        t.remove_prefix(1);
    }
    while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) {
        t.remove_suffix(1);
    }
    if (!t.empty() && t.front() == '@') {
        const auto l = lower(t);
        if (l == "@yearly" || l == "@annually") {
            expanded = "0 0 1 1 *";
        } else if (l == "@monthly") {
            expanded = "0 0 1 * *";
        } else if (l == "@weekly") {
            expanded = "0 0 * * 0";
        } else if (l == "@daily" || l == "@midnight") {
            expanded = "0 0 * * *";
        } else if (l == "@hourly") {
            expanded = "0 * * * *";
        } else {
            return decode_error{
                "unknown cron shorthand \"" + std::string(t) +
                "\" (known: @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly)"};
        }
        t = expanded;
    }
    const auto parts = split_fields(t);
    if (parts.size() != 5) {
        return decode_error{
            "a cron expression has 5 fields (minute hour day-of-month month day-of-week), not " +
            std::to_string(parts.size())};
    }
    cron_expr c;
    for (std::size_t i = 0; i < 5; ++i) {
        auto values = parse_field(fields[i], parts[i]);
        if (!values) {
            return values.error();
        }
        for (int v : *values) {
            const auto b = static_cast<std::size_t>(v);
            switch (i) {
            case 0:
                c.minutes.set(b);
                break;
            case 1:
                c.hours.set(b);
                break;
            case 2:
                c.days.set(b);
                break;
            case 3:
                c.months.set(b);
                break;
            default:
                c.weekdays.set(b);
                break;
            }
        }
    }
    c.dom_star = parts[2].front() == '*';
    c.dow_star = parts[4].front() == '*';
    return c;
}

bool cron_matches(const cron_expr& c, std::int64_t ms) noexcept {
    const auto m = floor_div(ms, minute_ms);
    const auto d = civil_of(m);
    const auto in_day = m - d.day_index * day_minutes;
    return c.months.test(static_cast<std::size_t>(d.month)) && day_ok(c, d) &&
           c.hours.test(static_cast<std::size_t>(in_day / 60)) &&
           c.minutes.test(static_cast<std::size_t>(in_day % 60));
}

std::optional<std::int64_t> cron_next(const cron_expr& c, std::int64_t after_ms) noexcept {
    auto m = floor_div(after_ms, minute_ms) + 1;
    const auto limit = m + horizon_minutes;
    while (m <= limit) {
        const auto d = civil_of(m);
        if (!c.months.test(static_cast<std::size_t>(d.month))) {
            m = next_month_start(d.year, d.month) * day_minutes;
            continue;
        }
        if (!day_ok(c, d)) {
            m = (d.day_index + 1) * day_minutes;
            continue;
        }
        const auto in_day = m - d.day_index * day_minutes;
        if (!c.hours.test(static_cast<std::size_t>(in_day / 60))) {
            m = (floor_div(m, 60) + 1) * 60;
            continue;
        }
        if (!c.minutes.test(static_cast<std::size_t>(in_day % 60))) {
            ++m;
            continue;
        }
        return m * minute_ms;
    }
    return std::nullopt;
}

std::optional<std::int64_t> cron_prev(const cron_expr& c, std::int64_t at_ms) noexcept {
    auto m = floor_div(at_ms, minute_ms);
    const auto limit = std::max<std::int64_t>(0, m - horizon_minutes);
    while (m >= limit) {
        const auto d = civil_of(m);
        if (!c.months.test(static_cast<std::size_t>(d.month))) {
            m = month_start(d.year, d.month) * day_minutes - 1;
            continue;
        }
        if (!day_ok(c, d)) {
            m = d.day_index * day_minutes - 1;
            continue;
        }
        const auto in_day = m - d.day_index * day_minutes;
        if (!c.hours.test(static_cast<std::size_t>(in_day / 60))) {
            m = floor_div(m, 60) * 60 - 1;
            continue;
        }
        if (!c.minutes.test(static_cast<std::size_t>(in_day % 60))) {
            --m;
            continue;
        }
        return m * minute_ms;
    }
    return std::nullopt;
}

}  // namespace zkd::schedule
