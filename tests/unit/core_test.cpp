// Layer 1: the shape algebra, checked where it lives (at compile time), the run-time Shape and
// its printing, and the words of a shape_error.

#include <shaped/shaped.hpp>

#include <catch2/catch.hpp>

#include <sstream>
#include <string>
#include <type_traits>

namespace {

using shaped::dim;
using shaped::dims;

using B = dim<"B", 2>;
using T = dim<"T", 4>;
using C = dim<"C", 6>;
using H = dim<"H", 16>;
using One = dim<"C", 1>;
using Td = dim<"T">;
using Cd = dim<"C">;

// ---- dims --------------------------------------------------------------------------------------

static_assert(shaped::StaticDim<C> && !shaped::DynamicDim<C>);
static_assert(shaped::DynamicDim<Td> && !shaped::StaticDim<Td>);
static_assert(!shaped::Dim<int>);
static_assert(shaped::same_name<T, Td> && !shaped::same_name<T, C>);
static_assert(shaped::can_meet<T, Td> && shaped::can_meet<Td, T>);
static_assert(!shaped::can_meet<T, dim<"T", 5>>);
static_assert(!shaped::can_meet<T, dim<"S", 4>>);
static_assert(std::is_same_v<shaped::met_dim<Td, T>, T>);
static_assert(std::is_same_v<shaped::met_dim<T, Td>, T>);
static_assert(std::is_same_v<shaped::renamed_dim<T, "S">, dim<"S", 4>>);
static_assert(std::is_same_v<shaped::renamed_dim<Td, "S">, dim<"S">>);
static_assert(Td{5}.size() == 5 && T{}.size() == 4);

// ---- positions ---------------------------------------------------------------------------------

using BTC = dims<B, T, C>;

static_assert(BTC::rank == 3 && BTC::all_static);
static_assert(!dims<B, Td, C>::all_static);
static_assert(std::is_same_v<shaped::dim_at<1, BTC>, T>);
static_assert(shaped::axis_in_range<-3, 3> && shaped::axis_in_range<2, 3>);
static_assert(!shaped::axis_in_range<3, 3> && !shaped::axis_in_range<-4, 3>);
static_assert(shaped::normalize_axis<-1, 3> == 2 && shaped::normalize_axis<0, 3> == 0);

static_assert(shaped::count_named<T, BTC> == 1);
static_assert(shaped::count_named<Td, BTC> == 1);  // by name, whatever the extent
static_assert(shaped::count_named<H, BTC> == 0);
static_assert(shaped::count_named<T, dims<B, T, T>> == 2);
static_assert(shaped::index_named<B, BTC> == 0);
static_assert(shaped::index_named<C, BTC> == 2);
static_assert(shaped::index_named<T, dims<B, T, T>> == 1);  // the first
static_assert(shaped::index_named<H, BTC> == 3);            // absent: the rank

// ---- picking -----------------------------------------------------------------------------------

static_assert(std::is_same_v<shaped::drop_at<0, BTC>, dims<T, C>>);
static_assert(std::is_same_v<shaped::drop_at<1, BTC>, dims<B, C>>);
static_assert(std::is_same_v<shaped::drop_at<2, BTC>, dims<B, T>>);
static_assert(std::is_same_v<shaped::swap_at<1, 2, BTC>, dims<B, C, T>>);
static_assert(std::is_same_v<shaped::swap_at<0, 2, BTC>, dims<C, T, B>>);
static_assert(std::is_same_v<shaped::swap_at<1, 1, BTC>, BTC>);
static_assert(std::is_same_v<shaped::slice_dims<1, 3, BTC>, dims<T, C>>);
static_assert(std::is_same_v<shaped::slice_dims<0, 0, BTC>, dims<>>);
static_assert(std::is_same_v<shaped::concat_dims<dims<B>, dims<>, dims<T, C>>, BTC>);
static_assert(std::is_same_v<shaped::replace_at<1, Td, BTC>, dims<B, Td, C>>);
static_assert(std::is_same_v<shaped::dynamic_dims<dims<B, Td, Cd>>, dims<Td, Cd>>);
static_assert(std::is_same_v<shaped::dynamic_dims<BTC>, dims<>>);

// ---- broadcasting ------------------------------------------------------------------------------

static_assert(std::is_same_v<shaped::broadcast_dims<BTC, dims<C>>, BTC>);
static_assert(std::is_same_v<shaped::broadcast_dims<dims<C>, BTC>, BTC>);
static_assert(std::is_same_v<shaped::broadcast_dims<BTC, dims<T, C>>, BTC>);
static_assert(std::is_same_v<shaped::broadcast_dims<BTC, dims<>>, BTC>);
static_assert(std::is_same_v<shaped::broadcast_dims<dims<B, T, One>, dims<C>>, BTC>);
static_assert(std::is_same_v<shaped::broadcast_dims<dims<One>, dims<C>>, dims<C>>);
static_assert(std::is_same_v<shaped::broadcast_dims<dims<One>, dims<One>>, dims<One>>);
// A static extent that does not spread wins over a dynamic one; two dynamic ones stay dynamic.
static_assert(std::is_same_v<shaped::broadcast_dims<dims<B, Td>, dims<T>>, dims<B, T>>);
static_assert(std::is_same_v<shaped::broadcast_dims<dims<Td>, dims<Td>>, dims<Td>>);
// A static 1 against a dynamic extent could be anything at run time.
static_assert(std::is_same_v<shaped::broadcast_dims<dims<One>, dims<Cd>>, dims<Cd>>);
static_assert(shaped::broadcastable<BTC, dims<C>>);
static_assert(!shaped::broadcastable<BTC, dims<H>>);          // names differ
static_assert(!shaped::broadcastable<BTC, dims<dim<"C", 5>>>);  // extents differ
static_assert(!shaped::broadcastable<BTC, dims<C, T>>);       // by position, not by name
static_assert(shaped::broadcastable<dims<B, Td>, dims<T>>);   // checked at run time
static_assert(std::is_same_v<shaped::broadcast_failure<BTC, dims<H>>::lhs, C>);
static_assert(std::is_same_v<shaped::broadcast_failure<BTC, dims<H>>::rhs, H>);
static_assert(std::is_same_v<shaped::broadcast_failure<dims<H>, dims<B, T, C>>::lhs, H>);

// ---- matmul's shape ----------------------------------------------------------------------------

static_assert(std::is_same_v<shaped::matmul_dims<dims<B, T, H>, dims<B, H, T>>::type, dims<B, T, T>>);
static_assert(std::is_same_v<shaped::matmul_dims<dims<B, T, C>, dims<C, H>>::type, dims<B, T, H>>);
static_assert(std::is_same_v<shaped::matmul_dims<dims<T, C>, dims<B, C, H>>::type, dims<B, T, H>>);

// ---- diagnostics show dims readably ------------------------------------------------------------

// A dim's name is a pack of chars in its type, which both compilers print as characters.
static_assert(std::is_same_v<H, shaped::basic_dim<shaped::dim_name<'H'>, 16>>);
static_assert(std::is_same_v<shaped::dim<"seq">, shaped::basic_dim<shaped::dim_name<'s', 'e', 'q'>>>);
static_assert(shaped::dim<"seq">::name.view() == "seq");

template <class S>
std::string printed(const S& s) {
    std::ostringstream os;
    os << s;
    return os.str();
}

}  // namespace

TEST_CASE("Shape: extents, numel, names and equality", "[core]") {
    const shaped::Shape<B, Td, H> s({2, 4, 16});
    CHECK(s.rank == 3);
    CHECK(s[0] == 2);
    CHECK(s[1] == 4);
    CHECK(s[2] == 16);
    CHECK(s.numel() == 2 * 4 * 16);
    CHECK(s.names()[1] == "T");
    CHECK(s == shaped::Shape<B, Td, H>({2, 4, 16}));
    CHECK_FALSE(s == shaped::Shape<B, Td, H>({2, 5, 16}));
    CHECK(shaped::Shape<>({}).numel() == 1);
}

TEST_CASE("Shape prints as torch.Size with names", "[core]") {
    CHECK(printed(shaped::Shape<B, T, H>({2, 4, 16})) == "Size([B=2, T=4, H=16])");
    CHECK(printed(shaped::Shape<B, Td>({2, 7})) == "Size([B=2, T=7])");
    CHECK(printed(shaped::Shape<>({})) == "Size([])");
    // The shape of a tensor, as the seed prints it.
    const shaped::Tensor<float, B, Td, H> t(Td{3});
    CHECK(printed(t.shape()) == "Size([B=2, T=3, H=16])");
}

TEST_CASE("make_extents fills the dynamic slots in order", "[core]") {
    const auto e = shaped::detail::make_extents(dims<B, Td, C, dim<"S">>{}, Td{5}, dim<"S">{9});
    CHECK(e == std::array<std::size_t, 4>{2, 5, 6, 9});
}

TEST_CASE("shape_error names the operation, the rule in its static words, and both dims with extents", "[core]") {
    try {
        shaped::detail::throw_dims_do_not_meet("matmul", SHAPED_RULE_MATMUL_INNER_DIMS, "lhs", "H", 16, "rhs", "T", 4);
        FAIL("no exception");
    } catch (const shaped::shape_error& e) {
        CHECK(std::string(e.what()) ==
              "shaped::matmul: the last dim of lhs does not meet the second-to-last dim of rhs: lhs H(16), rhs T(4)");
    }
    // A shape_error is an invalid_argument, so generic handlers catch it.
    CHECK_THROWS_AS(shaped::detail::throw_dims_do_not_meet("x", "rule", "a", "A", 1, "b", "B", 2),
                    std::invalid_argument);
}

TEST_CASE("check_extents_fit rejects a static extent that differs, naming it", "[core]") {
    CHECK_NOTHROW(shaped::detail::check_extents_fit("Tensor", dims<B, Td>{}, {2, 99}));
    CHECK_THROWS_WITH(shaped::detail::check_extents_fit("Tensor", dims<B, Td>{}, {3, 4}),
                      "shaped::Tensor: the dims given do not meet the dims declared: declared B(2), given B(3)");
    // The run-time path a Tensor takes with an explicit Shape.
    CHECK_THROWS_AS((shaped::Tensor<float, B, Td>(shaped::Shape<B, Td>({3, 4}))), shaped::shape_error);
}
