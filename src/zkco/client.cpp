// SPDX-License-Identifier: MIT
#include "zkco/client.hpp"

#include "zkco/deadline.hpp"
#include "zkco/detail/core.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <utility>

namespace asio = boost::asio;

namespace zkd::zkco {

namespace {
constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);
}

// --- watch ---------------------------------------------------------------------------------

watch::watch(std::shared_ptr<detail::core> core, std::uint64_t id) noexcept
    : core_(std::move(core)), id_(id) {}

watch::watch(watch&& other) noexcept
    : core_(std::move(other.core_)), id_(std::exchange(other.id_, 0)) {}

watch& watch::operator=(watch&& other) noexcept {
    if (this != &other) {
        release();
        core_ = std::move(other.core_);
        id_ = std::exchange(other.id_, 0);
    }
    return *this;
}

set_observer::set_observer(set_observer&& other) noexcept
    : core_(std::move(other.core_)), id_(std::exchange(other.id_, 0)) {}

set_observer& set_observer::operator=(set_observer&& other) noexcept {
    if (this != &other) {
        release();
        core_ = std::move(other.core_);
        id_ = std::exchange(other.id_, 0);
    }
    return *this;
}

set_observer::~set_observer() {
    release();
}

void set_observer::release() noexcept {
    if (auto c = core_.lock(); c && id_ != 0) {
        c->remove_set_observer(id_);
    }
    core_.reset();
    id_ = 0;
}

set_observer client::observe_sets(std::string path, set_callback f) {
    const auto id = core_->add_set_observer(std::move(path), std::move(f));
    return {core_, id};
}

bool client::own_sets_in_flight(std::string_view path) const {
    return core_->sets_in_flight(path);
}

watch::~watch() {
    release();
}

void watch::release() noexcept {
    if (core_) {
        core_->watch_release(id_);
        core_.reset();
    }
}

void watch::start_wait(asio::any_completion_handler<void(error_code, watch_event)> handler) {
    if (!core_) {
        // A default-constructed or moved-from watch has no event coming.
        auto ex = asio::get_associated_executor(handler);
        asio::dispatch(ex, [h = std::move(handler)]() mutable {
            std::move(h)(error_code(errc::no_watcher), watch_event{});
        });
        return;
    }
    core_->watch_wait(id_, std::move(handler));
}

asio::awaitable<result<watch_event>> watch::changed() {
    if (co_await cancelled()) {
        co_return asio::error::operation_aborted;  // a cancellation emitted earlier
    }
    auto [ec, event] = co_await async_wait(tuple_awaitable);
    if (ec) {
        co_return ec;
    }
    co_return std::move(event);
}

// --- client --------------------------------------------------------------------------------

client::client(executor_type ex, zkco::config cfg)
    : core_(std::make_shared<detail::core>(std::move(ex), std::move(cfg))) {}

client::client(client&&) noexcept = default;

client& client::operator=(client&& other) noexcept {
    if (this != &other) {
        if (core_) {
            core_->detach();
        }
        core_ = std::move(other.core_);
    }
    return *this;
}

client::~client() {
    if (core_) {
        core_->detach();
    }
}

client::executor_type client::get_executor() const noexcept {
    return core_->executor();
}
const zkco::config& client::config() const noexcept {
    return core_->config();
}
session_state client::state() const noexcept {
    return core_->state();
}
std::uint64_t client::state_generation() const noexcept {
    return core_->generation();
}
std::optional<session_handle> client::session() const {
    return core_->session();
}
std::chrono::milliseconds client::negotiated_timeout() const noexcept {
    return core_->negotiated_timeout();
}
client_counters client::counters() const noexcept {
    return core_->counters();
}

void client::start_connect(handler<> h) {
    core_->connect(std::move(h));
}
void client::start_wait_state(std::uint64_t seen, handler<state_change> h) {
    core_->wait_state(seen, std::move(h));
}
void client::start_create(
    std::string path, std::string data, create_options opts, handler<std::string> h
) {
    core_->create(std::move(path), std::move(data), std::move(opts), std::move(h));
}
void client::start_remove(std::string path, std::int32_t version, handler<> h) {
    core_->remove(std::move(path), version, std::move(h));
}
void client::start_exists(std::string path, handler<std::optional<zkco::stat>> h) {
    core_->exists(std::move(path), std::move(h));
}
void client::start_watch_exists(
    std::string path, handler<std::optional<zkco::stat>, zkco::watch> h
) {
    core_->watch_exists(std::move(path), std::move(h));
}
void client::start_get(std::string path, handler<node> h) {
    core_->get(std::move(path), std::move(h));
}
void client::start_watch_get(std::string path, handler<node, zkco::watch> h) {
    core_->watch_get(std::move(path), std::move(h));
}
void client::start_set(
    std::string path, std::string data, std::int32_t version, handler<zkco::stat> h
) {
    core_->set(std::move(path), std::move(data), version, std::move(h));
}
void client::start_get_children(std::string path, handler<children> h) {
    core_->get_children(std::move(path), std::move(h));
}
void client::start_watch_children(std::string path, handler<children, zkco::watch> h) {
    core_->watch_children(std::move(path), std::move(h));
}
void client::start_get_acl(std::string path, handler<node_acl> h) {
    core_->get_acl(std::move(path), std::move(h));
}
void client::start_multi(std::vector<multi_op> ops, handler<std::vector<op_result>> h) {
    core_->multi(std::move(ops), std::move(h));
}
void client::start_sync(std::string path, handler<> h) {
    core_->sync(std::move(path), std::move(h));
}
void client::start_own_sets_answered(std::string path, handler<> h) {
    core_->wait_sets(std::move(path), std::move(h));
}
void client::start_close(asio::any_completion_handler<void()> h) {
    core_->close(std::move(h));
}

// --- coroutines ----------------------------------------------------------------------------

namespace {

template <class T>
result<T> to_result(error_code ec, T value) {
    if (ec) {
        return ec;
    }
    return value;
}

result<void> to_result(error_code ec) {
    if (ec) {
        return ec;
    }
    return {};
}

}  // namespace

asio::awaitable<result<void>> client::connect() {
    auto [ec] = co_await async_connect(tuple_awaitable);
    co_return to_result(ec);
}

asio::awaitable<result<state_change>> client::wait_state(std::uint64_t seen) {
    if (co_await cancelled()) {
        co_return asio::error::operation_aborted;  // a cancellation emitted earlier
    }
    auto [ec, change] = co_await async_wait_state(seen, tuple_awaitable);
    co_return to_result(ec, change);
}

asio::awaitable<result<std::string>> client::create(
    std::string path, std::string data, create_options opts
) {
    auto [ec, created] =
        co_await async_create(std::move(path), std::move(data), std::move(opts), tuple_awaitable);
    co_return to_result(ec, std::move(created));
}

asio::awaitable<result<void>> client::remove(std::string path, std::int32_t version) {
    auto [ec] = co_await async_remove(std::move(path), version, tuple_awaitable);
    co_return to_result(ec);
}

asio::awaitable<result<std::optional<zkco::stat>>> client::exists(std::string path) {
    auto [ec, st] = co_await async_exists(std::move(path), tuple_awaitable);
    co_return to_result(ec, st);
}

asio::awaitable<result<node>> client::get(std::string path) {
    auto [ec, n] = co_await async_get(std::move(path), tuple_awaitable);
    co_return to_result(ec, std::move(n));
}

asio::awaitable<result<zkco::stat>> client::set(
    std::string path, std::string data, std::int32_t version
) {
    auto [ec, st] = co_await async_set(std::move(path), std::move(data), version, tuple_awaitable);
    co_return to_result(ec, st);
}

asio::awaitable<result<children>> client::get_children(std::string path) {
    auto [ec, c] = co_await async_get_children(std::move(path), tuple_awaitable);
    co_return to_result(ec, std::move(c));
}

asio::awaitable<result<node_acl>> client::get_acl(std::string path) {
    auto [ec, a] = co_await async_get_acl(std::move(path), tuple_awaitable);
    co_return to_result(ec, std::move(a));
}

asio::awaitable<multi_result> client::multi(std::vector<multi_op> ops) {
    auto [ec, results] = co_await async_multi(std::move(ops), tuple_awaitable);
    co_return multi_result{ec, std::move(results)};
}

asio::awaitable<result<void>> client::sync(std::string path) {
    auto [ec] = co_await async_sync(std::move(path), tuple_awaitable);
    co_return to_result(ec);
}

asio::awaitable<result<void>> client::own_sets_answered(std::string path) {
    if (!core_->sets_in_flight(path)) {
        co_return to_result(error_code{});
    }
    auto [ec] = co_await asio::async_initiate<decltype(tuple_awaitable), void(error_code)>(
        [this](auto h, std::string p) { start_own_sets_answered(std::move(p), std::move(h)); },
        tuple_awaitable, std::move(path)
    );
    co_return to_result(ec);
}

asio::awaitable<result<watched<std::optional<zkco::stat>>>> client::watch_exists(std::string path) {
    auto [ec, st, w] = co_await async_watch_exists(std::move(path), tuple_awaitable);
    if (ec) {
        co_return ec;
    }
    co_return watched<std::optional<zkco::stat>>{st, std::move(w)};
}

asio::awaitable<result<watched<node>>> client::watch_get(std::string path) {
    auto [ec, n, w] = co_await async_watch_get(std::move(path), tuple_awaitable);
    if (ec) {
        co_return ec;
    }
    co_return watched<node>{std::move(n), std::move(w)};
}

asio::awaitable<result<watched<children>>> client::watch_children(std::string path) {
    auto [ec, c, w] = co_await async_watch_children(std::move(path), tuple_awaitable);
    if (ec) {
        co_return ec;
    }
    co_return watched<children>{std::move(c), std::move(w)};
}

asio::awaitable<void> client::close() {
    co_await async_close(asio::use_awaitable);
}

}  // namespace zkd::zkco
