// SPDX-License-Identifier: MIT
// The HTTP facade: connections (deadlines, limits, TLS), the request checks (token, Host,
// Origin, content type) and each endpoint's handler over one shared ZooKeeper session. Over
// 700 lines: the handlers share the session, its reconnects and the checks; routing and
// bodies are apart (api.cpp, unit-tested), as are the status page's figures (status.cpp).
#include "http/server.hpp"

#include "http/api.hpp"
#include "http/metrics.hpp"
#include "http/status.hpp"
#include "http/status_page.hpp"
#include "protocol/ids.hpp"
#include "reactor/task_group.hpp"
#include "roles/client/inspect.hpp"
#include "roles/client/task_client.hpp"
#include "roles/cluster/election.hpp"
#include "roles/cluster/session_keeper.hpp"
#include "zkco/client.hpp"
#include "zkco/deadline.hpp"
#include "zkco/read_batch.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/stream_traits.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <boost/system/system_error.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <exception>
#include <fcntl.h>
#include <limits>
#include <sys/socket.h>
#include <tuple>
#include <utility>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace json = boost::json;
using tcp = asio::ip::tcp;

namespace zkd::http {

namespace {

using namespace std::chrono_literals;

using request = bhttp::request<bhttp::string_body>;
using response = bhttp::response<bhttp::string_body>;
using tls_stream = beast::ssl_stream<beast::tcp_stream>;

/// Counts down when it goes out of scope (a connection, however it ends).
/// The connections that wait on their client (a TLS handshake, a request's header, or the
/// body of a request without the token), oldest first: those that slow or idle clients hold.
/// When every slot is taken, the oldest of them is closed to make room (a slowloris attack
/// then costs its own connections, not everyone's).
class waiting_list {
public:
    /// Marks `s` as waiting until the returned id is removed.
    std::uint64_t add(beast::tcp_stream& s) {
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
    std::map<std::uint64_t, beast::tcp_stream*> waiting_;
    std::uint64_t next_ = 0;
};

/// A connection's place in a waiting_list while it waits (none: not waiting).
class waiting_mark {
public:
    explicit waiting_mark(waiting_list& list) : list_(list) {}
    ~waiting_mark() { clear(); }
    waiting_mark(const waiting_mark&) = delete;
    waiting_mark& operator=(const waiting_mark&) = delete;
    waiting_mark(waiting_mark&&) = delete;
    waiting_mark& operator=(waiting_mark&&) = delete;

    void set(beast::tcp_stream& s) {
        clear();
        id_ = list_.add(s);
    }
    void clear() noexcept {
        if (id_ != 0) {
            list_.remove(std::exchange(id_, 0));
        }
    }

private:
    waiting_list& list_;
    std::uint64_t id_ = 0;
};

class count_guard {
public:
    explicit count_guard(std::size_t& n) : n_(n) {}
    ~count_guard() { --n_; }
    count_guard(const count_guard&) = delete;
    count_guard& operator=(const count_guard&) = delete;
    count_guard(count_guard&&) = delete;
    count_guard& operator=(count_guard&&) = delete;

private:
    std::size_t& n_;
};

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

/// What handling one request leaves for the connection to do.
struct request_context {
    tcp::socket* peer = nullptr;  ///< the connection's socket, to notice the client leaving
    std::string consume;          ///< a task whose result to consume once the answer is written
    bool abandoned = false;       ///< the client left: write nothing, close
};

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

/// The facade's ZooKeeper session and what is built on it once the cluster's layout is read.
struct facade_session {
    explicit facade_session(std::shared_ptr<zkco::client> c) : client(std::move(c)), zk(*client) {}
    std::shared_ptr<zkco::client> client;  ///< from the session keeper, which closes it
    zkco::client& zk;
    std::optional<protocol::layout> l;       ///< read from /meta on first use
    std::unique_ptr<roles::task_client> tc;  ///< made with the layout
};

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

std::string describe(const tcp::endpoint& ep) {
    const auto a = ep.address();
    return (a.is_v6() ? "[" + a.to_string() + "]" : a.to_string()) + ":" +
           std::to_string(ep.port());
}

/// Keeps a descriptor from leaking into programs the embedding process starts.
void no_inherit(int fd) {
    const int flags = ::fcntl(fd, F_GETFD);
    if (flags >= 0) {
        ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);  // NOLINT(cppcoreguidelines-pro-type-vararg)
    }
}

/// True for errors that end a connection without an answer (the peer left, a timeout, a
/// cancellation); false for a request we should answer (malformed, over a limit).
bool silent_end(const boost::system::error_code& ec) {
    return ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message ||
           ec == beast::error::timeout || ec == asio::error::operation_aborted ||
           ec.category() != bhttp::make_error_code(bhttp::error::bad_method).category();
}

}  // namespace

struct server::impl {
    impl(executor_type e, server_options o)
        : ex(std::move(e)), opts(std::move(o)), acceptor(ex), group(ex) {}

    executor_type ex;
    server_options opts;
    tcp::acceptor acceptor;
    reactor::task_group group;
    std::shared_ptr<facade_session> current;  ///< connected session, or null
    facade_counters counters;
    std::uint64_t sessions = 0;
    bool stopping = false;
    access_policy access;                   ///< set by bind()
    std::optional<asio::ssl::context> tls;  ///< set by bind() when serving HTTPS
    std::size_t connections = 0;            ///< being served
    waiting_list waiting;                   ///< of those, the ones waiting on their client
    std::size_t rejecting = 0;              ///< being answered 503 busy
    std::uint64_t busy_unlogged = 0;        ///< busy rejections since the last log line
    std::optional<std::chrono::steady_clock::time_point> busy_logged;
    // The status page (GET /v1/status).
    status_history history{opts.status_samples};
    failure_log failures;
    /// The cluster part of the last snapshot, and when it was read.
    std::optional<std::pair<std::chrono::steady_clock::time_point, json::object>> snapshot;
    /// Result names seen by the last snapshot (sorted), to read only new ones for failures.
    std::vector<std::string> results_seen;
    /// Why the last snapshot did not look for failures in the results; empty: it did.
    std::string failures_unscanned;
    bool snapshot_reading = false;  ///< a request is reading a snapshot

    /// Loads the certificate chain and key into `tls`.
    boost::system::error_code load_tls() {
        asio::ssl::context ctx(asio::ssl::context::tls_server);
        boost::system::error_code ec;
        ctx.set_options(
            asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                asio::ssl::context::no_tlsv1_1 | asio::ssl::context::single_dh_use,
            ec
        );
        if (!ec) {
            ctx.use_certificate_chain_file(opts.tls_cert_file, ec);
        }
        if (!ec) {
            ctx.use_private_key_file(opts.tls_key_file, asio::ssl::context::pem, ec);
        }
        if (!ec) {
            tls.emplace(std::move(ctx));
        }
        return ec;
    }

    boost::system::error_code bind() {
        if (acceptor.is_open()) {
            return {};
        }
        auto ep = parse_listen_address(opts.listen);
        if (!ep) {
            return ep.error();
        }
        boost::system::error_code ec;
        if (opts.tls_cert_file.empty() != opts.tls_key_file.empty()) {
            return make_error_code(std::errc::invalid_argument);
        }
        if (!opts.tls_cert_file.empty() && !tls) {
            if (auto tec = load_tls()) {
                return tec;
            }
        }
        acceptor.open(ep->protocol(), ec);
        if (!ec) {
            no_inherit(acceptor.native_handle());
            acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
        }
        if (!ec) {
            acceptor.bind(*ep, ec);
        }
        if (!ec) {
            acceptor.listen(asio::socket_base::max_listen_connections, ec);
        }
        if (ec) {
            boost::system::error_code ignored;
            acceptor.close(ignored);
            return ec;
        }
        const auto bound = acceptor.local_endpoint(ec);
        access.token = opts.token;
        access.loopback = bound.address().is_loopback();
        access.port = bound.port();
        access.tls = tls.has_value();
        return ec;
    }

    // --- the ZooKeeper session --------------------------------------------------------

    /// Keeps a connected session in `current` (roles::keep_sessions: a new one after each
    /// ends), until cancelled.
    asio::awaitable<void> keep_session() {
        roles::connect_policy policy;
        policy.who = "http";
        policy.attempt_timeout = std::max(opts.zk_timeout, opts.zk.session_timeout);
        auto serve = [this](const std::shared_ptr<zkco::client>& zk) -> asio::awaitable<bool> {
            ++sessions;
            auto s = std::make_shared<facade_session>(zk);
            current = s;
            spdlog::info(
                "http: ZooKeeper session 0x{:x} established", zk->session() ? zk->session()->id : 0
            );
            while (!zkco::is_terminal(zk->state())) {
                auto change = co_await zk->wait_state(zk->state_generation());
                const auto cs = co_await asio::this_coro::cancellation_state;
                if (!change || cs.cancelled() != asio::cancellation_type::none) {
                    break;
                }
            }
            if (current == s) {
                current.reset();
            }
            if (!stopping) {
                spdlog::warn(
                    "http: ZooKeeper session {}; making a new one", zkco::to_string(zk->state())
                );
            }
            co_return !stopping;
        };
        co_await roles::keep_sessions(opts.zk, policy, serve);
        current.reset();
    }

    api_error zk_error(const zkco::error_code& ec, std::string_view doing) const {
        const std::string what(doing);
        if (ec == roles::client_errc::garbage_result) {
            return {502, "garbage_result", what + ": the result node does not hold a zkd result"};
        }
        if (ec == zkco::errc::operation_timeout) {
            return {
                503, "zookeeper_timeout",
                what + ": ZooKeeper did not answer within " +
                    std::to_string(opts.zk_timeout.count()) + " ms"};
        }
        if (ec == zkco::condition::retryable || ec == zkco::condition::session_lost) {
            return {503, "zookeeper_unavailable", what + ": " + ec.message()};
        }
        return {500, "zookeeper_error", what + ": " + ec.message()};
    }

    /// The connected session with its layout, or why not (503).
    asio::awaitable<api_result<std::shared_ptr<facade_session>>> session() {
        auto s = current;
        if (!s || s->zk.state() != zkco::session_state::connected) {
            co_return api_error{503, "zookeeper_unavailable", "not connected to ZooKeeper"};
        }
        if (!s->l) {
            auto l = co_await zkco::with_timeout(roles::read_layout(s->zk), opts.zk_timeout);
            if (!l) {
                if (l.error() == zkco::errc::no_node) {
                    co_return api_error{
                        503, "no_cluster", "no zkd cluster at " + opts.zk.connect_string + " yet"};
                }
                if (l.error() == zkco::errc::data_inconsistency) {
                    co_return api_error{
                        500, "bad_cluster", "/meta is not a zkd format 1 meta node"};
                }
                co_return zk_error(l.error(), "reading /meta");
            }
            if (!s->l) {  // another request may have read it meanwhile
                s->l = *l;
                s->tc = std::make_unique<roles::task_client>(s->zk, *l);
            }
        }
        co_return s;
    }

    // --- handlers ----------------------------------------------------------------------

    asio::awaitable<response> submit(std::string text, target t, request_context& ctx) {
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
        auto bundle =
            query_int(t, "bundle", 1, static_cast<std::int64_t>(protocol::max_bundle_tasks));
        if (!bundle) {
            co_return error_response(bundle.error());
        }
        auto s = co_await session();
        if (!s) {
            co_return error_response(s.error());
        }
        auto& zs = **s;
        const auto n = parsed->tasks.size();
        roles::submit_options how;
        how.bundle = static_cast<std::size_t>(bundle->value_or(1));
        const auto direct_before = zs.tc->direct_placed();
        auto ids = co_await zkco::with_timeout(
            zs.tc->submit(std::move(parsed->tasks), how), opts.zk_timeout
        );
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
                         std::to_string(q.bound) +
                         " (zkd run --max-pending); nothing was submitted"}
                );
                res.set(bhttp::field::retry_after, "1");
                co_return res;
            }
            co_return error_response(
                zk_error(ids.error(), "submitting (some tasks may be submitted)")
            );
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
                {404, "unknown_task",
                 "the result of task " + id + " was consumed by another client"}
            );
        }
        if (result.error() != zkco::errc::operation_timeout) {
            co_return error_response(zk_error(result.error(), "waiting for task " + id));
        }
        json::object body{{"id", id}};
        auto info =
            co_await zkco::with_timeout(roles::read_task(zs.zk, *zs.l, id), opts.zk_timeout);
        if (info) {
            body["state"] = protocol::to_string(info->state);
        }
        co_return json_response(202, body);
    }

    asio::awaitable<response> list(target t) {
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

    asio::awaitable<response> cluster() {
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

    asio::awaitable<response> task(bhttp::verb method, std::string id) {
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
        auto info =
            co_await zkco::with_timeout(roles::read_task(zs.zk, *zs.l, id), opts.zk_timeout);
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
                 "task " + id + " has finished (" + std::string(protocol::to_string(info->state)) +
                     ")"}
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

    // --- the status page -------------------------------------------------------------------

    static std::int64_t unix_ms() {
        return std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::system_clock::now().time_since_epoch()
        )
            .count();
    }

    /// Samples the node's counters for the page's charts every status_period, until
    /// cancelled. A copy of a few counters: no ZooKeeper read, nothing sent anywhere.
    asio::awaitable<void> sample_history() {
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
    asio::awaitable<zkco::result<std::vector<std::string>>> children_of(
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
    asio::awaitable<zkco::result<std::vector<std::string>>> result_names(zkco::client& zk) {
        auto dirs = co_await roles::list_result_dirs(zk);
        if (!dirs) {
            co_return dirs.error();
        }
        co_return co_await children_of(zk, std::move(*dirs));
    }

    /// Reads new results (at most a few per snapshot, newest first) into `failures`, unless
    /// there are too many unconsumed results to list cheaply; failures_unscanned says why
    /// it did not look.
    asio::awaitable<void> track_failures(facade_session& s, const roles::cluster_view& view) {
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
            auto r =
                co_await zkco::with_timeout(roles::peek_result(s.zk, *s.l, id), opts.zk_timeout);
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
    asio::awaitable<api_result<json::object>> read_snapshot() {
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
            roles::list_tasks(zs.zk, *zs.l, running_listed), opts.zk_timeout
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
        co_await track_failures(zs, *view);
        json::array running;
        for (const auto& t : tasks->assigned) {
            running.push_back(roles::to_json(t));
        }
        out["cluster"] = roles::to_json(*view);
        out["queue"] =
            json::object{{"pending", view->pending}, {"by_priority", std::move(by_priority)}};
        out["running"] = std::move(running);
        out["assigned_total"] = tasks->assigned_total;
        out["truncated"] = tasks->assigned_total > tasks->assigned.size();
        co_return out;
    }

    /// GET /v1/status: the node's own figures and history (in memory), and the cluster part,
    /// read at most once per status_max_age whoever asks (the page polls; no page, no reads).
    asio::awaitable<response> status() {
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
    json::object status_body(json::object part, std::int64_t age_ms) const {
        part["now_ms"] = unix_ms();
        part["age_ms"] = age_ms;
        part["node"] = opts.stats ? node_json(opts.stats()) : json::value(nullptr);
        part["history"] = history.to_json();
        part["failures"] = failures.to_json();
        part["failures_scan"] =
            failures_unscanned.empty()
                ? json::object{{"complete", true}}
                : json::object{{"complete", false}, {"reason", failures_unscanned}};
        return part;
    }

    /// The status page's static files; 404 for another /ui/ path.
    static response page(std::string_view path) {
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

    response metrics() const {
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

    /// Answers one request. Never throws but for cancellation (the server stopping).
    asio::awaitable<response> handle(request req, request_context& ctx) {
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

    // --- connections ---------------------------------------------------------------------

    void count(const response& res) { ++counters.responses[res.result_int()]; }

    /// Closes a connection gently: stops sending, then reads what the client still sends for
    /// a moment (bounded), so that it sees the answer written before rather than a reset.
    template <class Stream>
    asio::awaitable<void> linger_close(Stream& stream) {
        auto& tcp_layer = beast::get_lowest_layer(stream);
        boost::system::error_code ignored;
        tcp_layer.socket().shutdown(tcp::socket::shutdown_send, ignored);
        tcp_layer.expires_after(1s);
        std::array<char, std::size_t{16} * 1024> sink{};
        std::size_t drained = 0;
        while (drained < 8 * opts.max_body_bytes) {
            auto [rec, n] = co_await tcp_layer.socket().async_read_some(
                asio::buffer(sink), asio::as_tuple(asio::use_awaitable)
            );
            if (rec) {
                break;
            }
            drained += n;
        }
        tcp_layer.expires_never();
    }

    /// Writes `res` (the last answer on the connection) within `timeout` and closes gently.
    template <class Stream>
    asio::awaitable<void> answer_and_close(
        Stream& stream, response res, std::chrono::milliseconds timeout
    ) {
        res.keep_alive(false);
        count(res);
        beast::get_lowest_layer(stream).expires_after(timeout);
        auto [wec, wn] =
            co_await bhttp::async_write(stream, res, asio::as_tuple(asio::use_awaitable));
        if (!wec) {
            co_await linger_close(stream);
        }
    }

    /// Answers a request that could not be read (over a limit, malformed) and closes the
    /// connection.
    template <class Stream>
    asio::awaitable<void> refuse(Stream& stream, boost::system::error_code ec) {
        api_error e{400, "bad_request", "malformed HTTP request: " + ec.message()};
        if (ec == bhttp::error::body_limit) {
            e = {
                413, "body_too_large",
                "the body is over " + std::to_string(opts.max_body_bytes) + " bytes"};
        } else if (ec == bhttp::error::header_limit) {
            e = {
                431, "headers_too_large",
                "the headers are over " + std::to_string(opts.max_header_bytes) + " bytes"};
        }
        co_await answer_and_close(stream, error_response(e), opts.request_timeout);
    }

    /// Consumes a result whose answer was written (POST ?wait). (A client closing now has
    /// had its answer: that is no reason to keep the result.)
    asio::awaitable<void> consume(const std::string& id) {
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

    /// Serves the requests of one connection (plain or TLS, handshake done) until it ends.
    template <class Stream>
    asio::awaitable<void> serve(Stream& stream) {
        auto& tcp_layer = beast::get_lowest_layer(stream);
        beast::flat_buffer buffer;
        waiting_mark waits(waiting);
        for (;;) {
            bhttp::request_parser<bhttp::string_body> parser;
            parser.header_limit(static_cast<std::uint32_t>(std::min<std::size_t>(
                opts.max_header_bytes, std::numeric_limits<std::uint32_t>::max()
            )));
            parser.body_limit(opts.max_body_bytes);
            tcp_layer.expires_after(header_deadline());
            waits.set(tcp_layer);
            auto [hec, hn] = co_await bhttp::async_read_header(
                stream, buffer, parser, asio::as_tuple(asio::use_awaitable)
            );
            // A request with the token is served to its end; one without may still be
            // closed to make room while its body comes (it will only get a 401).
            if (hec || has_token(parser.get())) {
                waits.clear();
            }
            if (hec) {
                if (!silent_end(hec)) {
                    co_await refuse(stream, hec);
                }
                co_return;
            }
            tcp_layer.expires_after(opts.request_timeout);
            if (beast::iequals(parser.get()[bhttp::field::expect], "100-continue")) {
                bhttp::response<bhttp::empty_body> go_on{bhttp::status::continue_, 11};
                auto [cec, cn] =
                    co_await bhttp::async_write(stream, go_on, asio::as_tuple(asio::use_awaitable));
                if (cec) {
                    co_return;
                }
            }
            auto [bec, bn] = co_await bhttp::async_read(
                stream, buffer, parser, asio::as_tuple(asio::use_awaitable)
            );
            waits.clear();
            if (bec) {
                if (!silent_end(bec)) {
                    co_await refuse(stream, bec);
                }
                co_return;
            }
            tcp_layer.expires_never();
            request req = parser.release();
            const bool keep_alive = req.keep_alive();
            const bool head = req.method() == bhttp::verb::head;
            const std::string what =
                std::string(req.method_string()) + " " + std::string(req.target());
            response res;
            request_context ctx;
            ctx.peer = &tcp_layer.socket();
            std::exception_ptr failure;
            try {
                res = co_await handle(std::move(req), ctx);
            } catch (const boost::system::system_error& e) {
                if (e.code() == asio::error::operation_aborted) {
                    throw;  // cancelled: the server is stopping
                }
                failure = std::current_exception();
            } catch (const std::exception&) {
                failure = std::current_exception();
            }
            if (failure) {
                std::string why = "unknown error";
                try {
                    std::rethrow_exception(failure);
                } catch (const std::exception& e) {
                    why = e.what();
                }
                spdlog::error("http: {}: {}", what, why);
                res = error_response({500, "internal", why});
                ctx.consume.clear();
            }
            if (ctx.abandoned) {
                co_return;
            }
            const bool keep = keep_alive && !stopping;
            res.keep_alive(keep);
            count(res);
            spdlog::debug("http: {} -> {}", what, res.result_int());
            tcp_layer.expires_after(opts.request_timeout);
            boost::system::error_code wec;
            if (head) {  // the header alone, with the length the body would have
                bhttp::response_serializer<bhttp::string_body> sr{res};
                std::tie(wec, std::ignore) = co_await bhttp::async_write_header(
                    stream, sr, asio::as_tuple(asio::use_awaitable)
                );
            } else {
                std::tie(wec, std::ignore) =
                    co_await bhttp::async_write(stream, res, asio::as_tuple(asio::use_awaitable));
            }
            tcp_layer.expires_never();
            if (wec) {
                if (!ctx.consume.empty()) {
                    ++counters.waits_abandoned;
                    spdlog::info(
                        "http: the answer with task {}'s result could not be written ({}); the "
                        "result stays for a later reader",
                        ctx.consume, wec.message()
                    );
                }
                co_return;
            }
            if (!ctx.consume.empty()) {
                co_await consume(ctx.consume);
            }
            if (!keep) {
                co_return;
            }
        }
    }

    /// Ends a TLS connection: close_notify, for a moment at most.
    static asio::awaitable<void> finish(tls_stream& stream) {
        beast::get_lowest_layer(stream).expires_after(1s);
        co_await stream.async_shutdown(asio::as_tuple(asio::use_awaitable));
    }

    static asio::awaitable<void> finish(beast::tcp_stream& stream) {
        boost::system::error_code ignored;
        stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
        co_return;
    }

    /// One connection, counted in `connections` while it lasts.
    asio::awaitable<void> connection(tcp::socket socket) {
        const count_guard guard(connections);  // counted up by run()
        if (!tls) {
            beast::tcp_stream stream(std::move(socket));
            co_await serve(stream);
            co_await finish(stream);
            co_return;
        }
        tls_stream stream(beast::tcp_stream(std::move(socket)), *tls);
        beast::get_lowest_layer(stream).expires_after(header_deadline());
        waiting_mark handshake(waiting);
        handshake.set(beast::get_lowest_layer(stream));
        auto [ec] = co_await stream.async_handshake(
            asio::ssl::stream_base::server, asio::as_tuple(asio::use_awaitable)
        );
        handshake.clear();
        if (ec) {
            spdlog::debug("http: TLS handshake: {}", ec.message());
            co_return;
        }
        co_await serve(stream);
        co_await finish(stream);
    }

    /// A connection over max_connections: answered 503 busy at once (after the TLS
    /// handshake, when serving HTTPS) and closed, all within a few seconds (a client that
    /// reads nothing cannot hold it longer).
    asio::awaitable<void> reject_busy(tcp::socket socket) {
        const count_guard guard(rejecting);  // counted up by run()
        auto res = error_response(
            {503, "busy",
             "the server is serving its most connections (" + std::to_string(opts.max_connections) +
                 "); try again shortly"}
        );
        res.set(bhttp::field::retry_after, "1");
        if (!tls) {
            beast::tcp_stream stream(std::move(socket));
            co_await answer_and_close(stream, std::move(res), 1s);
            co_return;
        }
        tls_stream stream(beast::tcp_stream(std::move(socket)), *tls);
        beast::get_lowest_layer(stream).expires_after(1s);
        auto [ec] = co_await stream.async_handshake(
            asio::ssl::stream_base::server, asio::as_tuple(asio::use_awaitable)
        );
        if (!ec) {
            co_await answer_and_close(stream, std::move(res), 1s);
        }
    }

    /// How long a client may take to send a request's header (or its TLS handshake): the
    /// configured time, but at most 2 s while three quarters of the slots are taken.
    [[nodiscard]] std::chrono::milliseconds header_deadline() const {
        if (connections * 4 >= opts.max_connections * 3) {
            return std::min<std::chrono::milliseconds>(opts.header_timeout, 2s);
        }
        return opts.header_timeout;
    }

    /// True when the request's header carries the token (or none is required).
    [[nodiscard]] bool has_token(const bhttp::request_header<>& h) const {
        const auto it = h.find(bhttp::field::authorization);
        access_request who;
        if (it != h.end()) {
            who.authorization = std::string_view(it->value().data(), it->value().size());
        }
        return token_matches(access, who);
    }

    /// Counts a busy rejection; logs the first, then at most one line every 10 s.
    void note_busy() {
        ++counters.rejected_busy;
        ++busy_unlogged;
        const auto now = std::chrono::steady_clock::now();
        if (busy_logged && now - *busy_logged < 10s) {
            return;
        }
        spdlog::warn(
            "http: {} connection(s) answered 503 busy: {} are open, the most allowed",
            busy_unlogged, opts.max_connections
        );
        busy_unlogged = 0;
        busy_logged = now;
    }

    asio::awaitable<void> run() {
        if (auto ec = bind()) {
            throw boost::system::system_error(ec, "http: cannot listen on " + opts.listen);
        }
        co_await asio::this_coro::throw_if_cancelled(false);
        spdlog::info(
            "http: listening on {}{}{}", tls ? "https://" : "http://",
            describe(acceptor.local_endpoint()), opts.token.empty() ? "" : " (token required)"
        );
        group.spawn(keep_session(), "http-zk-session");
        if (opts.stats) {
            group.spawn(sample_history(), "http-status-history");
        }
        for (;;) {
            auto [ec, socket] = co_await acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
            const auto cs = co_await asio::this_coro::cancellation_state;
            if (cs.cancelled() != asio::cancellation_type::none ||
                ec == asio::error::operation_aborted) {
                break;
            }
            if (ec) {
                // Out of descriptors and the like: wait a little rather than spin.
                spdlog::warn("http: accept: {}", ec.message());
                asio::steady_timer t(ex, 100ms);
                co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
                continue;
            }
            no_inherit(socket.native_handle());
            socket.set_option(tcp::no_delay(true), ec);  // small answers: do not wait for more
            // Full: make room by closing the connection that has waited longest on its
            // client; only when every slot serves a request is the newcomer turned away.
            if (connections >= opts.max_connections && connections < 2 * opts.max_connections &&
                waiting.close_oldest()) {
                ++counters.closed_waiting;
            } else if (connections >= opts.max_connections) {
                note_busy();
                if (rejecting >= opts.max_connections) {
                    boost::system::error_code ignored;  // flooded: no time even for a 503
                    socket.close(ignored);
                    continue;
                }
                ++rejecting;
                group.spawn(reject_busy(std::move(socket)), "http-busy");
                continue;
            }
            ++connections;
            group.spawn(connection(std::move(socket)), "http-connection");
        }
        stopping = true;
        boost::system::error_code ignored;
        acceptor.close(ignored);
        group.emit(asio::cancellation_type::terminal);
        co_await group.async_wait(asio::as_tuple(asio::use_awaitable));
        spdlog::info("http: stopped");
    }
};

server::server(executor_type ex, server_options opts)
    : impl_(std::make_shared<impl>(std::move(ex), std::move(opts))) {}

server::~server() = default;

boost::system::error_code server::bind() {
    return impl_->bind();
}

tcp::endpoint server::local_endpoint() const {
    boost::system::error_code ec;
    auto ep = impl_->acceptor.local_endpoint(ec);
    return ec ? tcp::endpoint{} : ep;
}

asio::awaitable<void> server::run() {
    return impl_->run();
}

std::optional<zkco::session_handle> server::zk_session() const {
    if (!impl_->current) {
        return std::nullopt;
    }
    return impl_->current->zk.session();
}

std::uint64_t server::zk_sessions() const noexcept {
    return impl_->sessions;
}

std::size_t server::open_connections() const noexcept {
    return impl_->connections;
}

}  // namespace zkd::http
