// SPDX-License-Identifier: MIT
#pragma once

// The master's shell (master.cpp) and its loops, in files of their own: shards.cpp follows the
// pending shards, requeue.cpp reads what T6 needs, stalls.cpp reads the assignments live
// workers leave unstarted, collect.cpp reads what T8 needs, master_node.cpp keeps /master in place.
// What they read goes to master_fsm, which decides. Not API: run_master (master.hpp) is.

#include "protocol/change_log.hpp"
#include "protocol/layout.hpp"
#include "protocol/master_txn.hpp"
#include "reactor/task_group.hpp"
#include "roles/master/detail/inbox.hpp"
#include "roles/master/detail/master_fsm.hpp"
#include "roles/master/master.hpp"
#include "roles/txn/batcher.hpp"
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
#include <variant>
#include <vector>

namespace zkd::roles::detail {

namespace asio = boost::asio;

/// Answers a coroutine waits for (the stats of a sweep of the pending shards): counted down
/// as they are taken from the inbox. Shared with the
/// events, so that a coroutine cancelled early leaves them something alive to count on.
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

/// What a transaction the master sent was for: what its answer changes.
namespace sent {
/// One of master_fsm's transactions: the answer goes back to it.
struct for_fsm {
    master_txn txn;
};
/// /master written again (keep_master_node).
struct master_node {};
/// Nothing to note (a marker deleted, /master's figures).
struct nothing {};
using purpose = std::variant<for_fsm, master_node, nothing>;
}  // namespace sent

/// What comes back to the schedule loop through the inbox.
namespace answer {
/// A transaction sent through the batcher ended.
struct txn {
    sent::purpose what;
    std::vector<std::uint32_t> deletes;  ///< pending shards it deletes a node of, once each
    zkco::error_code ec;
    std::vector<zkco::op_result> results;
};
/// The stat of a pending shard, read by sweep_shards.
struct shard_stat {
    std::uint32_t shard = 0;
    zkco::error_code ec;
    std::optional<zkco::stat> stat;
    std::shared_ptr<countdown> sweep;
    std::shared_ptr<std::vector<std::uint32_t>> to_list;
};
/// The data of a load action's tasks.
struct tasks {
    std::vector<task_read> reads;
};
/// What others wrote below `path` is deleted (or could not be).
struct cleared {
    std::string path;
};
/// The data of a read_delayed action's tasks.
struct delayed_nodes {
    std::vector<task_read> reads;
};
/// The time master_fsm asked to look again at has come.
struct retry_due {};
using event = std::variant<txn, shard_stat, tasks, cleared, delayed_nodes, retry_due>;
}  // namespace answer

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

    void wake() {
        dirty_ = true;
        wake_.cancel();
    }

    [[nodiscard]] bool stopping() const { return stop_ || zkco::is_terminal(zk_.state()); }

    /// Sends a fenced group; its answer comes back through the inbox.
    void send(group_ops ops, sent::purpose what);
    /// Applies what the inbox holds, in the order it came.
    void take_answers();
    /// Hands the fsm an event and carries out what it decides.
    void to_fsm(const master_event& e);
    /// A watcher's event: the answers before it first, then the event; then a step is due.
    void feed(const master_event& e);
    void carry_out(master_step step);
    void carry_out(master_do::read_tasks& a);
    void carry_out(master_do::assign& a);
    void carry_out(master_do::reject& a);
    void carry_out(master_do::cancel& a);
    void carry_out(master_do::clear_below& a);
    void carry_out(master_do::read_workers& a);
    void carry_out(master_do::follow_worker& a);
    void carry_out(master_do::list_departed& a);
    void carry_out(master_do::read_departed& a);
    void carry_out(master_do::requeue_task& a);
    void carry_out(master_do::remove_departed& a);
    void carry_out(master_do::remove_marker& a);
    void carry_out(master_do::read_assignments& a);
    void carry_out(master_do::take_back& a);
    void carry_out(master_do::stat_result_dirs& a);
    void carry_out(master_do::list_results& a);
    void carry_out(master_do::stat_results& a);
    void carry_out(master_do::collect& a);
    void carry_out(master_do::write_master& a);
    void carry_out(master_do::read_delayed& a);
    void carry_out(master_do::release& a);
    /// One of the fsm's transactions: sent, and the same action comes back with its answer
    /// (its ops moved out).
    template <class Txn>
    void send_txn(Txn& a) {
        auto ops = std::move(a.ops);
        send(std::move(ops), sent::for_fsm{master_txn(std::move(a))});
    }
    asio::awaitable<void> read_workers(std::vector<std::string> ids);
    void apply(answer::txn& a);
    void apply(answer::shard_stat& s);
    void apply(answer::tasks& t);
    void apply(answer::cleared& c);
    void apply(answer::delayed_nodes& d);
    void apply(answer::retry_due& /*r*/) {}  // nothing but a step
    // What an answer to a transaction changes, by what it was for (each with its loop).
    void answered(sent::for_fsm& s, zkco::error_code ec, const protocol::txn_answer& r);
    void answered(sent::master_node& s, zkco::error_code ec, const protocol::txn_answer& r);
    void
    answered(sent::nothing& /*s*/, zkco::error_code /*ec*/, const protocol::txn_answer& /*r*/) {}
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
    void start_clearing(const std::string& path);
    void arm_retry(std::optional<std::chrono::steady_clock::time_point> at);
    asio::awaitable<bool> cancels_changed(std::vector<std::string> names);
    asio::awaitable<void> schedule_loop();
    asio::awaitable<void> follow_connection();
    asio::awaitable<void> watch_epoch();

    // shards.cpp
    asio::awaitable<void> follow_shard(std::uint32_t shard);
    asio::awaitable<zkco::result<void>> list_shard(std::uint32_t shard);
    asio::awaitable<void> sweep_shards();
    // The delayed shards (T10), followed like the pending ones, by their change logs; no
    // sweep: while they wait, delayed tasks cost ZooKeeper nothing.
    asio::awaitable<void> follow_delayed_shard(std::uint32_t shard);
    asio::awaitable<zkco::result<void>> list_delayed_shard(std::uint32_t shard);
    asio::awaitable<void> load_delayed(
        std::vector<std::string> tids, std::vector<std::string> paths
    );

    // requeue.cpp
    asio::awaitable<void> list_departed(std::string worker);
    asio::awaitable<void> read_departed(
        std::string worker, std::vector<std::string> tids, std::vector<std::string> paths
    );

    // stalls.cpp
    asio::awaitable<void> watch_stalls();

    // master_node.cpp
    asio::awaitable<void> report();
    asio::awaitable<void> keep_master_node();

    // collect.cpp
    asio::awaitable<void> collect_garbage();

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
    /// A directory began waiting for its listing since dir_listing_ was last cancelled.
    bool dir_listing_waiters_ = false;
    master_fsm fsm_;  // the workers, pending tasks and cancels, and what to do about them

    asio::steady_timer retry_;  // wakes the loop when the fsm wants to look again
    // Answers to what the master sent and read; closed when the session ends.
    std::shared_ptr<inbox<answer::event>> inbox_ = std::make_shared<inbox<answer::event>>(wake_);

    bool dirty_ = true;
    bool stop_ = false;
    // Per pending shard, then per delayed shard (at pending_shards + s): whether a read of
    // its change log may be applied (§6).
    std::vector<protocol::log_follower> followers_ =
        std::vector<protocol::log_follower>(2 * static_cast<std::size_t>(l_.pending_shards));
    // Shard path → its follower's index (a delayed shard's: pending_shards + s).
    std::map<std::string, std::uint32_t, std::less<>> shard_index_;
};

}  // namespace zkd::roles::detail
