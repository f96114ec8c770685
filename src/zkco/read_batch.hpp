// SPDX-License-Identifier: MIT
// Reads issued together and awaited together: one round trip for many reads instead of one
// each. The one read fan-out of zkd (the master's view, the inspect queries, the client).
#pragma once

#include "zkco/client.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace zkd::zkco {

/// Each read gets a slot its completion fills; wait() completes once every slot issued so far
/// is filled. The slots and the count are shared with the completions, so a caller cancelled
/// early leaves them something alive to write to (a slot not filled yet holds
/// operation_aborted). Use from the client's executor.
class read_batch {
public:
    template <class T>
    using slot = std::shared_ptr<result<T>>;

    explicit read_batch(client& zk);

    slot<node> get(std::string path);
    slot<std::optional<stat>> exists(std::string path);
    slot<children> get_children(std::string path);

    /// Waits for every read issued so far. operation_aborted when cancelled first.
    boost::asio::awaitable<result<void>> wait();

private:
    struct state {
        explicit state(const boost::asio::any_io_executor& ex);
        std::size_t left = 0;
        boost::asio::steady_timer timer;
    };

    template <class T>
    slot<T> new_slot();
    template <class T>
    auto completion(slot<T> s);

    client* zk_;
    std::shared_ptr<state> st_;
};

/// The data of each node, in the order of `paths`, read at once. An entry holds the read's
/// error (no_node: none there); operation_aborted for a read still out when cancelled.
boost::asio::awaitable<std::vector<result<node>>> get_all(
    client& zk, std::vector<std::string> paths
);
/// The stat of each node (nullopt: none there), in the order of `paths`, read at once.
boost::asio::awaitable<std::vector<result<std::optional<stat>>>> exists_all(
    client& zk, std::vector<std::string> paths
);

}  // namespace zkd::zkco
