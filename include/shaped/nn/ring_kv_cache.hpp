#pragma once
// RingKVCache<T, B, NH, W, HS> (or <T, B, W, HS> for a single head): the KV cache of a layer
// with a sliding window of W positions (Mistral's rolling buffer). It holds each batch row's last
// W positions, position p in slot p % W, so that decoding goes on past W positions in W slots:
// an append never overflows, it overwrites the positions that have left the window.
//
// As in KVCache, every dim is static and the storage allocated once (RingKVCache::bytes), and
// each batch row keeps its own run-time length (a ragged batch). lengths() counts every position
// a row has seen, not only those held: it is where the row's next position stands, the start
// rotary positions are encoded from. Keys are cached as the layer hands them over, already
// rotated at their absolute positions, so they stay right wherever their slot is.
//
//   shaped::nn::RingKVCache<float, B, NKV, dim<"W", 4096>, HS> cache;
//   cache.append(k, v);                 // k, v: (B, NKV, n, HS), any n
//   auto keys = cache.keys();           // (B, NKV, W, HS), W dynamic: the slots held, in slot order

#include <shaped/nn/kv_cache.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <optional>
#include <type_traits>

namespace shaped::nn {

// Any other dims stop the compile here, as KVCache's do.
template <class T, class... Ds>
class RingKVCache : public failed {
    static_assert(detail::cache_layout<Ds...>, "shaped::nn::RingKVCache: " SHAPED_RULE_CACHE_LAYOUT);
};

template <class T, Dim... Ds>
    requires detail::cache_layout<Ds...>
class RingKVCache<T, Ds...> {
public:
    using value_type = T;
    using dims_type = dims<Ds...>;
    static constexpr std::size_t rank = sizeof...(Ds);
    static constexpr bool has_heads = rank == 4;
    using batch_dim = dim_at<0, dims_type>;
    using capacity_dim = dim_at<rank - 2, dims_type>;
    using head_size_dim = dim_at<rank - 1, dims_type>;
    // The slots held: the capacity's name, with the most any row holds as its extent.
    using length_dim = dynamic_of<capacity_dim>;
    using prefix_view = view_for<const T, replace_at<rank - 2, length_dim, dims_type>>;

    static constexpr std::size_t batch = batch_dim::extent;
    // The window: the positions a row holds once it has seen that many.
    static constexpr std::size_t capacity = capacity_dim::extent;
    static constexpr std::size_t bytes = 2 * (Ds::extent * ...) * sizeof(T);

    using lengths_type = std::array<std::size_t, batch>;

    // Slots [begin, end) of a row, in the order of the positions they hold.
    struct slot_run {
        std::size_t begin, end;
    };

    // Empty, with all its storage allocated.
    RingKVCache() = default;

    // The positions each batch row has seen, held or not: where its next position stands.
    const lengths_type& lengths() const { return lengths_; }
    // The longest row's length.
    std::size_t length() const { return *std::max_element(lengths_.begin(), lengths_.end()); }
    bool empty() const { return length() == 0; }
    // The positions each batch row holds: its last min(length, W), in slots 0 .. held - 1.
    lengths_type held() const {
        lengths_type h;
        for (std::size_t b = 0; b < batch; ++b) h[b] = std::min(lengths_[b], capacity);
        return h;
    }

    // Forgets every position; the storage stays allocated.
    void reset() { lengths_.fill(0); }

    // Appends the keys and values of n new positions to every batch row, n any number: a row
    // keeps the last W of the positions it has seen. k and v have the cache's dims with n in
    // place of the window; with counts (a ragged batch), batch row b takes only the first
    // counts[b] of the n.
    template <Expression K, Expression V>
        requires std::is_void_v<detail::append_misfit_t<dims_type, K, V>>
    void append(const K& k, const V& v, std::optional<lengths_type> counts = std::nullopt) {
        const std::size_t n = k.extents()[rank - 2];
        if (!counts) counts.emplace().fill(n);
        detail::check_new_positions("nn::RingKVCache", dims_type{}, k, v, *counts);
        write(keys_, k, *counts);
        write(values_, v, *counts);
        for (std::size_t b = 0; b < batch; ++b) lengths_[b] += (*counts)[b];
    }
    template <Expression K, Expression V>
        requires(!std::is_void_v<detail::append_misfit_t<dims_type, K, V>>)
    detail::append_misfit_t<dims_type, K, V> append(const K&, const V&, std::optional<lengths_type> = std::nullopt);
    template <class K, class V>
        requires any_failed<K, V>
    void append(const K&, const V&, std::optional<lengths_type> = std::nullopt);

    // Slots 0 .. max(held()) - 1 of every row, in slot order, which is position order only until
    // a row has passed W: attention over every position held (a decoding step's) reads them as
    // they lie, since the order of keys does not change it. Past a row's held() they are stale.
    prefix_view keys() const { return prefix_of(keys_); }
    prefix_view values() const { return prefix_of(values_); }

    // The slots of batch row b's held positions from `position` on, oldest first: at most two
    // runs, the second empty unless the positions wrap round the ring. `position` is one the row
    // holds (at least lengths()[b] - held()[b]), or its length (no slots).
    std::array<slot_run, 2> slots_from(std::size_t b, std::size_t position) const {
        return runs(position, lengths_[b]);
    }

    // A ring has room for any number of positions: nothing to check (a stack of layers asks
    // each of its caches before it changes any).
    void check_room(const lengths_type&) const {}

private:
    // The slots of positions [from, to), to - from <= W, in position order.
    static std::array<slot_run, 2> runs(std::size_t from, std::size_t to) {
        const std::size_t first = from % capacity, count = to - from;
        if (first + count <= capacity) return {slot_run{first, first + count}, slot_run{0, 0}};
        return {slot_run{first, capacity}, slot_run{0, first + count - capacity}};
    }

    // Row b's new positions that stay (its last W at most) go to their slots: one or two strided
    // copies per batch row. The source is read where it lies; an expression is evaluated once.
    template <class Source>
    void write(Tensor<T, Ds...>& storage, const Source& source, const lengths_type& counts) {
        if constexpr (!Viewable<Source>) {
            write(storage, eval(source), counts);
        } else {
            static_assert(std::is_same_v<value_type_of<Source>, T>,
                          "shaped::nn::RingKVCache::append: the new keys and values must have the cache's element type");
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
                for (const slot_run run : runs(end - kept, end)) {
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

    Tensor<T, Ds...> keys_;
    Tensor<T, Ds...> values_;
    lengths_type lengths_{};
};

namespace detail {
template <class C>
inline constexpr bool is_ring_kv_cache = false;
template <class T, Dim... Ds>
    requires cache_layout<Ds...>
inline constexpr bool is_ring_kv_cache<RingKVCache<T, Ds...>> = true;
}  // namespace detail

}  // namespace shaped::nn
