// SPDX-License-Identifier: MIT
#include "roles/cluster/foreign.hpp"

#include "zkco/retry.hpp"

namespace asio = boost::asio;

namespace zkd::roles {

namespace {

/// Deletes the subtree below `path`, counting into `removed`, up to `limit` in all.
asio::awaitable<zkco::error_code> clear(
    zkco::client& zk, const std::string& path, std::size_t& removed, std::size_t limit, int depth
) {
    if (depth > 32) {
        co_return zkco::error_code(zkco::errc::not_empty);  // deeper than anyone sane writes
    }
    for (;;) {
        auto kids = co_await zk.get_children(path);
        if (!kids) {
            if (kids.error() == zkco::errc::no_node) {
                co_return zkco::error_code();
            }
            const bool retry = co_await zkco::reconnected_after(zk, kids.error());
            if (retry) {
                continue;
            }
            co_return kids.error();
        }
        for (const auto& name : kids->names) {
            if (removed >= limit) {
                co_return zkco::error_code(zkco::errc::not_empty);
            }
            const auto child = zkco::join_path(path, name);
            if (auto ec = co_await clear(zk, child, removed, limit, depth + 1); ec) {
                co_return ec;
            }
            for (;;) {
                auto r = co_await zk.remove(child, zkco::any_version);
                if (r) {
                    ++removed;
                    break;
                }
                if (r.error() == zkco::errc::no_node) {
                    break;
                }
                if (r.error() == zkco::errc::not_empty) {
                    break;  // a new child meanwhile: the next listing finds it
                }
                const bool retry = co_await zkco::reconnected_after(zk, r.error());
                if (!retry) {
                    co_return r.error();
                }
            }
        }
        co_return zkco::error_code();
    }
}

}  // namespace

asio::awaitable<zkco::result<std::size_t>> remove_children(
    zkco::client& zk, std::string path, std::size_t limit
) {
    std::size_t removed = 0;
    if (auto ec = co_await clear(zk, path, removed, limit, 0); ec) {
        co_return ec;
    }
    co_return removed;
}

}  // namespace zkd::roles
