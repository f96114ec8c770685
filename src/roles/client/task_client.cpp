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
#include "roles/client/inspect.hpp"
#include "roles/client/submit_fsm.hpp"
#include "roles/cluster/election.hpp"
#include "roles/cluster/foreign.hpp"
#include "roles/txn/zk_ops.hpp"
#include "zkco/deadline.hpp"
#include "zkco/read_batch.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/serialize.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <functional>

namespace asio = boost::asio;

namespace zkd::roles {

/// One wait parked in the inbox: the follower fills it in and cancels `ready`.
struct task_client::inbox_wait {
    explicit inbox_wait(const asio::any_io_executor& ex)
        : ready(ex, asio::steady_timer::time_point::max()) {}

    asio::steady_timer ready;  ///< a timer used as a condvar
    bool done = false;
    bool read_it = false;  ///< delivered by name only: the wait reads the result itself
    zkco::result<zkco::node> node = zkco::error_code(asio::error::operation_aborted);
};

/// The waits on this client's own results and the view of its results directory, shared by
/// the waits and the follower (which may outlive this client: it checks `alive`).
struct task_client::inbox {
    results_inbox view;
    std::map<std::string, std::vector<std::shared_ptr<inbox_wait>>> waits;  ///< by name
    bool running = false;  ///< a follower runs (while waits are parked)

    /// Completes the waits on `name`.
    void complete(const std::string& name, const std::function<void(inbox_wait&)>& fill) {
        const auto it = waits.find(name);
        if (it == waits.end()) {
            return;
        }
        for (const auto& w : it->second) {
            fill(*w);
            w->done = true;
            w->ready.cancel();
        }
        waits.erase(it);
    }

    void deliver(const results_inbox::delivery& d) {
        for (const auto& entry : d.with_data) {
            complete(entry.first, [&entry](inbox_wait& w) {
                w.node = zkco::node{entry.second, {}};
            });
        }
        for (const auto& name : d.to_read) {
            complete(name, [](inbox_wait& w) { w.read_it = true; });
        }
    }

    /// The follower stops: every parked wait fails with `ec`.
    void fail(zkco::error_code ec) {
        auto all = std::move(waits);
        waits.clear();
        for (const auto& [name, ws] : all) {
            for (const auto& w : ws) {
                view.unwait(name);
                w->node = ec;
                w->done = true;
                w->ready.cancel();
            }
        }
        view.gone();
        running = false;
    }
};

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

task_client::task_client(zkco::client& zk, protocol::layout l)
    : zk_(zk),
      l_(l),
      batcher_(zk, client_batch_limits()),
      consumed_(zk.get_executor(), asio::steady_timer::time_point::max()),
      queue_read_(zk.get_executor(), asio::steady_timer::time_point::max()),
      inbox_(std::make_shared<inbox>()) {
    batcher_.enable_change_logs();  // T1's creates go in their shards' change logs (§6)
}

task_client::~task_client() {
    *alive_ = false;
}

namespace {

// What a bundle's node holds beyond its tasks' args (type, priority, ...), generously.
constexpr std::size_t bundle_overhead = 1024;

bool same_bundle(const task_request& t, const protocol::task_spec& bundle) {
    return t.type == bundle.type && t.priority == bundle.priority && t.timeout == bundle.timeout &&
           t.max_attempts == bundle.max_attempts;
}

}  // namespace

asio::awaitable<zkco::result<std::vector<std::string>>> task_client::submit(
    std::vector<task_request> tasks, submit_options opts
) {
    co_await asio::this_coro::throw_if_cancelled(false);  // a cancel is answered, not thrown
    const std::size_t most = std::clamp<std::size_t>(opts.bundle, 1, protocol::max_bundle_tasks);
    // One per node: its id is drawn once the call is about to send (draw_id), so that all
    // of it lands in the shard of the transaction it will go in.
    struct node_to_name {
        int priority = 0;
        std::int64_t submitted_ms = 0;
        std::size_t bundle = 0;  // tasks in it; 0: a plain task
        std::string type;        // a plain task's (direct placement)
    };
    std::vector<node_to_name> to_name;
    std::vector<std::string> data;
    for (std::size_t i = 0; i < tasks.size();) {
        auto& t = tasks[i];
        protocol::task_spec spec;
        spec.type = std::move(t.type);
        spec.args = std::move(t.args);
        spec.priority = t.priority;
        spec.timeout = t.timeout;
        spec.max_attempts = t.max_attempts;
        spec.submitted_ms = protocol::now_ms();
        spec.client = ids_.client_hex();
        if (auto ok = validate(spec); !ok) {
            co_return zkco::error_code(broken_rule(ok.error()));
        }
        auto encoded = encode(spec);
        if (!protocol::task_size_ok(encoded)) {
            co_return zkco::error_code(client_errc::task_too_large);
        }
        // Then the tasks after it that may share its node, while they fit.
        std::size_t end = i + 1;
        std::size_t bytes = encoded.size() + bundle_overhead;
        protocol::task_spec next = spec;  // each task after the first, checked alone
        while (end < tasks.size() && end - i < most && same_bundle(tasks[end], spec)) {
            next.args = std::move(tasks[end].args);
            if (auto ok = validate(next); !ok) {
                co_return zkco::error_code(broken_rule(ok.error()));
            }
            auto size = protocol::to_text(next.args).size() + 1;
            if (bytes + size > protocol::max_task_bytes) {
                tasks[end].args = std::move(next.args);  // it starts the next node
                break;
            }
            bytes += size;
            spec.bundle.push_back(std::move(next.args));
            ++end;
        }
        const node_to_name plain{spec.priority, spec.submitted_ms, 0, {}};
        if (spec.bundle.empty()) {
            to_name.push_back(plain);
            to_name.back().type = spec.type;
            data.push_back(std::move(encoded));
        } else {
            spec.bundle.insert(spec.bundle.begin(), std::move(spec.args));
            spec.args = nullptr;
            if (!validate(spec)) {
                // Args nested too deep for a bundle (its tasks' args sit a level deeper than
                // a task's): each task goes alone.
                auto members = std::move(spec.bundle);
                spec.bundle.clear();
                for (auto& member : members) {
                    spec.args = std::move(member);
                    to_name.push_back(plain);
                    data.push_back(encode(spec));
                }
                i = end;
                continue;
            }
            to_name.push_back({spec.priority, spec.submitted_ms, spec.bundle.size(), {}});
            data.push_back(encode(spec));
            if (!protocol::task_size_ok(data.back())) {
                co_return zkco::error_code(client_errc::task_too_large);
            }
        }
        i = end;
    }
    // The bound (§7 "Client"): checked on the nodes this call creates, before any is sent.
    auto admitted = co_await check_queue(to_name.size());
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
        batcher_.enable_receipts(
            protocol::layout::receipts_dir(),
            protocol::receipt_name(static_cast<std::uint64_t>(zk_.session()->id), ids_.client_hex())
        );
    }
    // From here on nothing waits until the nodes are queued in the batcher: the ids drawn now
    // are for the transaction they go in.
    std::vector<std::string> ids;    // what the caller gets: one per task
    std::vector<std::string> nodes;  // one per node: a task's id or a bundle's
    ids.reserve(tasks.size());
    nodes.reserve(to_name.size());
    // Plain tasks go to a worker directly while the placer finds one with room (§6 T1
    // "Direct placement"), the others to pending.
    struct direct_node {
        std::size_t node = 0;
        direct_placer::target to;
        std::string data;  // with the assignment
    };
    std::vector<direct_node> direct;
    const auto placed_ms = protocol::now_ms();
    for (const auto& n : to_name) {
        std::optional<direct_placer::target> to;
        if (direct_on_ && n.bundle == 0) {
            // The transaction it goes in, as draw_id counts: its worker is tried first.
            to = direct_.place(n.type, ids_.client() + batcher_.counters().transactions);
        }
        if (to) {
            // No shard to fall in: the id as it comes.
            nodes.push_back(ids_.next(n.priority, n.submitted_ms));
            direct_.placed(nodes.back(), to->worker);
            const auto i = nodes.size() - 1;
            auto with = protocol::direct_assignment(data[i], to->worker, placed_ms);
            direct.push_back({i, std::move(*to), std::move(with)});
        } else {
            nodes.push_back(draw_id(n.priority, n.submitted_ms, n.bundle));
        }
        if (n.bundle == 0) {
            ids.push_back(nodes.back());
        }
        for (std::size_t k = 0; k < n.bundle; ++k) {
            ids.push_back(protocol::bundled_task_id(nodes.back(), k));
        }
    }
    // The plan and the wake-up are shared with the batcher's handlers, which may outlive a
    // cancelled caller (and this client: they check `alive` before touching it).
    struct state {
        state(const asio::any_io_executor& ex, submit_fsm p)
            : plan(std::move(p)), all_done(ex, asio::steady_timer::time_point::max()) {}
        submit_fsm plan;
        std::vector<zkco::error_code> errors;  // per node, for the first that failed
        asio::steady_timer all_done;
    };
    auto st = std::make_shared<state>(
        zk_.get_executor(),
        submit_fsm(l_, std::move(nodes), std::move(data), batcher_.receipts_enabled())
    );
    st->errors.resize(st->plan.size());
    own_unconsumed_ += st->plan.size();
    for (auto& d : direct) {
        st->plan.direct(d.node, std::move(d.to.worker), d.to.version, std::move(d.data));
    }
    auto send = std::make_shared<std::function<void(std::size_t)>>();
    *send = [this, st, alive = alive_, weak_send = std::weak_ptr(send)](std::size_t i) {
        auto ops = to_zkco(st->plan.ops(i));
        batcher_.async_submit_decided(
            std::move(ops),
            [this, st, alive, weak_send, i](zkco::error_code ec, auto per_op) {
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
                        direct_.settled(st->plan.tid(i));
                    } else if (!ec) {
                        ++direct_placed_;
                    }
                }
                switch (next) {
                case submit_fsm::next::resend:
                    if (auto again = weak_send.lock()) {
                        (*again)(i);
                        return;
                    }
                    // The call is over (cancelled): nobody to resend for.
                    st->all_done.cancel();
                    break;
                case submit_fsm::next::over:
                    st->all_done.cancel();
                    break;
                case submit_fsm::next::wait:
                    break;
                }
            }
        );
    };
    for (std::size_t i = 0; i < st->plan.size(); ++i) {
        (*send)(i);
    }
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
    case submit_fsm::outcome::submitted:
        co_return ids;
    case submit_fsm::outcome::failed:
        co_return st->errors[*st->plan.first_failed()];
    case submit_fsm::outcome::cancelled:
    case submit_fsm::outcome::pending:
        break;
    }
    co_return zkco::error_code(asio::error::operation_aborted);
}

std::string task_client::draw_id(int priority, std::int64_t submitted_ms, std::size_t bundle) {
    // The tasks of one transaction go in one pending shard (§3): the master then reads one
    // change log for it, not one per shard it touched, and the next transaction goes in the
    // next shard, so that the master has read one log before the shard's next. A large
    // submit moves on every shard_run nodes, so that no shard gets more than its share of a
    // backlog. Counter values are skipped until an id falls in the shard (16 tries on
    // average with 16 shards); an id that does not after a few tries goes where it falls.
    const auto shards = std::max<std::uint32_t>(l_.pending_shards, 1);
    const auto txn = batcher_.counters().transactions;
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
                direct_.read({});  // no view: nothing goes directly
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
        direct_.read({});
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
    direct_.read(std::move(seen), master_suspects_);
}

/// The waits of one client on tasks of one bundle: the first reads and consumes for all
/// (the decisions are shared_bundle_read's); `done` wakes the others.
struct task_client::bundle_wait {
    bundle_wait(const asio::any_io_executor& ex, std::size_t first)
        : read(first), done(ex, asio::steady_timer::time_point::max()) {}

    shared_bundle_read read;
    zkco::error_code error;  ///< the consume's, when it failed
    asio::steady_timer done;
};

asio::awaitable<zkco::result<protocol::task_result>> task_client::wait(std::string tid) {
    if (auto ref = protocol::parse_task_ref(tid); ref && ref->index) {
        co_return co_await wait_bundled(std::string(ref->node), *ref->index, tid);
    }
    auto node = co_await await_result_node(tid);
    if (!node) {
        co_return node.error();
    }
    consume_result(l_.result(tid));  // garbage too (§8): it is nobody's result
    auto decoded = protocol::decode_result(node->data);
    if (!decoded) {
        co_return zkco::error_code(client_errc::garbage_result);
    }
    co_return std::move(*decoded);
}

asio::awaitable<zkco::result<protocol::task_result>> task_client::await_result(std::string tid) {
    const auto ref = protocol::parse_task_ref(tid);
    const bool bundled = ref && ref->index;
    // (A local, not a conditional expression inside co_await: GCC 12 destroys the
    // temporaries of such an expression twice.)
    std::string node_id = tid;
    if (bundled) {
        node_id = std::string(ref->node);
    }
    auto node = co_await await_result_node(std::move(node_id));
    if (!node) {
        co_return node.error();
    }
    auto decoded = protocol::decode_result(node->data);
    if (!decoded) {
        co_return zkco::error_code(client_errc::garbage_result);
    }
    if (!bundled) {
        co_return std::move(*decoded);
    }
    if (std::binary_search(decoded->consumed.begin(), decoded->consumed.end(), *ref->index)) {
        co_return zkco::error_code(zkco::errc::no_node);
    }
    auto r = protocol::bundled_result(*decoded, *ref->index, tid);
    if (!r) {
        co_return zkco::error_code(client_errc::garbage_result);
    }
    co_return std::move(*r);
}

asio::awaitable<zkco::result<void>> task_client::consume(std::string tid) {
    if (auto ref = protocol::parse_task_ref(tid); ref && ref->index) {
        std::string bundle(ref->node);
        auto node = co_await read_node(l_.result(bundle));
        if (!node) {
            if (node.error() == zkco::errc::no_node) {
                co_return zkco::result<void>();
            }
            co_return node.error();
        }
        std::vector<std::size_t> indices(1, *ref->index);
        auto consumed = co_await consume_bundled(bundle, std::move(*node), std::move(indices));
        if (!consumed && consumed.error() != client_errc::garbage_result) {
            co_return consumed.error();
        }
        co_return zkco::result<void>();
    }
    const auto ec = co_await consume_until_done(l_.result(tid));
    if (ec) {
        co_return ec;
    }
    co_return zkco::result<void>();
}

asio::awaitable<zkco::result<protocol::task_result>> task_client::wait_bundled(
    std::string bundle, std::size_t index, std::string tid
) {
    using phase = shared_bundle_read::phase;
    std::shared_ptr<bundle_wait> w;
    for (;;) {
        if (auto it = bundle_waits_.find(bundle); it != bundle_waits_.end()) {
            // Another wait of ours reads this bundle: join it.
            w = it->second;
            w->read.join(index);
            co_await w->done.async_wait(asio::as_tuple(asio::use_awaitable));
            const auto next = w->read.woke(index);
            if (next == shared_bundle_read::on_wake::read_again) {
                continue;
            }
            if (next == shared_bundle_read::on_wake::cancelled) {
                co_return zkco::error_code(asio::error::operation_aborted);
            }
            if (next == shared_bundle_read::on_wake::wait_more) {
                // Cancelled, but our result is being consumed: take it rather than lose it.
                co_await asio::this_coro::throw_if_cancelled(false);
                while (w->read.now() == phase::consuming) {
                    co_await w->done.async_wait(asio::as_tuple(asio::use_awaitable));
                }
                if (w->read.now() == phase::abandoned) {
                    // The reader failed mid-consume; we were cancelled: no reading again.
                    co_return zkco::error_code(asio::error::operation_aborted);
                }
            }
            break;
        }
        w = std::make_shared<bundle_wait>(zk_.get_executor(), index);
        bundle_waits_.emplace(bundle, w);
        // However this reader ends (an error, or a cancellation thrown out of a co_await),
        // its entry goes and the waits that joined it wake up: they read for themselves.
        struct release {
            release(task_client& c, const std::string& b, std::shared_ptr<bundle_wait> s)
                : client(c), bundle(b), w(std::move(s)) {}
            release(const release&) = delete;
            release& operator=(const release&) = delete;
            release(release&&) = delete;
            release& operator=(release&&) = delete;
            ~release() {
                if (auto it = client.bundle_waits_.find(bundle);
                    it != client.bundle_waits_.end() && it->second == w) {
                    client.bundle_waits_.erase(it);
                }
                if (w->read.abandon()) {
                    w->done.cancel();
                }
            }
            task_client& client;
            const std::string& bundle;
            std::shared_ptr<bundle_wait> w;
        };
        const release guard(*this, bundle, w);
        auto node = co_await await_node(l_.result(bundle));
        bundle_waits_.erase(bundle);  // later waits read again
        if (!node) {
            if (node.error() == zkco::errc::no_node) {
                w->read.gone();  // gone before we read it: for all of us
                w->done.cancel();
            }
            co_return node.error();
        }
        // Cancelled meanwhile: consume nothing (our caller would not see its result).
        const auto cs = co_await asio::this_coro::cancellation_state;
        if (cs.cancelled() != asio::cancellation_type::none) {
            co_return zkco::error_code(asio::error::operation_aborted);
        }
        w->read.consuming();
        co_await asio::this_coro::throw_if_cancelled(false);  // the others depend on this
        auto consumed = co_await consume_bundled(bundle, std::move(*node), w->read.indices());
        if (consumed) {
            w->read.consumed(std::move(consumed->first), std::move(consumed->second));
        } else {
            w->error = consumed.error();
            w->read.failed();
        }
        w->done.cancel();
        break;
    }
    auto out = w->read.outcome_for(index, tid);
    switch (out.what) {
    case shared_bundle_read::outcome::kind::result:
        co_return std::move(out.result);
    case shared_bundle_read::outcome::kind::gone:
        co_return zkco::error_code(zkco::errc::no_node);
    case shared_bundle_read::outcome::kind::garbage:
        break;
    case shared_bundle_read::outcome::kind::failed:
        co_return w->error;
    }
    co_return zkco::error_code(client_errc::garbage_result);
}

asio::awaitable<zkco::result<std::pair<protocol::task_result, std::vector<std::size_t>>>>
task_client::consume_bundled(
    std::string bundle, zkco::node node, std::vector<std::size_t> indices
) {
    const std::string path = l_.result(bundle);
    bundle_consume c(path, protocol::bundle_size(bundle), std::move(indices));
    auto step = c.read(node.data, node.stat.version);
    zkco::error_code last;  // the error a reconnect or failed step is about
    for (;;) {
        switch (step.what) {
        case bundle_consume::step::kind::write: {
            auto ops = to_zkco(std::move(step.ops));
            auto [ec, per_op] =
                co_await batcher_.async_submit(std::move(ops), asio::as_tuple(asio::use_awaitable));
            last = ec;
            const bool lost =
                ec == zkco::condition::retryable && ec != asio::error::operation_aborted;
            step = c.answered(to_answer(ec, per_op), lost);
            if (c.deleted() &&
                zkco::parent_path(path) == protocol::layout::client_results(ids_.client_hex())) {
                // Our delete in our own directory: its follower's count of changes has it.
                inbox_->view.removed(bundle);
            }
            break;
        }
        case bundle_consume::step::kind::reconnect: {
            const bool retry = co_await reconnected_after(zk_, last);
            step = c.reconnected(retry);
            break;
        }
        case bundle_consume::step::kind::reread: {
            auto again = co_await read_node(path);
            if (again) {
                step = c.reread(again->data, again->stat.version);
            } else if (again.error() == zkco::errc::no_node) {
                step = c.reread_gone();
            } else {
                co_return again.error();
            }
            break;
        }
        case bundle_consume::step::kind::done:
            switch (step.how) {
            case bundle_consume::step::end::delivered:
                co_return std::pair(c.result(), c.taken());
            case bundle_consume::step::end::garbage:
                consume_result(path);  // garbage is nobody's result (§8)
                co_return zkco::error_code(client_errc::garbage_result);
            case bundle_consume::step::end::failed:
                break;
            }
            co_return last;
        }
    }
}

std::uint64_t task_client::results_listings() const noexcept {
    return inbox_->view.listings();
}

asio::awaitable<zkco::result<zkco::node>> task_client::read_node(std::string path) {
    for (;;) {
        auto node = co_await zk_.get(path);
        if (node || node.error() == zkco::errc::no_node) {
            co_return node;
        }
        const bool retry = co_await reconnected_after(zk_, node.error());
        if (!retry) {
            co_return node.error();
        }
    }
}

asio::awaitable<zkco::result<zkco::node>> task_client::await_node(std::string path) {
    bool there = false;  // known to exist (the watch said "created"): read it at once
    for (;;) {
        if (!there) {
            auto w = co_await zk_.watch_exists(path);
            if (!w) {
                const bool retry = co_await reconnected_after(zk_, w.error());
                if (retry) {
                    continue;
                }
                co_return w.error();
            }
            if (!w->value) {
                auto ev = co_await w->watch.changed();
                if (!ev && ev.error() == zkco::condition::session_lost) {
                    co_return ev.error();
                }
                there = ev && ev->type == zkco::event_type::created;
                continue;
            }
        }
        // no_node: someone else consumed it.
        co_return co_await read_node(path);
    }
}

asio::awaitable<zkco::result<zkco::node>> task_client::await_result_node(std::string tid) {
    // A bundle's waits share one read of its node (wait_bundled), and a bundle's consume
    // rewrites its node: those keep the exists watch.
    if (protocol::bundle_size(tid) == 0 && protocol::task_id_client(tid) == ids_.client_hex()) {
        auto node = co_await await_own(tid);
        if (node) {
            direct_.settled(tid);  // a slot it may have taken at its worker is free again
        }
        co_return node;
    }
    co_return co_await await_node(l_.result(tid));
}

asio::awaitable<zkco::result<zkco::node>> task_client::await_own(std::string name) {
    const auto box = inbox_;
    if (box->view.wait(name)) {
        co_return co_await read_node(l_.result(name));  // there already
    }
    auto w = std::make_shared<inbox_wait>(zk_.get_executor());
    box->waits[name].push_back(w);
    if (!box->running) {
        box->running = true;
        asio::co_spawn(
            zk_.get_executor(),
            follow_inbox(zk_, protocol::layout::client_results(ids_.client_hex()), box, alive_),
            asio::detached
        );
    }
    co_await w->ready.async_wait(asio::as_tuple(asio::use_awaitable));
    if (!w->done) {
        // Cancelled: this wait leaves (a result delivered later stays for the next reader).
        auto& ws = box->waits[name];
        std::erase(ws, w);
        if (ws.empty()) {
            box->waits.erase(name);
        }
        box->view.unwait(name);
        co_return zkco::error_code(asio::error::operation_aborted);
    }
    if (w->read_it) {
        co_return co_await read_node(l_.result(name));
    }
    co_return std::move(w->node);
}

asio::awaitable<void> task_client::follow_inbox(
    zkco::client& zk, std::string dir, std::shared_ptr<inbox> box, std::shared_ptr<bool> alive
) {
    zkco::error_code failed;
    for (;;) {
        auto read = co_await zk.watch_get(dir);
        if (!*alive) {
            co_return;
        }
        zkco::error_code ec;
        if (read) {
            auto delivery = box->view.log_read(to_dir_stat(read->value.stat), read->value.data);
            if (!delivery) {
                auto kids = co_await zk.get_children(dir);
                if (!*alive) {
                    co_return;
                }
                if (kids) {
                    delivery = box->view.listed(kids->names, to_dir_stat(kids->stat));
                } else {
                    ec = kids.error();
                }
            }
            if (delivery) {
                box->deliver(*delivery);
            }
        } else {
            ec = read.error();
        }
        if (ec == zkco::errc::no_node) {
            // Not made yet (the first result makes it) or deleted (T8): wait for it.
            box->view.gone();
            auto there = co_await zk.watch_exists(dir);
            if (!*alive) {
                co_return;
            }
            if (there && !there->value) {
                auto ev = co_await there->watch.changed();
                if (!*alive) {
                    co_return;
                }
                if (!ev && ev.error() == zkco::condition::session_lost) {
                    failed = ev.error();
                    break;
                }
            }
            if (there || there.error() == zkco::errc::no_node) {
                continue;
            }
            ec = there.error();
        }
        if (ec) {
            box->view.gone();
            const bool retry = co_await reconnected_after(zk, ec);
            if (!*alive) {
                co_return;
            }
            if (retry) {
                continue;
            }
            failed = ec;
            break;
        }
        auto ev = co_await read->watch.changed();
        if (!*alive) {
            co_return;
        }
        if (!ev && ev.error() == zkco::condition::session_lost) {
            failed = ev.error();
            break;
        }
        if (box->view.waiting() == 0) {
            // Nobody waits: the next wait starts a follower again, which reads from the
            // view's base on (a follower waiting for nothing would keep its io_context busy).
            box->running = false;
            co_return;
        }
    }
    box->fail(failed);
}

asio::awaitable<zkco::result<task_status>> task_client::status(std::string tid) {
    auto info = co_await read_task(zk_, l_, std::move(tid));
    if (!info) {
        co_return info.error();
    }
    if (info->state == protocol::task_state::unknown && !info->garbage.empty()) {
        co_return zkco::error_code(client_errc::garbage_result);
    }
    co_return task_status{info->state, std::move(info->worker), std::move(info->result)};
}

void task_client::consume_result(std::string path) {
    ++consuming_;
    // No captures: a coroutine lambda's captures die with the lambda, its parameters do not.
    auto consume = [](task_client* self, std::shared_ptr<bool> alive,
                      std::string p) -> asio::awaitable<void> {
        const auto ec = co_await self->consume_until_done(std::move(p), true);
        if (*alive && ec != asio::error::operation_aborted && --self->consuming_ == 0) {
            self->consumed_.cancel();
        }
    };
    asio::co_spawn(zk_.get_executor(), consume(this, alive_, std::move(path)), asio::detached);
}

asio::awaitable<zkco::error_code> task_client::consume_until_done(std::string path, bool deferred) {
    const auto alive = alive_;
    const auto own_results = protocol::layout::client_results(ids_.client_hex());
    zkco::error_code ec;
    for (int tries = 0; tries < 10; ++tries) {
        auto remove = to_zkco(std::vector<protocol::txn_op>{protocol::consume_op(path)});
        // A deferred first try rides with the next transaction (the next submit, say):
        // nobody waits for it, and one task at a time then costs one write transaction less.
        const auto token = asio::as_tuple(asio::use_awaitable);
        auto send = deferred && tries == 0
                        ? batcher_.async_submit_deferred(std::move(remove), token)
                        : batcher_.async_submit(std::move(remove), token);
        auto [sent, r] = co_await std::move(send);
        ec = sent;
        if (!*alive || ec == asio::error::operation_aborted) {
            co_return asio::error::operation_aborted;  // this client is gone (or going)
        }
        const auto outcome = protocol::read_consume(to_answer(ec, r));
        if (outcome == protocol::consume_outcome::consumed) {
            if (zkco::parent_path(path) == own_results) {
                if (!ec) {
                    // Our delete: the follower's count of the directory's changes includes it.
                    inbox_->view.removed(std::string(zkco::base_name(path)));
                }
                own_unconsumed_ -= own_unconsumed_ > 0 ? 1 : 0;
            }
            co_return zkco::error_code();  // (no node: by an earlier try, or another client)
        }
        if (outcome == protocol::consume_outcome::foreign_below) {
            // Someone wrote below the result: clear it (§8), then delete it.
            auto removed = co_await remove_children(zk_, path);
            if (!*alive) {
                co_return asio::error::operation_aborted;
            }
            if (removed) {
                spdlog::warn(
                    "client: deleted {} node(s) someone else wrote below {}", *removed, path
                );
                continue;
            }
            ec = removed.error();
        }
        const bool retry = co_await reconnected_after(zk_, ec);
        if (!*alive) {
            co_return asio::error::operation_aborted;
        }
        if (!retry) {
            break;
        }
    }
    spdlog::warn(
        "client: could not consume {}: {}; it stays until the master's result retention "
        "deletes it",
        path, ec.message()
    );
    co_return ec;
}

asio::awaitable<void> task_client::flush() {
    // (A session that ends completes the batcher's groups and ends the consumes.)
    while (!zkco::is_terminal(zk_.state())) {
        if (batcher_.outstanding() > 0) {
            co_await batcher_.async_wait_idle(asio::as_tuple(asio::use_awaitable));
        } else if (consuming_ > 0) {
            co_await consumed_.async_wait(asio::as_tuple(asio::use_awaitable));
        } else {
            break;
        }
    }
}

asio::awaitable<void> task_client::close() {
    co_await flush();
    if (!results_dir_made_ || own_unconsumed_ > 0 || zkco::is_terminal(zk_.state())) {
        co_return;  // none made, a result of ours may still come (or lie there), or no session
    }
    results_dir_made_ = false;
    // Fails when a result is in it after all (not empty) or someone deleted it: both fine.
    const auto dir = protocol::layout::client_results(ids_.client_hex());
    auto removed = co_await zkco::with_timeout(zk_.remove(dir), std::chrono::seconds(2));
    if (!removed && removed.error() != zkco::errc::not_empty &&
        removed.error() != zkco::errc::no_node) {
        spdlog::debug("client: results directory {} kept: {}", dir, removed.error().message());
    }
}

asio::awaitable<zkco::result<void>> task_client::cancel(std::string tid) {
    if (auto ref = protocol::parse_task_ref(tid); ref && ref->index) {
        tid = std::string(ref->node);  // a bundle is cancelled as a whole
    }
    auto r = co_await zk_.create(
        protocol::layout::cancel_request(tid), encode(protocol::cancel_info{protocol::now_ms()})
    );
    if (!r && r.error() != zkco::errc::node_exists) {
        co_return r.error();
    }
    co_return zkco::result<void>();
}

}  // namespace zkd::roles
