// Reductions with keepdim, unsqueeze and squeeze (a dim of extent 1 kept, inserted or dropped),
// each against a loop over plain arrays: along every axis, by position and by name, static and
// dynamic dims; the result broadcasting against its operand by name; held in a variable and
// written inline; Views where the operand is stored, lazy nodes where it is not.

#include "reference.hpp"

#include <algorithm>
#include <cmath>
#include <type_traits>

namespace {

using Bs = shaped::dim<"B", 2>;
using Td = shaped::dim<"T">;
using Cs = shaped::dim<"C", 5>;
using U = shaped::dim<"U", 1>;
using shaped::keepdim;

double line_max(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }
double line_min(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

template <std::size_t R>
ref::axis_split split_at(const std::array<std::size_t, R>& e, std::size_t axis) {
    ref::axis_split s{1, e[axis], 1};
    for (std::size_t i = 0; i < axis; ++i) s.outer *= e[i];
    for (std::size_t i = axis + 1; i < R; ++i) s.inner *= e[i];
    return s;
}

// The dims of a keepdim reduction of X along axis: X's, that dim of extent 1 under its name.
template <std::size_t Axis, class X>
using kept_dims = shaped::replace_at<Axis, shaped::dim<shaped::dim_at<Axis, shaped::dims_of<X>>::name, 1>, shaped::dims_of<X>>;

// Each keepdim reduction along Axis (and by the name of the dim there) against the loops: its
// dims, its extents, its values (those of the plain reduction, in the same order).
template <int Axis, class X>
void check_kept_along(const X& x) {
    using V = shaped::value_type_of<X>;
    constexpr std::size_t axis = shaped::normalize_axis<Axis, X::rank>;
    using D = shaped::dim_at<axis, shaped::dims_of<X>>;
    const auto s = split_at(x.extents(), axis);
    const auto xv = ref::values(x);
    const double t = ref::tolerance<V>(s.n);
    INFO("axis " << Axis << " (outer " << s.outer << ", n " << s.n << ", inner " << s.inner << ")");
    STATIC_REQUIRE(std::is_same_v<shaped::dims_of<decltype(shaped::sum<Axis, keepdim>(x))>, kept_dims<axis, X>>);
    STATIC_REQUIRE(std::is_same_v<shaped::dims_of<decltype(shaped::var<D, keepdim>(x))>, kept_dims<axis, X>>);
    auto want_extents = x.extents();
    want_extents[axis] = 1;
    REQUIRE(shaped::eval(shaped::mean<Axis, keepdim>(x)).extents() == want_extents);
    REQUIRE(shaped::mean<D, keepdim>(x).extents() == want_extents);
    ref::require_close(ref::values(shaped::sum<Axis, keepdim>(x)), ref::reduce(xv, s, ref::sum), t);
    ref::require_close(ref::values(shaped::sum<D, keepdim>(x)), ref::reduce(xv, s, ref::sum), t);
    ref::require_close(ref::values(shaped::mean<Axis, keepdim>(x)), ref::reduce(xv, s, ref::mean), t);
    ref::require_close(ref::values(shaped::max<Axis, keepdim>(x)), ref::reduce(xv, s, line_max), 0.0);
    ref::require_close(ref::values(shaped::min<D, keepdim>(x)), ref::reduce(xv, s, line_min), 0.0);
    if (s.n > 1) ref::require_close(ref::values(shaped::var<D, keepdim>(x)), ref::reduce(xv, s, ref::var), t);
}

// x - mean along axis (kept), by the loop: each element less its line's mean.
std::vector<double> centred(const std::vector<double>& xv, ref::axis_split s) {
    const auto m = ref::reduce(xv, s, ref::mean);
    std::vector<double> out(xv.size());
    for (std::size_t o = 0; o < s.outer; ++o)
        for (std::size_t i = 0; i < s.n; ++i)
            for (std::size_t in = 0; in < s.inner; ++in) out[s.at(o, i, in)] = xv[s.at(o, i, in)] - m[o * s.inner + in];
    return out;
}

// layer norm by hand along the last dim, by the loop (unbiased variance, as var is).
std::vector<double> normalised(const std::vector<double>& xv, ref::axis_split s, double eps) {
    const auto c = centred(xv, s);
    const auto v = ref::reduce(xv, s, ref::var);
    std::vector<double> out(xv.size());
    for (std::size_t o = 0; o < s.outer; ++o)
        for (std::size_t i = 0; i < s.n; ++i) out[s.at(o, i, 0)] = c[s.at(o, i, 0)] / std::sqrt(v[o] + eps);
    return out;
}

}  // namespace

TEMPLATE_TEST_CASE("keepdim reductions along every axis, static and dynamic dims", "[reduce][keepdim]", float, double) {
    using V = TestType;
    const std::size_t t = GENERATE(1, 3, 7);
    shaped::Tensor<V, Bs, Td, Cs> x(Td{t});
    ref::fill(x, 100 + t);
    check_kept_along<0>(x);
    check_kept_along<1>(x);
    check_kept_along<-1>(x);
    shaped::Tensor<V, Td> line(Td{t + 1});
    ref::fill(line, 7 + t);
    check_kept_along<0>(line);
}

TEST_CASE("keepdim: a kept dim broadcasts against its operand by name", "[reduce][keepdim]") {
    const std::size_t t = GENERATE(1, 4);
    shaped::Tensor<double, Bs, Td, Cs> x(Td{t});
    ref::fill(x, 31 + t);
    const auto xv = ref::values(x);
    // Along a static dim (C(5) meets C(1)) and along a dynamic one (T meets T(1)).
    auto by_c = shaped::eval(x - shaped::mean<Cs, keepdim>(x));
    STATIC_REQUIRE(std::is_same_v<shaped::dims_of<decltype(by_c)>, shaped::dims<Bs, Td, Cs>>);
    ref::require_close(ref::values(by_c), centred(xv, split_at(x.extents(), 2)), 1e-12);
    auto by_t = shaped::eval(x - shaped::mean<1, keepdim>(x));
    STATIC_REQUIRE(std::is_same_v<shaped::dims_of<decltype(by_t)>, shaped::dims<Bs, Td, Cs>>);
    ref::require_close(ref::values(by_t), centred(xv, split_at(x.extents(), 1)), 1e-12);
    // In place: the kept mean is read before the target is written.
    auto in_place = shaped::eval(x);
    in_place = in_place - shaped::mean<Cs, keepdim>(in_place);
    ref::require_close(ref::values(in_place), centred(xv, split_at(x.extents(), 2)), 1e-12);
    // Into a declared Tensor, and into a strided target (the kept dims transposed).
    shaped::Tensor<double, Bs, shaped::dim<"T", 1>, Cs> kept;
    kept = shaped::sum<Td, keepdim>(x);
    ref::require_close(ref::values(kept), ref::reduce(xv, split_at(x.extents(), 1), ref::sum), 1e-12);
    shaped::Tensor<double, Cs, shaped::dim<"T", 1>, Bs> aside;
    shaped::view_of(shaped::permute<2, 1, 0>(aside.view())) = shaped::max<1, keepdim>(x);
    ref::require_close(ref::values(shaped::permute<2, 1, 0>(aside)), ref::reduce(xv, split_at(x.extents(), 1), line_max), 0.0);
}

TEST_CASE("keepdim: a norm written by hand, held and inline", "[reduce][keepdim]") {
    const std::size_t t = GENERATE(1, 3);
    shaped::Tensor<double, Bs, Td, Cs> x(Td{t});
    ref::fill(x, 77 + t);
    const double eps = 1e-5;
    const auto want = normalised(ref::values(x), split_at(x.extents(), 2), eps);
    const auto inline_form = ref::values((x - shaped::mean<Cs, keepdim>(x)) / shaped::sqrt(shaped::var<Cs, keepdim>(x) + eps));
    ref::require_close(inline_form, want, 1e-12);
    // Each piece held in a variable first: the same expression, the same numbers exactly.
    auto centre = shaped::mean<-1, keepdim>(x);
    const auto spread = shaped::var<-1, keepdim>(x);
    auto normed = (x - centre) / shaped::sqrt(spread + eps);
    REQUIRE(ref::values(normed) == inline_form);
    REQUIRE(ref::values(std::move(normed)) == inline_form);
}

TEST_CASE("unsqueeze and squeeze: a dim of extent 1 inserted and dropped", "[reshape][unsqueeze]") {
    const std::size_t t = GENERATE(1, 3);
    shaped::Tensor<float, Bs, Td, Cs> x(Td{t});
    ref::fill(x, 5 + t);
    const auto xv = ref::values(x);
    // At every position, counted from the front and from the back.
    auto front = shaped::unsqueeze<0, U>(x);
    auto middle = shaped::unsqueeze<2, U>(x);
    auto back = shaped::unsqueeze<-1, U>(x);
    auto also_front = shaped::unsqueeze<-4, U>(x);
    STATIC_REQUIRE(std::is_same_v<shaped::dims_of<decltype(front)>, shaped::dims<U, Bs, Td, Cs>>);
    STATIC_REQUIRE(std::is_same_v<shaped::dims_of<decltype(middle)>, shaped::dims<Bs, Td, U, Cs>>);
    STATIC_REQUIRE(std::is_same_v<shaped::dims_of<decltype(back)>, shaped::dims<Bs, Td, Cs, U>>);
    STATIC_REQUIRE(std::is_same_v<decltype(also_front), decltype(front)>);
    REQUIRE(middle.extents() == std::array<std::size_t, 4>{2, t, 1, 5});
    // Over a Tensor lvalue: a View of its elements, writable, row-major as the Tensor is.
    STATIC_REQUIRE(std::is_same_v<decltype(middle), shaped::View<float, Bs, Td, U, Cs>>);
    REQUIRE(middle.data() == x.data());
    REQUIRE(back.is_contiguous());
    REQUIRE(ref::values(front) == xv);
    REQUIRE(ref::values(middle) == xv);
    REQUIRE(ref::values(back) == xv);
    middle(1, t - 1, 0, 4) = 42.0f;
    REQUIRE(x(1, t - 1, 4) == 42.0f);
    // squeeze undoes it, by name and by position; over a View, a View again.
    auto undone = shaped::squeeze<U>(middle);
    STATIC_REQUIRE(std::is_same_v<decltype(undone), shaped::View<float, Bs, Td, Cs>>);
    REQUIRE(undone.data() == x.data());
    REQUIRE(ref::values(shaped::squeeze<-1>(back)) == ref::values(x));
    // A dynamic dim of extent 1 squeezes; of another extent it throws, naming it.
    auto single = shaped::zeros<float, Bs, Td>(Td{1});
    STATIC_REQUIRE(std::is_same_v<shaped::dims_of<decltype(shaped::squeeze<Td>(single))>, shaped::dims<Bs>>);
    auto many = shaped::zeros<float, Bs, Td>(Td{3});
    REQUIRE_THROWS_WITH(shaped::squeeze<Td>(many), "shaped::squeeze: only a dim of extent 1 can be squeezed: T(3)");
}

TEST_CASE("unsqueeze and squeeze of an expression: lazy, held and inline alike", "[reshape][unsqueeze]") {
    using H = shaped::dim<"H", 3>;
    shaped::Tensor<double, Bs, Td, Cs> x(Td{4});
    shaped::Tensor<double, Bs, H, Td, Cs> y(Td{4});
    ref::fill(x, 11);
    ref::fill(y, 12);
    const auto xv = ref::values(x);
    const auto yv = ref::values(y);
    // (B, 1, T, C) against (B, H, T, C): H(1) spreads along H(3), as the loop spreads it.
    std::vector<double> want(yv.size());
    const std::size_t tc = 4 * 5;
    for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t h = 0; h < 3; ++h)
            for (std::size_t i = 0; i < tc; ++i)
                want[(b * 3 + h) * tc + i] = yv[(b * 3 + h) * tc + i] * (2.0 * xv[b * tc + i] + 1.0);
    const auto inline_form = ref::values(y * shaped::unsqueeze<1, shaped::dim<"H", 1>>(x * 2.0 + 1.0));
    ref::require_close(inline_form, want, 1e-12);
    auto lifted = shaped::unsqueeze<1, shaped::dim<"H", 1>>(x * 2.0 + 1.0);   // a node, not a View
    STATIC_REQUIRE(!shaped::Strided<decltype(lifted)>);
    REQUIRE(ref::values(y * lifted) == inline_form);
    const auto& held = lifted;
    REQUIRE(ref::values(y * held) == inline_form);
    REQUIRE(ref::values(y * std::move(lifted)) == inline_form);
    // Of a temporary Tensor: the node owns it, and it is read in place.
    REQUIRE(ref::values(y * shaped::unsqueeze<1, shaped::dim<"H", 1>>(shaped::eval(x * 2.0 + 1.0))) == inline_form);
    // squeeze of a node, and of a keepdim reduction: the plain reduction's values.
    REQUIRE(ref::values(shaped::squeeze<U>(shaped::unsqueeze<3, U>(x * 3.0))) == ref::values(x * 3.0));
    auto kept = shaped::squeeze<-1>(shaped::sum<Cs, keepdim>(x));
    STATIC_REQUIRE(std::is_same_v<shaped::dims_of<decltype(kept)>, shaped::dims<Bs, Td>>);
    REQUIRE(ref::values(kept) == ref::values(shaped::sum<Cs>(x)));
}
