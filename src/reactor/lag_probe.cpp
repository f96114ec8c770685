// SPDX-License-Identifier: MIT
#include "reactor/lag_probe.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <vector>

namespace zkd::reactor {

namespace asio = boost::asio;
using boost::system::error_code;
using std::chrono::nanoseconds;

struct lag_probe::impl : std::enable_shared_from_this<impl> {
    impl(executor_type e, std::chrono::steady_clock::duration i, std::size_t w)
        : ex(std::move(e)), timer(ex), interval(i), window(std::max<std::size_t>(w, 1)) {
        ring.reserve(window);
        scratch.reserve(window);
    }

    // On the executor.
    void tick() {
        timer.expires_after(interval);
        timer.async_wait([self = shared_from_this()](error_code ec) {
            if (!ec)
                self->record(std::chrono::steady_clock::now() - self->timer.expiry());
            // A stop() followed quickly by start() leaves the cancelled wait to restart.
            if (self->stopping.load(std::memory_order_acquire)) {
                self->running = false;
                return;
            }
            self->tick();
        });
    }

    void record(nanoseconds lag) {
        if (ring.size() < window) {
            ring.push_back(lag.count());
        } else {
            ring[next] = lag.count();
        }
        next = (next + 1) % window;

        // A few hundred samples: a copy and nth_element per sample is cheap next to the
        // interval, and keeps the readers lock-free.
        scratch.assign(ring.begin(), ring.end());
        const auto p99_at =
            scratch.begin() + static_cast<std::ptrdiff_t>((scratch.size() * 99 + 99) / 100 - 1);
        std::nth_element(scratch.begin(), p99_at, scratch.end());
        const auto p99 = *p99_at;
        const auto max = *std::max_element(p99_at, scratch.end());

        last_ns.store(lag.count(), std::memory_order_relaxed);
        max_ns.store(max, std::memory_order_relaxed);
        p99_ns.store(p99, std::memory_order_relaxed);
        sum_ns.fetch_add(lag.count(), std::memory_order_relaxed);
        samples.fetch_add(1, std::memory_order_release);
    }

    executor_type ex;
    asio::steady_timer timer;
    std::chrono::steady_clock::duration interval;
    std::size_t window;
    std::vector<nanoseconds::rep> ring;  // on the executor only
    std::vector<nanoseconds::rep> scratch;
    std::size_t next = 0;
    bool running = false;  // on the executor only
    std::atomic<bool> stopping{false};
    std::atomic<nanoseconds::rep> last_ns{0};
    std::atomic<nanoseconds::rep> max_ns{0};
    std::atomic<nanoseconds::rep> p99_ns{0};
    std::atomic<nanoseconds::rep> sum_ns{0};
    std::atomic<std::uint64_t> samples{0};
};

lag_probe::lag_probe(
    executor_type ex, std::chrono::steady_clock::duration interval, std::size_t window
)
    : impl_(std::make_shared<impl>(std::move(ex), interval, window)) {}

lag_probe::~lag_probe() {
    stop();
}

void lag_probe::start() {
    impl_->stopping.store(false, std::memory_order_release);
    asio::post(impl_->ex, [self = impl_] {
        if (self->running || self->stopping.load(std::memory_order_acquire))
            return;
        self->running = true;
        self->tick();
    });
}

void lag_probe::stop() {
    if (impl_->stopping.exchange(true, std::memory_order_acq_rel))
        return;
    asio::post(impl_->ex, [self = impl_] {
        if (self->stopping.load(std::memory_order_acquire))
            self->timer.cancel();
    });
}

lag_stats lag_probe::stats() const noexcept {
    lag_stats s;
    s.samples = impl_->samples.load(std::memory_order_acquire);
    s.last = nanoseconds(impl_->last_ns.load(std::memory_order_relaxed));
    s.max = nanoseconds(impl_->max_ns.load(std::memory_order_relaxed));
    s.p99 = nanoseconds(impl_->p99_ns.load(std::memory_order_relaxed));
    s.sum = nanoseconds(impl_->sum_ns.load(std::memory_order_relaxed));
    return s;
}

}  // namespace zkd::reactor
