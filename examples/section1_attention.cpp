// Section 1 of the chapter, "Scaled dot-product attention": one causal self-attention head.
// Every shape comment of the PyTorch original is a type here; a wrong one does not compile.
#include <shaped/shaped.hpp>

#include <cmath>
#include <iostream>
#include <limits>

using B = shaped::dim<"B", 2>;   // batch
using T = shaped::dim<"T", 4>;   // time
using C = shaped::dim<"C", 6>;   // channels
using H = shaped::dim<"H", 16>;  // head size

int main() {
    std::cout << "1. Scaled dot-product attention\n\n";
    shaped::Generator gen(1337);
    shaped::Tensor<float, B, T, C> x = shaped::randn<float, B, T, C>(gen);

    // Each position emits a key (what it contains), a query (what it looks for) and a value
    // (what it sends).
    shaped::nn::Linear<C, H, /*bias=*/false> key(gen), query(gen), value(gen);
    shaped::Tensor<float, B, T, H> k = key(x);
    shaped::Tensor<float, B, T, H> q = query(x);

    // (B, T, H) @ (B, H, T) -> (B, T, T): the affinity of every query with every key.
    shaped::Tensor<float, B, T, T> wei = shaped::matmul(q, k.mT());

    // The future must not speak to the past: mask it to -inf before the softmax.
    auto tril = shaped::tril(shaped::ones<float, T, T>());
    wei = shaped::masked_fill(wei, tril == 0.0f, -std::numeric_limits<float>::infinity());
    wei = shaped::softmax<-1>(wei);
    std::cout << "wei[0]=\n" << wei << "\n";

    shaped::Tensor<float, B, T, H> v = value(x);
    shaped::Tensor<float, B, T, H> out = shaped::matmul(wei, v);
    std::cout << "out shape=\n" << out.shape() << "\n";
}
