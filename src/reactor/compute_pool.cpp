// SPDX-License-Identifier: MIT
#include "reactor/compute_pool.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <thread>

namespace zkd::reactor {

namespace {

std::size_t pool_size(std::size_t requested) {
    if (requested != 0)
        return requested;
    // hardware_concurrency() may return 0 when it cannot tell.
    return std::max<std::size_t>(1, std::thread::hardware_concurrency());
}

}  // namespace

compute_pool::compute_pool(std::size_t threads) : size_(pool_size(threads)), pool_(size_) {}

compute_pool::~compute_pool() {
    stop();
    join();
}

void compute_pool::stop() {
    stopped_.store(true, std::memory_order_release);
    pool_.stop();
}

void compute_pool::join() {
    std::call_once(joined_, [this] { pool_.join(); });
}

void compute_pool::job_started() noexcept {
    queued_.fetch_sub(1, std::memory_order_relaxed);
    running_.fetch_add(1, std::memory_order_relaxed);
}

void compute_pool::job_finished() noexcept {
    running_.fetch_sub(1, std::memory_order_relaxed);
    completed_.fetch_add(1, std::memory_order_relaxed);
}

void compute_pool::job_dropped() noexcept {
    queued_.fetch_sub(1, std::memory_order_relaxed);
}

void compute_pool::job_threw(std::exception_ptr e) noexcept {
    try {
        std::rethrow_exception(std::move(e));
    } catch (const std::exception& ex) {
        spdlog::error("compute_pool: job threw: {}", ex.what());
    } catch (...) {
        spdlog::error("compute_pool: job threw a non-std exception");
    }
}

}  // namespace zkd::reactor
