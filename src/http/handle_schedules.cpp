// SPDX-License-Identifier: MIT
// The schedules API (docs/http.md): GET and POST /v1/schedules, GET and DELETE
// /v1/schedules/{name}, POST /v1/schedules/{name}/pause and /resume, through the client side
// of src/roles/schedule.
#include "http/detail/server_impl.hpp"
#include "roles/schedule/client.hpp"
#include "schedule/spec.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/json/array.hpp>

#include <utility>

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
namespace json = boost::json;

namespace zkd::http {

namespace {

api_error schedule_api_error(const roles::schedule_error& e) {
    using kind = roles::schedule_error::kind;
    switch (e.what) {
    case kind::invalid:
        return {400, "invalid_schedule", e.message};
    case kind::exists:
        return {409, "schedule_exists", e.message};
    case kind::not_found:
        return {404, "unknown_schedule", e.message};
    case kind::garbage:
        return {502, "garbage", e.message};
    case kind::zookeeper:
        break;
    }
    return {503, "zookeeper", e.message};
}

/// `op`, or a 504 once `limit` passed.
template <class T>
asio::awaitable<api_result<T>> within(
    asio::awaitable<roles::schedule_result<T>> op, std::chrono::milliseconds limit
) {
    using namespace asio::experimental::awaitable_operators;
    asio::steady_timer timer(co_await asio::this_coro::executor, limit);
    auto outcome =
        co_await (std::move(op) || timer.async_wait(asio::as_tuple(asio::use_awaitable)));
    if (outcome.index() == 1) {
        co_return api_error{504, "timeout", "ZooKeeper did not answer in time"};
    }
    auto& r = std::get<0>(outcome);
    if (!r) {
        co_return schedule_api_error(r.error());
    }
    if constexpr (std::is_void_v<T>) {
        co_return api_result<void>{};
    } else {
        co_return std::move(*r);
    }
}

}  // namespace

asio::awaitable<response> server::impl::schedules(
    bhttp::verb method, resource what, std::string name, std::string body
) {
    auto s = co_await session();
    if (!s) {
        co_return error_response(s.error());
    }
    auto& zk = (*s)->zk;
    const auto limit = opts.zk_timeout;
    if (what == resource::schedules && method == bhttp::verb::post) {
        boost::system::error_code ec;
        auto doc = protocol::parse_json(body, ec);
        if (ec) {
            co_return error_response({400, "bad_json", "the body is not JSON: " + ec.message()});
        }
        auto added = co_await within(roles::add_schedule(zk, doc), limit);
        if (!added) {
            co_return error_response(added.error());
        }
        co_return json_response(201, schedule::to_json(*added));
    }
    if (what == resource::schedules) {
        auto all = co_await within(roles::list_schedules(zk), limit);
        if (!all) {
            co_return error_response(all.error());
        }
        json::array out;
        for (const auto& one : all->schedules) {
            out.push_back(schedule::to_json(one));
        }
        for (const auto& [n, why] : all->garbage) {
            out.push_back(json::object{{"name", n}, {"garbage", why}});
        }
        co_return json_response(200, json::object{{"schedules", std::move(out)}});
    }
    if (what == resource::schedule && method == bhttp::verb::delete_) {
        auto removed = co_await within(roles::remove_schedule(zk, name), limit);
        if (!removed) {
            co_return error_response(removed.error());
        }
        co_return json_response(200, json::object{{"name", name}, {"removed", true}});
    }
    if (what == resource::schedule) {
        auto one = co_await within(roles::read_schedule(zk, name), limit);
        if (!one) {
            co_return error_response(one.error());
        }
        co_return json_response(200, schedule::to_json(*one));
    }
    auto changed =
        co_await within(roles::pause_schedule(zk, name, what == resource::schedule_pause), limit);
    if (!changed) {
        co_return error_response(changed.error());
    }
    co_return json_response(200, schedule::to_json(*changed));
}

}  // namespace zkd::http
