// SPDX-License-Identifier: MIT
#include "roles/master.hpp"

#include "reactor/task_group.hpp"
#include "roles/batcher.hpp"
#include "roles/election.hpp"
#include "roles/foreign.hpp"
#include "roles/txn_io.hpp"
#include "protocol/ids.hpp"
#include "protocol/master_txn.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

#include <cmath>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <unordered_set>

namespace asio = boost::asio;

namespace zkd::roles {

namespace {

/// A pending task in the master's view. Its data is read only when it may be placed soon
/// (near the head of the queue while slots are free): a backlog costs an id each, not a
/// copy of every task, and a task cancelled while waiting is never read.
struct pending_entry {
    std::uint32_t shard = 0;
    bool loading = false;             // its read is out
    // Once loaded (see master_session::loaded_). A pointer: a pending task not yet read costs
    // no room for a task_spec (a backlog is mostly such).
    std::unique_ptr<protocol::task_spec> spec;
    std::string malformed;            // why
    bool in_flight = false;           // a transaction about it is out
};

struct worker_view {
    protocol::member_info info;
    bool alive = true;
    std::set<std::string> assigned;  // from its directory, plus our commits
    int in_flight = 0;               // assignments sent, not yet answered
    bool dir_missing = false;        // its /assign/<id> was deleted: nothing can go there
};

/// A pending task whose transactions failed for reasons of its own: it waits before the
/// next try, longer each time, so no failure turns into a loop.
struct trouble {
    int failures = 0;
    std::chrono::steady_clock::time_point not_before;
};

/// Tries before a task that cannot be assigned gets a failed result instead.
constexpr int max_assign_failures = 4;

class master_session {
public:
    master_session(zkco::client& zk, protocol::layout l, protocol::member_info me, std::int64_t epoch,
                   master_options opts, master_stats* stats)
        : zk_(zk), l_(l), me_(std::move(me)), epoch_(epoch), opts_(opts),
          stats_(stats != nullptr ? stats : &own_stats_), batcher_(zk), group_(zk.get_executor()),
          wake_(zk.get_executor()), grace_(zk.get_executor()), placer_(opts.policy),
          self_(std::make_shared<master_session*>(this)),
          retry_(zk.get_executor(), asio::steady_timer::time_point::max()) {
        // Every master transaction fails once a newer master has bumped the epoch.
        batcher_.set_prefix({zkco::op::check{protocol::layout::epoch(), static_cast<std::int32_t>(epoch)}});
        master_node_ = me_;
        master_node_.epoch = epoch;
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
                return follow(protocol::layout::workers_dir(),
                              [this](std::vector<std::string> n) { return workers_changed(std::move(n)); });
            },
            "workers");
        group_.spawn(
            [this] {
                return follow(protocol::layout::assign_dir(), [this](std::vector<std::string> n) {
                    return assign_dirs_changed(std::move(n));
                });
            },
            "assign");
        group_.spawn(
            [this] {
                return follow(protocol::layout::cancel_dir(),
                              [this](std::vector<std::string> n) { return cancels_changed(std::move(n)); });
            },
            "cancel");
        for (std::uint32_t shard = 0; shard < l_.pending_shards; ++shard) {
            group_.spawn(
                [this, shard] {
                    return follow(protocol::layout::pending_shard(shard), [this, shard](std::vector<std::string> n) {
                        return shard_changed(shard, std::move(n));
                    });
                },
                "pending");
        }
        co_await schedule_loop();
        if (opts_.on_acting) {
            opts_.on_acting(false);
        }
        stop_ = true;
        grace_.cancel();
        retry_.cancel();
        group_.emit(asio::cancellation_type::terminal);
        co_await group_.async_wait(asio::as_tuple(asio::use_awaitable));
        // Answers to what we sent touch this session: wait for them (they end with the session).
        asio::steady_timer t(zk_.get_executor());
        while (batcher_.outstanding() > 0 && !zkco::is_terminal(zk_.state())) {
            t.expires_after(std::chrono::milliseconds(5));
            co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
        }
        if (stats_->deposed) {
            spdlog::warn("master {}: deposed (epoch {} is no longer current)", me_.id, epoch_);
        }
    }

private:
    using group_ops = std::vector<protocol::txn_op>;
    /// The answer to a transaction: the whole's error (for its message and whether it may be
    /// retried) and the per-op codes protocol's readers take.
    using on_done = std::function<void(master_session&, zkco::error_code, const protocol::txn_answer&)>;

    void wake() {
        dirty_ = true;
        wake_.cancel();
    }

    [[nodiscard]] bool stopping() const { return stop_ || zkco::is_terminal(zk_.state()); }

    /// Sends a fenced group; `done` runs only while this session exists.
    void send(group_ops ops, on_done done) {
        batcher_.async_submit(to_zkco(std::move(ops)), [self = self_, done = std::move(done)](
                                                  zkco::error_code ec, std::vector<zkco::op_result> r) {
            if (*self == nullptr) {
                return;
            }
            auto& m = **self;
            // Our own ops never check versions: a bad_version is the epoch check failing.
            if (ec == zkco::errc::bad_version) {
                m.stats_->deposed = true;
                m.stop_ = true;
            }
            done(m, ec, to_answer(ec, r));
            m.wake();
        });
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

    /// Completions a coroutine waits for. Shared with the handlers, so that a coroutine
    /// cancelled early leaves them something alive to write to.
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

    /// Runs one read per path at once (one round trip for all, not one each): `start(path,
    /// handler)` starts it, the handler taking (error_code, T).
    template <class T, class Start>
    asio::awaitable<std::vector<zkco::result<T>>> read_all(std::vector<std::string> paths,
                                                           Start start) {
        struct state : countdown {
            using countdown::countdown;
            std::vector<zkco::result<T>> out;
        };
        auto st = std::make_shared<state>(zk_.get_executor());
        st->out.assign(paths.size(), zkco::error_code(zkco::errc::no_node));
        st->left = paths.size();
        for (std::size_t i = 0; i < paths.size(); ++i) {
            start(std::move(paths[i]), [st, i](zkco::error_code ec, T v) {
                if (ec) {
                    st->out[i] = ec;
                } else {
                    st->out[i] = std::move(v);
                }
                st->done();
            });
        }
        co_await st->wait();
        if (st->left > 0) {
            // Cancelled with reads still out: their answers will still write into `out`, so
            // it must stay whole (a moved-from vector was written through a null pointer).
            co_return st->out;
        }
        co_return std::move(st->out);
    }

    /// The data of many nodes at once.
    asio::awaitable<std::vector<zkco::result<zkco::node>>> get_all(std::vector<std::string> paths) {
        auto start = [this](std::string p, auto h) { zk_.async_get(std::move(p), std::move(h)); };
        return read_all<zkco::node>(std::move(paths), start);
    }

    /// The stats of many nodes at once (nullopt: no such node).
    asio::awaitable<std::vector<zkco::result<std::optional<zkco::stat>>>> exists_all(
        std::vector<std::string> paths) {
        auto start = [this](std::string p, auto h) { zk_.async_exists(std::move(p), std::move(h)); };
        return read_all<std::optional<zkco::stat>>(std::move(paths), start);
    }

    // --- watchers: they keep the view, the schedule loop acts on it ----------------------

    /// Lists `path`'s children and calls `on_change` with them, again after every change,
    /// until stopping, until `on_change` says false, or until the node is gone.
    template <class OnChange>
    asio::awaitable<void> follow(std::string path, OnChange on_change) {
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
            }
        }
    }

    asio::awaitable<bool> workers_changed(std::vector<std::string> names) {
        const std::set<std::string> now(names.begin(), names.end());
        for (auto& [id, w] : workers_) {
            if (w.alive && !now.contains(id)) {
                w.alive = false;
                spdlog::info("master: worker {} left with {} task(s)", id, w.assigned.size());
                group_.spawn([this, id = id] { return requeue_departed(id); }, "requeue");
            }
        }
        std::erase_if(ignored_, [&](const std::string& id) { return !now.contains(id); });
        std::vector<std::string> joined;
        std::vector<std::string> paths;
        for (const auto& id : now) {
            if (!workers_.contains(id) && !ignored_.contains(id)) {
                joined.push_back(id);
                paths.push_back(protocol::layout::worker(id));
            }
        }
        auto nodes = co_await get_all(paths);
        for (std::size_t i = 0; i < joined.size(); ++i) {
            if (!nodes[i]) {
                continue;  // gone again
            }
            if (!is_ephemeral(nodes[i]->stat)) {
                // Only a live session stands for a worker: a persistent node would take
                // tasks that nobody runs, forever.
                spdlog::warn("master: ignoring worker node /workers/{}: it is not ephemeral (written "
                             "by someone else, not by a zkd worker's session)",
                             joined[i]);
                ignored_.insert(joined[i]);
                continue;
            }
            auto info = protocol::decode_worker(nodes[i]->data);
            if (!info) {
                spdlog::warn("master: ignoring worker node /workers/{}: {}", joined[i],
                             info.error().message);
                ignored_.insert(joined[i]);
                continue;
            }
            spdlog::info("master: worker {} joined (capacity {}, {} type(s))", joined[i],
                         info->capacity.value_or(0), info->types.size());
            if (info->draining) {
                spdlog::info("master: worker {} is draining", joined[i]);
            }
            workers_[joined[i]] = worker_view{std::move(*info), true, {}, 0};
            group_.spawn([this, id = joined[i]] { return watch_worker(id); }, "worker");
            group_.spawn([this, id = joined[i]] { return follow_worker_dir(id); }, "assign");
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
            const auto it = workers_.find(id);
            if (it == workers_.end() || !it->second.alive) {
                co_return;
            }
            if (auto info = protocol::decode_worker(w->value.data)) {
                if (info->draining && !it->second.info.draining) {
                    spdlog::info("master: worker {} is draining; it gets no new tasks", id);
                }
                it->second.info = std::move(*info);
                wake();
            }
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
        auto changed = [this, id](std::vector<std::string> n) { return worker_dir_changed(id, std::move(n)); };
        while (!stopping()) {
            co_await follow(dir, changed);
            auto it = workers_.find(id);
            if (stopping() || it == workers_.end() || !it->second.alive) {
                co_return;
            }
            if (!it->second.dir_missing) {
                spdlog::warn("master: the assignment directory of worker {} was deleted; it gets no "
                             "tasks until it is back",
                             id);
            }
            it->second.dir_missing = true;
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
            if (auto again = workers_.find(id); again != workers_.end()) {
                again->second.dir_missing = false;
            }
        }
    }

    asio::awaitable<bool> worker_dir_changed(std::string id, std::vector<std::string> names) {
        const auto it = workers_.find(id);
        if (it == workers_.end() || !it->second.alive) {
            co_return false;  // departed: requeue_departed owns the directory now
        }
        std::set<std::string> now;
        for (auto& name : names) {
            if (!protocol::is_cancel_marker(name)) {
                now.insert(std::move(name));
            }
        }
        // What left a live worker's directory was completed (T4): for the throughput figure.
        std::uint64_t done = 0;
        for (const auto& tid : it->second.assigned) {
            if (!now.contains(tid)) {
                done += std::max<std::size_t>(1, protocol::bundle_size(tid));  // a bundle: its tasks
            }
        }
        if (done > 0) {
            stats_->finished += done;
            finishes_.emplace_back(std::chrono::steady_clock::now(), done);
        }
        it->second.assigned = std::move(now);
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
        for (const auto& id : names) {
            if (!alive.contains(id) && !workers_.contains(id) && orphans_seen_.insert(id).second) {
                spdlog::info("master: found the directory of departed worker {}", id);
                group_.spawn([this, id] { return requeue_departed(id); }, "requeue");
            }
        }
        co_return true;
    }

    asio::awaitable<bool> shard_changed(std::uint32_t shard, std::vector<std::string> names) {
        const std::unordered_set<std::string> now(std::make_move_iterator(names.begin()),
                                                  std::make_move_iterator(names.end()));
        // Gone without us (cancelled, or our own commit seen first): forget them.
        auto& known = shard_tasks_[shard];
        for (auto it = known.begin(); it != known.end();) {
            auto p = pending_.find(*it);
            if (!now.contains(*it) && (p == pending_.end() || !p->second.in_flight)) {
                if (p != pending_.end()) {
                    forget(p);
                }
                it = known.erase(it);
            } else {
                ++it;
            }
        }
        for (const auto& name : now) {
            // Known, but not in our view any more: we took it (T2) and a node of the same id
            // appeared since, a new task to us. (Trusting `known` alone left such nodes
            // pending forever while workers idled.)
            auto [it, fresh] = pending_.try_emplace(name);
            if (!fresh) {
                continue;
            }
            it->second.shard = shard;
            known.insert(name);
            if (!protocol::is_valid_task_id(name)) {
                it->second.malformed = "'" + name + "' is not a task id";
                loaded_.insert(name);
            }
        }
        co_return true;
    }

    [[nodiscard]] std::string pending_path(const std::string& tid, const pending_entry& p) const {
        return zkco::join_path(protocol::layout::pending_shard(p.shard), tid);
    }

    void forget(std::map<std::string, pending_entry>::iterator p) {
        loaded_.erase(p->first);
        troubled_.erase(p->first);
        pending_.erase(p);
    }

    /// Reads the data of the next pending tasks in queue order while fewer are loaded and
    /// placeable than there are free slots (plus a margin), one batch of reads at a time.
    void load_more() {
        if (loading_) {
            return;
        }
        const auto live = slots();
        if (live.empty()) {
            return;  // nothing can be placed: tasks wait unread
        }
        long want = 32;
        for (const auto& s : live) {
            want += s.free_slots();
        }
        for (const auto& tid : loaded_) {
            const auto& p = pending_.at(tid);
            if (!p.in_flight && p.spec && protocol::anyone_serves(live, p.spec->type)) {
                --want;
            }
        }
        std::vector<std::string> batch;
        for (auto it = pending_.begin(); it != pending_.end() && want > 0 && batch.size() < 1000; ++it) {
            auto& p = it->second;
            if (p.loading || p.in_flight || loaded_.contains(it->first)) {
                continue;
            }
            p.loading = true;
            batch.push_back(it->first);
            --want;
        }
        if (batch.empty()) {
            return;
        }
        std::vector<std::string> paths;
        paths.reserve(batch.size());
        for (const auto& tid : batch) {
            paths.push_back(pending_path(tid, pending_.at(tid)));
        }
        loading_ = true;
        group_.spawn([this, batch = std::move(batch), paths = std::move(paths)]() mutable {
            return load(std::move(batch), std::move(paths));
        }, "load");
    }

    asio::awaitable<void> load(std::vector<std::string> tids, std::vector<std::string> paths) {
        auto nodes = co_await get_all(std::move(paths));
        bool failed = false;
        for (std::size_t i = 0; i < tids.size(); ++i) {
            auto it = pending_.find(tids[i]);
            if (it == pending_.end()) {
                continue;  // cancelled or gone meanwhile
            }
            auto& p = it->second;
            p.loading = false;
            if (!nodes[i] && nodes[i].error() == zkco::errc::no_node) {
                // Gone: forgotten now (not read again and again until the shard's watch says
                // so); should it come back, the shard's next listing has it again.
                shard_tasks_[p.shard].erase(it->first);
                forget(it);
                continue;
            }
            if (!nodes[i]) {
                failed = true;  // an error: try again later
                continue;
            }
            if (nodes[i]->stat.num_children > 0) {
                clear_foreign(pending_path(tids[i], p));
            }
            if (nodes[i]->data.size() > protocol::max_task_bytes) {
                // Written by someone else (a client refuses it): too big to assign (§4).
                p.malformed = "the task node holds " + std::to_string(nodes[i]->data.size()) +
                              " bytes, over the " + std::to_string(protocol::max_task_bytes) +
                              " a task may hold";
            } else if (auto spec = protocol::decode_task(nodes[i]->data)) {
                p.spec = std::make_unique<protocol::task_spec>(std::move(*spec));
            } else {
                p.malformed = spec.error().message;
            }
            loaded_.insert(it->first);
        }
        if (failed) {
            // Not while disconnected in a tight loop: the next batch waits a moment.
            asio::steady_timer pause(zk_.get_executor(), std::chrono::milliseconds(100));
            co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
        }
        loading_ = false;
        wake();
    }

    /// Deletes what others wrote below a node of ours (§8), once at a time per node, so the
    /// transaction that deletes the node can succeed; the schedule loop tries again after.
    void clear_foreign(const std::string& path) {
        if (!clearing_.insert(path).second) {
            return;
        }
        group_.spawn([this, path]() -> asio::awaitable<void> {
            auto removed = co_await remove_children(zk_, path);
            if (removed) {
                spdlog::warn("master: deleted {} node(s) someone else wrote below {}", *removed, path);
            } else {
                spdlog::warn("master: cannot delete what someone else wrote below {}: {}", path,
                             removed.error().message());
            }
            clearing_.erase(path);
            wake();
        }, "foreign");
    }

    /// Notes a failed transaction about pending task `tid`: it waits before its next try.
    /// Yields how many times it has failed so far. The first failure is logged.
    int note_trouble(const std::string& tid, std::string_view what, zkco::error_code ec) {
        auto& t = troubled_[tid];
        ++t.failures;
        const auto wait = std::min(std::chrono::milliseconds(100) * (1 << std::min(t.failures, 6)),
                                   std::chrono::milliseconds(5000));
        t.not_before = std::chrono::steady_clock::now() + wait;
        if (t.failures == 1) {
            spdlog::warn("master: {} {} failed: {}; trying again in {} ms", what, tid, ec.message(),
                         wait.count());
        }
        return t.failures;
    }

    /// Wakes the schedule loop when the next task in trouble may be tried again.
    void arm_retry() {
        const auto now = std::chrono::steady_clock::now();
        auto next = asio::steady_timer::time_point::max();
        for (const auto& [tid, t] : troubled_) {
            if (t.not_before > now) {
                next = std::min(next, t.not_before);
            }
        }
        if (next == asio::steady_timer::time_point::max() || next == retry_.expiry()) {
            return;
        }
        retry_.expires_at(next);
        retry_.async_wait([self = self_](zkco::error_code e) {
            if (!e && *self != nullptr) {
                (*self)->wake();
            }
        });
    }

    /// False while a task waits after a failure.
    [[nodiscard]] bool may_try(const std::string& tid) const {
        const auto t = troubled_.find(tid);
        return t == troubled_.end() || t->second.not_before <= std::chrono::steady_clock::now();
    }

    asio::awaitable<bool> cancels_changed(std::vector<std::string> names) {
        cancels_ = std::set<std::string>(names.begin(), names.end());
        std::erase_if(unknown_cancels_, [&](const auto& e) { return !cancels_.contains(e.first); });
        co_return true;
    }

    // --- T6: a departed worker's tasks back to pending (or lost) -------------------------

    asio::awaitable<void> requeue_departed(std::string id) {
        const std::string dir = protocol::layout::assign_dir(id);
        auto backoff = std::chrono::milliseconds(100);
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
            if (tids.empty()) {
                for (const auto& tid : markers) {
                    send(protocol::remove_marker_ops(id, tid), [](master_session&, zkco::error_code, auto&) {});
                }
                auto [ec, r] = co_await batcher_.async_submit(to_zkco(protocol::remove_departed_dir_ops(id)),
                                                              asio::as_tuple(asio::use_awaitable));
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
            auto nodes = co_await get_all(paths);
            auto pending = std::make_shared<countdown>(zk_.get_executor());
            for (std::size_t i = 0; i < tids.size(); ++i) {
                if (!nodes[i]) {
                    continue;
                }
                const auto& tid = tids[i];
                auto plan = protocol::departed_ops(l_, id, tid, nodes[i]->data, markers.contains(tid),
                                                   protocol::now_ms());
                ++pending->left;
                send(std::move(plan.ops), [pending, tid, kind = plan.kind, attempt = plan.attempt,
                                           path = paths[i]](master_session& m, zkco::error_code,
                                                            const protocol::txn_answer& a) {
                    const auto outcome = protocol::read_departed(a);
                    if (outcome == protocol::departed_outcome::foreign_below) {
                        m.clear_foreign(path);  // someone wrote below the assignment
                    }
                    if (outcome != protocol::departed_outcome::committed) {
                        ++pending->failed;
                    } else if (kind == protocol::departed_kind::lost) {
                        ++m.stats_->lost;
                        spdlog::warn("master: task {} quarantined as lost after {} attempt(s)", tid,
                                     attempt);
                    } else if (kind == protocol::departed_kind::requeue) {
                        ++m.stats_->requeued;
                        spdlog::info("master: task {} requeued (attempt {})", tid, attempt + 1);
                    } else if (kind == protocol::departed_kind::cancel) {
                        ++m.stats_->cancelled;
                    } else {
                        ++m.stats_->rejected;
                    }
                    pending->done();
                });
            }
            co_await pending->wait();
            if (pending->failed > 0) {
                // Not in a tight loop: what failed is looked at again after a pause.
                asio::steady_timer pause(zk_.get_executor(), backoff);
                co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
                backoff = std::min(backoff * 2, std::chrono::milliseconds(5000));
            }
        }
        workers_.erase(id);
        wake();
    }

    // --- the schedule loop ---------------------------------------------------------------

    asio::awaitable<void> schedule_loop() {
        for (;;) {
            auto cs = co_await asio::this_coro::cancellation_state;
            if (stopping() || cs.cancelled() != asio::cancellation_type::none) {
                co_return;
            }
            if (!dirty_) {
                wake_.expires_at(asio::steady_timer::time_point::max());
                co_await wake_.async_wait(asio::as_tuple(asio::use_awaitable));
                continue;
            }
            dirty_ = false;
            handle_cancels();
            reject_unplaceable();
            assign();
            load_more();
            arm_retry();
            if (opts_.on_queue_depth) {
                opts_.on_queue_depth(pending_.size());
            }
        }
    }

    // --- T8: results nobody consumed -----------------------------------------------------

    asio::awaitable<void> collect_garbage() {
        asio::steady_timer timer(zk_.get_executor());
        std::map<std::string, std::int64_t> written;  // result → ctime (ms), read once each
        for (;;) {
            timer.expires_after(opts_.gc_interval);
            auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
            if (ec || stopping()) {
                co_return;
            }
            const std::int64_t cutoff = protocol::now_ms() - opts_.result_retention.count();
            std::set<std::string> seen;
            for (const auto& dir : l_.result_shard_paths()) {
                auto kids = co_await zk_.get_children(dir);
                if (!kids) {
                    continue;  // the next sweep looks again
                }
                std::vector<std::string> fresh;
                for (auto& name : kids->names) {
                    auto path = zkco::join_path(dir, name);
                    if (!written.contains(path)) {
                        fresh.push_back(path);
                    }
                    seen.insert(std::move(path));
                }
                auto stats = co_await exists_all(fresh);
                for (std::size_t i = 0; i < fresh.size(); ++i) {
                    if (stats[i] && *stats[i]) {
                        written[fresh[i]] = (*stats[i])->ctime;
                    }
                }
            }
            std::erase_if(written, [&](const auto& e) { return !seen.contains(e.first); });
            std::size_t expired = 0;
            for (const auto& [path, ctime] : written) {
                if (ctime < cutoff) {
                    ++expired;
                    send(protocol::collect_ops(path),
                         [](master_session& m, zkco::error_code e, auto&) {
                             if (!e) {
                                 ++m.stats_->collected;
                             }
                         });
                }
            }
            if (expired > 0) {
                spdlog::info("master: deleting {} result(s) older than {} s that nobody consumed",
                             expired, opts_.result_retention.count() / 1000);
            }
        }
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
            const double secs = std::chrono::duration<double>(std::min<std::chrono::steady_clock::duration>(
                                                                  now - start, window))
                                    .count();
            const double rate = std::round(static_cast<double>(done) / std::max(secs, 1.0) * 100) / 100;
            if (rate == written) {
                continue;
            }
            written = rate;
            master_node_.throughput = rate;
            send(protocol::master_report_ops(master_node_), [](master_session&, zkco::error_code, auto&) {});
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
                spdlog::warn("master {}: disconnected from ZooKeeper; not acting as master until "
                             "reconnected",
                             me_.id);
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
            const bool ours = w->value && session && (*w->value).ephemeral_owner == session->id;
            if (!ours) {
                spdlog::warn("master {}: /master was {}; writing it again", me_.id,
                             w->value ? "replaced by someone else" : "deleted");
                send(protocol::master_node_ops(master_node_, w->value.has_value(),
                                               w->value ? (*w->value).version : zkco::any_version),
                     [](master_session&, zkco::error_code, auto&) {});
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

    void handle_cancels() {
        for (const auto& tid : cancels_) {
            if (cancels_in_flight_.contains(tid)) {
                continue;
            }
            group_ops ops;
            auto p = pending_.find(tid);
            const std::string* holder = nullptr;
            for (const auto& [id, w] : workers_) {
                if (w.alive && w.assigned.contains(tid)) {
                    holder = &id;
                }
            }
            const bool retry = cancel_failures_.contains(tid);
            if (p != pending_.end() && clearing_.contains(pending_path(tid, p->second))) {
                continue;  // cancelled once what others wrote below it is gone
            }
            if (!retry && p != pending_.end() && !p->second.in_flight) {
                p->second.in_flight = true;
                ops = protocol::cancel_pending_ops(l_, p->second.shard, tid,
                                                   p->second.spec ? p->second.spec->attempt : 0,
                                                   protocol::now_ms());
            } else if (!retry && p != pending_.end()) {
                continue;  // an assignment of it is in flight: decide when it lands
            } else if (!retry && holder != nullptr) {
                ops = protocol::cancel_assigned_ops(*holder, tid);
            } else if (!retry) {
                // Unknown here: finished already, or submitted so recently that its shard has
                // not been read yet. Only a request unknown for a while is dropped.
                const auto now = std::chrono::steady_clock::now();
                const auto since = unknown_cancels_.try_emplace(tid, now).first->second;
                if (now - since < std::chrono::seconds(30)) {
                    continue;
                }
                ops = protocol::drop_cancel_ops(tid);
            } else {
                ops = protocol::drop_cancel_ops(tid);
            }
            unknown_cancels_.erase(tid);
            cancels_in_flight_.insert(tid);
            send(std::move(ops), [tid](master_session& m, zkco::error_code ec,
                                       const protocol::txn_answer& a) {
                const auto outcome = protocol::read_cancel(a);
                m.cancels_in_flight_.erase(tid);
                if (auto entry = m.pending_.find(tid); entry != m.pending_.end()) {
                    entry->second.in_flight = false;
                    if (outcome == protocol::pending_outcome::committed) {
                        m.forget(entry);
                    }
                }
                if (outcome == protocol::pending_outcome::committed) {
                    ++m.stats_->cancelled;
                    m.cancel_failures_.erase(tid);
                    m.cancels_.erase(tid);
                } else if (outcome == protocol::pending_outcome::foreign_below) {
                    // Someone wrote below the pending node: clear it, then cancel again.
                    if (auto entry = m.pending_.find(tid); entry != m.pending_.end()) {
                        m.clear_foreign(m.pending_path(tid, entry->second));
                    }
                } else if (ec != zkco::condition::retryable) {
                    m.cancel_failures_.insert(tid);  // next time: only drop the request
                }
            });
        }
    }

    void reject(const std::string& tid, pending_entry& p, std::string_view code, std::string why) {
        p.in_flight = true;
        send(protocol::reject_ops(l_, p.shard, tid, code, why, p.spec ? p.spec->attempt : 0,
                                  protocol::now_ms()),
             [tid, code = std::string(code), why](master_session& m, zkco::error_code ec,
                                                   const protocol::txn_answer& a) {
                 const auto outcome = protocol::read_reject(a);
                 auto it = m.pending_.find(tid);
                 if (it == m.pending_.end()) {
                     return;
                 }
                 it->second.in_flight = false;
                 if (outcome == protocol::pending_outcome::committed) {
                     ++m.stats_->rejected;
                     spdlog::warn("master: task {} rejected ({}): {}", tid, code, why);
                 }
                 // Done, or its pending node is gone (cancelled): either way, not ours any more.
                 if (outcome == protocol::pending_outcome::committed ||
                     outcome == protocol::pending_outcome::task_gone) {
                     m.forget(it);
                     return;
                 }
                 if (outcome == protocol::pending_outcome::foreign_below) {
                     m.clear_foreign(m.pending_path(tid, it->second));
                 }
                 if (!m.stats_->deposed) {
                     m.note_trouble(tid, "failing task", ec);
                 }
             });
    }

    std::vector<protocol::worker_slot> slots() const {
        std::vector<protocol::worker_slot> out;
        for (const auto& [id, w] : workers_) {
            if (w.alive && !w.info.draining && !w.dir_missing) {
                out.push_back(protocol::worker_slot{id, w.info.capacity.value_or(0),
                                          static_cast<int>(w.assigned.size()) + w.in_flight,
                                          w.info.types});
            }
        }
        return out;
    }

    void reject_unplaceable() {
        const auto live = slots();
        const auto now = std::chrono::steady_clock::now();
        std::optional<std::chrono::steady_clock::time_point> next_check;
        for (const auto& tid : std::vector<std::string>(loaded_.begin(), loaded_.end())) {
            auto& p = pending_.at(tid);
            if (p.in_flight || !may_try(tid)) {
                continue;
            }
            if (!p.spec) {
                reject(tid, p, protocol::task_error::malformed_task, p.malformed);
                continue;
            }
            if (live.empty() || protocol::anyone_serves(live, p.spec->type)) {
                unserved_since_.erase(p.spec->type);
                continue;
            }
            const auto since = unserved_since_.try_emplace(p.spec->type, now).first->second;
            if (now - since >= opts_.unknown_type_grace) {
                reject(tid, p, protocol::task_error::unknown_type,
                       "no worker serves task type '" + p.spec->type + "'");
            } else if (!next_check || since + opts_.unknown_type_grace < *next_check) {
                next_check = since + opts_.unknown_type_grace;
            }
        }
        if (next_check) {
            grace_.expires_at(*next_check);
            grace_.async_wait([self = self_](zkco::error_code ec) {
                if (!ec && *self != nullptr) {
                    (*self)->wake();
                }
            });
        }
    }

    void assign() {
        auto live = slots();
        int free = 0;
        for (const auto& s : live) {
            free += s.free_slots();
        }
        for (const auto& tid : loaded_) {
            if (free <= 0) {
                break;
            }
            auto& p = pending_.at(tid);
            if (p.in_flight || !p.spec || cancels_.contains(tid) || !may_try(tid)) {
                continue;
            }
            const auto pick = placer_.pick(live, p.spec->type);
            if (!pick) {
                continue;
            }
            auto& slot = live[*pick];
            ++slot.used;
            --free;
            const std::string wid = slot.id;
            ++workers_[wid].in_flight;
            p.in_flight = true;
            send(protocol::assign_ops(p.shard, tid, wid, *p.spec, epoch_, protocol::now_ms()),
                 [tid = std::string(tid), wid](master_session& m, zkco::error_code ec,
                                               const protocol::txn_answer& a) {
                     m.assigned(tid, wid, ec, protocol::read_assign(a));
                 });
        }
    }

    void assigned(const std::string& tid, const std::string& wid, zkco::error_code ec,
                  protocol::assign_outcome outcome) {
        using protocol::assign_outcome;
        if (auto w = workers_.find(wid); w != workers_.end()) {
            --w->second.in_flight;
            if (!ec) {
                w->second.assigned.insert(tid);
            }
        }
        auto p = pending_.find(tid);
        if (p == pending_.end()) {
            return;
        }
        p->second.in_flight = false;
        if (!ec) {
            ++stats_->assigned;
            if (opts_.on_assigned && p->second.spec) {
                opts_.on_assigned(*p->second.spec);
            }
            forget(p);
        } else if (outcome == assign_outcome::task_gone) {
            forget(p);  // gone meanwhile, or our own earlier commit: nothing to do
        } else if (outcome == assign_outcome::worker_dir_gone) {
            // The worker's directory is gone (deleted by someone else): not the task's fault.
            if (auto w = workers_.find(wid); w != workers_.end()) {
                w->second.dir_missing = true;
            }
        } else if (stats_->deposed || outcome == assign_outcome::worker_left) {
            // Deposed, or the worker left: placed again (by whoever is master) on a next pass.
        } else {
            if (outcome == assign_outcome::foreign_below) {
                clear_foreign(pending_path(tid, p->second));  // then it can go
            }
            // Outcome unknown (a lost connection) or an error of the task's own: try again
            // later; a task that keeps failing for itself ends in a failed result, once.
            const int failures = note_trouble(tid, "assigning task", ec);
            if (ec != zkco::condition::retryable && failures >= max_assign_failures &&
                outcome != assign_outcome::foreign_below) {
                reject(tid, p->second, protocol::task_error::malformed_task,
                       "cannot be assigned: " + ec.message());
            }
        }
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
    asio::steady_timer grace_;
    protocol::placer placer_;
    std::shared_ptr<master_session*> self_;  // null once destroyed: late answers check it

    protocol::member_info master_node_;  // what /master says of us
    asio::steady_timer retry_;  // wakes the loop when a task in trouble may be tried again

    bool dirty_ = true;
    bool stop_ = false;
    std::map<std::string, worker_view> workers_;
    std::set<std::string> ignored_;       // worker nodes with garbage data
    std::set<std::string> orphans_seen_;  // directories of departed workers handed to T6
    std::map<std::string, pending_entry> pending_;  // by task id: FIFO within priority
    std::set<std::string> loaded_;  // pending tasks whose data is read, in the same order
    bool loading_ = false;          // a batch of reads is out
    std::map<std::uint32_t, std::unordered_set<std::string>> shard_tasks_;
    std::set<std::string> cancels_;
    std::set<std::string> cancels_in_flight_;
    std::set<std::string> cancel_failures_;
    std::map<std::string, std::chrono::steady_clock::time_point> unknown_cancels_;
    std::map<std::string, std::chrono::steady_clock::time_point> unserved_since_;
    std::map<std::string, trouble> troubled_;  // pending tasks whose transactions failed
    std::set<std::string> clearing_;           // nodes whose foreign children are being deleted
    std::deque<std::pair<std::chrono::steady_clock::time_point, std::uint64_t>> finishes_;
};

}  // namespace

asio::awaitable<void> run_master(zkco::client& zk, protocol::layout l, protocol::member_info me, std::int64_t epoch,
                                 master_options opts, master_stats* stats) {
    spdlog::info("master {}: acting with epoch {}", me.id, epoch);
    master_session session(zk, l, std::move(me), epoch, opts, stats);
    co_await session.run();
}

}  // namespace zkd::roles
