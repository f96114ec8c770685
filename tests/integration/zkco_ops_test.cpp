// SPDX-License-Identifier: MIT
// zkco operations against a real ZooKeeper: every op and node mode, multi, watches, ACLs,
// cancellation and many requests in flight.
#include "support/zk_fixture.hpp"
#include "zkco/client.hpp"
#include "zkco/deadline.hpp"
#include "zkco/retry.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace ZKD_UNITY_ID {

namespace asio = boost::asio;
using namespace std::literals;
using namespace zkd::zkco;

namespace {

class ZkcoOps : public zkd::test::zk_test {
protected:
    // A connected client on the test's chroot, or a failed assertion.
    asio::awaitable<void> connect(client& zk) {
        auto c = co_await with_timeout(zk.connect(), 30s);
        if (!c) {
            throw std::runtime_error("connect: " + c.error().message());
        }
    }
};

TEST_F(ZkcoOps, CreateGetSetRemove) {
    run([&]() -> asio::awaitable<void> {
        client zk(ioc_.get_executor(), make_config());
        co_await connect(zk);
        EXPECT_EQ(zk.state(), session_state::connected);

        auto created = co_await zk.create("/a"s, "hello"s);
        ASSERT_TRUE(created) << created.error().message();
        EXPECT_EQ(*created, "/a");

        auto got = co_await zk.get("/a"s);
        ASSERT_TRUE(got);
        EXPECT_EQ(got->data, "hello");
        EXPECT_EQ(got->stat.version, 0);
        EXPECT_EQ(got->stat.data_length, 5);
        EXPECT_EQ(got->stat.ephemeral_owner, 0);

        auto set = co_await zk.set("/a"s, "world"s, 0);
        ASSERT_TRUE(set);
        EXPECT_EQ(set->version, 1);
        EXPECT_EQ((co_await zk.set("/a"s, "x"s, 0)).error(), errc::bad_version);
        EXPECT_EQ((co_await zk.get("/a"s))->data, "world");

        EXPECT_EQ((co_await zk.remove("/a"s, 0)).error(), errc::bad_version);
        EXPECT_TRUE(co_await zk.remove("/a"s, 1));
        EXPECT_EQ((co_await zk.get("/a"s)).error(), errc::no_node);
        EXPECT_EQ((co_await zk.remove("/a"s)).error(), errc::no_node);
        EXPECT_EQ((co_await zk.set("/a"s, "x"s)).error(), errc::no_node);

        // Empty data reads back empty; binary data survives.
        ASSERT_TRUE(co_await zk.create("/empty"s, std::string()));
        EXPECT_EQ((co_await zk.get("/empty"s))->data, "");
        const std::string binary("a\0b\xff", 4);
        ASSERT_TRUE(co_await zk.create("/bin"s, binary));
        EXPECT_EQ((co_await zk.get("/bin"s))->data, binary);
        co_await zk.close();
    }());
}

TEST_F(ZkcoOps, CreateErrors) {
    run([&]() -> asio::awaitable<void> {
        client zk(ioc_.get_executor(), make_config());
        co_await connect(zk);
        ASSERT_TRUE(co_await zk.create("/p"s));
        EXPECT_EQ((co_await zk.create("/p"s)).error(), errc::node_exists);
        EXPECT_EQ((co_await zk.create("/missing/child"s)).error(), errc::no_node);
        ASSERT_TRUE(co_await zk.create("/eph"s, ""s, {create_mode::ephemeral}));
        EXPECT_EQ((co_await zk.create("/eph/child"s)).error(), errc::no_children_for_ephemerals);
        ASSERT_TRUE(co_await zk.create("/p/c"s));
        EXPECT_EQ((co_await zk.remove("/p"s)).error(), errc::not_empty);
        // Invalid paths are refused before anything is sent.
        EXPECT_EQ((co_await zk.create("relative"s)).error(), errc::bad_arguments);
        EXPECT_EQ((co_await zk.get("/trailing/"s)).error(), errc::bad_arguments);
        EXPECT_EQ((co_await zk.get(""s)).error(), errc::bad_arguments);
        EXPECT_EQ((co_await zk.exists("/a/../b"s)).error(), errc::bad_arguments);
        std::vector<multi_op> bad_multi{op::check{"/p", any_version}, op::remove{"nope", 0}};
        EXPECT_EQ((co_await zk.multi(std::move(bad_multi))).ec, errc::bad_arguments);
        EXPECT_FALSE((co_await zk.exists("/prelative"s)).value());
        co_await zk.close();
    }());
}

TEST_F(ZkcoOps, NodeModes) {
    run([&]() -> asio::awaitable<void> {
        client zk(ioc_.get_executor(), make_config());
        co_await connect(zk);
        const auto session = zk.session();
        ASSERT_TRUE(session);

        auto eph = co_await zk.create("/eph"s, "e"s, {create_mode::ephemeral});
        ASSERT_TRUE(eph);
        EXPECT_EQ((co_await zk.get("/eph"s))->stat.ephemeral_owner, session->id);

        ASSERT_TRUE(co_await zk.create("/q"s));
        auto s1 = co_await zk.create("/q/item-"s, "1"s, {create_mode::persistent_sequential});
        auto s2 = co_await zk.create("/q/item-"s, "2"s, {create_mode::persistent_sequential});
        ASSERT_TRUE(s1 && s2);
        EXPECT_EQ(s1->rfind("/q/item-", 0), 0U);
        EXPECT_EQ(s1->size(), "/q/item-"s.size() + 10);
        ASSERT_TRUE(sequence_number(*s1) && sequence_number(*s2));
        EXPECT_LT(*sequence_number(*s1), *sequence_number(*s2));

        auto es = co_await zk.create("/q/eph-"s, ""s, {create_mode::ephemeral_sequential});
        ASSERT_TRUE(es);
        EXPECT_EQ((co_await zk.get(*es))->stat.ephemeral_owner, session->id);

        // A container holds children like any node (the server reaps it when empty, later).
        ASSERT_TRUE(co_await zk.create("/box"s, ""s, {create_mode::container}));
        EXPECT_TRUE(co_await zk.create("/box/in"s));

        // TTL nodes need the server's extended types, which the harness enables.
        create_options ttl{create_mode::persistent_with_ttl, 60s, {}};
        EXPECT_TRUE(co_await zk.create("/ttl"s, "t"s, ttl));
        create_options ttl_seq{create_mode::persistent_sequential_with_ttl, 60s, {}};
        auto ts = co_await zk.create("/ttl-"s, "t"s, ttl_seq);
        ASSERT_TRUE(ts) << ts.error().message();
        EXPECT_TRUE(sequence_number(*ts));
        co_await zk.close();
    }());
}

TEST_F(ZkcoOps, EphemeralsGoWithTheSession) {
    run([&]() -> asio::awaitable<void> {
        auto a = std::make_unique<client>(ioc_.get_executor(), make_config());
        client b(ioc_.get_executor(), make_config());
        co_await connect(*a);
        co_await connect(b);
        ASSERT_TRUE(co_await a->create("/e"s, ""s, {create_mode::ephemeral}));
        auto w = co_await b.watch_exists("/e"s);
        ASSERT_TRUE(w && w->value);
        co_await a->close();
        auto ev = co_await with_timeout(w->watch.changed(), 30s);
        ASSERT_TRUE(ev) << ev.error().message();
        EXPECT_EQ(ev->type, event_type::deleted);
        EXPECT_FALSE((co_await b.exists("/e"s)).value());
        co_await b.close();
    }());
}

TEST_F(ZkcoOps, ExistsChildrenSync) {
    run([&]() -> asio::awaitable<void> {
        client zk(ioc_.get_executor(), make_config());
        co_await connect(zk);
        auto missing = co_await zk.exists("/none"s);
        ASSERT_TRUE(missing);
        EXPECT_FALSE(missing->has_value());

        ASSERT_TRUE(co_await zk.create("/d"s, "xy"s));
        for (const auto* n : {"a", "b", "c"}) {
            ASSERT_TRUE(co_await zk.create("/d/"s + n));
        }
        auto present = co_await zk.exists("/d"s);
        ASSERT_TRUE(present && present->has_value());
        EXPECT_EQ((*present)->num_children, 3);
        EXPECT_EQ((*present)->data_length, 2);

        auto kids = co_await zk.get_children("/d"s);
        ASSERT_TRUE(kids);
        std::set<std::string> names(kids->names.begin(), kids->names.end());
        EXPECT_EQ(names, (std::set<std::string>{"a", "b", "c"}));
        EXPECT_EQ(kids->stat.num_children, 3);
        EXPECT_EQ((co_await zk.get_children("/none"s)).error(), errc::no_node);

        EXPECT_TRUE(co_await zk.sync("/d"s));
        const auto n = zk.counters();
        EXPECT_GE(n.reads, 5U);
        EXPECT_EQ(n.writes, 4U);
        co_await zk.close();
    }());
}

TEST_F(ZkcoOps, MultiCommitsAllWithPerOpResults) {
    run([&]() -> asio::awaitable<void> {
        client zk(ioc_.get_executor(), make_config());
        co_await connect(zk);
        ASSERT_TRUE(co_await zk.create("/m"s, "0"s));
        ASSERT_TRUE(co_await zk.create("/gone"s));
        std::vector<multi_op> ops{
            op::check{"/m", 0},
            op::create{"/m/seq-", "s", create_mode::persistent_sequential, {}},
            op::set{"/m", "1", 0},
            op::remove{"/gone", any_version},
            op::create{"/m/plain", "p", create_mode::persistent, {}},
        };
        auto r = co_await zk.multi(std::move(ops));
        ASSERT_TRUE(r) << r.ec.message();
        ASSERT_EQ(r.results.size(), 5U);
        for (const auto& one : r.results) {
            EXPECT_FALSE(one.ec) << one.ec.message();
        }
        EXPECT_EQ(r.results[1].path.rfind("/m/seq-", 0), 0U);
        EXPECT_TRUE(sequence_number(r.results[1].path));
        EXPECT_EQ(r.results[2].stat.version, 1);
        EXPECT_EQ(r.results[4].path, "/m/plain");
        EXPECT_FALSE((co_await zk.exists("/gone"s)).value());
        EXPECT_EQ((co_await zk.get("/m"s))->data, "1");
        EXPECT_EQ(zk.counters().multis, 1U);

        auto empty = co_await zk.multi({});
        EXPECT_TRUE(empty);
        EXPECT_TRUE(empty.results.empty());
        co_await zk.close();
    }());
}

TEST_F(ZkcoOps, ObservedSetsOfCommittedMultisComeBeforeTheirAnswers) {
    run([&]() -> asio::awaitable<void> {
        client zk(ioc_.get_executor(), make_config());
        co_await connect(zk);
        ASSERT_TRUE(co_await zk.create("/d"s, "0"s));
        ASSERT_TRUE(co_await zk.create("/e"s, ""s));
        std::vector<std::pair<std::string, zkd::zkco::stat>> on_d;
        std::vector<std::string> order;
        auto watching =
            zk.observe_sets("/d"s, [&](std::string_view data, const zkd::zkco::stat& st) {
                on_d.emplace_back(std::string(data), st);
                order.push_back("observed"s);
            });

        // A multi that commits: its set of /d is observed, with the stat a read would give,
        // before the multi's own answer; the set of /e has no observer.
        std::vector<multi_op> ops{
            op::create{"/d/c"s, ""s, create_mode::persistent, {}}, op::set{"/d"s, "log"s, 0},
            op::set{"/e"s, "x"s, any_version}};
        zk.async_multi(std::move(ops), [&](error_code ec, const std::vector<op_result>&) {
            EXPECT_FALSE(ec);
            order.push_back("answered"s);
        });
        auto read = co_await zk.get("/d"s);  // answered after the multi
        ASSERT_TRUE(read);
        ASSERT_EQ(on_d.size(), 1U);
        EXPECT_EQ(on_d[0].first, "log");
        EXPECT_EQ(on_d[0].second.version, read->stat.version);
        EXPECT_EQ(on_d[0].second.cversion, read->stat.cversion);
        EXPECT_EQ(on_d[0].second.czxid, read->stat.czxid);
        EXPECT_EQ(on_d[0].second.mzxid, read->stat.mzxid);
        EXPECT_EQ(order, (std::vector<std::string>{"observed"s, "answered"s}));

        // One that fails applies nothing: nothing observed. A plain set is not a multi.
        std::vector<multi_op> failing{op::set{"/d"s, "no"s, any_version}, op::check{"/e"s, 7}};
        EXPECT_FALSE(co_await zk.multi(std::move(failing)));
        EXPECT_TRUE(co_await zk.set("/d"s, "plain"s));
        EXPECT_EQ(on_d.size(), 1U);

        // Two observers of one path both see it; once destroyed, an observer sees nothing.
        int second = 0;
        {
            auto also =
                zk.observe_sets("/d"s, [&](std::string_view, const zkd::zkco::stat&) { ++second; });
            std::vector<multi_op> two{op::set{"/d"s, "two"s, any_version}};
            EXPECT_TRUE(co_await zk.multi(std::move(two)));
        }
        EXPECT_EQ(second, 1);
        EXPECT_EQ(on_d.size(), 2U);
        watching = {};
        std::vector<multi_op> three{op::set{"/d"s, "three"s, any_version}};
        EXPECT_TRUE(co_await zk.multi(std::move(three)));
        EXPECT_EQ(on_d.size(), 2U);
        EXPECT_EQ(second, 1);
        co_await zk.close();
    }());
}

TEST_F(ZkcoOps, OwnSetsAnsweredWaitsForTheAnswerAndWhatItsHandlersPosted) {
    run([&]() -> asio::awaitable<void> {
        client zk(ioc_.get_executor(), make_config());
        co_await connect(zk);
        ASSERT_TRUE(co_await zk.create("/d"s, "0"s));
        ASSERT_TRUE(co_await zk.create("/e"s, ""s));
        // None in flight: at once.
        EXPECT_FALSE(zk.own_sets_in_flight("/d"));
        EXPECT_TRUE(co_await zk.own_sets_answered("/d"s));

        std::vector<std::string> order;
        auto observing = zk.observe_sets("/d"s, [&](std::string_view, const zkd::zkco::stat&) {
            order.push_back("observed"s);
            asio::post(ioc_, [&] { order.push_back("posted by the observer"s); });
        });
        auto w = co_await zk.watch_get("/d"s);
        ASSERT_TRUE(w);
        std::vector<multi_op> ops{
            op::set{"/d"s, "1"s, any_version}, op::set{"/e"s, "x"s, any_version}};
        zk.async_multi(std::move(ops), [&](error_code ec, const std::vector<op_result>&) {
            EXPECT_FALSE(ec);
            order.push_back("answered"s);
        });
        // A multi sent while /d had an observer: in flight for /d (not /e, unobserved) until
        // answered.
        EXPECT_TRUE(zk.own_sets_in_flight("/d"));
        EXPECT_FALSE(zk.own_sets_in_flight("/e"));
        // Its watch event comes before its answer: still in flight then.
        ASSERT_TRUE(co_await w->watch.changed());
        EXPECT_TRUE(zk.own_sets_in_flight("/d"));
        EXPECT_TRUE(order.empty());
        ASSERT_TRUE(co_await zk.own_sets_answered("/d"s));
        EXPECT_FALSE(zk.own_sets_in_flight("/d"));
        EXPECT_EQ(
            order, (std::vector<std::string>{"observed"s, "answered"s, "posted by the observer"s})
        );

        // A multi that fails (nothing observed) ends the wait as well.
        order.clear();
        std::vector<multi_op> failing{op::set{"/d"s, "no"s, any_version}, op::check{"/e"s, 7}};
        zk.async_multi(std::move(failing), [&](error_code ec, const std::vector<op_result>&) {
            EXPECT_TRUE(ec);
            order.push_back("failed"s);
        });
        EXPECT_TRUE(zk.own_sets_in_flight("/d"));
        ASSERT_TRUE(co_await zk.own_sets_answered("/d"s));
        EXPECT_FALSE(zk.own_sets_in_flight("/d"));
        EXPECT_EQ(order, (std::vector<std::string>{"failed"s}));

        // Two in flight: the wait ends with the second answer.
        order.clear();
        for (const auto* v : {"2", "3"}) {
            std::vector<multi_op> one{op::set{"/d"s, v, any_version}};
            zk.async_multi(std::move(one), [&order, v](error_code, const std::vector<op_result>&) {
                order.emplace_back(v);
            });
        }
        ASSERT_TRUE(co_await zk.own_sets_answered("/d"s));
        EXPECT_EQ(std::count(order.begin(), order.end(), "2"s), 1);
        EXPECT_EQ(std::count(order.begin(), order.end(), "3"s), 1);
        EXPECT_EQ(std::count(order.begin(), order.end(), "posted by the observer"s), 2);

        // A wait cancelled (its deadline) ends with operation_aborted; the answer that comes
        // later touches nothing of it.
        std::vector<multi_op> last{op::set{"/d"s, "4"s, any_version}};
        zk.async_multi(std::move(last), [](error_code, const std::vector<op_result>&) {});
        auto cut = co_await with_timeout(zk.own_sets_answered("/d"s), 0ms);
        if (!cut) {
            EXPECT_EQ(cut.error(), errc::operation_timeout);
        }
        EXPECT_TRUE(co_await zk.sync("/d"s));
        EXPECT_FALSE(zk.own_sets_in_flight("/d"));
        co_await zk.close();
    }());
}

TEST_F(ZkcoOps, MultiFailureAppliesNothing) {
    run([&]() -> asio::awaitable<void> {
        client zk(ioc_.get_executor(), make_config());
        co_await connect(zk);
        ASSERT_TRUE(co_await zk.create("/m"s, "0"s));
        std::vector<multi_op> ops{
            op::create{"/m/new", "n", create_mode::persistent, {}},
            op::check{"/m", 7},  // wrong version
            op::set{"/m", "1", any_version},
        };
        auto r = co_await zk.multi(std::move(ops));
        EXPECT_FALSE(r);
        EXPECT_EQ(r.ec, errc::bad_version);
        ASSERT_EQ(r.results.size(), 3U);
        EXPECT_EQ(r.failed_op(), 1U);
        EXPECT_EQ(r.results[1].ec, errc::bad_version);
        EXPECT_EQ(r.results[0].ec, errc::runtime_inconsistency);
        EXPECT_EQ(r.results[2].ec, errc::runtime_inconsistency);
        EXPECT_FALSE((co_await zk.exists("/m/new"s)).value());
        EXPECT_EQ((co_await zk.get("/m"s))->data, "0");

        std::vector<multi_op> dup{
            op::create{"/x", "", create_mode::persistent, {}},
            op::create{"/x", "", create_mode::persistent, {}},
        };
        auto d = co_await zk.multi(std::move(dup));
        EXPECT_EQ(d.ec, errc::node_exists);
        EXPECT_EQ(d.failed_op(), 1U);
        EXPECT_FALSE((co_await zk.exists("/x"s)).value());

        // The 3.8 C client cannot put TTL creates in a multi: refused up front.
        std::vector<multi_op> ttl{op::create{"/t", "", create_mode::persistent_with_ttl, {}}};
        EXPECT_EQ((co_await zk.multi(std::move(ttl))).ec, errc::unimplemented);
        co_await zk.close();
    }());
}

TEST_F(ZkcoOps, OversizedRequestsAreRefusedAndTheSessionSurvives) {
    run([&]() -> asio::awaitable<void> {
        client zk(ioc_.get_executor(), make_config());
        co_await connect(zk);
        const std::string big(1'100'000, 'x');
        EXPECT_EQ((co_await zk.create("/big"s, big)).error(), errc::bad_arguments);
        ASSERT_TRUE(co_await zk.create("/small"s));
        EXPECT_EQ((co_await zk.set("/small"s, big)).error(), errc::bad_arguments);
        std::vector<multi_op> ops;
        for (int i = 0; i < 20; ++i) {
            ops.emplace_back(op::create{
                "/m" + std::to_string(i), std::string(60'000, 'y'), create_mode::persistent, {}});
        }
        EXPECT_EQ((co_await zk.multi(std::move(ops))).ec, errc::bad_arguments);
        EXPECT_EQ(zk.state(), session_state::connected);
        EXPECT_TRUE(co_await zk.get("/small"s));
        co_await zk.close();
    }());
}

TEST_F(ZkcoOps, DataWatchFiresOnChangeAndDelete) {
    run([&]() -> asio::awaitable<void> {
        client zk(ioc_.get_executor(), make_config());
        client other(ioc_.get_executor(), make_config());
        co_await connect(zk);
        co_await connect(other);
        ASSERT_TRUE(co_await zk.create("/w"s, "0"s));

        auto w = co_await zk.watch_get("/w"s);
        ASSERT_TRUE(w);
        EXPECT_EQ(w->value.data, "0");
        ASSERT_TRUE(co_await other.set("/w"s, "1"s));
        auto ev = co_await with_timeout(w->watch.changed(), 30s);
        ASSERT_TRUE(ev) << ev.error().message();
        EXPECT_EQ(ev->type, event_type::changed);
        EXPECT_EQ(ev->path, "/w");  // relative to the chroot
        // One-shot: the event was taken.
        EXPECT_EQ((co_await w->watch.changed()).error(), errc::no_watcher);

        // The event is kept when it arrives before anyone waits.
        auto w2 = co_await zk.watch_get("/w"s);
        ASSERT_TRUE(w2);
        ASSERT_TRUE(co_await other.remove("/w"s));
        ASSERT_TRUE(co_await zk.sync("/w"s));
        auto ev2 = co_await with_timeout(w2->watch.changed(), 30s);
        ASSERT_TRUE(ev2);
        EXPECT_EQ(ev2->type, event_type::deleted);

        // No watch on a failed read.
        EXPECT_EQ((co_await zk.watch_get("/w"s)).error(), errc::no_node);
        co_await other.close();
        co_await zk.close();
    }());
}

TEST_F(ZkcoOps, ChildAndExistsWatches) {
    run([&]() -> asio::awaitable<void> {
        client zk(ioc_.get_executor(), make_config());
        co_await connect(zk);
        ASSERT_TRUE(co_await zk.create("/dir"s));
        auto kids = co_await zk.watch_children("/dir"s);
        ASSERT_TRUE(kids);
        EXPECT_TRUE(kids->value.names.empty());

        // exists on a missing node arms a watch that fires on create.
        auto ex = co_await zk.watch_exists("/dir/a"s);
        ASSERT_TRUE(ex);
        EXPECT_FALSE(ex->value.has_value());

        ASSERT_TRUE(co_await zk.create("/dir/a"s));
        auto c = co_await with_timeout(kids->watch.changed(), 30s);
        ASSERT_TRUE(c);
        EXPECT_EQ(c->type, event_type::child);
        EXPECT_EQ(c->path, "/dir");
        auto e = co_await with_timeout(ex->watch.changed(), 30s);
        ASSERT_TRUE(e);
        EXPECT_EQ(e->type, event_type::created);
        EXPECT_EQ(e->path, "/dir/a");

        // exists on a present node fires on change.
        auto ex2 = co_await zk.watch_exists("/dir/a"s);
        ASSERT_TRUE(ex2 && ex2->value);
        ASSERT_TRUE(co_await zk.set("/dir/a"s, "v"s));
        auto e2 = co_await with_timeout(ex2->watch.changed(), 30s);
        ASSERT_TRUE(e2);
        EXPECT_EQ(e2->type, event_type::changed);
        EXPECT_EQ(zk.counters().watches, 3U);
        co_await zk.close();
    }());
}

TEST_F(ZkcoOps, WaitCreatedReturnsOnceThePathExistsAndFalseWhenTheSessionCloses) {
    run([&]() -> asio::awaitable<void> {
        client zk(ioc_.get_executor(), make_config());
        co_await connect(zk);
        client other(ioc_.get_executor(), make_config());
        co_await connect(other);
        ASSERT_TRUE(co_await zk.create("/here"s));
        EXPECT_TRUE(co_await wait_created(zk, "/here")) << "exists already";

        // Created by another client while it waits.
        bool done = false;
        bool created = false;
        asio::co_spawn(
            ioc_,
            [&]() -> asio::awaitable<void> {
                created = co_await wait_created(zk, "/later");
                done = true;
            },
            asio::detached
        );
        asio::steady_timer t(ioc_, 200ms);
        co_await t.async_wait(asio::use_awaitable);
        EXPECT_FALSE(done) << "returned before /later was created";
        ASSERT_TRUE(co_await other.create("/later"s));
        for (int i = 0; i < 1500 && !done; ++i) {
            t.expires_after(20ms);
            co_await t.async_wait(asio::use_awaitable);
        }
        EXPECT_TRUE(done && created);

        // Cancelled while it waits, at any point (its read in flight or its watch armed):
        // false, promptly (a cancelled read is "retryable", and must not be read again).
        for (const auto after : {0ms, 1ms, 50ms}) {
            done = false;
            created = true;
            asio::cancellation_signal stop;
            asio::co_spawn(
                ioc_,
                [&]() -> asio::awaitable<void> {
                    // As the roles' loops run it: a cancelled operation returns, never throws.
                    co_await asio::this_coro::throw_if_cancelled(false);
                    created = co_await wait_created(zk, "/absent");
                    done = true;
                },
                asio::bind_cancellation_slot(stop.slot(), asio::detached)
            );
            t.expires_after(after);
            co_await t.async_wait(asio::use_awaitable);
            stop.emit(asio::cancellation_type::terminal);
            for (int i = 0; i < 250 && !done; ++i) {
                t.expires_after(20ms);
                co_await t.async_wait(asio::use_awaitable);
            }
            EXPECT_TRUE(done) << "still waiting " << after.count() << " ms after the cancel";
            EXPECT_FALSE(created);
        }

        // The session closes while it waits: false, nothing to read again.
        done = false;
        asio::co_spawn(
            ioc_,
            [&]() -> asio::awaitable<void> {
                created = co_await wait_created(zk, "/never");
                done = true;
            },
            asio::detached
        );
        t.expires_after(100ms);
        co_await t.async_wait(asio::use_awaitable);
        co_await zk.close();
        for (int i = 0; i < 1500 && !done; ++i) {
            t.expires_after(20ms);
            co_await t.async_wait(asio::use_awaitable);
        }
        EXPECT_TRUE(done);
        EXPECT_FALSE(created);
        co_await other.close();
    }());
}

// A coroutine that goes on after its cancellation (throw_if_cancelled(false), as the roles'
// loops run) and then starts a wait: the wait ends at once instead of never (a cancellation
// only reaches the operations pending when it is emitted).
TEST_F(ZkcoOps, AWaitBegunAfterACancellationEndsAtOnce) {
    run([&]() -> asio::awaitable<void> {
        client zk(ioc_.get_executor(), make_config());
        co_await connect(zk);
        bool done = false;
        std::optional<result<watch_event>> fired;
        std::optional<result<state_change>> changed;
        std::optional<result<node>> read;
        int tries = 0;
        asio::cancellation_signal stop;
        asio::steady_timer t(ioc_);
        asio::co_spawn(
            ioc_,
            [&]() -> asio::awaitable<void> {
                co_await asio::this_coro::throw_if_cancelled(false);
                auto w = co_await zk.watch_exists("/cancelled-watch");
                // Cancelled here, during a pause that is not ZooKeeper's.
                asio::steady_timer pause(co_await asio::this_coro::executor, 10s);
                co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
                fired = co_await w->watch.changed();
                changed = co_await zk.wait_state(zk.state_generation());
                // A retryable outcome is not retried once cancelled.
                read = co_await retry_unknown(zk, [&]() -> asio::awaitable<result<node>> {
                    ++tries;
                    if (tries == 1) {
                        co_return error_code(errc::connection_loss);
                    }
                    co_return node{};
                });
                done = true;
            },
            asio::bind_cancellation_slot(stop.slot(), asio::detached)
        );
        t.expires_after(100ms);
        co_await t.async_wait(asio::use_awaitable);
        stop.emit(asio::cancellation_type::terminal);
        for (int i = 0; i < 250 && !done; ++i) {
            t.expires_after(20ms);
            co_await t.async_wait(asio::use_awaitable);
        }
        ASSERT_TRUE(done) << "a wait begun after the cancellation did not end";
        ASSERT_TRUE(fired && changed && read);
        EXPECT_EQ(fired->error(), asio::error::operation_aborted);
        EXPECT_EQ(changed->error(), asio::error::operation_aborted);
        ASSERT_FALSE(*read) << "tried again after the cancellation";
        EXPECT_EQ(read->error(), errc::connection_loss);
        EXPECT_EQ(tries, 1);
        co_await zk.close();
    }());
}

TEST_F(ZkcoOps, DigestAuthAndAcls) {
    run([&]() -> asio::awaitable<void> {
        auto cfg = make_config();
        cfg.auth = credentials{"alice", "secret"};
        client alice(ioc_.get_executor(), cfg);
        client anon(ioc_.get_executor(), make_config());
        auto cfg2 = make_config();
        cfg2.auth = credentials{"alice", "secret"};
        client alice2(ioc_.get_executor(), cfg2);
        co_await connect(alice);
        co_await connect(anon);
        co_await connect(alice2);

        // With credentials the default ACL is creator-only.
        ASSERT_TRUE(co_await alice.create("/private"s, "p"s));
        EXPECT_EQ((co_await anon.get("/private"s)).error(), errc::no_auth);
        EXPECT_EQ((co_await alice2.get("/private"s))->data, "p");

        // An explicit digest ACL, and a world-readable one.
        acl_list digest_acl{{perms::all, "digest", digest_id("alice", "secret")}};
        ASSERT_TRUE(co_await anon.create("/owned"s, "o"s, {create_mode::persistent, {}, digest_acl})
        );
        EXPECT_EQ((co_await anon.get("/owned"s)).error(), errc::no_auth);
        EXPECT_TRUE(co_await alice.get("/owned"s));
        ASSERT_TRUE(
            co_await alice.create("/public"s, "r"s, {create_mode::persistent, {}, read_acl()})
        );
        EXPECT_TRUE(co_await anon.get("/public"s));
        EXPECT_EQ((co_await anon.set("/public"s, "w"s)).error(), errc::no_auth);

        // get_acl reads what a create set: the creator's digest, the explicit one, world read.
        auto mine = co_await alice.get_acl("/private"s);
        ASSERT_TRUE(mine);
        EXPECT_EQ(mine->acl, (acl_list{{perms::all, "digest", digest_id("alice", "secret")}}));
        EXPECT_EQ(mine->stat.aversion, 0);
        // (Named results: GCC 12 mishandles a co_await result's member inside EXPECT_EQ.)
        const auto owned = co_await alice.get_acl("/owned"s);
        ASSERT_TRUE(owned);
        EXPECT_EQ(owned->acl, digest_acl);
        const auto hidden = co_await anon.get_acl("/owned"s);  // an ACL needs READ or ADMIN
        EXPECT_EQ(hidden.error(), errc::no_auth);
        const auto pub = co_await anon.get_acl("/public"s);
        ASSERT_TRUE(pub);
        EXPECT_EQ(pub->acl, read_acl());
        const auto root = co_await anon.get_acl("/"s);
        ASSERT_TRUE(root);
        EXPECT_EQ(root->acl, open_acl());
        const auto missing = co_await anon.get_acl("/missing"s);
        EXPECT_EQ(missing.error(), errc::no_node);
        const auto bad_path = co_await anon.get_acl("no/slash"s);
        EXPECT_EQ(bad_path.error(), errc::bad_arguments);

        // A bad ACL is refused by the server.
        acl_list bad{{perms::all, "nosuchscheme", "x"}};
        EXPECT_EQ(
            (co_await anon.create("/bad"s, ""s, {create_mode::persistent, {}, bad})).error(),
            errc::invalid_acl
        );
        // Deleting needs rights on the parent only (open here).
        EXPECT_TRUE(co_await anon.remove("/private"s));
        co_await alice.close();
        co_await anon.close();
        co_await alice2.close();
    }());
}

TEST_F(ZkcoOps, TenThousandOperationsInFlight) {
    run([&]() -> asio::awaitable<void> {
        client zk(ioc_.get_executor(), make_config(30s));
        co_await connect(zk);
        ASSERT_TRUE(co_await zk.create("/many"s));
        constexpr int n = 10'000;
        int ok = 0;
        int failed = 0;
        int done = 0;
        asio::steady_timer all_done(ioc_, asio::steady_timer::time_point::max());
        for (int i = 0; i < n; ++i) {
            zk.async_create(
                "/many/n" + std::to_string(i), std::to_string(i), {},
                [&](error_code ec, const std::string&) {
                    ++(ec ? failed : ok);
                    if (++done == n) {
                        all_done.cancel();
                    }
                }
            );
        }
        EXPECT_LT(done, n);  // they really were in flight together
        (void)co_await all_done.async_wait(asio::as_tuple(asio::use_awaitable));
        EXPECT_EQ(done, n);
        EXPECT_EQ(ok, n);
        EXPECT_EQ(failed, 0);
        auto kids = co_await zk.get_children("/many"s);
        ASSERT_TRUE(kids);
        EXPECT_EQ(kids->names.size(), static_cast<std::size_t>(n));
        co_await zk.close();
    }());
}

TEST_F(ZkcoOps, CancelAbandonsTheWaitAndDropsTheLateReply) {
    run([&]() -> asio::awaitable<void> {
        client zk(ioc_.get_executor(), make_config());
        co_await connect(zk);
        ASSERT_TRUE(co_await zk.create("/c"s, "v"s));

        for (const auto type :
             {asio::cancellation_type::terminal, asio::cancellation_type::partial}) {
            // A read, cancelled right after it was sent: aborted at once; its reply, when it
            // comes, is dropped.
            asio::cancellation_signal sig;
            int calls = 0;
            error_code got;
            zk.async_get("/c"s, asio::bind_cancellation_slot(sig.slot(), [&](error_code ec, node) {
                             ++calls;
                             got = ec;
                         }));
            sig.emit(type);
            // A later request's reply comes after the abandoned one's, which is dropped. The
            // abort itself is posted: let it run before looking.
            EXPECT_TRUE(co_await zk.get("/c"s));
            asio::steady_timer t(ioc_);
            for (int i = 0; i < 1000 && calls == 0; ++i) {
                t.expires_after(1ms);
                co_await t.async_wait(asio::use_awaitable);
            }
            EXPECT_EQ(calls, 1);
            EXPECT_EQ(got, asio::error::operation_aborted);
        }

        // Total cancellation is not supported: the op completes normally.
        {
            asio::cancellation_signal sig;
            error_code got = asio::error::would_block;
            zk.async_get("/c"s, asio::bind_cancellation_slot(sig.slot(), [&](error_code ec, node) {
                             got = ec;
                         }));
            sig.emit(asio::cancellation_type::total);
            EXPECT_TRUE(co_await zk.get("/c"s));
            asio::steady_timer t(ioc_);
            for (int i = 0; i < 1000 && got == asio::error::would_block; ++i) {
                t.expires_after(1ms);
                co_await t.async_wait(asio::use_awaitable);
            }
            EXPECT_FALSE(got);
        }
        co_await zk.close();
    }());
}

TEST_F(ZkcoOps, CancelAWatchWaitKeepsTheWatch) {
    run([&]() -> asio::awaitable<void> {
        client zk(ioc_.get_executor(), make_config());
        co_await connect(zk);
        ASSERT_TRUE(co_await zk.create("/cw"s, "v"s));
        auto w = co_await zk.watch_get("/cw"s);
        ASSERT_TRUE(w);

        for (const auto type :
             {asio::cancellation_type::terminal, asio::cancellation_type::partial}) {
            asio::cancellation_signal sig;
            error_code got;
            bool called = false;
            w->watch.async_wait(asio::bind_cancellation_slot(
                sig.slot(),
                [&](error_code ec, watch_event) {
                    called = true;
                    got = ec;
                }
            ));
            sig.emit(type);
            asio::steady_timer t(ioc_, 0ms);
            co_await t.async_wait(asio::use_awaitable);
            EXPECT_TRUE(called);
            EXPECT_EQ(got, asio::error::operation_aborted);
        }

        // A deadline on the wait: times out, the watch stays armed.
        auto timed = co_await with_timeout(w->watch.changed(), 50ms);
        EXPECT_EQ(timed.error(), errc::operation_timeout);
        EXPECT_EQ(timed.error(), condition::retryable);

        ASSERT_TRUE(co_await zk.set("/cw"s, "x"s));
        auto ev = co_await with_timeout(w->watch.changed(), 30s);
        ASSERT_TRUE(ev) << ev.error().message();
        EXPECT_EQ(ev->type, event_type::changed);

        // Two waits at once on one watch: the second is refused.
        auto w2 = co_await zk.watch_get("/cw"s);
        ASSERT_TRUE(w2);
        asio::cancellation_signal sig;
        w2->watch.async_wait(asio::bind_cancellation_slot(sig.slot(), [](error_code, watch_event) {
        }));
        auto second = co_await w2->watch.changed();
        EXPECT_EQ(second.error(), asio::error::already_started);
        sig.emit(asio::cancellation_type::terminal);
        co_await zk.close();
    }());
}

TEST_F(ZkcoOps, CloseCompletesPendingWatchesAndRefusesNewWork) {
    run([&]() -> asio::awaitable<void> {
        client zk(ioc_.get_executor(), make_config());
        co_await connect(zk);
        ASSERT_TRUE(co_await zk.create("/x"s));
        auto w = co_await zk.watch_get("/x"s);
        ASSERT_TRUE(w);
        error_code watch_ec;
        bool watch_done = false;
        w->watch.async_wait([&](error_code ec, watch_event) {
            watch_done = true;
            watch_ec = ec;
        });
        const auto gen = zk.state_generation();
        co_await zk.close();
        EXPECT_EQ(zk.state(), session_state::closed);
        EXPECT_GT(zk.state_generation(), gen);
        asio::steady_timer t(ioc_, 0ms);
        co_await t.async_wait(asio::use_awaitable);
        EXPECT_TRUE(watch_done);
        EXPECT_EQ(watch_ec, errc::closing);
        EXPECT_EQ((co_await zk.get("/x"s)).error(), errc::closing);
        EXPECT_EQ((co_await zk.connect()).error(), errc::closing);
        EXPECT_EQ((co_await zk.wait_state(zk.state_generation())).error(), errc::closing);
        co_await zk.close();  // twice is fine
    }());
}

TEST_F(ZkcoOps, DestroyingTheClientCompletesPendingOperations) {
    run([&]() -> asio::awaitable<void> {
        auto zk = std::make_unique<client>(ioc_.get_executor(), make_config());
        co_await connect(*zk);
        ASSERT_TRUE(co_await zk->create("/y"s));
        auto w = co_await zk->watch_get("/y"s);
        ASSERT_TRUE(w);
        error_code op_ec;
        error_code watch_ec;
        zk->async_get("/y"s, [&](error_code ec, node) { op_ec = ec; });
        w->watch.async_wait([&](error_code ec, watch_event) { watch_ec = ec; });
        zk.reset();
        asio::steady_timer t(ioc_, 0ms);
        co_await t.async_wait(asio::use_awaitable);
        EXPECT_EQ(op_ec, errc::closing);
        EXPECT_EQ(watch_ec, errc::closing);
    }());
}

TEST_F(ZkcoOps, OperationsBeforeConnectAreRefused) {
    run([&]() -> asio::awaitable<void> {
        client zk(ioc_.get_executor(), make_config());
        EXPECT_EQ(zk.state(), session_state::connecting);
        EXPECT_EQ((co_await zk.get("/"s)).error(), errc::invalid_state);
        co_await connect(zk);
        EXPECT_TRUE(co_await zk.get("/"s));
        co_await zk.close();
    }());
}

}  // namespace

}  // namespace ZKD_UNITY_ID
