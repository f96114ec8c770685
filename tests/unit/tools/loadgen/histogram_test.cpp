// SPDX-License-Identifier: MIT
// zkd-loadgen's log-bucketed histogram: bucket layout, precision, quantiles, merge, CDF.
#include "loadgen/histogram.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace ZKD_UNITY_ID {

using zkd::loadgen::log_histogram;

TEST(LoadgenHistogram, EmptyReportsZeros) {
    const log_histogram h;
    EXPECT_EQ(h.count(), 0U);
    EXPECT_EQ(h.min(), 0U);
    EXPECT_EQ(h.max(), 0U);
    EXPECT_EQ(h.mean(), 0.0);
    EXPECT_EQ(h.value_at(0.5), 0U);
    EXPECT_EQ(h.value_at(1.0), 0U);
    EXPECT_TRUE(h.cdf().empty());
}

TEST(LoadgenHistogram, SmallValuesAreExact) {
    log_histogram h;  // 8 bits: 0..255 exact
    for (std::uint64_t v = 0; v < 256; ++v) {
        EXPECT_EQ(h.index_of(v), v);
        EXPECT_EQ(h.lowest_in(v), v);
        EXPECT_EQ(h.highest_in(v), v);
        h.record(v);
    }
    EXPECT_EQ(h.count(), 256U);
    EXPECT_EQ(h.min(), 0U);
    EXPECT_EQ(h.max(), 255U);
    EXPECT_DOUBLE_EQ(h.mean(), 127.5);
    EXPECT_EQ(h.value_at(0.5), 127U);  // the 128th smallest
    EXPECT_EQ(h.value_at(0.0), 0U);
    EXPECT_EQ(h.value_at(1.0), 255U);
}

TEST(LoadgenHistogram, BucketsTileTheRangeWithoutGapsOrOverlap) {
    const log_histogram h;
    for (std::size_t i = 0; i + 1 < h.buckets(); ++i) {
        ASSERT_LE(h.lowest_in(i), h.highest_in(i)) << i;
        ASSERT_EQ(h.highest_in(i) + 1, h.lowest_in(i + 1)) << i;
        ASSERT_EQ(h.index_of(h.lowest_in(i)), i);
        ASSERT_EQ(h.index_of(h.highest_in(i)), i);
    }
    EXPECT_EQ(h.highest_in(h.buckets() - 1), std::numeric_limits<std::uint64_t>::max());
    EXPECT_EQ(h.index_of(std::numeric_limits<std::uint64_t>::max()), h.buckets() - 1);
}

TEST(LoadgenHistogram, RelativeErrorIsBoundedByTheSubBucketBits) {
    for (const unsigned bits : {4U, 8U, 12U}) {
        const log_histogram h(bits);
        const double bound = 1.0 / static_cast<double>(std::uint64_t{1} << (bits - 1));
        std::mt19937_64 rng(bits);
        for (int i = 0; i < 20000; ++i) {
            const std::uint64_t v = rng() >> (rng() % 64);
            const std::size_t b = h.index_of(v);
            ASSERT_LE(h.lowest_in(b), v);
            ASSERT_GE(h.highest_in(b), v);
            const auto width = static_cast<double>(h.highest_in(b) - h.lowest_in(b));
            ASSERT_LE(width, bound * static_cast<double>(v) + 0.5) << "bits " << bits << " v " << v;
        }
    }
}

TEST(LoadgenHistogram, QuantilesAreOrderedAndWithinPrecision) {
    log_histogram h;
    // 1..100000 microseconds, once each: the quantile q is about q * 100000.
    for (std::uint64_t v = 1; v <= 100000; ++v) {
        h.record(v);
    }
    std::uint64_t prev = 0;
    for (const double q : {0.0, 0.1, 0.5, 0.9, 0.99, 0.999, 1.0}) {
        const auto got = h.value_at(q);
        EXPECT_GE(got, prev) << q;
        prev = got;
        const double want = std::max(1.0, q * 100000.0);
        EXPECT_NEAR(static_cast<double>(got), want, want / 128.0 + 1.0) << q;
    }
    EXPECT_EQ(h.value_at(1.0), 100000U);
    EXPECT_EQ(h.value_at(0.0), 1U);
    EXPECT_EQ(h.value_at(-3.0), 1U);  // clamped
    EXPECT_EQ(h.value_at(7.0), 100000U);
    EXPECT_DOUBLE_EQ(h.mean(), 50000.5);
}

TEST(LoadgenHistogram, OneOutlierIsTheMaxAndOnlyTheTopQuantiles) {
    log_histogram h;
    h.record(1000, 999);
    h.record(5'000'000);
    EXPECT_EQ(h.count(), 1000U);
    EXPECT_LE(h.value_at(0.99), 1000U + 1000U / 128U);
    EXPECT_GE(h.value_at(0.99), 1000U);
    EXPECT_EQ(h.value_at(0.998), h.value_at(0.5));  // rank 998 is still one of the 1000s
    EXPECT_EQ(h.value_at(1.0), 5'000'000U);
    EXPECT_EQ(h.max(), 5'000'000U);
}

TEST(LoadgenHistogram, RecordZeroTimesIsNothing) {
    log_histogram h;
    h.record(42, 0);
    EXPECT_EQ(h.count(), 0U);
    EXPECT_EQ(h.max(), 0U);
}

TEST(LoadgenHistogram, MergeAddsCountsAndExtremes) {
    log_histogram a;
    log_histogram b;
    a.record(10, 3);
    b.record(2'000, 1);
    b.record(3, 1);
    a.merge(b);
    EXPECT_EQ(a.count(), 5U);
    EXPECT_EQ(a.min(), 3U);
    EXPECT_EQ(a.max(), 2'000U);
    EXPECT_DOUBLE_EQ(a.mean(), (30.0 + 2000.0 + 3.0) / 5.0);

    log_histogram coarse(4);
    coarse.record(1'000);
    log_histogram fine;
    fine.merge(coarse);
    EXPECT_EQ(fine.count(), 1U);
    EXPECT_EQ(fine.max(), 1'000U);  // clamped to the source's max

    fine.reset();
    EXPECT_EQ(fine.count(), 0U);
    EXPECT_EQ(fine.value_at(0.5), 0U);
}

TEST(LoadgenHistogram, CdfIsMonotoneAndEndsAtOne) {
    log_histogram h;
    std::mt19937_64 rng(7);
    for (int i = 0; i < 5000; ++i) {
        h.record(100 + rng() % 100000);
    }
    const auto cdf = h.cdf();
    ASSERT_FALSE(cdf.empty());
    for (std::size_t i = 1; i < cdf.size(); ++i) {
        EXPECT_GT(cdf[i].first, cdf[i - 1].first);
        EXPECT_GT(cdf[i].second, cdf[i - 1].second);
    }
    EXPECT_EQ(cdf.back().first, h.max());
    EXPECT_DOUBLE_EQ(cdf.back().second, 1.0);
    EXPECT_GE(cdf.front().first, h.min());
}

}  // namespace ZKD_UNITY_ID
