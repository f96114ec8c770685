// SPDX-License-Identifier: MIT
// The facade's own ZooKeeper session: kept connected (a new one after each ends), read for
// the cluster's layout on first use, and its errors as answers (503 while there is none).
#include "http/detail/server_impl.hpp"
#include "roles/cluster/namespace.hpp"
#include "roles/cluster/session_keeper.hpp"
#include "zkco/deadline.hpp"

#include <boost/asio/this_coro.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

namespace asio = boost::asio;

namespace zkd::http {

/// Keeps a connected session in `current` (roles::keep_sessions: a new one after each
/// ends), until cancelled.
asio::awaitable<void> server::impl::keep_session() {
    roles::connect_policy policy;
    policy.who = "http";
    policy.attempt_timeout = std::max(opts.zk_timeout, opts.zk.session_timeout);
    auto serve = [this](const std::shared_ptr<zkco::client>& zk) -> asio::awaitable<bool> {
        ++sessions;
        auto s = std::make_shared<facade_session>(zk);
        current = s;
        spdlog::info(
            "http: ZooKeeper session 0x{:x} established", zk->session() ? zk->session()->id : 0
        );
        while (!zkco::is_terminal(zk->state())) {
            auto change = co_await zk->wait_state(zk->state_generation());
            const auto cs = co_await asio::this_coro::cancellation_state;
            if (!change || cs.cancelled() != asio::cancellation_type::none) {
                break;
            }
        }
        if (current == s) {
            current.reset();
        }
        if (!stopping) {
            spdlog::warn(
                "http: ZooKeeper session {}; making a new one", zkco::to_string(zk->state())
            );
        }
        co_return !stopping;
    };
    co_await roles::keep_sessions(opts.zk, policy, serve);
    current.reset();
}

api_error server::impl::zk_error(const zkco::error_code& ec, std::string_view doing) const {
    const std::string what(doing);
    if (ec == roles::client_errc::garbage_result) {
        return {502, "garbage_result", what + ": the result node does not hold a zkd result"};
    }
    if (ec == zkco::errc::operation_timeout) {
        return {
            503, "zookeeper_timeout",
            what + ": ZooKeeper did not answer within " + std::to_string(opts.zk_timeout.count()) +
                " ms"};
    }
    if (ec == zkco::condition::retryable || ec == zkco::condition::session_lost) {
        return {503, "zookeeper_unavailable", what + ": " + ec.message()};
    }
    return {500, "zookeeper_error", what + ": " + ec.message()};
}

/// The connected session with its layout, or why not (503).
asio::awaitable<api_result<std::shared_ptr<facade_session>>> server::impl::session() {
    auto s = current;
    if (!s || s->zk.state() != zkco::session_state::connected) {
        co_return api_error{503, "zookeeper_unavailable", "not connected to ZooKeeper"};
    }
    if (!s->l) {
        auto l = co_await zkco::with_timeout(roles::read_layout(s->zk), opts.zk_timeout);
        if (!l) {
            if (l.error() == zkco::errc::no_node) {
                co_return api_error{
                    503, "no_cluster", "no zkd cluster at " + opts.zk.connect_string + " yet"};
            }
            if (l.error() == zkco::errc::data_inconsistency) {
                co_return api_error{500, "bad_cluster", "/meta is not a zkd format 1 meta node"};
            }
            co_return zk_error(l.error(), "reading /meta");
        }
        if (!s->l) {  // another request may have read it meanwhile
            s->l = *l;
            s->tc = std::make_unique<roles::task_client>(s->zk, *l);
        }
    }
    co_return s;
}

}  // namespace zkd::http
