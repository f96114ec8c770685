// SPDX-License-Identifier: MIT
// The master's I/O shell: the watchers, the schedule loop that carries out master_fsm's
// actions (master_fsm.hpp) and hands the answers back, the epoch and the connection. Its
// other loops are in files of their own (master_session.hpp).
#include "roles/master/master.hpp"

#include "protocol/ids.hpp"
#include "roles/election.hpp"
#include "roles/foreign.hpp"
#include "roles/master/master_session.hpp"
#include "roles/txn_io.hpp"
#include "zkco/read_batch.hpp"

#include <boost/asio/this_coro.hpp>

#include <spdlog/spdlog.h>

#include <set>

namespace asio = boost::asio;

namespace zkd::roles {

namespace detail {

namespace {

master_fsm::options view_options(const master_options& o) {
    master_fsm::options v;
    v.policy = o.policy;
    v.unknown_type_grace = o.unknown_type_grace;
    v.on_assigned = o.on_assigned;
    v.unstarted_bound = o.unstarted_bound;
    return v;
}

}  // namespace

/// Lists `path`'s children and calls `on_change` with them, again after every change,
/// until stopping, until `on_change` says false, or until the node is gone.
template <class OnChange>
asio::awaitable<void> master_session::follow(std::string path, OnChange on_change) {
    auto at_once = [](const zkco::watch_event&) -> asio::awaitable<void> { co_return; };
    return follow(std::move(path), std::move(on_change), at_once);
}

/// As follow(), and after a change, `before_listing(event)` decides when to list again.
template <class OnChange, class BeforeListing>
asio::awaitable<void> master_session::follow(
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
        take_answers();
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

master_session::master_session(
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
      retry_(zk.get_executor(), asio::steady_timer::time_point::max()),
      load_pause_(zk.get_executor()) {
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
    master_node_.max_pending = published_bound(opts.max_pending);
    master_node_.direct = opts.direct_placement;
    if (master_node_.since_ms == 0) {
        master_node_.since_ms = protocol::now_ms();
    }
}

master_session::~master_session() {
    inbox_->close();
}

asio::awaitable<void> master_session::run() {
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
    // The answers to what we sent still count (the stats): wait for them, then take them.
    // (A session that ends completes them all with its error.)
    while (batcher_.outstanding() > 0) {
        co_await batcher_.async_wait_idle(asio::as_tuple(asio::use_awaitable));
    }
    take_answers();
    if (stats_->deposed) {
        spdlog::warn("master {}: deposed (epoch {} is no longer current)", me_.id, epoch_);
    }
}

/// Sends a fenced group. The handler only pushes the answer into the inbox: cheap, and
/// harmless once the session is gone (the box is closed then).
void master_session::send(group_ops ops, sent::purpose what) {
    auto deletes = pending_deletes(ops);
    batcher_.async_submit(
        to_zkco(std::move(ops)),
        [box = inbox_, what = std::move(what), deletes = std::move(deletes)](
            zkco::error_code ec, std::vector<zkco::op_result> r
        ) mutable {
            box->push(answer::txn{std::move(what), std::move(deletes), ec, std::move(r)});
        }
    );
}

/// Applies the answers in the inbox, in the order they came. The schedule loop takes them
/// before each step; a watcher takes them before it hands the fsm what it read, so that the
/// fsm and the shards' followers see answers and reads in the order ZooKeeper gave them.
void master_session::take_answers() {
    if (inbox_->empty()) {
        return;
    }
    for (auto& e : inbox_->take()) {
        std::visit([this](auto& ev) { apply(ev); }, e);
        wake();
    }
}

void master_session::apply(answer::tasks& t) {
    if (view_.tasks_loaded(t.reads)) {
        // Not while disconnected in a tight loop: the next batch waits a moment.
        load_pause_.expires_after(std::chrono::milliseconds(100));
        load_pause_.async_wait([box = inbox_](zkco::error_code ec) {
            if (!ec) {
                box->push(answer::load_paused{});
            }
        });
    } else {
        view_.load_finished();
    }
}

void master_session::apply(answer::load_paused& /*p*/) {
    view_.load_finished();
}

void master_session::apply(answer::cleared& c) {
    view_.foreign_cleared(c.path);
}

void master_session::apply(answer::txn& a) {
    if (!a.ec) {
        // Our own deletes move the shards' cversion: their followers expect it.
        for (const auto shard : a.deletes) {
            followers_[shard].removed();
        }
    }
    if (epoch_check_failed(a.ec, a.results)) {
        stats_->deposed = true;
        stop_ = true;
    }
    const auto r = to_answer(a.ec, a.results);
    std::visit([&](auto& what) { answered(what, a.ec, r); }, a.what);
}

void master_session::answered(
    sent::for_fsm& s, zkco::error_code ec, const protocol::txn_answer& r
) {
    view_.done(
        s.action,
        master_txn_report{r, ec == zkco::condition::retryable, ec ? ec.message() : std::string()},
        std::chrono::steady_clock::now()
    );
}

/// The pending shard of each pending node `ops` delete (T2, T7 on a pending task, a
/// rejection), once per node.
std::vector<std::uint32_t> master_session::pending_deletes(const group_ops& ops) const {
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
asio::awaitable<bool> master_session::recover(zkco::error_code ec, std::string what) {
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

asio::awaitable<bool> master_session::workers_changed(std::vector<std::string> names) {
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
    take_answers();
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
asio::awaitable<void> master_session::watch_worker(std::string id) {
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
        take_answers();
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
asio::awaitable<void> master_session::follow_worker_dir(std::string id) {
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
        take_answers();
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
        take_answers();
        view_.worker_dir_back(id);
    }
}

/// A live worker's directory changed: lists it again at once if it was deleted, else
/// once the view needs it (master_fsm::worker_dir_listing_wanted). Most changes are
/// our own assignments; the slots T4 frees are counted when the count is in the way.
asio::awaitable<void> master_session::until_dir_listing_wanted(
    std::string id, zkco::watch_event ev
) {
    if (ev.type != zkco::event_type::child) {
        co_return;
    }
    take_answers();
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

asio::awaitable<bool> master_session::worker_dir_changed(
    std::string id, std::vector<std::string> names
) {
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
asio::awaitable<bool> master_session::assign_dirs_changed(std::vector<std::string> names) {
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

/// Reads the data of the pending tasks the view asks for, then tells it.
asio::awaitable<void> master_session::load(
    std::vector<std::string> tids, std::vector<std::string> paths
) {
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
    inbox_->push(answer::tasks{std::move(reads)});
}

/// Deletes what others wrote below a node of ours (§8), once at a time per node, so the
/// transaction that deletes the node can succeed; the schedule loop tries again after.
void master_session::clear_foreign(const std::string& path) {
    if (view_.begin_clearing(path)) {
        start_clearing(path);
    }
}

/// Clears `path` for the view (it has begun clearing it).
void master_session::start_clearing(const std::string& path) {
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
            inbox_->push(answer::cleared{path});
        },
        "foreign"
    );
}

/// Wakes the schedule loop at `at` (a task in trouble may be tried again, a type's grace
/// ends): the view's earliest such time.
void master_session::arm_retry(std::optional<std::chrono::steady_clock::time_point> at) {
    if (!at || *at == retry_.expiry()) {
        return;
    }
    retry_.expires_at(*at);
    retry_.async_wait([box = inbox_](zkco::error_code e) {
        if (!e) {
            box->push(answer::retry_due{});
        }
    });
}

asio::awaitable<bool> master_session::cancels_changed(std::vector<std::string> names) {
    view_.cancels_listed(names);
    co_return true;
}

asio::awaitable<void> master_session::schedule_loop() {
    for (;;) {
        auto cs = co_await asio::this_coro::cancellation_state;
        if (stopping() || cs.cancelled() != asio::cancellation_type::none) {
            co_return;
        }
        take_answers();
        if (stopping()) {
            co_return;
        }
        if (!dirty_ || shards_unlisted_ > 0 || !shard_reads_in()) {
            // Woken by the inbox (an answer), by wake() (a watcher saw a change) or by
            // shard_read_done.
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

/// Says when this master acts: not while its session is disconnected. Cut off from
/// ZooKeeper it cannot write, and once its session expires at the server another master
/// acts, while the C client would tell us of the expiry only after reaching a server
/// again: a partitioned master stands down as soon as the link is seen down (after two
/// thirds of the session timeout at most), before the server can expire it.
asio::awaitable<void> master_session::follow_connection() {
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
asio::awaitable<void> master_session::watch_epoch() {
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

/// Carries out one of the view's actions; the answer goes back to the view.
void master_session::carry_out(master_action a) {
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
    send(std::move(ops), sent::for_fsm{std::move(a)});
}

}  // namespace detail

asio::awaitable<void> run_master(
    zkco::client& zk,
    protocol::layout l,
    protocol::member_info me,
    std::int64_t epoch,
    master_options opts,
    master_stats* stats
) {
    spdlog::info("master {}: acting with epoch {}", me.id, epoch);
    detail::master_session session(zk, l, std::move(me), epoch, opts, stats);
    co_await session.run();
}

}  // namespace zkd::roles
