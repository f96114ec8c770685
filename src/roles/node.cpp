// SPDX-License-Identifier: MIT
#include "roles/node.hpp"

#include "roles/election.hpp"
#include "roles/ids.hpp"
#include "zkco/client.hpp"
#include "zkco/deadline.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <algorithm>
#include <array>

namespace asio = boost::asio;

namespace zkd::roles {

namespace {

using namespace std::chrono_literals;


std::string hostname() {
    std::array<char, 256> buf{};
    if (::gethostname(buf.data(), buf.size() - 1) != 0) {
        return "host";
    }
    return std::string(buf.data());
}

/// `o.zk` may carry a chroot of its own: the namespace goes below it.
zkco::config session_config(const node_options& o, const std::string& chroot) {
    zkco::config cfg;
    cfg.connect_string = o.zk + chroot;
    cfg.session_timeout = o.session_timeout;
    cfg.auth = o.auth;
    return cfg;
}

/// Waits until cancelled, with a deadline: false when cancelled.
asio::awaitable<bool> pause(std::chrono::milliseconds d) {
    asio::steady_timer t(co_await asio::this_coro::executor, d);
    auto [ec] = co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
    co_return !ec;
}

/// Connects, retrying with backoff until connected or cancelled; false when cancelled.
asio::awaitable<bool> connect_with_backoff(zkco::client& zk, const std::string& what) {
    auto backoff = 200ms;
    for (;;) {
        auto c = co_await zkco::with_timeout(zk.connect(), std::max(zk.config().session_timeout, 2000ms));
        if (c) {
            co_return true;
        }
        auto cs = co_await asio::this_coro::cancellation_state;
        if (cs.cancelled() != asio::cancellation_type::none) {
            co_return false;
        }
        if (zkco::is_terminal(zk.state())) {
            co_return false;
        }
        spdlog::warn("{}: cannot reach ZooKeeper at {}: {}; retrying in {} ms", what,
                     zk.config().connect_string, c.error().message(), backoff.count());
        const bool waited = co_await pause(backoff);
        if (!waited) {
            co_return false;
        }
        backoff = std::min(backoff * 2, std::chrono::milliseconds(5000));
    }
}

asio::awaitable<void> mastership(zkco::client& zk, const node_options& o, layout l, member_info me) {
    if (o.role == node_role::worker_only) {
        co_return;
    }
    auto won = co_await campaign(zk, me);
    if (!won) {
        co_return;  // the session ended
    }
    spdlog::info("node {}: elected master", me.id);
    auto epoch = co_await take_over(zk, me, now_ms());
    if (!epoch) {
        spdlog::warn("node {}: could not take over: {}", me.id, epoch.error().message());
        co_return;
    }
    master_stats stats;
    co_await run_master(zk, l, me, *epoch, o.master, &stats);
}

asio::awaitable<void> work(zkco::client& zk, const node_options& o, layout l, member_info me,
                           const registry& reg, reactor::compute_pool& pool) {
    if (o.role == node_role::standby || o.capacity <= 0) {
        co_return;
    }
    me.capacity = o.capacity;
    co_await run_worker(zk, l, me, reg, pool, o.worker);
}

}  // namespace

asio::awaitable<void> run_node(node_options o, const registry& reg, reactor::compute_pool& pool) {
    using namespace asio::experimental::awaitable_operators;
    co_await asio::this_coro::throw_if_cancelled(false);
    const auto ex = co_await asio::this_coro::executor;
    const std::string chroot = chroot_path(o.ns);
    const std::string host = o.host.empty() ? hostname() : o.host;

    {
        // The namespace must exist before a chrooted session can use it: create it from the
        // ensemble's root.
        auto bare = o;
        if (auto parts = zkco::parse_connect_string(o.zk)) {
            parts->chroot.clear();
            bare.zk = zkco::format_connect_string(*parts);
        }
        const auto prefix = zkco::parse_connect_string(o.zk);
        const std::string full = (prefix ? prefix->chroot : std::string()) + chroot;
        zkco::client root(ex, session_config(bare, ""));
        if (!co_await connect_with_backoff(root, "node")) {
            co_await root.close();
            co_return;
        }
        auto made = co_await ensure_chroot(root, full);
        co_await root.close();
        if (!made) {
            spdlog::error("node: cannot create the namespace {}: {}", chroot, made.error().message());
            co_return;
        }
    }

    for (;;) {
        zkco::client zk(ex, session_config(o, chroot));
        if (!co_await connect_with_backoff(zk, "node")) {
            co_await zk.close();
            co_return;
        }
        auto l = co_await ensure_layout(zk, meta_info{16, 16, now_ms()});
        if (!l) {
            spdlog::error("node: cannot set up the cluster layout: {}", l.error().message());
            co_await zk.close();
            if (!co_await pause(2000ms)) {
                co_return;
            }
            continue;
        }
        member_info me;
        me.id = new_member_id(host, static_cast<long>(::getpid()));
        me.host = host;
        me.pid = ::getpid();
        spdlog::info("node {}: joined {} as {} (session 0x{:x})", me.id, chroot,
                     o.role == node_role::worker_only ? "worker"
                     : o.role == node_role::standby   ? "standby master"
                                                       : "worker and candidate",
                     zk.session() ? zk.session()->id : 0);
        co_await (work(zk, o, *l, me, reg, pool) && mastership(zk, o, *l, me));
        const auto state = zk.state();
        co_await zk.close();
        auto cs = co_await asio::this_coro::cancellation_state;
        if (cs.cancelled() != asio::cancellation_type::none) {
            spdlog::info("node {}: left the cluster", me.id);
            co_return;
        }
        spdlog::warn("node {}: session {}; rejoining as a new member", me.id,
                     zkco::to_string(state));
        if (!co_await pause(100ms)) {
            co_return;
        }
    }
}

}  // namespace zkd::roles
