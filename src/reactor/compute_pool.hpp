// SPDX-License-Identifier: MIT
#pragma once

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <utility>

namespace zkd::reactor {

/// The threads that run user compute, so the io_context thread never does. A thin wrapper
/// over boost::asio::thread_pool that counts queued and running jobs for metrics.
///
/// Thread safety: every member may be called from any thread.
/// Lifetime: destroy (or join) the pool before the io_contexts its jobs report back to
/// (offload posts completions to the awaiting coroutine's executor).
class compute_pool {
public:
    using executor_type = boost::asio::thread_pool::executor_type;

    /// Starts `threads` threads; 0 means std::thread::hardware_concurrency() (at least 1).
    explicit compute_pool(std::size_t threads = 0);

    /// Stops the pool (queued jobs that have not started are dropped) and joins the threads.
    /// Blocks until running jobs return.
    ~compute_pool();

    compute_pool(const compute_pool&) = delete;
    compute_pool& operator=(const compute_pool&) = delete;

    /// Number of threads.
    [[nodiscard]] std::size_t size() const noexcept { return size_; }

    /// The raw pool executor. Work submitted through it bypasses the job counters.
    [[nodiscard]] executor_type get_executor() noexcept { return pool_.get_executor(); }

    /// Queues `f` (a `void()` callable) to run once on a pool thread, counted in queued() and
    /// running(). An exception escaping `f` is logged and swallowed (it would otherwise end
    /// the thread). If the pool stops before `f` starts, `f` is destroyed without running.
    template <class F>
    void post(F f);

    /// Jobs submitted through post() that have not started yet.
    [[nodiscard]] std::size_t queued() const noexcept {
        return queued_.load(std::memory_order_relaxed);
    }
    /// Jobs submitted through post() that are running now.
    [[nodiscard]] std::size_t running() const noexcept {
        return running_.load(std::memory_order_relaxed);
    }
    /// Jobs submitted through post() that have returned (or thrown) since construction.
    [[nodiscard]] std::uint64_t completed() const noexcept {
        return completed_.load(std::memory_order_relaxed);
    }

    /// Stops the threads as soon as the jobs they are running return. Jobs not yet started
    /// are never run; they are destroyed when the pool is destroyed.
    void stop();
    /// True once stop() was called.
    [[nodiscard]] bool stopped() const noexcept { return stopped_.load(std::memory_order_acquire); }

    /// Blocks until the threads exit: without stop(), after all queued work has run. Call at
    /// most from one thread at a time, never from a pool thread.
    void join();

private:
    template <class F>
    class counted_job;

    void job_started() noexcept;
    void job_finished() noexcept;
    void job_dropped() noexcept;
    static void job_threw(std::exception_ptr e) noexcept;

    std::size_t size_;
    std::atomic<std::size_t> queued_{0};
    std::atomic<std::size_t> running_{0};
    std::atomic<std::uint64_t> completed_{0};
    std::atomic<bool> stopped_{false};
    std::once_flag joined_;
    boost::asio::thread_pool pool_;  // last: its threads use the counters above
};

// Counts the job and notices when the pool destroys it without running it. Asio moves
// handlers around before invoking them, so only the instance that still holds pool_ counts.
template <class F>
class compute_pool::counted_job {
public:
    counted_job(compute_pool* pool, F f) : pool_(pool), f_(std::move(f)) {}
    counted_job(counted_job&& other) noexcept
        : pool_(std::exchange(other.pool_, nullptr)), f_(std::move(other.f_)) {}
    counted_job(const counted_job&) = delete;
    counted_job& operator=(const counted_job&) = delete;
    counted_job& operator=(counted_job&&) = delete;
    ~counted_job() {
        if (pool_ != nullptr)
            pool_->job_dropped();
    }

    void operator()() {
        compute_pool* pool = std::exchange(pool_, nullptr);
        pool->job_started();
        try {
            std::move(f_)();
        } catch (...) {
            job_threw(std::current_exception());
        }
        pool->job_finished();
    }

private:
    compute_pool* pool_;
    F f_;
};

template <class F>
void compute_pool::post(F f) {
    queued_.fetch_add(1, std::memory_order_relaxed);
    boost::asio::post(pool_, counted_job<F>{this, std::move(f)});
}

}  // namespace zkd::reactor
