// SPDX-License-Identifier: MIT
#include "roles/cluster/election.hpp"

#include "protocol/ids.hpp"
#include "roles/cluster/foreign.hpp"
#include "zkco/deadline.hpp"

#include <boost/asio/this_coro.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>
#include <utility>
#include <vector>

namespace asio = boost::asio;

namespace zkd::roles {

using namespace std::chrono_literals;

namespace {

struct candidate {
    protocol::election_node node;
    std::string name;
};

/// The valid candidates in /election, lowest sequence first; foreign names are logged once.
std::vector<candidate> candidates(const std::vector<std::string>& names) {
    static std::set<std::string> reported;
    std::vector<candidate> out;
    for (const auto& name : names) {
        if (auto parsed = protocol::parse_election_node(name)) {
            out.push_back({std::move(*parsed), name});
        } else if (reported.insert(name).second) {
            spdlog::warn("election: ignoring foreign node /election/{}", name);
        }
    }
    std::sort(out.begin(), out.end(), [](const candidate& a, const candidate& b) {
        return a.node.sequence < b.node.sequence;
    });
    return out;
}

}  // namespace

asio::awaitable<zkco::result<candidacy>> campaign(zkco::client& zk, protocol::member_info me) {
    std::optional<candidacy> mine;
    const std::string data = encode(me);
    // Named, not braced inside the co_await: GCC 12 may destroy such temporaries twice.
    const zkco::create_options ephemeral_sequential(zkco::create_mode::ephemeral_sequential);
    while (!mine) {
        auto created = co_await zk.create(
            protocol::layout::election_prefix(me.id), data, ephemeral_sequential
        );
        if (created) {
            const auto parsed = protocol::parse_election_node(zkco::base_name(*created));
            mine = candidacy{*created, parsed ? parsed->sequence : 0};
            break;
        }
        if (created.error() != zkco::condition::retryable) {
            co_return created.error();
        }
        // The create may have applied: look for our node before making a second one.
        const bool connected = co_await wait_connected(zk);
        if (!connected) {
            co_return zkco::error_code(zkco::errc::session_expired);
        }
        auto kids = co_await zkco::retry_unknown(zk, [&] {
            return zk.get_children(protocol::layout::election_dir());
        });
        if (!kids) {
            co_return kids.error();
        }
        for (const auto& c : candidates(kids->names)) {
            if (c.node.member == me.id) {
                mine = candidacy{
                    zkco::join_path(protocol::layout::election_dir(), c.name), c.node.sequence};
            }
        }
    }
    spdlog::debug("election: {} is candidate {}", me.id, mine->path);

    std::set<std::string> persistent;  // well-named, but no session owns them: not candidates
    for (;;) {
        auto kids = co_await zkco::retry_unknown(zk, [&] {
            return zk.get_children(protocol::layout::election_dir());
        });
        if (!kids) {
            co_return kids.error();
        }
        auto all = candidates(kids->names);
        std::erase_if(all, [&](const candidate& c) { return persistent.contains(c.name); });
        const auto me_at = std::find_if(all.begin(), all.end(), [&](const candidate& c) {
            return c.node.member == me.id && c.node.sequence == mine->sequence;
        });
        if (me_at == all.end()) {
            co_return zkco::error_code(zkco::errc::no_node);  // our session is gone
        }
        if (me_at == all.begin()) {
            co_return *mine;
        }
        // Watch only the one just before us: when it goes, we may be first (no herd).
        const auto& before = *(me_at - 1);
        auto w = co_await zkco::retry_unknown(zk, [&] {
            return zk.watch_exists(zkco::join_path(protocol::layout::election_dir(), before.name));
        });
        if (!w) {
            co_return w.error();
        }
        if (!w->value) {
            continue;  // gone already
        }
        if (!is_ephemeral(*w->value)) {
            // Written by someone else: it would lead forever without ever acting (§8).
            spdlog::warn(
                "election: ignoring /election/{}: it is not ephemeral (no candidate's "
                "session owns it)",
                before.name
            );
            persistent.insert(before.name);
            continue;
        }
        // A cancel that came while a read was out (the node drains or stops) was emitted
        // before this wait began, and would not end it: look first, then wait.
        if (const auto cs = co_await asio::this_coro::cancellation_state;
            cs.cancelled() != asio::cancellation_type::none) {
            co_return zkco::error_code(asio::error::operation_aborted);
        }
        spdlog::debug("election: {} waits for {}", me.id, before.name);
        if (auto ev = co_await w->watch.changed();
            !ev && ev.error() == zkco::condition::session_lost) {
            co_return ev.error();
        }
        // Cancelled (the node drains or stops): say so, whatever the caller's coroutine does
        // with cancellations (a master before may have turned their throwing off).
        if (const auto cs = co_await asio::this_coro::cancellation_state;
            cs.cancelled() != asio::cancellation_type::none) {
            co_return zkco::error_code(asio::error::operation_aborted);
        }
    }
}

asio::awaitable<zkco::result<std::int64_t>> take_over(
    zkco::client& zk, protocol::member_info me, std::int64_t now_ms
) {
    // The server we talk to may lag the leader: catch up before reading the epoch.
    if (auto s =
            co_await zkco::retry_unknown(zk, [&] { return zk.sync(protocol::layout::epoch()); });
        !s) {
        co_return s.error();
    }
    const std::string stamp = encode(protocol::epoch_info{me.id, now_ms});
    std::int64_t epoch = 0;
    while (epoch == 0) {
        auto current =
            co_await zkco::retry_unknown(zk, [&] { return zk.get(protocol::layout::epoch()); });
        if (!current) {
            co_return current.error();
        }
        if (current->data == stamp) {
            epoch = current->stat.version;  // our own earlier set applied; its reply was lost
            break;
        }
        auto set = co_await zk.set(protocol::layout::epoch(), stamp, current->stat.version);
        if (set) {
            epoch = set->version;
        } else if (set.error() != zkco::errc::bad_version && set.error() != zkco::condition::retryable) {
            co_return set.error();
        }
        // bad_version: someone moved it in between; unknown: look again.
    }

    me.epoch = epoch;
    me.since_ms = now_ms;
    std::vector<zkco::multi_op> ops{
        zkco::op::check{protocol::layout::epoch(), static_cast<std::int32_t>(epoch)}};
    auto existing =
        co_await zkco::retry_unknown(zk, [&] { return zk.exists(protocol::layout::master()); });
    if (!existing) {
        co_return existing.error();
    }
    if (*existing) {
        ops.emplace_back(zkco::op::remove{protocol::layout::master(), (*existing)->version});
    }
    ops.emplace_back(zkco::op::create{
        protocol::layout::master(), encode(me), zkco::create_mode::ephemeral, {}});
    auto written = co_await zk.multi(std::move(ops));
    if (!written && written.ec != zkco::condition::retryable) {
        // A failed epoch check means another master took over meanwhile: we are not it.
        co_return written.ec;
    }
    spdlog::info("master: {} took over with epoch {}", me.id, epoch);
    co_return epoch;
}

asio::awaitable<zkco::result<void>> join_workers(zkco::client& zk, protocol::member_info me) {
    for (;;) {
        std::vector<zkco::multi_op> ops{
            zkco::op::create{
                protocol::layout::worker(me.id), encode(me), zkco::create_mode::ephemeral, {}},
            zkco::op::create{
                protocol::layout::assign_dir(me.id), "", zkco::create_mode::persistent, {}},
        };
        auto r = co_await zk.multi(std::move(ops));
        if (r) {
            co_return zkco::result<void>();
        }
        if (r.ec == zkco::condition::retryable) {
            const bool connected = co_await wait_connected(zk);
            if (!connected) {
                co_return zkco::error_code(zkco::errc::session_expired);
            }
        }
        if (r.ec == zkco::condition::retryable || r.ec == zkco::errc::node_exists) {
            // An earlier attempt may have applied: our ephemeral node says so.
            auto there = co_await zk.exists(protocol::layout::worker(me.id));
            const auto session = zk.session();
            if (there && *there && session && (*there)->ephemeral_owner == session->id) {
                co_return zkco::result<void>();
            }
            if (r.ec == zkco::condition::retryable) {
                continue;
            }
        }
        co_return r.ec;
    }
}

}  // namespace zkd::roles
