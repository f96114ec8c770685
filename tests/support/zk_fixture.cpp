// SPDX-License-Identifier: MIT
#include "support/zk_fixture.hpp"

#include "zkco/deadline.hpp"

#include <boost/asio/use_awaitable.hpp>

namespace asio = boost::asio;

namespace zkd::test {

asio::awaitable<zkco::result<void>> remove_recursive(zkco::client& zk, std::string path) {
    auto kids = co_await zk.get_children(path);
    if (!kids && kids.error() == zkco::errc::no_node) {
        co_return zkco::result<void>();
    }
    // A node we may not read can still be deleted (that takes rights on its parent).
    if (!kids && kids.error() != zkco::errc::no_auth) {
        co_return kids.error();
    }
    for (const auto& name : kids ? kids->names : std::vector<std::string>{}) {
        if (auto r = co_await remove_recursive(zk, zkco::join_path(path, name)); !r) {
            co_return r;
        }
    }
    auto r = co_await zk.remove(path);
    if (!r && r.error() != zkco::errc::no_node) {
        co_return r.error();
    }
    co_return zkco::result<void>();
}

asio::awaitable<zkco::result<void>> create_all(zkco::client& zk, std::string path) {
    std::size_t pos = 0;
    while (pos != std::string::npos) {
        pos = path.find('/', pos + 1);
        auto r = co_await zk.create(path.substr(0, pos), std::string());
        if (!r && r.error() != zkco::errc::node_exists) {
            co_return r.error();
        }
    }
    co_return zkco::result<void>();
}

namespace {

std::string test_chroot() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    return std::string("/zkd-test/") + info->test_suite_name() + "." + info->name();
}

asio::awaitable<zkco::result<void>> with_root(
    std::string base, std::function<asio::awaitable<zkco::result<void>>(zkco::client&)> body
) {
    zkco::config cfg;
    cfg.connect_string = std::move(base);
    zkco::client root(co_await asio::this_coro::executor, cfg);
    if (auto c = co_await zkco::with_timeout(root.connect(), std::chrono::seconds(30)); !c) {
        co_return c.error();
    }
    auto r = co_await body(root);
    co_await root.close();
    co_return r;
}

}  // namespace

void zk_test::SetUp() {
    ZKD_REQUIRE_ZK_SERVER();
    base_ = shared_zk_connect_string();
    chroot_ = test_chroot();
    auto made = run(with_root(
        base_,
        [chroot = chroot_](zkco::client& zk) -> asio::awaitable<zkco::result<void>> {
            if (auto r = co_await remove_recursive(zk, chroot); !r) {
                co_return r;
            }
            co_return co_await create_all(zk, chroot);
        }
    ));
    ASSERT_TRUE(made) << "cannot make chroot " << chroot_ << ": " << made.error().message();
    ready_ = true;
}

void zk_test::TearDown() {
    if (!ready_) {
        return;
    }
    auto removed = run(with_root(base_, [chroot = chroot_](zkco::client& zk) {
        return remove_recursive(zk, chroot);
    }));
    EXPECT_TRUE(removed) << "cannot remove chroot " << chroot_ << ": " << removed.error().message();
    // Nothing may still wait on the loop: every op, watch and close has completed.
    ioc_.restart();
    ioc_.poll();
    EXPECT_TRUE(ioc_.stopped()) << "work left on the io_context after the test";
}

zkco::config zk_test::make_config(std::chrono::milliseconds session_timeout) {
    zkco::config cfg;
    cfg.connect_string = base_ + chroot_;
    cfg.session_timeout = session_timeout;
    return cfg;
}

}  // namespace zkd::test
