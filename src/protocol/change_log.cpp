// SPDX-License-Identifier: MIT
#include "protocol/change_log.hpp"

namespace zkd::protocol {

log_follower::step log_follower::read(dir_stat s, std::optional<std::size_t> created) noexcept {
    if (!base_ || s.czxid != base_->czxid) {
        return step::list;
    }
    const auto moved = static_cast<std::int64_t>(s.cversion) - base_->cversion;
    const auto own = static_cast<std::int64_t>(removed_);
    step next = step::list;
    if (s.version == base_->version && moved == own) {
        next = step::skip;
    } else if (static_cast<std::int64_t>(s.version) == std::int64_t{base_->version} + 1 && created && moved == own + static_cast<std::int64_t>(*created)) {
        next = step::apply;
    }
    if (next != step::list) {
        base_ = s;
        removed_ = 0;
    }
    return next;
}

}  // namespace zkd::protocol
