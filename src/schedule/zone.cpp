// SPDX-License-Identifier: MIT
#include "schedule/zone.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>

namespace zkd::schedule {

using protocol::codec_result;
using protocol::decode_error;

namespace {

namespace chr = std::chrono;

constexpr std::int64_t day_s = 86'400;

std::int64_t days_from_civil(int y, unsigned m, unsigned d) {
    return chr::sys_days{chr::year{y} / chr::month{m} / chr::day{d}}.time_since_epoch().count();
}

int year_of(std::int64_t s) {
    const auto days = s >= 0 ? s / day_s : -((-s + day_s - 1) / day_s);
    return static_cast<int>(chr::year_month_day{chr::sys_days{chr::days{days}}}.year());
}

bool leap(int y) {
    return chr::year{y}.is_leap();
}

/// The instant (local seconds, as if UTC) a date rule names in year `y`.
std::int64_t rule_local(int y, const posix_tz::date_rule& r) {
    std::int64_t day = 0;
    if (r.kind == 'J') {
        day = days_from_civil(y, 1, 1) + r.a - 1 + (leap(y) && r.a >= 60 ? 1 : 0);
    } else if (r.kind == 'n') {
        day = days_from_civil(y, 1, 1) + r.a;
    } else {
        const auto first = days_from_civil(y, static_cast<unsigned>(r.a), 1);
        const auto wd0 =
            static_cast<int>(chr::weekday{chr::sys_days{chr::days{first}}}.c_encoding());
        day = first + (r.weekday - wd0 + 7) % 7 + static_cast<std::int64_t>(r.week - 1) * 7;
        const auto ym = chr::year{y} / chr::month{static_cast<unsigned>(r.a)};
        const auto last = chr::sys_days{ym / chr::last}.time_since_epoch().count();
        while (day > last) {
            day -= 7;
        }
    }
    return day * day_s + r.time;
}

std::int32_t rule_offset(const posix_tz& p, std::int64_t t) {
    if (!p.has_dst) {
        return p.std_offset;
    }
    const int y = year_of(t + p.std_offset);
    const auto s = rule_local(y, p.start) - p.std_offset;
    const auto e = rule_local(y, p.end) - p.dst_offset;
    const bool dst = s < e ? (s <= t && t < e) : !(e <= t && t < s);
    return dst ? p.dst_offset : p.std_offset;
}

/// A reader of big-endian numbers over bytes; `ok` false once it ran past the end.
struct reader {
    std::string_view b;
    std::size_t at = 0;
    bool ok = true;

    std::int64_t be(std::size_t n) {
        if (at + n > b.size()) {
            ok = false;
            return 0;
        }
        std::uint64_t v = 0;
        for (std::size_t i = 0; i < n; ++i) {
            v = (v << 8) | static_cast<unsigned char>(b[at + i]);
        }
        at += n;
        if (n == 4) {
            return static_cast<std::int32_t>(static_cast<std::uint32_t>(v));
        }
        return static_cast<std::int64_t>(v);
    }
    void skip(std::size_t n) {
        if (at + n > b.size()) {
            ok = false;
            return;
        }
        at += n;
    }
};

struct counts {
    std::size_t isut, isstd, leap, time, type, chars;
};

bool header(reader& r, char& version, counts& c) {
    if (r.b.substr(r.at, 4) != "TZif") {
        return false;
    }
    r.skip(4);
    version = r.at < r.b.size() ? r.b[r.at] : '\0';
    r.skip(16);
    std::int64_t v[6];
    for (auto& x : v) {
        x = r.be(4);
        if (x < 0 || x > 1'000'000) {
            return false;
        }
    }
    c = {static_cast<std::size_t>(v[0]), static_cast<std::size_t>(v[1]),
         static_cast<std::size_t>(v[2]), static_cast<std::size_t>(v[3]),
         static_cast<std::size_t>(v[4]), static_cast<std::size_t>(v[5])};
    return r.ok && c.type > 0;
}

// --- POSIX TZ strings -------------------------------------------------------------------------

struct tz_parser {
    std::string_view s;
    std::size_t at = 0;

    [[nodiscard]] bool done() const { return at >= s.size(); }
    [[nodiscard]] char peek() const { return done() ? '\0' : s[at]; }

    bool name() {
        if (peek() == '<') {
            const auto close = s.find('>', at);
            if (close == std::string_view::npos || close == at + 1) {
                return false;
            }
            at = close + 1;
            return true;
        }
        const auto start = at;
        while (!done() && std::isalpha(static_cast<unsigned char>(peek())) != 0) {
            ++at;
        }
        return at - start >= 3;
    }

    std::optional<int> number(int most) {
        const auto start = at;
        int v = 0;
        while (!done() && std::isdigit(static_cast<unsigned char>(peek())) != 0 && at - start < 3) {
            v = v * 10 + (peek() - '0');
            ++at;
        }
        if (at == start || v > most) {
            return std::nullopt;
        }
        return v;
    }

    /// [+-]hh[:mm[:ss]] in seconds.
    std::optional<std::int32_t> hms(int most_hours) {
        int sign = 1;
        if (peek() == '+' || peek() == '-') {
            sign = peek() == '-' ? -1 : 1;
            ++at;
        }
        auto h = number(most_hours);
        if (!h) {
            return std::nullopt;
        }
        std::int32_t v = *h * 3600;
        for (int part = 0; part < 2 && peek() == ':'; ++part) {
            ++at;
            auto m = number(59);
            if (!m) {
                return std::nullopt;
            }
            v += *m * (part == 0 ? 60 : 1);
        }
        return sign * v;
    }

    std::optional<posix_tz::date_rule> date() {
        posix_tz::date_rule r;
        if (peek() == 'J') {
            ++at;
            auto n = number(365);
            if (!n || *n < 1) {
                return std::nullopt;
            }
            r.kind = 'J';
            r.a = *n;
        } else if (peek() == 'M') {
            ++at;
            auto m = number(12);
            if (!m || *m < 1 || peek() != '.') {
                return std::nullopt;
            }
            ++at;
            auto w = number(5);
            if (!w || *w < 1 || peek() != '.') {
                return std::nullopt;
            }
            ++at;
            auto d = number(6);
            if (!d) {
                return std::nullopt;
            }
            r.kind = 'M';
            r.a = *m;
            r.week = *w;
            r.weekday = *d;
        } else {
            auto n = number(365);
            if (!n) {
                return std::nullopt;
            }
            r.kind = 'n';
            r.a = *n;
        }
        if (peek() == '/') {
            ++at;
            auto t = hms(167);
            if (!t) {
                return std::nullopt;
            }
            r.time = *t;
        }
        return r;
    }
};

}  // namespace

std::optional<posix_tz> parse_posix_tz(std::string_view text) {
    tz_parser p{text};
    posix_tz out;
    if (!p.name()) {
        return std::nullopt;
    }
    auto std_off = p.hms(24);
    if (!std_off) {
        return std::nullopt;
    }
    out.std_offset = -*std_off;
    if (p.done()) {
        return out;
    }
    if (!p.name()) {
        return std::nullopt;
    }
    out.has_dst = true;
    out.dst_offset = out.std_offset + 3600;
    if (!p.done() && p.peek() != ',') {
        auto dst_off = p.hms(24);
        if (!dst_off) {
            return std::nullopt;
        }
        out.dst_offset = -*dst_off;
    }
    if (p.done()) {
        out.start = {'M', 3, 2, 0, 7200};
        out.end = {'M', 11, 1, 0, 7200};
        return out;
    }
    if (p.peek() != ',') {
        return std::nullopt;
    }
    ++p.at;
    auto start = p.date();
    if (!start || p.peek() != ',') {
        return std::nullopt;
    }
    ++p.at;
    auto end = p.date();
    if (!end || !p.done()) {
        return std::nullopt;
    }
    out.start = *start;
    out.end = *end;
    return out;
}

std::int32_t zone::offset_at(std::int64_t utc_s) const noexcept {
    if (transitions.empty() || utc_s < transitions.front()) {
        if (transitions.empty() && rule) {
            return rule_offset(*rule, utc_s);
        }
        return initial_offset;
    }
    if (rule && utc_s >= transitions.back()) {
        // The footer governs from the last transition on (RFC 8536 §3.3); it agrees with it.
        return rule_offset(*rule, utc_s);
    }
    const auto it = std::upper_bound(transitions.begin(), transitions.end(), utc_s);
    return offsets[static_cast<std::size_t>(it - transitions.begin()) - 1];
}

codec_result<zone> parse_tzif(std::string_view name, std::string_view bytes) {
    reader r{bytes};
    char version = 0;
    counts c{};
    if (!header(r, version, c)) {
        return decode_error{"zone " + std::string(name) + ": not a TZif file"};
    }
    std::size_t time_size = 4;
    if (version >= '2') {
        // Skip the 32-bit data: the 64-bit copy follows with its own header.
        r.skip(c.time * 5 + c.type * 6 + c.chars + c.leap * 8 + c.isstd + c.isut);
        if (!r.ok || !header(r, version, c)) {
            return decode_error{"zone " + std::string(name) + ": its 64-bit data is cut short"};
        }
        time_size = 8;
    }
    zone z;
    z.name = std::string(name);
    std::vector<std::int64_t> times(c.time);
    for (auto& t : times) {
        t = r.be(time_size);
    }
    std::vector<std::size_t> idx(c.time);
    for (auto& i : idx) {
        i = static_cast<std::size_t>(r.be(1));
    }
    std::vector<std::int32_t> utoff(c.type);
    for (auto& u : utoff) {
        u = static_cast<std::int32_t>(r.be(4));
        r.skip(2);  // isdst, desigidx
    }
    r.skip(c.chars + c.leap * (time_size + 4) + c.isstd + c.isut);
    if (!r.ok) {
        return decode_error{"zone " + std::string(name) + ": cut short"};
    }
    for (std::size_t i = 0; i < c.time; ++i) {
        if (idx[i] >= c.type || (i > 0 && times[i] <= times[i - 1])) {
            return decode_error{
                "zone " + std::string(name) + ": bad transition " + std::to_string(i)};
        }
        z.transitions.push_back(times[i]);
        z.offsets.push_back(utoff[idx[i]]);
    }
    z.initial_offset = utoff[0];
    if (version >= '2' && r.at < bytes.size() && bytes[r.at] == '\n') {
        const auto end = bytes.find('\n', r.at + 1);
        if (end != std::string_view::npos && end > r.at + 1) {
            const auto footer = bytes.substr(r.at + 1, end - r.at - 1);
            z.rule = parse_posix_tz(footer);
            if (!z.rule) {
                return decode_error{
                    "zone " + std::string(name) + ": its rule \"" + std::string(footer) +
                    "\" is no POSIX TZ string"};
            }
        }
    }
    return z;
}

std::shared_ptr<const zone> utc_zone() {
    static const auto utc = [] {
        auto z = std::make_shared<zone>();
        z->name = "UTC";
        return std::shared_ptr<const zone>(z);
    }();
    return utc;
}

bool is_valid_zone_name(std::string_view name) noexcept {
    if (name.empty() || name.size() > 64 || name.front() == '/' || name.back() == '/') {
        return false;
    }
    char prev = '/';
    for (char ch : name) {
        const bool ok = std::isalnum(static_cast<unsigned char>(ch)) != 0 || ch == '_' ||
                        ch == '+' || ch == '-' || ch == '/';
        if (!ok || (ch == '/' && prev == '/')) {
            return false;
        }
        prev = ch;
    }
    return true;
}

std::int64_t to_local(const zone& z, std::int64_t utc_ms) noexcept {
    const auto s = utc_ms >= 0 ? utc_ms / 1000 : -((-utc_ms + 999) / 1000);
    return utc_ms + std::int64_t{z.offset_at(s)} * 1000;
}

std::int64_t to_utc(const zone& z, std::int64_t local_ms) noexcept {
    const auto x = local_ms >= 0 ? local_ms / 1000 : -((-local_ms + 999) / 1000);
    const auto rest = local_ms - x * 1000;
    const std::int64_t a = z.offset_at(x - day_s);
    const std::int64_t b = z.offset_at(x + day_s);
    const auto u1 = x - a;
    const auto u2 = x - b;
    const bool v1 = z.offset_at(u1) == a;
    const bool v2 = z.offset_at(u2) == b;
    if (v1 && v2) {
        return std::min(u1, u2) * 1000 + rest;
    }
    if (v1) {
        return u1 * 1000 + rest;
    }
    if (v2) {
        return u2 * 1000 + rest;
    }
    // In a gap: the instant the clock jumps, the first whose offset is the later one.
    auto lo = std::min(u1, u2);
    auto hi = std::max(u1, u2);
    while (lo < hi) {
        const auto mid = lo + (hi - lo) / 2;
        if (z.offset_at(mid) == b) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    return lo * 1000;
}

}  // namespace zkd::schedule
