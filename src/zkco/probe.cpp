// SPDX-License-Identifier: MIT
#include "zkco/probe.hpp"

#include "zkco/config.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <memory>
#include <utility>
#include <vector>

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace zkd::zkco {

namespace {

enum class finding { pending, refused, not_found, open, other };

struct host_probe {
    std::string name;  ///< "host:port" as the connect string gives it
    finding found = finding::pending;
    std::string text;
};

struct probe_state {
    explicit probe_state(const asio::any_io_executor& ex) : done(ex) {}

    std::vector<host_probe> hosts;
    std::size_t pending = 0;
    bool over = false;        ///< the probe returned: late completions change nothing
    asio::steady_timer done;  ///< cancelled when the last host is accounted for
    std::vector<std::unique_ptr<tcp::resolver>> resolvers;
    std::vector<std::unique_ptr<tcp::socket>> sockets;

    void finish(std::size_t i, finding f, std::string text) {
        if (over || hosts[i].found != finding::pending) {
            return;
        }
        hosts[i].found = f;
        hosts[i].text = std::move(text);
        if (--pending == 0) {
            done.cancel();
        }
    }

    void connected(std::size_t i, boost::system::error_code ec) {
        const auto& name = hosts[i].name;
        if (!ec) {
            finish(i, finding::open, name + " accepts connections");
        } else if (ec == asio::error::connection_refused) {
            finish(i, finding::refused, "connection refused by " + name);
        } else if (ec != asio::error::operation_aborted) {
            finish(i, finding::other, name + ": " + ec.message());
        }
        boost::system::error_code ignored;
        sockets[i]->close(ignored);
    }
};

std::string name_of(const server_address& s) {
    const bool v6 = s.host.find(':') != std::string::npos;
    return (v6 ? "[" + s.host + "]" : s.host) + ":" + std::to_string(s.port);
}

void start(const std::shared_ptr<probe_state>& st, std::size_t i, const server_address& server) {
    auto& socket = *st->sockets[i];
    boost::system::error_code ec;
    const auto addr = asio::ip::make_address(server.host, ec);
    if (!ec) {
        socket.async_connect(tcp::endpoint(addr, server.port), [st, i](auto e) {
            st->connected(i, e);
        });
        return;
    }
    st->resolvers[i]->async_resolve(
        server.host, std::to_string(server.port),
        [st, i, host = server.host](boost::system::error_code rec, tcp::resolver::results_type rs) {
            if (rec == asio::error::operation_aborted || st->over) {
                return;
            }
            if (rec == asio::error::host_not_found || rec == asio::error::no_data) {
                st->finish(i, finding::not_found, "host not found: " + host);
                return;
            }
            if (rec) {
                st->finish(i, finding::other, "cannot resolve " + host + ": " + rec.message());
                return;
            }
            asio::async_connect(*st->sockets[i], rs, [st, i](auto e, const auto&) {
                st->connected(i, e);
            });
        }
    );
}

}  // namespace

asio::awaitable<probe_report> probe_hosts(
    std::string_view connect_string, std::chrono::milliseconds bound
) {
    probe_report out;
    const auto parts = parse_connect_string(connect_string);
    if (!parts) {
        co_return out;
    }
    const auto ex = co_await asio::this_coro::executor;
    auto st = std::make_shared<probe_state>(ex);
    for (const auto& server : parts->servers) {
        st->hosts.push_back(host_probe{name_of(server), finding::pending, {}});
        st->resolvers.push_back(std::make_unique<tcp::resolver>(ex));
        st->sockets.push_back(std::make_unique<tcp::socket>(ex));
    }
    st->pending = st->hosts.size();
    for (std::size_t i = 0; i < parts->servers.size(); ++i) {
        start(st, i, parts->servers[i]);
    }
    st->done.expires_after(bound);
    co_await st->done.async_wait(asio::as_tuple(asio::use_awaitable));
    st->over = true;
    // What has not answered is abandoned: its handlers find `over` set.
    for (std::size_t i = 0; i < st->hosts.size(); ++i) {
        st->resolvers[i]->cancel();
        boost::system::error_code ignored;
        st->sockets[i]->close(ignored);
    }
    bool none_listening = true;
    bool refused = false;
    for (auto& h : st->hosts) {
        if (h.found == finding::pending) {
            h.text =
                "no answer from " + h.name + " within " + std::to_string(bound.count()) + " ms";
        }
        none_listening =
            none_listening && (h.found == finding::refused || h.found == finding::not_found);
        refused = refused || h.found == finding::refused;
        out.text.append(out.text.empty() ? "" : "; ").append(h.text);
    }
    if (none_listening) {
        out.nobody = refused ? boost::system::error_code(asio::error::connection_refused)
                             : boost::system::error_code(asio::error::host_not_found);
    }
    co_return out;
}

}  // namespace zkd::zkco
