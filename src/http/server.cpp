// SPDX-License-Identifier: MIT
// The HTTP facade's door (server.hpp) and its listener: binding (with TLS), accepting, and
// making room or turning a connection away when every slot is taken.
#include "http/detail/server_impl.hpp"
#include "zkco/deadline.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <spdlog/spdlog.h>

#include <fcntl.h>
#include <utility>

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace zkd::http {

namespace {

using namespace std::chrono_literals;

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

}  // namespace

/// Loads the certificate chain and key into `tls`.
boost::system::error_code server::impl::load_tls() {
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

boost::system::error_code server::impl::bind() {
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

/// Counts a busy rejection; logs the first, then at most one line every 10 s.
void server::impl::note_busy() {
    ++counters.rejected_busy;
    ++busy_unlogged;
    const auto now = std::chrono::steady_clock::now();
    if (busy_logged && now - *busy_logged < 10s) {
        return;
    }
    spdlog::warn(
        "http: {} connection(s) answered 503 busy: {} are open, the most allowed", busy_unlogged,
        opts.max_connections
    );
    busy_unlogged = 0;
    busy_logged = now;
}

asio::awaitable<void> server::impl::run() {
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
            const bool waited = co_await zkco::pause(100ms);
            if (!waited) {
                break;
            }
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
