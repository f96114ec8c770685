// SPDX-License-Identifier: MIT
#include "roles/worker/detail/early_results.hpp"

#include <algorithm>

namespace zkd::roles {

early_decision decide_early(
    const std::vector<early_task>& tasks,
    early_task::time_point now,
    std::optional<early_task::time_point> last,
    std::chrono::milliseconds after
) {
    early_decision d;
    const bool running =
        std::any_of(tasks.begin(), tasks.end(), [](const early_task& t) { return t.open; });
    if (!running) {
        return d;  // the bundle's result goes now: it carries them all
    }
    std::optional<early_task::time_point> first;
    for (std::size_t k = 0; k < tasks.size(); ++k) {
        const auto& t = tasks[k];
        if (t.open || !t.final || t.published) {
            continue;
        }
        d.publish.push_back(k);
        first = first ? std::min(*first, t.ended) : t.ended;
    }
    if (!first) {
        return d;
    }
    auto due = *first + after;
    if (last) {
        due = std::max(due, *last + after);  // at most one T4e per `after`
    }
    if (due <= now) {
        return d;
    }
    d.publish.clear();
    d.wake = due;
    return d;
}

std::chrono::milliseconds early_wait_for(std::size_t assignment_bytes) noexcept {
    constexpr std::size_t step = 16 * 1024;
    const auto steps = static_cast<std::chrono::milliseconds::rep>(assignment_bytes / step);
    return early_publish_after + std::chrono::milliseconds(10) * steps;
}

std::vector<std::size_t> fitting_tasks(
    const std::vector<std::size_t>& candidates,
    const std::function<bool(std::size_t)>& alone,
    const std::function<bool(const std::vector<std::size_t>&)>& fits
) {
    std::vector<std::size_t> kept;
    for (const auto k : candidates) {
        if (alone(k)) {
            kept.push_back(k);
        }
    }
    if (kept.empty() || fits(kept)) {
        return kept;
    }
    // The longest prefix that fits: `lo` tasks do (none always), `hi` + 1 do not.
    std::size_t lo = 0;
    std::size_t hi = kept.size() - 1;
    while (lo < hi) {
        const std::size_t mid = lo + (hi - lo + 1) / 2;
        if (fits(std::vector<std::size_t>(
                kept.begin(), kept.begin() + static_cast<std::ptrdiff_t>(mid)
            ))) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    kept.resize(lo);
    return kept;
}

}  // namespace zkd::roles
