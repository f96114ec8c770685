// SPDX-License-Identifier: MIT
// The time zones of this machine for schedules' cron expressions: the TZif files of the tz
// database (tzdata), in $TZDIR or /usr/share/zoneinfo, read once per zone and kept.
#pragma once

#include "schedule/zone.hpp"

namespace zkd::roles {

/// Finds a zone by name among this machine's files; nullptr when there is none (or it is no
/// TZif file: logged). Thread-safe.
schedule::zone_loader system_zones();

}  // namespace zkd::roles
