// SPDX-License-Identifier: MIT
// Following the pending shards (docs/protocol.md §6, §7): by their change logs, a listing
// when a log cannot be applied, and a sweep of their stats for writers that keep no log.
#include "protocol/change_log.hpp"
#include "roles/master/detail/master_session.hpp"
#include "roles/txn/zk_ops.hpp"

#include <spdlog/spdlog.h>

namespace zkd::roles::detail {

/// Follows a pending shard by its change log (§6, §7): a data watch, which the master's
/// own deletes do not fire. A read the shard's log_follower may apply adds the tasks it
/// names (with their data, when they are read next anyway); anything else is listed.
asio::awaitable<void> master_session::follow_shard(std::uint32_t shard) {
    const std::string path = protocol::layout::pending_shard(shard);
    while (!stopping()) {
        to_fsm(master_saw::shard_reading{shard});
        auto got = co_await zk_.watch_get(path);
        take_answers();
        zkco::error_code failed;
        if (!got) {
            failed = got.error();
        } else {
            auto log = protocol::decode_change_log(got->value.data);
            const auto step = followers_[shard].read(
                to_dir_stat(got->value.stat),
                log ? std::optional<std::size_t>(log->created.size()) : std::nullopt
            );
            if (step == protocol::log_follower::step::apply) {
                ++stats_->shard_log_reads;
                feed(master_saw::shard_logged{shard, std::move(log->created), false});
            } else if (step == protocol::log_follower::step::list) {
                auto listed = co_await list_shard(shard);
                if (!listed) {
                    failed = listed.error();
                } else if (log) {
                    // What the log of the last transaction carried is good for the tasks
                    // it created that the listing found, so they are not read again.
                    feed(master_saw::shard_logged{shard, std::move(log->created), true});
                }
            }
        }
        to_fsm(master_saw::shard_read_done{shard});
        wake_.cancel();  // the schedule loop may wait for it
        if (failed) {
            if (failed == zkco::errc::no_node) {
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
    followers_[shard].forget();
    feed(master_saw::shard_gone{shard});
}

/// Lists a pending shard: the fsm and the follower are as the shard stood then.
asio::awaitable<zkco::result<void>> master_session::list_shard(std::uint32_t shard) {
    auto kids = co_await zk_.get_children(protocol::layout::pending_shard(shard));
    take_answers();
    if (!kids) {
        co_return kids.error();
    }
    ++stats_->shard_listings;
    // Nothing between the answer and these: a delete of ours answered later is counted
    // after the listing, as the follower wants.
    followers_[shard].listed(to_dir_stat(kids->stat));
    feed(master_saw::shard_listed{shard, std::move(kids->names)});
    co_return zkco::result<void>();
}

/// Finds what a writer that keeps no change log did to a pending shard (a client of
/// protocol format 1 cannot connect, but anyone may create or delete a node there):
/// every pending_sweep_interval, the stat of every followed shard, read at once. A
/// shard whose data moved is left to its data watch, which will read it; one whose
/// children moved by more than our own deletes is listed.
asio::awaitable<void> master_session::sweep_shards() {
    asio::steady_timer timer(zk_.get_executor());
    for (;;) {
        timer.expires_after(opts_.pending_sweep_interval);
        auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
        if (ec || stopping()) {
            co_return;
        }
        auto sweep = std::make_shared<countdown>(zk_.get_executor());
        auto to_list = std::make_shared<std::vector<std::uint32_t>>();
        for (std::uint32_t shard = 0; shard < l_.pending_shards; ++shard) {
            if (!followers_[shard].following()) {
                continue;  // not listed yet (its follow_shard is at it), or gone
            }
            ++sweep->left;
            // A handler, not a read_batch: its answer goes into the inbox in the order of the
            // session's answers, as the follower needs (a delete answered first is reflected
            // in the stat).
            zk_.async_exists(
                protocol::layout::pending_shard(shard),
                [box = inbox_, sweep, to_list,
                 shard](zkco::error_code e, std::optional<zkco::stat> st) {
                    box->push(answer::shard_stat{shard, e, st, sweep, to_list});
                }
            );
        }
        co_await sweep->wait();
        for (const auto shard : *to_list) {
            if (stopping()) {
                co_return;
            }
            co_await list_shard(shard);  // a failure: the next sweep looks again
        }
    }
}

/// The stat a sweep read of a shard: listed when its children moved by more than our deletes.
void master_session::apply(answer::shard_stat& s) {
    if (!s.ec && s.stat) {
        auto& f = followers_[s.shard];
        const auto st = to_dir_stat(*s.stat);
        // Data that moved: the data watch fires, its read decides.
        const auto& base = f.base();
        if (base && (base->czxid != st.czxid || base->version == st.version) &&
            f.read(st, std::nullopt) == protocol::log_follower::step::list) {
            s.to_list->push_back(s.shard);
        }
    }
    s.sweep->done();
}

}  // namespace zkd::roles::detail
