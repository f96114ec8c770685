// SPDX-License-Identifier: MIT
// One connection: its TLS handshake, reading requests within their deadlines (a slow client
// may be closed to make room), answering them, keep-alive, and closing gently.
#include "http/detail/server_impl.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/stream_traits.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/system/system_error.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <exception>
#include <limits>
#include <tuple>
#include <utility>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;

namespace zkd::http {

namespace {

using namespace std::chrono_literals;

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

/// Counts down when it goes out of scope (a connection, however it ends).
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

/// True for errors that end a connection without an answer (the peer left, a timeout, a
/// cancellation); false for a request we should answer (malformed, over a limit).
bool silent_end(const boost::system::error_code& ec) {
    return ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message ||
           ec == beast::error::timeout || ec == asio::error::operation_aborted ||
           ec.category() != bhttp::make_error_code(bhttp::error::bad_method).category();
}

}  // namespace

void server::impl::count(const response& res) {
    ++counters.responses[res.result_int()];
}

/// Closes a connection gently: stops sending, then reads what the client still sends for
/// a moment (bounded), so that it sees the answer written before rather than a reset.
template <class Stream>
asio::awaitable<void> server::impl::linger_close(Stream& stream) {
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
asio::awaitable<void> server::impl::answer_and_close(
    Stream& stream, response res, std::chrono::milliseconds timeout
) {
    res.keep_alive(false);
    count(res);
    beast::get_lowest_layer(stream).expires_after(timeout);
    auto [wec, wn] = co_await bhttp::async_write(stream, res, asio::as_tuple(asio::use_awaitable));
    if (!wec) {
        co_await linger_close(stream);
    }
}

/// Answers a request that could not be read (over a limit, malformed) and closes the
/// connection.
template <class Stream>
asio::awaitable<void> server::impl::refuse(Stream& stream, boost::system::error_code ec) {
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

/// Serves the requests of one connection (plain or TLS, handshake done) until it ends.
template <class Stream>
asio::awaitable<void> server::impl::serve(Stream& stream) {
    auto& tcp_layer = beast::get_lowest_layer(stream);
    beast::flat_buffer buffer;
    waiting_mark waits(waiting);
    for (;;) {
        bhttp::request_parser<bhttp::string_body> parser;
        parser.header_limit(static_cast<std::uint32_t>(
            std::min<std::size_t>(opts.max_header_bytes, std::numeric_limits<std::uint32_t>::max())
        ));
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
        auto [bec, bn] =
            co_await bhttp::async_read(stream, buffer, parser, asio::as_tuple(asio::use_awaitable));
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
        const std::string what = std::string(req.method_string()) + " " + std::string(req.target());
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
            std::tie(wec, std::ignore) =
                co_await bhttp::async_write_header(stream, sr, asio::as_tuple(asio::use_awaitable));
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
asio::awaitable<void> server::impl::finish(tls_stream& stream) {
    beast::get_lowest_layer(stream).expires_after(1s);
    co_await stream.async_shutdown(asio::as_tuple(asio::use_awaitable));
}

asio::awaitable<void> server::impl::finish(beast::tcp_stream& stream) {
    boost::system::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
    co_return;
}

/// One connection, counted in `connections` while it lasts.
asio::awaitable<void> server::impl::connection(tcp::socket socket) {
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
asio::awaitable<void> server::impl::reject_busy(tcp::socket socket) {
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
std::chrono::milliseconds server::impl::header_deadline() const {
    if (connections * 4 >= opts.max_connections * 3) {
        return std::min<std::chrono::milliseconds>(opts.header_timeout, 2s);
    }
    return opts.header_timeout;
}

/// True when the request's header carries the token (or none is required).
bool server::impl::has_token(const bhttp::request_header<>& h) const {
    const auto it = h.find(bhttp::field::authorization);
    access_request who;
    if (it != h.end()) {
        who.authorization = std::string_view(it->value().data(), it->value().size());
    }
    return token_matches(access, who);
}

}  // namespace zkd::http
