// SPDX-License-Identifier: MIT
// The workflows API (docs/http.md "Workflows", docs/workflows.md): POST and GET
// /v1/workflows, GET and DELETE /v1/workflows/{id}, over the client side of workflows
// (roles/workflow/client.hpp), as `zkd workflow` uses it.
#include "http/detail/server_impl.hpp"
#include "roles/workflow/client.hpp"
#include "workflow/ids.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/array.hpp>

#include <chrono>
#include <string>
#include <string_view>
#include <utility>

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
namespace json = boost::json;

namespace zkd::http {

namespace {

api_error bad_workflow_id(const std::string& id) {
    return {400, "bad_workflow_id", "'" + id.substr(0, 64) + "' is not a workflow id"};
}

api_error api_error_of(const roles::workflow_error& e, std::string_view doing) {
    using kind = roles::workflow_error::kind;
    switch (e.what) {
    case kind::invalid_spec:
        return {400, "invalid_spec", e.message};
    case kind::unserved_type:
        return {
            409, "unserved_type",
            e.message +
                "; nothing was submitted (?allow_unserved=1 submits it for a worker "
                "yet to come)"};
    case kind::not_found:
        return {404, "unknown_workflow", e.message};
    case kind::garbage:
        return {502, "garbage_workflow", e.message};
    case kind::timeout:
    case kind::zookeeper:
        break;
    }
    return {503, "zookeeper_unavailable", std::string(doing) + ": " + e.message};
}

/// Runs `op` with a deadline: the C client has none of its own (zkco/deadline.hpp).
template <class T>
asio::awaitable<roles::workflow_result<T>> within(
    asio::awaitable<roles::workflow_result<T>> op, std::chrono::milliseconds limit
) {
    using namespace asio::experimental::awaitable_operators;
    asio::steady_timer timer(co_await asio::this_coro::executor, limit);
    auto outcome =
        co_await (std::move(op) || timer.async_wait(asio::as_tuple(asio::use_awaitable)));
    if (outcome.index() == 0) {
        co_return std::move(std::get<0>(outcome));
    }
    co_return roles::workflow_error{
        roles::workflow_error::kind::zookeeper,
        "ZooKeeper did not answer within " + std::to_string(limit.count()) + " ms"};
}

/// The workflow `id` once it ended within `wait` (200), or as it is then (202 while it
/// runs; 200 for wait 0: its state now, not waited for).
asio::awaitable<response> workflow_answer(
    zkco::client& zk,
    const std::string& id,
    std::chrono::milliseconds wait,
    std::chrono::milliseconds zk_timeout
) {
    if (wait.count() > 0) {
        auto ended = co_await within(roles::wait_workflow(zk, id, wait), wait + zk_timeout);
        if (ended) {
            co_return json_response(200, roles::to_json(*ended));
        }
        if (ended.error().what != roles::workflow_error::kind::timeout) {
            co_return error_response(api_error_of(ended.error(), "waiting for workflow " + id));
        }
    }
    auto now = co_await within(roles::read_workflow(zk, id), zk_timeout);
    if (!now) {
        co_return error_response(api_error_of(now.error(), "reading workflow " + id));
    }
    const bool running = now->status == workflow::workflow_status::running;
    co_return json_response(running && wait.count() > 0 ? 202 : 200, roles::to_json(*now));
}

}  // namespace

asio::awaitable<response> server::impl::submit_workflow(std::string text, target t) {
    auto wait = query_int(t, "wait", 0, opts.max_wait.count());
    if (!wait) {
        co_return error_response(wait.error());
    }
    auto allow = query_int(t, "allow_unserved", 0, 1);
    if (!allow) {
        co_return error_response(allow.error());
    }
    auto s = co_await session();
    if (!s) {
        co_return error_response(s.error());
    }
    roles::workflow_submit_options o;
    o.allow_unserved = allow->value_or(0) == 1;
    o.submitted_by = "http";
    auto id =
        co_await within(roles::submit_workflow((*s)->zk, text, std::move(o)), opts.zk_timeout);
    if (!id) {
        co_return error_response(api_error_of(id.error(), "submitting a workflow"));
    }
    if (!wait->has_value()) {
        co_return json_response(201, json::object{{"id", *id}, {"status", "running"}});
    }
    co_return co_await workflow_answer(
        (*s)->zk, *id, std::chrono::milliseconds(**wait), opts.zk_timeout
    );
}

asio::awaitable<response> server::impl::list_workflows() {
    auto s = co_await session();
    if (!s) {
        co_return error_response(s.error());
    }
    auto all = co_await within(roles::list_workflows((*s)->zk), opts.zk_timeout);
    if (!all) {
        co_return error_response(api_error_of(all.error(), "listing workflows"));
    }
    json::array items;
    for (const auto& w : *all) {
        items.push_back(roles::to_json(w));
    }
    co_return json_response(200, json::object{{"workflows", std::move(items)}});
}

asio::awaitable<response> server::impl::workflow(bhttp::verb method, std::string id, target t) {
    if (!workflow::parse_workflow_id(id)) {
        co_return error_response(bad_workflow_id(id));
    }
    auto wait = query_int(t, "wait", 0, opts.max_wait.count());
    if (!wait) {
        co_return error_response(wait.error());
    }
    auto s = co_await session();
    if (!s) {
        co_return error_response(s.error());
    }
    if (method == bhttp::verb::get) {
        co_return co_await workflow_answer(
            (*s)->zk, id, std::chrono::milliseconds(wait->value_or(0)), opts.zk_timeout
        );
    }
    auto done = co_await within(roles::cancel_workflow((*s)->zk, id), opts.zk_timeout);
    if (!done) {
        co_return error_response(api_error_of(done.error(), "cancelling workflow " + id));
    }
    co_return json_response(202, json::object{{"id", id}, {"cancel", "requested"}});
}

}  // namespace zkd::http
