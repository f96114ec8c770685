// SPDX-License-Identifier: MIT
#include "protocol/direct_placement.hpp"

#include <algorithm>
#include <utility>

namespace zkd::protocol {

// --- direct_placer ---------------------------------------------------------------------------

std::vector<std::string> worker_window(
    std::vector<std::string> names, std::size_t& at, std::size_t most
) {
    if (names.size() <= most) {
        return names;
    }
    std::sort(names.begin(), names.end());
    std::vector<std::string> some;
    some.reserve(most);
    for (std::size_t k = 0; k < most; ++k) {
        some.push_back(std::move(names[(at + k) % names.size()]));
    }
    at = (at + most) % names.size();
    return some;
}

void direct_placer::read(
    std::vector<worker_seen> workers, const std::vector<std::string>& suspects
) {
    // What this client placed before the read before last is in the workers' counts by now,
    // or finished: forgotten, so that a client that never waits keeps no more than that.
    ++reads_;
    std::erase_if(placed_, [this](const auto& p) { return p.second.read + 1 < reads_; });
    workers_.clear();
    threads_ = 0;
    for (auto& w : workers) {
        if (std::binary_search(suspects.begin(), suspects.end(), w.id)) {
            continue;  // it left assignments unstarted: the master takes them back
        }
        if (!w.info.draining) {
            threads_ += static_cast<std::size_t>(std::max(1, w.info.threads.value_or(1)));
        }
        // The worker holds `held`, ours among them (those whose submit committed before the
        // read): the others' and ours together take at least max(held, ours).
        int ours = 0;
        for (const auto& [tid, p] : placed_) {
            ours += p.worker == w.id ? 1 : 0;
        }
        const int capacity = std::max(0, w.info.capacity.value_or(0));
        const int budget = std::max(0, capacity - std::max(w.held, ours));
        workers_.push_back({std::move(w), budget});
    }
}

std::optional<direct_placer::target> direct_placer::place(
    std::string_view type, std::uint64_t turn, std::string_view prefer
) {
    if (workers_.empty()) {
        return std::nullopt;
    }
    // The preferred worker while it has room, then the turn's worker while it has room (one
    // worker per transaction: one change log read for the lot), else the one with the most
    // room.
    const auto fits = [type](const entry& e) {
        const auto& types = e.seen.info.types;
        const auto& unhealthy = e.seen.info.unhealthy;
        return e.budget > 0 && !e.seen.info.draining &&
               std::binary_search(types.begin(), types.end(), type) &&
               !std::binary_search(unhealthy.begin(), unhealthy.end(), type);
    };
    entry* best = nullptr;
    if (!prefer.empty()) {
        for (auto& e : workers_) {
            if (e.seen.id == prefer && fits(e)) {
                best = &e;
                break;
            }
        }
    }
    if (best == nullptr) {
        best = &workers_[turn % workers_.size()];
    }
    if (!fits(*best)) {
        best = nullptr;
        for (auto& e : workers_) {
            if (fits(e) && (best == nullptr || e.budget > best->budget)) {
                best = &e;
            }
        }
    }
    if (best == nullptr) {
        return std::nullopt;
    }
    --best->budget;
    return target{best->seen.id, best->seen.version};
}

void direct_placer::placed(const std::string& tid, const std::string& worker) {
    placed_.insert_or_assign(tid, placement{worker, reads_});
}

void direct_placer::settled(const std::string& tid) {
    const auto it = placed_.find(tid);
    if (it == placed_.end()) {
        return;  // placed before the last read (which counted it), or not placed directly
    }
    for (auto& e : workers_) {
        if (e.seen.id == it->second.worker) {
            ++e.budget;
        }
    }
    placed_.erase(it);
}

int direct_placer::budget(std::string_view worker) const {
    for (const auto& e : workers_) {
        if (e.seen.id == worker) {
            return e.budget;
        }
    }
    return 0;
}

}  // namespace zkd::protocol
