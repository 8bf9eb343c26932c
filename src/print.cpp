// Text layout of tensors, following torch/_tensor_str.py of PyTorch 1.13 with its default print
// options, so that a shaped tensor and the matching torch tensor print the same text.

#include "shaped/tensor/print_format.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace shaped::detail {
namespace {

// torch.set_printoptions(profile="default").
constexpr int precision = 4;
constexpr std::size_t threshold = 1000;
constexpr std::size_t edgeitems = 3;
constexpr int linewidth = 80;
constexpr std::string_view prefix = "tensor(";

// How torch names an element type, and when its repr spells the dtype out.
template <class T>
struct dtype_traits;
template <>
struct dtype_traits<float> {
  static constexpr std::string_view name = "torch.float32";
  static constexpr bool implied_when_nonempty = true;
  static constexpr bool implied_when_empty = true;  // torch's default dtype
};
template <>
struct dtype_traits<double> {
  static constexpr std::string_view name = "torch.float64";
  static constexpr bool implied_when_nonempty = false;
  static constexpr bool implied_when_empty = false;
};
template <>
struct dtype_traits<bool> {
  static constexpr std::string_view name = "torch.bool";
  static constexpr bool implied_when_nonempty = true;
  static constexpr bool implied_when_empty = false;
};
template <>
struct dtype_traits<std::int32_t> {
  static constexpr std::string_view name = "torch.int32";
  static constexpr bool implied_when_nonempty = false;
  static constexpr bool implied_when_empty = false;
};
template <>
struct dtype_traits<std::int64_t> {
  static constexpr std::string_view name = "torch.int64";
  static constexpr bool implied_when_nonempty = true;
  static constexpr bool implied_when_empty = false;
};

// A row-major array and whether its print is summarized with ellipses.
template <class T>
struct array_view {
  std::span<const std::size_t> shape;
  std::vector<std::size_t> strides;
  std::span<const T> data;
  bool summarize;

  array_view(std::span<const std::size_t> extents, std::span<const T> values)
      : shape(extents),
        strides(extents.size()),
        data(values),
        summarize(values.size() > threshold) {
    std::size_t stride = 1;
    for (std::size_t axis = extents.size(); axis-- > 0;) {
      strides[axis] = stride;
      stride *= extents[axis];
    }
  }

  // torch elides the middle of an axis only when there is more than the edge items to show.
  bool elides(std::size_t axis) const { return summarize && shape[axis] > 2 * edgeitems; }
};

// Calls visit(index) for each index along the axis that is printed, and visit_ellipsis() where
// the elided middle goes.
template <class T>
void for_each_shown_index(const array_view<T>& array, std::size_t axis,
                          const std::function<void(std::size_t)>& visit,
                          const std::function<void()>& visit_ellipsis) {
  const std::size_t extent = array.shape[axis];
  if (!array.elides(axis)) {
    for (std::size_t i = 0; i < extent; ++i) visit(i);
    return;
  }
  for (std::size_t i = 0; i < edgeitems; ++i) visit(i);
  visit_ellipsis();
  for (std::size_t i = extent - edgeitems; i < extent; ++i) visit(i);
}

// The printed elements, in order: torch sizes its columns from these only (get_summarized_data).
template <class T>
void collect_shown(const array_view<T>& array, std::size_t axis, std::size_t offset,
                   std::vector<T>& shown) {
  if (axis == array.shape.size()) {
    shown.push_back(array.data[offset]);
    return;
  }
  for_each_shown_index(
      array, axis,
      [&](std::size_t i) {
        collect_shown(array, axis + 1, offset + i * array.strides[axis], shown);
      },
      [] {});
}

std::string pad_left(std::string text, std::size_t width) {
  if (text.size() < width) text.insert(0, width - text.size(), ' ');
  return text;
}

// Python's str.format and glibc's printf both round the exact binary value, ties to even, so
// printf with Python's format spec gives Python's digits. NaN is special-cased because Python
// never prints its sign.
std::string format_double(char conversion, int digits, double value) {
  if (std::isnan(value)) return "nan";
  const char spec[] = {'%', '.', '*', conversion, '\0'};
  const int length = std::snprintf(nullptr, 0, spec, digits, value);
  std::string text(static_cast<std::size_t>(length), '\0');
  std::snprintf(text.data(), text.size() + 1, spec, digits, value);
  return text;
}

// torch's _Formatter for floating dtypes: one notation and column width for the whole tensor.
class float_formatter {
 public:
  explicit float_formatter(const std::vector<double>& shown);

  std::size_t width() const { return max_width_; }
  std::string format(double value) const;

 private:
  bool int_mode_ = true;
  bool sci_mode_ = false;
  std::size_t max_width_ = 1;
};

float_formatter::float_formatter(const std::vector<double>& shown) {
  std::vector<double> nonzero_finite;
  for (const double value : shown)
    if (std::isfinite(value) && value != 0) nonzero_finite.push_back(value);
  if (nonzero_finite.empty()) return;

  double min_abs = std::abs(nonzero_finite.front());
  double max_abs = min_abs;
  for (const double value : nonzero_finite) {
    min_abs = std::min(min_abs, std::abs(value));
    max_abs = std::max(max_abs, std::abs(value));
    if (value != std::ceil(value)) int_mode_ = false;
  }

  const bool wide_range = max_abs / min_abs > 1000.0 || max_abs > 1.0e8;
  sci_mode_ = int_mode_ ? wide_range : wide_range || min_abs < 1.0e-4;
  for (const double value : nonzero_finite) {
    // In int mode the trailing "." that marks a floating dtype counts towards the width.
    const std::size_t length = sci_mode_  ? format_double('e', precision, value).size()
                               : int_mode_ ? format_double('f', 0, value).size() + 1
                                           : format_double('f', precision, value).size();
    max_width_ = std::max(max_width_, length);
  }
}

std::string float_formatter::format(double value) const {
  std::string text;
  if (sci_mode_) {
    text = format_double('e', precision, value);
  } else if (int_mode_) {
    text = format_double('f', 0, value);
    if (std::isfinite(value)) text += '.';
  } else {
    text = format_double('f', precision, value);
  }
  return pad_left(std::move(text), max_width_);
}

// torch's _Formatter for bool and integer dtypes: Python's str() of each value.
template <class T>
class exact_formatter {
 public:
  explicit exact_formatter(const std::vector<T>& shown) {
    for (const T value : shown) max_width_ = std::max(max_width_, text(value).size());
  }

  std::size_t width() const { return max_width_; }
  std::string format(T value) const { return pad_left(text(value), max_width_); }

 private:
  static std::string text(T value) {
    if constexpr (std::is_same_v<T, bool>)
      return value ? "True" : "False";
    else
      return std::to_string(value);
  }

  std::size_t max_width_ = 1;
};

// The bracketed body of the repr (_tensor_str_with_formatter); indent is the column of the
// opening bracket of the current nesting level.
template <class T, class Formatter>
class body_writer {
 public:
  body_writer(const array_view<T>& array, const Formatter& formatter)
      : array_(array), formatter_(formatter) {}

  std::string block(std::size_t axis, std::size_t offset, int indent) const;

 private:
  std::string row(std::size_t offset, int indent) const;

  const array_view<T>& array_;
  const Formatter& formatter_;
};

template <class T, class Formatter>
std::string body_writer<T, Formatter>::block(std::size_t axis, std::size_t offset,
                                             int indent) const {
  const std::size_t dims_left = array_.shape.size() - axis;
  if (dims_left == 0) return formatter_.format(array_.data[offset]);
  if (dims_left == 1) return row(offset, indent);

  std::vector<std::string> slices;
  for_each_shown_index(
      array_, axis,
      [&](std::size_t i) {
        slices.push_back(block(axis + 1, offset + i * array_.strides[axis], indent + 1));
      },
      [&] { slices.emplace_back("..."); });

  // Sub-blocks of rank r are separated by r - 1 blank lines.
  const std::string separator = "," + std::string(dims_left - 1, '\n') +
                                std::string(static_cast<std::size_t>(indent + 1), ' ');
  std::string text = "[";
  for (std::size_t i = 0; i < slices.size(); ++i) {
    if (i > 0) text += separator;
    text += slices[i];
  }
  return text + "]";
}

template <class T, class Formatter>
std::string body_writer<T, Formatter>::row(std::size_t offset, int indent) const {
  const std::size_t axis = array_.shape.size() - 1;
  std::vector<std::string> items;
  for_each_shown_index(
      array_, axis,
      [&](std::size_t i) {
        items.push_back(formatter_.format(array_.data[offset + i * array_.strides[axis]]));
      },
      [&] { items.emplace_back(" ..."); });

  // Each element takes its width plus ", "; Python floors a float quotient, which matters
  // only if the indent passes the line width.
  const auto element_length = static_cast<double>(formatter_.width() + 2);
  const auto per_line = static_cast<std::size_t>(
      std::max(1.0, std::floor(static_cast<double>(linewidth - indent) / element_length)));

  const std::string line_break = ",\n" + std::string(static_cast<std::size_t>(indent + 1), ' ');
  std::string text = "[";
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) text += (i % per_line == 0) ? line_break : ", ";
    text += items[i];
  }
  return text + "]";
}

// Python's str() of a shape tuple, as in `size=(0, 3)`.
std::string tuple_str(std::span<const std::size_t> shape) {
  std::string text = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(shape[i]);
  }
  if (shape.size() == 1) text += ',';
  return text + ")";
}

// _add_suffixes: `, suffix` on the last line unless that would pass the line width.
std::string with_suffixes(std::string text, const std::vector<std::string>& suffixes) {
  const std::size_t newline = text.rfind('\n');
  // Python's len(s) - s.rfind("\n") + 1, where rfind gives -1 when there is no newline.
  const long long newline_position =
      newline == std::string::npos ? -1 : static_cast<long long>(newline);
  auto last_line_length = static_cast<long long>(text.size()) - newline_position + 1;
  const auto indent = static_cast<long long>(prefix.size());
  for (const std::string& suffix : suffixes) {
    const auto suffix_length = static_cast<long long>(suffix.size());
    if (last_line_length + suffix_length + 2 > linewidth) {
      text += ",\n" + std::string(prefix.size(), ' ') + suffix;
      last_line_length = indent + suffix_length;
    } else {
      text += ", " + suffix;
      last_line_length += suffix_length + 2;
    }
  }
  return text + ")";
}

template <class T, class Formatter, class Value>
std::string body_with(const array_view<T>& array) {
  std::vector<T> shown;
  collect_shown(array, 0, 0, shown);
  const Formatter formatter(std::vector<Value>(shown.begin(), shown.end()));
  return body_writer<T, Formatter>(array, formatter).block(0, 0, static_cast<int>(prefix.size()));
}

template <class T>
void print_any(std::ostream& os, std::span<const std::size_t> shape, std::span<const T> data) {
  using traits = dtype_traits<T>;
  std::size_t numel = 1;
  for (const std::size_t extent : shape) numel *= extent;
  assert(numel == data.size());

  std::string body;
  std::vector<std::string> suffixes;
  if (numel == 0) {
    body = "[]";
    // A 1-d empty tensor is the only shape `[]` implies.
    if (shape.size() != 1) suffixes.push_back("size=" + tuple_str(shape));
    if (!traits::implied_when_empty) suffixes.push_back("dtype=" + std::string(traits::name));
  } else {
    const array_view<T> array(shape, data);
    if constexpr (std::is_floating_point_v<T>)
      body = body_with<T, float_formatter, double>(array);
    else
      body = body_with<T, exact_formatter<T>, T>(array);
    if (!traits::implied_when_nonempty) suffixes.push_back("dtype=" + std::string(traits::name));
  }
  os << with_suffixes(std::string(prefix) + body, suffixes);
}

}  // namespace

void print_torch(std::ostream& os, std::span<const std::size_t> shape,
                 std::span<const float> data) {
  print_any(os, shape, data);
}
void print_torch(std::ostream& os, std::span<const std::size_t> shape,
                 std::span<const double> data) {
  print_any(os, shape, data);
}
void print_torch(std::ostream& os, std::span<const std::size_t> shape, std::span<const bool> data) {
  print_any(os, shape, data);
}
void print_torch(std::ostream& os, std::span<const std::size_t> shape,
                 std::span<const std::int32_t> data) {
  print_any(os, shape, data);
}
void print_torch(std::ostream& os, std::span<const std::size_t> shape,
                 std::span<const std::int64_t> data) {
  print_any(os, shape, data);
}

}  // namespace shaped::detail
