// SPDX-License-Identifier: MIT
#pragma once

// A pending node's name as the master keeps it (docs/protocol.md §3): a task id or a
// bundle id in 16 bytes and no allocation, any other name (garbage someone wrote into a
// pending shard) on the heap. Keys compare exactly as their names do as strings, so a map
// of keys is the queue in the order of §3 (priority, then time, then client and counter).

#include <compare>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace zkd::roles {

class task_key {
public:
    /// The longest name held in the compact form: a bundle id, `<tid>_<n>` with n ≤ 1000.
    static constexpr std::size_t max_compact_length = 36;

    // Not explicit: a name converts to its key like a string literal to a string, so maps
    // keyed by task_key are looked up with the names the rest of the code holds.
    task_key(std::string_view name);
    task_key(const std::string& name) : task_key(std::string_view(name)) {}
    task_key(const char* name) : task_key(std::string_view(name)) {}

    task_key(const task_key& other);
    task_key(task_key&& other) noexcept : hi_(other.hi_), lo_(other.lo_) {
        other.hi_ = 0;  // a compact key: `other` owns nothing any more
    }
    task_key& operator=(const task_key& other);
    task_key& operator=(task_key&& other) noexcept;
    ~task_key();

    /// The name.
    [[nodiscard]] std::string str() const;
    /// True when held in the compact form (the name is a valid task or bundle id).
    [[nodiscard]] bool compact() const noexcept { return hi_ != other_tag; }
    [[nodiscard]] std::size_t hash() const noexcept {
        if (!compact()) {
            return other_hash();
        }
        // A 64-bit mix (the finalizer of MurmurHash3) of both halves. Inline, like ==: a
        // listing of a pending shard looks up every one of its names.
        auto h = (hi_ * 0x9e3779b97f4a7c15U) ^ lo_;
        h ^= h >> 33;
        h *= 0xff51afd7ed558ccdU;
        h ^= h >> 33;
        h *= 0xc4ceb9fe1a85ec53U;
        h ^= h >> 33;
        return static_cast<std::size_t>(h);
    }

    friend bool operator==(const task_key& a, const task_key& b) noexcept {
        if (a.hi_ != b.hi_) {
            return false;
        }
        return a.compact() ? a.lo_ == b.lo_ : a.other_equal(b);
    }
    friend std::strong_ordering operator<=>(const task_key& a, const task_key& b) noexcept {
        if (a.compact() && b.compact()) {
            return a.hi_ != b.hi_ ? a.hi_ <=> b.hi_ : a.lo_ <=> b.lo_;
        }
        return a.compare_as_strings(b);
    }

private:
    // Compact: hi_ = P (4 bits) | ms (44 bits) | the first 16 bits of client and counter;
    // lo_ = their last 40 bits | the bundle suffix (24 bits, see task_key.cpp). P is at most
    // 9, so a hi_ whose first 4 bits are all set is free to mark the other form, in which
    // other_ points to the name.
    static constexpr std::uint64_t other_tag = ~std::uint64_t{0};

    /// Writes the compact form's name to `out` (room for max_compact_length); its length.
    std::size_t write(char* out) const noexcept;
    // The other form's parts of hash(), == and <=> (rare: garbage in a pending shard).
    [[nodiscard]] std::size_t other_hash() const noexcept;
    [[nodiscard]] bool other_equal(const task_key& b) const noexcept;
    [[nodiscard]] std::strong_ordering compare_as_strings(const task_key& b) const noexcept;

    std::uint64_t hi_ = 0;
    union {
        std::uint64_t lo_;
        std::string* other_;
    };
};

struct task_key_hash {
    std::size_t operator()(const task_key& k) const noexcept { return k.hash(); }
};

}  // namespace zkd::roles
