// SPDX-License-Identifier: MIT
// The tasks API: POST and GET /v1/tasks, GET and DELETE /v1/tasks/{id}, and a result waited
// for (?wait), consumed once its answer is written.
#include "http/detail/server_impl.hpp"
#include "protocol/ids.hpp"
#include "roles/client/inspect.hpp"
#include "roles/client/task_client.hpp"
#include "zkco/deadline.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/array.hpp>

#include <spdlog/spdlog.h>

#include <cerrno>
#include <sys/socket.h>
#include <utility>

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
namespace json = boost::json;
using tcp = asio::ip::tcp;

namespace zkd::http {

namespace {

/// Whether the client has closed its side of the connection (or reset it), as far as
/// can be told now without reading: peeks at what it sent.
bool peer_left(tcp::socket& s) {
    char c = 0;
    const auto n = ::recv(s.native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/// Completes when the client has closed its side of the connection (or reset it): reads
/// nothing (peeks), so pipelined requests stay for the parser. If the client sends
/// something instead, it is still there: waits until cancelled.
asio::awaitable<void> client_gone(tcp::socket& s) {
    for (;;) {
        auto [ec] =
            co_await s.async_wait(tcp::socket::wait_read, asio::as_tuple(asio::use_awaitable));
        if (ec || peer_left(s)) {
            co_return;  // the socket failed, or end of stream, or reset (or cancelled: the
                        // wait won, and this result is ignored)
        }
        char c = 0;
        const auto n = ::recv(s.native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n > 0) {
            asio::steady_timer forever(s.get_executor(), asio::steady_timer::time_point::max());
            co_await forever.async_wait(asio::as_tuple(asio::use_awaitable));
            co_return;
        }
    }
}

}  // namespace

asio::awaitable<response> server::impl::submit(std::string text, target t, request_context& ctx) {
    auto parsed = parse_submit(text);
    if (!parsed) {
        co_return error_response(parsed.error());
    }
    auto wait = query_int(t, "wait", 0, opts.max_wait.count());
    if (!wait) {
        co_return error_response(wait.error());
    }
    if (*wait && parsed->many) {
        co_return error_response(
            {400, "bad_query", "wait is for a single task; submit an array without it"}
        );
    }
    auto bundle = query_int(t, "bundle", 1, static_cast<std::int64_t>(protocol::max_bundle_tasks));
    if (!bundle) {
        co_return error_response(bundle.error());
    }
    auto s = co_await session();
    if (!s) {
        co_return error_response(s.error());
    }
    auto& zs = **s;
    const auto n = parsed->tasks.size();
    roles::submit_options how = parsed->how;
    how.bundle = static_cast<std::size_t>(bundle->value_or(1));
    const auto direct_before = zs.tc->direct_placed();
    auto ids =
        co_await zkco::with_timeout(zs.tc->submit(std::move(parsed->tasks), how), opts.zk_timeout);
    counters.tasks_placed_directly += zs.tc->direct_placed() - direct_before;
    if (!ids) {
        if (ids.error() == roles::client_condition::invalid_task) {
            co_return error_response({400, "invalid_task", ids.error().message()});
        }
        if (ids.error() == roles::client_errc::task_too_large) {
            co_return error_response({413, "task_too_large", ids.error().message()});
        }
        if (ids.error() == roles::client_errc::queue_full) {
            // The client reads the pending count at most a second before: try after one.
            const auto& q = zs.tc->last_queue_check();
            auto res = error_response(
                {429, "queue_full",
                 "queue full: " + std::to_string(q.pending) + " pending, bound " +
                     std::to_string(q.bound) + " (zkd run --max-pending); nothing was submitted"}
            );
            res.set(bhttp::field::retry_after, "1");
            co_return res;
        }
        co_return error_response(zk_error(ids.error(), "submitting (some tasks may be submitted)"));
    }
    counters.tasks_submitted += n;
    if (parsed->many) {
        json::array list;
        for (const auto& id : *ids) {
            list.emplace_back(id);
        }
        co_return json_response(201, json::object{{"ids", std::move(list)}});
    }
    const auto& id = ids->front();
    if (!*wait) {
        co_return json_response(201, json::object{{"id", id}});
    }
    // The result is read, not consumed: the connection consumes it once the answer is
    // written. A client that leaves meanwhile ends the wait and leaves the result.
    using namespace asio::experimental::awaitable_operators;
    auto waited = co_await (
        zkco::with_timeout(zs.tc->await_result(id), std::chrono::milliseconds(**wait)) ||
        client_gone(*ctx.peer)
    );
    if (waited.index() == 1) {
        ++counters.waits_abandoned;
        spdlog::info(
            "http: the client waiting for task {} left before it finished; its result "
            "stays for a later reader",
            id
        );
        ctx.abandoned = true;
        co_return response{};
    }
    auto& result = std::get<0>(waited);
    if (result && peer_left(*ctx.peer)) {  // it left just as the result came
        ++counters.waits_abandoned;
        spdlog::info(
            "http: the client waiting for task {} left as it finished; its result stays "
            "for a later reader",
            id
        );
        ctx.abandoned = true;
        co_return response{};
    }
    if (result) {
        ctx.consume = id;
        co_return json_response(200, roles::to_json(*result));
    }
    if (result.error() == zkco::errc::no_node) {
        co_return error_response(
            {404, "unknown_task", "the result of task " + id + " was consumed by another client"}
        );
    }
    if (result.error() != zkco::errc::operation_timeout) {
        co_return error_response(zk_error(result.error(), "waiting for task " + id));
    }
    json::object body{{"id", id}};
    auto info = co_await zkco::with_timeout(roles::read_task(zs.zk, *zs.l, id), opts.zk_timeout);
    if (info) {
        body["state"] = protocol::to_string(info->state);
    }
    co_return json_response(202, body);
}

asio::awaitable<response> server::impl::list(target t) {
    const auto max = static_cast<std::int64_t>(opts.max_list_limit);
    auto limit = query_int(t, "limit", 1, max);
    if (!limit) {
        co_return error_response(limit.error());
    }
    auto s = co_await session();
    if (!s) {
        co_return error_response(s.error());
    }
    const auto n = static_cast<std::size_t>(
        limit->value_or(static_cast<std::int64_t>(roles::default_task_list_limit))
    );
    auto tasks =
        co_await zkco::with_timeout(roles::list_tasks((*s)->zk, *(*s)->l, n), opts.zk_timeout);
    if (!tasks) {
        co_return error_response(zk_error(tasks.error(), "listing tasks"));
    }
    co_return json_response(200, roles::to_json(*tasks));
}

asio::awaitable<response> server::impl::task(bhttp::verb method, std::string id) {
    if (!protocol::parse_task_ref(id)) {
        co_return error_response(
            {400, "bad_task_id",
             "'" + id.substr(0, 64) +
                 "' is not a task id (t<P>-<13 digits>-<14 hex digits>, or <bundle>.<index>)"}
        );
    }
    auto s = co_await session();
    if (!s) {
        co_return error_response(s.error());
    }
    auto& zs = **s;
    auto info = co_await zkco::with_timeout(roles::read_task(zs.zk, *zs.l, id), opts.zk_timeout);
    if (!info) {
        co_return error_response(zk_error(info.error(), "reading task " + id));
    }
    const bool unknown = info->state == protocol::task_state::unknown;
    if (method == bhttp::verb::get) {
        if (unknown && info->garbage.empty()) {
            co_return error_response(
                {404, "unknown_task",
                 "no task " + id + " (never submitted, or its result was consumed)"}
            );
        }
        if (unknown) {  // its result node holds garbage (§8)
            co_return error_response(
                zk_error(roles::client_errc::garbage_result, "reading task " + id)
            );
        }
        co_return json_response(200, roles::to_json(*info));
    }
    if (unknown && info->garbage.empty()) {
        co_return error_response(
            {404, "unknown_task",
             "no task " + id + " (never submitted, or its result was consumed)"}
        );
    }
    if (unknown || protocol::is_result_state(info->state)) {
        co_return error_response(
            {404, "finished",
             "task " + id + " has finished (" + std::string(protocol::to_string(info->state)) + ")"}
        );
    }
    auto cancelled = co_await zkco::with_timeout(zs.tc->cancel(id), opts.zk_timeout);
    if (!cancelled) {
        co_return error_response(zk_error(cancelled.error(), "cancelling task " + id));
    }
    co_return json_response(
        202,
        json::object{
            {"id", id}, {"state", protocol::to_string(info->state)}, {"cancel", "requested"}}
    );
}

/// Consumes a result whose answer was written (POST ?wait). (A client closing now has
/// had its answer: that is no reason to keep the result.)
asio::awaitable<void> server::impl::consume(const std::string& id) {
    auto s = co_await session();
    if (!s) {
        spdlog::warn("http: task {} was delivered but not consumed: {}", id, s.error().message);
        co_return;
    }
    auto done = co_await zkco::with_timeout((*s)->tc->consume(id), opts.zk_timeout);
    if (!done) {
        spdlog::warn(
            "http: task {} was delivered but not consumed: {}", id, done.error().message()
        );
    }
}

}  // namespace zkd::http
