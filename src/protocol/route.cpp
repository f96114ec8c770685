// SPDX-License-Identifier: MIT
#include "protocol/route.hpp"

namespace zkd::protocol {

std::uint64_t route_weight(std::string_view cell, std::string_view key) noexcept {
    std::uint64_t h = 14695981039346656037ULL;  // FNV-1a 64 offset basis
    auto add = [&h](unsigned char c) {
        h ^= c;
        h *= 1099511628211ULL;  // FNV-1a 64 prime
    };
    for (const char c : cell) {
        add(static_cast<unsigned char>(c));
    }
    add(0);
    for (const char c : key) {
        add(static_cast<unsigned char>(c));
    }
    // splitmix64's finalizer: FNV's low bits alone spread similar keys poorly.
    h = (h ^ (h >> 30U)) * 0xbf58476d1ce4e5b9ULL;
    h = (h ^ (h >> 27U)) * 0x94d049bb133111ebULL;
    return h ^ (h >> 31U);
}

std::size_t pick_cell(std::string_view key, std::span<const std::string> cells) noexcept {
    std::size_t best = 0;
    std::uint64_t best_weight = 0;
    for (std::size_t i = 0; i < cells.size(); ++i) {
        const auto w = route_weight(cells[i], key);
        if (i == 0 || w > best_weight) {
            best = i;
            best_weight = w;
        }
    }
    return best;
}

}  // namespace zkd::protocol
