// SPDX-License-Identifier: MIT
#include "roles/cluster/session_keeper.hpp"

#include "roles/cluster/election.hpp"
#include "roles/cluster/namespace.hpp"
#include "zkco/deadline.hpp"
#include "zkco/probe.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

namespace asio = boost::asio;

namespace zkd::roles {

namespace {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

/// How long a connect attempt runs before the hosts are probed (a healthy connect takes a
/// few ms), and how long the probe may take.
constexpr std::chrono::milliseconds probe_after{500};
constexpr std::chrono::milliseconds probe_bound{1000};

/// Probes the hosts once the attempt has waited probe_after, and notes in `found` what it
/// found: ends (with the probe's verdict) when nobody listens on any host, else waits to be
/// cancelled (the attempt ends on its own).
asio::awaitable<zkco::result<void>> explain(
    const zkco::client& zk, std::chrono::milliseconds timeout, zkco::probe_report& found
) {
    co_await asio::this_coro::throw_if_cancelled(false);
    const bool waited = co_await zkco::pause(probe_after);
    if (!waited) {
        co_return asio::error::operation_aborted;
    }
    found = co_await zkco::probe_hosts(zk.config().connect_string, std::min(probe_bound, timeout));
    if (found.nobody) {
        co_return found.nobody;
    }
    co_await zkco::pause(24h);
    co_return asio::error::operation_aborted;
}

/// One connect attempt of at most `timeout`, cut short when `stop` (if any) is set or when
/// none of the hosts listens (explain); `found` receives what a probe of the hosts found.
asio::awaitable<zkco::result<void>> attempt(
    zkco::client& zk,
    std::chrono::milliseconds timeout,
    reactor::event* stop,
    zkco::probe_report& found
) {
    using namespace asio::experimental::awaitable_operators;
    if (stop == nullptr) {
        auto outcome =
            co_await (zkco::with_timeout(zk.connect(), timeout) || explain(zk, timeout, found));
        co_return outcome.index() == 0 ? std::get<0>(std::move(outcome))
                                       : std::get<1>(std::move(outcome));
    }
    auto outcome = co_await (
        zkco::with_timeout(zk.connect(), timeout) || explain(zk, timeout, found) || stop->wait()
    );
    if (outcome.index() == 0) {
        co_return std::get<0>(std::move(outcome));
    }
    if (outcome.index() == 1) {
        co_return std::get<1>(std::move(outcome));
    }
    co_return asio::error::operation_aborted;
}

}  // namespace

std::optional<namespace_place> place_namespace(
    std::string_view connect_string, std::string_view chroot
) {
    auto parts = zkco::parse_connect_string(connect_string);
    if (!parts) {
        return std::nullopt;
    }
    namespace_place place;
    place.path = parts->chroot + std::string(chroot);
    parts->chroot.clear();
    place.hosts = zkco::format_connect_string(*parts);
    return place;
}

std::string describe_failure(const zkco::error_code& ec, const std::string& why) {
    if (why.empty()) {
        return ec.message();
    }
    if (ec == asio::error::connection_refused || ec == asio::error::host_not_found) {
        return why;  // the probe's own verdict
    }
    return ec.message() + " (" + why + ")";
}

asio::awaitable<zkco::result<void>> connect_with_backoff(
    zkco::client& zk, const connect_policy& p, std::string* why
) {
    const auto start = clock::now();
    zkco::probe_report found;  // what the last probe found
    auto next_pause = p.first_pause;
    std::optional<clock::time_point> warned;
    const auto gave_up = [&] {
        return p.give_up_after.count() > 0 && clock::now() - start >= p.give_up_after;
    };
    for (;;) {
        auto timeout = p.attempt_timeout;
        if (p.give_up_after.count() > 0) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                p.give_up_after - (clock::now() - start)
            );
            timeout = std::clamp(left, 1ms, timeout);
        }
        zkco::probe_report probed;
        auto c = co_await attempt(zk, timeout, p.stop, probed);
        if (c) {
            if (warned && p.log) {
                spdlog::info(
                    "{}: reached ZooKeeper at {} after {} ms", p.who, zk.config().connect_string,
                    std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - start)
                        .count()
                );
            }
            co_return c;
        }
        const bool was_cancelled = co_await zkco::cancelled();
        if (was_cancelled || (p.stop != nullptr && p.stop->is_set())) {
            co_return asio::error::operation_aborted;
        }
        if (probed.text.empty() && found.text.empty() && !zkco::is_terminal(zk.state())) {
            // It failed before the probe began (a host name that does not resolve, a short
            // last attempt): probe now, once.
            probed = co_await zkco::probe_hosts(
                zk.config().connect_string, std::min(probe_bound, p.attempt_timeout)
            );
        }
        if (!probed.text.empty()) {
            found = std::move(probed);
        }
        if (found.nobody && c.error() == zkco::errc::operation_timeout) {
            c = found.nobody;  // a last attempt too short to probe: the last probe's verdict
        }
        if (why != nullptr) {
            *why = found.text;
        }
        if (zkco::is_terminal(zk.state()) || gave_up()) {
            co_return c.error();
        }
        if (p.log && (!warned || clock::now() - *warned >= 30s)) {
            spdlog::warn(
                "{}: cannot reach ZooKeeper at {}: {}; {}", p.who, zk.config().connect_string,
                describe_failure(c.error(), found.text),
                warned ? "still trying" : "trying again with a growing pause"
            );
            warned = clock::now();
        }
        const bool waited = co_await zkco::pause(next_pause);
        if (!waited) {
            co_return asio::error::operation_aborted;
        }
        next_pause = std::min(next_pause * 2, p.longest_pause);
    }
}

asio::awaitable<zkco::result<void>> make_namespace(
    zkco::config cfg, const namespace_place& place, const connect_policy& p
) {
    cfg.connect_string = place.hosts;
    zkco::client root(co_await asio::this_coro::executor, std::move(cfg));
    auto made = co_await connect_with_backoff(root, p);
    if (made) {
        made = co_await ensure_chroot(root, place.path);
    }
    co_await root.close();
    co_return made;
}

asio::awaitable<void> keep_sessions(zkco::config cfg, connect_policy p, session_body body) {
    co_await asio::this_coro::throw_if_cancelled(false);
    const auto ex = co_await asio::this_coro::executor;
    auto between = p.first_pause;
    for (;;) {
        auto zk = std::make_shared<zkco::client>(ex, cfg);
        const auto connected = co_await connect_with_backoff(*zk, p);
        if (!connected) {
            co_await zk->close();
            co_return;
        }
        const auto began = clock::now();
        const bool again = co_await body(zk);
        co_await zk->close();
        const bool was_cancelled = co_await zkco::cancelled();
        if (!again || was_cancelled || (p.stop != nullptr && p.stop->is_set())) {
            co_return;
        }
        // Sessions that end one after the other (a server that drops each at once) are
        // made again more and more slowly; one that lasted a while, at once.
        between =
            clock::now() - began > 60s ? p.first_pause : std::min(between * 2, p.longest_pause);
        const bool waited = co_await zkco::pause(between);
        if (!waited) {
            co_return;
        }
    }
}

}  // namespace zkd::roles
