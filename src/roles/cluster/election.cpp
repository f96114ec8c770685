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

std::string describe(const zkco::acl_list& acl) {
    std::string out;
    for (const auto& e : acl) {
        std::string perms;
        for (const auto& [bit, letter] :
             {std::pair{zkco::perms::create, 'c'},
              {zkco::perms::del, 'd'},
              {zkco::perms::read, 'r'},
              {zkco::perms::write, 'w'},
              {zkco::perms::admin, 'a'}}) {
            if ((e.perms & bit) != 0) {
                perms += letter;
            }
        }
        out += (out.empty() ? "" : ", ") + e.scheme + ":" + e.id + ":" + perms;
    }
    return out.empty() ? "(empty)" : out;
}

/// Nullopt when `acl` grants nothing to anyone but `id` (a digest id); else a message.
std::optional<std::string> unprotected(
    const std::string& path, const zkco::acl_list& acl, const zkco::credentials& auth
) {
    const auto mine = zkco::digest_id(auth.user, auth.password);
    const bool ours = !acl.empty() && std::all_of(acl.begin(), acl.end(), [&](const auto& e) {
        return e.perms == 0 || (e.scheme == "digest" && e.id == mine);
    });
    if (ours) {
        return std::nullopt;
    }
    return "namespace node " + path + " is not protected by this cluster's credentials (user '" +
           auth.user + "'): its ACL is " + describe(acl) +
           ". Someone without them created it (before the first 'zkd run --user'?) and could "
           "read and change every task. Nothing was changed; inspect the namespace, then drop "
           "it ('zkd drop-namespace --yes' by an identity allowed to delete it) or use "
           "another --namespace";
}

/// Logs and turns a check_protected finding into invalid_acl.
zkco::result<void> refuse_unprotected(const std::optional<std::string>& problem) {
    if (!problem) {
        return {};
    }
    spdlog::error("cluster: refusing the namespace: {}", *problem);
    return zkco::error_code(zkco::errc::invalid_acl);
}

}  // namespace

asio::awaitable<std::optional<std::string>> check_protected(
    zkco::client& zk, protocol::layout l, zkco::credentials auth
) {
    std::vector<std::string> paths{"/"};
    for (auto& p : l.fixed_nodes()) {
        paths.push_back(std::move(p));
    }
    // Messages name the nodes as the ensemble knows them.
    const auto parts = zkco::parse_connect_string(zk.config().connect_string);
    const std::string root = parts ? parts->chroot : std::string();
    for (const auto& path : paths) {
        auto acl = co_await retry_unknown(zk, [&] { return zk.get_acl(path); });
        const std::string full = path == "/" ? (root.empty() ? path : root) : root + path;
        if (!acl && acl.error() == zkco::errc::no_node && path != "/") {
            continue;  // not made yet (its first member is setting it up): nothing to adopt
        }
        if (!acl) {
            co_return "cannot read the ACL of namespace node " + full + ": " +
                acl.error().message();
        }
        if (auto problem = unprotected(full, acl->acl, auth)) {
            co_return problem;
        }
    }
    co_return std::nullopt;
}

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
        if (pos == std::string::npos && !r && root.config().auth) {
            // The namespace was there before us: whoever made it must have been us.
            auto acl = co_await retry_unknown(root, [&] { return root.get_acl(path); });
            if (!acl) {
                co_return acl.error();
            }
            co_return refuse_unprotected(unprotected(path, acl->acl, *root.config().auth));
        }
    }
    co_return zkco::result<void>();
}

asio::awaitable<zkco::result<protocol::layout>> ensure_layout(
    zkco::client& zk, protocol::meta_info defaults
) {
    // Create-if-absent, then read: whoever created /meta first decided the shard counts.
    auto created = co_await retry_unknown(zk, [&] {
        return zk.create(protocol::layout::meta(), encode(defaults));
    });
    if (auto ok = ok_or_exists(created); !ok) {
        co_return ok.error();
    }
    auto node = co_await retry_unknown(zk, [&] { return zk.get(protocol::layout::meta()); });
    if (!node) {
        co_return node.error();
    }
    auto meta = protocol::decode_meta(node->data);
    if (!meta) {
        spdlog::error("cluster: refusing this namespace: /meta: {}", meta.error().message);
        co_return zkco::error_code(zkco::errc::data_inconsistency);
    }
    const protocol::layout l = protocol::layout::from(*meta);
    for (const auto& path : l.fixed_nodes()) {
        if (path == protocol::layout::meta()) {
            continue;
        }
        std::string data;
        if (path == protocol::layout::epoch()) {
            data = encode(protocol::epoch_info{});
        }
        auto r = co_await retry_unknown(zk, [&] { return zk.create(path, data); });
        if (auto ok = ok_or_exists(r); !ok) {
            co_return ok.error();
        }
    }
    if (const auto& auth = zk.config().auth) {
        const auto problem = co_await check_protected(zk, l, *auth);
        if (auto ok = refuse_unprotected(problem); !ok) {
            co_return ok.error();
        }
    }
    co_return l;
}

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
        auto kids = co_await retry_unknown(zk, [&] {
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
        auto kids = co_await retry_unknown(zk, [&] {
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
        auto w = co_await retry_unknown(zk, [&] {
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
    if (auto s = co_await retry_unknown(zk, [&] { return zk.sync(protocol::layout::epoch()); });
        !s) {
        co_return s.error();
    }
    const std::string stamp = encode(protocol::epoch_info{me.id, now_ms});
    std::int64_t epoch = 0;
    while (epoch == 0) {
        auto current =
            co_await retry_unknown(zk, [&] { return zk.get(protocol::layout::epoch()); });
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
        co_await retry_unknown(zk, [&] { return zk.exists(protocol::layout::master()); });
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
