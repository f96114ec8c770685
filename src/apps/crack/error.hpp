// SPDX-License-Identifier: MIT
// Why a crack job could not be started or followed (the application's own error codes).
#pragma once

#include "zkco/error.hpp"

#include <boost/system/error_category.hpp>

#include <type_traits>

namespace zkd::crack {

/// Why a crack job could not be started or followed. Each message says what to fix.
enum class crack_errc {
    bad_hash = 1,        ///< the hash is not 32 hex digits
    bad_search,          ///< neither or both of a charset and a word list
    bad_charset,         ///< empty, not UTF-8, repeated characters, more than 256 characters
    bad_lengths,         ///< not 1 <= min_len <= max_len <= 16
    empty_word_list,     ///< a word list without words
    bad_word,            ///< a word that is not valid UTF-8 (JSON cannot carry it)
    bad_partitions,      ///< partitions outside 0..max_crack_partitions
    bad_task_options,    ///< priority outside 0..9, a negative timeout, max_attempts < 1
    keyspace_too_large,  ///< more than max_crack_partitions partitions of 2^40 candidates
    job_too_large,       ///< the partitions do not fit one ZooKeeper transaction
    garbage_job,         ///< the job node does not hold a crack job (format 1)
    spec_conflict,       ///< the job node of this id describes another search
    job_vanished,        ///< the job node was deleted while it was being followed
};
/// The category of crack_errc ("zkd.crack"); its messages say what to fix.
const boost::system::error_category& crack_category() noexcept;
/// Makes crack_errc values error_codes (found by ADL).
zkco::error_code make_error_code(crack_errc e) noexcept;

}  // namespace zkd::crack

template <>
struct boost::system::is_error_code_enum<zkd::crack::crack_errc> : std::true_type {};
