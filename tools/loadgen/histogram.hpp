// SPDX-License-Identifier: MIT
// A log-bucketed latency histogram in the manner of HdrHistogram: fixed memory, constant-time
// recording, and a bounded relative error for every value it can hold.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace zkd::loadgen {

/// Counts unsigned 64-bit values (zkd-loadgen records microseconds) in buckets whose width
/// grows with the value: values below 2^sub_bucket_bits are exact, larger ones land in one
/// of 2^(sub_bucket_bits - 1) equal buckets per power of two, so a bucket's width is at most
/// value / 2^(sub_bucket_bits - 1): with the default 8 bits, a reported value is within
/// 1/128 (0.8 %) of the recorded one. Every uint64 value fits; min, max, count and the sum
/// are kept exactly.
///
/// Thread safety: none (a plain value type; merge() copies of per-thread histograms).
class log_histogram {
public:
    /// Bits of exactly counted values (and of precision above them); from 2 to 16.
    explicit log_histogram(unsigned sub_bucket_bits = 8)
        : bits_(std::clamp(sub_bucket_bits, 2U, 16U)), counts_(bucket_count(bits_), 0) {}

    /// Counts `value` (`n` times).
    void record(std::uint64_t value, std::uint64_t n = 1) noexcept {
        if (n == 0) {
            return;
        }
        counts_[index_of(value)] += n;
        count_ += n;
        sum_ += static_cast<long double>(value) * static_cast<long double>(n);
        min_ = std::min(min_, value);
        max_ = std::max(max_, value);
    }

    /// Adds every count of `other`. Both must have the same sub_bucket_bits; a histogram
    /// with other bits is added value by value at its buckets' highest equivalent values.
    void merge(const log_histogram& other) {
        if (other.bits_ == bits_) {
            for (std::size_t i = 0; i < counts_.size(); ++i) {
                counts_[i] += other.counts_[i];
            }
            count_ += other.count_;
            sum_ += other.sum_;
            if (other.count_ > 0) {
                min_ = std::min(min_, other.min_);
                max_ = std::max(max_, other.max_);
            }
            return;
        }
        for (std::size_t i = 0; i < other.counts_.size(); ++i) {
            if (other.counts_[i] > 0) {
                record(std::clamp(other.highest_in(i), other.min_, other.max_), other.counts_[i]);
            }
        }
    }

    /// Forgets every value.
    void reset() noexcept {
        std::fill(counts_.begin(), counts_.end(), 0);
        count_ = 0;
        sum_ = 0;
        min_ = std::numeric_limits<std::uint64_t>::max();
        max_ = 0;
    }

    [[nodiscard]] std::uint64_t count() const noexcept { return count_; }
    /// The smallest value recorded (0 when empty).
    [[nodiscard]] std::uint64_t min() const noexcept { return count_ == 0 ? 0 : min_; }
    /// The largest value recorded (0 when empty).
    [[nodiscard]] std::uint64_t max() const noexcept { return max_; }
    /// The exact mean (0 when empty).
    [[nodiscard]] double mean() const noexcept {
        return count_ == 0 ? 0.0 : static_cast<double>(sum_ / static_cast<long double>(count_));
    }
    [[nodiscard]] unsigned sub_bucket_bits() const noexcept { return bits_; }

    /// The value at quantile `q` (0..1, clamped): the highest value equivalent to the
    /// ceil(q * count)-th smallest recorded value (at least the first), clamped to
    /// [min(), max()]; so value_at(1) is max() and value_at(0) is min(). 0 when empty.
    [[nodiscard]] std::uint64_t value_at(double q) const noexcept {
        if (count_ == 0) {
            return 0;
        }
        q = std::isnan(q) ? 0.0 : std::clamp(q, 0.0, 1.0);
        auto rank = static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(count_)));
        rank = std::clamp<std::uint64_t>(rank, 1, count_);
        std::uint64_t seen = 0;
        for (std::size_t i = 0; i < counts_.size(); ++i) {
            seen += counts_[i];
            if (seen >= rank) {
                return std::clamp(highest_in(i), min_, max_);
            }
        }
        return max_;
    }

    /// The cumulative distribution: for each non-empty bucket in increasing order, its
    /// highest equivalent value (clamped to [min(), max()]) and the fraction of values at or
    /// below it. The last point is (max(), 1). Empty when nothing was recorded.
    [[nodiscard]] std::vector<std::pair<std::uint64_t, double>> cdf() const {
        std::vector<std::pair<std::uint64_t, double>> out;
        std::uint64_t seen = 0;
        for (std::size_t i = 0; i < counts_.size(); ++i) {
            if (counts_[i] == 0) {
                continue;
            }
            seen += counts_[i];
            out.emplace_back(
                std::clamp(highest_in(i), min_, max_),
                static_cast<double>(seen) / static_cast<double>(count_)
            );
        }
        return out;
    }

    /// The bucket `value` falls in (exposed for tests).
    [[nodiscard]] std::size_t index_of(std::uint64_t value) const noexcept {
        const std::uint64_t exact = std::uint64_t{1} << bits_;
        if (value < exact) {
            return static_cast<std::size_t>(value);
        }
        const unsigned top = static_cast<unsigned>(std::bit_width(value)) - 1;  // >= bits_
        const unsigned mantissa = bits_ - 1;
        const std::uint64_t sub =
            (value >> (top - mantissa)) & ((std::uint64_t{1} << mantissa) - 1);
        return static_cast<std::size_t>(
            exact + (std::uint64_t{top} - bits_) * (std::uint64_t{1} << mantissa) + sub
        );
    }

    /// The smallest value of bucket `i` (exposed for tests).
    [[nodiscard]] std::uint64_t lowest_in(std::size_t i) const noexcept {
        const std::uint64_t exact = std::uint64_t{1} << bits_;
        if (i < exact) {
            return i;
        }
        const unsigned mantissa = bits_ - 1;
        const std::uint64_t per_octave = std::uint64_t{1} << mantissa;
        const std::uint64_t octave = (i - exact) / per_octave;  // 0: values of bit width bits_+1
        const std::uint64_t sub = (i - exact) % per_octave;
        const unsigned top = static_cast<unsigned>(octave) + bits_;
        return (per_octave + sub) << (top - mantissa);
    }

    /// The largest value of bucket `i` (exposed for tests).
    [[nodiscard]] std::uint64_t highest_in(std::size_t i) const noexcept {
        const std::uint64_t exact = std::uint64_t{1} << bits_;
        if (i < exact) {
            return i;
        }
        const unsigned mantissa = bits_ - 1;
        const std::uint64_t per_octave = std::uint64_t{1} << mantissa;
        const unsigned top = static_cast<unsigned>((i - exact) / per_octave) + bits_;
        return lowest_in(i) + ((std::uint64_t{1} << (top - mantissa)) - 1);
    }

    /// Number of buckets (exposed for tests).
    [[nodiscard]] std::size_t buckets() const noexcept { return counts_.size(); }

private:
    static std::size_t bucket_count(unsigned bits) noexcept {
        // Exact values, then one run of 2^(bits-1) buckets per bit width from bits+1 to 64.
        return (std::size_t{1} << bits) + (std::size_t{64} - bits) * (std::size_t{1} << (bits - 1));
    }

    unsigned bits_;
    std::vector<std::uint64_t> counts_;
    std::uint64_t count_ = 0;
    long double sum_ = 0;
    std::uint64_t min_ = std::numeric_limits<std::uint64_t>::max();
    std::uint64_t max_ = 0;
};

}  // namespace zkd::loadgen
