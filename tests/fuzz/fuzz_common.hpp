// SPDX-License-Identifier: MIT
// What every fuzz target shares: the input as a string_view, and FUZZ_CHECK, which turns a
// broken property (a decoded document that does not survive encode + decode, a parser
// that accepts what it documents it refuses) into a crash libFuzzer saves as a reproducer.
#pragma once

#include <boost/json/value.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <utility>
#include <vector>

namespace zkd::fuzz {

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) noexcept {
    return {
        reinterpret_cast<const char*>(data),
        size};  // NOLINT(cppcoreguidelines-pro-type-reinterpret-cast)
}

[[noreturn]] inline void check_failed(const char* what, const char* file, int line) noexcept {
    std::fprintf(stderr, "%s:%d: property broken: %s\n", file, line, what);
    std::abort();
}

/// JSON equality, but doubles need only agree to about 4 ulp: Boost.JSON 1.81's parser does
/// not round long numbers correctly, so a double read, written (shortest form) and read again
/// can move by an ulp or two (found by fuzz_task; no precise mode before Boost 1.83).
inline bool json_close(const boost::json::value& a, const boost::json::value& b) {
    if (a.is_double() && b.is_double()) {
        const double x = a.get_double();
        const double y = b.get_double();
        const double scale = std::max(std::fabs(x), std::fabs(y));
        return x == y || std::fabs(x - y) <= 1e-15 * scale || std::fabs(x - y) < 1e-300;
    }
    if (a.is_array() && b.is_array()) {
        const auto& p = a.get_array();
        const auto& q = b.get_array();
        return p.size() == q.size() && std::equal(p.begin(), p.end(), q.begin(), json_close);
    }
    if (a.is_object() && b.is_object()) {
        const auto& p = a.get_object();
        const auto& q = b.get_object();
        if (p.size() != q.size()) {
            return false;
        }
        return std::all_of(p.begin(), p.end(), [&](const auto& kv) {
            const auto* other = q.if_contains(kv.key());
            return other != nullptr && json_close(kv.value(), *other);
        });
    }
    return a == b;
}

inline bool json_close(
    const std::vector<boost::json::value>& a, const std::vector<boost::json::value>& b
) {
    return a.size() == b.size() &&
           std::equal(a.begin(), a.end(), b.begin(), [](const auto& x, const auto& y) {
               return json_close(x, y);
           });
}

}  // namespace zkd::fuzz

/// Aborts (a crash libFuzzer saves) when `cond` is false.
#define FUZZ_CHECK(cond)                                          \
    do {                                                          \
        if (!(cond)) {                                            \
            ::zkd::fuzz::check_failed(#cond, __FILE__, __LINE__); \
        }                                                         \
    } while (false)

/// Splits "first line\nrest" (no newline: all of it is the first line).
inline std::pair<std::string_view, std::string_view> split_first_line(std::string_view s) {
    const auto nl = s.find('\n');
    if (nl == std::string_view::npos) {
        return {s, {}};
    }
    return {s.substr(0, nl), s.substr(nl + 1)};
}
