// SPDX-License-Identifier: MIT
// Keeping a ZooKeeper session for a zkd process: connecting with backoff, creating a
// namespace from the ensemble's root, and making a new session after each one ends (a new
// client per session, style.md §8.6). `zkd run` (node.cpp), the HTTP API and the client
// commands all keep their sessions with these.
#pragma once

#include "reactor/event.hpp"
#include "zkco/client.hpp"

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace zkd::roles {

/// Where a namespace lives on an ensemble. A connect string may carry a chroot of its own
/// ("h1:2181,h2:2181/apps"); the namespace's path goes below it.
struct namespace_place {
    std::string hosts;  ///< the connect string without its chroot: a session on the root
    std::string path;   ///< the namespace's full path from the ensemble's root
};

/// Splits `connect_string` (hosts with an optional chroot) and places `chroot` (a namespace's
/// path, protocol::chroot_path) below it; nullopt if it is not a connect string.
[[nodiscard]] std::optional<namespace_place> place_namespace(
    std::string_view connect_string, std::string_view chroot
);

/// How connect_with_backoff tries.
struct connect_policy {
    std::string who = "zkd";  ///< names the log lines ("node", "http")
    /// How long one connect attempt may take.
    std::chrono::milliseconds attempt_timeout{10'000};
    /// The pause after a failed attempt, doubling up to longest_pause.
    std::chrono::milliseconds first_pause{200};
    std::chrono::milliseconds longest_pause{5'000};
    /// Give up when this much time has passed since the first attempt; zero: never.
    std::chrono::milliseconds give_up_after{0};
    /// Give up once this event is set (a drain was asked for), at once, even during an
    /// attempt. Not owned; may be null.
    reactor::event* stop = nullptr;
    /// Log failed attempts (at warn: the first of an outage, then every 30 s while it
    /// lasts). Client commands turn it off and say themselves what went wrong.
    bool log = true;
};

/// Connects `zk`, trying again after each failed attempt, until connected (an empty result),
/// cancelled (operation_cancelled), `p.stop` is set (operation_cancelled), the client ends
/// (its error) or `p.give_up_after` runs out (the last attempt's error, operation_timeout
/// when it timed out). An attempt not connected within half a second probes the hosts with
/// a plain TCP connect (zkco::probe_hosts), off the event loop and bounded; it ends at once
/// (connection_refused or host_not_found) when no host listens. `why`, when given, receives
/// what the last probe found (empty if none ran), and the log lines say it.
[[nodiscard]] boost::asio::awaitable<zkco::result<void>> connect_with_backoff(
    zkco::client& zk, const connect_policy& p, std::string* why = nullptr
);

/// A failed connect in words: the probe's findings `why` (connect_with_backoff) with the
/// error, e.g. "connection refused by 127.0.0.1:1" or "Operation timed out (no answer from
/// 10.0.0.1:2181 within 1000 ms)"; the error's message alone when `why` is empty.
[[nodiscard]] std::string describe_failure(const zkco::error_code& ec, const std::string& why);

/// Creates `place.path` and its parents (roles::ensure_chroot) with a session of its own on
/// the ensemble's root: `cfg` without its connect string, which becomes `place.hosts`.
/// Connects as connect_with_backoff does.
[[nodiscard]] boost::asio::awaitable<zkco::result<void>> make_namespace(
    zkco::config cfg, const namespace_place& place, const connect_policy& p
);

/// What a process does with each session: runs while it is useful (usually until the session
/// ends) and yields whether to go on with a new session.
using session_body =
    std::function<boost::asio::awaitable<bool>(const std::shared_ptr<zkco::client>&)>;

/// Keeps sessions until `body` says stop, the policy gives up, or the caller cancels (any
/// cancellation type; it completes normally): connects a new client (connect_with_backoff),
/// runs `body` on it, closes it, and makes the next one after a pause (first_pause, doubling
/// up to longest_pause while sessions keep ending within a minute). The body may hold on to
/// the client past its close: its requests then fail with a session error.
boost::asio::awaitable<void> keep_sessions(zkco::config cfg, connect_policy p, session_body body);

}  // namespace zkd::roles
