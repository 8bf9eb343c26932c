// Rule: rms_norm's weight is one dim meeting the input's last: a weight of T(4) cannot scale
// (T, C(12)).
// expect-error: shaped::rms_norm: weight must be \(C\), C the input's last dim
// expect-error: rms_norm_weight<.*dims<.*name<'T'>, 4>, .*name<'C'>, 12> ?>, .*dims<.*name<'T'>, 4> ?>
#include <shaped/shaped.hpp>

using T = shaped::dim<"T", 4>;
using C = shaped::dim<"C", 12>;

int main() {
    shaped::Generator gen(0);
    auto x = shaped::randn<float, T, C>(gen);
#if defined(SHAPED_COMPILE_FAIL_CONTROL)
    auto weight = shaped::ones<float, C>();
#elif defined(SHAPED_COMPILE_FAIL_NESTED)
    auto weight = shaped::ones<float, C>();
    auto h = shaped::eval(shaped::rms_norm(x, shaped::ones<float, T>()) * 2.0f + x);
    (void)h;
#else
    auto weight = shaped::ones<float, T>();
#endif
    auto y = shaped::rms_norm(x, weight);
    (void)y;
}
