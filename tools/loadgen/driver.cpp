// SPDX-License-Identifier: MIT
#include "loadgen/driver.hpp"

#include "protocol/ids.hpp"
#include "protocol/task.hpp"
#include "zkco/deadline.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <unistd.h>

namespace asio = boost::asio;

namespace zkd::loadgen {

namespace {

std::uint64_t micros(std::chrono::steady_clock::duration d) {
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(d).count();
    return us < 0 ? 0 : static_cast<std::uint64_t>(us);
}

std::string grouped(std::uint64_t n) {
    std::string digits = std::to_string(n);
    std::string out;
    for (std::size_t i = 0; i < digits.size(); ++i) {
        if (i > 0 && (digits.size() - i) % 3 == 0) {
            out += ',';
        }
        out += digits[i];
    }
    return out;
}

/// Waits for a task_group's children, swallowing what they threw (already logged by it).
asio::awaitable<void> join_quietly(reactor::task_group& g) {
    try {
        co_await g.join();
    } catch (const std::exception&) {  // NOLINT(bugprone-empty-catch): the group logged it
    }
}

}  // namespace

load_runner::load_runner(zkco::client& zk, protocol::layout l, settings s)
    : zk_(zk),
      layout_(l),
      s_(std::move(s)),
      client_(zk, l),
      args_(task_args(s_.kind, s_.payload)),
      tasks_(zk.get_executor()),
      aux_(zk.get_executor()),
      wake_(zk.get_executor(), asio::steady_timer::time_point::max()) {
    client_.place_directly(s_.direct);
    static_assert(default_auto_bundle == roles::task_client::default_auto_bundle);
    client_.auto_bundle(static_cast<std::size_t>(s_.auto_bundle));
}

load_runner::~load_runner() = default;

void load_runner::finish() {
    finish_ = true;
    wake();
}

void load_runner::abort() {
    finish_ = true;
    abort_ = true;
    wake();
}

void load_runner::wake() {
    wake_.cancel();
}

bool load_runner::stopping() const noexcept {
    return finish_ || abort_ || zkco::is_terminal(zk_.state());
}

asio::awaitable<void> load_runner::sleep(clock_type::time_point until) {
    wake_.expires_at(until);
    co_await wake_.async_wait(asio::as_tuple(asio::use_awaitable));
}

asio::awaitable<load_report> load_runner::run() {
    start_ = clock_type::now();
    last_progress_ = start_;
    last_result_ = start_;
    last_submit_ = start_;
    aux_.spawn(watchdog(), "watchdog");
    const bool tty = ::isatty(STDERR_FILENO) == 1;
    if (s_.progress.value_or(tty)) {
        aux_.spawn(show_progress(tty && s_.progress.value_or(true)), "progress");
    }

    if (s_.rate) {
        co_await open_loop();
    } else {
        co_await closed_loop();
    }
    while (in_flight_ > 0 && !abort_) {
        co_await sleep(asio::steady_timer::time_point::max());
    }
    if (abort_) {
        tasks_.emit(asio::cancellation_type::terminal);
    }
    co_await join_quietly(tasks_);
    aux_.emit(asio::cancellation_type::terminal);
    co_await join_quietly(aux_);

    rep_.errors.unfinished += in_flight_;
    rep_.session_lost = rep_.session_lost || zkco::is_terminal(zk_.state());
    const auto end = s_.submit_only ? last_submit_ : last_result_;
    rep_.elapsed_s = std::chrono::duration<double>(end - start_).count();
    rep_.submit_s = std::chrono::duration<double>(last_submit_ - start_).count();
    if (!rep_.session_lost) {
        co_await flush_consumed();
    }
    rep_.results_listings = client_.results_listings();
    rep_.direct = client_.direct_placed();
    rep_.auto_bundled = client_.auto_bundled();
    co_return rep_;
}

asio::awaitable<void> load_runner::closed_loop() {
    const auto deadline =
        s_.duration ? start_ + *s_.duration : asio::steady_timer::time_point::max();
    const std::uint64_t limit = s_.tasks.value_or(std::numeric_limits<std::uint64_t>::max());
    while (!stopping() && issued_ < limit && clock_type::now() < deadline) {
        const std::uint64_t n = std::min({s_.batch, limit - issued_, s_.concurrency});
        if (in_flight_ + n > s_.concurrency) {
            co_await sleep(deadline);
            continue;
        }
        issue(std::vector<clock_type::time_point>(n, clock_type::now()));
    }
}

asio::awaitable<void> load_runner::open_loop() {
    const double rate = *s_.rate;
    std::uint64_t limit = s_.tasks.value_or(std::numeric_limits<std::uint64_t>::max());
    if (s_.duration) {
        // Tasks k with k / rate < duration.
        const double d = static_cast<double>(s_.duration->count()) / 1000.0;
        limit = std::min(limit, static_cast<std::uint64_t>(std::ceil(d * rate)));
    }
    const auto due_of = [&](std::uint64_t k) {
        return start_ + std::chrono::duration_cast<clock_type::duration>(
                            std::chrono::duration<double>(static_cast<double>(k) / rate)
                        );
    };
    while (!stopping() && issued_ < limit) {
        const std::uint64_t n = std::min(s_.batch, limit - issued_);
        const auto last_due = due_of(issued_ + n - 1);
        const auto now = clock_type::now();
        if (now < last_due) {
            co_await sleep(last_due);
            continue;
        }
        if (in_flight_ + n > s_.max_in_flight) {
            co_await sleep(asio::steady_timer::time_point::max());
            continue;
        }
        const double lag_ms = std::chrono::duration<double, std::milli>(now - last_due).count();
        rep_.schedule_lag_max_ms = std::max(rep_.schedule_lag_max_ms, lag_ms);
        std::vector<clock_type::time_point> due;
        due.reserve(n);
        for (std::uint64_t k = issued_; k < issued_ + n; ++k) {
            due.push_back(due_of(k));
        }
        issue(std::move(due));
    }
}

void load_runner::issue(std::vector<clock_type::time_point> due) {
    const auto n = static_cast<std::uint64_t>(due.size());
    if (in_flight_ == 0) {
        last_progress_ = clock_type::now();  // the stall clock starts with the first in flight
    }
    issued_ += n;
    in_flight_ += n;
    tasks_.spawn(submit_batch(std::move(due)), "submit");
}

asio::awaitable<void> load_runner::submit_batch(std::vector<clock_type::time_point> due) {
    const auto n = static_cast<std::uint64_t>(due.size());
    std::vector<protocol::task_spec> reqs;
    reqs.reserve(due.size());
    for (std::size_t i = 0; i < due.size(); ++i) {
        protocol::task_spec r;
        r.type = s_.kind.type;
        r.args = args_;
        r.priority = s_.priority;
        r.timeout = s_.task_timeout;
        r.max_attempts = s_.max_attempts;
        reqs.push_back(std::move(r));
    }
    roles::submit_options how;
    how.bundle = static_cast<std::size_t>(s_.bundle);
    // A full queue (zkd run --max-pending) is waited out, backing off up to a second (the
    // client reads the pending count about once a second), rather than failing the run;
    // should it never drain, the stall timeout ends the run.
    auto pause = std::chrono::milliseconds(20);
    auto t0 = clock_type::now();
    auto ids = co_await client_.submit(reqs, how);
    while (!ids && ids.error() == roles::client_errc::queue_full && !stopping()) {
        const auto& q = client_.last_queue_check();
        if (q.adding > q.bound) {
            break;  // this one submit is over the bound by itself: it never fits
        }
        ++rep_.queue_full;
        asio::steady_timer t(co_await asio::this_coro::executor);
        t.expires_after(pause);
        co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
        pause = std::min<std::chrono::milliseconds>(pause * 2, std::chrono::seconds(1));
        if (abort_) {
            break;
        }
        t0 = clock_type::now();
        ids = co_await client_.submit(reqs, how);
    }
    if (!ids && ids.error() == roles::client_errc::queue_full && stopping()) {
        issued_ -= n;  // told to stop while the queue was full: these were never submitted
        in_flight_ -= n;
        wake();
        co_return;
    }
    const auto t1 = clock_type::now();
    rep_.submit_us.record(micros(t1 - t0));
    last_submit_ = std::max(last_submit_, t1);
    if (!ids) {
        rep_.errors.submit += n;
        in_flight_ -= n;
        if (ids.error() == zkco::condition::session_lost) {
            rep_.session_lost = true;
        }
        wake();
        co_return;
    }
    rep_.submitted += n;
    if (abort_) {
        co_return;  // the group is being joined: start no waiters; these stay unfinished
    }
    if (s_.submit_only) {
        in_flight_ -= n;
        last_progress_ = t1;
        wake();
        co_return;
    }
    for (std::size_t i = 0; i < ids->size(); ++i) {
        tasks_.spawn(await_one((*ids)[i], due[i]), "wait");
    }
}

void load_runner::record_stages(const protocol::task_result& r, clock_type::duration latency) {
    if (r.started_ms <= 0 || r.finished_ms < r.started_ms) {
        return;  // not run (cancelled, lost, rejected) or no times written
    }
    const auto seen_ms = protocol::now_ms();
    const auto due_ms =
        seen_ms - std::chrono::duration_cast<std::chrono::milliseconds>(latency).count();
    // Clamped at 0: the clocks' whole milliseconds may put a start before the submit; and at
    // a day, for times a result made up (microseconds must fit the histogram's 64 bits).
    const auto stage = [](std::int64_t from, std::int64_t to) {
        constexpr std::int64_t day_ms = 24LL * 3600 * 1000;
        return static_cast<std::uint64_t>(std::clamp<std::int64_t>(to - from, 0, day_ms)) * 1000;
    };
    rep_.to_start_us.record(stage(due_ms, r.started_ms));
    rep_.run_us.record(stage(r.started_ms, r.finished_ms));
    rep_.to_result_us.record(stage(r.finished_ms, seen_ms));
}

asio::awaitable<void> load_runner::await_one(std::string id, clock_type::time_point due) {
    auto r = co_await client_.wait(id);
    const auto now = clock_type::now();
    --in_flight_;
    last_progress_ = now;
    wake();
    if (!r) {
        if (abort_) {
            ++rep_.errors.unfinished;
        } else if (r.error() == roles::client_errc::garbage_result) {
            ++rep_.errors.garbage_result;
            last_consumed_ = id;
        } else if (r.error() == zkco::condition::session_lost) {
            ++rep_.errors.session;
            rep_.session_lost = true;
        } else {
            ++rep_.errors.wait;
        }
        co_return;
    }
    last_result_ = std::max(last_result_, now);
    last_consumed_ = id;
    ++rep_.results;
    rep_.latency_us.record(micros(now - due));
    record_stages(*r, now - due);
    if (!s_.trace_file.empty()) {
        task_trace row;
        row.due_ms = static_cast<double>(micros(due - start_)) / 1000.0;
        row.latency_ms = static_cast<double>(micros(now - due)) / 1000.0;
        row.started_ms = r->started_ms;
        row.finished_ms = r->finished_ms;
        row.worker = r->worker;
        rep_.trace.push_back(std::move(row));
    }
    switch (r->state) {
    case protocol::task_state::succeeded:
        if (s_.kind.type == "echo" && r->value != args_) {
            ++rep_.errors.wrong_result;
        } else {
            ++rep_.succeeded;
        }
        break;
    case protocol::task_state::timed_out:
        ++rep_.errors.timed_out;
        break;
    case protocol::task_state::cancelled:
        ++rep_.errors.cancelled;
        break;
    case protocol::task_state::lost:
        ++rep_.errors.lost;
        break;
    default:
        ++rep_.errors.failed;
        break;
    }
}

asio::awaitable<void> load_runner::watchdog() {
    const auto tick = std::min<clock_type::duration>(
        std::chrono::seconds(1),
        std::chrono::duration_cast<clock_type::duration>(s_.stall_timeout) / 4
    );
    asio::steady_timer t(co_await asio::this_coro::executor);
    for (;;) {
        t.expires_after(tick);
        co_await t.async_wait(asio::use_awaitable);
        const auto now = clock_type::now();
        if (in_flight_ > 0 && now - last_progress_ > s_.stall_timeout && !abort_) {
            rep_.stalled = true;
            abort();
        }
        // Without its session nothing in flight can finish (a submit waits for the session
        // to know its outcome, a wait needs it to read the result): stop at once rather
        // than wait for results that cannot come. zkco ends a session that stays
        // disconnected for longer than its timeout, so this bounds a run whose ZooKeeper
        // is gone to about the session timeout.
        if (zkco::is_terminal(zk_.state()) && !abort_) {
            rep_.session_lost = true;
            abort();
        }
    }
}

asio::awaitable<void> load_runner::show_progress(bool tty) {
    asio::steady_timer t(co_await asio::this_coro::executor);
    std::uint64_t before = 0;
    auto at = clock_type::now();
    const std::string total = s_.tasks ? "/" + grouped(*s_.tasks) : "";
    const auto print = [&](const char* end) {
        const auto now = clock_type::now();
        const std::uint64_t done = s_.submit_only ? rep_.submitted : rep_.results;
        const double secs = std::chrono::duration<double>(now - at).count();
        const double rate = secs > 0 ? static_cast<double>(done - before) / secs : 0.0;
        before = done;
        at = now;
        std::fprintf(
            stderr, "%szkd-loadgen: %s%s %s  %s/s  in flight %s  errors %s%s",
            tty ? "\r\033[K" : "", grouped(done).c_str(), total.c_str(),
            s_.submit_only ? "submitted" : "done",
            grouped(static_cast<std::uint64_t>(std::llround(rate))).c_str(),
            grouped(in_flight_).c_str(), grouped(rep_.errors.total()).c_str(), end
        );
        std::fflush(stderr);
    };
    try {
        for (;;) {
            t.expires_after(std::chrono::seconds(1));
            co_await t.async_wait(asio::use_awaitable);
            print(tty ? "" : "\n");
        }
    } catch (const boost::system::system_error&) {
        if (tty) {
            print("\n");  // leave the last figures on screen
        }
        throw;
    }
}

asio::awaitable<void> load_runner::flush_consumed() {
    // task_client::wait queues the consuming delete in its batcher and returns; make sure
    // the last one (hence, FIFO, every earlier one) has been applied before the caller
    // closes the session, so the namespace is left clean.
    if (last_consumed_.empty()) {
        co_return;
    }
    // And the client's results directory goes, once every result was consumed.
    co_await client_.close();
    const auto path = layout_.result(last_consumed_);
    asio::steady_timer t(co_await asio::this_coro::executor);
    const auto until = clock_type::now() + std::chrono::seconds(10);
    while (clock_type::now() < until) {
        auto e = co_await zkco::with_timeout(zk_.exists(path), std::chrono::seconds(5));
        if (e && !e->has_value()) {
            co_return;
        }
        if (!e && e.error() == zkco::condition::session_lost) {
            co_return;
        }
        t.expires_after(std::chrono::milliseconds(5));
        co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
    }
}

}  // namespace zkd::loadgen
