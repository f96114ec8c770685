// SPDX-License-Identifier: MIT
// What others write into a cluster's namespace (docs/protocol.md §8): nodes below nodes of
// ours that must stay deletable, and nodes that only a live session may own.
#pragma once

#include "zkco/client.hpp"

#include <boost/asio/awaitable.hpp>

#include <cstddef>
#include <string>

namespace zkd::roles {

/// Deletes every node below `path` (not `path` itself), deepest first, at most `limit`
/// nodes, retrying while the outcome is unknown. zkd never creates children under a task,
/// an assignment or a result: any there were written by someone else and would make the
/// node undeletable (not_empty), stalling the transition that deletes it. Yields how many
/// nodes it deleted; no_node anywhere is fine (someone else deleted it).
boost::asio::awaitable<zkco::result<std::size_t>> remove_children(
    zkco::client& zk, std::string path, std::size_t limit = 1000
);

/// True when `s` describes a node that a live session owns (an ephemeral node): only such
/// nodes may stand for a worker or a candidate.
[[nodiscard]] inline bool is_ephemeral(const zkco::stat& s) noexcept {
    return s.ephemeral_owner != 0;
}

}  // namespace zkd::roles
