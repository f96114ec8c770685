// SPDX-License-Identifier: MIT
#pragma once

// The master's shell (master.cpp), its loops in files of their own: shards.cpp follows the
// pending shards, requeue.cpp takes a departed worker's tasks back (T6), stalls.cpp takes
// back what a live worker leaves unstarted, collect.cpp deletes results nobody consumed
// (T8), master_node.cpp keeps /master. Not API: run_master (master.hpp) is the door.

#include "protocol/change_log.hpp"
#include "protocol/layout.hpp"
#include "protocol/master_txn.hpp"
#include "reactor/task_group.hpp"
#include "roles/batcher.hpp"
#include "roles/master/master.hpp"
#include "zkco/client.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace zkd::roles::detail {

namespace asio = boost::asio;

/// The master's I/O: watchers that feed what they see to master_fsm (master_fsm.hpp),
/// the schedule loop that carries out its actions and hands the answers back, and what needs
/// no decisions of the fsm (T6 for departed workers, T8, /master, the epoch, the connection).
class master_session {
public:
    master_session(
        zkco::client& zk,
        protocol::layout l,
        protocol::member_info me,
        std::int64_t epoch,
        master_options opts,
        master_stats* stats
    );
    master_session(const master_session&) = delete;
    master_session& operator=(const master_session&) = delete;
    ~master_session();

    asio::awaitable<void> run();

private:
    using group_ops = std::vector<protocol::txn_op>;
    /// The answer to a transaction: the whole's error (for its message and whether it may be
    /// retried) and the per-op codes protocol's readers take.
    using on_done =
        std::function<void(master_session&, zkco::error_code, const protocol::txn_answer&)>;

    void wake() {
        dirty_ = true;
        wake_.cancel();
    }

    [[nodiscard]] bool stopping() const { return stop_ || zkco::is_terminal(zk_.state()); }

    void send(group_ops ops, on_done done);
    [[nodiscard]] std::vector<std::uint32_t> pending_deletes(const group_ops& ops) const;
    asio::awaitable<bool> recover(zkco::error_code ec, std::string what);
    template <class OnChange>
    asio::awaitable<void> follow(std::string path, OnChange on_change);
    template <class OnChange, class BeforeListing>
    asio::awaitable<void> follow(
        std::string path, OnChange on_change, BeforeListing before_listing
    );
    asio::awaitable<bool> workers_changed(std::vector<std::string> names);
    asio::awaitable<void> watch_worker(std::string id);
    asio::awaitable<void> follow_worker_dir(std::string id);
    asio::awaitable<void> until_dir_listing_wanted(std::string id, zkco::watch_event ev);
    asio::awaitable<bool> worker_dir_changed(std::string id, std::vector<std::string> names);
    asio::awaitable<bool> assign_dirs_changed(std::vector<std::string> names);
    asio::awaitable<void> load(std::vector<std::string> tids, std::vector<std::string> paths);
    void clear_foreign(const std::string& path);
    void start_clearing(const std::string& path);
    void arm_retry(std::optional<std::chrono::steady_clock::time_point> at);
    asio::awaitable<bool> cancels_changed(std::vector<std::string> names);
    asio::awaitable<void> schedule_loop();
    asio::awaitable<void> follow_connection();
    asio::awaitable<void> watch_epoch();
    void carry_out(master_action a);

    // shards.cpp
    asio::awaitable<void> follow_shard(std::uint32_t shard);
    void shard_read_done(std::uint32_t shard);
    bool shard_reads_in();
    [[nodiscard]] std::vector<std::pair<std::uint32_t, std::uint64_t>> reads_out() const;
    asio::awaitable<zkco::result<void>> list_shard(std::uint32_t shard);
    asio::awaitable<void> sweep_shards();
    void shard_seen(std::uint32_t shard);

    // requeue.cpp
    asio::awaitable<void> requeue_departed(std::string id);

    // stalls.cpp
    asio::awaitable<void> watch_stalls();
    asio::awaitable<void> check_stalled(std::string id, std::vector<std::string> names);

    // master_node.cpp
    asio::awaitable<void> report();
    void publish_suspects();
    asio::awaitable<void> keep_master_node();

    // collect.cpp
    /// What T8 knows of one directory below /results.
    struct result_dir_seen {
        std::int32_t cversion = 0;  ///< its children's version when last listed in full
        std::map<std::string, std::int64_t> results;  ///< result path -> ctime (ms)
    };
    asio::awaitable<void> collect_garbage();
    asio::awaitable<std::map<std::string, result_dir_seen>> list_results(
        std::map<std::string, result_dir_seen> dirs, const std::vector<std::string>& changed
    );

    /// Transactions a coroutine waits for (T6's, sent through the batcher; reads go through
    /// zkco::read_batch). Shared with the handlers, so that a coroutine cancelled early
    /// leaves them something alive to write to.
    struct countdown {
        explicit countdown(const asio::any_io_executor& ex)
            : timer(ex, asio::steady_timer::time_point::max()) {}
        std::size_t left = 0;
        std::size_t failed = 0;  // for callers that count failures
        asio::steady_timer timer;
        void done() {
            if (--left == 0) {
                timer.cancel();
            }
        }
        asio::awaitable<void> wait() {
            if (left > 0) {
                co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
            }
        }
    };

    zkco::client& zk_;
    protocol::layout l_;
    protocol::member_info me_;
    std::int64_t epoch_;
    master_options opts_;
    master_stats own_stats_;
    master_stats* stats_;
    multi_batcher batcher_;
    reactor::task_group group_;
    asio::steady_timer wake_;
    asio::steady_timer dir_listing_;  // never expires: cancelled to wake until_dir_listing_wanted
    master_fsm view_;  // the workers, pending tasks and cancels, and what to do about them
    std::shared_ptr<master_session*> self_;  // null once destroyed: late answers check it

    protocol::member_info master_node_;   // what /master says of us
    bool rewriting_master_node_ = false;  // keep_master_node's write is in flight
    asio::steady_timer retry_;            // wakes the loop when the view wants to look again

    bool dirty_ = true;
    bool stop_ = false;
    const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
    std::vector<bool> shard_listed_ = std::vector<bool>(l_.pending_shards, false);
    // Per pending shard: whether a read of its change log may be applied (§6).
    std::vector<protocol::log_follower> followers_ =
        std::vector<protocol::log_follower>(l_.pending_shards);
    std::map<std::string, std::uint32_t, std::less<>> shard_index_;  // shard path → shard
    std::vector<bool> shard_reading_ = std::vector<bool>(l_.pending_shards, false);
    std::vector<std::uint64_t> shard_reads_ = std::vector<std::uint64_t>(l_.pending_shards, 0);
    // The shard reads the schedule loop waits for: (shard, its reads done then).
    std::optional<std::vector<std::pair<std::uint32_t, std::uint64_t>>> awaited_reads_;
    bool reads_extended_ = false;  // awaited_reads_ holds the reads out once the first were in
    std::size_t shards_unlisted_ = l_.pending_shards;  // shards not listed once yet
    std::deque<std::pair<std::chrono::steady_clock::time_point, std::uint64_t>> finishes_;
};

}  // namespace zkd::roles::detail
