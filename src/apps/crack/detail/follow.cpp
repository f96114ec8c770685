// SPDX-License-Identifier: MIT
#include "apps/crack/detail/follow.hpp"

#include "protocol/ids.hpp"
#include "zkco/deadline.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

namespace asio = boost::asio;

namespace zkd::crack::detail {

namespace {

/// A partition missing from one scan is looked for again this much later.
constexpr auto confirm_delay = std::chrono::seconds(1);
constexpr auto cancel_timeout = std::chrono::seconds(10);

}  // namespace

event_queue::event_queue(const asio::any_io_executor& ex) : wake_(ex) {}

void event_queue::push(follow_event ev) {
    events_.push_back(std::move(ev));
    wake_.cancel();
}

std::optional<follow_event> event_queue::try_pop() {
    if (events_.empty()) {
        return std::nullopt;
    }
    std::optional<follow_event> ev = std::move(events_.front());
    events_.pop_front();
    return ev;
}

asio::awaitable<std::optional<follow_event>> event_queue::pop(clock::time_point deadline) {
    auto ev = try_pop();
    if (ev) {
        co_return ev;
    }
    // A cancellation emitted while the caller was busy would not interrupt the wait below;
    // nothing can be pushed between this check and the wait (one executor).
    const bool stop = co_await cancelled();
    if (stop) {
        co_return std::nullopt;
    }
    wake_.expires_at(deadline);
    co_await wake_.async_wait(asio::as_tuple(asio::use_awaitable));
    co_return try_pop();  // nullopt: the deadline passed, or the caller was cancelled
}

follower::follower(
    zkco::client& zk,
    protocol::layout l,
    const crack_spec& spec,
    const crack_plan& plan,
    opened_job opened,
    std::function<void(const crack_progress&)> on_progress,
    clock::time_point start
)
    : zk_(zk),
      l_(l),
      spec_(spec),
      plan_(plan),
      path_(std::string(crack_jobs_dir) + "/" + plan.job_id),
      on_progress_(std::move(on_progress)),
      start_(start),
      held_(std::move(opened.held)),
      joined_(opened.joined),
      resubmitted_(opened.resubmitted),
      tc_(zk, l_),
      events_(zk.get_executor()),
      watchers_(zk.get_executor()),
      cancels_(zk.get_executor()) {}

asio::awaitable<zkco::result<crack_outcome>> follower::run() {
    zkco::result<void> followed;
    if (is_terminal(held_.job.state)) {
        if (held_.job.state == crack_state::found) {
            start_cancels();  // in case whoever found it could not
        }
        tried_at_start_ = held_.job.tried;
        report();
    } else {
        followed = co_await follow();
    }
    auto r = followed ? zkco::result<crack_outcome>(outcome())
                      : zkco::result<crack_outcome>(followed.error());
    // The cancels started on a find complete even when following ended in an error.
    co_await cancels_.async_wait(asio::as_tuple(asio::use_awaitable));
    co_return r;
}

asio::awaitable<zkco::result<void>> follower::follow() {
    follow_start_ = clock::now();
    tried_at_start_ = held_.job.tried;
    watchers_.spawn(watch_job(), "crack job " + plan_.job_id);
    sync_watchers();
    report();
    next_scan_ = joined_ ? follow_start_ : follow_start_ + spec_.reconcile_interval;
    auto r = co_await follow_running();
    if (r && held_.job.state == crack_state::found) {
        r = co_await reap_cancelled();
    }
    watchers_.emit(asio::cancellation_type::terminal);
    co_await watchers_.async_wait(asio::as_tuple(asio::use_awaitable));
    co_return r;
}

asio::awaitable<zkco::result<void>> follower::follow_running() {
    for (;;) {
        if (held_.job.state == crack_state::running && held_.job.done() == held_.job.total()) {
            std::vector<partition_report> none;  // all accounted for: it ends
            auto settled = co_await fold(std::move(none));
            if (!settled) {
                co_return settled;
            }
        }
        if (held_.job.state != crack_state::running) {
            co_return zkco::result<void>();
        }
        if (clock::now() >= next_scan_) {
            auto vanished = co_await reconcile();
            if (!vanished.empty()) {
                auto folded = co_await fold(std::move(vanished));
                if (!folded) {
                    co_return folded;
                }
            }
            continue;
        }
        auto ev = co_await events_.pop(next_scan_);
        if (ev) {
            auto handled = co_await handle(std::move(*ev));
            if (!handled) {
                co_return handled;
            }
            continue;
        }
        const bool stop = co_await cancelled();
        if (stop) {
            co_return zkco::error_code(asio::error::operation_aborted);
        }
    }
}

asio::awaitable<zkco::result<void>> follower::reap_cancelled() {
    start_cancels();
    const auto until = clock::now() + spec_.cleanup_grace;
    while (held_.job.done() != held_.job.total() && clock::now() < until) {
        auto ev = co_await events_.pop(until);
        if (ev) {
            auto handled = co_await handle(std::move(*ev));
            if (!handled) {
                co_return handled;
            }
            continue;
        }
        const bool stop = co_await cancelled();
        if (stop) {
            co_return zkco::error_code(asio::error::operation_aborted);
        }
    }
    co_return zkco::result<void>();
}

follower::drained follower::drain(follow_event ev) {
    drained out;
    std::optional<follow_event> next = std::move(ev);
    while (next) {
        auto* report = std::get_if<partition_report>(&*next);
        auto* read = std::get_if<job_read>(&*next);
        if (report != nullptr) {
            out.reports.push_back(std::move(*report));
        } else if (read != nullptr) {
            take(std::move(read->job), read->version);
        } else if (!out.failure) {
            out.failure = std::get<zkco::error_code>(*next);
        }
        next = events_.try_pop();
    }
    return out;
}

asio::awaitable<zkco::result<void>> follower::handle(follow_event ev) {
    auto events = drain(std::move(ev));
    if (!events.reports.empty()) {
        auto folded = co_await fold(std::move(events.reports));
        if (!folded) {
            co_return folded;
        }
    }
    if (events.failure) {
        co_return events.failure;
    }
    co_return zkco::result<void>();
}

asio::awaitable<zkco::result<void>> follower::fold(std::vector<partition_report> reports) {
    held_job doc = held_;
    for (;;) {
        const std::int64_t now = protocol::now_ms();
        bool changed = false;
        for (const auto& report : reports) {
            changed = apply(doc.job, report, now) || changed;
        }
        changed = settle(doc.job, now) || changed;
        if (!changed) {
            take(std::move(doc.job), doc.version);
            break;
        }
        auto written = co_await zk_.set(path_, encode(doc.job), doc.version);
        if (written) {
            take(std::move(doc.job), written->version);
            break;
        }
        if (written.error() == zkco::errc::no_node) {
            co_return zkco::error_code(crack_errc::job_vanished);
        }
        if (written.error() != zkco::errc::bad_version) {
            const bool retry = co_await retry_after(zk_, written.error());
            if (!retry) {
                co_return written.error();
            }
        }
        // Another participant wrote first (or our write applied unseen): start again from
        // the node as it is; what is accounted for there is not applied twice.
        auto fresh = co_await reread_job(zk_, path_);
        if (!fresh) {
            co_return fresh.error();
        }
        doc = std::move(*fresh);
    }
    for (const auto& report : reports) {
        if (report.data) {
            zk_.async_remove(l_.result(report.task), zkco::any_version, [](zkco::error_code) {});
        }
    }
    co_return zkco::result<void>();
}

// Listing in the order tasks move (pending, assigned, result), a task moving on during the
// scan is still seen; only a requeue (assigned back to pending) can hide it, so a partition
// counts as vanished only if two scans a second apart both miss it.
asio::awaitable<std::vector<partition_report>> follower::reconcile() {
    const auto now = clock::now();
    next_scan_ = now + spec_.reconcile_interval;
    std::map<std::string, std::size_t> open;
    for (std::size_t i = 0; i < held_.job.tasks.size(); ++i) {
        if (held_.job.partitions[i] == crack_partition::open) {
            open.emplace(held_.job.tasks[i], i);
        }
    }
    std::optional<std::set<std::string>> seen;
    if (!open.empty()) {
        seen = co_await scan_seen(open);
    }
    std::vector<partition_report> vanished;
    if (!seen) {
        suspects_.clear();
        co_return vanished;
    }
    std::set<std::string> missing;
    for (const auto& [tid, i] : open) {
        if (!seen->contains(tid)) {
            missing.insert(tid);
        }
    }
    if (suspects_.empty()) {
        suspects_ = std::move(missing);
        if (!suspects_.empty()) {
            next_scan_ = now + confirm_delay;
        }
        co_return vanished;
    }
    for (const auto& tid : missing) {
        if (suspects_.contains(tid)) {
            spdlog::warn("crack {}: partition {} (task {}) vanished", plan_.job_id, open[tid], tid);
            vanished.push_back(partition_report{open[tid], tid, std::nullopt});
        }
    }
    suspects_.clear();
    co_return vanished;
}

asio::awaitable<std::optional<std::set<std::string>>> follower::scan_seen(
    const std::map<std::string, std::size_t>& open
) {
    std::set<std::string> seen;
    auto note = [&](const std::vector<std::string>& names) {
        for (const auto& name : names) {
            if (open.contains(name)) {
                seen.insert(name);
            }
        }
    };
    for (const auto& shard : l_.pending_shard_paths()) {
        auto kids = co_await zk_.get_children(shard);
        if (!kids) {
            co_return std::nullopt;
        }
        note(kids->names);
    }
    auto workers = co_await zk_.get_children(protocol::layout::assign_dir());
    if (!workers) {
        co_return std::nullopt;
    }
    for (const auto& w : workers->names) {
        auto kids = co_await zk_.get_children(protocol::layout::assign_dir(w));
        if (!kids) {
            if (kids.error() == zkco::errc::no_node) {
                continue;
            }
            co_return std::nullopt;
        }
        note(kids->names);
    }
    for (const auto& [tid, i] : open) {
        if (seen.contains(tid)) {
            continue;
        }
        auto there = co_await zk_.exists(l_.result(tid));
        if (!there) {
            co_return std::nullopt;
        }
        if (*there) {
            seen.insert(tid);
        }
    }
    co_return seen;
}

// Waits (by watch) for the task's result and hands it to the loop. A result someone else
// consumed first is seen in the job node instead; this watcher then waits until the end of
// the follow.
asio::awaitable<void> follower::watch_result(std::size_t partition, std::string tid) {
    co_await asio::this_coro::throw_if_cancelled(false);
    const std::string path = l_.result(tid);
    for (;;) {
        auto w = co_await zk_.watch_exists(path);
        if (!w) {
            const bool retry = co_await retry_after(zk_, w.error());
            if (retry) {
                continue;
            }
            co_await fail_unless_cancelled(w.error());
            co_return;
        }
        if (w->value) {
            auto node = co_await zk_.get(path);
            if (node) {
                events_.push(partition_report{partition, tid, std::move(node->data)});
                co_return;
            }
            if (node.error() != zkco::errc::no_node) {
                const bool retry = co_await retry_after(zk_, node.error());
                if (!retry) {
                    co_return;
                }
            }
            continue;  // consumed meanwhile: look again (arms a new watch)
        }
        auto ev = co_await w->watch.changed();
        if (!ev) {
            co_await fail_unless_cancelled(ev.error());
            co_return;
        }
    }
}

// Hands the loop the job as the node says (other participants' folds, a find) on every change.
asio::awaitable<void> follower::watch_job() {
    co_await asio::this_coro::throw_if_cancelled(false);
    for (;;) {
        auto w = co_await zk_.watch_get(path_);
        if (!w) {
            if (w.error() == zkco::errc::no_node) {
                events_.push(zkco::error_code(crack_errc::job_vanished));
                co_return;
            }
            const bool retry = co_await retry_after(zk_, w.error());
            if (retry) {
                continue;
            }
            co_await fail_unless_cancelled(w.error());
            co_return;
        }
        auto doc = decode_crack_job(w->value.data);
        if (!doc) {
            events_.push(zkco::error_code(crack_errc::garbage_job));
            co_return;
        }
        events_.push(job_read{std::move(*doc), w->value.stat.version});
        auto ev = co_await w->watch.changed();
        if (!ev) {
            co_await fail_unless_cancelled(ev.error());
            co_return;
        }
    }
}

asio::awaitable<void> follower::fail_unless_cancelled(zkco::error_code ec) {
    const bool stopped = co_await cancelled();
    if (!stopped) {
        events_.push(ec);
    }
}

void follower::take(crack_job doc, std::int32_t version) {
    if (!held_.adopt(std::move(doc), version)) {
        return;
    }
    sync_watchers();
    report();
    if (suspects_.empty()) {
        next_scan_ = std::max(next_scan_, clock::now() + spec_.reconcile_interval);
    }
}

void follower::sync_watchers() {
    for (std::size_t i = 0; i < held_.job.tasks.size(); ++i) {
        const std::string& tid = held_.job.tasks[i];
        if (held_.job.partitions[i] == crack_partition::open && !watched_.contains(tid)) {
            watched_.insert(tid);
            watchers_.spawn(watch_result(i, tid), tid);
        }
    }
}

void follower::start_cancels() {
    for (std::size_t i = 0; i < held_.job.tasks.size(); ++i) {
        if (held_.job.partitions[i] == crack_partition::open) {
            cancels_.spawn(cancel_one(held_.job.tasks[i]), "cancel " + held_.job.tasks[i]);
        }
    }
}

asio::awaitable<void> follower::cancel_one(std::string tid) {
    co_await asio::this_coro::throw_if_cancelled(false);
    for (int tries = 0; tries < 5; ++tries) {
        auto op = tc_.cancel(tid);
        auto r = co_await zkco::with_timeout(std::move(op), cancel_timeout);
        if (r) {
            co_return;
        }
        const bool retry = co_await retry_after(zk_, r.error());
        if (!retry) {
            spdlog::debug("crack: cannot cancel {}: {}", tid, r.error().message());
            co_return;
        }
    }
}

void follower::report() {
    if (!on_progress_) {
        return;
    }
    const crack_job& j = held_.job;
    crack_progress p;
    p.job = plan_.job_id;
    p.state = j.state;
    p.total = j.total();
    p.done = j.done();
    p.size = j.size;
    p.tried = j.tried;
    const auto now = clock::now();
    const double secs = std::chrono::duration<double>(now - follow_start_).count();
    if (j.tried > tried_at_start_ && secs > 0) {
        p.rate = static_cast<double>(j.tried - tried_at_start_) / secs;
    }
    p.preimage = j.preimage;
    p.joined = joined_;
    p.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(now - start_);
    on_progress_(p);
}

crack_outcome follower::outcome() const {
    const crack_job& j = held_.job;
    crack_outcome o;
    o.job = plan_.job_id;
    o.state = j.state;
    o.preimage = j.preimage;
    o.joined = joined_;
    o.resubmitted = resubmitted_;
    o.total = j.total();
    o.done = j.done();
    o.size = j.size;
    o.tried = j.tried;
    o.failed = j.failed;
    o.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - start_);
    return o;
}

}  // namespace zkd::crack::detail
