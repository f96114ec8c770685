// SPDX-License-Identifier: MIT
// zkd-zkco-smoke: a short tour of zkco against a running ZooKeeper, printing what happens:
// connect, an ephemeral member node, a sequential queue filled by one multi(), a child
// watch that sees the queue change, a version-checked update, a deadline, a clean close.
#include "zkco/client.hpp"
#include "zkco/deadline.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

namespace asio = boost::asio;
using namespace std::literals;
using namespace zkd::zkco;

namespace {

void usage(std::FILE* out) {
    std::fputs(
        "usage: zkd-zkco-smoke --zk CONNECT [--root PATH]\n"
        "Runs a short tour of the zkco library against a ZooKeeper server and prints\n"
        "each step. Everything it creates lives under PATH (default /zkco-smoke) and is\n"
        "removed at the end. Exit: 0 ok, 1 a step failed, 2 usage error.\n",
        out
    );
}

/// Prints a step's outcome; throws on failure so the tour stops at the first problem.
template <class T>
T check(const char* what, result<T> r) {
    if (!r) {
        throw std::runtime_error(std::string(what) + ": " + r.error().message());
    }
    std::printf("  ok  %s\n", what);
    if constexpr (!std::is_void_v<T>) {
        return std::move(*r);
    }
}

asio::awaitable<void> tour(std::string connect, std::string root) {
    config cfg;
    cfg.connect_string = connect;
    cfg.session_timeout = 10s;
    client zk(co_await asio::this_coro::executor, cfg);

    check("connect within 10 s", co_await with_timeout(zk.connect(), 10s));
    std::printf(
        "      session 0x%llx, timeout %lld ms\n",
        static_cast<unsigned long long>(zk.session()->id),
        static_cast<long long>(zk.negotiated_timeout().count())
    );

    // Start from a clean slate: remove what an earlier run may have left.
    if (auto old = co_await zk.get_children(root + "/queue")) {
        for (const auto& name : old->names) {
            (void)co_await zk.remove(root + "/queue/" + name);
        }
    }
    for (const auto* leaf : {"/queue", "/members/me", "/members", "/config", ""}) {
        (void)co_await zk.remove(root + leaf);
    }

    check("create root", co_await zk.create(root, "zkco smoke"s));
    check("create members dir", co_await zk.create(root + "/members"));
    check(
        "join as an ephemeral member",
        co_await zk.create(
            root + "/members/me", "pid " + std::to_string(::getpid()), {create_mode::ephemeral}
        )
    );
    check("create queue", co_await zk.create(root + "/queue"));

    auto watched_queue =
        check("list the queue and watch it", co_await zk.watch_children(root + "/queue"));
    std::printf("      queue has %zu items\n", watched_queue.value.names.size());

    // Three items in one transaction: all or none.
    std::vector<multi_op> batch;
    for (int i = 0; i < 3; ++i) {
        batch.emplace_back(op::create{
            root + "/queue/item-",
            R"({"n":)" + std::to_string(i) + "}",
            create_mode::persistent_sequential,
            {}});
    }
    auto committed = co_await zk.multi(std::move(batch));
    if (!committed) {
        throw std::runtime_error("multi: " + committed.ec.message());
    }
    std::printf("  ok  one multi() created %zu items:", committed.results.size());
    for (const auto& r : committed.results) {
        std::printf(" %s", std::string(base_name(r.path)).c_str());
    }
    std::printf("\n");

    auto event =
        check("the child watch fired", co_await with_timeout(watched_queue.watch.changed(), 10s));
    std::printf(
        "      event: %s on %s\n", std::string(to_string(event.type)).c_str(), event.path.c_str()
    );

    check("create config", co_await zk.create(root + "/config", "v1"s));
    auto st = check("update config at version 0", co_await zk.set(root + "/config", "v2"s, 0));
    auto stale = co_await zk.set(root + "/config", "v3"s, 0);
    std::printf(
        "  ok  a stale update is refused: %s (version is %d)\n",
        stale ? "applied?!" : stale.error().message().c_str(), st.version
    );
    if (stale) {
        throw std::runtime_error("a stale version check passed");
    }

    auto missing = co_await zk.watch_exists(root + "/never");
    auto timed = co_await with_timeout(missing->watch.changed(), 100ms);
    std::printf("  ok  a watch with a 100 ms deadline: %s\n", timed.error().message().c_str());

    // Clean up, then close (the blocking part of close runs off this thread).
    for (const auto& r : committed.results) {
        (void)co_await zk.remove(r.path);
    }
    for (const auto* leaf : {"/queue", "/members/me", "/members", "/config", ""}) {
        (void)co_await zk.remove(root + leaf);
    }
    const auto n = zk.counters();
    std::printf(
        "      requests sent: %llu reads, %llu writes (%llu ops; %llu multi), %llu watches\n",
        static_cast<unsigned long long>(n.reads), static_cast<unsigned long long>(n.writes),
        static_cast<unsigned long long>(n.write_ops), static_cast<unsigned long long>(n.multis),
        static_cast<unsigned long long>(n.watches)
    );
    co_await zk.close();
    std::printf("  ok  closed\n");
}

}  // namespace

int main(int argc, char** argv) {
    std::string connect;
    std::string root = "/zkco-smoke";
    if (const char* env = std::getenv("ZKD_ZK")) {  // NOLINT(concurrency-mt-unsafe)
        connect = env;
    }
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--help" || a == "-h") {
            usage(stdout);
            return 0;
        }
        if ((a == "--zk" || a == "--root") && i + 1 < argc) {
            (a == "--zk" ? connect : root) = argv[++i];
            continue;
        }
        std::fprintf(stderr, "zkd-zkco-smoke: unexpected argument '%s'\n", a.c_str());
        usage(stderr);
        return 2;
    }
    if (connect.empty()) {
        std::fprintf(stderr, "zkd-zkco-smoke: --zk CONNECT (or ZKD_ZK) is required\n");
        return 2;
    }
    if (validate_path(root) || root == "/") {
        std::fprintf(stderr, "zkd-zkco-smoke: --root must be an absolute path other than /\n");
        return 2;
    }
    spdlog::set_level(spdlog::level::warn);
    std::printf("zkco tour against %s under %s\n", connect.c_str(), root.c_str());
    asio::io_context ioc;
    int rc = 0;
    asio::co_spawn(ioc, tour(connect, root), [&](const std::exception_ptr& e) {
        if (e) {
            try {
                std::rethrow_exception(e);
            } catch (const std::exception& ex) {
                std::fprintf(stderr, "  FAILED %s\n", ex.what());
            }
            rc = 1;
        }
    });
    ioc.run();
    return rc;
}
