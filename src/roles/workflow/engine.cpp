// SPDX-License-Identifier: MIT
#include "roles/workflow/engine.hpp"

#include "protocol/change_log.hpp"
#include "protocol/direct_placement.hpp"
#include "protocol/ids.hpp"
#include "protocol/task.hpp"
#include "reactor/task_group.hpp"
#include "roles/txn/zk_ops.hpp"
#include "roles/workflow/detail/read_gate.hpp"
#include "workflow/ids.hpp"
#include "workflow/spec.hpp"
#include "workflow/state.hpp"
#include "workflow/txn.hpp"
#include "workflow/workflow_fsm.hpp"
#include "zkco/deadline.hpp"
#include "zkco/read_batch.hpp"
#include "zkco/retry.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <deque>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zkd::roles {

namespace asio = boost::asio;
namespace wf = zkd::workflow;
using namespace std::chrono_literals;

namespace {

/// Most deletes one W4 transaction holds.
constexpr std::size_t reap_batch = 500;

/// Most workers one read of the workers' view reads (in a larger cluster, a window that
/// moves on at each read), as a client's (docs/protocol.md §6 T1 "Direct placement"): W2's
/// budget (workflow::launch_bound) counts a check and a change log for each.
constexpr std::size_t workers_window = wf::max_placement_workers;

/// The workers as the engine last read them, shared by every workflow it runs: where W2
/// places a launched task itself (docs/protocol.md §11.4 "Direct placement"). Read again,
/// before a placement, once it is older than workflow_engine_options::workers_read_every.
class worker_view {
public:
    explicit worker_view(std::chrono::milliseconds every) : gate_(every) {}

    /// Reads /master (its say on direct placement, its suspects), /workers and each
    /// worker's node and directory stat, unless the last read is recent or another
    /// workflow is reading. A failed read leaves no view: nothing is placed until the next.
    asio::awaitable<void> refresh(zkco::client& zk) {
        // The ticket ends the read however this coroutine ends: a read cancelled (the
        // engine stops while it is out) or thrown through does not leave the gate shut.
        auto ticket = gate_.begin(std::chrono::steady_clock::now());
        if (!ticket) {
            co_return;
        }
        co_await read(zk);
        ticket->done();
    }

    /// A W2 found a worker gone or changed: read again before the next placement.
    void stale() { gate_.stale(); }

    protocol::direct_placer& placer() { return placer_; }

private:
    asio::awaitable<void> read(zkco::client& zk) {
        zkco::read_batch batch(zk);
        auto master = batch.get(protocol::layout::master());
        auto workers = batch.get_children(protocol::layout::workers_dir());
        if (!co_await batch.wait() || !*workers) {
            placer_.read({});
            co_return;
        }
        if (*master) {
            if (const auto m = protocol::decode_master((*master)->data); m) {
                direct_ = m->direct;
                suspects_ = m->suspects;
                std::sort(suspects_.begin(), suspects_.end());
            }
        }
        if (!direct_) {
            placer_.read({});
            co_return;
        }
        auto names = protocol::worker_window(std::move((*workers)->names), at_, workers_window);
        zkco::read_batch each(zk);
        std::vector<zkco::read_batch::slot<zkco::node>> nodes;
        std::vector<zkco::read_batch::slot<std::optional<zkco::stat>>> dirs;
        for (const auto& name : names) {
            nodes.push_back(each.get(protocol::layout::worker(name)));
            dirs.push_back(each.exists(protocol::layout::assign_dir(name)));
        }
        if (!co_await each.wait()) {
            placer_.read({});
            co_return;
        }
        std::vector<protocol::worker_seen> seen;
        for (std::size_t k = 0; k < names.size(); ++k) {
            // As the master takes workers (§7): a live session's node holding a worker's
            // data, and its directory there.
            if (!*nodes[k] || (*nodes[k])->stat.ephemeral_owner == 0 || !*dirs[k] || !**dirs[k]) {
                continue;
            }
            // W2's budget counts a worker's id as long as a valid one at most: a node of
            // another name gets no task from here (pending serves it).
            if (!protocol::is_valid_member_id(names[k])) {
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
        placer_.read(std::move(seen), suspects_);
    }

    detail::read_gate gate_;
    protocol::direct_placer placer_;
    bool direct_ = true;  // /master's say, as last read
    std::vector<std::string> suspects_;
    std::size_t at_ = 0;  // the window's start (protocol::worker_window)
};

/// One workflow, followed and advanced (docs/protocol.md §11.4).
class runner : public std::enable_shared_from_this<runner> {
public:
    runner(
        zkco::client& zk,
        protocol::layout l,
        std::int64_t epoch,
        workflow_engine_options o,
        workflow_engine_stats* stats,
        std::string id,
        wf::workflow_ref ref,
        std::shared_ptr<worker_view> view,
        const asio::any_io_executor& ex
    )
        : zk_(zk),
          l_(l),
          epoch_(epoch),
          opts_(std::move(o)),
          stats_(stats),
          id_(std::move(id)),
          ref_(ref),
          view_(std::move(view)),
          wake_(ex),
          watchers_(ex) {}

    asio::awaitable<void> run() {
        // Cancelled (the master stops acting), it stops at its next wait and joins its
        // watchers, instead of throwing from every later co_await.
        co_await asio::this_coro::throw_if_cancelled(false);
        auto header = co_await read_header();
        if (!header) {
            co_return;
        }
        // A workflow that ended (at a takeover, most of those the master finds) needs only
        // to be reaped: neither its spec nor its results are read.
        const auto st = co_await read_state(header->steps);
        if (st.what == found::stop) {
            co_return;
        }
        if (st.what == found::ended) {
            co_await reap_when_due(st.state);
            uncount();
            co_return;
        }
        auto spec = co_await read_spec(*header);
        if (!spec) {
            co_return;
        }
        wf::workflow_fsm::options fo;
        fo.retention_ms = opts_.retention.count();
        fsm_.emplace(ref_, *spec, fo);
        if (stats_ != nullptr) {
            ++stats_->adopted;
        }
        spdlog::info("workflow {}: adopted ({} steps)", id_, (*spec)->steps.size());
        // The results this session's own transactions write (its worker's T4) are known
        // from their answers, before the directory's change log is read back.
        own_results_ = zk_.observe_sets(
            wf::results_node(ref_),
            [w = weak_from_this()](std::string_view data, const zkco::stat&) {
                if (auto self = w.lock()) {
                    self->own_results(data);
                }
            }
        );
        watchers_.spawn([self = shared_from_this()] { return self->follow_results(); }, "results");
        watchers_.spawn([self = shared_from_this()] { return self->follow_cancel(); }, "cancel");
        co_await drive();
        own_results_ = {};
        uncount();
        watchers_.emit(asio::cancellation_type::terminal);
        co_await watchers_.async_wait(asio::use_awaitable);
    }

    ~runner() { uncount(); }
    runner(const runner&) = delete;
    runner& operator=(const runner&) = delete;
    runner(runner&&) = delete;
    runner& operator=(runner&&) = delete;

private:
    /// Moves this workflow's part of the stats' gauges to its state as the fsm holds it.
    void recount() {
        if (fsm_) {
            count(fsm_->state());
        }
    }

    /// Moves this workflow's part of the stats' gauges to `st`.
    void count(const wf::workflow_state& st) {
        if (stats_ == nullptr) {
            return;
        }
        uncount();
        const auto* at = std::find(workflow_statuses.begin(), workflow_statuses.end(), st.status);
        counted_status_ = static_cast<std::size_t>(at - workflow_statuses.begin());
        if (counted_status_ < stats_->workflows.size()) {
            ++stats_->workflows[counted_status_];
        }
        for (const char c : st.steps) {
            const auto* k = std::find_if(step_statuses.begin(), step_statuses.end(), [c](auto x) {
                return static_cast<char>(x) == c;
            });
            const auto i = static_cast<std::size_t>(k - step_statuses.begin());
            if (i < counted_steps_.size()) {
                ++counted_steps_[i];
                ++stats_->steps[i];
            }
        }
        counted_ = true;
    }

    /// Takes this workflow's part out of the stats' gauges.
    void uncount() {
        if (stats_ == nullptr || !counted_) {
            return;
        }
        if (counted_status_ < stats_->workflows.size()) {
            --stats_->workflows[counted_status_];
        }
        for (std::size_t i = 0; i < counted_steps_.size(); ++i) {
            stats_->steps[i] -= counted_steps_[i];
            counted_steps_[i] = 0;
        }
        counted_ = false;
    }

    void push(wf::workflow_event e) {
        if (const auto* r = std::get_if<wf::wf_saw::result>(&e); r != nullptr && view_) {
            view_->placer().settled(r->tid);  // its worker's budget is free again
        }
        inbox_.push_back(std::move(e));
        wake_.cancel();
    }

    asio::awaitable<void> drive() {
        bool need_load = true;
        std::optional<std::int64_t> wake_at;
        auto backoff = 100ms;
        for (;;) {
            const bool stop = co_await zkco::cancelled();
            if (stop) {
                co_return;
            }
            if (need_load) {
                need_load = false;
                const auto ok = co_await load();
                if (!ok) {
                    co_return;
                }
            }
            while (!inbox_.empty() && !need_load) {
                auto e = std::move(inbox_.front());
                inbox_.pop_front();
                auto step = fsm_->on(e, protocol::now_ms());
                wake_at = step.wake_at_ms;
                recount();
                const auto go_on = co_await carry_out(std::move(step), need_load);
                if (!go_on) {
                    co_return;
                }
            }
            if (need_load) {
                // A write failed: read again, after a pause that grows while writes keep
                // failing (100 ms to 5 s).
                const bool waited = co_await zkco::pause(backoff);
                if (!waited) {
                    co_return;
                }
                backoff = std::min(backoff * 2, std::chrono::milliseconds(5000));
                continue;
            }
            if (inbox_.empty()) {
                // A cancellation that came during a read (retried, so unseen) ends the loop
                // here: the wait below would not see it.
                const bool cancelled_meanwhile = co_await zkco::cancelled();
                if (cancelled_meanwhile) {
                    co_return;
                }
                if (wake_at) {
                    const auto in = std::max<std::int64_t>(0, *wake_at - protocol::now_ms());
                    wake_.expires_after(std::chrono::milliseconds(in));
                } else {
                    wake_.expires_at(asio::steady_timer::time_point::max());
                }
                auto [ec] = co_await wake_.async_wait(asio::as_tuple(asio::use_awaitable));
                if (!ec && wake_at) {
                    push(wf::wf_saw::tick{});
                }
            }
        }
    }

    asio::awaitable<bool> carry_out(wf::workflow_step step, bool& need_load) {
        for (auto& action : step.actions) {
            if (auto* w = std::get_if<wf::wf_do::write>(&action)) {
                const auto go_on = co_await write(*w);
                if (!go_on) {
                    co_return false;
                }
            } else if (auto* c = std::get_if<wf::wf_do::cancel_tasks>(&action)) {
                for (const auto& tid : c->tids) {
                    auto op = wf::cancel_task_op(tid, protocol::now_ms());
                    auto made = co_await zk_.create(op.path, op.data);
                    if (!made && made.error() != zkco::errc::node_exists) {
                        spdlog::warn(
                            "workflow {}: cannot ask {} to stop: {}", id_, tid,
                            made.error().message()
                        );
                    }
                }
                spdlog::info("workflow {}: asked {} running tasks to stop", id_, c->tids.size());
            } else if (std::holds_alternative<wf::wf_do::reload>(action)) {
                need_load = true;
            } else if (auto* f = std::get_if<wf::wf_do::finished>(&action)) {
                spdlog::info("workflow {}: {}", id_, wf::to_string(f->status));
                if (stats_ != nullptr) {
                    ++stats_->finished;
                }
                watchers_.emit(asio::cancellation_type::terminal);
            } else if (std::holds_alternative<wf::wf_do::reap>(action)) {
                co_await reap();
                co_return false;
            }
        }
        co_return true;
    }

    /// W2, its tasks placed on workers with room where the view has some; sent again with
    /// every task to pending should a worker have left or changed. False: deposed.
    asio::awaitable<bool> write(const wf::wf_do::write& w) {
        auto placed = co_await place(w);
        for (;;) {
            const auto ops = wf::launch_ops(l_, id_, epoch_, w, placed);
            if (const auto bytes = wf::launch_bytes(ops);
                bytes > wf::max_launch_bytes && !placed.empty()) {
                // workflow_fsm keeps every write under this whatever its placement
                // (launch_bound): not reached, unless that bound is wrong.
                spdlog::error(
                    "workflow {}: its write would take {} bytes, over {}: its tasks go to "
                    "pending",
                    id_, bytes, wf::max_launch_bytes
                );
                settle(w, placed);
                placed.clear();
                continue;
            }
            auto r = co_await zk_.multi(to_zkco(ops));
            const auto direct = static_cast<std::size_t>(std::count_if(
                placed.begin(), placed.end(), [](const auto& p) { return p.has_value(); }
            ));
            if (r) {
                if (stats_ != nullptr) {
                    ++stats_->writes;
                    stats_->launched += w.creates.size();
                    stats_->placed += direct;
                }
                spdlog::debug(
                    "workflow {}: wrote its state, {} tasks launched ({} placed on workers)", id_,
                    w.creates.size(), direct
                );
                push(wf::wf_saw::written{true});
                co_return true;
            }
            const auto failed = r.failed_op();
            const auto code = failed && *failed < r.results.size()
                                  ? to_op_code(r.results[*failed].ec)
                                  : protocol::op_code::other;
            const auto why = wf::read_launch_failure(ops, failed, code);
            if (why == wf::launch_failure::deposed) {
                spdlog::info("workflow {}: deposed (epoch {} is past)", id_, epoch_);
                co_return false;
            }
            if (why == wf::launch_failure::worker_gone && direct > 0) {
                // Nothing of it applied: the same write again, every task to pending.
                spdlog::info(
                    "workflow {}: a worker it placed on left or changed ({}): its {} tasks go "
                    "to pending",
                    id_, ops[*failed].path, direct
                );
                settle(w, placed);
                view_->stale();
                placed.clear();
                if (stats_ != nullptr) {
                    ++stats_->redirected;
                }
                continue;
            }
            spdlog::warn(
                "workflow {}: its write failed ({}): reading it again", id_, r.ec.message()
            );
            settle(w, placed);
            push(wf::wf_saw::written{false});
            co_return true;
        }
    }

    /// The tasks of `w` that `placed` put on workers are not there: their workers' budgets
    /// are free again.
    void settle(
        const wf::wf_do::write& w, const std::vector<std::optional<wf::direct_target>>& placed
    ) {
        for (std::size_t i = 0; i < placed.size(); ++i) {
            if (placed[i]) {
                view_->placer().settled(w.creates[i].tid);
            }
        }
    }

    /// Where each of the write's tasks goes directly (the view's choice; empty: to pending).
    asio::awaitable<std::vector<std::optional<wf::direct_target>>> place(const wf::wf_do::write& w
    ) {
        std::vector<std::optional<wf::direct_target>> placed;
        if (!view_ || w.creates.empty()) {
            co_return placed;
        }
        co_await view_->refresh(zk_);
        auto& placer = view_->placer();
        const auto now = protocol::now_ms();
        // As a client's turns (§6 T1): workflows start on different workers.
        const auto turn = static_cast<std::uint64_t>(ref_.client) + turn_++;
        bool any = false;
        placed.resize(w.creates.size());
        for (std::size_t i = 0; i < w.creates.size(); ++i) {
            const auto& c = w.creates[i];
            const auto type = wf::direct_type(c.tid, c.data);
            if (!type) {
                continue;
            }
            // A W2 of one task (a chain's next step, a fan-in) places it on the worker
            // of this session first: its result then comes back with the answer to that
            // worker's T4 (own_results), and its assignment reaches the worker with the
            // answer to this W2 (zkco::client::observe_sets), without the reads.
            const auto to = placer.place(
                *type, turn, w.creates.size() == 1 ? std::string_view(opts_.own_worker) : ""
            );
            if (!to) {
                continue;
            }
            auto data = protocol::stamp(c.data, protocol::assignment{0, 0, now, to->worker});
            if (!data) {
                continue;  // our own encode wrote it: does not happen; pending takes it
            }
            placer.placed(c.tid, to->worker);
            placed[i] = wf::direct_target{to->worker, to->version, std::move(*data)};
            any = true;
        }
        if (!any) {
            placed.clear();
        }
        co_return placed;
    }

    /// The header; nullopt (logged) when the workflow cannot be run, or is gone.
    asio::awaitable<std::optional<wf::workflow_header>> read_header() {
        for (;;) {
            auto h = co_await zk_.get(wf::workflow_node(id_));
            if (!h) {
                if (h.error() == zkco::errc::no_node) {
                    co_return std::nullopt;
                }
                const bool retry = co_await zkco::reconnected_after(zk_, h.error());
                if (!retry) {
                    co_return std::nullopt;
                }
                continue;
            }
            if (h->data.empty()) {
                // Its client is still writing a large spec (W1), or died doing so.
                if (protocol::now_ms() - h->stat.ctime > opts_.abandoned_after.count()) {
                    spdlog::warn(
                        "workflow {}: its client never finished writing it: deleting it", id_
                    );
                    co_await reap();
                    co_return std::nullopt;
                }
                const bool waited = co_await zkco::pause(200ms);
                if (!waited) {
                    co_return std::nullopt;
                }
                continue;
            }
            auto header = wf::decode_header(h->data);
            if (!header) {
                spdlog::error(
                    "workflow {}: its header is garbage: {}", id_, header.error().message
                );
                co_return std::nullopt;
            }
            co_return std::move(*header);
        }
    }

    enum class found { stop, follow, ended };
    struct state_read {
        found what = found::stop;
        wf::workflow_state state;  ///< ended: the state
    };

    /// The state, to learn whether the workflow needs following (wf::needs_following):
    /// `follow` also when it has none yet; `stop` (logged) when it is garbage or the session
    /// ended.
    asio::awaitable<state_read> read_state(std::size_t steps) {
        for (;;) {
            auto st = co_await zk_.get(wf::state_node(id_));
            if (!st) {
                if (st.error() == zkco::errc::no_node) {
                    co_return state_read{found::follow, {}};
                }
                const bool retry = co_await zkco::reconnected_after(zk_, st.error());
                if (!retry) {
                    co_return state_read{};
                }
                continue;
            }
            auto decoded = wf::decode_state(st->data, steps);
            if (!decoded) {
                spdlog::error(
                    "workflow {}: its state is garbage ({}): left alone", id_,
                    decoded.error().message
                );
                co_return state_read{};
            }
            if (wf::needs_following(*decoded)) {
                co_return state_read{found::follow, {}};
            }
            co_return state_read{found::ended, std::move(*decoded)};
        }
    }

    /// A workflow that ended before this engine took it: counted in the gauges, reaped (W4)
    /// once the retention after its end passed, unless the engine stops first.
    asio::awaitable<void> reap_when_due(const wf::workflow_state& st) {
        count(st);
        const auto at = wf::reap_at_ms(st, opts_.retention.count()).value_or(0);
        const auto in = std::max<std::int64_t>(0, at - protocol::now_ms());
        spdlog::debug(
            "workflow {}: {} before this master; reaped in {} s", id_, wf::to_string(st.status),
            in / 1000
        );
        if (in > 0) {
            const bool waited = co_await zkco::pause(std::chrono::milliseconds(in));
            if (!waited) {
                co_return;
            }
        }
        co_await reap();
    }

    /// The chunks, the spec; nullopt (logged) when the workflow cannot be run.
    asio::awaitable<std::optional<std::shared_ptr<const wf::workflow_spec>>> read_spec(
        const wf::workflow_header& header
    ) {
        std::string text;
        text.reserve(header.spec_bytes);
        for (std::size_t i = 0; i < header.chunks; ++i) {
            auto c = co_await zkco::retry_unknown(zk_, [&] {
                return zk_.get(wf::spec_chunk_node(id_, i));
            });
            if (!c) {
                spdlog::error("workflow {}: chunk {} of its spec: {}", id_, i, c.error().message());
                co_return std::nullopt;
            }
            text += c->data;
        }
        auto spec = wf::parse_spec(text);
        if (!spec || spec->steps.size() != header.steps) {
            spdlog::error(
                "workflow {}: its spec is garbage: {}", id_,
                spec ? "not as many steps as its header says" : spec.error().message
            );
            co_return std::nullopt;
        }
        co_return std::make_shared<const wf::workflow_spec>(std::move(*spec));
    }

    /// Reads the state and the cancel request into a wf_saw::loaded; false: stop.
    asio::awaitable<bool> load() {
        for (;;) {
            auto st = co_await zk_.get(wf::state_node(id_));
            std::optional<wf::workflow_state> state;
            std::int32_t version = -1;
            if (st) {
                auto decoded = wf::decode_state(st->data, fsm_->spec().steps.size());
                if (!decoded) {
                    spdlog::error(
                        "workflow {}: its state is garbage ({}): left alone", id_,
                        decoded.error().message
                    );
                    co_return false;
                }
                state = std::move(*decoded);
                version = st->stat.version;
            } else if (st.error() != zkco::errc::no_node) {
                const bool retry = co_await zkco::reconnected_after(zk_, st.error());
                if (!retry) {
                    co_return false;
                }
                continue;
            }
            auto c =
                co_await zkco::retry_unknown(zk_, [&] { return zk_.exists(wf::cancel_node(id_)); });
            if (!c) {
                co_return false;
            }
            push(wf::wf_saw::loaded{std::move(state), version, c->has_value(), {}});
            co_return true;
        }
    }

    asio::awaitable<void> deliver(const std::string& dir, const std::string& name) {
        auto r = co_await zkco::retry_unknown(zk_, [&] { return zk_.get(dir + "/" + name); });
        if (r) {
            push(wf::wf_saw::result{name, protocol::decode_result(r->data)});
        }
    }

    /// A transaction of this session set the results directory's change log to `data`
    /// (zkco::client::observe_sets): the results it names with their data are there, as a
    /// read of the log would say; follow_results skips them when it reads the log.
    void own_results(std::string_view data) {
        auto log = protocol::decode_change_log(data);
        if (!log || !fsm_) {
            return;
        }
        for (const auto& e : log->created) {
            if (e.data && seen_.insert(e.name).second) {
                push(wf::wf_saw::result{e.name, protocol::decode_result(*e.data)});
            }
        }
    }

    /// Follows /results/<client> by its change log (§6), every result once.
    asio::awaitable<void> follow_results() {
        co_await asio::this_coro::throw_if_cancelled(false);
        const auto dir = wf::results_node(ref_);
        protocol::log_follower follower;
        auto& seen = seen_;
        for (;;) {
            const bool stop = co_await zkco::cancelled();
            if (stop) {
                co_return;
            }
            auto n = co_await zk_.watch_get(dir);
            if (!n) {
                follower.forget();
                if (n.error() == zkco::errc::no_node) {
                    const bool created = co_await zkco::wait_created(zk_, dir);
                    if (!created) {
                        co_return;
                    }
                    continue;
                }
                const bool retry = co_await zkco::reconnected_after(zk_, n.error());
                if (!retry) {
                    co_return;
                }
                continue;
            }
            auto log = protocol::decode_change_log(n->value.data);
            const auto step = follower.read(
                to_dir_stat(n->value.stat),
                log ? std::optional<std::size_t>(log->created.size()) : std::nullopt
            );
            if (step == protocol::log_follower::step::apply) {
                for (const auto& e : log->created) {
                    if (!seen.insert(e.name).second) {
                        continue;
                    }
                    if (e.data) {
                        push(wf::wf_saw::result{e.name, protocol::decode_result(*e.data)});
                    } else {
                        co_await deliver(dir, e.name);
                    }
                }
            } else if (step == protocol::log_follower::step::list) {
                auto kids = co_await zk_.get_children(dir);
                if (kids) {
                    for (const auto& name : kids->names) {
                        if (seen.insert(name).second) {
                            co_await deliver(dir, name);
                        }
                    }
                    follower.listed(to_dir_stat(kids->stat));
                }
            }
            auto fired = co_await n->watch.changed();
            if (!fired) {
                co_return;  // cancelled, or the session ended
            }
            // Mostly fired for this session's own T4 (its worker's), whose answer brings the
            // result (own_results) and the W2 that follows: the read that arms the watch
            // again goes behind that W2, not ahead of it, where the server, answering a
            // session in order, would make the W2 wait (§6 "Change logs").
            static_cast<void>(co_await zk_.own_sets_answered(dir));
        }
    }

    asio::awaitable<void> follow_cancel() {
        co_await asio::this_coro::throw_if_cancelled(false);
        for (;;) {
            const bool stop = co_await zkco::cancelled();
            if (stop) {
                co_return;
            }
            auto e = co_await zk_.watch_exists(wf::cancel_node(id_));
            if (!e) {
                const bool retry = co_await zkco::reconnected_after(zk_, e.error());
                if (!retry) {
                    co_return;
                }
                continue;
            }
            if (e->value) {
                push(wf::wf_saw::cancel{});
                co_return;
            }
            auto fired = co_await e->watch.changed();
            if (!fired) {
                co_return;
            }
        }
    }

    /// Deletes `paths` fenced by the epoch, in batches; false when deposed.
    asio::awaitable<bool> fenced_delete(const std::vector<std::string>& paths) {
        for (std::size_t at = 0; at < paths.size(); at += reap_batch) {
            const auto end = std::min(paths.size(), at + reap_batch);
            const auto fence = protocol::txn_op::check(
                protocol::layout::epoch(), static_cast<std::int32_t>(epoch_)
            );
            std::vector<protocol::txn_op> ops;
            ops.push_back(fence);
            for (auto i = at; i < end; ++i) {
                ops.push_back(protocol::txn_op::remove(paths[i]));
            }
            auto r = co_await zk_.multi(to_zkco(ops));
            if (r) {
                continue;
            }
            if (r.failed_op() == std::optional<std::size_t>{0}) {
                co_return false;
            }
            // One of them is gone (or has children): each on its own.
            for (auto i = at; i < end; ++i) {
                std::vector<protocol::txn_op> single;
                single.push_back(fence);
                single.push_back(protocol::txn_op::remove(paths[i]));
                auto one = co_await zk_.multi(to_zkco(std::move(single)));
                if (!one && one.failed_op() == std::optional<std::size_t>{0}) {
                    co_return false;
                }
            }
        }
        co_return true;
    }

    /// W4: the results, their directory, the workflow's children, the workflow node.
    asio::awaitable<void> reap() {
        const auto dir = wf::results_node(ref_);
        std::vector<std::string> paths;
        if (auto kids = co_await zk_.get_children(dir)) {
            for (const auto& name : kids->names) {
                paths.push_back(dir);
                paths.back().append("/").append(name);
            }
        }
        paths.push_back(dir);
        if (auto kids = co_await zk_.get_children(wf::workflow_node(id_))) {
            for (const auto& name : kids->names) {
                paths.push_back(wf::workflow_node(id_) + "/" + name);
            }
        }
        paths.push_back(wf::workflow_node(id_));
        const bool done = co_await fenced_delete(paths);
        if (done) {
            spdlog::info("workflow {}: reaped", id_);
            if (stats_ != nullptr) {
                ++stats_->reaped;
            }
        }
    }

    zkco::client& zk_;
    protocol::layout l_;
    std::int64_t epoch_;
    workflow_engine_options opts_;
    workflow_engine_stats* stats_;
    std::string id_;
    wf::workflow_ref ref_;
    std::shared_ptr<worker_view> view_;  // null: every task to pending
    asio::steady_timer wake_;
    reactor::task_group watchers_;
    std::deque<wf::workflow_event> inbox_;
    std::optional<wf::workflow_fsm> fsm_;
    std::set<std::string, std::less<>> seen_;  // results pushed (follow_results, own_results)
    zkco::set_observer own_results_;           // while the workflow is followed
    std::uint64_t turn_ = 0;  // W2s placed so far: the worker tried first (direct_placer)
    // Its part of the stats' gauges (recount, uncount).
    bool counted_ = false;
    std::size_t counted_status_ = 0;
    std::array<std::size_t, 6> counted_steps_{};
};

}  // namespace

asio::awaitable<void> run_workflows(
    zkco::client& zk,
    protocol::layout l,
    std::int64_t epoch,
    workflow_engine_options opts,
    workflow_engine_stats* stats
) {
    co_await asio::this_coro::throw_if_cancelled(false);
    auto ex = co_await asio::this_coro::executor;
    reactor::task_group group(ex);
    std::set<std::string, std::less<>> known;
    auto view = opts.direct ? std::make_shared<worker_view>(opts.workers_read_every) : nullptr;
    for (;;) {
        const bool stop = co_await zkco::cancelled();
        if (stop) {
            break;
        }
        auto kids = co_await zk.watch_children(wf::workflows_dir());
        if (!kids) {
            if (kids.error() == zkco::errc::no_node) {
                // No workflow yet: wait for the first client to make the directory.
                const bool created = co_await zkco::wait_created(zk, wf::workflows_dir());
                if (!created) {
                    break;
                }
                continue;
            }
            const bool retry = co_await zkco::reconnected_after(zk, kids.error());
            if (!retry) {
                break;
            }
            continue;
        }
        for (const auto& name : kids->value.names) {
            const auto ref = wf::parse_workflow_id(name);
            if (!ref) {
                continue;
            }
            if (!known.insert(name).second) {
                continue;
            }
            auto r = std::make_shared<runner>(zk, l, epoch, opts, stats, name, *ref, view, ex);
            group.spawn([r] { return r->run(); }, "workflow " + name);
        }
        auto fired = co_await kids->watch.changed();
        if (!fired) {
            break;
        }
    }
    group.emit(asio::cancellation_type::terminal);
    co_await group.async_wait(asio::use_awaitable);
}

}  // namespace zkd::roles
