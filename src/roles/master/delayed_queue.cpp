// SPDX-License-Identifier: MIT
#include "roles/master/detail/delayed_queue.hpp"

#include "protocol/ids.hpp"

#include <algorithm>
#include <set>

namespace zkd::roles {

namespace {

/// The time in a task or bundle id: a lower bound of its due time; 0 for another name.
std::int64_t id_time(std::string_view name) {
    if (auto ms = protocol::task_id_ms(name)) {
        return *ms;
    }
    if (const auto us = name.rfind('_'); us != std::string_view::npos) {
        if (auto ms = protocol::task_id_ms(name.substr(0, us))) {
            return *ms;
        }
    }
    return 0;
}

}  // namespace

void delayed_queue::push(std::int64_t due, const task_key& key) {
    heap_.emplace_back(due, key);
    std::push_heap(heap_.begin(), heap_.end(), later{});
}

void delayed_queue::listed(std::uint32_t shard, const std::vector<std::string>& names) {
    std::set<task_key> seen;
    for (const auto& n : names) {
        task_key key(n);
        seen.insert(key);
        if (tasks_.find(key) == tasks_.end()) {
            const auto due = id_time(n);
            tasks_.emplace(key, entry{due, shard, false});
            push(due, key);
        }
    }
    for (auto it = tasks_.begin(); it != tasks_.end();) {
        if (it->second.shard == shard && !it->second.in_flight && !seen.contains(it->first)) {
            it = tasks_.erase(it);  // its heap slot goes stale
        } else {
            ++it;
        }
    }
    compact_if_stale();
}

void delayed_queue::logged(
    std::uint32_t shard, const std::string& name, std::optional<std::int64_t> due_ms
) {
    task_key key(name);
    if (tasks_.find(key) != tasks_.end()) {
        return;
    }
    const auto due = due_ms ? std::max<std::int64_t>(0, *due_ms) : id_time(name);
    tasks_.emplace(key, entry{due, shard, false});
    push(due, key);
}

void delayed_queue::set_due(const std::string& name, std::int64_t due_ms) {
    const auto it = tasks_.find(task_key(name));
    if (it == tasks_.end()) {
        return;
    }
    it->second.due = due_ms;
    it->second.in_flight = false;
    push(due_ms, it->first);
}

void delayed_queue::put_back(const std::string& name, std::int64_t retry_ms) {
    set_due(name, retry_ms);
}

void delayed_queue::hold(const std::string& name) {
    if (const auto it = tasks_.find(task_key(name)); it != tasks_.end()) {
        it->second.in_flight = true;  // its heap slot goes stale
    }
}

void delayed_queue::forget(const std::string& name) {
    tasks_.erase(task_key(name));
    compact_if_stale();
}

void delayed_queue::clean_top() {
    while (!heap_.empty()) {
        const auto& [due, key] = heap_.front();
        const auto it = tasks_.find(key);
        if (it != tasks_.end() && !it->second.in_flight && it->second.due == due) {
            return;
        }
        std::pop_heap(heap_.begin(), heap_.end(), later{});
        heap_.pop_back();
    }
}

void delayed_queue::compact_if_stale() {
    if (heap_.size() < 64 || heap_.size() <= 2 * tasks_.size()) {
        return;
    }
    heap_.clear();
    for (const auto& [key, e] : tasks_) {
        if (!e.in_flight) {
            heap_.emplace_back(e.due, key);
        }
    }
    std::make_heap(heap_.begin(), heap_.end(), later{});
    heap_.shrink_to_fit();
}

std::vector<delayed_queue::due_task> delayed_queue::take_due(
    std::int64_t now_ms, std::size_t most
) {
    std::vector<due_task> out;
    for (clean_top(); out.size() < most && !heap_.empty() && heap_.front().first <= now_ms;
         clean_top()) {
        std::pop_heap(heap_.begin(), heap_.end(), later{});
        auto key = std::move(heap_.back().second);
        heap_.pop_back();
        auto& e = tasks_.at(key);
        e.in_flight = true;
        out.push_back(due_task{key.str(), e.shard});
    }
    return out;
}

std::optional<std::int64_t> delayed_queue::next_due() {
    clean_top();
    if (heap_.empty()) {
        return std::nullopt;
    }
    return heap_.front().first;
}

bool delayed_queue::contains(const std::string& name) const {
    return tasks_.contains(task_key(name));
}

std::optional<std::uint32_t> delayed_queue::shard_of(const std::string& name) const {
    const auto it = tasks_.find(task_key(name));
    if (it == tasks_.end()) {
        return std::nullopt;
    }
    return it->second.shard;
}

bool delayed_queue::in_flight(const std::string& name) const {
    const auto it = tasks_.find(task_key(name));
    return it != tasks_.end() && it->second.in_flight;
}

}  // namespace zkd::roles
