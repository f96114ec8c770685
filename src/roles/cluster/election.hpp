// SPDX-License-Identifier: MIT
// Joining a cluster (docs/protocol.md §7): running for master, taking over as master,
// registering as a worker. The namespace itself: roles/cluster/namespace.hpp.
#pragma once

#include "protocol/layout.hpp"
#include "protocol/task.hpp"
#include "zkco/client.hpp"
#include "zkco/retry.hpp"

#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace zkd::roles {

// The retry helpers live in zkco/retry.hpp (applications use them too); the roles call them
// by these names.
using zkco::reconnected_after;
using zkco::wait_connected;

/// This member's node in /election.
struct candidacy {
    std::string path;
    std::int64_t sequence = 0;
};

/// Runs for master (§7): creates this member's ephemeral sequential candidate node
/// (after a connection loss, finds it before creating another) and waits, watching only its
/// immediate predecessor, until it is the lowest. Yields the node when this member leads.
/// Foreign children of /election are ignored. Errors: the session ended
/// (condition::session_lost), or the node vanished (no_node). Cancellation: terminal
/// abandons the wait; the node stays until the session ends.
boost::asio::awaitable<zkco::result<candidacy>> campaign(
    zkco::client& zk, protocol::member_info me
);

/// Takes over as master after winning the election (§7 "Takeover"): syncs, bumps /epoch with
/// a version check and yields the new epoch, the fencing token every master transaction
/// checks; then writes /master. `now_ms` stamps both.
boost::asio::awaitable<zkco::result<std::int64_t>> take_over(
    zkco::client& zk, protocol::member_info me, std::int64_t now_ms
);

/// Registers a worker (§7 "Worker"): /workers/<id> (ephemeral, `me` with capacity and types)
/// and /assign/<id>, in one multi. node_exists on /assign/<id> is fine (a retry).
boost::asio::awaitable<zkco::result<void>> join_workers(zkco::client& zk, protocol::member_info me);

}  // namespace zkd::roles
