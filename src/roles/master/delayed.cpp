// SPDX-License-Identifier: MIT
// Following the delayed shards (docs/protocol.md §6 "Delayed tasks and retries", T10) by their
// change logs, as the pending shards are (shards.cpp), and reading the delayed tasks whose
// time has come. Nothing is read while they wait: their names and due times come with the
// logs, and one wake-up of the schedule loop waits for the earliest.
#include "protocol/change_log.hpp"
#include "roles/master/detail/master_session.hpp"
#include "roles/txn/zk_ops.hpp"
#include "zkco/read_batch.hpp"

#include <spdlog/spdlog.h>

namespace zkd::roles::detail {

asio::awaitable<void> master_session::follow_delayed_shard(std::uint32_t shard) {
    const std::string path = protocol::layout::delayed_shard(shard);
    auto& follower = followers_[l_.pending_shards + shard];
    while (!stopping()) {
        auto got = co_await zk_.watch_get(path);
        take_answers();
        zkco::error_code failed;
        if (!got) {
            failed = got.error();
        } else {
            auto log = protocol::decode_change_log(got->value.data);
            const auto step = follower.read(
                to_dir_stat(got->value.stat),
                log ? std::optional<std::size_t>(log->created.size()) : std::nullopt
            );
            if (step == protocol::log_follower::step::apply) {
                feed(master_saw::delayed_logged{shard, std::move(log->created)});
            } else if (step == protocol::log_follower::step::list) {
                auto listed = co_await list_delayed_shard(shard);
                if (!listed) {
                    failed = listed.error();
                } else if (log) {
                    // The last log's due times are exact where the names alone are bounds.
                    feed(master_saw::delayed_logged{shard, std::move(log->created)});
                }
            }
        }
        if (failed) {
            if (failed == zkco::errc::no_node) {
                // A namespace made before the delayed tree, whose members are all older: no
                // delayed tasks can be submitted to it; the shard counts as listed (empty).
                spdlog::warn("master: {} is missing: no delayed tasks there", path);
                feed(master_saw::delayed_listed{shard, {}});
                break;
            }
            const bool go_on = co_await recover(failed, path);
            if (!go_on) {
                break;
            }
            continue;
        }
        auto ev = co_await got->watch.changed();
        if (!ev) {
            const bool go_on = co_await recover(ev.error(), path);
            if (!go_on) {
                break;
            }
        }
    }
    follower.forget();
}

asio::awaitable<zkco::result<void>> master_session::list_delayed_shard(std::uint32_t shard) {
    auto kids = co_await zk_.get_children(protocol::layout::delayed_shard(shard));
    take_answers();
    if (!kids) {
        co_return kids.error();
    }
    followers_[l_.pending_shards + shard].listed(to_dir_stat(kids->stat));
    feed(master_saw::delayed_listed{shard, std::move(kids->names)});
    co_return zkco::result<void>();
}

asio::awaitable<void> master_session::load_delayed(
    std::vector<std::string> tids, std::vector<std::string> paths
) {
    auto nodes = co_await zkco::get_all(zk_, std::move(paths));
    std::vector<task_read> reads(tids.size());
    for (std::size_t i = 0; i < tids.size(); ++i) {
        reads[i].tid = std::move(tids[i]);
        if (!nodes[i]) {
            reads[i].st = nodes[i].error() == zkco::errc::no_node ? task_read::status::gone
                                                                  : task_read::status::error;
            continue;
        }
        reads[i].data = std::move(nodes[i]->data);
        reads[i].children = nodes[i]->stat.num_children;
    }
    inbox_->push(answer::delayed_nodes{std::move(reads)});
}

}  // namespace zkd::roles::detail
