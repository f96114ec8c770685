// SPDX-License-Identifier: MIT
// The client's shell: the decisions of a submit (T1: resend or not, did it succeed) and of a
// bundle consume (T5: write, read again, deliver) are roles/client/submit_fsm; this file carries
// their steps out over the session and the batcher.
//
// Cancellation, the idiom of worker.cpp: where a cancel must be answered rather than thrown
// (submit: its writes are out, so it says operation_aborted, the outcome unknown, never
// success; a bundle's consume, which the other waits depend on), the coroutine sets
// `throw_if_cancelled(false)` and checks `this_coro::cancellation_state` after the waits a
// cancel may end. The plain reads and watches keep asio's default: the next co_await after a
// cancel throws, which ends their retry loops at once (a retry after our own
// operation_aborted would otherwise wait on).
#include "roles/client/task_client.hpp"

#include "protocol/client_txn.hpp"
#include "protocol/ids.hpp"
#include "roles/client/detail/cancel_answered.hpp"
#include "roles/client/detail/inbox.hpp"
#include "roles/client/submit_fsm.hpp"
#include "roles/cluster/election.hpp"
#include "roles/cluster/foreign.hpp"
#include "roles/txn/batcher.hpp"
#include "roles/txn/zk_ops.hpp"
#include "zkco/deadline.hpp"
#include "zkco/read_batch.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <iterator>
#include <utility>

namespace asio = boost::asio;

namespace zkd::roles {

namespace {

/// One T1 (with its consumes) in flight at a time: what is submitted meanwhile waits for its
/// answer and goes in the next, larger transaction. The master reads a shard's log when its
/// watch fires, and its read then mostly comes before the client's next T1, so it misses
/// fewer versions of the log: in a burst of 20,000 tasks the reads per task went from
/// 2.05-2.08 to 1.74-1.87 (docs/performance.md, "One submit transaction in flight"). A lone
/// submit still goes at once.
multi_batcher::limits client_batch_limits() {
    multi_batcher::limits lim;
    lim.max_in_flight = 1;
    return lim;
}

}  // namespace

/// A send_nodes in progress: the plan and the wake-up are shared with the batcher's
/// handlers, which may outlive a cancelled caller (and the client: they check `alive` first).
struct task_client::sending {
    sending(const asio::any_io_executor& ex, submit_fsm p)
        : plan(std::move(p)), all_done(ex, asio::steady_timer::time_point::max()) {}
    submit_fsm plan;
    std::vector<zkco::error_code> errors;  // per node, for the first that failed
    std::vector<std::size_t> sizes;        // per node: its tasks (0: a plain task)
    asio::steady_timer all_done;
    std::function<void(sending&)> on_over;
    /// Sends node i (again): the caller holds it while it wants nodes sent again.
    std::shared_ptr<std::function<void(std::size_t)>> send;

    /// The ids of node i's tasks.
    [[nodiscard]] std::vector<std::string> ids_of(std::size_t i) const {
        if (sizes[i] == 0) {
            return {plan.tid(i)};
        }
        std::vector<std::string> out;
        out.reserve(sizes[i]);
        for (std::size_t k = 0; k < sizes[i]; ++k) {
            out.push_back(protocol::bundled_task_id(plan.tid(i), k));
        }
        return out;
    }
};

/// A submit held back for the next transaction (auto_bundle).
struct task_client::pooled {
    explicit pooled(const asio::any_io_executor& ex)
        : wake(ex, asio::steady_timer::time_point::max()) {}
    std::vector<protocol::task_spec> tasks;  // checked, with the §4.3 fields
    std::vector<std::string> ids;            // once sent and answered
    zkco::error_code error;                  // the first failure of a node of it
    bool taken = false;                      // flush_pool took it: it is being sent
    bool abandoned = false;                  // its caller went before that: send nothing
    bool over = false;                       // every node of it answered
    asio::steady_timer wake;
};

task_client::task_client(zkco::client& zk, protocol::layout l)
    : zk_(zk),
      l_(l),
      batcher_(std::make_unique<multi_batcher>(zk, client_batch_limits())),
      consumed_(zk.get_executor(), asio::steady_timer::time_point::max()),
      direct_(std::make_unique<direct_placer>()),
      queue_read_(zk.get_executor(), asio::steady_timer::time_point::max()),
      inbox_(std::make_shared<inbox>()) {
    batcher_->enable_change_logs();  // T1's creates go in their shards' change logs (§6)
    batcher_->on_send([this] { flush_pool(); });  // submits held back go now (auto_bundle)
}

task_client::~task_client() {
    *alive_ = false;
    for (auto& p : pool_) {
        p->error = asio::error::operation_aborted;  // never sent
        p->over = true;
        p->wake.cancel();
    }
}

asio::awaitable<zkco::result<std::vector<std::string>>> task_client::submit(
    std::vector<protocol::task_spec> tasks, submit_options opts
) {
    // A cancel is answered, not thrown; the caller's own setting is back once it is.
    co_return co_await detail::answered_on_cancel(submit_answered(std::move(tasks), opts));
}

asio::awaitable<zkco::result<std::vector<std::string>>> task_client::submit_answered(
    std::vector<protocol::task_spec> tasks, submit_options opts
) {
    // One per node: its id is drawn once the call is about to send (draw_id), so that all
    // of it lands in the shard of the transaction it will go in.
    // A delayed submit (§4.3): the ids carry the due time, the nodes go to /delayed.
    const bool delayed = opts.due_ms && *opts.due_ms > protocol::now_ms();
    if (opts.due_ms && (*opts.due_ms < 0 || *opts.due_ms > protocol::max_due_ms)) {
        co_return zkco::error_code(client_errc::bad_due_time);
    }
    if (opts.retries && (*opts.retries < 0 || *opts.retries > protocol::max_retries_limit)) {
        co_return zkco::error_code(client_errc::bad_retries);
    }
    // The fields of §4.3 go in each task as submitted (so into its node, and alike in a
    // bundle's tasks, which share one node).
    for (auto& t : tasks) {
        protocol::set_submit_fields(
            t.timing, delayed ? opts.due_ms : std::nullopt, opts.retries, opts.backoff
        );
    }
    // Automatic bundles (§4.1): a call the client may pack with others is checked now and
    // packed when the batcher may send (flush_pool), if /master says it may (read below, in
    // the check of the bound, for a client's first submit).
    const bool poolable = auto_most_ > 1 && opts.bundle <= 1 && !delayed && !tasks.empty();
    std::vector<protocol::task_spec> kept;
    if (poolable) {
        kept = tasks;
    }
    // Our bundles say we read their tasks' early results (§6 T4e): results.cpp does.
    auto packed =
        pack_tasks(std::move(tasks), opts.bundle, ids_.client_hex(), protocol::now_ms(), true);
    if (!packed) {
        co_return zkco::error_code(packed.error());
    }
    if (delayed) {
        for (auto& n : *packed) {
            n.submitted_ms = *opts.due_ms;  // a delayed task's id carries its due time (§4.3)
        }
    }
    // The bound (§7 "Client"): checked on the nodes this call creates, before any is sent
    // (a pooled call's, as though none were bundled). Delayed nodes do not count against
    // it: they are not pending.
    auto admitted = co_await check_queue(delayed ? 0 : packed->size());
    if (!admitted) {
        co_return admitted.error();
    }
    if (!admitted->admitted) {
        co_return zkco::error_code(client_errc::queue_full);
    }
    if (!results_dir_made_) {
        // Our results directory, before our first task can finish: else the first result's
        // writer finds it missing and makes it in a second try (§2). A failure here is no
        // error: the writer makes it then.
        results_dir_made_ = true;
        (void)co_await zk_.create(protocol::layout::client_results(ids_.client_hex()));
    }
    if (!receipts_ && zk_.session()) {
        // One name per session and client: the session's id makes it unique (T1).
        receipts_ = true;
        batcher_->enable_receipts(
            protocol::layout::receipts_dir(),
            protocol::receipt_name(static_cast<std::uint64_t>(zk_.session()->id), ids_.client_hex())
        );
    }
    if (poolable && master_says_bundle_) {
        auto p = std::make_shared<pooled>(zk_.get_executor());
        p->tasks = std::move(kept);
        pool_.push_back(p);
        batcher_->poke();  // a lone submit goes on the next turn, as any
        const auto cs = co_await asio::this_coro::cancellation_state;
        if (cs.cancelled() == asio::cancellation_type::none && !p->over) {
            co_await p->wake.async_wait(asio::as_tuple(asio::use_awaitable));
        }
        if (!p->over) {
            // Cancelled: nothing is sent if it was still held; else the outcome is unknown.
            p->abandoned = !p->taken;
            co_return zkco::error_code(asio::error::operation_aborted);
        }
        if (p->error) {
            co_return p->error;
        }
        co_return std::move(p->ids);
    }
    // From here on nothing waits until the nodes are queued in the batcher: the ids drawn now
    // are for the transaction they go in.
    auto st = send_nodes(std::move(*packed), delayed, nullptr);
    const auto send = std::move(st->send);  // nodes are sent again while this call waits
    if (st->plan.result() == submit_fsm::outcome::pending) {
        // A cancel ends the wait (or came before it): the answers still out are unknown.
        auto cs = co_await asio::this_coro::cancellation_state;
        if (cs.cancelled() == asio::cancellation_type::none) {
            co_await st->all_done.async_wait(asio::as_tuple(asio::use_awaitable));
            cs = co_await asio::this_coro::cancellation_state;
        }
        if (cs.cancelled() != asio::cancellation_type::none) {
            st->plan.cancelled();
        }
    }
    switch (st->plan.result()) {
    case submit_fsm::outcome::submitted: {
        std::vector<std::string> ids;  // one per task
        for (std::size_t i = 0; i < st->plan.size(); ++i) {
            auto of = st->ids_of(i);
            std::move(of.begin(), of.end(), std::back_inserter(ids));
        }
        co_return ids;
    }
    case submit_fsm::outcome::failed:
        co_return st->errors[*st->plan.first_failed()];
    case submit_fsm::outcome::cancelled:
    case submit_fsm::outcome::pending:
        break;
    }
    co_return zkco::error_code(asio::error::operation_aborted);
}

std::shared_ptr<task_client::sending> task_client::send_nodes(
    std::vector<packed_node> packed, bool delayed, std::function<void(sending&)> on_over
) {
    std::vector<std::string> nodes;  // one per node: a task's id or a bundle's
    std::vector<std::string> data;   // one per node
    std::vector<std::size_t> sizes;  // one per node
    nodes.reserve(packed.size());
    data.reserve(packed.size());
    sizes.reserve(packed.size());
    // Plain tasks go to a worker directly while the placer finds one with room (§6 T1
    // "Direct placement"), the others to pending.
    struct direct_node {
        std::size_t node = 0;
        direct_placer::target to;
        std::string data;  // with the assignment
    };
    std::vector<direct_node> direct;
    const auto placed_ms = protocol::now_ms();
    for (auto& n : packed) {
        std::optional<direct_placer::target> to;
        if (direct_on_ && n.bundle == 0 && !delayed) {
            // The transaction it goes in, as draw_id counts: its worker is tried first.
            to = direct_->place(n.type, ids_.client() + batcher_->counters().transactions);
        }
        // A direct placement's assignment: assigned_ms and worker, no attempt or epoch (§4).
        // Our own encode() wrote the task, so the stamp does not fail; if it did, the task
        // would go to pending (and the worker's budget come back with the next read).
        auto with = to ? protocol::stamp(n.data, protocol::assignment{0, 0, placed_ms, to->worker})
                       : protocol::codec_result<std::string>(protocol::decode_error{});
        if (with) {
            // No shard to fall in: the id as it comes.
            nodes.push_back(ids_.next(n.priority, n.submitted_ms));
            direct_->placed(nodes.back(), to->worker);
            direct.push_back({nodes.size() - 1, std::move(*to), std::move(*with)});
        } else {
            nodes.push_back(draw_id(n.priority, n.submitted_ms, n.bundle));
        }
        data.push_back(std::move(n.data));
        sizes.push_back(n.bundle);
    }
    auto st = std::make_shared<sending>(
        zk_.get_executor(),
        submit_fsm(l_, std::move(nodes), std::move(data), batcher_->receipts_enabled())
    );
    st->errors.resize(st->plan.size());
    st->sizes = std::move(sizes);
    st->on_over = std::move(on_over);
    own_unconsumed_ += st->plan.size();
    if (delayed) {
        st->plan.delay_all();
    }
    for (auto& d : direct) {
        st->plan.direct(d.node, std::move(d.to.worker), d.to.version, std::move(d.data));
    }
    auto send = std::make_shared<std::function<void(std::size_t)>>();
    *send = [this, weak_st = std::weak_ptr(st), alive = alive_,
             weak_send = std::weak_ptr(send)](std::size_t i) {
        auto held = weak_st.lock();
        if (!held) {
            return;
        }
        auto ops = to_zkco(held->plan.ops(i));
        batcher_->async_submit_decided(
            std::move(ops),
            [this, st = held, alive, weak_send, i](zkco::error_code ec, auto per_op) {
                // operation_aborted: the batcher (and maybe this client) is gone: not lost.
                const bool lost =
                    ec == zkco::condition::retryable && ec != asio::error::operation_aborted;
                const bool session_alive = *alive && !zkco::is_terminal(zk_.state());
                st->errors[i] = ec;
                const bool was_direct = !st->plan.direct_worker(i).empty();
                const auto next = st->plan.answered(i, to_answer(ec, per_op), lost, session_alive);
                if (was_direct && *alive) {
                    if (st->plan.direct_worker(i).empty()) {
                        // Redirected to pending (the worker changed or left): the slot it
                        // took is free.
                        direct_->settled(st->plan.tid(i));
                    } else if (!ec) {
                        ++direct_placed_;
                    }
                }
                switch (next) {
                case submit_fsm::next::resend:
                    if (auto again = weak_send.lock(); again && *alive) {
                        (*again)(i);
                        return;
                    }
                    // The call is over (cancelled), or the client is gone: nobody to resend
                    // for.
                    st->all_done.cancel();
                    break;
                case submit_fsm::next::over:
                    st->all_done.cancel();
                    if (st->on_over) {
                        auto over = std::move(st->on_over);
                        st->on_over = nullptr;
                        st->send.reset();
                        over(*st);
                    }
                    break;
                case submit_fsm::next::wait:
                    break;
                }
            }
        );
    };
    st->send = send;
    for (std::size_t i = 0; i < st->plan.size(); ++i) {
        (*send)(i);
    }
    return st;
}

void task_client::flush_pool() {
    // Every call held meanwhile, less those whose callers went.
    auto calls = std::exchange(pool_, {});
    std::erase_if(calls, [](const auto& c) { return c->abandoned; });
    if (calls.empty()) {
        return;
    }
    std::vector<protocol::task_spec> all;
    std::vector<std::pair<std::size_t, std::size_t>> where;  // per task: call, index in it
    for (std::size_t c = 0; c < calls.size(); ++c) {
        calls[c]->taken = true;
        calls[c]->ids.resize(calls[c]->tasks.size());
        for (std::size_t j = 0; j < calls[c]->tasks.size(); ++j) {
            all.push_back(std::move(calls[c]->tasks[j]));
            where.emplace_back(c, j);
        }
        calls[c]->tasks.clear();
    }
    // Spread over the workers' threads, as last read (none read: a fixed guess).
    const auto spread = direct_->threads() > 0 ? direct_->threads() : std::size_t{8};
    const auto groups = plan_auto_bundles(all, auto_most_, spread);
    std::vector<packed_node> nodes;
    std::vector<std::vector<std::size_t>> node_tasks;  // per node: its tasks, in `all`
    const auto now = protocol::now_ms();
    for (const auto& g : groups) {
        std::vector<protocol::task_spec> specs;
        specs.reserve(g.size());
        for (const auto i : g) {
            specs.push_back(std::move(all[i]));
        }
        // Checked when submitted, so this packs; should it not, the calls say why.
        auto packed = pack_tasks(std::move(specs), g.size(), ids_.client_hex(), now, true);
        if (!packed) {
            for (const auto i : g) {
                calls[where[i].first]->error = zkco::error_code(packed.error());
            }
            continue;
        }
        std::size_t k = 0;
        for (auto& n : *packed) {
            const auto count = std::max<std::size_t>(n.bundle, 1);
            node_tasks.emplace_back(
                g.begin() + static_cast<std::ptrdiff_t>(k),
                g.begin() + static_cast<std::ptrdiff_t>(k + count)
            );
            k += count;
            auto_bundled_ += n.bundle;
            nodes.push_back(std::move(n));
        }
    }
    const auto finish = [calls](auto&&...) {
        for (const auto& c : calls) {
            c->over = true;
            c->wake.cancel();
        }
    };
    if (nodes.empty()) {
        finish();
        return;
    }
    send_nodes(
        std::move(nodes), false,
        [calls, where = std::move(where), node_tasks = std::move(node_tasks), finish](sending& st) {
            for (std::size_t i = 0; i < node_tasks.size(); ++i) {
                const auto ids = st.ids_of(i);
                for (std::size_t k = 0; k < node_tasks[i].size(); ++k) {
                    const auto [c, j] = where[node_tasks[i][k]];
                    if (st.plan.failed(i)) {
                        if (!calls[c]->error) {
                            calls[c]->error = st.errors[i];
                        }
                    } else {
                        calls[c]->ids[j] = ids[k];
                    }
                }
            }
            finish();
        }
    );
}

std::string task_client::draw_id(int priority, std::int64_t submitted_ms, std::size_t bundle) {
    // The tasks of one transaction go in one pending shard (§3): the master then reads one
    // change log for it, not one per shard it touched, and the next transaction goes in the
    // next shard, so that the master has read one log before the shard's next. A large
    // submit moves on every shard_run nodes, so that no shard gets more than its share of a
    // backlog. Counter values are skipped until an id falls in the shard (16 tries on
    // average with 16 shards); an id that does not after a few tries goes where it falls.
    const auto shards = std::max<std::uint32_t>(l_.pending_shards, 1);
    const auto txn = batcher_->counters().transactions;
    if (txn != drawn_for_txn_) {
        drawn_for_txn_ = txn;
        drawn_ = 0;
    }
    const auto shard =
        static_cast<std::uint32_t>((ids_.client() + txn + drawn_++ / shard_run) % shards);
    std::string node;
    const auto most_tries = std::min<std::uint64_t>(32ULL * shards, 1024);
    for (std::uint64_t tries = 0; tries < most_tries; ++tries) {
        const auto tid = ids_.next(priority, submitted_ms);
        node = bundle == 0 ? tid : protocol::bundle_id(tid, bundle);
        if (protocol::shard_of(node, shards) == shard) {
            break;
        }
    }
    return node;
}

asio::awaitable<zkco::result<protocol::queue_check>> task_client::check_queue(std::uint64_t adding
) {
    while (gauge_.stale(protocol::pending_gauge::clock::now())) {
        if (reading_queue_) {
            co_await queue_read_.async_wait(asio::as_tuple(asio::use_awaitable));
        } else {
            reading_queue_ = true;
            const auto ec = co_await read_queue();
            reading_queue_ = false;
            queue_read_.cancel();  // wakes the submits that waited for this read
            if (ec) {
                co_return ec;
            }
        }
        const auto cs = co_await asio::this_coro::cancellation_state;
        if (cs.cancelled() != asio::cancellation_type::none) {
            co_return zkco::error_code(asio::error::operation_aborted);
        }
    }
    last_check_ = gauge_.admit(adding);
    co_return last_check_;
}

asio::awaitable<zkco::error_code> task_client::read_queue() {
    for (;;) {
        // /master and the shards' stats in one round trip; the stats only when they matter.
        const bool counts = gauge_.wants_counts();
        zkco::read_batch batch(zk_);
        auto master = batch.get(protocol::layout::master());
        std::optional<zkco::read_batch::slot<zkco::children>> workers;
        if (direct_on_ && master_says_direct_) {
            workers = batch.get_children(protocol::layout::workers_dir());
        }
        std::vector<zkco::read_batch::slot<std::optional<zkco::stat>>> shards;
        if (counts) {
            for (auto& p : l_.pending_shard_paths()) {
                shards.push_back(batch.exists(std::move(p)));
            }
        }
        const auto done = co_await batch.wait();
        zkco::error_code ec = done ? zkco::error_code() : done.error();
        std::optional<std::uint64_t> bound;
        if (!ec && *master) {
            // A master of an older zkd says nothing: no bound, direct placement on. Garbage
            // says nothing usable either (the master writes its node again when it sees
            // it): the last bound and say known stay, as when there is no /master.
            if (const auto m = protocol::decode_master((*master)->data); m) {
                bound = m->max_pending ? static_cast<std::uint64_t>(*m->max_pending) : 0;
                master_says_direct_ = m->direct;
                master_suspects_ = m->suspects;
                // Automatic bundles only where every member follows early results (§4.1).
                master_says_bundle_ =
                    std::ranges::binary_search(m->features, protocol::feature_entry_results);
            }
        } else if (!ec && master->error() != zkco::errc::no_node) {
            ec = master->error();
        }
        std::optional<std::uint64_t> pending;
        if (counts) {
            pending = 0;
            for (const auto& s : shards) {
                if (*s && **s) {
                    *pending += static_cast<std::uint64_t>(std::max(0, (**s)->num_children));
                } else if (!*s && !ec && s->error() != zkco::errc::no_node) {
                    ec = s->error();
                }
            }
        }
        if (!ec) {
            gauge_.read(bound, pending, protocol::pending_gauge::clock::now());
            if (workers && **workers && master_says_direct_) {
                co_await read_workers(std::move((**workers)->names));
            } else {
                direct_->read({});  // no view: nothing goes directly
            }
            co_return ec;
        }
        if (ec == asio::error::operation_aborted) {
            co_return ec;
        }
        // A separate statement: GCC 12 miscompiles a co_await inside || or ?:.
        const bool back = co_await reconnected_after(zk_, ec);
        if (!back) {
            co_return ec;
        }
    }
}

asio::awaitable<void> task_client::read_workers(std::vector<std::string> names) {
    names = worker_window(std::move(names), sample_at_, direct_sample);
    zkco::read_batch batch(zk_);
    std::vector<zkco::read_batch::slot<zkco::node>> nodes;
    std::vector<zkco::read_batch::slot<std::optional<zkco::stat>>> dirs;
    for (const auto& name : names) {
        nodes.push_back(batch.get(protocol::layout::worker(name)));
        dirs.push_back(batch.exists(protocol::layout::assign_dir(name)));
    }
    if (!co_await batch.wait()) {
        direct_->read({});
        co_return;
    }
    std::vector<worker_seen> seen;
    for (std::size_t k = 0; k < names.size(); ++k) {
        // As the master takes workers (§7): a live session's node holding a worker's data;
        // and its directory must be there for anything to go in it.
        if (!*nodes[k] || (*nodes[k])->stat.ephemeral_owner == 0 || !*dirs[k] || !**dirs[k]) {
            continue;
        }
        auto info = protocol::decode_worker((*nodes[k])->data);
        if (!info) {
            continue;
        }
        seen.push_back(
            {names[k], (*nodes[k])->stat.version, std::move(*info), (**dirs[k])->num_children}
        );
    }
    direct_->read(std::move(seen), master_suspects_);
}

/// The waits of one client on tasks of one bundle: the first reads and consumes for all
/// (the decisions are shared_bundle_read's); `done` wakes the others.

}  // namespace zkd::roles
