// SPDX-License-Identifier: MIT
#pragma once

#include "cli/options.hpp"
#include "roles/layout.hpp"
#include "zkco/client.hpp"

#include <boost/asio/awaitable.hpp>

#include <functional>

namespace zkd::cli {

/// What a client command does once connected: yields the exit code.
using cluster_body = std::function<boost::asio::awaitable<int>(zkco::client&, roles::layout)>;

/// Runs `body` on a session with the cluster `t`, on an io_context of its own, and returns
/// its exit code (logging only errors meanwhile). Failing to connect within t.connect_timeout prints why and returns
/// exit_unreachable. With `create` the cluster's layout is created if missing (submit may
/// come before any `zkd run`); without, a namespace with no cluster is an error (exit_failed).
int with_cluster(const cluster_target& t, bool create, cluster_body body);

/// Prints "zkd: <message>" to stderr.
void complain(const std::string& message);

}  // namespace zkd::cli
