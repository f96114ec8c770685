// SPDX-License-Identifier: MIT
// The worker's shell: its decisions are worker_fsm (what to run, stop,
// publish and retry, drain); this file feeds it what ZooKeeper and the handlers say and
// carries its actions out, each task as a child of one task_group.
//
// Cancellation, one idiom throughout: a coroutine that must finish its cleanup (stop and
// await handlers, settle a publish) starts with `throw_if_cancelled(false)`, so a cancel
// never throws out of a co_await halfway, and checks `this_coro::cancellation_state` after
// the waits a cancel should cut short. Asio's slot-based cancellation is what task_group
// and the `||` operator emit, and an exception-free check keeps every exit path visible.
#include "roles/worker/worker.hpp"

#include "protocol/delay.hpp"
#include "protocol/ids.hpp"
#include "protocol/text.hpp"
#include "protocol/worker_txn.hpp"
#include "reactor/offload.hpp"
#include "reactor/task_group.hpp"
#include "roles/cluster/election.hpp"
#include "roles/cluster/foreign.hpp"
#include "roles/txn/batcher.hpp"
#include "roles/txn/zk_ops.hpp"
#include "roles/worker/detail/early_results.hpp"
#include "roles/worker/detail/progress.hpp"
#include "roles/worker/detail/worker_fsm.hpp"
#include "zkco/deadline.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <stop_token>
#include <string_view>

namespace asio = boost::asio;

namespace zkd::roles {

namespace {

using detail::record_progress;
using detail::running_task;
using detail::write_assignment;

protocol::task_result failure(std::string_view code, std::string message) {
    protocol::task_result r;
    r.state = code == protocol::codes::timeout     ? protocol::task_state::timed_out
              : code == protocol::codes::cancelled ? protocol::task_state::cancelled
                                                   : protocol::task_state::failed;
    r.error = protocol::task_error{std::string(code), std::move(message)};
    return r;
}

/// One handler call: a task, or one task of a bundle.
struct handler_call {
    explicit handler_call(const asio::any_io_executor& ex) : deadline(ex) {}

    std::stop_source stop;  // the handler's stop token: its assignment's, or its timeout
    bool timed_out = false;
    bool done = false;
    asio::steady_timer deadline;  // the task's timeout
};

/// Starts `c`'s timeout (on the loop) unless it has ended or has none.
void arm_deadline(const std::shared_ptr<handler_call>& c, std::chrono::milliseconds timeout) {
    if (c->done || timeout.count() <= 0) {
        return;
    }
    c->deadline.expires_after(timeout);
    c->deadline.async_wait([c](zkco::error_code ec) {
        if (!ec && !c->done) {
            c->timed_out = true;
            c->stop.request_stop();
        }
    });
}

using protocol::cut_utf8;

/// The largest encoded value a bundle's task may keep so that the bundle's result fits.
std::size_t bundled_value_budget(std::size_t tasks) {
    return (protocol::max_result_bytes - 4096) / std::max<std::size_t>(tasks, 1);
}

/// One entry of a bundle's result within its share of the result (`budget`), and decodable
/// where it sits (§5.1). Settling it twice changes nothing.
void settle_entry(protocol::task_result& e, std::size_t budget) {
    if (auto ok = protocol::validate_bundled(e); !ok) {
        e = failure(
            protocol::codes::handler_error,
            "the handler's result cannot be stored: " + ok.error().message
        );
    }
    if (e.error) {
        cut_utf8(e.error->message, budget / 2);
    }
}

/// Most bytes of one T4e (§6 T4e): its results and the assignment's new data, so that it
/// goes in one transaction with room for the change log (§1 "Batching").
constexpr std::size_t early_txn_bytes = 800'000;

/// A running bundle's tasks as its early publisher (§6 T4e) sees them.
struct early_run {
    explicit early_run(const asio::any_io_executor& ex, std::size_t n)
        : tasks(n), finished_ms(n, 0), wake(ex) {}

    bool on = false;     // the bundle asks for it (entry_results) and nothing failed since
    bool retry = false;  // a retryable end would be retried: such entries are not final
    std::vector<early_task> tasks;
    std::vector<std::int64_t> finished_ms;  // each task's end (wall clock, for its result)
    asio::steady_timer wake;                // cancelled whenever a task ends

    [[nodiscard]] bool running() const {
        return std::any_of(tasks.begin(), tasks.end(), [](const early_task& t) { return t.open; });
    }

    /// Task `k`'s call: should it end without saying how (an exception), the task ends
    /// here, not final (never published early).
    struct ending {
        ending(early_run& r, std::size_t i) : run_(r), k_(i) {}
        ending(const ending&) = delete;
        ending& operator=(const ending&) = delete;
        ~ending() {
            if (run_.tasks[k_].open) {
                run_.tasks[k_].open = false;
                run_.tasks[k_].final = false;
                run_.wake.cancel();
            }
        }

    private:
        early_run& run_;
        std::size_t k_;
    };
};

class worker_session {
public:
    worker_session(
        zkco::client& zk,
        protocol::layout l,
        protocol::member_info me,
        const handlers::registry& reg,
        reactor::compute_pool& pool,
        worker_options opts,
        worker_stats* stats
    )
        : zk_(zk),
          l_(l),
          me_(std::move(me)),
          reg_(reg),
          pool_(pool),
          opts_(std::move(opts)),
          stats_(stats != nullptr ? stats : &own_stats_),
          results_(zk),
          state_(l, me_, *stats_),
          group_(zk.get_executor()),
          idle_(zk.get_executor()) {
        // T4's results go in their clients' directories, with a change log (§6), made on
        // demand (§2).
        results_.enable_change_logs();
    }

    asio::awaitable<void> run() {
        if (!me_.threads) {
            // What its pool runs side by side: the master keeps that many tasks of one
            // transaction together here (docs/protocol.md §7 "Master loop").
            me_.threads = static_cast<int>(std::min<std::size_t>(pool_.size(), 1'000'000));
        }
        if (me_.types.empty()) {
            me_.types = reg_.types();
        }
        if (me_.features.empty()) {
            me_.features = protocol::own_features();  // the rules it follows (§2 "Features")
        }
        me_.started_ms = protocol::now_ms();
        me_.unhealthy = reg_.health()->unhealthy();
        if (auto joined = co_await join_workers(zk_, me_); !joined) {
            spdlog::error("worker {}: cannot join: {}", me_.id, joined.error().message());
            co_return;
        }
        state_.joined(me_);
        spdlog::info(
            "worker {} joined (capacity {}, {} types)", me_.id, me_.capacity.value_or(0),
            me_.types.size()
        );
        // Asked to stop while joining: the reset below would forget it.
        const bool stop_asked = co_await zkco::cancelled();
        if (stop_asked) {
            co_return;
        }
        co_await asio::this_coro::reset_cancellation_state(asio::enable_terminal_cancellation());
        co_await asio::this_coro::throw_if_cancelled(false);
        {
            using namespace asio::experimental::awaitable_operators;
            if (opts_.drain != nullptr) {
                co_await (watch_assignments() || drain() || watch_health());
            } else {
                co_await (watch_assignments() || watch_health());
            }
        }
        // Session gone, drained or asked to stop: stop the handlers, then wait for them;
        // nothing of theirs is published (the master requeues what we held).
        for (const auto& tid : state_.stop()) {
            if (auto it = tasks_.find(tid); it != tasks_.end()) {
                it->second->stop.request_stop();
            }
        }
        co_await group_.async_wait(asio::use_awaitable);
    }

private:
    /// Carries out what the view decided on a listing.
    void act(const worker_action& a) {
        switch (a.what) {
        case worker_action::kind::run:
            start(a.tid, a.data);
            break;
        case worker_action::kind::stop:
            if (auto it = tasks_.find(a.tid); it != tasks_.end()) {
                if (a.entry) {
                    // One task of the bundle (§6 T7 "One task of a bundle"): that one alone,
                    // stopped if it runs, skipped if it has not started.
                    if (*a.entry < it->second->entry_stop.size()) {
                        it->second->entry_stop[*a.entry].request_stop();
                    }
                    break;
                }
                it->second->cancel_marker = true;
                it->second->stop.request_stop();
            }
            break;
        case worker_action::kind::remove_marker:
            // The answer is ignored: litter that stays goes on a later listing, or by T6.
            for (std::size_t i = 0; i < a.ops.size(); ++i) {
                const auto& op = a.ops[i];
                if (i + 1 < a.ops.size() && a.ops[i + 1].what == protocol::txn_op::kind::create) {
                    // A task's marker and its request made again: one multi; the request
                    // there already, the delete alone.
                    auto both = to_zkco(std::vector<protocol::txn_op>{op, a.ops[i + 1]});
                    ++i;
                    zk_.async_multi(
                        std::move(both),
                        [zk = &zk_, path = op.path](
                            zkco::error_code ec, const std::vector<zkco::op_result>& per_op
                        ) {
                            if (ec && per_op.size() == 2 &&
                                per_op[1].ec == zkco::errc::node_exists) {
                                zk->async_remove(path, -1, [](zkco::error_code) {});
                            }
                        }
                    );
                    continue;
                }
                zk_.async_remove(op.path, op.version, [](zkco::error_code) {});
            }
            break;
        case worker_action::kind::mark_draining:
        case worker_action::kind::remake_dir:
            break;  // awaited where they are decided (drain(), watch_assignments())
        }
    }

    /// Keeps the `unhealthy` of /workers/<me> to what the registry's types say (a served
    /// type's crash loop, docs/exec.md): placement skips us for those types. Never ends by
    /// itself; a draining worker's node is left as it is (it takes nothing anyway).
    asio::awaitable<void> watch_health() {
        const auto health = reg_.health();
        const auto ex = zk_.get_executor();
        auto wake = std::make_shared<asio::steady_timer>(ex, asio::steady_timer::time_point::max());
        health->on_change([ex, wake] { asio::post(ex, [wake] { wake->cancel(); }); });
        struct unhook {
            std::shared_ptr<handlers::type_health> h;
            ~unhook() { h->on_change({}); }
        } const hooked{health};
        for (;;) {
            auto now = health->unhealthy();
            if (now != me_.unhealthy && !state_.draining()) {
                me_.unhealthy = std::move(now);
                state_.joined(me_);  // its node's data as it is now (T9 writes it)
                const std::string path = protocol::layout::worker(me_.id);
                const std::string data = protocol::encode(me_);
                auto set = co_await zk_.set(path, data, -1);
                if (set) {
                    spdlog::info(
                        "worker {}: unhealthy types now: {}", me_.id,
                        me_.unhealthy.empty() ? std::string("none") : joined_types(me_.unhealthy)
                    );
                } else {
                    spdlog::warn(
                        "worker {}: cannot say which types are unhealthy: {}", me_.id,
                        set.error().message()
                    );
                }
                continue;
            }
            wake->expires_at(asio::steady_timer::time_point::max());
            co_await wake->async_wait(asio::as_tuple(asio::use_awaitable));
            const auto cs = co_await asio::this_coro::cancellation_state;
            if (cs.cancelled() != asio::cancellation_type::none) {
                co_return;
            }
        }
    }

    static std::string joined_types(const std::vector<std::string>& types) {
        std::string out;
        for (const auto& t : types) {
            out += (out.empty() ? "" : ", ") + t;
        }
        return out;
    }

    /// Waits for the drain request, says so in /workers/<me> (T9), then waits until every
    /// task in hand has ended (published) and completes.
    asio::awaitable<void> drain() {
        const bool requested = co_await opts_.drain->wait();
        if (!requested) {
            co_return;
        }
        spdlog::info("worker {}: draining: no new tasks; {} running", me_.id, state_.in_hand());
        const auto mark = state_.drain();
        const auto& op = mark.ops.front();
        auto set = co_await zk_.set(op.path, op.data, op.version);
        if (!set) {
            spdlog::warn(
                "worker {}: cannot mark itself draining: {}", me_.id, set.error().message()
            );
        }
        while (!state_.drained()) {
            idle_.expires_at(asio::steady_timer::time_point::max());
            co_await idle_.async_wait(asio::as_tuple(asio::use_awaitable));
            const auto cs = co_await asio::this_coro::cancellation_state;
            if (cs.cancelled() != asio::cancellation_type::none) {
                co_return;
            }
        }
        spdlog::info("worker {}: drained", me_.id);
    }

    /// Follows our assignment directory by its change log (docs/protocol.md §6): a data
    /// watch, so our own T4 deletes wake nothing, and a read that names the new assignments
    /// (with their data, mostly); the directory is listed only when the log does not account
    /// for every change (worker_fsm::log_read says).
    asio::awaitable<void> watch_assignments() {
        const std::string dir = protocol::layout::assign_dir(me_.id);
        // What this session's own transactions write here (the workflow engine of a member
        // that is also the master, placing on its own worker) is known from their answers:
        // a read of the change log at that stat, which the next read finds applied already
        // (§6 "Change logs"); one that does not follow on from our view is left to the read.
        const auto own = zk_.observe_sets(dir, [this](std::string_view data, const zkco::stat& st) {
            if (auto actions = state_.log_read(to_dir_stat(st), data)) {
                for (const auto& a : *actions) {
                    act(a);
                }
            }
        });
        for (;;) {
            const auto cs = co_await asio::this_coro::cancellation_state;
            if (cs.cancelled() != asio::cancellation_type::none) {
                co_return;
            }
            auto read = co_await zk_.watch_get(dir);
            if (read) {
                auto actions = state_.log_read(to_dir_stat(read->value.stat), read->value.data);
                if (!actions) {
                    auto kids = co_await zk_.get_children(dir);
                    if (!kids) {
                        read = kids.error();
                    } else {
                        actions = state_.listed(kids->names, to_dir_stat(kids->stat));
                    }
                }
                for (const auto& a : actions.value_or(std::vector<worker_action>{})) {
                    act(a);
                }
            }
            if (!read && read.error() == zkco::errc::no_node) {
                state_.dir_gone();
                // A pause keeps this from racing someone who keeps deleting it.
                spdlog::warn(
                    "worker {}: its assignment directory {} was deleted; making it again", me_.id,
                    dir
                );
                const auto remake = state_.dir_missing();
                asio::steady_timer pause(zk_.get_executor(), std::chrono::milliseconds(100));
                co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
                const auto& op = remake.ops.front();
                auto made = co_await zk_.create(op.path, op.data);
                if (made || made.error() == zkco::errc::node_exists) {
                    continue;
                }
                read = made.error();
            }
            if (!read) {
                const bool retry = co_await reconnected_after(zk_, read.error());
                if (retry) {
                    continue;
                }
                spdlog::warn("worker {}: stops: {}", me_.id, read.error().message());
                co_return;
            }
            auto ev = co_await read->watch.changed();
            if (!ev && ev.error() == zkco::condition::session_lost) {
                spdlog::warn("worker {}: session lost: {}", me_.id, ev.error().message());
                co_return;
            }
            // Mostly fired for this session's own W2 (its workflow engine placing on us),
            // whose answer brings the task (observe_sets above), and for a task run on the
            // loop (echo) its T4 at once: the read that arms the watch again goes behind
            // that T4 (one turn more: the batcher sends what a turn queued at the next), not
            // ahead of it, where the server, answering a session in order, would make the T4
            // wait (§6 "Change logs").
            if (ev && zk_.own_sets_in_flight(dir)) {
                const auto answered = co_await zk_.own_sets_answered(dir);
                if (answered) {
                    co_await asio::post(zk_.get_executor(), asio::use_awaitable);
                }
            }
        }
    }

    /// Runs `tid`, whose assignment holds `data` (nullopt: read it first).
    void start(const std::string& tid, std::optional<std::string> data) {
        auto t = std::make_shared<running_task>(zk_.get_executor());
        tasks_.emplace(tid, t);
        group_.spawn(
            [this, tid, t, data = std::move(data)]() mutable {
                return run_task(tid, t, std::move(data));
            },
            tid
        );
    }

    asio::awaitable<void> run_task(
        std::string tid, std::shared_ptr<running_task> t, std::optional<std::string> data
    ) {
        co_await asio::this_coro::throw_if_cancelled(false);
        const std::string path = protocol::layout::assignment(me_.id, tid);
        zkco::result<zkco::node> node = zkco::node{};
        if (data) {
            node->data = std::move(*data);  // as created (version 0): only we write it since
        } else {
            ++stats_->task_reads;
            node = co_await zk_.get(path);
        }
        while (!node) {
            const bool retry = co_await reconnected_after(zk_, node.error());
            if (!retry) {
                break;
            }
            node = co_await zk_.get(path);
        }
        if (!node) {
            finished(tid, std::nullopt);  // requeued or cancelled before we looked
            co_return;
        }
        protocol::task_result result = co_await execute(tid, *node, t);
        result.task = tid;
        result.worker = me_.id;
        result.finished_ms = protocol::now_ms();
        std::optional<publish_end> how;
        if (!state_.stopping()) {
            // A bundle that published tasks early goes on from its assignment as rewritten.
            how = co_await publish(tid, result, t->rewritten ? t->assigned : node->data);
        }
        finished(tid, how);
    }

    void finished(const std::string& tid, std::optional<publish_end> how) {
        tasks_.erase(tid);
        if (auto litter = state_.task_ended(tid, how)) {
            act(*litter);
        }
        idle_.cancel();
    }

    asio::awaitable<protocol::task_result> execute(
        const std::string& tid, const zkco::node& node, const std::shared_ptr<running_task>& t
    ) {
        const std::int64_t started = protocol::now_ms();
        // Written by a stranger (§8): its name must never reach a handler or a program
        // (ZKD_TASK_ID), whatever the node holds. §4.1: the id gives a bundle's size.
        protocol::codec_result<protocol::task_node> node_read =
            protocol::decode_error{"its name is not a task id"};
        if (protocol::is_valid_task_id(tid)) {
            node_read = protocol::decode_task_node(tid, node.data);
        }
        auto assigned = node_read ? protocol::stamp(node.data, node_read->assigned)
                                  : protocol::codec_result<std::string>(node_read.error());
        if (!assigned) {
            const auto& why = assigned.error().message;
            spdlog::warn("worker {}: task {} is malformed: {}", me_.id, tid, why);
            auto r = failure(protocol::codes::malformed_task, why);
            r.started_ms = started;
            co_return r;
        }
        const protocol::task_node& read = *node_read;
        const protocol::task_spec* spec = &read.task;
        // Tasks still running after a moment get their running mark (T3).
        t->mark.expires_after(opts_.running_mark_after);
        t->zk = &zk_;
        t->worker = me_.id;
        t->tid = tid;
        t->assigned = std::move(*assigned);
        t->run = node_read->run;
        t->version = node.stat.version;
        t->mark.async_wait([this, t](zkco::error_code ec) {
            if (ec || t->done || state_.stopping() || t->marked) {
                return;
            }
            write_assignment(t);
        });

        protocol::task_result r;
        t->progress.assign(std::max<std::size_t>(spec->bundle.size(), 1), -1.0);
        t->entry_stop.resize(spec->bundle.size());
        for (const auto k : state_.entries_cancelled(tid)) {
            if (k < t->entry_stop.size()) {
                t->entry_stop[k].request_stop();  // a marker that came before the data
            }
        }
        if (spec->bundle.empty()) {
            r = co_await call(read, spec->args, t, protocol::max_result_bytes, tid, 0);
        } else {
            r = co_await call_bundle(read, t, tid, started);
        }
        t->done = true;
        t->mark.cancel();
        t->progress_timer.cancel();
        r.attempt = node_read->assigned.attempt;
        r.started_ms = started;
        co_return r;
    }

    /// Runs a bundle's tasks at once (the pool bounds how many run in parallel); its result
    /// holds one entry per task and sums them up: their common state, or failed.
    asio::awaitable<protocol::task_result> call_bundle(
        const protocol::task_node& node,
        const std::shared_ptr<running_task>& t,
        const std::string& tid,
        std::int64_t started
    ) {
        const protocol::task_spec& spec = node.task;
        // Failed until its call says otherwise (a call that never ran reports nothing).
        std::vector<protocol::task_result> entries(
            spec.bundle.size(), failure(protocol::codes::handler_error, "not run")
        );
        const std::size_t budget = bundled_value_budget(entries.size());
        // A retry of the bundle runs only the tasks an earlier try did not finish for good
        // (§4.3 "Bundles"): the others keep the outcome its node carries.
        auto finished = protocol::read_finished(t->assigned, entries.size());
        // Its finished tasks published on their own while others run (§6 T4e): only when its
        // client reads them so (entry_results), and only those no retry runs again.
        early_run early(zk_.get_executor(), entries.size());
        early.on = protocol::read_entry_results(t->assigned);
        if (early.on) {
            for (const auto k : protocol::read_published(t->assigned, finished)) {
                early.tasks[k].published = true;  // by an earlier attempt: never run again
            }
            early.retry = protocol::retry_left(t->assigned, retry_defaults(spec.type));
        }
        // A task an earlier try finished ended by the end of the last earlier try (the last
        // `errors` entry's time): the node does not say which try it was, so that bound is
        // its finished_ms should this try publish it early (§6 T4e).
        std::int64_t earlier_end = started;
        if (auto f = protocol::read_delay_fields(t->assigned); f && !f->errors.empty()) {
            const auto& last = f->errors.back();
            if (const auto* at =
                    last.is_object() ? last.get_object().if_contains("finished_ms") : nullptr;
                at != nullptr && at->is_int64()) {
                earlier_end = at->get_int64();
            }
        }
        reactor::task_group calls(zk_.get_executor());
        for (std::size_t i = 0; i < entries.size(); ++i) {
            if (finished[i]) {
                entries[i] = std::move(*finished[i]);
                t->progress[i] = 1.0;
                early.tasks[i].open = false;
                early.tasks[i].final = true;
                early.tasks[i].ended = std::chrono::steady_clock::now();
                early.finished_ms[i] = earlier_end;
                continue;
            }
            calls.spawn(
                [this, &node, &spec, &entries, &t, &tid, &early, i,
                 budget]() -> asio::awaitable<void> {
                    // Ended, whatever happens: the early publisher waits for every task.
                    const early_run::ending ends{early, i};
                    entries[i] = co_await call(
                        node, spec.bundle[i], t, budget, protocol::bundled_task_id(tid, i), i
                    );
                    settle_entry(entries[i], budget);
                    auto& task = early.tasks[i];
                    task.open = false;
                    task.ended = std::chrono::steady_clock::now();
                    const auto& e = entries[i];
                    task.final =
                        !early.retry || !protocol::retryable(
                                            e.state, e.error ? std::string_view(e.error->code) : ""
                                        );
                    early.finished_ms[i] = protocol::now_ms();
                    early.wake.cancel();
                }
            );
        }
        if (early.on && early.running()) {
            calls.spawn([this, &entries, &t, &tid, &early, started,
                         attempt = node.assigned.attempt]() {
                return publish_early(tid, t, early, entries, attempt, started);
            });
        }
        co_await calls.async_wait(asio::use_awaitable);
        if (auto e = calls.first_exception()) {
            std::rethrow_exception(e);
        }
        for (auto& e : entries) {
            settle_entry(e, budget);  // each within its share of the result
        }
        protocol::task_result r;
        r.bundle = std::move(entries);
        protocol::summarize_bundle(r);  // §5.1
        for (std::size_t k = 0; k < early.tasks.size(); ++k) {
            if (early.tasks[k].published) {
                r.published.push_back(k);  // read from their own nodes (§6 T4e)
            }
        }
        co_return r;
    }

    /// The worker's default retries for `type` (zkd run --retry), none when it has none.
    [[nodiscard]] protocol::backoff_policy retry_defaults(const std::string& type) const {
        const auto d = opts_.retry_defaults.find(type);
        return d != opts_.retry_defaults.end() ? d->second : protocol::backoff_policy{};
    }

    /// Publishes the finished tasks of the running bundle `tid` early, as decide_early()
    /// says, until none of its tasks runs (§6 T4e). A T4e that fails ends it: the bundle's
    /// result (T4) carries the rest, as without it.
    asio::awaitable<void> publish_early(
        const std::string& tid,
        const std::shared_ptr<running_task>& t,
        early_run& early,
        const std::vector<protocol::task_result>& entries,
        int attempt,
        std::int64_t started
    ) {
        co_await asio::this_coro::throw_if_cancelled(false);
        std::optional<early_task::time_point> last;  // the last T4e's start
        while (early.running()) {
            auto d = decide_early(
                early.tasks, std::chrono::steady_clock::now(), last,
                early_wait_for(t->assigned.size())
            );
            if (!early.on || state_.stopping() || t->stop.stop_requested()) {
                d = early_decision{};  // nothing more: wait for the tasks to end
            }
            if (!d.publish.empty()) {
                last = std::chrono::steady_clock::now();
                co_await send_early(tid, t, early, entries, attempt, started, d.publish);
                continue;
            }
            early.wake.expires_at(d.wake.value_or(asio::steady_timer::time_point::max()));
            co_await early.wake.async_wait(asio::as_tuple(asio::use_awaitable));
        }
    }

    /// One T4e for the tasks `ks` of the bundle `tid`: their own results and the assignment
    /// rewritten at the version this worker last wrote, with them in `finished` and
    /// `published`. Those that do not fit wait for the next one (or the bundle's result).
    asio::awaitable<void> send_early(
        const std::string& tid,
        const std::shared_ptr<running_task>& t,
        early_run& early,
        const std::vector<protocol::task_result>& entries,
        int attempt,
        std::int64_t started,
        const std::vector<std::size_t>& ks
    ) {
        // One write of the assignment at a time: the running mark and progress are
        // version-checked writes too (T3).
        while (t->writing && !t->stop.stop_requested()) {
            if (!co_await zkco::pause(std::chrono::milliseconds(5))) {
                break;
            }
        }
        if (t->writing || t->gave_up || state_.stopping() || t->stop.stop_requested()) {
            early.on = false;  // stopping, or the node is not ours to write any more
            co_return;
        }
        std::map<std::size_t, protocol::early_result> made;
        // The earlier tries (`try`, `errors`, §4.3) read from the assignment once, not once
        // per task: it may hold 512 KiB.
        const auto tries = protocol::with_earlier_tries("{}", t->assigned);
        for (const auto k : ks) {
            auto id = protocol::bundled_task_id(tid, k);
            auto data = protocol::early_result_data(
                entries[k], id, attempt, me_.id, started, early.finished_ms[k], tries
            );
            made.emplace(k, protocol::early_result{std::move(id), std::move(data)});
        }
        // Within the bounds of one node and one transaction, task by task: one too large is
        // left to the bundle's result, the others still go (§6 T4e).
        const auto entries_of = [&](const std::vector<std::size_t>& kept) {
            std::vector<std::pair<std::size_t, protocol::task_result>> out;
            for (const auto k : kept) {
                out.emplace_back(k, entries[k]);
            }
            return out;
        };
        // A task's entry in the assignment is no larger than its own result (which has the
        // entry's members and more): one whose result alone cannot fit is not tried.
        const auto alone = [&](std::size_t k) {
            const auto& m = made.at(k);
            const std::size_t grown = t->assigned.size() + m.data.size() + 32;
            return grown <= protocol::max_task_bytes &&
                   grown + m.tid.size() + m.data.size() <= early_txn_bytes;
        };
        const auto kept = fitting_tasks(ks, alone, [&](const std::vector<std::size_t>& trial) {
            const auto a = protocol::with_published(t->assigned, entries.size(), entries_of(trial));
            if (!a) {
                return true;  // not the size: refused below
            }
            std::size_t bytes = a->size();
            for (const auto k : trial) {
                bytes += made.at(k).tid.size() + made.at(k).data.size();
            }
            return protocol::task_size_ok(*a) && bytes <= early_txn_bytes;
        });
        for (const auto k : ks) {
            if (std::find(kept.begin(), kept.end(), k) == kept.end()) {
                early.tasks[k].final = false;  // never tried again: its result carries it
            }
        }
        const auto chosen = entries_of(kept);
        std::vector<protocol::early_result> results;
        for (const auto k : kept) {
            results.push_back(std::move(made.at(k)));
        }
        std::optional<std::string> assigned;
        if (!chosen.empty()) {
            assigned = protocol::with_published(t->assigned, entries.size(), chosen);
        }
        auto run = t->run;
        if (run.running_ms == 0) {
            run.running_ms = protocol::now_ms();  // it runs: this write is its mark too
        }
        auto data = assigned ? protocol::stamp(*assigned, run)
                             : protocol::codec_result<std::string>(protocol::decode_error{"no"});
        if (chosen.empty() || !data) {
            spdlog::info(
                "worker {}: bundle {}: {} finished task(s) go with its result (too large alone)",
                me_.id, tid, chosen.empty() ? ks.size() : chosen.size()
            );
            if (!chosen.empty()) {
                early.on = false;  // the assignment would not take them
            }
            co_return;
        }
        const std::string written = *data;
        const std::string path = protocol::layout::assignment(me_.id, tid);
        auto ops =
            protocol::early_results_ops(l_, me_.id, tid, std::move(*data), t->version, results);
        // Writing until the outcome is known: no other write of the assignment (a T3 at the
        // version before this one) goes out meanwhile.
        t->writing = true;
        auto [ec, per_op] = co_await results_.async_submit(
            to_zkco(std::move(ops)), asio::as_tuple(asio::use_awaitable)
        );
        auto out = protocol::read_early(to_answer(ec, per_op), results.size());
        std::int32_t version = t->version + 1;
        if (out == protocol::early_outcome::committed && per_op.size() == 1 + results.size()) {
            version = per_op.front().stat.version;
        }
        // The answer was lost: the assignment says whether it applied (only its worker sets
        // it, so the bytes as written mean it did). Asked again, after a sync, until it
        // answers or the session is gone (then the worker stops: the node is not ours).
        zkco::error_code last = ec;
        while (out == protocol::early_outcome::unknown && !state_.stopping()) {
            if (co_await zkco::cancelled() || !co_await reconnected_after(zk_, last)) {
                break;
            }
            if (auto synced = co_await zk_.sync(path); !synced) {
                last = synced.error();
                continue;
            }
            auto got = co_await zk_.get(path);
            if (got) {
                if (got->data == written) {
                    out = protocol::early_outcome::committed;
                    version = got->stat.version;
                } else {
                    out = protocol::early_outcome::assignment_changed;
                }
            } else if (got.error() == zkco::errc::no_node) {
                out = protocol::early_outcome::assignment_gone;  // T6 or T7 took it
            } else {
                last = got.error();
            }
        }
        t->writing = false;
        if (out == protocol::early_outcome::committed) {
            t->assigned = std::move(*assigned);
            t->run = run;
            t->version = version;
            t->marked = true;
            t->rewritten = true;
            for (const auto& [k, e] : chosen) {
                early.tasks[k].published = true;
            }
            spdlog::debug(
                "worker {}: bundle {}: {} task(s) published early", me_.id, tid, chosen.size()
            );
        } else {
            spdlog::info(
                "worker {}: bundle {}: no early results ({}): its result carries them", me_.id, tid,
                ec ? ec.message() : "not applied"
            );
            early.on = false;
        }
        if (t->done) {
            co_return;
        }
        if (!t->marked && asio::steady_timer::clock_type::now() >= t->mark.expiry()) {
            write_assignment(t);  // the mark came due while this write was out
        } else if (t->dirty) {
            detail::progress_reported(t);  // a report that came meanwhile: within a second
        }
    }

    /// One handler call, stopped by its assignment's stop source or its timeout: on the pool,
    /// or on the loop for an asynchronous type (an exec type). `label` names it to the handler
    /// and `part` is its place in the bundle (0 alone). A value whose encoding is over
    /// `value_limit` becomes a result_too_large failure.
    asio::awaitable<protocol::task_result> call(
        const protocol::task_node& node,
        const boost::json::value& args,
        const std::shared_ptr<running_task>& t,
        std::size_t value_limit,
        std::string label,
        std::size_t part
    ) {
        const protocol::task_spec& spec = node.task;
        auto c = std::make_shared<handler_call>(zk_.get_executor());
        const std::stop_callback link(t->stop.get_token(), [c] { c->stop.request_stop(); });
        // One task of a bundle has a stop of its own: its marker (§6 T7 "One task of a bundle").
        const bool own_stop = !node.task.bundle.empty() && part < t->entry_stop.size();
        const std::stop_token own = own_stop ? t->entry_stop[part].get_token() : std::stop_token{};
        const std::stop_callback link_own(own, [c] { c->stop.request_stop(); });
        const auto timeout = reg_.limits(spec.type).effective(spec.timeout);
        handlers::handler_result outcome = handlers::handler_error{};
        if (own.stop_requested()) {
            // Cancelled before it started: never run.
            outcome = handlers::handler_error{std::string(protocol::codes::cancelled), "cancelled"};
        } else if (reg_.find_async(spec.type) != nullptr) {
            handlers::async_call ac;
            ac.args = args;
            ac.task = std::move(label);
            ac.attempt = node.assigned.attempt;
            ac.epoch = node.assigned.epoch;
            ac.timeout = timeout;
            ac.stop = c->stop.get_token();
            ac.started = [c, timeout] { arm_deadline(c, timeout); };
            ac.progress = [t, part](double fraction, std::string message) {
                record_progress(t, part, fraction, std::move(message));
            };
            outcome = co_await handlers::run_async_handler(reg_, spec.type, std::move(ac));
        } else if (reg_.runs_inline(spec.type)) {
            // Neither waits nor loops (registry::add_inline): here, without the compute
            // pool's round trip. Nothing to time out or report.
            outcome = handlers::run_handler(reg_, spec.type, args, c->stop.get_token());
        } else {
            // The timeout counts from when a pool thread starts the handler, not while it
            // queues (behind a bundle's other tasks, say): the job tells the loop when it starts.
            std::function<void()> started;
            if (timeout.count() > 0) {
                started = [c, timeout, ex = zk_.get_executor()] {
                    asio::post(ex, [c, timeout] { arm_deadline(c, timeout); });
                };
            }
            // Reports from the pool thread reach the loop coalesced: the latest one, one post
            // at a time, however often the handler reports.
            struct latest {
                std::mutex m;
                double fraction = 0;
                std::string message;
                bool posted = false;
            };
            handlers::progress_fn report =
                [box = std::make_shared<latest>(), t, part,
                 ex = zk_.get_executor()](double fraction, std::string message) {
                    const std::lock_guard lock(box->m);
                    box->fraction = fraction;
                    box->message = std::move(message);
                    if (std::exchange(box->posted, true)) {
                        return;
                    }
                    asio::post(ex, [box, t, part] {
                        std::unique_lock held(box->m);
                        box->posted = false;
                        const double f = box->fraction;
                        std::string m = box->message;
                        held.unlock();
                        record_progress(t, part, f, std::move(m));
                    });
                };
            // Named, not written inside the co_await: GCC 12 destroys such lambdas twice.
            auto job = [&reg = reg_, type = spec.type, args, token = c->stop.get_token(),
                        started = std::move(started), report = std::move(report),
                        own]() -> handlers::handler_result {
                if (own.stop_requested()) {
                    // Its marker came while it waited for a thread: never run.
                    return handlers::handler_error{
                        std::string(protocol::codes::cancelled), "cancelled"};
                }
                if (started) {
                    started();
                }
                return handlers::run_handler(reg, type, args, token, report);
            };
            outcome = co_await reactor::offload(pool_, std::move(job));
        }
        c->done = true;
        c->deadline.cancel();

        protocol::task_result r;
        if (outcome) {
            r.state = protocol::task_state::succeeded;
            r.value = std::move(*outcome);
            if (encode(r).size() > value_limit) {
                r = failure(
                    protocol::codes::result_too_large,
                    "the handler's result is over " + std::to_string(value_limit) + " bytes"
                );
            }
        } else if (c->timed_out) {
            r = failure(
                protocol::codes::timeout,
                "timed out after " + std::to_string(timeout.count()) + " ms"
            );
        } else if ((t->cancel_marker && t->stop.stop_requested()) || own.stop_requested()) {
            r = failure(protocol::codes::cancelled, "cancelled");
        } else {
            r = failure(outcome.error().code, outcome.error().message);
        }
        co_return r;
    }

    /// T4, as worker_fsm's publish plan says, try by try.
    asio::awaitable<publish_end> publish(
        std::string tid, protocol::task_result result, const std::string& assignment
    ) {
        // A task of the bundle whose own cancel came after its try failed is final: cancelled,
        // never run again by a retry (§6 T7 "One task of a bundle").
        // A task published early has ended for good (§6 T4e): nothing to cancel.
        auto cancelled = state_.entries_cancelled(tid);
        for (const auto k : result.published) {
            cancelled.erase(k);
        }
        protocol::cancel_retryable_entries(result.bundle, cancelled);
        // A failed try with retries left waits as a delayed task (§6 T4 "Retry"); the last
        // try's result carries the earlier tries' errors.
        std::string data = encode(result);
        std::string target;
        if (!state_.marker_seen(tid) && result.error) {
            auto defaults = protocol::backoff_policy{};
            if (const auto node = protocol::decode_task_node(assignment); node) {
                defaults = retry_defaults(node->task.type);
            }
            // A bundle retries only its tasks that failed retryably (§4.3 "Bundles").
            auto plan = result.bundle.empty() ? protocol::plan_retry(
                                                    assignment, result.state, *result.error,
                                                    result.finished_ms, defaults, rng_()
                                                )
                                              : protocol::plan_bundle_retry(
                                                    assignment, result.bundle, *result.error,
                                                    result.finished_ms, defaults, rng_()
                                                );
            if (plan) {
                spdlog::info(
                    "worker {}: task {} {} ({}): try {} at {}", me_.id, tid,
                    protocol::to_string(result.state), result.error->code, plan->next_try,
                    protocol::format_time(plan->due_ms)
                );
                data = std::move(plan->data);
                target = l_.delayed_task(tid);
            }
        }
        const bool retrying = !target.empty();
        if (!retrying) {
            data = protocol::with_earlier_tries(std::move(data), assignment);
        }
        auto step = state_.publish(tid, std::move(data), std::move(target));
        zkco::error_code last;  // the error a reconnect step is about
        for (;;) {
            switch (step.what) {
            case publish_fsm::step::kind::send: {
                auto ops = to_zkco(std::move(step.ops));
                auto [ec, per_op] = co_await results_.async_submit(
                    std::move(ops), asio::as_tuple(asio::use_awaitable)
                );
                last = ec;
                step = state_.publish_answered(tid, to_answer(ec, per_op));
                break;
            }
            case publish_fsm::step::kind::clear_foreign: {
                auto removed = co_await remove_children(zk_, step.path);
                if (removed) {
                    spdlog::warn(
                        "worker {}: deleted {} node(s) someone else wrote below {}", me_.id,
                        *removed, step.path
                    );
                } else {
                    last = removed.error();
                }
                step = state_.publish_cleared(tid, removed.has_value());
                break;
            }
            case publish_fsm::step::kind::reconnect: {
                const bool retry = co_await reconnected_after(zk_, last);
                if (!retry) {
                    spdlog::warn("worker {}: cannot publish {}: {}", me_.id, tid, last.message());
                }
                step = state_.publish_reconnected(tid, retry);
                break;
            }
            case publish_fsm::step::kind::done:
                if (step.end == publish_end::published ||
                    step.end == publish_end::published_by_lost_try) {
                    // A try that goes on to another try is no result: counted apart, not
                    // reported as one (its task is not finished).
                    if (retrying) {
                        ++stats_->retried;
                    } else if (opts_.on_published) {
                        opts_.on_published(result);
                    }
                }
                co_return step.end;
            }
        }
    }

    zkco::client& zk_;
    protocol::layout l_;
    protocol::member_info me_;
    const handlers::registry& reg_;
    reactor::compute_pool& pool_;
    worker_options opts_;
    // The jitter of retries' backoff (§4.3): seeded per worker, so workers do not retry in step.
    std::mt19937_64 rng_{std::random_device{}()};
    worker_stats own_stats_;
    worker_stats* stats_;
    multi_batcher results_;
    worker_fsm state_;
    // The runtime side of each task in hand (handlers' stop source, timers): worker_fsm
    // holds the same tasks' decisions.
    std::map<std::string, std::shared_ptr<running_task>> tasks_;
    reactor::task_group group_;
    asio::steady_timer idle_;  // cancelled whenever a task ends (drain waits on it)
};

}  // namespace

asio::awaitable<void> run_worker(
    zkco::client& zk,
    protocol::layout l,
    protocol::member_info me,
    const handlers::registry& reg,
    reactor::compute_pool& pool,
    worker_options opts,
    worker_stats* stats
) {
    worker_session session(zk, l, std::move(me), reg, pool, opts, stats);
    co_await session.run();
}

}  // namespace zkd::roles
