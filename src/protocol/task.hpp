// SPDX-License-Identifier: MIT
// The data zkd keeps in znodes (docs/protocol.md §2, §4, §5) and its JSON codec. Pure: no I/O.
//
// Every encoder writes compact JSON with "v":1 first and leaves out absent optional fields.
// Every decoder accepts any bytes: it never throws (short of bad_alloc) and explains a refusal
// in decode_error::message. Unknown fields are ignored; a missing or non-numeric "v" or one
// other than 1 is refused ("unsupported format version N" above 1).
#pragma once

#include <boost/assert/source_location.hpp>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <boost/system/result.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace zkd::protocol {

/// The format of the documents this code reads and writes (their "v" field).
inline constexpr std::int64_t format_version = 1;
/// The protocol format a namespace speaks, /meta's "v" (docs/protocol.md §1): 2 since
/// directories carry change logs (§6 "Change logs"), 3 since each client's results have a
/// directory of their own (§2). zkd of an older format refuses a /meta of a newer one, and
/// this code refuses one of an older format: they cannot share a namespace.
inline constexpr std::int64_t protocol_format = 3;
/// Task priorities (§3, §4): 0 lowest, 9 highest, 5 when not given.
inline constexpr int min_priority = 0;
inline constexpr int max_priority = 9;
inline constexpr int default_priority = 5;
/// Largest serialized task (§4); a client may lower the limit, never raise it.
inline constexpr std::size_t max_task_bytes = std::size_t{512} * 1024;
/// Largest serialized result (§5).
inline constexpr std::size_t max_result_bytes = std::size_t{512} * 1024;
/// Deepest JSON nesting a decoder accepts (the whole document, `args` and `value` included).
inline constexpr std::size_t max_json_depth = 64;
/// Longest task type (§4).
inline constexpr std::size_t max_task_type_length = 128;
/// Most shards /meta may declare; more is taken for garbage.
inline constexpr std::int64_t max_shards = 4096;
/// Most starts a task may allow (`max_attempts`, §3): every writer and reader checks 1 to this.
inline constexpr int max_attempts_limit = 1000;

/// Parses JSON text with the protocol's one nesting limit (max_json_depth, plus
/// `extra_levels` for a wrapper of the caller's own, such as an array of several tasks):
/// every reader of zkd data and of users' args goes through it, so a document one part of
/// zkd accepts is never refused or cut short by another. Never throws on bad input.
boost::json::value parse_json(
    std::string_view text, boost::system::error_code& ec, std::size_t extra_levels = 0
);

/// JSON text of `v`, as Boost.JSON writes it but for numbers with a fraction, written the
/// way JSON users expect: the shortest text that reads back to the same double, in plain
/// notation while that is shorter (0.4, 12.5, 1e-07; a whole number keeps ".0", 3.0, so
/// that it reads back as a double). Every writer of zkd data and output goes through it.
std::string to_text(const boost::json::value& v);
std::string to_text(const boost::json::object& o);

/// Why a decoder refused its input.
struct decode_error {
    std::string message;
    std::string field{};  ///< the member at fault, when validate() names one ("type", "args", ...)

    friend bool operator==(const decode_error&, const decode_error&) = default;
};

/// Thrown by codec_result::value() on an error (found by ADL from boost::system::result).
[[noreturn]] void throw_exception_from_error(
    const decode_error& e, const boost::source_location& loc
);

template <class T>
using codec_result = boost::system::result<T, decode_error>;

// --- states ----------------------------------------------------------------------------------

/// What a client sees of a task (§6): where it is, or the state of its result.
enum class task_state {
    pending,
    assigned,
    running,
    succeeded,
    failed,
    timed_out,
    cancelled,
    lost,
    unknown,
    delayed,  ///< waiting in the delayed tree for its time (§4.3): a delayed task or a retry
};

/// "pending", "timed_out", ...
std::string_view to_string(task_state s) noexcept;
std::optional<task_state> parse_task_state(std::string_view s) noexcept;
/// True for the states a result can hold: succeeded, failed, timed_out, cancelled, lost.
bool is_result_state(task_state s) noexcept;

// --- task (§4) -------------------------------------------------------------------------------

/// A task as its client submitted it (§4): what the master places and a worker runs, the
/// same in every node the task passes through. A bundle (§4.1) is one task node holding
/// several tasks of one type: `bundle` holds each one's `args`. A client fills
/// `submitted_ms` and `client` when it submits (roles::task_client).
struct task_spec {
    std::string type{};
    boost::json::value args{};                 ///< any JSON; null when absent (and in a bundle)
    std::vector<boost::json::value> bundle{};  ///< a bundle's tasks' args; empty: not a bundle
    int priority = default_priority;           ///< min_priority (lowest) to max_priority (highest)
    /// 0: none. Not bounded above: clamp before adding it to a time point.
    std::chrono::milliseconds timeout{0};
    int max_attempts = 3;
    std::int64_t submitted_ms = 0;
    std::string client{};  ///< the submitting client's id (8 hex digits); empty when absent
    /// The fields of delayed tasks and retries (§4.3), as read and written back as they are:
    /// those a submit sets (`due_ms`, `retries`, `backoff_ms`, `backoff_max_ms`;
    /// protocol::set_submit_fields) and those a worker's retry writes into the task's next
    /// try (`try`, `errors`; protocol::plan_retry). Neither assignment nor progress: stamp()
    /// keeps them byte for byte. protocol/delay.hpp reads and makes them.
    boost::json::object timing{};
    /// A bundle's `entry_results` (§4.1): its client reads a task's result from a node of the
    /// task's own when the worker publishes one early (§6 T4e). Written only for a bundle and
    /// only when true; anything but `true` reads as false.
    bool entry_results = false;

    friend bool operator==(const task_spec&, const task_spec&) = default;
};

/// A task node's assignment (§4): the try the task is on and who holds it. The master's T2
/// writes all four; a client's direct placement (§6 T1) `assigned_ms` and `worker` only; a
/// pending node holds at most `attempt` (once requeued, T6).
struct assignment {
    /// The ordinal of the try the task is on: 1 when submitted, one more each time T6
    /// requeues it. Written when above 1 or when the task is assigned(). 0 only in a stamp
    /// (never decoded): left out although assigned, as a direct placement does (§6 T1;
    /// readers take it as 1).
    int attempt = 1;
    std::int64_t epoch = 0;        ///< the assigning master's epoch; 0: no master assigned it
    std::int64_t assigned_ms = 0;  ///< 0: absent
    std::string worker{};          ///< the member holding it; empty: absent

    /// True when any of epoch, assigned_ms and worker is there.
    [[nodiscard]] bool assigned() const noexcept {
        return epoch != 0 || assigned_ms != 0 || !worker.empty();
    }
    friend bool operator==(const assignment&, const assignment&) = default;
};

/// What the worker holding an assignment writes into its node (§4, T3): the running mark and
/// the latest progress report.
struct progress {
    std::int64_t running_ms = 0;  ///< when the mark was first written; 0: absent (not running)
    /// The latest report: a fraction in [0, 1] (a bundle's: the mean over its tasks), or -1
    /// when there is none (then no `progress` member is written).
    double fraction = -1;
    std::string message{};   ///< the latest report's message
    std::int64_t at_ms = 0;  ///< when the write that carried it was made

    friend bool operator==(const progress&, const progress&) = default;
};

/// The data of a task node, /pending/<s>/<tid> or /assign/<member>/<tid> (§4): the task as
/// submitted, its assignment, its worker's progress. One JSON object holds the three parts'
/// members side by side (encode() writes the task's first, then the assignment's, then the
/// progress'); stamp() rewrites one part of an encoded node without decoding the rest.
struct task_node {
    task_spec task{};
    assignment assigned{};
    progress run{};

    friend bool operator==(const task_node&, const task_node&) = default;
};

/// What the master keeps of a pending node it read and validated, beside the node's bytes:
/// all that placement and its results need (it never encodes the task again, stamp() does).
struct task_head {
    std::string type;
    int priority = default_priority;
    std::size_t bundle = 0;  ///< tasks in the bundle; 0: a plain task
    int attempt = 1;
    std::int64_t submitted_ms = 0;

    friend bool operator==(const task_head&, const task_head&) = default;
};
task_head head_of(const task_node& n);

/// True for a non-empty type of at most 128 characters from [A-Za-z0-9_.:-].
bool is_valid_task_type(std::string_view type) noexcept;
/// Checks the rules decode_task_node() enforces of the task: type, priority, timeout,
/// attempts, and `args` (each bundled task's too, at most max_bundle_tasks of them) that will
/// decode (finite numbers, nesting within max_json_depth - 1).
codec_result<void> validate(const task_spec& t);
/// validate() of the task, and an attempt of at least 1.
codec_result<void> validate(const task_node& n);

/// The task as submitted: no assignment or progress members. Infinite numbers (which JSON
/// cannot hold) in `args` are written as null.
std::string encode(const task_spec& t);
/// The whole node: the task's members, then the assignment's (those present, as
/// assignment::attempt says), then the progress' (running_ms when not 0, progress when its
/// fraction is not negative).
std::string encode(const task_node& n);
/// Any task node's data, pending or assigned.
codec_result<task_node> decode_task_node(std::string_view data);
/// decode_task_node() for the node of the task `tid`: also an error when its `bundle` does
/// not hold as many tasks as the id says (a plain id: none; §4.1).
codec_result<task_node> decode_task_node(std::string_view tid, std::string_view data);
/// True when an encoded task is within `limit`, itself capped at max_task_bytes.
bool task_size_ok(std::string_view encoded, std::size_t limit = max_task_bytes) noexcept;

/// `encoded_task` (a task node's data, from any writer: members in any order, whitespace,
/// stamped before or not) with its assignment members (`attempt`, `epoch`, `assigned_ms`,
/// `worker`) replaced by `a`'s, as encode() writes them; every other member is kept byte for
/// byte, `args` and `bundle` untouched (never decoded nor encoded again). The output holds the
/// task's members first, then the assignment's, then the progress' (so that stamping a node
/// encode() wrote gives what encode() writes of the stamped node). An error when the data is
/// not a JSON object; the members' values are not checked (decode the node for that).
codec_result<std::string> stamp(std::string_view encoded_task, const assignment& a);
/// As above for the progress members (`running_ms`, `progress`): the worker's writes (T3).
codec_result<std::string> stamp(std::string_view encoded_task, const progress& p);

// --- result (§5) -----------------------------------------------------------------------------

/// The error codes of §5, the one list of them (handlers::codes is this namespace). Decoding
/// accepts any other non-empty code too (a newer writer may add some).
namespace codes {
inline constexpr std::string_view handler_error = "handler_error";
inline constexpr std::string_view unknown_type = "unknown_type";
inline constexpr std::string_view bad_args = "bad_args";
inline constexpr std::string_view malformed_task = "malformed_task";
inline constexpr std::string_view result_too_large = "result_too_large";
inline constexpr std::string_view timeout = "timeout";
inline constexpr std::string_view cancelled = "cancelled";
inline constexpr std::string_view attempts_exhausted = "attempts_exhausted";
/// An exec type's program wrote more than its max-output (docs/exec.md); it was killed.
inline constexpr std::string_view output_too_large = "output_too_large";
/// An exec type's program went over its memory-limit (docs/exec.md "Limits").
inline constexpr std::string_view memory_limit = "memory_limit";
/// An exec type's program used up its CPU time (cpu-limit).
inline constexpr std::string_view cpu_limit = "cpu_limit";
/// An exec type's program could not start a process (max-processes).
inline constexpr std::string_view process_limit = "process_limit";
/// An exec type's program could not open a file (max-open-files).
inline constexpr std::string_view open_files_limit = "open_files_limit";
}  // namespace codes

/// The `error` of a result (`{"code":c,"message":m}`); a handler's failure (handlers::handler_error
/// is this type).
struct task_error {
    std::string code;  ///< one of codes, or a newer writer's
    std::string message;

    friend bool operator==(const task_error&, const task_error&) = default;
};

/// What value() of a boost::system::result holding a task_error throws (a handler's result,
/// handlers::handler_result).
class task_error_exception : public std::runtime_error {
public:
    /// what() is "<code>: <message>".
    explicit task_error_exception(task_error e);
    [[nodiscard]] const task_error& error() const noexcept { return error_; }

private:
    task_error error_;
};

/// Found by ADL from boost::system::result::value(): throws task_error_exception.
[[noreturn]] void throw_exception_from_error(
    const task_error& e, const boost::source_location& loc
);

/// True for the thirteen codes of §5.
bool is_known_error_code(std::string_view code) noexcept;

struct task_result {
    std::string task;                          ///< the task id (a bundle's: the bundle id)
    task_state state = task_state::succeeded;  ///< one of is_result_state()
    boost::json::value value;                  ///< succeeded: the handler's JSON
    std::optional<task_error> error;           ///< required unless succeeded
    int attempt = 0;                           ///< 0: absent
    std::string worker;                        ///< empty: absent
    std::int64_t started_ms = 0;               ///< 0: absent
    std::int64_t finished_ms = 0;              ///< 0: absent
    /// A retried task's last try (§4.3 "try"), 1 for the first; 0: absent (never retried).
    int try_number = 0;
    /// The earlier tries' errors (§4.3 "errors"), oldest first, as the worker wrote them.
    boost::json::array errors;
    /// A bundle's result as its worker writes it (§5.1): one per bundled task, in order, each
    /// with only state, value and error. Empty: the result applies to every task of it.
    std::vector<task_result> bundle;
    /// The bundled tasks whose results clients have consumed (§6 T5), ascending.
    std::vector<std::size_t> consumed;
    /// The bundled tasks published early in result nodes of their own (§6 T4e), ascending:
    /// a reader takes those tasks' results from their own nodes, never from `bundle`.
    std::vector<std::size_t> published;

    friend bool operator==(const task_result&, const task_result&) = default;
};

/// The result of the `index`-th task of a bundle, from the bundle's result, with `task` set
/// to `id`: its entry of `bundle`, or (no entries) the whole result. An error when `bundle`
/// has entries but not that one.
codec_result<task_result> bundled_result(
    const task_result& whole, std::size_t index, std::string id
);

/// Sums up a bundle's result `r` from its entries `r.bundle` (§5.1), as every writer of one
/// does: all succeeded, `succeeded` with a null value; all in one other state, that state
/// with the first entry's error; else `failed` with `handler_error` ("k of n tasks of the
/// bundle did not succeed"). Sets `state`, `value` and `error`; nothing when `r.bundle` is
/// empty.
void summarize_bundle(task_result& r);

/// Checks what decode_result() requires, and that `value` will decode (finite numbers, nesting
/// within max_json_depth - 1): a worker turns a failure here into a `failed` result.
codec_result<void> validate(const task_result& r);
/// Checks one entry of a bundle's result (state, value, error) as validate() does, its value
/// sitting three levels down (the result, its `bundle` array, the entry).
codec_result<void> validate_bundled(const task_result& entry);
/// One entry of a bundle's result as §5.1 writes it: `state`, and `value` (succeeded) or
/// `error`; nothing else of `entry` is written.
boost::json::object encode_entry(const task_result& entry);
/// An entry as encode_entry() writes it (as decode_result() reads the entries of `bundle`).
codec_result<task_result> decode_entry(const boost::json::object& entry);
/// `value` is written only for succeeded; `error` whenever present.
std::string encode(const task_result& r);
/// Requires `task`, a result state, and an `error` with a code unless succeeded.
codec_result<task_result> decode_result(std::string_view data);
/// True when an encoded result is within max_result_bytes.
bool result_size_ok(std::string_view encoded) noexcept;

// --- members (§2: /election, /master, /workers) ----------------------------------------------

/// The data of a member's node. /election children use id, host, pid; /master adds epoch,
/// since_ms, throughput, max_pending and direct; /workers adds capacity, types and started_ms.
struct member_info {
    std::string id;
    std::string host;
    std::int64_t pid = 0;
    std::optional<int> capacity;        ///< workers
    std::vector<std::string> types;     ///< workers; sorted and unique once decoded
    std::int64_t started_ms = 0;        ///< workers; 0: absent
    std::optional<std::int64_t> epoch;  ///< master
    std::int64_t since_ms = 0;          ///< master; 0: absent
    bool draining = false;              ///< workers: shutting down, takes no new tasks
    std::optional<double> throughput;   ///< master: tasks finished per second, last minute
    /// master: the bound on pending task nodes clients keep to (docs/protocol.md §7 "Client");
    /// 0: no bound; nullopt: not said (a master before the bound: no bound either)
    std::optional<std::int64_t> max_pending;
    /// workers: tasks run side by side (the compute pool's threads); nullopt: not said (a worker
    /// before the field), taken as 1 by placement (docs/protocol.md §7)
    std::optional<int> threads;
    /// master: whether clients may place tasks on workers themselves (docs/protocol.md §6 T1
    /// "Direct placement"); written only when false (absent, as from an older master: yes)
    bool direct = true;
    /// master: the workers it found holding assignments they did not start (docs/protocol.md
    /// §7 "Stalled workers"), sorted; clients placing directly skip them. Written only when
    /// not empty; at most max_suspects_named.
    std::vector<std::string> suspects;
    /// workers: types of `types` it cannot run now (a served type whose program keeps failing
    /// to start, docs/exec.md "Crashes, crash loops and health"), sorted; placement skips the
    /// worker for them. Written only when not empty.
    std::vector<std::string> unhealthy;
    /// workers and master: the rules beyond the protocol's format that the member follows
    /// (docs/protocol.md §2 "Features"), sorted; /master's are those the master and every
    /// live worker it has read follow. Written only when not empty; readers ignore names
    /// they do not know.
    std::vector<std::string> features;

    friend bool operator==(const member_info&, const member_info&) = default;
};

/// A feature (member_info::features): the member follows the rules of early results
/// (docs/protocol.md §6 T4e): a worker publishes a bundle's finished tasks on their own, a
/// master keeps a bundle's `published` through requeue, cancel and reject. Clients make
/// automatic bundles only when /master names it (§4.1 "Automatic bundles").
inline constexpr std::string_view feature_entry_results = "entry_results";
/// The features this zkd follows, sorted: what its workers and master name.
std::vector<std::string> own_features();
/// Most features a node may name, each 1 to 64 bytes.
inline constexpr std::size_t max_features = 64;

/// Most suspects /master names (the rest are left out: clients may then place on them).
inline constexpr std::size_t max_suspects_named = 1000;

/// Writes id, host, pid, and whichever other fields are present (types with a capacity).
std::string encode(const member_info& m);
/// Any member node: requires a non-empty `id`.
codec_result<member_info> decode_member(std::string_view data);
/// A /workers node: also requires `capacity` >= 0 and `types`, an array of valid task types.
codec_result<member_info> decode_worker(std::string_view data);
/// The /master node: also requires `epoch` >= 1.
codec_result<member_info> decode_master(std::string_view data);

// --- /meta, /epoch, /cancel/<tid> ------------------------------------------------------------

struct meta_info {
    std::uint32_t pending_shards = 16;
    std::uint32_t result_shards = 16;
    std::int64_t created_ms = 0;

    friend bool operator==(const meta_info&, const meta_info&) = default;
};

/// Writes "v": protocol_format.
std::string encode(const meta_info& m);
/// Requires "v" to be protocol_format (an older namespace's /meta is refused, saying so) and
/// both shard counts, each from 1 to max_shards.
codec_result<meta_info> decode_meta(std::string_view data);

/// The data of /epoch; the epoch itself is the node's data version.
struct epoch_info {
    std::string master;  ///< empty: absent (no master yet)
    std::int64_t since_ms = 0;

    friend bool operator==(const epoch_info&, const epoch_info&) = default;
};

std::string encode(const epoch_info& e);
codec_result<epoch_info> decode_epoch(std::string_view data);

/// The data of /cancel/<tid>.
struct cancel_info {
    std::int64_t requested_ms = 0;

    friend bool operator==(const cancel_info&, const cancel_info&) = default;
};

std::string encode(const cancel_info& c);
codec_result<cancel_info> decode_cancel(std::string_view data);

// --- a directory's change log (/pending/<s>, /assign/<member>) -----------------------------

/// Most entries a change log may hold (a transaction holds at most 1,000 ops).
inline constexpr std::size_t max_log_entries = 1000;
/// Most bytes of children's data (as JSON strings) the change logs of one transaction carry
/// together; later children go by name only, and so do children past what keeps the
/// transaction under ZooKeeper's request limit (roles::max_txn_bytes). Not more: ZooKeeper
/// keeps its last 500 transactions in memory, and with 256 KiB a burst of full T1s took
/// about 225 MB more of its heap, enough to kill a 256 MB server at 150,000 pending tasks
/// (docs/performance.md, "One submit transaction in flight").
inline constexpr std::size_t max_log_inline_bytes = std::size_t{64} * 1024;

/// A child a transaction created, as its directory's change log names it.
struct log_entry {
    std::string name;
    std::optional<std::string> data;  ///< the child's data, when it came along
    /// A delayed shard's entry: the child's due time (§4.3); nullopt elsewhere, or when a
    /// writer gave none (the node's data says it).
    std::optional<std::int64_t> due_ms{};

    friend bool operator==(const log_entry&, const log_entry&) = default;
};

/// The data of a directory readers follow by its data watch (§6 "Change logs"): the children
/// the last transaction that created any there created, in order.
struct change_log {
    std::vector<log_entry> created;

    friend bool operator==(const change_log&, const change_log&) = default;
};

std::string encode(const change_log& log);
/// Requires "created": an array of at most max_log_entries objects, each with a "name" that
/// is a valid child name (1 to 255 bytes, no '/') and, optionally, "data", a string.
codec_result<change_log> decode_change_log(std::string_view data);

/// For argument checks in handlers: `v` as an int64 if it is an integral JSON number (an
/// int64, a uint64 up to INT64_MAX, or a double holding an integer of magnitude up to 2^53,
/// since "5.0" and "5e3" parse as doubles); nullopt otherwise.
[[nodiscard]] std::optional<std::int64_t> as_int64(const boost::json::value& v) noexcept;

}  // namespace zkd::protocol
