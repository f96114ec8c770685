// SPDX-License-Identifier: MIT
#include "cli/session.hpp"

#include "roles/election.hpp"
#include "zkco/deadline.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/this_coro.hpp>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <exception>

namespace asio = boost::asio;

namespace zkd::cli {

void complain(const std::string& message) {
    std::fprintf(stderr, "zkd: %s\n", message.c_str());
}

namespace {

/// Creates /zkd/<ns> (below the connect string's own path, if any).
asio::awaitable<zkco::result<void>> make_namespace(cluster_target t) {
    using namespace std::chrono_literals;
    auto parts = zkco::parse_connect_string(t.hosts);
    if (!parts) {
        co_return parts.error();
    }
    const std::string full = parts->chroot + t.chroot;
    parts->chroot.clear();
    auto bare = t;
    bare.hosts = zkco::format_connect_string(*parts);
    bare.chroot.clear();
    zkco::client root(co_await asio::this_coro::executor, bare.session_config(10s));
    auto c = co_await zkco::with_timeout(root.connect(), t.connect_timeout);
    zkco::result<void> made = zkco::result<void>();
    if (c) {
        made = co_await roles::ensure_chroot(root, full);
    } else {
        made = c.error();
    }
    co_await root.close();
    co_return made;
}

asio::awaitable<int> connected(cluster_target t, bool create, cluster_body body) {
    using namespace std::chrono_literals;
    zkco::client zk(co_await asio::this_coro::executor, t.session_config(10s));
    auto c = co_await zkco::with_timeout(zk.connect(), t.connect_timeout);
    if (!c) {
        complain("cannot reach ZooKeeper at " + t.hosts + " within " +
                 std::to_string(t.connect_timeout.count()) + " ms: " + c.error().message());
        co_await zk.close();
        co_return exit_unreachable;
    }
    zkco::result<roles::layout> l = zkco::error_code(zkco::errc::no_node);
    if (create) {
        l = co_await roles::ensure_layout(zk, roles::meta_info{});
        if (!l && l.error() == zkco::errc::no_node) {
            // No namespace yet (no `zkd run` so far): create it from the ensemble's root.
            const auto made = co_await make_namespace(t);
            if (made) {
                l = co_await roles::ensure_layout(zk, roles::meta_info{});
            } else {
                l = made.error();
            }
        }
    } else {
        auto meta = co_await zk.get(roles::layout::meta());
        if (meta) {
            auto m = roles::decode_meta(meta->data);
            if (m) {
                l = roles::layout::from(*m);
            } else {
                l = zkco::error_code(zkco::errc::data_inconsistency);
            }
        } else {
            l = meta.error();
        }
    }
    if (!l) {
        if (l.error() == zkco::errc::no_node) {
            complain("no zkd cluster in " + t.chroot + " (is --namespace right? has a 'zkd run' started?)");
        } else if (l.error() == zkco::errc::no_auth) {
            complain("not allowed to read the cluster in " + t.chroot + ": it needs credentials (--user)");
        } else {
            complain("no usable cluster in " + t.chroot + ": " + l.error().message());
        }
        co_await zk.close();
        co_return exit_failed;
    }
    const int rc = co_await body(zk, *l);
    co_await zk.close();
    co_return rc;
}

}  // namespace

int with_cluster(const cluster_target& t, bool create, cluster_body body) {
    spdlog::set_level(spdlog::level::err);  // a client command says what it has to say itself
    asio::io_context ioc(1);
    int rc = exit_failed;
    asio::co_spawn(ioc, connected(t, create, std::move(body)), [&](const std::exception_ptr& e, int r) {
        if (e) {
            try {
                std::rethrow_exception(e);
            } catch (const std::exception& ex) {
                complain(ex.what());
            }
            return;
        }
        rc = r;
    });
    ioc.run();
    return rc;
}

}  // namespace zkd::cli
