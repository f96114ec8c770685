// SPDX-License-Identifier: MIT
// Joining a cluster against a real ZooKeeper: the fixed layout, herd-free election,
// takeover with epoch fencing, worker registration.
#include "protocol/ids.hpp"
#include "roles/cluster/election.hpp"
#include "roles/cluster/namespace.hpp"
#include "roles/txn/batcher.hpp"
#include "support/zk_fixture.hpp"
#include "zkco/deadline.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <gtest/gtest.h>

#include <optional>

namespace ZKD_UNITY_ID {

namespace asio = boost::asio;
using namespace std::literals;
using namespace zkd::zkco;
using namespace zkd::roles;
using namespace zkd::protocol;

namespace {

class RolesElection : public zkd::test::zk_test {
protected:
    static asio::awaitable<void> connect(client& zk) {
        if (auto c = co_await with_timeout(zk.connect(), 30s); !c) {
            throw std::runtime_error("connect: " + c.error().message());
        }
    }

    static member_info member(const std::string& host) {
        member_info m;
        m.id = new_member_id(host, 42);
        m.host = host;
        m.pid = 42;
        return m;
    }

    // Lets ready handlers run for a moment.
    asio::awaitable<void> settle(std::chrono::milliseconds d = 50ms) {
        asio::steady_timer t(ioc_, d);
        co_await t.async_wait(asio::use_awaitable);
    }
};

TEST_F(RolesElection, EnsureLayoutMakesEveryFixedNodeOnce) {
    run([&]() -> asio::awaitable<void> {
        client zk(ioc_.get_executor(), make_config());
        co_await connect(zk);
        meta_info defaults;
        defaults.pending_shards = 4;
        defaults.result_shards = 3;
        auto l = co_await ensure_layout(zk, defaults);
        ASSERT_TRUE(l) << l.error().message();
        EXPECT_EQ(l->pending_shards, 4U);
        EXPECT_EQ(l->result_shards, 3U);
        for (const auto& path : l->fixed_nodes()) {
            EXPECT_TRUE((co_await zk.exists(path)).value()) << path;
        }
        EXPECT_EQ((co_await zk.get_children("/pending"s))->names.size(), 4U);

        // A second process with other defaults follows what /meta says.
        auto again = co_await ensure_layout(zk, meta_info{});
        ASSERT_TRUE(again);
        EXPECT_EQ(again->pending_shards, 4U);

        // Garbage in /meta stops the process instead of guessing.
        ASSERT_TRUE(co_await zk.set("/meta"s, "{not json"s));
        EXPECT_EQ((co_await ensure_layout(zk, meta_info{})).error(), errc::data_inconsistency);
        co_await zk.close();
    }());
}

TEST_F(RolesElection, EnsureChrootCreatesTheNamespace) {
    run([&]() -> asio::awaitable<void> {
        zkd::zkco::config cfg = make_config();
        cfg.connect_string = base_;  // no chroot: the namespace may not exist yet
        client root(ioc_.get_executor(), cfg);
        co_await connect(root);
        const std::string ns = chroot_ + "/zkd/prod";
        ASSERT_TRUE(co_await ensure_chroot(root, ns));
        EXPECT_TRUE((co_await root.exists(ns)).value());
        EXPECT_TRUE(co_await ensure_chroot(root, ns));  // idempotent
        co_await root.close();
    }());
}

TEST_F(RolesElection, OnlyTheLowestLeadsAndEachWatchesItsPredecessor) {
    run([&]() -> asio::awaitable<void> {
        std::vector<std::unique_ptr<client>> sessions;
        for (int i = 0; i < 3; ++i) {
            sessions.push_back(std::make_unique<client>(ioc_.get_executor(), make_config()));
            co_await connect(*sessions.back());
        }
        ASSERT_TRUE(co_await ensure_layout(*sessions[0], meta_info{}));
        // Foreign children must not block or confuse the election.
        ASSERT_TRUE(co_await sessions[0]->create("/election/aaa"s));
        ASSERT_TRUE(co_await sessions[0]->create("/election/c-bad-0000000000"s));

        std::vector<std::optional<result<candidacy>>> won(3);
        for (int i = 0; i < 3; ++i) {
            asio::co_spawn(
                ioc_,
                campaign(*sessions[static_cast<std::size_t>(i)], member("h" + std::to_string(i))),
                [&won, i](std::exception_ptr, result<candidacy> r) {
                    won[static_cast<std::size_t>(i)] = std::move(r);
                }
            );
            // Candidates in order 0, 1, 2: wait until this one's node exists (2 foreign + i+1).
            const std::size_t want = 3 + static_cast<std::size_t>(i);
            for (int tries = 0; tries < 1000; ++tries) {
                const auto kids = co_await sessions[0]->get_children("/election"s);
                if (kids && kids->names.size() >= want) {
                    break;
                }
                co_await settle(5ms);
            }
        }
        co_await settle(200ms);  // give a wrong winner time to show up
        ASSERT_TRUE(won[0].has_value());
        ASSERT_TRUE(*won[0]) << won[0]->error().message();
        EXPECT_FALSE(won[1].has_value());
        EXPECT_FALSE(won[2].has_value());

        // The leader's session ends: the next one leads, the last keeps waiting.
        co_await sessions[0]->close();
        for (int i = 0; i < 100 && !won[1]; ++i) {
            co_await settle(20ms);
        }
        ASSERT_TRUE(won[1].has_value());
        EXPECT_TRUE(*won[1]);
        EXPECT_FALSE(won[2].has_value());

        // A waiting candidate that leaves lets the chain re-link past it.
        co_await sessions[1]->close();
        for (int i = 0; i < 100 && !won[2]; ++i) {
            co_await settle(20ms);
        }
        ASSERT_TRUE(won[2].has_value());
        EXPECT_TRUE(*won[2]);
        EXPECT_LT((*won[1])->sequence, (*won[2])->sequence);
        co_await sessions[2]->close();
    }());
}

TEST_F(RolesElection, TakeoverBumpsTheEpochAndFencesTheOldMaster) {
    run([&]() -> asio::awaitable<void> {
        client a(ioc_.get_executor(), make_config());
        client b(ioc_.get_executor(), make_config());
        co_await connect(a);
        co_await connect(b);
        ASSERT_TRUE(co_await ensure_layout(a, meta_info{}));
        const auto ma = member("a");
        const auto mb = member("b");

        auto ea = co_await take_over(a, ma, 1000);
        ASSERT_TRUE(ea) << ea.error().message();
        EXPECT_EQ(*ea, 1);
        auto m = co_await a.get("/master"s);
        ASSERT_TRUE(m);
        auto info = decode_master(m->data);
        ASSERT_TRUE(info);
        EXPECT_EQ(info->id, ma.id);
        EXPECT_EQ(info->epoch, 1);

        // A's writes carry check(/epoch, 1).
        multi_batcher fenced(a);
        fenced.set_prefix({op::check{"/epoch", static_cast<std::int32_t>(*ea)}});
        error_code before;
        bool done = false;
        fenced.async_submit(
            {op::create{"/pending/00/t1", "{}", create_mode::persistent, {}}},
            [&](error_code ec, std::vector<op_result>) {
                before = ec;
                done = true;
            }
        );
        while (!done) {
            co_await settle(5ms);
        }
        EXPECT_FALSE(before) << before.message();

        // B takes over (A was deposed without noticing): epoch 2, and A can no longer write.
        auto eb = co_await take_over(b, mb, 2000);
        ASSERT_TRUE(eb);
        EXPECT_EQ(*eb, 2);
        EXPECT_EQ(decode_master((co_await b.get("/master"s))->data)->id, mb.id);
        error_code after;
        done = false;
        fenced.async_submit(
            {op::create{"/pending/00/t2", "{}", create_mode::persistent, {}}},
            [&](error_code ec, std::vector<op_result>) {
                after = ec;
                done = true;
            }
        );
        while (!done) {
            co_await settle(5ms);
        }
        EXPECT_EQ(after, errc::bad_version);
        EXPECT_FALSE((co_await b.exists("/pending/00/t2"s)).value());
        co_await a.close();
        co_await b.close();
    }());
}

TEST_F(RolesElection, WorkersRegisterAnEphemeralNodeAndAnAssignmentDirectory) {
    run([&]() -> asio::awaitable<void> {
        client w(ioc_.get_executor(), make_config());
        client observer(ioc_.get_executor(), make_config());
        co_await connect(w);
        co_await connect(observer);
        ASSERT_TRUE(co_await ensure_layout(w, meta_info{}));
        auto me = member("w");
        me.capacity = 4;
        me.types = {"echo", "sum"};
        ASSERT_TRUE(co_await join_workers(w, me));
        auto node = co_await observer.get("/workers/" + me.id);
        ASSERT_TRUE(node);
        EXPECT_EQ(node->stat.ephemeral_owner, w.session()->id);
        auto info = decode_worker(node->data);
        ASSERT_TRUE(info) << info.error().message;
        EXPECT_EQ(info->capacity, 4);
        EXPECT_EQ(info->types, (std::vector<std::string>{"echo", "sum"}));
        EXPECT_TRUE((co_await observer.exists("/assign/" + me.id)).value());
        // Joining again with the same session is not an error.
        EXPECT_TRUE(co_await join_workers(w, me));

        co_await w.close();
        EXPECT_FALSE((co_await observer.exists("/workers/" + me.id)).value());
        EXPECT_TRUE((co_await observer.exists("/assign/" + me.id)).value());
        co_await observer.close();
    }());
}

}  // namespace

}  // namespace ZKD_UNITY_ID
