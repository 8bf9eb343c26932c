// Rule: a failed check is one error, wherever its result goes. Every operation, operator and
// layer is handed the result of a failed matmul; none may add an error of its own.
// expect-error: shaped::matmul: the last dim of lhs does not meet the second-to-last dim of rhs
// expect-error: matmul_inner_dims<.*dim_name<'H'>, 16>.*dim_name<'T'>, 4>
#include <shaped/shaped.hpp>
#include <iostream>
using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 4>;
using H = shaped::dim<"H", 16>;
using C = shaped::dim<"C", 16>;
int main() {
    shaped::Generator gen(0);
    auto q = shaped::randn<float, B, T, H>(gen);
    auto bad = shaped::matmul(q, q);  // H(16) meets T(4)
    auto w = shaped::ones<float, H>();
    auto a1 = shaped::layer_norm(bad, w, w);
    auto a2 = shaped::layer_norm(q, bad, nullptr);
    auto a3 = shaped::causal_attention(bad, q, q, 0.5f);
    auto a4 = shaped::causal_attention(q, q, bad, 0.5f);
    auto a5 = shaped::where(bad, q, 0.0f);
    auto a6 = shaped::where(q > 0.0f, bad, 0.0f);
    auto a7 = shaped::masked_fill(bad, q > 0.0f, 1.0f);
    auto a8 = shaped::tril(bad) + shaped::triu(bad) + shaped::transpose<0, 1>(bad) + shaped::transpose<T, H>(bad);
    auto a9 = shaped::permute<0, 2, 1>(bad) + shaped::permute<B, H, T>(bad) + shaped::rename<T, C>(bad) + shaped::mT(bad);
    auto b1 = shaped::split<H, shaped::dim<"A", 4>, shaped::dim<"Z", 4>>(bad);
    auto b2 = shaped::merge<T, H, shaped::dim<"M", 64>>(bad);
    auto b3 = shaped::sum<-1>(bad) + shaped::max<H>(bad) + shaped::softmax<-1>(bad) + shaped::log_softmax<H>(bad);
    auto b10 = shaped::sum<-1, shaped::keepdim>(bad) + shaped::var<H, shaped::keepdim>(bad) +
               shaped::squeeze<0>(shaped::unsqueeze<0, shaped::dim<"U", 1>>(bad)) + shaped::squeeze<B>(bad);
    auto b4 = shaped::concat<0>(bad, q);
    auto b5 = shaped::concat<T>(q, bad);
    auto b6 = shaped::exp(bad) + shaped::maximum(bad, 1.0f) + shaped::cast<double>(bad) + (-bad) + (!bad);
    auto b7 = shaped::view_of(bad);
    auto b8 = shaped::eval(bad);
    auto b11 = shaped::einsum<"B T H, B T H -> T">(bad, q) + shaped::einsum<"B T H, B T H -> H">(q, bad) +
               shaped::einsum<"B T H -> H">(bad);
    auto b9 = shaped::sum(bad) + shaped::mean(bad) + shaped::var(bad) + shaped::max(bad) + shaped::min(bad);
    shaped::nn::Linear<H, C> lin(gen);
    shaped::nn::LayerNorm<H> ln(gen);
    shaped::nn::MLP<H> mlp(gen);
    shaped::nn::Head<H, C> head(gen);
    shaped::nn::MultiHeadAttention<H, shaped::dim<"NH", 2>, shaped::dim<"HS", 8>> mha(gen);
    shaped::nn::Block<H, shaped::dim<"NH", 2>, shaped::dim<"HS", 8>> block(gen);
    shaped::nn::KVCache<float, B, shaped::dim<"S", 8>, C> cache;
    auto c1 = lin(bad) + ln(bad) + mlp(bad) + head(bad) + mha(bad) + block(bad) + head(bad, cache);
    cache.append(bad, q);
    shaped::Tensor<float, B, T, T> t = bad;
    t = bad;
    std::cout << bad << c1 << a1 << a2 << a3 << a4 << a5 << a6 << a7 << a8 << a9 << b1 << b2 << b3 << b4 << b5 << b6 << b7 << b8 << b9 << b10 << b11;
}
