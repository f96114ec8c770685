// SPDX-License-Identifier: MIT
#include "roles/schedule/engine.hpp"

#include "protocol/ids.hpp"
#include "protocol/task.hpp"
#include "reactor/task_group.hpp"
#include "roles/schedule/zones.hpp"
#include "roles/txn/zk_ops.hpp"
#include "schedule/firing.hpp"
#include "schedule/spec.hpp"
#include "schedule/txn.hpp"
#include "zkco/deadline.hpp"
#include "zkco/read_batch.hpp"
#include "zkco/retry.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace zkd::roles {

namespace asio = boost::asio;
namespace sc = zkd::schedule;

namespace {

/// One S4 transaction's budget: ops (the epoch check and up to one change log per pending
/// shard come on top) and bytes (under the 900,000 a transaction may hold, §1).
constexpr std::size_t txn_ops_budget = 900;
constexpr std::size_t txn_bytes_budget = 800'000;
/// Most deletes one cleanup transaction holds.
constexpr std::size_t delete_batch = 500;

std::string last_segment(std::string_view path) {
    const auto slash = path.rfind('/');
    return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

class engine {
public:
    engine(
        zkco::client& zk,
        protocol::layout l,
        std::int64_t epoch,
        schedule_engine_options o,
        schedule_engine_stats* stats,
        const asio::any_io_executor& ex
    )
        : zk_(zk), l_(l), epoch_(epoch), opts_(o), stats_(stats), wake_(ex), helpers_(ex) {}

    asio::awaitable<void> run() {
        co_await asio::this_coro::throw_if_cancelled(false);
        helpers_.spawn([this] { return follow_dir(); }, "schedules");
        co_await drive();
        helpers_.emit(asio::cancellation_type::terminal);
        co_await helpers_.async_wait(asio::use_awaitable);
        if (stats_ != nullptr) {
            stats_->schedules = 0;
            stats_->paused = 0;
        }
    }

private:
    struct entry {
        sc::schedule s;
        std::int32_t version = 0;
        std::optional<std::int64_t> wake;
        /// Firing ids whose create found a node already (§12.4): counted fired, not created.
        std::set<std::string> exist;
    };

    void poke() { wake_.cancel(); }

    /// The firings due at `dues` were just written: their lateness, into the stats.
    void count_lateness(const std::vector<std::int64_t>& dues) {
        const auto written = protocol::now_ms();
        for (const auto due : dues) {
            const auto late = std::max<std::int64_t>(0, written - due);
            stats_->lateness_ms_sum += static_cast<std::uint64_t>(late);
            stats_->last_lateness_ms = late;
            if (late > late_after_ms) {
                ++stats_->late;
            }
        }
    }

    /// The gauges of the view (a pass over the schedules: few, and only after reads).
    void count_view() {
        if (stats_ == nullptr) {
            return;
        }
        stats_->schedules = entries_.size();
        stats_->paused = static_cast<std::size_t>(std::count_if(
            entries_.begin(), entries_.end(), [](const auto& e) { return e.second.s.paused; }
        ));
    }

    void set_wake(const std::string& name, std::optional<std::int64_t> at) {
        auto it = entries_.find(name);
        if (it == entries_.end()) {
            return;
        }
        if (it->second.wake) {
            queue_.erase({*it->second.wake, name});
        }
        it->second.wake = at;
        if (at) {
            queue_.insert({*at, name});
        }
    }

    void forget(const std::string& name) {
        set_wake(name, std::nullopt);
        entries_.erase(name);
    }

    /// Takes the document read for `name` (data, version) into the engine's view.
    void adopt(const std::string& name, std::string_view data, std::int32_t version) {
        auto s = sc::decode(name, data, zones_);
        if (!s) {
            if (stats_ != nullptr) {
                ++stats_->garbage;
            }
            spdlog::error(
                "schedule {}: its document is garbage ({}): not fired", name, s.error().message
            );
            forget(name);
            return;
        }
        if (stats_ != nullptr) {
            ++stats_->adopted;
        }
        auto& e = entries_[name];
        e.s = std::move(*s);
        e.version = version;
        e.exist.clear();
        // Due now or in the past: decided at once (plan() applies the misfire policy).
        set_wake(name, e.s.paused ? std::nullopt : sc::next_due(e.s, e.s.last_due_ms));
    }

    /// Follows /schedules' change notes (§12.3): one schedule read again when the note's
    /// version follows the one seen, everything listed again otherwise.
    asio::awaitable<void> follow_dir() {
        co_await asio::this_coro::throw_if_cancelled(false);
        std::optional<std::int32_t> seen;
        for (;;) {
            const bool stop = co_await zkco::cancelled();
            if (stop) {
                co_return;
            }
            auto n = co_await zk_.watch_get(sc::schedules_dir());
            if (!n) {
                if (n.error() == zkco::errc::no_node) {
                    if (seen || !entries_.empty()) {
                        seen.reset();
                        relist_ = true;
                        poke();
                    }
                    const bool created = co_await zkco::wait_created(zk_, sc::schedules_dir());
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
            const auto v = n->value.stat.version;
            auto note = sc::read_change_note(n->value.data);
            if (seen && v == *seen + 1 && note) {
                reload_.insert(*note);
            } else if (!seen || v != *seen) {
                relist_ = true;
            }
            seen = v;
            poke();
            auto fired = co_await n->watch.changed();
            if (!fired) {
                co_return;
            }
        }
    }

    /// Lists /schedules and reads every schedule; false: the session ended.
    asio::awaitable<bool> relist() {
        for (;;) {
            auto kids = co_await zk_.get_children(sc::schedules_dir());
            if (!kids) {
                if (kids.error() == zkco::errc::no_node) {
                    queue_.clear();
                    entries_.clear();
                    co_return true;
                }
                const bool retry = co_await zkco::reconnected_after(zk_, kids.error());
                if (!retry) {
                    co_return false;
                }
                continue;
            }
            std::vector<std::string> names;
            std::vector<std::string> paths;
            for (const auto& name : kids->names) {
                if (!sc::is_valid_name(name)) {
                    spdlog::warn("schedules: /schedules/{} is no schedule name: left alone", name);
                    continue;
                }
                names.push_back(name);
                paths.push_back(sc::schedule_node(name));
            }
            auto docs = co_await zkco::get_all(zk_, paths);
            std::set<std::string> present;
            bool lost = false;
            for (std::size_t i = 0; i < names.size(); ++i) {
                if (docs[i]) {
                    present.insert(names[i]);
                    adopt(names[i], docs[i]->data, docs[i]->stat.version);
                } else if (docs[i].error() != zkco::errc::no_node) {
                    lost = true;
                    present.insert(names[i]);
                    reload_.insert(names[i]);
                }
            }
            std::vector<std::string> gone;
            for (const auto& [name, e] : entries_) {
                if (!present.contains(name)) {
                    gone.push_back(name);
                }
            }
            for (const auto& name : gone) {
                forget(name);
            }
            std::size_t paused = 0;
            for (const auto& [name, e] : entries_) {
                paused += e.s.paused ? 1 : 0;
            }
            spdlog::info(
                "schedules: {} followed ({} paused){}", entries_.size(), paused,
                lost ? ", some to read again" : ""
            );
            if (lost) {
                const bool retry = co_await zkco::wait_connected(zk_);
                if (!retry) {
                    co_return false;
                }
            }
            co_return true;
        }
    }

    /// Reads one schedule again; false: the session ended.
    asio::awaitable<bool> load(const std::string& name) {
        for (;;) {
            auto d = co_await zk_.get(sc::schedule_node(name));
            if (d) {
                adopt(name, d->data, d->stat.version);
                co_return true;
            }
            if (d.error() == zkco::errc::no_node) {
                if (entries_.contains(name)) {
                    spdlog::info("schedule {}: removed", name);
                }
                forget(name);
                co_return true;
            }
            const bool retry = co_await zkco::reconnected_after(zk_, d.error());
            if (!retry) {
                co_return false;
            }
        }
    }

    asio::awaitable<void> drive() {
        for (;;) {
            const bool stop = co_await zkco::cancelled();
            if (stop) {
                co_return;
            }
            if (!deposed_) {
                if (relist_) {
                    relist_ = false;
                    reload_.clear();
                    const bool ok = co_await relist();
                    if (!ok) {
                        co_return;
                    }
                }
                while (!reload_.empty()) {
                    auto name = *reload_.begin();
                    reload_.erase(reload_.begin());
                    const bool ok = co_await load(name);
                    if (!ok) {
                        co_return;
                    }
                }
                count_view();
                const auto now = protocol::now_ms();
                std::vector<std::string> due;
                const bool batch_ready = now >= last_fire_ms_ + opts_.batch_window.count();
                while (batch_ready && !queue_.empty() && queue_.begin()->first <= now) {
                    auto name = queue_.begin()->second;
                    set_wake(name, std::nullopt);
                    due.push_back(std::move(name));
                }
                if (!due.empty()) {
                    if (failures_ > 0) {
                        // The last write failed: a pause that grows while writes keep failing
                        // (100 ms to 5 s), not a busy loop.
                        asio::steady_timer t(
                            wake_.get_executor(), std::chrono::milliseconds(std::min(
                                                      100 << std::min(failures_ - 1, 6), 5000
                                                  ))
                        );
                        auto [ec] = co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
                        if (ec) {
                            co_return;
                        }
                    }
                    last_fire_ms_ = now;
                    const bool ok = co_await fire(due);
                    if (!ok) {
                        co_return;
                    }
                    continue;
                }
                if (relist_ || !reload_.empty()) {
                    continue;  // a change note came while this loop was busy
                }
            }
            // A cancellation that came during a read (retried, so unseen) ends the loop here:
            // the wait below would not see it.
            const bool cancelled_meanwhile = co_await zkco::cancelled();
            if (cancelled_meanwhile) {
                co_return;
            }
            if (deposed_ || queue_.empty()) {
                wake_.expires_at(asio::steady_timer::time_point::max());
            } else {
                const auto at =
                    std::max(queue_.begin()->first, last_fire_ms_ + opts_.batch_window.count());
                const auto in = std::max<std::int64_t>(0, at - protocol::now_ms());
                wake_.expires_after(std::chrono::milliseconds(in));
            }
            co_await wake_.async_wait(asio::as_tuple(asio::use_awaitable));
        }
    }

    /// For the schedules in `due` with --no-overlap: whether their previous firing's task
    /// has no result yet (busy), by one batch of exists reads.
    asio::awaitable<std::set<std::string>> busy_ones(
        const std::vector<std::string>& due, std::int64_t now
    ) {
        std::vector<std::string> names;
        std::vector<std::string> paths;
        for (const auto& name : due) {
            auto it = entries_.find(name);
            if (it == entries_.end()) {
                continue;
            }
            const auto& s = it->second.s;
            // A previous firing older than the result retention may have had its result
            // collected (T8): it holds nothing back.
            if (!s.no_overlap || s.last_fired_ms == 0 ||
                now - s.last_fired_ms > opts_.retention.count()) {
                continue;
            }
            names.push_back(name);
            paths.push_back(
                protocol::layout::client_results(s.client) + "/" +
                sc::firing_task_id(s.client, s.priority, s.last_fired_ms)
            );
        }
        std::set<std::string> busy;
        if (paths.empty()) {
            co_return busy;
        }
        auto found = co_await zkco::exists_all(zk_, std::move(paths));
        for (std::size_t i = 0; i < names.size(); ++i) {
            if (found[i] && !found[i]->has_value()) {
                busy.insert(names[i]);
            }
        }
        co_return busy;
    }

    struct pending_write {
        sc::firing_write w;
        sc::firing_plan p;
        sc::schedule next;
    };

    /// Decides and writes the firings of `due` (S4); false: the session ended.
    asio::awaitable<bool> fire(const std::vector<std::string>& due) {
        const auto now = protocol::now_ms();
        const auto busy = co_await busy_ones(due, now);
        std::vector<pending_write> writes;
        for (const auto& name : due) {
            auto it = entries_.find(name);
            if (it == entries_.end()) {
                continue;
            }
            auto& e = it->second;
            auto p = sc::plan(
                e.s, now,
                busy.contains(name) ? sc::previous_firing::busy : sc::previous_firing::idle
            );
            if (!p.changes()) {
                set_wake(name, p.wake_ms);
                continue;
            }
            pending_write pw{{name, e.version, {}, {}}, p, sc::applied(e.s, p)};
            pw.w.document = sc::encode(pw.next);
            auto task = sc::firing_task(e.s, now);
            if (!task) {
                // decode() checked the same: only a bug gets here.
                spdlog::error("schedule {}: {}: not fired", name, task.error().message);
                forget(name);
                continue;
            }
            for (auto d : p.fire) {
                auto tid = sc::firing_task_id(e.s.client, e.s.priority, d);
                if (!e.exist.contains(tid)) {
                    pw.w.creates.emplace_back(std::move(tid), *task);
                }
            }
            writes.push_back(std::move(pw));
        }
        // Batches within a transaction's budget, each one S4.
        std::size_t at = 0;
        while (at < writes.size()) {
            std::size_t ops = 0;
            std::size_t bytes = 0;
            std::size_t end = at;
            while (end < writes.size()) {
                const auto& w = writes[end].w;
                std::size_t b = w.document.size() + w.name.size() + 64;
                for (const auto& [tid, data] : w.creates) {
                    b += 2 * data.size() + tid.size() + 64;  // the node and its change log entry
                }
                const auto n = 1 + w.creates.size();
                if (end > at && (ops + n > txn_ops_budget || bytes + b > txn_bytes_budget)) {
                    break;
                }
                ops += n;
                bytes += b;
                ++end;
            }
            const bool ok = co_await write(writes, at, end);
            if (!ok) {
                co_return false;
            }
            if (deposed_) {
                co_return true;
            }
            at = end;
        }
        co_return true;
    }

    /// One S4 for writes[at, end); false: the session ended.
    asio::awaitable<bool> write(
        std::vector<pending_write>& writes, std::size_t at, std::size_t end
    ) {
        std::vector<sc::firing_write> batch;
        for (auto i = at; i < end; ++i) {
            batch.push_back(writes[i].w);
        }
        auto txn = sc::fire_ops(l_, epoch_, batch);
        auto r = co_await zk_.multi(to_zkco(txn.ops));
        if (r) {
            failures_ = 0;
            if (stats_ != nullptr) {
                ++stats_->writes;
            }
            for (auto i = at; i < end; ++i) {
                auto& pw = writes[i];
                auto it = entries_.find(pw.w.name);
                if (it == entries_.end()) {
                    continue;
                }
                auto& e = it->second;
                const auto before = e.s.fired;
                e.s = pw.next;
                ++e.version;
                e.exist.clear();
                if (stats_ != nullptr) {
                    stats_->fired += pw.p.fire.size();
                    stats_->skipped += pw.p.skipped;
                    stats_->missed += pw.p.missed;
                    count_lateness(pw.p.fire);
                }
                if (pw.p.missed > 0 || pw.p.skipped > 0) {
                    spdlog::info(
                        "schedule {}: {} fired, {} missed (misfire {}), {} skipped (overlap)",
                        pw.w.name, pw.p.fire.size(), pw.p.missed, sc::to_string(e.s.misfire),
                        pw.p.skipped
                    );
                } else {
                    spdlog::debug("schedule {}: fired {}", pw.w.name, pw.p.fire.size());
                }
                set_wake(pw.w.name, pw.p.wake_ms);
                if (opts_.cleanup_every > 0 &&
                    before / opts_.cleanup_every != e.s.fired / opts_.cleanup_every) {
                    helpers_.spawn(
                        [this, client = e.s.client] { return cleanup(client); }, "cleanup"
                    );
                }
            }
            co_return true;
        }
        ++failures_;
        const auto f = r.failed_op();
        if (f == std::optional<std::size_t>{0}) {
            spdlog::info("schedules: deposed (epoch {} is past): firing no more", epoch_);
            deposed_ = true;
            co_return true;
        }
        if (!f || *f >= txn.owner.size() || txn.owner[*f] < 0) {
            // The answer was lost (or a change log failed): read them again; what the
            // documents say decides whether it committed.
            spdlog::warn(
                "schedules: a firing transaction failed ({}): reading again", r.ec.message()
            );
            const bool retry = co_await zkco::reconnected_after(zk_, r.ec);
            if (!retry && zkco::is_terminal(zk_.state())) {
                co_return false;
            }
            for (auto i = at; i < end; ++i) {
                reload_.insert(writes[i].w.name);
            }
            co_return true;
        }
        const auto& culprit = batch[static_cast<std::size_t>(txn.owner[*f])].name;
        const auto code = *f < r.results.size() ? r.results[*f].ec : r.ec;
        if (txn.ops[*f].what == protocol::txn_op::kind::create && code == zkco::errc::node_exists) {
            // The firing's task is there already: it counts as fired, and is not created again.
            spdlog::warn(
                "schedule {}: task {} exists already: counted as fired", culprit,
                last_segment(txn.ops[*f].path)
            );
            if (auto it = entries_.find(culprit); it != entries_.end()) {
                it->second.exist.insert(last_segment(txn.ops[*f].path));
            }
        } else {
            // Changed (paused, resumed) or removed since it was read.
            spdlog::info(
                "schedule {}: changed meanwhile ({}): reading it again", culprit, code.message()
            );
            reload_.insert(culprit);
        }
        // The rest of the batch: decided again at once.
        const auto now = protocol::now_ms();
        for (auto i = at; i < end; ++i) {
            if (writes[i].w.name != culprit || !reload_.contains(culprit)) {
                set_wake(writes[i].w.name, now);
            }
        }
        co_return true;
    }

    /// Deletes the results of a schedule's firings but the latest keep_results (fenced by the
    /// epoch), so that its results directory stays small.
    asio::awaitable<void> cleanup(std::string client) {
        co_await asio::this_coro::throw_if_cancelled(false);
        const auto dir = protocol::layout::client_results(client);
        auto kids = co_await zk_.get_children(dir);
        if (!kids) {
            co_return;
        }
        std::vector<std::pair<std::int64_t, std::string>> results;
        for (const auto& name : kids->names) {
            if (auto due = sc::firing_due(client, name)) {
                results.emplace_back(*due, name);
            }
        }
        if (results.size() <= opts_.keep_results) {
            co_return;
        }
        std::sort(results.begin(), results.end());
        results.resize(results.size() - opts_.keep_results);
        const auto fence =
            protocol::txn_op::check(protocol::layout::epoch(), static_cast<std::int32_t>(epoch_));
        std::size_t deleted = 0;
        for (std::size_t at = 0; at < results.size(); at += delete_batch) {
            const auto end = std::min(results.size(), at + delete_batch);
            std::vector<protocol::txn_op> ops;
            ops.push_back(fence);
            for (auto i = at; i < end; ++i) {
                ops.push_back(protocol::txn_op::remove(dir + "/" + results[i].second));
            }
            auto r = co_await zk_.multi(to_zkco(ops));
            if (r) {
                deleted += end - at;
                continue;
            }
            if (r.failed_op() == std::optional<std::size_t>{0} || !r.failed_op()) {
                co_return;  // deposed, or the connection is gone: a later cleanup does it
            }
            // One was deleted meanwhile (a client, T8): each on its own.
            for (auto i = at; i < end; ++i) {
                std::vector<protocol::txn_op> single;
                single.push_back(fence);
                single.push_back(ops[i - at + 1]);
                auto one = co_await zk_.multi(to_zkco(std::move(single)));
                if (one) {
                    ++deleted;
                } else if (one.failed_op() == std::optional<std::size_t>{0}) {
                    co_return;
                }
            }
        }
        spdlog::debug("schedules: deleted {} old results of client {}", deleted, client);
    }

    zkco::client& zk_;
    protocol::layout l_;
    std::int64_t epoch_;
    schedule_engine_options opts_;
    schedule_engine_stats* stats_;
    asio::steady_timer wake_;
    reactor::task_group helpers_;
    sc::zone_loader zones_ = system_zones();
    std::map<std::string, entry, std::less<>> entries_;
    std::set<std::pair<std::int64_t, std::string>> queue_;  ///< (wake, name): the timer's
    std::set<std::string> reload_;
    bool relist_ = false;
    bool deposed_ = false;
    int failures_ = 0;               ///< S4 transactions failed in a row
    std::int64_t last_fire_ms_ = 0;  ///< when the last batch was decided
};

}  // namespace

asio::awaitable<void> run_schedules(
    zkco::client& zk,
    protocol::layout l,
    std::int64_t epoch,
    schedule_engine_options opts,
    schedule_engine_stats* stats
) {
    auto ex = co_await asio::this_coro::executor;
    engine e(zk, l, epoch, opts, stats, ex);
    co_await e.run();
}

}  // namespace zkd::roles
