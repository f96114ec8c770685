// SPDX-License-Identifier: MIT
// A task's result, waited for: GET and DELETE /v1/tasks/{id}/result (DELETE consumes it), and
// the wait of POST /v1/tasks?wait. A consumed result goes once its answer is written.
#include "http/detail/server_impl.hpp"
#include "protocol/ids.hpp"
#include "roles/client/error.hpp"
#include "roles/client/inspect.hpp"
#include "roles/client/task_client.hpp"
#include "zkco/deadline.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

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

/// The result as the answer: 200, consumed once written when `consume`.
response deliver(
    const protocol::task_result& r, const std::string& id, bool consume, request_context& ctx
) {
    if (consume) {
        ctx.consume = id;
    }
    return json_response(200, roles::to_json(r));
}

/// Not finished yet: 202 `{"id","state"}` plus `"progress"` when the task reports some.
response not_yet(const roles::task_info& info) {
    json::object body{{"id", info.id}, {"state", protocol::to_string(info.state)}};
    if (info.progress >= 0) {
        body["progress"] =
            json::object{{"fraction", info.progress}, {"message", info.progress_message}};
    }
    return json_response(202, body);
}

}  // namespace

response error_response(const api_error& e, const std::string& id) {
    auto body = error_json(e.code, e.message);
    body.as_object()["id"] = id;
    return json_response(e.status, body);
}

api_error unknown_task(const std::string& id) {
    return {
        404, "unknown_task", "no task " + id + " (never submitted, or its result was consumed)"};
}

asio::awaitable<response> server::impl::result(
    bhttp::verb method, std::string id, target t, request_context& ctx
) {
    if (!protocol::parse_task_ref(id)) {
        co_return error_response(bad_task_id(id));
    }
    auto wait = query_int(t, "wait", 0, opts.max_wait.count());
    if (!wait) {
        co_return error_response(wait.error());
    }
    auto s = co_await session();
    if (!s) {
        co_return error_response(s.error());
    }
    const bool consume = method == bhttp::verb::delete_;
    auto info =
        co_await zkco::with_timeout(roles::read_task((*s)->zk, *(*s)->l, id), opts.zk_timeout);
    if (!info) {
        co_return error_response(zk_error(info.error(), "reading task " + id), id);
    }
    if (info->state == protocol::task_state::unknown) {
        co_return error_response(
            info->garbage.empty()
                ? unknown_task(id)
                : zk_error(roles::client_errc::garbage_result, "reading task " + id),
            id
        );
    }
    if (info->result) {
        co_return deliver(*info->result, id, consume, ctx);
    }
    if (!*wait || **wait == 0) {
        co_return not_yet(*info);
    }
    co_return co_await await_answer(*s, id, std::chrono::milliseconds(**wait), ctx, consume);
}

asio::awaitable<response> server::impl::await_answer(
    std::shared_ptr<facade_session> s,
    std::string id,
    std::chrono::milliseconds wait,
    request_context& ctx,
    bool consume
) {
    // The result is read, not consumed: the connection consumes it once the answer is
    // written. A client that leaves meanwhile ends the wait and leaves the result.
    using namespace asio::experimental::awaitable_operators;
    auto waited =
        co_await (zkco::with_timeout(s->tc->await_result(id), wait) || client_gone(*ctx.peer));
    if (waited.index() == 1 || (std::get<0>(waited) && peer_left(*ctx.peer))) {
        ++counters.waits_abandoned;
        spdlog::info(
            "http: the client waiting for task {} left before its answer; its result stays "
            "for a later reader",
            id
        );
        ctx.abandoned = true;
        co_return response{};
    }
    auto& result = std::get<0>(waited);
    if (result) {
        co_return deliver(*result, id, consume, ctx);
    }
    if (result.error() == zkco::errc::no_node) {
        co_return error_response(
            {404, "unknown_task", "the result of task " + id + " was consumed by another client"},
            id
        );
    }
    if (result.error() != zkco::errc::operation_timeout) {
        co_return error_response(zk_error(result.error(), "waiting for task " + id), id);
    }
    auto info = co_await zkco::with_timeout(roles::read_task(s->zk, *s->l, id), opts.zk_timeout);
    if (!info) {
        co_return json_response(202, json::object{{"id", id}});  // where it is, unknown
    }
    if (info->result) {  // it finished as the wait ended
        co_return deliver(*info->result, id, consume, ctx);
    }
    if (info->state == protocol::task_state::unknown && info->garbage.empty()) {
        co_return error_response(
            {404, "unknown_task", "the result of task " + id + " was consumed by another client"},
            id
        );
    }
    co_return not_yet(*info);
}

}  // namespace zkd::http
