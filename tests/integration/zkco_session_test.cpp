// SPDX-License-Identifier: MIT
// zkco sessions against real ZooKeeper servers: restarts within the session timeout,
// expiry (declared locally and said by the server), a 3-server ensemble losing members,
// closing without blocking the loop, unreachable servers.
#include "support/zk_fixture.hpp"
#include "zk_local/zk_local.hpp"
#include "zkco/client.hpp"
#include "zkco/deadline.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <csignal>
#include <filesystem>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

namespace ZKD_UNITY_ID {

namespace asio = boost::asio;
using namespace std::literals;
using namespace zkd::zkco;

namespace {

// TCP_CORK of every descriptor of this process connected to 127.0.0.1:`port` (the C client's
// socket and zkco's dup of it).
std::vector<int> corks_towards(int port) {
    std::vector<int> corks;
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
        const int fd = std::stoi(e.path().filename().string());
        sockaddr_in peer{};
        socklen_t len = sizeof peer;
        // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): the sockets API
        if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0 ||
            peer.sin_family != AF_INET || ntohs(peer.sin_port) != port) {
            continue;
        }
        int cork = -1;
        len = sizeof cork;
        if (::getsockopt(fd, IPPROTO_TCP, TCP_CORK, &cork, &len) == 0) {
            corks.push_back(cork);
        }
    }
    return corks;
}

class ZkcoSession : public zkd::test::zk_test {
protected:
    static asio::awaitable<void> connect(client& zk) {
        auto c = co_await with_timeout(zk.connect(), 30s);
        if (!c) {
            throw std::runtime_error("connect: " + c.error().message());
        }
    }

    // Waits until the client reaches `want` (or any terminal state), at most `timeout`.
    static asio::awaitable<session_state> wait_for_state(
        client& zk, session_state want, std::chrono::milliseconds timeout
    ) {
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        while (zk.state() != want && !is_terminal(zk.state())) {
            const auto left = deadline - std::chrono::steady_clock::now();
            if (left <= 0s) {
                break;
            }
            (void)co_await with_timeout(zk.wait_state(zk.state_generation()), left);
        }
        co_return zk.state();
    }

    static zkd::zkco::config config_for(std::string connect, std::chrono::milliseconds timeout) {
        zkd::zkco::config cfg;
        cfg.connect_string = std::move(connect);
        cfg.session_timeout = timeout;
        return cfg;
    }
};

TEST_F(ZkcoSession, SurvivesAServerRestartWithinTheSessionTimeout) {
    ZKD_REQUIRE_LOCAL_ZK_SERVER();
    // A longer tick allows a session timeout (20 ticks at most) that covers a JVM restart.
    zkd::zk_local::options opts;
    opts.tick_ms = 1000;
    auto server = zkd::zk_local::cluster::start(opts);
    run([&]() -> asio::awaitable<void> {
        client zk(ioc_.get_executor(), config_for(server.connect_string(), 20s));
        co_await connect(zk);
        const auto session = zk.session();
        ASSERT_TRUE(session);
        ASSERT_TRUE(co_await zk.create("/n"s, "0"s));
        ASSERT_TRUE(co_await zk.create("/e"s, ""s, {create_mode::ephemeral}));
        auto w = co_await zk.watch_get("/n"s);
        ASSERT_TRUE(w);

        server.stop_member(0);
        EXPECT_EQ(
            co_await wait_for_state(zk, session_state::disconnected, 30s),
            session_state::disconnected
        );
        server.start_member(0);
        EXPECT_EQ(
            co_await wait_for_state(zk, session_state::connected, 30s), session_state::connected
        );
        EXPECT_EQ(zk.session()->id, session->id);

        // The session, its ephemeral node and its watch survived.
        EXPECT_TRUE((co_await zk.exists("/e"s)).value());
        client other(ioc_.get_executor(), config_for(server.connect_string(), 20s));
        co_await connect(other);
        ASSERT_TRUE(co_await other.set("/n"s, "1"s));
        auto ev = co_await with_timeout(w->watch.changed(), 30s);
        ASSERT_TRUE(ev) << ev.error().message();
        EXPECT_EQ(ev->type, event_type::changed);
        co_await other.close();
        co_await zk.close();
    }());
}

TEST_F(ZkcoSession, DeclaresExpiryLocallyWhenDisconnectedPastTheTimeout) {
    ZKD_REQUIRE_LOCAL_ZK_SERVER();
    auto server = zkd::test::start_private_cluster(1);
    run([&]() -> asio::awaitable<void> {
        client zk(ioc_.get_executor(), config_for(server->connect_string(), 1s));
        co_await connect(zk);
        EXPECT_EQ(zk.negotiated_timeout(), 1s);
        ASSERT_TRUE(co_await zk.create("/n"s));
        auto w = co_await zk.watch_get("/n"s);
        ASSERT_TRUE(w);
        error_code watch_ec;
        bool watch_done = false;
        w->watch.async_wait([&](error_code ec, watch_event) {
            watch_done = true;
            watch_ec = ec;
        });

        // The server is gone: the C client would retry forever without learning of expiry.
        server->kill_member(0);
        EXPECT_EQ(
            co_await wait_for_state(zk, session_state::disconnected, 10s),
            session_state::disconnected
        );
        EXPECT_EQ(co_await wait_for_state(zk, session_state::expired, 10s), session_state::expired);
        asio::steady_timer t(ioc_, 0ms);
        co_await t.async_wait(asio::use_awaitable);
        EXPECT_TRUE(watch_done);
        EXPECT_EQ(watch_ec, errc::session_expired);
        EXPECT_EQ(watch_ec, condition::session_lost);
        EXPECT_EQ((co_await zk.get("/n"s)).error(), errc::session_expired);
        EXPECT_EQ((co_await w->watch.changed()).error(), errc::session_expired);

        // A new session works once a server is back.
        server->start_member(0);
        client fresh(ioc_.get_executor(), config_for(server->connect_string(), 1s));
        co_await connect(fresh);
        EXPECT_NE(fresh.session()->id, zk.session()->id);
        EXPECT_TRUE(co_await fresh.exists("/n"s));
        co_await fresh.close();
        co_await zk.close();
    }());
}

TEST_F(ZkcoSession, ServerSideExpiryFailsWatchesAndRemovesEphemerals) {
    ZKD_REQUIRE_LOCAL_ZK_SERVER();
    // The FAQ's way to expire a session is to attach a second handle and close it; but the
    // first handle may re-attach in between. So: the client can reach member 0 only, which
    // is stopped; the twin closes the session through member 1; member 0 comes back and the
    // server, not our local timer (8 s), tells the client its session is gone.
    zkd::zk_local::options opts;
    opts.servers = 3;
    opts.tick_ms = 500;
    auto ensemble = zkd::zk_local::cluster::start(opts);
    run(
        [&]() -> asio::awaitable<void> {
            client zk(ioc_.get_executor(), config_for(ensemble.connect_string(0), 8s));
            co_await connect(zk);
            ASSERT_TRUE(co_await zk.create("/e"s, ""s, {create_mode::ephemeral}));
            ASSERT_TRUE(co_await zk.create("/n"s));
            auto w = co_await zk.watch_get("/n"s);
            ASSERT_TRUE(w);
            error_code watch_ec;
            w->watch.async_wait([&](error_code ec, watch_event) { watch_ec = ec; });

            ensemble.stop_member(0);
            EXPECT_EQ(
                co_await wait_for_state(zk, session_state::disconnected, 10s),
                session_state::disconnected
            );
            zkd::zkco::config cfg = config_for(ensemble.connect_string(1), 8s);
            cfg.resume = zk.session();
            {
                client twin(ioc_.get_executor(), cfg);
                co_await connect(twin);
                EXPECT_EQ(twin.session()->id, zk.session()->id);
                co_await twin.close();
            }
            const auto stopped_at = std::chrono::steady_clock::now();
            ensemble.start_member(0);
            EXPECT_EQ(
                co_await wait_for_state(zk, session_state::expired, 30s), session_state::expired
            );
            RecordProperty(
                "expiry_seen_after_ms",
                static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                     std::chrono::steady_clock::now() - stopped_at
                )
                                     .count())
            );
            asio::steady_timer t(ioc_, 0ms);
            co_await t.async_wait(asio::use_awaitable);
            EXPECT_EQ(watch_ec, errc::session_expired);
            EXPECT_EQ((co_await zk.create("/x"s)).error(), errc::session_expired);
            EXPECT_EQ((co_await zk.connect()).error(), errc::session_expired);

            client fresh(ioc_.get_executor(), config_for(ensemble.connect_string(), 8s));
            co_await connect(fresh);
            EXPECT_FALSE((co_await fresh.exists("/e"s)).value());
            co_await fresh.close();
            co_await zk.close();
        }(),
        120s
    );
}

TEST_F(ZkcoSession, EnsembleLosingAMemberKeepsTheSession) {
    ZKD_REQUIRE_LOCAL_ZK_SERVER();
    auto ensemble = zkd::test::start_private_cluster(3);
    ASSERT_EQ(ensemble->size(), 3);
    run(
        [&]() -> asio::awaitable<void> {
            client zk(ioc_.get_executor(), config_for(ensemble->connect_string(), 4s));
            co_await connect(zk);
            const auto session = zk.session();
            ASSERT_TRUE(co_await zk.create("/n"s, "0"s));
            auto w = co_await zk.watch_get("/n"s);
            ASSERT_TRUE(w);

            // Stop each member in turn: whichever one the session uses, it moves to another.
            for (int member = 0; member < 3; ++member) {
                ensemble->stop_member(member);
                auto created = co_await with_timeout(zk.create("/m" + std::to_string(member)), 20s);
                for (int tries = 0;
                     !created && created.error() == condition::retryable && tries < 20; ++tries) {
                    // Connection loss: the create may or may not have applied. Check, then retry.
                    (void)co_await wait_for_state(zk, session_state::connected, 20s);
                    auto there = co_await zk.exists("/m" + std::to_string(member));
                    if (there && there->has_value()) {
                        created = "/m" + std::to_string(member);
                        break;
                    }
                    created = co_await with_timeout(zk.create("/m" + std::to_string(member)), 20s);
                }
                EXPECT_TRUE(created) << "member " << member << ": " << created.error().message();
                ensemble->start_member(member);
            }
            EXPECT_EQ(
                co_await wait_for_state(zk, session_state::connected, 30s), session_state::connected
            );
            EXPECT_EQ(zk.session()->id, session->id);
            // start_member blocks this loop while a JVM starts: on a busy machine the link may
            // drop once more (the session lives on). A set is idempotent: try it again then.
            auto set = co_await with_timeout(zk.set("/n"s, "1"s), 20s);
            for (int tries = 0; !set && set.error() == condition::retryable && tries < 20;
                 ++tries) {
                (void)co_await wait_for_state(zk, session_state::connected, 20s);
                set = co_await with_timeout(zk.set("/n"s, "1"s), 20s);
            }
            ASSERT_TRUE(set) << set.error().message();
            EXPECT_EQ(zk.session()->id, session->id);
            auto ev = co_await with_timeout(w->watch.changed(), 30s);
            ASSERT_TRUE(ev) << ev.error().message();
            EXPECT_EQ(ev->type, event_type::changed);
            co_await zk.close();
        }(),
        180s
    );
}

TEST_F(ZkcoSession, CloseRunsOffTheEventLoop) {
    ZKD_REQUIRE_LOCAL_ZK_SERVER();
    auto server = zkd::test::start_private_cluster(1);
    run([&]() -> asio::awaitable<void> {
        client zk(ioc_.get_executor(), config_for(server->connect_string(), 4s));
        co_await connect(zk);
        // A frozen server: the C client's close waits on it for seconds.
        ASSERT_EQ(::kill(server->pid(0), SIGSTOP), 0);
        int ticks = 0;
        bool closed = false;
        zk.async_close([&] { closed = true; });
        asio::steady_timer tick(ioc_);
        while (!closed && ticks < 10'000) {
            tick.expires_after(10ms);
            co_await tick.async_wait(asio::use_awaitable);
            ++ticks;
        }
        ::kill(server->pid(0), SIGCONT);
        EXPECT_TRUE(closed);
        // Had close blocked the loop, no tick could have run before it completed.
        EXPECT_GE(ticks, 3);
        EXPECT_EQ(zk.state(), session_state::closed);
    }());
}

TEST_F(ZkcoSession, UnreachableOrInvalidServers) {
    run([&]() -> asio::awaitable<void> {
        {
            // Nothing listens there: connect keeps trying until the caller's deadline.
            client zk(ioc_.get_executor(), config_for("127.0.0.1:1", 2s));
            auto c = co_await with_timeout(zk.connect(), 300ms);
            EXPECT_EQ(c.error(), errc::operation_timeout);
            EXPECT_EQ(zk.state(), session_state::connecting);
        }
        {
            client zk(ioc_.get_executor(), config_for("no-such-host.invalid:2181", 2s));
            auto c = co_await with_timeout(zk.connect(), 30s);
            ASSERT_FALSE(c);
            EXPECT_NE(c.error(), errc::operation_timeout) << "resolution failure is reported";
        }
        for (const auto* bad : {"", "host:notaport", "h:1/bad/", "[::1"}) {
            client zk(ioc_.get_executor(), config_for(bad, 2s));
            EXPECT_EQ((co_await zk.connect()).error(), errc::bad_arguments) << bad;
        }
    }());
}

TEST_F(ZkcoSession, StateWaitersSeeEveryChange) {
    run([&]() -> asio::awaitable<void> {
        client zk(ioc_.get_executor(), make_config());
        const auto gen0 = zk.state_generation();
        co_await connect(zk);
        auto change = co_await zk.wait_state(gen0);
        ASSERT_TRUE(change);
        EXPECT_EQ(change->state, session_state::connected);
        error_code ec;
        state_change seen;
        zk.async_wait_state(change->generation, [&](error_code e, state_change s) {
            ec = e;
            seen = s;
        });
        co_await zk.close();
        asio::steady_timer t(ioc_, 0ms);
        co_await t.async_wait(asio::use_awaitable);
        EXPECT_FALSE(ec);
        EXPECT_EQ(seen.state, session_state::closed);
        EXPECT_GT(seen.generation, change->generation);
    }());
}

TEST_F(ZkcoSession, RequestsOfOneTurnLeaveTogether) {
    // The C client writes each request as two packets (its length, then its body), and the
    // server wakes for each; zkco corks the socket while a turn of the loop sends requests,
    // and lets them go together once the turn is over.
    const int port = std::stoi(base_.substr(base_.rfind(':') + 1));
    run([&]() -> asio::awaitable<void> {
        client zk(ioc_.get_executor(), make_config());
        co_await connect(zk);
        const auto idle = corks_towards(port);
        ASSERT_FALSE(idle.empty()) << "no socket to the server found";
        EXPECT_THAT(idle, ::testing::Each(0));

        std::vector<int> within_the_turn;
        asio::post(ioc_, [&] { within_the_turn = corks_towards(port); });
        int answered = 0;
        for (int i = 0; i < 3; ++i) {
            zk.async_exists("/"s, [&](error_code ec, const auto&) { answered += ec ? 0 : 1; });
        }
        asio::steady_timer t(ioc_);
        for (int i = 0; i < 1000 && answered < 3; ++i) {
            t.expires_after(10ms);
            co_await t.async_wait(asio::use_awaitable);
        }
        EXPECT_EQ(answered, 3);
        EXPECT_THAT(within_the_turn, ::testing::Contains(1)) << "the requests were not held";
        EXPECT_THAT(corks_towards(port), ::testing::Each(0)) << "the socket stayed corked";
    }());
}

}  // namespace

}  // namespace ZKD_UNITY_ID
