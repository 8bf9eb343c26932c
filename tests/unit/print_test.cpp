// print_torch must reproduce PyTorch 1.13's str(tensor) character for character; the expected
// strings come from torch itself, through print_cases.py.

#include "shaped/core/shape.hpp"
#include "shaped/tensor/print_format.hpp"

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace {

template <class Value>
struct print_case {
  const char* name;
  std::vector<std::size_t> shape;
  std::vector<Value> data;
  const char* expected;
};

#include "print_cases.inc"

template <class Element, class Value>
std::string printed(const print_case<Value>& c) {
  // A plain array rather than std::vector, whose bool specialization has no contiguous storage.
  const auto elements = std::make_unique<Element[]>(c.data.size());
  for (std::size_t i = 0; i < c.data.size(); ++i) elements[i] = static_cast<Element>(c.data[i]);
  std::ostringstream os;
  shaped::detail::print_torch(os, c.shape, std::span<const Element>(elements.get(), c.data.size()));
  return os.str();
}

template <class Element, class Value>
void check_all(const std::vector<print_case<Value>>& cases) {
  for (const auto& c : cases) {
    INFO(c.name);
    CHECK(printed<Element>(c) == c.expected);
  }
}

}  // namespace

TEST_CASE("print_torch matches torch for float32 tensors", "[print]") {
  check_all<float>(float32_cases);
}

TEST_CASE("print_torch matches torch for float64 tensors", "[print]") {
  check_all<double>(float64_cases);
}

TEST_CASE("print_torch matches torch for bool tensors", "[print]") {
  check_all<bool>(bool_cases);
}

TEST_CASE("print_torch matches torch for integer tensors", "[print]") {
  check_all<std::int64_t>(int64_cases);
  check_all<std::int32_t>(int32_cases);
}

TEST_CASE("a shape prints as torch.Size with the dims' names", "[print]") {
  std::ostringstream os;

  SECTION("ranked") {
    os << shaped::Shape<shaped::dim<"B", 2>, shaped::dim<"T">, shaped::dim<"H", 16>>({2, 4, 16});
    CHECK(os.str() == "Size([B=2, T=4, H=16])");
  }
  SECTION("0-d") {
    os << shaped::Shape<>({});
    CHECK(os.str() == "Size([])");
  }
}
