// SPDX-License-Identifier: MIT
#include "roles/master/detail/slot_index.hpp"

#include <algorithm>
#include <iterator>

namespace zkd::roles {

bool slot_index::worker::serves(std::string_view type) const noexcept {
    return std::find(types.begin(), types.end(), type) != types.end();
}

bool slot_index::worker::takes(std::string_view type) const noexcept {
    return serves(type) && std::find(unhealthy.begin(), unhealthy.end(), type) == unhealthy.end();
}

slot_index::slot_index(protocol::placement_policy policy, std::uint64_t seed)
    : policy_(policy), rng_(seed) {}

/// Adds (`sign` 1) or takes out (-1) what `entry` contributes to the counts and the orders.
void slot_index::link(const worker_map::value_type& entry, int sign) {
    const auto& [id, w] = entry;
    const int free = w.free_slots();
    if (w.open) {
        open_ = sign > 0 ? open_ + 1 : open_ - 1;
        free_open_ += static_cast<long>(sign) * free;
        for (const auto& type : w.types) {
            auto it = served_.try_emplace(type, 0).first;
            it->second = sign > 0 ? it->second + 1 : it->second - 1;
            if (it->second == 0) {
                served_.erase(it);
            }
        }
    }
    if (!w.assignable) {
        return;
    }
    free_assignable_ += static_cast<long>(sign) * free;
    if (free == 0) {
        return;
    }
    const std::string_view key(id);
    for (const auto& type : w.types) {
        if (!w.takes(type)) {
            continue;
        }
        if (sign > 0) {
            auto& t = types_[type];
            t.by_free.emplace(-free, key);
            t.by_id.insert(key);
        } else if (auto it = types_.find(type); it != types_.end()) {
            it->second.by_free.erase({-free, key});
            it->second.by_id.erase(key);
            if (it->second.by_id.empty()) {
                types_.erase(it);
            }
        }
    }
}

void slot_index::put(const std::string& id, const worker& w) {
    auto it = workers_.find(id);
    if (it != workers_.end()) {
        link(*it, -1);
        if (!w.open && !w.assignable) {
            workers_.erase(it);
            return;
        }
        it->second = w;
    } else {
        if (!w.open && !w.assignable) {
            return;
        }
        it = workers_.emplace(id, w).first;
    }
    // A type listed twice would be linked twice: the lists are sets.
    auto& types = it->second.types;
    std::sort(types.begin(), types.end());
    types.erase(std::unique(types.begin(), types.end()), types.end());
    link(*it, 1);
}

void slot_index::set_used(const std::string& id, int used) {
    const auto it = workers_.find(id);
    if (it == workers_.end() || it->second.used == used) {
        return;
    }
    link(*it, -1);
    it->second.used = used;
    link(*it, 1);
}

void slot_index::erase(const std::string& id) {
    if (const auto it = workers_.find(id); it != workers_.end()) {
        link(*it, -1);
        workers_.erase(it);
    }
}

const slot_index::worker* slot_index::find(std::string_view id) const {
    const auto it = workers_.find(id);
    return it == workers_.end() ? nullptr : &it->second;
}

bool slot_index::anyone_serves(std::string_view type) const {
    return served_.find(type) != served_.end();
}

std::optional<std::string_view> slot_index::next_in_turn(
    const by_type& t, int free, const std::function<bool(std::string_view)>& skip
) const {
    if (free == 0) {
        // Any with a free slot: by id.
        for (auto it = t.by_id.upper_bound(last_); it != t.by_id.end(); ++it) {
            if (!skipped(*it, skip)) {
                return *it;
            }
        }
        for (auto it = t.by_id.begin(); it != t.by_id.end() && *it <= last_; ++it) {
            if (!skipped(*it, skip)) {
                return *it;
            }
        }
        return std::nullopt;
    }
    // Those with `free` slots are one run of by_free, in id order.
    const auto first = t.by_free.lower_bound({-free, std::string_view()});
    const auto after = t.by_free.upper_bound({-free, std::string_view(last_)});
    for (auto it = after; it != t.by_free.end() && it->first == -free; ++it) {
        if (!skipped(it->second, skip)) {
            return it->second;
        }
    }
    for (auto it = first; it != after; ++it) {
        if (!skipped(it->second, skip)) {
            return it->second;
        }
    }
    return std::nullopt;
}

std::optional<std::string> slot_index::pick(
    std::string_view type,
    std::string_view batch_mate,
    const std::function<bool(std::string_view)>& skip
) {
    const auto t = types_.find(type);
    if (t == types_.end()) {
        return std::nullopt;
    }
    std::optional<std::string_view> chosen;
    switch (policy_) {
    case protocol::placement_policy::least_loaded: {
        int most_free = 0;
        for (const auto& [neg_free, id] : t->second.by_free) {
            if (!skipped(id, skip)) {
                most_free = -neg_free;
                break;
            }
        }
        if (most_free == 0) {
            break;
        }
        if (!batch_mate.empty()) {
            const auto* mate = find(batch_mate);
            if (mate != nullptr && mate->assignable && mate->threads > 1 && mate->takes(type) &&
                mate->free_slots() > 0 && mate->free_slots() >= most_free - (mate->threads - 1) &&
                !skipped(batch_mate, skip)) {
                chosen = workers_.find(batch_mate)->first;
                break;
            }
        }
        chosen = next_in_turn(t->second, most_free, skip);
        break;
    }
    case protocol::placement_policy::round_robin:
        chosen = next_in_turn(t->second, 0, skip);
        break;
    case protocol::placement_policy::random: {
        std::vector<std::string_view> eligible;
        std::copy_if(
            t->second.by_id.begin(), t->second.by_id.end(), std::back_inserter(eligible),
            [&](std::string_view id) { return !skipped(id, skip); }
        );
        if (eligible.empty()) {
            break;
        }
        chosen = eligible[std::uniform_int_distribution<std::size_t>(0, eligible.size() - 1)(rng_)];
        break;
    }
    }
    if (!chosen) {
        return std::nullopt;
    }
    last_.assign(*chosen);
    return std::string(*chosen);
}

}  // namespace zkd::roles
