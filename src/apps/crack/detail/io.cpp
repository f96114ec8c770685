// SPDX-License-Identifier: MIT
#include "apps/crack/detail/io.hpp"

#include "apps/crack/error.hpp"
#include "zkco/retry.hpp"

#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/this_coro.hpp>

#include <utility>

namespace asio = boost::asio;

namespace zkd::crack::detail {

bool held_job::adopt(crack_job doc, std::int32_t v) {
    if (v <= version) {
        return false;
    }
    job = std::move(doc);
    version = v;
    return true;
}

asio::awaitable<bool> cancelled() {
    const auto cs = co_await asio::this_coro::cancellation_state;
    co_return cs.cancelled() != asio::cancellation_type::none;
}

asio::awaitable<bool> retry_after(zkco::client& zk, zkco::error_code ec) {
    const bool stopped = co_await cancelled();
    if (stopped) {
        co_return false;
    }
    const bool again = co_await zkco::reconnected_after(zk, ec);
    co_return again;
}

asio::awaitable<zkco::result<std::optional<zkco::node>>> read_job(
    zkco::client& zk, std::string path
) {
    for (;;) {
        auto node = co_await zk.get(path);
        if (node) {
            co_return std::optional<zkco::node>(std::move(*node));
        }
        if (node.error() == zkco::errc::no_node) {
            co_return std::optional<zkco::node>();
        }
        const bool retry = co_await retry_after(zk, node.error());
        if (!retry) {
            co_return node.error();
        }
    }
}

asio::awaitable<zkco::result<held_job>> reread_job(zkco::client& zk, std::string path) {
    auto node = co_await read_job(zk, std::move(path));
    if (!node) {
        co_return node.error();
    }
    if (!node->has_value()) {
        co_return zkco::error_code(crack_errc::job_vanished);
    }
    auto doc = decode_crack_job((*node)->data);
    if (!doc) {
        co_return zkco::error_code(crack_errc::garbage_job);
    }
    co_return held_job{std::move(*doc), (*node)->stat.version};
}

}  // namespace zkd::crack::detail
