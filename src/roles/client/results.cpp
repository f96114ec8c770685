// SPDX-License-Identifier: MIT
// The client's results side: waiting for results (its own through the inbox, others' by
// watch), consuming them (T5, bundles included), status, cancel and close. The submit side
// is task_client.cpp; the cancellation idiom is the one written at its top.
#include "protocol/client_txn.hpp"
#include "protocol/ids.hpp"
#include "reactor/task_group.hpp"
#include "roles/client/detail/cancel_answered.hpp"
#include "roles/client/detail/inbox.hpp"
#include "roles/client/inspect.hpp"
#include "roles/client/submit_fsm.hpp"
#include "roles/client/task_client.hpp"
#include "roles/cluster/election.hpp"
#include "roles/cluster/foreign.hpp"
#include "roles/txn/batcher.hpp"
#include "roles/txn/zk_ops.hpp"
#include "zkco/deadline.hpp"
#include "zkco/read_batch.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/serialize.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <optional>
#include <utility>
#include <variant>

namespace asio = boost::asio;

namespace zkd::roles {

struct task_client::bundle_wait {
    bundle_wait(const asio::any_io_executor& ex, std::size_t first)
        : read(first), done(ex, asio::steady_timer::time_point::max()) {}

    shared_bundle_read read;
    zkco::error_code error;  ///< the consume's, when it failed
    asio::steady_timer done;
};

/// One read of a bundle's result that the await_result calls at a time share (peek_bundle).
struct task_client::bundle_peek {
    using whole = std::shared_ptr<const std::optional<protocol::task_result>>;

    explicit bundle_peek(const asio::any_io_executor& ex)
        : done(ex, asio::steady_timer::time_point::max()) {}

    asio::steady_timer done;  ///< cancelled once the reader is over (a timer used as a condvar)
    /// The reader's answer, for all; none when it left without one (cancelled): then each
    /// call that joined reads again.
    std::optional<zkco::result<whole>> got;
};

/// consume() calls on tasks of one bundle that share one read and one write (join_consume).
struct task_client::bundle_consume_group {
    explicit bundle_consume_group(const asio::any_io_executor& ex)
        : done(ex, asio::steady_timer::time_point::max()) {}

    std::vector<std::size_t> indices;  ///< the tasks of the calls that joined (repeats too)
    bool started = false;              ///< its read went out: later calls join `next`
    bool over = false;                 ///< `errors` holds the outcome
    std::map<std::size_t, zkco::error_code> errors;  ///< per task that was not consumed
    asio::steady_timer done;  ///< cancelled once over (a timer used as a condvar)
    /// The calls that came after it started: the next group, once this one is over.
    std::shared_ptr<bundle_consume_group> next;
};

asio::awaitable<zkco::result<protocol::task_result>> task_client::wait(std::string tid) {
    if (auto ref = protocol::parse_task_ref(tid); ref && ref->index) {
        // It may turn throw_if_cancelled off (a consume others depend on): not for our caller.
        co_return co_await detail::keeping_cancel_setting(
            wait_bundled(std::string(ref->node), *ref->index, tid), false
        );
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
    if (!ref || !ref->index) {
        auto node = co_await await_result_node(tid);
        if (!node) {
            co_return node.error();
        }
        auto decoded = protocol::decode_result(node->data);
        if (!decoded) {
            co_return zkco::error_code(client_errc::garbage_result);
        }
        co_return std::move(*decoded);
    }
    // One task of a bundle: its own node (§6 T4e), or its entry of the bundle's result.
    const std::string bundle(ref->node);
    const auto index = *ref->index;
    const auto own_path = protocol::entry_result_path(l_, bundle, index);
    auto first = co_await await_entry(bundle, index);
    if (!first) {
        co_return first.error();
    }
    if (*first) {
        co_return own_entry(own_path, **first, tid, false);
    }
    const auto read = co_await peek_bundle(bundle);
    if (!read) {
        co_return read.error();
    }
    const auto& whole = **read;
    if (!whole || protocol::is_published(*whole, index)) {
        // Its result is its own node's, or the bundle's is gone: its own node, if still there.
        auto own = co_await read_node(own_path);
        if (!own) {
            co_return own.error();  // no_node: consumed
        }
        co_return own_entry(own_path, *own, tid, false);
    }
    auto r = protocol::entry_result(std::nullopt, whole, index, tid);
    if (!r) {
        co_return zkco::error_code(client_errc::garbage_result);
    }
    if (!*r) {
        co_return zkco::error_code(zkco::errc::no_node);  // consumed
    }
    co_return std::move(**r);
}

asio::awaitable<zkco::result<std::shared_ptr<const std::optional<protocol::task_result>>>>
task_client::peek_bundle(std::string bundle) {
    using whole = bundle_peek::whole;
    for (;;) {
        if (auto it = bundle_peeks_.find(bundle); it != bundle_peeks_.end()) {
            // Another call reads it: take its answer.
            const auto p = it->second;
            co_await p->done.async_wait(asio::as_tuple(asio::use_awaitable));
            // Its answer, unless that is "no result yet": its read may have gone out before
            // this call saw the bundle's result named (then this call reads for itself).
            if (p->got && (!*p->got || (**p->got)->has_value())) {
                co_return *p->got;
            }
            if ((co_await asio::this_coro::cancellation_state).cancelled() !=
                asio::cancellation_type::none) {
                co_return zkco::error_code(asio::error::operation_aborted);
            }
            continue;  // the reader left without one, or found none: read again
        }
        const auto p = std::make_shared<bundle_peek>(zk_.get_executor());
        bundle_peeks_.emplace(bundle, p);
        // However this reader ends (a cancellation thrown out of a co_await too), its entry
        // goes and the calls that joined it wake up.
        struct release {
            release(task_client& c, const std::string& b, std::shared_ptr<bundle_peek> s)
                : client(c), bundle(b), p(std::move(s)) {}
            release(const release&) = delete;
            release& operator=(const release&) = delete;
            release(release&&) = delete;
            release& operator=(release&&) = delete;
            ~release() {
                if (auto it = client.bundle_peeks_.find(bundle);
                    it != client.bundle_peeks_.end() && it->second == p) {
                    client.bundle_peeks_.erase(it);
                }
                p->done.cancel();
            }
            task_client& client;
            const std::string& bundle;
            std::shared_ptr<bundle_peek> p;
        };
        const release guard(*this, bundle, p);
        auto node = co_await read_node(l_.result(bundle));
        if (!node) {
            if (node.error() == asio::error::operation_aborted) {
                co_return node.error();  // ours (cancelled), not the others': they read again
            }
            p->got = node.error() == zkco::errc::no_node
                         ? zkco::result<whole>(
                               std::make_shared<const std::optional<protocol::task_result>>()
                           )
                         : zkco::result<whole>(node.error());
            co_return *p->got;
        }
        auto decoded = protocol::decode_result(node->data);
        if (!decoded) {
            p->got = zkco::error_code(client_errc::garbage_result);
        } else {
            p->got =
                std::make_shared<const std::optional<protocol::task_result>>(std::move(*decoded));
        }
        co_return *p->got;
    }
}

zkco::result<protocol::task_result> task_client::own_entry(
    const std::string& path, const zkco::node& node, const std::string& tid, bool consume
) {
    if (consume) {
        consume_result(path);  // garbage too (§8): it is nobody's result
    }
    auto decoded = protocol::decode_result(node.data);
    if (!decoded) {
        return zkco::error_code(client_errc::garbage_result);
    }
    decoded->task = tid;
    return std::move(*decoded);
}

asio::awaitable<zkco::result<std::optional<zkco::node>>> task_client::await_entry(
    std::string bundle, std::size_t index
) {
    const auto own_name = protocol::bundled_task_id(bundle, index);
    if (protocol::task_id_client(bundle) == ids_.client_hex()) {
        // The bundle's result by name only: the waits on its tasks share one read of it.
        auto got = co_await await_own_or(own_name, bundle);
        if (!got) {
            if (got.error() == zkco::errc::no_node) {
                // Its own node came and was gone before it was read (consumed): read the
                // bundle's to find out.
                co_return std::optional<zkco::node>();
            }
            co_return got.error();
        }
        co_return std::move(*got);
    }
    const auto own_path = protocol::entry_result_path(l_, bundle, index);
    const auto bundle_path = l_.result(bundle);
    for (;;) {
        const auto cs = co_await asio::this_coro::cancellation_state;
        if (cs.cancelled() != asio::cancellation_type::none) {
            co_return zkco::error_code(asio::error::operation_aborted);
        }
        auto own = co_await zk_.watch_exists(own_path);
        if (!own) {
            if (co_await reconnected_after(zk_, own.error())) {
                continue;
            }
            co_return own.error();
        }
        if (own->value) {
            auto node = co_await read_node(own_path);
            if (!node) {
                co_return node.error();  // no_node: consumed
            }
            co_return std::optional<zkco::node>(std::move(*node));
        }
        auto whole = co_await zk_.watch_exists(bundle_path);
        if (!whole) {
            if (co_await reconnected_after(zk_, whole.error())) {
                continue;
            }
            co_return whole.error();
        }
        if (whole->value) {
            co_return std::optional<zkco::node>();
        }
        using namespace asio::experimental::awaitable_operators;
        auto ev = co_await (own->watch.changed() || whole->watch.changed());
        const auto& changed = ev.index() == 0 ? std::get<0>(ev) : std::get<1>(ev);
        if (!changed && changed.error() == zkco::condition::session_lost) {
            co_return changed.error();
        }
    }
}

asio::awaitable<zkco::result<std::optional<zkco::node>>> task_client::await_own_or(
    std::string own, std::string other
) {
    const auto box = inbox_;
    const auto own_path = l_.result_dir(other) + "/" + own;
    if (box->view.wait(own)) {
        auto node = co_await read_node(own_path);  // there already
        if (!node) {
            co_return node.error();
        }
        co_return std::optional<zkco::node>(std::move(*node));
    }
    if (box->view.wait(other, true)) {
        box->view.unwait(own);
        co_return std::optional<zkco::node>();  // there already: its caller reads it
    }
    auto w = std::make_shared<inbox_wait>(zk_.get_executor());
    w->name_only = other;
    box->waits[own].push_back(w);
    box->waits[other].push_back(w);
    follow_inbox_once(box);
    co_await w->ready.async_wait(asio::as_tuple(asio::use_awaitable));
    // Leave the name(s) not delivered to it (the inbox forgot those that were).
    for (const auto& name : {own, other}) {
        if (w->done && (name == w->name || std::ranges::count(w->also, name) > 0)) {
            continue;
        }
        if (auto it = box->waits.find(name); it != box->waits.end()) {
            std::erase(it->second, w);
            if (it->second.empty()) {
                box->waits.erase(it);
            }
        }
        box->view.unwait(name, name == other);
    }
    if (!w->done) {
        co_return zkco::error_code(asio::error::operation_aborted);  // cancelled
    }
    if (w->name == other) {
        co_return std::optional<zkco::node>();
    }
    if (!w->node && !w->read_it) {
        co_return w->node.error();  // the follower failed
    }
    if (w->read_it) {
        auto node = co_await read_node(own_path);
        if (!node) {
            co_return node.error();
        }
        co_return std::optional<zkco::node>(std::move(*node));
    }
    co_return std::optional<zkco::node>(std::move(*w->node));
}

asio::awaitable<zkco::result<void>> task_client::consume(std::string tid) {
    if (auto ref = protocol::parse_task_ref(tid); ref && ref->index) {
        // One write for the calls at a time: each its own would conflict with the others'
        // (one version of the bundle's node), and each conflict costs a read and a write.
        const auto g = join_consume(std::string(ref->node), *ref->index);
        co_await g->done.async_wait(asio::as_tuple(asio::use_awaitable));
        if (!g->over) {
            co_return zkco::error_code(asio::error::operation_aborted);  // cancelled
        }
        if (auto it = g->errors.find(*ref->index); it != g->errors.end()) {
            co_return it->second;
        }
        co_return zkco::result<void>();
    }
    const auto ec = co_await consume_until_done(l_.result(tid));
    if (ec) {
        co_return ec;
    }
    co_return zkco::result<void>();
}

std::shared_ptr<task_client::bundle_consume_group> task_client::join_consume(
    const std::string& bundle, std::size_t index
) {
    auto& running = bundle_consumes_[bundle];
    if (!running) {
        running = std::make_shared<bundle_consume_group>(zk_.get_executor());
        running->indices.push_back(index);
        // Started in the background (the calls made meanwhile join before it reads): a
        // cancelled call must not cancel the others' consumes.
        ++consuming_;
        asio::co_spawn(
            zk_.get_executor(), consume_groups(this, alive_, bundle, running), asio::detached
        );
        return running;
    }
    auto g = running->started ? running->next : running;
    if (!g) {
        g = running->next = std::make_shared<bundle_consume_group>(zk_.get_executor());
    }
    g->indices.push_back(index);
    return g;
}

asio::awaitable<void> task_client::consume_groups(
    task_client* self,
    std::shared_ptr<bool> alive,
    std::string bundle,
    std::shared_ptr<bundle_consume_group> g
) {
    // However this ends (the client gone, an exception out of a co_await), the calls of the
    // groups that did not finish wake up with operation_aborted, and the bundle's entry goes.
    struct release {
        release(
            task_client* c,
            const std::shared_ptr<bool>& a,
            const std::string& b,
            const std::shared_ptr<bundle_consume_group>& at
        )
            : client(c), alive(a), bundle(b), group(at) {}
        release(const release&) = delete;
        release& operator=(const release&) = delete;
        release(release&&) = delete;
        release& operator=(release&&) = delete;
        ~release() {
            for (auto x = group; x; x = x->next) {
                if (!x->over) {
                    for (const auto i : x->indices) {
                        x->errors[i] = asio::error::operation_aborted;
                    }
                    x->over = true;
                    x->done.cancel();
                }
            }
            if (*alive) {
                client->bundle_consumes_.erase(bundle);
                if (--client->consuming_ == 0) {
                    client->consumed_.cancel();
                }
            }
        }
        task_client* client;
        const std::shared_ptr<bool>& alive;
        const std::string& bundle;
        const std::shared_ptr<bundle_consume_group>& group;  // the one running, then none
    };
    const release guard(self, alive, bundle, g);
    // Once round the loop first: co_spawn may run us at once (dispatch), before the calls
    // made in the same turn could join.
    co_await asio::post(asio::use_awaitable);
    while (g && *alive) {
        g->started = true;
        co_await self->consume_group(bundle, g);
        if (!*alive) {
            break;  // the client is gone: whatever it did, its callers hear operation_aborted
        }
        g->over = true;
        g->done.cancel();
        g = g->next;
        if (g) {
            self->bundle_consumes_[bundle] = g;
        }
    }
}

asio::awaitable<void> task_client::consume_group(
    const std::string& bundle, std::shared_ptr<bundle_consume_group> g
) {
    const auto alive = alive_;
    auto indices = g->indices;
    std::sort(indices.begin(), indices.end());
    indices.erase(std::unique(indices.begin(), indices.end()), indices.end());
    auto node = co_await read_node(l_.result(bundle));
    if (!*alive) {
        co_return;
    }
    if (!node && node.error() != zkco::errc::no_node) {
        for (const auto i : indices) {
            g->errors[i] = node.error();
        }
        co_return;
    }
    // A task whose result is (or may be: the bundle still runs) in its own node (§6 T4e) is
    // consumed by deleting that node; the others are marked in the bundle's. The deletes go
    // at once, all together, with the mark.
    std::optional<protocol::task_result> whole;  // none for garbage: consume_bundled deletes it
    if (node) {
        if (auto decoded = protocol::decode_result(node->data)) {
            whole = std::move(*decoded);
        }
    }
    std::vector<std::size_t> marked;
    reactor::task_group own(zk_.get_executor());
    for (const auto i : indices) {
        if (!node || (whole && protocol::is_published(*whole, i))) {
            own.spawn(consume_entry(protocol::entry_result_path(l_, bundle, i), i, g));
        } else {
            marked.push_back(i);
        }
    }
    if (!marked.empty()) {
        auto consumed = co_await consume_bundled(bundle, std::move(*node), marked);
        if (!*alive) {
            co_return;
        }
        if (!consumed && consumed.error() != client_errc::garbage_result) {
            for (const auto i : marked) {  // (garbage was deleted: nobody's result, §8)
                g->errors[i] = consumed.error();
            }
        }
    }
    co_await own.join();
}

asio::awaitable<void> task_client::consume_entry(
    std::string path, std::size_t index, std::shared_ptr<bundle_consume_group> g
) {
    const auto ec = co_await consume_until_done(std::move(path));
    if (ec) {
        g->errors[index] = ec;
    }
}

asio::awaitable<zkco::result<protocol::task_result>> task_client::wait_bundled(
    std::string bundle, std::size_t index, std::string tid
) {
    using phase = shared_bundle_read::phase;
    // Its own node (§6 T4e) or the bundle's result, whichever comes first.
    const auto own_path = protocol::entry_result_path(l_, bundle, index);
    {
        auto first = co_await await_entry(bundle, index);
        if (!first) {
            co_return first.error();
        }
        if (*first) {
            co_return own_entry(own_path, **first, tid, true);
        }
    }
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
        auto node = co_await read_node(l_.result(bundle));  // there (await_entry)
        bundle_waits_.erase(bundle);                        // later waits read again
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
    case shared_bundle_read::outcome::kind::published: {
        // Published early (or the bundle's result gone): its own node, if still there. The
        // bundle's consume left it alone, so a wait cancelled meanwhile (with cancellation
        // off since the consume) leaves it too, for the next reader: consumed, nobody would
        // see it.
        if ((co_await asio::this_coro::cancellation_state).cancelled() !=
            asio::cancellation_type::none) {
            co_return zkco::error_code(asio::error::operation_aborted);
        }
        auto own = co_await read_node(own_path);
        if (!own) {
            co_return own.error();  // no_node: consumed
        }
        if ((co_await asio::this_coro::cancellation_state).cancelled() !=
            asio::cancellation_type::none) {
            co_return zkco::error_code(asio::error::operation_aborted);
        }
        co_return own_entry(own_path, *own, tid, true);
    }
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
    const auto alive = alive_;  // (consume_group runs in the background)
    const std::string path = l_.result(bundle);
    bundle_consume c(path, protocol::bundle_size(bundle), std::move(indices));
    auto step = c.read(node.data, node.stat.version);
    zkco::error_code last;  // the error a reconnect or failed step is about
    bool counted = false;   // our delete of our own node, taken off own_unconsumed_
    for (;;) {
        switch (step.what) {
        case bundle_consume::step::kind::write: {
            auto ops = to_zkco(std::move(step.ops));
            auto [ec, per_op] = co_await batcher_->async_submit(
                std::move(ops), asio::as_tuple(asio::use_awaitable)
            );
            if (!*alive) {
                co_return zkco::error_code(asio::error::operation_aborted);
            }
            last = ec;
            const bool lost =
                ec == zkco::condition::retryable && ec != asio::error::operation_aborted;
            step = c.answered(to_answer(ec, per_op), lost);
            if (c.deleted() && !counted &&
                zkco::parent_path(path) == protocol::layout::client_results(ids_.client_hex())) {
                // Our delete in our own directory: its follower's count of changes has it,
                // and close() may delete the directory once no other node of ours is left.
                counted = true;
                inbox_->view.removed(bundle);
                own_unconsumed_ -= own_unconsumed_ > 0 ? 1 : 0;
            }
            break;
        }
        case bundle_consume::step::kind::reconnect: {
            const bool retry = co_await reconnected_after(zk_, last);
            if (!*alive) {
                co_return zkco::error_code(asio::error::operation_aborted);
            }
            step = c.reconnected(retry);
            break;
        }
        case bundle_consume::step::kind::reread: {
            auto again = co_await read_node(path);
            if (!*alive) {
                co_return zkco::error_code(asio::error::operation_aborted);
            }
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
    const auto alive = alive_;  // (consume_group runs in the background)
    for (;;) {
        auto node = co_await zk_.get(path);
        if (node || node.error() == zkco::errc::no_node) {
            co_return node;
        }
        if (!*alive) {
            co_return zkco::error_code(asio::error::operation_aborted);
        }
        const bool retry = co_await reconnected_after(zk_, node.error());
        if (!retry || !*alive) {
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
            direct_->settled(tid);  // a slot it may have taken at its worker is free again
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
    follow_inbox_once(box);
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

void task_client::follow_inbox_once(const std::shared_ptr<inbox>& box) {
    if (!box->running) {
        box->running = true;
        asio::co_spawn(
            zk_.get_executor(),
            follow_inbox(zk_, protocol::layout::client_results(ids_.client_hex()), box, alive_),
            asio::detached
        );
    }
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
                        ? batcher_->async_submit_deferred(std::move(remove), token)
                        : batcher_->async_submit(std::move(remove), token);
        auto [sent, r] = co_await std::move(send);
        ec = sent;
        if (!*alive || ec == asio::error::operation_aborted) {
            co_return asio::error::operation_aborted;  // this client is gone (or going)
        }
        const auto outcome = protocol::read_consume(to_answer(ec, r));
        if (outcome == protocol::consume_outcome::consumed) {
            if (zkco::parent_path(path) == own_results) {
                const std::string name(zkco::base_name(path));
                if (!ec) {
                    // Our delete: the follower's count of the directory's changes includes it.
                    inbox_->view.removed(name);
                }
                if (const auto ref = protocol::parse_task_ref(name); !ref || !ref->index) {
                    // (A task's own node of a bundle, §6 T4e, is no node we submitted.)
                    own_unconsumed_ -= own_unconsumed_ > 0 ? 1 : 0;
                }
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
        if (batcher_->outstanding() > 0) {
            co_await batcher_->async_wait_idle(asio::as_tuple(asio::use_awaitable));
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
    // One task of a bundle is cancelled alone: the request names it, `<bundle>.<k>` (§6 T7).
    auto r = co_await zk_.create(
        protocol::layout::cancel_request(tid), encode(protocol::cancel_info{protocol::now_ms()})
    );
    if (!r && r.error() != zkco::errc::node_exists) {
        co_return r.error();
    }
    co_return zkco::result<void>();
}

}  // namespace zkd::roles
