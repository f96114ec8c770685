// SPDX-License-Identifier: MIT
// The status page: its data (GET /v1/status: the node's figures and history, and a shared
// snapshot of the cluster read from ZooKeeper) and its static files.
#include "http/detail/server_impl.hpp"
#include "http/status_page.hpp"
#include "roles/client/inspect.hpp"
#include "roles/cluster/namespace.hpp"
#include "zkco/deadline.hpp"
#include "zkco/read_batch.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/array.hpp>

#include <algorithm>
#include <iterator>
#include <utility>

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
namespace json = boost::json;

namespace zkd::http {

namespace {

/// Clears a flag when it goes out of scope (however the coroutine ends).
class flag_guard {
public:
    explicit flag_guard(bool& f) : f_(f) {}
    ~flag_guard() { f_ = false; }
    flag_guard(const flag_guard&) = delete;
    flag_guard& operator=(const flag_guard&) = delete;
    flag_guard(flag_guard&&) = delete;
    flag_guard& operator=(flag_guard&&) = delete;

private:
    bool& f_;
};

}  // namespace

std::int64_t server::impl::unix_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch()
    )
        .count();
}

/// Samples the node's counters for the page's charts every status_period, until
/// cancelled. A copy of a few counters: no ZooKeeper read, nothing sent anywhere.
asio::awaitable<void> server::impl::sample_history() {
    asio::steady_timer timer(ex);
    for (;;) {
        history.record(unix_ms(), opts.stats());
        timer.expires_after(opts.status_period);
        auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
        const auto cs = co_await asio::this_coro::cancellation_state;
        if (ec || cs.cancelled() != asio::cancellation_type::none) {
            co_return;
        }
    }
}

/// The names of the children of each of `dirs` (one request after another), or the
/// first error; a directory gone meanwhile holds none.
asio::awaitable<zkco::result<std::vector<std::string>>> server::impl::children_of(
    zkco::client& zk, std::vector<std::string> dirs
) {
    // All listed at once: one round trip, not one per directory.
    zkco::read_batch batch(zk);
    std::vector<zkco::read_batch::slot<zkco::children>> lists;
    lists.reserve(dirs.size());
    for (auto& d : dirs) {
        lists.push_back(batch.get_children(std::move(d)));
    }
    if (auto all = co_await batch.wait(); !all) {
        co_return all.error();
    }
    std::vector<std::string> names;
    for (auto& c : lists) {
        if (!*c) {
            if (c->error() == zkco::errc::no_node) {
                continue;
            }
            co_return c->error();
        }
        names.insert(
            names.end(), std::make_move_iterator((*c)->names.begin()),
            std::make_move_iterator((*c)->names.end())
        );
    }
    std::sort(names.begin(), names.end());
    co_return names;
}

/// The names of every result: the children of each directory below /results (the result
/// shards and the clients' directories), listed in two round trips.
asio::awaitable<zkco::result<std::vector<std::string>>> server::impl::result_names(zkco::client& zk
) {
    auto dirs = co_await roles::list_result_dirs(zk);
    if (!dirs) {
        co_return dirs.error();
    }
    co_return co_await children_of(zk, std::move(*dirs));
}

/// Reads new results (at most a few per snapshot, newest first) into `failures`, unless
/// there are too many unconsumed results to list cheaply; failures_unscanned says why
/// it did not look.
asio::awaitable<void> server::impl::track_failures(
    facade_session& s, const roles::cluster_snapshot& view
) {
    // The first look reads more (the recent past), later ones what came since.
    const std::size_t most_read = results_seen.empty() ? 200 : 50;
    const std::uint64_t results = view.results;
    failures_unscanned.clear();
    if (view.uncounted_result_dirs > 0) {
        results_seen.clear();
        failures_unscanned =
            std::to_string(view.uncounted_result_dirs) +
            " clients' result directories: too many to list for failures (zkd purge "
            "--results, or the master's retention, clears them)";
        co_return;
    }
    if (results > opts.status_results_scanned) {
        results_seen.clear();
        failures_unscanned =
            std::to_string(results) + " unconsumed results: more than the " +
            std::to_string(opts.status_results_scanned) +
            " this page scans for failures (zkd tasks and zkd status ID still see each)";
        co_return;
    }
    auto names = co_await zkco::with_timeout(result_names(s.zk), opts.zk_timeout);
    if (!names) {
        failures_unscanned = "the results could not be listed: " + names.error().message();
        co_return;
    }
    for (auto& id : new_results(results_seen, *names, most_read)) {
        auto r = co_await zkco::with_timeout(roles::peek_result(s.zk, *s.l, id), opts.zk_timeout);
        if (!r && r.error() != roles::client_errc::garbage_result) {
            co_return;  // ZooKeeper trouble: try these again next time, not each in turn
        }
        if (r && *r) {
            failures.add(id, std::move(**r));
        }
    }
    results_seen = std::move(*names);
}

/// The cluster part of GET /v1/status, read from ZooKeeper: the cluster view, the queue
/// by priority, the running tasks, the recent failures.
asio::awaitable<api_result<json::object>> server::impl::read_snapshot() {
    constexpr std::size_t running_listed = 100;
    constexpr std::uint64_t most_pending_counted = 100'000;
    auto s = co_await session();
    if (!s) {
        co_return s.error();
    }
    auto& zs = **s;
    auto view = co_await zkco::with_timeout(roles::read_cluster(zs.zk, *zs.l), opts.zk_timeout);
    if (!view) {
        co_return zk_error(view.error(), "reading the cluster");
    }
    auto tasks = co_await zkco::with_timeout(
        roles::list_tasks(zs.zk, *zs.l, running_listed, false), opts.zk_timeout
    );
    if (!tasks) {
        co_return zk_error(tasks.error(), "listing tasks");
    }
    json::object out;
    json::value by_priority = nullptr;
    if (view->pending <= most_pending_counted) {
        auto names = co_await zkco::with_timeout(
            children_of(zs.zk, zs.l->pending_shard_paths()), opts.zk_timeout
        );
        if (!names) {
            co_return zk_error(names.error(), "listing pending tasks");
        }
        json::array counts;
        for (const auto n : count_by_priority(*names)) {
            counts.emplace_back(n);
        }
        by_priority = std::move(counts);
    }
    // The earliest time among the delayed tasks' ids, listed on the same terms as the
    // pending tasks (a delayed submit's id holds its due time; a retry's, its first try's).
    json::value delayed_earliest = nullptr;
    if (view->delayed > 0 && view->delayed <= most_pending_counted) {
        std::vector<std::string> shards;
        for (std::uint32_t i = 0; i < zs.l->pending_shards; ++i) {
            shards.push_back(protocol::layout::delayed_shard(i));
        }
        auto names =
            co_await zkco::with_timeout(children_of(zs.zk, std::move(shards)), opts.zk_timeout);
        if (!names) {
            co_return zk_error(names.error(), "listing delayed tasks");
        }
        if (const auto t = earliest_id_time(*names)) {
            delayed_earliest = *t;
        }
    }
    co_await track_failures(zs, *view);
    json::array running;
    for (const auto& t : tasks->assigned) {
        running.push_back(roles::to_json(t));
    }
    out["cluster"] = roles::to_json(*view);
    out["queue"] = json::object{
        {"pending", view->pending},
        {"by_priority", std::move(by_priority)},
        {"delayed", view->delayed},
        {"delayed_earliest_ms", std::move(delayed_earliest)}};
    out["running"] = std::move(running);
    out["assigned_total"] = tasks->assigned_total;
    out["truncated"] = tasks->assigned_total > tasks->assigned.size();
    co_return out;
}

/// GET /v1/status: the node's own figures and history (in memory), and the cluster part,
/// read at most once per status_max_age whoever asks (the page polls; no page, no reads).
asio::awaitable<response> server::impl::status() {
    const auto now = std::chrono::steady_clock::now();
    const bool stale = !snapshot || now - snapshot->first >= opts.status_max_age;
    // One read at a time: others meanwhile get the last snapshot (if any).
    if (stale && !(snapshot_reading && snapshot)) {
        snapshot_reading = true;
        const flag_guard reading(snapshot_reading);
        auto fresh = co_await read_snapshot();
        if (!fresh) {
            json::object body;
            body["error"] = error_json(fresh.error().code, fresh.error().message).at("error");
            snapshot.reset();
            co_return json_response(200, status_body(std::move(body), 0));
        }
        snapshot.emplace(std::chrono::steady_clock::now(), std::move(*fresh));
    }
    const auto age = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - snapshot->first
    );
    co_return json_response(200, status_body(snapshot->second, age.count()));
}

/// `part` with the node's figures, the history and the failures added.
json::object server::impl::status_body(json::object part, std::int64_t age_ms) const {
    part["now_ms"] = unix_ms();
    part["age_ms"] = age_ms;
    part["node"] = opts.stats ? node_json(opts.stats()) : json::value(nullptr);
    part["history"] = history.to_json();
    part["failures"] = failures.to_json();
    part["failures_scan"] = failures_unscanned.empty()
                                ? json::object{{"complete", true}}
                                : json::object{{"complete", false}, {"reason", failures_unscanned}};
    return part;
}

/// The status page's static files; 404 for another /ui/ path.
response server::impl::page(std::string_view path) {
    const auto* file = find_page_file(path);
    if (file == nullptr) {
        return error_response(
            {404, "not_found", "no such path: " + std::string(path.substr(0, 200))}
        );
    }
    response res{bhttp::status::ok, 11};
    res.set(bhttp::field::server, "zkd");
    res.set(bhttp::field::content_type, file->content_type);
    res.set(bhttp::field::cache_control, "no-cache");
    res.set("Content-Security-Policy", page_content_security_policy);
    res.set("X-Content-Type-Options", "nosniff");
    res.set("X-Frame-Options", "DENY");
    res.set("Referrer-Policy", "no-referrer");
    res.body() = file->body;
    res.prepare_payload();
    return res;
}

}  // namespace zkd::http
