// SPDX-License-Identifier: MIT
#include "apps/crack/error.hpp"

#include "apps/crack/plan.hpp"

#include <string>

namespace zkd::crack {

namespace {

class crack_category_impl final : public boost::system::error_category {
public:
    const char* name() const noexcept override { return "zkd.crack"; }
    std::string message(int value) const override {
        switch (static_cast<crack_errc>(value)) {
        case crack_errc::bad_hash:
            return "the hash must be an MD5 digest: 32 hex digits";
        case crack_errc::bad_search:
            return "give either a charset (with a maximum length) or a word list, not both";
        case crack_errc::bad_charset:
            return "the charset must be 1 to 256 distinct characters of valid UTF-8";
        case crack_errc::bad_lengths:
            return "lengths must satisfy 1 <= minimum length <= maximum length <= 16";
        case crack_errc::empty_word_list:
            return "the word list has no words";
        case crack_errc::bad_word:
            return "a word of the list is not valid UTF-8";
        case crack_errc::bad_partitions:
            return "partitions must be 0 (automatic) to " + std::to_string(max_crack_partitions);
        case crack_errc::bad_task_options:
            return "priority must be 0-9, the partition timeout >= 0 and max attempts >= 1";
        case crack_errc::keyspace_too_large:
            return "the keyspace is too large: over " + std::to_string(max_crack_partitions) +
                   " partitions of 2^40 candidates; shorten the maximum length or the charset";
        case crack_errc::job_too_large:
            return "the job is too large: its partitions must fit one ZooKeeper transaction (" +
                   std::to_string(max_crack_multi_bytes) +
                   " bytes); split the word list into smaller lists";
        case crack_errc::garbage_job:
            return "the job node does not hold a crack job";
        case crack_errc::spec_conflict:
            return "the job node of this id describes a different search (an id collision)";
        case crack_errc::job_vanished:
            return "the job node was deleted while it was being followed";
        }
        return "unknown crack error";
    }
};

}  // namespace

const boost::system::error_category& crack_category() noexcept {
    static const crack_category_impl instance;
    return instance;
}

zkco::error_code make_error_code(crack_errc e) noexcept {
    return {static_cast<int>(e), crack_category()};
}

}  // namespace zkd::crack
