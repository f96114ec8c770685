// SPDX-License-Identifier: MIT
#include "apps/crack/fold.hpp"

#include "apps/crack/md5_crack.hpp"
#include "protocol/task.hpp"

#include <boost/json/object.hpp>
#include <boost/json/string.hpp>

#include <algorithm>
#include <string_view>
#include <utility>

namespace json = boost::json;

namespace zkd::crack {

namespace {

void mark_failed(
    crack_job& j, std::size_t i, protocol::task_state state, std::string code, std::string message
) {
    j.partitions[i] = crack_partition::failed;
    j.failed.push_back(crack_failed_partition{
        static_cast<int>(i), j.tasks[i], state, std::move(code), std::move(message)});
    std::sort(j.failed.begin(), j.failed.end(), [](const auto& a, const auto& b) {
        return a.partition < b.partition;
    });
}

/// Folds the value of partition i's succeeded task: {"found":bool,"tried":n}, with a
/// preimage of the job's hash when found.
void fold_value(crack_job& j, std::size_t i, const json::value& value, std::int64_t now_ms) {
    const json::object* v = value.if_object();
    const json::value* found = v != nullptr ? v->if_contains("found") : nullptr;
    const json::value* tried_value = v != nullptr ? v->if_contains("tried") : nullptr;
    // -1: absent or not a count (a plain integer keeps GCC's maybe-uninitialized quiet)
    const std::int64_t tried =
        tried_value != nullptr ? protocol::as_int64(*tried_value).value_or(-1) : -1;
    if (found == nullptr || !found->is_bool() || tried < 0) {
        mark_failed(
            j, i, protocol::task_state::succeeded, "bad_value",
            R"(the partition's value is not {"found":bool,"tried":n})"
        );
        return;
    }
    if (found->get_bool()) {
        const json::value* pre = v->if_contains("preimage");
        if (pre == nullptr || !pre->is_string() ||
            md5_hex(std::string_view(pre->get_string())) != j.hash) {
            mark_failed(
                j, i, protocol::task_state::succeeded, "bad_value",
                "the partition's preimage does not hash to the job's hash"
            );
            return;
        }
        j.partitions[i] = crack_partition::found;
        j.tried += static_cast<std::uint64_t>(tried);
        if (j.state == crack_state::running) {
            j.state = crack_state::found;
            j.preimage = std::string(pre->get_string());
            j.found_partition = static_cast<int>(i);
            j.finished_ms = now_ms;
        }
    } else {
        j.partitions[i] = crack_partition::searched;
        j.tried += static_cast<std::uint64_t>(tried);
    }
}

}  // namespace

bool apply(crack_job& j, const partition_report& report, std::int64_t now_ms) {
    const std::size_t i = report.partition;
    if (i >= j.tasks.size() || j.tasks[i] != report.task ||
        j.partitions[i] != crack_partition::open) {
        return false;
    }
    if (!report.data) {
        mark_failed(
            j, i, protocol::task_state::unknown, "vanished",
            "the task and its result are gone (consumed by another client or reaped)"
        );
        return true;
    }
    auto r = protocol::decode_result(*report.data);
    if (!r) {
        mark_failed(j, i, protocol::task_state::unknown, "garbage_result", r.error().message);
        return true;
    }
    switch (r->state) {
    case protocol::task_state::succeeded:
        fold_value(j, i, r->value, now_ms);
        return true;
    case protocol::task_state::cancelled:
        if (j.state == crack_state::found) {
            j.partitions[i] = crack_partition::cancelled;
            return true;
        }
        break;
    default:
        break;
    }
    mark_failed(
        j, i, r->state, r->error ? r->error->code : std::string(),
        r->error ? r->error->message : std::string()
    );
    return true;
}

bool settle(crack_job& j, std::int64_t now_ms) {
    if (j.state != crack_state::running || j.done() != j.total()) {
        return false;
    }
    j.state = j.failed.empty() ? crack_state::not_found : crack_state::failed;
    j.finished_ms = now_ms;
    return true;
}

}  // namespace zkd::crack
