#pragma once
// gather(table, ids): row ids[...] of a (V, C) table for each id, as torch.nn.functional.embedding
// does: ids (...) integers -> (..., C). Lazy, as every operation; it runs as a row copy when
// assigned, each id checked against V first (a shape_error naming the id, its place and V).
// Its derivative adds each row's gradient back into the table's row it came from.

#include <shaped/expr/expression.hpp>

#include <array>
#include <concepts>
#include <cstddef>
#include <utility>

namespace shaped {

template <class Table, class Ids>
class gather_node : public expression_base {
public:
    using value_type = value_type_of<Table>;
    using dims_type = concat_dims<dims_of<Ids>, dims<dim_at<1, dims_of<Table>>>>;
    static constexpr bool owns_storage = false;
    static constexpr std::size_t rank = dims_type::rank;

    // who: the operation's name in messages (a layer names itself).
    template <operand_for<Table> A, operand_for<Ids> B>
    gather_node(A&& table, B&& ids, const char* who = "shaped::gather")
        : table_(std::forward<A>(table)), ids_(std::forward<B>(ids)), who_(who) {}

    std::array<std::size_t, rank> extents() const {
        std::array<std::size_t, rank> e{};
        const auto ids = ids_.extents();
        for (std::size_t i = 0; i + 1 < rank; ++i) e[i] = ids[i];
        e[rank - 1] = table_.extents()[1];
        return e;
    }
    const Table& table() const { return table_; }
    const Ids& ids() const { return ids_; }
    const char* who() const { return who_; }

private:
    Table table_;
    Ids ids_;
    const char* who_;
};

template <Expression Table, Expression Ids>
    requires(rank_of<Table> == 2 && std::integral<value_type_of<Ids>>)
auto gather(Table&& table, Ids&& ids, const char* who = "shaped::gather") {
    return gather_node<operand_t<Table&&>, operand_t<Ids&&>>(std::forward<Table>(table), std::forward<Ids>(ids), who);
}

}  // namespace shaped
