// SPDX-License-Identifier: MIT
// Routing by key across cells (docs/scaling.md): past what one ZooKeeper ensemble writes, a
// deployment runs several zkd clusters, each a namespace on an ensemble (a "cell"), and its
// clients send each key (a tenant, a job, a customer) to one cell. Rendezvous hashing: every
// client that knows the same cells picks the same one for a key, with no coordination; adding
// a cell moves only the keys the new cell wins (about 1/n of them), removing one moves only
// the keys it had.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace zkd::protocol {

/// The weight of `key` on the cell named `cell`: a 64-bit FNV-1a over the cell's name, a 0
/// byte and the key, finished with splitmix64's mixer (docs/scaling.md gives the constants).
[[nodiscard]] std::uint64_t route_weight(std::string_view cell, std::string_view key) noexcept;

/// The index in `cells` of the cell that `key` goes to: the highest route_weight, the lowest
/// index on a tie. `cells` names each cell the same way in every client (docs/scaling.md's
/// convention: its connect string, '@' and its namespace, "zk1:2181,zk2:2181@orders"), in any
/// order, each once; the result depends on the names, never on their order. Empty `cells`: 0.
[[nodiscard]] std::size_t pick_cell(
    std::string_view key, std::span<const std::string> cells
) noexcept;

}  // namespace zkd::protocol
