// SPDX-License-Identifier: MIT
#include "zkco/read_batch.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace zkd::zkco {

namespace asio = boost::asio;

read_batch::state::state(const asio::any_io_executor& ex)
    : timer(ex, asio::steady_timer::time_point::max()) {}

read_batch::read_batch(client& zk) : zk_(&zk), st_(std::make_shared<state>(zk.get_executor())) {}

template <class T>
read_batch::slot<T> read_batch::new_slot() {
    ++st_->left;
    return std::make_shared<result<T>>(error_code(asio::error::operation_aborted));
}

template <class T>
auto read_batch::completion(slot<T> s) {
    return [s = std::move(s), st = st_](error_code ec, T value) {
        if (ec) {
            *s = ec;
        } else {
            *s = std::move(value);
        }
        if (--st->left == 0) {
            st->timer.cancel();
        }
    };
}

read_batch::slot<node> read_batch::get(std::string path) {
    auto s = new_slot<node>();
    zk_->async_get(std::move(path), completion(s));
    return s;
}

read_batch::slot<std::optional<stat>> read_batch::exists(std::string path) {
    auto s = new_slot<std::optional<stat>>();
    zk_->async_exists(std::move(path), completion(s));
    return s;
}

read_batch::slot<children> read_batch::get_children(std::string path) {
    auto s = new_slot<children>();
    zk_->async_get_children(std::move(path), completion(s));
    return s;
}

asio::awaitable<result<void>> read_batch::wait() {
    if (st_->left > 0) {
        co_await st_->timer.async_wait(asio::as_tuple(asio::use_awaitable));
    }
    if (st_->left > 0) {
        co_return error_code(asio::error::operation_aborted);
    }
    co_return result<void>();
}

namespace {

// One read per path through `issue` (a read_batch member), then each slot's value in order
// (copied, not moved, out of slots whose reads may still be out after a cancellation).
template <class T, class Issue>
asio::awaitable<std::vector<result<T>>> read_each(
    client& zk, std::vector<std::string> paths, Issue issue
) {
    read_batch batch(zk);
    std::vector<read_batch::slot<T>> slots;
    slots.reserve(paths.size());
    for (auto& p : paths) {
        slots.push_back((batch.*issue)(std::move(p)));
    }
    const auto all = co_await batch.wait();
    std::vector<result<T>> out;
    out.reserve(slots.size());
    for (auto& s : slots) {
        out.push_back(all ? std::move(*s) : *s);
    }
    co_return out;
}

}  // namespace

asio::awaitable<std::vector<result<node>>> get_all(client& zk, std::vector<std::string> paths) {
    return read_each<node>(zk, std::move(paths), &read_batch::get);
}

asio::awaitable<std::vector<result<std::optional<stat>>>> exists_all(
    client& zk, std::vector<std::string> paths
) {
    return read_each<std::optional<stat>>(zk, std::move(paths), &read_batch::exists);
}

}  // namespace zkd::zkco
