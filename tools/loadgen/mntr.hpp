// SPDX-License-Identifier: MIT
// ZooKeeper's `mntr` four-letter command: fetching it and reading the request counters.
#pragma once

#include "zkco/config.hpp"

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zkd::loadgen {

/// The `key<TAB>value` lines of an `mntr` answer. Lines without a tab are ignored.
std::map<std::string, std::string, std::less<>> parse_mntr(std::string_view text);

/// Request counters of ZooKeeper 3.8 servers (cumulative since each server started).
struct zk_counts {
    /// zk_cnt_updatelatency: requests that carry a transaction header, i.e. writes (create,
    /// delete, setData, a multi counts once, failed writes too, createSession, closeSession).
    std::uint64_t writes = 0;
    /// zk_cnt_readlatency: requests without one (exists, getData, getChildren, sync,
    /// setWatches and pings).
    std::uint64_t reads = 0;
    /// zk_packets_received: every packet, pings included.
    std::uint64_t packets_received = 0;

    friend bool operator==(const zk_counts&, const zk_counts&) = default;
};

/// The counters in one parsed answer; nullopt when one of them is missing or not a number
/// (a server older than 3.6, or an answer that is not `mntr`'s).
std::optional<zk_counts> counts_from(const std::map<std::string, std::string, std::less<>>& mntr);

/// `after - before`, each field (0 where a counter went backwards, e.g. a server restarted).
zk_counts operator-(const zk_counts& after, const zk_counts& before) noexcept;

/// What a fetch yields: a value, or why there is none (one line of text).
template <class T>
struct fetched {
    std::optional<T> value;
    std::string error;  ///< set when value is empty
};

/// Sends a four-letter word (e.g. "mntr") to one server and yields its whole answer. Errors
/// (as text): resolution, connection, the timeout, an empty answer, or the server refusing
/// the word ("... is not executed because it is not in the whitelist."). Never throws for
/// those. Runs on the caller's executor.
boost::asio::awaitable<fetched<std::string>> four_letter(
    zkco::server_address server, std::string word, std::chrono::milliseconds timeout
);

/// Counters summed over every server of `servers` (each counts the requests of its own
/// clients, so the sum covers an ensemble); no value if one server fails.
boost::asio::awaitable<fetched<zk_counts>> snapshot(
    std::vector<zkco::server_address> servers, std::chrono::milliseconds timeout
);

}  // namespace zkd::loadgen
