// SPDX-License-Identifier: MIT
#include "handlers/registry.hpp"

#include <boost/throw_exception.hpp>

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <utility>

namespace zkd::handlers {

namespace json = boost::json;

bool is_valid_type_name(std::string_view type) noexcept {
    return protocol::is_valid_task_type(type);  // the one rule (protocol §4)
}

std::chrono::milliseconds type_limits::effective(std::chrono::milliseconds requested) const {
    if (requested.count() <= 0)
        return default_timeout;
    if (max_timeout.count() > 0 && requested > max_timeout)
        return max_timeout;
    return requested;
}

void registry::add_entry(std::string type, entry e) {
    if (!is_valid_type_name(type))
        throw std::invalid_argument("invalid task type name \"" + type + "\"");
    if (!e.sync && !e.sync_progress && !e.async)
        throw std::invalid_argument("empty handler for task type \"" + type + "\"");
    if (handlers_.contains(type))
        throw std::invalid_argument("task type \"" + type + "\" is already registered");
    handlers_.emplace(std::move(type), std::move(e));
}

void registry::add(std::string type, task_handler h) {
    add_entry(std::move(type), entry{std::move(h), {}, {}, {}});
}

void registry::add_inline(std::string type, task_handler h) {
    add_entry(std::move(type), entry{std::move(h), {}, {}, {}, true});
}

void registry::add(std::string type, progress_task_handler h) {
    add_entry(std::move(type), entry{{}, std::move(h), {}, {}});
}

void registry::add_async(std::string type, async_task_handler h, type_limits limits) {
    add_entry(std::move(type), entry{{}, {}, std::move(h), limits});
}

bool registry::has_sync(std::string_view type) const {
    const auto it = handlers_.find(type);
    return it != handlers_.end() && (it->second.sync || it->second.sync_progress);
}

bool registry::runs_inline(std::string_view type) const {
    const auto it = handlers_.find(type);
    return it != handlers_.end() && it->second.on_loop;
}

const progress_task_handler* registry::find_with_progress(std::string_view type) const {
    const auto it = handlers_.find(type);
    return it == handlers_.end() || !it->second.sync_progress ? nullptr : &it->second.sync_progress;
}

const task_handler* registry::find(std::string_view type) const {
    const auto it = handlers_.find(type);
    return it == handlers_.end() || !it->second.sync ? nullptr : &it->second.sync;
}

const async_task_handler* registry::find_async(std::string_view type) const {
    const auto it = handlers_.find(type);
    return it == handlers_.end() || !it->second.async ? nullptr : &it->second.async;
}

type_limits registry::limits(std::string_view type) const {
    const auto it = handlers_.find(type);
    return it == handlers_.end() ? type_limits{} : it->second.limits;
}

std::vector<std::string> registry::types() const {
    std::vector<std::string> out;
    out.reserve(handlers_.size());
    for (const auto& [type, handler] : handlers_)
        out.push_back(type);
    return out;
}

void type_health::set(const std::string& type, bool unhealthy) {
    std::function<void()> tell;
    {
        const std::lock_guard lock(mutex_);
        const auto it = std::lower_bound(unhealthy_.begin(), unhealthy_.end(), type);
        const bool was = it != unhealthy_.end() && *it == type;
        if (was == unhealthy) {
            return;
        }
        if (unhealthy) {
            unhealthy_.insert(it, type);
        } else {
            unhealthy_.erase(it);
        }
        tell = listener_;
    }
    if (tell) {
        tell();
    }
}

std::vector<std::string> type_health::unhealthy() const {
    const std::lock_guard lock(mutex_);
    return unhealthy_;
}

void type_health::on_change(std::function<void()> f) {
    const std::lock_guard lock(mutex_);
    listener_ = std::move(f);
}

namespace {

bool is_handler_code(std::string_view code) noexcept {
    return code == codes::handler_error || code == codes::bad_args || code == codes::timeout ||
           code == codes::cancelled || code == codes::output_too_large ||
           code == codes::memory_limit || code == codes::cpu_limit ||
           code == codes::process_limit || code == codes::open_files_limit;
}

handler_error unknown(std::string_view type) {
    return handler_error{
        std::string(codes::unknown_type),
        "no handler is registered for task type \"" + std::string(type) + "\""};
}

// What both kinds of handler share once they returned: codes and stop.
handler_result normalize(handler_result r, const std::stop_token& stop) {
    if (r.has_value())
        return r;
    handler_error e = r.error();
    // A code the protocol does not expect from a handler (say "lost") would mislead whoever
    // reads the result, so it is reported as the handler's own failure.
    if (!is_handler_code(e.code)) {
        e.message = "handler returned error code \"" + e.code + "\": " + e.message;
        e.code = std::string(codes::handler_error);
    }
    // Whatever went wrong after a stop request is most likely the stop itself (a handler that
    // bailed out and reported it badly), and the caller must see a cancellation.
    if (stop.stop_requested() && e.code != codes::cancelled) {
        e.message = "cancelled (the handler reported " + e.code + ": " + e.message + ")";
        e.code = std::string(codes::cancelled);
    }
    return e;
}

handler_result invoke_guarded(
    const registry& reg,
    std::string_view type,
    const json::value& args,
    std::stop_token stop,
    const progress_fn& progress
) {
    try {
        if (const auto* h = reg.find(type))
            return (*h)(args, std::move(stop));
        const progress_fn ignore = [](double, const std::string&) {};
        return (*reg.find_with_progress(type))(args, std::move(stop), progress ? progress : ignore);
    } catch (const std::exception& e) {
        return handler_error{std::string(codes::handler_error), e.what()};
    } catch (...) {
        return handler_error{std::string(codes::handler_error), "unknown exception"};
    }
}

}  // namespace

void registry::add_service(service s) {
    if (!s) {
        throw std::invalid_argument("an empty service");
    }
    services_.push_back(std::move(s));
}

handler_result run_handler(
    const registry& reg,
    std::string_view type,
    const json::value& args,
    std::stop_token stop,
    const progress_fn& progress
) {
    if (!reg.has_sync(type)) {
        if (reg.find_async(type) != nullptr) {
            return handler_error{
                std::string(codes::handler_error),
                "task type \"" + std::string(type) +
                    "\" runs on the event loop (run_async_handler)"};
        }
        return unknown(type);
    }
    return normalize(invoke_guarded(reg, type, args, stop, progress), stop);
}

boost::asio::awaitable<handler_result> run_async_handler(
    const registry& reg, std::string type, async_call call
) {
    const async_task_handler* h = reg.find_async(type);
    if (h == nullptr)
        co_return unknown(type);
    const std::stop_token stop = call.stop;
    handler_result r = handler_error{std::string(codes::handler_error), "unknown exception"};
    try {
        r = co_await (*h)(std::move(call));
    } catch (const std::exception& e) {
        r = handler_error{std::string(codes::handler_error), e.what()};
    } catch (...) {
        r = handler_error{std::string(codes::handler_error), "unknown exception"};
    }
    co_return normalize(std::move(r), stop);
}

}  // namespace zkd::handlers
