// SPDX-License-Identifier: MIT
// multi_batcher against a real ZooKeeper: groups share transactions, a failing group does
// not sink the others, a failed prefix fails all, identical checks are sent once.
#include "protocol/task.hpp"
#include "roles/txn/batcher.hpp"
#include "roles/txn/zk_ops.hpp"
#include "support/zk_fixture.hpp"
#include "zkco/deadline.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <gtest/gtest.h>

#include <string>

namespace ZKD_UNITY_ID {

namespace asio = boost::asio;
using namespace std::literals;
using namespace zkd::zkco;
using zkd::roles::epoch_check_failed;
using zkd::roles::multi_batcher;

namespace {

class RolesBatcher : public zkd::test::zk_test {
protected:
    static asio::awaitable<void> connect(client& zk) {
        if (auto c = co_await with_timeout(zk.connect(), 30s); !c) {
            throw std::runtime_error("connect: " + c.error().message());
        }
    }

    struct outcome {
        bool done = false;
        error_code ec;
        std::vector<op_result> results;
    };

    // Submits a group; the outcome fills in when it completes.
    static std::shared_ptr<outcome> submit(multi_batcher& b, std::vector<multi_op> ops) {
        auto out = std::make_shared<outcome>();
        b.async_submit(std::move(ops), [out](error_code ec, std::vector<op_result> r) {
            out->done = true;
            out->ec = ec;
            out->results = std::move(r);
        });
        return out;
    }

    // Lets one turn of the event loop pass: groups queued before it are sent.
    static asio::awaitable<void> next_turn() {
        auto ex = co_await asio::this_coro::executor;
        co_await asio::post(ex, asio::use_awaitable);
    }

    static asio::awaitable<void> drain(multi_batcher& b) {
        while (b.outstanding() > 0) {
            auto [ec] = co_await b.async_wait_idle(asio::as_tuple(asio::use_awaitable));
            EXPECT_FALSE(ec) << ec.message();
        }
    }

    static multi_op create_op(std::string path) {
        return op::create{std::move(path), "x", create_mode::persistent, {}};
    }

    // Adds one to the number in /count, read as `seen` at `version`: sets it at that version
    // through `b`, and on a conflict reads it again (at most 20 tries). `done` or `gave_up`
    // counts it.
    static asio::awaitable<void> add_one(
        client& zk,
        multi_batcher& b,
        std::string seen,
        std::int32_t version,
        int& done,
        int& gave_up
    ) {
        for (int tries = 0; tries < 20; ++tries) {
            if (tries > 0) {
                auto n = co_await zk.get("/count"s);
                if (!n) {
                    break;
                }
                seen = n->data;
                version = n->stat.version;
            }
            std::vector<multi_op> ops{
                op::set{"/count", std::to_string(std::stoi(seen) + 1), version}};
            auto [ec, r] =
                co_await b.async_submit(std::move(ops), asio::as_tuple(asio::use_awaitable));
            if (!ec) {
                ++done;
                co_return;
            }
            if (ec != errc::bad_version) {
                break;
            }
        }
        ++gave_up;
    }
};

TEST_F(RolesBatcher, WaitIdleCompletesOnceNothingIsQueuedOrInFlight) {
    run([&]() -> asio::awaitable<void> {
        client zk(ioc_.get_executor(), make_config());
        co_await connect(zk);
        multi_batcher b(zk, {10, 900'000, 1});
        // Nothing out: at once.
        auto [none] = co_await b.async_wait_idle(asio::as_tuple(asio::use_awaitable));
        EXPECT_FALSE(none);
        std::vector<std::shared_ptr<outcome>> groups;
        for (int i = 0; i < 40; ++i) {
            groups.push_back(submit(b, {create_op("/i" + std::to_string(i))}));
        }
        // A handler that queues more: the waiter sees it only by looping on outstanding().
        auto chained = std::make_shared<outcome>();
        b.async_submit({create_op("/i-first")}, [&b, chained](error_code, std::vector<op_result>) {
            b.async_submit(
                {create_op("/i-chained")},
                [chained](error_code ec, std::vector<op_result>) {
                    chained->done = true;
                    chained->ec = ec;
                }
            );
        });
        auto [ec] = co_await b.async_wait_idle(asio::as_tuple(asio::use_awaitable));
        EXPECT_FALSE(ec);
        for (const auto& g : groups) {
            EXPECT_TRUE(g->done);  // every answer was in when it completed
        }
        co_await drain(b);
        EXPECT_EQ(b.outstanding(), 0U);
        EXPECT_TRUE(chained->done);
        EXPECT_FALSE(chained->ec) << chained->ec.message();
    }());
}

TEST_F(RolesBatcher, WaitIdleIsAbortedWhenTheBatcherGoes) {
    run([&]() -> asio::awaitable<void> {
        client zk(ioc_.get_executor(), make_config());
        co_await connect(zk);
        auto b = std::make_unique<multi_batcher>(zk, multi_batcher::limits{10, 900'000, 1});
        auto g = submit(*b, {create_op("/gone0")});
        co_await next_turn();
        (void)submit(*b, {create_op("/gone1")});  // queued behind the one in flight
        auto waiter = std::make_shared<outcome>();
        b->async_wait_idle([waiter](error_code ec) {
            waiter->done = true;
            waiter->ec = ec;
        });
        b.reset();
        asio::steady_timer t(ioc_);
        for (int i = 0; i < 3000 && !(waiter->done && g->done); ++i) {
            t.expires_after(1ms);
            co_await t.async_wait(asio::use_awaitable);
        }
        EXPECT_TRUE(waiter->done);
        EXPECT_EQ(waiter->ec, error_code(asio::error::operation_aborted));
    }());
}

TEST_F(RolesBatcher, ALoneGroupGoesAtOnceAndLoadIsBatched) {
    run([&]() -> asio::awaitable<void> {
        client zk(ioc_.get_executor(), make_config());
        co_await connect(zk);
        multi_batcher b(zk, {100, 900'000, 1});
        auto first = submit(b, {create_op("/a0")});
        // Sent on the next turn of the event loop, with no timer: in flight before anything
        // else is queued.
        EXPECT_EQ(b.counters().transactions, 0U);
        co_await next_turn();
        EXPECT_EQ(b.counters().transactions, 1U);
        std::vector<std::shared_ptr<outcome>> rest;
        for (int i = 1; i <= 250; ++i) {
            rest.push_back(submit(b, {create_op("/a" + std::to_string(i))}));
        }
        co_await drain(b);
        EXPECT_TRUE(first->done);
        EXPECT_FALSE(first->ec);
        for (const auto& o : rest) {
            EXPECT_TRUE(o->done);
            EXPECT_FALSE(o->ec) << o->ec.message();
            ASSERT_EQ(o->results.size(), 1U);
        }
        // 250 groups queued behind one in flight, at most 100 ops a transaction: 3 more.
        EXPECT_EQ(b.counters().transactions, 4U);
        EXPECT_EQ(b.counters().groups, 251U);
        EXPECT_EQ((co_await zk.get_children("/"s))->names.size(), 251U);
        co_await zk.close();
    }());
}

// on_send: the owner's held-back groups go in the transaction about to be sent, and poke()
// sends them with nothing else queued (a client's automatic bundles, protocol.md §4.1).
TEST_F(RolesBatcher, WhatOnSendQueuesGoesInTheTransactionAboutToBeSent) {
    run([&]() -> asio::awaitable<void> {
        client zk(ioc_.get_executor(), make_config());
        co_await connect(zk);
        multi_batcher b(zk, {1000, 900'000, 1});
        std::vector<std::string> held;  // what the owner holds back
        std::vector<std::shared_ptr<outcome>> sent;
        int calls = 0;
        b.on_send([&] {
            ++calls;
            for (auto& p : held) {
                sent.push_back(submit(b, {create_op(p)}));
            }
            held.clear();
        });
        // poke() with nothing queued: on_send runs on the next turn, and what it queues goes.
        held.emplace_back("/p0");
        b.poke();
        EXPECT_EQ(calls, 0);
        co_await next_turn();
        EXPECT_EQ(calls, 1);
        EXPECT_EQ(b.counters().transactions, 1U);
        // While that transaction is out, on_send is not asked: what is held waits for its
        // answer and then goes, all of it, in the next transaction (not one each).
        for (int i = 1; i <= 5; ++i) {
            held.push_back("/p" + std::to_string(i));
            b.poke();
        }
        while (sent.size() < 6 || b.outstanding() > 0) {
            co_await drain(b);
            co_await next_turn();
        }
        EXPECT_EQ(b.counters().transactions, 2U);
        for (const auto& o : sent) {
            EXPECT_TRUE(o->done);
            EXPECT_FALSE(o->ec) << o->ec.message();
        }
        EXPECT_EQ((co_await zk.get_children("/"s))->names.size(), 6U);
        co_await zk.close();
    }());
}

TEST_F(RolesBatcher, GroupsQueuedInOneTurnShareATransactionWhateverTheFreeSlots) {
    run([&]() -> asio::awaitable<void> {
        client zk(ioc_.get_executor(), make_config());
        co_await connect(zk);
        multi_batcher b(zk, {1000, 900'000, 4});
        // A master placing ten tasks in one step: one transaction, not four (one per free
        // in-flight slot) and a fifth for the rest.
        std::vector<std::shared_ptr<outcome>> groups;
        groups.reserve(10);
        for (int i = 0; i < 10; ++i) {
            groups.push_back(submit(b, {create_op("/s" + std::to_string(i))}));
        }
        co_await drain(b);
        for (const auto& g : groups) {
            EXPECT_TRUE(g->done);
            EXPECT_FALSE(g->ec) << g->ec.message();
        }
        EXPECT_EQ(b.counters().transactions, 1U);
        EXPECT_EQ((co_await zk.get_children("/"s))->names.size(), 10U);
        co_await zk.close();
    }());
}

TEST_F(RolesBatcher, ADeferredGroupRidesWithTheNextTransactionOrGoesAfterItsWait) {
    run([&]() -> asio::awaitable<void> {
        client zk(ioc_.get_executor(), make_config());
        co_await connect(zk);
        auto deferred = [](multi_batcher& b, std::string path) {
            auto out = std::make_shared<outcome>();
            b.async_submit_deferred(
                {create_op(std::move(path))},
                [out](error_code ec, std::vector<op_result> r) {
                    out->done = true;
                    out->ec = ec;
                    out->results = std::move(r);
                }
            );
            return out;
        };
        asio::steady_timer t(ioc_);
        {
            // A long wait: it goes only with the next group, in that group's transaction.
            multi_batcher b(zk, {1000, 900'000, 4, std::chrono::milliseconds(60'000)});
            auto lazy = deferred(b, "/lazy");
            co_await next_turn();
            co_await next_turn();
            EXPECT_EQ(b.counters().transactions, 0U);
            EXPECT_FALSE(lazy->done);
            auto eager = submit(b, {create_op("/eager")});
            for (int i = 0; i < 3000 && !(lazy->done && eager->done); ++i) {
                t.expires_after(1ms);
                co_await t.async_wait(asio::use_awaitable);
            }
            EXPECT_TRUE(lazy->done && eager->done);
            EXPECT_FALSE(lazy->ec) << lazy->ec.message();
            EXPECT_EQ(b.counters().transactions, 1U);
            // Someone waiting for the batcher to be idle sends it at once.
            auto flushed = deferred(b, "/flushed");
            co_await drain(b);
            EXPECT_TRUE(flushed->done);
            EXPECT_EQ(b.counters().transactions, 2U);
        }
        {
            // Alone, it goes once its wait is over.
            multi_batcher b(zk, {1000, 900'000, 4, std::chrono::milliseconds(30)});
            auto alone = deferred(b, "/alone");
            for (int i = 0; i < 3000 && !alone->done; ++i) {
                t.expires_after(1ms);
                co_await t.async_wait(asio::use_awaitable);
            }
            EXPECT_TRUE(alone->done);
            EXPECT_FALSE(alone->ec) << alone->ec.message();
            EXPECT_EQ(b.counters().transactions, 1U);
        }
        EXPECT_TRUE((co_await zk.exists("/lazy"s)).value());
        EXPECT_TRUE((co_await zk.exists("/alone"s)).value());
        co_await zk.close();
    }());
}

TEST_F(RolesBatcher, ATransactionLogsWhatItCreatesInEachLoggedDirectory) {
    // docs/protocol.md §6 "Change logs": one set per directory per transaction, naming the
    // children its groups created there, with their data while the budget lasts.
    run([&]() -> asio::awaitable<void> {
        client zk(ioc_.get_executor(), make_config());
        co_await connect(zk);
        for (const auto* dir : {"/pending", "/pending/00", "/pending/01", "/assign", "/other"}) {
            ASSERT_TRUE(co_await zk.create(dir));
        }
        multi_batcher b(zk, {1000, 900'000, 4});
        b.enable_change_logs();
        const std::string big(zkd::protocol::max_log_inline_bytes, 'x');
        std::vector<std::shared_ptr<outcome>> groups;
        groups.push_back(submit(b, {create_op("/pending/00/a")}));
        groups.push_back(submit(b, {create_op("/pending/01/b"), create_op("/other/c")}));
        groups.push_back(submit(b, {op::create{"/pending/00/d", big, create_mode::persistent, {}}})
        );
        co_await drain(b);
        for (const auto& g : groups) {
            EXPECT_FALSE(g->ec) << g->ec.message();
        }
        EXPECT_EQ(b.counters().transactions, 1U);
        auto s0 = co_await zk.get("/pending/00"s);
        ASSERT_TRUE(s0);
        EXPECT_EQ(s0->stat.version, 1) << "one set per directory";
        const auto log0 = zkd::protocol::decode_change_log(s0->data);
        ASSERT_TRUE(log0) << log0.error().message;
        ASSERT_EQ(log0->created.size(), 2U);
        EXPECT_EQ(log0->created[0], (zkd::protocol::log_entry{"a", "x"}));
        EXPECT_EQ(log0->created[1].name, "d");
        EXPECT_FALSE(log0->created[1].data) << "over the budget: by name only";
        auto s1 = co_await zk.get("/pending/01"s);
        ASSERT_TRUE(s1);
        EXPECT_EQ(zkd::protocol::decode_change_log(s1->data).value().created.size(), 1U);
        EXPECT_EQ((co_await zk.get("/other"s))->stat.version, 0) << "not a logged directory";
        co_await zk.close();
    }());
}

TEST_F(RolesBatcher, ACreateInAMissingClientResultsDirectoryMakesTheDirectory) {
    // docs/protocol.md §2: /results/<c> is made on demand. A group whose result create finds
    // it missing goes again with the directory's create in front; a group that raced another
    // one making it goes again without; the handlers see their own ops only. Any other
    // missing parent is the group's own failure.
    run([&]() -> asio::awaitable<void> {
        client zk(ioc_.get_executor(), make_config());
        co_await connect(zk);
        ASSERT_TRUE(co_await zk.create("/results"s));
        multi_batcher b(zk, {1000, 900'000, 4});
        b.enable_change_logs();
        auto first = submit(b, {create_op("/results/3fa9c2d1/t-a")});
        co_await next_turn();
        // Sent while the first is out: both find the directory missing, one makes it, the
        // other's create of it then finds it made.
        auto second = submit(b, {create_op("/results/3fa9c2d1/t-b")});
        auto elsewhere = submit(b, {create_op("/missing/t-c")});
        co_await drain(b);
        for (const auto& g : {first, second}) {
            EXPECT_FALSE(g->ec) << g->ec.message();
            ASSERT_EQ(g->results.size(), 1U) << "only the group's own op";
            EXPECT_TRUE(g->results[0].path.starts_with("/results/3fa9c2d1/t-"));
        }
        EXPECT_EQ(elsewhere->ec, errc::no_node);
        ASSERT_EQ(elsewhere->results.size(), 1U);
        auto dir = co_await zk.get("/results/3fa9c2d1"s);
        ASSERT_TRUE(dir);
        EXPECT_EQ(dir->stat.num_children, 2);
        const auto log = zkd::protocol::decode_change_log(dir->data);
        ASSERT_TRUE(log) << "the directory's change log: " << log.error().message;
        EXPECT_FALSE((co_await zk.exists("/missing"s)).value()) << "not made on demand";
        co_await zk.close();
    }());
}

TEST_F(RolesBatcher, AFailingGroupDoesNotSinkTheOthers) {
    run([&]() -> asio::awaitable<void> {
        client zk(ioc_.get_executor(), make_config());
        co_await connect(zk);
        ASSERT_TRUE(co_await zk.create("/exists"s));
        multi_batcher b(zk, {1000, 900'000, 1});
        auto blocker = submit(b, {create_op("/blocker")});
        co_await next_turn();  // in flight: the rest queue up
        auto ok1 = submit(b, {create_op("/ok1"), create_op("/ok1/child")});
        auto bad = submit(b, {create_op("/bad"), create_op("/exists")});
        auto ok2 = submit(b, {create_op("/ok2")});
        co_await drain(b);
        EXPECT_FALSE(blocker->ec);
        EXPECT_FALSE(ok1->ec) << ok1->ec.message();
        ASSERT_EQ(ok1->results.size(), 2U);
        EXPECT_EQ(ok1->results[1].path, "/ok1/child");
        EXPECT_EQ(bad->ec, errc::node_exists);
        ASSERT_EQ(bad->results.size(), 2U);
        EXPECT_EQ(bad->results[1].ec, errc::node_exists);
        EXPECT_FALSE(ok2->ec);
        EXPECT_GE(b.counters().resent, 2U);
        EXPECT_TRUE((co_await zk.exists("/ok1/child"s)).value());
        EXPECT_TRUE((co_await zk.exists("/ok2"s)).value());
        EXPECT_FALSE((co_await zk.exists("/bad"s)).value());  // its group applied nothing
        co_await zk.close();
    }());
}

TEST_F(RolesBatcher, GroupsThatWriteOneNodeGoInTransactionsOfTheirOwn) {
    run([&]() -> asio::awaitable<void> {
        client zk(ioc_.get_executor(), make_config());
        co_await connect(zk);
        ASSERT_TRUE(co_await zk.create("/n"s));
        multi_batcher b(zk, {1000, 900'000, 1});
        auto blocker = submit(b, {create_op("/blocker")});
        co_await next_turn();  // in flight: the rest queue up
        auto first = submit(b, {op::set{"/n", "first", 0}});
        auto other = submit(b, {create_op("/other")});
        auto stale = submit(b, {op::set{"/n", "stale", 0}});  // read before `first` wrote
        co_await drain(b);
        EXPECT_FALSE(first->ec) << first->ec.message();
        EXPECT_FALSE(other->ec) << other->ec.message();
        EXPECT_EQ(stale->ec, errc::bad_version);
        // `first` and `other` shared a transaction; `stale` failed alone, sinking nobody.
        EXPECT_EQ(b.counters().transactions, 3U);
        EXPECT_EQ(b.counters().resent, 0U);
        EXPECT_EQ((co_await zk.get("/n"s))->data, "first");
        co_await zk.close();
    }());
}

TEST_F(RolesBatcher, WritersOfOneNodeThatReadItAgainAfterAConflictAllGetTheirWriteIn) {
    run([&]() -> asio::awaitable<void> {
        client zk(ioc_.get_executor(), make_config());
        co_await connect(zk);
        ASSERT_TRUE(co_await zk.create("/count"s, "0"s));
        multi_batcher b(zk, {1000, 900'000, 1});
        // Three writers (as a client's consumes of the tasks of one bundle): each reads the
        // node, adds one with a set at the version read, and on a conflict reads again. Put
        // in one multi, their sets sank each other at every try, and each read again just
        // ahead of the others' resends.
        constexpr int writers = 3;
        int done = 0;
        int gave_up = 0;
        // They read it at once and write in the same turn of the event loop.
        auto count = co_await zk.get("/count"s);
        ASSERT_TRUE(count);
        auto ex = co_await asio::this_coro::executor;
        for (int i = 0; i < writers; ++i) {
            asio::co_spawn(
                ex, add_one(zk, b, count->data, count->stat.version, done, gave_up), asio::detached
            );
        }
        while (done + gave_up < writers) {
            asio::steady_timer t(ex, 10ms);
            co_await t.async_wait(asio::use_awaitable);
        }
        EXPECT_EQ(done, writers);
        EXPECT_EQ((co_await zk.get("/count"s))->data, std::to_string(writers));
        co_await zk.close();
    }());
}

TEST_F(RolesBatcher, AFailedPrefixFailsEveryGroupAndChecksAreSentOnce) {
    run([&]() -> asio::awaitable<void> {
        client zk(ioc_.get_executor(), make_config());
        co_await connect(zk);
        ASSERT_TRUE(co_await zk.create("/epoch"s));
        ASSERT_TRUE(co_await zk.create("/w"s));
        multi_batcher b(zk, {1000, 900'000, 1});
        b.set_prefix({op::check{"/epoch", 0}});
        auto blocker = submit(b, {create_op("/first")});
        co_await next_turn();
        std::vector<std::shared_ptr<outcome>> groups;
        for (int i = 0; i < 5; ++i) {
            groups.push_back(
                submit(b, {op::check{"/w", any_version}, create_op("/t" + std::to_string(i))})
            );
        }
        co_await drain(b);
        for (const auto& g : groups) {
            EXPECT_FALSE(g->ec) << g->ec.message();
        }
        // prefix + 5 shared checks sent as 1 + 5 creates = 7 ops in the second transaction.
        EXPECT_EQ(b.counters().transactions, 2U);
        EXPECT_EQ(b.counters().ops, 2U + 7U);

        // Someone else bumps the epoch: every group of the next transactions fails with it.
        ASSERT_TRUE(co_await zk.set("/epoch"s, "new"s));
        auto f1 = submit(b, {create_op("/late1")});
        auto f2 = submit(b, {create_op("/late2")});
        co_await drain(b);
        EXPECT_EQ(f1->ec, errc::bad_version);
        EXPECT_EQ(f2->ec, errc::bad_version);
        EXPECT_FALSE((co_await zk.exists("/late1"s)).value());
        // The group's own results do not hold the prefix's failure: the master reads this as
        // deposed (epoch_check_failed), and a group whose own versioned op failed as not.
        EXPECT_TRUE(epoch_check_failed(f1->ec, f1->results));
        b.set_prefix({op::check{"/epoch", 1}});
        auto stale = submit(b, {op::check{"/w", 7}, create_op("/late3")});
        auto fine = submit(b, {create_op("/late4")});
        co_await drain(b);
        EXPECT_EQ(stale->ec, errc::bad_version);
        EXPECT_FALSE(epoch_check_failed(stale->ec, stale->results));
        EXPECT_FALSE(fine->ec) << fine->ec.message();
        EXPECT_FALSE(epoch_check_failed(fine->ec, fine->results));
        co_await zk.close();
    }());
}

TEST_F(RolesBatcher, ConnectionLevelFailuresReachEveryGroup) {
    run([&]() -> asio::awaitable<void> {
        client zk(ioc_.get_executor(), make_config());
        co_await connect(zk);
        auto b = std::make_unique<multi_batcher>(zk, multi_batcher::limits{1000, 900'000, 1});
        auto in_flight = submit(*b, {create_op("/x")});
        co_await next_turn();
        auto queued = submit(*b, {create_op("/y")});
        b.reset();  // the queued group is aborted; the one in flight completes normally
        co_await zk.close();
        asio::steady_timer t(ioc_, 1ms);
        co_await t.async_wait(asio::use_awaitable);
        EXPECT_TRUE(queued->done);
        EXPECT_EQ(queued->ec, asio::error::operation_aborted);
        EXPECT_TRUE(in_flight->done);
    }());
}

}  // namespace

}  // namespace ZKD_UNITY_ID
