// SPDX-License-Identifier: MIT
#include "roles/cluster/namespace.hpp"

#include "zkco/retry.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

namespace asio = boost::asio;

namespace zkd::roles {

namespace {

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
        auto acl = co_await zkco::retry_unknown(zk, [&] { return zk.get_acl(path); });
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
        auto r = co_await zkco::retry_unknown(root, [&] { return root.create(path, "", opts); });
        if (auto ok = ok_or_exists(r); !ok) {
            co_return ok;
        }
        if (pos == std::string::npos && !r && root.config().auth) {
            // The namespace was there before us: whoever made it must have been us.
            auto acl = co_await zkco::retry_unknown(root, [&] { return root.get_acl(path); });
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
    auto created = co_await zkco::retry_unknown(zk, [&] {
        return zk.create(protocol::layout::meta(), encode(defaults));
    });
    if (auto ok = ok_or_exists(created); !ok) {
        co_return ok.error();
    }
    auto node = co_await zkco::retry_unknown(zk, [&] { return zk.get(protocol::layout::meta()); });
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
        auto r = co_await zkco::retry_unknown(zk, [&] { return zk.create(path, data); });
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

asio::awaitable<zkco::result<protocol::layout>> read_layout(zkco::client& zk) {
    auto node = co_await zk.get(protocol::layout::meta());
    if (!node) {
        co_return node.error();
    }
    auto meta = protocol::decode_meta(node->data);
    if (!meta) {
        co_return zkco::error_code(zkco::errc::data_inconsistency);
    }
    co_return protocol::layout::from(*meta);
}

std::vector<std::string> result_dir_paths(std::vector<std::string> names) {
    std::sort(names.begin(), names.end());
    std::vector<std::string> paths;
    paths.reserve(names.size());
    for (const auto& name : names) {
        paths.push_back(zkco::join_path(protocol::layout::results_dir(), name));
    }
    return paths;
}

asio::awaitable<zkco::result<std::vector<std::string>>> list_result_dirs(zkco::client& zk) {
    auto kids = co_await zk.get_children(protocol::layout::results_dir());
    if (!kids) {
        co_return kids.error();
    }
    co_return result_dir_paths(std::move(kids->names));
}

}  // namespace zkd::roles
