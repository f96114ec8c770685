// SPDX-License-Identifier: MIT
#include "roles/registry.hpp"

#include <boost/throw_exception.hpp>

#include <cmath>
#include <exception>
#include <limits>
#include <utility>

namespace zkd::roles {

namespace json = boost::json;

handler_exception::handler_exception(handler_error e)
    : std::runtime_error(e.code + ": " + e.message), error_(std::move(e)) {}

void throw_exception_from_error(const handler_error& e, const boost::source_location& loc) {
    boost::throw_with_location(handler_exception(e), loc);
}

bool is_valid_type_name(std::string_view type) noexcept {
    if (type.empty() || type.size() > 128)
        return false;
    for (const char c : type) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                        (c >= '0' && c <= '9') || c == '_' || c == '.' || c == ':' || c == '-';
        if (!ok)
            return false;
    }
    return true;
}

void registry::add(std::string type, task_handler h) {
    if (!is_valid_type_name(type))
        throw std::invalid_argument("invalid task type name \"" + type + "\"");
    if (!h)
        throw std::invalid_argument("empty handler for task type \"" + type + "\"");
    if (handlers_.contains(type))
        throw std::invalid_argument("task type \"" + type + "\" is already registered");
    handlers_.emplace(std::move(type), std::move(h));
}

const task_handler* registry::find(std::string_view type) const {
    const auto it = handlers_.find(type);
    return it == handlers_.end() ? nullptr : &it->second;
}

std::vector<std::string> registry::types() const {
    std::vector<std::string> out;
    out.reserve(handlers_.size());
    for (const auto& [type, handler] : handlers_)
        out.push_back(type);
    return out;
}

namespace {

bool is_handler_code(std::string_view code) noexcept {
    return code == codes::handler_error || code == codes::bad_args || code == codes::timeout ||
           code == codes::cancelled;
}

handler_result invoke_guarded(
    const task_handler& h, const json::value& args, std::stop_token stop
) {
    try {
        return h(args, std::move(stop));
    } catch (const std::exception& e) {
        return handler_error{std::string(codes::handler_error), e.what()};
    } catch (...) {
        return handler_error{std::string(codes::handler_error), "unknown exception"};
    }
}

}  // namespace

handler_result run_handler(
    const registry& reg, std::string_view type, const json::value& args, std::stop_token stop
) {
    const task_handler* h = reg.find(type);
    if (h == nullptr) {
        return handler_error{
            std::string(codes::unknown_type),
            "no handler is registered for task type \"" + std::string(type) + "\""};
    }
    handler_result r = invoke_guarded(*h, args, stop);
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

std::optional<std::int64_t> as_int64(const json::value& v) noexcept {
    switch (v.kind()) {
    case json::kind::int64:
        return v.get_int64();
    case json::kind::uint64:
        if (v.get_uint64() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
            return std::nullopt;
        return static_cast<std::int64_t>(v.get_uint64());
    case json::kind::double_: {
        const double d = v.get_double();
        constexpr double exact_limit = 9007199254740992.0;  // 2^53
        if (!std::isfinite(d) || std::trunc(d) != d || std::fabs(d) > exact_limit)
            return std::nullopt;
        return static_cast<std::int64_t>(d);
    }
    default:
        return std::nullopt;
    }
}

}  // namespace zkd::roles
