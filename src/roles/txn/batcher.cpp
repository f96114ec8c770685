// SPDX-License-Identifier: MIT
#include "roles/txn/batcher.hpp"

#include "protocol/client_txn.hpp"
#include "protocol/layout.hpp"
#include "roles/txn/zk_ops.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <string_view>
#include <tuple>
#include <unordered_set>
#include <variant>

namespace asio = boost::asio;

namespace zkd::roles {

struct multi_batcher::group {
    std::vector<zkco::multi_op> ops;
    std::size_t bytes = 0;
    handler h;
    std::vector<std::size_t> index;  // where each op sits in the transaction being sent
    bool decided = false;            // its transaction writes a receipt (async_submit_decided)
    bool deferred = false;           // queued by async_submit_deferred, not sent yet
    std::size_t logged = 0;          // its creates that go in a directory's change log
    std::size_t made = 0;            // directories' creates put in front of its own ops
    int remade = 0;                  // times sent again for a missing directory
};

struct multi_batcher::state : std::enable_shared_from_this<state> {
    state(zkco::client& z, limits l)
        : zk(&z), ex(z.get_executor()), lim(l), defer_timer(z.get_executor()) {}

    zkco::client* zk;  // null once the batcher is gone
    asio::any_io_executor ex;
    limits lim;
    std::vector<zkco::multi_op> prefix;
    std::size_t prefix_bytes = 0;
    std::deque<group> queue;
    int in_flight = 0;
    std::size_t in_flight_groups = 0;
    bool pump_posted = false;         // a pump() is posted: groups queued this turn go together
    std::size_t deferred_queued = 0;  // queued groups that wait for company (or the timer)
    asio::steady_timer defer_timer;
    bool defer_armed = false;
    bool change_logs = false;           // enable_change_logs()
    std::function<void()> before_send;  // on_send()
    stats counters;
    std::vector<asio::any_completion_handler<void(zkco::error_code)>> idle_waiters;

    /// Resumes the async_wait_idle callers once nothing is queued or in flight (posted: we
    /// may be inside a handler of theirs), or at once with `ec` (the batcher is going).
    void notify_idle(zkco::error_code ec = {}) {
        if (idle_waiters.empty() || (!ec && (!queue.empty() || in_flight_groups > 0))) {
            return;
        }
        auto waiters = std::move(idle_waiters);
        idle_waiters.clear();
        for (auto& w : waiters) {
            auto hex = asio::get_associated_executor(w, ex);
            asio::post(ex, [hex, ec, h = std::move(w)]() mutable {
                asio::dispatch(hex, [ec, h = std::move(h)]() mutable { std::move(h)(ec); });
            });
        }
    }

    // Receipts (enable_receipts): slot k is the node "<receipt_prefix><k>".
    struct receipt_slot {
        bool created = false;  // the node exists (as far as we know)
        bool busy = false;     // a transaction in flight or being resolved writes it
    };
    std::string receipt_prefix;  // empty: no receipts
    std::vector<receipt_slot> slots;
    std::uint64_t sequence = 0;

    [[nodiscard]] std::string receipt_path(std::size_t k) const {
        return receipt_prefix + std::to_string(k);
    }

    /// A free receipt slot, marked busy.
    std::size_t take_slot() {
        for (std::size_t k = 0; k < slots.size(); ++k) {
            if (!slots[k].busy) {
                slots[k].busy = true;
                return k;
            }
        }
        slots.push_back(receipt_slot{false, true});
        return slots.size() - 1;
    }

    void complete(group& g, zkco::error_code ec, std::vector<zkco::op_result> results) {
        ++counters.groups;
        auto hex = asio::get_associated_executor(g.h, ex);
        asio::dispatch(hex, [h = std::move(g.h), ec, r = std::move(results)]() mutable {
            std::move(h)(ec, std::move(r));
        });
    }

    /// Sends on the next turn of the event loop, so that the groups queued in this turn (a
    /// master placing many tasks in one step, a worker finishing several) share transactions
    /// instead of each taking one of the free in-flight slots alone.
    void pump_soon() {
        if (pump_posted) {
            return;
        }
        pump_posted = true;
        asio::post(ex, [self = shared_from_this()] {
            self->pump_posted = false;
            self->pump();
        });
    }

    /// Deferred groups go with the next transaction, or once they waited `defer_for`.
    void arm_deferral() {
        if (defer_armed) {
            return;
        }
        defer_armed = true;
        defer_timer.expires_after(lim.defer_for);
        defer_timer.async_wait([self = shared_from_this()](zkco::error_code ec) {
            self->defer_armed = false;
            if (!ec) {
                self->send_deferred();
            }
        });
    }

    void send_deferred() {
        for (auto& g : queue) {
            g.deferred = false;
        }
        deferred_queued = 0;
        pump();
    }

    void pump() {
        if (before_send && zk != nullptr && in_flight < lim.max_in_flight) {
            before_send();  // queues what its owner held back for this transaction
        }
        // Deferred groups alone do not start a transaction.
        while (zk != nullptr && in_flight < lim.max_in_flight && queue.size() > deferred_queued) {
            send_one();
        }
    }

    void send_one() {
        std::vector<zkco::multi_op> ops = prefix;
        std::size_t bytes = prefix_bytes;
        // Identical checks (same path and version) are sent once per transaction.
        std::map<std::pair<std::string, std::int32_t>, std::size_t> checks;
        // The change log of each directory the transaction creates children in (§6).
        change_log_writer logs;
        std::vector<group> batch;
        // The nodes the groups so far create, set or delete (hashes of their paths).
        std::unordered_set<std::size_t> written;
        while (!queue.empty()) {
            auto& g = queue.front();
            const bool first = batch.empty();
            // Each directory logged adds one set: count the group's creates as new ones.
            if (!first && (ops.size() + logs.size() + g.ops.size() + g.logged > lim.max_ops ||
                           bytes + g.bytes > lim.max_bytes)) {
                break;  // a group alone goes even if larger: it fails or succeeds on its own
            }
            // A group that writes a node an earlier group of the transaction writes goes in
            // the next one: in one multi the second write would see the first (two versioned
            // sets of a node fail, and with them every group, again at each resend).
            if (!first && writes_any(g, written)) {
                break;
            }
            note_writes(g, written);
            g.index.clear();
            for (auto& op : g.ops) {
                if (const auto* c = std::get_if<zkco::op::check>(&op)) {
                    const auto key = std::make_pair(c->path, c->version);
                    if (const auto it = checks.find(key); it != checks.end()) {
                        g.index.push_back(it->second);
                        continue;
                    }
                    checks.emplace(key, ops.size());
                }
                g.index.push_back(ops.size());
                ops.push_back(op);
                if (g.logged > 0) {
                    logs.note(op);
                }
            }
            bytes += g.bytes;
            if (g.deferred) {
                g.deferred = false;
                --deferred_queued;
            }
            batch.push_back(std::move(g));
            queue.pop_front();
        }
        const std::size_t notes_from = ops.size();
        // The logs' data takes what the ops leave of the transaction's limit.
        const auto used = bytes + logs.bytes();
        logs.append_to(ops, used < max_txn_bytes ? max_txn_bytes - used : 0);
        const std::size_t notes = logs.size();
        std::optional<receipt> rc;
        const bool decided =
            std::any_of(batch.begin(), batch.end(), [](const group& g) { return g.decided; });
        if (decided && !receipt_prefix.empty()) {
            rc = receipt{take_slot(), ++sequence, ops.size()};
            ops.push_back(to_zkco(
                protocol::receipt_op(receipt_path(rc->slot), rc->sequence, slots[rc->slot].created)
            ));
        }
        ++in_flight;
        in_flight_groups += batch.size();
        ++counters.transactions;
        counters.ops += ops.size();
        zk->async_multi(
            std::move(ops),
            [self = shared_from_this(), batch = std::move(batch),
             fixed = fixed_ops{prefix.size(), notes_from, notes},
             rc](zkco::error_code ec, std::vector<zkco::op_result> results) mutable {
                self->done(std::move(batch), fixed, rc, ec, std::move(results));
            }
        );
    }

    /// The path of `op` when it creates, sets or deletes a node (checks write nothing).
    static std::optional<std::string_view> written_path(const zkco::multi_op& op) {
        if (std::holds_alternative<zkco::op::check>(op)) {
            return std::nullopt;
        }
        return std::visit([](const auto& o) { return std::string_view(o.path); }, op);
    }

    static bool writes_any(const group& g, const std::unordered_set<std::size_t>& written) {
        return !written.empty() && std::any_of(g.ops.begin(), g.ops.end(), [&](const auto& op) {
            const auto p = written_path(op);
            return p && written.contains(std::hash<std::string_view>{}(*p));
        });
    }

    static void note_writes(const group& g, std::unordered_set<std::size_t>& written) {
        for (const auto& op : g.ops) {
            if (const auto p = written_path(op)) {
                written.insert(std::hash<std::string_view>{}(*p));
            }
        }
    }

    /// The ops of a transaction that belong to no group: the prefix in front, the change
    /// logs' sets after the groups.
    struct fixed_ops {
        std::size_t prefix = 0;
        std::size_t notes_from = 0;
        std::size_t notes = 0;

        [[nodiscard]] bool owns(std::size_t i) const noexcept {
            return i < prefix || (i >= notes_from && i < notes_from + notes);
        }
    };

    /// The receipt a transaction writes: its slot, its sequence number, its op's index.
    struct receipt {
        std::size_t slot = 0;
        std::uint64_t sequence = 0;
        std::size_t index = 0;
    };

    /// After a transaction whose answer was lost: once connected again, its receipt says
    /// whether it applied. Its groups then complete, or go back to the queue.
    static boost::asio::awaitable<void> resolve(
        std::shared_ptr<state> self, std::vector<group> batch, receipt rc, zkco::error_code lost
    ) {
        const auto path = self->receipt_path(rc.slot);
        std::optional<bool> applied;
        while (!applied && self->zk != nullptr) {
            auto& zk = *self->zk;
            if (zkco::is_terminal(zk.state())) {
                break;  // the session is gone: the outcome stays unknown
            }
            if (zk.state() != zkco::session_state::connected) {
                co_await zk.async_wait_state(
                    zk.state_generation(), asio::as_tuple(asio::use_awaitable)
                );
                continue;
            }
            // Caught up with the leader first: the receipt read must see our write, if any.
            auto [sec] = co_await zk.async_sync(path, asio::as_tuple(asio::use_awaitable));
            if (self->zk == nullptr) {
                break;
            }
            if (sec) {
                continue;  // not connected after all: wait again
            }
            auto [gec, node] =
                co_await self->zk->async_get(path, asio::as_tuple(asio::use_awaitable));
            if (gec == zkco::errc::no_node) {
                applied = false;
                self->slots[rc.slot].created = false;
            } else if (!gec) {
                applied = protocol::receipt_shows(node.data, rc.sequence);
                self->slots[rc.slot].created = true;
            } else if (gec != zkco::condition::retryable) {
                break;
            }
        }
        self->slots[rc.slot].busy = false;
        if (!applied || self->zk == nullptr) {
            for (auto& g : batch) {
                self->complete(
                    g,
                    self->zk == nullptr ? zkco::error_code(asio::error::operation_aborted) : lost,
                    {}
                );
            }
            co_return;
        }
        if (*applied) {
            ++self->counters.receipts_found;
            for (auto& g : batch) {
                self->complete(g, {}, std::vector<zkco::op_result>(g.ops.size()));
            }
        } else {
            self->counters.resent += batch.size();
            // NOLINTNEXTLINE(modernize-loop-convert): clang 14 cannot parse libstdc++ 12 ranges
            for (auto it = batch.rbegin(); it != batch.rend(); ++it) {
                self->queue.push_front(std::move(*it));
            }
            self->pump();
        }
    }

    static boost::asio::awaitable<void> resolve_and_count(
        std::shared_ptr<state> self, std::vector<group> batch, receipt rc, zkco::error_code lost
    ) {
        const auto n = batch.size();
        co_await resolve(self, std::move(batch), rc, lost);
        self->in_flight_groups -= n;
        self->notify_idle();
    }

    void disable_receipts(zkco::error_code why) {
        spdlog::warn(
            "batcher: cannot write receipts under {}: {}; a transaction whose answer is "
            "lost now completes with its error",
            receipt_prefix, why.message()
        );
        receipt_prefix.clear();
    }

    static std::vector<zkco::op_result> slice(
        const group& g, const std::vector<zkco::op_result>& results
    ) {
        std::vector<zkco::op_result> out;
        if (results.empty()) {
            return out;
        }
        out.reserve(g.index.size() - g.made);
        for (std::size_t k = g.made; k < g.index.size(); ++k) {
            const auto i = g.index[k];
            out.push_back(i < results.size() ? results[i] : zkco::op_result{});
        }
        return out;
    }

    /// A group's op `failed` failed with `why`: when that is the create of a child of a
    /// client's results directory that is missing, or the create of such a directory put in
    /// front that found it made meanwhile, the group is changed to go again (true).
    static bool remake_dir(group& g, std::size_t failed, zkco::error_code why) {
        constexpr int most_remade = 4;  // a directory deleted again and again: give up
        if (g.remade >= most_remade) {
            return false;
        }
        if (failed < g.made && why == zkco::errc::node_exists) {
            g.ops.erase(g.ops.begin() + static_cast<std::ptrdiff_t>(failed));
            --g.made;
        } else if (failed >= g.made && why == zkco::errc::no_node) {
            const auto* c = std::get_if<zkco::op::create>(&g.ops[failed]);
            const auto dir = c == nullptr ? std::string_view() : zkco::parent_path(c->path);
            if (!protocol::is_client_results_dir(dir)) {
                return false;
            }
            zkco::multi_op make(zkco::op::create{
                std::string(dir), {}, zkco::create_mode::persistent, {}});
            g.bytes += zkco::estimated_size(make);
            g.ops.insert(g.ops.begin(), std::move(make));
            ++g.made;
        } else {
            return false;
        }
        ++g.remade;
        return true;
    }

    void done(
        std::vector<group> batch,
        fixed_ops fixed,
        std::optional<receipt> rc,
        zkco::error_code ec,
        std::vector<zkco::op_result> results
    ) {
        --in_flight;
        in_flight_groups -= batch.size();
        if (rc && ec && results.empty() && ec == zkco::condition::retryable &&
            ec != asio::error::operation_aborted && zk != nullptr &&
            !zkco::is_terminal(zk->state())) {
            // Applied or not: the receipt will tell, once connected again.
            ++counters.unknown;
            in_flight_groups += batch.size();  // still ours: flush() waits for them
            asio::co_spawn(
                ex, resolve_and_count(shared_from_this(), std::move(batch), *rc, ec), asio::detached
            );
            return;
        }
        std::optional<std::size_t> failed;
        if (ec && !results.empty()) {
            failed = zkco::multi_result{ec, results}.failed_op();
        }
        if (rc) {
            slots[rc->slot].busy = false;
            if (!ec) {
                slots[rc->slot].created = true;
            } else if (failed && *failed == rc->index) {
                // The receipt's own op failed: we were wrong about whether its node exists
                // (someone deleted it, or an earlier transaction made it), or receipts cannot
                // be written here at all. The groups did not apply: they go again.
                const auto why = results[rc->index].ec;
                const auto says = protocol::read_receipt(to_op_code(why));
                if (says == protocol::receipt_outcome::slot_exists ||
                    says == protocol::receipt_outcome::slot_missing) {
                    const bool was = slots[rc->slot].created;
                    slots[rc->slot].created = says == protocol::receipt_outcome::slot_exists;
                    if (was == slots[rc->slot].created) {
                        disable_receipts(why);  // the directory itself is missing
                    }
                } else {
                    disable_receipts(why);
                }
            }
        }
        // Groups that did not apply because another one failed go back to the front, in
        // order, before anyone's handler runs (a handler may submit more). A failed op of
        // the transaction's own (the prefix, a change log's set) fails every group.
        std::vector<group*> finished;
        std::vector<group> resend;
        for (auto& g : batch) {
            const auto at =
                failed ? std::find(g.index.begin(), g.index.end(), *failed) : g.index.end();
            const bool owns_failure = at != g.index.end();
            // Not applied because of another group's op, or changed to go again (remake_dir).
            const bool again =
                (ec && failed && !fixed.owns(*failed) && !owns_failure) ||
                (owns_failure && change_logs &&
                 remake_dir(g, static_cast<std::size_t>(at - g.index.begin()), results[*failed].ec)
                );
            if (again) {
                resend.push_back(std::move(g));
            } else {
                finished.push_back(&g);
            }
        }
        counters.resent += resend.size();
        // NOLINTNEXTLINE(modernize-loop-convert): clang 14 cannot parse libstdc++ 12 ranges
        for (auto it = resend.rbegin(); it != resend.rend(); ++it) {
            queue.push_front(std::move(*it));
        }
        for (auto* g : finished) {
            complete(*g, ec, slice(*g, results));
        }
        pump();
        notify_idle();
    }
};

multi_batcher::multi_batcher(zkco::client& zk, limits lim)
    : state_(std::make_shared<state>(zk, lim)) {}

multi_batcher::~multi_batcher() {
    state_->zk = nullptr;
    state_->defer_timer.cancel();
    state_->notify_idle(asio::error::operation_aborted);
    auto queued = std::move(state_->queue);
    for (auto& g : queued) {
        // Posted: we may be inside a handler of the group's owner.
        auto hex = asio::get_associated_executor(g.h, state_->ex);
        asio::post(state_->ex, [hex, h = std::move(g.h)]() mutable {
            asio::dispatch(hex, [h = std::move(h)]() mutable {
                std::move(h)(asio::error::operation_aborted, std::vector<zkco::op_result>{});
            });
        });
    }
}

void multi_batcher::enable_receipts(std::string dir, std::string name) {
    state_->receipt_prefix = zkco::join_path(dir, name) + "-";
}

void multi_batcher::enable_change_logs() {
    state_->change_logs = true;
}

void multi_batcher::set_prefix(std::vector<zkco::multi_op> prefix) {
    state_->prefix_bytes = 0;
    for (const auto& op : prefix) {
        state_->prefix_bytes += zkco::estimated_size(op);
    }
    state_->prefix = std::move(prefix);
}

void multi_batcher::on_send(std::function<void()> f) {
    state_->before_send = std::move(f);
}

void multi_batcher::poke() {
    state_->pump_soon();
}

const multi_batcher::stats& multi_batcher::counters() const noexcept {
    return state_->counters;
}

bool multi_batcher::receipts_enabled() const noexcept {
    return !state_->receipt_prefix.empty();
}

std::size_t multi_batcher::outstanding() const noexcept {
    return state_->queue.size() + state_->in_flight_groups;
}

void multi_batcher::wait_idle(asio::any_completion_handler<void(zkco::error_code)> h) {
    state_->idle_waiters.push_back(std::move(h));  // constructed in place, never assigned
    if (state_->deferred_queued > 0) {
        state_->send_deferred();  // someone waits for them: no reason to hold them back
    }
    state_->notify_idle();
}

void multi_batcher::submit(
    std::vector<zkco::multi_op> ops, handler h, bool decided, bool deferred
) {
    std::size_t bytes = 0;
    for (const auto& op : ops) {
        bytes += zkco::estimated_size(op);
    }
    // Constructed, never assigned: Boost 1.81's any_completion_handler move assignment wraps
    // its source again and again until the stack overflows.
    std::size_t logged = 0;
    if (state_->change_logs) {
        for (const auto& op : ops) {
            if (const auto dir = logged_dir(op); !dir.empty()) {
                ++logged;
                // Its name in the log.
                bytes += std::get<zkco::op::create>(op).path.size() - dir.size() + 32;
            }
        }
    }
    state_->queue.push_back(group{
        std::move(ops), bytes, std::move(h), {}, decided, deferred, logged});
    if (deferred) {
        ++state_->deferred_queued;
        state_->arm_deferral();
    } else {
        state_->pump_soon();
    }
}

}  // namespace zkd::roles
