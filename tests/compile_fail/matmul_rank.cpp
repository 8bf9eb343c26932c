// Rule: matmul does not promote a rank-1 operand; both need at least two dims.
// expect-error: shaped::matmul: each operand needs at least two dims
// expect-error: matmul_rank<.*dims<.*name<'H'>, 16> ?>.*name<'H'>, 16>, .*name<'T'>, 4> ?>
#include <shaped/shaped.hpp>

using T = shaped::dim<"T", 4>;
using H = shaped::dim<"H", 16>;

int main() {
    shaped::Generator gen(0);
    auto w = shaped::randn<float, H, T>(gen);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto x = shaped::randn<float, T, H>(gen);
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    auto x = shaped::randn<float, T, H>(gen);
    auto h = shaped::exp(shaped::matmul(shaped::randn<float, H>(gen), w));
    (void)h;
#else
    auto x = shaped::randn<float, H>(gen);
#endif
    auto y = shaped::matmul(x, w);
    (void)y;
}
