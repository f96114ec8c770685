// SPDX-License-Identifier: MIT
#include "roles/election.hpp"

#include "roles/foreign.hpp"
#include "roles/ids.hpp"
#include "zkco/deadline.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>
#include <utility>
#include <vector>

namespace asio = boost::asio;

namespace zkd::roles {

using namespace std::chrono_literals;

asio::awaitable<bool> wait_connected(zkco::client& zk) {
    while (zk.state() != zkco::session_state::connected) {
        if (zkco::is_terminal(zk.state())) {
            co_return false;
        }
        if (auto change = co_await zk.wait_state(zk.state_generation()); !change) {
            co_return false;
        }
    }
    co_return true;
}

asio::awaitable<bool> reconnected_after(zkco::client& zk, zkco::error_code ec) {
    if (ec != zkco::condition::retryable || zkco::is_terminal(zk.state())) {
        co_return false;
    }
    co_return co_await wait_connected(zk);
}

namespace {

/// Runs `op` until it gives an answer other than "outcome unknown", waiting for the
/// connection between tries. Only for operations that are safe to repeat.
template <class Op>
auto retry_unknown(zkco::client& zk, Op op) -> decltype(op()) {
    for (;;) {
        auto r = co_await op();
        if (r || r.error() != zkco::condition::retryable) {
            co_return r;
        }
        const bool connected = co_await wait_connected(zk);
        if (!connected) {
            co_return zkco::error_code(zkco::errc::session_expired);
        }
    }
}

zkco::result<void> ok_or_exists(const zkco::result<std::string>& r) {
    if (r || r.error() == zkco::errc::node_exists) {
        return {};
    }
    return r.error();
}

}  // namespace

asio::awaitable<zkco::result<void>> ensure_chroot(zkco::client& root, std::string chroot) {
    std::size_t pos = 0;
    while (pos != std::string::npos) {
        pos = chroot.find('/', pos + 1);
        const std::string path = chroot.substr(0, pos);
        // Ancestors stay open, so that clusters with other credentials can live beside ours;
        // the namespace itself gets the session's default ACL (creator_all with credentials).
        zkco::create_options opts;
        if (pos != std::string::npos) {
            opts.acl = zkco::open_acl();
        }
        auto r = co_await retry_unknown(root, [&] { return root.create(path, "", opts); });
        if (auto ok = ok_or_exists(r); !ok) {
            co_return ok;
        }
    }
    co_return zkco::result<void>();
}

asio::awaitable<zkco::result<layout>> ensure_layout(zkco::client& zk, meta_info defaults) {
    // Create-if-absent, then read: whoever created /meta first decided the shard counts.
    auto created = co_await retry_unknown(
        zk, [&] { return zk.create(layout::meta(), encode(defaults)); });
    if (auto ok = ok_or_exists(created); !ok) {
        co_return ok.error();
    }
    auto node = co_await retry_unknown(zk, [&] { return zk.get(layout::meta()); });
    if (!node) {
        co_return node.error();
    }
    auto meta = decode_meta(node->data);
    if (!meta) {
        spdlog::error("cluster: /meta is not a zkd format 1 meta node ({}); refusing to guess the "
                      "layout",
                      meta.error().message);
        co_return zkco::error_code(zkco::errc::data_inconsistency);
    }
    const layout l = layout::from(*meta);
    for (const auto& path : l.fixed_nodes()) {
        if (path == layout::meta()) {
            continue;
        }
        std::string data;
        if (path == layout::epoch()) {
            data = encode(epoch_info{});
        }
        auto r = co_await retry_unknown(zk, [&] { return zk.create(path, data); });
        if (auto ok = ok_or_exists(r); !ok) {
            co_return ok.error();
        }
    }
    co_return l;
}

namespace {

struct candidate {
    election_node node;
    std::string name;
};

/// The valid candidates in /election, lowest sequence first; foreign names are logged once.
std::vector<candidate> candidates(const std::vector<std::string>& names) {
    static std::set<std::string> reported;
    std::vector<candidate> out;
    for (const auto& name : names) {
        if (auto parsed = parse_election_node(name)) {
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

asio::awaitable<zkco::result<candidacy>> campaign(zkco::client& zk, member_info me) {
    std::optional<candidacy> mine;
    const std::string data = encode(me);
    // Named, not braced inside the co_await: GCC 12 may destroy such temporaries twice.
    const zkco::create_options ephemeral_sequential(zkco::create_mode::ephemeral_sequential);
    while (!mine) {
        auto created = co_await zk.create(layout::election_prefix(me.id), data,
                                          ephemeral_sequential);
        if (created) {
            const auto parsed = parse_election_node(zkco::base_name(*created));
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
        auto kids = co_await retry_unknown(zk, [&] { return zk.get_children(layout::election_dir()); });
        if (!kids) {
            co_return kids.error();
        }
        for (const auto& c : candidates(kids->names)) {
            if (c.node.member == me.id) {
                mine = candidacy{zkco::join_path(layout::election_dir(), c.name), c.node.sequence};
            }
        }
    }
    spdlog::debug("election: {} is candidate {}", me.id, mine->path);

    std::set<std::string> persistent;  // well-named, but no session owns them: not candidates
    for (;;) {
        auto kids = co_await retry_unknown(zk, [&] { return zk.get_children(layout::election_dir()); });
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
        auto w = co_await retry_unknown(zk, [&] {
            return zk.watch_exists(zkco::join_path(layout::election_dir(), before.name));
        });
        if (!w) {
            co_return w.error();
        }
        if (!w->value) {
            continue;  // gone already
        }
        if (!is_ephemeral(*w->value)) {
            // Written by someone else: it would lead forever without ever acting (§8).
            spdlog::warn("election: ignoring /election/{}: it is not ephemeral (no candidate's "
                         "session owns it)",
                         before.name);
            persistent.insert(before.name);
            continue;
        }
        spdlog::debug("election: {} waits for {}", me.id, before.name);
        if (auto ev = co_await w->watch.changed(); !ev && ev.error() == zkco::condition::session_lost) {
            co_return ev.error();
        }
    }
}

asio::awaitable<zkco::result<std::int64_t>> take_over(zkco::client& zk, member_info me,
                                                      std::int64_t now_ms) {
    // The server we talk to may lag the leader: catch up before reading the epoch.
    if (auto s = co_await retry_unknown(zk, [&] { return zk.sync(layout::epoch()); }); !s) {
        co_return s.error();
    }
    const std::string stamp = encode(epoch_info{me.id, now_ms});
    std::int64_t epoch = 0;
    while (epoch == 0) {
        auto current = co_await retry_unknown(zk, [&] { return zk.get(layout::epoch()); });
        if (!current) {
            co_return current.error();
        }
        if (current->data == stamp) {
            epoch = current->stat.version;  // our own earlier set applied; its reply was lost
            break;
        }
        auto set = co_await zk.set(layout::epoch(), stamp, current->stat.version);
        if (set) {
            epoch = set->version;
        } else if (set.error() != zkco::errc::bad_version &&
                   set.error() != zkco::condition::retryable) {
            co_return set.error();
        }
        // bad_version: someone moved it in between; unknown: look again.
    }

    me.epoch = epoch;
    me.since_ms = now_ms;
    std::vector<zkco::multi_op> ops{zkco::op::check{layout::epoch(), static_cast<std::int32_t>(epoch)}};
    auto existing = co_await retry_unknown(zk, [&] { return zk.exists(layout::master()); });
    if (!existing) {
        co_return existing.error();
    }
    if (*existing) {
        ops.emplace_back(zkco::op::remove{layout::master(), (*existing)->version});
    }
    ops.emplace_back(zkco::op::create{layout::master(), encode(me), zkco::create_mode::ephemeral, {}});
    auto written = co_await zk.multi(std::move(ops));
    if (!written && written.ec != zkco::condition::retryable) {
        // A failed epoch check means another master took over meanwhile: we are not it.
        co_return written.ec;
    }
    spdlog::info("master: {} took over with epoch {}", me.id, epoch);
    co_return epoch;
}

asio::awaitable<zkco::result<void>> join_workers(zkco::client& zk, member_info me) {
    for (;;) {
        std::vector<zkco::multi_op> ops{
            zkco::op::create{layout::worker(me.id), encode(me), zkco::create_mode::ephemeral, {}},
            zkco::op::create{layout::assign_dir(me.id), "", zkco::create_mode::persistent, {}},
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
            auto there = co_await zk.exists(layout::worker(me.id));
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
