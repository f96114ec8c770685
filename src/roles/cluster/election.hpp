// SPDX-License-Identifier: MIT
// Joining a cluster (docs/protocol.md §2, §7): the namespace and its fixed nodes, running for
// master, taking over as master, registering as a worker.
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

/// With a client connected *without* a chroot: creates `chroot` ("/zkd/<ns>") and its
/// ancestors if missing (ancestors with the open ACL, the namespace with the default one).
/// With credentials, a namespace node that already exists must be protected by them
/// (check_protected): otherwise errc::invalid_acl, with an error log naming the node, its
/// ACL and what to do. Someone else set it up, and adopting it would let them in.
boost::asio::awaitable<zkco::result<void>> ensure_chroot(zkco::client& root, std::string chroot);

/// With a client chrooted at the namespace: creates /meta (from `defaults`) unless it exists,
/// then every fixed node of §2, and yields the layout /meta declares. Garbage in /meta gives
/// errc::data_inconsistency (and a log line saying what is wrong): it decides every path, so
/// guessing would be worse than stopping. With credentials, the namespace and every fixed
/// node must be protected by them, as for ensure_chroot (errc::invalid_acl otherwise).
boost::asio::awaitable<zkco::result<protocol::layout>> ensure_layout(
    zkco::client& zk, protocol::meta_info defaults
);

/// With credentials `auth` and a client chrooted at the namespace: checks that the namespace
/// node ("/") and each fixed node of `l` that exists grant nothing to anyone but `auth`'s
/// digest id. Yields nullopt if so; otherwise a message naming the first node that is not,
/// its ACL and what to do (also when an ACL cannot be read). Reads only.
boost::asio::awaitable<std::optional<std::string>> check_protected(
    zkco::client& zk, protocol::layout l, zkco::credentials auth
);

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
