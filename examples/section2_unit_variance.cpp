// Section 2 of the chapter, "Keep variance unit": why attention scales q @ k^T by
// head_size^-0.5 before the softmax.
#include <shaped/shaped.hpp>

#include <cmath>
#include <iostream>

using B = shaped::dim<"B", 2>;
using T = shaped::dim<"T", 4>;
using H = shaped::dim<"H", 16>;
using N = shaped::dim<"N", 5>;

int main() {
    std::cout << "2. Keep variance unit\n\n";
    shaped::Generator gen(42);
    shaped::Tensor<float, B, T, H> k = shaped::randn<float, B, T, H>(gen);
    shaped::Tensor<float, B, T, H> q = shaped::randn<float, B, T, H>(gen);

    // A dot product sums head_size products, so its variance grows like head_size ...
    shaped::Tensor<float, B, T, T> wei1 = shaped::matmul(q, k.mT());
    // ... and dividing by sqrt(head_size) brings it back to about one.
    shaped::Tensor<float, B, T, T> wei2 = shaped::matmul(q, k.mT()) * std::pow(float(H::extent), -0.5f);

    // Softmax exponentiates: larger logits make it sharply peaked.
    auto logits = shaped::tensor<float, N>({0.1f, -0.2f, 0.3f, -0.2f, 0.5f});
    shaped::Tensor<float, N> prob1 = shaped::softmax<-1>(logits);
    shaped::Tensor<float, N> prob2 = shaped::softmax<-1>(logits * 6.0f);

    std::cout << "k var:  " << shaped::var(k) << "\n";
    std::cout << "q var:  " << shaped::var(q) << "\n";
    std::cout << "wei1 var:  " << shaped::var(wei1) << "\n";
    std::cout << "wei2 var:  " << shaped::var(wei2) << "\n\n";
    std::cout << "prob1:  " << prob1 << "\n";
    std::cout << "prob2:  " << prob2 << "\n";
}
