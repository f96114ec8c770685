// SPDX-License-Identifier: MIT
#include "reactor/reactor.hpp"

#include <boost/asio/io_context.hpp>

#include <stdexcept>

namespace zkd::reactor {

namespace asio = boost::asio;

reactor::reactor(reactor_options options)
    // concurrency hint 1: one thread runs it, so Asio can skip some locking.
    : owned_(std::make_unique<asio::io_context>(1)),
      ex_(owned_->get_executor()),
      pool_(options.compute_threads),
      lag_(ex_, options.lag_interval, options.lag_window) {
    if (options.lag_interval > std::chrono::steady_clock::duration::zero())
        lag_.start();
}

reactor::reactor(executor_type ex, reactor_options options)
    : ex_(std::move(ex)),
      pool_(options.compute_threads),
      lag_(ex_, options.lag_interval, options.lag_window) {
    if (options.lag_interval > std::chrono::steady_clock::duration::zero())
        lag_.start();
}

reactor::~reactor() = default;

void reactor::run() {
    if (!owned_) {
        throw std::logic_error("reactor::run: embedded reactor; run the embedder's io_context");
    }
    if (owned_->stopped())
        owned_->restart();
    owned_->run();
}

void reactor::stop() {
    lag_.stop();
    if (owned_)
        owned_->stop();
}

}  // namespace zkd::reactor
