// SPDX-License-Identifier: MIT
#include "roles/master/detail/task_key.hpp"

#include "protocol/ids.hpp"

#include <algorithm>
#include <array>
#include <functional>

namespace zkd::roles {

namespace {

// The fields of `t<P>-<ms:13>-<hex:14>[_<n>]` (protocol::task_id_length = 31).
constexpr std::size_t ms_at = 3;
constexpr std::size_t ms_digits = 13;
constexpr std::size_t hex_at = 17;
constexpr std::size_t hex_digits = 14;
constexpr std::size_t suffix_digits = 4;  // n ≤ protocol::max_bundle_tasks = 1000
constexpr std::uint64_t low40 = (std::uint64_t{1} << 40) - 1;

static_assert(protocol::task_id_length == hex_at + hex_digits);
static_assert(protocol::max_bundle_tasks < 10'000);
static_assert(task_key::max_compact_length == protocol::task_id_length + 1 + suffix_digits);

std::uint64_t hex_value(char c) noexcept {
    return c <= '9' ? static_cast<std::uint64_t>(c - '0')
                    : static_cast<std::uint64_t>(c - 'a' + 10);
}

}  // namespace

// The bundle suffix `_<n>` sorts as its digits do as a string ("_10" before "_9"): each
// digit d is written d + 1 in base 11, padded on the right with 0 to 4 places, so a shorter
// suffix sorts before the longer ones it begins ("_1" < "_10"), and a plain id (no suffix:
// all padding) before its bundles.
task_key::task_key(std::string_view name) : lo_(0) {
    // One pass that checks the form protocol::is_valid_task_id checks and reads its fields
    // (a listing of a pending shard brings tens of thousands of names at a time).
    const auto other = [&] {
        hi_ = other_tag;
        other_ = new std::string(name);
    };
    const auto digit = [](char c) { return c >= '0' && c <= '9'; };
    if (name.size() < protocol::task_id_length || name[0] != 't' || !digit(name[1]) ||
        name[2] != '-' || name[ms_at + ms_digits] != '-') {
        other();
        return;
    }
    std::uint64_t ms = 0;
    for (std::size_t i = ms_at; i < ms_at + ms_digits; ++i) {
        if (!digit(name[i])) {
            other();
            return;
        }
        ms = ms * 10 + static_cast<std::uint64_t>(name[i] - '0');
    }
    std::uint64_t hex = 0;
    for (std::size_t i = hex_at; i < hex_at + hex_digits; ++i) {
        const char c = name[i];
        if (!digit(c) && (c < 'a' || c > 'f')) {
            other();
            return;
        }
        hex = (hex << 4) | hex_value(c);
    }
    std::uint64_t suffix = 0;
    if (name.size() > protocol::task_id_length) {
        // `_<n>`: 1 ≤ n ≤ max_bundle_tasks, no leading zero.
        const auto digits = name.substr(protocol::task_id_length + 1);
        if (name[protocol::task_id_length] != '_' || protocol::bundle_size(name) == 0) {
            other();
            return;
        }
        for (std::size_t i = 0; i < suffix_digits; ++i) {
            suffix = suffix * 11 +
                     (i < digits.size() ? static_cast<std::uint64_t>(digits[i] - '0') + 1 : 0);
        }
    }
    hi_ = (static_cast<std::uint64_t>(name[1] - '0') << 60) | (ms << 16) | (hex >> 40);
    lo_ = ((hex & low40) << 24) | suffix;
}

task_key::task_key(const task_key& other) : hi_(other.hi_), lo_(other.lo_) {
    if (!other.compact()) {
        other_ = new std::string(*other.other_);
    }
}

task_key& task_key::operator=(const task_key& other) {
    if (this != &other) {
        task_key copy(other);
        *this = std::move(copy);
    }
    return *this;
}

task_key& task_key::operator=(task_key&& other) noexcept {
    if (this != &other) {
        std::swap(hi_, other.hi_);
        std::swap(lo_, other.lo_);
    }
    return *this;
}

task_key::~task_key() {
    if (!compact()) {
        delete other_;
    }
}

std::size_t task_key::write(char* out) const noexcept {
    static constexpr std::string_view hex_chars = "0123456789abcdef";
    out[0] = 't';
    out[1] = static_cast<char>('0' + (hi_ >> 60));
    out[2] = '-';
    auto ms = (hi_ >> 16) & ((std::uint64_t{1} << 44) - 1);
    for (std::size_t i = ms_at + ms_digits; i-- > ms_at;) {
        out[i] = static_cast<char>('0' + ms % 10);
        ms /= 10;
    }
    out[ms_at + ms_digits] = '-';
    auto hex = ((hi_ & 0xffffU) << 40) | (lo_ >> 24);
    for (std::size_t i = hex_at + hex_digits; i-- > hex_at;) {
        out[i] = hex_chars[hex & 0xfU];
        hex >>= 4;
    }
    auto suffix = lo_ & 0xffffffU;
    if (suffix == 0) {
        return protocol::task_id_length;
    }
    std::array<std::uint64_t, suffix_digits> places{};
    for (std::size_t i = suffix_digits; i-- > 0;) {
        places[i] = suffix % 11;
        suffix /= 11;
    }
    std::size_t n = protocol::task_id_length;
    out[n++] = '_';
    for (const auto p : places) {
        if (p == 0) {
            break;
        }
        out[n++] = static_cast<char>('0' + p - 1);
    }
    return n;
}

std::string task_key::str() const {
    if (!compact()) {
        return *other_;
    }
    std::array<char, max_compact_length> buf{};
    return {buf.data(), write(buf.data())};
}

std::size_t task_key::other_hash() const noexcept {
    return std::hash<std::string_view>{}(*other_);
}

bool task_key::other_equal(const task_key& b) const noexcept {
    return *other_ == *b.other_;
}

std::strong_ordering task_key::compare_as_strings(const task_key& b) const noexcept {
    std::array<char, max_compact_length> abuf{};
    std::array<char, max_compact_length> bbuf{};
    const std::string_view as =
        compact() ? std::string_view(abuf.data(), write(abuf.data())) : std::string_view(*other_);
    const std::string_view bs = b.compact() ? std::string_view(bbuf.data(), b.write(bbuf.data()))
                                            : std::string_view(*b.other_);
    return as <=> bs;
}

}  // namespace zkd::roles
