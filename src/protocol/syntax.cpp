// SPDX-License-Identifier: MIT
#include "protocol/syntax.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

namespace zkd::protocol {

namespace {

struct duration_unit {
    std::string_view name;
    std::int64_t ms;
};

/// Largest first: a compound duration takes them in this order.
constexpr std::array<duration_unit, 4> units{
    {{"h", 3'600'000}, {"m", 60'000}, {"s", 1000}, {"ms", 1}}};

/// The index in `units` of the unit `text` begins with ("ms" is no "m").
std::optional<std::size_t> unit_at(std::string_view text) {
    std::optional<std::size_t> found;
    for (std::size_t i = 0; i < units.size(); ++i) {
        if (text.starts_with(units[i].name) &&
            (!found || units[i].name.size() > units[*found].name.size())) {
            found = i;
        }
    }
    return found;
}

/// The number at `text[at]`, and `at` moved past its digits; nullopt if it has none or
/// exceeds `max`.
std::optional<std::int64_t> number_at(std::string_view text, std::size_t& at, std::int64_t max) {
    const std::size_t start = at;
    std::int64_t n = 0;
    for (; at < text.size() && text[at] >= '0' && text[at] <= '9'; ++at) {
        const int digit = text[at] - '0';
        if (n > (max - digit) / 10) {
            return std::nullopt;
        }
        n = n * 10 + digit;
    }
    return at == start ? std::nullopt : std::optional<std::int64_t>(n);
}

}  // namespace

std::optional<std::chrono::milliseconds> parse_duration(std::string_view text) {
    constexpr std::int64_t max = std::chrono::milliseconds::max().count();
    std::int64_t total = 0;
    std::size_t at = 0;
    std::size_t first_allowed = 0;  // units before this one were used (or skipped)
    do {
        const auto n = number_at(text, at, max);
        if (!n) {
            return std::nullopt;
        }
        if (first_allowed == 0 && at == text.size()) {
            return std::chrono::milliseconds(*n);  // a bare number
        }
        const auto u = unit_at(text.substr(at));
        if (!u || *u < first_allowed || *n > (max - total) / units[*u].ms) {
            return std::nullopt;
        }
        total += *n * units[*u].ms;
        at += units[*u].name.size();
        first_allowed = *u + 1;
    } while (at < text.size());
    return std::chrono::milliseconds(total);
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) {
        row[j] = j;
    }
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diagonal = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t up = row[j];
            const std::size_t change = a[i - 1] == b[j - 1] ? 0 : 1;
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + change});
            diagonal = up;
        }
    }
    return row[b.size()];
}

}  // namespace zkd::protocol
