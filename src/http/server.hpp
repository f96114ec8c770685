// SPDX-License-Identifier: MIT
// zkd's HTTP facade: a JSON API over a cluster (submit, inspect, cancel tasks; the cluster's
// state) and Prometheus metrics, served with Boost.Beast next to a node (`zkd run --http`).
//
// Endpoints (every answer is JSON, `application/json`, except /metrics):
//   POST   /v1/tasks[?wait=MS]  body: one task `{"type":..,"args":..,"priority":5,
//          "timeout_ms":0,"max_attempts":3}` (only type required) or an array of them.
//          201 `{"id":".."}` (array: `{"ids":[..]}`). With ?wait (one task only): 200 and the
//          result as stored (docs/protocol.md §5) if it came within MS (it is then consumed,
//          like `zkd submit --wait`, once the answer is written), else 202
//          `{"id":..,"state":..}`. The body must be Content-Type application/json.
//   GET    /v1/tasks[?limit=N] 200 roles::task_list JSON (see roles/client/inspect.hpp).
//   GET    /v1/tasks/{id}      200 `{"id":..,"state":..,"worker":..,"result":{..}}` (worker and
//          result when known; the result is peeked, never consumed); 404 for an id that
//          exists nowhere; 400 for a malformed id.
//   DELETE /v1/tasks/{id}      202 `{"id":..,"state":..,"cancel":"requested"}` (T7) for a
//          pending, assigned or running task; 404 if unknown or finished.
//   GET    /v1/cluster         200 roles::cluster_snapshot JSON (see roles/client/inspect.hpp).
//   GET    /metrics            Prometheus text 0.0.4 (see http/metrics.hpp).
//   GET    /v1/status          200 the status page's data: `{"now_ms":T,"node":{..}|null (this
//          node's figures, http/status.hpp node_json),"history":{..} (the charts' samples,
//          status_history::to_json),"cluster":<cluster_snapshot>,"queue":{"pending":N,
//          "by_priority":[N x10]|null,"delayed":N,"delayed_earliest_ms":T|null (the earliest
//          time in a delayed task's id; null: none, or over 100,000 delayed)},
//          "running":[<task_entry>..],"assigned_total":N,
//          "truncated":B,"failures":[..] (failure_log::to_json),"failures_scan":
//          {"complete":B,"reason":".." (when not)},"age_ms":M (of the cluster part)}`; when
//          ZooKeeper cannot be read, the cluster part is replaced by
//          `"error":{"code":..,"message":..}` (still 200: the node's own figures stand).
//   GET    /, /ui/status.js, /ui/status.css   the status page (http/status_page.hpp): static
//          files holding no data, served without the token (Host and Origin checks apply).
// Errors: `{"error":{"code":"..","message":".."}}` with 400 (bad JSON, invalid task, bad id,
// bad query), 401 (no or a wrong token, with WWW-Authenticate), 403 (bad_host: a Host a
// loopback bind does not answer to; cross_origin: a request from a web page of another
// origin), 404 (unknown path, unknown task), 405 (wrong method; with Allow), 413 (body
// over max_body_bytes, or a task over 512 KiB), 415 (a POST whose Content-Type is not
// application/json), 431 (headers over max_header_bytes), 502 (a result node holding
// garbage), 503 (ZooKeeper unreachable, no cluster yet, timed out; busy: max_connections
// open, with Retry-After), 500 (anything else).
//
// A result waited for with ?wait is consumed only once its response was written; a client
// that leaves before (or a write that fails) leaves it in ZooKeeper for a later reader.
#pragma once

#include "reactor/lag_probe.hpp"
#include "roles/stats.hpp"
#include "zkco/config.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace zkd::http {

/// What a server listens on, talks to and allows.
struct server_options {
    /// "host:port", "[v6]:port" or ":port" (loopback); see parse_listen_address. Port 0
    /// picks a free port (local_endpoint() tells which).
    std::string listen = "127.0.0.1:8080";
    /// The facade's own ZooKeeper session. Its connect string must end with the cluster's
    /// chroot: hosts + protocol::chroot_path(ns), e.g. "zk1:2181,zk2:2181/zkd/default". Set
    /// session_timeout and auth (digest credentials, as the cluster's nodes use) here too.
    zkco::config zk;
    std::size_t max_body_bytes = std::size_t{1} << 20;      ///< larger bodies get 413
    std::size_t max_header_bytes = std::size_t{16} * 1024;  ///< larger headers get 431
    /// Connections served at once; one more is answered 503 `busy` (with Retry-After) and
    /// closed, counted in zkd_http_rejected_total{reason="busy"}.
    std::size_t max_connections = 256;
    /// Deadline for a request's header: from the connection's start (the TLS handshake
    /// included), or from the previous response on a kept-alive connection, until the whole
    /// header is in. A slow or idle client is then dropped.
    std::chrono::milliseconds header_timeout{10'000};
    /// Deadline for reading a request's body once its header is in, and for writing a
    /// response.
    std::chrono::milliseconds request_timeout{30'000};
    /// When not empty, every request needs `Authorization: Bearer <token>` (else 401).
    std::string token;
    /// PEM files of the certificate chain and its private key: when set, the server speaks
    /// HTTPS only (TLS 1.2 or later). bind() loads them.
    std::string tls_cert_file;
    std::string tls_key_file;
    /// Deadline for each step of a request that talks to ZooKeeper (and for connecting):
    /// past it, 503.
    std::chrono::milliseconds zk_timeout{5'000};
    std::chrono::milliseconds max_wait{300'000};  ///< the largest ?wait=MS accepted
    std::size_t max_list_limit = 10'000;          ///< the largest ?limit=N of GET /v1/tasks
    /// The node's figures for /metrics; empty: the node's metrics are left out. Called on
    /// the server's executor, which must be the node's (node_stats is not thread-safe).
    std::function<roles::node_stats()> stats;
    /// The event loop's lag probe for /metrics; null: the lag metrics are left out. Must
    /// outlive the server.
    const reactor::lag_probe* lag = nullptr;
    /// How often the node's counters are sampled for the status page's charts (a copy of a
    /// few counters, no ZooKeeper read), and how many samples are kept (the charts' span is
    /// their product: 10 minutes by default). Only with `stats`.
    std::chrono::milliseconds status_period{5'000};
    std::size_t status_samples = 121;
    /// How long a snapshot of the cluster read for GET /v1/status is reused: every page open
    /// shares it, so the page costs ZooKeeper one snapshot per this period however many look
    /// (and none when nobody does).
    std::chrono::milliseconds status_max_age{1'000};
    /// The status page lists failures from the unconsumed results while there are at most
    /// this many; above, it says in `failures_scan` that it did not look (listing them all
    /// on every snapshot would cost more than the page is worth).
    std::uint64_t status_results_scanned = 5'000;
};

/// The HTTP facade. Construct it, bind() (optional: run() binds too), then co_spawn run() on
/// the same executor as the node whose stats it reports:
///
///     zkd::http::server_options ho;
///     ho.listen = "127.0.0.1:8080";
///     ho.zk.connect_string = zk_hosts + zkd::protocol::chroot_path(ns);
///     ho.stats = [&stats] { return stats; };
///     zkd::http::server http(ioc.get_executor(), std::move(ho));
///     if (auto ec = http.bind()) { ... usage or startup error ... }
///     asio::co_spawn(ioc, http.run(), asio::bind_cancellation_slot(stop.slot(), handler));
///
/// Threads: every member must be called on the executor, which must not run handlers
/// concurrently (an io_context run by one thread, or a strand); the stats source is called
/// there too. Lifetime: the server must outlive run().
class server {
public:
    using executor_type = boost::asio::any_io_executor;

    /// Does no I/O (no socket, no session until run()).
    server(executor_type ex, server_options opts);
    ~server();
    server(const server&) = delete;
    server& operator=(const server&) = delete;

    /// Loads the TLS certificate and key (if set), then opens, binds and listens on
    /// options' listen address. Idempotent once it succeeded. Errors:
    /// std::errc::invalid_argument (the address does not parse), OpenSSL's (a certificate or
    /// key that does not load), the socket's (address_in_use, access_denied, ...).
    boost::system::error_code bind();

    /// The bound address (with the port chosen for port 0); a default endpoint before bind().
    [[nodiscard]] boost::asio::ip::tcp::endpoint local_endpoint() const;

    /// Serves until cancelled: binds if not bound (throwing system_error if that fails),
    /// keeps a ZooKeeper session (re-creating it after expiry; while there is none, requests
    /// needing ZooKeeper get 503), accepts connections (each a coroutine; HTTP/1.1
    /// keep-alive) and answers them. Terminal cancellation stops accepting, cancels every
    /// connection (a request in progress is abandoned), closes the session, and completes
    /// once all of that is done. Call once.
    boost::asio::awaitable<void> run();

    /// The current ZooKeeper session, if connected (for tests: expire it from outside).
    [[nodiscard]] std::optional<zkco::session_handle> zk_session() const;
    /// ZooKeeper sessions established so far.
    [[nodiscard]] std::uint64_t zk_sessions() const noexcept;
    /// Connections being served now (not counting those being answered 503 busy).
    [[nodiscard]] std::size_t open_connections() const noexcept;

private:
    struct impl;
    std::shared_ptr<impl> impl_;
};

}  // namespace zkd::http
