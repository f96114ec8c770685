// SPDX-License-Identifier: MIT
#include "loadgen/mntr.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <charconv>

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace zkd::loadgen {

std::map<std::string, std::string, std::less<>> parse_mntr(std::string_view text) {
    std::map<std::string, std::string, std::less<>> out;
    while (!text.empty()) {
        const auto nl = text.find('\n');
        std::string_view line = text.substr(0, nl);
        text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
        if (!line.empty() && line.back() == '\r') {
            line.remove_suffix(1);
        }
        const auto tab = line.find('\t');
        if (tab == std::string_view::npos || tab == 0) {
            continue;
        }
        out.insert_or_assign(std::string(line.substr(0, tab)), std::string(line.substr(tab + 1)));
    }
    return out;
}

namespace {

std::optional<std::uint64_t> number(
    const std::map<std::string, std::string, std::less<>>& m, std::string_view key
) {
    const auto it = m.find(key);
    if (it == m.end()) {
        return std::nullopt;
    }
    std::uint64_t v = 0;
    const auto& s = it->second;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc{} || end != s.data() + s.size()) {
        return std::nullopt;
    }
    return v;
}

}  // namespace

std::optional<zk_counts> counts_from(const std::map<std::string, std::string, std::less<>>& mntr) {
    const auto w = number(mntr, "zk_cnt_updatelatency");
    const auto r = number(mntr, "zk_cnt_readlatency");
    const auto p = number(mntr, "zk_packets_received");
    if (!w || !r || !p) {
        return std::nullopt;
    }
    return zk_counts{*w, *r, *p};
}

zk_counts operator-(const zk_counts& after, const zk_counts& before) noexcept {
    const auto diff = [](std::uint64_t a, std::uint64_t b) { return a >= b ? a - b : 0; };
    return {
        diff(after.writes, before.writes), diff(after.reads, before.reads),
        diff(after.packets_received, before.packets_received)};
}

namespace {

asio::awaitable<fetched<std::string>> exchange(zkco::server_address server, std::string word) {
    const auto ex = co_await asio::this_coro::executor;
    const auto tok = asio::as_tuple(asio::use_awaitable);
    tcp::resolver resolver(ex);
    auto [rec, endpoints] =
        co_await resolver.async_resolve(server.host, std::to_string(server.port), tok);
    if (rec) {
        co_return fetched<std::string>{{}, "resolve " + server.host + ": " + rec.message()};
    }
    tcp::socket socket(ex);
    auto [cec, ep] = co_await asio::async_connect(socket, endpoints, tok);
    if (cec) {
        co_return fetched<std::string>{{}, "connect: " + cec.message()};
    }
    auto [wec, written] = co_await asio::async_write(socket, asio::buffer(word), tok);
    if (wec) {
        co_return fetched<std::string>{{}, "send: " + wec.message()};
    }
    std::string answer;
    auto [eec, got] = co_await asio::async_read(socket, asio::dynamic_buffer(answer), tok);
    if (eec && eec != asio::error::eof) {
        co_return fetched<std::string>{{}, "read: " + eec.message()};
    }
    if (answer.empty()) {
        co_return fetched<std::string>{{}, "empty answer to " + word};
    }
    if (answer.find("not executed because it is not in the whitelist") != std::string::npos) {
        co_return fetched<std::string>{
            {}, word + " is not allowed by the server (4lw.commands.whitelist)"};
    }
    co_return fetched<std::string>{std::move(answer), {}};
}

}  // namespace

asio::awaitable<fetched<std::string>> four_letter(
    zkco::server_address server, std::string word, std::chrono::milliseconds timeout
) {
    using namespace asio::experimental::awaitable_operators;
    const std::string where = server.host + ":" + std::to_string(server.port);
    asio::steady_timer timer(co_await asio::this_coro::executor, timeout);
    auto talk = exchange(std::move(server), std::move(word));
    auto outcome =
        co_await (std::move(talk) || timer.async_wait(asio::as_tuple(asio::use_awaitable)));
    if (outcome.index() == 1) {
        co_return fetched<std::string>{
            {}, where + ": no answer within " + std::to_string(timeout.count()) + " ms"};
    }
    auto got = std::move(std::get<0>(outcome));
    if (!got.value) {
        got.error = where + ": " + got.error;
    }
    co_return got;
}

asio::awaitable<fetched<zk_counts>> snapshot(
    std::vector<zkco::server_address> servers, std::chrono::milliseconds timeout
) {
    zk_counts sum;
    for (auto& server : servers) {
        const std::string where = server.host + ":" + std::to_string(server.port);
        auto text = co_await four_letter(server, "mntr", timeout);
        if (!text.value) {
            co_return fetched<zk_counts>{{}, text.error};
        }
        const auto counts = counts_from(parse_mntr(*text.value));
        if (!counts) {
            co_return fetched<zk_counts>{
                {},
                where + ": mntr lacks zk_cnt_updatelatency/zk_cnt_readlatency/zk_packets_received"};
        }
        sum.writes += counts->writes;
        sum.reads += counts->reads;
        sum.packets_received += counts->packets_received;
    }
    co_return fetched<zk_counts>{sum, {}};
}

}  // namespace zkd::loadgen
