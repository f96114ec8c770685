// SPDX-License-Identifier: MIT
// The master's I/O shell: the watchers, the schedule loop that carries out master_fsm's
// actions (master_fsm.hpp) and hands the answers back, the epoch and the connection. Its
// other loops are in files of their own (master_session.hpp).
#include "roles/master/master.hpp"

#include "protocol/ids.hpp"
#include "roles/cluster/election.hpp"
#include "roles/cluster/foreign.hpp"
#include "roles/master/detail/master_session.hpp"
#include "roles/txn/zk_ops.hpp"
#include "zkco/read_batch.hpp"

#include <boost/asio/this_coro.hpp>

#include <spdlog/spdlog.h>

#include <set>

namespace asio = boost::asio;

namespace zkd::roles {

namespace detail {

namespace {

master_fsm::options fsm_options(
    const master_options& o, const protocol::member_info& me, std::int64_t epoch
) {
    master_fsm::options v;
    v.policy = o.policy;
    v.unknown_type_grace = o.unknown_type_grace;
    v.on_assigned = o.on_assigned;
    v.unstarted_bound = o.unstarted_bound;
    v.result_retention = o.result_retention;
    v.gc_dirs_per_sweep = o.gc_dirs_per_sweep;
    v.master_node = me;
    v.master_node.epoch = epoch;
    v.master_node.max_pending = protocol::published_bound(o.max_pending);
    v.master_node.direct = o.direct_placement;
    if (v.master_node.since_ms == 0) {
        v.master_node.since_ms = protocol::now_ms();
    }
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
      fsm_(l, epoch, fsm_options(opts, me_, epoch), *stats_),
      retry_(zk.get_executor(), asio::steady_timer::time_point::max()) {
    // Every master transaction fails once a newer master has bumped the epoch.
    batcher_.set_prefix({zkco::op::check{
        protocol::layout::epoch(), static_cast<std::int32_t>(epoch)}});
    // T2 and T7 create in workers' directories, T6 in pending shards: logged there (§6).
    batcher_.enable_change_logs();
    for (std::uint32_t shard = 0; shard < l_.pending_shards; ++shard) {
        shard_index_.emplace(protocol::layout::pending_shard(shard), shard);
        shard_index_.emplace(protocol::layout::delayed_shard(shard), l_.pending_shards + shard);
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
        group_.spawn([this, shard] { return follow_delayed_shard(shard); }, "delayed");
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
    to_fsm(master_saw::tasks_read{std::move(t.reads)});
}

void master_session::apply(answer::delayed_nodes& d) {
    to_fsm(master_saw::delayed_read{std::move(d.reads)});
}

void master_session::apply(answer::cleared& c) {
    to_fsm(master_saw::cleared{std::move(c.path)});
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
    to_fsm(master_saw::answered{
        std::move(s.txn),
        master_txn_report{r, ec == zkco::condition::retryable, ec ? ec.message() : std::string()}});
}

/// Hands the fsm an event and carries out what it decides.
void master_session::to_fsm(const master_event& e) {
    carry_out(fsm_.on(e, std::chrono::steady_clock::now()));
}

/// A watcher's event: the answers that came before it first, then the event; the schedule
/// loop decides next.
void master_session::feed(const master_event& e) {
    take_answers();
    to_fsm(e);
    wake();
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
    feed(master_saw::workers_listed{std::move(names)});
    co_return true;
}

/// Reads the nodes of workers new to the fsm (a read_workers action).
asio::awaitable<void> master_session::read_workers(std::vector<std::string> ids) {
    std::vector<std::string> paths;
    paths.reserve(ids.size());
    for (const auto& id : ids) {
        paths.push_back(protocol::layout::worker(id));
    }
    auto nodes = co_await zkco::get_all(zk_, paths);
    master_saw::workers_read read;
    read.nodes.reserve(ids.size());
    for (std::size_t i = 0; i < ids.size(); ++i) {
        auto& n = read.nodes.emplace_back(master_saw::worker_node{std::move(ids[i]), {}, false});
        if (nodes[i]) {  // else gone again
            n.data = std::move(nodes[i]->data);
            n.ephemeral = is_ephemeral(nodes[i]->stat);
        }
    }
    feed(read);
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
        feed(master_saw::worker_changed{id, std::move(w->value.data)});
        if (!fsm_.worker_alive(id)) {
            co_return;
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
        if (stopping()) {
            co_return;
        }
        feed(master_saw::dir_gone{id});
        if (!fsm_.worker_alive(id)) {
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
        feed(master_saw::dir_back{id});
    }
}

/// A live worker's directory changed: lists it again at once if it was deleted, else
/// once the fsm needs it (master_fsm::worker_dir_listing_wanted). Most changes are
/// our own assignments; the slots T4 frees are counted when the count is in the way.
asio::awaitable<void> master_session::until_dir_listing_wanted(
    std::string id, zkco::watch_event ev
) {
    if (ev.type != zkco::event_type::child) {
        co_return;
    }
    feed(master_saw::dir_touched{id});
    for (;;) {
        auto cs = co_await asio::this_coro::cancellation_state;
        if (stopping() || cs.cancelled() != asio::cancellation_type::none ||
            fsm_.worker_dir_listing_wanted(id)) {
            co_return;
        }
        // Woken after a step of the schedule loop that may want it (its expiry never comes).
        dir_listing_waiters_ = true;
        co_await dir_listing_.async_wait(asio::as_tuple(asio::use_awaitable));
    }
}

asio::awaitable<bool> master_session::worker_dir_changed(
    std::string id, std::vector<std::string> names
) {
    feed(master_saw::dir_listed{id, std::move(names)});
    // Departed: T6 owns the directory now.
    co_return fsm_.worker_alive(id);
}

/// Directories of workers that are gone: at takeover (a dead master's leftovers), and
/// whenever a directory appears without its worker.
asio::awaitable<bool> master_session::assign_dirs_changed(std::vector<std::string> names) {
    auto live = co_await zk_.get_children(protocol::layout::workers_dir());
    if (!live) {
        co_return true;  // the next change looks again
    }
    feed(master_saw::assign_dirs_listed{
        std::move(names), std::set<std::string>(live->names.begin(), live->names.end())});
    co_return true;
}

/// Reads the data of the pending tasks the fsm asks for, then tells it.
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

/// Deletes what others wrote below a node of ours (§8; a clear_below action), so the
/// transaction that deletes the node can succeed; the fsm tries again after.
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
/// ends): the fsm's earliest such time.
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
    feed(master_saw::cancels_listed{std::move(names)});
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
        if (dirty_) {
            // Decided only once the fsm has the shards it waits for (else: not decided).
            auto step = fsm_.on(master_saw::decide{}, std::chrono::steady_clock::now());
            if (step.decided) {
                dirty_ = false;
                carry_out(std::move(step));
                continue;
            }
        }
        if (inbox_->empty()) {
            // Woken by the inbox (an answer), by wake() (a watcher saw a change) or by a
            // shard read that came in.
            wake_.expires_at(asio::steady_timer::time_point::max());
            co_await wake_.async_wait(asio::as_tuple(asio::use_awaitable));
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

/// Carries out what the fsm decided; the answers come back to it as events.
void master_session::carry_out(master_step step) {
    if (stop_) {
        return;  // the answers that come while stopping still count; nothing new starts
    }
    for (auto& a : step.actions) {
        std::visit([this](auto& act) { carry_out(act); }, a);
    }
    if (step.decided) {
        // Directories waiting to be listed look whether they must, when they might: each
        // wake resumes every waiting directory's coroutine (a thousand with as many workers).
        if (fsm_.dir_listings_may_be_wanted() && std::exchange(dir_listing_waiters_, false)) {
            dir_listing_.cancel();
        }
        arm_retry(step.wake_at);
        if (opts_.on_queue_depth) {
            opts_.on_queue_depth(fsm_.queue_depth());
        }
        stats_->delayed = fsm_.delayed_count();
        stats_->delayed_next_due_ms = fsm_.delayed_next_due().value_or(0);
    }
}

void master_session::carry_out(master_do::read_tasks& a) {
    group_.spawn(
        [this, tids = std::move(a.tids), paths = std::move(a.paths)]() mutable {
            return load(std::move(tids), std::move(paths));
        },
        "load"
    );
}

void master_session::carry_out(master_do::read_delayed& a) {
    group_.spawn(
        [this, tids = std::move(a.tids), paths = std::move(a.paths)]() mutable {
            return load_delayed(std::move(tids), std::move(paths));
        },
        "delayed"
    );
}

void master_session::carry_out(master_do::release& a) {
    send_txn(a);
}

void master_session::carry_out(master_do::clear_below& a) {
    start_clearing(a.path);
}

void master_session::carry_out(master_do::read_workers& a) {
    group_.spawn(
        [this, ids = std::move(a.ids)]() mutable { return read_workers(std::move(ids)); }, "worker"
    );
}

void master_session::carry_out(master_do::follow_worker& a) {
    group_.spawn([this, id = a.id] { return watch_worker(id); }, "worker");
    group_.spawn([this, id = a.id] { return follow_worker_dir(id); }, "assign");
}

void master_session::carry_out(master_do::write_master& a) {
    if (a.again) {
        send(std::move(a.ops), sent::master_node{});
    } else {
        send(std::move(a.ops), sent::nothing{});
    }
}

void master_session::carry_out(master_do::assign& a) {
    send_txn(a);
}

void master_session::carry_out(master_do::reject& a) {
    send_txn(a);
}

void master_session::carry_out(master_do::cancel& a) {
    send_txn(a);
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
