// SPDX-License-Identifier: MIT
// Session 17 experiment, not built by the project: does a read wait behind its own session's
// write in flight (ZooKeeper answers a session in order)? Two sessions; per round a write
// (multi: create + set) on A with a get on A sent at once, then the same with the get on B,
// then a get on A alone; 2,000 rounds. With ONLY_GETS set: gets on an idle session every
// 0.7 ms (run it beside an open loop: what any read costs under that load).
// Build: add to tools/CMakeLists.txt
//   add_executable(rbw_exp <this file>) + target_link_libraries(rbw_exp PRIVATE zkd::zkco
//   zkd::options)
// Run:   rbw_exp HOST:PORT   (a zkd-zk-local --force-sync server)
#include "zkco/client.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
namespace asio = boost::asio;
using namespace boost::asio::experimental::awaitable_operators;
using clk = std::chrono::steady_clock;
static double ms(clk::duration d) {
    return std::chrono::duration<double, std::milli>(d).count();
}
asio::awaitable<double> timed_get(zkd::zkco::client& c) {
    auto t0 = clk::now();
    auto r = co_await c.get("/rbw");
    (void)r;
    co_return ms(clk::now() - t0);
}
asio::awaitable<double> timed_write(zkd::zkco::client& c, int i) {
    auto t0 = clk::now();
    std::vector<zkd::zkco::multi_op> ops;
    ops.push_back(zkd::zkco::op::create{
        "/rbw/n" + std::to_string(i), std::string(200, 'x'), zkd::zkco::create_mode::persistent, {}}
    );
    ops.push_back(zkd::zkco::op::set{"/rbw", std::string(300, 'y'), zkd::zkco::any_version});
    auto r = co_await c.multi(std::move(ops));
    (void)r;
    co_return ms(clk::now() - t0);
}
void pr(const char* what, std::vector<double> v) {
    std::sort(v.begin(), v.end());
    std::printf(
        "%-28s p50 %.3f p90 %.3f p99 %.3f\n", what, v[v.size() / 2], v[v.size() * 9 / 10],
        v[v.size() * 99 / 100]
    );
}
asio::awaitable<void> run(asio::io_context& io, const char* zk) {
    zkd::zkco::config cfg;
    cfg.connect_string = zk;
    zkd::zkco::client a(io.get_executor(), cfg), b(io.get_executor(), cfg);
    co_await a.connect();
    co_await b.connect();
    co_await a.create("/rbw", "");
    std::vector<double> w1, same, w2, other, alone;
    if (std::getenv("ONLY_GETS")) {
        asio::steady_timer t(io);
        for (int i = 0; i < 6000; ++i) {
            alone.push_back(co_await timed_get(b));
            t.expires_after(std::chrono::microseconds(700));
            co_await t.async_wait(asio::use_awaitable);
        }
        pr("get alone on idle session", alone);
        co_return;
    }
    int n = 0;
    for (int round = 0; round < 4; ++round) {
        for (int i = 0; i < 500; ++i) {
            auto [tw, tg] = co_await (timed_write(a, n++) && timed_get(a));
            w1.push_back(tw);
            same.push_back(tg);
            auto [tw2, tg2] = co_await (timed_write(a, n++) && timed_get(b));
            w2.push_back(tw2);
            other.push_back(tg2);
            alone.push_back(co_await timed_get(a));
        }
    }
    pr("write (get on same)", w1);
    pr("get behind own write", same);
    pr("write (get on other)", w2);
    pr("get on other session", other);
    pr("get alone", alone);
}
int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: rbw_exp HOST:PORT\n");
        return 2;
    }
    asio::io_context io;
    asio::co_spawn(io, run(io, argv[1]), asio::detached);
    io.run();
}
