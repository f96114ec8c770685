// SPDX-License-Identifier: MIT
// A submit whose answer is lost (docs/protocol.md §6 T1): the connection to ZooKeeper drops
// with the create in flight while the session lives on. Whether it applied is decided from
// ZooKeeper (the transaction's receipt), never guessed: a task is created exactly once, even
// when the master took it away before the client could look.
#include "roles/client/task_client.hpp"
#include "roles/cluster/election.hpp"
#include "roles/cluster/namespace.hpp"
#include "support/relay.hpp"
#include "support/roles_cluster.hpp"
#include "support/zk_fixture.hpp"
#include "zkco/deadline.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/json.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace ZKD_UNITY_ID {

namespace asio = boost::asio;
namespace json = boost::json;
using namespace std::literals;
using namespace zkd::roles;
using namespace zkd::protocol;
using zkd::zkco::client;

namespace {

class RolesReceipt : public zkd::test::zk_test {
protected:
    asio::awaitable<void> pause(std::chrono::milliseconds d) {
        asio::steady_timer t(ioc_, d);
        co_await t.async_wait(asio::use_awaitable);
    }

    /// Waits until `path` exists (true) or 10 s passed.
    asio::awaitable<bool> appears(client& zk, std::string path) {
        for (int i = 0; i < 500; ++i) {
            auto e = co_await zk.exists(path);
            if (e && e->has_value()) {
                co_return true;
            }
            co_await pause(20ms);
        }
        co_return false;
    }

    /// Children of every pending shard.
    asio::awaitable<std::size_t> pending(client& zk, const layout& l) {
        std::size_t n = 0;
        for (const auto& shard : l.pending_shard_paths()) {
            auto kids = co_await zk.get_children(shard);
            n += kids ? kids->names.size() : 0;
        }
        co_return n;
    }

    std::vector<task_spec> one_echo() {
        std::vector<task_spec> v;
        v.push_back(task_spec{"echo"s, json::value(1)});
        return v;
    }
};

TEST_F(RolesReceipt, ALostAnswerToASubmitTheMasterAlreadyTookIsNotSentAgain) {
    run(
        [&]() -> asio::awaitable<void> {
            client direct(ioc_.get_executor(), make_config());
            ASSERT_TRUE(co_await zkd::zkco::with_timeout(direct.connect(), 10s));
            auto l = co_await ensure_layout(direct, meta_info{});
            ASSERT_TRUE(l);

            zkd::test::relay wire(ioc_, base_);
            auto cfg = make_config(8s);
            cfg.connect_string = wire.address() + chroot_;
            client zk(ioc_.get_executor(), cfg);
            ASSERT_TRUE(co_await zkd::zkco::with_timeout(zk.connect(), 10s));
            task_client tc(zk, *l);
            auto warm = co_await tc.submit(one_echo());  // a first submit, answered
            ASSERT_TRUE(warm);
            ASSERT_TRUE(co_await direct.remove(l->pending_task(warm->front())));

            // The create reaches the server; its answer never comes back.
            wire.drop_answers(true);
            std::optional<zkd::zkco::result<std::vector<std::string>>> submitted;
            asio::co_spawn(
                ioc_,
                [&]() -> asio::awaitable<void> { submitted = co_await tc.submit(one_echo()); },
                asio::detached
            );
            // It applied: the task is there. "The master" takes it at once.
            std::string tid;
            for (int i = 0; i < 500 && tid.empty(); ++i) {
                for (const auto& shard : l->pending_shard_paths()) {
                    auto kids = co_await direct.get_children(shard);
                    if (kids && !kids->names.empty()) {
                        tid = kids->names.front();
                    }
                }
                co_await pause(10ms);
            }
            ASSERT_FALSE(tid.empty()) << "the create never reached the server";
            ASSERT_TRUE(co_await direct.remove(l->pending_task(tid)));
            // The connection drops with the answer lost; the session lives on.
            wire.cut();
            wire.drop_answers(false);
            for (int i = 0; i < 500 && !submitted; ++i) {
                co_await pause(20ms);
            }
            ASSERT_TRUE(submitted) << "submit never completed";
            ASSERT_TRUE(*submitted) << submitted->error().message();
            EXPECT_EQ(submitted->value().front(), tid);
            co_await tc.flush();
            EXPECT_EQ(co_await pending(direct, *l), 0U) << "the task was created a second time";
            co_await zk.close();
            co_await direct.close();
            wire.stop();
        }(),
        60s
    );
}

TEST_F(RolesReceipt, ALostSubmitThatNeverArrivedIsSentAgainOnce) {
    run(
        [&]() -> asio::awaitable<void> {
            client direct(ioc_.get_executor(), make_config());
            ASSERT_TRUE(co_await zkd::zkco::with_timeout(direct.connect(), 10s));
            auto l = co_await ensure_layout(direct, meta_info{});
            ASSERT_TRUE(l);

            zkd::test::relay wire(ioc_, base_);
            auto cfg = make_config(8s);
            cfg.connect_string = wire.address() + chroot_;
            client zk(ioc_.get_executor(), cfg);
            ASSERT_TRUE(co_await zkd::zkco::with_timeout(zk.connect(), 10s));
            task_client tc(zk, *l);
            auto warm = co_await tc.submit(one_echo());
            ASSERT_TRUE(warm);
            ASSERT_TRUE(co_await direct.remove(l->pending_task(warm->front())));

            // The create never reaches the server.
            wire.drop_requests(true);
            std::optional<zkd::zkco::result<std::vector<std::string>>> submitted;
            asio::co_spawn(
                ioc_,
                [&]() -> asio::awaitable<void> { submitted = co_await tc.submit(one_echo()); },
                asio::detached
            );
            co_await pause(200ms);
            EXPECT_EQ(co_await pending(direct, *l), 0U);
            wire.cut();
            wire.drop_requests(false);
            for (int i = 0; i < 500 && !submitted; ++i) {
                co_await pause(20ms);
            }
            ASSERT_TRUE(submitted) << "submit never completed";
            ASSERT_TRUE(*submitted) << submitted->error().message();
            ASSERT_TRUE(co_await appears(direct, l->pending_task(submitted->value().front())));
            co_await tc.flush();
            EXPECT_EQ(co_await pending(direct, *l), 1U);
            co_await zk.close();
            co_await direct.close();
            wire.stop();
        }(),
        60s
    );
}

// A submit cancelled while its create is out says so (operation_aborted: the outcome is
// unknown); it used to report the ids as submitted though the create never arrived.
TEST_F(RolesReceipt, ACancelledSubmitIsNoSuccess) {
    run(
        [&]() -> asio::awaitable<void> {
            client direct(ioc_.get_executor(), make_config());
            ASSERT_TRUE(co_await zkd::zkco::with_timeout(direct.connect(), 10s));
            auto l = co_await ensure_layout(direct, meta_info{});
            ASSERT_TRUE(l);

            zkd::test::relay wire(ioc_, base_);
            auto cfg = make_config(8s);
            cfg.connect_string = wire.address() + chroot_;
            client zk(ioc_.get_executor(), cfg);
            ASSERT_TRUE(co_await zkd::zkco::with_timeout(zk.connect(), 10s));
            task_client tc(zk, *l);
            auto warm = co_await tc.submit(one_echo());
            ASSERT_TRUE(warm);
            ASSERT_TRUE(co_await direct.remove(l->pending_task(warm->front())));

            // The create never reaches the server; the caller gives up waiting.
            wire.drop_requests(true);
            asio::cancellation_signal stop;
            std::optional<zkd::zkco::result<std::vector<std::string>>> submitted;
            asio::co_spawn(
                ioc_,
                [&]() -> asio::awaitable<void> { submitted = co_await tc.submit(one_echo()); },
                asio::bind_cancellation_slot(stop.slot(), asio::detached)
            );
            // The spawned submit runs (up to its wait for the answer) before this resumes.
            co_await asio::post(ioc_, asio::use_awaitable);
            ASSERT_FALSE(submitted);
            stop.emit(asio::cancellation_type::terminal);
            for (int i = 0; i < 500 && !submitted; ++i) {
                co_await pause(20ms);
            }
            ASSERT_TRUE(submitted) << "submit never completed";
            ASSERT_FALSE(*submitted) << "a cancelled submit reported success";
            EXPECT_EQ(submitted->error(), asio::error::operation_aborted)
                << submitted->error().message();
            EXPECT_EQ(co_await pending(direct, *l), 0U);

            // The write itself goes on (cancelling the wait cannot unsend it): once connected
            // again the batcher decides it as for any lost answer, and the task is there once.
            wire.drop_requests(false);
            wire.cut();
            co_await tc.flush();
            EXPECT_EQ(co_await pending(direct, *l), 1U);
            co_await zk.close();
            co_await direct.close();
            wire.stop();
        }(),
        60s
    );
}

}  // namespace

namespace {

// A worker's publish (T4) whose answer is lost: it applied, the client consumed the result,
// and the worker's retry finds its assignment gone. It must not publish the result again.
class RolesLostPublish : public zkd::test::roles_cluster {};

TEST_F(RolesLostPublish, AResultConsumedBeforeTheLostAnswerIsNotPublishedAgain) {
    auto gate = std::make_shared<std::atomic<bool>>(false);
    auto started = std::make_shared<std::atomic<bool>>(false);
    registry_.add(
        "gate",
        [gate, started](const json::value&, std::stop_token stop) -> zkd::handlers::handler_result {
            started->store(true);
            while (!gate->load() && !stop.stop_requested()) {
                std::this_thread::sleep_for(5ms);
            }
            return json::value("done");
        }
    );
    auto published = std::make_shared<std::atomic<int>>(0);
    run(
        [&]() -> asio::awaitable<void> {
            auto* direct = co_await cluster_session();
            co_await start_master();

            zkd::test::relay wire(ioc_, base_);
            auto cfg = make_config(8s);
            cfg.connect_string = wire.address() + chroot_;
            sessions_.push_back(std::make_unique<client>(ioc_.get_executor(), cfg));
            auto& zk = *sessions_.back();
            ASSERT_TRUE(co_await zkd::zkco::with_timeout(zk.connect(), 10s));
            auto me = member("w", 1);
            me.types = {"gate"};
            worker_options opts;
            opts.on_published = [published](const task_result&) { ++*published; };
            roles_.spawn(
                run_worker(zk, layout_, me, registry_, pool_, opts, &worker_stats_["w"]), "w"
            );

            task_client tc(*direct, layout_);
            std::vector<task_spec> one;
            one.push_back(task_spec{"gate"s, json::value(1)});
            auto ids = co_await tc.submit(one);
            ASSERT_TRUE(ids);
            const std::string tid = ids->front();
            for (int i = 0; i < 500 && !started->load(); ++i) {
                co_await settle(10ms);
            }
            ASSERT_TRUE(started->load()) << "the task never ran";
            // The worker's running mark (T3, §4) is written as the task starts: wait for it, so
            // that the only write whose answer is lost below is T4.
            bool marked = false;
            for (int i = 0; i < 500 && !marked; ++i) {
                auto a = co_await direct->get(layout_.assignment(me.id, tid));
                marked = a && a->data.find("running_ms") != std::string::npos;
                if (!marked) {
                    co_await settle(10ms);
                }
            }
            ASSERT_TRUE(marked) << "the worker never marked its task running";

            // The client's results directory is there (as after its first result), so that
            // T4 needs one try, not a second one that makes the directory (§2).
            auto made = co_await direct->create(layout_.result_dir(tid));
            ASSERT_TRUE(made || made.error() == zkd::zkco::errc::node_exists);
            // T4 reaches the server; its answer never comes back. The client consumes the result.
            wire.drop_answers(true);
            gate->store(true);
            bool consumed = false;
            for (int i = 0; i < 500 && !consumed; ++i) {
                consumed = static_cast<bool>(co_await direct->remove(layout_.result(tid)));
                co_await settle(10ms);
            }
            ASSERT_TRUE(consumed) << "the result never appeared";
            // The connection drops with the answer lost; the worker's session lives on.
            wire.cut();
            wire.drop_answers(false);
            for (int i = 0; i < 1000 && published->load() == 0; ++i) {
                co_await settle(10ms);
            }
            // on_published runs after the worker's last write: a second result would be there now.
            ASSERT_EQ(published->load(), 1) << "the worker never settled its publish";
            auto again = co_await direct->exists(layout_.result(tid));
            ASSERT_TRUE(again);
            EXPECT_FALSE(again->has_value()) << "the consumed result was published a second time";
            wire.stop();
        }(),
        60s
    );
}

}  // namespace

}  // namespace ZKD_UNITY_ID
