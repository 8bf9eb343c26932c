// A downstream program: it includes shaped the way a user's project does and checks one value.
#include <shaped/shaped.hpp>

int main() {
    shaped::Tensor<float, shaped::dim<"C", 3>> t = shaped::ones<float, shaped::dim<"C", 3>>();
    return t(1) == 1.0f ? 0 : 1;
}
