// SPDX-License-Identifier: MIT
// The tasks API: POST and GET /v1/tasks, GET and DELETE /v1/tasks/{id} (a result waited for
// is in handle_result.cpp).
#include "http/detail/server_impl.hpp"
#include "protocol/ids.hpp"
#include "roles/client/inspect.hpp"
#include "roles/client/task_client.hpp"
#include "zkco/deadline.hpp"

#include <boost/json/array.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <utility>

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
namespace json = boost::json;

namespace zkd::http {

namespace {

/// How long a read of the workers answers "is this type served" when it says yes; a no is
/// always read afresh (a worker may just have joined).
constexpr std::chrono::seconds served_view_age{1};

}  // namespace

api_error bad_task_id(const std::string& id) {
    return {
        400, "bad_task_id",
        "'" + id.substr(0, 64) +
            "' is not a task id (t<P>-<13 digits>-<14 hex digits>, or <bundle>.<index>)"};
}

/// Whether some worker serves each of `types` (when workers are there): nothing, or 409
/// `unserved_type`. The workers as read at most served_view_age ago answer a yes; a no is
/// read again. A failed read refuses nothing (the type check must not block submits).
asio::awaitable<std::optional<api_error>> server::impl::check_served(
    facade_session& s, const std::vector<std::string>& types
) {
    if (types.empty()) {
        co_return std::nullopt;
    }
    const auto now = std::chrono::steady_clock::now();
    const auto all_served = [&types](const std::vector<roles::worker_snapshot>& w) {
        return std::all_of(types.begin(), types.end(), [&w](const std::string& t) {
            return !roles::unserved(w, t);
        });
    };
    if (s.workers_seen && now - s.workers_seen->first < served_view_age &&
        all_served(s.workers_seen->second)) {
        co_return std::nullopt;
    }
    auto workers = co_await zkco::with_timeout(roles::read_workers(s.zk), opts.zk_timeout);
    if (!workers) {
        co_return std::nullopt;
    }
    s.workers_seen.emplace(std::chrono::steady_clock::now(), std::move(*workers));
    for (const auto& t : types) {
        if (auto no = roles::unserved(s.workers_seen->second, t)) {
            co_return api_error{
                409, "unserved_type",
                *no +
                    "; nothing was submitted (\"allow_unserved\": true submits it for a worker "
                    "about to join)"};
        }
    }
    co_return std::nullopt;
}

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
    if (auto refused = co_await check_served(zs, parsed->check_served)) {
        co_return error_response(*refused);
    }
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
    co_return co_await await_answer(*s, id, std::chrono::milliseconds(**wait), ctx, true);
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
        co_return error_response(bad_task_id(id));
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
            co_return error_response(unknown_task(id));
        }
        if (unknown) {  // its result node holds garbage (§8)
            co_return error_response(
                zk_error(roles::client_errc::garbage_result, "reading task " + id)
            );
        }
        co_return json_response(200, roles::to_json(*info));
    }
    if (unknown && info->garbage.empty()) {
        co_return error_response(unknown_task(id));
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
        // (A task of a bundle: its consume may go on in the background, task_client::consume.)
        spdlog::warn(
            "http: task {} was delivered, its consume did not finish: {}", id,
            done.error().message()
        );
    }
}

}  // namespace zkd::http
