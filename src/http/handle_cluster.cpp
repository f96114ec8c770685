// SPDX-License-Identifier: MIT
// The cluster's and the node's state: GET /v1/cluster (read from ZooKeeper) and GET /metrics
// (the node's, its event loop's and the facade's counters).
#include "http/detail/server_impl.hpp"
#include "roles/client/inspect.hpp"
#include "zkco/deadline.hpp"

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;

namespace zkd::http {

asio::awaitable<response> server::impl::cluster() {
    auto s = co_await session();
    if (!s) {
        co_return error_response(s.error());
    }
    auto view =
        co_await zkco::with_timeout(roles::read_cluster((*s)->zk, *(*s)->l), opts.zk_timeout);
    if (!view) {
        co_return error_response(zk_error(view.error(), "reading the cluster"));
    }
    co_return json_response(200, roles::to_json(*view));
}

response server::impl::metrics() const {
    std::optional<roles::node_stats> node;
    if (opts.stats) {
        node = opts.stats();
    }
    std::optional<reactor::lag_stats> lag;
    if (opts.lag != nullptr) {
        lag = opts.lag->stats();
    }
    response res{bhttp::status::ok, 11};
    res.set(bhttp::field::server, "zkd");
    res.set(bhttp::field::content_type, metrics_content_type);
    res.set(bhttp::field::cache_control, "no-store");
    res.body() = render_metrics(node, lag, counters);
    res.prepare_payload();
    return res;
}

}  // namespace zkd::http
