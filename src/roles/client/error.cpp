// SPDX-License-Identifier: MIT
#include "roles/client/error.hpp"

#include "protocol/delay.hpp"

#include <string>

namespace zkd::roles {

namespace {

class client_category_impl final : public boost::system::error_category {
public:
    const char* name() const noexcept override { return "zkd.client"; }
    std::string message(int value) const override {
        switch (static_cast<client_errc>(value)) {
        case client_errc::invalid_type:
            return "invalid task: a type name is 1 to 128 characters of [A-Za-z0-9_.:-]";
        case client_errc::invalid_priority:
            return "invalid task: the priority is from " + std::to_string(protocol::min_priority) +
                   " to " + std::to_string(protocol::max_priority);
        case client_errc::invalid_timeout:
            return "invalid task: the timeout is 0 (none) or more";
        case client_errc::invalid_max_attempts:
            return "invalid task: max_attempts is from 1 to " +
                   std::to_string(protocol::max_attempts_limit);
        case client_errc::invalid_args:
            return "invalid task: its args are nested more than " +
                   std::to_string(protocol::max_json_depth - 1) +
                   " levels deep or hold a number JSON cannot carry";
        case client_errc::task_too_large:
            return "task too large: its JSON is over " + std::to_string(protocol::max_task_bytes) +
                   " bytes";
        case client_errc::garbage_result:
            return "the result node does not hold a zkd result";
        case client_errc::queue_full:
            return "queue full: the cluster's bound on pending tasks (zkd run --max-pending) "
                   "would be passed";
        case client_errc::bad_due_time:
            return "invalid task: a due time is from 1970 to " +
                   protocol::format_time(protocol::max_due_ms);
        case client_errc::bad_retries:
            return "invalid task: retries are from 0 to " +
                   std::to_string(protocol::max_retries_limit);
        }
        return "unknown client error";
    }
    boost::system::error_condition default_error_condition(int value) const noexcept override {
        switch (static_cast<client_errc>(value)) {
        case client_errc::invalid_type:
        case client_errc::invalid_priority:
        case client_errc::invalid_timeout:
        case client_errc::invalid_max_attempts:
        case client_errc::invalid_args:
        case client_errc::bad_due_time:
        case client_errc::bad_retries:
            return make_error_condition(client_condition::invalid_task);
        default:
            return {value, *this};
        }
    }
};

class client_condition_category_impl final : public boost::system::error_category {
public:
    const char* name() const noexcept override { return "zkd.client.condition"; }
    std::string message(int value) const override {
        return static_cast<client_condition>(value) == client_condition::invalid_task
                   ? "invalid task"
                   : "unknown client condition";
    }
};

}  // namespace

const boost::system::error_category& client_category() noexcept {
    static const client_category_impl instance;
    return instance;
}

const boost::system::error_category& client_condition_category() noexcept {
    static const client_condition_category_impl instance;
    return instance;
}

boost::system::error_code make_error_code(client_errc e) noexcept {
    return {static_cast<int>(e), client_category()};
}

boost::system::error_condition make_error_condition(client_condition c) noexcept {
    return {static_cast<int>(c), client_condition_category()};
}

client_errc broken_rule(const protocol::decode_error& e) noexcept {
    if (e.field == "type") {
        return client_errc::invalid_type;
    }
    if (e.field == "priority") {
        return client_errc::invalid_priority;
    }
    if (e.field == "timeout_ms") {
        return client_errc::invalid_timeout;
    }
    if (e.field == "max_attempts") {
        return client_errc::invalid_max_attempts;
    }
    return client_errc::invalid_args;
}

}  // namespace zkd::roles
