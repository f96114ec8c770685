// SPDX-License-Identifier: MIT
#include "reactor/offload.hpp"

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>

#include <atomic>

namespace zkd::reactor::detail {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

enum class job_state { queued, running, skipped };

// Shared by the io side (initiation, cancellation handler, completion: all on `ex`) and the
// pool side (which only touches state_, stop_ and job_, then posts back).
class offload_op : public std::enable_shared_from_this<offload_op> {
public:
    offload_op(
        std::shared_ptr<offload_job> job,
        on_cancel mode,
        asio::any_io_executor ex,
        asio::any_completion_handler<void(error_code)> handler
    )
        : job_(std::move(job)),
          mode_(mode),
          ex_(std::move(ex)),
          work_(asio::prefer(ex_, asio::execution::outstanding_work.tracked)),
          handler_(std::move(handler)) {}

    // On the io side, before the job is queued.
    void arm_cancellation() {
        slot_ = asio::get_associated_cancellation_slot(handler_);
        if (!slot_.is_connected())
            return;
        slot_.assign([self = shared_from_this()](asio::cancellation_type type) {
            self->on_cancellation(type);
        });
    }

    // On a pool thread. The pool side hands its reference over to the completion it posts,
    // so the io side drops the last one: the result, and an exception object whose refcount
    // lives in uninstrumented libstdc++ (a TSan false positive otherwise), die on the io thread.
    static void run(std::shared_ptr<offload_op> self) {
        auto expected = job_state::queued;
        if (!self->state_.compare_exchange_strong(expected, job_state::running))
            return;
        self->job_->run(self->stop_.get_token());
        // An abandoned wait has completed already; skip the hop back.
        if (!self->done_.load(std::memory_order_acquire))
            post_complete(std::move(self), {});
    }

    // The pool destroyed the job without running it (it was stopped).
    static void dropped(std::shared_ptr<offload_op> self) {
        if (self->claim_queued()) {
            post_complete(std::move(self), asio::error::operation_aborted);
        }
    }

private:
    static void post_complete(std::shared_ptr<offload_op> self, error_code ec) {
        auto ex = self->ex_;  // copied first: `self` moves into the lambda
        asio::post(ex, [self = std::move(self), ec] { self->complete(ec); });
    }

    // Not started yet: it never will be, so any cancellation type is honoured without side
    // effects. Returns false if the job is already running (or was already claimed).
    bool claim_queued() {
        auto expected = job_state::queued;
        return state_.compare_exchange_strong(expected, job_state::skipped);
    }

    bool skip() {
        if (!claim_queued())
            return false;
        post_complete(shared_from_this(), asio::error::operation_aborted);
        return true;
    }

    void on_cancellation(asio::cancellation_type type) {
        if (type == asio::cancellation_type::none)
            return;
        if (skip())
            return;
        if ((type & (asio::cancellation_type::terminal | asio::cancellation_type::partial)) ==
            asio::cancellation_type::none) {
            return;  // total only: a running job can't be undone
        }
        stop_.request_stop();
        if (mode_ == on_cancel::abandon) {
            post_complete(shared_from_this(), asio::error::operation_aborted);
        }
    }

    // On `ex`. The first of the posted completions wins.
    void complete(error_code ec) {
        if (done_.exchange(true, std::memory_order_acq_rel))
            return;
        if (slot_.is_connected())
            slot_.clear();
        auto handler = std::move(handler_);
        auto work = std::move(work_);
        std::move(handler)(ec);
    }

    std::shared_ptr<offload_job> job_;
    on_cancel mode_;
    asio::any_io_executor ex_;
    asio::any_io_executor work_;  // tracked: keeps the io_context running while we wait
    asio::any_completion_handler<void(error_code)> handler_;
    asio::cancellation_slot slot_;
    std::stop_source stop_;
    std::atomic<job_state> state_{job_state::queued};
    std::atomic<bool> done_{false};
};

// What the pool runs. Asio may move it before invoking it; only the holder of op_ acts, and
// a holder destroyed without being invoked means the pool dropped the job.
class pool_job {
public:
    explicit pool_job(std::shared_ptr<offload_op> op) : op_(std::move(op)) {}
    pool_job(pool_job&&) noexcept = default;
    pool_job(const pool_job&) = delete;
    pool_job& operator=(const pool_job&) = delete;
    pool_job& operator=(pool_job&&) = delete;
    ~pool_job() {
        if (op_)
            offload_op::dropped(std::move(op_));
    }

    void operator()() { offload_op::run(std::move(op_)); }

private:
    std::shared_ptr<offload_op> op_;
};

}  // namespace

void start_offload(
    compute_pool& pool,
    std::shared_ptr<offload_job> job,
    on_cancel mode,
    asio::any_io_executor ex,
    asio::any_completion_handler<void(error_code)> handler
) {
    auto op = std::make_shared<offload_op>(std::move(job), mode, std::move(ex), std::move(handler));
    op->arm_cancellation();
    if (pool.stopped()) {
        offload_op::dropped(std::move(op));
        return;
    }
    // Last: from here on a pool thread may run the job and post the completion.
    pool.post(pool_job{std::move(op)});
}

}  // namespace zkd::reactor::detail
