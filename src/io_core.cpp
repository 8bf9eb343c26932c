// The format-neutral half of io/core.hpp: dtype names and sizes, and the checks every typed
// load makes, worded once so that a .npy file and a safetensors tensor that do not fit read the
// same.

#include "shaped/io/core.hpp"
#include "untrusted_input.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace shaped::io {

namespace {

// A static dim fits its extent exactly, a dynamic one whatever it is.
bool fits(const detail::declared_dim& dim, std::size_t extent) { return !dim.extent || *dim.extent == extent; }

// Whether each extent, from `first` on, fits its dim.
template <class Iterator>
bool fits(Iterator first, std::span<const detail::declared_dim> declared) {
    return std::equal(declared.begin(), declared.end(), first,
                      [](const detail::declared_dim& dim, std::size_t extent) { return fits(dim, extent); });
}

// Why a shape of the declared rank does not fit: the declared shape transposed, as a (in, out)
// weight stored for an (out, in) layer is; else each dim that differs.
std::string why_not(std::span<const std::size_t> shape, std::span<const detail::declared_dim> declared) {
    if (shape.size() >= 2 && fits(shape.rbegin(), declared)) return "it is the declared shape transposed";
    std::string reasons;
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (fits(declared[i], shape[i])) continue;
        if (!reasons.empty()) reasons += "; ";
        reasons += std::string(declared[i].name) + " is " + std::to_string(shape[i]) + " in the file, not " +
                   std::to_string(*declared[i].extent);
    }
    return reasons;
}

}  // namespace

std::string_view dtype_name(dtype type) {
    switch (type) {
        case dtype::f32: return "float32";
        case dtype::f64: return "float64";
        case dtype::i32: return "int32";
        case dtype::i64: return "int64";
        case dtype::u8: return "uint8";
        case dtype::b1: return "bool";
    }
    return "unknown dtype";
}

dtype dtype_of(std::type_index element) {
    if (element == typeid(float)) return dtype::f32;
    if (element == typeid(double)) return dtype::f64;
    if (element == typeid(std::int32_t)) return dtype::i32;
    if (element == typeid(std::int64_t)) return dtype::i64;
    if (element == typeid(std::uint8_t)) return dtype::u8;
    if (element == typeid(bool)) return dtype::b1;
    throw std::logic_error(std::string("shaped::io: no file dtype for the element type ") + element.name());
}

std::size_t dtype_size(dtype type) {
    switch (type) {
        case dtype::f32: return 4;
        case dtype::f64: return 8;
        case dtype::i32: return 4;
        case dtype::i64: return 8;
        case dtype::u8: return 1;
        case dtype::b1: return 1;
    }
    return 0;
}

std::string read_file(const std::filesystem::path& path, std::size_t max_bytes, std::string_view what) {
    return detail::read_whole_file("shaped::io::read_file: " + path.string() + ": ", path, what, max_bytes);
}

namespace detail {

std::string describe_bytes(std::size_t bytes) {
    constexpr std::size_t kib = 1024, mib = kib * 1024, gib = mib * 1024;
    if (bytes >= gib && bytes % gib == 0) return std::to_string(bytes / gib) + " GiB";
    if (bytes >= mib && bytes % mib == 0) return std::to_string(bytes / mib) + " MiB";
    if (bytes >= kib && bytes % kib == 0) return std::to_string(bytes / kib) + " KiB";
    return std::to_string(bytes) + (bytes == 1 ? " byte" : " bytes");
}

namespace {

template <class T>
void require_finite_elements(std::span<const T> values, std::string_view where) {
    const auto bad = std::find_if(values.begin(), values.end(), [](T x) { return !std::isfinite(x); });
    if (bad == values.end()) return;
    const std::string value = std::isnan(*bad) ? "nan" : *bad > 0 ? "inf" : "-inf";
    throw io_error(std::string(where) + ": element " + std::to_string(bad - values.begin()) + " is " + value +
                   ", not a finite weight");
}

}  // namespace

void require_finite(std::span<const float> values, std::string_view where) { require_finite_elements(values, where); }
void require_finite(std::span<const double> values, std::string_view where) { require_finite_elements(values, where); }

void check_dtype(const stored_tensor& stored, dtype wanted) {
    if (stored.type == wanted) return;
    std::string held{stored.dtype_spelling};
    if (stored.type && dtype_name(*stored.type) != held) held += " (" + std::string(dtype_name(*stored.type)) + ")";
    throw io_error(std::string(stored.where) + ": holds " + held + ", but the tensor's elements are " +
                   std::string(dtype_name(wanted)) + "; no conversion is done");
}

void check_shape_fits(const stored_tensor& stored, std::span<const declared_dim> declared) {
    const bool same_rank = stored.shape.size() == declared.size();
    if (same_rank && fits(stored.shape.begin(), declared)) return;
    const std::string why = same_rank ? why_not(stored.shape, declared)
                                      : "it has " + std::to_string(stored.shape.size()) +
                                            (stored.shape.size() == 1 ? " dim, not " : " dims, not ") +
                                            std::to_string(declared.size());
    throw shape_error(std::string(stored.where) + ": the file's shape " + format_shape(stored.shape) +
                      " does not fit the declared shape " + shaped::detail::describe_shape(declared) + ": " + why);
}

}  // namespace detail

}  // namespace shaped::io
