// SPDX-License-Identifier: MIT
#include "reactor/lag_probe.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <cstddef>
#include <fcntl.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace zkd::reactor {

namespace asio = boost::asio;
using boost::system::error_code;
using std::chrono::nanoseconds;

std::optional<sched_counters> parse_schedstat(std::string_view text) noexcept {
    std::array<std::int64_t, 2> v{};
    const char* at = text.data();
    const char* const end = text.data() + text.size();
    for (auto& n : v) {
        while (at != end && *at == ' ') {
            ++at;
        }
        const auto [next, ec] = std::from_chars(at, end, n);
        if (ec != std::errc{} || next == at || n < 0 ||
            (next != end && *next != ' ' && *next != '\n')) {
            return std::nullopt;
        }
        at = next;
    }
    return sched_counters{.on_cpu = nanoseconds(v[0]), .waited = nanoseconds(v[1])};
}

p99_max percentile_99_and_max(std::vector<std::int64_t>& values) noexcept {
    if (values.empty()) {
        return {};
    }
    const auto p99_at =
        values.begin() + static_cast<std::ptrdiff_t>((values.size() * 99 + 99) / 100 - 1);
    std::nth_element(values.begin(), p99_at, values.end());
    return {.p99 = *p99_at, .max = *std::max_element(p99_at, values.end())};
}

namespace {

/// The calling thread's schedstat, open for re-reading (-1 where there is none).
class schedstat_reader {
public:
    schedstat_reader() = default;
    schedstat_reader(const schedstat_reader&) = delete;
    schedstat_reader& operator=(const schedstat_reader&) = delete;
    ~schedstat_reader() {
        if (fd_ >= 0) {
            ::close(fd_);
        }
    }

    /// Opens the calling thread's file once; later reads must come from the same thread.
    void open_here() {
        if (fd_ < 0 && !failed_) {
            fd_ = ::open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
            failed_ = fd_ < 0;
            owner_ = std::this_thread::get_id();
        }
    }

    /// Nullopt when unknown: no such file, or called from another thread than the opener
    /// (an embedder's io_context run by several threads).
    std::optional<sched_counters> read() const {
        if (fd_ < 0 || std::this_thread::get_id() != owner_) {
            return std::nullopt;
        }
        std::array<char, 96> buf{};
        const auto n = ::pread(fd_, buf.data(), buf.size(), 0);
        if (n <= 0) {
            return std::nullopt;
        }
        return parse_schedstat(std::string_view(buf.data(), static_cast<std::size_t>(n)));
    }

private:
    int fd_ = -1;
    bool failed_ = false;
    std::thread::id owner_;
};

}  // namespace

struct lag_probe::impl : std::enable_shared_from_this<impl> {
    impl(executor_type e, std::chrono::steady_clock::duration i, std::size_t w)
        : ex(std::move(e)), timer(ex), interval(i), window(std::max<std::size_t>(w, 1)) {
        ring.reserve(window);
        scratch.reserve(window);
    }

    // On the executor.
    void tick() {
        sched.open_here();
        timer.expires_after(interval);
        timer.async_wait([self = shared_from_this()](error_code ec) {
            if (!ec) {
                self->record(std::chrono::steady_clock::now() - self->timer.expiry());
                self->read_sched();
            }
            // A stop() followed quickly by start() leaves the cancelled wait to restart.
            if (self->stopping.load(std::memory_order_acquire)) {
                self->running = false;
                return;
            }
            self->tick();
        });
    }

    void read_sched() {
        const auto now = sched.read();
        if (!now) {
            return;
        }
        if (!first) {
            first = now;
        }
        cpu_ns.store((now->on_cpu - first->on_cpu).count(), std::memory_order_relaxed);
        cpu_wait_ns.store((now->waited - first->waited).count(), std::memory_order_relaxed);
        sched_known.store(true, std::memory_order_release);
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
        const auto all = percentile_99_and_max(scratch);

        last_ns.store(lag.count(), std::memory_order_relaxed);
        max_ns.store(all.max, std::memory_order_relaxed);
        p99_ns.store(all.p99, std::memory_order_relaxed);
        sum_ns.fetch_add(lag.count(), std::memory_order_relaxed);
        samples.fetch_add(1, std::memory_order_release);
    }

    executor_type ex;
    asio::steady_timer timer;
    std::chrono::steady_clock::duration interval;
    std::size_t window;
    // On the executor only:
    std::vector<nanoseconds::rep> ring;
    std::vector<nanoseconds::rep> scratch;
    std::size_t next = 0;
    bool running = false;
    schedstat_reader sched;
    std::optional<sched_counters> first;  // the first reading

    std::atomic<bool> stopping{false};
    std::atomic<nanoseconds::rep> last_ns{0};
    std::atomic<nanoseconds::rep> max_ns{0};
    std::atomic<nanoseconds::rep> p99_ns{0};
    std::atomic<nanoseconds::rep> sum_ns{0};
    std::atomic<std::uint64_t> samples{0};
    std::atomic<bool> sched_known{false};
    std::atomic<nanoseconds::rep> cpu_ns{0};
    std::atomic<nanoseconds::rep> cpu_wait_ns{0};
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
    s.sched_known = impl_->sched_known.load(std::memory_order_acquire);
    s.cpu_total = nanoseconds(impl_->cpu_ns.load(std::memory_order_relaxed));
    s.cpu_wait_total = nanoseconds(impl_->cpu_wait_ns.load(std::memory_order_relaxed));
    return s;
}

}  // namespace zkd::reactor
