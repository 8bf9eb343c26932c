#pragma once
// KVCache<T, B, NH, S, HS> (or <T, B, S, HS> for a single head): the keys and values of the
// positions seen so far, one basic_kv_cache over linear storage (RingKVCache is the same cache over
// a ring, nn/ring_kv_cache.hpp), kept so that decoding the next token costs O(context) instead of a
// rerun of the whole prefix. Queries are never kept: each one is used once, by its own position.
//
// The capacity S is a type-level dim, and every dim is static: the storage is allocated once,
// its size known at compile time (KVCache::bytes). The filled length is a run-time number per
// batch row, so rows may hold different lengths (a ragged batch). Appending n positions writes
// n rows per batch row and copies nothing else; appending past the capacity throws
// cache_overflow and leaves the cache as it was.
//
//   shaped::nn::KVCache<float, B, NH, dim<"S", 1024>, HS> cache;
//   cache.append(k, v);                 // k, v: (B, NH, n, HS)
//   auto keys = cache.keys();           // (B, NH, S, HS), S dynamic: the filled prefix

#include <shaped/kernels.hpp>
#include <shaped/nn/diagnostics.hpp>
#include <shaped/tensor.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace shaped::nn {

// Thrown by an append that would pass a cache's capacity; the message names the capacity and the
// request.
class cache_overflow : public std::length_error {
public:
    using std::length_error::length_error;
};

namespace detail {
// A cache's dims: static, three or four of them.
template <class... Ds>
inline constexpr bool cache_layout = [] {
    if constexpr ((Dim<Ds> && ...)) return (sizeof...(Ds) == 3 || sizeof...(Ds) == 4) && (Ds::is_static && ...);
    else return false;
}();

// The dims of new keys or values meet the cache's, except along time (any name, any extent).
template <class CacheDims, class NewDims>
inline constexpr bool append_fits = [] {
    if constexpr (CacheDims::rank != NewDims::rank)
        return false;
    else
        return []<std::size_t... I>(std::index_sequence<I...>) {
            return ((I == CacheDims::rank - 2 || can_meet<dim_at<I, CacheDims>, dim_at<I, NewDims>>) && ...);
        }(std::make_index_sequence<CacheDims::rank>{});
}();

// The check of new keys or values whose dims do not fit; void where both fit.
template <class CacheDims, class K, class V>
using append_misfit_t =
    std::conditional_t<!append_fits<CacheDims, dims_of<K>>, diag::cache_append_dims<CacheDims, dims_of<K>>,
                       std::conditional_t<!append_fits<CacheDims, dims_of<V>>, diag::cache_append_dims<CacheDims, dims_of<V>>, void>>;

// The run-time half of an append's checks of new keys and values, for the cache `who` of dims
// Ds...: the extents the types leave open, and no batch row taking more than the new positions.
template <class K, class V, Dim... Ds, std::size_t Batch>
void check_new_positions(std::string_view who, dims<Ds...>, const K& k, const V& v,
                         const std::array<std::size_t, Batch>& counts) {
    constexpr std::size_t rank = sizeof...(Ds);
    constexpr std::array<std::string_view, rank> names{Ds::name.view()...};
    constexpr std::array<std::size_t, rank> extents{Ds::extent...};
    const std::string op = shaped::detail::message({who, "::append"});
    const auto keys = k.extents();
    const auto values = v.extents();
    for (std::size_t i = 0; i < rank; ++i) {
        if (i == rank - 2) continue;
        if (keys[i] != extents[i])
            shaped::detail::throw_dims_do_not_meet(op, SHAPED_RULE_CACHE_APPEND_DIMS, "cache", names[i], extents[i],
                                                   "new keys'", names[i], keys[i]);
        if (values[i] != extents[i])
            shaped::detail::throw_dims_do_not_meet(op, SHAPED_RULE_CACHE_APPEND_DIMS, "cache", names[i], extents[i],
                                                   "new values'", names[i], values[i]);
    }
    const std::size_t n = keys[rank - 2];
    if (values[rank - 2] != n)
        shaped::detail::throw_dims_do_not_meet(op, "the new keys and values hold different numbers of positions", "keys",
                                               dim_at<rank - 2, dims_of<K>>::name.view(), n, "values",
                                               dim_at<rank - 2, dims_of<V>>::name.view(), values[rank - 2]);
    for (std::size_t b = 0; b < Batch; ++b) {
        if (counts[b] > n)
            throw shape_error(shaped::detail::message(
                {"shaped::", op, ": batch row ", b, " takes ", counts[b], " of ", n, " new positions"}));
    }
}
}  // namespace detail

// ---- one cache over a storage policy -------------------------------------------------------------

// Slots [begin, end) of a row, in the order of the positions they hold.
struct slot_run {
    std::size_t begin, end;
};

// Where a cache keeps its positions, as mdspan keeps a layout apart from its storage: a
// policy's held(length) is how many of a row's positions stay, runs(from, to) the slots of
// positions [from, to) in position order (at most two runs), wraps whether an append can
// overwrite positions (and so never overflows). linear_positions: position p in slot p, up to the
// capacity, past which an append throws cache_overflow (KVCache); ring_positions
// (nn/ring_kv_cache.hpp): position p in slot p % W, the last W kept (RingKVCache).
template <std::size_t Capacity>
struct linear_positions {
    static constexpr bool wraps = false;
    static constexpr std::string_view name = "nn::KVCache";
    static constexpr std::size_t held(std::size_t length) { return length; }
    static constexpr std::array<slot_run, 2> runs(std::size_t from, std::size_t to) {
        return {slot_run{from, to}, slot_run{0, 0}};
    }
};

template <template <std::size_t> class Storage, class T, Dim... Ds>
    requires detail::cache_layout<Ds...>
class basic_kv_cache {
public:
    using value_type = T;
    using dims_type = dims<Ds...>;
    static constexpr std::size_t rank = sizeof...(Ds);
    static constexpr bool has_heads = rank == 4;
    using batch_dim = dim_at<0, dims_type>;
    using capacity_dim = dim_at<rank - 2, dims_type>;
    using head_size_dim = dim_at<rank - 1, dims_type>;
    // The positions held: the capacity's name, with the most any row holds as its extent.
    using length_dim = dynamic_of<capacity_dim>;
    using prefix_view = view_for<const T, replace_at<rank - 2, length_dim, dims_type>>;
    using storage_type = Storage<capacity_dim::extent>;
    using slot_run = nn::slot_run;

    static constexpr std::size_t batch = batch_dim::extent;
    // The positions a row can hold (a ring's window).
    static constexpr std::size_t capacity = capacity_dim::extent;
    // The storage of keys and values together, allocated at construction.
    static constexpr std::size_t bytes = 2 * (Ds::extent * ...) * sizeof(T);

    // One number per batch row.
    using lengths_type = std::array<std::size_t, batch>;

    // Empty, with all its storage allocated.
    basic_kv_cache() = default;

    // The positions each batch row has seen, held or not: where its next position stands (the
    // start its positions are encoded from).
    const lengths_type& lengths() const { return lengths_; }
    // The longest row's length.
    std::size_t length() const { return *std::max_element(lengths_.begin(), lengths_.end()); }
    bool empty() const { return length() == 0; }
    // The positions each batch row holds, in slots 0 .. held - 1.
    lengths_type held() const {
        lengths_type h;
        for (std::size_t b = 0; b < batch; ++b) h[b] = storage_type::held(lengths_[b]);
        return h;
    }

    // Forgets every position; the storage stays allocated.
    void reset() { lengths_.fill(0); }

    // Appends the keys and values of n new positions to every batch row. k and v have the
    // cache's dims with n in place of the capacity: (B, NH, n, HS) or (B, n, HS). With counts
    // (a ragged batch), batch row b takes only the first counts[b] of the n; the rest of its
    // positions is padding and is not stored. A cache that cannot wrap throws cache_overflow
    // past its capacity, and is then as it was.
    template <Expression K, Expression V>
        requires std::is_void_v<detail::append_misfit_t<dims_type, K, V>>
    void append(const K& k, const V& v, std::optional<lengths_type> counts = std::nullopt) {
        const std::size_t n = k.extents()[rank - 2];
        if (!counts) counts.emplace().fill(n);
        // Every check comes before the first write, so that a failed append changes nothing.
        detail::check_new_positions(storage_type::name, dims_type{}, k, v, *counts);
        check_room(*counts);
        write(keys_, k, *counts);
        write(values_, v, *counts);
        for (std::size_t b = 0; b < batch; ++b) lengths_[b] += (*counts)[b];
    }
    // Dims that do not fit pick the overload only declared, whose return type is the failed check.
    template <Expression K, Expression V>
        requires(!std::is_void_v<detail::append_misfit_t<dims_type, K, V>>)
    detail::append_misfit_t<dims_type, K, V> append(const K&, const V&, std::optional<lengths_type> = std::nullopt);
    // After a failed check in the keys' or values' expression: nothing, with no second error.
    template <class K, class V>
        requires any_failed<K, V>
    void append(const K&, const V&, std::optional<lengths_type> = std::nullopt);

    // Slots 0 .. max(held()) - 1 of every row, as they are when taken (after an append, take them
    // again to see the new positions): in position order, except in a ring that has passed its
    // window (attention over every position held, a decoding step's, reads them as they lie).
    // In a ragged batch a row's slots past its own held() are stale: mask them by lengths(). A
    // view reads the cache's storage in place, so it lives no longer than the cache where it stands.
    prefix_view keys() const { return prefix_of(keys_); }
    prefix_view values() const { return prefix_of(values_); }

    // The slots of batch row b's held positions from `position` on, oldest first: at most two
    // runs, the second empty unless the positions wrap round a ring. `position` is one the row
    // holds (at least lengths()[b] - held()[b]), or its length (no slots).
    std::array<slot_run, 2> slots_from(std::size_t b, std::size_t position) const {
        return storage_type::runs(position, lengths_[b]);
    }

    // cache_overflow unless every batch row b has room for counts[b] more positions: what append
    // checks, for a caller that must know before it changes anything (a stack of layers). A ring
    // has room for any number.
    void check_room(const lengths_type& counts) const {
        if constexpr (!storage_type::wraps)
            for (std::size_t b = 0; b < batch; ++b)
                if (lengths_[b] + counts[b] > capacity)
                    throw cache_overflow(shaped::detail::message(
                        {"shaped::", storage_type::name, "::append: ", counts[b],
                         counts[b] == 1 ? " new position" : " new positions", " after the ", lengths_[b],
                         " held in batch row ", b, " would exceed the capacity ",
                         shaped::detail::message_part::dim_extent{capacity_dim::name.view(), capacity}}));
    }

private:
    // Row b's new positions that stay (its last `capacity` at most) go to their slots: one or two
    // strided copies per batch row. The source is read where it lies (a transposed view stays a
    // view); an expression not stored anywhere yet is evaluated once.
    template <class Source>
    void write(Tensor<T, Ds...>& storage, const Source& source, const lengths_type& counts) {
        if constexpr (!Viewable<Source>) {
            write(storage, eval(source), counts);
        } else {
            static_assert(std::is_same_v<value_type_of<Source>, T>,
                          "shaped::nn: a cache appends keys and values of its own element type");
            const auto source_view = view_of(source);
            const view_for<const T, replace_at<rank - 2, length_dim, dims_type>> new_rows(
                source_view.data(), source_view.extents(), source_view.strides());
            for (std::size_t b = 0; b < batch; ++b) {
                const std::size_t kept = std::min(counts[b], capacity);
                if (kept == 0) continue;
                const std::size_t end = lengths_[b] + counts[b];
                auto row = select<batch_dim>(storage, b);
                const auto new_row = select<batch_dim>(new_rows, b);
                std::size_t next = counts[b] - kept;  // the first new position kept, in new_row
                for (const slot_run run : storage_type::runs(end - kept, end)) {
                    if (run.begin == run.end) continue;
                    auto target = slice<capacity_dim>(row, run.begin, run.end);
                    target = slice<length_dim>(new_row, next, next + (run.end - run.begin));
                    next += run.end - run.begin;
                }
            }
        }
    }

    prefix_view prefix_of(const Tensor<T, Ds...>& storage) const {
        const lengths_type h = held();
        auto extents = storage.extents();
        extents[rank - 2] = *std::max_element(h.begin(), h.end());
        return prefix_view(storage.data(), extents, storage.strides());
    }

    // Left unfilled: a slot is written before it is read (the prefix views hold only written
    // ones). A whole context's cache is large beside what one generation writes (stories110M's:
    // 75 MB, of which 128 tokens write 9), and zero-filling it cost a decode of 128 tokens 7%.
    Tensor<T, Ds...> keys_ = Tensor<T, Ds...>::for_overwrite({Ds::extent...});
    Tensor<T, Ds...> values_ = Tensor<T, Ds...>::for_overwrite({Ds::extent...});
    lengths_type lengths_{};
};

// Any other dims stop the compile here, with the dims in the diagnostic's condition. The rejected
// type is a failed check, which the layers it is passed to accept without a second error.
template <class T, class... Ds>
class KVCache : public failed {
    static_assert(detail::cache_layout<Ds...>, "shaped::nn::KVCache: " SHAPED_RULE_CACHE_LAYOUT);
};

template <class T, Dim... Ds>
    requires detail::cache_layout<Ds...>
class KVCache<T, Ds...> : public basic_kv_cache<linear_positions, T, Ds...> {};

namespace detail {
// Whether a cache can wrap round (a ring of a window's positions).
template <class C>
inline constexpr bool is_ring_kv_cache = false;
template <class C>
    requires requires { C::storage_type::wraps; }
inline constexpr bool is_ring_kv_cache<C> = C::storage_type::wraps;
}  // namespace detail

}  // namespace shaped::nn
