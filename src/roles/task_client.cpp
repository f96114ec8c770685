// SPDX-License-Identifier: MIT
#include "roles/task_client.hpp"

#include "roles/election.hpp"
#include "roles/ids.hpp"
#include "roles/inspect.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>

namespace asio = boost::asio;

namespace zkd::roles {

namespace {

class client_category_impl final : public boost::system::error_category {
public:
    const char* name() const noexcept override { return "zkd.client"; }
    std::string message(int value) const override {
        switch (static_cast<client_errc>(value)) {
        case client_errc::invalid_task:
            return "invalid task (type name, priority 0-9, max_attempts >= 1, timeout >= 0)";
        case client_errc::task_too_large:
            return "task too large: its JSON is over " + std::to_string(max_task_bytes) + " bytes";
        case client_errc::garbage_result:
            return "the result node does not hold a zkd result";
        }
        return "unknown client error";
    }
};


}  // namespace

const boost::system::error_category& client_category() noexcept {
    static const client_category_impl instance;
    return instance;
}

zkco::error_code make_error_code(client_errc e) noexcept {
    return {static_cast<int>(e), client_category()};
}

task_client::task_client(zkco::client& zk, layout l) : zk_(zk), l_(l), batcher_(zk) {}

asio::awaitable<zkco::result<std::vector<std::string>>> task_client::submit(
    std::vector<task_request> tasks) {
    std::vector<std::string> ids;
    std::vector<std::string> data;
    for (auto& t : tasks) {
        task_spec spec;
        spec.type = std::move(t.type);
        spec.args = std::move(t.args);
        spec.priority = t.priority;
        spec.timeout = t.timeout;
        spec.max_attempts = t.max_attempts;
        spec.submitted_ms = now_ms();
        spec.client = ids_.client_hex();
        if (!validate(spec)) {
            co_return zkco::error_code(client_errc::invalid_task);
        }
        auto encoded = encode(spec);
        if (!task_size_ok(encoded)) {
            co_return zkco::error_code(client_errc::task_too_large);
        }
        ids.push_back(ids_.next(spec.priority, spec.submitted_ms));
        data.push_back(std::move(encoded));
    }
    // One group per task: a task that fails does not take the others down with it. The
    // state is shared with the handlers, which may outlive a cancelled caller.
    struct state {
        explicit state(const asio::any_io_executor& ex)
            : all_done(ex, asio::steady_timer::time_point::max()) {}
        std::vector<std::string> ids;
        std::vector<std::string> data;
        std::size_t left = 0;
        zkco::error_code first_error;
        asio::steady_timer all_done;
    };
    auto st = std::make_shared<state>(zk_.get_executor());
    st->ids = std::move(ids);
    st->data = std::move(data);
    st->left = st->ids.size();
    auto send = std::make_shared<std::function<void(std::size_t)>>();
    *send = [this, st, weak_send = std::weak_ptr(send)](std::size_t i) {
        std::vector<zkco::multi_op> ops{zkco::op::create{l_.pending_task(st->ids[i]), st->data[i],
                                                         zkco::create_mode::persistent, {}}};
        batcher_.async_submit(std::move(ops), [this, st, weak_send, i](zkco::error_code ec, auto) {
            // operation_aborted: the batcher (and maybe this client) is gone; do not retry.
            if (ec == zkco::condition::retryable && ec != boost::asio::error::operation_aborted &&
                !zkco::is_terminal(zk_.state())) {
                if (auto again = weak_send.lock()) {
                    (*again)(i);  // idempotent: the id is ours; node_exists means it got there
                    return;
                }
            }
            if (ec && ec != zkco::errc::node_exists && !st->first_error) {
                st->first_error = ec;
            }
            if (--st->left == 0) {
                st->all_done.cancel();
            }
        });
    };
    for (std::size_t i = 0; i < st->ids.size(); ++i) {
        (*send)(i);
    }
    if (st->left > 0) {
        co_await st->all_done.async_wait(asio::as_tuple(asio::use_awaitable));
    }
    if (st->first_error) {
        co_return st->first_error;
    }
    co_return st->ids;
}

asio::awaitable<zkco::result<task_result>> task_client::wait(std::string tid) {
    const std::string path = l_.result(tid);
    bool there = false;  // known to exist (the watch said "created"): read it at once
    for (;;) {
        if (!there) {
            auto w = co_await zk_.watch_exists(path);
            if (!w) {
                const bool retry = co_await reconnected_after(zk_, w.error());
                if (retry) {
                    continue;
                }
                co_return w.error();
            }
            if (!w->value) {
                auto ev = co_await w->watch.changed();
                if (!ev && ev.error() == zkco::condition::session_lost) {
                    co_return ev.error();
                }
                there = ev && ev->type == zkco::event_type::created;
                continue;
            }
        }
        there = false;
        auto node = co_await zk_.get(path);
        if (!node) {
            if (node.error() == zkco::errc::no_node) {
                co_return zkco::error_code(zkco::errc::no_node);  // someone else consumed it
            }
            const bool retry = co_await reconnected_after(zk_, node.error());
            if (retry) {
                continue;
            }
            co_return node.error();
        }
        std::vector<zkco::multi_op> consume{zkco::op::remove{path, zkco::any_version}};
        batcher_.async_submit(std::move(consume), [](zkco::error_code, auto) {});
        auto decoded = decode_result(node->data);
        if (!decoded) {
            co_return zkco::error_code(client_errc::garbage_result);
        }
        co_return std::move(*decoded);
    }
}

asio::awaitable<zkco::result<task_status>> task_client::status(std::string tid) {
    auto info = co_await read_task(zk_, l_, std::move(tid));
    if (!info) {
        co_return info.error();
    }
    if (info->state == task_state::unknown && !info->garbage.empty()) {
        co_return zkco::error_code(client_errc::garbage_result);
    }
    co_return task_status{info->state, std::move(info->worker), std::move(info->result)};
}

asio::awaitable<void> task_client::flush() {
    asio::steady_timer t(zk_.get_executor());
    while (batcher_.outstanding() > 0 && !zkco::is_terminal(zk_.state())) {
        t.expires_after(std::chrono::milliseconds(2));
        co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
    }
}

asio::awaitable<zkco::result<void>> task_client::cancel(std::string tid) {
    auto r = co_await zk_.create(layout::cancel_request(tid), encode(cancel_info{now_ms()}));
    if (!r && r.error() != zkco::errc::node_exists) {
        co_return r.error();
    }
    co_return zkco::result<void>();
}

}  // namespace zkd::roles
