// SPDX-License-Identifier: MIT
// Embedding zkd in an application that owns its io_context: the app registers a task type
// of its own ("reverse"), runs a zkd node (worker and master candidate) on its loop next to
// its own work (a ticker), submits a task to the cluster, prints the result, and leaves.
//
//   embed_worker --zk 127.0.0.1:2181 [--namespace NS]
#include "handlers/registry.hpp"
#include "protocol/layout.hpp"
#include "reactor/compute_pool.hpp"
#include "roles/client/task_client.hpp"
#include "roles/cluster/election.hpp"
#include "roles/cluster/namespace.hpp"
#include "roles/node.hpp"
#include "zkco/deadline.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <string>

namespace asio = boost::asio;
namespace json = boost::json;
using namespace std::chrono_literals;

namespace {

/// The application's own task type: runs on zkd's compute pool, never on the event loop.
zkd::handlers::handler_result reverse(const json::value& args, std::stop_token /*stop*/) {
    if (!args.is_string()) {
        return zkd::handlers::handler_error{"bad_args", "reverse wants a JSON string"};
    }
    std::string s(args.as_string());
    std::reverse(s.begin(), s.end());
    return json::value(s);
}

/// The application's own work on the same loop, to show zkd does not take it over.
asio::awaitable<void> ticker(int& ticks) {
    asio::steady_timer t(co_await asio::this_coro::executor);
    for (;;) {
        t.expires_after(50ms);
        co_await t.async_wait(asio::use_awaitable);
        ++ticks;
    }
}

}  // namespace

int main(int argc, char** argv) {
    std::string zk;
    std::string ns = "embed-example";
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string flag = argv[i];
        (flag == "--zk" ? zk : flag == "--namespace" ? ns : zk) = argv[i + 1];
    }
    if (zk.empty()) {
        std::fprintf(stderr, "usage: embed_worker --zk CONNECT [--namespace NS]\n");
        return 2;
    }
    spdlog::set_level(spdlog::level::warn);

    asio::io_context ioc;  // the application's loop
    zkd::handlers::registry reg;
    reg.add("reverse", reverse);
    zkd::reactor::compute_pool pool(2);

    int ticks = 0;
    asio::cancellation_signal stop_ticker;
    asio::co_spawn(
        ioc, ticker(ticks), asio::bind_cancellation_slot(stop_ticker.slot(), asio::detached)
    );

    zkd::roles::node_options node;
    node.zk = zk;
    node.ns = ns;
    node.capacity = 2;
    node.session_timeout = 4s;
    asio::cancellation_signal stop_node;
    asio::co_spawn(
        ioc, zkd::roles::run_node(node, reg, pool),
        asio::bind_cancellation_slot(stop_node.slot(), asio::detached)
    );

    int rc = 1;
    auto submit_one = [&]() -> asio::awaitable<void> {
        zkd::zkco::config cfg;
        cfg.connect_string = zk + zkd::protocol::chroot_path(ns);
        zkd::zkco::client client(co_await asio::this_coro::executor, cfg);
        // The node creates the namespace; wait until it is there.
        for (int i = 0; i < 100; ++i) {
            auto c = co_await zkd::zkco::with_timeout(client.connect(), 10s);
            // Separate statements: GCC 12 miscompiles a co_await inside && or ?:.
            bool ready = false;
            if (c) {
                const auto meta = co_await client.exists("/meta");
                ready = meta && meta->has_value();
            }
            if (ready) {
                break;
            }
            co_await client.close();
            client = zkd::zkco::client(co_await asio::this_coro::executor, cfg);
            asio::steady_timer t(co_await asio::this_coro::executor, 100ms);
            co_await t.async_wait(asio::use_awaitable);
        }
        auto layout = co_await zkd::roles::ensure_layout(client, zkd::protocol::meta_info{});
        if (layout) {
            zkd::roles::task_client tasks(client, *layout);
            std::vector<zkd::protocol::task_spec> one{
                {.type = "reverse", .args = json::value("hello, zkd")}};
            auto ids = co_await tasks.submit(std::move(one));
            if (ids) {
                auto result = co_await zkd::zkco::with_timeout(tasks.wait(ids->front()), 30s);
                if (result && result->state == zkd::protocol::task_state::succeeded) {
                    std::printf(
                        "reverse(\"hello, zkd\") = %s\n", json::serialize(result->value).c_str()
                    );
                    rc = 0;
                }
            }
            // The result's delete reaches the server before we close, and the client's results
            // directory goes.
            co_await tasks.close();
        }
        co_await client.close();
        std::printf("the application's ticker ran %d times meanwhile\n", ticks);
        stop_node.emit(asio::cancellation_type::terminal);
        stop_ticker.emit(asio::cancellation_type::terminal);
    };
    asio::co_spawn(ioc, submit_one(), asio::detached);
    ioc.run();
    return rc;
}
