// SPDX-License-Identifier: MIT
#pragma once

// Following a directory by its change log (docs/protocol.md §6 "Change logs"), with no I/O.
//
// Every transaction that creates children of /pending/<s> or /assign/<member> also sets the
// directory's data to a change log naming them (protocol/task.hpp, change_log). A reader
// lists the directory once, then watches its data instead of its children: its own deletes
// no longer wake it, and a read of the data tells it what was created, often with the data.
// A read may be applied only when nothing else happened since the reader last looked: the
// data version is the next one, and the children's version (cversion, which every create
// and delete of a child moves by one) moved by exactly the log's creates plus the reader's
// own deletes. Anything else (a missed version, the directory made again, a child created
// or deleted by a writer that did not log it, a garbage log) means: list the directory.

#include <cstddef>
#include <cstdint>
#include <optional>

namespace zkd::protocol {

/// What a reader needs of a directory's stat.
struct dir_stat {
    std::int64_t czxid = 0;     ///< tells one incarnation of the directory from the next
    std::int32_t version = 0;   ///< its data version: transactions that logged creates
    std::int32_t cversion = 0;  ///< creates and deletes of its children

    friend bool operator==(const dir_stat&, const dir_stat&) = default;
};

class log_follower {
public:
    enum class step {
        apply,  ///< the read's log holds exactly what changed: add its children
        skip,   ///< nothing changed but the reader's own deletes
        list,   ///< list the directory (then listed())
    };

    /// A listing was answered: the view is as the directory stood at `s`.
    void listed(dir_stat s) noexcept {
        base_ = s;
        removed_ = 0;
    }
    /// The reader's own transaction deleted `n` children of the directory, answered after the
    /// last listing or read was.
    void removed(std::size_t n = 1) noexcept { removed_ += n; }
    /// The directory is gone, or the reader's view of it no longer counts: list next time.
    void forget() noexcept { base_.reset(); }

    /// The directory's data was read at `s`; `created`: how many children its change log
    /// names (nullopt: not a change log).
    [[nodiscard]] step read(dir_stat s, std::optional<std::size_t> created) noexcept;

    [[nodiscard]] bool following() const noexcept { return base_.has_value(); }
    /// The stat the view stands at (the last listing or read applied or skipped).
    [[nodiscard]] const std::optional<dir_stat>& base() const noexcept { return base_; }

private:
    std::optional<dir_stat> base_;
    std::size_t removed_ = 0;
};

}  // namespace zkd::protocol
