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
