// SPDX-License-Identifier: MIT
// Integers read from JSON documents: what the workflow and schedule codecs accept as one.
#pragma once

#include <boost/json/value.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>

namespace zkd::protocol {

/// An integer: a JSON integer, or a double holding a whole number within +-2^53.
inline std::optional<std::int64_t> as_integer(const boost::json::value& v) noexcept {
    if (v.is_int64()) {
        return v.get_int64();
    }
    if (v.is_uint64()) {
        const auto u = v.get_uint64();
        if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
            return std::nullopt;
        }
        return static_cast<std::int64_t>(u);
    }
    if (v.is_double()) {
        const double d = v.get_double();
        constexpr double limit = 9007199254740992.0;  // 2^53
        if (std::isfinite(d) && std::floor(d) == d && std::fabs(d) <= limit) {
            return static_cast<std::int64_t>(d);
        }
    }
    return std::nullopt;
}

/// The integer member `key` of `o` within [lo, hi]; nullopt when absent or out of range.
template <class Object>
std::optional<std::int64_t> integer_in(
    const Object& o, std::string_view key, std::int64_t lo, std::int64_t hi
) noexcept {
    const auto* v = o.if_contains(key);
    if (v == nullptr) {
        return std::nullopt;
    }
    auto n = as_integer(*v);
    if (!n || *n < lo || *n > hi) {
        return std::nullopt;
    }
    return n;
}

}  // namespace zkd::protocol
