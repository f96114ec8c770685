// SPDX-License-Identifier: MIT
// The raw ceiling: what the server does with plain pipelined creates and multis through the
// same client library (zkco), measured in the same run as the tasks.
#pragma once

#include "loadgen/mntr.hpp"
#include "zkco/client.hpp"

#include <boost/asio/awaitable.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace zkd::loadgen {

/// How to measure the ceiling.
struct raw_settings {
    std::uint64_t ops = 20'000;    ///< creates per round and measurement
    std::uint64_t window = 1'000;  ///< requests in flight (multis: window / batch, at least 1)
    std::uint64_t batch = 20;      ///< creates per multi
    int rounds = 3;                ///< measured rounds
    int warmup = 1;                ///< rounds before, not reported
    std::size_t payload = 16;      ///< bytes per node
};

/// The ceiling: medians over the measured rounds, and each round.
struct raw_report {
    raw_settings settings;
    double creates_per_s = 0;  ///< pipelined single creates
    double multis_per_s = 0;   ///< pipelined multis of `batch` creates
    std::vector<double> create_rounds;
    std::vector<double> multi_rounds;
    [[nodiscard]] double creates_in_multis_per_s() const noexcept {
        return multis_per_s * static_cast<double>(settings.batch);
    }
};

/// Measures the ceiling with `zk` (connected; its executor runs single-threaded) under the
/// scratch node `base` (an absolute path that must not exist; its parent must), round by
/// round: `ops` pipelined creates of `payload`-byte nodes with `window` in flight, then
/// ops / batch multis of `batch` creates. Everything made is deleted again (in multis, not
/// timed) before it returns, also on failure as far as the session allows. Errors (as text):
/// any failed request.
boost::asio::awaitable<fetched<raw_report>> measure_raw(
    zkco::client& zk, raw_settings s, std::string base
);

/// The median of `v` (0 when empty).
double median(std::vector<double> v);

}  // namespace zkd::loadgen
