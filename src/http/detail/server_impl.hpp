// SPDX-License-Identifier: MIT
// Private to the server's .cpp files: the state the HTTP facade's pieces share (server::impl)
// and what they hand each other. Its members are grouped by the file that defines them.
#pragma once

#include "http/api.hpp"
#include "http/metrics.hpp"
#include "http/server.hpp"
#include "http/status.hpp"
#include "protocol/layout.hpp"
#include "reactor/task_group.hpp"
#include "roles/client/inspect.hpp"
#include "roles/client/task_client.hpp"
#include "zkco/client.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/verb.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zkd::http {

using request = boost::beast::http::request<boost::beast::http::string_body>;
using response = boost::beast::http::response<boost::beast::http::string_body>;
using tls_stream = boost::beast::ssl_stream<boost::beast::tcp_stream>;

/// The connections that wait on their client (a TLS handshake, a request's header, or the
/// body of a request without the token), oldest first: those that slow or idle clients hold.
/// When every slot is taken, the oldest of them is closed to make room (a slowloris attack
/// then costs its own connections, not everyone's).
class waiting_list {
public:
    /// Marks `s` as waiting until the returned id is removed.
    std::uint64_t add(boost::beast::tcp_stream& s) {
        waiting_.emplace(++next_, &s);
        return next_;
    }
    void remove(std::uint64_t id) noexcept { waiting_.erase(id); }
    /// Closes the connection that has waited longest: false when none waits.
    bool close_oldest() {
        if (waiting_.empty()) {
            return false;
        }
        auto* s = waiting_.begin()->second;
        waiting_.erase(waiting_.begin());
        s->close();  // its pending read ends with operation_aborted; its coroutine ends
        return true;
    }

private:
    std::map<std::uint64_t, boost::beast::tcp_stream*> waiting_;
    std::uint64_t next_ = 0;
};

/// What handling one request leaves for the connection to do.
struct request_context {
    boost::asio::ip::tcp::socket* peer = nullptr;  ///< to notice the client leaving
    std::string consume;     ///< a task whose result to consume once the answer is written
    bool abandoned = false;  ///< the client left: write nothing, close
};

/// The facade's ZooKeeper session and what is built on it once the cluster's layout is read.
struct facade_session {
    explicit facade_session(std::shared_ptr<zkco::client> c) : client(std::move(c)), zk(*client) {}
    std::shared_ptr<zkco::client> client;  ///< from the session keeper, which closes it
    zkco::client& zk;
    std::optional<protocol::layout> l;       ///< read from /meta on first use
    std::unique_ptr<roles::task_client> tc;  ///< made with the layout
    /// The workers as last read for a submit's check of its types (check_served), and when.
    std::optional<
        std::pair<std::chrono::steady_clock::time_point, std::vector<roles::worker_snapshot>>>
        workers_seen;
};

/// A JSON answer (handle_request.cpp).
response json_response(unsigned status, const boost::json::value& body);
/// The answer to an error: `{"error":{"code":..,"message":..}}` (handle_request.cpp).
response error_response(const api_error& e);
/// The same with the task's id: `{"error":{..},"id":..}` (handle_result.cpp).
response error_response(const api_error& e, const std::string& id);
/// 404 `unknown_task` (handle_result.cpp).
api_error unknown_task(const std::string& id);
/// 400 `bad_task_id`: `id` is not a task id (handle_tasks.cpp).
api_error bad_task_id(const std::string& id);

struct server::impl {
    impl(executor_type e, server_options o)
        : ex(std::move(e)), opts(std::move(o)), acceptor(ex), group(ex) {}

    // server.cpp: listening and accepting.
    boost::system::error_code load_tls();
    boost::system::error_code bind();
    boost::asio::awaitable<void> run();
    void note_busy();

    // connection.cpp: one connection, from its handshake to its close.
    boost::asio::awaitable<void> connection(boost::asio::ip::tcp::socket socket);
    boost::asio::awaitable<void> reject_busy(boost::asio::ip::tcp::socket socket);
    template <class Stream>
    boost::asio::awaitable<void> serve(Stream& stream);
    template <class Stream>
    boost::asio::awaitable<void> linger_close(Stream& stream);
    template <class Stream>
    boost::asio::awaitable<void> answer_and_close(
        Stream& stream, response res, std::chrono::milliseconds timeout
    );
    template <class Stream>
    boost::asio::awaitable<void> refuse(Stream& stream, boost::system::error_code ec);
    static boost::asio::awaitable<void> finish(tls_stream& stream);
    static boost::asio::awaitable<void> finish(boost::beast::tcp_stream& stream);
    void count(const response& res);
    [[nodiscard]] std::chrono::milliseconds header_deadline() const;
    [[nodiscard]] bool has_token(const boost::beast::http::request_header<>& h) const;

    // zk_session.cpp: the facade's ZooKeeper session.
    boost::asio::awaitable<void> keep_session();
    api_error zk_error(const zkco::error_code& ec, std::string_view doing) const;
    boost::asio::awaitable<api_result<std::shared_ptr<facade_session>>> session();

    // handle_request.cpp: the checks every request passes, then its endpoint.
    boost::asio::awaitable<response> handle(request req, request_context& ctx);

    // handle_tasks.cpp: /v1/tasks and /v1/tasks/{id}.
    boost::asio::awaitable<response> submit(std::string text, target t, request_context& ctx);
    boost::asio::awaitable<response> list(target t);
    boost::asio::awaitable<response> task(boost::beast::http::verb method, std::string id);
    boost::asio::awaitable<void> consume(const std::string& id);
    boost::asio::awaitable<std::optional<api_error>> check_served(
        facade_session& s, const std::vector<std::string>& types
    );

    // handle_result.cpp: /v1/tasks/{id}/result, and the wait of POST /v1/tasks?wait.
    boost::asio::awaitable<response> result(
        boost::beast::http::verb method, std::string id, target t, request_context& ctx
    );
    /// Waits up to `wait` for the task's result: 200 with it (consumed once the answer is
    /// written when `consume`), 202 `{"id","state"}` if it is not done in time, an error
    /// naming the id; nothing (ctx.abandoned) if the client leaves first.
    boost::asio::awaitable<response> await_answer(
        std::shared_ptr<facade_session> s,
        std::string id,
        std::chrono::milliseconds wait,
        request_context& ctx,
        bool consume
    );

    // handle_schedules.cpp: /v1/schedules and /v1/schedules/{name}[/pause|/resume].
    boost::asio::awaitable<response> schedules(
        boost::beast::http::verb method, resource what, std::string name, std::string body
    );

    // handle_workflows.cpp: /v1/workflows and /v1/workflows/{id}.
    boost::asio::awaitable<response> submit_workflow(std::string text, target t);
    boost::asio::awaitable<response> list_workflows();
    boost::asio::awaitable<response> workflow(
        boost::beast::http::verb method, std::string id, target t
    );

    // handle_cluster.cpp: /v1/cluster and /metrics.
    boost::asio::awaitable<response> cluster();
    response metrics() const;

    // handle_status.cpp: the status page, its data (/v1/status) and its files.
    static std::int64_t unix_ms();
    boost::asio::awaitable<void> sample_history();
    boost::asio::awaitable<zkco::result<std::vector<std::string>>> children_of(
        zkco::client& zk, std::vector<std::string> dirs
    );
    boost::asio::awaitable<zkco::result<std::vector<std::string>>> result_names(zkco::client& zk);
    boost::asio::awaitable<void> track_failures(
        facade_session& s, const roles::cluster_snapshot& view
    );
    boost::asio::awaitable<api_result<boost::json::object>> read_snapshot();
    boost::asio::awaitable<response> status();
    boost::json::object status_body(boost::json::object part, std::int64_t age_ms) const;
    static response page(std::string_view path);

    executor_type ex;
    server_options opts;
    boost::asio::ip::tcp::acceptor acceptor;
    reactor::task_group group;
    std::shared_ptr<facade_session> current;  ///< connected session, or null
    facade_counters counters;
    std::uint64_t sessions = 0;
    bool stopping = false;
    access_policy access;                          ///< set by bind()
    std::optional<boost::asio::ssl::context> tls;  ///< set by bind() when serving HTTPS
    std::size_t connections = 0;                   ///< being served
    waiting_list waiting;                          ///< of those, the ones waiting on their client
    std::size_t rejecting = 0;                     ///< being answered 503 busy
    std::uint64_t busy_unlogged = 0;               ///< busy rejections since the last log line
    std::optional<std::chrono::steady_clock::time_point> busy_logged;
    // The status page (GET /v1/status).
    status_history history{opts.status_samples};
    failure_log failures;
    /// The cluster part of the last snapshot, and when it was read.
    std::optional<std::pair<std::chrono::steady_clock::time_point, boost::json::object>> snapshot;
    /// Result names seen by the last snapshot (sorted), to read only new ones for failures.
    std::vector<std::string> results_seen;
    /// Why the last snapshot did not look for failures in the results; empty: it did.
    std::string failures_unscanned;
    bool snapshot_reading = false;  ///< a request is reading a snapshot
};

}  // namespace zkd::http
