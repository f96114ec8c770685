// SPDX-License-Identifier: MIT
// Every request's way in: the access checks (token, Host, Origin), the route, the method,
// then the endpoint that answers it (handle_tasks.cpp, handle_result.cpp,
// handle_workflows.cpp, handle_schedules.cpp, handle_cluster.cpp, handle_status.cpp).
#include "http/detail/server_impl.hpp"
#include "protocol/task.hpp"

#include <boost/beast/http/field.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
namespace json = boost::json;

namespace zkd::http {

response json_response(unsigned status, const json::value& body) {
    response res{static_cast<bhttp::status>(status), 11};
    res.set(bhttp::field::server, "zkd");
    res.set(bhttp::field::content_type, "application/json");
    res.set(bhttp::field::cache_control, "no-store");
    res.body() = protocol::to_text(body);
    res.body().push_back('\n');
    res.prepare_payload();
    return res;
}

response error_response(const api_error& e) {
    return json_response(e.status, error_json(e.code, e.message));
}

/// Answers one request. Never throws but for cancellation (the server stopping).
asio::awaitable<response> server::impl::handle(request req, request_context& ctx) {
    const auto header = [&req](bhttp::field f) -> std::optional<std::string_view> {
        const auto it = req.find(f);
        if (it == req.end()) {
            return std::nullopt;
        }
        return std::string_view(it->value().data(), it->value().size());
    };
    access_request who;
    who.host = header(bhttp::field::host);
    who.origin = header(bhttp::field::origin);
    who.authorization = header(bhttp::field::authorization);
    if (const auto it = req.find("Sec-Fetch-Site"); it != req.end()) {
        who.fetch_site = std::string_view(it->value().data(), it->value().size());
    }
    auto t = parse_target(req.target());
    auto policy = access;
    if (t && is_public(match_route(t->path).what)) {
        policy.token.clear();  // static files without data; the page sends the token
    }
    if (auto refused = check_access(policy, who)) {
        auto res = error_response(*refused);
        if (refused->status == 401) {
            res.set(bhttp::field::www_authenticate, R"(Bearer realm="zkd")");
        }
        co_return res;
    }
    if (!t) {
        co_return error_response(t.error());
    }
    auto r = match_route(t->path);
    const auto method = req.method();
    // HEAD where a GET only reads (the connection loop sends the header block alone).
    const bool reads = method == bhttp::verb::get || method == bhttp::verb::head;
    switch (r.what) {
    case resource::tasks:
        if (method == bhttp::verb::post) {
            // JSON only: a web page can send a text/plain or form POST anywhere without
            // asking (a CORS "simple request"); application/json needs a preflight.
            if (!is_json_media_type(header(bhttp::field::content_type).value_or(""))) {
                co_return error_response(
                    {415, "unsupported_media_type",
                     "POST /v1/tasks takes Content-Type: application/json"}
                );
            }
            co_return co_await submit(std::move(req.body()), std::move(*t), ctx);
        }
        if (method == bhttp::verb::get) {
            co_return co_await list(std::move(*t));
        }
        break;
    case resource::task:
        if (method == bhttp::verb::get || method == bhttp::verb::delete_) {
            co_return co_await task(method, std::move(r.task_id));
        }
        break;
    case resource::result:
        if (method == bhttp::verb::get || method == bhttp::verb::delete_) {
            co_return co_await result(method, std::move(r.task_id), std::move(*t), ctx);
        }
        break;
    case resource::workflows:
        if (method == bhttp::verb::post) {
            if (!is_json_media_type(header(bhttp::field::content_type).value_or(""))) {
                co_return error_response(
                    {415, "unsupported_media_type",
                     "POST /v1/workflows takes Content-Type: application/json"}
                );
            }
            co_return co_await submit_workflow(std::move(req.body()), std::move(*t));
        }
        if (method == bhttp::verb::get) {
            co_return co_await list_workflows();
        }
        break;
    case resource::workflow:
        if (method == bhttp::verb::get || method == bhttp::verb::delete_) {
            co_return co_await workflow(method, std::move(r.task_id), std::move(*t));
        }
        break;
    case resource::cluster:
        if (reads) {
            co_return co_await cluster();
        }
        break;
    case resource::metrics:
        if (reads) {
            co_return metrics();
        }
        break;
    case resource::status:
        if (reads) {
            co_return co_await status();
        }
        break;
    case resource::page:
        if (reads) {
            co_return page(t->path);
        }
        break;
    case resource::schedules:
        if (method == bhttp::verb::post) {
            if (!is_json_media_type(header(bhttp::field::content_type).value_or(""))) {
                co_return error_response(
                    {415, "unsupported_media_type",
                     "POST /v1/schedules takes Content-Type: application/json"}
                );
            }
            co_return co_await schedules(method, r.what, {}, std::move(req.body()));
        }
        if (method == bhttp::verb::get) {
            co_return co_await schedules(method, r.what, {}, {});
        }
        break;
    case resource::schedule:
        if (method == bhttp::verb::get || method == bhttp::verb::delete_) {
            co_return co_await schedules(method, r.what, std::move(r.task_id), {});
        }
        break;
    case resource::schedule_pause:
    case resource::schedule_resume:
        if (method == bhttp::verb::post) {
            co_return co_await schedules(method, r.what, std::move(r.task_id), {});
        }
        break;
    case resource::none:
        co_return error_response({404, "not_found", "no such path: " + t->path.substr(0, 200)});
    }
    auto res = error_response(
        {405, "method_not_allowed",
         std::string(req.method_string()) + " is not allowed on " + t->path.substr(0, 200)}
    );
    res.set(bhttp::field::allow, allowed_methods(r.what));
    co_return res;
}

}  // namespace zkd::http
