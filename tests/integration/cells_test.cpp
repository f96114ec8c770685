// SPDX-License-Identifier: MIT
// Past one ensemble (docs/scaling.md): two zkd clusters, each a namespace on a ZooKeeper
// ensemble of its own, and one client that sends each key to one of them with
// protocol::pick_cell. Real servers, real `zkd run` processes.
#include "protocol/layout.hpp"
#include "protocol/route.hpp"
#include "roles/client/task_client.hpp"
#include "roles/cluster/namespace.hpp"
#include "support/processes.hpp"
#include "support/zk_fixture.hpp"
#include "support/zk_server.hpp"
#include "zkco/deadline.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace ZKD_UNITY_ID {

namespace asio = boost::asio;
namespace json = boost::json;
namespace fs = std::filesystem;
using namespace std::literals;
using namespace zkd::roles;
using namespace zkd::protocol;

namespace {

class Cells : public zkd::test::zk_test {
protected:
    /// A client on `cell` (a connect string with its namespace's chroot) once its /meta exists.
    asio::awaitable<std::unique_ptr<zkd::zkco::client>> cell_client(const std::string& cell) {
        zkd::zkco::config cfg = make_config();
        cfg.connect_string = cell;
        for (int i = 0; i < 300; ++i) {
            auto zk = std::make_unique<zkd::zkco::client>(ioc_.get_executor(), cfg);
            auto c = co_await zkd::zkco::with_timeout(zk->connect(), 10s);
            if (c) {
                const auto meta = co_await zk->exists("/meta"s);
                if (meta && meta->has_value()) {
                    co_return zk;
                }
            }
            co_await zk->close();
            asio::steady_timer t(ioc_, 50ms);
            co_await t.async_wait(asio::use_awaitable);
        }
        throw std::runtime_error("the namespace of " + cell + " never appeared");
    }
};

TEST_F(Cells, AClientRoutesEachKeyToOneOfTwoEnsemblesAndEachTaskRunsThere) {
    ZKD_REQUIRE_LOCAL_ZK_SERVER();
    auto second = zkd::test::start_private_cluster(1);
    const std::string ensemble_a = base_ + chroot_;
    const std::string ensemble_b = second->connect_string();
    const auto dir = zkd::test::make_test_dir("cells", "two");
    // One node each: master and worker of its own cluster.
    zkd::test::zkd_process east(ZKD_BINARY, ensemble_a, "east", "east", dir / "east.log");
    zkd::test::zkd_process west(ZKD_BINARY, ensemble_b, "west", "west", dir / "west.log");
    // Cells named as docs/scaling.md does: connect string, '@', namespace.
    const std::vector<std::string> cells{ensemble_a + "@east", ensemble_b + "@west"};
    run(
        [&]() -> asio::awaitable<void> {
            std::vector<std::unique_ptr<zkd::zkco::client>> zk;
            std::vector<std::unique_ptr<task_client>> tc;
            for (const auto& cell : cells) {
                const auto at = cell.rfind('@');
                zk.push_back(
                    co_await cell_client(cell.substr(0, at) + chroot_path(cell.substr(at + 1)))
                );
                auto l = co_await ensure_layout(*zk.back(), meta_info{});
                ASSERT_TRUE(l);
                tc.push_back(std::make_unique<task_client>(*zk.back(), *l));
            }
            // Each key's task goes to the cell the key picks.
            std::map<std::string, std::pair<std::size_t, std::string>> sent;  // key: cell, id
            for (int i = 0; i < 60; ++i) {
                const std::string key = "customer-" + std::to_string(i);
                const auto cell = pick_cell(key, cells);
                json::object args;
                args["key"] = key;
                std::vector<task_spec> one{{"echo", std::move(args)}};
                auto ids = co_await tc[cell]->submit(std::move(one));
                ASSERT_TRUE(ids) << ids.error().message();
                sent[key] = {cell, ids->front()};
            }
            // Each task is known in its own cell only (pending, running or finished there).
            for (const auto& [key, where] : sent) {
                auto mine = co_await tc[where.first]->status(where.second);
                auto other = co_await tc[1 - where.first]->status(where.second);
                ASSERT_TRUE(mine && other) << key;
                EXPECT_NE(mine->state, task_state::unknown) << key << " in its own cell";
                EXPECT_EQ(other->state, task_state::unknown) << key << " in the other cell";
            }
            std::vector<int> per_cell(cells.size());
            for (const auto& [key, where] : sent) {
                auto r = co_await zkd::zkco::with_timeout(tc[where.first]->wait(where.second), 60s);
                ASSERT_TRUE(r) << key << ": " << r.error().message();
                EXPECT_EQ(r->state, task_state::succeeded) << key;
                EXPECT_EQ(r->value.at("key"), json::value(key));
                ++per_cell[where.first];
            }
            EXPECT_GT(per_cell[0], 10) << "keys spread over both cells";
            EXPECT_GT(per_cell[1], 10) << "keys spread over both cells";
            // Two clusters, neither aware of the other: each ensemble holds one namespace.
            zkd::zkco::config cfg = make_config();
            for (const auto& [server, other] :
                 {std::pair{ensemble_a, "west"s}, std::pair{ensemble_b, "east"s}}) {
                cfg.connect_string = server;
                zkd::zkco::client raw(ioc_.get_executor(), cfg);
                auto c = co_await zkd::zkco::with_timeout(raw.connect(), 10s);
                ASSERT_TRUE(c);
                auto there = co_await raw.exists(chroot_path(other));
                ASSERT_TRUE(there);
                EXPECT_FALSE(there->has_value()) << other << " on " << server;
                co_await raw.close();
            }
            for (auto& t : tc) {
                co_await t->flush();
            }
            for (auto& z : zk) {
                co_await z->close();
            }
        }(),
        120s
    );
    fs::remove_all(dir);
}

}  // namespace

}  // namespace ZKD_UNITY_ID
