// SPDX-License-Identifier: MIT
#include "reactor/task_group.hpp"

#include <boost/asio/append.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/cancellation_state.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/compose.hpp>
#include <boost/asio/consign.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <spdlog/spdlog.h>

#include <list>
#include <optional>

namespace zkd::reactor {

namespace asio = boost::asio;
using boost::system::error_code;

struct task_group::impl {
    struct child {
        explicit child(std::string n) : name(std::move(n)) {}
        asio::cancellation_signal signal;
        std::string name;
        bool finished = false;
    };
    using child_list = std::list<child>;

    explicit impl(executor_type e) : ex(e), cv(e, asio::steady_timer::time_point::max()) {}

    void emit(asio::cancellation_type type) {
        // A child may finish synchronously inside emit(); erasing its node (and signal) there
        // would pull the list out from under this loop, so removals wait until it ends.
        ++emitting;
        for (auto& c : children) {
            if (!c.finished)
                c.signal.emit(type);
        }
        if (--emitting > 0)
            return;  // nested emit(): the outermost one cleans up
        children.remove_if([](const child& c) { return c.finished; });
        wake_if_empty();
    }

    void remove(child_list::iterator it) {
        if (emitting > 0) {
            it->finished = true;
            return;
        }
        children.erase(it);
        wake_if_empty();
    }

    void wake_if_empty() {
        // The timer never expires: it is a condition variable, and cancel() is notify_all.
        if (children.empty())
            cv.cancel();
    }

    void on_child_done(const child& c, const std::exception_ptr& e) {
        if (!e)
            return;
        try {
            std::rethrow_exception(e);
        } catch (const boost::system::system_error& err) {
            if (err.code() == asio::error::operation_aborted) {
                spdlog::debug("task_group: child '{}' cancelled", c.name);
                return;
            }
            spdlog::error("task_group: child '{}' failed: {}", c.name, err.what());
        } catch (const std::exception& err) {
            spdlog::error("task_group: child '{}' failed: {}", c.name, err.what());
        } catch (...) {
            spdlog::error("task_group: child '{}' failed with a non-std exception", c.name);
        }
        if (!first_error)
            first_error = e;
    }

    executor_type ex;
    asio::steady_timer cv;
    child_list children;
    std::exception_ptr first_error;
    int emitting = 0;  // depth of emit() calls on the stack
};

namespace {

// Consigned to each child's completion handler, so the child leaves the list even when the
// handler is destroyed without being called (io_context torn down with the child pending).
template <class Fn>
class call_on_destroy {
public:
    explicit call_on_destroy(Fn fn) : fn_(std::move(fn)) {}
    call_on_destroy(call_on_destroy&& other) noexcept : fn_(std::move(other.fn_)) {
        other.fn_.reset();
    }
    call_on_destroy(const call_on_destroy&) = delete;
    call_on_destroy& operator=(const call_on_destroy&) = delete;
    call_on_destroy& operator=(call_on_destroy&&) = delete;
    ~call_on_destroy() {
        if (fn_)
            (*fn_)();
    }

private:
    std::optional<Fn> fn_;
};

}  // namespace

task_group::task_group(executor_type ex) : impl_(std::make_shared<impl>(std::move(ex))) {}

task_group::~task_group() {
    if (!impl_->children.empty()) {
        spdlog::warn(
            "task_group: destroyed with {} running children; cancelling them",
            impl_->children.size()
        );
        impl_->emit(asio::cancellation_type::terminal);
    }
}

task_group::executor_type task_group::get_executor() const noexcept {
    return impl_->ex;
}

void task_group::spawn(asio::awaitable<void> child, std::string name) {
    auto it = impl_->children.emplace(impl_->children.end(), std::move(name));
    auto on_done = [group = impl_, it](std::exception_ptr e) { group->on_child_done(*it, e); };
    auto remove = [group = impl_, it] { group->remove(it); };
    asio::co_spawn(
        impl_->ex, std::move(child),
        asio::bind_cancellation_slot(
            it->signal.slot(), asio::consign(std::move(on_done), call_on_destroy{std::move(remove)})
        )
    );
}

void task_group::emit(asio::cancellation_type type) {
    impl_->emit(type);
}

std::size_t task_group::size() const noexcept {
    std::size_t n = 0;
    for (const auto& c : impl_->children) {
        if (!c.finished)
            ++n;
    }
    return n;
}

std::exception_ptr task_group::first_exception() const noexcept {
    return impl_->first_error;
}

void task_group::async_wait_impl(
    std::shared_ptr<impl> group, asio::any_completion_handler<void(error_code)> handler
) {
    asio::async_compose<decltype(handler), void(error_code)>(
        [group, started = false,
         forwarded = asio::cancellation_type::none](auto& self, error_code = {}) mutable {
            if (!std::exchange(started, true)) {
                self.reset_cancellation_state(asio::enable_total_cancellation());
                if (group->children.empty()) {
                    // Never complete inline: hop through the executor first. (Copy the
                    // executor out: moving self moves `group` with it.)
                    auto ex = group->ex;
                    asio::post(ex, asio::append(std::move(self), error_code{}));
                    return;
                }
            }
            // Forward each cancellation type once, then keep waiting: the children decide
            // when they are done.
            if (const auto fresh = self.cancelled() & ~forwarded;
                fresh != asio::cancellation_type::none) {
                forwarded = forwarded | fresh;
                group->emit(fresh);
            }
            if (group->children.empty()) {
                self.complete(error_code{});
                return;
            }
            group->cv.async_wait(std::move(self));
        },
        handler, group->cv
    );
}

asio::awaitable<void> task_group::join() {
    auto group = impl_;
    // Cleanup code may join after its coroutine was cancelled (with throw_if_cancelled off):
    // the children have not heard of that cancellation yet.
    const auto state = co_await asio::this_coro::cancellation_state;
    if (const auto type = state.cancelled(); type != asio::cancellation_type::none) {
        group->emit(type);
    }
    co_await async_wait(asio::use_awaitable);
    if (auto e = std::exchange(group->first_error, nullptr))
        std::rethrow_exception(e);
}

}  // namespace zkd::reactor
