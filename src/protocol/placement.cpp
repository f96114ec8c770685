// SPDX-License-Identifier: MIT
#include "protocol/placement.hpp"

#include <algorithm>

namespace zkd::protocol {

std::string_view to_string(placement_policy p) noexcept {
    switch (p) {
    case placement_policy::least_loaded:
        return "least-loaded";
    case placement_policy::round_robin:
        return "round-robin";
    case placement_policy::random:
        return "random";
    }
    return "least-loaded";
}

std::optional<placement_policy> parse_placement_policy(std::string_view s) noexcept {
    for (const auto p :
         {placement_policy::least_loaded, placement_policy::round_robin,
          placement_policy::random}) {
        if (s == to_string(p))
            return p;
    }
    return std::nullopt;
}

bool worker_slot::serves(std::string_view type) const noexcept {
    return std::find(types.begin(), types.end(), type) != types.end();
}

bool worker_slot::takes(std::string_view type) const noexcept {
    return serves(type) && std::find(unhealthy.begin(), unhealthy.end(), type) == unhealthy.end();
}

bool anyone_serves(std::span<const worker_slot> workers, std::string_view type) noexcept {
    return std::any_of(workers.begin(), workers.end(), [&](const worker_slot& w) {
        return w.serves(type);
    });
}

placer::placer(placement_policy policy, std::uint64_t seed) : policy_(policy), rng_(seed) {}

std::optional<std::size_t> placer::next_in_turn(
    std::span<const worker_slot> workers, std::string_view type, int min_free
) const {
    // Two candidates in one pass: the smallest id after last_, and the smallest id overall
    // (the wrap-around). Ids, not positions, so the turn survives workers joining and leaving.
    std::optional<std::size_t> after;
    std::optional<std::size_t> first;
    for (std::size_t i = 0; i < workers.size(); ++i) {
        const auto& w = workers[i];
        if (w.free_slots() < min_free || !w.takes(type))
            continue;
        if (!first || w.id < workers[*first].id)
            first = i;
        if (w.id > last_ && (!after || w.id < workers[*after].id))
            after = i;
    }
    return after ? after : first;
}

std::optional<std::size_t> placer::pick(
    std::span<const worker_slot> workers, std::string_view type, std::string_view batch_mate
) {
    std::optional<std::size_t> chosen;
    switch (policy_) {
    case placement_policy::least_loaded: {
        int most_free = 0;
        std::optional<std::size_t> mate;
        for (std::size_t i = 0; i < workers.size(); ++i) {
            const auto& w = workers[i];
            if (!w.takes(type))
                continue;
            most_free = std::max(most_free, w.free_slots());
            if (!batch_mate.empty() && w.id == batch_mate)
                mate = i;
        }
        if (most_free == 0)
            break;
        if (mate && workers[*mate].threads > 1) {
            const auto& w = workers[*mate];
            if (w.free_slots() > 0 && w.free_slots() >= most_free - (w.threads - 1)) {
                chosen = mate;
                break;
            }
        }
        chosen = next_in_turn(workers, type, most_free);
        break;
    }
    case placement_policy::round_robin:
        chosen = next_in_turn(workers, type, 1);
        break;
    case placement_policy::random: {
        std::size_t eligible = 0;
        for (const auto& w : workers) {
            if (w.free_slots() > 0 && w.takes(type))
                ++eligible;
        }
        if (eligible == 0)
            break;
        auto k = std::uniform_int_distribution<std::size_t>(0, eligible - 1)(rng_);
        for (std::size_t i = 0; i < workers.size(); ++i) {
            if (workers[i].free_slots() > 0 && workers[i].takes(type) && k-- == 0) {
                chosen = i;
                break;
            }
        }
        break;
    }
    }
    if (chosen)
        last_.assign(workers[*chosen].id);
    return chosen;
}

}  // namespace zkd::protocol
