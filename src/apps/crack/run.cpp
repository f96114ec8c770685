// SPDX-License-Identifier: MIT
// run_crack: plan the search, open the job (create or join), follow it to its end.
#include "apps/crack/run.hpp"

#include "apps/crack/detail/follow.hpp"
#include "apps/crack/detail/open.hpp"

#include <boost/asio/this_coro.hpp>

#include <utility>

namespace asio = boost::asio;

namespace zkd::crack {

namespace {

asio::awaitable<zkco::result<crack_outcome>> open_and_follow(
    zkco::client& zk,
    protocol::layout l,
    crack_spec spec,
    std::function<void(const crack_progress&)> on_progress
) {
    const auto start = detail::follower::clock::now();
    auto plan = make_plan(spec);
    if (!plan) {
        co_return plan.error();
    }
    auto opened = co_await detail::open_job(zk, l, spec, *plan);
    if (!opened) {
        co_return opened.error();
    }
    detail::follower follower(
        zk, l, spec, *plan, std::move(*opened), std::move(on_progress), start
    );
    auto r = co_await follower.run();
    co_return r;
}

}  // namespace

asio::awaitable<zkco::result<crack_outcome>> run_crack(
    zkco::client& zk,
    protocol::layout l,
    crack_spec spec,
    std::function<void(const crack_progress&)> on_progress
) {
    // Cancellation is checked where it matters and ends in an error, never an exception;
    // the caller's setting is restored on the way out.
    const bool saved = co_await asio::this_coro::throw_if_cancelled();
    co_await asio::this_coro::throw_if_cancelled(false);
    auto r = co_await open_and_follow(zk, l, std::move(spec), std::move(on_progress));
    co_await asio::this_coro::throw_if_cancelled(saved);
    co_return r;
}

}  // namespace zkd::crack
