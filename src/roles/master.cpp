// SPDX-License-Identifier: MIT
// The master's I/O shell (its decisions are in master_view.cpp, its transactions in
// protocol/master_txn.cpp); T6, T8, /master and the epoch watch are I/O loops of their own
// that the view does not decide, hence over 700 lines.
#include "roles/master.hpp"

#include "protocol/change_log.hpp"
#include "protocol/ids.hpp"
#include "protocol/master_txn.hpp"
#include "reactor/task_group.hpp"
#include "roles/client/inspect.hpp"
#include "roles/cluster/election.hpp"
#include "roles/cluster/namespace.hpp"
#include "roles/cluster/foreign.hpp"
#include "roles/txn/batcher.hpp"
#include "roles/txn/zk_ops.hpp"
#include "zkco/read_batch.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <memory>
#include <set>

namespace asio = boost::asio;

namespace zkd::roles {

namespace {

/// The master's I/O: watchers that feed what they see to master_state (master_view.hpp),
/// the schedule loop that carries out its actions and hands the answers back, and what needs
/// no decisions of the view (T6 for departed workers, T8, /master, the epoch, the connection).
master_state::options view_options(const master_options& o) {
    master_state::options v;
    v.policy = o.policy;
    v.unknown_type_grace = o.unknown_type_grace;
    v.on_assigned = o.on_assigned;
    v.unstarted_bound = o.unstarted_bound;
    return v;
}

class master_session {
public:
    master_session(
        zkco::client& zk,
        protocol::layout l,
        protocol::member_info me,
        std::int64_t epoch,
        master_options opts,
        master_stats* stats
    )
        : zk_(zk),
          l_(l),
          me_(std::move(me)),
          epoch_(epoch),
          opts_(opts),
          stats_(stats != nullptr ? stats : &own_stats_),
          batcher_(zk),
          group_(zk.get_executor()),
          wake_(zk.get_executor()),
          dir_listing_(zk.get_executor(), asio::steady_timer::time_point::max()),
          view_(l, epoch, view_options(opts), *stats_),
          self_(std::make_shared<master_session*>(this)),
          retry_(zk.get_executor(), asio::steady_timer::time_point::max()) {
        // Every master transaction fails once a newer master has bumped the epoch.
        batcher_.set_prefix({zkco::op::check{
            protocol::layout::epoch(), static_cast<std::int32_t>(epoch)}});
        // T2 and T7 create in workers' directories, T6 in pending shards: logged there (§6).
        batcher_.enable_change_logs();
        for (std::uint32_t shard = 0; shard < l_.pending_shards; ++shard) {
            shard_index_.emplace(protocol::layout::pending_shard(shard), shard);
        }
        master_node_ = me_;
        master_node_.epoch = epoch;
        master_node_.max_pending = protocol::published_bound(opts.max_pending);
        master_node_.direct = opts.direct_placement;
        if (master_node_.since_ms == 0) {
            master_node_.since_ms = protocol::now_ms();
        }
    }
    master_session(const master_session&) = delete;
    master_session& operator=(const master_session&) = delete;
    ~master_session() { *self_ = nullptr; }

    asio::awaitable<void> run() {
        co_await asio::this_coro::throw_if_cancelled(false);
        stats_->deposed = false;
        group_.spawn([this] { return collect_garbage(); }, "gc");
        group_.spawn([this] { return report(); }, "report");
        group_.spawn([this] { return watch_epoch(); }, "epoch");
        group_.spawn([this] { return keep_master_node(); }, "master");
        group_.spawn([this] { return follow_connection(); }, "connection");
        group_.spawn(
            [this] {
                return follow(protocol::layout::workers_dir(), [this](std::vector<std::string> n) {
                    return workers_changed(std::move(n));
                });
            },
            "workers"
        );
        group_.spawn(
            [this] {
                return follow(protocol::layout::assign_dir(), [this](std::vector<std::string> n) {
                    return assign_dirs_changed(std::move(n));
                });
            },
            "assign"
        );
        group_.spawn(
            [this] {
                return follow(protocol::layout::cancel_dir(), [this](std::vector<std::string> n) {
                    return cancels_changed(std::move(n));
                });
            },
            "cancel"
        );
        for (std::uint32_t shard = 0; shard < l_.pending_shards; ++shard) {
            group_.spawn([this, shard] { return follow_shard(shard); }, "pending");
        }
        group_.spawn([this] { return sweep_shards(); }, "sweep");
        group_.spawn([this] { return watch_stalls(); }, "stalls");
        co_await schedule_loop();
        if (opts_.on_acting) {
            opts_.on_acting(false);
        }
        stop_ = true;
        retry_.cancel();
        group_.emit(asio::cancellation_type::terminal);
        co_await group_.async_wait(asio::as_tuple(asio::use_awaitable));
        // Answers to what we sent touch this session: wait for them (they end with the session).
        // (A session that ends completes them all with its error.)
        while (batcher_.outstanding() > 0) {
            co_await batcher_.async_wait_idle(asio::as_tuple(asio::use_awaitable));
        }
        if (stats_->deposed) {
            spdlog::warn("master {}: deposed (epoch {} is no longer current)", me_.id, epoch_);
        }
    }

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

    /// Sends a fenced group; `done` runs only while this session exists.
    void send(group_ops ops, on_done done) {
        auto deletes = pending_deletes(ops);
        batcher_.async_submit(
            to_zkco(std::move(ops)),
            [self = self_, done = std::move(done),
             deletes = std::move(deletes)](zkco::error_code ec, std::vector<zkco::op_result> r) {
                if (*self == nullptr) {
                    return;
                }
                auto& m = **self;
                if (!ec) {
                    // Our own deletes move the shards' cversion: their followers expect it.
                    for (const auto shard : deletes) {
                        m.followers_[shard].removed();
                    }
                }
                if (epoch_check_failed(ec, r)) {
                    m.stats_->deposed = true;
                    m.stop_ = true;
                }
                done(m, ec, to_answer(ec, r));
                m.wake();
            }
        );
    }

    /// The pending shard of each pending node `ops` delete (T2, T7 on a pending task, a
    /// rejection), once per node.
    [[nodiscard]] std::vector<std::uint32_t> pending_deletes(const group_ops& ops) const {
        std::vector<std::uint32_t> shards;
        for (const auto& op : ops) {
            if (op.what != protocol::txn_op::kind::remove) {
                continue;
            }
            const auto slash = op.path.rfind('/');
            if (slash == std::string::npos) {
                continue;
            }
            const auto it = shard_index_.find(std::string_view(op.path).substr(0, slash));
            if (it != shard_index_.end()) {
                shards.push_back(it->second);
            }
        }
        return shards;
    }

    /// Stops the master on a lost session; true to go on after a retryable error.
    asio::awaitable<bool> recover(zkco::error_code ec, std::string what) {
        if (!stopping()) {
            const bool back = co_await reconnected_after(zk_, ec);
            if (back) {
                co_return true;
            }
        }
        if (!stop_) {
            spdlog::warn("master {}: stops watching {}: {}", me_.id, what, ec.message());
        }
        stop_ = true;
        wake();
        co_return false;
    }

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

    // --- watchers: they keep the view, the schedule loop acts on it ----------------------

    /// Lists `path`'s children and calls `on_change` with them, again after every change,
    /// until stopping, until `on_change` says false, or until the node is gone.
    template <class OnChange>
    asio::awaitable<void> follow(std::string path, OnChange on_change) {
        auto at_once = [](const zkco::watch_event&) -> asio::awaitable<void> { co_return; };
        return follow(std::move(path), std::move(on_change), at_once);
    }

    /// As follow(), and after a change, `before_listing(event)` decides when to list again.
    template <class OnChange, class BeforeListing>
    asio::awaitable<void> follow(
        std::string path, OnChange on_change, BeforeListing before_listing
    ) {
        while (!stopping()) {
            auto kids = co_await zk_.watch_children(path);
            if (!kids) {
                if (kids.error() == zkco::errc::no_node) {
                    co_return;
                }
                const bool go_on = co_await recover(kids.error(), path);
                if (!go_on) {
                    co_return;
                }
                continue;
            }
            const bool more = co_await on_change(std::move(kids->value.names));
            wake();
            if (!more) {
                co_return;
            }
            auto ev = co_await kids->watch.changed();
            if (!ev) {
                const bool go_on = co_await recover(ev.error(), path);
                if (!go_on) {
                    co_return;
                }
            } else {
                co_await before_listing(*ev);
            }
        }
    }

    asio::awaitable<bool> workers_changed(std::vector<std::string> names) {
        auto change = view_.workers_listed(names);
        for (auto& id : change.departed) {
            group_.spawn([this, id = std::move(id)] { return requeue_departed(id); }, "requeue");
        }
        std::vector<std::string> paths;
        paths.reserve(change.to_read.size());
        for (const auto& id : change.to_read) {
            paths.push_back(protocol::layout::worker(id));
        }
        auto nodes = co_await zkco::get_all(zk_, paths);
        for (std::size_t i = 0; i < change.to_read.size(); ++i) {
            if (!nodes[i]) {
                continue;  // gone again
            }
            const auto& id = change.to_read[i];
            if (view_.worker_read(id, nodes[i]->data, is_ephemeral(nodes[i]->stat))) {
                group_.spawn([this, id] { return watch_worker(id); }, "worker");
                group_.spawn([this, id] { return follow_worker_dir(id); }, "assign");
            }
        }
        co_return true;
    }

    /// Follows a live worker's node: a worker says `draining` there when it shuts down.
    asio::awaitable<void> watch_worker(std::string id) {
        while (!stopping()) {
            auto w = co_await zk_.watch_get(protocol::layout::worker(id));
            if (!w) {
                if (w.error() == zkco::errc::no_node) {
                    co_return;  // gone: workers_changed handles it
                }
                const bool go_on = co_await recover(w.error(), protocol::layout::worker(id));
                if (!go_on) {
                    co_return;
                }
                continue;
            }
            if (!view_.worker_updated(id, w->value.data)) {
                co_return;
            }
            wake();
            auto ev = co_await w->watch.changed();
            if (!ev) {
                const bool go_on = co_await recover(ev.error(), protocol::layout::worker(id));
                if (!go_on) {
                    co_return;
                }
            }
        }
    }

    /// Follows a live worker's assignment directory. Should someone delete it, nothing can
    /// be assigned there until it is back (the worker makes it again): wait for it.
    asio::awaitable<void> follow_worker_dir(std::string id) {
        const std::string dir = protocol::layout::assign_dir(id);
        // Named, not written inside the co_await: GCC 12 destroys such lambdas twice.
        auto changed = [this, id](std::vector<std::string> n) {
            return worker_dir_changed(id, std::move(n));
        };
        auto when_wanted = [this, id](const zkco::watch_event& ev) {
            return until_dir_listing_wanted(id, ev);
        };
        while (!stopping()) {
            co_await follow(dir, changed, when_wanted);
            if (stopping() || !view_.worker_dir_missing(id)) {
                co_return;
            }
            auto w = co_await zk_.watch_exists(dir);
            if (!w) {
                const bool go_on = co_await recover(w.error(), dir);
                if (!go_on) {
                    co_return;
                }
                continue;
            }
            if (!w->value) {
                auto ev = co_await w->watch.changed();
                if (!ev) {
                    const bool go_on = co_await recover(ev.error(), dir);
                    if (!go_on) {
                        co_return;
                    }
                }
            }
            view_.worker_dir_back(id);
        }
    }

    /// A live worker's directory changed: lists it again at once if it was deleted, else
    /// once the view needs it (master_state::worker_dir_listing_wanted). Most changes are
    /// our own assignments; the slots T4 frees are counted when the count is in the way.
    asio::awaitable<void> until_dir_listing_wanted(std::string id, zkco::watch_event ev) {
        if (ev.type != zkco::event_type::child) {
            co_return;
        }
        view_.worker_dir_touched(id);
        for (;;) {
            auto cs = co_await asio::this_coro::cancellation_state;
            if (stopping() || cs.cancelled() != asio::cancellation_type::none ||
                view_.worker_dir_listing_wanted(id)) {
                co_return;
            }
            // Woken after every step of the schedule loop (its expiry never comes).
            co_await dir_listing_.async_wait(asio::as_tuple(asio::use_awaitable));
        }
    }

    asio::awaitable<bool> worker_dir_changed(std::string id, std::vector<std::string> names) {
        const auto done = view_.worker_dir_listed(id, names);
        if (!done) {
            co_return false;  // departed: requeue_departed owns the directory now
        }
        if (*done > 0) {
            finishes_.emplace_back(std::chrono::steady_clock::now(), *done);
        }
        co_return true;
    }

    /// Directories of workers that are gone: at takeover (a dead master's leftovers), and
    /// whenever a directory appears without its worker.
    asio::awaitable<bool> assign_dirs_changed(std::vector<std::string> names) {
        auto live = co_await zk_.get_children(protocol::layout::workers_dir());
        if (!live) {
            co_return true;  // the next change looks again
        }
        const std::set<std::string> alive(live->names.begin(), live->names.end());
        for (auto& id : view_.assign_dirs_listed(names, alive)) {
            group_.spawn([this, id = std::move(id)] { return requeue_departed(id); }, "requeue");
        }
        co_return true;
    }

    /// Follows a pending shard by its change log (§6, §7): a data watch, which the master's
    /// own deletes do not fire. A read the shard's log_follower may apply adds the tasks it
    /// names (with their data, when they are read next anyway); anything else is listed.
    asio::awaitable<void> follow_shard(std::uint32_t shard) {
        const std::string path = protocol::layout::pending_shard(shard);
        while (!stopping()) {
            shard_reading_[shard] = true;
            auto got = co_await zk_.watch_get(path);
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
                    view_.shard_logged(shard, std::move(log->created));
                    wake();
                } else if (step == protocol::log_follower::step::list) {
                    auto listed = co_await list_shard(shard);
                    if (!listed) {
                        failed = listed.error();
                    } else if (log) {
                        // What the log of the last transaction carried is good for the tasks
                        // it created that the listing found, so they are not read again.
                        view_.shard_logged(shard, std::move(log->created), true);
                    }
                }
            }
            shard_read_done(shard);
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
        shard_seen(shard);  // the shard is gone, or we stop: nothing to wait for
        wake();
    }

    void shard_read_done(std::uint32_t shard) {
        shard_reading_[shard] = false;
        ++shard_reads_[shard];
        wake_.cancel();  // the schedule loop may wait for it (shard_reads_in)
    }

    /// True once every read of a pending shard that was out when the schedule loop last
    /// wanted to decide is in, and then every read out at that moment. One transaction may
    /// create tasks in several shards (a T1 of many tasks): their data watches fire before any
    /// later answer comes, so once a read sent for one of them is answered, the reads for the
    /// others are out (the loop may have wanted to decide between two of those watches);
    /// waiting for them too sees the transaction whole and keeps the queue's order across its
    /// shards (§3). The wait is extended once: reads sent later do not extend it again.
    bool shard_reads_in() {
        if (!awaited_reads_) {
            awaited_reads_ = reads_out();
            reads_extended_ = false;
        }
        for (const auto& [shard, done] : *awaited_reads_) {
            if (shard_reads_[shard] == done) {
                return false;
            }
        }
        if (!reads_extended_ && !awaited_reads_->empty()) {
            reads_extended_ = true;
            awaited_reads_ = reads_out();
            if (!awaited_reads_->empty()) {
                return false;
            }
        }
        awaited_reads_.reset();
        return true;
    }

    /// The pending shards being read now, each with its count of reads answered.
    [[nodiscard]] std::vector<std::pair<std::uint32_t, std::uint64_t>> reads_out() const {
        std::vector<std::pair<std::uint32_t, std::uint64_t>> out;
        for (std::uint32_t shard = 0; shard < l_.pending_shards; ++shard) {
            if (shard_reading_[shard]) {
                out.emplace_back(shard, shard_reads_[shard]);
            }
        }
        return out;
    }

    /// Lists a pending shard: the view and its follower are as the shard stood then.
    asio::awaitable<zkco::result<void>> list_shard(std::uint32_t shard) {
        auto kids = co_await zk_.get_children(protocol::layout::pending_shard(shard));
        if (!kids) {
            co_return kids.error();
        }
        ++stats_->shard_listings;
        // Nothing between the answer and these: a delete of ours answered later is counted
        // after the listing, as the follower wants.
        followers_[shard].listed(to_dir_stat(kids->stat));
        view_.shard_listed(shard, std::move(kids->names));
        shard_seen(shard);
        wake();
        co_return zkco::result<void>();
    }

    /// Finds what a writer that keeps no change log did to a pending shard (a client of
    /// protocol format 1 cannot connect, but anyone may create or delete a node there):
    /// every pending_sweep_interval, the stat of every followed shard, read at once. A
    /// shard whose data moved is left to its data watch, which will read it; one whose
    /// children moved by more than our own deletes is listed.
    asio::awaitable<void> sweep_shards() {
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
                // A handler, not a read_batch: it runs in the order of the session's answers,
                // as the follower needs (a delete answered first is reflected in the stat).
                zk_.async_exists(
                    protocol::layout::pending_shard(shard),
                    [self = self_, sweep, to_list,
                     shard](zkco::error_code e, std::optional<zkco::stat> st) {
                        if (*self != nullptr && !e && st) {
                            auto& f = (*self)->followers_[shard];
                            const auto s = to_dir_stat(*st);
                            // Data that moved: the data watch fires, its read decides.
                            const auto& base = f.base();
                            if (base && (base->czxid != s.czxid || base->version == s.version) &&
                                f.read(s, std::nullopt) == protocol::log_follower::step::list) {
                                to_list->push_back(shard);
                            }
                        }
                        sweep->done();
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

    /// The queue is ordered across shards (§3): until every pending shard has been listed
    /// once, the head of what was listed may not be the head of the queue, so a new master
    /// decides nothing before (a backlog of 1,000,000 is listed in a few seconds).
    void shard_seen(std::uint32_t shard) {
        if (shard >= shard_listed_.size() || shard_listed_[shard]) {
            return;
        }
        shard_listed_[shard] = true;
        if (--shards_unlisted_ == 0) {
            spdlog::info(
                "master {}: {} pending shards listed, {} pending task(s), in {} ms", me_.id,
                l_.pending_shards, view_.queue_depth(),
                std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::steady_clock::now() - started_
                )
                    .count()
            );
        }
    }

    /// Reads the data of the pending tasks the view asks for, then tells it.
    asio::awaitable<void> load(std::vector<std::string> tids, std::vector<std::string> paths) {
        stats_->task_reads += tids.size();
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
        if (view_.tasks_loaded(reads)) {
            // Not while disconnected in a tight loop: the next batch waits a moment.
            asio::steady_timer pause(zk_.get_executor(), std::chrono::milliseconds(100));
            co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
        }
        view_.load_finished();
        wake();
    }

    /// Deletes what others wrote below a node of ours (§8), once at a time per node, so the
    /// transaction that deletes the node can succeed; the schedule loop tries again after.
    void clear_foreign(const std::string& path) {
        if (view_.begin_clearing(path)) {
            start_clearing(path);
        }
    }

    /// Clears `path` for the view (it has begun clearing it).
    void start_clearing(const std::string& path) {
        group_.spawn(
            [this, path]() -> asio::awaitable<void> {
                auto removed = co_await remove_children(zk_, path);
                if (removed) {
                    spdlog::warn(
                        "master: deleted {} node(s) someone else wrote below {}", *removed, path
                    );
                } else {
                    spdlog::warn(
                        "master: cannot delete what someone else wrote below {}: {}", path,
                        removed.error().message()
                    );
                }
                view_.foreign_cleared(path);
                wake();
            },
            "foreign"
        );
    }

    /// Wakes the schedule loop at `at` (a task in trouble may be tried again, a type's grace
    /// ends): the view's earliest such time.
    void arm_retry(std::optional<std::chrono::steady_clock::time_point> at) {
        if (!at || *at == retry_.expiry()) {
            return;
        }
        retry_.expires_at(*at);
        retry_.async_wait([self = self_](zkco::error_code e) {
            if (!e && *self != nullptr) {
                (*self)->wake();
            }
        });
    }

    asio::awaitable<bool> cancels_changed(std::vector<std::string> names) {
        view_.cancels_listed(names);
        co_return true;
    }

    // --- T6: a departed worker's tasks back to pending (or lost) -------------------------

    asio::awaitable<void> requeue_departed(std::string id) {
        const std::string dir = protocol::layout::assign_dir(id);
        auto backoff = std::chrono::milliseconds(100);
        bool counted = false;  // said how many tasks it left (its first listing)
        while (!stopping()) {
            auto kids = co_await zk_.get_children(dir);
            if (!kids) {
                if (kids.error() == zkco::errc::no_node) {
                    break;
                }
                const bool go_on = co_await recover(kids.error(), dir);
                if (!go_on) {
                    break;
                }
                continue;
            }
            std::set<std::string> markers;
            std::vector<std::string> tids;
            for (const auto& name : kids->names) {
                if (protocol::is_cancel_marker(name)) {
                    markers.emplace(protocol::marker_task(name));
                } else {
                    tids.push_back(name);
                }
            }
            if (!counted) {
                // Counted from its directory: it holds what clients placed there directly too.
                spdlog::info("master: worker {} left {} task(s) to take back", id, tids.size());
                counted = true;
            }
            if (tids.empty()) {
                for (const auto& tid : markers) {
                    send(
                        protocol::remove_marker_ops(id, tid),
                        [](master_session&, zkco::error_code, auto&) {}
                    );
                }
                auto [ec, r] = co_await batcher_.async_submit(
                    to_zkco(protocol::remove_departed_dir_ops(id)),
                    asio::as_tuple(asio::use_awaitable)
                );
                if (!ec || ec == zkco::errc::no_node || stopping()) {
                    break;
                }
                // Not empty yet (a marker, or an assignment racing in): look again, after a
                // pause should it keep failing.
                asio::steady_timer pause(zk_.get_executor(), backoff);
                co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
                backoff = std::min(backoff * 2, std::chrono::milliseconds(5000));
                continue;
            }
            std::vector<std::string> paths;
            paths.reserve(tids.size());
            for (const auto& tid : tids) {
                paths.push_back(zkco::join_path(dir, tid));
            }
            auto nodes = co_await zkco::get_all(zk_, paths);
            auto pending = std::make_shared<countdown>(zk_.get_executor());
            for (std::size_t i = 0; i < tids.size(); ++i) {
                if (!nodes[i]) {
                    continue;
                }
                const auto& tid = tids[i];
                auto plan = protocol::departed_ops(
                    l_, id, tid, nodes[i]->data, markers.contains(tid), protocol::now_ms()
                );
                ++pending->left;
                send(
                    std::move(plan.ops),
                    [pending, tid, kind = plan.kind, attempt = plan.attempt, path = paths[i]](
                        master_session& m, zkco::error_code, const protocol::txn_answer& a
                    ) {
                        const auto outcome = protocol::read_departed(a);
                        if (outcome == protocol::departed_outcome::foreign_below) {
                            m.clear_foreign(path);  // someone wrote below the assignment
                        }
                        if (outcome != protocol::departed_outcome::committed) {
                            ++pending->failed;
                        } else if (kind == protocol::departed_kind::lost) {
                            ++m.stats_->lost;
                            spdlog::warn(
                                "master: task {} quarantined as lost after {} attempt(s)", tid,
                                attempt
                            );
                        } else if (kind == protocol::departed_kind::requeue) {
                            ++m.stats_->requeued;
                            spdlog::info("master: task {} requeued (attempt {})", tid, attempt + 1);
                        } else if (kind == protocol::departed_kind::cancel) {
                            ++m.stats_->cancelled;
                        } else {
                            ++m.stats_->rejected;
                        }
                        pending->done();
                    }
                );
            }
            co_await pending->wait();
            if (pending->failed > 0) {
                // Not in a tight loop: what failed is looked at again after a pause.
                asio::steady_timer pause(zk_.get_executor(), backoff);
                co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
                backoff = std::min(backoff * 2, std::chrono::milliseconds(5000));
            }
        }
        view_.departed_done(id);
        wake();
    }

    // --- the schedule loop ---------------------------------------------------------------

    asio::awaitable<void> schedule_loop() {
        for (;;) {
            auto cs = co_await asio::this_coro::cancellation_state;
            if (stopping() || cs.cancelled() != asio::cancellation_type::none) {
                co_return;
            }
            if (!dirty_ || shards_unlisted_ > 0 || !shard_reads_in()) {
                wake_.expires_at(asio::steady_timer::time_point::max());
                co_await wake_.async_wait(asio::as_tuple(asio::use_awaitable));
                continue;
            }
            dirty_ = false;
            auto step = view_.next(std::chrono::steady_clock::now());
            for (auto& a : step.actions) {
                carry_out(std::move(a));
            }
            dir_listing_.cancel();  // directories waiting to be listed look whether they must
            arm_retry(step.wake_at);
            if (opts_.on_queue_depth) {
                opts_.on_queue_depth(view_.queue_depth());
            }
        }
    }

    // --- stalled workers: assignments left unstarted ---------------------------------------

    /// Every stall_watch period: lists each live worker's directory (at once), reads the
    /// assignments stall_watch asks about, takes back those left unstarted past the bound
    /// (T6 for one task, at the version read: a running mark written meanwhile keeps it), and
    /// names the suspects in /master.
    asio::awaitable<void> watch_stalls() {
        auto& stalls = view_.stalls();
        if (!stalls.enabled()) {
            co_return;
        }
        asio::steady_timer timer(zk_.get_executor());
        for (;;) {
            timer.expires_after(stalls.period());
            auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
            if (ec || stopping()) {
                co_return;
            }
            const auto ids = view_.live_workers();
            zkco::read_batch batch(zk_);
            std::vector<zkco::read_batch::slot<zkco::children>> lists;
            lists.reserve(ids.size());
            for (const auto& id : ids) {
                lists.push_back(batch.get_children(protocol::layout::assign_dir(id)));
            }
            if (auto all = co_await batch.wait(); !all) {
                continue;  // the next round looks again
            }
            for (std::size_t i = 0; i < ids.size() && !stopping(); ++i) {
                if (*lists[i]) {
                    co_await check_stalled(ids[i], (*lists[i])->names);
                }
            }
            publish_suspects();
            wake();  // a suspect gets nothing, or its probe
        }
    }

    /// One live worker's directory as listed: reads what stall_watch asks about, and takes
    /// back what it says.
    asio::awaitable<void> check_stalled(std::string id, std::vector<std::string> names) {
        auto& stalls = view_.stalls();
        std::set<std::string> tids;
        std::set<std::string> marked;
        for (auto& name : names) {
            if (protocol::is_cancel_marker(name)) {
                marked.emplace(protocol::marker_task(name));
            } else {
                tids.insert(std::move(name));
            }
        }
        const auto ask = stalls.listed(id, tids);
        if (ask.empty()) {
            co_return;
        }
        std::vector<std::string> paths;
        paths.reserve(ask.size());
        for (const auto& tid : ask) {
            paths.push_back(protocol::layout::assignment(id, tid));
        }
        auto nodes = co_await zkco::get_all(zk_, paths);
        const auto now_ms = protocol::now_ms();
        std::vector<stall_watch::assignment> reads;
        std::map<std::string, const zkco::node*> read_nodes;
        for (std::size_t i = 0; i < ask.size(); ++i) {
            stall_watch::assignment a;
            a.tid = ask[i];
            if (!nodes[i]) {
                if (nodes[i].error() != zkco::errc::no_node) {
                    continue;  // not read: asked again next round
                }
                a.gone = true;
            } else {
                const auto spec = protocol::decode_task(nodes[i]->data);
                a.running = spec && spec->running_ms != 0;
                // Since it was assigned; for data that is no task, since the node was made.
                const auto since =
                    spec && spec->assigned_ms > 0 ? spec->assigned_ms : nodes[i]->stat.ctime;
                a.age_ms = now_ms - since;
                read_nodes[a.tid] = &*nodes[i];
            }
            reads.push_back(std::move(a));
        }
        const auto verdict = stalls.read(id, reads);
        if (verdict.now_suspect) {
            spdlog::warn(
                "master: worker {} left {} assignment(s) unstarted for {} ms or more: taken "
                "back; it is suspect (a probe at most) until it runs a task",
                id, verdict.take_back.size(), opts_.unstarted_bound.count()
            );
        } else if (verdict.trusted_again) {
            spdlog::info("master: worker {} runs tasks again; no longer suspect", id);
        }
        for (const auto& tid : verdict.take_back) {
            const auto* node = read_nodes.at(tid);
            auto plan = protocol::departed_ops(
                l_, id, tid, node->data, marked.contains(tid), now_ms, node->stat.version
            );
            send(
                std::move(plan.ops),
                [tid, id, kind = plan.kind](
                    master_session& m, zkco::error_code, const protocol::txn_answer& a
                ) {
                    if (protocol::read_departed(a) != protocol::departed_outcome::committed) {
                        return;  // started meanwhile, or finished: the next round looks again
                    }
                    ++m.stats_->taken_back;
                    if (kind == protocol::departed_kind::requeue) {
                        ++m.stats_->requeued;
                    } else if (kind == protocol::departed_kind::lost) {
                        ++m.stats_->lost;
                    }
                    spdlog::info("master: task {} taken back from worker {}", tid, id);
                }
            );
        }
    }

    /// Names the suspects in /master when they changed (clients placing directly skip them).
    void publish_suspects() {
        auto suspects = view_.stalls().suspects();
        stats_->suspects = suspects.size();
        if (suspects.size() > protocol::max_suspects_named) {
            suspects.resize(protocol::max_suspects_named);
        }
        if (suspects == master_node_.suspects) {
            return;
        }
        master_node_.suspects = std::move(suspects);
        send(
            protocol::master_report_ops(master_node_),
            [](master_session&, zkco::error_code, auto&) {}
        );
    }

    // --- T8: results nobody consumed -----------------------------------------------------

    /// What T8 knows of one directory below /results.
    struct result_dir_seen {
        std::int32_t cversion = 0;  ///< its children's version when last listed in full
        std::map<std::string, std::int64_t> results;  ///< result path -> ctime (ms)
    };

    /// T8, every gc_interval: lists /results (the result shards and the clients' directories,
    /// list_result_dirs), reads the stat of up to gc_dirs_per_sweep of them at once (the next
    /// sweep goes on after the last), lists again only those whose children changed since
    /// they were last listed (cversion), reads the ctime of each result not seen before, and
    /// deletes the results older than result_retention. A client's
    /// directory (never a result shard) whose stat shows no children, and a ctime and mtime
    /// both older than the retention, is deleted too, at the version that stat showed: a
    /// result created in it since fails the delete (not_empty), and so does a change to its
    /// data (bad_version); the next sweep looks again, as after any failure.
    asio::awaitable<void> collect_garbage() {
        asio::steady_timer timer(zk_.get_executor());
        std::map<std::string, result_dir_seen> known;  // directory -> what the last sweep saw
        std::string swept_to;  // the last directory the last sweep looked at
        for (;;) {
            timer.expires_after(opts_.gc_interval);
            auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
            if (ec || stopping()) {
                co_return;
            }
            const std::int64_t cutoff = protocol::now_ms() - opts_.result_retention.count();
            auto all_dirs = co_await list_result_dirs(zk_);
            if (!all_dirs) {
                continue;  // the next sweep looks again
            }
            std::sort(all_dirs->begin(), all_dirs->end());
            auto window = sweep_window(*all_dirs, swept_to, opts_.gc_dirs_per_sweep);
            swept_to = std::move(window.next_after);
            const std::vector<std::string>& in_window = window.dirs;
            const auto* dirs = &in_window;
            auto stats = co_await zkco::exists_all(zk_, *dirs);
            // What is known of the directories this sweep does not look at stays known.
            std::map<std::string, result_dir_seen> now;
            for (const auto& dir : *all_dirs) {
                if (auto it = known.find(dir);
                    it != known.end() &&
                    !std::binary_search(in_window.begin(), in_window.end(), dir)) {
                    now.insert(known.extract(it));
                }
            }
            std::vector<std::string> changed;
            std::vector<std::pair<std::string, zkco::stat>> empty_clients;
            for (std::size_t i = 0; i < dirs->size(); ++i) {
                if (!stats[i] || !*stats[i]) {
                    continue;  // gone, or not read: listed afresh when seen again
                }
                const auto& st = **stats[i];
                const auto& dir = (*dirs)[i];
                const auto name = std::string_view(dir).substr(dir.rfind('/') + 1);
                if (protocol::layout::is_client_results(name) && st.num_children == 0 &&
                    st.ctime < cutoff && st.mtime < cutoff) {
                    empty_clients.emplace_back(dir, st);
                    continue;
                }
                auto& seen = now[dir];
                if (auto it = known.find(dir); it != known.end()) {
                    seen = std::move(it->second);
                    if (seen.cversion == st.cversion) {
                        continue;  // no child came or went since it was listed
                    }
                }
                seen.cversion = st.cversion;
                changed.push_back(dir);
            }
            known = co_await list_results(std::move(now), changed);
            std::size_t expired = 0;
            for (const auto& [dir, seen] : known) {
                if (!std::binary_search(in_window.begin(), in_window.end(), dir)) {
                    continue;  // not looked at now: its results are as the sweep that did saw
                }
                for (const auto& [path, ctime] : seen.results) {
                    if (ctime >= cutoff) {
                        continue;
                    }
                    ++expired;
                    send(
                        protocol::collect_ops(path),
                        [](master_session& m, zkco::error_code e, auto&) {
                            if (!e) {
                                ++m.stats_->collected;
                            }
                        }
                    );
                }
            }
            for (const auto& [dir, st] : empty_clients) {
                send(
                    protocol::collect_dir_ops(dir, st.version),
                    [](master_session& m, zkco::error_code e, auto&) {
                        if (!e) {
                            ++m.stats_->collected_dirs;
                        }
                    }
                );
            }
            if (expired > 0 || !empty_clients.empty()) {
                spdlog::info(
                    "master: deleting {} result(s) nobody consumed and {} empty client "
                    "dir(s), older than {} s",
                    expired, empty_clients.size(), opts_.result_retention.count() / 1000
                );
            }
        }
    }

    /// Lists the directories `changed` (at once) into `dirs`, reading the ctime of each result
    /// not known before (at once); a result already known keeps the ctime read then. A
    /// directory not listed, or whose results were not all read, is left out (looked at
    /// afresh by the next sweep).
    asio::awaitable<std::map<std::string, result_dir_seen>> list_results(
        std::map<std::string, result_dir_seen> dirs, const std::vector<std::string>& changed
    ) {
        zkco::read_batch batch(zk_);
        std::vector<zkco::read_batch::slot<zkco::children>> lists;
        lists.reserve(changed.size());
        for (const auto& dir : changed) {
            lists.push_back(batch.get_children(dir));
        }
        if (auto all = co_await batch.wait(); !all) {
            for (const auto& dir : changed) {
                dirs.erase(dir);  // cancelled: the slots may still be written to
            }
            co_return dirs;
        }
        std::vector<std::string> fresh;
        std::vector<std::string> fresh_dir;
        for (std::size_t i = 0; i < changed.size(); ++i) {
            auto& seen = dirs[changed[i]];
            if (!*lists[i]) {
                dirs.erase(changed[i]);
                continue;
            }
            auto before = std::move(seen.results);
            seen.results.clear();
            for (const auto& name : (*lists[i])->names) {
                auto path = zkco::join_path(changed[i], name);
                if (auto it = before.find(path); it != before.end()) {
                    seen.results.insert(*it);
                } else {
                    fresh.push_back(std::move(path));
                    fresh_dir.push_back(changed[i]);
                }
            }
        }
        auto stats = co_await zkco::exists_all(zk_, fresh);
        for (std::size_t i = 0; i < fresh.size(); ++i) {
            auto it = dirs.find(fresh_dir[i]);
            if (it == dirs.end()) {
                continue;
            }
            if (!stats[i]) {
                dirs.erase(it);  // not read: the whole directory is listed again next time
            } else if (*stats[i]) {
                it->second.results[fresh[i]] = (*stats[i])->ctime;
            }
        }
        co_return dirs;
    }

    // --- the throughput figure in /master ------------------------------------------------

    asio::awaitable<void> report() {
        const auto start = std::chrono::steady_clock::now();
        asio::steady_timer timer(zk_.get_executor());
        double written = 0;
        for (;;) {
            timer.expires_after(opts_.report_interval);
            auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
            if (ec || stopping()) {
                co_return;
            }
            const auto now = std::chrono::steady_clock::now();
            const auto window = std::chrono::seconds(60);
            while (!finishes_.empty() && now - finishes_.front().first > window) {
                finishes_.pop_front();
            }
            std::uint64_t done = 0;
            for (const auto& f : finishes_) {
                done += f.second;
            }
            const double secs =
                std::chrono::duration<double>(
                    std::min<std::chrono::steady_clock::duration>(now - start, window)
                )
                    .count();
            const double rate =
                std::round(static_cast<double>(done) / std::max(secs, 1.0) * 100) / 100;
            if (rate == written) {
                continue;
            }
            written = rate;
            master_node_.throughput = rate;
            send(
                protocol::master_report_ops(master_node_),
                [](master_session&, zkco::error_code, auto&) {}
            );
        }
    }

    /// Says when this master acts: not while its session is disconnected. Cut off from
    /// ZooKeeper it cannot write, and once its session expires at the server another master
    /// acts, while the C client would tell us of the expiry only after reaching a server
    /// again: a partitioned master stands down as soon as the link is seen down (after two
    /// thirds of the session timeout at most), before the server can expire it.
    asio::awaitable<void> follow_connection() {
        if (opts_.on_acting) {
            opts_.on_acting(true);
        }
        bool acting = true;
        std::uint64_t seen = zk_.state_generation();
        while (!stopping()) {
            auto change = co_await zk_.wait_state(seen);
            if (!change || stopping()) {
                co_return;  // after the end, the node's view is the end's (not acting)
            }
            seen = change->generation;
            const bool connected = change->state == zkco::session_state::connected;
            if (connected == acting || zkco::is_terminal(change->state)) {
                continue;
            }
            acting = connected;
            if (acting) {
                spdlog::info("master {}: reconnected; acting again with epoch {}", me_.id, epoch_);
            } else {
                spdlog::warn(
                    "master {}: disconnected from ZooKeeper; not acting as master until "
                    "reconnected",
                    me_.id
                );
            }
            if (opts_.on_acting) {
                opts_.on_acting(acting);
            }
        }
    }

    /// Watches /epoch: whoever moves it past our epoch deposes us at once, not only at our
    /// next write (which may be far off in an idle cluster).
    asio::awaitable<void> watch_epoch() {
        while (!stopping()) {
            auto w = co_await zk_.watch_exists(protocol::layout::epoch());
            if (!w) {
                const bool go_on = co_await recover(w.error(), protocol::layout::epoch());
                if (!go_on) {
                    co_return;
                }
                continue;
            }
            if (!w->value || (*w->value).version != epoch_) {
                stats_->deposed = true;
                stop_ = true;
                wake();
                co_return;
            }
            auto ev = co_await w->watch.changed();
            if (!ev) {
                const bool go_on = co_await recover(ev.error(), protocol::layout::epoch());
                if (!go_on) {
                    co_return;
                }
            }
        }
    }

    /// Keeps /master (§2), which operators and clients read, in place: should someone delete
    /// or replace it, it is written again (fenced like every master write).
    asio::awaitable<void> keep_master_node() {
        const auto session = zk_.session();
        while (!stopping()) {
            auto w = co_await zk_.watch_exists(protocol::layout::master());
            if (!w) {
                const bool go_on = co_await recover(w.error(), protocol::layout::master());
                if (!go_on) {
                    co_return;
                }
                continue;
            }
            bool ours = w->value && session && (*w->value).ephemeral_owner == session->id;
            bool garbled = false;
            auto version = w->value ? (*w->value).version : zkco::any_version;
            if (ours) {
                // Still our node, but someone may have set its data: what clients read the
                // bound on pending tasks from must say it.
                auto now = co_await zk_.get(protocol::layout::master());
                garbled = now && !protocol::master_node_says(master_node_, now->data);
                ours = !garbled;
                if (now) {
                    version = now->stat.version;  // the set may have come after the exists
                }
            }
            // One rewrite at a time: the change that started it may also fire the next watch
            // before the rewrite is applied.
            if (!ours && !rewriting_master_node_) {
                spdlog::warn(
                    "master {}: /master was {}; writing it again", me_.id,
                    garbled    ? "overwritten (it no longer said this master's id, epoch and bound)"
                    : w->value ? "replaced by someone else"
                               : "deleted"
                );
                rewriting_master_node_ = true;
                send(
                    protocol::master_node_ops(master_node_, w->value.has_value(), version),
                    [](master_session& m, zkco::error_code, auto&) {
                        // Whatever the outcome, the watch shows what /master holds now.
                        m.rewriting_master_node_ = false;
                    }
                );
            }
            auto ev = co_await w->watch.changed();
            if (!ev) {
                const bool go_on = co_await recover(ev.error(), protocol::layout::master());
                if (!go_on) {
                    co_return;
                }
            }
        }
    }

    /// Carries out one of the view's actions; the answer goes back to the view.
    void carry_out(master_action a) {
        switch (a.what) {
        case master_action::kind::load:
            group_.spawn(
                [this, tids = std::move(a.tids), paths = std::move(a.paths)]() mutable {
                    return load(std::move(tids), std::move(paths));
                },
                "load"
            );
            return;
        case master_action::kind::clear_foreign:
            start_clearing(a.path);
            return;
        case master_action::kind::assign:
        case master_action::kind::reject:
        case master_action::kind::cancel:
            break;
        }
        auto ops = std::move(a.ops);
        send(
            std::move(ops),
            [a = std::move(a
             )](master_session& m, zkco::error_code ec, const protocol::txn_answer& answer) {
                m.view_.done(
                    a,
                    master_txn_report{
                        answer, ec == zkco::condition::retryable,
                        ec ? ec.message() : std::string()},
                    std::chrono::steady_clock::now()
                );
            }
        );
    }

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
    master_state view_;  // the workers, pending tasks and cancels, and what to do about them
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

}  // namespace

asio::awaitable<void> run_master(
    zkco::client& zk,
    protocol::layout l,
    protocol::member_info me,
    std::int64_t epoch,
    master_options opts,
    master_stats* stats
) {
    spdlog::info("master {}: acting with epoch {}", me.id, epoch);
    master_session session(zk, l, std::move(me), epoch, opts, stats);
    co_await session.run();
}

}  // namespace zkd::roles
