#pragma once
// Values being differentiated, and the tape that records them. Inside train::value_and_grad
// (train/value_and_grad.hpp) the inputs of the user's loss are traced values; every expression
// that reads one is still built and evaluated as everywhere else, but eval() of it records it:
// the result is a traced value too, and the tape keeps the expression, with its operands saved
// (a traced operand by its handle, a parameter of the model by reference, any other tensor by a
// copy). The backward replays the tape from the end, each record handing its gradient to its
// operands by the derivatives of train/derivatives.hpp, derived from the expression's type.
//
//   traced<T, Ds...>       a (Ds...) value on the tape: an Expression, read in place like a View
//   eval(e)                of an expression reading a traced value: a traced value, recorded
//   tape                   what one value_and_grad records; its parameters, found by address

#include <shaped/core/read_watch.hpp>
#include <shaped/nn/module.hpp>
#include <shaped/tensor.hpp>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <typeindex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace shaped::train {

class tape;

namespace detail {

// Where a gradient goes: its elements, and whether they are unfilled storage (nothing has added
// to the gradient yet), which the writer covers whole, writing rather than adding: a value's
// first gradient takes no zero-fill before it.
template <class T>
struct gradient_target {
    T* data = nullptr;
    bool unfilled = false;
};

// One value on a tape: its gradient, once anything adds to it, and how to hand it on.
struct recorded_base {
    virtual ~recorded_base() = default;
    // Adds the gradients of this value's operands, from this value's own.
    virtual void backward() = 0;
    // Called after backward(): the records that read this value came after it and have run, so
    // neither its value nor its gradient is read again. Freeing both as the backward goes keeps
    // its peak near the activations, not twice them.
    virtual void release() {}
};

// A recorded value's elements and its gradient's, whatever its dims: what a view of it reads
// and adds to.
template <class T>
struct recorded_elements : recorded_base {
    virtual const T* value_data() const = 0;
    // The gradient's elements, laid out as the value's: zeros until something adds to them.
    virtual T* gradient_data() = 0;
};

template <class T, Dim... Ds>
struct recorded_value : recorded_elements<T> {
    explicit recorded_value(Tensor<T, Ds...> v) : value(std::move(v)) {}
    void backward() override {}  // an input: its operands are none
    const T* value_data() const override { return value.data(); }
    T* gradient_data() override { return zeroed_gradient().data(); }
    void release() override {
        gradient.reset();
        [[maybe_unused]] const Tensor<T, Ds...> gone(std::move(value));  // leaves value's storage empty
    }

    // The gradient, allocated (zeros: a Tensor of a shape starts so) when first wanted.
    Tensor<T, Ds...>& zeroed_gradient() {
        if (!gradient) gradient.emplace(typename Tensor<T, Ds...>::shape_type(value.extents()));
        return *gradient;
    }
    // The gradient for a writer that covers every element of it: unfilled where none is yet.
    gradient_target<T> gradient_to_cover() {
        if (gradient) return {gradient->data(), false};
        gradient.emplace(Tensor<T, Ds...>::for_overwrite(value.extents()));
        return {gradient->data(), true};
    }

    Tensor<T, Ds...> value;
    // None until something adds to it (a value no loss term reads has none). Optional, not
    // empty: a Tensor of dynamic dims has no extents to be default-constructed with.
    std::optional<Tensor<T, Ds...>> gradient;
};

// The tape of this thread's value_and_grad, if one runs, and whether recording is paused (while
// the kernels evaluate a recorded expression, and while the backward runs).
inline thread_local tape* active_tape = nullptr;

// An expression that reads a Tensor held elsewhere (Derived::stored()), in place, as a View
// does: what a traced value and the leaves a record saves have in common.
template <class Derived, class T, Dim... Ds>
class reads_tensor : public expression_base {
public:
    using value_type = T;
    using dims_type = dims<Ds...>;
    static constexpr bool owns_storage = false;
    static constexpr std::size_t rank = sizeof...(Ds);

    const T* data() const { return stored().data(); }
    auto extents() const { return stored().extents(); }
    auto strides() const { return stored().strides(); }
    std::size_t size() const { return stored().size(); }
    static constexpr bool is_contiguous() { return true; }

private:
    const Tensor<T, Ds...>& stored() const { return static_cast<const Derived&>(*this).stored(); }
};

}  // namespace detail

template <class T, Dim... Ds>
class traced;

namespace detail {
template <class T, class List>
struct traced_for_impl;
template <class T, Dim... Ds>
struct traced_for_impl<T, dims<Ds...>> {
    using type = traced<T, Ds...>;
    using record = recorded_value<T, Ds...>;
};
// The traced value of elements T with the dims of List.
template <class T, class List>
using traced_for = typename traced_for_impl<T, List>::type;
}  // namespace detail

// A value being differentiated: the value, and its record. Copies share the record.
template <class T, Dim... Ds>
class traced : public detail::reads_tensor<traced<T, Ds...>, T, Ds...> {
public:
    using tensor_type = Tensor<T, Ds...>;

    explicit traced(std::shared_ptr<detail::recorded_value<T, Ds...>> record) : record_(std::move(record)) {}

    const tensor_type& value() const { return record_->value; }
    const tensor_type& stored() const { return record_->value; }
    template <class... I>
    T operator()(I... i) const { return value()(i...); }
    T item() const { return value().item(); }
    // The last two dims swapped, as Tensor::mT.
    auto mT() const { return shaped::mT(*this); }

    // Held anew: the value of e, recorded (a layer's `h = activation(h)` rebinds h, as Python
    // does; the value h held before stays on the tape, read by the new one).
    template <Expression E>
        requires std::is_same_v<detail::traced_for<value_type_of<E>, dims_of<E>>, traced>
    traced& operator=(const E& e) {
        traced next = eval(e);
        record_ = std::move(next.record_);
        return *this;
    }
    traced(const traced&) = default;
    traced(traced&&) = default;
    traced& operator=(const traced&) = default;
    traced& operator=(traced&&) = default;

    // A View of this value's elements (a slice, a split, view_of ...) as a view on the tape.
    template <class V>
    auto rebased(const V& view) const;

    // The gradient added so far (zeros if none).
    tensor_type gradient() const {
        if (record_->gradient) return *record_->gradient;
        tensor_type zeros{typename tensor_type::shape_type(this->extents())};
        zeros.fill(T(0));
        return zeros;
    }
    detail::recorded_value<T, Ds...>& record() const { return *record_; }
    const std::shared_ptr<detail::recorded_value<T, Ds...>>& handle() const { return record_; }

private:
    std::shared_ptr<detail::recorded_value<T, Ds...>> record_;
};

namespace detail {
// An expression that reads elements through a View it holds: what a view of a traced value and
// the views a record saves have in common.
template <class T, Dim... Ds>
class reads_view : public expression_base {
public:
    using value_type = T;
    using dims_type = dims<Ds...>;
    static constexpr bool owns_storage = false;
    static constexpr std::size_t rank = sizeof...(Ds);

    explicit reads_view(View<const T, Ds...> view) : view_(view) {}

    const T* data() const { return view_.data(); }
    const auto& extents() const { return view_.extents(); }
    const auto& strides() const { return view_.strides(); }
    std::size_t size() const { return view_.size(); }
    bool is_contiguous() const { return view_.is_contiguous(); }
    const View<const T, Ds...>& view() const { return view_; }

private:
    View<const T, Ds...> view_;
};
}  // namespace detail

// A view of a traced value's elements (a slice, a head of a fused projection): its gradient adds
// into the gradient of the value it views, at its own places.
template <class T, Dim... Ds>
class traced_view : public detail::reads_view<T, Ds...> {
public:
    traced_view(std::shared_ptr<detail::recorded_elements<T>> base, View<const T, Ds...> view)
        : detail::reads_view<T, Ds...>(view), base_(std::move(base)) {}

    template <class... I>
    T operator()(I... i) const { return this->view()(i...); }
    auto mT() const { return shaped::mT(*this); }

    const std::shared_ptr<detail::recorded_elements<T>>& base() const { return base_; }
    // Where the view starts among the viewed value's elements.
    std::ptrdiff_t offset() const { return this->data() - base_->value_data(); }

    template <class V>
    auto rebased(const V& view) const;

private:
    std::shared_ptr<detail::recorded_elements<T>> base_;
};

namespace detail {
// A View of a recorded value's elements, on the tape.
template <class T, class V>
auto view_on_tape(std::shared_ptr<recorded_elements<T>> base, const V& view) {
    return [&]<Dim... Es>(dims<Es...>) {
        return traced_view<T, Es...>(std::move(base), View<const T, Es...>(view.data(), view.extents(), view.strides()));
    }(dims_of<V>{});
}
}  // namespace detail

template <class T, Dim... Ds>
template <class V>
auto traced<T, Ds...>::rebased(const V& view) const {
    return detail::view_on_tape<T>(record_, view);
}
template <class T, Dim... Ds>
template <class V>
auto traced_view<T, Ds...>::rebased(const V& view) const {
    return detail::view_on_tape<T>(base_, view);
}

template <class E>
inline constexpr bool is_traced = false;
template <class T, Dim... Ds>
inline constexpr bool is_traced<traced<T, Ds...>> = true;
template <class E>
inline constexpr bool is_traced_view = false;
template <class T, Dim... Ds>
inline constexpr bool is_traced_view<traced_view<T, Ds...>> = true;

// What one value_and_grad records, in order, and the parameters whose gradients it wants.
class tape final : public shaped::detail::read_watch {
public:
    tape() : outer_(detail::active_tape), outer_watch_(shaped::detail::active_read_watch) {
        detail::active_tape = this;
        shaped::detail::active_read_watch = this;
    }
    // A tape that watches the parameters another watches, adding into the same gradients (what
    // a recomputed layer's backward records its forward on again).
    struct watching_as {
        const tape& other;
    };
    explicit tape(watching_as same) : tape() {
        parameters_ = same.other.parameters_;
        elements_ = same.other.elements_;
        allowed_ = same.other.allowed_;
    }
    ~tape() {
        detail::active_tape = outer_;
        shaped::detail::active_read_watch = outer_watch_;
    }
    tape(const tape&) = delete;
    tape& operator=(const tape&) = delete;

    static tape* active() { return detail::active_tape; }

    // The gradient of a parameter (slots of nn::parameter_list: of a model, and of its gradients'
    // storage), added to when the backward reaches it; the parameter's name says it in errors.
    void watch(const nn::const_parameter_slot& parameter, const nn::parameter_slot& gradient) {
        if (parameter.tensor_type != gradient.tensor_type)
            throw std::logic_error("shaped::train: the gradient watched for `" + std::string(parameter.name) +
                                   "` is not of its tensor type");
        parameters_.insert_or_assign(parameter.data, parameter_gradient{parameter.tensor_type, gradient.tensor});
        elements_.push_back({parameter.data, static_cast<const char*>(parameter.data) + parameter.size * parameter.element_bytes,
                             parameter.element_type, gradient.data, std::string(parameter.name)});
    }

    // A parameter whose elements the loss reads on purpose outside any recorded expression
    // (through train::value_of, for a function whose derivative it writes): not an error.
    void allow_plain_reads(const void* parameter_data) {
        for (const auto& p : elements_)
            if (p.begin == parameter_data) return allowed_.push_back(parameter_data);
    }

    // While recording, a plain evaluation must not read a parameter (core/read_watch.hpp).
    void check(const void* begin, const void* end) const override {
        if (paused_ || begin == end) return;
        for (const auto& p : elements_) {
            if (!(begin < p.end && p.begin < end)) continue;
            if (std::find(allowed_.begin(), allowed_.end(), p.begin) != allowed_.end()) continue;
            throw std::logic_error(
                "shaped::train: the parameter " + (p.name.empty() ? std::string("of the model") : "`" + p.name + "`") +
                " is read by an expression that reads no differentiated value, so nothing records it and its "
                "gradient would be lost; compute it in one eval with a differentiated value, or read the "
                "parameter as one: train::watched(parameter)");
        }
    }
    // The gradient a parameter has on this tape, or null where the tensor is not one.
    template <class T, Dim... Ds>
    Tensor<T, Ds...>* gradient_of(const Tensor<T, Ds...>& tensor) const {
        const auto found = parameters_.find(tensor.data());
        if (found == parameters_.end() || found->second.type != std::type_index(typeid(Tensor<T, Ds...>))) return nullptr;
        return static_cast<Tensor<T, Ds...>*>(found->second.gradient);
    }

    // The gradient element of a parameter's element, for an element of any watched parameter
    // (what a View of a parameter reads), or null.
    template <class T>
    T* gradient_at(const T* element) const {
        for (const auto& p : elements_)
            if (p.type == std::type_index(typeid(T)) && static_cast<const void*>(element) >= p.begin &&
                static_cast<const void*>(element) < p.end)
                return static_cast<T*>(p.gradient) + (element - static_cast<const T*>(p.begin));
        return nullptr;
    }

    // A value read from outside (an input of the loss): on the tape, with no operands. Integers
    // (ids, targets) are traced too, so that what is computed from them is recorded; nothing
    // flows back into them.
    template <class T, Dim... Ds>
    traced<T, Ds...> input(Tensor<T, Ds...> value) {
        auto record = std::make_shared<detail::recorded_value<T, Ds...>>(std::move(value));
        if constexpr (std::is_floating_point_v<T>) records_.push_back(record);
        return traced<T, Ds...>(std::move(record));
    }
    void push(std::shared_ptr<detail::recorded_base> record) { records_.push_back(std::move(record)); }

    // Whether eval() records now: not while the kernels evaluate a recorded expression's parts.
    bool recording() const { return !paused_; }

    // From the end of the tape back: each record hands its gradient to its operands.
    void backward() {
        const pause during(*this);
        for (auto at = records_.rbegin(); at != records_.rend(); ++at) {
            (*at)->backward();
            (*at)->release();
        }
    }

    // Pauses recording for its lifetime, and the watch on plain reads with it: what runs paused
    // (the kernels of a recorded expression, the backward) reads parameters by design, and its
    // evaluations then make no call to check.
    class pause {
    public:
        explicit pause(tape& t) : tape_(t), was_(t.paused_), watch_was_(shaped::detail::active_read_watch) {
            t.paused_ = true;
            shaped::detail::active_read_watch = nullptr;
        }
        ~pause() {
            tape_.paused_ = was_;
            shaped::detail::active_read_watch = watch_was_;
        }
        pause(const pause&) = delete;
        pause& operator=(const pause&) = delete;

    private:
        tape& tape_;
        bool was_;
        const shaped::detail::read_watch* watch_was_;
    };

private:
    struct parameter_gradient {
        std::type_index type;
        void* gradient;
    };
    // Where a parameter's elements lie, and its gradient's first element.
    struct parameter_elements {
        const void* begin;
        const void* end;
        std::type_index type;
        void* gradient;
        std::string name;
    };
    tape* outer_;
    const shaped::detail::read_watch* outer_watch_;
    std::vector<const void*> allowed_;
    bool paused_ = false;
    std::vector<std::shared_ptr<detail::recorded_base>> records_;
    std::unordered_map<const void*, parameter_gradient> parameters_;
    std::vector<parameter_elements> elements_;
};

}  // namespace shaped::train
