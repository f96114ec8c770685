// SPDX-License-Identifier: MIT
#pragma once

#include "cli/options.hpp"
#include "protocol/layout.hpp"
#include "zkco/client.hpp"

#include <boost/asio/awaitable.hpp>

#include <functional>
#include <string>
#include <string_view>

namespace zkd::cli {

/// What a client command does once connected: yields the exit code.
using cluster_body = std::function<boost::asio::awaitable<int>(zkco::client&, protocol::layout)>;

/// What a client command may do with a namespace that holds no cluster.
enum class namespace_mode {
    existing,      ///< no cluster is an error (exit_failed) saying how to start one
    offer_create,  ///< the same, and the error names --create-namespace (submit)
    create,        ///< create the namespace and its layout (submit --create-namespace)
};

/// Runs `body` on a session with the cluster `t`, on an io_context of its own, and returns
/// its exit code (logging only errors meanwhile). Failing to connect within
/// t.connect_timeout prints why and returns exit_unreachable. A namespace with no cluster
/// (no /meta) is created only with namespace_mode::create; a mistyped --namespace is
/// otherwise an error, never a new empty cluster. With credentials, a namespace whose nodes
/// others may use (roles::check_protected) is refused (exit_failed).
int with_cluster(const cluster_target& t, namespace_mode mode, cluster_body body);

/// What a command that works on the namespace node itself does, with a session on the
/// ensemble's root and the namespace's full path ("<path>/zkd/<ns>"): yields the exit code.
using root_body = std::function<boost::asio::awaitable<int>(zkco::client&, std::string)>;

/// Like with_cluster, but on a session without a chroot, whatever the namespace holds.
int with_root(const cluster_target& t, root_body body);

/// Prints "zkd: <message>" to stderr, escaped as by printable().
void complain(const std::string& message);

/// `s` safe for a terminal: control characters (C0, DEL, C1) and bytes that are not UTF-8
/// become \n, \t, \e, \\ or \xNN, so a string read from ZooKeeper (a worker's host, an
/// id, a type, an error message) can neither move the cursor nor change colours. Printable
/// UTF-8 passes unchanged.
std::string printable(std::string_view s);

}  // namespace zkd::cli
