// SPDX-License-Identifier: MIT
#pragma once

#include "zkco/error.hpp"
#include "zkco/types.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zkd::zkco {

/// Digest credentials (`user:password`), sent on connect and on every reconnect.
struct credentials {
    std::string user;
    std::string password;
};

/// A session's id and password, to attach a second handle to a live session.
struct session_handle {
    std::int64_t id = 0;
    std::string password;  ///< 16 raw bytes
};

struct config {
    /// "host:port[,host:port...][/chroot]". Hosts are resolved asynchronously once per
    /// connect, never on the event loop. Port defaults to 2181.
    std::string connect_string = "127.0.0.1:2181";
    /// Requested session timeout; the server clamps it to [2, 20] x its tickTime.
    std::chrono::milliseconds session_timeout{10'000};
    std::optional<credentials> auth;
    /// ACL for creates that give none. Empty: open_acl(), or creator_all_acl() with `auth`.
    acl_list default_acl;
    /// Attach to this existing session instead of creating one.
    std::optional<session_handle> resume;
    /// Requests larger than this are refused with bad_arguments before they are sent: the
    /// server drops the connection of a client that sends more than its jute.maxbuffer
    /// (1 MiB by default), which would fail every other request in flight.
    std::size_t max_request_bytes = 1'000'000;
};

struct server_address {
    std::string host;
    std::uint16_t port = 2181;

    friend bool operator==(const server_address&, const server_address&) = default;
};

struct connect_string_parts {
    std::vector<server_address> servers;
    std::string chroot;  ///< empty for none, else a valid absolute path other than "/"
};

/// Parses "h1:p1,[::1]:p2/chroot". bad_arguments when a host is empty, a port is not in
/// 1..65535, brackets hold no IPv6 literal (no ':'), or the chroot is not a valid path.
result<connect_string_parts> parse_connect_string(std::string_view s);

/// Inverse of parse_connect_string (IPv6 hosts in brackets).
std::string format_connect_string(const connect_string_parts& parts);

}  // namespace zkd::zkco
