// SPDX-License-Identifier: MIT
// A TCP relay between ZooKeeper clients and a server, for tests that need to lose what is on
// the wire: requests that never arrive, answers that never come back, connections cut while
// a request is in flight. Runs on the test's io_context.
#pragma once

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <array>
#include <list>
#include <memory>
#include <string>

namespace zkd::test {

class relay {
public:
    /// Listens on a free port of `listen` (an address of this host; loopback by default) and
    /// relays each connection to `to` (address:port).
    relay(
        boost::asio::io_context& ioc, const std::string& to, const std::string& listen = "127.0.0.1"
    )
        : ioc_(ioc), acceptor_(ioc, {boost::asio::ip::make_address(listen), 0}) {
        const auto colon = to.rfind(':');
        upstream_ = {
            boost::asio::ip::make_address(to.substr(0, colon)),
            static_cast<unsigned short>(std::stoi(to.substr(colon + 1)))};
        boost::asio::co_spawn(ioc_, accept(), boost::asio::detached);
    }
    relay(const relay&) = delete;
    relay& operator=(const relay&) = delete;
    ~relay() { stop(); }

    /// "<listen address>:<port>": a connect string host for the relay.
    [[nodiscard]] std::string address() const {
        const auto at = acceptor_.local_endpoint();
        return at.address().to_string() + ":" + std::to_string(at.port());
    }

    /// From now on, bytes from clients (requests) are dropped, not forwarded.
    void drop_requests(bool on) { *drop_up_ = on; }
    /// From now on, bytes from the server (answers, watch events) are dropped.
    void drop_answers(bool on) { *drop_down_ = on; }

    /// Closes every relayed connection (new ones are still accepted).
    void cut() {
        for (auto& c : conns_) {
            boost::system::error_code ec;
            c->client.close(ec);
            c->server.close(ec);
        }
        conns_.clear();
    }

    void stop() {
        boost::system::error_code ec;
        acceptor_.close(ec);
        cut();
    }

private:
    struct conn {
        explicit conn(boost::asio::io_context& ioc) : client(ioc), server(ioc) {}
        boost::asio::ip::tcp::socket client;
        boost::asio::ip::tcp::socket server;
    };

    boost::asio::awaitable<void> accept() {
        using boost::asio::as_tuple;
        using boost::asio::use_awaitable;
        for (;;) {
            auto c = std::make_shared<conn>(ioc_);
            auto [ec] = co_await acceptor_.async_accept(c->client, as_tuple(use_awaitable));
            if (ec) {
                co_return;
            }
            auto [cec] = co_await c->server.async_connect(upstream_, as_tuple(use_awaitable));
            if (cec) {
                continue;
            }
            conns_.push_back(c);
            boost::asio::co_spawn(
                ioc_, pump(c, c->client, c->server, drop_up_), boost::asio::detached
            );
            boost::asio::co_spawn(
                ioc_, pump(c, c->server, c->client, drop_down_), boost::asio::detached
            );
        }
    }

    // `drop` is shared, not a reference to the relay's flag: a pump may still hold bytes it
    // read when the relay is destroyed (its sockets closed), and reads the flag once more.
    static boost::asio::awaitable<void> pump(
        std::shared_ptr<conn> keep,
        boost::asio::ip::tcp::socket& from,
        boost::asio::ip::tcp::socket& to,
        std::shared_ptr<const bool> drop
    ) {
        using boost::asio::as_tuple;
        using boost::asio::use_awaitable;
        std::array<char, 16384> buf{};
        for (;;) {
            auto [ec, n] =
                co_await from.async_read_some(boost::asio::buffer(buf), as_tuple(use_awaitable));
            if (ec) {
                break;
            }
            if (*drop) {
                continue;
            }
            auto [wec, w] = co_await boost::asio::async_write(
                to, boost::asio::buffer(buf.data(), n), as_tuple(use_awaitable)
            );
            if (wec) {
                break;
            }
        }
        boost::system::error_code ignored;
        keep->client.close(ignored);
        keep->server.close(ignored);
    }

    boost::asio::io_context& ioc_;
    boost::asio::ip::tcp::acceptor acceptor_;
    boost::asio::ip::tcp::endpoint upstream_;
    std::list<std::shared_ptr<conn>> conns_;
    std::shared_ptr<bool> drop_up_ = std::make_shared<bool>(false);
    std::shared_ptr<bool> drop_down_ = std::make_shared<bool>(false);
};

}  // namespace zkd::test
