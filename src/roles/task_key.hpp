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
    [[nodiscard]] std::size_t hash() const noexcept;

    friend bool operator==(const task_key& a, const task_key& b) noexcept;
    friend std::strong_ordering operator<=>(const task_key& a, const task_key& b) noexcept;

private:
    // Compact: hi_ = P (4 bits) | ms (44 bits) | the first 16 bits of client and counter;
    // lo_ = their last 40 bits | the bundle suffix (24 bits, see task_key.cpp). P is at most
    // 9, so a hi_ whose first 4 bits are all set is free to mark the other form, in which
    // other_ points to the name.
    static constexpr std::uint64_t other_tag = ~std::uint64_t{0};

    /// Writes the compact form's name to `out` (room for max_compact_length); its length.
    std::size_t write(char* out) const noexcept;

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
