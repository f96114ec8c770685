// SPDX-License-Identifier: MIT
#include "reactor/signals.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdlib>

namespace zkd::reactor {

namespace asio = boost::asio;
using boost::system::error_code;

struct shutdown_controller::impl : std::enable_shared_from_this<impl> {
    impl(
        executor_type e,
        std::chrono::steady_clock::duration g,
        shutdown_handlers h,
        const std::vector<int>& signos
    )
        : ex(e),
          signals(e),
          grace_timer(e),
          cv(e, asio::steady_timer::time_point::max()),
          grace(g),
          handlers(std::move(h)) {
        for (int s : signos)
            signals.add(s);
    }

    void listen() {
        signals.async_wait([self = shared_from_this()](error_code ec, int signo) {
            if (ec || self->stopped)
                return;
            self->on_signal(signo);
            if (!self->stopped && self->phase != shutdown_phase::immediate)
                self->listen();
        });
    }

    void on_signal(int signo) {
        if (stopped)
            return;
        switch (phase.load()) {
        case shutdown_phase::running:
            phase = shutdown_phase::graceful;
            first_signal = signo;
            spdlog::info(
                "shutdown: signal {}, draining for up to {} ms", signo,
                std::chrono::duration_cast<std::chrono::milliseconds>(grace).count()
            );
            grace_timer.expires_after(grace);
            grace_timer.async_wait([self = shared_from_this()](error_code ec) {
                if (!ec)
                    self->on_grace_expired();
            });
            cv.cancel();
            if (handlers.on_graceful)
                handlers.on_graceful(signo);
            break;
        case shutdown_phase::graceful:
        case shutdown_phase::terminal: {
            phase = shutdown_phase::immediate;
            spdlog::warn("shutdown: second signal {}, exiting now", signo);
            grace_timer.cancel();
            // Hand the signals back to the default action: a third one kills the process
            // even if on_immediate does not end it.
            error_code ignored;
            signals.cancel(ignored);  // a wait is still pending when request() got us here
            signals.clear(ignored);
            if (!handlers.on_immediate)
                std::_Exit(128 + signo);
            handlers.on_immediate(signo);
            break;
        }
        case shutdown_phase::immediate:
            break;
        }
    }

    void on_grace_expired() {
        if (stopped || phase != shutdown_phase::graceful)
            return;
        phase = shutdown_phase::terminal;
        spdlog::warn("shutdown: grace period over, cancelling what still runs");
        if (handlers.on_grace_expired)
            handlers.on_grace_expired();
    }

    void stop() {
        if (std::exchange(stopped, true))
            return;
        error_code ignored;
        signals.cancel(ignored);
        signals.clear(ignored);
        grace_timer.cancel();
        cv.cancel();
    }

    executor_type ex;
    asio::signal_set signals;
    asio::steady_timer grace_timer;
    asio::steady_timer cv;  // never expires: cancel() wakes wait_shutdown_requested()
    std::chrono::steady_clock::duration grace;
    shutdown_handlers handlers;
    std::atomic<shutdown_phase> phase{shutdown_phase::running};  // read by phase() anywhere
    int first_signal = 0;
    bool stopped = false;
};

shutdown_controller::shutdown_controller(
    executor_type ex,
    std::chrono::steady_clock::duration grace,
    shutdown_handlers handlers,
    std::vector<int> signals
)
    : impl_(std::make_shared<impl>(std::move(ex), grace, std::move(handlers), signals)) {
    impl_->listen();
}

shutdown_controller::~shutdown_controller() {
    impl_->stop();
}

void shutdown_controller::request(int signo) {
    asio::post(impl_->ex, [self = impl_, signo] { self->on_signal(signo); });
}

void shutdown_controller::stop() {
    impl_->stop();
}

shutdown_phase shutdown_controller::phase() const noexcept {
    return impl_->phase.load();
}

asio::awaitable<int> shutdown_controller::wait_shutdown_requested() {
    auto self = impl_;
    while (self->phase == shutdown_phase::running && !self->stopped) {
        co_await self->cv.async_wait(asio::as_tuple(asio::use_awaitable));
        // cv is only ever cancelled by a signal or stop(); any other wake-up is the caller's
        // own cancellation.
        if (self->phase == shutdown_phase::running && !self->stopped) {
            throw boost::system::system_error(asio::error::operation_aborted, "shutdown wait");
        }
    }
    co_return self->first_signal;
}

}  // namespace zkd::reactor
