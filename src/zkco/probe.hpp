// SPDX-License-Identifier: MIT
// Why ZooKeeper cannot be reached: the C client retries a refused or unresolvable host in
// silence until the connect times out, so a failed connect is explained by a plain TCP
// connect to each host of the connect string. Only ever on a failed (or slow) connect.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <string>
#include <string_view>

namespace zkd::zkco {

/// What a probe found about the hosts of a connect string.
struct probe_report {
    /// One clause per host, joined by "; ": "connection refused by 127.0.0.1:1",
    /// "host not found: zk.example" ... Empty when the connect string does not parse.
    std::string text;
    /// Set when every host refused the connection or does not resolve (no ZooKeeper is
    /// there to wait for): connection_refused, or host_not_found when no host resolves.
    boost::system::error_code nobody;
};

/// Resolves every host of `connect_string` (asynchronously: getaddrinfo runs on the
/// resolver's own thread) and opens a TCP connection to it, all at once, closing each as
/// soon as it is open. Completes within `bound` whatever the network does (a host that has
/// not answered by then is reported as such); never blocks the caller's executor. Use on a
/// single-threaded executor. Cancellation: ends the wait, with what is known so far.
boost::asio::awaitable<probe_report> probe_hosts(
    std::string_view connect_string, std::chrono::milliseconds bound
);

}  // namespace zkd::zkco
