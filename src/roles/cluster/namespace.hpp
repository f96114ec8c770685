// SPDX-License-Identifier: MIT
// A cluster's namespace (docs/protocol.md §2): making it and its fixed nodes, checking who may
// touch them, and reading the layout /meta declares and the result directories, for members
// and clients alike.
#pragma once

#include "protocol/layout.hpp"
#include "protocol/task.hpp"
#include "zkco/client.hpp"

#include <boost/asio/awaitable.hpp>

#include <optional>
#include <string>
#include <vector>

namespace zkd::roles {

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

/// Reads the layout /meta declares, creating nothing (unlike ensure_layout). Errors: no_node
/// (no cluster in this namespace yet), data_inconsistency (/meta is garbage), the session's.
boost::asio::awaitable<zkco::result<protocol::layout>> read_layout(zkco::client& zk);

/// Every directory below /results holding results: the result shards and the clients'
/// directories (`/results/<c>`, made on demand, so the set changes), as paths sorted by
/// name, from the child names of /results. Anything that enumerates results lists these,
/// never only layout::result_shard_paths().
std::vector<std::string> result_dir_paths(std::vector<std::string> names);

/// Lists /results (one read) and yields result_dir_paths of its children. Errors: no_node
/// (no cluster in this namespace), the session's.
boost::asio::awaitable<zkco::result<std::vector<std::string>>> list_result_dirs(zkco::client& zk);

}  // namespace zkd::roles
